"""Hostile pass 46, tester A: reproducers; each failed on 4ed837d7 and passes since its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tv(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """The command in this process: each test's subject is a check's verdict or message, and the user's code runs in
    the check's isolated child either way (issue 46: no fresh interpreter, and no fresh fork server, per test)."""
    from tests.cli_helpers import tv_here

    return tv_here(tmp_path, *argv, env=env)


def _write(tmp_path: Path, name: str, source: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source))
    return p


MHA = """
import torch
from torch import nn

def plain():
    torch.manual_seed(0)
    return nn.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64)
"""


def test_f1_declared_heads_are_not_ignored_for_multihead_attention(tmp_path):
    _write(tmp_path, "mha.py", MHA)
    # the module has 2 heads; the user declares 4 (D = 16 splits into 4 heads of 4): the declared value is the one
    # checked (check-attention.md "A declared value wins"), so this cannot be ok
    r = _tv(tmp_path, "check", "attention", "--module", "mha.py:plain", "--heads", "4", "--quick", "--no-progress")
    assert "declared by you: --heads 4" in r.stdout, r.stdout + r.stderr
    assert r.returncode != 0, r.stdout[-3000:]


def test_f2_seq_len_numpy_arange_as_docs_show():
    import numpy as np
    import torch

    import proofs_checks as pc

    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    # docs/api.md: "numpy numbers are numbers (heads=np.int64(2), window=np.int64(4), seq_len=np.arange(1, 6)-style
    # lists of numpy integers)"
    r = pc.check_attention(m, seq_len=np.arange(1, 6), isolate=False)
    assert r.outcome == "ok", str(r)


def test_f3_unicode_digits_in_seq_len_and_heads_are_refused(tmp_path):
    _write(tmp_path, "mha.py", MHA)
    r = _tv(tmp_path, "check", "attention", "--module", "mha.py:plain", "--seq-len", "\u0661\u0667",
            "--heads", "\u0662", "--no-progress")
    # "--seq-len T1,T2,…: whole numbers 1 … 16384" (check-attention.md): '١٧' is read as 17 and '٢' as 2 heads,
    # printed back as "lengths 17" / "--heads 2", a reinterpretation of what was typed
    assert r.returncode == 2, r.stdout[:300]


BASE_ATTN = """
import math, torch
from torch import nn

class Base(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        torch.manual_seed(0)
        self.num_heads, self.head_dim = heads, dim // heads
        self.q_proj = nn.Linear(dim, dim); self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim); self.o_proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, T, D = x.shape
        sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = (q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)).masked_fill(
            torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, T, D))
"""

# a correct causal attention with 32 heads of size 2; its head count is kept as `nh`, a name tverify does not read
MANY_HEADS = BASE_ATTN.replace("class Base", "class ManyHeads").replace("dim=16, heads=2", "dim=64, heads=32").replace(
    "num_heads", "nh").replace("head_dim", "hd")


def test_f4_a_correct_attention_with_more_than_16_heads_is_not_refuted(tmp_path):
    _write(tmp_path, "many.py", MANY_HEADS)
    r = _tv(tmp_path, "check", "attention", "--module", "many.py:ManyHeads", "--causal", "--quick", "--no-progress")
    # check-attention.md: head counts "read from the object or, undeclared, every split whose query width is D";
    # a mismatch must name a change of declaration that fits ("another head count"); with --heads 32 it is ok
    assert r.returncode != 1 or "--heads 32" in r.stdout, r.stdout[-2500:]




def test_f5_relative_mapping_path_is_the_one_the_user_named(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    _write(tmp_path, "base_attn.py", BASE_ATTN)
    _write(tmp_path, "mod.py", f"""
        import os
        from base_attn import Base
        os.chdir({str(other)!r})

        class M(Base):
            pass
        """)
    _write(tmp_path, "hookfile.py", """
        def hook(m):
            return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 2}
        """)
    marker = tmp_path / "WRONG_HOOK_RAN"
    _write(other, "hookfile.py", f"""
        open({str(marker)!r}, "w").write("x")

        def hook(m):
            return {{"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 1}}
        """)
    r = _tv(tmp_path, "check", "attention", "--module", "mod.py:M", "--mapping", "hookfile.py:hook", "--causal",
            "--quick", "--no-progress")
    # the user named ./hookfile.py (beside mod.py, in the folder the command ran in); other/hookfile.py was never named
    assert not marker.exists(), "other/hookfile.py ran"
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-500:]


def test_f6_max_memory_given_is_the_watchdogs_limit(tmp_path):
    _write(tmp_path, "memhog.py", """
        import numpy as np, torch
        from torch import nn
        _hold = np.ones(180 * 1024 * 1024 // 8)   # 180 MB, touched, held for the whole check

        class M(nn.Module):
            def __init__(self):
                super().__init__(); torch.manual_seed(0)
                self.attn = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)

            def forward(self, x):
                return self.attn(x, x, x, need_weights=False)[0]
        """)
    r = _tv(tmp_path, "check", "attention", "--module", "memhog.py:M", "--quick", "--no-progress", "--max-memory", "0.1")
    # own-model.md: "the limit is --max-memory GB (…, for the checks' own up-front estimates and for this watchdog
    # alike …)"; the estimate says "over the limit of 102 MB (--max-memory 0.1)", the watchdog "limit of 256 MB
    # (--max-memory 0.1)". Either the given limit is enforced or the value is refused, never ok at 1.8× the limit.
    assert r.returncode == 2, r.stdout[-600:]


def test_f7_finite_output_does_not_say_all_finite_over_nan_outputs(tmp_path):
    _write(tmp_path, "base_attn.py", BASE_ATTN)
    _write(tmp_path, "naive.py", """
        import math, torch
        from base_attn import Base

        class Naive(Base):   # softmax without subtracting the row max: exp overflows at logits ~1000
            def forward(self, x):
                b, T, D = x.shape
                sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
                q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
                e = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim))
                e = e.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), 0.0)
                return self.o_proj((e / e.sum(-1, keepdim=True) @ v).transpose(1, 2).reshape(b, T, D))
        """)
    out = tmp_path / "n.json"
    r = _tv(tmp_path, "check", "attention", "--module", "naive.py:Naive", "--causal", "--quick", "--no-progress",
            "--json", str(out))
    assert r.returncode == 1, r.stderr[-500:]
    props = {p["name"]: p for p in json.loads(out.read_text())["properties"]}
    per = props["matches_reference"]["numbers"]["per_length"]
    nan_probes = [(e["T"], e["probe"]) for e in per if e["error"] is None]
    assert nan_probes, per  # the module's outputs are NaN at these probes (T = 17, 33 at huge logits)
    # check-attention.md: finite_output "no NaN/inf at any length (the lengths with NaN/inf are named …)"
    fo = props["finite_output"]
    # (fixed by scoping the row: it judges unit logits at every length and names the property of the others)
    assert not (fo["status"] == "pass" and "all outputs finite" in fo["detail"]
                and "stable_at_extreme_logits" not in fo["detail"]), (nan_probes, fo)


def test_f8_hopfield_api_device_refusal_gives_the_devices_reason():
    import numpy as np

    import proofs_checks as pc
    from theory.validation import InputError

    P = np.sign(np.random.default_rng(0).normal(size=(6, 16)))
    with pytest.raises(InputError) as e:
        pc.check_hopfield(P, beta=0.5, device="cuda")
    # the command says "--device cuda: check hopfield runs on the CPU only (…)"; the API's one line must not give a
    # reason about quick/full sizes for a keyword that names a device
    assert "quick/full" not in str(e.value), str(e.value)


def test_f9_memory_estimate_covers_the_checks_own_calls(tmp_path):
    _write(tmp_path, "mha.py", MHA)
    r = _tv(tmp_path, "check", "attention", "--module", "mha.py:plain", "--seq-len", "900", "--mask-convention", "drop",
            "--max-memory", "0.5", "--no-progress")
    # check-attention.md "Memory is estimated before anything is allocated and refused beyond --max-memory";
    # verdicts.md: sizes over --max-memory are one line, exit 2, "before anything runs". The memory is the check's
    # own (a 16-wide nn.MultiheadAttention holds nothing), so it must be refused up front or fit.
    assert "processes running your code used" not in r.stderr, r.stderr[-600:]


def test_f10_multihead_attention_bias_kv_is_named_not_silently_refuted(tmp_path):
    _write(tmp_path, "mhakv.py", """
        import torch
        from torch import nn

        def make():
            torch.manual_seed(0)
            return nn.MultiheadAttention(16, 2, add_bias_kv=True, batch_first=True, dtype=torch.float64)
        """)
    r = _tv(tmp_path, "check", "attention", "--module", "mhakv.py:make", "--quick", "--no-progress")
    # check-attention.md: what no declaration models is said in a note (GPT-OSS's sinks, clip_qkv, …) or the check
    # is inconclusive "never compared with a reference that lacks the bias" (T5's relative bias); numerics'
    # mha_to_concat already refuses add_bias_kv by name
    named = [ln for ln in r.stdout.splitlines() if ("bias_k" in ln or "add_bias_kv" in ln)
             and (ln.startswith("note:") or ln.startswith("weights:") or "to decide" in ln)]
    assert r.returncode == 3 or named, r.stdout[-1500:]


def test_f11_icl_infinite_predictions_are_not_called_batch_dependent(tmp_path):
    _write(tmp_path, "cinf.py", """
        import torch

        def const_inf(xs, ys, xq):
            return torch.full((xs.shape[0],), float("inf"), dtype=xs.dtype)
        """)
    r = _tv(tmp_path, "check", "icl", "--model", "cinf.py:const_inf", "--lambda", "1,2", "--N", "10", "--M", "10",
            "--prompts", "300", "--no-progress")
    assert r.returncode == 1, r.stdout[-800:]
    # the same +inf alone and in any batch: inf − inf is no measured change, and no batch statistic is involved
    # (own-model.md: NaN/inf outputs are their own mismatch; batch_independence names "batch statistics, or a BatchNorm
    # left in training mode")
    assert "depends on the other prompts" not in r.stdout, r.stdout[-1500:]


def test_f12_dropout_noise_is_not_called_a_future_leak(tmp_path):
    _write(tmp_path, "base_attn.py", BASE_ATTN)
    _write(tmp_path, "drop.py", """
        import torch
        from base_attn import Base

        _n = [0]

        class Intermittent(Base):
            # the causal mask is exact (masked weights stay 0); on every 11th call a dropout mask (seeded generator)
            # multiplies the attention weights: run-to-run noise, as an always-on dropout with a small rate gives
            def forward(self, x):
                b, T, D = x.shape
                sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
                q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
                s = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(
                    torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
                a = s.softmax(-1)
                _n[0] += 1
                if _n[0] % 11 == 0:
                    g = torch.Generator().manual_seed(_n[0])
                    a = a * (torch.rand(a.shape, generator=g) > 0.05).to(a.dtype) / 0.95
                return self.o_proj((a @ v).transpose(1, 2).reshape(b, T, D))
        """)
    out = tmp_path / "d.json"
    r = _tv(tmp_path, "check", "attention", "--module", "drop.py:Intermittent", "--causal", "--quick", "--no-progress",
            "--json", str(out))
    assert r.returncode == 1, r.stderr[-500:]
    props = {p["name"]: p for p in json.loads(out.read_text())["properties"]}
    assert props["deterministic"]["status"] == "fail", props["deterministic"]
    # check-attention.md: "A leak below a nondeterministic module's own noise cannot be told from it, and such noise is
    # never called a leak"; "The first four run before any other: when one fails, the others are not judged (a leak or
    # mismatch measured on such a module would be that cause, not a finding)"
    leak = props["causal_no_future_leak"]
    assert not (leak["status"] == "fail" and "LEAK" in leak["detail"]), leak["detail"][:400]


def test_f13_icl_randomness_is_not_called_batch_dependence(tmp_path):
    _write(tmp_path, "noisy.py", """
        import torch

        def noisy(xs, ys, xq):   # least squares plus run-to-run noise (dropout-like); each prompt alone decides it
            w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
            out = (xq.unsqueeze(-2) @ w).reshape(-1)
            return out + 1e-6 * torch.randn_like(out)
        """)
    r = _tv(tmp_path, "check", "icl", "--model", "noisy.py:noisy", "--lambda", "1,2", "--N", "10", "--M", "10",
            "--prompts", "300", "--no-progress")
    assert r.returncode == 1, r.stdout[-800:]
    # own-model.md: batch_independence names "batch statistics, or a BatchNorm left in training mode, read the other
    # prompts"; here no other prompt is read: the same prompt alone twice differs as much (randomness in forward)
    assert "depends on the other prompts of its batch" not in r.stdout, r.stdout[-1200:]
