"""Helpers shared by the ICL claim modules (``icl``, ``icl_further``): symbolic substitution, the
numeric Γ_N⁻¹, a closed-form-vs-Monte-Carlo figure and the shared trained LSA (one batch of seeds,
cached per process). A module whose name starts with ``_`` registers nothing."""


from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.context import RunContext, pyplot
from proofs_checks.tolerances import K_SIGMA
from proofs_checks.comparisons import REL_UNITS, confirm_resolution, largest, smallest
from proofs_checks.registry import CheckResult, compare, worst


def _lam_subs(Lsym: sp.Matrix, L: np.ndarray) -> dict:
    d = L.shape[0]
    return {Lsym[i, j]: float(L[i, j]) for i in range(d) for j in range(d)}


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / largest(np.linalg.norm(b), 1e-300))


def _numeric_gamma_inv(L: np.ndarray, N: int) -> np.ndarray:
    """Γ_N^{-1} the numeric way: the minimiser ``E[hhᵀ]^{-1} E[hwᵀ]`` of the Isserlis-moment loss."""
    hh, hw = ni.population_moments(L, N)
    return np.linalg.solve(hh, hw)


def _conditional_mc(L: np.ndarray, M: int, B: np.ndarray, n: int, seed: int, pilot_seed: int,
                    factor: float = 1.0) -> tuple[float, float]:
    """Monte Carlo of ``factor · E(ŷ − y_q)²`` for the LSA with ``W^{KQ}_{11} = B``, ``w22 = 1`` on
    linear-task prompts of length ``M`` (``w ~ N(0, I)``, ``x ~ N(0, Λ)``, no noise), with the variance
    of the task and of the query integrated out exactly (:func:`numerics.icl.lsa_conditional_sq_error`:
    the torch LSA on the d unit tasks × d unit queries, per sampled context) and the context's sample
    covariance ``Γ̂ = XᵀX/M`` as control variates (``E Γ̂ = Λ`` is the law's definition; the
    coefficients fitted on an independent pilot batch of max(n/8, 2048) contexts, :func:`numerics.icl.mc_mean_cv`).
    The Wishart fluctuation of ``Γ̂`` (what the closed form's Γ_N encodes) is still sampled.
    Returns ``(mean, SE)``."""
    d = L.shape[0]
    C = np.linalg.cholesky(L)
    Wpv = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wpv[d, d] = 1.0
    Wkq = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wkq[:d, :d] = torch.from_numpy(np.asarray(B, dtype=np.float64))
    iu = np.triu_indices(d)

    def batch(size: int, s: int):
        X = ni.sample_prompts(L, M, (size,), seed=s).X
        with torch.no_grad():
            c = torch.cat([ni.lsa_conditional_sq_error(Wpv, Wkq, X[i:i + _CHUNK], C, float(M))
                           for i in range(0, size, _CHUNK)])
        G = (X.transpose(-1, -2) @ X).numpy() / M
        return factor * c.numpy(), (G - L)[:, iu[0], iu[1]]

    v, F = batch(n, seed)
    pv, pF = batch(largest(n // 8, 2048), pilot_seed)
    m, se, _ = ni.mc_mean_cv(v, F, pv, pF)
    return m, se


_CHUNK = 8192


def _closed_form_vs_mc_figure(ctx, name: str, title: str, rows: list[tuple[str, float, float, float]],
                              ylabel: str = "value") -> None:
    """When figures are on: each Monte Carlo estimate with its ±K_SIGMA·SE band next to the
    closed form it is compared with. ``rows`` holds ``(label, closed_form, mc_mean, mc_se)``."""
    if not ctx.want_figures:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    xs = np.arange(len(rows))
    ax.errorbar(xs, [r[2] for r in rows], yerr=[K_SIGMA * r[3] for r in rows], fmt="o", capsize=4,
                label=f"Monte Carlo ± {K_SIGMA:g} SE")
    ax.scatter(xs, [r[1] for r in rows], marker="x", s=60, color="C3", zorder=3, label="closed form")
    ax.set_xticks(xs, [r[0] for r in rows])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ctx.save_figure(fig, name)


# --------------------------------------------------------------------------------------------
# the shared trained LSA (one batch of seeds, reused by several claims in one process)


def _trained_prompts(mode: str) -> int:
    """Prompts per seed of the shared trained LSA (by mode)."""
    return RunContext(mode, 0, "cpu").size(16384, 65536, 262144)


def _trained_steps(mode: str) -> int:
    """Adam steps of the shared trained LSA (by mode; then 50 L-BFGS iterations)."""
    return RunContext(mode, 0, "cpu").size(200, 300, 400)


@lru_cache(maxsize=4)
def _trained(mode: str, seed: int, device: str):
    ctx = RunContext(mode, seed, device).for_check("icl.shared", "trained_lsa")
    rng = ctx.rng("Lambda")
    L = ni.random_spd(rng, 3, 1.0, 3.0)
    N = 4  # small N: Γ_N and its plausible wrong forms (1/(N+1), …) differ most (issue: trained layer discriminates)
    S = 16
    P = _trained_prompts(mode)
    res = ni.train_lsa(L, N, n_seeds=S, n_prompts=P, steps=_trained_steps(mode), seed=ctx.seed_for("train"),
                       device=device, lbfgs_steps=50)
    return L, N, res, ctx.seed_for("train")


# --------------------------------------------------------------------------------------------
# resolutions of the comparisons that the shared kinds (proofs_checks.comparisons) do not cover


def _resolved(err_at, tol: float, justification: str, eps_parts: dict, *, units: str = REL_UNITS, one_sided=None,
              details: dict | None = None, **kw) -> CheckResult:
    """A comparison ``worst(err_at(0)) ≤ tol`` whose resolution is the smallest of ``eps_parts`` (each
    part's own triangle-inequality bound, in ``units``), confirmed by re-running ``err_at(δ)`` (the
    compared reference scaled by ``1 + δ``) at ``±2ε`` / ``±ε/2`` (:func:`confirm_resolution`); with
    ``one_sided=±1`` only that direction is confirmed (a one-sided criterion: the other direction
    never rejects). ``eps_parts`` and the confirmation are in ``details``."""
    errs = err_at(0.0)
    finite = [v for v in eps_parts.values() if v is not None and math.isfinite(v) and v > 0]
    eps = smallest(finite) if finite else math.nan
    if one_sided is None:
        conf = confirm_resolution(lambda dl: worst(err_at(dl)), tol, eps)
    elif math.isfinite(eps):
        conf = {"eps": eps, "one_sided": one_sided,
                "rejects_2eps": bool(worst(err_at(one_sided * 2 * eps)) > tol),
                "accepts_half_eps": True if worst(err_at(one_sided * eps / 2)) <= tol else None}
    else:
        conf = {"eps": eps, "rejects_2eps": None, "accepts_half_eps": None}
    details = dict(details or {})
    details.update(resolution_parts=dict(eps_parts), resolution_confirmed=conf)
    return compare(errs, tol, justification, details=details, resolution=eps, resolution_units=units, **kw)


def _pair_errors(pairs: dict, a: float, b: float, delta: float) -> dict:
    """``‖v − (1+δ)r‖ / (a + b‖(1+δ)r‖)`` per labelled pair ``(v, r)`` (Frobenius norms)."""
    out = {}
    for k, (v, r) in pairs.items():
        r = np.asarray(r, dtype=float) * (1 + delta)
        out[k] = float(np.linalg.norm(np.asarray(v, dtype=float) - r) / (a + b * np.linalg.norm(r)))
    return out


def _pairs_eps(pairs: dict, tol: float, a: float, b: float) -> dict:
    """Per pair: every ``|δ| > (tol + e)(a + b‖r‖) / (‖r‖(1 − b·tol))`` is rejected (triangle inequality:
    ``‖v − (1+δ)r‖ ≥ |δ|‖r‖ − ‖v − r‖`` and ``a + b‖(1+δ)r‖ ≤ a + b(1+|δ|)‖r‖``); pairs with ``r = 0``
    have no relative resolution."""
    out = {}
    for k, (v, r) in pairs.items():
        nr = float(np.linalg.norm(np.asarray(r, dtype=float)))
        e = float(np.linalg.norm(np.asarray(v, dtype=float) - np.asarray(r, dtype=float)) / (a + b * nr))
        if nr > 0 and b * tol < 1:
            out[k] = (tol + e) * (a + b * nr) / (nr * (1 - b * tol))
    return out


def _rounding_pairs(pairs: dict, tol: float, justification: str, *, a: float = 1.0, b: float = 1.0,
                    extra: dict | None = None, **kw) -> CheckResult:
    """Float64 comparisons of form values ``v`` with references ``r``: error per pair
    ``‖v − r‖ / (a + b‖r‖)`` (``a = b = 1``: the usual ``|v − r|/(1 + |r|)``; ``a = 0``: relative;
    ``b = 0``: absolute), tolerance ``tol`` (a rounding bound the caller states), resolution in relative
    change of the reference: the smallest over the pairs of :func:`_pairs_eps` (the pairs' labels are
    reported; one scalar per pair where the error is entrywise), confirmed at ``±2ε, ±ε/2``. ``extra``:
    named errors that count in the verdict but do not move with the reference (e.g. an exact 0/inf
    condition)."""
    extra = dict(extra or {})
    parts = _pairs_eps(pairs, tol, a, b)
    best = smallest(list(parts.values())) if parts else math.nan
    label = smallest(list(parts), key=parts.get) if parts else None
    many = len(pairs) > 40  # many entrywise pairs: the verdict's error is the worst pair (named in details)

    def err_at(dl: float) -> dict:
        e = _pair_errors(pairs, a, b, dl)
        return {**({"worst_pair": worst(e)} if many else e), **extra}

    det = {"resolution_from": label, **kw.pop("details", {})}
    if many:
        e0 = _pair_errors(pairs, a, b, 0.0)
        det.update(pairs=len(pairs), worst_pair_label=largest(list(e0), key=e0.get))
    return _resolved(err_at, tol, justification, {"smallest_over_pairs": best}, details=det, **kw)


def _criteria_margin(errs: dict, tol: float, justification: str, *, quantities: dict, proportional=(),
                     floors: dict | None = None, details: dict | None = None, **kw) -> CheckResult:
    """One-sided evidence criteria ``err_k ≤ tol`` (each a ratio of a measured quantity to its threshold):
    ``err_k ∝ 1/q_k`` (a "below"/"separable" criterion: z = m/SE ≥ Z, or a quantity far below a
    baseline) or, for the keys in ``proportional``, ``err_k ∝ q_k`` (a "close to" criterion). Scaling
    ``q_k`` by ``1 + δ`` flips criterion ``k`` at ``δ = err_k/tol − 1`` (decrease) or ``tol/err_k − 1``
    (increase); the resolution is the smallest such one-sided margin over the criteria, in relative
    change of that criterion's quantity (``quantities[k]`` names it), confirmed on the binding criterion
    at ``2ε`` (rejected) and ``ε/2`` (accepted) in its rejecting direction. ``floors`` (optional): each
    criterion's statistical floor ``k·SE/|q|`` (reported, not the resolution). Exact 0/∞ criteria carry
    no margin."""
    margins, sign = {}, {}
    for k, e in errs.items():
        e = float(e)
        if not (math.isfinite(e) and e > 0):
            continue
        if k in proportional:
            margins[k], sign[k] = tol / e - 1.0, 1.0
        else:
            margins[k], sign[k] = 1.0 - e / tol, -1.0
    ok = {k: v for k, v in margins.items() if v > 0}
    if ok:
        b = smallest(list(ok), key=ok.get)
        eps = ok[b]

        def e_at(delta: float) -> float:
            f = 1.0 + delta
            if f <= 0:
                return math.inf
            return float(errs[b]) * f if b in proportional else float(errs[b]) / f

        conf = {"eps": eps, "criterion": b, "direction": "increase" if sign[b] > 0 else "decrease",
                "rejects_2eps": bool(e_at(sign[b] * 2 * eps) > tol),
                "accepts_half_eps": True if e_at(sign[b] * eps / 2) <= tol else None}
        units = (f"relative {'increase' if sign[b] > 0 else 'decrease'} of {quantities[b]} that flips the criterion "
                 f"'{b}' (one-sided margin of the binding evidence criterion)")
    else:
        b, eps, conf = None, math.nan, {"eps": math.nan, "rejects_2eps": None, "accepts_half_eps": None}
        units = "relative change of the binding criterion's quantity (one-sided margin; none: a criterion fails)"
    det = dict(details or {})
    det.update(resolution_margins=margins, resolution_confirmed=conf, resolution_quantities=dict(quantities))
    if floors:
        det["statistical_floor"] = dict(floors)
    return compare(errs, tol, justification, details=det, resolution=eps, resolution_units=units, **kw)


def _eval_general(expr, sizes: dict, **values):
    """A symbolic-size closed form (``MatrixSymbol``s of shape ``d × d``, ``Trace``, ``Inverse``) at
    the sizes ``sizes`` (``{symbol: int}``) and the NumPy matrices ``values`` (by symbol name), in
    float64: the expression tree evaluated node by node (SymPy's NumPy printer has no ``Trace``).

    >>> d = sp.Symbol("d", integer=True, positive=True); L = sp.MatrixSymbol("Lambda", d, d)
    >>> float(_eval_general(sp.Trace(L.I * L * L) / 2, {d: 2}, Lambda=np.diag([1.0, 3.0])))
    2.0
    """
    sizes = {sp.sympify(k): int(v) for k, v in sizes.items()}

    def ev(e):
        if isinstance(e, sp.MatrixSymbol):
            return np.asarray(values[e.name], dtype=float)
        if isinstance(e, sp.Identity):
            return np.eye(int(e.rows.xreplace(sizes)))
        if isinstance(e, sp.ZeroMatrix):
            return np.zeros((int(e.rows.xreplace(sizes)), int(e.cols.xreplace(sizes))))
        if isinstance(e, sp.Trace):
            return np.trace(ev(e.arg))
        if isinstance(e, sp.Transpose):
            return np.swapaxes(ev(e.arg), -1, -2)
        if isinstance(e, sp.Inverse):
            return np.linalg.inv(ev(e.arg))
        if isinstance(e, sp.MatPow):
            return np.linalg.matrix_power(ev(e.base), int(e.exp))
        if isinstance(e, sp.MatMul):
            out = None
            for a in e.args:
                v = ev(a)
                out = v if out is None else (out @ v if np.ndim(out) == 2 and np.ndim(v) == 2 else out * v)
            return out
        if isinstance(e, (sp.MatAdd, sp.Add)):
            return sum(ev(a) for a in e.args)
        if isinstance(e, sp.Mul):
            out = 1.0
            for a in e.args:
                v = ev(a)
                out = out @ v if np.ndim(out) == 2 and np.ndim(v) == 2 else out * v
            return out
        if isinstance(e, sp.Pow):
            return ev(e.base) ** float(e.exp.xreplace(sizes))
        if isinstance(e, sp.Symbol) and e in sizes:
            return float(sizes[e])
        return float(e.xreplace(sizes))

    return ev(sp.sympify(expr))
