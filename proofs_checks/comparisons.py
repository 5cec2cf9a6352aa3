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
  of the seeds' own standard error, within ``K_SIGMA``;
* :func:`relative`: two arrays, ``max|value − ref| / max|ref|`` within a stated tolerance.

Each kind derives its *resolution*: the smallest relative change ``ε`` of the reference (all of it
scaled by ``1 + ε``) that the comparison is guaranteed to reject, from its error, tolerance and
the reference's scale (triangle inequality), and :func:`confirm_resolution` re-runs the comparison
against the reference scaled by ``1 ± 2ε`` (must be rejected) and, where the error leaves room,
``1 ± ε/2`` (accepted); the outcome is in ``details["resolution_confirmed"]``.

Every reduction of several errors goes through :func:`proofs_checks.registry.worst` or
:func:`largest` / :func:`smallest`: unlike Python's ``max``/``min`` they propagate NaN (``max(1.0,
nan) == 1.0`` would let a NaN pass). ``tests/test_registry.py`` forbids bare ``max``/``min`` in the
claim modules.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np

from proofs_checks.registry import CheckResult, VacuousCheck, compare, negative_tolerance, refuse_text, worst
from proofs_checks.tolerances import EPS, K_SIGMA

__all__ = ["largest", "smallest", "exact", "rounding", "z_test", "seed_spread", "relative", "confirm_resolution",
           "false_failure_probability", "REL_UNITS", "worst", "close"]

#: the units of the comparison kinds' resolution
REL_UNITS = "relative change of the reference"


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


def false_failure_probability(k: float, entries: int, dof: int | None = None) -> dict[str, Any]:
    """The probability that a correct form fails a ``|estimate − value| / SE ≤ k`` test on a fresh draw
    (another ``--seed``): per entry two-sided ``P(|Z| > k)`` for a Monte Carlo mean (normal by the CLT,
    SE from the same sample), or ``P(|T| > k)`` with ``dof`` degrees of freedom for a mean over
    ``dof + 1`` seeds (Student t: the seeds' spread is estimated from themselves; a floor on the SE
    only lowers it); union bound over the entries. The draws of one run are fixed by its seed, so a
    given run passes or fails for everyone; this is the rate over seeds.

    >>> round(false_failure_probability(5.0, 1)["per_entry"], 9)
    5.73e-07
    >>> false_failure_probability(6.0, 2, dof=15)["union_bound"] < 1e-4
    True
    """
    if dof is None:
        per, model = math.erfc(k / math.sqrt(2.0)), "normal (CLT), two-sided"
    else:
        from scipy.stats import t as student_t

        per, model = float(2.0 * student_t.sf(k, dof)), f"Student t with {dof} degrees of freedom, two-sided"
    return {"per_entry": per, "entries": int(entries), "union_bound": float(min(1.0, entries * per)),
            "k": float(k), "model": model + ", union bound over the entries"}


def exact(mismatches: dict[str, float] | float, what: str, **kw) -> CheckResult:
    """Counts, shapes, integers or booleans that must agree exactly: error = number (or size) of
    mismatches, tolerance 0. A signed difference is taken by its size (``exact(form - 3, …)`` passed
    every form below 3: a one-sided check where an exact one was written).

    >>> exact({"count": 0.0, "rank": 0.0}, "exact integer counts").passed
    True
    >>> exact({"count": 2.0}, "exact integer counts").ratio
    inf
    >>> exact(1.5 - 3.0, "a signed difference").passed
    False
    """
    refuse_text(mismatches, "exact")
    mismatches = ({k: abs(float(v)) for k, v in mismatches.items()} if isinstance(mismatches, dict)
                  else abs(float(mismatches)))
    return _both(compare(mismatches, 0.0, f"exact: {what}", resolution=0.0,
                         resolution_units="exact: any change of a compared integer, boolean or expression is rejected",
                         **kw))


def rounding(errors: dict[str, float] | float, n: float, *, scale: float = 1.0, c: float = 64.0, what: str = "",
             **kw) -> CheckResult:
    """Two float64 computations of one quantity: tolerance ``c · n · eps · max(1, scale)``, the
    rounding of ``n`` accumulated operations at magnitude ``scale``; each error (a signed difference) is judged by
    its size.

    >>> rounding(1e-15, 10).passed, rounding(1e-9, 10).passed
    (True, False)
    """
    if not (math.isfinite(float(n)) and math.isfinite(float(c))):
        raise VacuousCheck(f"rounding: n = {float(n):g}, c = {float(c):g}: a tolerance needs a finite operation count")
    if n < 0 or c < 0:  # not vacuous: a negative tolerance rejects everything (it was said to reject nothing: 56b F1)
        negative_tolerance("rounding", f"{'n' if n < 0 else 'c'} = {float(n if n < 0 else c):g}", "≥ 0")
    if not (math.isfinite(float(scale)) and scale >= 0):  # a NaN scale read as 1 (NaN > 1 is false), a negative one as 1
        raise VacuousCheck(f"rounding: scale = {float(scale):g}: the magnitude the rounding is scaled by must be finite "
                           "and ≥ 0 (a size, as max|value| is)")
    if c * n * EPS >= 1.0:  # the rounding bound allows every digit to be wrong: it cannot tell a value from 0 or from 2x
        raise VacuousCheck(f"rounding: c·n·eps = {c * n * EPS:.3g} ≥ 1 (n = {float(n):g}): a relative tolerance ≥ 1 "
                           "resolves nothing")
    tol = c * n * EPS * (scale if scale > 1.0 else 1.0)
    just = f"float64 rounding of {what or f'~{n:g} operations'} ({c:g}·n·eps·max(1, scale), n={n:g}, scale={scale:.3g})"
    # two computations of one quantity differ by a signed amount: judged by its size (a difference of -1e300 passed
    # as "within" 1e-13, and the largest signed entry hid a negative one: hostile pass 21b F4)
    size = (lambda v: v if isinstance(v, (str, bytes)) else abs(v))
    errors = {k: size(v) for k, v in errors.items()} if isinstance(errors, dict) else size(errors)
    r = _both(compare(errors, tol, just, **kw))
    if scale > 0 and math.isfinite(r.error):  # a relative change ε moves a value of size `scale` by ε·scale
        r.resolution, r.resolution_units = (tol + abs(r.error)) / scale, REL_UNITS
    return r


#: draws a Monte Carlo mean is taken to average when ``z_test`` is not told (its rounding floor: ``n·ε`` relative)
DEFAULT_DRAWS = 10**6


def z_test(measurements: dict[str, tuple[float, float, float]], *, k: float = K_SIGMA, what: str = "",
           justification: str | None = None, resolution_from: Iterable[str] | None = None,
           dof: "int | dict[str, int] | None" = None, draws: "int | dict[str, int] | None" = None,
           **kw) -> CheckResult:
    """Monte Carlo (or across-seed) estimates against closed forms: ``measurements`` maps a label to
    ``(estimate, standard error, form's value)``; error = the largest ``(|estimate − form| − r) / SE``, with ``r =
    n·ε·max(|estimate|, |form|)`` the float64 rounding of a mean of ``n`` draws (``draws``, one number or per label;
    :data:`DEFAULT_DRAWS` when not given): draws equal to the form up to rounding are not a difference (hostile pass
    60b F2). Tolerance ``k`` (default :data:`K_SIGMA`). A zero or non-finite SE fails (no power, no pass).
    The details hold every label's estimate, SE, form value and z. ``justification`` replaces the
    default text (a check whose SE rule needs stating); ``resolution_from`` restricts the resolution
    to those labels (e.g. leaving out a degenerate entry whose SE is only a rounding floor). ``dof``
    (one number, or per label) gives the degrees of freedom of an SE estimated from few batches or
    seeds, for the stated false-failure probability (Student t instead of normal).

    >>> r = z_test({"N=2": (1.01, 0.01, 1.0), "N=5": (2.0, 0.01, 2.02)})
    >>> round(r.error, 6), r.passed
    (2.0, True)
    """
    refuse_text(measurements, "z_test")
    if not measurements:
        raise VacuousCheck("z_test: no measurements (a comparison over 0 draws)")
    if not math.isfinite(float(k)):
        raise VacuousCheck(f"z_test: k = {float(k):g} standard errors: a tolerance must be finite and positive")
    if k <= 0:
        negative_tolerance("z_test", f"k = {float(k):g} standard errors", "positive")
    _z_test_options(measurements, resolution_from, dof)
    _z_test_options(measurements, None, draws, "draws")
    zs, rows = {}, {}
    for label, (est, se, val) in measurements.items():
        est, se, val = float(est), float(se), float(val)
        n = (draws.get(label) if isinstance(draws, dict) else draws) or DEFAULT_DRAWS
        r = n * EPS * max(abs(est), abs(val))  # the mean's rounding: n additions, each within ε of the running sum
        d = max(0.0, abs(est - val) - r) if math.isfinite(r) else abs(est - val)
        zs[label] = d / se if se > 0 and math.isfinite(se) else math.inf
        rows[label] = {"estimate": est, "standard_error": se, "form": val, "z": zs[label], "rounding": r, "draws": n}
    details = dict(kw.pop("details", {}) or {})
    details.update(measurements=rows)
    use = [measurements[lab] for lab in (measurements if resolution_from is None else resolution_from)]
    est = np.array([float(m[0]) for m in use])
    se = np.array([float(m[1]) for m in use])
    val = np.array([float(m[2]) for m in use])
    eps, conf = _spread_resolution(est, se, val, k)
    details.update(resolution_confirmed=conf, false_failure_probability=_ffp_entries(k, list(rows), dof))
    just = justification or (f"{k:g} standard errors of the estimate{(' of ' + what) if what else ''} (z-score), beyond "
                             "the float64 rounding of a mean of n draws (n·ε·max(|estimate|, |form|), n = "
                             + (f"{draws:,}" if isinstance(draws, int) else "given per label" if draws else
                                f"{DEFAULT_DRAWS:,}, the default") + ")")
    return _both(compare(zs, k, just, details=details, resolution=eps, resolution_units=REL_UNITS, **kw))


def _z_test_options(measurements: dict, resolution_from, dof, name: str = "dof") -> None:
    """``resolution_from`` names measured labels and ``dof`` is a whole number ≥ 1 (one, or one per label): one line
    each, not a raw ``KeyError``/``AttributeError`` from inside (hostile pass 33b, a note)."""
    if resolution_from is not None:
        unknown = [lab for lab in resolution_from if lab not in measurements]
        if unknown or not list(resolution_from):
            raise ValueError(f"z_test: resolution_from names {', '.join(map(repr, unknown)) or 'no label'}, not one "
                             f"of the measurements' labels ({', '.join(map(repr, measurements))})")

    def whole(v) -> bool:
        return v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1)

    if not (whole(dof) if not isinstance(dof, dict) else all(whole(v) for v in dof.values())):
        what = "degrees of freedom are" if name == "dof" else "the draws behind an estimate are"
        raise ValueError(f"z_test: {name} = {dof!r}: {what} a whole number >= 1 (one, or a dict of one per label)")


def _ffp_entries(k: float, labels: list[str], dof: "int | dict[str, int] | None") -> dict[str, Any]:
    """:func:`false_failure_probability` summed over entries that may differ in degrees of freedom."""
    if dof is None or isinstance(dof, int):
        return false_failure_probability(k, len(labels), dof)
    groups: dict[Any, int] = {}
    for lab in labels:
        groups[dof.get(lab)] = groups.get(dof.get(lab), 0) + 1
    parts = [false_failure_probability(k, n, g) for g, n in groups.items()]
    total = sum(p["per_entry"] * p["entries"] for p in parts)
    return {"per_entry": max(p["per_entry"] for p in parts), "entries": len(labels), "union_bound": float(min(1.0, total)),
            "k": float(k), "model": "; ".join(f"{p['entries']} entries: {p['model'].split(',')[0]}" for p in parts)
            + ", two-sided, union bound over the entries"}


def _spread_resolution(est, se, ref, k: float) -> tuple[float, dict]:
    """Resolution of ``max_i |est_i − ref_i| / se_i ≤ k`` against ``ref·(1+δ)``: entry ``i`` rejects
    every ``|δ| > (k·se_i + |est_i − ref_i|) / |ref_i|``, so ``ε`` is the smallest of these over
    the entries with ``ref_i ≠ 0``; confirmed by re-running the test at ``δ = ±2ε, ±ε/2``."""
    est, se, ref = (np.ravel(np.asarray(a, dtype=float)) for a in (est, se, ref))
    se = np.broadcast_to(se, est.shape)
    ok = (ref != 0) & np.isfinite(se) & (se > 0)
    if not ok.any() or not np.all(np.isfinite(est)):
        return math.nan, {}
    eps = float(np.min((k * se[ok] + np.abs(est[ok] - ref[ok])) / np.abs(ref[ok])))

    def err(delta):
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.max(np.where(se > 0, np.abs(est - ref * (1 + delta)) / se, np.inf)))

    return eps, confirm_resolution(err, k, eps)


def confirm_resolution(err: Callable[[float], float], tol: float, eps: float) -> dict:
    """Re-run a comparison (``err(δ)``: its error against the reference scaled by ``1 + δ``) at
    ``δ = ±2ε`` (each must be rejected: ``err > tol``) and ``±ε/2`` (accepted where the error at
    ``δ = 0`` leaves room: ``err ≤ tol``; ``None`` when it is not accepted, which the resolution does
    not claim). ``rejects_2eps`` is the check on the stated resolution.

    >>> confirm_resolution(lambda d: abs(d) / 0.1, 1.0, 0.1)["rejects_2eps"]
    True
    """
    if not (math.isfinite(eps) and eps > 0):
        return {"eps": eps, "rejects_2eps": None, "accepts_half_eps": None}
    rej = [err(s * 2 * eps) > tol for s in (1, -1)]
    acc = [err(s * eps / 2) <= tol for s in (1, -1)]
    return {"eps": eps, "rejects_2eps": bool(all(rej)), "accepts_half_eps": True if all(acc) else None}


def relative(value: Any, reference: Any, tol: float, justification: str, **kw) -> CheckResult:
    """Two arrays of one quantity: error ``max|value − ref| / max|ref|``, tolerance ``tol`` (whose
    reason the caller states). Resolution ``ε = (tol + error)/(1 − tol − error)`` relative (scaling the
    reference by ``1 + δ`` gives an error ≥ ``(|δ| − error)/(1 + δ)``), confirmed at ``±2ε, ±ε/2``.

    >>> r = relative([1.0, 2.0 + 1e-12], [1.0, 2.0], 1e-10, "rounding"); r.passed, r.resolution < 2e-10
    (True, True)
    """
    refuse_text([value, reference, tol], "relative")
    v, ref = np.asarray(value, dtype=float), np.asarray(reference, dtype=float)
    if ref.size == 0:  # (a form's empty output against a non-empty reference fails, as before)
        raise VacuousCheck("relative: 0 entries compared (a comparison over 0 draws)")
    if v.size != ref.size:  # numpy would broadcast a (1,) reference over every value (hostile pass 9)
        return _shape_fail(v, ref, justification, kw)
    v, ref = v.ravel(), ref.ravel()  # entry by entry, as close() compares: (2,) against (2, 1) broadcast (19b F1)
    if tol < 0:
        negative_tolerance("relative", f"tolerance {float(tol):g}", "≥ 0")
    if not (math.isfinite(float(tol)) and tol < 1.0):
        raise VacuousCheck(f"relative: tolerance {float(tol):g}: a relative tolerance must be finite and below 1 "
                           "(at 1 the value 0 passes)")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if scale == 0.0:  # was "non-finite error: inf" (hostile pass 10, N11): nothing to be relative to
        raise VacuousCheck("relative: the reference is 0 everywhere, so a relative error has no scale (use close() "
                           "with an absolute tolerance)")

    def err(delta: float) -> float:
        r = ref * (1 + delta)
        return float(np.max(np.abs(v - r)) / (scale * abs(1 + delta))) if scale > 0 else math.inf

    e = err(0.0)
    # tol + e ≥ 1: no scaling of the reference is certainly rejected (an infinite resolution, which
    # the own-mutant rule reads as "cannot tell the form from 0": never verified)
    eps = (tol + e) / (1 - tol - e) if tol + e < 1 else math.inf
    details = dict(kw.pop("details", {}) or {})
    details.update(resolution_confirmed=confirm_resolution(err, tol, eps))
    return _both(compare(e, tol, justification, details=details, resolution=eps, resolution_units=REL_UNITS, **kw))


def seed_spread(per_seed: Iterable[Any], reference: Any, *, k: float = K_SIGMA, floor: float = 0.0, what: str = "",
                **kw) -> CheckResult:
    """Per-seed measurements (trained models): the mean over seeds against the reference, in units
    of the seeds' standard error ``std/√S`` (at least ``floor``, a stated resolution such as the
    optimiser's convergence tolerance, so that identical seeds do not give SE 0); tolerance ``k``.

    >>> seed_spread([[1.0], [1.02], [0.98]], [1.0], floor=1e-3).passed
    True
    """
    per_seed = list(per_seed)
    refuse_text([per_seed, reference], "seed_spread")
    x = np.asarray(per_seed, dtype=float)
    ref = np.asarray(reference, dtype=float)
    S = x.shape[0]
    if S < 2:
        raise ValueError("seed_spread needs at least two seeds")
    if ref.size == 0:
        raise VacuousCheck("seed_spread: 0 entries compared (a comparison over 0 draws)")
    if not (math.isfinite(float(k)) and math.isfinite(float(floor))):
        raise VacuousCheck(f"seed_spread: k = {float(k):g}, floor = {float(floor):g}: a tolerance must be finite")
    if k <= 0 or floor < 0:
        negative_tolerance("seed_spread", f"k = {float(k):g}" if k <= 0 else f"floor = {float(floor):g}",
                  "positive" if k <= 0 else "≥ 0")
    _stated_beyond("seed_spread", k * float(floor), ref, f"its floor k·floor = {k * float(floor):.3g}")
    # the mean and the spread in units of each entry's largest |value| (1e200 and -1e200 overflowed x.std() to inf, and
    # |mean − ref| / inf = 0 passed: hostile pass 18b F1)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = np.max(np.abs(x), axis=0)
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        mean = (x / scale).mean(axis=0) * scale
        se = np.maximum((x / scale).std(axis=0, ddof=1) * scale / math.sqrt(S), floor)
    if np.size(mean) != ref.size:  # a broadcast reference would compare every entry with one number
        return _shape_fail(np.ravel(mean), np.ravel(ref), what, kw)
    ref = ref.reshape(np.shape(mean))  # entry by entry, as close() compares: a (2, 1) reference against a (2,) mean
    # broadcast into every mean against every reference (hostile pass 19b F1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(mean - ref) / se, np.where(mean == ref, 0.0, np.inf))
    with np.errstate(over="ignore"):
        band = float(k) * se  # the accepted |mean − ref|: beyond float64, it accepts anything
    if not (np.isfinite(x).all() and np.isfinite(ref).all() and np.isfinite(band).all()):
        z = np.full(np.shape(z), np.nan)  # a non-finite measurement, reference or band decides nothing: it fails
        se = np.where(np.isfinite(band), se, np.nan)
    details = dict(kw.pop("details", {}) or {})
    details.update(seeds=S, mean=np.ravel(mean).tolist()[:50], standard_error=np.ravel(se).tolist()[:50])
    eps, conf = _spread_resolution(np.broadcast_to(mean, np.broadcast(mean, ref).shape),
                                   np.broadcast_to(se, np.broadcast(mean, ref).shape),
                                   np.broadcast_to(ref, np.broadcast(mean, ref).shape), k)
    details.update(resolution_confirmed=conf,
                   false_failure_probability=false_failure_probability(k, int(np.broadcast(mean, ref).size), dof=S - 1))
    kw.setdefault("resolution", eps)
    kw.setdefault("resolution_units", REL_UNITS)
    return _both(compare({"z": worst([z])}, k, f"{k:g} standard errors of the mean over {S} seeds"
                         f"{(' of ' + what) if what else ''} (SE = std/√S, at least {floor:g})", details=details, **kw))


def close(value: Any, reference: Any, tol: Any, justification: str, **kw) -> CheckResult:
    """Values against a reference with a tolerance that may differ per draw (``tol`` a number or an
    array broadcast against ``reference``: e.g. float32 rounding ``c·d·eps₃₂·‖q‖‖k‖`` of each draw).
    Error: ``max_i |value_i − ref_i| / tol_i`` (a ratio), tolerance 1.

    Resolution (the rule of every comparison helper): the smallest relative change ``ε`` of the
    reference (all of it scaled by ``1 + ε``) that the check is guaranteed to reject. Draw ``i``
    rejects every ``|δ| > (tol_i + |value_i − ref_i|) / |ref_i|`` (triangle inequality), and the check
    rejects when one draw does, so ``ε = min_i (tol_i + |value_i − ref_i|) / |ref_i|`` over the draws
    with ``ref_i ≠ 0``; confirmed by re-running the comparison at ``1 ± 2ε`` (rejected) and
    ``1 ± ε/2`` (accepted where the error leaves room) in ``details["resolution_confirmed"]``.

    >>> r = close([1.0, 2.0 + 1e-7], [1.0, 2.0], [1e-6, 2e-6], "float32 rounding per draw")
    >>> r.passed, round(r.error, 6), round(r.resolution, 9)
    (True, 0.05, 1e-06)
    >>> conf = r.details["resolution_confirmed"]; conf["rejects_2eps"]
    True
    >>> close([1.1], [1.0], 1e-3, "x").passed
    False
    """
    refuse_text([value, reference, tol], "close")
    v = np.ravel(np.asarray(value, dtype=float))
    ref = np.ravel(np.asarray(reference, dtype=float))
    if v.size != ref.size:
        return _shape_fail(v, ref, justification, kw)
    t = np.ravel(np.broadcast_to(np.asarray(tol, dtype=float), np.asarray(reference).shape)) if np.ndim(tol) else \
        np.full(ref.shape, float(tol))
    if ref.size == 0:
        raise VacuousCheck("close: 0 draws compared")
    if not np.all(np.isfinite(t)):
        raise VacuousCheck(f"close: tolerance {t[~np.isfinite(t)][0]:g}: a tolerance must be finite and non-negative")
    if np.any(t < 0):
        negative_tolerance("close", f"tolerance {t[t < 0][0]:g}", "≥ 0")
    _stated_beyond("close", t, ref, "its tolerance")

    def err(delta: float) -> float:
        d = np.abs(v - ref * (1 + delta))
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(t > 0, d / np.where(t > 0, t, 1.0), np.where(d == 0, 0.0, np.inf))
        return float(worst([q])) if q.size else 0.0

    e = err(0.0)
    eps, conf = _spread_resolution(v, t, ref, 1.0) if np.all(t >= 0) else (math.nan, {})
    if t.size and not np.any(t > 0) and e == 0:  # tolerance 0 everywhere: an exact comparison
        eps, conf = 0.0, {}
    details = dict(kw.pop("details", {}) or {})
    if not np.any(ref != 0):  # no relative scale: the draws test one point (the own-mutant rule ignores its kills)
        details["reference_all_zero"] = True
    details.update(resolution_confirmed=conf, draws=int(ref.size),
                   tolerance_range=[float(np.min(t)), float(np.max(t))] if t.size else [])
    return _both(compare(e, 1.0, f"per-draw tolerance (error = max |value − reference| / tol): {justification}",
                         details=details, resolution=eps, resolution_units=REL_UNITS, **kw))


def _stated_beyond(what: str, tol: Any, ref: Any, name: str) -> None:
    """Refuse a *stated* tolerance beyond any resolution: at least the reference's own size on every
    entry with a non-zero reference (``tol_i ≥ |r_i|``, a relative tolerance ≥ 1), so the value 0 —
    or twice the reference — passes on every entry: the check cannot tell the claimed quantity from
    nothing. A reference that is 0 everywhere has no relative scale; its tolerance is absolute."""
    ref = np.ravel(np.abs(np.asarray(ref, dtype=float)))
    t = np.ravel(np.broadcast_to(np.asarray(tol, dtype=float), ref.shape))
    nz = (ref > 0) & np.isfinite(ref)
    if nz.any() and np.all(t[nz] >= ref[nz]):
        raise VacuousCheck(f"{what}: {name} is at least the reference's own size on every draw (tol ≥ |reference|, "
                           f"largest |reference| {float(np.max(ref[nz])):.3g}): the value 0 would pass, so it resolves nothing")


def _both(r: CheckResult) -> CheckResult:
    """``r`` marked two-sided: its error is the size of a difference (:attr:`CheckResult.two_sided`)."""
    r.two_sided = True
    return r


def _shape_fail(v: Any, ref: Any, justification: str, kw: dict) -> CheckResult:
    r = _both(compare(math.inf, 1.0, justification, **kw))
    r.reason = f"{v.size} values against {ref.size} reference entries"
    return r
