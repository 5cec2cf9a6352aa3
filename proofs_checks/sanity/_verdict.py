"""The verdict of a ``tverify check`` command, in one place for every topic.

Three outcomes, each with the criterion that decided it in words and numbers:

``ok`` (exit 0)            the measurement agrees with the closed form within the stated bound;
``mismatch`` (exit 1)      it disagrees, beyond the bound and beyond the statistical uncertainty,
                           with a converged optimiser and seeds that agree with each other;
``inconclusive`` (exit 3)  the run cannot decide: too few seeds, seeds disagreeing, a standard error
                           too large for the bound, an optimiser that has not converged, an
                           uncertified reference. The verdict says what would make the run decisive.

(Exit code 2 is a usage error, raised before any verdict.)

:func:`compare_seed_mean` is the statistical rule for a quantity estimated by independent seeds
(the mean over seeds against a closed form, relative Frobenius error ``e``, standard error ``SE``,
spread ``σ``; ``k`` is the Student-t quantile with ``S − 1`` degrees of freedom matching a one-sided
3σ normal tail, so a handful of seeds is not over-trusted):

* ``ok``        when ``e + k·SE ≤ tol``;
* ``mismatch``  when ``e − k·SE > tol`` *and* ``σ ≤ tol`` (each seed alone resolves the quantity at
  the bound, so the mean is not carrying the finite-sample bias of widely scattered per-seed
  estimates, which is of order ``σ²``);
* otherwise ``inconclusive``, with the seeds (``--seeds``) or samples per seed (``--prompts``) that
  would shrink ``k·SE`` (or ``σ``) below the distance between ``e`` and the bound: the standard
  error scales as ``1/√(S·P)``, so the counts scale by ``(SE/needed)²``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OUTCOMES", "EXIT_CODES", "Verdict", "k_sigma", "compare_seed_mean", "Z_SIGMA", "MIN_SEEDS"]

OUTCOMES = ("ok", "mismatch", "inconclusive")
EXIT_CODES = {"ok": 0, "mismatch": 1, "inconclusive": 3}
#: One-sided normal tail that both an ``ok`` and a ``mismatch`` must clear (3σ: p = 1.35e-3).
Z_SIGMA = 3.0
#: Fewest seeds whose spread is trusted as an estimate of the standard error.
MIN_SEEDS = 4
#: Counts beyond this are reported as infeasible rather than as a number to type.
MAX_COUNT = 10**12


@dataclass
class Verdict:
    """``outcome`` (ok / mismatch / inconclusive), a one-line ``summary``, the ``criterion`` that
    decided it (words and numbers), the ``numbers`` themselves, ``reasons`` an inconclusive run could
    not decide, and a ``suggestion`` that would make it decisive."""

    outcome: str
    summary: str
    criterion: str
    numbers: dict = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    suggestion: str | None = None

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def to_json(self) -> dict:
        return {"outcome": self.outcome, "summary": self.summary, "criterion": self.criterion,
                "numbers": _jsonable(self.numbers), "reasons": list(self.reasons), "suggestion": self.suggestion,
                "exit_code": self.exit_code}

    def lines(self) -> list[str]:
        out = [f"verdict: {self.outcome}: {self.summary}", f"  criterion: {self.criterion}"]
        out += [f"  undecided because: {r}" for r in self.reasons]
        if self.suggestion:
            out.append(f"  to decide: {self.suggestion}")
        return out


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def k_sigma(dof: int, z: float = Z_SIGMA) -> float:
    """Student-t quantile with ``dof`` degrees of freedom at the one-sided level of ``z`` normal
    sigmas (``inf`` for ``dof < 1``).

    >>> round(k_sigma(7), 2), round(k_sigma(10**6), 2)
    (4.53, 3.0)
    """
    if dof < 1:
        return float("inf")
    from scipy.stats import norm, t

    return float(t.ppf(norm.cdf(z), dof))


def seeds_to_reach(sigma: float, margin: float, *, start: int, cap: int = 10**9) -> int | None:
    """Smallest ``S ≥ start`` with ``k_sigma(S−1)·σ/√S ≤ margin`` (``None`` beyond ``cap``).

    >>> seeds_to_reach(0.1, 0.05, start=4)
    41
    """
    if not (sigma > 0 and margin > 0):
        return start if sigma == 0 else None
    ok = lambda s: k_sigma(s - 1) * sigma / math.sqrt(s) <= margin
    hi = max(start, 2)
    while not ok(hi):
        hi *= 2
        if hi > cap:
            return None
    lo = max(start, 2) - 1
    if hi == max(start, 2):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def round_up(n: int) -> int:
    """``n`` rounded up to two significant digits (a count to ask for, not a measurement).

    >>> round_up(347), round_up(3188191), round_up(5)
    (350, 3200000, 5)
    """
    n = int(n)
    if n < 100:
        return n
    q = 10 ** (len(str(n)) - 2)
    return -(-n // q) * q


def _count(x: float) -> int | None:
    """A count to ask for, rounded up to two digits; ``None`` when not finite or above MAX_COUNT."""
    return round_up(math.ceil(x)) if math.isfinite(x) and x <= MAX_COUNT else None


def _ratio_sq(a: float, b: float) -> float:
    """``(a / b)²``, inf where it overflows (a tolerance of 1e-300 asks for more than any count)."""
    try:
        return (a / b) ** 2
    except (OverflowError, ZeroDivisionError):
        return math.inf


def _g(x: float) -> str:
    return f"{x:.3g}"


def _what_would_decide(numbers: dict, *, e: float, tol: float, S: int, per_seed: int | None, plan_spread,
                       block_suggestion: str | None, per_seed_option: str, seeds_option: str) -> list[str]:
    """The suggestions of an inconclusive :func:`compare_seed_mean`: how many seeds (and samples per seed)
    would bring k·SE below the margin |e − tol|, and how many would make the seeds agree; the counts go
    into ``numbers``."""
    margin = max(abs(e - tol), tol / 10) if math.isfinite(e) else tol
    sugg = []
    if block_suggestion:
        sugg.append(block_suggestion)
    plan_sigma = plan_spread if (plan_spread is not None and math.isfinite(plan_spread)) else None
    seeds_needed = prompts_needed = agree_needed = None
    if plan_sigma is not None:
        seeds_needed = seeds_to_reach(plan_sigma, margin, start=max(MIN_SEEDS, S))
        seeds_needed = None if seeds_needed is None else round_up(seeds_needed)
        if per_seed is not None and S >= 2:
            need_se = margin / k_sigma(max(S, MIN_SEEDS) - 1)
            se_plan = plan_sigma / math.sqrt(max(S, MIN_SEEDS))
            prompts_needed = _count(per_seed * max(1.0, _ratio_sq(se_plan, need_se)))
            if e > tol and plan_sigma > tol:
                agree_needed = _count(per_seed * _ratio_sq(plan_sigma, tol))
    elif S < MIN_SEEDS:
        seeds_needed = MIN_SEEDS
        sugg.append(f"at least {MIN_SEEDS} seeds ({seeds_option} {MIN_SEEDS}) to estimate the spread across seeds, "
                    "then the run says how many would decide")
    numbers.update({"seeds_needed": seeds_needed, "samples_per_seed_needed": prompts_needed,
                    "samples_per_seed_for_seed_agreement": agree_needed, "margin": margin})
    if seeds_needed is None and plan_sigma is not None and plan_sigma > 0:
        sugg.append("no feasible number of seeds (more than 10^9) would decide it at this spread")
    # only counts beyond those that ran: the settings of this run, proposed as what would decide, decide nothing
    # (k·SE was already below the margin where the seeds disagree: hostile pass 46b F7)
    more_seeds = seeds_needed is not None and seeds_needed > S
    more_prompts = prompts_needed is not None and S >= MIN_SEEDS and (per_seed is None or prompts_needed > per_seed)
    if plan_sigma is not None and (more_seeds or more_prompts):
        parts = []
        if more_seeds:
            parts.append(f"about {seeds_needed} seeds ({seeds_option} {seeds_needed})")
        if more_prompts:
            parts.append(f"about {prompts_needed} per seed ({per_seed_option} {prompts_needed})")
        basis = f"σ = {_g(plan_sigma)}"
        sugg.append(" or ".join(parts) + f" would bring k·SE below |e − tol| (margin {_g(margin)}; {basis}, "
                    "SE ∝ 1/√(seeds·samples))")
    if agree_needed is None and per_seed is not None and e > tol and plan_sigma is not None and plan_sigma > tol:
        sugg.append(f"no feasible number of samples per seed (more than {MAX_COUNT:.0e}) would make the seeds agree "
                    "within tol")
    if agree_needed is not None:
        sugg.append(f"for the seeds to agree within tol, about {agree_needed} samples per seed ({per_seed_option} "
                    f"{agree_needed}; σ ∝ 1/√samples)")
    return sugg


def compare_seed_mean(estimates, reference, *, tol: float, quantity: str, per_seed: int | None = None,
                      per_seed_option: str = "--prompts", seeds_option: str = "--seeds",
                      blockers: list[str] | None = None, block_suggestion: str | None = None,
                      sampling_spread: float | None = None, extra_numbers: dict | None = None) -> Verdict:
    """The rule of the module docstring for ``estimates (S, …)`` of ``reference (…)``.

    ``blockers``: reasons decided elsewhere that make the run inconclusive whatever the numbers say
    (an optimiser that has not converged), with ``block_suggestion`` to fix them. ``per_seed``: the
    samples each seed was trained on (``per_seed_option``), to say how many would decide.
    ``sampling_spread``: the spread to expect once converged (default the measured one).

    >>> rng = np.random.default_rng(0)
    >>> ref = np.eye(2)
    >>> compare_seed_mean(ref + 1e-3 * rng.normal(size=(8, 2, 2)), ref, tol=0.05, quantity="B").outcome
    'ok'
    >>> compare_seed_mean(1.2 * ref + 1e-3 * rng.normal(size=(8, 2, 2)), ref, tol=0.05, quantity="B").outcome
    'mismatch'
    >>> v = compare_seed_mean(1.2 * ref + 1e-3 * rng.normal(size=(2, 2, 2)), ref, tol=0.05, quantity="B")
    >>> v.outcome, v.numbers["seeds_needed"]
    ('inconclusive', 4)
    """
    est = np.asarray(estimates, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    S = int(est.shape[0])
    nref = float(np.linalg.norm(ref))
    scale = nref if nref > 0 else 1.0
    mean = est.mean(0)
    axes = tuple(range(1, est.ndim))
    e = float(np.linalg.norm(mean - ref) / scale)
    per = (np.sqrt(((est - ref) ** 2).sum(axis=axes)) / scale) if axes else np.abs(est - ref) / scale
    sigma = float(np.sqrt(((est - mean) ** 2).sum() / (S - 1)) / scale) if S >= 2 else float("nan")
    se = sigma / math.sqrt(S) if S >= 2 else float("nan")
    k = k_sigma(S - 1)
    lo, hi = (e - k * se, e + k * se) if S >= 2 else (float("-inf"), float("inf"))
    spread_for_plan = sigma if sampling_spread is None else sampling_spread
    numbers = {"quantity": quantity, "value": e, "tolerance": tol, "standard_error": se, "k": k,
               "z_sigma": Z_SIGMA, "seeds": S, "spread": sigma, "lower": lo, "upper": hi,
               "per_seed_error": per.tolist()}
    if per_seed is not None:
        numbers["per_seed_samples"] = int(per_seed)
    numbers.update(extra_numbers or {})
    stat = (f"relative Frobenius error of the mean over {S} seed(s) of {quantity}: e = {_g(e)}, standard error "
            f"SE = {_g(se)}, spread across seeds σ = {_g(sigma)}, per-seed errors {_g(float(per.min()))}–"
            f"{_g(float(per.max()))}; bound tol = {_g(tol)}; k = {_g(k)} (Student-t, {S - 1} d.o.f., one-sided "
            f"{Z_SIGMA:g}σ)")

    reasons = list(blockers or [])
    if S < MIN_SEEDS:
        reasons.append(f"too few seeds: {S} < {MIN_SEEDS}; the spread across seeds (hence SE) is not "
                       f"trustworthy from fewer" + ("" if S >= 2 else " and cannot be estimated from one"))
    if not reasons:
        if hi <= tol:
            return Verdict("ok", f"{quantity} agrees with the closed form: e + k·SE = {_g(hi)} ≤ tol {_g(tol)}",
                           stat + f"; ok because e + k·SE = {_g(hi)} ≤ tol", numbers)
        if lo > tol and sigma <= tol:
            return Verdict("mismatch", f"{quantity} differs from the closed form: e − k·SE = {_g(lo)} > tol "
                                       f"{_g(tol)}, with seeds agreeing (σ = {_g(sigma)} ≤ tol)",
                           stat + f"; mismatch because e − k·SE = {_g(lo)} > tol, e/SE = {_g(e / se)} standard "
                                  f"errors, and σ ≤ tol (each seed resolves {quantity} at the bound)", numbers)
        if lo > tol:
            reasons.append(f"seeds disagree: σ = {_g(sigma)} > tol {_g(tol)}; a mean of scattered per-seed "
                           f"estimates carries a finite-sample bias of order σ², so e = {_g(e)} beyond the bound "
                           "does not refute the closed form")
        else:
            reasons.append(f"standard error too large for the bound: e ± k·SE = [{_g(lo)}, {_g(hi)}] contains "
                           f"tol {_g(tol)}")
    sugg = _what_would_decide(numbers, e=e, tol=tol, S=S, per_seed=per_seed, plan_spread=spread_for_plan,
                              block_suggestion=block_suggestion, per_seed_option=per_seed_option,
                              seeds_option=seeds_option)
    why = "; ".join(r.split(":")[0] for r in reasons)
    return Verdict("inconclusive", f"cannot decide whether {quantity} matches the closed form ({why})",
                   stat, numbers, reasons, "; ".join(sugg) or None)
