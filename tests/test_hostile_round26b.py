"""Hostile pass 20 (tester b): reproducers of its findings, as strict xfails (the tree under test is 83d880e)."""
import subprocess
import sys
import textwrap

import pytest

TV = [sys.executable, "-m", "proofs_checks.cli"]

MOD = textwrap.dedent("""
    import math, torch
    from torch import nn
    class S308(nn.Module):  # the plain causal attention at the declared logit scale 1e308
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.h, self.dk, self.qkv, self.proj = heads, dim // heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, self.dk).permute(2, 0, 3, 1, 4).unbind(0)
            s = (q @ k.transpose(-1, -2)) * 1e308
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
            return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1))
""")

ICL = textwrap.dedent("""
    import torch
    def ls(xs, ys, xq):
        w = torch.linalg.lstsq(xs, ys[..., None]).solution[..., 0]
        return (w * xq).sum(-1)
""")


def _tv(tmp_path, *args, timeout=600):
    return subprocess.run([*TV, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


@pytest.mark.integration(reason="tverify in a subprocess on a user module (20-90 s)")
def test_declared_attention_at_scale_1e308_is_not_a_mismatch(tmp_path):
    (tmp_path / "m308.py").write_text(MOD)
    r = _tv(tmp_path, "check", "attention", "--module", "m308.py:S308", "--causal", "--quick", "--no-progress",
            "--scale", "1e308")
    assert "Traceback" not in r.stderr
    assert r.returncode in (0, 3), r.stdout[-2000:]


@pytest.mark.integration(reason="tverify in a subprocess on a user module (20-90 s)")
def test_icl_bfloat16_large_lambda_gives_a_verdict(tmp_path):
    (tmp_path / "iclm.py").write_text(ICL)
    r = _tv(tmp_path, "check", "icl", "--lambda", "1e20,1e20", "--N", "10", "--quick", "--model", "iclm.py:ls",
            "--compute-dtype", "bfloat16", "--no-progress")
    assert "Traceback" not in r.stderr + r.stdout
    assert r.returncode in (0, 1, 3)


ICL_X2 = ICL + textwrap.dedent("""
    def ls_x2(xs, ys, xq):
        return 2.0 * ls(xs, ys, xq)
""")


@pytest.mark.integration(reason="tverify in a subprocess on a user model (10-60 s)")
def test_icl_twice_least_squares_at_large_lambda_is_a_mismatch(tmp_path):
    (tmp_path / "iclm.py").write_text(ICL_X2)
    r = _tv(tmp_path, "check", "icl", "--lambda", "1e14,1e14", "--N", "10", "--quick", "--model", "iclm.py:ls_x2",
            "--no-progress")
    assert "Traceback" not in r.stderr
    assert r.returncode == 1, r.stdout[-1500:]
