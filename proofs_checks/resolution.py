"""The evidence the power and own-mutant rules accept (see :mod:`proofs_checks.power` and
:func:`proofs_checks.runner.run_claim`): a small pure function over a check outcome (an object with
``name``, ``layer``, ``status`` and a :class:`~proofs_checks.registry.CheckResult` ``result``)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ROUNDING_FLOOR", "finite_rejection"]

#: relative resolutions below this are float64-rounding level (see :mod:`proofs_checks.continuous`)
ROUNDING_FLOOR = 1e-10


def finite_rejection(o: Any) -> bool:
    """Whether a check's failure on a mutant is evidence for the own-mutant rule: a failure of any layer's check
    whose error is finite and above a finite tolerance. A NaN or infinite error (a mutant whose outputs are NaN,
    infinite or missing) fails every check whatever its tolerance, so it proves nothing about the check's power — a
    symbolic check's included (``matches_derivation`` on a NaN mutant passed the rule: hostile pass 33b F2)."""
    if o.status != "failed" or o.result is None:
        return False
    e, t = o.result.error, o.result.tolerance
    return math.isfinite(e) and math.isfinite(t) and e > t
