"""Group B: in-context learning of linear regression (lecture notes 000, 002, 003; Zhang–Frei–Bartlett 2024,
von Oswald et al. 2023, Garg et al. 2022). Binds theory/icl.py and numerics/icl.py to checks,
tolerances and mutants.

Conventions: ``ŷ = hᵀ B x_q`` with ``h = (1/N)Σ y_i x_i`` and ``B = w22·W11^{KQ}``; prompts as in
numerics/icl.py (context rows, the LSA's input ``E`` column-form).
"""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, z_test
from theory import icl as ti
from proofs_checks.claims._icl_common import (_closed_form_vs_mc_figure, _conditional_mc, _eval_general, _lam_subs,
                                              _planted_gamma, _numeric_gamma_inv, _rounding_pairs, _b_weights, _EXACT,
                                              _formula_changes, _GENERAL_DN, _H_GAUSS, _H_LAMBDA, _H_N, _H_NOISE,
                                              _H_RHO_N, _H_TASK, _note_lambda, _NOTE_N)


# --------------------------------------------------------------------------------------------
# icl.lsa_prediction_form
# form: (Wpv (..., d+1, d+1), Wkq, E (..., d+1, T), rho) -> ŷ (...)   [NumPy]


def block_prediction(Wpv, Wkq, E, rho):
    """``ŷ = [w21ᵀ, w22] (E Eᵀ/ρ) [W11; w21'ᵀ] x_q``: last row of ``W^{PV}``, first d columns of ``W^{KQ}``."""
    d = E.shape[-2] - 1
    row = Wpv[..., d, :]
    cols = Wkq[..., :, :d]
    xq = E[..., :d, -1]
    G = E @ np.swapaxes(E, -1, -2) / rho
    return np.einsum("...i,...ij,...jk,...k->...", row, G, cols, xq)


def _pred_symbolic(form, ctx) -> CheckResult:
    d, N = 2, 2
    D = ti.derive_lsa_prediction_form(d, N)
    s = D.facts["symbols"]
    syms = list(s["PV"]) + list(s["KQ"]) + [e for e in s["X"]] + [s["y"][0, j] for j in range(N)] + [s["rho"]]
    f = sp.lambdify(syms, D.result, "numpy")
    rng = ctx.rng()
    pairs = {}
    for i in range(20):
        PV, KQ = rng.normal(size=(d + 1, d + 1)), rng.normal(size=(d + 1, d + 1))
        X, y, rho = rng.normal(size=(d, N + 1)), rng.normal(size=N), float(rng.uniform(1, 5))
        E = np.vstack([X, np.append(y, 0.0)])
        ref = f(*PV.ravel(), *KQ.ravel(), *X.ravel(), *y, rho)
        pairs[f"draw{i}"] = (float(form(PV, KQ, E, rho)), float(ref))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding of a sum of ~100 products of O(1) numbers "
                           "(error |form − ref|/(1 + |ref|))", seeds=[ctx.seed_for()], sizes={"d": d, "N": N, "draws": 20},
                           details={"params_used": [str(p) for p in D.facts["params_used"]]})


def _pred_numeric(form, ctx) -> CheckResult:
    """Against the whole matrix product E + W^{PV} E (Eᵀ W^{KQ} E)/ρ in torch, full random weights."""
    rng = ctx.rng()
    d, N, n = 3, 7, ctx.size(64, 256)
    PV, KQ = rng.normal(size=(n, d + 1, d + 1)), rng.normal(size=(n, d + 1, d + 1))
    E = rng.normal(size=(n, d + 1, N + 1))
    E[:, d, N] = 0.0
    full = ni.lsa_full_output(torch.from_numpy(PV), torch.from_numpy(KQ), torch.from_numpy(E), float(N)).numpy()
    ref = full[:, d, N]
    val = np.asarray(form(PV, KQ, E, float(N)), dtype=float)
    pairs = {f"prompt{i}": (float(val[i]), float(ref[i])) for i in range(n)}
    return _rounding_pairs(pairs, 1e4 * EPS, "float64 rounding, (d+1)²(N+1)² ≈ 1000 products (error |form − ref|/(1 + |ref|))",
                           seeds=[ctx.seed_for()], sizes={"d": d, "N": N, "prompts": n})


def _drop_query(PV, KQ, E, rho):
    d = E.shape[-2] - 1
    Ec = E[..., :-1]
    G = Ec @ np.swapaxes(Ec, -1, -2) / rho
    return np.einsum("...i,...ij,...jk,...k->...", PV[..., d, :], G, KQ[..., :, :d], E[..., :d, -1])


def _query_label_nonzero(ctx) -> Counterexample:
    """Without the query's label entry 0: E_{d+1,N+1} = 1, the whole LSA product (torch) is not the
    block form (which reads only x_q from the query column)."""
    rng = np.random.default_rng(20240)
    d, N = 2, 3
    PV, KQ = rng.normal(size=(d + 1, d + 1)), rng.normal(size=(d + 1, d + 1))
    E = rng.normal(size=(d + 1, N + 1))
    E[d, N] = 1.0
    full = ni.lsa_full_output(torch.from_numpy(PV), torch.from_numpy(KQ), torch.from_numpy(E), float(N)).numpy()[d, N]
    blk = float(block_prediction(PV, KQ, E, float(N)))
    err = abs(float(full) - blk)
    tol = 1e3 * EPS * (1 + abs(blk))
    return exceeds({"d": d, "N": N, "E_{d+1,N+1}": 1.0, "weights": "N(0,1) entries, seed 20240"}, "block_form",
                   f"ŷ = {float(full):.6g} from the whole product, {blk:.6g} from the block form",
                   error=err, tolerance=tol,
                   justification="float64 rounding of the two products (1e3 ulp relative to 1 + |ŷ|); the "
                   "difference is the query label itself plus the W^KQ last-column terms it multiplies")


declare(
    id="icl.lsa_prediction_form",
    title="Only the last row of W^PV and the first d columns of W^KQ affect the LSA prediction",
    hypotheses=(
        Hypothesis("query_label_zero", r"E_{d+1,N+1}=0\ \text{(the query's label entry)}",
                   "the query token carries label 0", counterexample=_query_label_nonzero),
        setting("rho_nonzero", r"\rho\ne0", "f_LSA divides by ρ"),
    ),
    clauses=(
        Clause("block_form", r"\hat y=[f_{LSA}(E)]_{d+1,N+1}=[w_{21}^\top,\ w_{22}]\,\frac{EE^\top}{\rho}"
               r"\begin{bmatrix}W_{11}\\ w_{21}'^{\top}\end{bmatrix}x_q",
               "derived", "every d ≥ 1, N ≥ 1 (block-matrix algebra with symbolic d and N)",
               ("derivation", "block_form_vs_sympy", "block_form_vs_torch_product"),
               also=(("derived_at", "d = 2, N = 2 entry by entry (symbolic check)"),
                     ("checked", "d = 3, N = 7, 64 (quick) / 256 prompts, N(0, 1) weights, against the whole torch product"))),
        Clause("other_weights_unused", r"\hat y\ \text{does not depend on the first }d\text{ rows of }W^{PV}"
               r"\text{ nor on the last column of }W^{KQ}",
               "derived", "every d ≥ 1, N ≥ 1 (the blocks that appear in the symbolic-size block product)",
               ("derivation", "block_form_vs_torch_product"),
               also=(("checked", "d = 3, N = 7: full random weights against the torch product"),)),
    ),
    source="lecture notes 000; Zhang, Frei, Bartlett (JMLR 2024), Lemma on the prediction",
    kind="identity",
    form=block_prediction,
    derivation=ti.derive_lsa_prediction_form_general,
    checks=(
        Check("block_form_vs_sympy", "symbolic", _pred_symbolic, "vs SymPy expansion of the full product (d = 2, N = 2)"),
        Check("block_form_vs_torch_product", "numeric", _pred_numeric, "vs the whole LSA matrix product in torch"),
    ),
    mutants=(
        Mutant("first_row_of_PV", "swapped index", "uses the first row of W^PV instead of the last",
               lambda PV, KQ, E, r: block_prediction(np.concatenate([PV[..., :1, :]] * PV.shape[-2], -2), KQ, E, r)),
        Mutant("last_columns_of_KQ", "swapped index", "uses the last d columns of W^KQ",
               lambda PV, KQ, E, r: block_prediction(PV, np.concatenate([KQ[..., :, 1:], KQ[..., :, :1]], -1), E, r)),
        Mutant("query_dropped_from_EEt", "dropped term", "E Eᵀ over the context only (the query column omitted)",
               lambda PV, KQ, E, r: _drop_query(PV, KQ, E, r)),
        Mutant("rho_plus_one", "wrong constant", "normalised by ρ + 1",
               lambda PV, KQ, E, r: block_prediction(PV, KQ, E, r + 1)),
    ),
)


# --------------------------------------------------------------------------------------------
# the general (symbolic d, N, M) closed forms at sizes beyond the fixed-size derivations' d = 2: each
# symbolic check compares the form with them there too, so a form mutant is rejected at every size

_GENERAL_WHY = ("the closed form derived for symbolic sizes evaluated at (d, N) ∈ {1, 3, 4} × {1, 5} (random SPD Λ, "
                "eigenvalues in [1, 4])")


def _general_loss_pairs(form, rng) -> dict:
    """(form, general loss of :func:`theory.icl.derive_population_loss_general`) at each (d, N) of
    ``_GENERAL_DN``, random SPD Λ and N(0, 1) B."""
    D = ti.derive_population_loss_general()
    d, N = D.facts["sizes"]
    out = {}
    for k, n in _GENERAL_DN:
        L, B = ni.random_spd(rng, k), rng.normal(size=(k, k))
        out[f"general_d{k}_N{n}"] = (float(form(L, n, B)), float(_eval_general(D.result["loss"], {d: k, N: n}, Lambda=L, B=B)))
    return out


# --------------------------------------------------------------------------------------------
# icl.population_loss     form: (Lambda, N, B) -> L(B)


def _loss_symbolic(form, ctx) -> CheckResult:
    """The form vs (g) the loss derived for symbolic d and N (:func:`theory.icl.derive_population_loss_general`)
    evaluated at (d, N) ∈ {1, 3, 4} × {1, 5}, (a) the loss derived at d = 2 (symbolic Λ, B, N), (b) at d = 3 the loss
    ½tr(Λ(Bᵀ E[hhᵀ] B − Bᵀ E[hwᵀ] − E[whᵀ] B + I)) with the moments derived by Wick sums at d = 3
    (:func:`theory.icl.derive_moments`), each at 4 random (Λ, B) per N, (c) the exact loss of the LSA
    itself (:func:`theory.icl.exact_lsa_loss`) at (d, N) = (1, 1), (2, 1), (2, 2), diagonal Λ."""
    d = 2
    D = ti.derive_population_loss(d)
    B, Ls = D.facts["B"], D.facts["Lambda"]
    order = sorted(Ls.free_symbols, key=str)
    f = sp.lambdify([order, list(B), ti.Nsym], D.result, "numpy")
    M3 = ti.derive_moments(3)
    L3s = M3.facts["Lambda"]
    order3 = sorted(L3s.free_symbols, key=str)
    fhh = sp.lambdify([order3, ti.Nsym], M3.result["hh"], "numpy")
    fhw = sp.lambdify([order3], M3.result["hw"], "numpy")
    rng = ctx.rng()
    pairs = {}
    for N in (1, 2, 3, 7, 50):
        for j in range(4):
            L = ni.random_spd(rng, d)
            Bv = rng.normal(size=(d, d))
            sub = _lam_subs(Ls, L)
            ref = f([sub[s] for s in order], list(Bv.ravel()), N)
            pairs[f"N{N}_{j}"] = (float(form(L, N, Bv)), float(ref))
            L3, B3 = ni.random_spd(rng, 3), rng.normal(size=(3, 3))
            sub3 = _lam_subs(L3s, L3)
            hh, hw = np.asarray(fhh([sub3[s] for s in order3], N), float), np.asarray(fhw([sub3[s] for s in order3]), float)
            ref3 = 0.5 * np.trace(L3 @ (B3.T @ hh @ B3 - B3.T @ hw - hw.T @ B3 + np.eye(3)))
            pairs[f"d3_N{N}_{j}"] = (float(form(L3, N, B3)), float(ref3))
    # (c) the LSA's own squared error, expanded and averaged exactly (theory.icl.exact_lsa_loss: no moment
    # formula, no x_q premise) at the small sizes, N = 1 included, diagonal Λ with integer variances 1..4
    for d_, N in ((1, 1), (2, 1), (2, 2)):
        lam = [int(v) for v in rng.integers(1, 5, size=d_)]
        Bs = sp.Matrix(d_, d_, lambda i, j: sp.Symbol(f"b_{i + 1}{j + 1}"))
        fx = sp.lambdify([list(Bs)], ti.exact_lsa_loss(*_b_weights(Bs), N, lam), "numpy")
        for j in range(4):
            Bv = rng.normal(size=(d_, d_))
            pairs[f"exact_d{d_}_N{N}_{j}"] = (float(form(np.diag(np.array(lam, float)), N, Bv)), float(fx(list(Bv.ravel()))))
    pairs.update(_general_loss_pairs(form, rng))
    return _rounding_pairs(pairs, 1e3 * EPS, "float64 rounding of a degree-6 polynomial with O(10) terms "
                           "(error |form − ref|/(1 + |ref|))", seeds=[ctx.seed_for()],
                           sizes={"d": [1, 2, 3], "N": [1, 2, 3, 7, 50], "exact_lsa_loss (d, N)": [(1, 1), (2, 1), (2, 2)],
                                  "general (d, N)": list(_GENERAL_DN)})


def _lsa_weights_from_B(B: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    d = B.shape[0]
    Wpv = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wpv[d, d] = 1.0
    Wkq = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wkq[:d, :d] = torch.from_numpy(B)
    return Wpv, Wkq


def _loss_mc(form, ctx) -> CheckResult:
    """Monte Carlo of ½E(ŷ − y_q)² with ŷ from the torch LSA (W^{KQ}_{11} = B, w22 = 1), at B near the
    minimiser and at a non-symmetric B chosen where L(B) and L(Bᵀ) differ most. Per sampled context
    the task w and the query are integrated out exactly through the LSA (ŷ is bilinear in them: d unit
    tasks × d unit queries), and the context's sample covariance (mean Λ) is a control variate
    fitted on an independent pilot batch (:func:`_conditional_mc`); SE = std of the adjusted sample/√n."""
    d, n = 3, ctx.size(20_000, 250_000)

    def reference():  # form-independent: Λ, B, the Monte Carlo mean and its SE, per instance
        rng, out = ctx.rng(), []
        for k, N in enumerate((2, 5)):
            # near the minimiser (Λ eigenvalues in [1, 3], B = Γ_N⁻¹ + 0.3·noise), where dropped terms show
            L = ni.random_spd(rng, d, 1.0, 3.0)
            insts = [("near_min", L, _numeric_gamma_inv(L, N) + 0.3 * rng.normal(size=(d, d)))]
            # among 32 random (Λ, B) (anisotropic Λ, B far from symmetric), the one where L(B) and
            # L(Bᵀ) differ most relative to L(B) (the Monte Carlo SE scales with L), by the exact
            # numeric moments: the test instance is chosen where a swapped index would show
            cands = []
            for _ in range(32):
                L = ni.random_spd(rng, d, 0.3, 3.0)
                B = _numeric_gamma_inv(L, N) + rng.normal(size=(d, d))
                lb = ni.population_loss_B(L, N, B)
                cands.append((abs(lb - ni.population_loss_B(L, N, B.T)) / lb, L, B))
            _, L, B = largest(cands, key=lambda c: c[0])
            insts.append(("asymmetric", L, B))
            for j, (tag, L, B) in enumerate(insts):
                s = ctx.seed_for("prompts", k, j)
                m, se = _conditional_mc(L, N, B, n, s, ctx.seed_for("pilot", k, j), factor=0.5)
                out.append((f"{tag} N={N}", N, L, B, s, m, se))
        return out

    zs, seeds, rows = {}, [], []
    for label, N, L, B, s, m, se in ctx.reference("mc", reference):
        seeds.append(s)
        zs[label] = (m, se, float(form(L, N, B)))
        rows.append((label, zs[label][2], m, se))
    _closed_form_vs_mc_figure(ctx, "loss_vs_monte_carlo", "Population loss at random B: closed form vs Monte Carlo",
                              rows, "L(B)")
    return z_test(zs, what="the Monte Carlo mean loss (task and query integrated exactly per context, "
                   "sample-covariance control variate; SE = std of the adjusted sample/√n)",
                   seeds=seeds, sizes={"d": d, "contexts": n, "pilot_contexts": largest(n // 8, 2048)})


def _pl_mut(kind):
    def f(Lambda, N, B):
        L = np.asarray(Lambda, dtype=float)
        G = _planted_gamma(L, N, kind)
        if kind == "transpose":
            B = B.T
        const = 0.0 if kind == "no_trace" else np.trace(L)
        return 0.5 * (np.trace(B.T @ L @ G @ B @ L) - 2 * np.trace(L @ B @ L) + const)
    return f


_PL_N, _PL_B = 2, sp.Matrix([[sp.Rational(1, 2)]])  # d = 1, Λ = 1: B = Γ_2⁻¹ = 1/2


def _pl_form_value():
    return ti.population_loss(sp.Matrix([[1]]), _PL_N, _PL_B)


def _pl_cx(hyp: str):
    return _formula_changes(hyp, "loss_formula", lambda law: ti.exact_lsa_loss(*_b_weights(_PL_B), _PL_N, [1], **law),
                            _pl_form_value, "½E(ŷ − y_q)² at B = 1/2", {"N": _PL_N})


def _pl_other_blocks(ctx) -> Counterexample:
    """Without w21 = w21' = 0: w22 = 1, W11 = 1/2 and w21' = 1 (d = 1, N = 2, Λ = 1): the exact loss
    is not L(w22·W11)."""
    PV, KQ = _b_weights(_PL_B)
    KQ[1, 0] = 1
    ex, fo = ti.exact_lsa_loss(PV, KQ, _PL_N, [1]), _pl_form_value()
    err = abs(float(ex - fo))
    return exceeds({"d": 1, "N": _PL_N, "Lambda": 1, "w22": 1, "W11": "1/2", "w21'": 1}, "loss_formula",
                   f"exact ½E(ŷ − y_q)² = {ex}; L(w22·W11) = {fo} (ŷ gains w22·(Σy_i²/N)·w21'·x_q)",
                   error=err, tolerance=0.0, justification=_EXACT)


_H_BLOCKS = r"w_{21}=0,\ w_{21}'=0\ \ (B=w_{22}W_{11})"


declare(
    id="icl.population_loss",
    title="Population loss of the LSA in B = w22·W11 (other blocks 0) via E[hhᵀ] = ΛΓ_N, E[hwᵀ] = Λ",
    hypotheses=(
        Hypothesis("gaussian_x", _H_GAUSS, "context and query inputs i.i.d. N(0, Λ)", counterexample=_pl_cx("gaussian_x"),
                   layer="symbolic"),
        Hypothesis("lambda_pd", _H_LAMBDA, necessary_note=_note_lambda("loss")),
        Hypothesis("task_standard_gaussian", _H_TASK, counterexample=_pl_cx("task_standard_gaussian"), layer="symbolic"),
        Hypothesis("noise_free", _H_NOISE, counterexample=_pl_cx("noise_free"), layer="symbolic"),
        Hypothesis("N_ge_1", _H_N, necessary_note=_NOTE_N),
        Hypothesis("rho_eq_N", _H_RHO_N, "the LSA normalises by the prompt length", counterexample=_pl_cx("rho_eq_N"),
                   layer="symbolic"),
        Hypothesis("other_blocks_zero", _H_BLOCKS, "only w22 and W11 non-zero among the weights that enter ŷ",
                   counterexample=_pl_other_blocks, layer="symbolic"),
    ),
    clauses=(
        Clause("moments", r"h=\tfrac1N\sum_{i\le N}y_ix_i:\ \mathbb E[hh^\top]=\Lambda\Gamma_N,\ \mathbb E[hw^\top]=\Lambda,\ "
               r"\Gamma_N=(1+\tfrac1N)\Lambda+\tfrac1N\operatorname{tr}(\Lambda)I_d",
               "derived", "symbolic d and N (every d ≥ 1, N ≥ 1): the Isserlis pairings of E[x_ia x_ip x_jq x_jc] in index "
               "form, contracted into matrices by from_index_summation, the pair counts N and N(N − 1) as delta sums "
               "(theory.gaussian; Isserlis' theorem, independence and Λᵀ = Λ the premises)",
               ("derivation", "loss_vs_sympy"),
               also=(("derived_at", "d = 2 and d = 3, symbolic Λ and N (Wick sums over explicit indices; the general E[hhᵀ] "
                      "equals them: obligations at_d2, hh_equals_at_d3)"),), rests_on=("Isserlis' theorem", "Wishart index sums", "split i = j / i ≠ j", "Gaussian ICL setting", "E over w first", "E over X (linearity)", "independent query x_q", "fourth-moment pairings")),
        Clause("loss_formula", r"L(B)=\tfrac12\mathbb E(h^\top Bx_q-y_q)^2=\tfrac12\big[\operatorname{tr}(B^\top\Lambda\Gamma_N B\Lambda)"
               r"-2\operatorname{tr}(\Lambda B\Lambda)+\operatorname{tr}\Lambda\big]",
               "derived", "symbolic d and N (every d ≥ 1, N ≥ 1; theory.icl.derive_population_loss_general): ŷ = hᵀBx_q from "
               "the LSA's block product (w21 = w21' = 0, ρ = N), E over w, over X by the Isserlis-contracted Wishart moment, "
               "over x_q (independence and linearity of E the premises); the form is compared with it at (d, N) ∈ {1, 3, 4} × {1, 5}",
               ("derivation", "loss_vs_sympy", "loss_vs_monte_carlo"),
               also=(("derived_at", "d = 2, symbolic Λ, B and N (Wick sums; equal to the general loss at d = 2: obligation "
                      "general_equals_at_d2); (d, N) = (1, 1), (2, 1), (2, 2) at diagonal Λ from the LSA's own squared error "
                      "averaged exactly (symbolic B)"),
                     ("checked", "d = 3, N ∈ {2, 5}, two (Λ, B) per N (near Γ_N⁻¹ and most asymmetric of 32): Monte Carlo "
                      "through the torch LSA within 5 SE, 20,000 (quick) / 250,000 contexts")), rests_on=("Isserlis' theorem", "Wishart index sums", "split i = j / i ≠ j", "Gaussian ICL setting", "E over w first", "E over X (linearity)", "independent query x_q", "fourth-moment pairings")),
    ),
    source="lecture notes 000; Zhang, Frei, Bartlett (JMLR 2024)",
    kind="identity",
    form=ti.population_loss,
    derivation=ti.derive_population_loss_general,
    checks=(
        Check("loss_vs_sympy", "symbolic", _loss_symbolic, "vs the loss derived for symbolic d, N (at d ∈ {1, 3, 4}, N ∈ {1, 5}) "
              "and from Wick moments (d = 2 symbolic Λ; d = 3 moments)"),
        Check("loss_vs_monte_carlo", "numeric", _loss_mc, "vs Monte Carlo through the torch LSA (task and query integrated exactly, control variate), 5 SE"),
    ),
    mutants=(
        Mutant("one_over_N_plus_1", "wrong constant", "1/(N+1) for 1/N in Γ_N", _pl_mut("n_plus_1")),
        Mutant("missing_trace_term", "dropped term", "the ½tr(Λ) term dropped", _pl_mut("no_trace")),
        Mutant("gamma_equals_lambda", "wrong formula", "Γ_N = Λ (E[hhᵀ] = Λ²)", _pl_mut("gamma_is_lambda")),
        Mutant("B_transposed", "swapped index", "B and Bᵀ swapped in the quadratic term", _pl_mut("transpose")),
    ),
)
