"""A causal multi-head self-attention written with plain torch ops: the README's
``tverify check attention --module examples/my_attn.py:MyAttention --causal`` (exit 0).

The checker builds it with no arguments (or ``dim=D`` with ``--dim D``), calls it as ``obj(x)`` with
``x`` of shape ``(batch, T, dim)`` and compares the output with softmax attention on the weights it
finds here: a fused ``qkv`` projection (queries, keys, values stacked in that order, as GPT-2 and timm
do), the output projection ``proj`` and ``num_heads`` heads.
"""

import math

import torch
from torch import nn


class MyAttention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, _ = x.shape
        split = self.qkv(x).reshape(batch, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        queries, keys, values = split.unbind(0)  # each (batch, heads, length, head_dim)
        logits = torch.einsum("bhtd,bhsd->bhts", queries, keys) / math.sqrt(self.head_dim)
        ahead = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), diagonal=1)
        attn = logits.masked_fill(ahead, -math.inf).softmax(dim=-1)
        mixed = torch.einsum("bhts,bhsd->bhtd", attn, values).transpose(1, 2).reshape(batch, length, -1)
        return self.proj(mixed)
