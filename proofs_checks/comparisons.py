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


def z_test(measurements: dict[str, tuple[float, float, float]], *, k: float = K_SIGMA, what: str = "",
           **kw) -> CheckResult:
    """Monte Carlo (or across-seed) estimates against closed forms: ``measurements`` maps a label to
    ``(estimate, standard error, form's value)``; error = the largest ``|estimate − form| / SE``,
    tolerance ``k`` (default :data:`K_SIGMA`). A zero or non-finite SE fails (no power, no pass).
    The details hold every label's estimate, SE, form value and z.

    >>> r = z_test({"N=2": (1.01, 0.01, 1.0), "N=5": (2.0, 0.01, 2.02)})
    >>> round(r.error, 9), r.passed
    (2.0, True)
    """
    zs, rows = {}, {}
    for label, (est, se, val) in measurements.items():
        est, se, val = float(est), float(se), float(val)
        zs[label] = abs(est - val) / se if se > 0 and math.isfinite(se) else math.inf
        rows[label] = {"estimate": est, "standard_error": se, "form": val, "z": zs[label]}
    details = dict(kw.pop("details", {}) or {})
    details.update(measurements=rows)
    return compare(zs, k, f"{k:g} standard errors of the estimate{(' of ' + what) if what else ''} (z-score)",
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
