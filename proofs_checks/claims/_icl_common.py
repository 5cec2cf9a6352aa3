"""Helpers shared by the ICL claim modules (``icl``, ``icl_further``): symbolic substitution, the
numeric Γ_N⁻¹, a closed-form-vs-Monte-Carlo figure and the shared trained LSA (one batch of seeds,
cached per process). A module whose name starts with ``_`` registers nothing."""


from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from numerics import icl as ni
from proofs_checks.context import RunContext, pyplot
from proofs_checks.tolerances import K_SIGMA
from proofs_checks.comparisons import largest


def _lam_subs(Lsym: sp.Matrix, L: np.ndarray) -> dict:
    d = L.shape[0]
    return {Lsym[i, j]: float(L[i, j]) for i in range(d) for j in range(d)}


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / largest(np.linalg.norm(b), 1e-300))


def _numeric_gamma_inv(L: np.ndarray, N: int) -> np.ndarray:
    """Γ_N^{-1} the numeric way: the minimiser ``E[hhᵀ]^{-1} E[hwᵀ]`` of the Isserlis-moment loss."""
    hh, hw = ni.population_moments(L, N)
    return np.linalg.solve(hh, hw)


def _conditional_mc(L: np.ndarray, M: int, B: np.ndarray, n: int, seed: int, pilot_seed: int,
                    factor: float = 1.0) -> tuple[float, float]:
    """Monte Carlo of ``factor · E(ŷ − y_q)²`` for the LSA with ``W^{KQ}_{11} = B``, ``w22 = 1`` on
    linear-task prompts of length ``M`` (``w ~ N(0, I)``, ``x ~ N(0, Λ)``, no noise), with the variance
    of the task and of the query integrated out exactly (:func:`numerics.icl.lsa_conditional_sq_error`:
    the torch LSA on the d unit tasks × d unit queries, per sampled context) and the context's sample
    covariance ``Γ̂ = XᵀX/M`` as control variates (``E Γ̂ = Λ`` is the law's definition; the
    coefficients fitted on an independent pilot batch of max(n/8, 2048) contexts, :func:`numerics.icl.mc_mean_cv`).
    The Wishart fluctuation of ``Γ̂`` (what the closed form's Γ_N encodes) is still sampled.
    Returns ``(mean, SE)``."""
    d = L.shape[0]
    C = np.linalg.cholesky(L)
    Wpv = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wpv[d, d] = 1.0
    Wkq = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wkq[:d, :d] = torch.from_numpy(np.asarray(B, dtype=np.float64))
    iu = np.triu_indices(d)

    def batch(size: int, s: int):
        X = ni.sample_prompts(L, M, (size,), seed=s).X
        with torch.no_grad():
            c = torch.cat([ni.lsa_conditional_sq_error(Wpv, Wkq, X[i:i + _CHUNK], C, float(M))
                           for i in range(0, size, _CHUNK)])
        G = (X.transpose(-1, -2) @ X).numpy() / M
        return factor * c.numpy(), (G - L)[:, iu[0], iu[1]]

    v, F = batch(n, seed)
    pv, pF = batch(largest(n // 8, 2048), pilot_seed)
    m, se, _ = ni.mc_mean_cv(v, F, pv, pF)
    return m, se


_CHUNK = 8192


def _closed_form_vs_mc_figure(ctx, name: str, title: str, rows: list[tuple[str, float, float, float]],
                              ylabel: str = "value") -> None:
    """When figures are on: each Monte Carlo estimate with its ±K_SIGMA·SE band next to the
    closed form it is compared with. ``rows`` holds ``(label, closed_form, mc_mean, mc_se)``."""
    if not ctx.want_figures:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    xs = np.arange(len(rows))
    ax.errorbar(xs, [r[2] for r in rows], yerr=[K_SIGMA * r[3] for r in rows], fmt="o", capsize=4,
                label=f"Monte Carlo ± {K_SIGMA:g} SE")
    ax.scatter(xs, [r[1] for r in rows], marker="x", s=60, color="C3", zorder=3, label="closed form")
    ax.set_xticks(xs, [r[0] for r in rows])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ctx.save_figure(fig, name)


# --------------------------------------------------------------------------------------------
# the shared trained LSA (one batch of seeds, reused by several claims in one process)


def _trained_prompts(mode: str) -> int:
    """Prompts per seed of the shared trained LSA (by mode)."""
    return RunContext(mode, 0, "cpu").size(16384, 65536, 262144)


@lru_cache(maxsize=4)
def _trained(mode: str, seed: int, device: str):
    ctx = RunContext(mode, seed, device).for_check("icl.shared", "trained_lsa")
    rng = ctx.rng("Lambda")
    L = ni.random_spd(rng, 3, 1.0, 3.0)
    N = 4  # small N: Γ_N and its plausible wrong forms (1/(N+1), …) differ most (issue: trained layer discriminates)
    S = 16
    P = _trained_prompts(mode)
    res = ni.train_lsa(L, N, n_seeds=S, n_prompts=P, steps=ctx.size(200, 300, 400), seed=ctx.seed_for("train"),
                       device=device, lbfgs_steps=50)
    return L, N, res, ctx.seed_for("train")
