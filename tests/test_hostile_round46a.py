"""Hostile pass 40 (tester a): one reproducer per finding, each expected to fail (xfail, strict) on the frozen code."""

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
