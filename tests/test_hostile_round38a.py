"""Hostile pass 32 (at the end of the fourteenth session), tester A (frozen32): F2, F3, F4 fixed; F1, F5, F6 in
the fifteenth session (tverify's own fork server; what it forks for the code moved into the check's cgroup). End to end, in the integration tier, each pinned by a unit test of tests/test_cgroup.py.

F1: the user's code asks the checks' fork server (its own parent) over the server's listener socket to fork a process
for it; that process is in the server's cgroup, not the check's memory cgroup, and a tmpfs it fills in a mount
namespace of its own (31a F1's hole, which the cgroup closed) holds 1.5 GB under --max-memory 1.0: verdict ok.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.test_hostile_round37a import NSHOG, _unshare_ok, stopped_over_1gb
from tests.tiers import moved
from cli_helpers import MEMORY_CGROUP, tv_here


ATTN = ("import math, os, pickle, socket, time\nfrom multiprocessing import reduction\n"
        + (Path(__file__).resolve().parents[1] / "examples" / "my_attn.py").read_text())  # the README's causal attention

FSESC = ATTN + '''
HERE = os.path.dirname(os.path.abspath(__file__))
MNT = os.path.join(HERE, "mnt")
_done = []

def _server_listener(ppid):   # the listening socket the fork server (this process's parent) holds
    inodes = set()
    for fd in os.listdir(f"/proc/{ppid}/fd"):
        try:
            t = os.readlink(f"/proc/{ppid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        p = line.split()
        if len(p) >= 8 and p[6] in inodes and p[5] == "01":
            return p[7]

class _Run:   # unpickled by the process the server forks: it runs this command
    def __reduce__(self):
        return (os.system, (f"exec unshare -Urm sh -c 'mount -t tmpfs none {MNT} && "
                            f"head -c 1500000000 /dev/zero > {MNT}/f && touch {HERE}/ready && exec sleep 120'",))

class E(MyAttention):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        if _done:
            return
        s = socket.socket(socket.AF_UNIX)
        s.connect(_server_listener(os.getppid()))
        child_r, parent_w = os.pipe(); parent_r, child_w = os.pipe(); a_r, a_w = os.pipe()
        reduction.sendfds(s, [child_r, child_w, a_w, a_w]); s.close()
        os.write(parent_w, pickle.dumps(_Run()))
        _done.append((parent_r, parent_w, a_r, a_w))
        for _ in range(300):
            if os.path.exists(os.path.join(HERE, "ready")):
                break
            time.sleep(0.1)
'''


def _need_cgroup_and_namespace() -> None:
    """Skip where the machine has no memory cgroup (a private-namespace tmpfs is then a documented limit) or no
    unprivileged mount namespace (``unshare -Urm``)."""
    if not MEMORY_CGROUP:
        pytest.skip("no memory cgroup here: a private-namespace tmpfs is a documented limit without one")
    if not _unshare_ok():
        pytest.skip("no unprivileged mount namespace here (unshare -Urm)")


@moved("a check holding 1.5 GB through the fork server",
       "tests/test_cgroup.py::test_a_process_the_fork_server_holds_for_no_check_is_moved_into_the_checks_group")
def test_a_process_the_fork_server_forks_for_the_code_counts_against_max_memory(tmp_path):
    _need_cgroup_and_namespace()
    stopped_over_1gb(tmp_path, FSESC, "fsesc.py:E")


SLOW = ATTN + '''
class S(MyAttention):
    def forward(self, x):
        time.sleep(0.05)
        return super().forward(x)
'''


@moved("tverify killed with SIGKILL in a fresh process",
       "tests/test_cgroup.py::test_a_group_left_by_a_tverify_that_is_gone_is_removed_by_the_next")
def test_no_memory_cgroup_left_behind_after_kill_9(tmp_path):
    import os
    import signal
    import sys
    import time

    from proofs_checks.sanity import _cgroup

    if not MEMORY_CGROUP:
        pytest.skip("no memory cgroup here")
    (tmp_path / "slow.py").write_text(SLOW)
    env = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"))
    p = subprocess.Popen([sys.executable, "-m", "proofs_checks.cli", "check", "attention", "--module", "slow.py:S",
                          "--causal", "--quick", "--no-progress"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = None
    for line in open("/proc/self/cgroup").read().splitlines():   # where MemoryCgroup.make puts the groups
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            parent = _cgroup._ROOT / "memory" / path.lstrip("/")
    if parent is None or not parent.is_dir():
        parent = _cgroup._own(None)
    before = {d.name for d in parent.iterdir()}

    made = set()

    def ours(pid: str) -> bool:  # the tverify started here, or its work process (a child of it)
        if pid in made:
            return True
        try:
            ppid = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            return False
        if int(pid) == p.pid or int(ppid) == p.pid:
            made.add(pid)
            return True
        return False

    def mine():   # groups made since, whose tverify process (the PID in the name) is gone
        out = []
        for d in parent.iterdir():
            m = d.name.split("-")
            # the groups of the tverify started here only: another run's groups beside them (a test suite running
            # in the same cgroup) are not this test's, and their processes are never killed by it
            if d.is_dir() and d.name not in before and d.name.startswith("tverify-") and len(m) >= 3 and ours(m[1]):
                out.append((d.name, os.path.exists(f"/proc/{m[1]}")))
        return out
    try:
        for _ in range(300):
            if mine():
                break
            time.sleep(0.05)
        assert mine(), "no cgroup was made for the check"
        time.sleep(0.5)
        for d in [n for n, alive in mine() if alive]:   # tverify's own process, wherever it runs
            os.kill(int(d.split("-")[1]), signal.SIGKILL)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    time.sleep(3)   # the fork server sees tverify gone and kills what is below it
    left = [n for n, alive in mine() if not alive]
    for n in left:   # (the test leaves the machine as it found it)
        with contextlib.suppress(OSError):
            (parent / n).rmdir()
    assert not left, left


def _once(cls: str, imports: str, body: str) -> str:
    """A user module: the README's attention and a subclass ``cls`` whose first ``__init__`` runs ``body`` (indented as
    its lines), with ``HERE`` (its folder) and ``imports`` (a module list) at hand."""
    return ATTN + f"""
import {imports}
HERE = os.path.dirname(os.path.abspath(__file__))
_done = []

class {cls}(MyAttention):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        if _done:
            return
""" + body.strip("\n") + "\n"


VICTIM = _once('V', 'subprocess', '''
        P = int(open(os.path.join(HERE, "segpid")).read())
        for _ in range(50):   # a process of the check's tree with the PID the user's segment's creator had
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(P - 1))
            p = subprocess.Popen(["sleep", "0.5"])
            if p.pid == P:
                break
            p.wait()
        p.wait()
        open(os.path.join(HERE, "victim_pid"), "w").write(str(p.pid))
        _done.append(1)

''')

_SHMGET = "import ctypes; print(ctypes.CDLL(None).shmget(0, 65536, 0o1600))"   # IPC_PRIVATE, IPC_CREAT | 0600


def _segments() -> dict[int, int]:
    lines = open("/proc/sysvipc/shm").read().splitlines()
    head = lines[0].split()
    return {int(r["shmid"]): int(r["cpid"]) for r in (dict(zip(head, l.split())) for l in lines[1:])}


@moved("a check in a fresh process reusing a chosen pid",
       "tests/test_cgroup.py::test_a_segment_that_existed_before_the_check_is_never_the_checks")
def test_a_segment_made_before_the_check_is_not_removed_by_pid_reuse(tmp_path):
    import ctypes
    import os
    import random
    import sys

    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(open("/proc/sys/kernel/ns_last_pid").read())
        open("/proc/sysvipc/shm").close()
    except OSError:
        pytest.skip("needs a writable /proc/sys/kernel/ns_last_pid (root) and /proc/sysvipc/shm")
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    shmid = None
    for _ in range(50):   # the user's segment, made by a short-lived process (as ipcmk makes one) with a free PID
        P = random.randrange(1000, min(pid_max, 4_000_000) - 10)
        if os.path.exists(f"/proc/{P}"):
            continue
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(P - 1))
        got = int(subprocess.run([sys.executable, "-S", "-c", _SHMGET], capture_output=True, text=True).stdout)
        if _segments().get(got) == P:
            shmid = got
            break
        ctypes.CDLL(None).shmctl(got, 0, None)
    if shmid is None:
        pytest.skip("could not make a segment with a chosen creator PID")
    try:
        (tmp_path / "segpid").write_text(str(P))
        (tmp_path / "victim.py").write_text(VICTIM)
        r = tv_here(tmp_path, "check", "attention", "--module", "victim.py:V", "--causal", "--quick", "--no-progress")
        if (tmp_path / "victim_pid").read_text() != str(P):
            pytest.skip("the PID was taken meanwhile")
        assert r.returncode == 0, (r.returncode, r.stderr[-600:])
        assert shmid in _segments(), "the user's segment was removed"
    finally:
        ctypes.CDLL(None).shmctl(shmid, 0, None)   # IPC_RMID (the test leaves nothing)


READER = _once('R', 'ctypes', '''
        # reads an input kept in a SysV segment (made before the check by a loader that has exited)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        addr = libc.shmat(int(open(os.path.join(HERE, "shmid")).read()), None, 0o10000)   # SHM_RDONLY
        _done.append(ctypes.string_at(addr, 16))
        libc.shmdt(ctypes.c_void_p(addr))
        time.sleep(0.3)

''')


@moved("a check in a fresh process attaching a segment",
       "tests/test_cgroup.py::test_a_segment_that_existed_before_the_check_is_never_the_checks")
def test_a_segment_the_code_only_read_is_not_removed(tmp_path):
    import ctypes
    import sys

    try:
        open("/proc/sysvipc/shm").close()
    except OSError:
        pytest.skip("no /proc/sysvipc/shm")
    shmid = int(subprocess.run([sys.executable, "-S", "-c", _SHMGET], capture_output=True, text=True).stdout)
    try:
        assert shmid in _segments()
        (tmp_path / "shmid").write_text(str(shmid))
        (tmp_path / "reader.py").write_text(READER)
        r = tv_here(tmp_path, "check", "attention", "--module", "reader.py:R", "--causal", "--quick", "--no-progress")
        assert r.returncode == 0, (r.returncode, r.stderr[-600:])
        assert shmid in _segments(), "the user's segment was removed"
    finally:
        ctypes.CDLL(None).shmctl(shmid, 0, None)   # IPC_RMID (the test leaves nothing)


CALLER = '''
import multiprocessing as mp, os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def work(path):
    time.sleep(3)
    open(path, "a").write("done\\n")

if __name__ == "__main__":
    import proofs_checks
    from attn import MyAttention
    ctx = mp.get_context("forkserver")   # the caller's own jobs, on the same (module-global) fork server
    codes, stop, procs = [], [], []
    def starter():
        while not stop:
            p = ctx.Process(target=work, args=(os.path.join(os.path.dirname(__file__), "done"),))
            p.start(); procs.append(p)
            time.sleep(0.3)
    t = threading.Thread(target=starter); t.start()
    r = proofs_checks.check_attention(MyAttention(), causal=True)
    stop.append(1); t.join()
    for p in procs:
        p.join()
    print("verdict", r.outcome, "exitcodes", sorted({p.exitcode for p in procs}), flush=True)
'''


STUB = '''
import multiprocessing as mp, os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def work():
    pass

if __name__ == "__main__":
    import proofs_checks
    from proofs_checks.sanity import _procs
    from attn import MyAttention
    ctx = mp.get_context("forkserver")
    out = []
    def starter():   # the caller's own job, started while tverify starts its check's process (its server just up)
        while _procs.server_pid() is None:
            time.sleep(0.001)
        time.sleep(0.05)
        try:
            p = ctx.Process(target=work); p.start(); p.join(); out.append(f"job exit {p.exitcode}")
        except Exception as e:
            out.append(f"job failed: {type(e).__name__}: {e}")
    t = threading.Thread(target=starter); t.start()
    r = proofs_checks.check_attention(MyAttention(), causal=True)
    t.join()
    print("verdict", r.outcome, "|", out[0], flush=True)
'''


@moved("the API with the caller's own processes in a fresh process",
       "tests/test_cgroup.py::test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close")
@pytest.mark.parametrize("script,said", [
    pytest.param(CALLER, "exitcodes [0]", id="own_forkserver_job"),
    pytest.param(STUB, "job exit 0", id="main_for_other_threads")])
def test_the_callers_own_processes_are_left_alone(tmp_path, script, said):
    import sys

    (tmp_path / "attn.py").write_text(ATTN)
    (tmp_path / "caller.py").write_text(script)
    r = subprocess.run([sys.executable, "caller.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "verdict ok" in r.stdout, (r.stdout[-600:], r.stderr[-1500:])
    assert said in r.stdout, r.stdout[-600:]


@moved("a check holding 1.5 GB in a private mount namespace",
       "tests/test_cgroup.py::test_a_group_left_by_a_tverify_that_is_gone_is_removed_by_the_next")
def test_a_stale_group_of_the_same_name_does_not_switch_the_cgroup_off(tmp_path):
    import os

    from proofs_checks.sanity import _cgroup

    _need_cgroup_and_namespace()
    parent = _cgroup._own("memory")
    if parent is None or not parent.is_dir():
        pytest.skip("not the v1 memory hierarchy")
    n = next(_cgroup._COUNT)   # the next groups this process makes: tverify-PID-(n+1), ...
    stale = [parent / f"tverify-{os.getpid()}-{k}" for k in range(n + 1, n + 4)]
    for d in stale:   # what a kill -9 of an earlier process with this PID left (F2)
        d.mkdir()
    try:
        stopped_over_1gb(tmp_path, NSHOG, "nshog.py:NsHog")  # pass 31a F1's module
    finally:
        for d in stale:
            with contextlib.suppress(OSError):
                d.rmdir()
