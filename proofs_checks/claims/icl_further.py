"""Group B, continued: the general-target erratum, limits, one step of gradient descent, non-convexity
of the loss, and trained transformers against baselines (lecture notes 000, 002, 003; Zhang–Frei–Bartlett
2024, von Oswald et al. 2023, Garg et al. 2022). Conventions as in :mod:`proofs_checks.claims.icl`."""


from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, compare, register, worst
from proofs_checks.tolerances import EPS, K_SIGMA
from proofs_checks.comparisons import false_failure_probability, largest, smallest, z_test
from theory import icl as ti
from proofs_checks.claims._icl_common import (_closed_form_vs_mc_figure, _lam_subs, _numeric_gamma_inv, _rel, _resolved,
                                             _criteria_margin, _rounding_pairs, _trained, _trained_prompts)


# --------------------------------------------------------------------------------------------
# icl.general_target_risk (erratum)     form: (Lambda, N, M, a, Sigma, min_risk) -> risk


def _gen_symbolic(form, ctx) -> CheckResult:
    """vs the excess risk derived from second moments (eigenbasis d = 2, general a, Σ), evaluated in a
    rotated basis too (the form must be rotation invariant)."""
    rng = ctx.rng()
    D = ti.derive_general_target_risk(2)
    Ls, a, Sg, myy = D.facts["Lambda"], D.facts["a"], D.facts["Sigma"], D.facts["m_yy"]
    lsyms = [Ls[0, 0], Ls[1, 1]]
    ssyms = sorted(Sg.free_symbols, key=str)
    f = sp.lambdify([lsyms, list(a), ssyms, ti.Nsym, ti.Msym], D.result, "numpy")
    errs = {}
    for N, M in ((1, 1), (2, 5), (4, 3), (20, 20)):
        ev = rng.uniform(1, 4, 2)
        av = rng.normal(size=2)
        A = rng.normal(size=(2, 2))
        Sv = A @ A.T + 0.1 * np.eye(2)
        sub = {Sg[0, 0]: Sv[0, 0], Sg[0, 1]: Sv[0, 1], Sg[1, 1]: Sv[1, 1]}
        mn = float(rng.uniform(0, 1))
        ref = float(f(list(ev), list(av), [sub[s] for s in ssyms], N, M)) + mn
        q, _ = np.linalg.qr(rng.normal(size=(2, 2)))
        L = (q * ev) @ q.T
        got = float(form(L, N, M, q @ av, q @ Sv @ q.T, mn))
        errs[f"N{N}_M{M}"] = (got, ref)
    return _rounding_pairs(errs, 1e4 * EPS, "float64 rounding incl. a rotation of Λ, a, Σ (1e4 ulp; error "
                           "|form − ref|/(1 + |ref|))", seeds=[ctx.seed_for()], sizes={"d": 2})


_TARGETS = (("linear+noise", "linear", 0.5), ("tanh", "tanh", 0.0), ("cubic+noise", "cubic", 0.3))


def _gen_mc(form, ctx) -> CheckResult:
    """Monte Carlo risk of the optimal LSA (numeric Γ_N^{-1}) on nonlinear and noisy targets with exact
    a, Σ, min risk (Gauss–Hermite quadrature); 5 SE. Two estimates per target on the same sampled
    contexts: (1) conditional: the query integrated out exactly given the context (ŷ = x_qᵀu is linear
    in x_q: E[(x_qᵀu − y_q)² | u] = uᵀΛu − 2uᵀE[x_q y_q] + E[y_q²], the law's quadrature moments), with
    h − E[xy] (mean 0) as control variates fitted on an independent pilot batch; this one sets the
    resolution; (2) the plain sampled-query estimate, which uses no quadrature moment, so that an error
    in them is still caught (at the plain estimate's resolution). SE = std of the (adjusted) sample/√n."""
    d, n = 3, ctx.size(50_000, 400_000)
    N, M = 3, 4

    def reference():  # form-independent: the target laws and the Monte Carlo risk of the optimal LSA
        rng, out = ctx.rng(), []
        for k, (name, link, noise) in enumerate(_TARGETS):
            L = ni.random_spd(rng, d, 1.0, 2.0)
            w0 = rng.normal(size=d)
            w0 /= math.sqrt(w0 @ L @ w0)  # ⟨w0, x⟩ ~ N(0, 1): the nonlinearity matters
            law = ni.target_law(L, w0, link, noise)
            Gi = _numeric_gamma_inv(L, N)
            s, sp_ = ctx.seed_for("mc", k), ctx.seed_for("pilot", k)
            Exy = L @ law.a  # E[x y] (quadrature)

            def cond(size, seed):
                X, y, xq, yq = ni.sample_target_prompts(law, M, size, seed=seed)
                h = np.einsum("nm,nmd->nd", y, X) / M
                u = np.einsum("de,nd->ne", Gi, h)  # ŷ = x_qᵀ Giᵀ h = x_qᵀ u
                c = np.einsum("nd,de,ne->n", u, L, u) - 2 * u @ Exy + law.Ey2
                plain = (np.einsum("nd,nd->n", xq, u) - yq) ** 2
                return c, h - Exy, plain

            c, F, plain = cond(n, s)
            pc, pF, _ = cond(largest(n // 8, 2048), sp_)
            m, se, _ = ni.mc_mean_cv(c, F, pc, pF)
            out.append((name, L, law, s, m, se, *ni.mc_mean(plain)))
        return out

    zs, seeds, det = {}, [], {}
    for name, L, law, s, m, se, mp, sep in ctx.reference("mc", reference):
        seeds.append(s)
        val = float(form(L, N, M, law.a, law.Sigma, law.min_risk))
        zs[name] = (m, se, val)
        zs[f"{name} (sampled query)"] = (mp, sep, val)
        det[name] = {"mc": m, "se": se, "mc_sampled_query": mp, "se_sampled_query": sep, "form": val,
                     "min_risk": law.min_risk}
    _closed_form_vs_mc_figure(ctx, "risk_vs_monte_carlo", "General-target risk (N=3, M=4): form vs Monte Carlo",
                              [(k, v["form"], v["mc"], v["se"]) for k, v in det.items()], "E(ŷ − y)²")
    return z_test(zs, what="the Monte Carlo risk (query integrated exactly with the law's quadrature moments, "
                  "context control variate h − E[xy]; and the plain sampled-query estimate)", seeds=seeds,
                  sizes={"d": d, "N": 3, "M": 4, "prompts": n, "pilot_prompts": largest(n // 8, 2048)},
                  details={"values": det})


def _gen_mut(kind):
    def f(Lambda, N, M, a, Sigma, min_risk):
        L = np.asarray(Lambda, float)
        d = L.shape[0]
        a = np.asarray(a, float)
        G = L if kind == "gamma_is_lambda" else (1 + 1 / N) * L + np.trace(L) / N * np.eye(d)
        Gi2 = np.linalg.inv(G @ G)
        t = np.trace(L)
        nrm = lambda A: float(a @ A @ a)  # noqa: E731
        first = np.trace(np.asarray(Sigma) @ Gi2 @ L) / (N if kind == "N_for_M" else M)
        second = (nrm(Gi2 @ L @ L @ L) + 2 * t * nrm(Gi2 @ L @ L) + t**2 * nrm(Gi2 @ L)) / N**2
        return float(min_risk) + first + (0.0 if kind == "no_1_over_N2" else second)
    return f


register(Claim(
    id="icl.general_target_risk",
    title="ZFB Thm 4.2: risk on any target law (lecture notes 000 garbles the norms)",
    statement=r"\mathbb E(\hat y-y)^2=\min_w\mathbb E(\langle w,x\rangle-y)^2+\tfrac1M\operatorname{tr}(\Sigma\Gamma_N^{-2}\Lambda)+\tfrac1{N^2}\big[\|a\|^2_{\Gamma_N^{-2}\Lambda^3}+2\operatorname{tr}(\Lambda)\|a\|^2_{\Gamma_N^{-2}\Lambda^2}+\operatorname{tr}(\Lambda)^2\|a\|^2_{\Gamma_N^{-2}\Lambda}\big]",
    stated_statement=r"\mathbb E(\hat y-y)^2=\min_w\mathbb E(\langle w,x\rangle-y)^2+\tfrac1M\operatorname{tr}(\Sigma\Lambda^{-2}\Lambda)+\tfrac1{N^2}\big(\|a\|^2_{\Lambda^{-2}\Lambda}+2\operatorname{tr}(\Lambda)\|a\|^2_{\Lambda^{-2}\Lambda}+\operatorname{tr}(\Lambda)^2\|a\|^2_{\Lambda^{-2}\Lambda}\big)",
    source="lecture notes 000 (as stated, garbled); Zhang, Frei, Bartlett (JMLR 2024) Thm 4.2 (corrected)",
    kind="erratum",
    form=ti.general_target_risk,
    stated=ti.stated_general_target_risk,
    derivation=lambda: ti.derive_general_target_risk(2),
    notes="Lecture notes 000 writes every norm as ‖a‖_{Λ^{-2}Λ} and the trace as tr(ΣΛ^{-2}Λ); the paper has Γ_N^{-2} and Λ³, Λ², Λ.",
    checks=(
        Check("risk_vs_sympy", "symbolic", _gen_symbolic, "vs the second-moment derivation, rotated basis"),
        Check("risk_vs_monte_carlo", "numeric", _gen_mc, "Monte Carlo on linear+noise, tanh and cubic targets (query integrated exactly, control variate; and plain), 5 SE"),
    ),
    mutants=(
        Mutant("dropped_1_over_N2_term", "dropped term", "the (1/N²) term dropped", _gen_mut("no_1_over_N2")),
        Mutant("N_for_M_in_variance_term", "swapped index", "(1/N) tr(ΣΓ^{-2}Λ) instead of 1/M", _gen_mut("N_for_M")),
        Mutant("gamma_equals_lambda", "wrong formula", "Γ_N = Λ in both terms", _gen_mut("gamma_is_lambda")),
    ),
))


# --------------------------------------------------------------------------------------------
# icl.limits     form: {"gamma_inf": Λ -> Γ_∞, "risk_M_inf": (Λ, N) -> lim_M R, "shift_factor": c -> ŷ/y_q}


def _limits_symbolic(form, ctx) -> CheckResult:
    rng = ctx.rng()
    D = ti.derive_limits(2)
    Ls = D.facts["Lambda"]
    order = sorted(Ls.free_symbols, key=str)
    fg = sp.lambdify([order], D.result["gamma_inf"], "numpy")
    lam, t = ti.derive_linear_task_risk(1).facts["eigen_symbols"]
    fr = sp.lambdify([lam, t, ti.Nsym], D.result["risk_M_inf"], "numpy")
    c = sp.Symbol("c", positive=True)
    fs = sp.lambdify([c], D.result["shift_factor"], "numpy")
    # the derived double limit lim_{N,M→∞} R is a SymPy number: exactly 0 (counted, no relative resolution)
    extra = {"risk_NM_inf": abs(float(D.result["risk_NM_inf"]))}
    L = ni.random_spd(rng, 2)
    sub = _lam_subs(Ls, L)
    pairs = {"gamma_inf": (form["gamma_inf"](L), np.asarray(fg([sub[s] for s in order]), float))}
    for N in (1, 3, 30):
        L4 = ni.random_spd(rng, 4)
        ev = np.linalg.eigvalsh(L4)
        pairs[f"risk_M_inf_N{N}"] = (float(form["risk_M_inf"](L4, N)), float(np.sum(fr(ev, ev.sum(), N))))
    for cv in (0.5, 2.0, 3.0):
        pairs[f"shift_c{cv}"] = (float(form["shift_factor"](cv)), float(fs(cv)))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding (relative errors ‖form − ref‖/‖ref‖; the double limit "
                           "exactly 0)", a=0.0, extra=extra, seeds=[ctx.seed_for()], sizes={"d": [2, 4]})


def _limits_numeric(form, ctx) -> CheckResult:
    """Γ_N at N = 1e9 (numeric moments) vs Γ_∞; Monte Carlo of the M = ∞ predictor x_qᵀΓ_N^{-1}Λw
    (S = E[xxᵀ] exactly) vs the M → ∞ risk (5 SE); covariate shift measured on the trained LSAs
    (16 seeds, N = 4): the least-squares slope of ŷ on y_q at test scale c equals the form's factor
    times κ_N = tr(ΛΓ_N⁻¹Λ)/tr Λ (the finite-N constant, → 1 as N → ∞), within 5 SE across seeds.
    The slope itself, not a ratio of slopes (a ratio is c² for every LSA by homogeneity)."""
    rng = ctx.rng()
    det = {}
    L = ni.random_spd(rng, 3)
    hh, _ = ni.population_moments(L, 10**9)
    Gbig = np.linalg.solve(L, hh)
    g_form = np.asarray(form["gamma_inf"](L), float)
    TOL_G = 1e-8  # O(1/N) = 1e-9 from the finite N
    tol_exact = 64 * 27 * EPS  # float64 rounding of a 3×3 solve and products: 64·n·eps, n = d³ = 27
    n = ctx.size(200_000, 800_000)
    seeds, rows, risk = [], [], {}
    for k, N in enumerate((2, 5)):
        s = ctx.seed_for("mc", k)
        seeds.append(s)
        r2 = np.random.default_rng(s)
        Gi = _numeric_gamma_inv(L, N)
        C = np.linalg.cholesky(L)
        w = r2.normal(size=(n, 3))
        xq = r2.normal(size=(n, 3)) @ C.T
        err = (np.einsum("nd,de,ne->n", xq, Gi.T @ L, w) - np.einsum("nd,nd->n", xq, w)) ** 2
        m, se = ni.mc_mean(err)
        # the same risk exactly: ŷ − y_q = x_qᵀ A w with A = (Γ_N⁻¹)ᵀΛ − I (numeric Γ_N⁻¹), so E = tr(AᵀΛA)
        A = Gi.T @ L - np.eye(3)
        risk[N] = (float(form["risk_M_inf"](L, N)), m, se, float(np.trace(A.T @ L @ A)))
        rows.append((f"N={N}", risk[N][0], m, se))
    _closed_form_vs_mc_figure(ctx, "risk_M_infinity", "Risk as M → ∞: limit form vs Monte Carlo", rows, "risk")
    Lt, Nt, res, tseed = _trained(ctx.mode, ctx.seed, ctx.device)
    seeds.append(tseed)
    ps = ctx.seed_for("shift")
    n_shift = ctx.size(2000, 4000)

    def shift_reference():  # form-independent: each trained seed's slope of ŷ on y_q at each scale c
        out, out_cv = {}, {}
        S = res.Wpv.shape[0]
        d = res.B.shape[-1]
        Wb = torch.zeros_like(res.Wpv)
        Wb[:, d, d] = 1.0
        Kb = torch.zeros_like(res.Wkq)
        Kb[:, :d, :d] = torch.from_numpy(res.B)
        for k, cv in enumerate((0.5, 1.0, 2.0)):
            # each seed its own prompts, so that the seed spread includes the prompts' sampling noise
            P = ni.sample_prompts(Lt, 8 * Nt, (S, n_shift), seed=ps + k, scale=cv)
            with torch.no_grad():
                yh = ni.lsa_forward(res.Wpv[:, None], res.Wkq[:, None], P.E, float(8 * Nt)).numpy()  # (S, n)
                yb = ni.lsa_forward(Wb[:, None], Kb[:, None], P.E, float(8 * Nt)).numpy()  # the seeds' B block alone
            yq = P.y_q.numpy()
            out[cv] = (yh * yq).sum(-1) / (yq * yq).sum(-1)  # (S,) least-squares slope of ŷ on y_q per seed
            # control variate: the B-only model's slope on the same prompts, replaced by its exact value
            # c²·tr(ΛBΛ)/tr(Λ) (E ŷ_B y_q = c⁴tr(ΛBΛ), E y_q² = c²tr Λ): removes the prompts' sampling noise
            exact_b = cv**2 * np.einsum("de,sef,fd->s", Lt, res.B, Lt) / np.trace(Lt)
            out_cv[cv] = out[cv] - (yb * yq).sum(-1) / (yq * yq).sum(-1) + exact_b
        return out, out_cv

    slopes, slopes_cv = ctx.reference("shift_slopes", shift_reference)
    # the slope of the trained model at scale c is c²·κ_N with κ_N = tr(ΛΓ_N⁻¹Λ)/tr(Λ) (E ŷ y_q =
    # c⁴tr(ΛΓ_N⁻¹Λ), E y_q² = c²tr Λ; exact for any M); κ_N → 1 as N → ∞, where the factor is c²
    kappa = float(np.trace(Lt @ _numeric_gamma_inv(Lt, Nt) @ Lt) / np.trace(Lt))
    S = len(slopes[1.0])
    shift = {}
    for cv in (0.5, 2.0):
        pred = float(form["shift_factor"](cv)) * kappa
        for tag, sl in (("", slopes), ("_control_variate", slopes_cv)):
            m, se = float(np.mean(sl[cv])), float(np.std(sl[cv], ddof=1) / math.sqrt(S))
            shift[f"c{cv}{tag}"] = (pred, m, se)
            det[f"slope_c{cv}{tag}"] = {"measured": m, "se": se, "form_factor_times_kappa": pred, "kappa_N": kappa}

    def errs_at(delta: float) -> dict:  # every reference (Γ at N = 1e9, exact and MC risk, measured slopes) × (1 + δ)
        out = {"gamma_inf": _rel(g_form, Gbig * (1 + delta)) / TOL_G * K_SIGMA}
        for N, (v, m, se, ex) in risk.items():
            out[f"risk_M_inf_N{N}_z"] = abs(v - m * (1 + delta)) / se
            out[f"risk_M_inf_N{N}_exact"] = abs(v - ex * (1 + delta)) / abs(ex * (1 + delta)) / tol_exact * K_SIGMA
        for cv, (pred, m, se) in shift.items():
            # 6 SE across the 16 seeds (t with 15 dof), as for the trained weights in icl.gamma_n_global_min
            out[f"shift_slope_{cv}_z_over_6"] = abs(m * (1 + delta) - pred) / se / 6.0 * K_SIGMA
        return out

    # each part's resolution (relative change of its reference), by the triangle inequality
    eg = _rel(g_form, Gbig)
    parts = {"gamma_inf": (TOL_G + eg) / (1 - TOL_G - eg)}
    for N, (v, m, se, ex) in risk.items():
        parts[f"risk_M_inf_N{N}_exact"] = (tol_exact * abs(ex) + abs(v - ex)) / abs(ex) / (1 - tol_exact)
        parts[f"risk_M_inf_N{N}_monte_carlo"] = (K_SIGMA * se + abs(v - m)) / abs(m)
    for cv, (pred, m, se) in shift.items():
        parts[f"shift_slope_{cv}"] = (6 * se + abs(m - pred)) / abs(m)
    det["risk_M_inf"] = {f"N{N}": {"form": v, "mc": m, "se": se, "exact_quadratic_form": ex} for N, (v, m, se, ex) in risk.items()}
    return _resolved(errs_at, K_SIGMA, "MC z-scores ≤ 5; the M = ∞ risk also exactly (tr(AᵀΛA), A = Γ_N⁻ᵀΛ − I) within "
                     "64·27·eps relative (scaled so the bound maps to 5); trained-seed slopes within 6 SE (t, 15 dof; "
                     "scaled so 6 maps to 5), raw and with the B-block control variate (its slope on the same prompts "
                     "replaced by the exact c²tr(ΛBΛ)/trΛ); Γ at N = 1e9 within 1e-8 relative (scaled so the bound maps to 5)", parts,
                     seeds=seeds, sizes={"prompts": n, "shift_prompts": n_shift}, device=res.device,
                     details={"errors": errs_at(0.0), **det, "false_failure_probability": _limits_ffp(len(risk), len(shift), S)})


def _limits_form():
    return {
        "gamma_inf": lambda L: np.asarray(L, float),
        "risk_M_inf": lambda L, N: float(np.trace(np.linalg.inv(ti.gamma_n(L, N)) @ np.linalg.inv(ti.gamma_n(L, N))
                                                  @ L @ np.linalg.matrix_power(L + np.trace(L) * np.eye(len(L)), 2)) / N**2),
        "shift_factor": lambda c: c**2,
    }


def _limits_mut(key, fn):
    f = dict(_limits_form())
    f[key] = fn
    return f


register(Claim(
    id="icl.limits",
    title="Limits N → ∞ and M → ∞; no transfer under covariate shift",
    statement=r"\Gamma_N\to\Lambda\ (N\to\infty);\ \lim_{M\to\infty}R=\tfrac1{N^2}\operatorname{tr}\big(\Gamma_N^{-2}\Lambda(\Lambda+\operatorname{tr}(\Lambda)I)^2\big)\to0;\ \hat y\to x_q^\top\Lambda^{-1}\big(\tfrac1M\textstyle\sum x_ix_i^\top\big)w\to x_q^\top w;\ x\mapsto cx:\ \hat y/y_q\to c^2",
    source="lecture notes 000 (remarks after the theorem); Zhang, Frei, Bartlett (JMLR 2024)",
    kind="theorem",
    form=_limits_form(),
    derivation=lambda: ti.derive_limits(2),
    checks=(
        Check("limits_vs_sympy", "symbolic", _limits_symbolic, "vs sp.limit of Γ_N and of the derived risk"),
        Check("limits_numeric_and_shift", "numeric", _limits_numeric, "large-N Γ, M = ∞ Monte Carlo, covariate shift on the trained LSA", uses_device=True),
    ),
    mutants=(
        Mutant("gamma_inf_with_trace", "wrong formula", "Γ_∞ = Λ + tr(Λ)I", _limits_mut("gamma_inf", lambda L: np.asarray(L, float) + np.trace(L) * np.eye(len(L)))),
        Mutant("risk_vanishes_at_finite_N", "dropped term", "lim_M R = 0 for finite N (1/N² term dropped)", _limits_mut("risk_M_inf", lambda L, N: 0.0)),
        Mutant("shift_factor_c", "wrong constant", "ŷ/y_q → c", _limits_mut("shift_factor", lambda c: c)),
    ),
))


# --------------------------------------------------------------------------------------------
# icl.gd_one_step    form: (X (n,N,d), y (n,N), x_q (n,d), W0 (d,), eta) -> (new labels (n,N), prediction (n,))


def gd_layer(X, y, x_q, W0, eta, *, p_scale=None, v_sign=-1.0, include_query=False, pred_sign=-1.0):
    """One linear-attention layer with ``W_K = W_Q = [[I,0],[0,0]]``, ``W_V = [[0,0],[W_0, −1]]``,
    ``P = (η/N) I``; keys/values over the context tokens; the query token is ``(x_q, −W_0 x_q)``.
    Returns the context tokens' updated labels and minus the query's updated label (the prediction)."""
    n, N, d = X.shape
    tok = np.concatenate([X, y[..., None]], -1)  # (n, N, d+1) rows are tokens
    q = np.concatenate([x_q, -(x_q @ W0)[:, None]], -1)
    WK = np.diag(np.append(np.ones(d), 0.0))
    WV = np.zeros((d + 1, d + 1))
    WV[d, :d] = W0
    WV[d, d] = v_sign
    P = (eta / (N if p_scale is None else p_scale)) * np.eye(d + 1)
    keys = np.concatenate([tok, q[:, None]], 1) if include_query else tok
    V = keys @ WV.T
    K = keys @ WK.T

    def upd(e):  # e (n, T, d+1)
        A = np.einsum("nid,ntd->nti", K, e @ WK.T)
        return e + np.einsum("nti,nid->ntd", A, V) @ P.T

    new_tok = upd(tok)
    new_q = upd(q[:, None])[:, 0]
    return new_tok[..., d], pred_sign * new_q[:, d]


def _gd_symbolic(form, ctx) -> CheckResult:
    d, N = 2, 2
    D = ti.derive_gd_one_step(d, N)
    s = D.facts["symbols"]
    args = [s["eta"], *[e for x in s["xs"] for e in x], *s["ys"], *s["W0"]]
    f = sp.lambdify(args, [D.result[j][d] for j in range(N)], "numpy")
    rng = ctx.rng()
    pairs = {}
    for i in range(10):
        X, y, xq = rng.normal(size=(1, N, d)), rng.normal(size=(1, N)), rng.normal(size=(1, d))
        W0, eta = rng.normal(size=d), float(rng.uniform(0.1, 2))
        ref = np.array(f(eta, *X[0].ravel(), *y[0], *W0), float)
        new_y, _ = form(X, y, xq, W0, eta)
        for j in range(N):
            pairs[f"draw{i}_label{j}"] = (float(new_y[0, j]), float(ref[j]))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding (absolute error |form − ref| of O(1) labels)", b=0.0,
                           seeds=[ctx.seed_for()], sizes={"d": d, "N": N})


def _gd_numeric(form, ctx) -> CheckResult:
    """vs one GD step computed by torch autograd on (1/2N)Σ(W x_i − y_i)²."""
    rng = ctx.rng()
    n, N, d = 32, 9, 4
    X, y, xq = rng.normal(size=(n, N, d)), rng.normal(size=(n, N)), rng.normal(size=(n, d))
    W0, eta = rng.normal(size=d), 0.7
    W = torch.tensor(np.broadcast_to(W0, (n, d)).copy(), requires_grad=True)
    loss = 0.5 * ((torch.einsum("nkd,nd->nk", torch.from_numpy(X), W) - torch.from_numpy(y)) ** 2).mean(-1).sum()
    (g,) = torch.autograd.grad(loss, W)
    W1 = (W - eta * g).detach().numpy()
    dW = W1 - W0
    ref_y = y - np.einsum("nd,nkd->nk", dW, X)
    ref_pred = np.einsum("nd,nd->n", W1, xq)
    new_y, pred = form(X, y, xq, W0, eta)
    pairs = {f"label_{i}_{j}": (float(new_y[i, j]), float(ref_y[i, j])) for i in range(n) for j in range(N)}
    pairs.update({f"prediction_{i}": (float(pred[i]), float(ref_pred[i])) for i in range(n)})
    return _rounding_pairs(pairs, 1e4 * EPS, "float64 rounding over N·d = 36 products (absolute error |form − ref| of "
                           "O(1) values)", b=0.0, seeds=[ctx.seed_for()], sizes={"n": n, "N": N, "d": d},
                           details={"labels": float(np.max(np.abs(new_y - ref_y))),
                                    "prediction": float(np.max(np.abs(pred - ref_pred)))})


#: RMS standard errors within which the trained seeds' mean prediction must sit (t tails with 15 dof: 6 keeps a
#: correct form's false-failure probability per fresh seed near 1e-4; 3 gave ≈ 1e-2 at worst)
K_RMS = 6.0


def _limits_ffp(n_mc: int, n_slopes: int, S: int) -> dict:
    """Monte Carlo entries at 5 SE (normal) and trained-seed slopes at 6 SE (t, S − 1 dof), union bound."""
    a = false_failure_probability(K_SIGMA, n_mc)
    b = false_failure_probability(6.0, n_slopes, dof=S - 1)
    return {"per_entry": b["per_entry"], "entries": n_mc + n_slopes, "k": K_SIGMA,
            "union_bound": smallest(1.0, a["union_bound"] + b["union_bound"]),
            "model": f"{n_mc} Monte Carlo entries: normal at 5 SE; {n_slopes} slopes: {b['model'].split(',')[0]} at 6 SE"
                     ", two-sided, union bound over the entries"}


def _gd_trained(form, ctx) -> CheckResult:
    """The statement's second half on trained models: the trained full-parameter LSAs (the shared
    batch of 16 seeds, N = 4) predict on fresh prompts what the form's layer predicts with W_0 = 0,
    η = 1 on whitened tokens x ↦ Γ_N^{-1/2}x (one GD step preconditioned by Γ_N^{-1}; Γ_N from the
    numeric Isserlis moments): seed-mean RMS difference within 6 RMS standard errors (across
    seeds), raw and with the exact-population control variate of icl.gamma_n_global_min; and each
    seed's least-squares slope of its predictions on the step's within 6 SE of 1 (raw and control
    variate), which sets the resolution (relative change of the step's predictions). The same layer
    on raw tokens (plain GD) must be rejected by the RMS criterion, or the check has no power and fails."""
    L, N, res, tseed = _trained(ctx.mode, ctx.seed, ctx.device)
    n, d = 4000, L.shape[0]
    ps = ctx.seed_for("fresh")

    def reference():  # form-independent: the prompts, Γ_N^{-1/2} and the trained predictions
        P = ni.sample_prompts(L, N, (n,), seed=ps)
        with torch.no_grad():
            yh = ni.lsa_forward(res.Wpv[:, None], res.Wkq[:, None], P.E[None], float(N)).numpy()  # (S, n)
        ev, U = np.linalg.eigh(np.linalg.inv(_numeric_gamma_inv(L, N)))
        # control variate per seed (as in icl.gamma_n_global_min): ŷ − ŷ(B_ERM) + ŷ(E[hhᵀ]⁻¹E[hwᵀ]), B_ERM the
        # least-squares B-only minimiser on the seed's own training prompts, its exact population counterpart
        # from the Isserlis moments: removes the prompt-sampling noise, keeps the optimiser's and other blocks' part
        Berm = ni.erm_B(L, N, n_seeds=yh.shape[0], n_prompts=_trained_prompts(ctx.mode), seed=tseed, device=ctx.device)
        h = np.einsum("nm,nmd->nd", P.y.numpy(), P.X.numpy()) / N
        xqn = P.x_q.numpy()
        yb = np.einsum("nd,sde,ne->sn", h, np.asarray(Berm), xqn)
        ypop = np.einsum("nd,de,ne->n", h, _numeric_gamma_inv(L, N), xqn)
        return P.X.numpy(), P.y.numpy(), xqn, (U / np.sqrt(ev)) @ U.T, yh, yh - yb + ypop

    X, y, xq, G_half, yh, ycv = ctx.reference("trained_predictions", reference)
    S = yh.shape[0]
    se = float(np.sqrt(np.mean((yh.std(0, ddof=1) / math.sqrt(S)) ** 2)))
    mean = yh.mean(0)
    se_cv = float(np.sqrt(np.mean((ycv.std(0, ddof=1) / math.sqrt(S)) ** 2)))
    mean_cv = ycv.mean(0)
    with np.errstate(all="ignore"):
        pre = np.asarray(form(X @ G_half, y, xq @ G_half, np.zeros(d), 1.0)[1], dtype=float)
        plain = np.asarray(form(X, y, xq, np.zeros(d), 1.0)[1], dtype=float)
    z_pre = float(np.sqrt(np.mean((mean - pre) ** 2))) / se
    z_plain = float(np.sqrt(np.mean((mean - plain) ** 2))) / se
    power = K_RMS / z_plain if z_plain > 0 else math.inf

    z_cv = float(np.sqrt(np.mean((mean_cv - pre) ** 2))) / se_cv
    # per seed, the least-squares slope of its (control-variate) predictions on the preconditioned step's
    beta = {"raw": (yh @ pre) / float(pre @ pre), "control_variate": (ycv @ pre) / float(pre @ pre)}
    beta_stats = {k: (float(v.mean()), float(v.std(ddof=1) / math.sqrt(S))) for k, v in beta.items()}

    def errs_at(delta: float) -> dict:  # the preconditioned step's predictions scaled by 1 + δ (plain GD fixed)
        z = float(np.sqrt(np.mean((mean - pre * (1 + delta)) ** 2))) / se
        zc = float(np.sqrt(np.mean((mean_cv - pre * (1 + delta)) ** 2))) / se_cv
        out = {"preconditioned_rms_over_6se": z / K_RMS, "control_variate_rms_over_6se": zc / K_RMS,
               "plain_gd_not_rejected": power}
        for k, (bm, bse) in beta_stats.items():  # slope on (1+δ)·pre is β/(1+δ), its SE se/(1+δ)
            out[f"slope_{k}_z_over_6"] = abs(bm - (1 + delta)) / bse / 6.0
        return out

    # relative change of the preconditioned step's predictions: with r = mean − pre, RMS(r − δ·pre)² is a quadratic in δ,
    # q(δ) = ⟨r,r⟩ − 2δ⟨r,pre⟩ + δ²⟨pre,pre⟩ (⟨·,·⟩ the mean over prompts); the entry rejects where q(δ) > (3·SE)², i.e.
    # outside its two roots, so every |δ| > (|⟨r,pre⟩| + √(⟨r,pre⟩² − ⟨pre,pre⟩(⟨r,r⟩ − 9SE²)))/⟨pre,pre⟩ is rejected
    # (exact; the triangle-inequality bound (3·SE + RMS r)/RMS(pre) is reported beside it)
    scale = float(np.sqrt(np.mean(pre**2)))

    def exact_eps(mu: np.ndarray, sd: float) -> float:
        r = mu - pre
        rp, rr, pp = float(np.mean(r * pre)), float(np.mean(r * r)), float(np.mean(pre * pre))
        disc = rp**2 - pp * (rr - K_RMS**2 * sd**2)
        return (abs(rp) + math.sqrt(disc)) / pp if disc >= 0 else math.nan

    eps = {"prediction": exact_eps(mean, se), "prediction_control_variate": exact_eps(mean_cv, se_cv)}
    # the slope entries reject every |δ| > 6·SE_β + |β − 1| (exactly: |β − (1 + δ)| > 6·SE_β)
    eps.update({f"slope_{k}": 6.0 * bse + abs(bm - 1.0) for k, (bm, bse) in beta_stats.items()})
    triangle = {"prediction": (K_RMS * se + z_pre * se) / scale,
                "prediction_control_variate": (K_RMS * se_cv + z_cv * se_cv) / scale}
    return _resolved(errs_at, 1.0, "normalised: seed-mean prediction within 6 RMS standard errors (16 seeds) of the "
                     "preconditioned step, raw and with the exact-population control variate ŷ − ŷ(B_ERM) + "
                     "ŷ(E[hhᵀ]⁻¹E[hwᵀ]); the seeds' least-squares slope of their predictions on the step's within 6 "
                     "standard errors of 1 (across 16 seeds, t with 15 dof, as for w22·W11 in icl.gamma_n_global_min), "
                     "raw and with the control variate; plain GD at least 6 RMS standard errors away (power). False failure per "
                     "fresh seed ≤ 4·P(|t₁₅| > 6) ≈ 1e-4 (the RMS entries are linear in the seed-mean error: at worst one "
                     "t entry each)", eps,
                     units="relative change of the preconditioned step's predictions (RMS)", seeds=[tseed, ps],
                     sizes={"d": d, "N": N, "seeds": S, "fresh": n}, device=res.device,
                     details={"z_preconditioned": z_pre, "z_control_variate": z_cv, "rms_se_control_variate": se_cv,
                              "z_plain_gd": z_plain, "rms_se": se, "rms_prediction": scale, "triangle_bound": triangle, "slope_on_preconditioned": beta_stats,
                              "rms_se_relative": se / scale,
                              "false_failure_probability": false_failure_probability(6.0, 4, dof=S - 1)})


register(Claim(
    id="icl.gd_one_step",
    title="One linear-attention layer implements one step of gradient descent (von Oswald et al.)",
    statement=r"e_j=(x_j,y_j)\mapsto(x_j,\ y_j-\Delta W x_j),\ \Delta W=-\tfrac\eta N\sum_i(W_0x_i-y_i)x_i^\top;\ \hat y=-[\text{query label}]=(W_0+\Delta W)x_q;\ \ \hat y_{LSA}=x_q^\top\,\big(0-\Gamma_N^{-1}\nabla\tfrac1{2M}\textstyle\sum(\langle w,x_i\rangle-y_i)^2\big|_{w=0}\big)",
    source="von Oswald et al. (ICML 2023); Ahn et al. (NeurIPS 2023) Thm 1; lecture notes 002",
    kind="identity",
    form=gd_layer,
    derivation=lambda: ti.derive_gd_one_step(2, 2),
    checks=(
        Check("token_map_vs_sympy", "symbolic", _gd_symbolic, "vs the SymPy expansion of the layer and the GD step"),
        Check("vs_autograd_gd_step", "numeric", _gd_numeric, "vs a GD step computed by torch autograd"),
        Check("trained_lsa_is_preconditioned_gd", "trained", _gd_trained,
              "trained LSAs vs the layer on Γ_N^{-1/2}-whitened tokens (preconditioned GD); plain GD rejected"),
    ),
    mutants=(
        Mutant("P_over_N_plus_1", "wrong constant", "P = η/(N+1) I", lambda *a: gd_layer(*a, p_scale=a[0].shape[1] + 1)),
        Mutant("value_plus_identity", "sign flip", "W_V = [[0,0],[W_0, +1]]", lambda *a: gd_layer(*a, v_sign=1.0)),
        Mutant("query_in_keys", "extra term", "keys/values include the query token", lambda *a: gd_layer(*a, include_query=True)),
        Mutant("prediction_plus_label", "sign flip", "prediction = +(query's updated label)", lambda *a: gd_layer(*a, pred_sign=1.0)),
    ),
))


# --------------------------------------------------------------------------------------------
# icl.nonconvex     form: (Lambda, N) -> smallest Hessian eigenvalue of L(w22, W11) at the origin


def _nc_symbolic(form, ctx) -> CheckResult:
    D = ti.derive_nonconvex(2)
    Ls = D.facts["Lambda"]
    order = sorted(Ls.free_symbols, key=str)
    f = sp.lambdify([order], D.result, "numpy")
    rng = ctx.rng()
    pairs = {}
    for N in (1, 4, 30):
        L = ni.random_spd(rng, 2)
        sub = _lam_subs(Ls, L)
        pairs[f"N{N}"] = (float(form(L, N)), float(f([sub[s] for s in order])))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding (relative error |form − ref|/|ref|)", a=0.0,
                           seeds=[ctx.seed_for()], sizes={"d": 2})


def _jackknife_min_eig(H: np.ndarray) -> tuple[float, float]:
    """The smallest eigenvalue of the mean of the per-batch Hessians ``H (nb, p, p)`` (the Hessian is linear in
    the batch statistics, so the mean is the pooled sample's), bias-corrected and with its standard error by the
    delete-one-batch jackknife: the smallest eigenvalue is a concave function of the matrix, so a mean of
    per-batch eigenvalues is biased low by O(1/batch size) (at quick sizes, 40 batches of 5000 prompts, that bias
    was ≈ 6 SE); the jackknife removes the O(1/n) term."""
    nb = H.shape[0]
    full = float(np.linalg.eigvalsh(H.mean(0))[0])
    loo = np.array([np.linalg.eigvalsh((H.sum(0) - H[k]) / (nb - 1))[0] for k in range(nb)])
    est = nb * full - (nb - 1) * float(loo.mean())
    se = float(np.sqrt((nb - 1) / nb * np.sum((loo - loo.mean()) ** 2)))
    return est, se


def _nc_numeric(form, ctx) -> CheckResult:
    """torch autograd Hessian, over ALL 2(d+1)² weights of W^{PV}, W^{KQ}, of the empirical loss
    ½ mean (ŷ − y_q)² of the full LSA on sampled prompts (through its exact quadratic form in
    θ = W^{PV}_{d+1,:} ⊗ W^{KQ}_{:, :d}), at the origin; smallest eigenvalue vs the
    form within 5 standard errors (40 independent batches: the eigenvalue of the pooled Hessian, bias-corrected, with
    its delete-one-batch jackknife SE). Gradient flow from
    ZFB's init still reaches the global minimum (excess loss ≤ 1e-10, also required). The same
    Hessian again with the linear statistic replaced by its conditional expectation given each sampled
    context (task and query integrated exactly: conditional Monte Carlo), which sets the resolution."""
    d, nb, n = 3, 40, ctx.size(5_000, 20_000)  # SE from 40 batch means: t with 39 dof

    def reference():  # form-independent: sampled Hessian eigenvalues and the gradient-flow end point, per N
        rng, out = ctx.rng(), {}
        for N in (2, 10):
            L = ni.random_spd(rng, d)
            s = ctx.seed_for("prompts", N)
            P = ni.sample_prompts(L, N, (nb, n), seed=s)
            E, yq = P.E, P.y_q

            # ŷ = θ·Φ/N exactly (θ = W^{PV}_{d+1,:} ⊗ W^{KQ}_{:, :d}, Φ from E Eᵀ and x_q; see
            # numerics.icl.lsa_features), so each batch's loss is a quadratic in θ with statistics Q, c, m.
            Phi = ni.lsa_features(E) / float(N)
            Qb = torch.einsum("kpa,kpb->kab", Phi, Phi) / n
            cb = torch.einsum("kpa,kp->ka", Phi, yq) / n
            mb = (yq**2).mean(-1)

            def batch_hessian(k):
                def loss(theta):
                    Wpv = theta[: (d + 1) ** 2].reshape(d + 1, d + 1)
                    Wkq = theta[(d + 1) ** 2:].reshape(d + 1, d + 1)
                    th = (Wpv[d, :, None, None] * Wkq[None, :, :d]).flatten()
                    return 0.5 * (th @ Qb[k] @ th - 2 * th @ cb[k] + mb[k])

                return torch.autograd.functional.hessian(loss, torch.zeros(2 * (d + 1) ** 2, dtype=torch.float64)).numpy()

            eigs = _jackknife_min_eig(np.stack([batch_hessian(k) for k in range(nb)]))
            # conditional Monte Carlo of the same Hessian: at the origin it depends on the loss's linear
            # statistic c = mean Φ y_q only (θ is quadratic in the weights, so θᵀQθ has zero Hessian there);
            # given a sampled context X, E[Φ_{jkl} y_q | X] with w ~ N(0, I), x_q ~ N(0, Λ) integrated exactly
            # is (XᵀXΛ)_{jl} at k = d+1 (label row), (XᵀXΛ)_{kl} at j = d+1, and 0 elsewhere (odd in w)
            XtXL = torch.einsum("kpmd,kpme,ef->kpdf", P.X, P.X, torch.from_numpy(L)) / float(N)  # (nb, n, d, d)
            cc = torch.zeros(nb, d + 1, d + 1, d, dtype=torch.float64)
            cc[:, :d, d, :] = XtXL.mean(1)
            cc[:, d, :d, :] = XtXL.mean(1)
            cb = cc.flatten(1)
            eigs_c = _jackknife_min_eig(np.stack([batch_hessian(k) for k in range(nb)]))
            r = ni.gradient_flow(L, N, seed=ctx.seed_for("gf", N))
            excess = ni.population_loss_B(L, N, r.B) - ni.population_loss_B(L, N, _numeric_gamma_inv(L, N))
            out[N] = (L, s, *eigs, excess, *eigs_c)
        return out

    det, seeds, L_by_N, eig = {}, [], {}, {}
    for N, (L, s, m, se, excess, mc, sec) in ctx.reference("hessian", reference).items():
        L_by_N[N] = L
        seeds.append(s)
        eig[f"N{N}"] = (float(form(L, N)), m, se)
        eig[f"N{N}_conditional"] = (float(form(L, N)), mc, sec)
        det[f"min_eig_N{N}"] = (m, se)
        det[f"min_eig_conditional_N{N}"] = (mc, sec)
        det[f"gf_excess_loss_N{N}"] = excess
    gf = largest(det[f"gf_excess_loss_N{N}"] for N in (2, 10)) / 1e-10 * K_SIGMA

    def errs_at(delta: float) -> dict:  # the sampled eigenvalues scaled by 1 + δ (the GF excess does not move)
        out = {f"z_{k}": abs(v - m * (1 + delta)) / se for k, (v, m, se) in eig.items()}
        out["gf_reaches_min"] = gf
        return out

    parts = {f"min_eig_{k}": (K_SIGMA * se + abs(v - m)) / abs(m) for k, (v, m, se) in eig.items()}
    _closed_form_vs_mc_figure(ctx, "hessian_min_eigenvalue", "Smallest Hessian eigenvalue at the origin: form vs sampled",
                              [(f"N={N}", float(form(L_by_N[N], N)), *det[f"min_eig_N{N}"]) for N in (2, 10)], "λ_min")
    det["false_failure_probability"] = false_failure_probability(K_SIGMA, len(eig), dof=nb - 1)
    return _resolved(errs_at, K_SIGMA, "5 standard errors over 40 independent prompt batches (t with 39 dof: false failure "
                     "per fresh seed ≤ 4·P(|t₃₉| > 5) ≈ 5e-5; 10 batches gave ≈ 3e-3) (z-score of the smallest "
                     "eigenvalue, with the sampled statistics and with their conditional expectations given the contexts; "
                     "GF excess ≤ 1e-10 mapped to 5); resolution (5·SE + |form − mean|)/|mean|, the smallest entry",
                     parts, seeds=seeds,
                     sizes={"d": d, "params": 2 * (d + 1) ** 2, "batches": nb, "prompts_per_batch": n}, details=det)


def _neg_norm(L, N):
    L = np.asarray(L, float)
    return -float(np.linalg.norm(L @ L))


register(Claim(
    id="icl.nonconvex",
    title="The LSA population loss is not convex (negative Hessian eigenvalue at the origin)",
    statement=r"\lambda_{\min}\big(\nabla^2 L(W^{PV},W^{KQ})\big|_{0}\big)=-\|\Lambda^2\|_F<0,\ \text{yet gradient flow from ZFB's init reaches }\min L",
    source="lecture notes 000 (proof ingredient ①); Zhang, Frei, Bartlett (JMLR 2024)",
    kind="theorem",
    form=_neg_norm,
    derivation=lambda: ti.derive_nonconvex(2),
    checks=(
        Check("hessian_vs_sympy", "symbolic", _nc_symbolic, "vs the eigenvalues of the SymPy Hessian (d = 2)"),
        Check("hessian_vs_autograd", "numeric", _nc_numeric, "vs torch autograd Hessian over all 2(d+1)² weights"),
    ),
    mutants=(
        Mutant("positive_eigenvalue", "sign flip", "+‖Λ²‖_F (the loss would be locally convex)", lambda L, N: -_neg_norm(L, N)),
        Mutant("wrong_norm", "wrong norm", "−‖Λ‖_F²", lambda L, N: -float(np.linalg.norm(np.asarray(L, float))) ** 2),
        Mutant("flat_origin", "wrong formula", "0 (flat saddle)", lambda L, N: 0.0),
    ),
))


# --------------------------------------------------------------------------------------------
# icl.transformer_vs_baselines (evidence)   form: the trainer (d, k_max, steps=, batch=, seed=, ...) -> (model, curve)


TVB_D = 2
TVB_FAR = 0.5  # "far below": at most half the better simple baseline


def _tvb_trained(form, ctx) -> CheckResult:
    """Train a tiny softmax transformer (2 layers, width 32, 4 heads) on fresh noise-free
    linear-regression prompts (d = 2) and measure error/d against the number of in-context examples
    k = 0..3d, next to least squares, averaging and 3-NN on the same fresh prompts.

    Supports the claim when, for every k in the claim's range d ≤ k ≤ 3d (Garg et al. plot up to
    k ≈ 2d–3d), (i) the transformer is FAR below the better of averaging and 3-NN: its upper 2-SE
    bound is at most half the better baseline's lower 2-SE bound (equivalently it closes at least
    half of the gap from that baseline to least squares, which is exact, 0, for k ≥ d without
    noise), and (ii) its error decreases with k: error(d) − error(3d) > 2 SE. How close it gets to
    least squares is reported (gap and fraction of the baseline gap closed per k); at this budget it
    does not reach it (least squares is exact here)."""
    d = TVB_D
    K = 3 * d + 1
    steps = ctx.size(600, 2000, 4000)
    n_eval = ctx.size(8000, 16000, 32000)
    s_train, s_eval = ctx.seed_for("train"), ctx.seed_for("eval")
    model, curve = form(d, K, steps=steps, batch=64, seed=s_train, device=ctx.device)
    errs = ni.baseline_errors(model, d, K, n_eval, seed=s_eval, device=ctx.device)
    tr_m, tr_se = errs["transformer"]
    ratios, closed, per_k = {}, {}, {}
    for k in range(d, K):
        best = smallest(("averaging", "3-NN"), key=lambda b: errs[b][0][k])
        bm, bse = errs[best][0][k], errs[best][1][k]
        lo = bm - 2 * bse
        ratios[f"k={k}"] = float((tr_m[k] + 2 * tr_se[k]) / lo) if lo > 0 else math.inf
        closed[f"k={k}"] = float((bm - tr_m[k]) / (bm - errs["least squares"][0][k]))
        per_k[f"k={k}"] = {"transformer": float(tr_m[k]), "better_baseline": best, "baseline": float(bm),
                           "least_squares": float(errs["least squares"][0][k]),
                           "gap_to_least_squares": float(tr_m[k] - errs["least squares"][0][k])}
    drop_z = float((tr_m[d] - tr_m[K - 1]) / math.hypot(tr_se[d], tr_se[K - 1]))
    crit = {"far_below": largest(ratios.values()) / TVB_FAR, "decreasing": 2.0 / drop_z if drop_z > 0 else math.inf}
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        ks = np.arange(K)
        for name, (m, se) in errs.items():
            ax.errorbar(ks, m, yerr=2 * se, marker="o", ms=3, capsize=2, label=name)
        best_curve = np.minimum(errs["averaging"][0], errs["3-NN"][0])
        ax.plot(ks[d:], TVB_FAR * best_curve[d:], "k--", lw=0.8, label="½ × better of averaging, 3-NN")
        ax.axvline(d, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("number of in-context examples k")
        ax.set_ylabel("squared error / d")
        ax.set_ylim(-0.05, 2.0)
        ax.set_title(f"Softmax transformer vs baselines (d={d}, {steps} Adam steps)")
        ax.legend(fontsize=8)
        ctx.save_figure(fig, "error_vs_examples")
    details = {name: {"mean": [float(x) for x in m], "se": [float(x) for x in se]} for name, (m, se) in errs.items()}
    details.update({"upper_ratio_to_better_baseline": ratios, "fraction_of_baseline_gap_to_least_squares_closed": closed,
                    "per_k": per_k, "decrease_d_to_3d_in_se": drop_z,
                    "final_train_loss": float(np.mean(curve[-20:])) if len(curve) else None})
    kb = largest(ratios, key=lambda k: ratios[k])  # the binding length
    bb = per_k[kb]["better_baseline"]
    kk = int(kb.split("=")[1])
    floors = {"far_below": float(2 * errs[bb][1][kk] / errs[bb][0][kk]),
              "decreasing": 2.0 / drop_z if drop_z > 0 else math.inf}
    return _criteria_margin(crit, 1.0,
                   "evidence criterion, for every d ≤ k ≤ 3d: (transformer + 2 SE) ≤ ½ (better of averaging/3-NN − 2 SE) "
                   "('far below'; it closes ≥ half the gap to least squares, exact for k ≥ d), and error(d) − error(3d) "
                   f"> 2 SE (decreasing with k); error = worst of ratio/½ and 2/decrease-in-SE; SEs over {n_eval} fresh prompts",
                   seeds=[s_train, s_eval], sizes={"d": d, "k_max": K - 1, "steps": steps, "batch": 64, "eval_prompts": n_eval},
                   device=ctx.device, details=details, floors=floors,
                   quantities={"far_below": f"the better baseline's lower 2-SE bound at the binding length ({kb})",
                               "decreasing": "the transformer's error drop from k = d to k = 3d"})


def _untrained(d, k_max, *, steps, batch, seed, device="cpu", **kw):
    return ni.train_softmax_icl(d, k_max, steps=0, batch=batch, seed=seed, device=device, **kw)


register(Claim(
    id="icl.transformer_vs_baselines",
    title="A small softmax transformer learns linear functions in context (evidence)",
    statement=r"\text{error}/d \text{ of a trained softmax transformer on } y=\langle w,x\rangle \text{ prompts is far below averaging and 3-NN for } k\ge d \text{ and approaches least squares}",
    source="Garg, Tsipras, Liang, Valiant (NeurIPS 2022); lecture notes 002 (ICL slides)",
    kind="evidence",
    form=ni.train_softmax_icl,
    checks=(
        Check("error_vs_examples", "trained", _tvb_trained, "error/d vs k for the transformer, least squares, averaging, 3-NN"),
    ),
    mutants=(
        Mutant("untrained_transformer", "wrong solver output", "the trainer returns the initial (untrained) network", _untrained),
    ),
    notes="Evidence only: a 2-layer width-32, 4-head transformer trained for 600 (quick) to 2000 (default) Adam steps at "
          "d = 2, k ≤ 3d. It is far below averaging and 3-NN (closes ~70–90% of their gap to least squares) and improves "
          "with k, but does not reach least squares (exact, 0, for k ≥ d without noise) at these budgets: 'close to least "
          "squares' is reported (per-k gap), not claimed. Earlier settings (2 heads, lr 3e-3, 300 steps) left some seeds on "
          "the pre-emergence loss plateau, which made the verdict seed-dependent.",
))
