"""LoRA in torch (claim ``lora.low_rank``): a ``torch.nn.Linear`` wrapped with a low-rank update.

Conventions follow ``torch.nn.Linear``: ``W0`` is (d_out=d, d_in=k), inputs are rows
``X ∈ R^{n×k}``, ``Y = X W0ᵀ + b + s·X Aᵀ Bᵀ`` with ``A ∈ R^{r×k}``, ``B ∈ R^{d×r}``,
``s = α/r`` (Hu et al. 2021). ``B = 0`` at initialisation, ``A`` Gaussian with std ``1/√k``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from theory.validation import require

__all__ = ["LoRALinear", "make_lora", "merge_weight", "lora_grads", "trainable_count", "count_trainable"]


class LoRALinear(nn.Module):
    """``base(x) + scale · (x Aᵀ) Bᵀ`` with the base layer frozen.

    ``base``   a ``torch.nn.Linear`` (its parameters get ``requires_grad = False``)
    ``r``      adapter rank (1 ≤ r ≤ min(d, k)); ``alpha`` the LoRA α, ``scale = α / r``
    ``init_B`` "zeros" (LoRA) or "normal" (used only to build wrong variants)
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, *, generator: torch.Generator | None = None,
                 init_B: str = "zeros", freeze_base: bool = True):
        super().__init__()
        require(isinstance(base, nn.Linear), "base must be a torch.nn.Linear")
        d, k = base.out_features, base.in_features
        require(isinstance(r, (int, np.integer)) and 1 <= r <= min(d, k), f"rank r must be an integer in [1, min(d, k)] = [1, {min(d, k)}], got {r!r}")
        require(np.isfinite(alpha) and alpha > 0, f"alpha must be a positive finite number, got {alpha!r}")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(not freeze_base)
        self.r, self.alpha = int(r), float(alpha)
        self.scale = self.alpha / self.r
        w = base.weight
        kw = dict(dtype=w.dtype, device=w.device)
        # draws happen on the CPU generator, then move to the weight's device (reproducible across devices)
        self.A = nn.Parameter(torch.randn(self.r, k, generator=generator, dtype=w.dtype).to(w.device) / np.sqrt(k))
        if init_B == "zeros":
            bmat = torch.zeros(d, self.r, **kw)
        else:
            bmat = torch.randn(d, self.r, generator=generator, dtype=w.dtype).to(w.device)
        self.B = nn.Parameter(bmat)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (..., k) → (..., d); the low-rank path is applied unmerged, ``(x Aᵀ) Bᵀ``."""
        return self.base(x) + self.scale * ((x @ self.A.T) @ self.B.T)

    def delta_weight(self) -> torch.Tensor:
        """``scale · B A`` (d×k)."""
        return self.scale * (self.B @ self.A)

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight ``W0 + scale·B A`` (same bias)."""
        out = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None,
                        dtype=self.base.weight.dtype, device=self.base.weight.device)
        with torch.no_grad():
            out.weight.copy_(merge_weight(self.base.weight, self.A, self.B, self.alpha, self.r))
            if self.base.bias is not None:
                out.bias.copy_(self.base.bias)
        return out


def make_lora(base: nn.Linear, r: int, alpha: float, generator: torch.Generator | None = None) -> LoRALinear:
    """The LoRA wrapper of ``base`` (B = 0, A Gaussian, base frozen)."""
    return LoRALinear(base, r, alpha, generator=generator)


def merge_weight(W0: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, r: int) -> torch.Tensor:
    """Merged weight ``W0 + (α/r) B A`` (d×k); works for numpy arrays and tensors."""
    return W0 + (alpha / r) * (B @ A)


def lora_grads(X, G, A, B, scale):
    """Closed-form gradients of ``L = Σ G ∘ Y`` for ``Y = X (W0 + s B A)ᵀ``:
    ``∂L/∂A = s Bᵀ Gᵀ X`` (r×k), ``∂L/∂B = s Gᵀ X Aᵀ`` (d×r). X (n×k), G (n×d). NumPy or torch."""
    return scale * (B.T @ G.T @ X), scale * (G.T @ X @ A.T)


def trainable_count(d: int, k: int, r: int) -> int:
    """Trainable parameters of a rank-r adapter on a d×k weight: ``r (d + k)``."""
    return r * (d + k)


def count_trainable(module: nn.Module) -> int:
    """``Σ numel`` over the parameters with ``requires_grad`` (what an optimiser would update)."""
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))

