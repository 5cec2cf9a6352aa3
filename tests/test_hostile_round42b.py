"""Hostile pass 36, tester B: reproducers of the findings (check attention's verdicts, plugin claims, comparison
helpers). Each was a strict xfail until fixed; each builds its own files in tmp_path."""

from __future__ import annotations

import textwrap

import pytest

from cli_helpers import causal_attn, tv_here

#: a seeded causal attention (q/k/v/o projections found by name; cli_helpers.causal_attn); subclasses override forward
BASE = causal_attn(16, 2)

#: a buggy cache keyed on the input's shape and the first token of each sample: a call whose first tokens equal
#: the previous call's returns the previous call's output (wrong by O(1) for every other token redrawn)
STALE = BASE + textwrap.dedent("""
    class StaleFirstTok(Attn):
        def forward(self, x):
            key = (tuple(x.shape), x.dtype, x[:, 0].detach().clone())
            c = getattr(self, "_c", None)
            if c is not None and c[0][0] == key[0] and c[0][1] == key[1] and torch.equal(c[0][2], key[2]):
                return c[1].clone()
            out = super().forward(x)
            self._c = (key, out.detach().clone())
            return out
""")


def test_stale_cache_keyed_on_first_token_is_not_ok(tmp_path):
    (tmp_path / "att.py").write_text(STALE)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:StaleFirstTok", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


#: a key/value cache reused whenever the first token of each sample matches the previous call's (a prefix check
#: that compares token 0 only): the keys and values of every later token are stale, wrong by O(1)
KV_BUG = BASE + textwrap.dedent("""
    class KVCacheBug(Attn):
        causal = True
        def forward(self, x):
            B, T, _ = x.shape; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q = sp(self.q_proj(x)); k, v = sp(self.k_proj(x)), sp(self.v_proj(x))
            c = getattr(self, "_kv", None)
            if c is not None and c[0].shape == x.shape and c[0].dtype == x.dtype and torch.equal(c[0][:, 0], x[:, 0]):
                k, v = c[1], c[2]
            else:
                self._kv = (x.detach().clone(), k.detach(), v.detach())
            s = q @ k.transpose(-1, -2) / math.sqrt(dk)
            if self.causal:
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    class KVCacheBugNC(KVCacheBug):
        causal = False
""")


@pytest.mark.parametrize("cls,flags", [("KVCacheBug", ("--causal",)), ("KVCacheBugNC", ())])
def test_stale_kv_cache_is_not_ok(tmp_path, cls, flags):
    (tmp_path / "att.py").write_text(KV_BUG)
    r = tv_here(tmp_path, "check", "attention", "--module", f"att.py:{cls}", *flags, "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


#: the output written into one buffer the module keeps: every call returns the same tensor object, so a second
#: call overwrites the output the caller holds from the first
ALIAS = BASE + textwrap.dedent("""
    class Alias(Attn):
        def forward(self, x):
            out = super().forward(x)
            b = getattr(self, "_buf", None)
            if b is None or b.shape != out.shape or b.dtype != out.dtype:
                self._buf = b = torch.empty_like(out)
            b.copy_(out)
            return b
""")


def test_reused_output_buffer_is_said_in_a_warning_each_calls_values_judged(tmp_path):
    """36B F2, decided: a module returning one buffer it overwrites (static output buffers, as CUDA-graph inference code
    keeps) computes right values at each call, which the check judges as returned (docs/check-attention.md); that a
    later call overwrites an earlier output is said in a warning line."""
    (tmp_path / "att.py").write_text(ALIAS)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Alias", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0 and "output buffer that its next call overwrites" in r.stdout + r.stderr, r.stdout[-1500:]


OUT_F32 = BASE + textwrap.dedent("""
    class OutF32(Attn):
        def forward(self, x):
            return super().forward(x).float()
""")


def test_lost_dtype_is_a_mismatch_not_a_usage_error(tmp_path):
    (tmp_path / "att.py").write_text(OUT_F32)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:OutF32", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stderr[-800:])
    assert "dtype_and_device_preserved" in r.stdout
