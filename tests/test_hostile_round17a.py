"""Hostile pass 12 (tester a, issue 44's acceptance pass): reproducers of its findings that run without timing races
written as strict xfails during the pass (which fixed nothing); each fixed after it is a plain test. Plugins are installed as in tests/test_plugin_isolation.py (a ``.dist-info`` with the
``tverify.claims`` entry point in a folder on ``PYTHONPATH``); everything runs in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tiers import moved

ROOT = Path(__file__).resolve().parents[1]
TVERIFY = [sys.executable, "-m", "proofs_checks"]

def site_with(tmp_path: Path, at_import: str) -> Path:
    """The plugin of tests/test_hostile_round16a.py as ``zzq`` (its claim ``zzq.twice``)."""
    from tests.test_hostile_round16a import site_with as plugin_site

    return plugin_site(tmp_path, at_import, "zzq")


def env_for(site: Path | None, tmp_path: Path, **extra: str) -> dict[str, str]:
    path = [str(site)] if site else []
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path + [str(ROOT)]), OMP_NUM_THREADS="1",
                TVERIFY_STORE=str(tmp_path / "store"), TMPDIR=str(tmp_path), **extra)


#: F4: code the plugin's import leaves behind (a thread that prints later, an exit callback) writes on stdout
LATE_WRITERS = {
    "thread_print": "import threading, time\n"
                    "def _p():\n    time.sleep(1.0); print('THREAD-PRINT', flush=True)\n"
                    "threading.Thread(target=_p, daemon=True).start()\n",
    "atexit_fd1": "import atexit, os\natexit.register(lambda: os.write(1, b'ATEXIT-FD1\\n'))\n",
}


@moved('a plugin installed and two commands run from fresh processes (≈ 10 s each)',
       'tests/test_hostile_round18.py::test_json_on_stdout_is_only_the_json')
@pytest.mark.parametrize("mode", sorted(LATE_WRITERS))
def test_json_stdout_stays_json_whatever_a_plugins_import_leaves_running(tmp_path, mode):
    site = site_with(tmp_path, LATE_WRITERS[mode])
    p = subprocess.run(TVERIFY + ["run", "zzq.twice", "--no-progress", "--json", "-"], capture_output=True, text=True,
                       env=env_for(site, tmp_path), cwd=str(tmp_path), timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-800:])
    json.loads(p.stdout)  # raises on the plugin's line before or after the document


@moved('a check started and signalled from a fresh process (≈ 4 s)',
       'tests/test_supervisor.py::test_every_terminating_signal_to_the_command_reaches_its_work')
def test_sigxcpu_to_the_command_is_answered_with_one_line(tmp_path):
    p = subprocess.Popen(TVERIFY + ["run", "attn.*", "--quick", "--no-progress", "--json", "out.json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(None, tmp_path),
                         cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _children(p.pid):  # the child that does the command
            time.sleep(0.1)
        time.sleep(3.0)  # its signal handlers are installed by now
        os.kill(p.pid, signal.SIGXCPU)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGXCPU, (p.returncode, err[-800:])
    assert "SIGXCPU" in err, err[-800:]  # docs/cli.md: "SIGUSR1, SIGUSR2 and SIGXCPU … each with one line"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


@moved('a claim run from a fresh process (≈ 3 s)',
       'tests/test_hostile_round18.py::test_the_per_user_store_is_never_inside_tverifys_code')
def test_default_store_inside_tverifys_environment_is_refused(tmp_path):
    cache = Path(sys.prefix) / "hostile12a-xdg-cache"
    assert not cache.exists()
    e = env_for(None, tmp_path, XDG_CACHE_HOME=str(cache))
    e.pop("TVERIFY_STORE")
    try:
        p = subprocess.run(TVERIFY + ["run", "attn.softmax_simplex", "--quick", "--no-progress"], capture_output=True,
                           text=True, env=e, cwd=str(tmp_path), timeout=300)
        written = cache.exists()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert not written and p.returncode == 2, (p.returncode, p.stderr[-500:])


@moved('a plugin installed and a report written from a fresh process (≈ 11 s)',
       'tests/test_hostile_round18.py::test_a_plugin_import_leaves_the_working_folder_as_it_was')
def test_relative_outputs_are_resolved_before_a_plugin_can_change_the_working_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = site_with(tmp_path, f"import os\nos.chdir({str(elsewhere)!r})\n")
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run(TVERIFY + ["run", "attn.softmax_simplex", "zzq.twice", "--quick", "--no-progress", "--json",
                                  "rel.json"], capture_output=True, text=True, env=env_for(site, tmp_path),
                       cwd=str(work), timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-800:])
    assert not (elsewhere / "rel.json").exists(), "written into the plugin's working folder"
    assert (work / "rel.json").is_file()


#: F10: a plugin claim whose derivation depends on something other than Python source (here an environment variable;
#: a data file the same): the cached derivation is reused after its obligation became false
DERIVED = '''
import os
import sympy as sp
from proofs_checks.plugin import Check, Claim, Mutant, exact, register, DerivationBuilder

def derive():
    b = DerivationBuilder("three")
    x = sp.Symbol("x", real=True)
    b.obligation("o", sp.Integer(int(os.environ.get("ZZD_OBL", "0"))) + x - x)
    return b.done(b.step("the constant", sp.Integer(3)))

def ok(form, ctx):
    return exact(float(form - 3), "the count")

register(Claim(id="zzd.three", title="t", statement="3", source="-", kind="identity", form=3.0, derivation=derive,
               no_symbolic="a count", checks=(Check("count", "numeric", ok),),
               mutants=(Mutant("four", "wrong constant", "4", 4.0),)))
'''


@moved("a plugin's derivation built twice in fresh processes (≈ 14 s)",
       'tests/test_hostile_round18.py::test_a_cached_derivation_is_kept_only_for_a_declared_pure_claim',
       'tests/test_hostile_round27.py::test_a_plugin_derivation_is_kept_only_where_the_claim_declares_it_pure')
def test_a_cached_plugin_derivation_is_not_reused_when_its_inputs_changed(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "zzd.py").write_text(DERIVED)
    info = site / "zzd-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zzd\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[tverify.claims]\nzzd = zzd\n")
    args = TVERIFY + ["run", "zzd.three", "--quick", "--no-progress"]
    first = subprocess.run(args, capture_output=True, text=True, env=env_for(site, tmp_path, ZZD_OBL="0"),
                           cwd=str(tmp_path), timeout=300)
    assert first.returncode == 0, first.stderr[-800:]
    second = subprocess.run(args, capture_output=True, text=True, env=env_for(site, tmp_path, ZZD_OBL="1"),
                            cwd=str(tmp_path), timeout=300)
    assert second.returncode == 1 and "refuted" in second.stdout, (second.returncode, second.stdout[-800:])


@moved('every attention claim run from a fresh process (≈ 10 s)',
       'tests/test_hostile_round2.py::test_closed_pipe_is_one_line')
def test_json_stdout_closed_by_its_reader_is_one_line_and_exit_2(tmp_path):
    p = subprocess.Popen(TVERIFY + ["run", "attn.*", "--quick", "--no-progress", "--json", "-"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env_for(None, tmp_path), cwd=str(tmp_path))
    try:
        p.stdout.read(10)  # the JSON is about 460 kB: far more than the pipe holds
        p.stdout.close()
        err = p.stderr.read().decode(errors="replace")
        rc = p.wait(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 2 and "broken pipe" in err.lower(), (rc, err[-600:])
