"""The check's memory cgroup (proofs_checks/sanity/_cgroup.py; issue 44 item 2): made where the machine lets this
process make one, it counts what a process holds whatever that process is (shared memory, kernel memory), and
closing it leaves no process of it alive. Skipped, with the reason, where no cgroup can be made."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofs_checks.sanity._cgroup import MemoryCgroup

HOLD = r"""
import os, sys, time
fd = os.memfd_create("held")   # shared memory written, never mapped: in no process's resident set
for _ in range(4): os.write(fd, b"\1" * (16 << 20))
print("ready", flush=True); time.sleep(60)
"""


@pytest.fixture
def cg():
    g = MemoryCgroup.make() if sys.platform.startswith("linux") else None
    if g is None:
        pytest.skip("this process may not make a memory cgroup here (docs/own-model.md: the figures of /proc alone)")
    yield g
    g.close()


def test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close(cg):
    before = cg.used()
    p = subprocess.Popen([sys.executable, "-c", f"import os; open({str(cg.folder / 'cgroup.procs')!r}, 'w').write('0')"
                          + "\n" + HOLD], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        assert p.pid in cg.pids()
        assert cg.used() - before >= 60 * 2**20, (before, cg.used())
        cg.close()
        assert p.wait(timeout=10) == -9  # SIGKILL, found through the group
        assert not cg.folder.exists()
    finally:
        if p.poll() is None:
            p.kill()


def test_page_cache_of_an_ordinary_file_read_is_not_counted(cg, tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(32 << 20))
    assert cg.join(0) or pytest.skip("this process cannot join the group")
    try:
        before = cg.used()
        with open(data, "rb") as fh:
            while fh.read(1 << 20):
                pass
        time.sleep(0.05)
        assert cg.used() - before < 16 * 2**20, (before, cg.used())
    finally:
        parent = cg.folder.parent / "cgroup.procs"
        parent.write_text(str(os.getpid()))  # back where this test process was


def test_mount_points_are_read_with_every_escape():
    """31a F3: the kernel writes space, tab, newline and backslash of a mount point as octal escapes; a tmpfs at a
    folder with a tab in its name was skipped by the /proc figures."""
    from proofs_checks.sanity._procs import _unescape

    assert _unescape(r"/m/t\011b\040c\012d\134e") == "/m/t\tb c\nd\\e"
    assert _unescape("/dev/shm") == "/dev/shm"


LOCK = r"""
import ctypes, mmap, sys, time
with open(sys.argv[1], "wb") as f:  # written from the group: its page cache is the group's
    f.write(b"\1" * (48 << 20))
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, len(m), 4096))
print("cached", flush=True); sys.stdin.readline()
ok = ctypes.CDLL(None, use_errno=True).mlockall(1) == 0  # MCL_CURRENT: the mapping's pages locked in memory
print("ready" if ok else "refused", flush=True); time.sleep(60)
"""


def test_locked_file_pages_count_and_page_cache_does_not(cg, tmp_path):
    """31a F6: file pages locked in memory (mlock) count; the same pages as page cache only, before the lock, do not."""
    before = cg.used()
    p = subprocess.Popen([sys.executable, "-c", f"open({str(cg.folder / 'cgroup.procs')!r}, 'w').write('0')\n" + LOCK,
                          str(tmp_path / "data.bin")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"cached"
        cached = cg.used() - before
        p.stdin.write(b"\n")
        p.stdin.flush()
        if p.stdout.readline().strip() != b"ready":
            pytest.skip("mlockall refused here (RLIMIT_MEMLOCK): nothing to lock")
        locked = cg.used() - before
        assert cached < 24 * 2**20 and locked >= 40 * 2**20, (cached, locked)
    finally:
        p.kill()
        p.wait()


#: lines of a user module's ``__init__`` that find the check's result channel as ``c`` (a multiprocessing Connection
#: found through ``gc`` that is not the standard output), to write into it
FIND_CHANNEL = '''
        out_ino = os.fstat(1).st_ino
        for c in [o for o in gc.get_objects() if type(o).__name__ == "Connection"]:
            try:
                if not c.writable or os.fstat(c.fileno()).st_ino == out_ino:
                    continue
            except (OSError, ValueError):
                continue
'''

BIG_MESSAGE = '''
import gc, os, struct
from own_attention import CausalSelfAttention
_done = []
class Flood(CausalSelfAttention):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        if _done:
            return
        _done.append(1)
@FIND_CHANNEL@            os.write(c.fileno(), struct.pack("!i", SIZE))  # a header announcing SIZE bytes,
            if SIZE < (64 << 20):  # and the bytes themselves where they fit (beyond, the length alone is refused)
                os.write(c.fileno(), b"[" + b"0," * (SIZE // 2 - 1) + b"0]")
'''.replace("@FIND_CHANNEL@", FIND_CHANNEL.lstrip("\n"))


@pytest.mark.parametrize("size,said", [(100 << 20, "more than 64 MiB"), (1 << 20, "not sent by the check")])
def test_a_message_the_code_writes_on_the_result_channel_is_never_parsed(tmp_path, size, said):
    """31a F7: a message on the result channel longer than any result is refused from its length alone, and a
    shorter one without the check's token from its first bytes, before anything is decoded (a 500 MB message was
    read and parsed in tverify's own process: 2.97 GB)."""
    from pathlib import Path

    from cli_helpers import tv_here

    own = Path(__file__).resolve().parent / "data" / "own_attention.py"
    (tmp_path / "own_attention.py").write_text(own.read_text())
    (tmp_path / "m.py").write_text(f"SIZE = {size}\n" + BIG_MESSAGE)
    r = tv_here(tmp_path, "check", "attention", "--module", "m.py:Flood", "--causal", "--quick", "--no-progress",
                "--timeout", "60")
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr[-800:])


def test_a_group_left_by_a_tverify_that_is_gone_is_removed_by_the_next(cg):
    """A tverify killed with SIGKILL cannot remove its group: the next one that makes a group beside it removes it
    (and kills what is still in it); a group of a tverify still running is left alone."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # a pid that is gone
    stale = cg.folder.parent / f"tverify-{p.pid}-0"
    stale.mkdir()
    mine = MemoryCgroup.make()
    try:
        assert not stale.exists() and cg.folder.exists()
    finally:
        mine.close()
        if stale.exists():
            stale.rmdir()


def test_a_segment_that_existed_before_the_check_is_never_the_checks():
    """32a F3, F4: a SysV segment made before the check (by a process gone since, whose pid a process of the check may
    reuse, or attached by the check's code) is neither counted nor removed as the check's."""
    import ctypes

    from proofs_checks.sanity import _procs

    if not sys.platform.startswith("linux"):
        pytest.skip("SysV shared memory through /proc/sysvipc/shm")
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600: made by this process
    if shmid < 0:
        pytest.skip("shmget refused here")
    try:
        before = _procs.segment_ids()
        assert shmid in before
        assert shmid in _procs.sysv_segments({os.getpid()})  # made by one of the pids: the check's, without `before`
        assert shmid not in _procs.sysv_segments({os.getpid()}, before)
        _procs.SEGMENTS_BEFORE[os.getpid()] = before
        _procs.remove_segments(os.getpid(), [])
        assert shmid in _procs.segment_ids()  # not removed
    finally:
        libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None)


def test_a_process_the_fork_server_holds_for_no_check_is_moved_into_the_checks_group(cg, monkeypatch):
    """What the user's code has the checks' fork server fork for it (32a F1) is moved into the check's group: here this
    process stands for the server, a child of it started after the check for the process the code asked for, and a
    child that was there before the check (a check of another thread's) is left where it is."""
    from proofs_checks.sanity import _procs

    old = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    before = frozenset(_procs._Children().get(os.getpid()))  # (this process's own fork server among them: left alone)
    new = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert old.pid in before
        monkeypatch.setattr(_procs, "_SERVER", type("S", (), {"_forkserver_pid": os.getpid()})())
        monkeypatch.setitem(_procs.ACTIVE, 999_999_999, before)  # the check: what the server held when it started
        _procs.server_orphans_into(cg, 999_999_999)
        assert new.pid in cg.pids() and old.pid not in cg.pids(), (cg.pids(), old.pid, new.pid)
    finally:
        for p in (old, new):
            p.kill()
            p.wait()


def test_socket_buffers_unread_on_loopback_are_counted_by_the_machine_figure():
    """Data sent on a loopback connection and never read is held in the kernel's socket buffers, in no process's
    memory: the figure of what the machine holds counts its growth (33a F1; the end to end case in the integration
    tier holds 1.4 GB)."""
    import socket

    from proofs_checks.sanity import _procs

    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.socket()
    c.connect(ls.getsockname())
    a, _ = ls.accept()
    c.setblocking(False)
    before = _procs.machine_held()
    try:
        sent = 0
        while sent < 8 << 20:
            try:
                sent += c.send(b"x" * (1 << 20))
            except BlockingIOError:
                break
        grown = _procs.machine_held() - before
        assert sent >= 1 << 20 and grown >= sent / 4, (sent, grown)
    finally:
        for s in (c, a, ls):
            s.close()


def test_unix_socket_buffers_unread_are_counted_by_the_machine_figure():
    """Data sent on a Unix socket pair and never read is in no process's memory and in no /proc figure: read from the
    kernel's socket diagnostics (34a F5: 1.4 GB held that way passed --max-memory 1.0 without a cgroup)."""
    import socket

    from proofs_checks.sanity import _procs

    a, b = socket.socketpair()
    a.setblocking(False)
    before = _procs.machine_held()
    try:
        sent = 0
        with contextlib.suppress(BlockingIOError):
            while sent < 4 << 20:
                sent += a.send(b"x" * (1 << 16))
        grown = _procs.machine_held() - before
        assert sent >= 1 << 16 and grown >= sent, (sent, grown)
    finally:
        a.close()
        b.close()


def test_a_group_of_another_pid_namespace_is_swept_only_once_that_namespace_is_gone(cg, monkeypatch):
    """A group named in another PID namespace (its pid means nothing here) is left by the sweep while a process is in
    that namespace (33a F2), or where this process cannot see every namespace; removed once none is (a sandboxed check
    killed with its sandbox: 34a F2); one of this namespace whose pid is gone is removed."""
    from proofs_checks.sanity import _cgroup

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    parent = cg.folder.parent
    running = parent / f"tverify-{dead.pid}-0-ab-n1"
    killed = parent / f"tverify-{dead.pid}-0-ef-n2"
    ours = parent / f"tverify-{dead.pid}-0-cd-{_cgroup._pid_namespace()}"
    groups = (running, killed, ours)
    try:
        for g in groups:
            g.mkdir()
        monkeypatch.setattr(_cgroup, "_live_namespaces", lambda ns: None)  # not the machine's first namespace
        _cgroup._sweep(parent)
        assert running.is_dir() and killed.is_dir() and not ours.exists()
        monkeypatch.setattr(_cgroup, "_live_namespaces", lambda ns: {"n1", ns})
        _cgroup._sweep(parent)
        assert running.is_dir() and not killed.exists()
    finally:
        for g in groups:
            if g.exists():
                g.rmdir()


def test_the_live_namespaces_include_this_ones_where_every_process_is_seen():
    from proofs_checks.sanity import _cgroup

    ns = _cgroup._pid_namespace()
    live = _cgroup._live_namespaces(ns)
    assert (live is None) == (ns != _cgroup._FIRST_PID_NAMESPACE)
    assert live is None or ns in live
    assert _cgroup._live_namespaces("n1") is None


def test_mapped_shared_memory_is_left_to_the_group_where_there_is_one(tmp_path):
    """A ``/dev/shm`` file that existed before the check, mapped and read by the child: in the ``/proc`` figure when
    what is mapped counts (no cgroup), not when the group counts what the code makes (33a F8)."""
    from proofs_checks.sanity import _procs

    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm")
    data = shm / f"tverify-test-{os.getpid()}"
    data.write_bytes(b"\1" * (64 << 20))
    p = subprocess.Popen([sys.executable, "-c", "import mmap, os, sys, time\n"
                          f"fd = os.open({str(data)!r}, os.O_RDONLY); m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n"
                          "sum(m[i] for i in range(0, len(m), 4096)); print('ready', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE)
    try:
        start = _procs.machine_held()
        assert p.stdout.readline().strip() == b"ready"
        with_map = _procs.tree_memory(p.pid, start, True)
        without = _procs.tree_memory(p.pid, start, False)
        assert with_map - without >= 48 << 20, (with_map, without)
    finally:
        p.kill()
        p.wait()
        data.unlink()


def test_the_memory_left_by_a_limited_own_cgroup_is_what_the_default_limit_halves(tmp_path):
    """In a job whose memory cgroup has a limit, the memory available is what that limit leaves, not the machine's
    (33a F6; v1, root)."""
    from proofs_checks.sanity import _cgroup

    parent = _cgroup._own("memory")
    if os.geteuid() != 0 or (_cgroup._ROOT / "cgroup.controllers").is_file() or parent is None or not parent.is_dir():
        pytest.skip("needs root and the v1 memory hierarchy (a limited group of the test's own)")
    job = parent / f"tverify-test-job-{os.getpid()}"
    job.mkdir()
    try:
        (job / "memory.limit_in_bytes").write_text(str(3 << 30))
        r = subprocess.run([sys.executable, "-c", f"open({str(job / 'cgroup.procs')!r}, 'w').write('0')\n"
                            "from proofs_checks import guards; print(guards.available_memory())"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-500:]
        assert 0 < float(r.stdout) <= 3 << 30, r.stdout
    finally:
        rmdir_soon(job)


def rmdir_soon(folder: Path) -> None:
    """Remove a cgroup folder once its processes have gone (a killed process leaves it a moment later)."""
    for _ in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def test_the_checks_fork_server_has_a_session_of_its_own():
    """The fork server leaves tverify's process group (a SIGKILL to the group, ``timeout -s KILL``, killed it with
    tverify, and the code's daemon lived on: 33a F5); it ends with tverify's end of its pipe, killing what is below."""
    from proofs_checks.sanity import _isolate, _procs

    _isolate._context()
    pid = _procs.server_pid()
    if pid is None:
        pytest.skip("no fork server on this platform")
    for _ in range(100):  # (the server calls setsid as it boots)
        if os.getsid(pid) != os.getsid(0):
            break
        time.sleep(0.05)
    assert os.getsid(pid) == pid != os.getsid(0)


def test_the_fork_server_hands_its_children_a_frozen_heap(tmp_path):
    """The checks' fork server freezes what it imported (proofs_checks/sanity/_server_ready.py, last of PRELOAD): the
    check's child finds it in the collector's permanent generation (a quick check 0.58 -> 0.40 s, benchmarks/RESULTS.md);
    imported in any other process the module freezes nothing."""
    import gc

    from cli_helpers import causal_attn, tv_here
    from proofs_checks.sanity import _isolate, _server_ready  # noqa: F401

    assert _isolate.PRELOAD[-1] == "proofs_checks.sanity._server_ready"
    assert gc.get_freeze_count() == 0
    (tmp_path / "att.py").write_text(causal_attn(8, 2, f"""
        import gc, pathlib
        pathlib.Path({str(tmp_path / 'frozen.txt')!r}).write_text(str(gc.get_freeze_count()))
    """))
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--causal", "--quick")
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert int((tmp_path / "frozen.txt").read_text()) > 100_000


def test_huge_pages_a_process_maps_are_in_its_memory():
    """Huge pages (``MAP_HUGETLB``) are in no resident-set figure and in no memory cgroup's count: read from the
    process's ``Private_Hugetlb``/``Shared_Hugetlb`` (2 GB passed --max-memory 1.0: 34a F4)."""
    from proofs_checks.sanity import _procs

    knob = Path("/proc/sys/vm/nr_overcommit_hugepages")
    try:
        old = knob.read_text()
        knob.write_text("40")
    except OSError:
        pytest.skip("huge pages cannot be made available here (needs root)")
    p = subprocess.Popen([sys.executable, "-c", (
        "import mmap, sys, time\n"
        "try:\n"
        "    m = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)  # MAP_HUGETLB\n"
        "    for i in range(0, len(m), 1 << 21): m[i] = 1\n"
        "except OSError as e:\n"
        "    print('none', e, flush=True); sys.exit()\n"
        "print('held', flush=True); time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    try:
        said = p.stdout.readline()
        if not said.startswith("held"):
            pytest.skip(f"no huge pages here: {said.strip()}")
        assert _procs._memory_kb(p.pid)["anon"] >= 64 << 20
    finally:
        p.kill()
        p.wait()
        knob.write_text(old)


def test_a_jobs_page_cache_active_or_not_is_room_and_the_default_is_never_below_256_mb(tmp_path, monkeypatch):
    """The room a job's cgroup leaves counts its page cache, active and inactive, as the kernel reclaims both before
    any OOM kill (a dataset read twice, 2.5 GB of active page cache, left a check 9 MB: 34a F1); and the default limit,
    estimates included, is never below 256 MB (the end-to-end case, 1.75 GB written to disk, is in the integration
    tier)."""
    from proofs_checks import guards

    for v2, keys in ((True, ("active_file", "inactive_file")), (False, ("total_active_file", "total_inactive_file"))):
        (tmp_path / "memory.stat").write_text(f"anon 5\n{keys[0]} 3000\n{keys[1]} 700\nshmem 9\n")
        assert guards._file_pages(tmp_path, v2) == 3700
    monkeypatch.setattr(guards, "available_memory", lambda: 20 * 1024**2)
    limit, why = guards.memory_limit(None)
    assert limit == guards.MIN_MEMORY_LIMIT and "256 MB" in why.replace("MiB", "MB")
    assert guards.memory_limit(0.1)[0] == 0.1 * guards.GB  # a declared limit stays what was declared


def test_the_reclaimable_caches_of_a_group_are_freed_before_its_figure_is_believed(cg, tmp_path):
    """Names looked up by a process of the group leave dentries charged to it (kernel memory the kernel reclaims under
    pressure): ``reclaim`` frees them and ``used`` no longer holds them (34a F6: a correct check was stopped)."""
    p = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "sys.stdin.readline()  # (in the group first)\n"
        f"for i in range(200_000): os.path.exists({str(tmp_path)!r} + '/absent-%d' % i)\n"
        "print('looked', flush=True); time.sleep(30)\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert cg.join(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        p.stdout.readline()
        held = cg.used()
        cg.reclaim()
        after = cg.used()
        if held is None or held < 20 << 20:
            pytest.skip(f"the kernel charged no dentries to the group here ({held})")
        assert after < held / 2, (held, after)
    finally:
        p.kill()
        p.wait()


def test_a_fork_server_killed_by_the_code_is_said_and_the_next_check_starts_another(tmp_path):
    """The code killing the checks' fork server (its parent) is said as that, not as "exit status 255 (os._exit, or an
    exit the code made)", multiprocessing's status for a child whose server is gone (33a N3); the next check in the
    same process starts a new server."""
    from cli_helpers import causal_attn, tv_here

    (tmp_path / "att.py").write_text(causal_attn(8, 2, """
        import os, signal
        class K(Attn):
            def __init__(self):
                super().__init__()
                os.kill(os.getppid(), signal.SIGKILL)
    """))
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:K", "--causal", "--quick")
    assert r.returncode == 2 and "fork server that started it was killed" in r.stderr, (r.returncode, r.stderr)
    again = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--causal", "--quick")
    assert again.returncode == 0, again.stdout[-800:] + again.stderr[-800:]


def test_in_a_cgroup_namespace_on_the_machines_mount_no_group_is_made_outside_the_own(cg):
    """In a cgroup namespace (``unshare -C``) ``/proc/self/cgroup`` reads "/" while ``/sys/fs/cgroup`` is still the
    machine's mount: the check's group was made at the machine's root, out of the job's limit (35a F1). No group then
    (the ``/proc`` figures, as documented)."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    parent = cg.folder
    job = parent / "job"
    job.mkdir()
    make = ("'from proofs_checks.sanity import _cgroup; g = _cgroup.MemoryCgroup.make(); print(g and g.folder); "
            "g and g.close()'")

    def made(pre: str) -> str:
        r = subprocess.run(["sh", "-c", f"echo $$ > {job}/cgroup.procs && exec {pre} {sys.executable} -c {make}"],
                           capture_output=True, text=True, timeout=60)
        if "unshare" in r.stderr:
            pytest.skip(f"unshare -C refused here: {r.stderr.strip()[:100]}")
        return r.stdout.strip()

    try:
        assert made("").startswith(str(job)), "the control: a group below the job's"
        assert made("unshare -C") == "None"
    finally:
        rmdir_soon(job)


def test_sysv_message_queues_the_tree_sent_to_are_counted_and_removed():
    """Messages left in a SysV queue are kernel memory in no process's figure: the queues a process of the check sent
    to count by their bytes queued and are removed at the end; one that existed before is neither (35a F3; the end to
    end case, 30,000 queues, is tests/test_hostile_round41a.py)."""
    import ctypes

    from proofs_checks.sanity import _procs

    libc = ctypes.CDLL(None, use_errno=True)
    before = _procs.queue_ids()
    old = libc.msgget(0, 0o600 | 0o1000)  # IPC_PRIVATE | IPC_CREAT: one that exists before
    if old < 0:
        pytest.skip("no SysV message queues here")
    try:
        p = subprocess.Popen([sys.executable, "-c", (
            "import ctypes, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "q = libc.msgget(0, 0o600 | 0o1000)\n"
            "msg = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 4096); msg[0] = b'\\x01'\n"
            "assert libc.msgsnd(q, msg, 4096, 0) == 0\n"
            "print(q, flush=True); time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
        try:
            q = int(p.stdout.readline())
            first = _procs.queue_ids() - before
            got = _procs.sysv_queues({p.pid}, before | {old})
            assert got == {q: 4096.0} and old in first, (got, first)
            _procs.QUEUES_BEFORE[p.pid] = before | {old}
            _procs.remove_segments(p.pid, [])
            assert q not in _procs.queue_ids() and old in _procs.queue_ids()
        finally:
            p.kill()
            p.wait()
    finally:
        libc.msgctl(old, 0, None)


@pytest.mark.parametrize("member", ["own", "sub"], ids=["its_own_group_36a_f1", "a_group_above_its_own_37a_f1"])
def test_a_process_frozen_in_a_freezer_cgroup_is_thawed_and_killed_as_the_group_closes(cg, member):
    """A frozen process's SIGKILL waits until it is thawed: the check's group, closing, thaws the freezer group each of
    its processes is in (36a F1: a frozen child of the code outlived the check with its memory group), and every frozen
    group above it from the top down (37a F1: in v1 a group stays frozen while a group above it is), that group frozen
    again afterwards (other processes may be in it)."""
    freezer = Path("/sys/fs/cgroup/freezer")
    if not (freezer / "cgroup.procs").is_file():
        pytest.skip("no v1 freezer hierarchy here")
    top = freezer / f"tverify-test-ice-{member}-{os.getpid()}"
    joined = top if member == "own" else top / "sub"
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        joined.mkdir(parents=True)
        (joined / "cgroup.procs").write_text(str(p.pid))
        assert cg.join(p.pid)
        (top / "freezer.state").write_text("FROZEN")
        cg.close()
        assert p.wait(10) is not None
        assert member == "own" or (top / "freezer.state").read_text().strip() == "FROZEN"
    finally:
        with contextlib.suppress(OSError):
            (top / "freezer.state").write_text("THAWED")
        if p.poll() is None:
            p.kill()
            p.wait()
        rmdir_soon(top / "sub")
        rmdir_soon(top)


def test_a_group_tree_deeper_than_path_max_is_walked_and_removed(tmp_path):
    """37a F2: the walk opens each folder relative to its parent (no path longer than PATH_MAX is built), parents
    first, and with ``removed`` removes the folders below the top one, children first."""
    from proofs_checks.sanity import _cgroup

    fds = [os.open(tmp_path, os.O_RDONLY)]
    try:
        for _ in range(30):  # 30 × 200 characters: past PATH_MAX (4096)
            os.mkdir("x" * 200, dir_fd=fds[-1])
            fds.append(os.open("x" * 200, os.O_RDONLY, dir_fd=fds[-1]))
    finally:
        for fd in fds:
            os.close(fd)
    assert sum(1 for _ in _cgroup._walk(tmp_path)) == 31
    for _ in _cgroup._walk(tmp_path, removed=True):
        pass
    assert tmp_path.is_dir() and os.listdir(tmp_path) == []
