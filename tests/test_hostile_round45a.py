"""Hostile pass 39 (tester a): one test per finding, each failed on 018f9f0 and passes since its fix."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import tv_here
from tests.test_hostile_round44a import _hogging

_FREEZER = Path("/sys/fs/cgroup/freezer")


def _v1_freezer_usable() -> bool:
    return sys.platform.startswith("linux") and os.geteuid() == 0 and (_FREEZER / "cgroup.procs").is_file()


#: a module whose first call forks a process that moves ONE of its threads (not the process: v1 ``tasks`` takes a
#: thread id) into a v1 freezer group of its own and freezes it. /proc/PID/cgroup shows the thread-group leader's
#: groups only, so the check's kill-and-thaw finds nothing frozen; the SIGKILL waits on the frozen thread for good.
_THREAD_FREEZE = _hogging('''
import math, os, sys, threading, time
import torch
from torch import nn

_KEEP = []
G = "/sys/fs/cgroup/freezer/" + os.environ["H39A_FREEZER_NAME"]
HERE = os.path.dirname(os.path.abspath(__file__))


def freeze_a_thread():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        blob = bytearray(64 << 20)
        for i in range(0, len(blob), 4096):
            blob[i] = 1
        t = threading.Thread(target=lambda: time.sleep(10 ** 6), daemon=True)
        t.start()
        os.makedirs(G, exist_ok=True)
        with open(G + "/tasks", "w") as f:
            f.write(str(t.native_id))
        with open(G + "/freezer.state", "w") as f:
            f.write("FROZEN")
        with open(os.path.join(HERE, "frozen.pid"), "w") as f:
            f.write(str(os.getpid()))
        os.write(w, b"x")
        while True:
            time.sleep(1)
    os.close(w)
    os.read(r, 1)
    return pid


''', '''
            _KEEP.append(freeze_a_thread())
''')


def _threads_alive(pid: int) -> list[int]:
    """The threads of ``pid`` that are not zombies (a leader that exited leaves its other threads running)."""
    out = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError):
                if Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X"):
                    out.append(int(tid))
    return out


def _thaw_and_remove(name: str) -> None:
    g = _FREEZER / name
    with contextlib.suppress(OSError):
        (g / "freezer.state").write_text("THAWED")
    for _ in range(50):
        with contextlib.suppress(OSError):
            g.rmdir()
        if not g.exists():
            return
        time.sleep(0.05)


@pytest.mark.skipif(not _v1_freezer_usable(), reason="needs root and the cgroup v1 freezer hierarchy")
def test_a_single_frozen_thread_does_not_keep_the_codes_process_alive(tmp_path: Path, monkeypatch):
    name = f"h39a{os.getpid()}t"
    monkeypatch.setenv("H39A_FREEZER_NAME", name)
    (tmp_path / "fz.py").write_text(_THREAD_FREEZE)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "fz.py:MyAttention", "--quick")
        pid = int((tmp_path / "frozen.pid").read_text())
        time.sleep(0.3)
        left = _threads_alive(pid)
    finally:
        _thaw_and_remove(name)
    assert "Traceback" not in r.stderr, r.stderr
    assert not left, f"threads {left} of the code's process {pid} outlived the check (frozen, SIGKILL pending)"


_TVERIFY = str(Path(sys.executable).with_name("tverify"))


@pytest.mark.skipif(not _v1_freezer_usable(), reason="needs root and the cgroup v1 freezer hierarchy")
def test_a_frozen_thread_of_the_checks_child_does_not_hang_tverify(tmp_path: Path):
    import signal
    import subprocess

    name = f"h39a{os.getpid()}c"
    text = (_THREAD_FREEZE.replace("    pid = os.fork()\n", "    pid = 0\n")
            .replace('        os.write(w, b"x")\n', "        return 0\n"))
    (tmp_path / "fz.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"), H39A_FREEZER_NAME=name)
    p = subprocess.Popen([_TVERIFY, "check", "attention", "--module", "fz.py:MyAttention", "--quick", "--no-progress"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    hung = False
    try:
        try:
            out, err = p.communicate(timeout=25)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)  # (what `timeout`, a CI job's cancel sends)
            try:
                out, err = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                hung = True
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
    finally:
        _thaw_and_remove(name)
    assert "Traceback" not in err, err
    assert not hung, f"tverify did not exit within 25 s, nor 5 s after a SIGTERM: {err[-600:]}"
    assert p.returncode == 0, (p.returncode, err[-600:])


#: a module whose first call forks a process whose main thread ends (``pthread_exit``: the process goes on in its
#: other thread, its leader a zombie) before that thread allocates and holds 1.2 GB: /proc/PID/smaps_rollup and
#: /proc/PID/status of a zombie leader show no memory, so without a memory cgroup nothing of it is counted
_LEADER_EXITED = _hogging('''
import ctypes, math, os, sys, threading, time
import torch
from torch import nn

_KEEP = []


def hog(n):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        def keep():
            time.sleep(0.5)
            blob = bytearray(n)
            for i in range(0, n, 4096):
                blob[i] = 1
            os.write(w, b"x")
            while True:
                time.sleep(1)
        threading.Thread(target=keep).start()
        ctypes.CDLL(None).pthread_exit(None)
    os.close(w)
    os.read(r, 1)
    return pid


''', '''
            _KEEP.append(hog(1200 << 20))
            print("held MB 1200", file=sys.stderr)
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc accounting")
def test_memory_of_a_process_whose_leader_thread_ended_is_counted_without_a_cgroup(tmp_path: Path, monkeypatch):
    from proofs_checks.sanity import _cgroup

    monkeypatch.setattr(_cgroup.MemoryCgroup, "make", classmethod(lambda cls: None))  # as where no group can be made
    (tmp_path / "hog.py").write_text(_LEADER_EXITED)
    r = tv_here(tmp_path, "check", "attention", "--module", "hog.py:MyAttention", "--quick", "--max-memory", "0.5")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2 and "--max-memory 0.5" in r.stderr, (r.returncode, r.stderr[-800:])


#: ``cli.main`` in a fresh interpreter, a SIGTERM sent to itself at the moment the import system is asked for
#: ``KILL_AT`` (the same moment a real ``kill`` can land: seen at 0.72-0.8 s of a plain ``tverify check lyapunov``,
#: exit 0 with CVXPY's warning)
_SIGNAL_AT_IMPORT = '''
import os, signal, sys

class _At:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["KILL_AT"]:
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, _At())
from proofs_checks.cli import main
sys.exit(main(["check", "lyapunov", "--f", "-x**3-y,x-y**3", "--V", "x**2+y**2"]))
'''


def test_a_sigterm_during_the_solvers_import_is_not_swallowed(tmp_path: Path):
    import subprocess

    pytest.importorskip("highspy")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"), KILL_AT="highspy_extras")
    r = subprocess.run([sys.executable, "-c", _SIGNAL_AT_IMPORT], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 143, (r.returncode, r.stderr[-800:])
    assert "verdict" not in r.stdout, r.stdout[-400:]


_NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


def _hugepages_settable() -> bool:
    return sys.platform.startswith("linux") and os.geteuid() == 0 and os.access(_NR_HUGEPAGES, os.W_OK)


@pytest.mark.skipif(not _hugepages_settable(), reason="needs root to give the machine a huge-page pool")
def test_huge_pages_of_a_process_whose_leader_thread_ended_are_counted(tmp_path: Path):
    text = (_LEADER_EXITED
            .replace("            blob = bytearray(n)\n",
                     "            import mmap\n"
                     "            blob = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)\n")
            .replace("hog(1200 << 20)", "hog(700 << 20)"))
    (tmp_path / "hog.py").write_text(text)
    before = _NR_HUGEPAGES.read_text().strip()
    _NR_HUGEPAGES.write_text("400")  # (800 MB of 2 MB pages, given back below)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "hog.py:MyAttention", "--quick", "--max-memory", "0.5")
    finally:
        _NR_HUGEPAGES.write_text(before)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2 and "--max-memory 0.5" in r.stderr, (r.returncode, r.stderr[-800:])

# --- lead additions ---
def test_a_sigterm_while_an_exit_cannot_finish_ends_the_command_after_its_grace():
    """39a F2's second half: a SIGTERM once the command had finished was one line and the exit went on waiting (for a
    process that did not die) for 9 minutes; past console.LATE_GRACE the signal ends it (143)."""
    code = ("import atexit, os, signal, time\n"
            "from proofs_checks.cli import main\n"
            "import proofs_checks.console as console\n"
            "console.LATE_GRACE = 1.0\n"
            "atexit.register(lambda: time.sleep(60))  # an exit that cannot finish (registered first: runs last)\n"
            "atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))  # the signal as Python exits\n"
            "main(['--version'])\n")
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t < 30, p
    assert p.returncode == -signal.SIGTERM and "SIGTERM while exiting" in p.stderr and "Traceback" not in p.stderr, p


def test_a_swallowed_signal_that_is_not_raised_again_still_exits_as_terminated(tmp_path: Path):
    """39a F4's last line of defence: with the watch that raises a swallowed Terminated again switched off, the command
    runs to its end, and exits 143 with one line saying the signal was swallowed (exit 0 before)."""
    pytest.importorskip("highspy")
    code = _SIGNAL_AT_IMPORT.replace("from proofs_checks.cli import main\n", (
        "from proofs_checks.cli import main\nimport proofs_checks.console as console\n"
        "console._until_delivered = lambda signum: None\n"), 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"), KILL_AT="highspy_extras")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 143 and "SIGTERM was swallowed by code the command ran" in r.stderr, (r.returncode,
                                                                                               r.stderr[-800:])
    assert "Traceback" not in r.stderr, r.stderr


def test_a_signal_turned_into_an_import_error_on_its_way_out_is_the_one_line_termination(tmp_path: Path):
    """39a N2 (a traceback from console.on_signal, exit 1, seen once): a SIGTERM raised inside a C extension's
    initialisation comes out as that module's ImportError; when nothing catches it, the command ends as terminated."""
    code = _SIGNAL_AT_IMPORT.replace('sys.exit(main(["check", "lyapunov", "--f", "-x**3-y,x-y**3", "--V", "x**2+y**2"]))',
                                     'import proofs_checks.cli_select as cli\n'
                                     'def boom(*args, **kwargs):\n'
                                     '    try:\n'
                                     '        os.kill(os.getpid(), signal.SIGTERM)\n'
                                     '        import time; time.sleep(1)\n'
                                     '    except BaseException as exc:\n'
                                     '        raise ImportError("initialization failed") from exc\n'
                                     'cli._select = boom\n'
                                     'sys.exit(main(["run", "attn.forms_agree", "--quick"]))', 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"), KILL_AT="-")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 143 and "terminated (SIGTERM)" in r.stderr and "Traceback" not in r.stderr, (
        r.returncode, r.stderr[-800:])
