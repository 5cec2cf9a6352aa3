"""A causal multi-head self-attention written with plain torch ops: the README's
``tverify check attention --module examples/my_attn.py:MyAttention --causal`` (exit 0).

The checker builds it with no arguments (or ``dim=D`` with ``--dim D``), calls it as ``obj(x)`` with
``x`` of shape ``(batch, T, dim)`` and compares the output with softmax attention on the weights it
finds here (``q``, ``k``, ``v``, ``o``: ``nn.Linear`` layers, ``num_heads`` heads).
"""

import math

import torch
from torch import nn


class MyAttention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.dim, self.num_heads = dim, heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        h = self.num_heads
        q, k, v = (m(x).view(B, T, h, D // h).transpose(1, 2) for m in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // h)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.o((weights @ v).transpose(1, 2).reshape(B, T, D))
