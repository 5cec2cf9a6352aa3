"""Hopfield networks in torch, batched over trials (claims ``hop.*``).

Conventions (differ from lecture notes 002's column form, stated here once):

* stored patterns are the **rows** of ``P`` with shape ``(..., N, d)``; lecture notes 002's ``X`` is ``Pᵀ``;
* states are rows: ``xi`` has shape ``(..., S, d)`` (``S`` states per trial) or ``(..., d)``;
* every leading dimension is a batch of independent trials (no Python loop over trials);
* ``sgn(0) = +1``; ``W = Σ_μ x_μ x_μᵀ`` (``zero_diagonal=True`` sets ``w_ii = 0``, the usual
  choice for capacity; the energy results hold for any ``w_ii ≥ 0``);
* the modern update's softmax runs over the stored-pattern axis ``N``;
* float64 unless a function says otherwise (±1 integer arithmetic is exact in float32 up to 2²⁴).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from numerics.torch_utils import generator, resolve_device
from theory.validation import InputError, require

__all__ = [
    "sgn",
    "random_patterns",
    "hebbian_weights",
    "classical_energy",
    "flip_energy_change",
    "async_unit_update",
    "run_async",
    "run_async_greedy",
    "sync_step",
    "find_sync_two_cycles",
    "corrupt",
    "fixed_point_fraction",
    "converged_bit_error",
    "classical_capacity_sweep",
    "dense_energy",
    "dense_update",
    "dense_fixed_fraction",
    "lse",
    "modern_energy",
    "modern_grad",
    "modern_update",
    "retrieval_error_and_bound",
    "retrieval_bound",
    "hopfield_attention",
    "CapacityPoint",
]


def sgn(x: torch.Tensor) -> torch.Tensor:
    """Sign with ``sgn(0) = +1`` (same dtype as ``x``).

    >>> sgn(torch.tensor([-2.0, 0.0, 3.0]))
    tensor([-1.,  1.,  1.])
    """
    one = torch.ones((), dtype=x.dtype, device=x.device)  # broadcast: no two tensors of ones the size of x
    return torch.where(x >= 0, one, -one)


def random_patterns(shape: tuple[int, ...], seed: int, *, device="cpu", dtype=torch.float64) -> torch.Tensor:
    """Uniform random ±1 tensor of ``shape`` (e.g. ``(trials, N, d)``) from a seeded generator."""
    dev = resolve_device(device)
    g = generator(seed, dev)
    bits = torch.randint(0, 2, shape, generator=g, device=dev)
    return (2 * bits - 1).to(dtype)


def hebbian_weights(P: torch.Tensor, zero_diagonal: bool = True) -> torch.Tensor:
    """``W = Σ_μ x_μ x_μᵀ = PᵀP`` of shape ``(..., d, d)`` from patterns ``P`` ``(..., N, d)``."""
    W = P.transpose(-1, -2) @ P
    if zero_diagonal:
        W = W - torch.diag_embed(torch.diagonal(W, dim1=-2, dim2=-1))
    return W


def classical_energy(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``E(ξ) = −½ ξᵀWξ + ξᵀb`` for row states ``xi`` ``(..., d)``, ``W`` ``(..., d, d)``,
    ``b`` ``(..., d)`` (broadcast); returns ``(...)``."""
    return -0.5 * torch.einsum("...i,...ij,...j->...", xi, W, xi) + (xi * b).sum(-1)


def flip_energy_change(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor, i: int) -> torch.Tensor:
    """``ΔE = 2ξ_i(Σ_{j≠i} w_ij ξ_j − b_i)`` of flipping unit ``i`` (shape ``(...)``)."""
    row = W[..., i, :]
    field = (row * xi).sum(-1) - row[..., i] * xi[..., i]
    return 2 * xi[..., i] * (field - b[..., i])


def async_unit_update(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor, i: int) -> torch.Tensor:
    """One asynchronous update ``ξ_i ← sgn((Wξ − b)_i)`` of unit ``i`` (a new tensor)."""
    h = (W[..., i, :] * xi).sum(-1) - b[..., i]
    out = xi.clone()
    out[..., i] = sgn(h)
    return out


def run_async(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None, max_sweeps: int = 50,
              *, record_energy: bool = False):
    """Asynchronous dynamics in sequential sweeps ``i = 0..d−1`` until no unit changes in a sweep.

    ``xi`` ``(B, S, d)`` (``S`` states per trial), ``W`` ``(B, d, d)`` symmetric, ``b`` ``(B, d)``
    or ``None``. The local fields ``h = ξW − b`` are kept up to date incrementally (a flip of unit
    ``i`` by ``δ`` adds ``δ W[i, :]``), so a sweep costs ``O(B S d²)``.

    Returns ``(state, sweeps, trace)``: final states, sweeps used (the last one without flips if
    converged) and, with ``record_energy``, the energy ``(steps+1, B, S)`` after every unit update.
    """
    require(xi.dim() == 3 and W.dim() == 3, "run_async expects xi (B, S, d) and W (B, d, d)")
    B, S, d = xi.shape
    if b is None:
        b = torch.zeros(B, d, dtype=xi.dtype, device=xi.device)
    xi = xi.clone()
    h = xi @ W - b[:, None, :]
    trace = [classical_energy(xi, W[:, None], b[:, None])] if record_energy else []
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):
        changed = False
        for i in range(d):
            new = sgn(h[..., i])
            delta = new - xi[..., i]
            if bool((delta != 0).any()):
                changed = True
                xi[..., i] = new
                h += delta[..., None] * W[:, None, i, :]
            if record_energy:
                trace.append(classical_energy(xi, W[:, None], b[:, None]))
        if not changed:
            break
    return xi, sweeps, (torch.stack(trace) if record_energy else None)


def run_async_greedy(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None,
                     max_flips: int | None = None) -> tuple[torch.Tensor, int]:
    """Asynchronous dynamics flipping, at each step and in every state at once, the single most
    unstable unit (largest ``−ξ_i h_i`` among units with ``sgn(h_i) ≠ ξ_i``), until no unit is
    unstable. Still one unit per state per step (so the energy never increases), but the number of
    steps is the number of flips, not ``sweeps × d``: the fast path for capacity measurements.

    ``xi`` ``(B, S, d)``, ``W`` ``(B, d, d)`` symmetric, ``b`` ``(B, d)`` or ``None``.
    Returns ``(state, steps)``.
    """
    require(xi.dim() == 3 and W.dim() == 3, "run_async_greedy expects xi (B, S, d) and W (B, d, d)")
    B, S, d = xi.shape
    if b is None:
        b = torch.zeros(B, d, dtype=xi.dtype, device=xi.device)
    max_flips = max_flips or 4 * d
    xi = xi.clone()
    h = xi @ W - b[:, None, :]
    rows = torch.arange(B, device=xi.device)[:, None]
    neg_inf = torch.tensor(-math.inf, dtype=xi.dtype, device=xi.device)
    steps = 0
    for steps in range(1, max_flips + 1):
        unstable = (h >= 0) != (xi > 0)                                   # sgn(h) ≠ ξ for ξ ∈ {±1}, sgn(0) = +1
        active = unstable.any(-1)
        if not bool(active.any()):
            return xi, steps - 1
        i = torch.where(unstable, -xi * h, neg_inf).argmax(-1)            # (B, S)
        delta = -2 * xi.gather(-1, i[..., None])[..., 0] * active          # ±2 or 0
        xi.scatter_add_(-1, i[..., None], delta[..., None])
        h += delta[..., None] * W[rows, i]
    return xi, steps


def sync_step(xi: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Synchronous update ``ξ ← sgn(Wξ − b)`` of every unit at once (rows ``(..., d)``)."""
    return sgn(torch.einsum("...ij,...j->...i", W, xi) - b)


def find_sync_two_cycles(B: int, d: int, seed: int, *, device="cpu", step=None):
    """Search ``B`` random instances (symmetric ``W`` with ``w_ii ≥ 0`` small, random start) for a
    synchronous 2-cycle ``ξ → ξ' → ξ`` with ``ξ' ≠ ξ``. Returns ``(found_mask (B,), xi, W, b)``.

    ``W = A + Aᵀ`` with Gaussian ``A``, its diagonal replaced by ``|·|/d``; ``b = 0``. ``step``
    (default :func:`sync_step`) is the synchronous update used, ``step(xi, W, b)``.
    """
    step = step or sync_step
    dev = resolve_device(device)
    g = generator(seed, dev)
    A = torch.randn(B, d, d, generator=g, device=dev, dtype=torch.float64)
    W = A + A.transpose(-1, -2)
    W = W - torch.diag_embed(torch.diagonal(W, dim1=-2, dim2=-1)) + torch.diag_embed(
        torch.diagonal(W, dim1=-2, dim2=-1).abs() / d)
    b = torch.zeros(B, d, dtype=torch.float64, device=dev)
    xi = sgn(torch.randn(B, d, generator=g, device=dev, dtype=torch.float64))
    for _ in range(4 * d):  # let transients die out; sync dynamics ends in a fixed point or a 2-cycle
        xi = step(xi, W, b)
    x1 = step(xi, W, b)
    x2 = step(x1, W, b)
    found = (x2 == xi).all(-1) & (x1 != xi).any(-1)
    return found, xi, W, b


def corrupt(P: torch.Tensor, kind: str, level: float, seed: int) -> torch.Tensor:
    """Corrupted copies of the patterns ``P`` ``(..., N, d)`` as queries:

    ``"flip"``: each bit flipped with probability ``level``; ``"gauss"``: add ``N(0, level²)``;
    ``"mask"``: the last ``round(level·d)`` coordinates set to 0 (``level=0.5``: masked half).
    """
    g = generator(seed, P.device)
    if kind == "flip":
        flips = torch.rand(P.shape, generator=g, device=P.device, dtype=P.dtype) < level
        return torch.where(flips, -P, P)
    if kind == "gauss":
        return P + level * torch.randn(P.shape, generator=g, device=P.device, dtype=P.dtype)
    if kind == "mask":
        k = int(round(level * P.shape[-1]))
        out = P.clone()
        if k:
            out[..., -k:] = 0
        return out
    raise InputError(f"unknown corruption {kind!r} (flip, gauss, mask)")


# --------------------------------------------------------------------------------------------
# capacity of the classical net


def fixed_point_fraction(P: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each trial, the fraction of stored patterns that are exact fixed points of
    ``ξ ← sgn(Wξ)`` (zero-diagonal Hebbian ``W``) and whether all are.

    Uses ``ξ W = (ξ Pᵀ) P − N ξ`` (Gram trick, ``O(N² d)`` per trial, ``W`` never formed).
    ``P`` ``(B, N, d)``; returns ``(frac (B,), all_fixed (B,) bool)``.
    """
    N = P.shape[-2]
    h = (P @ P.transpose(-1, -2)) @ P - N * P
    ok = (sgn(h) == P).all(-1)
    return ok.to(P.dtype).mean(-1), ok.all(-1)


def converged_bit_error(P: torch.Tensor, max_sweeps: int = 30, starts: int | None = None) -> torch.Tensor:
    """Fraction of wrong bits after running asynchronous dynamics to a fixed point from stored
    patterns (zero-diagonal Hebbian ``W``): the Amit–Gutfreund–Sompolinsky retrieval criterion.
    ``P`` ``(B, N, d)``; the first ``starts`` patterns of each trial (all by default; patterns are
    exchangeable) are the starts. Returns ``(B,)`` (mean over the starts of the trial)."""
    W = hebbian_weights(P, zero_diagonal=True)
    S0 = P[..., : (starts or P.shape[-2]), :]
    final, _ = run_async_greedy(S0, W, None, max_sweeps * P.shape[-1])
    return (final != S0).to(P.dtype).mean((-1, -2))


@dataclass(frozen=True)
class CapacityPoint:
    """One point of a capacity sweep: ``d``, ``N``, mean and standard error over trials of the
    fixed-pattern fraction, the all-fixed probability and (if measured) the wrong-bit fraction."""

    d: int
    N: int
    trials: int
    frac_fixed: float
    frac_fixed_se: float
    all_fixed: float
    all_fixed_se: float
    bit_error: float = math.nan
    bit_error_se: float = math.nan


def _mean_se(x: torch.Tensor) -> tuple[float, float]:
    x = x.double().cpu()
    n = x.numel()
    return float(x.mean()), (float(x.std(unbiased=True)) / math.sqrt(n) if n > 1 else math.nan)


def classical_capacity_sweep(d: int, Ns, trials: int, seed: int, *, bit_error: bool = False,
                             device="cpu", max_sweeps: int = 30, starts: int | None = None) -> list[CapacityPoint]:
    """Measure both capacity criteria of the classical net at dimension ``d`` for each ``N`` in
    ``Ns``, batched over ``trials`` (float32 ±1 arithmetic: exact, all sums are integers < 2²⁴).
    ``starts`` limits the bit-error runs to that many stored patterns per trial."""
    out = []
    for k, N in enumerate(Ns):
        N = int(N)
        P = random_patterns((trials, N, d), seed + 7919 * k, device=device, dtype=torch.float32)
        frac, allf = fixed_point_fraction(P)
        fm, fs = _mean_se(frac)
        am, as_ = _mean_se(allf.float())
        be, bs = (math.nan, math.nan)
        if bit_error:
            be, bs = _mean_se(converged_bit_error(P, max_sweeps, starts))
        out.append(CapacityPoint(d, N, trials, fm, fs, am, as_, be, bs))
    return out


# --------------------------------------------------------------------------------------------
# dense associative memory (Krotov–Hopfield 2016; exp: Demircigil et al. 2017)


def _F(kind, a: int | None):
    if kind == "poly":
        return lambda z: z ** a
    if kind == "exp":
        return torch.exp
    raise InputError(f"unknown interaction {kind!r} (poly, exp)")


def dense_energy(xi: torch.Tensor, P: torch.Tensor, kind: str = "poly", a: int = 3) -> torch.Tensor:
    """``E(ξ) = −Σ_μ F(x_μᵀξ)``; ``xi`` ``(..., S, d)``, ``P`` ``(..., N, d)`` → ``(..., S)``."""
    return -_F(kind, a)(xi @ P.transpose(-1, -2)).sum(-1)


def dense_update(xi: torch.Tensor, P: torch.Tensor, kind: str = "poly", a: int = 3) -> torch.Tensor:
    """Synchronous dense update of every unit ``l``: ``ξ_l ← sgn[−E(ξ^{(l+)}) + E(ξ^{(l−)})]``.

    With ``m_μ = x_μᵀξ`` and ``c_{μl} = m_μ − x_{μl}ξ_l``, the difference is
    ``Σ_μ F(c_{μl} + x_{μl}) − F(c_{μl} − x_{μl})``. For ``exp`` the common factor ``e^{max c}`` is
    divided out per unit (stable for large ``d``). Shapes as :func:`dense_energy`, output like ``xi``.
    """
    m = xi @ P.transpose(-1, -2)                       # (..., S, N)
    c = m[..., :, :, None] - P[..., None, :, :] * xi[..., :, None, :]   # (..., S, N, d)
    x = P[..., None, :, :].expand_as(c)
    if kind == "exp":
        shift = c.amax(-2, keepdim=True)
        diff = (torch.exp(c + x - shift) - torch.exp(c - x - shift)).sum(-2)
    elif kind == "poly":  # the same operations as F(c + x) - F(c - x), in place: (S, N, d) tensors made twice, not 6 times
        up = torch.add(c, x).pow_(a)
        diff = up.sub_(c.sub_(x).pow_(a)).sum(-2)
    else:
        F = _F(kind, a)
        diff = (F(c + x) - F(c - x)).sum(-2)
    return sgn(diff)


def dense_fixed_fraction(P: torch.Tensor, kind: str = "poly", a: int = 3, chunk: int = 256) -> torch.Tensor:
    """Per trial, the fraction of stored patterns that are fixed points of :func:`dense_update`.
    ``P`` ``(B, N, d)`` → ``(B,)``; states processed in chunks of ``chunk`` to bound memory."""
    N = P.shape[-2]
    oks = []
    for s in range(0, N, chunk):
        xi = P[..., s:s + chunk, :]
        oks.append((dense_update(xi, P, kind, a) == xi).all(-1))
    return torch.cat(oks, -1).to(P.dtype).mean(-1)


# --------------------------------------------------------------------------------------------
# modern continuous Hopfield network (Ramsauer et al. 2021)


def lse(beta: float, z: torch.Tensor) -> torch.Tensor:
    """``lse(β, z) = β⁻¹ log Σ_l exp(β z_l)`` over the last axis (stable: torch.logsumexp)."""
    return torch.logsumexp(beta * z, dim=-1) / beta


def modern_energy(xi: torch.Tensor, P: torch.Tensor, beta: float) -> torch.Tensor:
    """``E(ξ) = −lse(β, Xᵀξ) + ½ξᵀξ + β⁻¹ ln N + ½M²`` with ``M = max_i ‖x_i‖``.
    ``xi`` ``(..., S, d)``, ``P`` ``(..., N, d)`` → ``(..., S)``."""
    N = P.shape[-2]
    M = P.norm(dim=-1).amax(-1)[..., None]
    z = xi @ P.transpose(-1, -2)
    return -lse(beta, z) + 0.5 * (xi * xi).sum(-1) + math.log(N) / beta + 0.5 * M ** 2


def modern_grad(xi: torch.Tensor, P: torch.Tensor, beta: float) -> torch.Tensor:
    """``∇E(ξ) = ξ − X S(βXᵀξ)`` (rows: ``ξ − S(β ξ Pᵀ) P``)."""
    return xi - modern_update(xi, P, beta)


def modern_update(xi: torch.Tensor, P: torch.Tensor, beta: float) -> torch.Tensor:
    """``ξ^new = X S(βXᵀξ)``; in rows ``S(β ξ Pᵀ) P``, softmax over the ``N`` stored patterns."""
    return torch.softmax(beta * (xi @ P.transpose(-1, -2)), dim=-1) @ P


def _update_logsumexp(xi, P, beta):
    a = beta * (xi @ P.transpose(-1, -2))
    return torch.exp(a - torch.logsumexp(a, dim=-1, keepdim=True)) @ P


def _update_beta_on_patterns(xi, P, beta):
    return torch.softmax(xi @ (beta * P).transpose(-1, -2), dim=-1) @ P


def _update_beta_on_states(xi, P, beta):  # ``beta * xi @ X.T`` parses as ``(beta * xi) @ X.T``
    return torch.softmax((beta * xi) @ P.transpose(-1, -2), dim=-1) @ P


def _update_columns(xi, P, beta):  # the paper's layout: patterns as the columns of X, states as columns
    X, s = P.transpose(-1, -2), xi.transpose(-1, -2)
    return (X @ torch.softmax(beta * (X.transpose(-1, -2) @ s), dim=-2)).transpose(-1, -2)


#: Standard ways of writing the same update ``X softmax(βXᵀξ)`` (equal in exact arithmetic; their
#: rounding differs in a low precision): the plain softmax (:func:`modern_update`), ``exp(a − logsumexp a)``,
#: β applied to the patterns or to the states before the product, and the paper's column layout. The precision rule of
#: ``tverify check hopfield`` measures the rounding of all of them in the module's working precision, so
#: that a float32 update written in any of these ways is held to float32 rounding of the update itself,
#: not to the luck of one summation order.
MODERN_UPDATE_FORMULATIONS = {"softmax": modern_update, "logsumexp": _update_logsumexp,
                              "beta_on_patterns": _update_beta_on_patterns, "beta_on_states": _update_beta_on_states,
                              "columns": _update_columns}


def retrieval_bound(P: torch.Tensor, xi: torch.Tensor, i: int, beta: float, fixed_iters: int = 10_000,
                    tol: float = 1e-14) -> torch.Tensor:
    """Theorem 5 bound ``2(N−1) exp(−β(Δ_i − 2 max{‖ξ−x_i‖, ‖x_i*−x_i‖} M)) M`` for target ``i``.

    ``P`` ``(B, N, d)``, ``xi`` ``(B, d)``; ``x_i*`` is found by iterating the update from ``x_i``
    until every step is at most ``tol·max(1, M)`` (at most ``fixed_iters`` steps). A batch entry
    whose iteration has not converged gets a NaN bound (its fixed point is not known), so a check
    fails with the reason rather than using an unconverged iterate. Returns ``(B,)``."""
    N = P.shape[-2]
    xs = P[:, i, :]
    x_star = xs[:, None, :]
    thr = tol * P.norm(dim=-1).amax(-1).clamp_min(1.0)
    converged = torch.zeros(P.shape[0], dtype=torch.bool, device=P.device)
    for _ in range(fixed_iters):
        nxt = modern_update(x_star, P, beta)
        converged = (nxt - x_star).norm(dim=-1)[:, 0] <= thr
        x_star = nxt
        if bool(converged.all()):
            break
    x_star = torch.where(converged[:, None], x_star[:, 0], torch.full_like(x_star[:, 0], float("nan")))
    dots = torch.einsum("bd,bnd->bn", xs, P)
    others = torch.cat([dots[:, :i], dots[:, i + 1:]], -1)
    Delta = dots[:, i] - others.amax(-1)
    M = P.norm(dim=-1).amax(-1)
    eps = torch.maximum((xi - xs).norm(dim=-1), (x_star - xs).norm(dim=-1))
    return 2 * (N - 1) * torch.exp(-beta * (Delta - 2 * eps * M)) * M


def retrieval_error_and_bound(P: torch.Tensor, xi: torch.Tensor, i: int, beta: float):
    """``(‖f(ξ) − x_i‖, Δ_i, bound)`` for one update ``f(ξ) = X S(βXᵀξ)``, each ``(B,)``."""
    f = modern_update(xi[:, None, :], P, beta)[:, 0]
    err = (f - P[:, i, :]).norm(dim=-1)
    dots = torch.einsum("bd,bnd->bn", P[:, i, :], P)
    Delta = dots[:, i] - torch.cat([dots[:, :i], dots[:, i + 1:]], -1).amax(-1)
    return err, Delta, retrieval_bound(P, xi, i, beta)


# --------------------------------------------------------------------------------------------
# attention as a Hopfield update


def hopfield_attention(R: torch.Tensor, Y: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor,
                       W_V: torch.Tensor) -> torch.Tensor:
    """One Hopfield update of the state patterns ``Ξ = Qᵀ = (RW_Q)ᵀ`` over the stored patterns
    ``X = Kᵀ = (YW_K)ᵀ`` at ``β = 1/√d_k``, transposed and multiplied by ``W_V``.

    ``R`` ``(..., S, d_m)`` queries' inputs, ``Y`` ``(..., T, d_m)`` keys' inputs, ``W_Q, W_K``
    ``(d_m, d_k)``, ``W_V`` ``(d_k, d_v)``; returns ``(..., S, d_v)``. Column form inside:
    ``Ξ^new = X S(βXᵀΞ)`` with the softmax over the stored index (axis −2 of ``XᵀΞ``).
    """
    K = Y @ W_K
    Q = R @ W_Q
    X, Xi = K.transpose(-1, -2), Q.transpose(-1, -2)
    beta = 1.0 / math.sqrt(W_K.shape[-1])
    new = X @ torch.softmax(beta * (X.transpose(-1, -2) @ Xi), dim=-2)
    return new.transpose(-1, -2) @ W_V


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy()
