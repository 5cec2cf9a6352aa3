"""Tolerance rules shared by the claim modules, so that each is stated (and justified) once.

EPS       float64 machine epsilon; rounding tolerances are written as ``c · size · EPS``.
K_SIGMA   Monte Carlo comparisons pass within this many standard errors (5: a false alarm has
          probability < 6e-7 per normal statistic, small enough for a few hundred per run).
"""

from __future__ import annotations

import numpy as np

__all__ = ["EPS", "K_SIGMA", "max_rel_error"]

EPS = float(np.finfo(np.float64).eps)
K_SIGMA = 5.0


def max_rel_error(a, b) -> float:
    """Largest entrywise difference relative to ``max(1, max|b|)`` (absolute for small ``b``).

    >>> max_rel_error([1.0, 2.0], [1.0, 2.0])
    0.0
    >>> max_rel_error([0.0, 11.0], [0.0, 10.0])
    0.1
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
