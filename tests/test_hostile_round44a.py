"""Hostile pass 38 (tester a): one test per finding, each was a strict xfail
against frozen38 (f9409b3); F4, F5, F7 are documented limits (docs/own-model.md) and stay strict xfails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import tv_here
from tests.tiers import moved
from freezer_helpers import alive

_TVERIFY = str(Path(sys.executable).with_name("tverify"))



def test_stacked_redraw_chunks_count_every_head():
    """The unit of 38a F1: a stacked redraw call's sequences are counted with their logits per head, so that a chunk
    holds ≤ 256 MB (the up-front estimate's figure) whatever the head count."""
    from types import SimpleNamespace

    from numerics.attention_structural import _per_sequence_bytes

    one = _per_sequence_bytes(SimpleNamespace(m=SimpleNamespace(heads=1), D=32), 257)
    four = _per_sequence_bytes(SimpleNamespace(m=SimpleNamespace(heads=4), D=32), 257)
    assert four - one == 3 * 257 * 257 * 8 * 4 and one == 257 * 32 * 8 * 6 + 257 * 257 * 8 * 4
    assert _per_sequence_bytes(SimpleNamespace(m=None, D=32), 257) == four  # (four heads where none is mapped)


@moved("a default-size check in a fresh process under --max-memory 0.5 (≈ 16 s)",
       "tests/test_hostile_round44a.py::test_stacked_redraw_chunks_count_every_head")
def test_small_correct_attention_fits_under_half_a_gb(tmp_path: Path):
    (tmp_path / "att.py").write_text((Path(__file__).parents[1] / "examples" / "my_attn.py").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"))
    r = subprocess.run([_TVERIFY, "check", "attention", "--module", "att.py:MyAttention", "--causal", "--max-memory",
                        "0.5", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])


def _run_under_half_a_gb(folder: Path, text: str):
    """``check attention --quick --max-memory 0.5`` of the module ``text`` (its class MyAttention), in this process."""
    (folder / "hog.py").write_text(text)
    r = tv_here(folder, "check", "attention", "--module", "hog.py:MyAttention", "--quick", "--max-memory", "0.5")
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _stopped(r) -> None:
    assert r.returncode == 2 and "--max-memory 0.5" in r.stderr, (r.returncode, r.stderr[-800:])


#: the attention every module below computes; its first call runs the module's own code once (``@ONCE@``)
_HOGGING = '''class MyAttention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        if not _KEEP:
@ONCE@        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, t, -1))
'''


def _hogging(prelude: str, once: str) -> str:
    """A module text: ``prelude`` (imports, ``_KEEP``, helpers), then :data:`_HOGGING` running ``once`` (lines indented
    for the ``if not _KEEP:`` block) at its first call."""
    return prelude + _HOGGING.replace("@ONCE@", once[1:])


_NETLINK_HOG = _hogging('''
import math, socket, struct, sys
import torch
from torch import nn

_KEEP = []


def hog(total):
    """``total`` bytes queued on a NETLINK_USERSOCK socket and never read (root: SO_RCVBUFFORCE/SO_SNDBUFFORCE)."""
    r = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    r.bind((0, 0))
    r.setsockopt(socket.SOL_SOCKET, 33, 2**31 - 1)
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    s.bind((0, 0))
    s.setsockopt(socket.SOL_SOCKET, 32, 2**31 - 1)
    s.setblocking(False)
    msg = struct.pack("=IHHII", 16 + 60000, 0x10, 0, 0, 0) + b"\\xab" * 60000
    sent = 0
    while sent < total:
        try:
            s.sendto(msg, (r.getsockname()[0], 0))
        except OSError:
            break
        sent += len(msg)
    return r, s, sent


''', '''
            _KEEP.append(hog(1200 << 20))
            print("queued MB", _KEEP[0][2] >> 20, file=sys.stderr)
''')


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="SO_RCVBUFFORCE needs root (CAP_NET_ADMIN)")
def test_netlink_socket_buffers_counted(tmp_path: Path):
    _stopped(_run_under_half_a_gb(tmp_path, _NETLINK_HOG))


_SECRETMEM_HOG = _hogging('''
import ctypes, math, mmap, os, sys
import torch
from torch import nn

_KEEP = []


def hog(n):
    """``n`` bytes of a memfd_secret file (syscall 447 on x86-64), mapped and touched, kept open."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(447, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "memfd_secret")
    os.ftruncate(fd, n)
    m = mmap.mmap(fd, n, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    for i in range(0, n, 4096):
        m[i] = 1
    return fd, m


''', '''
            _KEEP.append(hog(1200 << 20))
            print("secret MB", len(_KEEP[0][1]) >> 20, file=sys.stderr)
''')


def _memfd_secret_usable() -> bool:
    import ctypes
    import platform

    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(447, 0)
    if fd < 0:
        return False
    os.close(fd)
    return os.geteuid() == 0  # (unprivileged: RLIMIT_MEMLOCK may bound it)


@pytest.mark.skipif(not _memfd_secret_usable(), reason="memfd_secret (x86-64 syscall 447) not available here, or not root")
def test_secretmem_counted_without_a_cgroup(tmp_path: Path, monkeypatch):
    from proofs_checks.sanity import _cgroup

    monkeypatch.setattr(_cgroup.MemoryCgroup, "make", classmethod(lambda cls: None))  # as where no group can be made
    _stopped(_run_under_half_a_gb(tmp_path, _SECRETMEM_HOG))


_MLOCK_HOG = _hogging('''
import ctypes, math, mmap, os, sys
import torch
from torch import nn

_KEEP = []


def hog(path):
    """The whole file ``path`` mapped and locked in memory (mlockall(MCL_CURRENT)): unevictable page cache."""
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(1) != 0:
        raise OSError(ctypes.get_errno(), "mlockall")
    return fd, m


''', '''
            _KEEP.append(hog(os.path.join(os.path.dirname(os.path.abspath(__file__)), "big.dat")))
            print("locked MB", len(_KEEP[0][1]) >> 20, file=sys.stderr)
''')


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="mlockall of 1.2 GB needs root (RLIMIT_MEMLOCK)")
@pytest.mark.xfail(strict=True, reason="38a F4, a documented limit (docs/own-model.md, 'The memory cgroup'): page cache charged to another group and locked by the code with mlock is not in the check's count")
def test_mlocked_cached_file_counted(tmp_path: Path):
    big = tmp_path / "big.dat"
    with open(big, "wb") as fh:
        fh.truncate(1200 << 20)  # (sparse: no disk written)
    with open(big, "rb") as fh:  # the file read once by the user before the check: its pages are cached
        while fh.read(1 << 24):
            pass
    r = _run_under_half_a_gb(tmp_path, _MLOCK_HOG)
    assert "locked MB 1200" in r.stderr, r.stderr[-800:]
    _stopped(r)


_RAMFS_HOG = _hogging('''
import math, os, subprocess, sys
import torch
from torch import nn

_KEEP = []


''', '''
            d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ram")
            subprocess.run(["mount", "-t", "ramfs", "ramfs", d], check=True)
            with open(os.path.join(d, "blob"), "wb") as fh:
                for _ in range(1200):
                    fh.write(b"\\xee" * (1 << 20))
            _KEEP.append(d)
            print("ramfs MB 1200", file=sys.stderr)
''')


def _can_mount_ramfs(tmp_path: Path) -> bool:
    import shutil

    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("mount"):
        return False
    d = tmp_path / "probe_ram"
    d.mkdir()
    ok = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(d)], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)
    return ok


@pytest.mark.xfail(strict=True, reason="38a F5, a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup, a ramfs (no size reported) is in no count")
def test_ramfs_counted_without_a_cgroup(tmp_path: Path, monkeypatch):
    if not _can_mount_ramfs(tmp_path):
        pytest.skip("needs root and mount -t ramfs")
    from proofs_checks.sanity import _cgroup

    monkeypatch.setattr(_cgroup.MemoryCgroup, "make", classmethod(lambda cls: None))  # as where no group can be made
    (tmp_path / "ram").mkdir()
    (tmp_path / "rf.py").write_text(_RAMFS_HOG)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "rf.py:MyAttention", "--quick", "--max-memory", "0.5")
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "ram")], capture_output=True)
    assert "Traceback" not in r.stderr, r.stderr
    assert "ramfs MB 1200" in r.stderr, r.stderr[-800:]
    assert r.returncode == 2 and "--max-memory 0.5" in r.stderr, (r.returncode, r.stderr[-800:])


_DEEP_FREEZE = _hogging('''
import math, os, subprocess, sys
import torch
from torch import nn

ROOT, NAME, LEVELS = "/sys/fs/cgroup/freezer", os.environ["H38A_FREEZER_NAME"], 24  # 24 levels of ~210 > PATH_MAX
_KEEP = []


def chain(create):
    fds = [os.open(ROOT, os.O_RDONLY | os.O_DIRECTORY)]
    for _ in range(LEVELS):
        if create:
            try:
                os.mkdir(NAME, dir_fd=fds[-1])
            except FileExistsError:
                pass
        fds.append(os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
    return fds


def put(fd, name, text):
    f = os.open(name, os.O_WRONLY, dir_fd=fd)
    try:
        os.write(f, text.encode())
    finally:
        os.close(f)


def start():
    """A sleeper (own session) moved into a v1 freezer group nested deeper than PATH_MAX, which is then frozen."""
    p = subprocess.Popen(["sleep", "307"], start_new_session=True)
    fds = chain(True)
    put(fds[-1], "cgroup.procs", str(p.pid))
    put(fds[-1], "freezer.state", "FROZEN")
    for fd in fds:
        os.close(fd)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sleeper.pid"), "w") as fh:
        fh.write(str(p.pid))
    return p


''', '''
            _KEEP.append(start())
''')


def _unfreeze_and_remove(name: str, levels: int = 24) -> None:
    """Thaw the deep freezer chain ``name`` (bottom up), SIGKILL what is in it, remove it: the test's own cleanup."""
    import signal
    import time

    root = "/sys/fs/cgroup/freezer"
    if not os.path.isdir(os.path.join(root, name)):
        return
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(levels):
            try:
                fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
            except OSError:
                break
        for fd in reversed(fds[1:]):
            f = os.open("freezer.state", os.O_WRONLY, dir_fd=fd)
            os.write(f, b"THAWED")
            os.close(f)
            f = os.open("cgroup.procs", os.O_RDONLY, dir_fd=fd)
            pids = os.read(f, 65536).split()
            os.close(f)
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.3)
        for i in range(len(fds) - 1, 0, -1):
            try:
                os.rmdir(name, dir_fd=fds[i - 1])
            except OSError:
                pass
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0
                    or not os.access("/sys/fs/cgroup/freezer/cgroup.procs", os.W_OK),
                    reason="needs root and a writable v1 freezer hierarchy")
def test_process_frozen_in_a_deep_freezer_group_is_ended(tmp_path: Path, monkeypatch):
    name = f"h38a{os.getpid()}" + "z" * 200
    monkeypatch.setenv("H38A_FREEZER_NAME", name)
    (tmp_path / "fz.py").write_text(_DEEP_FREEZE)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "fz.py:MyAttention", "--quick")
        pid = int((tmp_path / "sleeper.pid").read_text())
        left = alive(pid)
    finally:
        _unfreeze_and_remove(name)
    assert "Traceback" not in r.stderr, r.stderr
    assert not left, f"the code's frozen process {pid} outlived the check"


_SPLICE_HOG = _hogging('''
import fcntl, math, os, resource, sys
import torch
from torch import nn

_KEEP = []


def hog(path, each=1 << 20):
    """Every page of ``path`` spliced into pipes of 1 MB (F_SETPIPE_SZ) that are kept open and never read: the pipes
    hold the file's page-cache pages, which no reclaim can free while they do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    fd = os.open(path, os.O_RDONLY)
    n, off, keep = os.fstat(fd).st_size, 0, []
    while off < n:
        r, w = os.pipe()
        fcntl.fcntl(w, 1031, each)
        got = os.splice(fd, w, each, offset_src=off)
        keep.append((r, w))
        off += got
        if got == 0:
            break
    return fd, keep, off


''', '''
            _KEEP.append(hog(os.path.join(os.path.dirname(os.path.abspath(__file__)), "big.dat")))
            print("spliced MB", _KEEP[0][2] >> 20, file=sys.stderr)
''')


def _splice_usable() -> bool:
    import resource

    return (sys.platform.startswith("linux") and hasattr(os, "splice") and os.geteuid() == 0
            and resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 4096)


@pytest.mark.skipif(not _splice_usable(), reason="needs Linux os.splice, root (pipe-user-pages limits) and 4096 fds")
@pytest.mark.xfail(strict=True, reason="38a F7, a documented limit (docs/own-model.md, 'The memory cgroup'): file pages spliced into pipes and never read are read as reclaimable page cache")
def test_spliced_pipe_pages_counted(tmp_path: Path):
    with open(tmp_path / "big.dat", "wb") as fh:
        fh.truncate(1200 << 20)  # (sparse: no disk written; its pages are made when the code splices them)
    r = _run_under_half_a_gb(tmp_path, _SPLICE_HOG)
    assert "spliced MB 1200" in r.stderr, r.stderr[-800:]
    _stopped(r)


def test_stdout_opened_read_only_is_one_line(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"))
    with open(os.devnull, "rb") as ro:
        r = subprocess.run([_TVERIFY, "list", "attn.causal*"], cwd=tmp_path, env=env, stdout=ro,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr[-1500:]
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr[-800:])


def _nonblocking_stdout_run(args: list, cwd: Path, env: dict, wait: float) -> tuple[int, bytes, str]:
    """``tverify ARGS`` with its standard output a pipe of 4 kB in non-blocking mode (as a parent such as Node.js
    leaves it), read only once the command has filled it and met it full for half a second (or ended, or ``wait``
    seconds passed): (exit code, what came out, stderr)."""
    import fcntl

    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
    os.set_blocking(w, False)
    p = subprocess.Popen([_TVERIFY, *args], cwd=cwd, env=env, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    import array
    import termios
    import time

    held = array.array("i", [0])
    end = time.monotonic() + wait
    while time.monotonic() < end and p.poll() is None:  # until the command has filled the pipe (or ended) ...
        fcntl.ioctl(r, termios.FIONREAD, held)
        if held[0] >= 4096:
            time.sleep(0.5)  # ... and met the full pipe for a while
            break
        time.sleep(0.05)
    out = b""
    with open(r, "rb") as fh:  # (blocking now: to the end)
        out = fh.read()
    err = p.stderr.read().decode(errors="replace")
    p.wait(timeout=120)
    return p.returncode, out, err


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"))
    return env


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_nonblocking_stdout_list_not_truncated_silently(tmp_path: Path):
    env = _env(tmp_path)
    full = subprocess.run([_TVERIFY, "list"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert full.returncode == 0 and len(full.stdout) > 8192, full
    code, out, err = _nonblocking_stdout_run(["list"], tmp_path, env, wait=6)
    assert "Traceback" not in err, err[-1500:]
    assert (code == 0 and out == full.stdout) or (code == 2 and len(err.strip().splitlines()) == 1), \
        (code, len(out), len(full.stdout), err[-800:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_nonblocking_stdout_check_json_no_traceback(tmp_path: Path):
    (tmp_path / "att.py").write_text((Path(__file__).parents[1] / "examples" / "my_attn.py").read_text())
    code, out, err = _nonblocking_stdout_run(["check", "attention", "--module", "att.py:MyAttention", "--causal",
                                              "--quick", "--json", "-", "--no-progress"], tmp_path, _env(tmp_path),
                                             wait=15)
    assert "Traceback" not in err, err[-1500:]


def test_a_report_folder_changed_during_a_check_is_named_by_its_option(tmp_path: Path):
    """38a N2: the warning for a --report folder the code wrote into during the run named it "--out"."""
    from cli_helpers import causal_attn

    rep = tmp_path / "rep"
    (tmp_path / "att.py").write_text(causal_attn(8, 2, f"""
        import os
        class Writes(Attn):
            def forward(self, x):
                os.makedirs({str(rep)!r}, exist_ok=True)
                open(os.path.join({str(rep)!r}, "notes.md"), "w").write("mine")
                return super().forward(x)
    """))
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Writes", "--causal", "--quick", "--report", "rep")
    assert r.returncode == 0 and (rep / "notes.md").read_text() == "mine", (r.returncode, r.stderr[-800:])
    assert "--report rep" in r.stderr and "--out" not in r.stderr, r.stderr[-800:]


def test_new_claim_with_an_empty_dir_is_refused(tmp_path: Path, monkeypatch):
    """38a N3: ``new-claim --dir ''`` wrote the package into the working folder without a word."""
    from tests.cli_helpers import invoke_in

    r = invoke_in(tmp_path, monkeypatch, "new-claim", "mine.ex", "--dir", "")
    assert r.returncode == 2 and "--dir: empty path" in r.stderr and not list(tmp_path.iterdir()), (r.returncode,
                                                                                                    r.stderr)
