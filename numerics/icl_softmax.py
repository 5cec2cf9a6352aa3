"""A small softmax transformer for in-context learning (Garg et al. 2022) and its baselines (claims
``icl.baselines``): the model, its training on sampled functions, and the errors of least squares, nearest
neighbours and averaging beside it. Conventions of :mod:`numerics.icl`."""

from __future__ import annotations

import math

import numpy as np
import torch

from numerics.torch_utils import generator, resolve_device
from numerics.icl import single_thread


# ------------------------------------------------------------------------------------------------
# small softmax transformer (Garg et al. 2022) and baselines


class SoftmaxICL(torch.nn.Module):
    """A tiny GPT-style softmax transformer on interleaved tokens ``x_1, y_1, x_2, y_2, …`` (each
    token a ``(d+1)``-vector: ``(x, 0)`` or ``(0…0, y)``), causal attention, learned positions;
    the read-out at each ``x_k`` token predicts ``y_k`` from the ``k−1`` earlier pairs."""

    def __init__(self, d: int, k_max: int, width: int = 32, layers: int = 2, heads: int = 2):
        super().__init__()
        self.d, self.k_max = d, k_max
        self.read_in = torch.nn.Linear(d + 1, width)
        self.pos = torch.nn.Parameter(torch.zeros(2 * k_max, width))
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.read_out = torch.nn.Linear(width, 1)

    def forward(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``X (B, k, d)``, ``y (B, k)`` → predictions ``(B, k)`` of each ``y_j`` from pairs ``< j``."""
        Bsz, k, d = X.shape
        tx = torch.cat([X, torch.zeros(Bsz, k, 1, dtype=X.dtype, device=X.device)], -1)
        ty = torch.cat([torch.zeros(Bsz, k, d, dtype=X.dtype, device=X.device), y.unsqueeze(-1)], -1)
        seq = torch.stack([tx, ty], 2).reshape(Bsz, 2 * k, d + 1)
        h = self.read_in(seq) + self.pos[: 2 * k]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(2 * k, device=X.device, dtype=X.dtype)
        h = self.body(h, mask=mask, is_causal=True)
        return self.read_out(h[:, 0::2]).squeeze(-1)


def train_softmax_icl(d: int, k_max: int, *, steps: int, batch: int, seed: int, lr: float = 1e-2,
                      width: int = 32, layers: int = 2, heads: int = 4, clip: float = 1.0,
                      device="cpu") -> tuple[SoftmaxICL, np.ndarray]:
    """Adam on fresh prompts each step (``x ~ N(0, I_d)``, ``w ~ N(0, I_d)``, noise-free), loss the
    mean squared error over all positions, one-cycle learning-rate schedule (10% warm-up to ``lr``,
    cosine decay), gradient norm clipped at ``clip`` (0: off). float32 for speed (this is evidence,
    not verification). Returns the model and the per-step training loss.

    Training budget notes (CPU, d = 2, ~7 ms/step at batch 64): these tiny models sit on a loss
    plateau (error/d ≈ averaging) before in-context regression "emerges"; how long is seed-dependent.
    With 2 heads of width 16 and lr 3e-3 several seeds were still on the plateau after 300–400 steps;
    4 heads (head width 8), lr 1e-2 and clipping escaped it within 400 steps at every seed tried (600
    steps leave a margin)."""
    with single_thread():
        return _train_softmax_icl(d, k_max, steps, batch, seed, lr, width, layers, heads, clip, device)


def _train_softmax_icl(d, k_max, steps, batch, seed, lr, width, layers, heads, clip, device):
    dev = resolve_device(device)
    with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global RNG
        torch.manual_seed(seed)
        model = SoftmaxICL(d, k_max, width=width, layers=layers, heads=heads).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1), pct_start=0.1)
    g = generator(seed, dev)
    curve = []
    for _ in range(steps):
        X = torch.randn(batch, k_max, d, generator=g, device=dev)
        w = torch.randn(batch, d, generator=g, device=dev)
        y = torch.einsum("bkd,bd->bk", X, w)
        loss = ((model(X, y) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        curve.append(float(loss.detach()))
    return model, np.array(curve)


def baseline_errors(model: SoftmaxICL | None, d: int, k_max: int, n: int, *, seed: int, device="cpu") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Squared error / d at each number of in-context examples ``k = 0..k_max−1`` (mean and SE over
    ``n`` fresh prompts) for the transformer, least squares (min-norm), averaging
    (``x_qᵀ (1/k)Σ y_i x_i``) and 3-nearest-neighbours (mean label of the 3 closest x, fewer when k < 3)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k_max, d))
    w = rng.normal(size=(n, d))
    y = np.einsum("nkd,nd->nk", X, w)
    preds: dict[str, np.ndarray] = {k: np.zeros((n, k_max)) for k in ("least squares", "averaging", "3-NN")}
    for k in range(1, k_max):
        Xc, yc, xq = X[:, :k], y[:, :k], X[:, k]
        wls = np.einsum("nde,ne->nd", np.linalg.pinv(Xc), yc)
        preds["least squares"][:, k] = np.einsum("nd,nd->n", wls, xq)
        preds["averaging"][:, k] = np.einsum("nd,nd->n", np.einsum("nk,nkd->nd", yc, Xc) / k, xq)
        dist = np.linalg.norm(Xc - xq[:, None], axis=-1)
        nn = np.argsort(dist, axis=1)[:, : min(3, k)]
        preds["3-NN"][:, k] = np.take_along_axis(yc, nn, 1).mean(1)
    if model is not None:
        dev = next(model.parameters()).device
        with torch.no_grad():
            p = model(torch.as_tensor(X, dtype=torch.float32, device=dev), torch.as_tensor(y, dtype=torch.float32, device=dev))
        preds["transformer"] = p.double().cpu().numpy()
    out = {}
    for name, p in preds.items():
        e = (p - y) ** 2 / d
        out[name] = (e.mean(0), e.std(0, ddof=1) / math.sqrt(n))
    return out
