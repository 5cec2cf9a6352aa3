"""Hostile pass 24 (tester a): one test per finding (HOSTILE24A_FINDINGS.md), each a strict xfail against frozen24
(1b74159)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.hz_plugin import install_hz
from tests.test_hostile_round29a import _PLUGIN as _PLUGIN_29A
from tests.tiers import moved

_TVERIFY = str(Path(sys.executable).with_name("tverify"))

_PLUGIN = (_PLUGIN_29A.replace("import hzconst  # a helper module imported when the plugin is loaded\n", "")  # pass 23a's
           .replace('    b.obligation("constant is two", hzconst.C - 2)\n', "")  # plugin, without its helper
           .replace('source="hostile 23a"', 'source="hostile 24a"'))


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), TVERIFY_STORE=str(tmp_path / "store"), **extra)
    return env


def _plugin(root: Path, text: str = _PLUGIN) -> Path:
    """``root/pz``: the package ``tverify_hz`` (``claims.py`` is ``text``) and its dist-info (entry point ``hz``)."""
    return install_hz(root, text)


@contextlib.contextmanager
def _hand_started_cluster(tmp_path: Path, env: dict, cwd: Path):
    """A Dask scheduler and one worker started by hand in ``cwd`` (as a user does), their address; stopped after."""
    import signal

    dask = str(Path(sys.executable).with_name("dask"))
    port = _free_port()
    procs = []
    try:
        with open(tmp_path / "sched.log", "w") as log:
            procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                           "--no-dashboard"], env=env, cwd=cwd, stdout=log, stderr=log,
                                          start_new_session=True))
        _wait_for(tmp_path / "sched.log", "Scheduler at", 60)
        with open(tmp_path / "worker.log", "w") as log:
            procs.append(subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                                           "--no-dashboard"], env=env, cwd=cwd, stdout=log, stderr=log,
                                          start_new_session=True))
        _wait_for(tmp_path / "worker.log", "Registered to", 60)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _kill_all(pids: list[int]) -> None:
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _later(seconds: float, fn) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(seconds), fn()), daemon=True)
    t.start()
    return t


# 24A F1 (category 4) ------------------------------------------------------------------------------------------------
@moved("a report command in a fresh process, a file added while it starts (≈ 5 s)",
       "tests/test_hostile_round30.py::test_the_default_out_is_noted_at_the_start")
def test_force_keeps_a_file_added_during_start_up_at_the_default_out(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "mine.txt").write_text("mine\n")
    p = subprocess.Popen([_TVERIFY, "report", "attn.complexity", "--quick", "--no-progress", "--force"],
                         env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.7)  # the command has started (its own note at start takes ~0.1 s); its imports take seconds
    (reports / "new.txt").write_text("made after the command started\n")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out[-1500:] + err[-1500:]
    kept = [f for f in tmp_path.rglob("new.txt")]
    # docs/cli.md: "--force consents to replacing what was at --out when the command started, not what appears or
    # changes there while it runs" (with an explicit `--out reports` the report is written beside, new.txt kept)
    assert kept, "new.txt, made 0.7 s after the command started, was deleted: " + err[-800:]


# 24A F2 (category 4) ------------------------------------------------------------------------------------------------
@moved('list --markdown in a subprocess, every derivation (≈ 30 s)',
       'tests/test_hostile_round30.py::test_a_catalogue_of_the_users_made_during_list_markdown_is_kept',
       'tests/test_hostile_round30.py::test_the_default_out_is_noted_at_the_start')
def test_list_markdown_docs_dir_keeps_a_catalogue_the_user_wrote_during_the_run(tmp_path):
    docs = tmp_path / "D"
    docs.mkdir()
    p = subprocess.Popen([_TVERIFY, "list", "--markdown", "--docs-dir", str(docs)], env=_env(tmp_path), cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # the command is deriving the catalogue (15 s here), after its check of D/CATALOGUE.md
    assert p.poll() is None, "the command ended before the file was made: the race was not exercised"
    (docs / "CATALOGUE.md").write_text("my own notes, not tverify's\n")
    out, err = p.communicate(timeout=300)
    assert (docs / "CATALOGUE.md").read_text().startswith("my own notes"), (p.returncode, err[-600:])


# 24A F3 (category 1) ------------------------------------------------------------------------------------------------
def test_a_link_loop_in_a_plugin_package_does_not_hang_list(tmp_path):
    pz = _plugin(tmp_path)
    (pz / "tverify_hz" / "a").symlink_to(".")
    (pz / "tverify_hz" / "b").symlink_to(".")
    env = _env(tmp_path, PYTHONPATH=str(pz))
    try:
        r = subprocess.run([_TVERIFY, "list", "hz"], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=40)  # without the links: ~2 s
    except subprocess.TimeoutExpired:
        pytest.fail("tverify list hz did not finish within 40 s (a plugin package with links a -> . and b -> .)")
    assert r.returncode == 0 and "hz.dbl" in r.stdout, r.stdout[-800:] + r.stderr[-800:]


# 24A F4 (category 3) ------------------------------------------------------------------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.3)
    raise AssertionError(f"{path.name}: no {text!r} within {seconds} s: {path.read_text(errors='replace')[-800:]}")


@moved('a Dask scheduler and worker started by hand, three tverify runs (≈ 14 s)',
       'tests/test_hostile_round30.py::test_a_worker_that_imported_other_code_refuses_the_task')
def test_a_long_lived_cluster_does_not_answer_with_a_plugins_old_code(tmp_path):
    text = _PLUGIN.replace('ARGS = (scalar("x"),)', 'ARGS = (scalar("x"),)\nK = 2').replace(
        '    d = b.define("Definition", 2 * x)\n',
        '    d = b.define("Definition", 2 * x)\n    b.obligation("k is two", sp.Integer(K) - 2)\n').replace(
        "derivation_pure=True", "derivation_pure=False")
    pz = _plugin(tmp_path, text)
    env = _env(tmp_path, PYTHONPATH=str(pz))
    with _hand_started_cluster(tmp_path, env, tmp_path) as address:
        run = [_TVERIFY, "run", "hz.dbl", "--quick", "--no-progress"]
        first = subprocess.run(run + ["--cluster", address], env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
        assert first.returncode == 0, first.stdout[-1500:] + first.stderr[-1500:]
        claims = pz / "tverify_hz" / "claims.py"
        claims.write_text(claims.read_text().replace("K = 2", "K = 3"))  # the obligation "k is two" is now false
        here = subprocess.run(run, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert here.returncode == 1 and "k is two" in here.stdout, here.stdout[-1500:]
        there = subprocess.run(run + ["--cluster", address], env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
        # refused, one line, nothing run: the worker imported the plugin's old code (never its stale "verified")
        assert there.returncode == 2 and "imported other code" in there.stderr and "Traceback" not in there.stderr, \
            (there.returncode, there.stdout[-1500:], there.stderr[-1500:])


# 24A F5 (category 3) ------------------------------------------------------------------------------------------------
def test_pure_derivation_cache_sees_a_helper_when_the_caller_imported_the_plugin_first(tmp_path):
    text = _PLUGIN.replace("import numpy as np\n", "import numpy as np\nimport hzconst\n", 1).replace(
        '    d = b.define("Definition", 2 * x)\n',
        '    d = b.define("Definition", 2 * x)\n    b.obligation("constant is two", sp.Integer(hzconst.C) - 2)\n')
    pz = _plugin(tmp_path, text)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "hzconst.py").write_text("C = 2\n")
    script = tmp_path / "api_run.py"
    script.write_text("import tverify_hz.claims  # the caller's own import, as a test module importing CLAIM\n"
                      "from proofs_checks import api\n"
                      "r = api.run_claims(['hz.dbl'], mode='quick')\n"
                      "print('STATUS', r.results[0].status, r.exit_code)\n")
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join((str(pz), str(lib))))

    def status() -> str:
        r = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("STATUS")]
        assert line, r.stdout[-1000:] + r.stderr[-2000:]
        return line[0]

    assert status() == "STATUS verified 0"
    (lib / "hzconst.py").write_text("C = 3\n")  # the obligation "constant is two" is now false
    assert status() == "STATUS refuted 1"  # (TVERIFY_DERIVATION_CACHE=0, or without the caller's import: refuted)


# 24A F6 (category 4) ------------------------------------------------------------------------------------------------
def test_kill_9_during_the_plugin_import_probe_leaves_no_process_of_the_plugin(tmp_path):
    import signal

    marks = tmp_path / "marks"
    marks.mkdir()
    text = _PLUGIN.replace("import numpy as np\n", (
        "import numpy as np\nimport os, time\n"
        f"open(os.path.join({str(marks)!r}, 'imp.%d' % os.getpid()), 'w').write('x')\n"
        "time.sleep(60)  # a slow import (a network timeout, a big load)\n"), 1)
    pz = _plugin(tmp_path, text)
    env = _env(tmp_path, PYTHONPATH=str(pz), TVERIFY_PLUGIN_IMPORT_TIMEOUT="100")
    p = subprocess.Popen([_TVERIFY, "list", "hz"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    pids = []
    try:
        end = time.time() + 60
        while not list(marks.iterdir()) and time.time() < end:
            time.sleep(0.2)
        time.sleep(0.5)
        p.send_signal(signal.SIGKILL)  # the command itself killed (the OOM killer, a CI runner's hard stop)
        p.wait(timeout=30)
        time.sleep(3)
        pids = [int(f.name.split(".")[1]) for f in marks.iterdir()]
        assert pids, "the probe never started"
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().split(") ")[1].split()[0] != "Z":  # a zombie has ended
                        alive.append(pid)
            except FileNotFoundError:
                pass
        assert not alive, f"the plugin's import probe (pid {alive}) is still running 3 s after tverify was killed"
    finally:
        _kill_all(pids)


# 24A F7 (category 2) ------------------------------------------------------------------------------------------------
def test_survey_worker_does_not_import_a_json_py_from_pythonpath(tmp_path):
    pp = tmp_path / "pp"
    pp.mkdir()
    mark = tmp_path / "RAN_json"
    (pp / "json.py").write_text(f"open({str(mark)!r}, 'a').write('ran\\n')\n")
    env = _env(tmp_path, PYTHONPATH=str(pp))
    r = subprocess.run([_TVERIFY, "survey", "torch-mha", "--no-install", "--quick", "--out", str(tmp_path / "sv")],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    # docs/own-model.md: "a json.py, typing.py or a project's own theory/ package in a folder of $PYTHONPATH is not
    # what tverify imports" (the tverify process itself keeps to it; its survey worker does not)
    assert not mark.exists(), (r.returncode, r.stderr[-800:])
    assert r.returncode == 0, r.stderr[-800:]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_kill_9_during_a_survey_entry_leaves_no_worker(tmp_path):
    import signal

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp_path, TMPDIR=str(tmp))
    p = subprocess.Popen([_TVERIFY, "survey", "torch-mha", "--no-install", "--quick", "--out", str(tmp_path / "sv")],
                         env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def workers() -> list[int]:
        found = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if "proofs_checks.survey.worker" in cmd and str(tmp) in cmd:
                    found.append(int(d.name))
        return found

    pids: list[int] = []
    try:
        end = time.time() + 120
        while not pids and p.poll() is None and time.time() < end:
            time.sleep(0.3)
            pids = workers()
        assert pids, "no survey worker was seen (the entry did not run here)"
        time.sleep(1)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        time.sleep(3)
        alive = [pid for pid in pids if _alive(pid)]
        assert not alive, f"the survey worker (pid {alive}) is still running 3 s after tverify was killed"
    finally:
        _kill_all(pids)


# 24A F8 (category 1/3) ----------------------------------------------------------------------------------------------
@moved("`list` and `run` of a plugin in fresh processes (≈ 8 s)",
       "tests/test_hostile_round32.py::test_a_cached_catalogue_misses_when_a_plugin_helper_resolves_elsewhere")
def test_catalogue_cache_follows_a_load_time_helper_found_elsewhere_on_pythonpath(tmp_path):
    text = _PLUGIN.replace("import numpy as np\n", "import numpy as np\nimport hztitle\n", 1).replace(
        'title="doubling"', "title=hztitle.T") + '''

if getattr(hztitle, "EXTRA", False):  # the helper decides which claims the plugin registers
    CLAIM2 = register(Claim(id="hz.extra", title="doubling again", statement="f(x) = 2x", source="hostile 24a",
                            kind="identity", form=form, derivation=derive, no_hypotheses="none",
                            checks=(matches_derivation(derive, ARGS, name="md2"), plain),
                            mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3.0 * np.asarray(x, float)),)))
'''
    pz = _plugin(tmp_path, text)
    for name, body in (("libB", 'T = "title from libB"\n'), ("libC", 'T = "title from libC"\nEXTRA = True\n')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "hztitle.py").write_text(body)

    def tv(lib: str, *args: str) -> subprocess.CompletedProcess:
        env = _env(tmp_path, PYTHONPATH=os.pathsep.join((str(pz), str(tmp_path / lib))))
        return subprocess.run([_TVERIFY, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    first = tv("libB", "list", "hz")
    assert "title from libB" in first.stdout, first.stdout + first.stderr
    r = tv("libC", "run", "hz.extra", "--quick", "--no-progress")  # with --refresh first: verified, exit 0
    assert r.returncode == 0, (r.returncode, r.stdout[-600:] + r.stderr[-600:])


# 24A F9 (category 2) ------------------------------------------------------------------------------------------------
def test_a_future_py_on_pythonpath_is_not_imported_by_a_regular_install(tmp_path):
    import sysconfig

    import proofs_checks

    venv = tmp_path / "v"  # a plain install's layout: tverify's packages and its dependencies on the path, no .pth code
    subprocess.run([os.path.join(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "links.pth").write_text(sysconfig.get_paths()["purelib"] + "\n" +
                                    str(Path(proofs_checks.__file__).resolve().parent.parent) + "\n")
    script = venv / "bin" / "tverify"  # what pip writes for the console script
    script.write_text(f"#!{venv / 'bin' / 'python'}\nimport re\nimport sys\nfrom proofs_checks._console import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    pp = tmp_path / "pp"
    pp.mkdir()
    mark = tmp_path / "RAN_future"
    (pp / "__future__.py").write_text(
        "import os\n"
        f"open({str(mark)!r}, 'a').write('ran\\n')\n"
        "import importlib.util as _u\n"
        "_s = _u.spec_from_file_location('_real_future', os.path.join(os.path.dirname(os.__file__), '__future__.py'))\n"
        "_m = _u.module_from_spec(_s); _s.loader.exec_module(_m)\n"
        "globals().update({k: v for k, v in vars(_m).items() if not k.startswith('__')})\n")
    r = subprocess.run([str(script), "list", "attn.complexity"], env=_env(tmp_path, PYTHONPATH=str(pp)), cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "attn.complexity" in r.stdout, r.stdout[-800:] + r.stderr[-800:]
    # docs/own-model.md: the tverify command "before it imports anything of its own … puts the system folders and
    # tverify's first and $PYTHONPATH's folders after them"
    assert not mark.exists(), "a __future__.py on $PYTHONPATH ran inside tverify (proofs_checks/__init__.py line 11)"


# 24A F10 (category 1) -----------------------------------------------------------------------------------------------
@moved('three local Dask clusters started and interrupted (≈ 26 s)',
       'tests/test_hostile_round30.py::test_local_workers_are_spawned_ignoring_sigint')
def test_ctrl_c_to_the_group_during_a_local_cluster_run_is_one_line(tmp_path):
    import signal

    env = _env(tmp_path)
    shown = []
    for delay in (3.0, 6.0, 8.0):  # while the workers start, and while they compute
        p = subprocess.Popen([_TVERIFY, "run", "attn.*", "--quick", "--no-progress", "--cluster", "local:2"], env=env,
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # its own group, as a terminal's foreground job
        time.sleep(delay)
        os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: every process of the foreground group
        out, err = p.communicate(timeout=200)
        if p.returncode != 130 or "Traceback" in err:
            shown.append((delay, p.returncode, err[:1500]))
    # docs/clusters.md: "Ctrl-C cancels every task, prints one line and exits 130 … (the workers of local:W ignore
    # the terminal's Ctrl-C; this process shuts them down)"
    assert not shown, shown[0]


@moved('list --markdown in a subprocess, a SIGTERM timed at the first rename (≈ 60 s: the whole catalogue derived twice)',
       'tests/test_hostile_round30.py::test_the_catalogue_pair_is_replaced_together_and_a_signal_waits_for_it')
def test_sigterm_while_list_markdown_writes_leaves_the_previous_catalogue_pair(tmp_path):
    import signal

    docs = tmp_path / "D"
    docs.mkdir()
    env = _env(tmp_path)
    (docs / "CATALOGUE.md").write_text("previous CATALOGUE.md\n")
    (docs / "catalogue.json").write_text('{"previous": true}\n')
    first = subprocess.run([_TVERIFY, "list", "--markdown", "--docs-dir", str(docs), "--force"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-800:]
    before = {n: (docs / n).read_bytes() for n in ("CATALOGUE.md", "catalogue.json")}
    (docs / "CATALOGUE.md").write_bytes(before["CATALOGUE.md"] + b"\n")  # the pair tverify will rewrite: tell them apart
    (docs / "catalogue.json").write_bytes(before["catalogue.json"] + b"\n")
    before = {n: (docs / n).read_bytes() for n in ("CATALOGUE.md", "catalogue.json")}
    md = docs / "CATALOGUE.md"
    ino = md.stat().st_ino
    p = subprocess.Popen([_TVERIFY, "list", "--markdown", "--docs-dir", str(docs), "--force"], env=env, cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    while p.poll() is None:
        try:
            if md.stat().st_ino != ino:  # CATALOGUE.md replaced: catalogue.json is being dumped
                os.killpg(p.pid, signal.SIGTERM)  # `timeout`, a cancelled CI job
                break
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    out, err = p.communicate(timeout=120)
    if p.returncode != 143:
        pytest.skip(f"the signal came too late (exit {p.returncode}): the race was not hit")
    now = {n: (docs / n).read_bytes() for n in ("CATALOGUE.md", "catalogue.json")}
    # docs/cli.md: on SIGTERM "what was being written … is removed and earlier outputs stay as they were"
    assert (now["CATALOGUE.md"] == before["CATALOGUE.md"]) == (now["catalogue.json"] == before["catalogue.json"]), \
        "after the SIGTERM one file of the catalogue is new and the other old: " + err[-300:]


# 24A F11 (category 1) -----------------------------------------------------------------------------------------------
@moved("a sweep on a local cluster of two workers in a fresh process (≈ 6 s)",
       "tests/test_hostile_round30.py::test_a_sweeps_file_valued_grid_values_are_shipped_absolute",
       "tests/test_hostile_round31.py::test_a_sweep_ships_only_file_parameters_absolute")
def test_sweep_of_check_attention_module_runs_on_a_local_cluster(tmp_path):
    import json

    import proofs_checks

    mod = Path(proofs_checks.__file__).resolve().parent.parent / "examples" / "my_attn.py"
    r = subprocess.run([_TVERIFY, "sweep", "check", "attention", "--grid", f"module={mod}:MyAttention", "--quick",
                        "--cluster", "local:2", "--out", str(tmp_path / "swp"), "--no-progress"], env=_env(tmp_path),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    rows = json.loads((tmp_path / "swp" / "results.json").read_text())["rows"]
    # docs/clusters.md: --cluster on sweep; a sanity check's options are the grid's parameters (module= here)
    assert rows and all(row.get("status") != "error" for row in rows), (r.returncode, rows[0].get("error"))


@moved("a run on a local cluster in a fresh process, SIGHUP to its group after 6 s (≈ 7 s)",
       "tests/test_hostile_round8.py::test_sigterm_handler_is_only_this_process_and_only_once",
       "tests/test_hostile_round14.py::test_a_signal_while_local_workers_start_leaves_nothing")
def test_sighup_to_the_group_during_a_local_cluster_run_is_one_line(tmp_path):
    import signal

    p = subprocess.Popen([_TVERIFY, "run", "attn.*", "--quick", "--no-progress", "--cluster", "local:2"],
                         env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(6)
    os.killpg(p.pid, signal.SIGHUP)  # the terminal closed: SIGHUP to its foreground group
    out, err = p.communicate(timeout=200)
    # docs/cli.md: SIGHUP (a closed terminal) exits 129 "with one line"
    assert p.returncode == 129 and "Traceback" not in err, (p.returncode, err[:1500])


# 24A F12 (category 3) -----------------------------------------------------------------------------------------------
@moved('a Dask scheduler and worker started by hand in another folder (≈ 10 s)',
       'tests/test_hostile_round30.py::test_a_sweeps_file_valued_grid_values_are_shipped_absolute')
def test_sweep_on_a_cluster_reads_the_grid_file_the_user_named(tmp_path):
    import json
    import signal

    wk, cl = tmp_path / "wk", tmp_path / "cl"
    wk.mkdir()
    cl.mkdir()
    (wk / "L.txt").write_text("1 0\n0 2\n")  # a file of that name where the worker runs (another project's)
    (cl / "L.txt").write_text("50 0\n0 0.02\n")  # the user's: condition number 2500
    env = _env(tmp_path)
    with _hand_started_cluster(tmp_path, env, wk) as address:
        r = subprocess.run([_TVERIFY, "sweep", "check", "icl", "--grid", "N=5 lambda=L.txt", "--quick",
                            "--no-progress", "--json", "-", "--cluster", address], env=env, cwd=cl,
                           capture_output=True, text=True, timeout=300)
        row = json.loads(r.stdout)["rows"][0]
        # the user's L.txt (validated before the run, in their folder): cond(Λ) = 2500
        assert row.get("conditioning.cond_Lambda") == pytest.approx(2500.0), (row.get("status"),
                                                                             row.get("conditioning.cond_Lambda"))
