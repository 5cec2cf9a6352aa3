"""The numerics of ``attn.complexity`` (FLOPs counted by torch), ``attn.sinusoidal_pe`` (the encoding and its
shift matrix) and ``attn.scaling_variance`` (Monte Carlo moments of q·k). Part of :mod:`numerics.attention`
(conventions in its docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from numerics.torch_utils import resolve_device
from theory.validation import InputError, require


# --------------------------------------------------------------------------------------------
# cost (attn.complexity)


class SharedProjectionScores(torch.nn.Module):
    """Lecture notes 000's shared-``U`` scores as a torch module: ``Z = X Uᵀ`` then ``Z Zᵀ`` (rows)."""

    def __init__(self, D: int, K: int, dtype=torch.float64, device="cpu"):
        super().__init__()
        self.proj = torch.nn.Linear(D, K, bias=False, dtype=dtype, device=resolve_device(device))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        Z = self.proj(X)
        return Z @ Z.transpose(-1, -2)


def count_flops(module: torch.nn.Module, *inputs, **kwargs) -> dict[str, int]:
    """FLOPs of one forward call counted by ``torch.utils.flop_counter.FlopCounterMode``.

    Runs under ``sdpa_kernel(SDPBackend.MATH)``: torch 2.13's counter has no formula for the fused
    CPU kernel ``_scaled_dot_product_flash_attention_for_cpu`` (it would count 0), while the math
    backend decomposes attention into the matrix products it does count. FLOPs = 2 × MACs.
    Returns ``{"total": ..., "<module name>": ...}``.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    fc = FlopCounterMode(display=False)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), fc:
        module(*inputs, **kwargs)
    out = {"total": int(fc.get_total_flops())}
    for name, counts in fc.get_flop_counts().items():
        out[name] = int(sum(counts.values()))
    return out


# --------------------------------------------------------------------------------------------
# sinusoidal positional encoding (attn.sinusoidal_pe)


def _frequencies(D: int, base: float) -> np.ndarray:
    require(isinstance(D, (int, np.integer)) and D >= 2 and D % 2 == 0, f"D must be an even integer ≥ 2, got {D!r}")
    return base ** (-2.0 * np.arange(D // 2) / D)


def sinusoidal_pe(positions, D: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s encoding, interleaved: ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)``,
    ``ω_i = base^{−2i/D}``. ``positions (P,)`` → ``(P, D)``; ``D`` must be even.

    >>> sinusoidal_pe(np.array([0.0]), 4).tolist()
    [[0.0, 1.0, 0.0, 1.0]]
    """
    w = _frequencies(D, base)
    ang = np.asarray(positions, dtype=np.float64)[..., None] * w
    out = np.empty(ang.shape[:-1] + (D,))
    out[..., 0::2] = np.sin(ang)
    out[..., 1::2] = np.cos(ang)
    return out


def pe_shift_matrix(k: float, D: int, base: float = 10000.0) -> np.ndarray:
    """Block-diagonal ``M_k`` with ``PE(p + k) = PE(p) M_k`` for every p (row vectors): block i is
    ``[[cos kω_i, −sin kω_i], [sin kω_i, cos kω_i]]``."""
    w = _frequencies(D, base)
    c, s = np.cos(k * w), np.sin(k * w)
    M = np.zeros((D, D))
    i = np.arange(D // 2)
    M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
    M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M


# --------------------------------------------------------------------------------------------
# Monte Carlo moments of q·k (attn.scaling_variance)


@dataclass(frozen=True)
class ScoreMoments:
    """Monte Carlo moments of ``s_d = Σ_{i≤d} q_i k_i`` for each ``d`` in ``dims``.

    var        (len(dims),) ``mean(s²)`` (unbiased: the mean of s is known to be 0)
    se         its standard error ``√((mean(s⁴) − mean(s²)²)/n)`` from the sample fourth moment
    fourth     (len(dims),) ``mean(s⁴)``
    n          number of samples
    """

    dims: tuple[int, ...]
    var: np.ndarray
    se: np.ndarray
    fourth: np.ndarray
    n: int


def _entries(rng: np.random.Generator, dist: str, size) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(size)
    if dist == "rademacher":
        return rng.choice(np.array([-1.0, 1.0]), size=size)
    if dist == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size=size)
    raise InputError(f"unknown distribution {dist!r} (normal, rademacher, uniform)")


def dot_product_moments(dims, n: int, rng: np.random.Generator, *, dist: str = "normal",
                        scale=None, chunk: int = 50_000) -> ScoreMoments:
    """Moments of ``c(d)·q·k`` for iid zero-mean unit-variance entries (``dist``), all ``d`` in
    ``dims`` from one draw (prefix sums of ``q_i k_i`` along the feature axis), in chunks.

    ``scale`` is a function ``d ↦ c(d)`` (default 1: the unscaled score).
    """
    dims = tuple(int(d) for d in dims)
    require(all(d >= 1 for d in dims) and n >= 2, "dims must be ≥ 1 and n ≥ 2")
    dmax = max(dims)
    idx = np.asarray(dims) - 1
    c = np.array([1.0 if scale is None else float(scale(d)) for d in dims])
    s2 = np.zeros(len(dims))
    s4 = np.zeros(len(dims))
    done = 0
    while done < n:
        m = min(chunk, n - done)
        z = np.cumsum(_entries(rng, dist, (m, dmax)) * _entries(rng, dist, (m, dmax)), axis=1)[:, idx] * c
        z2 = z * z
        s2 += z2.sum(0)
        s4 += (z2 * z2).sum(0)
        done += m
    var, fourth = s2 / n, s4 / n
    se = np.sqrt(np.maximum(fourth - var**2, 0.0) / n)
    return ScoreMoments(dims, var, se, fourth, n)


@dataclass(frozen=True)
class PairMoments:
    """Monte Carlo ``Var(q·k) = E(q·k)²`` over all pairs of independent draws (see
    :func:`dot_product_pair_moments`), for each ``d`` in ``dims``.

    var        (len(dims),) the mean over batches of the control-variate pair estimate
    se         its standard error ``std_b / √B`` over the ``B`` batches
    var_plain  (len(dims),) the all-pairs mean ``tr(S_q S_k)`` without control variates
    se_plain   its batch standard error
    n, batches number of q's (and of k's) and of batches
    """

    dims: tuple[int, ...]
    var: np.ndarray
    se: np.ndarray
    var_plain: np.ndarray
    se_plain: np.ndarray
    n: int
    batches: int


def dot_product_pair_moments(dims, n: int, rng: np.random.Generator, *, dist: str = "normal",
                             batches: int = 50) -> PairMoments:
    """``Var(q·k)`` for iid zero-mean unit-variance entries from ``n`` draws of ``q`` and ``n``
    independent draws of ``k``, split into ``B = batches`` batches of ``m = n/B`` each.

    In batch ``b`` the mean of ``(q_a·k_c)²`` over all ``m²`` pairs ``(a, c)`` is the V-statistic
    ``tr(S_q S_k) = Σ_ij (S_q)_ij (S_k)_ij`` of the sample second-moment matrices
    ``S = (1/m) Σ_a x_a x_aᵀ`` (restricted to the leading ``d × d`` block for prefix dimension
    ``d``): ``O(m d²)`` instead of ``O(m² d)``, and unbiased for ``E(q·k)² = tr(E S_q · E S_k)``
    because ``S_q`` and ``S_k`` are independent. Writing ``S = I + E`` (``E`` of order ``1/√m``),
    ``tr(S_q S_k) = d + tr E_q + tr E_k + tr(E_q E_k)``: the two first-order terms are control
    variates of known mean 0 (``E x_i² = 1``, the premise), subtracted with the coefficient 1 of
    this expansion (fixed in advance, so the estimate stays unbiased whatever the law). Returns the
    mean over batches and the batch-means standard error ``std_b/√B`` (no variance formula
    assumed), for the estimate with and without the control variates.

    >>> m = dot_product_pair_moments([1, 8], 4000, np.random.default_rng(0), batches=20)
    >>> bool(np.all(np.abs(m.var - [1, 8]) < 6 * m.se)), bool(np.all(m.se < m.se_plain))
    (True, True)
    """
    dims = tuple(int(d) for d in dims)
    require(all(d >= 1 for d in dims) and batches >= 2 and n >= 2 * batches,
            "dims must be ≥ 1, batches ≥ 2 and n ≥ 2·batches")
    dmax, m = max(dims), n // batches
    idx = np.asarray(dims) - 1
    est, plain = np.empty((batches, len(dims))), np.empty((batches, len(dims)))
    for b in range(batches):
        Q, K = _entries(rng, dist, (m, dmax)), _entries(rng, dist, (m, dmax))
        Sq, Sk = Q.T @ Q / m, K.T @ K / m
        P = np.cumsum(np.cumsum(Sq * Sk, axis=0), axis=1)  # P[d-1, d-1] = Σ_{i,j<d} (S_q)_ij (S_k)_ij
        tr_q, tr_k = np.cumsum(np.diag(Sq))[idx], np.cumsum(np.diag(Sk))[idx]
        plain[b] = P[idx, idx]
        est[b] = plain[b] - (tr_q - np.asarray(dims)) - (tr_k - np.asarray(dims))
    root = math.sqrt(batches)
    return PairMoments(dims, est.mean(0), est.std(0, ddof=1) / root, plain.mean(0), plain.std(0, ddof=1) / root,
                       m * batches, batches)


def score_moments_exact(q, k, prob) -> tuple[float, float]:
    """Exact mean and variance of ``q·k`` under a finite joint law of ``(q, k)``: outcome ``j`` is
    ``(q[j], k[j])`` (rows of ``q, k ∈ R^{n×d}``) with probability ``prob[j]`` (summing to 1).
    For the counterexamples of ``attn.scaling_variance`` (small enumerated laws, no sampling).

    >>> r = np.array([[-1.0], [1.0]])  # one Rademacher entry each, q and k independent
    >>> q, k = np.repeat(r, 2, axis=0), np.tile(r, (2, 1))
    >>> score_moments_exact(q, k, np.full(4, 0.25))
    (0.0, 1.0)
    """
    q, k, prob = (np.asarray(a, dtype=np.float64) for a in (q, k, prob))
    require(q.shape == k.shape and q.ndim == 2 and prob.shape == (q.shape[0],), "q, k must be (n, d) and prob (n,)")
    require(bool(np.all(prob >= 0)) and abs(float(prob.sum()) - 1.0) <= 1e-12, "prob must be a probability vector")
    s = np.einsum("nd,nd->n", q, k)
    mean = float(prob @ s)
    return mean, float(prob @ (s - mean) ** 2)


def sinusoidal_pe_any_width(positions, D: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s encoding for any width ``D ≥ 1``, odd included: column ``j`` is
    ``sin(p ω_{j//2})`` for even ``j`` and ``cos(p ω_{j//2})`` for odd ``j``, ``ω_i = base^{−2i/D}``
    (for odd ``D`` the last sine has no cosine partner). Equals :func:`sinusoidal_pe` for even ``D``.

    >>> sinusoidal_pe_any_width(np.array([0.0]), 3).tolist()
    [[0.0, 1.0, 0.0]]
    """
    require(isinstance(D, (int, np.integer)) and D >= 1, f"D must be an integer ≥ 1, got {D!r}")
    j = np.arange(D)
    w = base ** (-2.0 * (j // 2) / D)
    ang = np.asarray(positions, dtype=np.float64)[..., None] * w
    return np.where(j % 2 == 0, np.sin(ang), np.cos(ang))
