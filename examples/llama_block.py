"""A Llama-style attention block: rotary position embedding (RoPE, rotated halves, base 10000),
grouped-query attention (4 query heads sharing 2 key/value heads), causal, no biases, Hugging Face
weight names (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``). For

    tverify check attention --module examples/llama_block.py:make --causal --positional rope --kv-heads 2

``make`` is a factory: the checker calls it with no arguments (``dim=D`` with ``--dim D``).
"""

import math

import torch
from torch import nn


def rotate_half(t):
    a, b = t.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaLikeAttention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, kv_heads: int = 2, rope_base: float = 10000.0,
                 window: int | None = None):
        super().__init__()
        self.num_heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.rope_base, self.window = rope_base, window

    def _rope(self, t):
        T, d = t.shape[-2], t.shape[-1]
        inv = 1.0 / self.rope_base ** (torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)
        ang = torch.arange(T, dtype=torch.float64, device=t.device)[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        return t * ang.cos().to(t.dtype) + rotate_half(t) * ang.sin().to(t.dtype)

    def forward(self, x):
        B, T, D = x.shape
        h, g, hd = self.num_heads, self.kv_heads, self.head_dim
        q = self._rope(self.q_proj(x).view(B, T, h, hd).transpose(1, 2))
        k = self._rope(self.k_proj(x).view(B, T, g, hd).transpose(1, 2))
        v = self.v_proj(x).view(B, T, g, hd).transpose(1, 2)
        k, v = k.repeat_interleave(h // g, dim=1), v.repeat_interleave(h // g, dim=1)  # query head i uses kv head i // (h/g)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        i = torch.arange(T, device=x.device)
        blocked = i[None, :] > i[:, None]  # the future
        if self.window is not None:  # a sliding window of `window` keys, t - window + 1 … t
            blocked |= i[None, :] <= i[:, None] - self.window
        weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
        return self.o_proj((weights @ v).transpose(1, 2).reshape(B, T, D))


def make(dim: int = 32):
    torch.manual_seed(0)
    return LlamaLikeAttention(dim)


def make_windowed(dim: int = 32):
    """The same block with a sliding window of 16 keys (``--window 16``: query t sees keys t − 15 … t)."""
    torch.manual_seed(0)
    return LlamaLikeAttention(dim, window=16)
