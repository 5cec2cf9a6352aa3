"""Hostile pass 59, tester A: reproducers, each failing on d55fc85 (run there as xfail, strict)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.test_hostile_round53a import _here, _write  # the same in-process command and writer

# a correct causal attention (4 heads, d_k = 4, D = 16) taking a key-padding mask (keep: True attends), whose
# ``pad`` applies the mask AFTER the softmax and renormalises: equal to a masked softmax until the allowed keys'
# probabilities all underflow at huge logits, where 0/0 gives NaN at real positions (a real defect of the module)
PADDED = """
import math, torch
from torch import nn

class Attn(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        torch.manual_seed(0)
        self.dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def pad(self, s, m):
        p = s.softmax(-1) * m
        return p / p.sum(-1, keepdim=True)

    def forward(self, x, mask):
        b, T, _ = x.shape
        sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        p = self.pad(s, mask[:, None, None, :])
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, T, -1))
"""


def _padded(tmp_path: Path, convention: str) -> subprocess.CompletedProcess:
    """``check attention --module pad.py:Attn --causal --quick --mask-convention CONVENTION`` from ``tmp_path``."""
    _write(tmp_path, "pad.py", PADDED)
    r = _here(tmp_path, "check", "attention", "--module", "pad.py:Attn", "--causal", "--quick", "--no-progress",
              "--mask-convention", convention)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def _row(r: subprocess.CompletedProcess, prop: str) -> str:
    return next((ln for ln in r.stdout.splitlines() if ln.startswith(prop + " ")), "")


def test_1_a_nan_padding_move_is_not_called_an_inverted_convention_nor_said_twice(tmp_path):
    r = _padded(tmp_path, "keep")
    assert r.returncode == 1, r.stdout[-1500:]  # the mismatch itself is right: NaN at real positions
    row = _row(r, "matches_reference_with_grad")
    assert row, r.stdout[-3000:]
    assert row.count("the error is not finite (NaN/inf)") <= 1, row
    kp = _row(r, "key_padding_respected")
    assert "may be inverted" not in kp, kp  # the keep convention given is the module's own
