"""Hostile pass 40 (tester a): one test per finding; each failed on 411e448 and passes since its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: tverify's console command (supervisor and all) with one step of the derivation made slow (1.5 s, as a real
#: derivation's SymPy step is) and a SIGALRM sent to the console process as that step starts: what `kill -ALRM PID`
#: from outside does when it lands while a derivation runs (the supervisor passes it on to the work process)
_ALARM_DRIVER = textwrap.dedent('''
    import os, signal, sys, time
    import theory.derivation as td
    _orig = td.Derivation.check_obligations
    _console = os.getpid()
    def slow(self):
        os.kill(_console, signal.SIGALRM)
        time.sleep(1.5)
        return _orig(self)
    td.Derivation.check_obligations = slow
    from proofs_checks.cli import main
    sys.argv = ["tverify"] + sys.argv[1:]
    main()
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor and SIGALRM forwarding are Linux's")
def test_a_sigalrm_from_outside_is_not_a_derivation_time_out(tmp_path):
    driver = tmp_path / "drive.py"
    driver.write_text(_ALARM_DRIVER)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TVERIFY_STORE": str(tmp_path / "store"),
           "TVERIFY_DERIVATION_CACHE": "0", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("TVERIFY_DERIVATION_BUDGET", None)
    r = subprocess.run([sys.executable, str(driver), "run", "lyap.conditions", "--quick", "--no-progress"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "did not finish in 300 s" not in out, out[-1500:]
    assert r.returncode in (0, 128 + 14), (r.returncode, out[-1500:])


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"), reason="ITIMER_REAL is POSIX's")
def test_the_api_keeps_the_callers_own_real_time_timer(tmp_path, monkeypatch):
    import signal

    import proofs_checks

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")  # (the derivation runs, under its budget)
    monkeypatch.delenv("TVERIFY_DERIVATION_BUDGET", raising=False)
    fired: list = []
    saved_handler = signal.signal(signal.SIGALRM, lambda s, f: fired.append(s))
    saved_timer = signal.setitimer(signal.ITIMER_REAL, 600)  # the caller's own time limit
    try:
        proofs_checks.run_claims(["lyap.conditions"], mode="quick")
        left, _ = signal.getitimer(signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, *saved_timer)
        signal.signal(signal.SIGALRM, saved_handler)
    assert left > 0, "the caller's 600 s timer was cancelled by the call"


#: a claims plugin whose import starts a non-daemon thread that runs for a minute (a background worker of its own);
#: the import probe passes (the probe process ends), then the import into tverify itself starts the thread there
_THREAD_PLUGIN = textwrap.dedent('''
    import threading, time
    def _worker():
        end = time.monotonic() + 60
        while time.monotonic() < end:
            time.sleep(0.2)
    threading.Thread(target=_worker, name="h40a-worker", daemon=False).start()
''')


def _list_ends_with_a_plugin(tmp_path, package: str, entry: str, text: str) -> None:
    """``tverify list lyap.conditions`` with the plugin ``package`` (``__init__.py`` is ``text``) installed: it ends
    within 15 s of its start, exit 0, with its listing."""
    import signal

    pp = tmp_path / "pp"
    (pp / package).mkdir(parents=True)
    (pp / package / "__init__.py").write_text(text)
    dist = pp / f"{package}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[tverify.claims]\n{entry} = {package}\n")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(pp)}
    p = subprocess.Popen([sys.executable, "-m", "proofs_checks", "list", "lyap.conditions"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=15)
        ended = True
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        ended = False
    assert ended, f"still running 15 s after start; stdout tail: {out[-300:]!r}"
    assert p.returncode == 0 and "lyap.conditions" in out, (p.returncode, err[-800:])


@pytest.mark.fresh_process  # its subject is the interpreter's exit with a plugin's thread running: a fresh interpreter (tests/warm_cli.py)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_a_plugins_non_daemon_thread_does_not_keep_the_command_alive(tmp_path):
    _list_ends_with_a_plugin(tmp_path, "h40a_threadplug", "h40a", _THREAD_PLUGIN)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's")
def test_a_process_a_plugins_import_starts_does_not_keep_the_command_alive(tmp_path):
    _list_ends_with_a_plugin(tmp_path, "h40a_procplug", "h40ap",
                             'import multiprocessing as mp, time\n_p = mp.get_context("fork").Process(target=time.sleep, '
                             'args=(60,))\n_p.start()\n')
