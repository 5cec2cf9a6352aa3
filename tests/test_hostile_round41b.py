"""Hostile pass 35, tester B: reproducers of the findings (check attention's verdicts). Each was a strict xfail until
fixed (both pass now); each builds its own files in tmp_path."""

from __future__ import annotations

import textwrap

import pytest

from cli_helpers import tv_here

#: a float64 causal attention whose logit scale is 3/√d_k and whose query weights are tiny (1e-9): every operation in
#: float64, nothing rounded to float32
SMALL_Q_X3 = textwrap.dedent("""
    import math, torch, torch.nn as nn
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            D, H = 16, 2
            self.embed_dim, self.num_heads, self.dk = D, H, D // H
            self.q_proj, self.k_proj = nn.Linear(D, D), nn.Linear(D, D)
            self.v_proj, self.o_proj = nn.Linear(D, D), nn.Linear(D, D)
            with torch.no_grad():
                self.q_proj.weight.mul_(1e-9); self.q_proj.bias.zero_()
        def forward(self, x):
            B, T, D = x.shape; H, dk = self.num_heads, self.dk
            q = self.q_proj(x).view(B, T, H, dk).transpose(1, 2)
            k = self.k_proj(x).view(B, T, H, dk).transpose(1, 2)
            v = self.v_proj(x).view(B, T, H, dk).transpose(1, 2)
            s = q @ k.transpose(-1, -2) * (3.0 / math.sqrt(dk))
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
""")


def test_float64_module_with_wrong_scale_not_called_float32(tmp_path):
    (tmp_path / "att.py").write_text(SMALL_Q_X3)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--causal", "--quick")
    assert r.returncode == 1, r.stdout[-2000:]
    verdict = [ln for ln in r.stdout.splitlines() if ln.startswith("verdict:")][0]
    assert "scale_1_over_sqrt_dk" in verdict
    # the module computes every operation in float64: no property may say it computes in float32
    assert "precision_as_declared" not in verdict, verdict
    assert "computes in float32" not in r.stdout


def test_bare_multihead_attention_with_key_padding(tmp_path):
    (tmp_path / "mha.py").write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        def mha():
            torch.manual_seed(0)
            return nn.MultiheadAttention(16, 2, batch_first=True)
    """))
    r = tv_here(tmp_path, "check", "attention", "--module", "mha.py:mha", "--mask-convention", "drop", "--quick")
    assert "SelfMHA" not in r.stderr + r.stdout, r.stderr
    # nn.MultiheadAttention's key_padding_mask is the drop convention: correct attention, ok (exit 0)
    assert r.returncode == 0, (r.returncode, r.stderr[-800:], r.stdout[-1500:])
