"""What ``tverify check icl`` measures of trained linear self-attention: the prediction against Γ_N⁻¹ on test
prompts, and training with progress and convergence diagnostics. Conventions of :mod:`numerics.icl`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from numerics.torch_utils import resolve_device
from theory.validation import InputError, as_spd_matrix
from numerics.icl import (_fit_statistics, _prompt_statistics, _stats_loss, _training_setup, DTYPE, lsa_forward,
                          sample_prompts, single_thread, TrainResult, zfb_init)


# ------------------------------------------------------------------------------------------------
# measurements used by `tverify check icl`


def measure_weights(Lambda, N: int, Gamma_inv: np.ndarray, Wpv, Wkq, *, M: int, n: int = 4000, seed: int = 0,
                    device="cpu") -> dict:
    """Compare LSA weights ``Wpv, Wkq`` (``(d+1, d+1)`` or a batch ``(S, d+1, d+1)``) with the
    closed form: relative Frobenius error of ``w22·W11`` against ``Gamma_inv``, the largest entry of
    the other blocks that reach ``ŷ`` (``W^{PV}_{d+1,:d}``, ``W^{KQ}_{d+1,:d}``), and the relative RMS
    difference of predictions on ``n`` fresh prompts of length ``M`` (ρ = M)."""
    L = as_spd_matrix(Lambda)
    d = L.shape[0]
    Wpv = torch.as_tensor(np.asarray(Wpv, dtype=np.float64))
    Wkq = torch.as_tensor(np.asarray(Wkq, dtype=np.float64))
    if Wpv.shape[-2:] != (d + 1, d + 1) or Wkq.shape[-2:] != (d + 1, d + 1):
        raise InputError(f"weights must be ({d + 1}, {d + 1}) for d = {d} (Lambda), got W_PV {tuple(Wpv.shape)}, W_KQ {tuple(Wkq.shape)}")
    if not (torch.isfinite(Wpv).all() and torch.isfinite(Wkq).all()):
        raise InputError("weights contain NaN or inf")
    if Wpv.ndim == 2:
        Wpv, Wkq = Wpv[None], Wkq[None]
    B = (Wpv[:, d, d, None, None] * Wkq[:, :d, :d]).numpy()
    rel_B = np.linalg.norm(B - Gamma_inv, axis=(1, 2)) / np.linalg.norm(Gamma_inv)
    other = max(float(Wpv[:, d, :d].abs().max()), float(Wkq[:, d, :d].abs().max()))
    P = sample_prompts(L, M, (n,), seed=seed, device=device)
    with torch.no_grad():
        yh = lsa_forward(Wpv[:, None].to(P.E.device), Wkq[:, None].to(P.E.device), P.E[None], float(M)).cpu().numpy()
    X, y, xq = P.X.cpu().numpy(), P.y.cpu().numpy(), P.x_q.cpu().numpy()
    closed = np.einsum("nd,de,ne->n", xq, Gamma_inv, np.einsum("nm,nmd->nd", y, X) / M)
    rel_pred = np.sqrt(np.mean((yh - closed) ** 2, axis=-1)) / np.sqrt(np.mean(closed**2))
    return {"rel_err_B": rel_B.tolist(), "max_other_block": other, "rel_rms_prediction": rel_pred.tolist(),
            "B": B.tolist(), **_risk(yh, P.y_q.cpu().numpy())}


def _risk(yh: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The measured risk (mean squared error over the seeds' weights and the test prompts) and its standard error
    over the prompts (each prompt's squared error averaged over the seeds first: the seeds share the prompts)."""
    per_prompt = np.mean((yh - y) ** 2, axis=tuple(range(yh.ndim - 1))) if yh.ndim > 1 else (yh - y) ** 2
    n = per_prompt.size
    se = float(np.std(per_prompt, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return {"risk_M": float(np.mean(per_prompt)), "risk_M_se": se, "risk_M_prompts": int(n)}


# ------------------------------------------------------------------------------------------------
# training with progress and convergence diagnostics (used by `tverify check icl`)


@dataclass
class MonitoredTrainResult(TrainResult):
    """:class:`TrainResult` plus, per seed, the exact minimiser ``B_star (S, d, d)`` of that seed's
    empirical loss over ``W^{KQ}_{11}`` with every other weight held at its trained value (the loss
    is exactly quadratic in ``W^{KQ}_{11}``), expressed as ``w22·W11``: ``‖B − B_star‖`` is how far
    the optimiser stopped from the minimum it was heading to. ``loss_gap (S,)`` is the loss above
    that conditional minimum. Both are NaN for a seed whose training left float64's range (or
    whose eigendecomposition failed)."""

    B_star: np.ndarray = None
    loss_gap: np.ndarray = None


def train_lsa_monitored(Lambda, N: int, *, n_seeds: int, n_prompts: int, steps: int, seed: int, lr: float = 0.02,
                        sigma: float | None = None, device="cpu", lbfgs_steps: int = 50,
                        progress: Callable[[float], None] | None = None) -> MonitoredTrainResult:
    """The algorithm of :func:`train_lsa` (same prompts, initialisation and optimisers, hence the same
    weights for the same arguments), reporting the fraction of work done to ``progress(fraction)``
    and returning the convergence diagnostics of :class:`MonitoredTrainResult`."""
    with single_thread(device=resolve_device(device)):
        return _train_lsa_monitored(Lambda, N, n_seeds=n_seeds, n_prompts=n_prompts, steps=steps, seed=seed, lr=lr,
                                    sigma=sigma, device=device, lbfgs_steps=lbfgs_steps, progress=progress)


def _train_lsa_monitored(Lambda, N, *, n_seeds, n_prompts, steps, seed, lr, sigma, device, lbfgs_steps, progress):
    import time

    report = progress or (lambda _f: None)
    dev, L, d, sigma = _training_setup(Lambda, N, sigma, device)
    F = (d + 1) ** 2 * d
    # work units (for progress only): statistics ∝ prompts·F², each optimiser evaluation ∝ F²
    w_stats = float(n_prompts) * (F + 2 * (N + 1))
    w_eval = 3.0 * F
    total = w_stats + w_eval * (steps + 1.25 * lbfgs_steps) or 1.0
    t0 = time.perf_counter()
    # exactly the sampling and optimiser of _train_lsa (same seeds, same chunks, same steps)
    Q, c, m = _prompt_statistics(L, N, n_seeds, n_prompts, seed, dev, progress=lambda f: report(w_stats * f / total))
    Wpv, Wkq = zfb_init(d, n_seeds, sigma, seed=seed + 1, device=dev)
    model, curve = _fit_statistics(Q, c, m, Wpv, Wkq, steps=steps, lr=lr, lbfgs_steps=lbfgs_steps,
                                   progress=lambda n: report(min(1.0, (w_stats + w_eval * n) / total)))

    def theta_of(pv, kq):
        return (pv[:, d, :, None, None] * kq[:, None, :, :d]).flatten(1)

    def loss_fn():
        return _stats_loss(model, Q, c, m)

    with torch.no_grad():
        fl = loss_fn()
        B = model.B()
        # conditional minimum over W11 = Wkq[:d, :d]: θ = A·vec(W11) + θ_rest, A[(j,k,l),(k,l)] = Wpv[d, j]
        pv, kq = model.Wpv.detach(), model.Wkq.detach()
        kq0 = kq.clone()
        kq0[:, :d, :d] = 0
        rest = theta_of(pv, kq0)
        eye = torch.eye(d * d, dtype=DTYPE, device=dev).reshape(d, d, d * d)
        A = torch.zeros(n_seeds, d + 1, d + 1, d, d * d, dtype=DTYPE, device=dev)
        A[:, :, :d, :, :] = pv[:, d, :, None, None, None] * eye[None, None]
        A = A.reshape(n_seeds, F, d * d)
        H = A.transpose(1, 2) @ Q @ A
        g = A.transpose(1, 2) @ (c - (Q @ rest.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)
        H = 0.5 * (H + H.transpose(1, 2))
        finite = torch.isfinite(H).flatten(1).all(1) & torch.isfinite(g).flatten(1).all(1)
        eye_ = torch.eye(d * d, dtype=DTYPE, device=dev).expand_as(H)
        Hs = torch.where(finite[:, None, None], H, eye_)
        try:
            evals_, evecs = torch.linalg.eigh(Hs)
        except RuntimeError:  # LAPACK did not converge on some seed: one at a time, NaN where it fails
            evals_ = torch.ones(n_seeds, d * d, dtype=DTYPE, device=dev)
            evecs = eye_.clone()
            for i in range(n_seeds):
                try:
                    evals_[i], evecs[i] = torch.linalg.eigh(Hs[i])
                except RuntimeError:
                    finite[i] = False
        cut = evals_[:, -1:].clamp_min(0) * (d * d) * 1e-15  # pseudo-inverse below float64 resolution
        inv = torch.where(evals_ > cut, 1.0 / evals_, torch.zeros_like(evals_))
        w_star = (evecs @ (inv.unsqueeze(-1) * (evecs.transpose(1, 2) @ torch.nan_to_num(g)))).squeeze(-1)
        w_star = torch.where(finite[:, None], w_star, torch.full_like(w_star, float("nan"))).reshape(n_seeds, d, d)
        B_star = pv[:, d, d, None, None] * w_star
        kq_star = kq.clone()
        kq_star[:, :d, :d] = w_star
        th = theta_of(pv, kq_star)
        l_star = 0.5 * ((th * (Q @ th.unsqueeze(-1)).squeeze(-1)).sum(-1) - 2 * (th * c).sum(-1) + m)
    report(1.0)
    return MonitoredTrainResult(model.Wpv.detach().cpu(), model.Wkq.detach().cpu(), B.cpu().numpy(), fl.cpu().numpy(),
                                np.array(curve), time.perf_counter() - t0, str(dev), B_star=B_star.cpu().numpy(),
                                loss_gap=(fl - l_star).cpu().numpy())
