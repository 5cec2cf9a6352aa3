"""Attention's formulas in NumPy, SciPy and torch (claims ``attn.*``): softmax and its Jacobian, single-head
attention in row form, convex-hull membership by linear programming, the lecture notes' four ways of writing one layer,
multi-head attention (concat and sum forms, torch's packed weights), LayerNorm, MLP and blocks. Part of
:mod:`numerics.attention` (conventions in its docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from numerics.torch_utils import resolve_device
from theory.validation import as_finite_array, require


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax (max-subtraction / log-sum-exp) along ``axis``.

    >>> softmax(np.array([0.0, 0.0]))
    array([0.5, 0.5])
    >>> bool(np.isfinite(softmax(np.array([700.0, -700.0]))).all())
    True
    """
    z = np.asarray(logits, dtype=np.float64)
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_jacobian(p: np.ndarray) -> np.ndarray:
    """Jacobian ``diag(p) − p pᵀ`` of the softmax at output ``p`` (shape ``(..., T)`` → ``(..., T, T)``)."""
    p = np.asarray(p, dtype=np.float64)
    return np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1])) - p[..., :, None] * p[..., None, :]


def _t(a, device="cpu") -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=resolve_device(device))


# --------------------------------------------------------------------------------------------
# single-head attention, row form


def _check_qkv(Q, K, V=None):
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    require(Q.ndim >= 2 and K.ndim >= 2, f"Q and K must be (..., N, d) arrays, got shapes {Q.shape} and {K.shape}")
    require(Q.shape[-1] == K.shape[-1], f"Q and K must share the key dimension, got {Q.shape[-1]} and {K.shape[-1]}")
    if V is None:
        return Q, K, None
    V = np.asarray(V, dtype=np.float64)
    require(V.ndim >= 2 and V.shape[-2] == K.shape[-2], f"V must have one row per key: K {K.shape}, V {V.shape}")
    return Q, K, V


def causal_mask(n_query: int, n_key: int | None = None) -> np.ndarray:
    """Boolean ``(n_query, n_key)`` mask, True where query t may attend to key s (``s ≤ t``).

    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    n_key = n_query if n_key is None else n_key
    return np.tril(np.ones((n_query, n_key), dtype=bool))


def attention_weights(Q, K, *, scale: float | None = None, causal: bool = False) -> np.ndarray:
    """Row-stochastic attention weights ``S(scale·Q Kᵀ + M)``, shape ``(..., N_q, N_k)``.

    ``scale`` defaults to ``1/√d_k`` (as ``scaled_dot_product_attention``); pass 1.0 for the
    seeds' unscaled forms. ``causal`` adds ``M_ts = −∞`` for ``s > t``. Stable (max-subtraction).
    """
    Q, K, _ = _check_qkv(Q, K)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else float(scale)
    L = scale * (Q @ np.swapaxes(K, -1, -2))
    if causal:
        L = np.where(causal_mask(L.shape[-2], L.shape[-1]), L, -np.inf)
    return softmax(L, axis=-1)


def attention(Q, K, V, *, scale: float | None = None, causal: bool = False) -> np.ndarray:
    """``S(scale·Q Kᵀ + M) V``: rows of the output are convex combinations of the rows of V.

    Shapes ``Q (..., N_q, d_k)``, ``K (..., N_k, d_k)``, ``V (..., N_k, d_v)`` → ``(..., N_q, d_v)``.

    >>> attention(np.zeros((1, 2)), np.zeros((2, 2)), np.array([[0.0], [1.0]]))
    array([[0.5]])
    """
    Q, K, V = _check_qkv(Q, K, V)
    return attention_weights(Q, K, scale=scale, causal=causal) @ V


def causal_attention(Q, K, V, *, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Masked self-attention: returns ``(Y, A)`` with ``A`` lower-triangular and row-stochastic."""
    A = attention_weights(Q, K, scale=scale, causal=True)
    return A @ np.asarray(V, dtype=np.float64), A


def sdpa(Q, K, V, *, scale: float | None = None, causal: bool = False, device="cpu") -> np.ndarray:
    """``torch.nn.functional.scaled_dot_product_attention`` on float64 NumPy inputs (the reference)."""
    out = torch.nn.functional.scaled_dot_product_attention(_t(Q, device), _t(K, device), _t(V, device),
                                                           is_causal=causal, scale=scale)
    return out.cpu().numpy()


# --------------------------------------------------------------------------------------------
# convex hull membership by linear programming


@dataclass(frozen=True)
class HullResult:
    """Distances of points to the convex hull of vertices, from one LP (HiGHS via SciPy).

    distance   (P,) L1 distance ``min ‖Σ_m λ_m v_m − y‖₁`` over ``λ ≥ 0, Σλ = 1`` (0: inside)
    weights    (P, M) the optimal λ (barycentric coordinates of the nearest hull point)
    residual   (P,) ``‖λ V − y‖_∞`` recomputed in float64 from the returned λ
    status     the solver's status message (always "optimal": anything else raises)
    """

    distance: np.ndarray
    weights: np.ndarray
    residual: np.ndarray
    status: str


def convex_hull_distance(points, vertices, *, feas_tol: float = 1e-10) -> HullResult:
    """L1 distance of each point to ``conv(vertices)``; batched, one sparse LP for everything.

    ``points (B, P, D)`` and ``vertices (B, M, D)`` (or without the batch axis). The LP per point:
    ``min 1ᵀ(s⁺ + s⁻)`` s.t. ``Vᵀλ + s⁺ − s⁻ = y``, ``1ᵀλ = 1``, ``λ, s± ≥ 0``. Raises
    ``RuntimeError`` naming the status when the solver does not report optimality.

    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> r = convex_hull_distance(np.array([[0.2, 0.2], [1.0, 1.0]]), V)
    >>> np.round(r.distance, 6).tolist()
    [0.0, 1.0]
    """
    Y = as_finite_array(points, "points")
    Vt = as_finite_array(vertices, "vertices")
    if Y.ndim == 2:
        Y, Vt = Y[None], Vt[None]
    require(Y.ndim == 3 and Vt.ndim == 3 and Y.shape[0] == Vt.shape[0] and Y.shape[2] == Vt.shape[2],
            f"points (B,P,D) and vertices (B,M,D) must match, got {Y.shape} and {Vt.shape}")
    B, P, D = Y.shape
    M = Vt.shape[1]
    nv = M + 2 * D  # variables per point: λ (M), s+ (D), s- (D)
    rows, cols, vals, rhs = [], [], [], []
    r0 = 0
    for b in range(B):
        for p in range(P):
            c0 = (b * P + p) * nv
            # D equality rows: Σ_m λ_m V[m, j] + s+_j − s−_j = y_j
            jj, mm = np.meshgrid(np.arange(D), np.arange(M), indexing="ij")
            rows.append((r0 + jj).ravel()); cols.append((c0 + mm).ravel()); vals.append(Vt[b].T.ravel())
            rows.append(r0 + np.arange(D)); cols.append(c0 + M + np.arange(D)); vals.append(np.ones(D))
            rows.append(r0 + np.arange(D)); cols.append(c0 + M + D + np.arange(D)); vals.append(-np.ones(D))
            rhs.append(Y[b, p])
            # Σ λ = 1
            rows.append(np.full(M, r0 + D)); cols.append(c0 + np.arange(M)); vals.append(np.ones(M))
            rhs.append([1.0])
            r0 += D + 1
    from scipy import optimize, sparse  # here: SciPy's optimize costs ≈ 1 CPU s to import in every process (issue 46)

    A = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, B * P * nv))
    c = np.tile(np.r_[np.zeros(M), np.ones(2 * D)], B * P)
    res = optimize.linprog(c, A_eq=A, b_eq=np.concatenate(rhs), bounds=(0, None), method="highs",
                           options={"primal_feasibility_tolerance": feas_tol, "dual_feasibility_tolerance": feas_tol})
    if res.status != 0:
        raise RuntimeError(f"convex-hull LP not solved to optimality: {res.message}")
    x = res.x.reshape(B, P, nv)
    lam = x[..., :M]
    dist = x[..., M:].sum(-1)
    resid = np.abs(np.einsum("bpm,bmd->bpd", lam, Vt) - Y).max(-1)
    return HullResult(dist.reshape(-1), lam.reshape(-1, M), resid.reshape(-1), "optimal")


def hull_certificate(points, vertices, weights) -> np.ndarray:
    """A certified upper bound on the L1 distance of each point to ``conv(vertices)``: the LP's
    weights (``(B·P, M)``, from :func:`convex_hull_distance`) polished on their support (the basic
    solution of ``[Vᵀ; 1ᵀ] λ_S = [y; 1]`` by least squares, which removes the solver's feasibility
    slack of ~1e-10), and the same solve on all vertices, each clipped at 0 and renormalised to sum 1
    (the smallest of the candidates' distances is returned), so ``λ`` is an exact convex
    combination up to rounding and ``‖Vᵀλ − y‖₁`` (computed in float64) bounds the distance from
    above; for a point inside the hull it is at float64 rounding, ``O(M·D·eps·max|V|)``.

    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> y = np.array([[0.2, 0.3]]); r = convex_hull_distance(y, V)
    >>> bool(hull_certificate(y, V, r.weights)[0] < 1e-15)
    True
    """
    Y = as_finite_array(points, "points")
    Vt = as_finite_array(vertices, "vertices")
    if Y.ndim == 2:
        Y, Vt = Y[None], Vt[None]
    B, P, D = Y.shape
    M = Vt.shape[1]
    lam = np.asarray(weights, dtype=np.float64).reshape(B, P, M)
    out = np.empty((B, P))
    for b in range(B):
        w = float(np.max(np.abs(Vt[b]))) or 1.0
        for p in range(P):
            raw = np.clip(lam[b, p], 0.0, None)
            cands = [raw]
            # the LP's support (a basic solution), and all vertices (exact barycentric coordinates when
            # the vertices are affinely independent, where the LP may zero a weight below its tolerance)
            for S in (np.flatnonzero(raw > 1e-9 * (raw.max() if raw.size else 0.0)), np.arange(M)):
                if not S.size:
                    continue
                A = np.vstack([Vt[b][S].T, np.full((1, S.size), w)])
                sol, *_ = np.linalg.lstsq(A, np.r_[Y[b, p], w], rcond=None)
                if np.all(np.isfinite(sol)):
                    cands.append(np.zeros(M))
                    cands[-1][S] = sol
            dist = []
            for x in cands:  # every candidate is made an exact convex combination: each gives an upper bound
                x = np.clip(x, 0.0, None)
                x = x / x.sum() if x.sum() > 0 else np.full(M, 1.0 / M)
                dist.append(float(np.abs(x @ Vt[b] - Y[b, p]).sum()))
            out[b, p] = float(np.min(dist))
    return out.reshape(-1)


# --------------------------------------------------------------------------------------------
# the seeds' four ways of writing one layer (attn.forms_agree)


def seed002_attention(X, W_Q, W_K, W_V) -> np.ndarray:
    """Lecture notes 002, rows: ``S(X W_Q W_Kᵀ Xᵀ) X W_V`` (row softmax, unscaled). ``X (..., N, D)``."""
    X = np.asarray(X, dtype=np.float64)
    return softmax(X @ W_Q @ W_K.T @ np.swapaxes(X, -1, -2), axis=-1) @ X @ W_V


def seed003_attention(X, W_q, W_k, W_v) -> np.ndarray:
    """Lecture notes 003, rows: ``Softmax(Q Kᵀ) V`` with ``Q = X W^{(q)}``, ``K = X W^{(k)}``, ``V = X W^{(v)}``."""
    X = np.asarray(X, dtype=np.float64)
    return attention(X @ W_q, X @ W_k, X @ W_v, scale=1.0)


def seed004_attention(Xc, W_h, W_b, W_c, d_s: float) -> np.ndarray:
    """Lecture notes 004, columns: ``W_h X Ψ(Xᵀ W_bᵀ W_c X / √d_s)`` with Ψ the column-wise softmax.
    ``Xc (..., D, N)`` → ``(..., D_v, N)``."""
    Xc = np.asarray(Xc, dtype=np.float64)
    Z = np.swapaxes(Xc, -1, -2) @ W_b.T @ W_c @ Xc / math.sqrt(d_s)
    return W_h @ Xc @ softmax(Z, axis=-2)


def _scores_columns(Xc, U_q, U_k) -> np.ndarray:
    """``S[n, n'] = ⟨U_k x_n, U_q x_{n'}⟩`` for tokens as columns."""
    Xc = np.asarray(Xc, dtype=np.float64)
    return np.swapaxes(U_k @ Xc, -1, -2) @ (U_q @ Xc)


def seed000_weights(Xc, U_q, U_k) -> np.ndarray:
    """Lecture notes 000 attention matrix, corrected: ``A_{n,n'} = e^{⟨k_n,q_{n'}⟩} / Σ_ℓ e^{⟨k_ℓ,q_{n'}⟩}``
    (each column sums to 1, as ``Y = X A`` needs). ``Xc (..., D, N)`` → ``(..., N, N)``."""
    return softmax(_scores_columns(Xc, U_q, U_k), axis=-2)


def seed000_weights_as_stated(Xc, U_q, U_k) -> np.ndarray:
    """Lecture notes 000's ``U_q, U_k`` variant **as stated** (wrong):
    ``A_{n,n'} = e^{⟨U_k x_n, U_q x_{n'}⟩} / Σ_ℓ e^{⟨U_k x_{n'}, U_q x_ℓ⟩}``; neither rows nor
    columns sum to 1 in general."""
    S = _scores_columns(Xc, U_q, U_k)
    lse_rows = logsumexp(S, axis=-1)  # lse_ℓ S[n', ℓ], indexed by n'
    return np.exp(S - lse_rows[..., None, :])


def seed000_weights_shared_u_as_stated(Xc, U) -> np.ndarray:
    """Lecture notes 000's shared-``U`` variant as stated: ``e^{⟨Ux_n,Ux_{n'}⟩}/Σ_ℓ e^{⟨Ux_{n'},Ux_ℓ⟩}``.
    Because ``⟨Ux, Ux'⟩`` is symmetric its columns do sum to 1."""
    S = _scores_columns(Xc, U, U)
    return np.exp(S - logsumexp(S, axis=-1)[..., None, :])


def seed000_weights_plain_as_stated(Xc) -> np.ndarray:
    """Lecture notes 000's parameter-free variant as stated: ``e^{⟨x_n,x_{n'}⟩}/Σ_ℓ e^{⟨x_n,x_ℓ⟩}``:
    normalised over the second index, so its *rows* sum to 1, not its columns."""
    Xc = np.asarray(Xc, dtype=np.float64)
    return softmax(np.swapaxes(Xc, -1, -2) @ Xc, axis=-1)


def seed000_attention(Xc, U_q, U_k, U_v, *, weights=seed000_weights) -> np.ndarray:
    """Lecture notes 000, columns: ``U_v X A`` with ``A = weights(X, U_q, U_k)``. ``→ (..., K_v, N)``."""
    Xc = np.asarray(Xc, dtype=np.float64)
    return U_v @ Xc @ weights(Xc, U_q, U_k)


def rename_row_params(W_Q, W_K, W_V, d_s: float) -> dict[str, tuple]:
    """Parameters of every seed form that give the same map as row form ``(W_Q, W_K, W_V)``
    (unscaled scores): lecture notes 002/003 use them as they are; lecture notes 004 ``W_h = W_Vᵀ, W_b = W_Kᵀ,
    W_c = √d_s W_Qᵀ``; lecture notes 000 ``U_q = W_Qᵀ, U_k = W_Kᵀ, U_v = W_Vᵀ``."""
    return {
        "seed002": (W_Q, W_K, W_V),
        "seed003": (W_Q, W_K, W_V),
        "seed004": (W_V.T, W_K.T, math.sqrt(d_s) * W_Q.T, d_s),
        "seed000": (W_Q.T, W_K.T, W_V.T),
    }


# --------------------------------------------------------------------------------------------
# multi-head attention: lecture notes 003 concat form, lecture notes 000 sum form, torch's packed weights


def mhsa_concat(X, W_q, W_k, W_v, W_o, *, b_q=None, b_k=None, b_v=None, b_o=None,
                scale: float = 1.0, causal: bool = False) -> np.ndarray:
    """Lecture notes 003 multi-head attention, rows: ``Concat(H_1..H_M) W^{(o)} (+ b_o)``,
    ``H_h = S(scale·Q_h K_hᵀ) V_h``, ``Q_h = X W_q[h] (+ b_q[h])`` etc.

    Shapes: ``X (..., N, D)``, ``W_q, W_k (M, D, K)``, ``W_v (M, D, D_v)``, ``W_o (M·D_v, D_out)``,
    biases ``(M, K)`` / ``(M, D_v)`` / ``(D_out,)``. Concatenation width ``M·D_v``.
    """
    X = np.asarray(X, dtype=np.float64)
    Wq, Wk, Wv = (np.asarray(w, dtype=np.float64) for w in (W_q, W_k, W_v))
    require(Wq.ndim == 3 and Wk.shape == Wq.shape and Wv.ndim == 3 and Wv.shape[:2] == Wq.shape[:2],
            f"W_q, W_k must be (M, D, K) and W_v (M, D, D_v): got {Wq.shape}, {Wk.shape}, {Wv.shape}")
    require(X.shape[-1] == Wq.shape[1], f"X has width {X.shape[-1]} but the weights expect D = {Wq.shape[1]}")
    M, _, Dv = Wv.shape
    require(np.shape(W_o)[0] == M * Dv, f"W_o must have M·D_v = {M * Dv} rows, got {np.shape(W_o)}")
    Q = np.einsum("...nd,hdk->...hnk", X, Wq)
    K = np.einsum("...nd,hdk->...hnk", X, Wk)
    V = np.einsum("...nd,hdk->...hnk", X, Wv)
    if b_q is not None:
        Q, K, V = Q + np.asarray(b_q)[:, None, :], K + np.asarray(b_k)[:, None, :], V + np.asarray(b_v)[:, None, :]
    H = attention(Q, K, V, scale=scale, causal=causal)  # (..., M, N, Dv)
    cat = np.moveaxis(H, -3, -2).reshape(*H.shape[:-3], H.shape[-2], M * Dv)
    out = cat @ np.asarray(W_o, dtype=np.float64)
    return out if b_o is None else out + np.asarray(b_o)


def mhsa_sum_columns(Xc, U_q, U_k, U_v, U_p) -> np.ndarray:
    """Lecture notes 000 multi-head attention, columns: ``Σ_h U_{p,h} U_{v,h} X A_h`` with the
    column-stochastic ``A_h`` of :func:`seed000_weights` (unscaled scores).

    Shapes: ``Xc (..., D, N)``, ``U_q, U_k (M, K, D)``, ``U_v (M, D_v, D)``, ``U_p (M, D, D_v)``.
    """
    Xc = np.asarray(Xc, dtype=np.float64)
    A = seed000_weights(Xc[..., None, :, :], np.asarray(U_q), np.asarray(U_k))  # (..., M, N, N)
    heads = np.asarray(U_p) @ np.asarray(U_v) @ Xc[..., None, :, :] @ A  # (..., M, D, N)
    return heads.sum(axis=-3)


def concat_to_sum(W_q, W_k, W_v, W_o) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Map lecture notes 003 concat parameters to lecture notes 000 sum parameters:
    ``U_{q,h} = W_q[h]ᵀ``, ``U_{k,h} = W_k[h]ᵀ``, ``U_{v,h} = W_v[h]ᵀ`` and
    ``U_{p,h} = (rows h·D_v..(h+1)·D_v of W_o)ᵀ`` (``W^{(o)}`` is the stack of the ``U_{p,h}ᵀ``)."""
    Wq, Wk, Wv = (np.asarray(w, dtype=np.float64) for w in (W_q, W_k, W_v))
    M, _, Dv = Wv.shape
    Wo = np.asarray(W_o, dtype=np.float64)
    U_p = np.swapaxes(Wo.reshape(M, Dv, Wo.shape[1]), -1, -2)
    return np.swapaxes(Wq, -1, -2), np.swapaxes(Wk, -1, -2), np.swapaxes(Wv, -1, -2), U_p


def mha_to_concat(mha: torch.nn.MultiheadAttention, *, absorb_scale: bool = True) -> dict[str, Any]:
    """Unpack ``torch.nn.MultiheadAttention``'s packed weights into :func:`mhsa_concat` keyword
    arguments (NumPy float64).

    torch computes ``q = x W_inᵀ[0:E]`` (rows ``0:E`` of ``in_proj_weight`` for q, ``E:2E`` for k,
    ``2E:3E`` for v), head h uses output columns ``h·d_h:(h+1)·d_h``, scores are scaled by
    ``1/√d_h``, and ``out = concat · out_proj.weightᵀ + out_proj.bias``. So
    ``W_q[h] = in_proj_weight[h·d_h:(h+1)·d_h].T`` (times ``1/√d_h`` when ``absorb_scale``, giving
    the seeds' unscaled form), ``W_o = out_proj.weight.T``. Biases are returned when present.
    """
    require(isinstance(mha, torch.nn.MultiheadAttention), "mha must be a torch.nn.MultiheadAttention")
    require(mha._qkv_same_embed_dim, "only kdim == vdim == embed_dim is supported (packed in_proj_weight)")
    require(mha.bias_k is None and mha.bias_v is None, "add_bias_kv is not supported")
    E, M = mha.embed_dim, mha.num_heads
    dh = E // M
    W = mha.in_proj_weight.detach().double().cpu().numpy()
    s = 1.0 / math.sqrt(dh)

    def heads(block):  # (dh·M, E) rows → (M, E, dh)
        return np.swapaxes(block.reshape(M, dh, E), -1, -2)

    Wq, Wk, Wv = heads(W[:E]), heads(W[E:2 * E]), heads(W[2 * E:])
    out = {"W_q": Wq * s if absorb_scale else Wq, "W_k": Wk, "W_v": Wv,
           "W_o": mha.out_proj.weight.detach().double().cpu().numpy().T, "scale": 1.0 if absorb_scale else s}
    if mha.in_proj_bias is not None:
        b = mha.in_proj_bias.detach().double().cpu().numpy()
        out["b_q"] = b[:E].reshape(M, dh) * (s if absorb_scale else 1.0)
        out["b_k"], out["b_v"] = b[E:2 * E].reshape(M, dh), b[2 * E:].reshape(M, dh)
    if mha.out_proj.bias is not None:
        out["b_o"] = mha.out_proj.bias.detach().double().cpu().numpy()
    return out


# --------------------------------------------------------------------------------------------
# LayerNorm, MLP, blocks


def layernorm(X, eps: float = 0.0, gamma=None, beta=None) -> np.ndarray:
    """Per-token LayerNorm over the last axis: ``γ ⊙ (x − μ)/√(v + ε) + β`` with the population
    variance ``v = mean((x − μ)²)`` (two-pass). ``eps = 0`` and no affine is lecture notes 000's form."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(axis=-1, keepdims=True)
    C = X - mu
    v = (C * C).mean(axis=-1, keepdims=True)
    Z = C / np.sqrt(v + eps)
    if gamma is not None:
        Z = Z * np.asarray(gamma)
    if beta is not None:
        Z = Z + np.asarray(beta)
    return Z


def mlp(X, W1, b1, W2, b2) -> np.ndarray:
    """Token-wise two-layer ReLU MLP, rows: ``relu(X W1 + b1) W2 + b2``."""
    return np.maximum(np.asarray(X) @ W1 + b1, 0.0) @ W2 + b2


@dataclass(frozen=True)
class BlockParams:
    """Parameters of one transformer block (row form).

    attn   keyword arguments of :func:`mhsa_concat` (W_q, W_k, W_v, W_o, biases, scale)
    ln1, ln2  ``(gamma, beta, eps)`` of the two LayerNorms
    mlp    ``(W1, b1, W2, b2)``
    """

    attn: dict[str, Any]
    ln1: tuple
    ln2: tuple
    mlp: tuple = field(default=())

    def zero_branches(self, attention: bool = True, mlp_: bool = True) -> "BlockParams":
        """A copy with the attention output projection and/or the MLP's last layer set to zero."""
        p = self
        if attention:
            a = dict(p.attn, W_o=np.zeros_like(p.attn["W_o"]))
            if a.get("b_o") is not None:
                a["b_o"] = np.zeros_like(a["b_o"])
            p = replace(p, attn=a)
        if mlp_:
            W1, b1, W2, b2 = p.mlp
            p = replace(p, mlp=(W1, b1, np.zeros_like(W2), np.zeros_like(b2)))
        return p


def _ln(X, ln):
    g, b, e = ln
    return layernorm(X, e, g, b)


def block_pre_ln(X, p: BlockParams, *, causal: bool = False) -> np.ndarray:
    """Pre-LN block (lecture notes 000 corrected; torch ``norm_first=True``):
    ``y = x + MHSA(LN_1 x)``, ``x' = y + MLP(LN_2 y)``."""
    y = np.asarray(X, dtype=np.float64) + mhsa_concat(_ln(X, p.ln1), causal=causal, **p.attn)
    return y + mlp(_ln(y, p.ln2), *p.mlp)


def block_pre_ln_as_stated(X, p: BlockParams, *, causal: bool = False) -> np.ndarray:
    """Lecture notes 000's final recipe **as stated** (wrong): ``y = x + MHSA(LN_1 x)``, ``x' = LN_2(y) + MLP(y)``."""
    y = np.asarray(X, dtype=np.float64) + mhsa_concat(_ln(X, p.ln1), causal=causal, **p.attn)
    return _ln(y, p.ln2) + mlp(y, *p.mlp)


def block_post_ln(X, p: BlockParams, *, causal: bool = False) -> np.ndarray:
    """Post-LN block (Vaswani et al.; torch ``norm_first=False``):
    ``y = LN_1(x + MHSA x)``, ``x' = LN_2(y + MLP y)``."""
    X = np.asarray(X, dtype=np.float64)
    y = _ln(X + mhsa_concat(X, causal=causal, **p.attn), p.ln1)
    return _ln(y + mlp(y, *p.mlp), p.ln2)


def encoder_layer_to_block(layer: torch.nn.TransformerEncoderLayer) -> BlockParams:
    """Read a ``torch.nn.TransformerEncoderLayer`` (ReLU activation) into :class:`BlockParams`."""
    require(isinstance(layer, torch.nn.TransformerEncoderLayer), "layer must be a torch.nn.TransformerEncoderLayer")
    act = getattr(layer, "activation_relu_or_gelu", 1)
    require(act == 1, "only the ReLU activation is supported")
    np_ = lambda t: None if t is None else t.detach().double().cpu().numpy()  # noqa: E731
    attn = mha_to_concat(layer.self_attn)
    ln = lambda n: (np_(n.weight), np_(n.bias), float(n.eps))  # noqa: E731
    W1, b1 = np_(layer.linear1.weight).T, np_(layer.linear1.bias)
    W2, b2 = np_(layer.linear2.weight).T, np_(layer.linear2.bias)
    zeros = lambda n: np.zeros(n)  # noqa: E731
    return BlockParams(attn, ln(layer.norm1), ln(layer.norm2),
                       (W1, zeros(W1.shape[1]) if b1 is None else b1, W2, zeros(W2.shape[1]) if b2 is None else b2))


def random_block_params(rng: np.random.Generator, D: int, M: int, F: int, *, eps: float = 1e-5) -> BlockParams:
    """Random block parameters (weights ~ N(0, 1/D), LayerNorm γ near 1, β near 0); ``D`` divisible by ``M``."""
    require(D % M == 0, f"D = {D} must be divisible by the number of heads M = {M}")
    dh = D // M
    n = lambda *s: rng.normal(scale=1 / math.sqrt(D), size=s)  # noqa: E731
    attn = {"W_q": n(M, D, dh), "W_k": n(M, D, dh), "W_v": n(M, D, dh), "W_o": n(D, D),
            "b_q": 0.1 * n(M, dh), "b_k": 0.1 * n(M, dh), "b_v": 0.1 * n(M, dh), "b_o": 0.1 * n(D), "scale": 1.0}
    ln = lambda: (1 + 0.2 * rng.normal(size=D), 0.2 * rng.normal(size=D), eps)  # noqa: E731
    return BlockParams(attn, ln(), ln(), (n(D, F), 0.1 * n(F), n(F, D), 0.1 * n(D)))
