"""Helpers shared by the ICL claim modules (``icl``, ``icl_minimum``, ``icl_risk``, ``icl_further``, …):
symbolic substitution, the numeric Γ_N⁻¹, a closed-form-vs-Monte-Carlo figure, the shared trained LSA
(one batch of seeds, cached per process) and the statements' shared hypotheses, laws and mutants.
A module whose name starts with ``_`` registers nothing."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.context import RunContext, pyplot
from proofs_checks.tolerances import K_SIGMA
from proofs_checks.comparisons import REL_UNITS, confirm_resolution, largest, smallest, false_failure_probability
from proofs_checks.registry import CheckResult, Counterexample, compare, worst
from proofs_checks.claims._common import exceeds
from theory import icl as ti


def _lam_subs(Lsym: sp.Matrix, L: np.ndarray) -> dict:
    d = L.shape[0]
    return {Lsym[i, j]: float(L[i, j]) for i in range(d) for j in range(d)}


def _planted_gamma(L: np.ndarray, N, kind: str) -> np.ndarray:
    """Γ_N = (1 + 1/N)Λ + tr(Λ)/N·I as the ICL form mutants plant it: ``n_plus_1`` puts N + 1 for N,
    ``gamma_is_lambda`` takes Γ_N = Λ, any other kind keeps Γ_N.

        >>> _planted_gamma(np.eye(1), 2, "n_plus_1"), _planted_gamma(np.eye(1), 2, "gamma_is_lambda")
        (array([[1.66666667]]), array([[1.]]))
    """
    if kind == "gamma_is_lambda":
        return L
    Nn = N + 1 if kind == "n_plus_1" else N
    return (1 + 1 / Nn) * L + np.trace(L) / Nn * np.eye(L.shape[0])


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


# --------------------------------------------------------------------------------------------
# the statements' hypotheses, shared by the claims of icl, icl_minimum and icl_risk. Their
# counterexamples compute the LSA's population loss EXACTLY under the changed data law
# (theory.icl.exact_lsa_loss: the LSA's matrix product expanded as a polynomial in the data, each
# monomial replaced by its moment), at small d and N with a diagonal Λ, in rational arithmetic (a
# violation is an exact inequality, tolerance 0).

_EXACT = "exact rational arithmetic (SymPy): any non-zero difference is a violation, no rounding"


def _b_weights(B) -> tuple[sp.Matrix, sp.Matrix]:
    """SymPy LSA weights with w22 = 1, W11 = B and every other block 0."""
    B = sp.Matrix(B)
    d = B.rows
    PV, KQ = sp.zeros(d + 1, d + 1), sp.zeros(d + 1, d + 1)
    PV[d, d] = 1
    KQ[:d, :d] = B
    return PV, KQ


def _gamma_inv(lam, N) -> sp.Matrix:
    """Γ_N⁻¹ for Λ = diag(lam), exact (theory.icl.gamma_n)."""
    return ti.gamma_n(sp.diag(*lam), sp.Integer(N)).inv()


def _exact_minimiser(d: int, N: int, lam, **law) -> tuple[sp.Matrix, sp.Expr]:
    """The minimiser over B (w22 = 1, W11 = B, other blocks 0) of the exact loss under ``law``
    (the loss is quadratic in B: its gradient solved exactly), and the minimum."""
    Bs = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"b_{i + 1}{j + 1}"))
    loss = ti.exact_lsa_loss(*_b_weights(Bs), N, lam, **law)
    sol = sp.solve([sp.diff(loss, b) for b in Bs], list(Bs), dict=True)
    return Bs.subs(sol[0]), sp.nsimplify(loss.subs(sol[0]))


def _fmt(M) -> str:
    return str(sp.Matrix(M).tolist()) if isinstance(M, sp.MatrixBase) else str(M)


def _law(hyp: str, d: int, N: int) -> tuple[str, dict]:
    """The changed data law that drops hypothesis ``hyp`` (everything else as in the setting), in
    words and as arguments of theory.icl.exact_lsa_loss, at dimension ``d`` and prompt length ``N``."""
    if hyp == "gaussian_x":
        return "x = ±√λ coordinatewise (Rademacher: same covariance Λ, not Gaussian)", {"x_law": "rademacher"}
    if hyp == "task_standard_gaussian":
        tv = [1, 4] if d > 1 else [2]
        return f"w ~ N(0, diag{tuple(tv)}) (task covariance not I)", {"task_var": tv}
    if hyp == "noise_free":
        return "y_i = ⟨w, x_i⟩ + ε_i, ε_i ~ N(0, 1) (label noise; the query target stays ⟨w, x_q⟩)", \
            {"noise_var": 1, "query_noise": False}
    if hyp in ("rho_eq_N", "rho_eq_M"):
        return f"ρ = 2·{N} (normalisation not the prompt length)", {"rho": 2 * N}
    raise KeyError(hyp)


def _minimiser_moves(hyp: str):
    """Counterexample factory for icl.gamma_n_global_min: with ``hyp`` dropped (d = 2, N = 1, Λ = I)
    the exact minimiser over B is not Γ_N⁻¹ (and L(Γ_N⁻¹) is above the exact minimum)."""
    def cx(ctx) -> Counterexample:
        d, N, lam = 2, 1, [1, 1]
        what, law = _law(hyp, d, N)
        Bstar, lmin = _exact_minimiser(d, N, lam, **law)
        Gi = _gamma_inv(lam, N)
        gap = float(ti.exact_lsa_loss(*_b_weights(Gi), N, lam, **law) - lmin)
        err = worst([abs(float(v)) for v in (Bstar - Gi)])
        return Counterexample({"d": d, "N": N, "Lambda": "I_2", "law": what}, "minimiser_over_B",
                              f"the exact loss is minimised at B = {_fmt(Bstar)}, not at Γ_N⁻¹ = {_fmt(Gi)}; "
                              f"L(Γ_N⁻¹) exceeds the minimum by {gap:.4g}",
                              violated=err > 0 and gap > 0, error=err, tolerance=0.0, justification=_EXACT,
                              details={"loss_gap": gap})
    return cx


def _formula_changes(hyp: str, clause: str, exact_fn, form_value, what: str, sizes: dict):
    """Counterexample factory: with ``hyp`` dropped (d = 1, Λ = 1, the prompt lengths ``sizes``) the
    exact value ``exact_fn(law)`` differs from the claim's closed form ``form_value()`` (SymPy numbers).
    A changed ρ is ``2·`` the prompt length the loss is taken at (``M`` when given, else ``N``)."""
    def cx(ctx) -> Counterexample:
        words, law = _law(hyp, 1, sizes.get("M", sizes["N"]))
        ex, fo = exact_fn(law), form_value()
        err = abs(float(ex - fo))
        return exceeds({"d": 1, **sizes, "Lambda": 1, "law": words}, clause,
                       f"exact {what} = {ex} under this law; the closed form gives {fo}",
                       error=err, tolerance=0.0, justification=_EXACT)
    return cx


def _note_lambda(what: str) -> str:
    return ("not shown necessary: the Isserlis moments behind this formula need only a covariance (Λ ⪰ 0, Λ ≠ 0); at "
            f"Λ = diag(1, 0) the exact {what} (theory.icl.exact_lsa_loss) agrees with it (tests/test_statements_icl.py). "
            "Λ ≻ 0 is the data model of ZFB and the lecture notes; the uniqueness of the minimiser (icl.gamma_n_global_min) needs it")


_NOTE_N = "part of the setting: h = (1/N) Σ_{i≤N} y_i x_i averages over the N ≥ 1 context examples"


_H_GAUSS = r"x_1,\dots,x_N,x_q\overset{\text{iid}}{\sim}\mathcal N(0,\Lambda)"


_H_LAMBDA = r"\Lambda\succ0"


_H_TASK = r"w\sim\mathcal N(0,I_d)\ \text{independent of the }x\text{'s}"


_H_NOISE = r"y_i=\langle w,x_i\rangle\ \text{(noise-free labels)}"


_H_N = r"N\ge1"


_GENERAL_DN = ((1, 1), (1, 5), (3, 1), (3, 5), (4, 1), (4, 5))


_GENERAL_DNM = ((1, 1, 1), (1, 5, 2), (3, 1, 5), (3, 5, 1), (4, 1, 2), (4, 5, 5))


def _general_dn_pairs(D, form_side, general_side, rng) -> dict:
    """(``form_side(Λ, N)``, ``general_side`` of the symbolic-size result of ``D`` at Λ) at each (d, N) of
    :data:`_GENERAL_DN`, Λ a random SPD matrix."""
    d, N = D.facts["sizes"]
    out = {}
    for k, n in _GENERAL_DN:
        L = ni.random_spd(rng, k)
        out[f"general_d{k}_N{n}"] = (form_side(L, n), general_side(_eval_general(D.result, {d: k, N: n}, Lambda=L)))
    return out


def _general_gamma_inv_pairs(form, rng) -> dict:
    """(form's Γ_N⁻¹, the general minimiser of :func:`theory.icl.derive_global_min_general`) at each (d, N)."""
    return _general_dn_pairs(ti.derive_global_min_general(), lambda L, n: np.linalg.inv(form(L, n)), lambda g: g, rng)


def _general_minimum_pairs(form, rng) -> dict:
    """(form, the general minimum of :func:`theory.icl.derive_loss_minimum_general`) at each (d, N)."""
    return _general_dn_pairs(ti.derive_loss_minimum_general(), lambda L, n: float(form(L, n)), float, rng)


def _general_risk_pairs(form, rng) -> dict:
    """(form, the general risk of :func:`theory.icl.derive_linear_task_risk_general`, with G = Γ_N) at each
    (d, N, M) of ``_GENERAL_DNM``."""
    D = ti.derive_linear_task_risk_general()
    d, N, M = D.facts["sizes"]
    out = {}
    for k, n, m in _GENERAL_DNM:
        L = ni.random_spd(rng, k)
        G = _eval_general(D.facts["Gamma_N"], {d: k, N: n}, Lambda=L)
        out[f"general_d{k}_N{n}_M{m}"] = (float(form(L, n, m)),
                                          float(_eval_general(D.result, {d: k, N: n, M: m}, Lambda=L, G=G)))
    return out


_H_RHO_N = r"\rho=N"


# --------------------------------------------------------------------------------------------
# helpers shared by the claim modules icl_further and icl_gd

def _limits_ffp(n_mc: int, n_slopes: int, S: int) -> dict:
    """Monte Carlo entries at 5 SE (normal) and trained-seed slopes at 6 SE (t, S − 1 dof), union bound."""
    a = false_failure_probability(K_SIGMA, n_mc)
    b = false_failure_probability(6.0, n_slopes, dof=S - 1)
    return {"per_entry": b["per_entry"], "entries": n_mc + n_slopes, "k": K_SIGMA,
            "union_bound": smallest(1.0, a["union_bound"] + b["union_bound"]),
            "model": f"{n_mc} Monte Carlo entries: normal at 5 SE; {n_slopes} slopes: {b['model'].split(',')[0]} at 6 SE"
                     ", two-sided, union bound over the entries"}


def _zfb_pair(ctx):
    rng = ctx.rng("Lambda")
    return ni.random_spd(rng, 3, 1.0, 3.0), 4


def _gf_from_origin(L: np.ndarray, N: int):
    """Gradient flow on L(u, U) = L_B(uU) started at u = 0, U = 0 (not ZFB's initialisation): one round."""
    d = L.shape[0]
    return ni.gradient_flow(L, N, init=(0.0, np.zeros((d, d))), t_end=1e-6)
