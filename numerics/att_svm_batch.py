"""The reference notebook's set-up, batched (``tverify reproduce``, :mod:`numerics.att_svm`): its initial weights,
one trainer for W and (K, Q) with an optional ridge, and many Att-SVMs solved through one compiled problem."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from numerics.att_svm_data import AttSVMInstance, validate_instance
from numerics.att_svm_solve import SOLVER_OPTS, certify, constraint_matrix, cp, solve_att_svm
from numerics.att_svm_train import _as_batch, loss_and_grad, loss_and_scaled_grad, softmax_mass
from numerics.torch_utils import cpu_threads, resolve_device
from theory.validation import InputError


# --------------------------------------------------------------------------------------------
# the reference notebook's set-up, batched: its initial weights, one trainer for W and (K,Q) with
# an optional ridge, and many Att-SVMs solved through one compiled problem (``tverify reproduce``)


def reference_notebook_inits(runs: int, d: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The initial weights of ``local_converge.ipynb`` (umich-sota/TF-as-SVM) when torch's global
    generator is seeded with ``seed`` first (the notebook itself does not seed it).

    Per run the notebook builds two models from the global stream, in this order: ``nn.Linear(d, d)``
    (W-parameterisation; Kaiming-uniform, U(−1/√d, 1/√d), float32), an unused ``randn(d)``, then the
    query and key ``nn.Linear(d, d)`` and another ``randn(d)``. Its logits are ``zᵀ W_lin x_t``, so in
    this module's convention (``l_t = x_tᵀ W z``, ``W = K Qᵀ``): ``W = weightᵀ``, ``K = keyᵀ``,
    ``Q = queryᵀ``. Returns float64 arrays ``W, K, Q`` of shape ``(runs, d, d)``."""
    gen = torch.Generator().manual_seed(int(seed))

    def linear():
        w = torch.empty(d, d, dtype=torch.float32)
        torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=gen)
        return w.double().numpy()

    W, K, Q = [], [], []
    for _ in range(int(runs)):
        W.append(linear().T)
        torch.randn(d, generator=gen)
        q, k = linear(), linear()
        torch.randn(d, generator=gen)
        Q.append(q.T)
        K.append(k.T)
    return {"W": np.array(W), "K": np.array(K), "Q": np.array(Q)}


@dataclass
class BatchNGDResult:
    """One batched normalised-GD run (columns: batch members).

    W, K, Q (B,d,d) final (``W = K Qᵀ``; W-members have ``Q = I``); selected (B,n) argmax-attention
    token at the final W; max_mass (iters,B) mean over sequences of the largest softmax entry at
    each iterate (what the reference notebook plots); step (iters,B) length of the K-step actually
    taken divided by its nominal length ``lr_k`` (1 for an exact normalised step; → 0 when the
    ε-guarded step ``g/(‖g‖+ε)`` stalls); snap_iters (S,) and W_snap (S,B,d,d) iterates kept for
    curves; loss (B,) final unregularised loss."""

    W: np.ndarray
    K: np.ndarray
    Q: np.ndarray
    selected: np.ndarray
    max_mass: np.ndarray
    step: np.ndarray
    snap_iters: np.ndarray
    W_snap: np.ndarray
    loss: np.ndarray


def train_ngd_batch(data: AttSVMInstance | Sequence[AttSVMInstance], K0, Q0=None, *, iters: int = 2000,
                    lr: float = 0.1, ridge=0.0, w_param=False, eps_guard=True, autograd_like=False,
                    decay_after: int | None = None, eps: float = float(np.finfo(np.float64).eps), snapshots: int = 50,
                    device: str = "cpu", threads: int = 1) -> BatchNGDResult:
    """Normalised GD on ``L(K Qᵀ) + λ_b (‖K‖_F² + ‖Q‖_F²)`` for a batch of members b, each with its
    own instance, initial weights, ridge ``λ_b``, parameterisation and step rule, in ONE tensor.

    data       one instance per member (or one instance for all); ``K0, Q0`` (B,d,d) initial
               weights (``Q0`` ignored for W-members).
    ridge      λ_b (scalar or (B,)): the reference code adds ``ε(‖K‖²+‖Q‖²)`` with ε = 2.2e-16 to
               its (K,Q) loss; 0 is plain GD.
    w_param    (B,) bool: True trains W itself (``K = W``, ``Q = I`` frozen; the ridge is λ‖W‖_F²).
    eps_guard  (B,) bool: True steps ``lr·g/(‖g‖_F + eps)`` per matrix, as the reference code (it
               stalls once ‖g‖ falls to ~eps: softmax saturation); False steps exactly ``lr·g/‖g‖``.
    autograd_like  (B,) bool: True computes the loss gradient as torch autograd does through the
               reference model (softmax backward ``s ⊙ (g_s − ⟨s, g_s⟩)``, unscaled): once the softmax
               saturates, ``⟨s, g_s⟩ − g_{s,opt}`` cancels and the gradient carries rounding noise of
               relative size ~eps, which then steers the (ε-guarded, stalled) reference runs. False: the
               accurate scaled gradient below.
    decay_after  None: constant ``lr``; k0: ``lr_k = lr·min(1, k0/k)`` (the steps shrink, so the
               iterates settle at a stationary point of the regularised loss: the ridge path).

    The gradient of the loss is computed as ``e^{c} G̃`` (:func:`loss_and_scaled_grad`), so it is
    accurate however saturated the softmax; with ``m = max(c, log λ)`` each step is formed from
    ``u = e^{c−m} G̃Q + 2e^{log λ − m} K`` (the true gradient is ``e^m u``), i.e. the guarded step
    is ``lr·u/(‖u‖ + eps·e^{−m})``. ``threads``: torch intra-op threads on CPU during the loop.
    Returns :class:`BatchNGDResult`; everything float64."""
    dev = resolve_device(device)
    insts = [data] if isinstance(data, AttSVMInstance) else list(data)
    K = torch.as_tensor(np.asarray(K0, dtype=np.float64), device=dev).clone()
    Bn, d = K.shape[0], K.shape[-1]
    X, z, y, v = _as_batch(insts, Bn if len(insts) == 1 else None, dev)
    if X.shape[0] != Bn:
        raise InputError(f"{X.shape[0]} instances for {Bn} initial weights")
    flag = lambda a: torch.as_tensor(np.broadcast_to(np.asarray(a), (Bn,)).copy(), device=dev)  # noqa: E731
    lam = flag(np.asarray(ridge, dtype=np.float64)).double()
    wp, guard = flag(np.asarray(w_param, dtype=bool)), flag(np.asarray(eps_guard, dtype=bool))
    naive = flag(np.asarray(autograd_like, dtype=bool))
    any_naive, all_naive = bool(naive.any()), bool(naive.all())
    i_n, i_s = torch.nonzero(naive)[:, 0], torch.nonzero(~naive)[:, 0]
    sub_n, sub_s = tuple(a[i_n] for a in (X, z, y, v)), tuple(a[i_s] for a in (X, z, y, v))
    Xv_all = torch.einsum("bntd,bd->bnt", X, v)
    Xv_n = Xv_all[i_n]
    if bool((lam < 0).any()):
        raise InputError("ridge must be ≥ 0")
    eye = torch.eye(d, dtype=torch.float64, device=dev).expand(Bn, d, d)
    Q = torch.where(wp[:, None, None], eye, torch.as_tensor(np.asarray(Q0 if Q0 is not None else np.broadcast_to(np.eye(d), (Bn, d, d)),
                                                                        dtype=np.float64), device=dev))
    loglam = torch.where(lam > 0, torch.log(torch.where(lam > 0, lam, 1.0)), torch.full_like(lam, -math.inf))
    snap_at = np.unique(np.linspace(0, iters, max(2, snapshots)).round().astype(int))
    mm, st = (torch.empty(iters, Bn, dtype=torch.float64, device=dev) for _ in range(2))
    snaps = []
    tiny = torch.finfo(torch.float64).tiny

    def unit(u, m):
        n_ = torch.linalg.norm(u, dim=(-2, -1))
        den = torch.where(guard, n_ + eps * torch.exp(-m), n_)
        den = torch.where(den > 0, den, 1.0)
        return u / den[:, None, None], n_ / den

    with cpu_threads(threads, dev):
        for k in range(iters + 1):
            W = K @ Q.transpose(-1, -2)
            if k in snap_at:
                snaps.append(W.detach().cpu().numpy())
            if k == iters:
                break
            if all_naive:
                G, s = _autograd_like_grad(W, X, z, y, v, Xv_all)
                c = torch.zeros(Bn, dtype=torch.float64, device=dev)
            elif any_naive:  # each member's gradient computed once, by its own rule
                G, s = torch.empty_like(W), torch.empty(X.shape[:3], dtype=torch.float64, device=dev)
                c = torch.zeros(Bn, dtype=torch.float64, device=dev)
                G[i_n], s[i_n] = _autograd_like_grad(W[i_n], *sub_n, Xv_n)
                _, G[i_s], c[i_s], s[i_s] = loss_and_scaled_grad(W[i_s], *sub_s)
            else:
                _, G, c, s = loss_and_scaled_grad(W, X, z, y, v)
            mm[k] = s.max(-1).values.mean(-1)
            m = torch.maximum(c, loglam)
            a, b = torch.exp(c - m)[:, None, None], 2 * torch.exp(loglam - m)[:, None, None]
            uK, mK = unit(a * (G @ Q) + b * K, m)
            uQ, _ = unit(a * (G.transpose(-1, -2) @ K) + b * Q, m)
            lr_k = lr if decay_after is None else lr * min(1.0, decay_after / max(k, 1))
            st[k] = mK
            K = K - lr_k * uK
            Q = torch.where(wp[:, None, None], Q, Q - lr_k * uQ)
        s = softmax_mass(W, X, z)
        loss = loss_and_grad(W, X, z, y, v)[0]
    np_ = lambda t: t.detach().cpu().numpy()  # noqa: E731
    del tiny
    return BatchNGDResult(np_(W), np_(K), np_(Q), np_(s.argmax(-1)), np_(mm), np_(st), snap_at, np.array(snaps), np_(loss))


def _autograd_like_grad(W: torch.Tensor, X, z, y, v, Xv: torch.Tensor | None = None) -> torch.Tensor:
    """``∂L/∂W`` in the order torch autograd evaluates it through the reference model (``out =
    (S(l) X) v``, ``loss = mean log(1 + e^{−y·out})``): ``g_s = c·Xv``, then the softmax backward
    ``s ⊙ (g_s − Σ s g_s)``, then ``Σ_t (∂l_t) x_t zᵀ``; (B,d,d). Unlike :func:`loss_and_grad` (a
    difference of scores, accurate at saturation) it cancels once ``s_opt`` rounds to 1. Returns
    ``(grad (B,d,d), s (B,n,T))``."""
    s = softmax_mass(W, X, z)
    if Xv is None:
        Xv = torch.einsum("bntd,bd->bnt", X, v)
    out = (s * Xv).sum(-1)  # = ((S X) v), the scores x_tᵀv computed once per run
    n = X.shape[1]
    e = torch.exp(-y * out)
    c = -y * e / (1 + e) / n
    gs = c[..., None] * Xv
    gl = s * (gs - (gs * s).sum(-1, keepdim=True))
    return (gl[..., None, :] @ X)[..., 0, :].transpose(1, 2) @ z, s


class CompiledAttSVM:
    """The Att-SVM for one shape (n, T, d) and norm, compiled by cvxpy ONCE with the constraint rows
    as a parameter, so that many instances (or token selections) are solved at the cost of the
    solver alone. Every returned point passes the same certificate as :func:`solve_att_svm`
    (:func:`certify` on the full (d,d) problem, ``CERT_TOL``); an instance whose point does not
    certify, or whose solve fails, falls back to :func:`solve_att_svm` (the full solver chain),
    which raises on infeasibility.

    When n < d the problem is solved in the span of the queries: the constraints see W only through
    ``W z_i``, and ``W ↦ W P_Z`` (P_Z the projection onto span{z_i}) keeps every constraint and does
    not increase the Frobenius or the nuclear norm, so a minimiser has the form ``W = M Bᵀ`` with B
    (d,n) an orthonormal basis of span{z_i} and M (d,n); ``‖M Bᵀ‖ = ‖M‖`` in both norms. The
    nuclear-norm SDP then has a (d+n)-sized PSD block instead of 2d.

    The reproductions solve through :class:`numerics.att_svm_direct.DirectAttSVM` (the same
    certificate, without cvxpy's per-solve canonicalisation); this class is its cvxpy-built cross-check
    (tests/test_tf_as_svm_speed.py)."""

    def __init__(self, n: int, T: int, d: int, norm: str = "fro"):
        if norm not in ("fro", "nuc"):
            raise InputError(f"norm must be 'fro' or 'nuc', got {norm!r}")
        self.norm, self.shape = norm, (n, T, d)
        self.r = r = min(n, d)
        self.A = cp.Parameter((n * (T - 1), d * r), name="A")
        self.M = cp.Variable((d, r), name="M")
        self.ineq = self.A @ cp.vec(self.M, order="C") >= 1
        obj = 0.5 * cp.sum_squares(self.M) if norm == "fro" else cp.normNuc(self.M)
        self.problem = cp.Problem(cp.Minimize(obj), [self.ineq])
        self.fallbacks = 0

    def solve(self, X, z, opt) -> np.ndarray:
        """The certified Att-SVM solution ``W`` (d,d) for tokens ``opt`` of instance ``(X, z)``."""
        X, z, opt = validate_instance(X, z, opt)
        if X.shape != self.shape:
            raise InputError(f"compiled for shape {self.shape}, got {X.shape}")
        A = constraint_matrix(X, z, opt)[0]
        n, _, d = X.shape
        if self.r < d:
            U, sv, _ = np.linalg.svd(z.T, full_matrices=False)  # (d, n): basis of span{z_i}
            Bz = U if sv[-1] > 1e-12 * sv[0] else None
        else:
            Bz = np.eye(d)
        if Bz is not None:
            Ar = A @ Bz  # A_k Bz = (x_o − x_t)(Bzᵀ z_i)ᵀ
            self.A.value = Ar.reshape(len(A), -1)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    self.problem.solve(solver="CLARABEL", **SOLVER_OPTS["CLARABEL"])
                if self.problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and self.M.value is not None:
                    W = np.asarray(self.M.value, dtype=np.float64) @ Bz.T
                    duals = np.asarray(self.ineq.dual_value, dtype=np.float64).reshape(-1)
                    if certify(W, A, duals, self.norm)["passed"]:
                        return W
            except cp.SolverError:
                pass
        self.fallbacks += 1
        return solve_att_svm(X, z, opt, norm=self.norm).W
