"""Group A, continued: the cost of attention in multiply-accumulates (lecture notes 000, 001, 003, 004).
Binds theory/attention.py and numerics/attention.py to checks, tolerances and mutants."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
import torch

from numerics import attention as na
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.comparisons import largest
from theory import attention as ta


# --------------------------------------------------------------------------------------------
# attn.complexity
# form: {"score_cost": (N, K, D) -> MACs, "head_cost": (N, K, D) -> MACs}; FLOPs = 2·MACs


def _cost_symbolic(form, ctx) -> CheckResult:
    """The form's cost polynomials vs the sums SymPy evaluated from the definition, on a grid."""
    der = ta.derive_complexity()
    Ns, Ks, Ds = der.facts["N"], der.facts["K"], der.facts["D"]
    ref = {k: sp.lambdify([Ns, Ks, Ds], der.result[k]) for k in ("score_cost", "head_cost")}
    errs = {k: 0 for k in ref}
    for N in range(1, 13):
        for K in range(1, 7):
            for D in range(1, 9):
                for k in ref:
                    errs[k] = largest(errs[k], abs(int(form[k](N, K, D)) - int(ref[k](N, K, D))))
    return compare(worst(errs), 0, "exact integer counts", sizes={"N": "1..12", "K": "1..6", "D": "1..8"},
                   details=dict(errs, derived={k: str(v) for k, v in der.result.items()},
                                k_threshold=str(der.facts["k_threshold"]), gap_at_half_d=str(der.facts["gap_at_half_d"])))


def _cost_flop_counter(form, ctx) -> CheckResult:
    """FlopCounterMode (FLOPs = 2 × multiply-adds for matrix products) on the actual modules:
    lecture notes 000's shared-U score module vs score_cost, MultiheadAttention (E = D, H heads, K = D/H,
    no bias) vs H·head_cost; and the N² share of the FLOPs at N ≫ D vs N/(N + D)."""
    grid = [(N, K, D) for N in (1, 3, 8, 17) for K in (1, 2, 5) for D in (1, 4, 7)]
    errs, measured = {"score_cost": 0, "mha_head_cost": 0}, []
    for N, K, D in grid:
        m = na.SharedProjectionScores(D, K, device=ctx.device)
        fl = na.count_flops(m, torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device))
        assert fl["total"] % 2 == 0
        errs["score_cost"] = largest(errs["score_cost"], abs(fl["total"] // 2 - int(form["score_cost"](N, K, D))))
    mha_grid = [(N, D, H) for N in (2, 9) for D, H in ((4, 1), (6, 2), (8, 4), (12, 3))] + ctx.size([], [(33, 16, 2)])
    for N, D, H in mha_grid:
        mha = torch.nn.MultiheadAttention(D, H, bias=False, batch_first=True, dtype=torch.float64, device=ctx.device)
        x = torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device)
        fl = na.count_flops(mha, x, x, x, need_weights=False)
        pred = H * int(form["head_cost"](N, D // H, D))
        errs["mha_head_cost"] = largest(errs["mha_head_cost"], abs(fl["total"] // 2 - pred))
        measured.append({"N": N, "D": D, "H": H, "flops": fl["total"], "predicted_macs": pred})
    der = ta.derive_complexity()
    frac = lambda N, D: der.facts["score_fraction"].subs({der.facts["N"]: N, der.facts["D"]: D})  # noqa: E731 (exact)
    shares = {}
    for N, K, D in [(256, 4, 4), (512, 2, 8)]:  # N ≫ D: the N² term dominates
        fl = na.count_flops(na.SharedProjectionScores(D, K, device=ctx.device), torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device))
        share = Fraction(fl["total"] - fl["SharedProjectionScores.proj"], fl["total"])  # exact rational
        shares[f"N{N}_K{K}_D{D}"] = float(share)
        derived = sp.Rational(frac(N, D))
        errs[f"n2_share_vs_derived_N{N}_D{D}"] = 0 if share == Fraction(int(derived.p), int(derived.q)) else 1
        errs[f"n2_share_not_above_0.95_N{N}"] = 0 if share > Fraction(95, 100) else 1
    if ctx.want_figures:
        plt = pyplot()

        Nn = np.array([1, 2, 4, 8, 16, 32, 64, 128])
        K, D = 4, 8
        fl = [na.count_flops(na.SharedProjectionScores(D, K), torch.zeros(1, int(n), D, dtype=torch.float64))["total"] for n in Nn]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.loglog(Nn, np.array(fl) / 2, "o", label="FlopCounterMode / 2")
        ax.loglog(Nn, [form["score_cost"](int(n), K, D) for n in Nn], "-", label="claimed N·K·D + N²·K")
        ax.loglog(Nn, Nn**2 * K, ":", label="N²·K")
        ax.set_xlabel("N (tokens)")
        ax.set_ylabel("multiply-adds")
        ax.set_title(f"shared-U scores, K={K}, D={D}")
        ax.legend(fontsize=7)
        ctx.save_figure(fig, "cost_vs_n")
    return compare(worst(errs), 0, "exact: FlopCounterMode counts 2 FLOPs per multiply-add of a matrix product",
                   sizes={"score grid (N,K,D)": len(grid), "MHA grid (N,D,H)": mha_grid}, device=ctx.device,
                   details={"max_abs_diff": errs, "n2_share": shares, "mha": measured})


_COST_FORM = {"score_cost": lambda N, K, D: N * K * D + N * N * K, "head_cost": lambda N, K, D: 4 * N * K * D + 2 * N * N * K}

def _cost_cx_separate(ctx) -> Counterexample:
    """Without one shared U: scores ⟨U_k x_n, U_q x_m⟩ with two projections cost 2NKD + N²K."""
    N, K, D = 3, 2, 4
    counted = ta.count_attention_macs(N, K, D)["separate_scores"]
    claimed = int(_COST_FORM["score_cost"](N, K, D))
    return Counterexample({"N": N, "K": K, "D": D, "scores": "⟨U_k x_n, U_q x_m⟩, U_q ≠ U_k"}, "score_cost",
                          f"counted {counted} multiply-adds, the clause says NKD + N²K = {claimed}",
                          violated=counted != claimed, error=abs(counted - claimed), tolerance=0.0,
                          justification="exact integer counts (product terms of SymPy symbol matrices)")


def _cost_cx_d_grows(ctx) -> Counterexample:
    """Without D fixed: along D = N the N² share N²K/C is 1/2 at every N, it does not tend to 1."""
    K = 2
    shares = {N: Fraction(N * N * K, int(_COST_FORM["score_cost"](N, K, N))) for N in (10, 1000, 10**6)}
    gap = float(1 - shares[10**6])
    return exceeds({"K": K, "D": "D = N", "N": "10, 10³, 10⁶"}, "score_share",
                   "N²K/C = " + ", ".join(f"{v}" for v in shares.values()) + " (exact): constant 1/2, not → 1",
                   error=gap, tolerance=0.1,
                   justification="exact rationals; a share tending to 1 would be within 0.1 of 1 at N = 10⁶ "
                                 "(N/(N + D) = 0.999999 for D fixed at 1)")


declare(
    id="attn.complexity",
    title="Cost of attention: N·K·D (projections) + N²·K (scores) multiply-adds; the N² term dominates for N ≫ D",
    hypotheses=(
        setting("mac_convention", r"\text{cost}=\text{multiply-adds of naive matrix products (softmax, biases, sums not counted)}",
                "the counting convention defines the cost (FlopCounterMode "
                "counts 2 FLOPs per multiply-add of a matrix product and nothing for the softmax)"),
        Hypothesis("shared_projection", r"\text{scores }\langle Ux_n,Ux_m\rangle\text{ with one }U\in\mathbb R^{K\times D}",
                   "lecture notes 000's scores with one shared projection (for C_scores)", counterexample=_cost_cx_separate),
        Hypothesis("d_fixed", r"D\ \text{fixed as }N\to\infty", "D fixed while N grows (for the limit)",
                   counterexample=_cost_cx_d_grows),
    ),
    clauses=(
        Clause("score_cost", r"C_{\text{scores}}=NKD+N^2K", "derived",
               "every N, K, D ≥ 1 (symbolic sizes under the naive-product convention; also counted at N ≤ 3, K ≤ 2, D ≤ 2 "
               "and (4, 3, 3), (5, 1, 4))", ("derivation", "polynomial_vs_sympy", "flop_counter"),
               also=(("checked", "FlopCounterMode on the shared-U score module, N ∈ {1, 3, 8, 17}, K ∈ {1, 2, 5}, "
                      "D ∈ {1, 4, 7}"),), rests_on=("polynomial-count ansatz",)),
        Clause("head_cost", r"C_{\text{head}}=4NKD+2N^2K\ \text{(}U_q,U_k,U_v,U_p\text{; FLOPs}=2\times\text{)}", "derived",
               "every N, K, D ≥ 1 (symbolic sizes under the naive-product convention)",
               ("derivation", "polynomial_vs_sympy", "flop_counter"),
               also=(("checked", "FlopCounterMode on MultiheadAttention (no bias, K = D/H): N ∈ {2, 9}, (D, H) ∈ {(4, 1), "
                      "(6, 2), (8, 4), (12, 3)}, plus (N, D, H) = (33, 16, 2) at default/full size"),), rests_on=("polynomial-count ansatz",)),
        Clause("score_share", r"\frac{N^2K}{C_{\text{scores}}}=\frac{N}{N+D}\xrightarrow{N\to\infty}1", "derived",
               "every D ≥ 1 (symbolic limit)", ("derivation", "flop_counter"),
               also=(("checked", "exact FlopCounterMode shares at (N, K, D) = (256, 4, 4), (512, 2, 8), > 0.95"),), rests_on=("polynomial-count ansatz",)),
    ),
    source="lecture notes 000 ('NKD + N²K time'); torch.utils.flop_counter.FlopCounterMode",
    kind="identity",
    form=_COST_FORM,
    derivation=ta.derive_complexity,
    notes=("Lecture notes 000 adds 'N²D if K < D/2': NKD + N²K < N²D holds iff K < ND/(N+D); at K = D/2 it needs N > D. "
           "torch 2.13's FlopCounterMode counts 0 for the fused CPU attention kernel, so counts run under the math backend."),
    checks=(
        Check("polynomial_vs_sympy", "symbolic", _cost_symbolic, "form vs the multiply-add sums SymPy evaluated"),
        Check("flop_counter", "numeric", _cost_flop_counter, "vs FlopCounterMode on the score module and MultiheadAttention", uses_device=False),
    ),
    mutants=(
        Mutant("scores_over_d", "wrong formula", "N·K·D + N²·D (the parameter-free variant's score cost)",
               dict(_COST_FORM, score_cost=lambda N, K, D: N * K * D + N * N * D)),
        Mutant("projection_dropped", "dropped term", "N²·K only", dict(_COST_FORM, score_cost=lambda N, K, D: N * N * K)),
        Mutant("flops_not_macs", "wrong constant", "2(NKD + N²K): FLOPs reported as multiply-adds",
               dict(_COST_FORM, score_cost=lambda N, K, D: 2 * (N * K * D + N * N * K))),
        Mutant("head_without_weighting", "dropped term", "head cost without the A-weighted sum of values (4NKD + N²K)",
               dict(_COST_FORM, head_cost=lambda N, K, D: 4 * N * K * D + N * N * K)),
        Mutant("head_without_output_projection", "dropped term", "head cost without U_p (3NKD + 2N²K)",
               dict(_COST_FORM, head_cost=lambda N, K, D: 3 * N * K * D + 2 * N * N * K)),
    ),
)
