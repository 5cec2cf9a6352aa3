"""Hostile pass 11 (tester b, the acceptance pass of issue 44): its findings F1-F5, each a minimal reproducer
(written as strict xfails by the pass, which fixed nothing; all five fixed after it, so they are plain tests now)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from proofs_checks import compare, worst
from proofs_checks.comparisons import close, relative
from tests.cli_helpers import invoke_in
from tests.tiers import moved

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "own_attention.py"


def _tverify(tmp_path, *args, timeout=600):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


# F4: complex arrays lose their imaginary part in relative/close/worst (np.asarray(..., dtype=float)): a pass.
@pytest.mark.parametrize("call", [
    lambda: relative(np.array([1 + 5j, 2]), np.array([1.0, 2.0]), 0.01, "j"),
    lambda: close(np.array([1 + 5j, 2]), np.array([1.0, 2.0]), 0.01, "j"),
    lambda: relative(torch.tensor([1 + 5j, 2 + 0j]), np.array([1.0, 2.0]), 0.01, "j"),
    lambda: compare(worst([np.complex128(3j)]), 0.1, "j"),
])
def test_complex_arrays_are_refused(call):
    with pytest.raises(TypeError):
        call()


# F3: a correct float64 update whose outputs are exactly the (half-integer) patterns is judged "float16".
def test_correct_update_on_dyadic_patterns_is_ok(tmp_path, monkeypatch):
    """The verdict and exit code of the check are the subject, not the console process: run in-process (the update
    still runs in the check's isolated child)."""
    P = np.random.default_rng(0).choice([-1.5, -0.5, 0.5, 1.5], size=(4, 8))
    np.save(tmp_path / "P.npy", P)
    r = invoke_in(tmp_path, monkeypatch, "check", "hopfield", "--patterns", "P.npy", "--beta", "50", "--module",
                 str(ROOT / "examples" / "hopfield_update.py") + ":update", "--no-progress")
    assert r.returncode == 0, r.stdout[-600:] + r.stderr[-600:]


_WRONG_GRAD = '''
import torch
from own_attention import CausalSelfAttention
class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x.clone()
    @staticmethod
    def backward(ctx, g): return 2 * g
_orig = torch.autograd.grad
def _grad(outputs, inputs, *a, **k):
    return tuple(None if r is None else torch.zeros_like(r) for r in _orig(outputs, inputs, *a, **k))
torch.autograd.grad = _grad
class WrongGrad(CausalSelfAttention):
    def forward(self, x): return _Twice.apply(super().forward(x))
'''

_JSON_REWRITE = '''
import json
from own_attention import CausalSelfAttention
_orig = json.dumps
def _fix(o):
    if isinstance(o, dict):
        if o.get("status") in ("fail", "skip"): o["status"] = "pass"
        if isinstance(o.get("error"), float): o["error"] = 0.0
        for v in o.values(): _fix(v)
    elif isinstance(o, list):
        for v in o: _fix(v)
def _d(obj, *a, **k):
    d = json.loads(_orig(obj, *a, **k))
    if isinstance(d, dict) and d.get("kind") == "sanity":
        _fix(d)
    return _orig(d, *a, **k)
json.dumps = _d
class Leak(CausalSelfAttention):
    def __init__(self, dim=16, heads=2): super().__init__(dim, heads, leak=1)
'''


# F1: torch.autograd.grad replaced (zeros for every gradient): a wrong backward was "ok".
# F2: json.dumps replaced in the check's process: the result rewritten, a leaking module "ok".
@pytest.mark.parametrize("text,name", [(_WRONG_GRAD, "WrongGrad"), (_JSON_REWRITE, "Leak")], ids=["autograd", "json"])
def test_unwatched_replacements_are_refused(tmp_path, monkeypatch, text, name):
    """The refusal (exit 2, its line) is the subject: run in-process; the replacements happen in the check's isolated
    child, where the module is imported, as from the console."""
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(textwrap.dedent(text))
    r = invoke_in(tmp_path, monkeypatch, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick", "--no-progress")
    assert r.returncode == 2 and "replaced" in r.stderr, (r.returncode, r.stdout[-400:], r.stderr[-400:])


_COMPILED = '''
import torch
from own_attention import CausalSelfAttention as C
class Compiled(C):
    def __init__(self, dim=16, heads=2):
        super().__init__(dim, heads)
        self._f = torch.compile(C.forward, backend="eager")
    def forward(self, x):
        return self._f(self, x)
'''


# F5: a correct module that calls torch.compile (importing torch._dynamo, which rebinds torch.manual_seed itself)
# was refused, exit 2, "the code replaced torch.manual_seed, torch.nn.Module.__init__ …".
@moved("torch.compile of the module in the check's process (≈ 7 s)",
       "tests/test_hostile_round14.py::test_a_module_that_imports_torch_dynamo_is_not_refused",
       "tests/test_hostile_round14.py::test_torchs_own_rewrites_are_told_from_a_users")
def test_torch_compiled_module_is_checked(tmp_path):
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(textwrap.dedent(_COMPILED))
    r = _tverify(tmp_path, "check", "attention", "--module", "m.py:Compiled", "--causal", "--quick", "--no-progress")
    assert r.returncode == 0, (r.returncode, r.stdout[-400:], r.stderr[-400:])
