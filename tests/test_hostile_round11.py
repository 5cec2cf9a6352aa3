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
* F4: hostile pass 5's M6 refused control characters in a claim's own texts only: a plugin's check or
  mutant description, the justification its check computed, the exception it raised (``run``'s table,
  ``show``) and a message read from a foreign store entry were printed raw, ANSI escapes recolouring
  or clearing the terminal. Descriptions are refused at registration; computed texts and the store's
  are shown as ``\\x1b`` escapes.
* F5: ``TVERIFY_PLUGIN_CHILD=1`` in the environment (the internal mark of a plugin's own process,
  inherited or set by hand) made ``tverify run`` import plugins unprobed and run their checks in its
  own process: a check's ``os._exit(0)`` ended it with exit 0 and nothing printed. The CLI drops it.
* F6: ``--store ''`` was read as no ``--store`` (the environment's or the default store used, silently),
  where every other empty path is refused. Now one line, exit 2.
* F7: ``check attention --module m.py:A --against m.py:A`` compared the module with itself (the same
  weights, seeded alike): ``matches_against`` 0 by construction, the verdict "ok" with no reference
  compared. Refused with one line, exit 2 (also through another path or a link to the file).
* F9: ``--cluster local:W`` started Dask's workers (multiprocessing's spawn, ``python -c …``) with the
  working folder first on ``sys.path``: a ``struct.py``/``threading.py`` there ran in each worker, which
  died ("could not start 1 local Dask worker(s)", tracebacks). They start with ``PYTHONSAFEPATH=1``.
"""

from __future__ import annotations

import shutil

import pytest

from tests.cli_helpers import invoke, one_line_error
from tests.tiers import moved

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


def check_sabotaged(tmp_path, patch: str, call: str) -> tuple[int, str]:
    """``check attention`` of the leaking module :data:`LEAK` with ``patch`` at import and ``call`` in forward:
    (exit code, standard error)."""
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "sabot.py").write_text(LEAK.replace("@PATCH@", patch).replace("@CALL@", call))
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'sabot.py'}:Leak", "--causal", "--quick",
                          "--no-progress")
    return code, err


@pytest.mark.parametrize("case", sorted(PATCHES))
def test_a_module_changing_what_the_comparisons_compute_is_refused(tmp_path, case):
    patch, call, named = PATCHES[case]
    line = one_line_error(*check_sabotaged(tmp_path, patch, call))
    assert "the code replaced" in line and named in line and "nothing was checked" in line, line
    assert "SIGKILL" not in line


def assert_correct_module_ok(tmp_path, prelude: str) -> None:
    """``check attention`` of the correct causal module of tests/data/own_attention.py, imported after ``prelude``
    (code that changes torch's state the way torch itself does): ok, exit 0."""
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "fine.py").write_text(prelude + "\nfrom own_attention import CausalSelfAttention as Fine\n")
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'fine.py'}:Fine", "--causal", "--quick",
                            "--no-progress")
    assert code == 0 and "verdict: ok" in out, (code, out[-500:], err[-500:])


def test_torch_set_default_device_is_no_replacement(tmp_path):
    """torch.set_default_device enters torch's own DeviceContext mode: not a replacement of anything the
    comparisons compute (a correct module still checks ok)."""
    assert_correct_module_ok(tmp_path, "import torch\ntorch.set_default_device('cpu')")


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


# --- F4: control characters in a plugin's other texts, computed messages and the store ---------------

def _two(x):
    import numpy as np

    return 2 * np.asarray(x, dtype=float)


def _claim(check_description="2x", mutant_description="3x", justification="float64 rounding", raise_text=None):
    import numpy as np

    from proofs_checks.plugin import Check, Claim, Mutant, relative

    def fn(form, ctx):
        if raise_text is not None:
            raise RuntimeError(raise_text)
        x = ctx.rng().standard_normal(20)
        return relative(form(x), 2 * x, 1e-12, justification)

    return Claim(id="zzh11.ctl", title="2x = 2x", statement="2x = 2x", source="true", kind="identity", form=_two,
                 checks=(Check("c0", "numeric", fn, check_description),), no_symbolic="a test of the text rule",
                 mutants=(Mutant("three", "wrong constant", mutant_description, lambda x: 3 * np.asarray(x, float)),))


@pytest.mark.parametrize("part, kw", [("check 'c0': description", {"check_description": "2x \x1b[2J"}),
                                      ("mutant 'three': description", {"mutant_description": "3x \u202eevil"})])
def test_control_characters_in_a_claims_parts_are_refused_at_registration(part, kw):
    from proofs_checks.plugin import RegistryError, check_claim

    with pytest.raises(RegistryError) as e:
        check_claim(_claim(**kw))
    assert f"{part} holds the character U+" in str(e.value) and "\n" not in str(e.value)


def test_a_plugin_checks_computed_texts_come_back_visible():
    """The child's result (what `run`/`show` print for a plugin claim): escapes written out, not obeyed."""
    from proofs_checks.claims._plugins import _rebuild, short

    assert short("boom \x1b[2J\x1b[31mred\u202e") == "boom \\x1b[2J\\x1b[31mred\\u202e"
    check = _claim().checks[0]
    out = _rebuild({"name": "c0", "layer": "numeric", "result": {
        "passed": True, "error": 0.0, "tolerance": 1e-12, "justification": "J \x1b[41mred\x1b[0m"}}, check)
    assert "\x1b" not in out.result.justification and "\\x1b[41m" in out.result.justification


def test_show_writes_out_the_escapes_of_a_foreign_store_entry(tmp_path):
    import json

    store = tmp_path / "store"
    code, out, err = invoke("--store", str(store), "run", "attn.softmax_simplex", "--quick", "--no-progress")
    assert code == 0, err
    entry = store / "last" / "attn.softmax_simplex.json"
    doc = json.loads(entry.read_text())
    doc["message"] = "\x1b[2J\x1b[31mFAKE\x1b[0m \u202eevil"
    doc["checks"][0]["justification"] = "J \x1b[41mESC"
    entry.write_text(json.dumps(doc))
    code, out, err = invoke("--store", str(store), "show", "attn.softmax_simplex", "--full")
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mFAKE" in out and "J \\x1b[41mESC" in out


# --- F5: the plugin child's mark is never taken from the environment by the CLI -----------------------

def test_the_cli_drops_the_plugin_child_mark(monkeypatch):
    import os

    from proofs_checks.claims._plugins import CHILD_ENV, in_child

    monkeypatch.setenv(CHILD_ENV, str(os.getpid()))  # the mark as a child sets it (its own pid)
    assert in_child()
    code, out, _ = invoke("--version")
    assert code == 0 and out.strip()
    assert CHILD_ENV not in os.environ and not in_child()


# --- F6: an empty --store is refused, not read as "no --store" ----------------------------------------

@pytest.mark.parametrize("argv", [("--store", "", "show", "attn.softmax_simplex"),
                                  ("show", "attn.softmax_simplex", "--store", "")])
def test_an_empty_store_option_is_refused(tmp_path, monkeypatch, argv):
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "env-store"))
    line = one_line_error(*invoke(*argv)[::2])
    assert "--store: empty path" in line, line


def test_a_mode_entered_at_every_call_is_named_once(tmp_path):
    """check hopfield: an update entering a TorchFunctionMode at each call (and wrong by half) is refused, the
    mode named once (it was repeated 25 times, once per entry)."""
    import numpy as np

    np.save(tmp_path / "P.npy", np.random.default_rng(0).standard_normal((6, 4)))
    (tmp_path / "upd.py").write_text(PATCHES["function_mode"][0].replace("Zero().__enter__()\n", "").replace(
        "from torch.overrides", "import torch\nfrom torch.overrides") +
        "\ndef update(xi, patterns, beta):\n    Zero().__enter__()\n"
        "    return 0.5 * (torch.softmax(beta * xi @ patterns.T, dim=-1) @ patterns)\n")
    line = one_line_error(*invoke("check", "hopfield", "--patterns", str(tmp_path / "P.npy"), "--beta", "8",
                                  "--module", f"{tmp_path / 'upd.py'}:update", "--quick", "--no-progress")[::2])
    assert line.count("through the torch mode") == 1 and "nothing was checked" in line, line


# --- F7: --against the module itself -------------------------------------------------------------------

@pytest.mark.parametrize("other", ["./own_attention.py", "link.py"])
def test_against_the_module_itself_is_refused(tmp_path, monkeypatch, other):
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "own_attention.py")
    monkeypatch.chdir(tmp_path)
    line = one_line_error(*invoke("check", "attention", "--module", "own_attention.py:CausalSelfAttention",
                                  "--against", f"{other}:CausalSelfAttention", "--causal", "--quick",
                                  "--no-progress")[::2])
    assert "the module itself" in line and "could not reject anything" in line, line


def test_against_the_module_itself_is_refused_in_the_api():
    import importlib.util

    from theory.validation import InputError

    spec = importlib.util.spec_from_file_location("own_attention_f7", "tests/data/own_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from proofs_checks import check_attention

    with pytest.raises(InputError, match="against is obj itself"):
        check_attention(mod.CausalSelfAttention, causal=True, mode="quick", against=mod.CausalSelfAttention)


# --- F9: the local Dask workers never import from the working folder -------------------------------------

@moved("starts a local Dask cluster of one worker in a fresh tverify process (≈ 8 CPU s)",
       "tests/test_hostile_round14.py::test_local_cluster_starts_its_workers_with_a_safe_path")
def test_local_cluster_workers_do_not_import_the_working_folder(tmp_path):
    import os
    import subprocess
    import sys

    marker = tmp_path / "markers"
    marker.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    for name in ("struct", "threading", "signal"):
        (work / f"{name}.py").write_text(f"open({str(marker / name)!r}, 'w').close()\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    from pathlib import Path

    script = Path(sys.executable).parent / "tverify"  # the entry script, as users start it (not python -P)
    if not script.exists():
        pytest.skip("no tverify entry script beside this Python")
    r = subprocess.run([str(script), "run", "attn.causal_mask", "--quick", "--no-progress", "--cluster", "local:1"],
                       capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert sorted(p.name for p in marker.iterdir()) == [], r.stderr[-2000:]
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
