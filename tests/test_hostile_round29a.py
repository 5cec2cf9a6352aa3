"""Hostile pass 23 (tester a): one test per finding (HOSTILE23A_FINDINGS.md), each a strict xfail against frozen23
(4ac8168)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.hz_plugin import install_hz
from tests.test_hostile_round28a import _env as _env28

from tests.tiers import moved

_PLUGIN = '''
import numpy as np
import sympy as sp
import hzconst  # a helper module imported when the plugin is loaded
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)


def form(x):
    return 2.0 * np.asarray(x, float)


def derive():
    b = DerivationBuilder("doubling")
    (x,) = b.fact("args", (sp.Symbol("x", real=True),))
    d = b.define("Definition", 2 * x)
    b.obligation("constant is two", hzconst.C - 2)
    return b.done(b.step("expand", sp.expand(d)))


@numeric("2x against x + x, float64")
def plain(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(50, 200, 400))
    return close(form(x), x + x, 4 * np.finfo(float).eps * np.abs(x) + 1e-300, "one rounding per draw")


CLAIM = register(Claim(id="hz.dbl", title="doubling", statement="f(x) = 2x", source="hostile 23a", kind="identity",
                       form=form, derivation=derive, no_hypotheses="none", derivation_pure=True,
                       checks=(matches_derivation(derive, ARGS), plain),
                       mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3.0 * np.asarray(x, float)),)))
'''

_TVERIFY = str(Path(sys.executable).with_name("tverify"))


def _plugin(tmp_path: Path) -> Path:
    return install_hz(tmp_path, _PLUGIN)


def _env(tmp_path: Path, **extra) -> dict:  # (tests/test_hostile_round28a.py's, without a HZX_ filter)
    return _env28(tmp_path, **extra)


def _run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_TVERIFY, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def _helper(lib: Path, how: str, c: int) -> None:
    if how == "zip":  # lib is lib.zip, an archive on PYTHONPATH
        lib.unlink(missing_ok=True)
        with zipfile.ZipFile(lib, "w") as z:
            z.writestr("hzconst.py", f"C = {c}\n")
    else:  # a sourceless module (compiled, no .py beside it)
        import py_compile

        lib.mkdir(exist_ok=True)
        src = lib.parent / "src_hzconst.py"
        src.write_text(f"C = {c}\n")
        py_compile.compile(str(src), str(lib / "hzconst.pyc"), doraise=True)


@moved("a throwaway plugin run twice in subprocesses (≈ 10 s): a declared-pure derivation's key, end to end",
       "tests/test_hostile_round27.py::test_a_plugins_load_time_helpers_are_keyed_by_their_bytes_zip_bytecode_or_"
       "linked_folder")
@pytest.mark.parametrize("how", ["zip", "pyc"])
def test_pure_derivation_cache_sees_a_helper_from_a_zip_or_pyc(tmp_path, how):
    pz = _plugin(tmp_path)
    lib = tmp_path / ("lib.zip" if how == "zip" else "lib")
    _helper(lib, how, 2)
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join((str(pz), str(lib))))
    first = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    _helper(lib, how, 3)
    second = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    # the helper now says C = 3: the obligation "constant is two" is false (TVERIFY_DERIVATION_CACHE=0: refuted)
    assert second.returncode == 1 and "constant is two" in second.stdout, second.stdout[-2000:]


def _dfl_sigint():
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal (a background job inherits it ignored)


@moved("SIGINT sent at several moments of a fresh command's start (≈ 19 s of waiting)",
       "tests/test_hostile_round27.py::test_ctrl_c_while_the_command_loads_is_one_line")
def test_ctrl_c_during_start_up_shows_no_traceback_of_tverify(tmp_path):
    import signal
    import time

    env = _env(tmp_path)
    shown = []
    for i in range(24):  # SIGINT 0.04 ... 0.50 s after the start: one of them lands while the CLI is imported
        p = subprocess.Popen([_TVERIFY, "run", "attn.complexity", "--quick", "--no-progress"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_dfl_sigint)
        time.sleep(0.04 + 0.02 * i)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        if "Traceback" in err and "proofs_checks/" in err:
            shown.append((0.04 + 0.02 * i, p.returncode, err[-1500:]))
    assert not shown, shown[0]


def test_force_does_not_delete_a_file_added_after_the_command_started(tmp_path):
    import time

    out = tmp_path / "rep"
    out.mkdir()
    (out / "mine.txt").write_text("consented to by --force\n")
    p = subprocess.Popen([_TVERIFY, "report", "attn.complexity", "--quick", "--no-mutants", "--no-progress", "--out",
                          str(out), "--force"], env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # the command has started: what appears at --out now is not covered by --force
    (out / "new.txt").write_text("written after the command started\n")
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-2000:]
    kept = [f for f in tmp_path.rglob("new.txt")]
    assert kept, "new.txt, made in --out 0.3 s after the command started, was deleted"


@moved("a throwaway plugin run twice in subprocesses (≈ 10 s): a declared-pure derivation's key, end to end",
       "tests/test_hostile_round27.py::test_a_plugins_load_time_helpers_are_keyed_by_their_bytes_zip_bytecode_or_"
       "linked_folder")
def test_pure_derivation_cache_sees_data_in_a_linked_folder_of_the_package(tmp_path):
    pz = _plugin(tmp_path)
    claims = pz / "tverify_hz" / "claims.py"
    text = claims.read_text().replace("import hzconst  # a helper module imported when the plugin is loaded\n", "")
    text = text.replace("hzconst.C - 2", "int(open(os.path.join(os.path.dirname(__file__), 'data', 'c.txt')).read()) - 2")
    claims.write_text("import os\n" + text)
    real = tmp_path / "realdata"
    real.mkdir()
    (real / "c.txt").write_text("2\n")
    (pz / "tverify_hz" / "data").symlink_to(real, target_is_directory=True)  # the package's data folder, linked
    env = _env(tmp_path, PYTHONPATH=str(pz))
    first = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    (real / "c.txt").write_text("3\n")
    second = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    assert second.returncode == 1 and "constant is two" in second.stdout, second.stdout[-2000:]
