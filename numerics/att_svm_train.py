"""The Att-SVM model in torch (:mod:`numerics.att_svm`): the loss and its gradients (plain and scaled), the
trainers (gradient descent, normalised GD, Adam; W or (K, Q)), the selected token sets, the regularization path."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from numerics.att_svm_data import AttSVMInstance, _tokens_with_scores, _unit, token_scores
from numerics.torch_utils import cpu_threads, resolve_device
from theory.validation import InputError


# --------------------------------------------------------------------------------------------
# torch: loss, gradient, trainers


def correlation(A, B) -> np.ndarray | torch.Tensor:
    """``⟨A, B⟩ / (‖A‖_F ‖B‖_F)`` over the last two axes (batched; NumPy or torch)."""
    if isinstance(A, torch.Tensor) or isinstance(B, torch.Tensor):
        A = torch.as_tensor(A)
        B = torch.as_tensor(B, dtype=A.dtype, device=A.device)
        return (A * B).sum((-1, -2)) / (torch.linalg.norm(A, dim=(-2, -1)) * torch.linalg.norm(B, dim=(-2, -1)))
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return (A * B).sum((-1, -2)) / (np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(B, axis=(-2, -1)))


def _as_batch(inst: AttSVMInstance | Sequence[AttSVMInstance], B: int | None, device: torch.device):
    """Stack instances (one per seed) or repeat one instance ``B`` times: tensors with a leading
    batch axis: X (B,n,T,d), z (B,n,d), y (B,n), v (B,d)."""
    insts = [inst] if isinstance(inst, AttSVMInstance) else list(inst)
    if len(insts) == 1 and B is not None:
        insts = insts * B

    def st(name):
        return torch.as_tensor(np.stack([getattr(i, name) for i in insts]), dtype=torch.float64, device=device)

    return st("X"), st("z"), st("y"), st("v")


def softmax_mass(W: torch.Tensor, X: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Attention ``S(X W z)`` (B,n,T): logits ``l_t = x_tᵀ W z``, softmax over tokens."""
    Wz = torch.einsum("bde,bne->bnd", W, z)
    return torch.softmax((X * Wz[:, :, None, :]).sum(-1), dim=-1)


def _head(s: torch.Tensor, X, v, lam: float):
    """Head output ``f = vᵀa − λ‖a‖²`` (``a = Xᵀs``) and the token scores ``g_t = x_tᵀ ∂f/∂a``,
    shapes ``(B, n)`` and ``(B, n, T)``, shared by :func:`loss_and_grad` and
    :func:`loss_and_scaled_grad`."""
    if lam:
        a = torch.einsum("bnt,bntd->bnd", s, X)
        return (torch.einsum("bnd,bd->bn", a, v) - lam * (a * a).sum(-1),
                torch.einsum("bntd,bnd->bnt", X, v[:, None, :] - 2 * lam * a))
    g = torch.einsum("bntd,bd->bnt", X, v)
    return (s * g).sum(-1), g


def loss_and_grad(W: torch.Tensor, X, z, y, v, lam: float = 0.0):
    """Loss ``(1/n) Σ softplus(−y_i f_i)`` and its gradient in W, batched over the leading axis.

    Head: ``f = vᵀa − λ‖a‖²`` with ``a = Xᵀ S(XWz)`` (λ = 0: the linear head of the claims).
    Gradient: ``∂L/∂W = Σ_i c_i Σ_t h_{it} x_{it} z_iᵀ`` with ``c_i = −y_i σ(−y_i f_i)/n`` and
    ``h_{it} = s_t Σ_τ s_τ (g_t − g_τ)``, ``g_t = x_tᵀ ∂f/∂a``; written as a difference of scores so
    that it stays accurate when the softmax saturates. Returns ``(loss (B,), grad (B,d,d), s)``.
    """
    s = softmax_mass(W, X, z)
    f, g = _head(s, X, v, lam)
    n = X.shape[1]
    u = -y * f
    loss = torch.nn.functional.softplus(u).mean(-1)
    c = -y * torch.sigmoid(u) / n
    diff = g[..., :, None] - g[..., None, :]  # (B,n,T,T): g_t − g_τ
    h = s * torch.einsum("bnu,bntu->bnt", s, diff)
    xh = (X * (c[..., None] * h)[..., None]).sum(2)  # (B,n,d): Σ_t c_i h_it x_it
    grad = xh.transpose(1, 2) @ z
    return loss, grad, s


def loss_and_scaled_grad(W: torch.Tensor, X, z, y, v, lam: float = 0.0):
    """The gradient of :func:`loss_and_grad` factored as ``∇L = e^{c} G̃`` with ``‖G̃‖ = O(1)``
    however saturated the softmax, for an exact normalised direction ``G̃/‖G̃‖ = ∇L/‖∇L‖``.

    Per batch member, ``c = max_{i, t ≠ o_i} log S_{it}`` is the log of the largest softmax tail
    term (``o_i`` the argmax token of sequence i), computed by ``log_softmax`` (no underflow). With
    ``w_t = e^{log S_t − c} ≤ 1`` on the tail tokens (``w_o = 0``), the terms ``h_t = S_t Σ_τ S_τ(g_t − g_τ)``
    of the gradient divided by ``e^c`` are ``w_t Σ_τ S_τ (g_t − g_τ)`` (tail) and
    ``S_o Σ_τ w_τ (g_o − g_τ)`` (argmax): O(1), with no e^{−c} ever formed. The unscaled gradient
    drops below float64's eps once the tails are ~1e-16 (and underflows at ~1e-308), where
    ``∇L/(‖∇L‖ + eps)`` freezes the run; ``G̃`` does not. Tail terms more than ~745 nats below
    the largest one underflow to 0 in ``w``: they are below float64 resolution relative to it.

    Returns ``(loss (B,), G̃ (B,d,d), c (B,), s (B,n,T))``.
    """
    Wz = torch.einsum("bde,bne->bnd", W, z)
    logs = torch.log_softmax((X * Wz[:, :, None, :]).sum(-1), dim=-1)
    s = logs.exp()
    f, g = _head(s, X, v, lam)
    n, T = X.shape[1], X.shape[2]
    u = -y * f
    loss = torch.nn.functional.softplus(u).mean(-1)
    cy = -y * torch.sigmoid(u) / n
    top = torch.nn.functional.one_hot(logs.argmax(-1), T).bool()
    tail = logs.masked_fill(top, -math.inf)
    c = tail.amax((-1, -2))  # (B,)
    w = torch.exp(tail - c[:, None, None])  # 0 at the argmax, ≤ 1 on the tails
    diff = g[..., :, None] - g[..., None, :]  # (B,n,T,T): g_t − g_τ
    h = torch.where(top, s * torch.einsum("bnu,bntu->bnt", w, diff), w * torch.einsum("bnu,bntu->bnt", s, diff))
    xh = (X * (cy[..., None] * h)[..., None]).sum(2)
    return loss, xh.transpose(1, 2) @ z, c, s


def infimum_loss(y, X, v) -> torch.Tensor:
    """``inf_W L(W) = (1/n) Σ softplus(−γ_{i,opt})`` (all attention on the optimal token), (B,)."""
    gam = y[..., None] * torch.einsum("bntd,bd->bnt", X, v)
    return torch.nn.functional.softplus(-gam.max(-1).values).mean(-1)


def _excess_loss(s, y, X, v) -> torch.Tensor:
    """``L(W) − inf L`` computed without cancellation: with ``δ_i = Σ_t s_t (γ_opt − γ_t) ≥ 0``,
    ``softplus(−γ_opt + δ) − softplus(−γ_opt) = log1p(σ(−γ_opt) expm1(δ))``."""
    gam = y[..., None] * torch.einsum("bntd,bd->bnt", X, v)
    gmax = gam.max(-1).values
    delta = (s * (gmax[..., None] - gam)).sum(-1)
    return torch.log1p(torch.sigmoid(-gmax) * torch.expm1(delta)).mean(-1)


def _scaled_excess_loss(W, X, z, y, v, c) -> torch.Tensor:
    """``(L(W) − inf L)·e^{−c}`` (B,) for the linear head, in log space, with ``c`` the scale of
    :func:`loss_and_scaled_grad` (so that the Polyak step ``(L − L*)/‖∇L‖² ∇L`` equals
    ``(L − L*)e^{−c}/‖G̃‖² G̃`` and is exact however saturated the softmax; the plain form freezes
    once ``‖∇L‖² < 1e-300``, i.e. ``‖∇L‖ < 1e-150``). With ``δ_i = Σ_t S_t (γ_opt − γ_t)``, kept as
    ``log δ_i = logsumexp_t(log S_t + log(γ_opt − γ_t))``, the term of sequence i is
    ``φ(δ_i)·δ_i`` with ``φ(δ) = log1p(σ(−γ_opt) expm1(δ))/δ`` (→ σ(−γ_opt) as δ → 0). The factor
    ``δ_i e^{−c}`` is capped at e^700 (a run whose attention sits on a non-optimal token while
    another sequence is saturated past 700 nats; the exact step would overflow float64)."""
    Wz = torch.einsum("bde,bne->bnd", W, z)
    logs = torch.log_softmax((X * Wz[:, :, None, :]).sum(-1), dim=-1)
    gam = y[..., None] * torch.einsum("bntd,bd->bnt", X, v)
    gmax = gam.max(-1, keepdim=True).values
    gap = gmax - gam
    logd = torch.logsumexp(torch.where(gap > 0, logs + torch.log(torch.where(gap > 0, gap, 1.0)), -math.inf), dim=-1)
    sig = torch.sigmoid(-gmax[..., 0])
    d = torch.exp(logd)
    big = d > 1e-8
    phi = torch.where(big, torch.log1p(sig * torch.expm1(d)) / torch.where(big, d, 1.0), sig * (1 + 0.5 * d * (1 - sig)))
    return (phi * torch.exp(torch.clamp(logd - c[:, None], max=700.0))).mean(-1)


@dataclass
class TrainResult:
    """Curves of one batched run (rows: iterations 1..iters, columns: batch members).

    W (B,d,d) final; corr {target name: (iters,B)}; norm (iters,B) ‖W_k‖_F; loss (iters,B);
    opt_mass (iters,B) mean softmax mass on ``opt``; max_mass (iters,B) mean max softmax mass (as
    the reference code records); selected (B,n) argmax token at the end; s (B,n,T) final softmax;
    settled (B,) the first iteration from which the argmax token of every sequence stays the final
    ``selected`` (1 when it never changed): a run that left one token set for another converges
    toward the new set's Att-SVM only from there on. log10_grad_norm (iters,B): log10 ‖∇_W L(W_k)‖_F
    of the true (unscaled) gradient, finite below float64's smallest number when it came from the
    scaled gradient (stable "ngd"; else −inf once ∇L underflows).
    """

    W: np.ndarray
    corr: dict[str, np.ndarray]
    norm: np.ndarray
    loss: np.ndarray
    opt_mass: np.ndarray
    max_mass: np.ndarray
    selected: np.ndarray
    s: np.ndarray
    method: str
    param: str
    iters: int
    settled: np.ndarray | None = None
    log10_grad_norm: np.ndarray | None = None

    def iterations_to(self, level: float, target: str) -> np.ndarray:
        """First iteration (1-based) from which the correlation stays ≥ ``level``; ``iters + 1``
        where never reached (a lower bound), per batch member."""
        c = self.corr[target] >= level
        stay = np.flip(np.cumprod(np.flip(c, 0), 0), 0).astype(bool)  # ≥ level from k onwards
        first = np.where(stay.any(0), stay.argmax(0) + 1, self.iters + 1)
        return first


def _init(B, d, m, init, gen, device, param):
    if isinstance(init, (np.ndarray, torch.Tensor)):
        W0 = torch.as_tensor(init, dtype=torch.float64, device=device)
        if param == "W":
            return (W0.expand(B, d, d).clone(),)
        raise InputError("an explicit init is supported for param='W' only")
    if init == "linear_default":  # torch.nn.Linear's kaiming_uniform(a=√5): U(−1/√d, 1/√d)
        lo = 1.0 / math.sqrt(d)
        draw = lambda *shape: (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1).to(device) * lo
    else:
        scale = float(init)
        draw = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64).to(device) * scale
    if param == "W":
        return (draw(B, d, d),)
    return draw(B, d, m), draw(B, d, m)


def train(data: AttSVMInstance | Sequence[AttSVMInstance], *, method: str = "ngd", lr: float = 0.1,
          iters: int = 1000, param: str = "W", B: int | None = None, init: Any = 0.01, seed: int = 0,
          targets: dict[str, np.ndarray] | None = None, opt: np.ndarray | None = None, lam: float = 0.0,
          device: str = "cpu", eps: float = float(np.finfo(np.float64).eps), stable: bool = True) -> TrainResult:
    """Train ``W`` (``param="W"``) or ``(K, Q)`` with ``W = K Qᵀ`` (``param="KQ"``), all batch
    members at once (one instance per seed, or one instance repeated ``B`` times with different
    initialisations).

    method  "gd": ``W ← W − lr ∇L``;  "ngd": ``W ← W − lr ∇L/‖∇L‖_F`` (each of K, Q normalised
            separately, as the reference code does);  "polyak": ``lr·(L − L*)/‖∇L‖²`` with
            ``L* = inf L`` (computed without cancellation).
    stable  "ngd" and "polyak". True: the step is computed from the scaled gradient
            ``G̃ = e^{−c}∇L`` of :func:`loss_and_scaled_grad`: NGD as ``G̃/(‖G̃‖ + eps)`` (‖G̃‖ =
            O(1), so eps only guards an exactly zero gradient), Polyak as
            ``(L − L*)e^{−c}/‖G̃‖² G̃`` (:func:`_scaled_excess_loss`): exact however saturated the
            softmax. False: ``∇L/(‖∇L‖ + eps)`` as the reference code, which freezes once ``‖∇L‖``
            falls below eps (tails ~1e-16; (K,Q) on n=2, T=3, d=4 at lr 0.1: iteration ~100,
            ‖W‖ ≈ 65–190), and ``(L − L*)/(‖∇L‖² + 1e-300) ∇L``, which freezes once ‖∇L‖ < 1e-150.
    targets name → (d,d) or (B,d,d) directions whose correlation is recorded every iteration.
    init    a float (Gaussian scale), "linear_default" (torch.nn.Linear's init), or a (d,d) array.
    """
    if method not in ("gd", "ngd", "polyak"):
        raise InputError(f"method must be gd, ngd or polyak, got {method!r}")
    if param not in ("W", "KQ"):
        raise InputError(f"param must be 'W' or 'KQ', got {param!r}")
    dev = resolve_device(device)
    X, z, y, v = _as_batch(data, B, dev)
    Bn, n, T, d = X.shape
    opt_t = None
    if opt is not None:
        opt_t = torch.as_tensor(np.broadcast_to(opt, (Bn, n)).copy(), device=dev)
    gen = torch.Generator().manual_seed(int(seed))
    params = _init(Bn, d, d, init, gen, dev, param)
    tg = {k: torch.as_tensor(np.broadcast_to(t, (Bn, d, d)).copy(), dtype=torch.float64, device=dev)
          for k, t in (targets or {}).items()}

    def W_of(p):
        return p[0] if param == "W" else p[0] @ p[1].transpose(-1, -2)

    with cpu_threads(device=dev):
        return _train_loop(params, W_of, X, z, y, v, lam, iters, method, lr, eps, param, tg, opt_t, stable)


def _train_loop(params, W_of, X, z, y, v, lam, iters, method, lr, eps, param, tg, opt_t, stable) -> TrainResult:
    Bn, dev = X.shape[0], X.device
    corr = {k: torch.empty(iters, Bn, dtype=torch.float64, device=dev) for k in tg}
    norms, losses, omass, mmass, lgn = (torch.empty(iters, Bn, dtype=torch.float64, device=dev) for _ in range(5))
    settled = torch.ones(Bn, dtype=torch.long, device=dev)
    prev = None
    scaled = method in ("ngd", "polyak") and stable
    for k in range(iters + 1):
        W = W_of(params)
        if scaled:  # ∇L = e^c G: the normalised step uses G, exact however saturated the softmax
            loss, G, c, s = loss_and_scaled_grad(W, X, z, y, v, lam)
        else:
            loss, G, s = loss_and_grad(W, X, z, y, v, lam)
            c = torch.zeros(Bn, dtype=torch.float64, device=dev)
        am = s.argmax(-1)
        if prev is not None:  # W_k's selection differs from W_{k−1}'s: settled no earlier than k
            settled = torch.where((am != prev).any(-1), torch.full_like(settled, max(k, 1)), settled)
        prev = am
        if k > 0:  # metrics of the iterate W_k (k = 1..iters), from this evaluation
            norms[k - 1] = torch.linalg.norm(W, dim=(-2, -1))
            lgn[k - 1] = (c + torch.log(torch.linalg.norm(G, dim=(-2, -1)))) / math.log(10.0)
            losses[k - 1] = loss
            mmass[k - 1] = s.max(-1).values.mean(-1)
            if opt_t is not None:
                omass[k - 1] = torch.gather(s, -1, opt_t[..., None])[..., 0].mean(-1)
            for name, t in tg.items():
                corr[name][k - 1] = correlation(W, t)
        if k == iters:
            break
        if param == "W":
            grads = (G,)
        else:
            K, Q = params
            grads = (G @ Q, G.transpose(-1, -2) @ K)
        if method == "gd":
            steps = tuple(lr * g for g in grads)
        elif method == "ngd":
            steps = tuple(lr * g / (torch.linalg.norm(g, dim=(-2, -1))[:, None, None] + eps) for g in grads)
        else:
            exc = _scaled_excess_loss(W, X, z, y, v, c) if scaled else _excess_loss(s, y, X, v)
            gn2 = sum((g * g).sum((-1, -2)) for g in grads)
            eta = lr * exc / (gn2 + 1e-300)
            steps = tuple(eta[:, None, None] * g for g in grads)
        params = tuple(p - st for p, st in zip(params, steps))
    W = W_of(params)
    s = softmax_mass(W, X, z)
    np_ = lambda t: t.detach().cpu().numpy()
    return TrainResult(np_(W), {k: np_(c) for k, c in corr.items()}, np_(norms), np_(losses),
                       np_(omass) if opt_t is not None else np.full((iters, Bn), np.nan), np_(mmass),
                       np_(s.argmax(-1)), np_(s), method, param, iters, np_(settled), np_(lgn))


def selected_sets(s: np.ndarray, threshold: float = 1e-3) -> np.ndarray:
    """Tokens carrying softmax mass ≥ ``threshold`` (the reference code's THRED): (…, n, T) bool."""
    return np.asarray(s) >= threshold


def selected_sets_by_gap(logits: np.ndarray, frac: float = 0.25) -> np.ndarray:
    """Selected sets read off the logit structure (…, n, T) -> (…, n, T) bool: per sequence, sort
    the gaps ``max_τ l_τ − l_t`` and cut at the FIRST jump ≥ ``frac`` × the largest gap. Along a
    run that selects a set O, the gaps inside O stay bounded (→ log(s*_t/s*_τ)) while those outside
    grow like C_k, so such a jump separates them once C_k·margin exceeds the inside spread 1/frac
    times over. A fixed mass threshold (``selected_sets``, 1e-3) needs every outside gap past
    log(1e3) ≈ 6.9, which slow runs reach only late (an outside token at gap 6.2 still carries mass
    > 1e-3 and would be counted in the set)."""
    l = np.asarray(logits, dtype=np.float64)
    gaps = l.max(-1, keepdims=True) - l
    srt = np.sort(gaps, -1)
    jumps = np.diff(srt, axis=-1)
    big = jumps >= frac * srt[..., -1:]
    cut = np.argmax(big, -1)  # first big jump (the largest gap itself guarantees one exists)
    thr = np.take_along_axis(srt, cut[..., None], -1)
    return gaps <= thr


@dataclass
class RegPathResult:
    """The regularisation path: ``radii`` (R,), ``W`` (R,B,d,d) the constrained minimisers (the
    lowest-loss candidate per radius), ``corr`` {target: (R,B)} correlation of ``W̄_R`` with each
    target, ``loss`` (R,B), ``selected`` (R,B,n) the argmax-attention token of each sequence at
    ``W̄_R``, ``winner`` (R,B) which candidate gave ``W̄_R`` (0: the warm start from the previous
    radius; then the n(T−1) switch moves in (i, t) order when ``switches``; then the random
    restarts), ``candidate_loss`` (R,B,M) every candidate's final (best visited) loss."""

    radii: np.ndarray
    W: np.ndarray
    corr: dict[str, np.ndarray]
    loss: np.ndarray
    param: str
    selected: np.ndarray | None = None
    winner: np.ndarray | None = None
    candidate_loss: np.ndarray | None = None


def _switch_moves(W: torch.Tensor, X: torch.Tensor, z: torch.Tensor, rho: float) -> torch.Tensor:
    """Every single-token switch of ``W``'s selection: for each sequence i and token t ≠ s_i
    (s_i = argmax attention), t's logit in sequence i is raised to ``max_τ l_τ + (max_τ l_τ −
    min_τ l_τ)`` (t then leads by the sequence's whole logit spread) and every other logit of every
    sequence is kept; the result is scaled into the ball of radius ρ (scaling keeps every logit
    order). The move is ``W + u wᵢᵀ`` with ``wᵢ`` the dual basis of the queries (``z_jᵀwᵢ = δ_ij``,
    from the pseudo-inverse of ``z``) and ``Xᵢu = Δ e_t`` (least norm): exact when n ≤ d and T ≤ d
    with full-rank ``z``, ``Xᵢ``; a least-squares approximation otherwise.
    Returns (B, n·(T−1), d, d), candidates ordered by (i, t ≠ s_i)."""
    Bn, n, T, d = X.shape
    l = torch.einsum("bntd,bde,bne->bnt", X, W, z)
    sel = l.argmax(-1)  # (B,n)
    Xp = torch.linalg.pinv(X)  # (B,n,d,T)
    wd = torch.linalg.pinv(z)  # (B,d,n): z @ wd = I_n when z has full row rank
    lmax, lmin = l.max(-1, keepdim=True).values, l.min(-1, keepdim=True).values
    U = (2 * lmax - lmin - l)[:, :, None, :] * Xp  # (B,n,d,T): u for the move (i, t)
    C = W[:, None, None] + torch.einsum("bndt,ben->bntde", U, wd)  # (B,n,T,d,d)
    keep = torch.ones(Bn, n, T, dtype=torch.bool, device=X.device)
    keep.scatter_(2, sel[..., None], False)
    C = C[keep].reshape(Bn, n * (T - 1), d, d)
    return C * torch.clamp(rho / torch.linalg.norm(C, dim=(-2, -1), keepdim=True), max=1.0)


def _projected_descent(params: tuple, W_of: Callable, batch: tuple, rho: float, lr: float, inner: int,
                       param: str) -> tuple[tuple, torch.Tensor]:
    """:func:`regularization_path`'s inner run at one radius: ``inner`` projected normalised gradient steps of size
    ``lr·ρ/√j`` on the ball of radius ``ρ``; each candidate's lowest-loss iterate (its start included) and that loss
    (the excess loss ``L − inf L``, computed without cancellation so that it compares at large radii)."""
    Xm, zm, ym, vm = batch
    best_p = params
    best_l = torch.full((params[0].shape[0],), math.inf, dtype=torch.float64, device=params[0].device)
    for j in range(1, inner + 2):
        _, G, sm = loss_and_grad(W_of(params), Xm, zm, ym, vm)
        loss = _excess_loss(sm, ym, Xm, vm)
        better = loss < best_l
        best_l = torch.where(better, loss, best_l)
        best_p = tuple(torch.where(better[:, None, None], p, q) for p, q in zip(params, best_p))
        if j == inner + 1:
            break
        grads = (G,) if param == "W" else (G @ params[1], G.transpose(-1, -2) @ params[0])
        gn = torch.sqrt(sum((g * g).sum((-1, -2)) for g in grads))[:, None, None]
        params = tuple(p - lr * rho / math.sqrt(j) * g / (gn + 1e-300) for p, g in zip(params, grads))
        pn = torch.sqrt(sum((p * p).sum((-1, -2)) for p in params))[:, None, None]
        params = tuple(p * torch.clamp(rho / pn, max=1.0) for p in params)
    return best_p, best_l


def _path_options(param: str, restarts: int, switches: bool) -> None:
    """:func:`regularization_path`'s options checked: one line each."""
    if param not in ("W", "KQ"):
        raise InputError(f"param must be 'W' or 'KQ', got {param!r}")
    if restarts < 0:
        raise InputError(f"restarts must be ≥ 0, got {restarts}")
    if switches and param != "W":
        raise InputError("switch moves are implemented for param='W' only")


def regularization_path(data: AttSVMInstance | Sequence[AttSVMInstance], radii: Sequence[float], *,
                        param: str = "W", inner: int = 300, lr: float = 0.5, B: int | None = None,
                        targets: dict[str, np.ndarray] | None = None, seed: int = 0, init: float = 1e-3,
                        restarts: int = 0, switches: bool = False, switch_rtol: float = 1e-6,
                        device: str = "cpu") -> RegPathResult:
    """``W̄_R = argmin_{‖W‖_F ≤ R} L(W)`` (``param="W"``) or the (K,Q) path with
    ``‖K‖_F² + ‖Q‖_F² ≤ 2R`` (``param="KQ"``, reported as ``W = KQᵀ``), by projected normalised
    gradient steps, warm-started along increasing ``radii``.

    Inner step j at radius R moves ``lr·ρ/√j`` along ``−∇/‖∇‖`` (ρ = R, or √(2R) for (K,Q)) and
    projects back onto the ball; the decaying step makes the iterates settle at a constrained
    stationary point (the boundary optimum once the loss keeps decreasing outwards). Each
    candidate returns the lowest-loss iterate it visited (its start included), so a large early
    step cannot carry a converged warm start into a worse basin.

    Global search. The problem is nonconvex: each choice of attended tokens has its own basin, and a
    warm-started path stays in the basin it entered at small R even after another basin's minimum
    drops below it (the global minimiser jumps). At every radius, for every batch member, the warm
    start competes (all candidates as one batch) with

    - ``switches=True`` (``param="W"`` only): every single-token switch of the warm start's
      selection (one token promoted to the lead in one sequence, the rest kept; :func:`_switch_moves`),
      n(T−1) candidates. As R → ∞ a basin's loss tends to
      ``(1/n) Σ ℓ(γ_{i,S_i})``, so moving one sequence to a higher-score token lowers the limit:
      single switches reach the global basin from any set in at most n steps (one per radius).
    - ``restarts`` fresh random starts on the sphere of radius ρ (Gaussian direction; for (K,Q)
      ``‖K‖_F = ‖Q‖_F = √R``).

    The lowest final loss is ``W̄_R`` (and warm-starts the next radius); when a candidate won, the
    radius is searched again from it (at most n more rounds), so that a switch made at the last
    radius is still polished by a full inner run and multi-sequence switches complete at one
    radius. ``winner``/``candidate_loss`` report the first round. A candidate replaces the
    warm start only if its loss is lower by more than ``switch_rtol`` (relative): distinct basins
    differ by far more at the radii that matter, and within one basin the warm start is the better
    converged point.
    """
    _path_options(param, restarts, switches)
    dev = resolve_device(device)
    X, z, y, v = _as_batch(data, B, dev)
    Bn, n, T, d = X.shape
    S = n * (T - 1) if switches else 0
    M = 1 + S + int(restarts)  # candidates per member: [warm, switches..., restarts...]
    Xm, zm, ym, vm = (a.repeat_interleave(M, dim=0) for a in (X, z, y, v))  # group b = rows b·M .. b·M+M−1
    gen = torch.Generator().manual_seed(int(seed))
    warm = _init(Bn, d, d, init, gen, dev, param)
    tg = {k: torch.as_tensor(np.broadcast_to(t, (Bn, d, d)).copy(), dtype=torch.float64, device=dev)
          for k, t in (targets or {}).items()}
    Ws, cs, ls, sels, wins, cls = [], {k: [] for k in tg}, [], [], [], []
    rows = torch.arange(Bn, device=dev)

    def W_of(p):
        return p[0] if param == "W" else p[0] @ p[1].transpose(-1, -2)

    def fresh(shape, scale):
        g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dev)
        return g / torch.linalg.norm(g, dim=(-2, -1), keepdim=True) * scale

    def group(*parts):  # (Bn, k_j, a, b) pieces -> (Bn·M, a, b)
        return torch.cat(parts, dim=1).reshape(Bn * M, *parts[0].shape[2:])

    with cpu_threads(device=dev):
        for R in radii:
            rho = float(R) if param == "W" else math.sqrt(2.0 * float(R))
            first_win = None
            for _round in range(n + 1 if M > 1 else 1):  # repeat the radius while a candidate beats the warm start
                if param == "W":
                    parts = [warm[0][:, None]]
                    if S:
                        parts.append(_switch_moves(warm[0], X, z, rho))
                    if restarts:
                        parts.append(fresh((Bn, restarts, d, d), rho))
                    params = (group(*parts),)
                else:
                    params = tuple(group(w[:, None], *([fresh((Bn, restarts, d, d), rho / math.sqrt(2.0))] if restarts else []))
                                   for w in warm)
                best_p, best_l = _projected_descent(params, W_of, (Xm, zm, ym, vm), rho, lr, inner, param)
                lg = best_l.reshape(Bn, M)
                best = torch.argmin(lg, dim=1)
                # a candidate replaces the warm start only when clearly lower: candidates within
                # switch_rtol (relative) sit in the same basin, and the warm start is the better converged
                best = torch.where(lg[rows, best] < lg[:, 0] * (1 - switch_rtol), best, torch.zeros_like(best))
                idx = rows * M + best
                warm = tuple(p[idx] for p in best_p)
                if first_win is None:
                    first_win, first_lg = best.clone(), lg.clone()
                if not bool((best != 0).any()):
                    break  # the warm start won: converged at this radius (the switch, if any, re-polished)
            W = W_of(warm)
            Ws.append(W.detach().cpu().numpy())
            ls.append(lg[rows, best].detach().cpu().numpy())
            sels.append(softmax_mass(W, X, z).argmax(-1).detach().cpu().numpy())
            wins.append(first_win.detach().cpu().numpy())
            cls.append(first_lg.detach().cpu().numpy())
            for k, t in tg.items():
                cs[k].append(correlation(W, t).detach().cpu().numpy())
    return RegPathResult(np.asarray(radii, dtype=float), np.array(Ws), {k: np.array(c) for k, c in cs.items()},
                         np.array(ls), param, np.array(sels), np.array(wins), np.array(cls))


def saturation_limit(l: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """``lim_{r→∞} S(r·l)`` along the token axis (last): uniform over the maximisers of ``l``
    (entries within ``rtol·max(1, |max l|)`` of the maximum), zero elsewhere. Shape ``(…, T)``."""
    l = np.asarray(l, dtype=np.float64)
    m = l.max(-1, keepdims=True)
    top = l >= m - rtol * np.maximum(1.0, np.abs(m))
    return top / top.sum(-1, keepdims=True)


def make_token_set_instance(n: int, T: int, d: int, *, seed: int = 0, score: float = 0.8,
                            low: float = 0.1) -> tuple[AttSVMInstance, np.ndarray]:
    """An instance for the nonlinear head ``f = vᵀa − λ‖a‖²`` (λ > 0, labels +1) in which two
    tokens per sequence are jointly optimal: both have score ``vᵀx = score`` and antipodal parts
    orthogonal to ``v``, so ``a = ½(x_1 + x_2)`` keeps ``vᵀa = score`` and minimises ``‖a‖²``; the
    other tokens score ``low``. Returns the instance and the (n,T) boolean optimal sets."""
    rng = np.random.default_rng(seed)
    v = _unit(rng.normal(size=d))
    y = np.ones(n)
    z = _unit(rng.normal(size=(n, d)))
    u = rng.normal(size=(n, T, d))
    a = np.full((n, T), low)
    pairs = np.array([rng.choice(T, size=2, replace=False) for _ in range(n)])
    sets = np.zeros((n, T), dtype=bool)
    for i, (p, q) in enumerate(pairs):
        a[i, [p, q]] = score
        u[i, q] = -u[i, p]
        sets[i, [p, q]] = True
    X = _tokens_with_scores(a, v, u)
    g = token_scores(X, y, v)
    return AttSVMInstance(X, z, y, v, pairs[:, 0], g, "token_sets"), sets
