"""ramsauer-2021: Ramsauer et al., "Hopfield Networks is All You Need" (ICLR 2021).

The modern Hopfield update ``f(ξ) = X softmax(β Xᵀ ξ)`` retrieves a stored pattern ``x_i`` in one
step: Theorem 5 bounds the error by ``2(N−1) e^{−β(Δ_i − 2εM)} M`` with the separation
``Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j``; the error therefore decays like ``e^{−βΔ_i}`` (for ξ = x_i
exactly: ``f(x_i) − x_i = Σ_j p_j (x_j − x_i)`` with ``p_j ∝ e^{−β(x_iᵀx_i − x_iᵀx_j)}``, whose
leading term at large β is ``e^{−βΔ_i}(x_{j*} − x_i)``). Theorem 3: exponentially many (in d)
random patterns can be stored and retrieved. The paper states these as theorems (no printed
numbers): the references are the bound, the asymptotic rate, and the growth law.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from proofs_checks.comparisons import largest
from proofs_checks.reproduce import ReproContext, ReproResult, bound_row, compare_row


def _mse(x) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a)))


def run(ctx: ReproContext) -> ReproResult:
    from numerics import hopfield as nh
    from numerics.torch_utils import resolve_device

    dev = resolve_device(ctx.device)
    B = int(ctx.pick("instances", 64, 256, 1024))
    N, d = 16, 32
    betas = [0.5, 1, 2, 4, 8, 16]
    seed = ctx.seed * 1000003 + 2021
    g = torch.Generator(device=dev).manual_seed(seed)
    P = torch.randn(B, N, d, generator=g, device=dev, dtype=torch.float64)
    P = P / P.norm(dim=-1, keepdim=True) * math.sqrt(d)  # patterns on the sphere of radius √d: Δ ≈ d − O(√d·√log N)
    i = 0
    xi = P[:, i, :] + 0.05 * torch.randn(B, d, generator=g, device=dev, dtype=torch.float64)  # a slightly noisy query
    ratios, errs = [], {}
    for beta in betas:
        err, Delta, bound = nh.retrieval_error_and_bound(P, xi, i, beta / d)  # β/d: βΔ = O(β)
        ratios.append(float((err / bound).max()))
        errs[beta] = err.cpu().numpy()
    Delta = Delta.cpu().numpy()
    rows = [bound_row("max over instances and β of error / Theorem 5 bound (noisy query ξ = x_i + 0.05·noise)",
                      float(largest(ratios)), 0.0, 1.0, "Theorem 5 (bound holds for every instance)", note="exact (no sampling error)")]
    # the rate: query ξ = x_i exactly, log error against β at fixed Δ_i; slope/Δ → −1
    bs = np.array([4.0, 6.0, 8.0]) / d * 4
    logs = []
    for beta in bs:
        e, _, _ = nh.retrieval_error_and_bound(P, P[:, i, :].clone(), i, float(beta))
        logs.append(np.log(e.cpu().numpy()))
    logs = np.array(logs)  # (betas, B)
    slope = (logs[-1] - logs[0]) / (bs[-1] - bs[0])
    rate = -slope / Delta
    m, se = _mse(rate)
    rows.append(bound_row("−d log‖f(x_i) − x_i‖/dβ divided by Δ_i (mean over instances, query ξ = x_i, βΔ ≈ 11–22)", m, se,
                          1.0, "Theorem 5 with ε = ‖x_i* − x_i‖ ≈ 0: the error falls at least as fast as e^{−βΔ_i} "
                          "(its leading term is e^{−βΔ_i}‖x_j* − x_i‖; the others fall faster)", below=False))
    # storage (Theorem 3): patterns on the sphere of radius √d, β = 1, retrieved when one update from the pattern
    # itself lands within 0.1·√d; N½(d) = largest N with half retrieved; exponential growth: log N½ linear in d
    ds = list(ctx.pick("storage_d", [4, 6, 8, 10], [4, 6, 8, 10, 12], [4, 6, 8, 10, 12, 14, 16]))
    nhalf = []
    for dd in ds:
        frac = []
        Ns = [2 ** k for k in range(1, 15)]
        for Nn in Ns:
            Bb = max(2, min(64, int(4e5 // (Nn * Nn))))
            Q = torch.randn(Bb, Nn, dd, generator=g, device=dev, dtype=torch.float64)
            Q = Q / Q.norm(dim=-1, keepdim=True) * math.sqrt(dd)
            f = nh.modern_update(Q, Q, 1.0)
            frac.append(float(((f - Q).norm(dim=-1) <= 0.1 * math.sqrt(dd)).double().mean()))
            if frac[-1] < 0.25:
                break
        k = next((j for j, fr in enumerate(frac) if fr < 0.5), len(frac) - 1)
        if k == 0:
            nhalf.append(float(Ns[0]))
        else:  # log-linear interpolation of the half crossing
            f0, f1 = frac[k - 1], frac[k]
            t = (f0 - 0.5) / (f0 - f1) if f0 != f1 else 0.0
            nhalf.append(float(2 ** (k + t)))
    x = np.array(ds, float)
    y = np.log(nhalf)
    A = np.vstack([x, np.ones_like(x)]).T
    coef, res, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    s2 = float(resid @ resid / max(len(x) - 2, 1))
    se_rate = math.sqrt(s2 / float(((x - x.mean()) ** 2).sum())) if s2 > 0 else 1e-3
    rows.append(bound_row("storage: growth rate of log N½ per dimension (least-squares slope over d)", float(coef[0]),
                          se_rate, 0.0, "Theorem 3: the number of retrievable patterns grows exponentially in d (rate > 0)",
                          below=False, note=f"N½ = {', '.join(f'{v:.0f}' for v in nhalf)} at d = {ds}"))
    stated = [("paper", "Theorem 5: ‖f(ξ) − x_i‖ ≤ 2(N−1) exp(−β(Δ_i − 2 max{‖ξ−x_i‖, ‖x_i*−x_i‖} M)) M; retrieval is "
                        "exponentially accurate in βΔ_i. Theorem 3: exponentially many (in d) random patterns are stored."),
              ("reference used here", "the bound itself (every instance), the rate e^{−βΔ} (its leading term), and "
                                      "exponential growth (slope of log N½ in d above 0)")]
    facts = [("set-up", f"{B} instances of N = {N} patterns on the sphere of radius √{d}, β = b/d with b ∈ {betas}; "
                        f"seed {seed}; device {dev}"),
             ("error against β (median over instances)", "; ".join(f"b={b}: {np.median(errs[b]):.3g}" for b in betas)),
             ("separation Δ_i", f"median {np.median(Delta):.3g}, range {Delta.min():.3g}–{Delta.max():.3g}")]
    if ctx.want_figures:
        from proofs_checks.context import pyplot

        plt = pyplot()
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.6))
        bd = np.array(betas)[:, None] / d * Delta[None]
        axs[0].semilogy(bd.ravel(), np.concatenate([errs[b] for b in betas]), ".", ms=2, alpha=0.5, label="one-step error")
        xs = np.linspace(0, bd.max(), 50)
        axs[0].semilogy(xs, 2 * (N - 1) * np.exp(-xs) * math.sqrt(d), "k--", label="2(N−1)e^{−βΔ}M (ε = 0)")
        axs[0].set(xlabel="βΔ_i", ylabel="‖f(ξ) − x_i‖", title="one-step retrieval")
        axs[0].legend(fontsize=7)
        axs[1].semilogy(ds, nhalf, "o-", label="N½ (half retrieved)")
        axs[1].semilogy(x, np.exp(A @ coef), "--", label=f"exp fit, {coef[0]:.2f}/dim")
        axs[1].set(xlabel="d", ylabel="patterns", title="storage (β = 1, radius √d)")
        axs[1].legend(fontsize=7)
        ctx.save_figure(fig, "retrieval")
    return ReproResult(rows=rows, stated=stated, facts=facts, seeds=[seed])
