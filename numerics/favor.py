"""FAVOR+ random features and Performer-style linear attention in torch (claim ``perf.favor_unbiased``).

Conventions: tokens are rows; ``x: (..., n, d)``; random frequencies ``W: (..., m, d)`` (rows
``ω_i``), broadcast over leading batch dims (many Monte Carlo trials as one batched tensor);
float64. ``SM(x, y) = e^{xᵀy}``.

* positive features ``φ⁺(x) = e^{−‖x‖²/2}/√m · exp(W x)``: ``(..., n, m)``
* trigonometric features ``φᵗ(x) = e^{‖x‖²/2}/√m · [sin(W x), cos(W x)]``: ``(..., n, 2m)``
* i.i.d. frequencies ``ω_i ~ N(0, I_d)``; orthogonal random features (ORF): blocks of ``d``
  exactly orthogonal directions (QR of a Gaussian matrix, sign-fixed so the block is Haar), each
  row rescaled by an independent ``χ_d`` length (the norm of a fresh Gaussian vector), so every
  row is still marginally ``N(0, I_d)`` and the estimator stays unbiased.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaln

from theory.validation import require

__all__ = [
    "positive_features", "trig_features", "iid_gaussian", "orthogonal_gaussian", "kernel_estimate",
    "mse_positive", "mse_trig", "performer_attention", "gauss_hermite_expectation",
    "orthogonal_pair_moment", "orf_mse",
]


def positive_features(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """``e^{ωᵢᵀx − ‖x‖²/2}/√m``: ``x (..., n, d)``, ``W (..., m, d)`` → ``(..., n, m)`` (positive)."""
    m = W.shape[-2]
    logits = x @ W.transpose(-1, -2) - 0.5 * (x * x).sum(-1, keepdim=True)
    return torch.exp(logits) / math.sqrt(m)


def trig_features(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """``e^{‖x‖²/2}/√m [sin ωᵢᵀx, cos ωᵢᵀx]``: ``(..., n, 2m)`` (sines first)."""
    m = W.shape[-2]
    proj = x @ W.transpose(-1, -2)
    h = torch.exp(0.5 * (x * x).sum(-1, keepdim=True)) / math.sqrt(m)
    return h * torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)


def iid_gaussian(shape: tuple[int, ...], m: int, d: int, generator: torch.Generator, device="cpu") -> torch.Tensor:
    """``(*shape, m, d)`` i.i.d. standard normal frequencies (float64)."""
    return torch.randn(*shape, m, d, generator=generator, dtype=torch.float64, device=device)


def orthogonal_gaussian(shape: tuple[int, ...], m: int, d: int, generator: torch.Generator, device="cpu") -> torch.Tensor:
    """``(*shape, m, d)`` orthogonal random features: ``⌈m/d⌉`` independent blocks of ``d``
    orthonormal rows (QR of a Gaussian ``d×d``, columns' signs fixed by ``diag R`` so the block is
    Haar-distributed), rows scaled by independent ``χ_d`` norms, truncated to ``m`` rows."""
    require(m >= 1 and d >= 1, "m and d must be positive")
    nb = -(-m // d)
    G = torch.randn(*shape, nb, d, d, generator=generator, dtype=torch.float64, device=device)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)
    rows = Q.transpose(-1, -2)  # rows of the orthogonal matrix
    lengths = torch.randn(*shape, nb, d, d, generator=generator, dtype=torch.float64, device=device).norm(dim=-1)
    W = rows * lengths.unsqueeze(-1)
    return W.reshape(*shape, nb * d, d)[..., :m, :]


def kernel_estimate(features, x: torch.Tensor, y: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """``φ(x)ᵀφ(y)`` for paired rows: ``x, y (..., n, d)``, ``W (..., m, d)`` → ``(..., n)``."""
    return (features(x, W) * features(y, W)).sum(-1)


def _abc(x, y):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return (x * x).sum(-1), (y * y).sum(-1), (x * y).sum(-1)


def mse_positive(x, y, m) -> np.ndarray:
    """``(1/m) e^{‖x+y‖²} SM² (1 − e^{−‖x+y‖²})`` for ``x, y (..., d)`` (NumPy)."""
    a, b, c = _abc(x, y)
    z2 = a + b + 2 * c
    return np.exp(z2 + 2 * c) * (-np.expm1(-z2)) / m


def mse_trig(x, y, m) -> np.ndarray:
    """``(1/2m) e^{‖x+y‖²} SM^{−2} (1 − e^{−‖x−y‖²})²`` for ``x, y (..., d)`` (NumPy)."""
    a, b, c = _abc(x, y)
    return np.exp(a + b) * np.expm1(-(a + b - 2 * c)) ** 2 / (2 * m)


def performer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, W: torch.Tensor, features=positive_features) -> torch.Tensor:
    """Linear attention approximating ``softmax(q kᵀ/√d) v``: with ``q' = q/d^{1/4}``,
    ``k' = k/d^{1/4}`` (so ``e^{q'ᵀk'} = e^{qᵀk/√d}``), ``out = φ(q')(φ(k')ᵀ v) / φ(q')(φ(k')ᵀ 1)``.
    ``q, k (..., n, d)``, ``v (..., n, d_v)``, ``W (..., m, d)`` → ``(..., n, d_v)``; ``O(n m d)``."""
    s = q.shape[-1] ** -0.25
    fq, fk = features(q * s, W), features(k * s, W)
    num = fq @ (fk.transpose(-1, -2) @ v)
    den = fq @ fk.sum(-2, keepdim=True).transpose(-1, -2)
    return num / den


def gauss_hermite_expectation(f, x: np.ndarray, y: np.ndarray, nodes: int = 60) -> tuple[float, float]:
    """``(E g, E g²)`` of ``g(ω) = f(ω)`` over ``ω ~ N(0, I_d)`` when ``g`` depends on ``ω`` only
    through ``ωᵀx, ωᵀy``: ω is restricted to ``span(x, y)`` (orthonormal basis by QR) and
    integrated by a product Gauss–Hermite rule (probabilists', ``nodes²`` points).
    ``f`` maps frequencies ``(N, d)`` to values ``(N,)``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    basis, _ = np.linalg.qr(np.stack([x, y], axis=1))  # (d, 2)
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / math.sqrt(2 * math.pi)
    T1, T2 = np.meshgrid(t, t, indexing="ij")
    omegas = T1.reshape(-1, 1) * basis[:, 0] + T2.reshape(-1, 1) * basis[:, 1]
    wts = np.outer(w, w).reshape(-1)
    g = np.asarray(f(omegas), dtype=np.float64)
    return float(wts @ g), float(wts @ (g * g))


def orthogonal_pair_moment(s, d: int, kind: str = "exp", terms: int = 120) -> np.ndarray:
    """``E[f(ω₁ᵀẑ s) f(ω₂ᵀẑ s)]`` for two rows of one block of :func:`orthogonal_gaussian` (exactly
    orthogonal Haar directions ``u₁, u₂`` with independent ``χ_d`` lengths ``r₁, r₂``) and a unit
    vector ``ẑ``; ``f = exp`` (``kind="exp"``) or ``f = cos`` (``"cos"``). By symmetry only even
    powers survive: ``Σ_{j,k even} (±1)^{(j+k)/2} s^{j+k}/(j! k!) E r^j E r^k E[t₁^j t₂^k]`` with
    ``E r^j = 2^{j/2} Γ((d+j)/2)/Γ(d/2)`` and ``(t₁, t₂) = (u₁ᵀẑ, u₂ᵀẑ)`` the first two coordinates
    of a uniform point of ``S^{d−1}``: ``E[t₁^j t₂^k] = Γ(d/2) Γ((j+1)/2) Γ((k+1)/2) / (π Γ((d+j+k)/2))``.
    ``terms`` even indices per sum: for ``s ≤ 4`` the omitted tail is below 1e-20 of the sum. The
    ``cos`` sum alternates: its absolute rounding error is about eps·Σ|terms| (≤ 1e-12 for
    ``s ≤ 3.3``, ``d ≤ 8``; 5e-10 at ``s = 4``, ``d = 64``). ``d ≥ 2``; ``s`` any shape, in ``[0, 4]``."""
    require(d >= 2 and kind in ("exp", "cos"), f"need d ≥ 2 and kind exp|cos, got d = {d}, kind = {kind!r}")
    s = np.asarray(s, dtype=np.float64)
    require(bool(np.all((s >= 0) & (s <= 4))), "orthogonal_pair_moment: s must lie in [0, 4] (series truncation, rounding)")
    j = np.arange(0, 2 * terms, 2, dtype=np.float64)
    J, K = j[:, None], j[None, :]
    logc = ((J + K) / 2 * math.log(2) + gammaln((d + J) / 2) + gammaln((d + K) / 2) + gammaln((J + 1) / 2)
            + gammaln((K + 1) / 2) - gammaln(J + 1) - gammaln(K + 1) - gammaln(d / 2) - math.log(math.pi)
            - gammaln((d + J + K) / 2))
    sign = (-1.0) ** ((J + K) / 2) if kind == "cos" else np.ones_like(J)
    logs = np.log(np.where(s > 0, s, 1.0))[..., None, None]
    terms_ = np.where((J + K) == 0, 1.0, np.where(s[..., None, None] > 0, sign * np.exp(logc + (J + K) * logs), 0.0))
    return terms_.sum((-1, -2))


def orf_mse(x, y, m: int, features: str = "positive") -> np.ndarray:
    """Exact MSE of the ``m``-row estimator with :func:`orthogonal_gaussian` frequencies (blocks of
    ``d`` orthogonal rows, independent blocks), for ``x, y (..., d)``:
    ``(m·Var Z + P·Cov) / m²`` with ``Z`` one row's term (``Var Z/m`` is the i.i.d. MSE), ``P`` the
    number of ordered pairs of rows in the same block and ``Cov`` the covariance of two orthogonal
    rows' terms (:func:`orthogonal_pair_moment`). Positive features: ``Z = e^{−(a+b)/2} e^{ωᵀ(x+y)}``;
    trigonometric: ``Z = e^{(a+b)/2} cos(ωᵀ(x−y))`` (``a = ‖x‖², b = ‖y‖²``)."""
    require(features in ("positive", "trig") and int(m) >= 1, "features must be positive|trig and m ≥ 1")
    a, b, c = _abc(x, y)
    d, m = np.asarray(x).shape[-1], int(m)
    nb, rem = divmod(m, d)
    pairs = nb * d * (d - 1) + rem * (rem - 1)
    if features == "positive":
        z2 = a + b + 2 * c
        var = np.exp(z2 - (a + b)) * np.expm1(z2)
        cov = np.exp(-(a + b)) * (orthogonal_pair_moment(np.sqrt(z2), d, "exp") - np.exp(z2)) if pairs else 0.0
    else:
        w2 = a + b - 2 * c
        var = np.exp(a + b) * 0.5 * np.expm1(-w2) ** 2
        cov = np.exp(a + b) * (orthogonal_pair_moment(np.sqrt(w2), d, "cos") - np.exp(-w2)) if pairs else 0.0
    return (m * var + pairs * cov) / m**2
