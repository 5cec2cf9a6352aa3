"""Hostile pass 28, tester B: reproducers, each a strict xfail until fixed."""
import textwrap

import pytest
from cli_helpers import SEEDED_INIT, tv_here

ATT = textwrap.dedent('''
    import math, torch, torch.nn as nn
    D, H = 16, 4
    class Attn(nn.Module):
        @SEEDED_INIT@
        def scores(self, x):
            B, T, _ = x.shape; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            return q @ k.transpose(-1, -2) / math.sqrt(dk), v
        def finish(self, s, v, B, T):
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (x.dtype == torch.float32 and T == 5):  # a float32 caller at T = 5 gets no causal mask at all
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
    class GradNoReq(Attn):
        # the plain call path (autograd on, the input not requiring grad): no causal mask
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (torch.is_grad_enabled() and not x.requires_grad):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
    class InfMode64(Attn):
        # correct, but under torch.inference_mode() (the serving path) the output is cast to float64
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            out = self.finish(s, v, B, T)
            return out.double() if torch.is_inference_mode_enabled() else out
    class InfNumpy(InfMode64):
        # under torch.inference_mode() the output is a NumPy array (not a tensor)
        def forward(self, x):
            out = super().forward(x)
            return out.detach().numpy() if torch.is_inference_mode_enabled() else out
''').replace("    @SEEDED_INIT@", "    " + SEEDED_INIT)


def test_float32_call_unmasked_at_t5_is_mismatch(tmp_path):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--causal", "--quick")
    assert r.returncode == 1 and "dtype_and_device_preserved" in r.stdout, r.stdout[-2000:]


def test_leak_on_plain_grad_path_is_mismatch(tmp_path):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:GradNoReq", "--causal", "--quick")
    assert r.returncode == 1, r.stdout[-2000:]


def test_float64_output_under_inference_mode_is_mismatch(tmp_path):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:InfMode64", "--causal", "--dtype", "float32",
                "--quick")
    assert r.returncode == 1 and "dtype_and_device_preserved" in r.stdout, r.stdout[-2000:]


def test_numpy_output_under_inference_mode_is_not_ok(tmp_path):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:InfNumpy", "--causal", "--quick")
    assert r.returncode in (1, 2), r.stdout[-2000:]
