"""Attention mechanics in NumPy and torch (claims ``attn.*``).

Conventions: tokens are rows, ``X ∈ R^{T×d}``; softmax over the last axis; float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "softmax_jacobian"]


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
