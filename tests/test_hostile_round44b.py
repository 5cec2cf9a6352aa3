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


# --- 38B F2: --against a factory (a function with no arguments) that returns the --module object itself --------------

_SAME = '''import torch, torch.nn as nn
class A(nn.Module):
    def __init__(self):
        super().__init__(); torch.manual_seed(0); self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
    def forward(self, x):
        T = x.shape[1]
        m = torch.ones(T, T, dtype=torch.bool).triu(1)
        return 2 * self.mha(x, x, x, attn_mask=m, need_weights=False)[0]   # wrong: outputs doubled
inst = A()
def get():
    return inst                                                            # the very same object
'''


def test_38b_f2_against_a_factory_returning_the_module_itself_is_refused(tmp_path):
    (tmp_path / "same.py").write_text(_SAME)
    r = tv_here(tmp_path, "check", "attention", "--module", "same.py:inst", "--against", "same.py:get", "--causal",
                "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, r.stdout[-1500:]


_CACHE = '''import math, torch, torch.nn as nn
D, H = 8, 2
class PrefixCache(nn.Module):
    """Causal attention with a per-sequence output cache keyed on (first token, length): a too-coarse key. A sequence
    sharing its first token and length with one seen before gets that one's outputs back (stale by O(1))."""
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)
        for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)
        self.num_heads = H; self.embed_dim = D; self.cache = {}
    def forward(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        y = self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
        rows = []
        for b in range(B):
            key = (x[b, 0].detach().cpu().numpy().tobytes(), T, x.dtype, torch.is_grad_enabled())
            if key in self.cache and not x.requires_grad:
                rows.append(self.cache[key].to(y.dtype))
            else:
                self.cache[key] = y[b].detach().clone(); rows.append(y[b])
        return torch.stack(rows)
'''


def test_38b_f1c_stale_prefix_cache_declared_bf16_not_ok(tmp_path):
    (tmp_path / "cache.py").write_text(_CACHE)
    r = tv_here(tmp_path, "check", "attention", "--module", "cache.py:PrefixCache", "--causal", "--quick",
                "--compute-dtype", "bfloat16")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


# --- 38B F3: returned attention weights with 1 % on every row's future keys pass weights_are_distributions (4·u·T in
# the declared bfloat16: 0.27) and weights_match_reference (0.0198) -------------------------------------------------

_WLEAK = '''import math, torch, torch.nn as nn
D, H = 8, 2
class WLeak(nn.Module):
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
        fut = torch.ones(T, T, dtype=torch.bool).triu(1)
        p = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(fut, float("-inf")).softmax(-1)
        y = self.o_proj((p @ v).transpose(1, 2).reshape(B, T, D))
        w = p * (1 - 0.01 * fut.any(-1, keepdim=True)) + 0.01 * fut / fut.sum(-1, keepdim=True).clamp(min=1)
        return y, w                        # the weights returned put 1 % on the future keys of every row
'''


def test_38b_f3_returned_weights_on_future_keys_not_ok(tmp_path):
    (tmp_path / "wts.py").write_text(_WLEAK)
    r = tv_here(tmp_path, "check", "attention", "--module", "wts.py:WLeak", "--causal", "--quick",
                "--compute-dtype", "bfloat16")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


# --- 38B F4: a module leaving torch's float32 matmul precision at "medium" lowers the check's own float32 reference ----

_MED = '''import math, torch, torch.nn as nn
D, H = 8, 2
class MedBatch(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)
        for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)
        self.num_heads = H; self.embed_dim = D
    def forward(self, x):
        torch.set_float32_matmul_precision("medium")        # left set: bf16 matmuls where the CPU has them
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
'''


def _medium_lowers_float32_matmuls() -> bool:
    import torch

    old = torch.get_float32_matmul_precision()
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(3, 2, 17, 4, generator=g), torch.randn(3, 2, 4, 17, generator=g)
        r = a.double() @ b.double()
        torch.set_float32_matmul_precision("medium")
        e = float(((a @ b).double() - r).abs().max() / r.abs().max())
    finally:
        torch.set_float32_matmul_precision(old)
    return e > 1e-5


@pytest.mark.skipif(not _medium_lowers_float32_matmuls(), reason="this CPU computes float32 matmuls in float32 at 'medium'")
def test_38b_f4_module_setting_matmul_precision_is_not_float32_or_finer(tmp_path):
    (tmp_path / "med.py").write_text(_MED)
    r = tv_here(tmp_path, "check", "attention", "--module", "med.py:MedBatch", "--causal", "--quick", "--dtype", "float32",
                "--seq-len", "2,5,17")
    assert "Traceback" not in r.stderr, r.stderr
    row = next((l for l in r.stdout.splitlines() if l.startswith("precision_as_declared")), "")
    assert row and " ok " not in row, row


# --- 38B F5: a correct float32 attention computed one sequence at a time is a mismatch on the non-contiguous path ----

_PERSAMPLE = '''import math, torch, torch.nn as nn
D, H = 8, 2
class PerSample(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)
        for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)
        self.num_heads = H; self.embed_dim = D
    def one(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    def forward(self, x):
        return torch.cat([self.one(x[i:i + 1]) for i in range(x.shape[0])])
'''


def test_38b_f5_correct_per_sample_float32_attention_is_ok(tmp_path):
    (tmp_path / "ps.py").write_text(_PERSAMPLE)
    r = tv_here(tmp_path, "check", "attention", "--module", "ps.py:PerSample", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]
