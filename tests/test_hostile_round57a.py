"""Hostile pass 57, tester A: reproducers, each failing on a755dd5 (run there as xfail, strict)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


from tests.test_hostile_round53a import _env, _write  # the same environment and writer
from tests.test_hostile_round54a import BASE

# a correct causal attention A (4 heads, D = 16) under the names the weight finder reads: pass 54a's, its softmax in
# ``probs(s, T)`` for subclasses to change
ATTN = BASE + """

class A(Base):
    pass
"""


def _check(tmp_path: Path, pythonpath: Path, *argv: str) -> subprocess.CompletedProcess:
    """``tverify check attention ARGV --causal --quick`` from ``tmp_path`` with ``pythonpath`` on ``$PYTHONPATH``."""
    env = _env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(pythonpath)])
    r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "attention", *argv, "--causal", "--quick",
                        "--no-progress"], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=280)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def test_1_against_in_another_folder_imports_what_pythonpath_provides(tmp_path):
    _write(tmp_path / "v1", "attn.py", ATTN)
    # the reference builds the implementation (found through $PYTHONPATH) and computes attention on its weights itself
    _write(tmp_path / "v2", "ref.py", """
        import torch
        from torch import nn
        from attn import A

        class Ref(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = A()

            def forward(self, x):
                m, (b, T, _) = self.m, x.shape
                sp = lambda t: t.view(b, T, 4, 4).transpose(1, 2)
                q, k, v = sp(m.q_proj(x)), sp(m.k_proj(x)), sp(m.v_proj(x))
                s = (q @ k.transpose(-1, -2) / 2).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
                return m.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, T, -1))
    """)
    alone = _check(tmp_path, tmp_path / "v1", "--module", "v2/ref.py:Ref")
    assert alone.returncode == 0, alone.stdout[-1500:] + alone.stderr[-1500:]
    # own-model.md: "what $PYTHONPATH holds is imported as Python's rules say"
    r = _check(tmp_path, tmp_path / "v1", "--module", "v1/attn.py:A", "--against", "v2/ref.py:Ref")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]


def test_2_a_library_below_the_modules_folder_is_imported_once(tmp_path):
    lib = tmp_path / "proj" / "lib"
    # like a C extension (torch in proj/.venv: "SystemError: ... bad call flags"), it cannot initialise twice
    _write(lib / "onceonly", "__init__.py", """
        import sys
        if getattr(sys, "_onceonly_loaded", False):
            raise ImportError("onceonly: already initialised in this process (loaded twice)")
        sys._onceonly_loaded = True
    """)
    _write(tmp_path / "proj", "attn.py", "import onceonly\n" + ATTN)
    _write(tmp_path / "ref", "ref.py", "import onceonly\n" + ATTN)
    r = _check(tmp_path, lib, "--module", "proj/attn.py:A", "--against", "ref/ref.py:A")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]


def test_3_a_second_files_own_path_additions_stay(tmp_path):
    _write(tmp_path / "impl", "attn.py", ATTN)
    _write(tmp_path / "ref" / "third_party", "vend.py", "SCALE = 0.5\n")
    # the reference reaches its vendored helper through a path entry it adds itself, imported where it is used
    _write(tmp_path / "ref", "ref.py", "import os, sys\n"
           "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'third_party'))\n" + ATTN.replace("/ math.sqrt(self.head_dim)", "* __import__('vend').SCALE"))
    alone = _check(tmp_path, tmp_path, "--module", "ref/ref.py:A")
    assert alone.returncode == 0, alone.stdout[-1500:] + alone.stderr[-1500:]
    r = _check(tmp_path, tmp_path, "--module", "impl/attn.py:A", "--against", "ref/ref.py:A")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]


def test_4_a_lazy_module_of_the_first_file_is_not_blamed_on_the_second(tmp_path):
    _write(tmp_path / "a", "attn.py", textwrap.dedent("""
        import sys, types

        class _Lazy(types.ModuleType):  # a lazily configured backend: an attribute not loaded yet raises
            def __getattr__(self, name):
                raise RuntimeError(f"backend not configured: cannot read {name}")

        sys.modules["lazy_backend"] = _Lazy("lazy_backend")
    """) + ATTN)
    _write(tmp_path / "b", "ref.py", ATTN)
    r = _check(tmp_path, tmp_path, "--module", "a/attn.py:A", "--against", "b/ref.py:A")
    assert "importing b/ref.py raised" not in r.stderr, r.stderr[-1500:]
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
