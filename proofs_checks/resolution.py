"""A claim's resolution in words and the evidence the own-mutant rule accepts (see
:func:`proofs_checks.runner.run_claim`): small pure functions over check outcomes (objects with
``name``, ``layer``, ``status`` and a :class:`~proofs_checks.registry.CheckResult` ``result``)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ROUNDING_FLOOR", "finite_rejection", "best_relative_resolution", "resolution_words"]

#: relative resolutions below this are float64-rounding level (see :mod:`proofs_checks.continuous`)
ROUNDING_FLOOR = 1e-10


def finite_rejection(o: Any) -> bool:
    """Whether a check's failure on a mutant is evidence for the own-mutant rule: a symbolic check's
    failure, or a numeric / trained one whose error is finite and above a finite tolerance. A NaN or
    infinite error (a mutant whose outputs are NaN) fails every check whatever its tolerance, so it
    proves nothing about the check's power."""
    if o.status != "failed" or o.result is None:
        return False
    if o.layer == "symbolic":
        return True
    e, t = o.result.error, o.result.tolerance
    return math.isfinite(e) and math.isfinite(t) and e > t


def best_relative_resolution(outcomes: list[Any]) -> tuple[float, str] | None:
    """The smallest stated relative resolution of a passed numeric or trained check (None: none states one)."""
    rel = [(o.result.resolution, o.name) for o in outcomes
           if o.status == "passed" and o.result is not None and o.layer != "symbolic"
           and not math.isnan(o.result.resolution) and o.result.resolution > 0  # inf: resolves nothing
           and str(o.result.resolution_units or "").startswith("relative")]
    return min(rel) if rel else None


def resolution_words(outcomes: list[Any]) -> str:
    """The claim's resolution in a few words: the smallest relative resolution of a passed numeric or
    trained check (what ``tverify mutants --continuous`` confirms), else the best of any check."""
    rel, other = [], []
    for o in outcomes:
        r = o.result
        if o.status != "passed" or r is None or not math.isfinite(r.resolution):
            continue
        units = str(r.resolution_units or "")
        if units.startswith("relative") and o.layer != "symbolic" and r.resolution > 0:
            rel.append((r.resolution, o.name))
        elif units.startswith("exact"):
            other.append((0.0, o.name, "exact"))
    if rel:  # as tverify mutants --continuous picks: the smallest above float64 rounding, if any
        eps, name = min([r for r in rel if r[0] >= ROUNDING_FLOOR] or rel)
        return f"resolution ε ≈ {eps:.2g} relative ({name})"
    if other:
        return f"resolution: exact ({other[0][1]})"
    return "no numeric or trained check states a relative resolution"
