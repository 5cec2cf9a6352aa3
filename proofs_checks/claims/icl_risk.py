"""Group B: in-context learning of linear regression, the risk on a linear task (icl.linear_task_risk)
(lecture notes 000, 002, 003; Zhang–Frei–Bartlett 2024). Conventions as in :mod:`proofs_checks.claims.icl`.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Hypothesis, Mutant
from proofs_checks.claims._common import declare, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, z_test
from theory import icl as ti
from proofs_checks.claims._icl_common import (_conditional_mc, _lam_subs, _planted_gamma, _numeric_gamma_inv,
                                              _rounding_pairs, _trained, _b_weights, _formula_changes, _gamma_inv,
                                              _GENERAL_DNM, _general_risk_pairs, _H_LAMBDA, _H_TASK, _note_lambda)


# --------------------------------------------------------------------------------------------
# icl.linear_task_risk       form: (Lambda, N, M) -> R


def _risk_symbolic(form, ctx) -> CheckResult:
    rng = ctx.rng()
    D = ti.derive_linear_task_risk(2)
    Ls = D.facts["Lambda"]
    order = sorted(Ls.free_symbols, key=str)
    f = sp.lambdify([order, ti.Nsym, ti.Msym], D.result["matrix"], "numpy")
    lam, t = D.facts["eigen_symbols"]
    fe = sp.lambdify([lam, t, ti.Nsym, ti.Msym], D.result["eigen"], "numpy")
    pairs = {}
    for N, M in ((1, 1), (2, 7), (10, 3), (40, 40), (5, 200)):
        L = ni.random_spd(rng, 2)
        sub = _lam_subs(Ls, L)
        pairs[f"d2_N{N}_M{M}"] = (float(form(L, N, M)), float(f([sub[s] for s in order], N, M)))
        L4 = ni.random_spd(rng, 4)
        ev = np.linalg.eigvalsh(L4)
        pairs[f"d4_N{N}_M{M}"] = (float(form(L4, N, M)), float(np.sum(fe(ev, ev.sum(), N, M))))
    pairs.update(_general_risk_pairs(form, rng))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding (a few hundred ulp; error |form − ref|/(1 + |ref|))",
                           seeds=[ctx.seed_for()], sizes={"d": [2, 4], "general (d, N, M)": list(_GENERAL_DNM)})


def _risk_mc(form, ctx) -> CheckResult:
    """Monte Carlo test risk of the numeric minimiser (E[hhᵀ]^{-1}E[hwᵀ]) on length-M prompts, 5 SE;
    task and query integrated exactly through the LSA per sampled context, sample-covariance control
    variate (:func:`_conditional_mc`)."""
    d, n = 3, ctx.size(16_000, 150_000)

    def reference():  # form-independent: Λ and the Monte Carlo risk of the numeric minimiser
        rng, out = ctx.rng(), []
        for k, (N, M) in enumerate(((2, 3), (3, 12), (10, 2))):
            L = ni.random_spd(rng, d, 1.0, 3.0)
            Bn = _numeric_gamma_inv(L, N)
            s = ctx.seed_for("mc", k)
            m, se = _conditional_mc(L, M, Bn, n, s, ctx.seed_for("pilot", k))
            out.append((N, M, L, s, m, se))
        return out

    zs, seeds = {}, []
    for N, M, L, s, m, se in ctx.reference("mc", reference):
        seeds.append(s)
        zs[f"N{N}_M{M}"] = (m, se, float(form(L, N, M)))
    return z_test(zs, what="the Monte Carlo risk of the numeric minimiser (task and query integrated exactly per "
                   "context, sample-covariance control variate; SE = std of the adjusted sample/√n)", seeds=seeds,
                   sizes={"d": d, "contexts": n, "pilot_contexts": largest(n // 8, 2048)})


def _risk_trained(form, ctx) -> CheckResult:
    """Test risk of the trained LSAs (shared batch of 16 seeds) at several M, with the exact
    population risk in place of Monte Carlo: ``R(B)`` at each seed's ``B = w22·W11`` is a closed
    form (Isserlis moments, :func:`numerics.icl.population_risk_B`), combined across seeds by
    :func:`numerics.icl.seed_mean_risk` (risk at the seeds' mean ``B``, the spread's quadratic excess
    removed; delete-one jackknife SE across seeds, the only randomness being the seeds' training
    prompts). The blocks outside ``B`` (0 at the population optimum, O(1/√P) after training on P
    sampled prompts) add a Monte Carlo control variate per seed, ``mean_p[(ŷ − y)² − (ŷ_B − y)²]``
    on fresh prompts; its seed mean is also counted as a systematic, in quadrature with the SE; 6 SE
    (t with S − 1 dof). It estimates the risk at the seeds' mean B, not each seed's risk."""
    L, N, res, tseed = _trained(ctx.mode, ctx.seed, ctx.device)
    S = res.B.shape[0]
    n = ctx.size(4_000, 20_000)

    def reference():  # form-independent: the trained seeds' exact risk and its SE, per M
        out = []
        d = res.B.shape[-1]
        Wb = torch.zeros_like(res.Wpv)
        Wb[:, d, d] = 1.0
        Kb = torch.zeros_like(res.Wkq)
        Kb[:, :d, :d] = torch.from_numpy(res.B)
        for k, M in enumerate((2, N, 3 * N)):
            s = ctx.seed_for("fresh", k)
            P = ni.sample_prompts(L, M, (S, n), seed=s)
            with torch.no_grad():
                yh = ni.lsa_forward(res.Wpv[:, None], res.Wkq[:, None], P.E, float(M))
                yb = ni.lsa_forward(Wb[:, None], Kb[:, None], P.E, float(M))
            cv = (((yh - P.y_q) ** 2 - (yb - P.y_q) ** 2).mean(-1)).numpy()  # (S,)
            est, se = ni.seed_mean_risk(L, M, res.B, cv)
            out.append((M, s, est, math.sqrt(se**2 + float(cv.mean()) ** 2), se, float(cv.mean())))
        return out

    zs, curve, seeds, parts = {}, [], [tseed], {}
    for M, s, m, se, se_jk, cvm in ctx.reference("exact", reference):
        seeds.append(s)
        zs[f"M{M}"] = (m, se, float(form(L, N, M)))
        curve.append((M, m, se, zs[f"M{M}"][2]))
        parts[f"M{M}"] = {"jackknife_se": se_jk, "outside_B_excess": cvm}
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        Ms = [c[0] for c in curve]
        ax.errorbar(Ms, [c[1] for c in curve], yerr=[2 * c[2] for c in curve], fmt="o", label="trained LSA (±2 SE)")
        grid = np.unique(np.geomspace(1, 6 * N, 40).astype(int))
        ax.plot(grid, [float(form(L, N, m)) for m in grid], "-", label="closed form")
        ax.set_xscale("log")
        ax.set_xlabel("test prompt length M")
        ax.set_ylabel("risk")
        ax.legend()
        ctx.save_figure(fig, "risk_vs_M")
    return z_test(zs, k=6.0, dof=S - 1,
                  what=f"the exact risk at the {S} trained seeds' mean B (jackknife SE ⊕ outside-B excess; t with {S - 1} dof, "
                  f"6 SE so that the false-failure probability per fresh seed stays below 1e-4)", seeds=seeds,
                   sizes={"N": N, "M": [c[0] for c in curve], "prompts": n, "seeds": S}, device=res.device,
                   details={"curve": curve, "se_parts": parts})


def _risk_mut(kind):
    def f(Lambda, N, M):
        L = np.asarray(Lambda, float)
        d = L.shape[0]
        G = _planted_gamma(L, N, kind)
        Gi2 = np.linalg.inv(G @ G)
        K = L + (0.0 if kind == "no_trace" else np.trace(L)) * np.eye(d)
        first = np.trace(Gi2 @ L @ L @ K) / M
        second = 0.0 if kind == "no_1_over_N2" else np.trace(Gi2 @ L @ K @ K) / N**2
        return first + second
    return f


def _lr_cx(hyp: str):
    N, M = 2, 3

    def exact(law):  # test risk E(ŷ − ⟨w, x_q⟩)² of B = Γ_N⁻¹ on prompts of length M (ρ = M unless changed)
        return 2 * ti.exact_lsa_loss(*_b_weights(_gamma_inv([1], N)), M, [1], **{"query_noise": False, **law})
    return _formula_changes(hyp, "risk_formula", exact, lambda: ti.linear_task_risk(sp.Matrix([[1]]), sp.Integer(N), sp.Integer(M)),
                            "E(ŷ − ⟨w, x_q⟩)² of B = Γ_N⁻¹", {"N": N, "M": M})


declare(
    id="icl.linear_task_risk",
    title="Linear-task test risk of the LSA limit B = Γ_N⁻¹ at test length M: a 1/M and a 1/N² term",
    hypotheses=(
        Hypothesis("gaussian_x", r"x_1,\dots,x_M,x_q\overset{\text{iid}}{\sim}\mathcal N(0,\Lambda)\ \text{(test prompt; }\Gamma_N"
                   r"\text{ from training prompts of the same law)}", "test inputs i.i.d. N(0, Λ)",
                   counterexample=_lr_cx("gaussian_x"), layer="symbolic"),
        Hypothesis("lambda_pd", _H_LAMBDA, necessary_note=_note_lambda("risk of B = Γ_N⁻¹")),
        Hypothesis("task_standard_gaussian", _H_TASK, counterexample=_lr_cx("task_standard_gaussian"), layer="symbolic"),
        Hypothesis("noise_free", r"y_i=\langle w,x_i\rangle\ \text{(noise-free context labels)}",
                   counterexample=_lr_cx("noise_free"), layer="symbolic"),
        setting("N_ge_1", r"N\ge1,\ M\ge1", "Γ_N and the average over the M test "
                                            "examples are defined for N, M ≥ 1"),
        Hypothesis("rho_eq_M", r"\rho=M\ \text{on the test prompt}", "the LSA normalises by the test prompt's length",
                   counterexample=_lr_cx("rho_eq_M"), layer="symbolic"),
    ),
    clauses=(
        Clause("risk_formula", r"R=\mathbb E\big(x_q^\top\Gamma_N^{-1}\tfrac1M\textstyle\sum_{i\le M}y_ix_i-\langle w,x_q\rangle\big)^2="
               r"\operatorname{tr}\Lambda-2\operatorname{tr}(\Gamma_N^{-1}\Lambda^2)+\operatorname{tr}(\Gamma_N^{-2}\Gamma_M\Lambda^2)",
               "derived", "symbolic d, N and M (every d, N, M ≥ 1; theory.icl.derive_linear_task_risk_general): R = 2·L_M(Γ_N⁻¹) "
               "with the loss at test length M derived by the Isserlis-contracted Wishart moment, = tr Λ − 2tr(Γ_N⁻¹Λ²) + "
               "tr(Γ_N⁻¹ΛΓ_MΓ_N⁻¹Λ); the last trace as tr(Γ_N⁻²Γ_MΛ²) because Γ_N⁻¹ commutes with Λ (Γ_NΛ = ΛΓ_N derived; "
               "premise: λ ↦ Λ, 1/γ_N ↦ Γ_N⁻¹ is a ring homomorphism); the form is compared with it at "
               "(d, N, M) ∈ {(1, 1, 1), (1, 5, 2), (3, 1, 5), (3, 5, 1), (4, 1, 2), (4, 5, 5)}",
               ("derivation", "risk_vs_sympy", "risk_vs_monte_carlo"),
               also=(("derived_at", "d = 2, symbolic Λ, N and M (Wishart moment E[SAS] by Wick sums; equal to the general risk "
                      "at d = 2: obligation general_equals_at_d2)"),
                     ("checked", "d = 3, (N, M) ∈ {(2, 3), (3, 12), (10, 2)}: Monte Carlo of the numeric minimiser's risk within "
                      "5 SE (16,000 (quick) / 150,000 contexts)")), rests_on=("Isserlis' theorem", "Wishart index sums", "split i = j / i ≠ j", "Gaussian ICL setting", "E over w first", "E over X (linearity)", "independent query x_q", "ring homomorphism λ ↦ Λ", "eigenbasis of Λ")),
        Clause("split", r"R=\tfrac1M\operatorname{tr}\big(\Gamma_N^{-2}\Lambda^2(\Lambda+\operatorname{tr}(\Lambda)I)\big)"
               r"+\tfrac1{N^2}\operatorname{tr}\big(\Gamma_N^{-2}\Lambda(\Lambda+\operatorname{tr}(\Lambda)I)^2\big)",
               "derived", "symbolic d, N and M (theory.icl.derive_linear_task_risk_general): the scalar image of R minus the split "
               "(Λ → λ, Γ_N → (1 + 1/N)λ + tr Λ/N) vanishes identically; premise: λ ↦ Λ, 1/γ_N ↦ Γ_N⁻¹ is a ring homomorphism "
               "(Λ and Γ_N⁻¹ commute) and the trace is linear",
               ("derivation", "risk_vs_sympy"),
               also=(("derived_at", "d = 2 at diagonal Λ, symbolic N and M (the per-direction terms summed equal the derived risk; "
                      "the general image equals that per-direction term: obligation eigen_term_equals_at_d2)"),
                     ("checked", "d = 4: the form against the sum of the per-eigenvalue terms")), rests_on=("Isserlis' theorem", "Wishart index sums", "split i = j / i ≠ j", "Gaussian ICL setting", "E over w first", "E over X (linearity)", "independent query x_q", "ring homomorphism λ ↦ Λ", "eigenbasis of Λ")),
        Clause("trained_risk", r"\text{the LSA trained as in icl.gamma\_n\_global\_min has this risk}",
               "cited", "Zhang, Frei, Bartlett (JMLR 2024) Thm 4.1 (its limit is the predictor B = Γ_N⁻¹)",
               ("risk_of_trained_lsa",),
               also=(("checked", "16 trained LSAs (d = 3, N = 4): an estimate of the exact risk at the seeds' MEAN B = w22·W11 "
                      "(R(B̄) less the seeds' quadratic spread, numerics.icl.seed_mean_risk; not each seed's risk), the "
                      "blocks outside B by a Monte Carlo control variate on 4,000 (quick) / 20,000 (default) fresh prompts "
                      "per seed, M ∈ {2, 4, 12}, within 6 SE (jackknife SE across seeds ⊕ the outside-B excess)"),)),
    ),
    source="Zhang, Frei, Bartlett (JMLR 2024) Thm 4.1 consequence; lecture notes 000",
    kind="theorem",
    form=ti.linear_task_risk,
    derivation=ti.derive_linear_task_risk_general,
    checks=(
        Check("risk_vs_sympy", "symbolic", _risk_symbolic, "vs the risk derived for symbolic d, N, M (at d ∈ {1, 3, 4}), the "
              "Wishart-moment derivation (d = 2) and its eigenbasis split (d = 4)"),
        Check("risk_vs_monte_carlo", "numeric", _risk_mc, "Monte Carlo of the optimal LSA's risk (task and query integrated exactly, control variate), 5 SE"),
        Check("risk_of_trained_lsa", "trained", _risk_trained, "exact risk at the trained LSAs' B (M = 2, N, 3N), control variate for the other blocks, 6 jackknife SE across seeds"),
    ),
    mutants=(
        Mutant("dropped_1_over_N2_term", "dropped term", "the (1/N²) term dropped", _risk_mut("no_1_over_N2")),
        Mutant("missing_trace_term", "dropped term", "Λ + tr(Λ)I replaced by Λ", _risk_mut("no_trace")),
        Mutant("one_over_N_plus_1", "wrong constant", "1/(N+1) in Γ_N", _risk_mut("n_plus_1")),
        Mutant("gamma_equals_lambda", "wrong formula", "Γ_N = Λ", _risk_mut("gamma_is_lambda")),
    ),
)
