"""Hostile pass 48, tester A: reproducers; each failed on 2b4060f (run there as xfail, strict) and passes since its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict:
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    e["PYTHONPATH"] = str(ROOT)
    return e


def _tv(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=str(tmp_path), timeout=280)


def _py(tmp_path: Path, script: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(tmp_path),
                          cwd=str(cwd or tmp_path), timeout=280)


def _here(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """The command in this process (its verdict and message are the subject; the user's module runs in the check's
    isolated child as ever): issue 46, no fresh interpreter per test."""
    from tests.cli_helpers import tv_here

    return tv_here(tmp_path, *argv)


def _write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(textwrap.dedent(source))
    return p


ATTN = """
import math, torch
from torch import nn

class Attn(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        torch.manual_seed(0)
        self.dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1))
"""


def test_f1_an_optional_dependency_name_beside_the_script_is_not_run_by_the_check(tmp_path):
    proj = tmp_path / "proj"
    _write(proj, "attn.py", ATTN)
    # a file of the user's named like an optional dependency the environment does not install (SymPy tries gmpy2)
    _write(proj, "gmpy2.py", f"open({str(tmp_path / 'RAN')!r}, 'w').write('gmpy2.py ran')\n")
    script = _write(proj, "run.py", """
        from proofs_checks.api import check_attention
        from attn import Attn
        print("OUTCOME", check_attention(Attn(), causal=True, mode="quick").outcome)
    """)
    r = _py(tmp_path, script, cwd=proj)
    # own-model.md "Nothing runs that you did not ask for": the same module checked by the command from this folder
    # runs and is ok; the script never imports sympy (nor gmpy2) itself. Bad input would be one line, no traceback.
    assert not (tmp_path / "RAN").exists(), r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "OUTCOME ok" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])


MAPPED = ATTN + """

def weights(m):
    D = m.dim
    W, b = m.qkv.weight, m.qkv.bias
    # the query rows as a detached copy (a mapping written under no_grad / with .detach().clone()), k and v as views
    return {"q": (W[:D].detach().clone(), b[:D].detach().clone()), "k": (W[D:2 * D], b[D:2 * D]),
            "v": (W[2 * D:], b[2 * D:]), "o": m.proj, "heads": 4}
"""


def test_f2_a_correct_module_is_no_mismatch_when_its_mapping_copies_a_slice(tmp_path):
    _write(tmp_path, "mapped.py", MAPPED)
    r = _here(tmp_path, "check", "attention", "--module", "mapped.py:Attn", "--mapping", "mapped.py:weights",
            "--causal", "--quick", "--no-progress")
    # the module is correct softmax attention (the same module without --mapping is ok, and a mapping copying the
    # whole fused weight is ok with its gradient "not judged"); a copied slice must not make it a mismatch
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (0, 3), r.stdout[-3000:]
    assert "violates: gradients_match_reference" not in r.stdout, r.stdout[-3000:]


def test_f3_a_softcap_beyond_float32_is_refused_or_checked(tmp_path):
    _write(tmp_path, "attn.py", ATTN)
    r = _here(tmp_path, "check", "attention", "--module", "attn.py:Attn", "--causal", "--quick", "--dtype", "float32",
            "--softcap", "1e39", "--no-progress")
    # check-attention.md: every declared field is validated once, "before the module is imported or run", a bad value
    # being one line, exit 2; a softcap of 1e39 caps nothing the module computes (C·tanh(s/C) = s to rounding), so a
    # value the check accepts must let it judge the module (ok), not leave every comparison with a NaN tolerance
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (0, 2), r.stdout[-3000:]


def test_f4_the_undecided_reason_does_not_blame_t_1_when_longer_lengths_ran(tmp_path):
    _write(tmp_path, "ident.py", """
        import torch
        def ident(x):
            return 2 * x   # no mixing of tokens at all: each output row is its own token's (one-hot weights)
    """)
    r = _here(tmp_path, "check", "attention", "--module", "ident.py:ident", "--dim", "8", "--quick", "--no-progress")
    # check-attention.md: inconclusive "says what would decide it"; "lengths too short for it (--seq-len 1: no pair
    # of tokens)" is the reason for a run limited to T = 1 — here lengths 1, 2, 5, 17, 33 were probed
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "lengths 1, 2, 5, 17, 33" in r.stdout, r.stdout[-3000:]
    assert "matches_reference: T = 1: no logit differences to fit" not in r.stdout, r.stdout[-3000:]


def _flagged(init: str = "") -> str:
    """The body of a class whose instances turn on a flag ``fast`` (the class default False) left out of pickling and
    deep copies, so that a copy computes otherwise than the instance; ``init``: more lines of its ``__init__``."""
    return f"""    fast = False                      # the class default; every instance turns it on

    def __init__(self):
        super().__init__()
        self.fast = True
{init}
    def __getstate__(self):           # a runtime flag left out of pickling / deep copies
        d = dict(self.__dict__)
        d.pop("fast", None)
        return d
"""

FLAGGED = ATTN + """

class Fast(Attn):
""" + _flagged() + """
    def forward(self, x):
        y = super().forward(x)
        if self.fast and x.shape[1] > 40:  # the long-sequence path of the object itself leaks the last token
            y = y + 1e-3 * x[:, -1:, :]
        return y

def make():
    return Fast()
"""


def test_f5_a_copy_that_differs_only_at_long_lengths_is_not_judged_ok(tmp_path):
    _write(tmp_path, "flagged.py", FLAGGED)
    r = _here(tmp_path, "check", "attention", "--module", "flagged.py:make", "--causal", "--seq-len", "2,5,64",
            "--no-progress")
    # check-attention.md "The object": "Since the copy is what is judged … a copy that computes otherwise (a
    # __getstate__ that leaves out a flag the forward reads …) is refused, exit 2". The object as given moves output 0
    # by 1e-3 when token 63 changes at T = 64 (a causal leak); its copy does not. Refused (2) or a mismatch (1),
    # never ok.
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (1, 2), r.stdout[-3000:]


def test_f6_a_wrong_mask_convention_on_a_bare_mha_is_not_blamed_on_its_axes(tmp_path):
    _write(tmp_path, "mha.py", """
        import torch
        torch.manual_seed(0)
        m = torch.nn.MultiheadAttention(16, 2)   # torch's default layout (T, batch, D)
    """)
    drop = _here(tmp_path, "check", "attention", "--module", "mha.py:m", "--causal", "--quick", "--mask-convention",
               "drop", "--no-progress")
    assert drop.returncode == 0, drop.stdout[-3000:]  # the check calls it in its own layout: its axes are right
    r = _here(tmp_path, "check", "attention", "--module", "mha.py:m", "--causal", "--quick", "--mask-convention", "keep",
            "--no-progress")
    # check-attention.md: a bare nn.MultiheadAttention is called "in its documented layout ((T, batch, D) unless
    # batch_first)"; the mismatch here is the declared convention (torch's key_padding_mask is True = padding), which
    # key_padding_respected's row itself suspects; the verdict's hint must not send the user to change the axes
    assert r.returncode == 1, r.stdout[-3000:]
    assert "batch and time axes are mixed" not in r.stdout, r.stdout[-3000:]
    # and it says the cause: torch's documented meaning of a boolean key_padding_mask (left noticed in pass 48)
    assert "reads a boolean key_padding_mask as True = padding" in r.stdout, r.stdout[-3000:]


ICL_FLAG = """
import torch

class LS(torch.nn.Module):
""" + _flagged('        self.w = torch.nn.Parameter(torch.ones(1))\n') + """
    def forward(self, xs, ys, xq):
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        p = (xq.unsqueeze(-2) @ w).reshape(-1) * self.w
        return p * 1.5 if self.fast else p       # the object predicts 1.5 x least squares
"""


def test_f7_check_icl_model_does_not_judge_a_copy_that_computes_otherwise(tmp_path):
    _write(tmp_path, "iclflag.py", ICL_FLAG)
    script = _write(tmp_path, "run.py", """
        import sys
        sys.path.insert(0, sys.argv[1])
        import torch, iclflag
        from proofs_checks.api import check_icl_model
        m = iclflag.LS()
        xs = torch.randn(4, 10, 2, dtype=torch.float64); ys = torch.randn(4, 10, dtype=torch.float64)
        xq = torch.randn(4, 2, dtype=torch.float64)
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        print("RATIO", float((m(xs, ys, xq) / (xq.unsqueeze(-2) @ w).reshape(-1)).mean()))
        try:
            r = check_icl_model(m, lambdas="1,2", N=10, M=10, mode="quick", isolate=False)
            print("OUTCOME", r.outcome, r.closest_algorithm)
        except Exception as exc:
            print("REFUSED", type(exc).__name__, exc)
    """)
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True,
                       env=_env(tmp_path), cwd=str(tmp_path), timeout=280)
    assert "RATIO 1.5" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])  # the object itself: 1.5 x least squares
    # verdicts.md: "ok … every central property ran and held"; check-attention.md refuses a copy that computes
    # otherwise than the object ("the copy is what is judged"): the object here is not least squares
    assert "OUTCOME ok least_squares" not in r.stdout, r.stdout[-2000:]


HOP_FLAG = """
import torch

class U(torch.nn.Module):
""" + _flagged('        self.register_buffer("one", torch.ones((), dtype=torch.float64))\n') + """
    def forward(self, xi, patterns, beta):
        b = beta / 4 if self.fast else beta       # the object: the update at beta / 4 (not the modern update)
        return torch.softmax(b * xi @ patterns.T, -1) @ patterns * self.one

u = U()
"""


def test_f8_check_hopfield_does_not_judge_a_copy_that_computes_otherwise(tmp_path):
    import numpy as np

    _write(tmp_path, "hopflag.py", HOP_FLAG)
    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).normal(size=(12, 16))))
    cls = _here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "0.5", "--module", "hopflag.py:U",
              "--no-progress")
    assert cls.returncode == 1, cls.stdout[-2000:]  # the class, instantiated by the check: the beta/4 update is seen
    r = _here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "0.5", "--module", "hopflag.py:u",
            "--no-progress")
    # own-model.md: the check judges "your update"; verdicts.md "ok … every … property ran and held". The instance u
    # computes exactly what U() computes: refused (2) or a mismatch (1), never ok
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (1, 2), r.stdout[-2000:]


AGAINST_FLAG = ATTN + """

class Ref(Attn):
""" + _flagged() + """
    def forward(self, x):
        y = super().forward(x)
        return y * 1.01 if self.fast else y   # the second implementation, as built, differs by 1 % everywhere

def mod():
    return Attn()

def ref():
    return Ref()
"""


def test_f9_an_against_whose_copy_computes_otherwise_is_not_ok(tmp_path):
    _write(tmp_path, "agflag.py", AGAINST_FLAG)
    r = _here(tmp_path, "check", "attention", "--module", "agflag.py:mod", "--against", "agflag.py:ref", "--causal",
            "--quick", "--no-progress")
    # check-attention.md, differential mode: "compares two implementations … on the same probes"; the object ref()
    # returns computes 1.01 x the module's output (same seed, same weights): refused (2) or a mismatch (1), never ok
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (1, 2), r.stdout[-3000:]
