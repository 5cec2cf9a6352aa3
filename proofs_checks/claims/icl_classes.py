"""Group G: in-context learning beyond linear functions (evidence): ``icl.function_classes`` (Garg et
al. 2022: a small transformer trained on sparse linear functions, decision trees and two-layer ReLU
networks against the scikit-learn and GD baselines) and ``icl.algorithm_probe`` (Akyürek et al.
2023, von Oswald et al. 2023: which in-context algorithm a trained learner's predictions match).

Both are evidence: the checks train models and compare curves with criteria written next to them;
the claims are reported as evidence, never verified. Numerics: :mod:`numerics.icl_classes` (task
generators, the batched GPT-2-like model and trainer, the baselines) and :mod:`numerics.icl_probe`
(the probe, shared with ``tverify check icl --model``).
"""

from __future__ import annotations

import math

import numpy as np

from numerics import icl as ni
from numerics import icl_classes as nc
from numerics import icl_probe as npb
from proofs_checks.comparisons import largest, smallest
from proofs_checks.context import RunContext, pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare
from proofs_checks.claims._common import declare, setting
from proofs_checks.claims._icl_common import _criteria_margin

Z = 3.0  # one-sided 3σ: every "below"/"separable" criterion of this module, on paired per-prompt differences


def _paired(errs: dict, a: str, b: str, rows) -> tuple[float, float, float]:
    """Mean over the selected lengths (rows) and prompts of ``e_b − e_a`` (paired on the same prompts:
    each prompt's errors averaged over the rows first), its SE and ``z = mean/SE``."""
    diff = (errs[b][rows] - errs[a][rows]).mean(0)
    m = float(diff.mean())
    se = float(diff.std(ddof=1) / math.sqrt(diff.size))
    return m, se, (m / se if se > 0 else (math.inf if m > 0 else 0.0))


def _curves_figure(ctx, name: str, title: str, curves: dict, names, ylim=None):
    if not ctx.want_figures:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ns = curves["lengths"]
    for nm in names:
        ax.errorbar(ns, curves[nm]["mean"], yerr=2 * np.asarray(curves[nm]["se"]), marker="o", ms=3, capsize=2, label=nm)
    ax.set_xlabel("number of in-context examples n")
    ax.set_ylabel("squared error / E y²")
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, name)


def _public(curves: dict) -> dict:
    return {k: v for k, v in curves.items() if not k.startswith("_")}


# --------------------------------------------------------------------------------------------
# icl.function_classes (evidence)   form: the trainer nc.train_icl_models(specs, n_max, steps=, ...) -> [TrainedModel]

#: (quick, default, full): d, n_max, Adam steps, batch, width, layers, heads, evaluation prompts.
#: full is Garg et al.'s setting in dimension and prompt length (d = 20, sparse k = 3, 40 examples;
#: their model is a 12-layer width-256 GPT-2 trained for 500k steps, with a curriculum on d and n) with
#: their curriculum (d from 5, n from 11, growing every 1000 steps) and a smaller model and budget: on an H100
#: the batch of four models ran 17.5 ms per step (2000-step smoke test), so 20000 steps take ~6 min and the
#: evaluation ~1 min; whether this budget reaches the paper's comparisons was not measured (a full run was
#: beyond this task's device time).
FC_SIZES = {
    "quick": dict(d=2, k=1, n_max=8, steps=700, batch=64, width=16, layers=2, heads=2, prompts=200),
    "default": dict(d=2, k=1, n_max=10, steps=1600, batch=64, width=16, layers=2, heads=2, prompts=400),
    "full": dict(d=20, k=3, n_max=40, steps=20000, batch=64, width=128, layers=6, heads=4, prompts=2000,
                 curriculum=(5, 11, 1000)),
}


def _fc_sizes(ctx) -> dict:
    return FC_SIZES[ctx.mode]


_FC_CACHE: dict = {}
#: label noise of the linear-regression model trained in the same batch (used by icl.algorithm_probe)
PROBE_SIGMA = 0.5


def _fc_specs(sz) -> list:
    """The function classes trained as one batch: (a) sparse linear, (b) depth-4 trees, (c) ReLU nets, and
    noisy linear regression (σ = PROBE_SIGMA; the softmax model of ``icl.algorithm_probe``)."""
    d = sz["d"]
    return [nc.TaskSpec("sparse_linear", d, k=sz["k"]), nc.TaskSpec("decision_tree", d, depth=4),
            nc.TaskSpec("relu_net", d), nc.TaskSpec("linear", d, noise=PROBE_SIGMA)]


def _shared_models(trainer, mode: str, seed: int, device: str):
    """The batch of :func:`_fc_specs` models trained by ``trainer`` (the claim's form, or a mutant), once per
    (mode, seed, device, trainer) in the process; both claims of this module read it (the form is kept in the
    entry so that its id is not reused). Returns ``({kind: TrainedModel}, training seed)``."""
    sz = FC_SIZES[mode]
    tseed = RunContext(mode, seed, device).for_check("icl.function_classes", "shared").seed_for("train")
    key = (mode, seed, device, id(trainer))
    if key not in _FC_CACHE:
        models = trainer(_fc_specs(sz), sz["n_max"], steps=sz["steps"], batch=sz["batch"], seed=tseed,
                         width=sz["width"], layers=sz["layers"], heads=sz["heads"], curriculum=sz.get("curriculum"),
                         device=device)
        _FC_CACHE[key] = ({m.spec.kind: m for m in models}, tseed, trainer)
    models, tseed, _ = _FC_CACHE[key]
    return models, tseed


def _fc_lengths(sz) -> list[int]:
    d, n = sz["d"], sz["n_max"]
    cand = {1, d // 2, d - 1, d, d + 1, 2 * d, 3 * d, n // 2, n - 1}
    return sorted(v for v in cand if 1 <= v <= n - 1)


def _closeness(errs, model: str, ref: str, rows) -> tuple[float, float, float]:
    """Fraction of the gap between ``ref`` and the zero predictor that ``model`` leaves:
    ``mean(e_model − e_ref) / mean(e_zero − e_ref)`` over the rows (paired prompts); 0 = as good as
    ``ref``, 1 = no better than predicting 0, negative = better than ``ref``. Also the paired mean
    difference ``e_model − e_ref`` and its SE."""
    m, se, _ = _paired(errs, ref, model, rows)
    gap = float((errs["zero"][rows] - errs[ref][rows]).mean())
    return (m / gap if gap > 0 else math.inf), m, se


#: Adam steps of the per-prompt two-layer network at quick / default / full (≤ 9 examples at quick and default: it
#: fits them by then; at quick the comparison with it is only reported)
NN_GD_STEPS = (100, 200, 400)
CLOSE = 0.25  # "close to X": leaves at most a quarter of the gap between X and the zero predictor


def _fc_check(form, ctx, kind: str) -> CheckResult:
    sz = _fc_sizes(ctx)
    models, tseed = _shared_models(form, ctx.mode, ctx.seed, ctx.device)
    tm = models[kind]
    Ls = _fc_lengths(sz)
    d = sz["d"]
    eseed = ctx.seed_for("eval", kind)
    P = sz["prompts"]
    bl = {"sparse_linear": ("least_squares", "lasso", "averaging", "zero"),
          "decision_tree": ("decision_tree", "knn3", "averaging", "zero"),
          "relu_net": ("nn_gd", "knn3", "averaging", "zero")}[kind]
    cur = nc.error_curves(tm.model, tm.spec, Ls, P, seed=eseed, baselines=bl, device=ctx.device,
                          baseline_kw={"nn_gd": {"steps": ctx.size(*NN_GD_STEPS), "lr": 0.01}})
    E = cur["_errors"]
    rows_all = np.arange(len(Ls))
    big = np.array([n >= d for n in Ls])
    crit, det = {}, {"lengths": Ls, "curves": _public(cur), "train_seconds": tm.seconds,
                     "final_train_loss": float(np.mean(tm.curve[-50:])) if len(tm.curve) else None}
    # in-context learning at all (every class, every size): below the zero predictor at n ≥ d, and the error
    # on the shorter half of the prompt lengths above that on the longer half (paired z ≥ 3 each)
    _, _, z0 = _paired(E, "transformer", "zero", np.flatnonzero(big))
    half = len(Ls) // 2
    drop = E["transformer"][:half].mean(0) - E["transformer"][half:].mean(0)  # per prompt: short minus long prompts
    zdrop = float(drop.mean() / (drop.std(ddof=1) / math.sqrt(drop.size)))
    crit["learns_in_context"] = Z / z0 if z0 > 0 else math.inf
    crit["error_falls_with_n"] = Z / zdrop if zdrop > 0 else math.inf
    det.update(z_below_zero_predictor=z0, z_error_falls=zdrop)
    if kind == "sparse_linear":
        small = np.flatnonzero(np.array([n < d for n in Ls]))
        m, se, z = _paired(E, "transformer", "least_squares", small)
        f, mm, sse = _closeness(E, "transformer", "lasso", rows_all)
        paper = {"below_least_squares_n_lt_d": Z / z if z > 0 else math.inf, "close_to_lasso": f / CLOSE}
        det.update(least_squares_minus_transformer_n_lt_d=(m, se, z), lasso_gap_fraction=f,
                   transformer_minus_lasso=(mm, sse))
        names = ("transformer", "least_squares", "lasso", "averaging")
        title = f"sparse linear (d={d}, k={tm.spec.k})"
    elif kind == "decision_tree":
        rows = np.flatnonzero(np.array([n >= 2 for n in Ls]))
        m1, se1, z1 = _paired(E, "transformer", "decision_tree", rows)
        m2, se2, z2 = _paired(E, "transformer", "knn3", rows)
        paper = {"below_greedy_tree": Z / z1 if z1 > 0 else math.inf, "below_3nn": Z / z2 if z2 > 0 else math.inf}
        det.update(tree_minus_transformer=(m1, se1, z1), knn3_minus_transformer=(m2, se2, z2))
        names = ("transformer", "decision_tree", "knn3", "zero")
        title = f"decision trees (d={d}, depth 4)"
    else:
        f, mm, sse = _closeness(E, "transformer", "nn_gd", rows_all)
        # (d) the same model on linear functions: close to least squares
        lin = nc.TaskSpec("linear", d)
        cl = nc.error_curves(tm.model, lin, Ls, P, seed=ctx.seed_for("eval", "linear"),
                             baselines=("least_squares", "averaging", "zero"), device=ctx.device)
        fl, ml, sl = _closeness(cl["_errors"], "transformer", "least_squares", rows_all)
        paper = {"close_to_nn_gd": f / CLOSE, "on_linear_close_to_least_squares": fl / CLOSE}
        det.update(nn_gd_gap_fraction=f, transformer_minus_nn_gd=(mm, sse), linear_curves=_public(cl),
                   linear_least_squares_gap_fraction=fl, linear_transformer_minus_least_squares=(ml, sl))
        names = ("transformer", "nn_gd", "knn3", "zero")
        title = f"two-layer ReLU networks (d={d}, 100 units)"
        _curves_figure(ctx, "relu_model_on_linear", f"model trained on ReLU nets, tested on linear (d={d})", cl,
                       ("transformer", "least_squares", "averaging"), ylim=(-0.05, 1.5))
    det["paper_criteria"] = paper
    stated = [k for k in paper if k in FC_STATED]
    reported = {k: paper[k] for k in paper if k not in FC_STATED}
    required = {**crit, **{k: paper[k] for k in stated}}
    det["reported_not_stated"] = {k: {"ratio": v, "met": bool(v <= 1.0)} for k, v in reported.items()}
    _curves_figure(ctx, f"{kind}_error_vs_examples", f"{title}, {sz['steps']} Adam steps", cur, names,
                   ylim=(-0.05, 1.6))
    sizes_txt = f"{ctx.mode} sizes (d = {d}, {sz['steps']} Adam steps, width {sz['width']})"

    def _fmt(v: float) -> str:
        return f"{v:.3g}" if math.isfinite(v) else "∞ (no improvement at all)"

    just = (f"evidence criteria, every one required at every size (error = worst of the ratios, each ≤ 1 to support): "
            f"learns in context (paired z ≥ {Z:g} below the zero predictor at n ≥ d, and the mean error at n ∈ "
            f"{Ls[:len(Ls) // 2]} above that at n ∈ {Ls[len(Ls) // 2:]} by ≥ {Z:g} SE); {', '.join(stated)} "
            f"('below' = paired z ≥ {Z:g}; 'close to X' = leaves ≤ {CLOSE:g} of the gap between X and the zero predictor)"
            f"; SEs over {P} fresh prompts per length"
            + ("".join(f"; not part of the statement, measured and reported only: {k} = {_fmt(v)} "
                       f"({'met' if v <= 1.0 else 'NOT met'} at {sizes_txt})" for k, v in reported.items())))
    quantities = {"learns_in_context": "the paired mean of (zero predictor − transformer) error at n ≥ d",
                  "error_falls_with_n": "the transformer's mean error drop from the shorter to the longer prompts",
                  "below_least_squares_n_lt_d": "the paired mean of (least squares − transformer) error at n < d",
                  "close_to_lasso": "the transformer's excess error over Lasso (fraction of Lasso's gap to the zero predictor)",
                  "below_greedy_tree": "the paired mean of (greedy tree − transformer) error",
                  "below_3nn": "the paired mean of (3-NN − transformer) error",
                  "close_to_nn_gd": "the transformer's excess error over the per-prompt network (fraction of its gap to zero)",
                  "on_linear_close_to_least_squares": "the transformer's excess error over least squares on linear functions"}
    # a z criterion's error Z/z = Z·SE/|paired mean| is itself its statistical floor (the Z-SE band relative to the mean)
    floors = {k: v for k, v in required.items() if k not in ("close_to_lasso", "close_to_nn_gd",
                                                             "on_linear_close_to_least_squares")}
    return _criteria_margin(required, 1.0, just, quantities={k: quantities[k] for k in required},
                            proportional=("close_to_lasso", "close_to_nn_gd", "on_linear_close_to_least_squares"),
                            floors=floors, seeds=[tseed, eseed],
                            sizes={**{k: v for k, v in sz.items()}, "lengths": Ls}, device=tm.device, details=det)


#: the paper's comparisons that the statement makes (required at every size); the others (Garg et al.'s "below least
#: squares for n < d" and "the ReLU-trained model close to least squares on linear functions") are not met at the
#: CPU sizes (d = 2) and are measured and reported only, with their verdict at the size that ran
FC_STATED = ("close_to_lasso", "below_greedy_tree", "below_3nn", "close_to_nn_gd")


def _untrained(specs, n_max, *, steps, **kw):
    return nc.train_icl_models(specs, n_max, steps=0, **kw)


_FC_SCOPE = ("d = 2 (sparse k = 1, trees of depth 4, ReLU nets of 100 units), one batched TinyGPT per class (2 layers, "
             "width 16, 2 heads), one training seed, 700 (quick) / 1600 (default) Adam steps; 200 / 400 fresh prompts per "
             "length, lengths n ∈ {1, 2, 3, 4, 6, 7} (quick, n_max = 8) / {1, 2, 3, 4, 5, 6, 9} (default, n_max = 10) "
             "(_fc_lengths: 1, d, d + 1, 2d, 3d, n_max // 2 and n_max − 1 within 1 … n_max − 1)")

declare(
    id="icl.function_classes",
    title="A small transformer learns sparse linear functions, decision trees and ReLU networks in context at d = 2 (evidence)",
    hypotheses=(
        setting("task_laws", r"x\sim\mathcal N(0,I_d);\ \text{(a) } y=\langle w,x\rangle,\ w \text{ with } k \text{ non-zero } "
                r"\mathcal N(0,1)\text{ coordinates; (b) depth-4 trees on } \mathrm{sign}(x_c),\ \text{leaves } \mathcal N(0,1);"
                r"\ \text{(c) } y=\sqrt{2/100}\,\textstyle\sum_{j\le100}a_j\,\mathrm{relu}\langle w_j,x\rangle",
                "the training and test prompts of each class",
                text="the function classes of Garg et al. (2022) (numerics.icl_classes.sample_tasks)"),
        Hypothesis("trained", r"\text{one small GPT-2-like transformer per class trained by Adam on fresh prompts of that class "
                   r"(FC\_SIZES: } d=2,\ k=1,\ n_{\max}\le10,\ \le1600 \text{ steps at quick/default)}",
                   necessary_note="part of the setting (the untrained networks are a planted mutant the checks reject)"),
        Hypothesis("n_ge_d", r"\text{the zero-predictor comparison pooled over prompt lengths } n\ge d",
                   necessary_note="not shown necessary: it only keeps the lengths where the comparison is informative (at "
                                  "n = 0 every class is sign-symmetric, so no predictor beats predicting 0)"),
    ),
    clauses=(
        Clause("learns_in_context", r"\text{every class: error below the zero predictor, pooled over } n\ge d\ \text{(paired } z\ge3\text{), "
               r"falling with } n\ \text{(shorter vs longer half of the lengths, } z\ge3\text{)}",
               "checked", _FC_SCOPE, ("sparse_linear", "decision_tree", "relu_net")),
        Clause("sparse_close_to_lasso", r"\text{(a) sparse linear: leaves}\le\tfrac14\text{ of Lasso's gap to the zero predictor (errors averaged over the lengths)}",
               "checked", _FC_SCOPE + "; scikit-learn Lasso (α = 0.01)", ("sparse_linear",)),
        Clause("trees_below_greedy_and_3nn", r"\text{(b) depth-4 trees: below a greedy tree (CART) and 3-NN, pooled over } n\ge2\ \text{(paired } z\ge3\text{)}",
               "checked", _FC_SCOPE + "; scikit-learn DecisionTreeRegressor, KNeighborsRegressor(3)", ("decision_tree",)),
        Clause("relu_close_to_net", r"\text{(c) ReLU nets: at most }\tfrac14\text{ of a per-prompt 2-layer net's gap to the zero predictor "
               r"above that net (errors averaged over the lengths)}",
               "checked", _FC_SCOPE + "; the per-prompt net: 100 ReLU units, 100 (quick) / 200 (default) Adam steps (at quick "
               "it is undertrained, and the transformer is below it)", ("relu_net",)),
    ),
    source="Garg, Tsipras, Liang, Valiant (NeurIPS 2022) §4–5; lecture notes 002 (ICL slides)",
    kind="evidence",
    form=nc.train_icl_models,
    checks=(
        Check("sparse_linear", "trained", lambda f, c: _fc_check(f, c, "sparse_linear"),
              "error vs n: transformer, least squares, scikit-learn Lasso, averaging (sparse linear functions)"),
        Check("decision_tree", "trained", lambda f, c: _fc_check(f, c, "decision_tree"),
              "error vs n: transformer, scikit-learn DecisionTreeRegressor, KNeighborsRegressor(3) (depth-4 trees)"),
        Check("relu_net", "trained", lambda f, c: _fc_check(f, c, "relu_net"),
              "error vs n: transformer, a 2-layer ReLU net trained by GD on the prompt, 3-NN; the same model on "
              "linear functions vs least squares (reported)"),
    ),
    mutants=(
        Mutant("untrained_transformer", "wrong solver output", "the trainer returns the initial (untrained) networks",
               _untrained),
    ),
    notes="Evidence only. One batched GPT-2-like model per class (numerics.icl_classes.TinyGPT, interleaved (x, 0) / "
          "(0, y) tokens, prediction read at the x tokens) trained on fresh prompts, against scikit-learn Lasso "
          "(α = 0.01), DecisionTreeRegressor (greedy CART), KNeighborsRegressor(3), min-norm least squares and a "
          "two-layer ReLU network (100 units) trained by Adam on each prompt. Every criterion of the statement is required "
          "at every size. Audit (issue 33): two of Garg et al.'s comparisons are not met at the CPU sizes (d = 2) and are "
          "no longer stated: 'below least squares for n < d' (at d = 2, k = 1 the only such length is n = 1, where the "
          "model sits at least squares: ratio 7.4 at default) and 'the ReLU-trained model close to least squares on "
          "linear functions' (it leaves ~30 % of the gap: ratio 1.25 at default, 1.6 at quick); they are measured, and "
          "each check's message says whether they are met at the size that ran. Garg et al. report them at d = 20 with a "
          "12-layer model; --full runs d = 20, k = 3, 40 examples (a 6-layer width-128 model, 20k steps, ~7 min on an "
          "H100), which was not run for this catalogue. Sizes: FC_SIZES in the claim module.",
)


# --------------------------------------------------------------------------------------------
# icl.algorithm_probe (evidence)   form: the probe npb.probe_algorithms(predict, lam=, N=, M_values=, noise=, ...)

#: the trained ZFB LSAs: d, N, seeds, training prompts per seed, Adam steps; probe prompts per length
PROBE_LSA = {"quick": (3, 4, 2, 32768, 200, 500), "default": (3, 4, 4, 65536, 300, 2000),
             "full": (3, 4, 8, 262144, 400, 8000)}
#: probe prompts per length for the softmax transformer (trained on noisy linear prompts in the batch of
#: icl.function_classes: FC_SIZES, σ = PROBE_SIGMA)
PROBE_PROMPTS = {"quick": 1000, "default": 2000, "full": 8000}
RESOLVE = 0.1  # "matches": the (geometric-mean) distance to the closest algorithm ≤ a tenth of the nearest rival's


def _lsa_reference(ctx):
    d, N, S, P, steps, _ = PROBE_LSA[ctx.mode]
    rng = ctx.rng("Lambda")
    L = ni.random_spd(rng, d, eigenvalues=np.geomspace(0.5, 4.0, d))  # Γ_N^{-1} far from a multiple of I
    tseed = ctx.seed_for("train")
    res = ni.train_lsa(L, N, n_seeds=S, n_prompts=P, steps=steps, seed=tseed, device=ctx.device)
    return L, N, res, tseed


def _lsa_predictor(Wpv, Wkq):
    def predict(X, y, x_q):
        E = ni.prompt_matrix(X, y, x_q)
        return ni.lsa_forward(Wpv.to(E.device), Wkq.to(E.device), E, float(X.shape[-2]))

    return predict


def _probe_criteria(pr: dict, expected: str) -> tuple[dict, dict]:
    """``expected`` must be the closest (∞ otherwise), separable from every rival (z ≥ Z: ratio Z/z),
    and ``RESOLVE`` times closer than the nearest rival by mean distance."""
    best = pr["closest"]
    rivals = [a for a in pr["algorithms"] if a not in (pr["closest_group"] or [best])]
    geo = pr["geometric_distance"]
    near = smallest(rivals, key=lambda a: geo[a]) if rivals else None
    z = pr["z_runner_up"]
    crit = {"closest_is_" + expected: 0.0 if best == expected else math.inf,
            "separable": Z / z if (z is not None and z > 0) else math.inf,
            "resolution": (geo[best] / (RESOLVE * geo[near])) if near and geo[near] > 0 else math.inf}
    det = {"closest": best, "runner_up": pr["runner_up"], "z_runner_up": z, "nearest_by_distance": near,
           "score": pr["score"], "score_se": pr["score_se"], "geometric_distance": geo, "distance": pr["distance"],
           "distance_se": pr["distance_se"], "M_values": pr["M_values"], "equivalent": pr["equivalent"]}
    return crit, det


def _probe_quantities(crits: dict) -> dict:
    """What each probe criterion's margin is a relative change of (see :func:`_criteria_margin`)."""
    out = {}
    for k in crits:
        if k.endswith("separable"):
            out[k] = "the paired mean log-distance gap to the runner-up algorithm"
        elif k.endswith("resolution"):
            out[k] = "the geometric-mean distance to the closest algorithm"
        else:
            out[k] = "the identity of the closest algorithm (exact)"
    return out


def _probe_figure(ctx, name: str, title: str, pr: dict):
    if not ctx.want_figures:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for a in pr["algorithms"]:
        m = np.asarray(pr["distance"][a])
        se = np.asarray(pr["distance_se"][a])
        ax.errorbar(pr["M_values"], np.maximum(m, 1e-12), yerr=2 * se, marker="o", ms=3, capsize=2, label=a)
    ax.set_yscale("log")
    ax.set_xlabel("prompt length M")
    ax.set_ylabel("distance to the model / E y_q²")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, name)


def _probe_lsa(form, ctx) -> CheckResult:
    """Trained ZFB LSAs (numerics.icl.train_lsa, full parameters, d = 3, N = 4, random Λ): each seed's
    predictions, probed at M = 1…2N, must match the Γ_N-preconditioned step."""
    L, N, res, tseed = ctx.reference("lsa", lambda: _lsa_reference(ctx))
    d, _, S, _, _, P = PROBE_LSA[ctx.mode]
    pseed = ctx.seed_for("probe")
    Ms = npb.prompt_lengths(N, d)
    crits, dets = {}, {}
    for s in range(S):
        pr = form(_lsa_predictor(res.Wpv[s], res.Wkq[s]), lam=L, N=N, M_values=Ms, noise=0.0, prompts=P,
                  seed=pseed, device=ctx.device)
        c, det = _probe_criteria(pr, "gamma_n_preconditioned_gd")
        crits.update({f"seed{s}_{k}": v for k, v in c.items()})
        dets[f"seed{s}"] = det
        if s == 0:
            _probe_figure(ctx, "lsa_probe", f"trained ZFB LSA (d={d}, N={N}): distance to each algorithm", pr)
    return _criteria_margin(crits, 1.0, f"evidence criteria per trained seed: the closest algorithm is the Γ_N-preconditioned "
                   f"step, every rival ≥ {Z:g} SE farther (paired log distances), and the geometric-mean distance to it ≤ "
                   f"{RESOLVE:g} × that to "
                   f"the nearest rival; {P} probe prompts per length", seeds=[tseed, pseed],
                   sizes={"d": d, "N": N, "seeds": S, "M_values": Ms, "probe_prompts": P}, device=res.device,
                   details={"Lambda": L.tolist(), **dets}, quantities=_probe_quantities(crits),
                   proportional=tuple(k for k in crits if k.endswith("_resolution")))


def _probe_softmax(form, ctx) -> CheckResult:
    """A softmax transformer (numerics.icl_classes.TinyGPT) trained on noisy linear prompts (x, w ~ N(0, I),
    σ = 0.5; the linear member of icl.function_classes' training batch, same sizes): its predictions, probed
    at M ∈ {1, d, d + 1, 2d, n_max // 2, n_max − 1} with the same noise, must match ridge at the Bayes-optimal
    λ = σ² (the posterior mean). M ≤ n_max − 1: TinyGPT trains on prompts of n_max examples, the loss read at the
    x tokens of positions 0 … 2n_max − 2, so a query after n_max examples (position 2n_max) was never trained."""
    models, tseed = _shared_models(nc.train_icl_models, ctx.mode, ctx.seed, ctx.device)
    tm = models["linear"]
    sz = FC_SIZES[ctx.mode]
    d, sigma, n_max, steps, P = sz["d"], PROBE_SIGMA, sz["n_max"], sz["steps"], PROBE_PROMPTS[ctx.mode]
    pseed = ctx.seed_for("probe")
    Ms = sorted({1, d, d + 1, 2 * d, n_max // 2, n_max - 1})
    pr = form(tm.model.as_predictor(), lam=np.ones(d), N=n_max, M_values=Ms, noise=sigma, prompts=P, seed=pseed,
              device="cpu")
    crit, det = _probe_criteria(pr, "ridge")
    crit.pop("resolution")  # a small trained network is not an exact algorithm: closest and separable is the claim
    _probe_figure(ctx, "softmax_probe", f"softmax transformer, noisy linear (d={d}, σ={sigma:g}, {steps} steps)", pr)
    return _criteria_margin(crit, 1.0, f"evidence criteria: the closest algorithm is ridge at λ = σ² and every rival is ≥ {Z:g} "
                   f"SE farther (paired per-prompt differences averaged over M = {Ms}; {P} probe prompts per length)",
                   seeds=[tseed, pseed], sizes={"d": d, "sigma": sigma, "n_max": n_max, "steps": steps, "M_values": Ms,
                                                "probe_prompts": P}, device=tm.device,
                   details={**det, "risk_model": pr["risk_model"], "risk": pr["risk"],
                            "final_train_loss": float(np.mean(tm.curve[-50:])) if len(tm.curve) else None},
                   quantities=_probe_quantities(crit))


def _probe_farthest(predict, **kw):
    pr = npb.probe_algorithms(predict, **kw)
    if pr["closest"] is not None:
        far = largest(pr["algorithms"], key=lambda a: pr["score"][a])
        pr = {**pr, "closest": far, "closest_group": [far]}
    return pr


def _probe_gamma_limit(predict, *, lam, N, **kw):
    from theory.validation import as_spd_matrix

    return npb.probe_algorithms(predict, lam=lam, N=N, gamma=as_spd_matrix(lam), **kw)


def _probe_ridge_inverted(predict, *, noise=0.0, **kw):
    return npb.probe_algorithms(predict, noise=noise, ridge_lambda=(1.0 / noise**2 if noise else None), **kw)


def _probe_isotropic(ctx) -> Counterexample:
    """Without 'Λ not a multiple of I': at Λ = I, Γ_N⁻¹ = N/(N+d+1)·I is the plain GD step with the optimal η*, so the
    two candidates coincide on every prompt and no model can be separable from one of them."""
    d, N = 3, 4
    L = np.eye(d)
    P = ni.sample_prompts(L, N, (200,), seed=ctx.seed_for("iso"))
    a = npb.algorithm_predictions(P.X, P.y, P.x_q, Lambda=L, N=N)
    g, p = a["gamma_n_preconditioned_gd"].numpy(), a["gd_one_step"].numpy()
    err = float(np.max(np.abs(g - p)) / largest(1.0, float(np.max(np.abs(g)))))
    return Counterexample({"d": d, "N": N, "Lambda": "I", "prompts": 200}, "lsa_is_gamma_gd",
                          f"the Γ_N⁻¹ step and plain GD with η* = {npb.optimal_gd_step(L, N):.4f} agree to {err:.1g} (relative) "
                          "on every prompt: their paired log-distance difference is 0 for any model (z = 0 < 3)",
                          violated=err <= npb.EQUIVALENT_RTOL, error=npb.EQUIVALENT_RTOL, tolerance=err,
                          justification="coincide within the probe's equivalence tolerance (1e-9 relative)")


def _probe_noiseless(ctx) -> Counterexample:
    """Without σ > 0: ridge at λ = σ² = 0 is its λ → 0⁺ limit, min-norm least squares, so 'ridge, separable from least
    squares' cannot hold for any model."""
    d = 2
    L = np.eye(d)
    gap, gap_small = 0.0, 0.0
    for M in (1, d, 2 * d):
        P = ni.sample_prompts(L, M, (200,), seed=ctx.seed_for("noiseless", M))
        a = npb.algorithm_predictions(P.X, P.y, P.x_q, Lambda=L, N=M, noise=0.0)
        ls = a["least_squares"].numpy()
        scale = largest(1.0, float(np.max(np.abs(ls))))
        gap = largest(gap, float(np.max(np.abs(a["ridge"].numpy() - ls))) / scale)
        if M > d:  # the limit itself: ridge at a small λ against least squares (full rank here)
            r = npb.algorithm_predictions(P.X, P.y, P.x_q, Lambda=L, N=M, ridge_lambda=1e-10)["ridge"].numpy()
            gap_small = float(np.max(np.abs(r - ls))) / scale
    return Counterexample({"d": d, "sigma": 0, "M": "1, 2, 4", "prompts": 200}, "softmax_is_ridge",
                          f"ridge at λ = σ² = 0 and min-norm least squares agree to {gap:.1g} (relative) on every prompt (at "
                          f"λ = 1e-10, M = 4 already to {gap_small:.1g}): no model is separable from one of them",
                          violated=gap <= npb.EQUIVALENT_RTOL, error=npb.EQUIVALENT_RTOL, tolerance=gap,
                          justification="coincide within the probe's equivalence tolerance (1e-9 relative)")


_PROBE_ALGS = (r"A\in\{\Gamma_N^{-1}\text{-GD step, OLS, ridge}_{\lambda=\sigma^2}\text{, GD step}_{\eta^*}\text{, 3-NN, averaging}\}")

declare(
    id="icl.algorithm_probe",
    title="Which algorithm a trained in-context learner computes: Γ_N-preconditioned GD for the LSA, ridge for a "
          "softmax transformer on noisy data (evidence)",
    hypotheses=(
        Hypothesis("lsa_setting", r"\text{LSA: ZFB's full-parameter LSA trained on } x\sim\mathcal N(0,\Lambda),\ w\sim\mathcal N(0,I_3),"
                   r"\ y=\langle w,x\rangle,\ N=4,\ \text{probed on the same law at } M\in\{1,2,3,4,6,8\}",
                   necessary_note="part of the setting of the first clause (PROBE_LSA: 2 / 4 seeds at quick / default)"),
        Hypothesis("anisotropic", r"\Lambda\not\propto I\ \text{(eigenvalues } 0.5\ldots4\text{)}",
                   "Γ_N⁻¹ is not a multiple of I, so the Γ_N⁻¹ step and plain GD differ", counterexample=_probe_isotropic),
        Hypothesis("softmax_setting", r"\text{softmax transformer: the noisy-linear model of icl.function\_classes } (d=2,\ "
                   r"x,w\sim\mathcal N(0,I),\ y=\langle w,x\rangle+\sigma\varepsilon)\text{, probed on the same law at } "
                   r"M\in\{1,2,3,4,\lfloor n_{\max}/2\rfloor,n_{\max}-1\}\ \text{(trained query positions only)}",
                   necessary_note="part of the setting of the second clause"),
        Hypothesis("noisy", r"\sigma=0.5>0", "label noise (ridge at λ = σ² is then not least squares)",
                   counterexample=_probe_noiseless),
    ),
    clauses=(
        Clause("lsa_is_gamma_gd", r"\text{trained LSA: the closest } " + _PROBE_ALGS + r"\text{ by geometric-mean distance is the }"
               r"\Gamma_N^{-1}\text{-step, every rival}\ge3\text{ SE farther, at}\le\tfrac1{10}\text{ of the nearest rival's distance}",
               "checked", "each trained seed (2 quick / 4 default), d = 3, N = 4, one Λ (eigenvalues 0.5…4), 500 (quick) / "
               "2000 (default) probe prompts per length", ("zfb_lsa_is_preconditioned_gd",)),
        Clause("softmax_is_ridge", r"\text{softmax transformer: the closest is ridge at } \lambda=\sigma^2\ \text{(the posterior "
               r"mean), every rival}\ge3\text{ SE farther}",
               "checked", "d = 2, σ = 0.5, the TinyGPT of icl.function_classes (700 / 1600 Adam steps), 1000 (quick) / 2000 "
               "(default) probe prompts per length at M ∈ {1, 2, 3, 4, 7} (quick, n_max = 8) / {1, 2, 3, 4, 5, 9} (default, "
               "n_max = 10): lengths whose query position the model was trained at", ("softmax_noisy_linear_is_ridge",)),
    ),
    source="Akyürek et al. (ICLR 2023); von Oswald et al. (ICML 2023); Zhang, Frei, Bartlett (JMLR 2024); "
           "lecture notes 002 (ICL slides)",
    kind="evidence",
    form=npb.probe_algorithms,
    checks=(
        Check("zfb_lsa_is_preconditioned_gd", "trained", _probe_lsa,
              "trained full-parameter LSAs probed: closest is the Γ_N-preconditioned step"),
        Check("softmax_noisy_linear_is_ridge", "trained", _probe_softmax,
              "a softmax transformer trained on noisy linear prompts probed: closest is ridge at λ = σ²"),
    ),
    mutants=(
        Mutant("farthest_algorithm", "wrong formula", "the probe names the farthest algorithm", _probe_farthest),
        Mutant("preconditioner_limit", "dropped term", "Γ_N replaced by its N → ∞ limit Λ (the 1/N terms dropped)",
               _probe_gamma_limit),
        Mutant("ridge_lambda_inverted", "wrong constant", "ridge at λ = 1/σ² (prior over noise variance, inverted)",
               _probe_ridge_inverted),
    ),
    notes="Evidence only. The probe (numerics.icl_probe.probe_algorithms, shared with `tverify check icl --model`) "
          "samples linear-regression prompts at several lengths and compares the model's predictions with "
          "Γ_N-preconditioned GD (theory.icl.gamma_n), min-norm least squares, ridge at λ = σ², one plain GD step "
          "with the population-optimal step size, 3-NN and averaging; distances are mean squared differences over "
          "E y_q² with SEs (the curves); the decision uses paired per-prompt log distances (least squares is "
          "heavy-tailed near M = d). ZFB LSAs: d = 3, N = 4, Λ with eigenvalues 0.5…4 (so that Γ_N^{-1} is far "
          "from a multiple of I and plain GD is a distinct rival: at Λ ∝ I the two coincide, the hypothesis "
          "'anisotropic'). The softmax transformer is the noisy-linear member of icl.function_classes' training batch "
          "(σ = 0.5, same sizes); at σ = 0 ridge is least squares (the hypothesis 'noisy'). The softmax clause asks for "
          "closest and separable only (a small trained network is not an exact algorithm: no distance-ratio criterion).",
)
