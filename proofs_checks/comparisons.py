"""The comparison kinds the claim modules repeat, stated once, and NaN-safe reductions.

A check is a *reference* (form-independent: a derived expression, a Monte Carlo sample, a trained
model, a solver's output; computed once per seed and size through ``ctx.reference``) plus a cheap
*comparison* of a form with it. The comparisons are:

* :func:`exact`: integers / counts / booleans that must agree exactly (tolerance 0, margin ``inf``
  on a mismatch);
* :func:`rounding`: two float64 computations of the same quantity, tolerance ``c · n · eps · scale``
  (rounding scaled by the size of the computation);
* :func:`z_test`: a Monte Carlo estimate against a closed form, ``|estimate − reference| / SE``
  within ``K_SIGMA`` standard errors;
* :func:`seed_spread`: per-seed estimates (trained models), the mean against the reference in units
  of the seeds' own standard error, within ``K_SIGMA``.

Every reduction of several errors goes through :func:`proofs_checks.registry.worst` or
:func:`largest` / :func:`smallest`: unlike Python's ``max``/``min`` they propagate NaN (``max(1.0,
nan) == 1.0`` would let a NaN pass). ``tests/test_registry.py`` forbids bare ``max``/``min`` in the
claim modules.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np

from proofs_checks.registry import CheckResult, compare, worst
from proofs_checks.tolerances import EPS, K_SIGMA

__all__ = ["largest", "smallest", "exact", "rounding", "z_test", "seed_spread", "worst"]


def _isnan(v: Any) -> bool:
    if isinstance(v, float):
        return v != v
    if isinstance(v, (int, str)) or v is None:
        return False
    try:
        return bool(np.isnan(float(v)))
    except (TypeError, ValueError):
        return False


def _reduce(pick: Callable, args: tuple, key: Callable | None) -> Any:
    items = list(args[0]) if len(args) == 1 else list(args)
    if not items:
        raise ValueError("largest()/smallest() of nothing")
    vals = [key(x) if key is not None else x for x in items]
    for item, v in zip(items, vals):
        if _isnan(v):
            return item if key is not None else math.nan
    return pick(items, key=key) if key is not None else pick(items)


def largest(*args: Any, key: Callable | None = None) -> Any:
    """``max`` that propagates NaN: the largest of the arguments (or of one iterable); NaN if any
    value (or key value) is NaN, so a NaN error can never be hidden by a finite one.

    >>> largest(1.0, 3.0), largest([2, 5, 1])
    (3.0, 5)
    >>> largest(1.0, float("nan"))
    nan
    """
    return _reduce(max, args, key)


def smallest(*args: Any, key: Callable | None = None) -> Any:
    """``min`` that propagates NaN (see :func:`largest`).

    >>> smallest(1.0, 3.0), smallest(float("nan"), 0.0)
    (1.0, nan)
    """
    return _reduce(min, args, key)


def exact(mismatches: dict[str, float] | float, what: str, **kw) -> CheckResult:
    """Counts, shapes, integers or booleans that must agree exactly: error = number (or size) of
    mismatches, tolerance 0.

    >>> exact({"count": 0.0, "rank": 0.0}, "exact integer counts").passed
    True
    >>> exact({"count": 2.0}, "exact integer counts").ratio
    inf
    """
    return compare(mismatches, 0.0, f"exact: {what}", **kw)


def rounding(errors: dict[str, float] | float, n: float, *, scale: float = 1.0, c: float = 64.0, what: str = "",
             **kw) -> CheckResult:
    """Two float64 computations of one quantity: tolerance ``c · n · eps · max(1, scale)``, the
    rounding of ``n`` accumulated operations at magnitude ``scale``.

    >>> rounding(1e-15, 10).passed, rounding(1e-9, 10).passed
    (True, False)
    """
    tol = c * n * EPS * (scale if scale > 1.0 else 1.0)
    just = f"float64 rounding of {what or f'~{n:g} operations'} ({c:g}·n·eps·max(1, scale), n={n:g}, scale={scale:.3g})"
    return compare(errors, tol, just, **kw)


def z_test(estimate: Any, reference: Any, se: Any, *, k: float = K_SIGMA, what: str = "", **kw) -> CheckResult:
    """Monte Carlo estimates against closed forms: error = max |estimate − reference| / SE,
    tolerance ``k`` (default :data:`K_SIGMA`). Entries are compared elementwise; a zero or
    non-finite standard error fails (no power, no pass).

    >>> round(z_test([1.01, 2.0], [1.0, 2.02], [0.01, 0.01]).error, 9)
    2.0
    """
    est, ref, s = (np.asarray(x, dtype=float) for x in (estimate, reference, se))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(est - ref) / s
    z = np.where(s > 0, z, np.inf)
    details = dict(kw.pop("details", {}) or {})
    details.update(estimate=est.tolist(), reference=ref.tolist(), standard_error=s.tolist())
    return compare({"z": worst([z])}, k, f"{k:g} standard errors of the Monte Carlo estimate{(' of ' + what) if what else ''}",
                   details=details, **kw)


def seed_spread(per_seed: Iterable[Any], reference: Any, *, k: float = K_SIGMA, floor: float = 0.0, what: str = "",
                **kw) -> CheckResult:
    """Per-seed measurements (trained models): the mean over seeds against the reference, in units
    of the seeds' standard error ``std/√S`` (at least ``floor``, a stated resolution such as the
    optimiser's convergence tolerance, so that identical seeds do not give SE 0); tolerance ``k``.

    >>> seed_spread([[1.0], [1.02], [0.98]], [1.0], floor=1e-3).passed
    True
    """
    x = np.asarray(list(per_seed), dtype=float)
    ref = np.asarray(reference, dtype=float)
    S = x.shape[0]
    if S < 2:
        raise ValueError("seed_spread needs at least two seeds")
    mean = x.mean(axis=0)
    se = np.maximum(x.std(axis=0, ddof=1) / math.sqrt(S), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(mean - ref) / se, np.where(mean == ref, 0.0, np.inf))
    details = dict(kw.pop("details", {}) or {})
    details.update(seeds=S, mean=np.ravel(mean).tolist()[:50], standard_error=np.ravel(se).tolist()[:50])
    return compare({"z": worst([z])}, k, f"{k:g} standard errors of the mean over {S} seeds"
                   f"{(' of ' + what) if what else ''} (SE = std/√S, at least {floor:g})", details=details, **kw)
