"""Helpers shared by the Hopfield claim modules (``hopfield``, ``hopfield_modern``): the z-score of
a Monte Carlo threshold check. A module whose name starts with ``_`` registers nothing."""

from __future__ import annotations

import math

from proofs_checks.comparisons import largest

Z_TOL = 3.0
Z_JUST = ("no measured point more than 3 standard errors (spread of per-trial fractions over the trials) on the "
          "wrong side of its threshold")


def _z(value: float, se: float, thr: float, side: str, n: int) -> float:
    """Signed z-score of a violation: ``side="ge"`` wants ``value ≥ thr``, ``"le"`` wants ``value ≤ thr``."""
    se = largest(se, 1.0 / n) if not math.isnan(se) else 1.0 / n
    viol = (thr - value) if side == "ge" else (value - thr)
    return viol / se


def _half_crossing(grid, frac):
    """N where the fixed fraction crosses 1/2 (log-linear interpolation on the grid); NaN if not bracketed."""
    for (n0, f0), (n1, f1) in zip(zip(grid, frac), zip(grid[1:], frac[1:])):
        if f0 >= 0.5 > f1:
            t = (f0 - 0.5) / (f0 - f1)
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return math.nan
