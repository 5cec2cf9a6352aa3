"""zfb-2024: Zhang, Frei, Bartlett, "Trained Transformers Learn Linear Models In-Context" (JMLR 2024).

A linear self-attention layer (LSA, full W^{PV}, W^{KQ}) trained on linear-regression prompts of
length N (x ~ N(0, Λ), w ~ N(0, I)) converges to the predictor ``ŷ = x_qᵀ Γ_N^{-1} (1/M) Σ y_i x_i``
with ``Γ_N = (1 + 1/N)Λ + tr(Λ)/N · I`` (Theorem 4.1); its test risk on prompts of length M is
``(1/M) tr(Γ_N^{-2}Λ²(Λ + tr Λ I)) + (1/N²) tr(Γ_N^{-2}Λ(Λ + tr Λ I)²)`` (theory.icl.linear_task_risk),
a 1/M term and a floor set by the training length. Task shift: the risk depends on the task law
only through E[wwᵀ], so any task law with E[wwᵀ] = I gives the same risk. Covariate shift
(x ~ N(0, c²Λ) at test): the trained predictor keeps its Γ_N^{-1} and its risk is
``tr Λ' − 2 tr(Λ' G Λ') + tr(G Λ' G ((1 + 1/M)Λ'² + tr(Λ')Λ'/M))`` with ``G = Γ_N^{-1}``, ``Λ' = c²Λ``
(Gaussian fourth moments; typed in here, equal to theory.icl.linear_task_risk at c = 1, which
the page checks) — unlike least squares, it does not adapt. The paper's figures show these curves;
the reference here is the closed form.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from proofs_checks.reproduce import ReproContext, ReproResult, compare_row

D = 3


def shifted_risk(L: np.ndarray, N: int, M: int, c: float) -> float:
    """Risk of the predictor x_qᵀΓ_N(Λ)^{-1}h on prompts with x ~ N(0, c²Λ), w ~ N(0, I), length M."""
    from theory.icl import gamma_n

    G = np.linalg.inv(gamma_n(L, N))
    Lp = c * c * L
    t = np.trace(Lp)
    return float(t - 2 * np.trace(Lp @ G @ Lp) + np.trace(G @ Lp @ G @ ((1 + 1 / M) * Lp @ Lp + t * Lp / M)))


def _risk_per_seed(res, L, M: int, n: int, seed: int, *, scale: float = 1.0, sphere_tasks: bool = False) -> np.ndarray:
    """Each trained seed's mean squared error against ⟨w, x_q⟩ on n fresh prompts of length M."""
    from numerics import icl as ni

    S = res.B.shape[0]
    P = ni.sample_prompts(L, M, (S, n), seed=seed, scale=scale)
    if sphere_tasks:  # w uniform on the sphere of radius √d: E wwᵀ = I, not Gaussian
        w = P.w / P.w.norm(dim=-1, keepdim=True) * math.sqrt(L.shape[0])
        y = torch.einsum("snmd,snd->snm", P.X, w)
        yq = torch.einsum("snd,snd->sn", P.x_q, w)
        E = ni.prompt_matrix(P.X, y, P.x_q)
    else:
        yq, E = P.y_q, P.E
    with torch.no_grad():
        yh = ni.lsa_forward(res.Wpv[:, None], res.Wkq[:, None], E, float(M))
    return ((yh - yq) ** 2).mean(-1).numpy()


def _mse(x) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a)))


def run(ctx: ReproContext) -> ReproResult:
    from numerics import icl as ni
    from theory.icl import linear_task_risk

    S = int(ctx.pick("seeds", 16, 16, 32))
    P = int(ctx.pick("train_prompts", 16384, 65536, 262144))
    steps = int(ctx.pick("steps", 200, 300, 400))
    n_test = int(ctx.pick("test_prompts", 2000, 8000, 20000))
    Ns = list(ctx.pick("train_N", [4, 16], [4, 10, 30], [4, 10, 30, 100]))
    Ms = list(ctx.pick("test_M", [2, 8, 32], [2, 5, 10, 30, 100], [1, 2, 5, 10, 30, 100, 300]))
    base = ctx.seed * 1000003 + 2024
    rng = np.random.default_rng(base)
    L = ni.random_spd(rng, D, 1.0, 3.0)
    res = ni.train_lsa_configs([L] * len(Ns), Ns, n_seeds=S, n_prompts=P, steps=steps, seed=base + 1, device=ctx.device)
    rows, curves = [], {}
    for k, (N, r) in enumerate(zip(Ns, res)):
        for j, M in enumerate(Ms):
            m, se = _mse(_risk_per_seed(r, L, M, n_test, base + 100 * k + j))
            curves[(N, M)] = (m, se)
            if M in (Ms[0], Ms[-1]) or M == N:
                rows.append(compare_row(f"trained on N = {N}: test risk at prompt length M = {M}", m, se,
                                        float(linear_task_risk(L, N, M)), 0.0, "closed form (Thm 4.1 consequence; theory.icl.linear_task_risk)",
                                        note="SE across independently trained seeds (training and test noise)"))
    # task shift: w uniform on the sphere (E wwᵀ = I) — same risk
    N0, r0 = Ns[0], res[0]
    M0 = Ms[-1]
    m, se = _mse(_risk_per_seed(r0, L, M0, n_test, base + 7777, sphere_tasks=True))
    rows.append(compare_row(f"task shift (w uniform on the sphere, E wwᵀ = I), N = {N0}, M = {M0}", m, se,
                            float(linear_task_risk(L, N0, M0)), 0.0, "closed form: the risk depends on the task law only via E wwᵀ"))
    # covariate shift: x ~ N(0, c²Λ) at test
    check_c1 = abs(shifted_risk(L, N0, M0, 1.0) - float(linear_task_risk(L, N0, M0)))
    shift_rows = {}
    for c in (0.5, 2.0):
        m, se = _mse(_risk_per_seed(r0, L, M0, n_test, base + 8888 + int(10 * c), scale=c))
        shift_rows[c] = m
        rows.append(compare_row(f"covariate shift x ~ N(0, {c:g}²Λ) at test, N = {N0}, M = {M0}", m, se,
                                shifted_risk(L, N0, M0, c), 0.0, "closed form of the non-adapting predictor x_qᵀΓ_N(Λ)^{-1}h "
                                "under the shifted Gaussian (see the statement)"))
    # least squares under the same shift (scale invariant): the LSA does not adapt, least squares does
    from numerics.icl import sample_prompts

    Pq = sample_prompts(L, M0, (n_test,), seed=base + 9999, scale=2.0)
    X, y, xq = (a.numpy() for a in (Pq.X, Pq.y, Pq.x_q))
    what = np.einsum("nij,nj->ni", np.linalg.pinv(X), y)
    ls_risk = float(((np.einsum("nd,nd->n", xq, what) - Pq.y_q.numpy()) ** 2).mean())
    stated = [("paper", "Theorem 4.1: gradient flow on the LSA converges to the predictor x_qᵀΓ_N^{-1}(1/M)Σy_i x_i; its risk "
                        "has a 1/M term and a floor set by the training length N. Trained LSAs are robust to task shift "
                        "and not to covariate shift (the paper's figures)."),
              ("reference used here", "the closed forms (theory.icl.linear_task_risk; the shifted-covariate form typed in, "
                                      f"equal to it at c = 1 within {check_c1:.1e})")]
    facts = [("set-up", f"d = {D}, Λ random SPD (eigenvalues in [1, 3]), {S} seeds per N trained as one batch "
                        f"(Adam {steps} steps + L-BFGS, {P} training prompts per seed), {n_test} test prompts per seed and M; "
                        f"seed {base}; training {res[0].seconds:.1f} s on {res[0].device}"),
             ("risk against M (mean over seeds)", "; ".join(
                 f"N={N}: " + ", ".join(f"M={M}: {curves[(N, M)][0]:.3g}" for M in Ms) for N in Ns)),
             ("covariate shift, least squares for comparison", f"least squares at c = 2, M = {M0}: risk {ls_risk:.3g} "
                                                               f"(the trained LSA: {shift_rows[2.0]:.3g})")]
    if ctx.want_figures:
        from proofs_checks.context import pyplot

        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 4))
        grid = np.unique(np.geomspace(1, max(Ms) * 1.5, 60).astype(int))
        for N, col in zip(Ns, ("tab:blue", "tab:red", "tab:green", "tab:purple")):
            ax.errorbar(Ms, [curves[(N, M)][0] for M in Ms], yerr=[2 * curves[(N, M)][1] for M in Ms], fmt="o", color=col,
                        label=f"trained, N = {N} (± 2 SE)")
            ax.plot(grid, [float(linear_task_risk(L, N, int(M))) for M in grid], "-", color=col, alpha=0.7)
        ax.set(xscale="log", yscale="log", xlabel="test prompt length M", ylabel="risk E(ŷ − ⟨w, x_q⟩)²",
               title="trained LSA vs closed form (lines)")
        ax.legend(fontsize=7)
        ctx.save_figure(fig, "risk_vs_M")
    return ReproResult(rows=rows, stated=stated, facts=facts, seeds=[base, base + 1])
