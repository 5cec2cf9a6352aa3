"""Group B, continued: trained transformers against the least-squares, nearest-neighbour and averaging
baselines (lecture notes 000, 002, 003; Garg et al. 2022). Conventions as in :mod:`proofs_checks.claims.icl`."""

from __future__ import annotations

import math

import numpy as np

from numerics import icl_softmax as ni
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, setting
from proofs_checks.comparisons import largest, smallest
from proofs_checks.claims._icl_common import _criteria_margin


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


def _tvb_k0(ctx) -> Counterexample:
    """Without d ≤ k: at k = 0 (no examples) E[y_q | x_q] = 0 (w is symmetric), so no predictor's error is below
    E Var(y_q | x_q)/d = E‖x_q‖²/d, which is what averaging and 3-NN (both predict 0) already reach."""
    d, n = TVB_D, 4000
    errs = ni.baseline_errors(None, d, 1, n, seed=ctx.seed_for("k0"))
    rng = np.random.default_rng(ctx.seed_for("k0"))
    X = rng.normal(size=(n, 1, d))  # the same draws as baseline_errors: its x_q at k = 0 is X[:, 0]
    floor = float(np.mean(np.sum(X[:, 0] ** 2, -1)) / d)  # Bayes risk / d at k = 0 on these prompts
    best = smallest(float(errs[b][0][0]) for b in ("averaging", "3-NN"))
    return Counterexample({"d": d, "k": 0, "prompts": n}, "far_below",
                          f"no predictor can be below the Bayes risk {floor:.3f} (E‖x_q‖²/d), while 'far below' asks for ≤ "
                          f"{TVB_FAR:g} × {best:.3f} (the better of averaging and 3-NN, which predict 0)",
                          violated=floor > TVB_FAR * best, error=floor / best, tolerance=TVB_FAR,
                          justification="the Bayes risk over the better baseline's error, against the criterion's ½")


declare(
    id="icl.transformer_vs_baselines",
    title="A small softmax transformer learns linear functions in context: far below averaging and 3-NN at d = 2 (evidence)",
    hypotheses=(
        setting("data_model", r"x_i,x_q\sim\mathcal N(0,I_d),\ w\sim\mathcal N(0,I_d),\ y=\langle w,x\rangle\ \text{(no noise)},\ d=2",
                "the training and test prompts"),
        Hypothesis("trained", r"\text{a 2-layer, width-32, 4-head softmax transformer trained by Adam (batch 64) for 600 (quick), "
                   r"2000 (default), 4000 (full) steps}",
                   necessary_note="part of the setting (the untrained network is a planted mutant the check rejects)"),
        Hypothesis("k_range", r"d\le k\le 3d", "the number of in-context examples compared", counterexample=_tvb_k0),
    ),
    clauses=(
        Clause("far_below", r"\text{error}/d+2\,\mathrm{SE}\le\tfrac12\big(\min(\text{averaging},\text{3-NN})-2\,\mathrm{SE}\big)\ \text{at every } k",
               "checked", "d = 2, k = 2…6, one training seed, 8000 (quick) / 16000 (default) / 32000 (full) fresh evaluation prompts",
               ("error_vs_examples",)),
        Clause("decreasing", r"\text{error}(d)-\text{error}(3d)>2\,\mathrm{SE}",
               "checked", "d = 2, the same run", ("error_vs_examples",)),
    ),
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
          "squares' (the lecture notes' and Garg et al.'s wording) is reported per k (gap), not claimed. Earlier settings "
          "(2 heads, lr 3e-3, 300 steps) left some seeds on the pre-emergence loss plateau, which made the verdict seed-dependent.",
)
