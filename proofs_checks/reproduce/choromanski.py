"""choromanski-2021: Choromanski et al., "Rethinking Attention with Performers" (ICLR 2021).

FAVOR+ estimates the softmax kernel ``SM(x, y) = e^{xᵀy}`` by ``φ(x)ᵀφ(y)`` with m random features.
Lemma 2 gives the mean squared error of the i.i.d. estimators in closed form (positive features
``e^{ωᵀx − ‖x‖²/2}``: ``(1/m) e^{‖x+y‖²} SM² (1 − e^{−‖x+y‖²})``; trigonometric features:
``(1/2m) e^{‖x+y‖²} SM^{−2} (1 − e^{−‖x−y‖²})²``), and Theorem 2 says orthogonal random features
(ORF) lower the MSE of the positive estimator. The paper shows these as figures (MSE against the
angle and against m), without printed numbers: the references here are the closed forms
(numerics.favor.mse_positive / mse_trig, derived in theory.favor) and the theorem's inequality.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from proofs_checks.reproduce import ReproContext, ReproResult, bound_row, compare_row

#: ‖x‖ = ‖y‖ = 0.35 keeps ‖x+y‖² ≤ 0.49: the squared error (a square of a mean of log-normals) then has
#: skewness ≤ 7.3 per draw (see claims/favor.py), so a mean over R ≥ 4000 draws is close to normal
RADIUS = 0.35
D = 8


def _pair(angle: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(D)
    y = np.zeros(D)
    x[0] = RADIUS
    y[0], y[1] = RADIUS * math.cos(angle), RADIUS * math.sin(angle)
    return x, y


def run(ctx: ReproContext) -> ReproResult:
    from numerics import favor as nf
    from numerics.torch_utils import generator, resolve_device

    R = int(ctx.pick("draws", 4000, 20000, 100000))
    ms = list(ctx.pick("features", [4, 16, 64], [4, 8, 16, 32, 64], [2, 4, 8, 16, 32, 64, 128, 256]))
    angles = {"aligned (angle 0.2π)": 0.2 * math.pi, "opposite (angle 0.9π)": 0.9 * math.pi}
    dev = resolve_device(ctx.device)
    seed = ctx.seed * 1000003 + 20210
    g = generator(seed, dev)
    rows, curves = [], {}
    for label, ang in angles.items():
        x, y = _pair(ang)
        X, Y = (torch.as_tensor(a, device=dev)[None, None] for a in (x, y))
        sm = math.exp(float(x @ y))
        for m in ms:
            for sampler, draw in (("iid", nf.iid_gaussian), ("orf", nf.orthogonal_gaussian)):
                W = draw((R,), m, D, g, device=dev)
                for feat, fn in (("positive", nf.positive_features), ("trig", nf.trig_features)):
                    K = nf.kernel_estimate(fn, X.expand(R, 1, D), Y.expand(R, 1, D), W)[:, 0].double().cpu().numpy()
                    sq = (K - sm) ** 2
                    curves[(label, sampler, feat, m)] = (float(sq.mean()), float(sq.std(ddof=1) / math.sqrt(R)))
        for feat in ("positive", "trig"):
            closed = nf.mse_positive if feat == "positive" else nf.mse_trig
            for m in (ms[0], ms[-1]):
                mean, se = curves[(label, "iid", feat, m)]
                rows.append(compare_row(f"{feat} features, {label}, m = {m}: MSE of φ(x)ᵀφ(y) (i.i.d.)", mean, se,
                                        float(closed(x, y, m)), 0.0, "Lemma 2 closed form (numerics.favor, derived in theory.favor)"))
        mi, si = curves[(label, "iid", "positive", ms[-1])]
        mo, so = curves[(label, "orf", "positive", ms[-1])]
        rows.append(bound_row(f"positive features, {label}, m = {ms[-1]}: MSE(ORF) − MSE(i.i.d.)", mo - mi, math.hypot(so, si),
                              0.0, "Theorem 2: orthogonal features do not increase (they lower) the MSE"))
    # the paper's qualitative point: positive features beat trigonometric ones where the kernel is small
    x, y = _pair(angles["opposite (angle 0.9π)"])
    ratio_cf = float(nf.mse_trig(x, y, 16) / nf.mse_positive(x, y, 16))
    stated = [
        ("paper", "Lemma 2: closed-form MSE of the positive and trigonometric i.i.d. estimators, both O(1/m); the positive "
                  "one vanishes as SM → 0 while the trigonometric one blows up relative to SM. Theorem 2: orthogonal "
                  "random features give a smaller MSE than i.i.d. ones (positive features, any d)."),
        ("reference used here", "the closed forms at the same x, y, m (no Monte Carlo in the reference: SE 0), and the "
                                "theorem's inequality (one-sided)"),
    ]
    facts = [("set-up", f"d = {D}, ‖x‖ = ‖y‖ = {RADIUS}, R = {R} independent draws of the m frequencies per point, "
                        f"features m ∈ {ms}; frequency seed {seed}; device {dev}"),
             ("trig/positive MSE ratio at the opposite pair (closed form)", f"{ratio_cf:.3g}")]
    for label in angles:
        facts.append((f"MSE against m, {label}", "; ".join(
            f"m={m}: pos iid {curves[(label, 'iid', 'positive', m)][0]:.3g}, pos ORF {curves[(label, 'orf', 'positive', m)][0]:.3g}, "
            f"trig iid {curves[(label, 'iid', 'trig', m)][0]:.3g}" for m in ms)))
    if ctx.want_figures:
        from proofs_checks.context import pyplot

        plt = pyplot()
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, (label, ang) in zip(axs, angles.items()):
            x, y = _pair(ang)
            for (sampler, feat), c in {("iid", "positive"): "tab:blue", ("orf", "positive"): "tab:cyan",
                                       ("iid", "trig"): "tab:red", ("orf", "trig"): "tab:orange"}.items():
                mean = [curves[(label, sampler, feat, m)][0] for m in ms]
                se = [2 * curves[(label, sampler, feat, m)][1] for m in ms]
                ax.errorbar(ms, mean, yerr=se, fmt="o", color=c, label=f"{feat} {sampler} (MC ± 2 SE)")
            for feat, c in (("positive", "tab:blue"), ("trig", "tab:red")):
                closed = nf.mse_positive if feat == "positive" else nf.mse_trig
                ax.plot(ms, [float(closed(x, y, m)) for m in ms], "-", color=c, label=f"{feat} closed form")
            ax.set(xscale="log", yscale="log", xlabel="features m", ylabel="MSE", title=label)
            ax.legend(fontsize=6)
        ctx.save_figure(fig, "mse_vs_m")
    return ReproResult(rows=rows, stated=stated, facts=facts, seeds=[seed])
