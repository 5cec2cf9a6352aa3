"""Hostile pass 22 (tester b): reproducers of its findings against the frozen tree (strict xfails)."""
import json
import subprocess
import sys
import textwrap

import pytest

TV = [sys.executable, "-m", "proofs_checks.cli"]


def _tv(tmp_path, *args, timeout=300):
    env = dict(__import__("os").environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"))
    return subprocess.run([*TV, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=env)


ATT = textwrap.dedent("""
    import math, torch
    from torch import nn
    import torch.nn.functional as F

    class Base(nn.Module):
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.num_heads, self.hd = heads, dim // heads
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        def qkv_(self, x):
            b, t, _ = x.shape
            return self.qkv(x).reshape(b, t, 3, self.num_heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        def out(self, y):
            b, h, t, d = y.shape
            return self.proj(y.transpose(1, 2).reshape(b, t, h * d))

    class LeakNotLast(Base):  # exact causal attention, except on another path: the forbidden keys other than the
        MODE = "train"        # last one get the logit -34 instead of -inf (a leak of e^-34 at unit logits)
        def gate(self, x):
            if self.MODE == "train": return self.training
            if self.MODE == "grad": return torch.is_grad_enabled()
            if self.MODE == "contig": return not x.is_contiguous()
            return torch.is_inference_mode_enabled()
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            fut = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            if self.gate(x):
                last = torch.zeros(t, t, dtype=torch.bool, device=x.device); last[:, t - 1] = True
                s = s.masked_fill(fut & ~last, -34.0).masked_fill(fut & last, -math.inf)
            else:
                s = s.masked_fill(fut, -math.inf)
            return self.out(s.softmax(-1) @ v)

    class LeakGrad(LeakNotLast): MODE = "grad"
    class LeakContig(LeakNotLast): MODE = "contig"
    class LeakInf(LeakNotLast): MODE = "inf"

    class LeakLongGrad(Base):  # on the autograd path, at T > 65 only, every forbidden key gets -34
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            fut = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(fut, -34.0 if (torch.is_grad_enabled() and t > 65) else -math.inf)
            return self.out(s.softmax(-1) @ v)

    class PadGrad(Base):  # key padding (keep convention): padded keys get -34 when autograd is on
        def forward(self, x, mask):
            q, k, v = self.qkv_(x)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(~mask.bool()[:, None, None, :], -34.0 if torch.is_grad_enabled() else -math.inf)
            return self.out(s.softmax(-1) @ v)

    class MaskWriter(Base):  # correct outputs, then it overwrites the caller's key-padding mask
        def forward(self, x, mask):
            q, k, v = self.qkv_(x)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()[:, None, None, :])
            mask.fill_(True if mask.dtype == torch.bool else 1)
            return self.out(y)
""")


@pytest.mark.parametrize("name", ["LeakNotLast", "LeakGrad", "LeakContig", "LeakInf"])
def test_a_leak_on_another_path_from_any_forbidden_key_is_a_mismatch(tmp_path, name):
    (tmp_path / "m.py").write_text(ATT)
    r = _tv(tmp_path, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick", "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


def test_a_leak_on_the_grad_path_at_long_lengths_is_a_mismatch(tmp_path):
    (tmp_path / "m.py").write_text(ATT)
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:LeakLongGrad", "--causal", "--seq-len", "5,113",
            "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


def test_a_key_padding_leak_on_the_grad_path_is_a_mismatch(tmp_path):
    (tmp_path / "m.py").write_text(ATT)
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:PadGrad", "--mask-convention", "keep", "--quick",
            "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


def test_a_module_writing_into_the_mask_is_a_mismatch(tmp_path):
    (tmp_path / "m.py").write_text(ATT)
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:MaskWriter", "--mask-convention", "keep", "--quick",
            "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


ICL = textwrap.dedent("""
    import torch
    LAM = torch.tensor([1.0, 2.0], dtype=torch.float64); N = 10

    def gamma_inv():
        G = (1 + 1 / N) * torch.diag(LAM) + LAM.sum() / N * torch.eye(2, dtype=torch.float64)
        return torch.linalg.inv(G)

    class NanW(torch.nn.Module):  # right predictions (the Γ_N^{-1} step); the exposed Wkq holds a NaN
        def __init__(self):
            super().__init__()
            W = torch.zeros(3, 3, dtype=torch.float64); W[:2, :2] = gamma_inv(); W[0, 0] = float("nan")
            P = torch.zeros(3, 3, dtype=torch.float64); P[2, 2] = 1.0
            self.Wkq, self.Wpv = torch.nn.Parameter(W), torch.nn.Parameter(P)
        def forward(self, xs, ys, xq):
            h = (ys.unsqueeze(-1) * xs).mean(-2)
            return ((xq @ gamma_inv()) * h).sum(-1)
""")


def test_icl_model_exposing_nan_weights_is_not_ok(tmp_path):
    (tmp_path / "lsa.py").write_text(ICL)
    r = _tv(tmp_path, "check", "icl", "--model", "lsa.py:NanW", "--lambda", "1,2", "--N", "10", "--M", "10",
            "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]
