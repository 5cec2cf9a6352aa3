"""Hostile pass 38, tester B: reproducers (each xfails on the frozen code, strict)."""

import pytest

from cli_helpers import tv_here

# --- 38B F1: the outputs of redrawn inputs are judged under 16·u·(3D+T)·max(1, |logit|), far above the forward
# tolerance (float32 at huge logits: 0.062 against 1.2e-4; bfloat16 declared, unit logits: ~18 against 0.036) --------

_XS = '''import math, torch, torch.nn as nn
D, H = 16, 2
class Attn(nn.Module):
    """Causal attention, correct except in a batch of more than 16 sequences (the stacked redraw calls): a sequence
    that shares its first token with an earlier one gets its outputs from the first token where they differ on
    multiplied by FACTOR (only at logits above LMIN)."""
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)
        for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)
        self.num_heads = H; self.embed_dim = D
    def forward(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = q @ k.transpose(-1, -2) / math.sqrt(dk)
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        y = self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
        if B > 16 and float(s.masked_fill(torch.isinf(s), 0).abs().max()) > LMIN:
            f = torch.ones(B, T, dtype=y.dtype)
            for i in range(1, B):
                for j in range(i):
                    if torch.equal(x[i, 0], x[j, 0]):
                        d = (x[i] != x[j]).any(-1).int().cummax(-1).values.bool()
                        f[i] = torch.where(d, FACTOR, 1.0)
                        break
            y = y * f[:, :, None]
        return y
'''


def test_38b_f1_float32_redraw_outputs_3pct_off_not_ok(tmp_path):
    (tmp_path / "xs.py").write_text("FACTOR, LMIN = 1.03, 200.0\n" + _XS)
    r = tv_here(tmp_path, "check", "attention", "--module", "xs.py:Attn", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


def test_38b_f1b_bf16_declared_redraw_outputs_doubled_not_ok(tmp_path):
    (tmp_path / "xs.py").write_text("FACTOR, LMIN = 2.0, -1.0\n" + _XS)
    r = tv_here(tmp_path, "check", "attention", "--module", "xs.py:Attn", "--causal", "--quick",
                "--compute-dtype", "bfloat16")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]
