"""The run-to-run noise of a user's attention module, and the tolerances of the exact invariances it sets.

A correct module moves an output a masked token cannot reach by exactly nothing; a module that is not deterministic
(two calls on one identical input differ) carries noise that no comparison of it with itself can tell from a leak
below it. This module keeps what the properties measured of that noise on the probe (:func:`mark_noisy`), the
tolerance of an exact invariance given it (:func:`structural_tolerance`, :func:`noise_floor`), and ``deterministic``
judged again over every run-to-run difference measured (:func:`late_deterministic`).

This module imports torch's rules only (through :mod:`numerics.attention_rules`), no ``proofs_checks``.
"""

from __future__ import annotations

from typing import Any

from numerics.attention_rules import _judge

__all__ = ["mark_noisy", "is_noisy", "deterministic_tolerance", "noise_floor", "structural_tolerance",
           "late_deterministic", "NOISE_MARGIN"]


def mark_noisy(probe: Any, difference: float, T: int | None = None) -> None:
    """Note that the module is not deterministic when two calls on one input differed (``difference`` > 0), on the
    probe itself (a path's view shares it), with the largest such difference seen: every structural tolerance after it
    then has the noise floor (:func:`noise_floor`); and, with the length ``T`` of those calls, the difference furthest
    beyond what ``deterministic`` accepts there (:func:`late_deterministic`)."""
    if difference > 0:  # (a NaN is not noise: the finite-output properties judge it)
        held = getattr(probe, "_probe", probe).__dict__
        held["noisy"] = True
        held["noise_seen"] = max(held.get("noise_seen", 0.0), float(difference))
        if T is not None:
            accepted = deterministic_tolerance(probe, T)
            worst = held.get("noise_worst")
            if worst is None or difference / accepted > worst[0] / worst[2]:
                held["noise_worst"] = (float(difference), int(T), accepted)


def deterministic_tolerance(probe: Any, T: int) -> float:
    """What ``deterministic`` accepts between two calls on one input at length ``T``: ``16·u·(3D+T)`` in the probe's
    dtype (a reordered sum repeats itself within rounding)."""
    from numerics.attention_rules import unit_roundoff

    return 16 * unit_roundoff(probe.pdt) * (3 * probe.D + T)


def late_deterministic(probe: Any, props: list) -> None:
    """``deterministic`` in ``props`` judged again once every property ran: where it passed, it fails if a run-to-run
    difference (two calls on one identical input) that any property measured is beyond :func:`deterministic_tolerance`
    at its length (the furthest beyond is shown). The row taken at one length passed a module whose calls differ at
    another only, and that noise then widened the structural tolerances there past a leak (hostile pass 34b F3)."""
    worst = getattr(probe, "__dict__", {}).get("noise_worst")
    if worst is None or worst[0] <= worst[2]:
        return
    e, T, tol = worst
    late = _judge("deterministic", e, tol, f"16·u·(3D+T) = {tol:.3g}: a deterministic computation repeats itself (a "
                  "reordered GPU sum within rounding)", f"two calls on the same input at T = {T} (made by another "
                  f"property) differ by {e:.3g} (relative)", central=True)
    props[:] = [late if p.name == late.name and p.status == "pass" else p for p in props]


def is_noisy(probe: Any) -> bool:
    """Whether two calls on one input have differed anywhere in this check (:func:`mark_noisy`)."""
    return bool(getattr(getattr(probe, "_probe", probe), "__dict__", {}).get("noisy"))


def structural_tolerance(jit: float, what: str, floor: float = 0.0, noisy: bool = False) -> tuple[float, str]:
    """``(tolerance, justification)`` of an exact invariance: ``2 × jit`` — and for a module that is not deterministic
    (``jit > 0`` here, or ``noisy``: two calls on one input differed anywhere in the check) at least ``2 × floor``, the
    run-to-run difference ``deterministic`` accepts (:func:`noise_floor`): one sampled difference is not a bound on the
    noise, and a module whose outputs carry noise of 1e-14 was called leaking by it (hostile pass 23b F3), or one whose
    noise hits one entry on some calls only, sampled as 0 at this probe (24b F1); a leak below that noise cannot be told
    from it."""
    tol = 0.0 if jit == 0 and not noisy else 2.0 * max(jit, floor)
    how = ("the module is deterministic here (two calls on the identical input agree bit for bit), so the "
           "tolerance is 0" if tol == 0 else
           f"2 × the module's run-to-run difference on the identical input ({jit:.3g}; the module was seen "
           f"nondeterministic{' here' if jit else ' elsewhere in this check'}), at least 2 × its noise floor "
           f"({floor:.3g}: the least of the difference the deterministic property accepts and {NOISE_MARGIN:g} × the "
           f"largest run-to-run difference seen in this check, at least 4 unit roundoffs) = {tol:.3g}: a leak below "
           "the module's own noise cannot be told from it")
    return tol, (f"exact: {what} moves no output of a correct module, in any precision (a masked weight is an exact "
                 f"0); {how}; relative to max|output|")


#: a leak is told from a nondeterministic module's noise by this factor over the largest run-to-run difference seen in
#: the check: a sampled difference is not a bound on the noise (two calls compared at one probe may differ less than
#: two calls at another), and the structural comparisons are single samples of it too
NOISE_MARGIN = 4.0


def noise_floor(probe: Any, T: int) -> float:
    """The least run-to-run difference a structural tolerance of a nondeterministic module allows at length ``T``: the
    difference ``deterministic`` accepts, ``16·u·(3D+T)`` in the probe's dtype, or, where less, :data:`NOISE_MARGIN` ×
    the largest run-to-run difference seen in this check (:func:`mark_noisy`), never below ``4u`` (an ulp's move of one
    entry, the least noise there is, is at most ``2u`` of the largest output). The first alone grows with ``D``: a leak
    of 1e-3, 44 times a D = 512 module's own noise, passed within it (hostile pass 34b F2)."""
    from numerics.attention_rules import unit_roundoff

    u = unit_roundoff(probe.pdt)
    accepted = deterministic_tolerance(probe, T)
    seen = getattr(getattr(probe, "_probe", probe), "__dict__", {}).get("noise_seen", 0.0)
    return min(accepted, max(NOISE_MARGIN * seen, 4 * u)) if seen > 0 else accepted
