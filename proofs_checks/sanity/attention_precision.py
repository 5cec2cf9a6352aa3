"""``precision_as_declared``: the precision a module computes in is a property, not a tolerance.

The computation is judged at the precision the user declares (``--compute-dtype`` / ``compute_dtype=``)
or, undeclared, at the input's. A module whose error against the float64 reference misses that
precision's rule and fits a coarser one (verified as the hints are: every rerunnable property rerun
under it holds) fails this property, named with the precision that fits; declaring that precision is
how a module that up- or down-casts by design is checked. The probe never widens its tolerance to the
precision the module happens to have.
"""

from __future__ import annotations

__all__ = ["precision_property", "PRECISION_PROPERTY"]

PRECISION_PROPERTY = "precision_as_declared"


def precision_property(probe, props: list):
    """The ``precision_as_declared`` property of a run whose hints have been verified (``probe.fits_precision``:
    the coarser precision a verified hint found, or None), or None when ``matches_reference`` did not run."""
    from numerics import attention_probe as ap

    m = next((p for p in props if p.name == "matches_reference"), None)
    if m is None or m.status == "skip" or probe.precision is None:
        return None
    p = probe.precision
    fits = getattr(probe, "fits_precision", None)
    if m.status == "pass":
        return ap.Property(PRECISION_PROPERTY, "pass", m.error, m.tolerance, m.justification,
                           f"the module meets the {p.name} rule at every probed length and logit scale: it computes "
                           f"in {p.name} or finer ({p.how})", {"declared": p.name}, True)
    if fits is None:
        return None  # the mismatch is not (only) the precision: matches_reference says it
    dn = ap.dtype_name(fits)
    with_ = getattr(probe, "fits_precision_with", None)
    if with_:  # found with a change of declaration (GPT-Neo: --scale 1), which matches_reference needs too
        err = getattr(probe, "fits_precision_err", m.error)
        return ap.Property(PRECISION_PROPERTY, "fail", err, m.tolerance, m.justification,
                           f"the module computes in {dn}, below {p.name} ({p.how}): with {with_} (the verified hint) "
                           f"it still misses the {p.name} rule at the screened lengths and fits a {dn} computation at "
                           f"every probed length (verified: rerun with {with_} under --compute-dtype {dn}, every "
                           f"rerunnable property holds); if intended, declare --compute-dtype {dn}",
                           {"declared": p.name, "fits": dn, "with": with_}, True)
    return ap.Property(PRECISION_PROPERTY, "fail", m.error, m.tolerance, m.justification,
                       f"the module computes in {dn}, below {p.name} ({p.how}): its error {m.error:.3g} misses the "
                       f"{p.name} rule ({m.tolerance:.3g}) and fits a {dn} computation at every probed length "
                       f"(verified: rerun under --compute-dtype {dn}, every rerunnable property holds); if intended, "
                       f"declare --compute-dtype {dn}", {"declared": p.name, "fits": dn}, True)
