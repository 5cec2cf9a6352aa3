"""An attention whose weights the checker cannot find by name (one stacked parameter), and the
mapping hook that declares them: ``--mapping examples/mine.py:weights``.

    tverify check attention --module examples/mine.py:Attn --mapping examples/mine.py:weights --report attn-report

``weights(module)`` returns each projection in ``nn.Linear`` form ``(out, in)`` (views of the
parameters, so gradients are checked too), the head count and the key/value head count.
"""

import math

import torch
from torch import nn


class Attn(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.stack = nn.Parameter(torch.randn(4, dim, dim, generator=g) / math.sqrt(dim))  # q, k, v, o
        self.dim, self.h = dim, heads

    def forward(self, x):
        B, T, D = x.shape
        h = self.h
        q, k, v = (x @ self.stack[i].T for i in range(3))
        q, k, v = (t.view(B, T, h, D // h).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // h), dim=-1)
        return (a @ v).transpose(1, 2).reshape(B, T, D) @ self.stack[3].T


def weights(m: Attn) -> dict:
    return {"q": m.stack[0], "k": m.stack[1], "v": m.stack[2], "o": m.stack[3], "heads": m.h, "kv_heads": m.h}
