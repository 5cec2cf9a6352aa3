"""Elman RNN gradients in NumPy and torch (claim ``rnn.bptt``).

Model (lecture notes 004, batched, tokens as rows): for a batch ``X`` (B, T, d_x) and targets ``Z``
(B, T, d_y), ``h_t = tanh(h_{t−1} W_hᵀ + x_t W_xᵀ + b)`` (B, d_h), ``y_t = h_t W_yᵀ + b_y``,
loss ``L = Σ_{batch, t} ½ ‖y_t − z_t‖²``. Parameters are a dict of float64 arrays
``Wh (d_h,d_h), Wx (d_h,d_x), b (d_h,), Wy (d_y,d_h), by (d_y,), h0 (d_h,)`` (``h0`` not trained).
"Untied" gradients are those of per-step copies ``W^{(k)}``, stacked on a leading axis of length T.
"""

from __future__ import annotations

import numpy as np
import torch

from theory.validation import as_finite_array, require

__all__ = ["PARAM_NAMES", "random_params", "bptt_numpy", "untied_gradients", "tied_gradients_nn_rnn",
           "sum_over_steps", "project_tied"]

PARAM_NAMES = ("Wh", "Wx", "b", "Wy", "by")


def random_params(d_x: int, d_h: int, d_y: int, rng: np.random.Generator, gain: float = 0.9) -> dict[str, np.ndarray]:
    """Gaussian parameters, ``W_h`` with spectral scale ≈ ``gain`` (so gradients neither vanish
    nor explode over short sequences), random ``h0``."""
    return {
        "Wh": rng.normal(size=(d_h, d_h)) * gain / np.sqrt(d_h),
        "Wx": rng.normal(size=(d_h, d_x)) / np.sqrt(d_x),
        "b": rng.normal(size=d_h) * 0.3,
        "Wy": rng.normal(size=(d_y, d_h)) / np.sqrt(d_h),
        "by": rng.normal(size=d_y) * 0.3,
        "h0": rng.normal(size=d_h) * 0.5,
    }


def _check(params, X, Z):
    X = as_finite_array(X, "X", ndim=3)
    Z = as_finite_array(Z, "Z", ndim=3)
    require(X.shape[:2] == Z.shape[:2], f"X and Z must share (batch, T), got {X.shape[:2]} and {Z.shape[:2]}")
    require(X.shape[1] >= 1, "sequences must have at least one step")
    d_h = params["Wh"].shape[0]
    require(params["Wx"].shape == (d_h, X.shape[2]), f"Wx must be ({d_h}, {X.shape[2]}), got {params['Wx'].shape}")
    require(params["Wy"].shape == (Z.shape[2], d_h), f"Wy must be ({Z.shape[2]}, {d_h}), got {params['Wy'].shape}")
    return X, Z


def bptt_numpy(params: dict, X, Z, *, recurrent_path: bool = True) -> dict[str, np.ndarray]:
    """Hand-written BPTT: forward, then ``δ_t = (1 − h_t²) ⊙ ((y_t − z_t) W_y + δ_{t+1} W_h)``
    backwards; ``∂L/∂W_h = Σ_t δ_tᵀ h_{t−1}``, ``∂L/∂W_x = Σ_t δ_tᵀ x_t``, ``∂L/∂b = Σ_t δ_t``,
    ``∂L/∂W_y = Σ_t (y_t − z_t)ᵀ h_t``. ``recurrent_path=False`` drops ``δ_{t+1} W_h`` (wrong;
    used for a mutant). Returns a dict of gradients with the parameters' shapes."""
    X, Z = _check(params, X, Z)
    Bsz, T, _ = X.shape
    Wh, Wx, b, Wy, by = (params[k] for k in PARAM_NAMES)
    hs = [np.broadcast_to(params["h0"], (Bsz, Wh.shape[0]))]
    for t in range(T):
        hs.append(np.tanh(hs[-1] @ Wh.T + X[:, t] @ Wx.T + b))
    H = np.stack(hs[1:], axis=1)  # (B, T, d_h)
    R = H @ Wy.T + by - Z  # residuals (B, T, d_y)
    g = {k: np.zeros_like(params[k]) for k in PARAM_NAMES}
    g["Wy"] = np.einsum("bto,bth->oh", R, H)
    g["by"] = R.sum(axis=(0, 1))
    delta_next = np.zeros_like(hs[0])
    for t in reversed(range(T)):
        up = R[:, t] @ Wy + (delta_next @ Wh if recurrent_path else 0.0)
        delta = (1.0 - hs[t + 1] ** 2) * up
        g["Wh"] += delta.T @ hs[t]
        g["Wx"] += delta.T @ X[:, t]
        g["b"] += delta.sum(0)
        delta_next = delta
    return g


def _torch(params, device):
    return {k: torch.as_tensor(v, dtype=torch.float64, device=device) for k, v in params.items()}


def untied_gradients(params: dict, X, Z, device: str = "cpu", offsets: dict | None = None) -> dict[str, np.ndarray]:
    """Autograd gradients of the per-step copies: every parameter gets a leading axis of length
    T (copy k is used only at step k), all copies equal to the tied value. Shapes (T, *param).
    ``offsets`` (optional, ``{name: (T, *param)}``) moves copy k to ``param + offsets[name][k]``
    (untied copies that are *not* at a tied point)."""
    X, Z = _check(params, X, Z)
    T = X.shape[1]
    p = _torch(params, device)
    copies = {k: p[k].unsqueeze(0).repeat(T, *([1] * p[k].dim())) for k in PARAM_NAMES}
    for k, off in (offsets or {}).items():
        copies[k] = copies[k] + torch.as_tensor(np.asarray(off, dtype=np.float64), device=device)
    copies = {k: v.requires_grad_(True) for k, v in copies.items()}
    Xt, Zt = torch.as_tensor(X, device=device), torch.as_tensor(Z, device=device)
    h = p["h0"].expand(X.shape[0], -1)
    loss = 0.0
    for t in range(T):
        h = torch.tanh(h @ copies["Wh"][t].T + Xt[:, t] @ copies["Wx"][t].T + copies["b"][t])
        y = h @ copies["Wy"][t].T + copies["by"][t]
        loss = loss + 0.5 * ((y - Zt[:, t]) ** 2).sum()
    grads = torch.autograd.grad(loss, [copies[k] for k in PARAM_NAMES])
    return {k: gk.detach().cpu().numpy() for k, gk in zip(PARAM_NAMES, grads)}


def tied_gradients_nn_rnn(params: dict, X, Z, device: str = "cpu") -> dict[str, np.ndarray]:
    """Gradients of the same loss for ``torch.nn.RNN`` (tanh, batch_first, one layer; its
    ``bias_hh`` is set to 0 so ``b = bias_ih``) followed by ``torch.nn.Linear``: the tied weights
    as torch implements them."""
    X, Z = _check(params, X, Z)
    d_x, d_h, d_y = X.shape[2], params["Wh"].shape[0], Z.shape[2]
    rnn = torch.nn.RNN(d_x, d_h, nonlinearity="tanh", batch_first=True, dtype=torch.float64, device=device)
    out = torch.nn.Linear(d_h, d_y, dtype=torch.float64, device=device)
    p = _torch(params, device)
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(p["Wh"])
        rnn.weight_ih_l0.copy_(p["Wx"])
        rnn.bias_ih_l0.copy_(p["b"])
        rnn.bias_hh_l0.zero_()
        out.weight.copy_(p["Wy"])
        out.bias.copy_(p["by"])
    h0 = p["h0"].expand(1, X.shape[0], d_h).contiguous()
    H, _ = rnn(torch.as_tensor(X, device=device), h0)
    loss = 0.5 * ((out(H) - torch.as_tensor(Z, device=device)) ** 2).sum()
    loss.backward()
    g = {"Wh": rnn.weight_hh_l0.grad, "Wx": rnn.weight_ih_l0.grad, "b": rnn.bias_ih_l0.grad,
         "Wy": out.weight.grad, "by": out.bias.grad}
    return {k: v.detach().cpu().numpy() for k, v in g.items()}


def sum_over_steps(G: np.ndarray) -> np.ndarray:
    """The tied gradient from the untied copies' gradients ``G`` (T, ...): ``Σ_k G_k``."""
    return np.asarray(G).sum(axis=0)


def project_tied(G: np.ndarray) -> np.ndarray:
    """Euclidean projection of the stacked untied gradients (T, ...) onto the tied subspace
    ``{(W, ..., W)}``: every copy replaced by the average ``(1/T) Σ_k G_k``."""
    G = np.asarray(G)
    return np.broadcast_to(G.mean(axis=0), G.shape).copy()
