"""Two implementations of the same causal attention, seeded alike: ``Fast`` calls torch's fused
``scaled_dot_product_attention``, ``Reference`` spells it out. The differential check

    tverify check attention --module examples/fused.py:Fast --against examples/fused.py:Reference --causal

compares them on the same probes (forward and input gradients), each within its own precision.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class _Base(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        torch.manual_seed(0)  # both classes get the same weights
        self.num_heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim) for _ in range(4))

    def _heads(self, x):
        B, T, D = x.shape
        return [p(x).view(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)
                for p in (self.q_proj, self.k_proj, self.v_proj)]

    def _out(self, o, x):
        return self.o_proj(o.transpose(1, 2).reshape(x.shape))


class Fast(_Base):
    def forward(self, x):
        q, k, v = self._heads(x)
        return self._out(F.scaled_dot_product_attention(q, k, v, is_causal=True), x)


class Reference(_Base):
    def forward(self, x):
        q, k, v = self._heads(x)
        T = x.shape[1]
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return self._out(torch.softmax(s, dim=-1) @ v, x)
