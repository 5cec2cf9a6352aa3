"""Issue 44, the eleventh hostile pass (hostile pass 7): each finding fixed here reproduced as a test.

* F1: the check's guard against a module that replaces the functions tverify's comparisons call
  (hostile pass 4, N7) watched named functions of torch, numpy and math only. A leaking causal
  module was judged "ok", exit 0, when it also entered a ``TorchFunctionMode`` or a
  ``TorchDispatchMode`` (which sees every torch operation on plain tensors) zeroing subtractions, or
  rebound ``builtins.float`` (the comparisons' ``float(err)``) or ``torch.Tensor.__getattribute__``.
  Now these are refused as the named replacements are: one line, exit 2, nothing checked.
* F2: a ``builtins.float`` that is no type broke the encoding of the child's result; the child ended
  its own group and tverify said "SIGKILL, not sent by tverify (the system's out-of-memory killer
  …)". The built-ins are restored before the result is encoded; the replacement is what is said.
* F3: SIGUSR1, SIGUSR2 and SIGXCPU (a CPU-time limit) took their default action: tverify ended at
  once, leaving the checks' temporary folders (pymp-*, tverify-figures-*). They now end it as SIGTERM
  does: one line, exit 128 + the signal, cleaned up.
"""

from __future__ import annotations

import shutil

import pytest

from tests.cli_helpers import invoke, one_line_error

LEAK = '''
import torch
from own_attention import CausalSelfAttention
@PATCH@

class Leak(CausalSelfAttention):
    def forward(self, x):
        @CALL@
        return super().forward(x) + 1e-2 * torch.roll(x, -1, dims=1)  # x_{t+1} leaks into position t
'''

PATCHES = {
    "function_mode": ('''
from torch.overrides import TorchFunctionMode

class Zero(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.__sub__, torch.sub, torch.Tensor.sub) and isinstance(out, torch.Tensor):
            return out * 0
        return out

Zero().__enter__()
''', "pass", "through the torch mode"),
    "dispatch_mode": ('''
from torch.utils._python_dispatch import TorchDispatchMode

class Zero(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 0 if func is torch.ops.aten.sub.Tensor else out

Zero().__enter__()
''', "pass", "through the torch mode"),
    "builtins_float": ('''
import builtins
_f = builtins.float

class F(_f):
    def __new__(cls, x=0.0):
        if isinstance(x, torch.Tensor) and x.numel() == 1:
            return _f.__new__(cls, 0.0)
        return _f.__new__(cls, x)
''', "import builtins; builtins.float = F", "builtins.float"),
    "builtins_float_not_a_type": ('''
import builtins
_f = builtins.float

def F(x=0.0):
    return 0.0 if isinstance(x, torch.Tensor) else _f(x)
''', "import builtins; builtins.float = F", "builtins.float"),
}


@pytest.mark.parametrize("case", sorted(PATCHES))
def test_a_module_changing_what_the_comparisons_compute_is_refused(tmp_path, case):
    patch, call, named = PATCHES[case]
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "sabot.py").write_text(LEAK.replace("@PATCH@", patch).replace("@CALL@", call))
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'sabot.py'}:Leak", "--causal", "--quick",
                          "--no-progress")
    line = one_line_error(code, err)
    assert "the code replaced" in line and named in line and "nothing was checked" in line, line
    assert "SIGKILL" not in line


def test_torch_set_default_device_is_no_replacement(tmp_path):
    """torch.set_default_device enters torch's own DeviceContext mode: not a replacement of anything the
    comparisons compute (a correct module still checks ok)."""
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "dev.py").write_text("import torch\ntorch.set_default_device('cpu')\n"
                                     "from own_attention import CausalSelfAttention as Fine\n")
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'dev.py'}:Fine", "--causal", "--quick",
                            "--no-progress")
    assert code == 0 and "verdict: ok" in out, (code, out[-500:], err[-500:])


# --- F3: SIGUSR1/SIGUSR2/SIGXCPU clean up as SIGTERM does ------------------------------------------

_SIGNAL_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
import proofs_checks.cli as cli
from proofs_checks.output.report import build_output

def fill(tmp):
    (tmp / "index.html").write_text("half a report")
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))  # `kill -USR1 PID`, or a CPU-time limit, mid-write
    time.sleep(30)

cli._main = lambda argv: build_output(Path(sys.argv[1]), fill, {"command": "test"})
cli.main([])
"""


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2", "SIGXCPU"])
def test_other_ending_signals_leave_no_partial_folder(tmp_path, name):
    """Their default action ended tverify at once: `check … --report` left pymp-*/tverify-figures-* in
    $TMPDIR (and a report a hidden partial folder). Now: one line, exit 128 + the signal, nothing left."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", _SIGNAL_SCRIPT, str(tmp_path / "rep"), name], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 128 + getattr(signal, name), r.stderr
    assert r.stderr.strip().splitlines() == [
        f"tverify: terminated ({name}); nothing was written after it (earlier outputs are as they were)"]
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == []
