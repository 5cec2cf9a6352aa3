"""Hostile pass 26a reproducers: all fixed (F1, F3: what a declared-pure derivation read is kept with it; F2: a --lambda
grid value shipped as a path by its suffix only; F4: a signal swallowed in a finalizer is sent again)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.tiers import moved


def _env(tmp_path, **extra):
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("PYTHONPATH", None)
    env.pop("TVERIFY_DERIVATION_CACHE", None)
    env.update(extra)
    return env


def _tv(args, cwd, env, timeout=240):
    return subprocess.run([sys.executable, "-P", "-m", "proofs_checks.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _listed_then(tmp_path, env, first: str, edit: tuple, then: str) -> None:
    """``tverify list hz`` shows ``first``; once ``edit`` (a path, the text written there) is made, it shows ``then``
    (the catalogue cache is not stale)."""
    r = _tv(["list", "hz"], tmp_path, env)
    assert r.returncode == 0 and first in r.stdout, r.stdout[-800:] + r.stderr[-800:]
    edit[0].write_text(edit[1])
    r = _tv(["list", "hz"], tmp_path, env)
    assert then in r.stdout, r.stdout[-800:]


_LAZY = "def READ_C():\n    import importlib\n    return importlib.import_module('hzlazy').C\n"
_BY_PATH = ("def READ_C():\n    import importlib.util\n"
            "    spec = importlib.util.spec_from_file_location('hzlazy', {conf!r})\n"
            "    m = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(m)\n    return m.C\n")


@moved("two `tverify run` of a plugin in fresh processes (≈ 20 s each)",
       "tests/test_hostile_round32.py::test_what_a_pure_derivation_read_is_kept_and_a_change_or_a_shadow_misses")
@pytest.mark.parametrize("case", ["edited", "shadowed", "by_path"])
def test_a_pure_derivation_is_built_again_after_what_it_read_changes(tmp_path, case):
    """25a F3 (a helper imported lazily, edited), 26a F1 (one of its name put earlier on the path), 26a F3 (a helper
    loaded by path, edited): the kept derivation answered "verified" for what it no longer reads."""
    from hz_plugin import hz_plugin, install_hz

    s, a = tmp_path / "S", tmp_path / "A"
    s.mkdir()
    a.mkdir()
    (a / "hzlazy.py").write_text("C = 2\n")
    read_c = _BY_PATH.format(conf=str(a / "hzlazy.py")) if case == "by_path" else _LAZY
    text = hz_plugin(read_c, "hostile 25a/26a").replace('kind="identity",', 'kind="identity", derivation_pure=True,')
    env = _env(tmp_path, PYTHONPATH=f"{install_hz(tmp_path, text)}:{s}:{a}")
    args = ["run", "hz.dbl", "--quick", "--no-progress"]
    r = _tv(args, tmp_path, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    ((s if case == "shadowed" else a) / "hzlazy.py").write_text("C = 3\n")  # the obligation C - 2 = 1 is false now
    r = _tv(args, tmp_path, env)
    assert r.returncode == 1 and "refuted" in r.stdout, r.stdout[-800:]


@moved("a sweep on a local Dask cluster (≈ 20 s)",
       "tests/test_hostile_round32.py::test_a_lambda_grid_value_is_shipped_as_a_path_only_when_its_suffix_names_a_file")
def test_cluster_sweep_lambda_literal_named_like_a_file(tmp_path):
    (tmp_path / "1,2").write_text("junk\n")
    r = _tv(["sweep", "check", "icl", "--grid", "N=5 lambda=1,2|1,4", "--quick", "--cluster", "local:1", "--json", "-",
             "--no-progress"], tmp_path, _env(tmp_path))
    assert r.returncode != 2, r.stderr[-800:]


GC_SIGTERM = """
import gc, os, signal, sys, weakref
from proofs_checks import cli, console
console.terminate_cleanly()  # what cli.main installs (main keeps it)
class Cycle:
    pass
c = Cycle(); c.me = c        # collected by the garbage collector during the command
weakref.finalize(c, os.kill, os.getpid(), signal.SIGTERM)  # a SIGTERM arriving while a finalizer runs
del c
gc.set_threshold(1)
cli.main(["check", "lyapunov", "--f", "-x", "--V", "x**2", "--no-progress"])
"""


def test_sigterm_in_a_finalizer_no_traceback(tmp_path):
    (tmp_path / "t.py").write_text(GC_SIGTERM)
    r = subprocess.run([sys.executable, "-P", "t.py"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert "Traceback" not in r.stderr and r.returncode == 143, (r.returncode, r.stderr[-1200:])


@moved("two `tverify list` with a plugin in fresh processes (≈ 10 s)",
       "tests/test_hostile_round32.py::test_a_cached_catalogue_misses_when_a_plugin_helper_resolves_elsewhere")
def test_catalogue_helper_shadowed_not_stale(tmp_path):
    from hz_plugin import hz_plugin, install_hz

    text = hz_plugin("import hzconst\ndef READ_C():\n    return hzconst.C\n", "hostile 26a").replace(
        'title="doubling"', 'title="doubling " + hzconst.NAME')
    pz = install_hz(tmp_path, text)
    s, a = tmp_path / "S", tmp_path / "A"
    s.mkdir()
    a.mkdir()
    (a / "hzconst.py").write_text('C = 2\nNAME = "two"\n')
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{s}:{a}")
    r = _tv(["list"], tmp_path, env)
    assert r.returncode == 0 and "doubling two" in r.stdout, r.stdout[-800:] + r.stderr[-800:]
    (s / "hzconst.py").write_text('C = 3\nNAME = "three"\n')  # what the plugin now imports
    r = _tv(["list"], tmp_path, env)
    assert "doubling three" in r.stdout, r.stdout[-800:]


@moved("two `tverify run` of a plugin in fresh processes, one edited mid-run (≈ 25 s)",
       "tests/test_hostile_round32.py::test_a_file_edited_while_the_derivation_runs_keeps_the_hash_it_was_read_with")
def test_lazy_helper_edited_during_derivation_not_stale(tmp_path):
    import time

    from hz_plugin import hz_plugin, install_hz

    marker = tmp_path / "imported"
    rc = ("def READ_C():\n    import importlib, time\n    c = importlib.import_module('hzlazy').C\n"
          f"    open({str(marker)!r}, 'a').write('x')\n    time.sleep(3)\n    return c\n")
    text = hz_plugin(rc, "hostile 26a").replace('kind="identity",', 'kind="identity", derivation_pure=True,')
    pz = install_hz(tmp_path, text)
    a = tmp_path / "A"
    a.mkdir()
    (a / "hzlazy.py").write_text("C = 2\n")
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{a}")
    args = [sys.executable, "-P", "-m", "proofs_checks.cli", "run", "hz.dbl", "--quick", "--no-progress"]
    p = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not marker.exists() and p.poll() is None and time.monotonic() - t0 < 200:
        time.sleep(0.02)
    (a / "hzlazy.py").write_text("C = 3\n")  # edited while the derivation (which read C = 2) still runs
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, out[-800:] + err[-800:]
    r = _tv(["run", "hz.dbl", "--quick", "--no-progress"], tmp_path, env)
    assert r.returncode == 1 and "refuted" in r.stdout, r.stdout[-800:]


def test_a_signal_landing_before_the_commands_work_is_one_line(monkeypatch, capsys):
    """A SIGTERM a finalizer swallowed is sent again 10 ms later; under load it landed while main() was still setting up
    (the torch cache folder), outside its handler: a traceback in the caller's script (seen flaky in the test above)."""
    from proofs_checks import cli
    from proofs_checks.console import Terminated

    def landed():
        raise Terminated(15)

    monkeypatch.setattr("proofs_checks.entry._own_torch_cache", landed)
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "lyapunov", "--f", "-x", "--V", "x**2", "--no-progress"])
    assert exc.value.code == 143 and "terminated (SIGTERM)" in capsys.readouterr().err
