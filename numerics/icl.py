"""In-context linear regression: prompts, the linear self-attention (LSA) model with its full
weights, gradient flow on the exact population loss, training on sampled prompts, Monte Carlo
estimators (claims ``icl.*``); the small softmax transformer with its baselines is in :mod:`numerics.icl_softmax`,
what ``tverify check icl`` measures in :mod:`numerics.icl_check`.

Conventions
-----------
* Prompts (lecture notes 000, ZFB): context rows ``X ∈ R^{…×M×d}`` (examples are ROWS here), labels
  ``y ∈ R^{…×M}``, query ``x_q ∈ R^{…×d}``. The LSA's input is the column-form matrix
  ``E = [[Xᵀ, x_q], [yᵀ, 0]] ∈ R^{…×(d+1)×(M+1)}`` built by :func:`prompt_matrix`.
* ``f_LSA(E) = E + W^{PV} E (Eᵀ W^{KQ} E)/ρ``, ``ŷ = f_LSA(E)[d, M]`` (0-based), ``ρ`` = number
  of context examples.
* float64 everywhere; leading batch dimensions are seeds / prompts; torch code takes ``device``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from numerics.torch_utils import cpu_threads, generator, resolve_device
from theory.validation import InputError, as_spd_matrix

__all__ = [
    "random_spd",
    "Prompts",
    "sample_prompts",
    "prompt_matrix",
    "lsa_forward",
    "lsa_forward_gram",
    "lsa_full_output",
    "LSA",
    "zfb_init",
    "train_lsa_configs",
    "population_moments",
    "population_loss_B",
    "population_grad_B",
    "GFResult",
    "gradient_flow",
    "TrainResult",
    "lsa_features",
    "train_lsa",
    "mc_mean",
    "mc_mean_cv",
    "lsa_conditional_sq_error",
    "TargetLaw",
    "target_law",
    "sample_target_prompts",
    "mc_risk",
    "single_thread",
]

DTYPE = torch.float64


#: torch's CPU ops on one thread for the small prompt batches (restored after; nothing off the CPU)
single_thread = cpu_threads


# ------------------------------------------------------------------------------------------------
# prompts


@dataclass
class Prompts:
    """A batch of prompts: ``X (…, M, d)``, ``y (…, M)``, ``x_q (…, d)``, ``y_q (…)``, ``w (…, d)``."""

    X: torch.Tensor
    y: torch.Tensor
    x_q: torch.Tensor
    y_q: torch.Tensor
    w: torch.Tensor

    @property
    def E(self) -> torch.Tensor:
        return prompt_matrix(self.X, self.y, self.x_q)


def random_spd(rng: np.random.Generator, d: int, lo: float = 1.0, hi: float = 4.0, *, eigenvalues=None) -> np.ndarray:
    """A random symmetric positive-definite ``(d, d)`` matrix (a covariance Λ): a Haar-random
    orthogonal basis (QR of a Gaussian, signs fixed by ``diag(R)``) with the given
    ``eigenvalues``, or eigenvalues uniform in ``[lo, hi]`` (condition number ≤ hi/lo).

    >>> L = random_spd(np.random.default_rng(0), 3)
    >>> bool(np.allclose(L, L.T)) and bool(np.all(np.linalg.eigvalsh(L) >= 1 - 1e-12))
    True
    """
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    q = q * np.sign(np.diag(r))
    eig = rng.uniform(lo, hi, size=d) if eigenvalues is None else np.asarray(eigenvalues, dtype=float)
    return (q * eig) @ q.T


def _chol(Lambda) -> np.ndarray:
    return np.linalg.cholesky(as_spd_matrix(Lambda, "Lambda"))


def sample_prompts(Lambda, M: int, shape: tuple[int, ...], *, seed: int, noise: float = 0.0,
                   scale: float = 1.0, device="cpu") -> Prompts:
    """Linear-regression prompts: ``w ~ N(0, I)``, ``x ~ N(0, Λ)`` (then multiplied by ``scale``,
    a covariate shift when ≠ 1), ``y = ⟨w, x⟩ + noise·ε``. ``shape`` is the batch shape (e.g.
    ``(seeds, prompts)``); the query label ``y_q`` is returned separately (0 in ``E``)."""
    if int(M) < 1:
        raise InputError(f"M must be ≥ 1, got {M}")
    dev = resolve_device(device)
    C = torch.as_tensor(_chol(Lambda), dtype=DTYPE, device=dev)
    d = C.shape[0]
    g = generator(seed, dev)
    w = torch.randn(*shape, d, generator=g, dtype=DTYPE, device=dev)
    Z = torch.randn(*shape, M + 1, d, generator=g, dtype=DTYPE, device=dev)
    Xall = scale * Z @ C.T
    yall = torch.einsum("...md,...d->...m", Xall, w)
    if noise:
        yall = yall + noise * torch.randn(yall.shape, generator=g, dtype=DTYPE, device=dev)
    return Prompts(Xall[..., :M, :], yall[..., :M], Xall[..., M, :], yall[..., M], w)


def prompt_matrix(X: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """``E = [[Xᵀ, x_q], [yᵀ, 0]]`` of shape ``(…, d+1, M+1)`` (tokens as columns)."""
    top = torch.cat([X.transpose(-1, -2), x_q.unsqueeze(-1)], dim=-1)
    bottom = torch.cat([y, torch.zeros_like(y[..., :1])], dim=-1).unsqueeze(-2)
    return torch.cat([top, bottom], dim=-2)


def lsa_full_output(Wpv: torch.Tensor, Wkq: torch.Tensor, E: torch.Tensor, rho: float) -> torch.Tensor:
    """The whole matrix ``E + W^{PV} E (Eᵀ W^{KQ} E)/ρ`` (shape of ``E``; weights broadcast)."""
    return E + Wpv @ E @ (E.transpose(-1, -2) @ Wkq @ E) / rho


def lsa_forward(Wpv: torch.Tensor, Wkq: torch.Tensor, E: torch.Tensor, rho: float) -> torch.Tensor:
    """``ŷ = [E + W^{PV} E (Eᵀ W^{KQ} E)/ρ]_{d+1, M+1}`` computed through the last column only
    (the same product, associated right to left: ``E (Eᵀ (W^{KQ} e_q))``). Weights ``(…, d+1, d+1)``
    broadcast against ``E (…, d+1, M+1)``; returns ``(…)``."""
    return lsa_forward_gram(Wpv, Wkq, E @ E.transpose(-1, -2), E[..., -1], rho)


def lsa_forward_gram(Wpv: torch.Tensor, Wkq: torch.Tensor, gram: torch.Tensor, e_q: torch.Tensor, rho: float) -> torch.Tensor:
    """:func:`lsa_forward` from the Gram matrix ``gram = E Eᵀ (…, d+1, d+1)`` and the query column
    ``e_q = E[..., -1] (…, d+1)``: the last column of ``E + W^{PV} (E Eᵀ) W^{KQ} E/ρ`` is
    ``e_q + W^{PV} (E Eᵀ) W^{KQ} e_q/ρ`` (associativity), so the cost does not grow with M."""
    v = torch.einsum("...ij,...j->...i", Wkq, e_q)
    v = torch.einsum("...ij,...j->...i", gram, v)
    return e_q[..., -1] + torch.einsum("...j,...j->...", Wpv[..., -1, :], v) / rho


class LSA(torch.nn.Module):
    """Linear self-attention with FULL ``W^{PV}, W^{KQ} ∈ R^{(d+1)×(d+1)}``, one copy per seed
    (parameters of shape ``(S, d+1, d+1)``). ``forward(E)`` with ``E (S, P, d+1, M+1)`` → ``ŷ (S, P)``."""

    def __init__(self, Wpv: torch.Tensor, Wkq: torch.Tensor):
        super().__init__()
        self.Wpv = torch.nn.Parameter(Wpv.clone())
        self.Wkq = torch.nn.Parameter(Wkq.clone())

    def forward(self, E: torch.Tensor, rho: float | None = None) -> torch.Tensor:
        rho = float(E.shape[-1] - 1) if rho is None else rho
        return lsa_forward(self.Wpv.unsqueeze(-3), self.Wkq.unsqueeze(-3), E, rho)

    def forward_gram(self, gram: torch.Tensor, e_q: torch.Tensor, rho: float) -> torch.Tensor:
        """Same as ``forward`` from ``gram = E Eᵀ (S, P, d+1, d+1)`` and ``e_q (S, P, d+1)``."""
        return lsa_forward_gram(self.Wpv.unsqueeze(-3), self.Wkq.unsqueeze(-3), gram, e_q, rho)

    def B(self) -> torch.Tensor:
        """``w22 · W11^{KQ}`` per seed, ``(S, d, d)``."""
        d = self.Wpv.shape[-1] - 1
        return self.Wpv[:, d, d, None, None] * self.Wkq[:, :d, :d]


def zfb_init(d: int, n_seeds: int, sigma: float, *, seed: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """ZFB's initialisation: ``W^{PV}(0) = σ[[0,0],[0,1]]``, ``W^{KQ}(0) = σ[[ΘΘᵀ,0],[0,0]]`` with a
    Gaussian ``Θ ∈ R^{d×d}`` rescaled so that ``‖ΘΘᵀ‖_F = 1``. Returns ``(Wpv, Wkq)``, each ``(S, d+1, d+1)``."""
    dev = resolve_device(device)
    g = generator(seed, dev)
    Th = torch.randn(n_seeds, d, d, generator=g, dtype=DTYPE, device=dev)
    TT = Th @ Th.transpose(-1, -2)
    TT = TT / torch.linalg.matrix_norm(TT, keepdim=True)
    Wpv = torch.zeros(n_seeds, d + 1, d + 1, dtype=DTYPE, device=dev)
    Wpv[:, d, d] = sigma
    Wkq = torch.zeros_like(Wpv)
    Wkq[:, :d, :d] = sigma * TT
    return Wpv, Wkq


# ------------------------------------------------------------------------------------------------
# exact population quantities (NumPy) and gradient flow (SciPy)


def population_moments(Lambda, N: int) -> tuple[np.ndarray, np.ndarray]:
    """``(E[hhᵀ], E[hwᵀ])`` for ``h = (1/N)Σ y_i x_i`` computed from Gaussian moments:
    ``E[y² x xᵀ] = E[x xᵀ x xᵀ] = 2Λ² + tr(Λ)Λ`` (Isserlis) for the N same-index terms and
    ``Λ²`` for the N(N−1) others."""
    L = as_spd_matrix(Lambda)
    four = 2 * L @ L + np.trace(L) * L
    return (four + (N - 1) * L @ L) / N, L.copy()


def population_loss_B(Lambda, N: int, B: np.ndarray) -> float:
    """``½ E(hᵀ B x_q − wᵀ x_q)² = ½ tr(Λ (Bᵀ E[hhᵀ] B − Bᵀ E[hwᵀ] − E[whᵀ] B + I))``."""
    L = as_spd_matrix(Lambda)
    hh, hw = population_moments(L, N)
    inner = B.T @ hh @ B - B.T @ hw - hw.T @ B + np.eye(L.shape[0])
    return 0.5 * float(np.trace(L @ inner))


def population_risk_B(Lambda, M: int, B: np.ndarray) -> float:
    """Exact test risk ``E(hᵀ B x_q − wᵀ x_q)²`` at prompt length ``M`` of the predictor with matrix
    ``B`` (no label noise): ``2·population_loss_B(Λ, M, B)`` (Isserlis moments, no sampling)."""
    return 2.0 * population_loss_B(Lambda, M, B)


def seed_mean_risk(Lambda, M: int, Bs: np.ndarray, extra: np.ndarray | None = None) -> tuple[float, float]:
    """Risk at the seeds' mean matrix from per-seed matrices ``Bs (S, d, d)``, with no sampling:
    ``R(B̄) − q̄/(S−1)`` where ``q̄ = mean_s R(B_s) − R(B̄)`` is the seeds' quadratic spread (``R`` is
    quadratic in ``B``, so this is an unbiased estimate of ``R`` at the seeds' expected ``B``: the
    spread's excess ``tr(HΣ)/S`` is removed); plus ``mean(extra)`` (a per-seed additive correction,
    e.g. a Monte Carlo control variate). Returns ``(estimate, delete-one jackknife SE across seeds)``."""
    Bs = np.asarray(Bs, dtype=float)
    S = Bs.shape[0]
    if S < 3:
        raise InputError("seed_mean_risk needs at least three seeds")
    ex = np.zeros(S) if extra is None else np.asarray(extra, dtype=float)

    def est(idx) -> float:
        B = Bs[idx]
        Rb = population_risk_B(Lambda, M, B.mean(0))
        q = float(np.mean([population_risk_B(Lambda, M, b) for b in B])) - Rb
        return Rb - q / (len(idx) - 1) + float(ex[idx].mean())

    full = est(np.arange(S))
    jk = np.array([est(np.delete(np.arange(S), i)) for i in range(S)])
    return full, float(math.sqrt((S - 1) / S * np.sum((jk - jk.mean()) ** 2)))


def erm_B(Lambda, N: int, *, n_seeds: int, n_prompts: int, seed: int, device="cpu") -> np.ndarray:
    """Per seed, the empirical-risk minimiser over the ``B`` block alone (``ŷ = hᵀ B x_q``, every
    other block 0) on exactly the prompts :func:`train_lsa` with the same arguments trains on (its
    sufficient statistics restricted to ``θ_{d+1,k,l} = B_{kl}``, one least-squares solve):
    ``(n_seeds, d, d)``. Its population counterpart is ``E[hhᵀ]⁻¹E[hwᵀ]`` (:func:`population_moments`),
    so ``B_trained − erm_B + E[hhᵀ]⁻¹E[hwᵀ]`` is a control variate for the trained ``B``."""
    dev, L, d, _ = _training_setup(Lambda, N, 1.0, device)
    with single_thread(device=dev):
        Q, c, _m = _prompt_statistics(L, N, n_seeds, n_prompts, seed, dev)
    idx = np.array([(d * (d + 1) + k) * d + l for k in range(d) for l in range(d)])
    Qs = Q.cpu().numpy()[:, idx][:, :, idx]
    cs = c.cpu().numpy()[:, idx]
    return np.linalg.solve(Qs, cs[..., None])[..., 0].reshape(n_seeds, d, d)


def population_grad_B(Lambda, N: int, B: np.ndarray) -> np.ndarray:
    """``∂L/∂B = E[hhᵀ] B Λ − E[hwᵀ] Λ``."""
    L = as_spd_matrix(Lambda)
    hh, hw = population_moments(L, N)
    return hh @ B @ L - hw @ L


@dataclass
class GFResult:
    """Gradient flow on ``L(u, U) = L_B(uU)`` (u = w22, U = W11^{KQ}); the other blocks stay 0."""

    t: float
    u: float
    U: np.ndarray
    B: np.ndarray
    nfev: int
    success: bool
    message: str
    loss_curve: tuple[np.ndarray, np.ndarray] = field(default=None, repr=False)


def gradient_flow(Lambda, N: int, *, sigma: float | None = None, seed: int = 0, t_end: float | None = None,
                  rtol: float = 1e-11, atol: float = 1e-13, grad_tol: float = 1e-12,
                  init: tuple[float, np.ndarray] | None = None) -> GFResult:
    """Integrate ``du/dt = −⟨∇_B L, U⟩``, ``dU/dt = −u ∇_B L`` (B = uU) from ZFB's initialisation
    (``σ² ‖E[hhᵀ]Λ^{-1}‖_op √d < 2``, default σ at half that bound) with SciPy ``solve_ivp`` (LSODA),
    in rounds of doubling length until ``‖∇_B L‖_F < grad_tol`` (or ``t_end`` is reached).
    ``init = (u0, U0)`` starts from another point instead (e.g. an unbalanced one, ``u0² ≠ ‖U0‖_F²``).

    ``loss_curve`` is ``(t, L(t))`` sampled from the dense solution (16 points per round)."""
    L = as_spd_matrix(Lambda)
    d = L.shape[0]
    hh, hw = population_moments(L, N)
    Gam = hh @ np.linalg.inv(L)  # the numeric Γ (E[hhᵀ] = ΛΓ); used only for the init bound
    if sigma is None:
        sigma = 0.5 * math.sqrt(2 / (np.linalg.norm(Gam, 2) * math.sqrt(d)))
    rng = np.random.default_rng(seed)
    Th = rng.normal(size=(d, d))
    TT = Th @ Th.T
    TT /= np.linalg.norm(TT)
    y0 = np.concatenate([[sigma], (sigma * TT).ravel()])
    if init is not None:
        y0 = np.concatenate([[float(init[0])], np.asarray(init[1], dtype=float).reshape(d * d)])
    HL = hw @ L

    def rhs(_t, y):
        u, U = y[0], y[1:].reshape(d, d)
        G = hh @ (u * U) @ L - HL
        return np.concatenate([[-np.sum(G * U)], (-u * G).ravel()])

    t, total_nfev, y = 0.0, 0, y0
    span = 20.0 / np.linalg.norm(L @ L)
    ts, losses = [0.0], [population_loss_B(L, N, y0[0] * y0[1:].reshape(d, d))]
    sol, rounds = None, 0
    from scipy.integrate import solve_ivp  # here: SciPy's integrate and optimize cost ≈ 1 CPU s to import (issue 46)

    while True:
        sol = solve_ivp(rhs, (t, t + span), y, method="LSODA", rtol=rtol, atol=atol, dense_output=True)
        total_nfev += sol.nfev
        # the loss curve samples the dense (interpolated) solution, 16 points per round, not only the
        # few points where the solver stopped
        for tt in np.linspace(t, sol.t[-1], 17)[1:]:
            yy = sol.sol(tt)
            ts.append(float(tt))
            losses.append(population_loss_B(L, N, yy[0] * yy[1:].reshape(d, d)))
        t, y = sol.t[-1], sol.y[:, -1]
        B = y[0] * y[1:].reshape(d, d)
        if not sol.success or np.linalg.norm(population_grad_B(L, N, B)) < grad_tol or (t_end and t >= t_end):
            break
        span *= 2
        rounds += 1
        if rounds >= 60:
            break
    u, U = float(y[0]), y[1:].reshape(d, d)
    return GFResult(t, u, U, u * U, total_nfev, bool(sol.success), sol.message, (np.array(ts), np.array(losses)))


# ------------------------------------------------------------------------------------------------
# training on sampled prompts (torch)


@dataclass
class TrainResult:
    """A trained batch of LSAs: ``Wpv, Wkq (S, d+1, d+1)`` (CPU float64), per-seed ``B = w22·W11``,
    final training losses ``(S,)``, the loss curve ``(steps,)`` averaged over seeds, seconds."""

    Wpv: torch.Tensor
    Wkq: torch.Tensor
    B: np.ndarray
    final_loss: np.ndarray
    curve: np.ndarray
    seconds: float
    device: str


def lsa_features(E: torch.Tensor) -> torch.Tensor:
    """Features ``Φ_{jkl} = (E Eᵀ)_{jk} (e_q)_l`` (``l ≤ d``, the query label being 0), shape
    ``(…, (d+1)·(d+1)·d)``: ``ŷ − 0 = Σ_{jkl} W^{PV}_{d+1,j} W^{KQ}_{kl} Φ_{jkl}/ρ`` exactly."""
    gram = E @ E.transpose(-1, -2)
    d = E.shape[-2] - 1
    e_q = E[..., :d, -1]
    return (gram[..., :, :, None] * e_q[..., None, None, :]).flatten(-3)


def _train_lsa(Lambda, N: int, *, n_seeds: int, n_prompts: int, steps: int, seed: int, lr: float = 0.02,
              sigma: float | None = None, device="cpu", lbfgs_steps: int = 50) -> TrainResult:
    """Train ``n_seeds`` full-parameter LSAs (one batched tensor, ``W^{PV}, W^{KQ}`` of shape
    ``(S, d+1, d+1)``) from ZFB's initialisation, each on its own fixed set of ``n_prompts`` sampled
    prompts of length ``N`` (full batch), with ``torch.optim.Adam`` (cosine-decayed lr) and then
    ``torch.optim.LBFGS`` polishing. The empirical loss ``½ mean_p (ŷ_p − y_{q,p})²`` is exactly a
    quadratic in ``θ = W^{PV}_{d+1,:} ⊗ W^{KQ}_{:, :d}`` (see :func:`lsa_features`), so it is evaluated
    through the sufficient statistics ``ΦᵀΦ/P, Φᵀy/P, mean y²`` of the sampled prompts (same value
    and gradient as summing over the prompts, at a cost independent of ``P``)."""
    import time

    dev, L, d, sigma = _training_setup(Lambda, N, sigma, device)
    t0 = time.perf_counter()
    Q, c, m = _prompt_statistics(L, N, n_seeds, n_prompts, seed, dev)
    Wpv, Wkq = zfb_init(d, n_seeds, sigma, seed=seed + 1, device=dev)
    model, curve = _fit_statistics(Q, c, m, Wpv, Wkq, steps=steps, lr=lr, lbfgs_steps=lbfgs_steps)
    with torch.no_grad():
        fl = _stats_loss(model, Q, c, m).cpu().numpy()
        B = model.B().cpu().numpy()
    return TrainResult(model.Wpv.detach().cpu(), model.Wkq.detach().cpu(), B, fl, np.array(curve),
                       time.perf_counter() - t0, str(dev))


def _training_setup(Lambda, N: int, sigma: float | None, device):
    """Validated inputs of an LSA training run: ``(device, Λ (d, d), d, σ)`` (σ defaults to
    :func:`_zfb_sigma`)."""
    dev = resolve_device(device)
    L = as_spd_matrix(Lambda)
    if int(N) < 1:
        raise InputError(f"N must be ≥ 1, got {N}")
    return dev, L, L.shape[0], (_zfb_sigma(L, N) if sigma is None else sigma)


def _zfb_sigma(L: np.ndarray, N: int) -> float:
    """Default initialisation scale: half of ZFB's bound ``σ² ‖Γ_N‖_op √d < 2``."""
    d = L.shape[0]
    Gam = L * (1 + 1 / N) + np.trace(L) / N * np.eye(d)
    return 0.5 * math.sqrt(2 / (np.linalg.norm(Gam, 2) * math.sqrt(d)))


def _prompt_statistics(L: np.ndarray, N: int, n_seeds: int, n_prompts: int, seed: int, dev,
                       progress: Callable[[float], None] | None = None):
    """Sufficient statistics ``ΦᵀΦ/P (S, p, p), Φᵀy_q/P (S, p), mean y_q² (S,)`` of ``n_prompts``
    sampled prompts per seed (``p = (d+1)²d``), accumulated chunk by chunk (bounded memory);
    ``progress(fraction of prompts done)`` after each chunk."""
    d = L.shape[0]
    Q = torch.zeros(n_seeds, (d + 1) ** 2 * d, (d + 1) ** 2 * d, dtype=DTYPE, device=dev)
    c = torch.zeros(n_seeds, (d + 1) ** 2 * d, dtype=DTYPE, device=dev)
    m = torch.zeros(n_seeds, dtype=DTYPE, device=dev)
    chunk = max(1, min(n_prompts, 2**22 // max(1, n_seeds * (N + 1) * d)))
    done = 0
    while done < n_prompts:
        k = min(chunk, n_prompts - done)
        P = sample_prompts(L, N, (n_seeds, k), seed=seed + 7919 * (done // chunk + 1), device=dev)
        Phi = lsa_features(P.E) / float(N)
        Q += torch.bmm(Phi.transpose(1, 2), Phi)
        c += torch.bmm(Phi.transpose(1, 2), P.y_q.unsqueeze(-1)).squeeze(-1)
        m += (P.y_q**2).sum(-1)
        done += k
        del P, Phi
        if progress is not None:
            progress(done / n_prompts)
    return Q / n_prompts, c / n_prompts, m / n_prompts


def _stats_loss(model: "LSA", Q, c, m) -> torch.Tensor:
    """Per-row empirical loss ``½ mean_p (ŷ − y_q)²`` through the sufficient statistics, ``(S,)``."""
    d = model.Wpv.shape[-1] - 1
    theta = (model.Wpv[:, d, :, None, None] * model.Wkq[:, None, :, :d]).flatten(1)
    Qt = torch.bmm(Q, theta.unsqueeze(-1)).squeeze(-1)
    return 0.5 * ((theta * Qt).sum(-1) - 2 * (theta * c).sum(-1) + m)


def _fit_statistics(Q, c, m, Wpv, Wkq, *, steps: int, lr: float, lbfgs_steps: int,
                    progress: Callable[[int], None] | None = None):
    """Adam (cosine-decayed lr) then L-BFGS on the summed per-row losses. Adam is elementwise, so its
    steps are those of one run per row; the L-BFGS polish shares one line search and curvature
    history over all rows, so rows agree with separate runs to the polish's tolerance (measured
    ~3e-6 in B at d = 3), not bit for bit. ``progress(evaluations so far)`` is called every 10
    loss evaluations. Returns the model and the mean loss curve."""
    tick = progress or (lambda _n: None)
    evals = [0]
    model = LSA(Wpv, Wkq)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    curve = []
    for _ in range(steps):
        opt.zero_grad()
        per = _stats_loss(model, Q, c, m)
        per.sum().backward()
        opt.step()
        sched.step()
        curve.append(float(per.detach().mean()))
        evals[0] += 1
        if evals[0] % 10 == 0:
            tick(evals[0])
    if lbfgs_steps:
        opt2 = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=lbfgs_steps, tolerance_grad=1e-15,
                                 tolerance_change=1e-18, history_size=50, line_search_fn="strong_wolfe")

        def closure():
            opt2.zero_grad()
            s = _stats_loss(model, Q, c, m).sum()
            s.backward()
            evals[0] += 1
            if evals[0] % 10 == 0:
                tick(evals[0])
            return s

        opt2.step(closure)
    return model, curve


def train_lsa_configs(Lambdas, Ns, *, n_seeds: int, n_prompts: int, steps: int, seed: int, lr: float = 0.02,
                      device="cpu", lbfgs_steps: int = 50) -> list[TrainResult]:
    """Train ``n_seeds`` LSAs for each of K configurations ``(Λ_k (d, d), N_k)`` (same ``d``) as ONE
    batched tensor of ``K·n_seeds`` rows: per configuration the prompts, the ZFB initialisation
    and its σ are those :func:`train_lsa` would use with seed ``seed + 104729·k``; the optimiser
    runs once over the stacked sufficient statistics (see :func:`_fit_statistics`: Adam's steps are
    per row; the L-BFGS polish is shared). Returns one :class:`TrainResult` per configuration
    (``curve`` is the mean over all rows; ``seconds`` the whole batch's time)."""
    import time

    dev = resolve_device(device)
    Ls = [as_spd_matrix(L) for L in Lambdas]
    Ns = [int(N) for N in Ns]
    if len(Ls) != len(Ns) or not Ls:
        raise InputError("Lambdas and Ns must be non-empty and of the same length")
    d = Ls[0].shape[0]
    if any(L.shape[0] != d for L in Ls):
        raise InputError("every Λ must have the same dimension d")
    if any(N < 1 for N in Ns):
        raise InputError(f"every N must be ≥ 1, got {Ns}")
    t0 = time.perf_counter()
    stats, inits = [], []
    for k, (L, N) in enumerate(zip(Ls, Ns)):
        sk = seed + 104729 * k
        stats.append(_prompt_statistics(L, N, n_seeds, n_prompts, sk, dev))
        inits.append(zfb_init(d, n_seeds, _zfb_sigma(L, N), seed=sk + 1, device=dev))
    Q, c, m = (torch.cat([st[i] for st in stats]) for i in range(3))
    Wpv, Wkq = (torch.cat([w[i] for w in inits]) for i in range(2))
    with single_thread(device=dev):
        model, curve = _fit_statistics(Q, c, m, Wpv, Wkq, steps=steps, lr=lr, lbfgs_steps=lbfgs_steps)
        with torch.no_grad():
            fl = _stats_loss(model, Q, c, m).cpu().numpy()
            B = model.B().cpu().numpy()
    secs = time.perf_counter() - t0
    out = []
    for k in range(len(Ls)):
        sl = slice(k * n_seeds, (k + 1) * n_seeds)
        out.append(TrainResult(model.Wpv.detach().cpu()[sl], model.Wkq.detach().cpu()[sl], B[sl], fl[sl],
                               np.array(curve), secs, str(dev)))
    return out


def train_lsa(Lambda, N: int, **kw) -> TrainResult:
    with single_thread(device=resolve_device(kw.get("device", "cpu"))):
        return _train_lsa(Lambda, N, **kw)


train_lsa.__doc__ = _train_lsa.__doc__


# ------------------------------------------------------------------------------------------------
# Monte Carlo


def mc_mean(values) -> tuple[float, float]:
    """Mean and standard error ``std/√n`` of a 1-D sample (NumPy or torch)."""
    v = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values, dtype=np.float64)
    v = v.ravel()
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def mc_mean_cv(values, controls, pilot_values, pilot_controls) -> tuple[float, float, np.ndarray]:
    """Control-variate mean: ``values (n,)`` with ``controls (n, p)`` whose expectation is exactly 0,
    the coefficient ``β`` fitted (least squares) on an independent pilot batch (``pilot_values``,
    ``pilot_controls``), so that ``mean(values − controls·β)`` stays unbiased and its standard error is
    ``std(values − controls·β)/√n`` (as :func:`mc_mean`). Returns ``(mean, SE, β)``.

    >>> r = np.random.default_rng(0); f = r.normal(size=(4000, 1)); v = 1 + 2 * f[:, 0] + 0.1 * r.normal(size=4000)
    >>> m, se, b = mc_mean_cv(v[:3000], f[:3000], v[3000:], f[3000:]); abs(m - 1) < 5 * se < 0.05
    True
    """
    tonp = lambda a: a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)  # noqa: E731
    v, F, pv, pF = (tonp(a) for a in (values, controls, pilot_values, pilot_controls))
    pF = pF.reshape(pF.shape[0], -1)
    beta = np.linalg.lstsq(pF - pF.mean(0), pv.ravel() - pv.mean(), rcond=None)[0]
    m, se = mc_mean(v.ravel() - F.reshape(F.shape[0], -1) @ beta)
    return m, se, beta


def lsa_conditional_sq_error(Wpv: torch.Tensor, Wkq: torch.Tensor, X: torch.Tensor, C, rho: float) -> torch.Tensor:
    """``E[(ŷ − y_q)² | X]`` over the task ``w ~ N(0, I)`` and the query ``x_q = C z``, ``z ~ N(0, I)``
    (no label noise), exactly, through the LSA: with ``W^{PV}_{d+1, 1:d} = 0`` and
    ``W^{KQ}_{d+1, 1:d} = 0`` (checked) ``ŷ`` is linear in the labels ``y = Xw`` and in ``x_q`` given
    the context ``X (…, M, d)``, so ``ŷ − y_q = wᵀ K(X) z`` and its conditional mean square is
    ``‖K‖_F² = Σ_{j,k} (ŷ(X, X e_j, C e_k) − C_{jk})²``: :func:`lsa_forward_gram` on the ``d`` unit
    tasks × ``d`` unit queries, with ``E Eᵀ`` = (context columns' Gram) + (query column's outer
    product). Returns ``(…)``."""
    d = X.shape[-1]
    if torch.any(Wpv[..., d, :d] != 0) or torch.any(Wkq[..., d, :d] != 0):
        raise InputError("lsa_conditional_sq_error needs W^PV[d, :d] = 0 and W^KQ[d, :d] = 0 (ŷ bilinear in y, x_q)")
    Ct = torch.as_tensor(np.asarray(C, dtype=np.float64), dtype=X.dtype, device=X.device)
    Xt = X.transpose(-1, -2)  # (…, d, M)
    lead = Xt.shape[:-2]
    # context columns for unit task j: [x_i; x_i[j]], shape (…, j, d+1, M)
    Ectx = torch.cat([Xt.unsqueeze(-3).expand(*lead, d, d, Xt.shape[-1]), Xt.unsqueeze(-2)], dim=-2)
    G = Ectx @ Ectx.transpose(-1, -2)  # (…, j, d+1, d+1)
    eq = torch.zeros(d, d + 1, dtype=X.dtype, device=X.device)
    eq[:, :d] = Ct.T  # query column for unit query k: [C e_k; 0]
    gram = G.unsqueeze(-3) + eq[:, :, None] * eq[:, None, :]  # (…, j, k, d+1, d+1)
    yh = lsa_forward_gram(Wpv[..., None, None, :, :], Wkq[..., None, None, :, :], gram,
                          eq.expand(*lead, d, d, d + 1), rho)  # (…, j, k)
    return ((yh - Ct) ** 2).sum((-1, -2))


@dataclass(frozen=True)
class TargetLaw:
    """``x ~ N(0, Λ)``, ``y = f(⟨w0, x⟩) + noise·ε`` with exact ``a = Λ^{-1}E[xy]``, ``Σ = Cov(xy)``,
    ``min_risk = min_v E(⟨v,x⟩ − y)²`` from 1-D Gauss–Hermite quadrature (Stein decomposition
    ``x = Λw0 z/s² + r``, ``r ⟂ z``, ``z = ⟨w0,x⟩ ~ N(0, s²)``)."""

    Lambda: np.ndarray
    w0: np.ndarray
    link: str
    noise: float
    a: np.ndarray
    Sigma: np.ndarray
    min_risk: float
    Ey2: float


_LINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": lambda z: z,
    "tanh": np.tanh,
    "cubic": lambda z: z + 0.3 * z**3,
    "relu": lambda z: np.maximum(z, 0.0),
}


def target_law(Lambda, w0, link: str = "tanh", noise: float = 0.0, n_nodes: int = 200) -> TargetLaw:
    """Exact moments of the target law (see :class:`TargetLaw`); ``link`` in linear/tanh/cubic/relu."""
    L = as_spd_matrix(Lambda)
    w0 = np.asarray(w0, dtype=np.float64)
    if w0.shape != (L.shape[0],):
        raise InputError(f"w0 must have shape ({L.shape[0]},), got {w0.shape}")
    if link not in _LINKS:
        raise InputError(f"unknown link {link!r}; choose from {sorted(_LINKS)}")
    f = _LINKS[link]
    s2 = float(w0 @ L @ w0)
    t, wts = np.polynomial.hermite_e.hermegauss(n_nodes)
    wts = wts / math.sqrt(2 * math.pi)
    z = math.sqrt(s2) * t
    fz = f(z)
    E_zf, E_f2, E_f2z2 = (wts * z * fz).sum(), (wts * fz**2).sum(), (wts * fz**2 * z**2).sum()
    Lw = L @ w0
    Exy = Lw * E_zf / s2
    a = np.linalg.solve(L, Exy)
    nz2 = noise**2
    Ey2xx = (E_f2z2 + nz2 * s2) * np.outer(Lw, Lw) / s2**2 + (E_f2 + nz2) * (L - np.outer(Lw, Lw) / s2)
    Sigma = Ey2xx - np.outer(Exy, Exy)
    Ey2 = E_f2 + nz2
    return TargetLaw(L, w0, link, noise, a, Sigma, float(Ey2 - a @ L @ a), float(Ey2))


def sample_target_prompts(law: TargetLaw, M: int, n: int, *, seed: int) -> tuple[np.ndarray, ...]:
    """``n`` prompts of length ``M`` from ``law``: ``X (n, M, d)``, ``y (n, M)``, ``x_q (n, d)``, ``y_q (n,)``."""
    rng = np.random.default_rng(seed)
    C = np.linalg.cholesky(law.Lambda)
    d = C.shape[0]
    Xall = rng.normal(size=(n, M + 1, d)) @ C.T
    yall = _LINKS[law.link](Xall @ law.w0) + law.noise * rng.normal(size=(n, M + 1))
    return Xall[:, :M], yall[:, :M], Xall[:, M], yall[:, M]


def mc_risk(predict: Callable, X, y, x_q, y_q) -> tuple[float, float]:
    """Monte Carlo ``E(ŷ − y_q)²`` with its standard error, ``predict(X, y, x_q) -> ŷ``."""
    return mc_mean((np.asarray(predict(X, y, x_q)) - np.asarray(y_q)) ** 2)
