"""Attention modules for the hints of ``tverify check attention`` (tests/test_attention_hints.py):
each is correct under one declaration and gets another, with a hint naming the right one.

``Attn`` is multi-head softmax attention with ``q_proj``/``k_proj``/``v_proj``/``o_proj`` (found by
name), a mask of ``keep`` keys (causal: the ``keep`` most recent keys; two-sided: ``t − L … t + R``),
RoPE with query and key positions starting at ``q_pos``/``k_pos``, and a working precision
``compute`` (the input and weights cast to it and the output cast back, as a module under autocast).
"""

from __future__ import annotations

import math

import torch


class Attn(torch.nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2, *, causal: bool = True, keep: int | None = None,
                 two_sided: tuple[int, int] | None = None, rope: bool = False, q_pos: int = 0, k_pos: int = 0,
                 compute: torch.dtype | None = None, scale_mul: float = 1.0, leak: bool = False,
                 scale_q_first: bool = False, open_below: int = 0):
        super().__init__()
        self.embed_dim, self.num_heads = dim, heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.causal, self.keep, self.two_sided = causal, keep, two_sided
        self.rope, self.q_pos, self.k_pos, self.compute = rope, q_pos, k_pos, compute
        self.scale_mul, self.leak, self.scale_q_first, self.open_below = scale_mul, leak, scale_q_first, open_below

    def _rope(self, t, start):
        T, d = t.shape[-2], t.shape[-1]
        inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = (torch.arange(T, dtype=torch.float64) + start)[:, None] * inv[None]
        cos, sin = ang.cos().to(t.dtype), ang.sin().to(t.dtype)
        a, b = t[..., : d // 2], t[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)

    def forward(self, x):
        dt = x.dtype
        cd = self.compute or dt
        B, T, D = x.shape
        H = self.num_heads
        xs = x.to(cd)

        def proj(lin, z):
            return z @ lin.weight.to(cd).T

        def split(z):
            return z.view(B, T, H, D // H).transpose(1, 2)

        q, k, v = split(proj(self.q_proj, xs)), split(proj(self.k_proj, xs)), split(proj(self.v_proj, xs))
        if self.rope:
            q, k = self._rope(q, self.q_pos), self._rope(k, self.k_pos)
        scale = self.scale_mul / math.sqrt(D // H)
        s = (q * scale) @ k.transpose(-1, -2) if self.scale_q_first else (q @ k.transpose(-1, -2)) * scale
        t = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        ok = torch.ones(T, T, dtype=torch.bool)
        if self.causal and T >= self.open_below:  # open_below: not causal on short inputs (a bug)
            ok &= j <= t + (1 if self.leak else 0)  # leak: one future token seen
        if self.causal:
            if self.keep is not None:
                ok &= t - j < self.keep
        if self.two_sided is not None:
            L, R = self.two_sided
            ok &= (t - j <= L) & (j - t <= R)
        s = s.masked_fill(~ok, float("-inf"))
        o = torch.softmax(s, -1) @ v
        return proj(self.o_proj, o.transpose(1, 2).reshape(B, T, D)).to(dt)


def keeps7(dim: int = 16):
    """A causal window of 7 keys (declare --window 7; --window 6 is off by one)."""
    return Attn(dim, keep=7)


def keeps11(dim: int = 16):
    """11 keys: off by one from --window 12, and not one of the usual window sizes."""
    return Attn(dim, keep=11)


def two_sided_7_6(dim: int = 16):
    """Keys t−7 … t+6 (declare --window 7,6)."""
    return Attn(dim, causal=False, two_sided=(7, 6))


def rope_q_ahead(dim: int = 16):
    """RoPE with queries at positions 1…T and keys at 0…T−1 (an off-by-one position bug)."""
    return Attn(dim, rope=True, q_pos=1, k_pos=0)


def rope_both_ahead(dim: int = 16):
    """RoPE with queries and keys both at 3…T+2: the same attention as positions 0…T−1."""
    return Attn(dim, rope=True, q_pos=3, k_pos=3)


def rope_ok(dim: int = 16):
    return Attn(dim, rope=True)


def in_float32(dim: int = 16):
    return Attn(dim, compute=torch.float32)


def in_float16(dim: int = 16):
    return Attn(dim, compute=torch.float16)


def in_bfloat16(dim: int = 16):
    return Attn(dim, compute=torch.bfloat16)


def keeps7_open_when_short(dim: int = 16):
    """7 keys, but no causal mask below T = 10: --window 7 fits at T = 17 and 33, not at T = 5."""
    return Attn(dim, keep=7, open_below=10)


def f32_scaled_q_first(dim: int = 16):
    """Correct float32 attention that scales q before q·kᵀ (as Keras's MultiHeadAttention)."""
    return Attn(dim, compute=torch.float32, scale_q_first=True)


def f32_scale_off_1pct(dim: int = 16):
    """A planted bug in float32: the logit scale 1% too large."""
    return Attn(dim, compute=torch.float32, scale_mul=1.01)


def f32_leak_one(dim: int = 16):
    """A planted bug in float32: each query also sees the next token."""
    return Attn(dim, compute=torch.float32, leak=True)
