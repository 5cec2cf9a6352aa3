"""Hostile pass 41 (tester a): containment, isolation, signals, exits. One reproducer per finding; each failed on e84d51c and passes since its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from cli_helpers import causal_attn

#: a plain causal attention module the API scripts below check (seeded: the same on every run)
_ATTN = causal_attn(8, 2)


def _env(tmp_path) -> dict:
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("TVERIFY_DERIVATION_BUDGET", None)
    return env


def _api_script(tmp_path, before: str, after: str) -> subprocess.CompletedProcess:
    """A fresh program that runs ``before``, checks ``Attn`` through the API (isolated, quick), then ``after``."""
    (tmp_path / "att.py").write_text(_ATTN)
    script = tmp_path / "prog.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\nimport att\nsys.path.pop(0)\n" % str(tmp_path)
                      + textwrap.dedent(before) + textwrap.dedent('''
        import proofs_checks
        r = proofs_checks.check_attention(att.Attn(), causal=True, mode="quick")
        print("verdict", r.verdict.outcome)
        ''') + textwrap.dedent(after))
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)


def test_the_api_leaves_the_callers_multiprocessing_start_method_unset(tmp_path):
    # docs/own-model.md: the check's forkserver "is not the process-wide forkserver that multiprocessing gives your own
    # code"; a program that calls the API and then chooses its own start method must be able to
    r = _api_script(tmp_path, "import multiprocessing as mp\nassert mp.get_start_method(allow_none=True) is None\n",
                    '''
        import multiprocessing as mp
        print("method after", mp.get_start_method(allow_none=True))
        mp.set_start_method("spawn")
        print("set spawn ok")
        ''')
    assert "verdict ok" in r.stdout, (r.returncode, r.stdout[-800:], r.stderr[-1500:])
    assert "set spawn ok" in r.stdout, (r.stdout[-800:], r.stderr[-1500:])


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="POSIX signal masks")
def test_the_api_keeps_the_callers_blocked_signals(tmp_path):
    # a program holding SIGTERM and SIGINT blocked around a critical section calls the API: afterwards they are
    # still blocked (a SIGTERM meanwhile is pending, not the end of the program)
    r = _api_script(tmp_path, '''
        import signal
        held = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        ''', '''
        now = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        print("still blocked", sorted(int(s) for s in held & now), "unblocked", sorted(int(s) for s in held - now))
        ''')
    assert "verdict ok" in r.stdout, (r.returncode, r.stdout[-800:], r.stderr[-1500:])
    assert "unblocked []" in r.stdout, r.stdout[-800:]


#: a claims plugin whose import starts a non-daemon worker thread that runs for a minute (it notes each process it
#: runs in: the import probe's, then tverify's own)
_THREAD_PLUGIN = textwrap.dedent('''
    import os, threading, time
    def _worker():
        with open(os.environ["H41A_MARK"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        end = time.monotonic() + 60
        while time.monotonic() < end:
            time.sleep(0.2)
    threading.Thread(target=_worker, name="h41a-worker", daemon=False).start()
''')


def _thread_plugin(tmp_path) -> dict:
    pp = tmp_path / "pp"
    (pp / "h41a_tp").mkdir(parents=True)
    (pp / "h41a_tp" / "__init__.py").write_text(_THREAD_PLUGIN)
    dist = pp / "h41a_tp-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: h41a-tp\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nh41a = h41a_tp\n")
    return {**_env(tmp_path), "PYTHONPATH": str(pp), "H41A_MARK": str(tmp_path / "mark"),
            "TVERIFY_DERIVATION_CACHE": "0"}


@pytest.mark.fresh_process  # its subject is the interpreter's exit with a plugin's thread running: a fresh interpreter (tests/warm_cli.py)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_a_sigterm_ends_the_command_though_a_plugins_thread_runs_on(tmp_path):
    # docs/cli.md: SIGTERM stops a command with 143 and one line; "once the command's work is done its exit takes at
    # most 5 s: ... a thread ... of loaded code that would hold the exit up is not waited for longer". Without the
    # signal `run` ends on time (40a F3's fix); with it, it waited for the plugin's thread (a minute here; forever for
    # a worker that never ends) before exiting 143
    import signal
    import time

    env = _thread_plugin(tmp_path)
    tv = os.path.join(os.path.dirname(sys.executable), "tverify")
    p = subprocess.Popen([tv, "run", "--quick", "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    mark = tmp_path / "mark"
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not mark.exists():
            time.sleep(0.1)  # the plugin is imported (the probe's process first, then tverify's own)
        time.sleep(3.0)  # (the whole run takes over a minute: the signal lands in its work)
        marks = mark.read_text().split() if mark.exists() else []
        assert p.poll() is None and marks, ("the run ended before the signal", marks, p.poll())
        p.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            out, err = p.communicate(timeout=12)
            ended = True
        except subprocess.TimeoutExpired:
            ended = False
        waited = time.monotonic() - t0
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    assert ended, "still running 12 s after its SIGTERM"
    assert p.returncode == 143 and waited < 12, (p.returncode, waited, err[-600:])


#: tverify's console command with a SIGTERM sent to its own (work) process as the function ``H41A_AT``
#: ("module.name") starts: what `kill PID` from outside does when it lands there
_SIGNAL_DRIVER = textwrap.dedent('''
    import importlib, os, signal, sys, time
    mod, name = os.environ["H41A_AT"].rsplit(".", 1)
    m = importlib.import_module(mod)
    _orig = getattr(m, name)
    def hit(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        return _orig(*a, **k)
    setattr(m, name, hit)
    from proofs_checks.cli import main
    sys.argv = ["tverify"] + sys.argv[1:]
    main()
''')

_LYAP = ("check", "lyapunov", "--f", "-x**3 - y, x - y**3", "--report", "lrep")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_a_sigterm_as_the_report_is_swapped_in_leaves_a_consistent_folder(tmp_path):
    # docs/cli.md: on SIGTERM "what was being written (a report folder, ...) is removed and earlier outputs stay as
    # they were"; docs/own-model.md "Outputs that are really ours": a folder tverify wrote is replaced by the next run
    env = _env(tmp_path)
    tv = os.path.join(os.path.dirname(sys.executable), "tverify")
    first = subprocess.run([tv, *_LYAP, "--V", "x**2 + y**2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert first.returncode == 0, first.stderr[-800:]
    (tmp_path / "drive.py").write_text(_SIGNAL_DRIVER)
    hit = subprocess.run([sys.executable, str(tmp_path / "drive.py"), *_LYAP, "--V", "x**2 + 4*y**2"], cwd=tmp_path,
                         env={**env, "H41A_AT": "proofs_checks.owned.remember_folder"}, capture_output=True,
                         text=True, timeout=60)
    assert hit.returncode == 143, (hit.returncode, hit.stderr[-800:])
    left = sorted(p.name for p in tmp_path.iterdir() if ".tverify-" in p.name)
    again = subprocess.run([tv, *_LYAP, "--V", "x**2 + y**2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert not left, f"left beside the report: {left}"
    assert again.returncode == 0, (again.returncode, again.stderr[-800:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_a_sigterm_as_the_json_is_recorded_leaves_it_replaceable(tmp_path):
    # docs/own-model.md "Outputs that are really ours": a --json file is replaced when the record names it with its
    # current content; here the file holds exactly what tverify wrote (the signal came after the write), and the next
    # run refuses it with "not written by tverify, or changed since"
    env = _env(tmp_path)
    tv = os.path.join(os.path.dirname(sys.executable), "tverify")
    cmd = ["check", "lyapunov", "--f", "-x**3 - y, x - y**3", "--json", "l.json"]
    first = subprocess.run([tv, *cmd, "--V", "x**2 + y**2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert first.returncode == 0, first.stderr[-800:]
    (tmp_path / "drive.py").write_text(_SIGNAL_DRIVER)
    hit = subprocess.run([sys.executable, str(tmp_path / "drive.py"), *cmd, "--V", "x**2 + 4*y**2"], cwd=tmp_path,
                         env={**env, "H41A_AT": "proofs_checks.owned.remember"}, capture_output=True, text=True,
                         timeout=60)
    assert hit.returncode == 143, (hit.returncode, hit.stderr[-800:])
    again = subprocess.run([tv, *cmd, "--V", "x**2 + y**2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0, (again.returncode, again.stderr[-800:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_an_inherited_ignored_sigchld_does_not_hang_the_command(tmp_path):
    # a caller that ignores SIGCHLD and execs tverify (a shell or daemon does this): the kernel then reaped the
    # command's process at its end, the supervisor's wait found no child and waited forever (SIGTERM did not end it)
    tv = os.path.join(os.path.dirname(sys.executable), "tverify")
    prog = tmp_path / "ign.py"
    prog.write_text(textwrap.dedent(f'''
        import os, signal, sys
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        os.execv({tv!r}, [{tv!r}] + sys.argv[1:])
        '''))
    r = subprocess.run([sys.executable, str(prog), "check", "lyapunov", "--f", "-x**3 - y, x - y**3",
                        "--V", "x**2 + y**2"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout[-600:], r.stderr[-600:])
    assert "Traceback" not in r.stderr
