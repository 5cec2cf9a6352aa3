"""Attention modules for ``tests/test_sanity_attention.py`` and the README examples: one correct
causal attention written with plain torch ops, and deliberately broken variants."""

import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with plain torch ops (x: (batch, T, dim))."""

    def __init__(self, dim: int = 16, heads: int = 2, *, leak: int = 0, scale: bool = True, axis: int = -1):
        super().__init__()
        self.dim, self.num_heads = dim, heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.leak, self.use_scale, self.axis = leak, scale, axis

    def forward(self, x):
        B, T, D = x.shape
        h = self.num_heads
        q, k, v = (m(x).view(B, T, h, D // h).transpose(1, 2) for m in (self.q, self.k, self.v))
        s = q @ k.transpose(-1, -2)
        if self.use_scale:
            s = s / math.sqrt(D // h)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(self.leak)
        s = s.masked_fill(~allowed, float("-inf"))
        a = torch.softmax(s, dim=self.axis).nan_to_num(0.0)
        return self.o((a @ v).transpose(1, 2).reshape(B, T, D))


class SingleHead(nn.Module):
    """One-head, non-causal attention returning its weights (like nn.MultiheadAttention)."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.dim = dim
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False) for _ in range(3))

    def forward(self, x):
        a = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) / math.sqrt(x.shape[-1]), -1)
        return a @ self.v(x), a


class Anonymous(nn.Module):
    """Single-head attention whose weights have no recognisable names (fitted mapping)."""

    def __init__(self, dim: int = 6):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.a = nn.Parameter(torch.randn(dim, dim, 2, generator=g) / dim)
        self.b = nn.Parameter(torch.randn(dim, dim, generator=g) / math.sqrt(dim))

    def forward(self, x):
        s = torch.einsum("btd,dek,bse->bts", x, self.a, x)
        return torch.softmax(s, -1) @ (x @ self.b)


def leaky():
    """Causal attention in which token t also sees token t+1."""
    return CausalSelfAttention(16, 2, leak=1)


def no_scale():
    return CausalSelfAttention(16, 2, scale=False)


def wrong_axis():
    return CausalSelfAttention(16, 1, axis=-2)


class Naive(SingleHead):
    """exp without subtracting the row maximum: NaN at large logits."""

    def forward(self, x):
        s = self.q(x) @ self.k(x).transpose(-1, -2) / math.sqrt(x.shape[-1])
        e = torch.exp(s)
        return (e / e.sum(-1, keepdim=True)) @ self.v(x)


def nan_out(x):
    return x * float("nan")


def raises(x):
    raise RuntimeError("boom at the probe")


def wrong_shape(x):
    return x[:, :-1]


def wrong_dtype(x):
    return x.float()


def mha():
    """nn.MultiheadAttention wrapped as a self-attention map (batch_first)."""
    m = nn.MultiheadAttention(12, 3, batch_first=True)
    return lambda x: m.to(x.dtype)(x, x, x, need_weights=False)[0]


class MHAWrapper(nn.Module):
    def __init__(self, dim: int = 12):
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, 3, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)
