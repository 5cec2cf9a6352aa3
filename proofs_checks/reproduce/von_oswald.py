"""von-oswald-2023: von Oswald et al., "Transformers Learn In-Context by Gradient Descent" (ICML 2023).

Their one-layer experiment: a linear self-attention layer trained on linear-regression prompts
matches one step of gradient descent on the in-context least-squares loss ``L(w) = (1/2N) Σ (wᵀx_i −
y_i)²`` from ``w = 0`` with the best learning rate η: the predictions agree ("preds diff" → 0), the
sensitivities ∂ŷ/∂x_q agree ("model cos" → 1), and the trained loss reaches the GD loss. Their
figure shows the curves (no printed numbers); the reference is the closed form of the GD step.

Set-up here: x ~ N(0, I_d) (the paper draws x uniform in [−1, 1]^d; with Gaussian inputs the best
step is closed form), w ~ N(0, I_d), N context examples. One GD step: ``ŷ_GD = η x_qᵀ (1/N)Σ y_i x_i``
with the best ``η* = 1/(1 + (1 + d)/N)`` (minimising E(ŷ_GD − y_q)²; equal to the scalar
``Γ_N^{-1}`` of theory.icl.gamma_n at Λ = I); its risk is theory.icl.linear_task_risk(I, N, N).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from proofs_checks.reproduce import ReproContext, ReproResult, compare_row


def _mse(x) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a)))


def run(ctx: ReproContext) -> ReproResult:
    from numerics import icl as ni
    from theory.icl import gamma_n, linear_task_risk

    d = int(ctx.pick("d", 3, 5, 10))
    N = int(ctx.pick("N", 10, 10, 10))
    S = int(ctx.pick("seeds", 8, 16, 16))
    P = int(ctx.pick("train_prompts", 16384, 65536, 131072))
    steps = int(ctx.pick("steps", 300, 500, 1000))
    n_test = int(ctx.pick("test_prompts", 2000, 8000, 20000))
    base = ctx.seed * 1000003 + 2023
    L = np.eye(d)
    eta = float(np.linalg.inv(gamma_n(L, N))[0, 0])
    res = ni.train_lsa_configs([L], [N], n_seeds=S, n_prompts=P, steps=steps, seed=base, device=ctx.device)[0]
    Pt = ni.sample_prompts(L, N, (S, n_test), seed=base + 1)
    E = Pt.E.clone().requires_grad_(True)
    yh = ni.lsa_forward(res.Wpv[:, None], res.Wkq[:, None], E, float(N))
    sens_tf = torch.autograd.grad(yh.sum(), E)[0][..., :d, -1].detach()  # ∂ŷ/∂x_q (S, n, d)
    yh = yh.detach()
    h = torch.einsum("snm,snmd->snd", Pt.y, Pt.X) / N
    y_gd = eta * torch.einsum("snd,snd->sn", Pt.x_q, h)
    sens_gd = eta * h
    # per seed: relative prediction difference, mean cosine of sensitivities, test losses
    diff = (((yh - y_gd) ** 2).mean(-1) / (y_gd ** 2).mean(-1)).sqrt().numpy()
    cos = torch.nn.functional.cosine_similarity(sens_tf, sens_gd, dim=-1).mean(-1).numpy()
    loss_tf = (0.5 * (yh - Pt.y_q) ** 2).mean(-1).numpy()
    loss_gd = float(0.5 * linear_task_risk(L, N, N))
    # effective step: the LSA's B (ŷ = hᵀ B x_q, B = w22·W11) against η*·I
    B = res.B
    eff = np.einsum("sii->s", B) / d
    off = np.sqrt(((B - eff[:, None, None] * np.eye(d)) ** 2).sum((-1, -2))) / (eff * math.sqrt(d))
    # noise floor of the prediction difference: B − η*I from finite training prompts; its size is read off
    # the spread of B across independently trained seeds (each seed's B − mean B)
    spread = np.sqrt(((B - B.mean(0)) ** 2).sum((-1, -2)) * S / (S - 1)) / (eta * math.sqrt(d))
    floor = float(2 * spread.mean())
    rows = [
        compare_row("effective GD step of the trained LSA: tr(B)/d", *_mse(eff), eta, 0.0,
                    "best one-step learning rate η* = 1/(1 + (1+d)/N) (closed form, = Γ_N^{-1} at Λ = I)"),
        compare_row("non-isotropic part of B, ‖B − (tr B/d) I‖_F/(η*√d)", *_mse(off), 0.0, 0.0,
                    "one GD step: B = η I exactly", floor=floor,
                    floor_why="estimation noise of B from finite training prompts: twice the seeds' spread of B"),
        compare_row("prediction difference ‖ŷ_TF − ŷ_GD‖/‖ŷ_GD‖ (RMS over test prompts)", *_mse(diff), 0.0, 0.0,
                    "von Oswald et al.: preds diff → 0", floor=floor,
                    floor_why="the same estimation noise of B (the difference is linear in B − η*I)"),
        compare_row("1 − cos(∂ŷ_TF/∂x_q, ∂ŷ_GD/∂x_q) (mean over test prompts)", *_mse(1 - cos), 0.0, 0.0,
                    "von Oswald et al.: model cos → 1", floor=floor ** 2,
                    floor_why="quadratic in the same estimation noise"),
        compare_row("test loss ½E(ŷ − y_q)² of the trained LSA at N", *_mse(loss_tf), loss_gd, 0.0,
                    "loss of one GD step with η* (closed form ½·theory.icl.linear_task_risk(I, N, N))"),
    ]
    curve = np.asarray(res.curve)
    stated = [("paper", "One trained linear self-attention layer implements one step of GD on the in-context least-squares "
                        "loss: prediction difference → 0, cosine of sensitivities → 1, trained loss = GD loss (figure, no "
                        "printed numbers)."),
              ("reference used here", "the closed-form best GD step η* and its loss (Gaussian inputs)")]
    facts = [("set-up", f"d = {d}, N = {N}, x ~ N(0, I), w ~ N(0, I); {S} LSAs trained as one batch (full W^PV, W^KQ, ZFB "
                        f"initialisation, Adam {steps} steps + L-BFGS, {P} prompts each); {n_test} test prompts per seed; "
                        f"seed {base}; training {res.seconds:.1f} s on {res.device}"),
             ("loss curve", f"mean training loss {curve[0]:.3g} at step 1 → {curve[-1]:.3g} at step {len(curve)} "
                            f"(GD-step loss {loss_gd:.3g})"),
             ("differences from the paper", "Gaussian instead of uniform inputs; the full-parameter LSA of ZFB; "
                                            "sizes smaller than the paper's at quick/default (full: d = 10)")]
    if ctx.want_figures:
        from proofs_checks.context import pyplot

        plt = pyplot()
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.6))
        axs[0].semilogy(np.arange(1, len(curve) + 1), curve, label="trained LSA (training loss, mean over seeds)")
        axs[0].axhline(loss_gd, color="k", ls="--", label="one GD step, best η (closed form)")
        axs[0].set(xlabel="Adam step", ylabel="½(ŷ − y)²", title="loss over training")
        axs[0].legend(fontsize=7)
        axs[1].plot(y_gd[0, :400].numpy(), yh[0, :400].numpy(), ".", ms=3)
        lim = float(np.abs(y_gd[0, :400].numpy()).max())
        axs[1].plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
        axs[1].set(xlabel="ŷ of one GD step", ylabel="ŷ of the trained LSA", title="predictions (seed 0)")
        ctx.save_figure(fig, "tf_vs_gd")
    return ReproResult(rows=rows, stated=stated, facts=facts, seeds=[base, base + 1])
