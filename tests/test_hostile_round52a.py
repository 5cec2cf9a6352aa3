"""Hostile pass 47, tester A: reproducers; each failed on da19604 (run there as xfail, strict) and passes since its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tv(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    e["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True, env=e,
                          cwd=str(tmp_path), timeout=280)


def _here(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """The command in this process (its verdict and message are the subject; the user's module runs in the check's
    isolated child as ever): issue 46, no fresh interpreter per test."""
    from tests.cli_helpers import tv_here

    return tv_here(tmp_path, *argv)


def _write(tmp_path: Path, name: str, source: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source))
    return p


ALIBI = """
import math, torch
from torch import nn

def slopes(H):
    start = 2 ** (-8 / H)
    return [start ** (i + 1) for i in range(H)]

class Alibi(nn.Module):
    # bidirectional attention with the ALiBi bias exactly as check-attention.md writes it: -m_h * (t - s)
    # (attn-gym's generate_alibi_bias: (kv_idx - q_idx) * slope)
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.dim, self.num_heads = dim, heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, T, D = x.shape; H = self.num_heads; dk = D // H
        q = self.q_proj(x).view(B, T, H, dk).transpose(1, 2)
        k = self.k_proj(x).view(B, T, H, dk).transpose(1, 2)
        v = self.v_proj(x).view(B, T, H, dk).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dk)
        t = torch.arange(T, dtype=x.dtype)
        m = torch.tensor(slopes(H), dtype=x.dtype)[:, None, None]
        s = s - m * (t[:, None] - t[None, :])
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        return self.o_proj(y)

def make():
    torch.manual_seed(0)
    return Alibi()
"""


def test_f1_noncausal_alibi_as_documented_is_not_refuted_without_a_word(tmp_path):
    _write(tmp_path, "alibi.py", ALIBI)
    r = _here(tmp_path, "check", "attention", "--module", "alibi.py:make", "--positional", "alibi", "--quick",
            "--no-progress")
    # check-attention.md: "`--positional alibi` | ALiBi biases −m_h·(t−s) with Press et al.'s slopes": a module that
    # adds exactly that bias is the documented reference; it must be ok, or the mismatch must say that the reference
    # uses another (symmetric) bias without --causal
    out = r.stdout + r.stderr
    assert r.returncode == 0 or "|t" in out or "symmetric" in out, out[-3000:]


MAPPED = """
import math, torch
from torch import nn

class LinNoWeightGrad(torch.autograd.Function):
    # y = x W^T + b, whose backward loses the weight gradient (a custom kernel's bug)
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(w)
        return x @ w.T + b

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g @ w, torch.zeros_like(w), g.reshape(-1, g.shape[-1]).sum(0)

class M(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.H = heads
        self.a, self.b = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.c, self.d = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, T, D = x.shape; H = self.H; dk = D // H
        q = LinNoWeightGrad.apply(x, self.a.weight, self.a.bias).view(B, T, H, dk).transpose(1, 2)
        k = self.b(x).view(B, T, H, dk).transpose(1, 2)
        v = self.c(x).view(B, T, H, dk).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dk)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return self.d((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))

def make():
    torch.manual_seed(0)
    return M()

def weights(m):
    # views of the module's parameters (same storage, not copies), as the mapping hook asks
    return {"q": (m.a.weight.detach(), m.a.bias.detach()), "k": (m.b.weight.detach(), m.b.bias.detach()),
            "v": (m.c.weight.detach(), m.c.bias.detach()), "o": (m.d.weight.detach(), m.d.bias.detach()),
            "heads": 4}
"""


def test_f2_a_lost_weight_gradient_is_not_ok_behind_a_detached_view_mapping(tmp_path):
    _write(tmp_path, "mapped.py", MAPPED)
    r = _here(tmp_path, "check", "attention", "--module", "mapped.py:make", "--mapping", "mapped.py:weights",
            "--causal", "--quick", "--no-progress")
    # check-attention.md: "Return views of the module's parameters (not copies) and the parameter gradients are
    # checked too"; .detach() is such a view. The weight gradient of a.weight is 0 instead of the true one: either
    # gradients_match_reference fails, or the parameter gradients are said not to be checked; never "ok" with
    # "8 parameter gradients"
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("gradients_match_reference")), "")
    assert r.returncode != 0 or "8 parameter gradients" not in line, r.stdout[-3000:]


def test_f3_a_deleted_working_folder_is_no_traceback(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    _write(tmp_path, "attn.py", "import torch\nm = torch.nn.MultiheadAttention(8, 2, batch_first=True)\n")
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    # the shell's folder was removed under it (a branch switch, an rm -rf of a build folder): tverify starts there
    r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "attention", "--module",
                        str(tmp_path / "attn.py") + ":m", "--quick", "--no-progress"],
                       capture_output=True, text=True, env=e, cwd=str(gone), timeout=280,
                       preexec_fn=lambda: os.rmdir(gone))
    # verdicts.md: bad input is "one line on stderr and exit 2 … without a traceback"; or the check simply runs
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode in (0, 2), r.stderr[-3000:]


STATEFUL = """
import sys, torch
from torch import nn
import proofs_checks as pc

class Counting(nn.Module):
    # a causal MHA that counts its calls in a buffer (a step counter for a warm-up, a decode position)
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.step += 1
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]

torch.manual_seed(0)
m = Counting()
r = pc.check_attention(m, causal=True, seq_len=[2, 5], isolate=False)
print("OUTCOME", r.outcome, "STEP", int(m.step))
"""


def test_f4_the_callers_object_is_not_modified_in_process(tmp_path):
    script = _write(tmp_path, "stateful.py", STATEFUL)
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=e, cwd=str(tmp_path),
                       timeout=280)
    assert "OUTCOME" in r.stdout, r.stdout + r.stderr[-3000:]
    # check-attention.md "The object": "Modules are deep-copied and cast to the probe dtype; your object is not
    # modified" (and "the object and a plain copy are first called once each")
    assert "STEP 0" in r.stdout, r.stdout


RAISING_CONFIG = """
import math, torch
from torch import nn

class Attn(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.dim, self.num_heads = dim, heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    @property
    def config(self):   # e.g. read through a parent that is gone: its access raises
        raise RuntimeError("config not loaded")

    def forward(self, x):
        B, T, D = x.shape; H = self.num_heads; dk = D // H
        q = self.q_proj(x).view(B, T, H, dk).transpose(1, 2)
        k = self.k_proj(x).view(B, T, H, dk).transpose(1, 2)
        v = self.v_proj(x).view(B, T, H, dk).transpose(1, 2)
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                  float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))

def make():
    torch.manual_seed(0)
    return Attn()
"""


def test_f5_a_config_attribute_that_raises_is_a_note_not_a_refusal(tmp_path):
    _write(tmp_path, "cfg.py", RAISING_CONFIG)
    r = _here(tmp_path, "check", "attention", "--module", "cfg.py:make", "--causal", "--quick", "--no-progress")
    # check-attention.md "What is read from the module": "An attribute whose access raises, that changes between two
    # reads, or that has the wrong type … is one `note:` line naming it; it is not read, and the check goes on with
    # what you declared." The same module with --ignore-config is ok.
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


#: a 4-head attention over width 16, its q, k, v, o projections and its causal weights, that the modules below build on
_QKV = """
import math, torch
from torch import nn

class QKV(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.dim, self.num_heads = dim, heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def weights_and_values(self, x):
        B, T, D = x.shape; H = self.num_heads; dk = D // H
        q, k, v = (p(x).view(B, T, H, dk).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                  float("-inf"))
        return s.softmax(-1), v

    def forward(self, x):
        B, T, D = x.shape
        a, v = self.weights_and_values(x)
        return self.o_proj((a @ v).transpose(1, 2).reshape(B, T, D))
"""


COMPLEX_WEIGHTS = _QKV + """
class Attn(QKV):
    def forward(self, x):
        # the weights it reports are complex (a complex RoPE path left them so): rows sum to 1 + 0.3i
        a = self.weights_and_values(x)[0]
        return super().forward(x), torch.complex(a, 0.3 * a)

def make():
    torch.manual_seed(0)
    return Attn()
"""


def test_f6_complex_attention_weights_are_not_distributions(tmp_path):
    _write(tmp_path, "cw.py", COMPLEX_WEIGHTS)
    r = _here(tmp_path, "check", "attention", "--module", "cw.py:make", "--causal", "--quick", "--no-progress")
    # check-attention.md: a second element of shape (batch, [H,] T, T) is read as the attention weights, and
    # weights_are_distributions / weights_match_reference judge them; weights of 1 + 0.3i per row are no
    # distribution: a mismatch, or a one-line refusal of the dtype (as check att-svm and check icl refuse complex
    # weights rather than judging their real part) — never ok
    assert r.returncode != 0, r.stdout[-3000:]


LEARNED = _QKV + """
class LP(QKV):
    # learned absolute positions for 20 tokens (a GPT-2-like wpe of n_positions = 20)
    def __init__(self, dim=16, heads=4, n_pos=20):
        super().__init__(dim, heads)
        self.pos_emb = nn.Embedding(n_pos, dim)

    def forward(self, x):
        return super().forward(x + self.pos_emb(torch.arange(x.shape[1])))  # IndexError beyond 20 tokens

def make():
    torch.manual_seed(0)
    return LP()
"""


def test_f7_a_declared_length_is_probed_or_its_replacement_said(tmp_path):
    _write(tmp_path, "lp.py", LEARNED)
    r = _here(tmp_path, "check", "attention", "--module", "lp.py:make", "--causal", "--positional", "learned",
            "--seq-len", "5,33", "--no-progress")
    # check-attention.md "A declared value wins: A value you declare is the one checked"; the module raises at the
    # declared T = 33 (its table holds 20 positions). Either T = 33 is probed (runs_at_every_length fails), or the
    # output says that 33 was not probed and why; never a silent "lengths 5, 20" and ok.
    rest = "\n".join(ln for ln in r.stdout.splitlines() if not ln.startswith("declared by you"))
    assert r.returncode != 0 or "33" in rest, r.stdout[-3000:]


def test_f8_module_name_form_names_the_file_it_did_not_import(tmp_path):
    _write(tmp_path, "code.py", "import torch\nmake = lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True)\n")
    r = _tv(tmp_path, "check", "attention", "--module", "code:make", "--quick", "--no-progress")
    # own-model.md: "a module of yours named like a standard module is shadowed by it: rename it". The user's
    # ./code.py exists; the message says only "code has no name 'make'" (the standard library's code module was
    # imported): it should say which file was imported, or that ./code.py is shadowed (use code.py:make)
    assert r.returncode == 2
    assert "code.py" in r.stderr or "standard" in r.stderr or "shadow" in r.stderr, r.stderr


ZERO_V = _QKV + """
class Attn(QKV):
    pass

def make():
    # a correct causal attention, its value projection's weight zero-initialised (v = its bias for every token)
    torch.manual_seed(0)
    m = Attn()
    nn.init.zeros_(m.v_proj.weight)
    return m
"""


def test_f9_a_scale_the_outputs_do_not_depend_on_is_not_refuted(tmp_path):
    _write(tmp_path, "zv.py", ZERO_V)
    r = _here(tmp_path, "check", "attention", "--module", "zv.py:make", "--causal", "--quick", "--no-progress")
    # the module multiplies q·k by exactly 1/sqrt(d_k); with every value row equal its output cannot depend on the
    # scale, which the check says itself for a zero output projection ("undecided: … the outputs barely depend on
    # the scale", exit 3). Refuting it as "scale is 1/√d_k × 0.0126: off by a factor 0.0126" (exit 1) is false.
    assert r.returncode != 1, r.stdout[-3000:]


AGAINST_MHA = """
import math, torch

def mha():
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(16, 4, batch_first=True, bias=False)

class Mine(torch.nn.Module):
    # my unfused causal attention on the same weights as torch's MultiheadAttention
    def __init__(self):
        super().__init__()
        self.ref = mha()

    def forward(self, x):
        m = self.ref; B, T, D = x.shape; H = 4; dk = 4
        W = m.in_proj_weight
        q, k, v = [(x @ W[i * 16:(i + 1) * 16].T).view(B, T, H, dk).transpose(1, 2) for i in range(3)]
        s = (q @ k.transpose(-1, -2) / math.sqrt(dk)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                  float("-inf"))
        return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D) @ m.out_proj.weight.T

def mine():
    return Mine()
"""


def test_f10_against_a_bare_multihead_attention_is_called_as_self_attention(tmp_path):
    _write(tmp_path, "agm.py", AGAINST_MHA)
    r = _here(tmp_path, "check", "attention", "--module", "agm.py:mine", "--against", "agm.py:mha", "--causal",
            "--quick", "--no-progress")
    # check-attention.md "The object": a bare nn.MultiheadAttention is called as self-attention, m(x, x, x,
    # attn_mask=…) with the declared mask; as --module it is, as --against it is called obj(x) and the check stops
    # with "MultiheadAttention.forward() missing 2 required positional arguments: 'key' and 'value'"
    assert "missing 2 required positional arguments" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
