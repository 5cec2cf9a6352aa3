"""Hostile pass 31a reproducers (frozen31), all fixed: memory the check's code holds that --max-memory did not count.
F1, F2, F4, F5, F6 are counted through the check's memory cgroup (docs/own-model.md, "The memory cgroup"): where no
cgroup can be made they are documented limits (strict xfails there); F3 and F7 hold everywhere. End to end (fresh
processes holding a gigabyte or more), in the integration tier, each pinned by a unit test of tests/test_cgroup.py.

F1: a tmpfs mounted in a mount namespace of the code's own (``unshare -Urm``: no privilege needed where unprivileged
user namespaces are allowed): the parent reads only its own ``/proc/self/mounts``.
F2: a memory file (``memfd_create``, never mapped) held by a non-dumpable process: its ``/proc/PID/fd`` needs
CAP_SYS_PTRACE (every non-root user; root in Docker's default).
F3: a tmpfs whose mount point holds a tab: the mount table writes it ``\\011``, only ``\\040`` is decoded.
F4: page tables (``VmPTE``): 1 TB of address space read once per 2 MB holds ~2 GB of them.
F5: inodes of a tmpfs (empty files use no block): 1.4 million of them hold ~1.2 GB of kernel memory.
F6: file pages the code ``mlock()``s (page cache pinned): file-backed memory is never counted.
F7: a message the code writes into the result pipe (up to 2 GiB) is read and parsed in tverify's own process before
its token is checked."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cli_helpers import MEMORY_CGROUP, tv_here

from tests.test_cgroup import FIND_CHANNEL
from tests.tiers import moved


def _module(cls: str, prelude: str, hog: str) -> str:
    """A user module: ``prelude`` (imports, helpers), then a causal attention ``cls`` whose ``__init__`` runs ``hog``
    (indented as a body of ``__init__``) once its layers exist."""
    return (prelude.strip("\n") + "\n\n\nclass " + cls + """(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
""" + hog.strip("\n") + "\n" + _FORWARD)


_FORWARD = '''
    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-1, -2) / math.sqrt(self.head_dim))
        a = a.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), -math.inf).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, t, -1))
'''


def _unshare_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


NSHOG = _module('NsHog', '''
import math, os, subprocess
import torch
from torch import nn

MNT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mnt")
_keep = []
''', '''
        if not _keep:   # 1.5 GB of RAM in a tmpfs that only its own mount namespace sees
            p = subprocess.Popen(["unshare", "-Urm", "sh", "-c",
                                  f"mount -t tmpfs none {MNT} && head -c 1500000000 /dev/zero > {MNT}/f "
                                  "&& echo ready && exec sleep 600"], stdout=subprocess.PIPE)
            assert p.stdout.readline().strip() == b"ready"
            _keep.append(p)
''')


@moved("a check holding 1.5 GB in a fresh process (≈ 32 s)",
       "tests/test_cgroup.py::test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup this memory is in no figure of /proc")
def test_tmpfs_in_a_private_mount_namespace_counts_against_max_memory(tmp_path):
    if not _unshare_ok():
        pytest.skip("no unprivileged mount namespace here (unshare -Urm)")
    stopped_over_1gb(tmp_path, NSHOG, "nshog.py:NsHog")


def stopped_over_1gb(tmp_path, text: str, spec: str):
    """``check attention --module SPEC --max-memory 1.0`` on ``text`` (with an empty ``mnt`` folder beside it) is
    stopped for its memory: exit 2, one line."""
    (tmp_path / "mnt").mkdir()
    (tmp_path / spec.split(":")[0]).write_text(text)
    r = tv_here(tmp_path, "check", "attention", "--module", spec, "--causal", "--max-memory", "1.0", "--quick",
                "--no-progress")
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])
    return r


MEMFD_HIDE = _module('M', '''
import math, os, subprocess, sys
import torch
from torch import nn

CODE = r"""
import ctypes, os, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)          # PR_SET_DUMPABLE 0: /proc/PID/fd needs CAP_SYS_PTRACE to be read
fd = os.memfd_create("hide")
block = b"\\1" * (64 << 20)
for _ in range(24):
    os.write(fd, block)                         # 1.5 GB in a memory file, never mapped
print("ready", flush=True)
time.sleep(600)
"""
_keep = []
''', '''
        if not _keep:
            p = subprocess.Popen([sys.executable, "-c", CODE], stdout=subprocess.PIPE)
            assert p.stdout.readline().strip() == b"ready"
            _keep.append(p)
''')


def _without_ptrace_capability():  # pragma: no cover - runs in the child before exec
    """As root: drop CAP_SYS_PTRACE from the bounding set, so the exec'd tverify is root as in a container's
    default (Docker drops it) — what every non-root user is anyway."""
    import ctypes

    if os.geteuid() == 0:
        ctypes.CDLL(None).prctl(24, 19, 0, 0, 0)  # PR_CAPBSET_DROP, CAP_SYS_PTRACE


@moved("a check holding 1.5 GB in a fresh process (≈ 6 s)",
       "tests/test_cgroup.py::test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup this memory is in no figure of /proc")
def test_memfd_of_a_non_dumpable_process_counts_against_max_memory(tmp_path):
    import os
    import sys

    if not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create")
    (tmp_path / "memfdhide.py").write_text(MEMFD_HIDE)
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-m", "proofs_checks.cli", "check", "attention", "--module", "memfdhide.py:M",
                        "--causal", "--max-memory", "1.0", "--quick", "--no-progress"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=240, preexec_fn=_without_ptrace_capability)
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


TABMNT = _module('T', '''
import math, os, subprocess
import torch
from torch import nn

MNT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t\\tb")
_keep = []
''', '''
        if not _keep:   # a tmpfs whose mount point the mount table writes escaped (a tab: \\011), 1.5 GB in it
            subprocess.run(["mount", "-t", "tmpfs", "none", MNT], check=True)
            with open(os.path.join(MNT, "f"), "wb") as f:
                for _ in range(24):
                    f.write(b"\\1" * (64 << 20))
            _keep.append(1)
''')


@moved("a check holding 1.5 GB in a fresh process (≈ 7 s)",
       "tests/test_cgroup.py::test_mount_points_are_read_with_every_escape")
def test_tmpfs_at_a_mount_point_with_a_tab_counts_against_max_memory(tmp_path):
    mnt = tmp_path / "t\tb"
    mnt.mkdir()
    probe = subprocess.run(["mount", "-t", "tmpfs", "none", str(mnt)], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    subprocess.run(["umount", str(mnt)], check=True)
    (tmp_path / "tabmnt.py").write_text(TABMNT)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "tabmnt.py:T", "--causal", "--max-memory", "1.0",
                    "--quick", "--no-progress")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


PTEHOG = _module('P', '''
import math, mmap
import torch
from torch import nn

_keep = []
''', '''
        if not _keep:   # 1 TB of address space read once per 2 MB: ~2 GB of page tables, hardly a resident page
            m = mmap.mmap(-1, 1 << 40, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=mmap.PROT_READ)
            m.madvise(getattr(mmap, "MADV_NOHUGEPAGE", 15))
            for i in range(0, 1 << 40, 2 << 20):
                m[i]
            _keep.append(m)
''')


@moved("a check holding 2 GB of page tables in a fresh process (≈ 10 s)",
       "tests/test_cgroup.py::test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup this memory is in no figure of /proc")
def test_page_tables_count_against_max_memory(tmp_path):
    import mmap

    try:  # where a 1 TB reservation without backing is refused (overcommit 2), the module cannot run either
        mmap.mmap(-1, 1 << 40, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, prot=mmap.PROT_READ).close()
    except (OSError, ValueError, OverflowError):
        pytest.skip("no 1 TB MAP_NORESERVE mapping here")
    (tmp_path / "ptehog.py").write_text(PTEHOG)
    r = tv_here(tmp_path, "check", "attention", "--module", "ptehog.py:P", "--causal", "--max-memory", "1.0",
                "--quick", "--no-progress")
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


INODEHOG = _module('I', '''
import math, os
import torch
from torch import nn

_keep = []
''', '''
        if not _keep:   # 1.4 million empty files in /dev/shm: no block used, ~1.2 GB of unreclaimable kernel memory
            os.makedirs(D, exist_ok=True)
            for i in range(1_400_000):
                os.close(os.open(f"{D}/{i:07d}_" + "x" * 100, os.O_CREAT | os.O_WRONLY, 0o600))
            _keep.append(1)
''')


@moved("a check making 1.4 million files in a fresh process (≈ 22 s)",
       "tests/test_cgroup.py::test_a_process_in_the_group_is_counted_with_its_memory_file_and_killed_on_close")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup this memory is in no figure of /proc")
def test_empty_files_in_dev_shm_count_against_max_memory(tmp_path):
    import tempfile

    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    st = os.statvfs("/dev/shm")
    if st.f_ffree < 2_000_000:
        pytest.skip("/dev/shm has fewer than 2 million free inodes")
    d = tempfile.mkdtemp(prefix="tv37a-inodes-", dir="/dev/shm")
    (tmp_path / "inodehog.py").write_text(f"D = {d!r}\n" + INODEHOG)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "inodehog.py:I", "--causal", "--max-memory", "1.0",
                    "--quick", "--no-progress")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


LOCKHOG = _module('L', '''
import ctypes, math, mmap, os
import numpy as np
import torch
from torch import nn

_keep = []
''', '''
        if not _keep:   # 1.5 GB of a file on disk mapped and mlock()ed: page cache pinned in RAM
            with open(F, "wb") as f:
                f.truncate(1_500_000_000)
            fd = os.open(F, os.O_RDONLY)
            m = mmap.mmap(fd, 1_500_000_000, prot=mmap.PROT_READ)
            a = np.frombuffer(m, dtype=np.uint8)
            assert ctypes.CDLL(None).mlock(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes)) == 0
            _keep.append((m, a))
''')


def _fs_type(path) -> str:
    """The filesystem type of the mount holding ``path`` (the longest mount point above it)."""
    best, kind = "", ""
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")):
                    if len(parts[1]) >= len(best):
                        best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


@moved("a check locking 1.5 GB of a file in a fresh process",
       "tests/test_cgroup.py::test_locked_file_pages_count_and_page_cache_does_not")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="a documented limit (docs/own-model.md, 'The memory cgroup'): without a memory cgroup this memory is in no figure of /proc")
def test_mlocked_file_pages_count_against_max_memory(tmp_path):
    import ctypes
    import mmap

    if _fs_type(tmp_path) in ("tmpfs", "devtmpfs", "ramfs", ""):
        pytest.skip("the test's folder is not on a disk filesystem")
    probe = tmp_path / "probe.bin"
    probe.write_bytes(b"\0" * (64 << 20))
    with open(probe, "rb") as f:
        m = mmap.mmap(f.fileno(), 64 << 20, prot=mmap.PROT_READ)
        import numpy as np

        a = np.frombuffer(m, dtype=np.uint8)
        libc = ctypes.CDLL(None)
        locked = libc.mlock(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes)) == 0
        if locked:
            libc.munlock(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes))
        del a
        m.close()
    probe.unlink()
    if not locked:
        pytest.skip("mlock of 64 MB refused here (RLIMIT_MEMLOCK without CAP_IPC_LOCK)")
    (tmp_path / "lockhog.py").write_text(f"F = {str(tmp_path / 'lockhog.bin')!r}\n" + LOCKHOG)
    r = tv_here(tmp_path, "check", "attention", "--module", "lockhog.py:L", "--causal", "--max-memory", "1.0",
                "--quick", "--no-progress")
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


BIGRESULT = _module('B', '''
import gc, math, os, struct
import torch
from torch import nn

_done = []
''', '''
        if _done:
            return
        _done.append(1)
@FIND_CHANNEL@            n = os.path.getsize(P)   # a JSON list of 0s sent from the page cache: no memory of the check's process
            fd = c.fileno()
            os.write(fd, struct.pack("!i", n))
            with open(P, "rb") as f:
                off = 0
                while off < n:
                    off += os.sendfile(fd, f.fileno(), off, n - off)
''').replace("@FIND_CHANNEL@", FIND_CHANNEL.lstrip("\n"))

MEASURE = '''
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=240)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(r.stderr[-600:])
'''


@moved("a 400 MB message on the result channel, in a fresh process whose peak is measured",
       "tests/test_cgroup.py::test_a_message_the_code_writes_on_the_result_channel_is_never_parsed")
def test_a_result_pipe_flood_does_not_blow_up_tverifys_own_memory(tmp_path):
    import sys

    if not hasattr(os, "sendfile"):
        pytest.skip("no os.sendfile")
    payload = tmp_path / "payload.json"
    n = 200_000_000  # "[0,0,...,0]": 400 MB
    with open(payload, "wb") as f:
        f.write(b"[")
        chunk = b"0," * (1 << 20)
        for _ in range((n - 1) // (1 << 20)):
            f.write(chunk)
        f.write(b"0," * ((n - 1) % (1 << 20)) + b"0]")
    (tmp_path / "bigresult.py").write_text(f"P = {str(payload)!r}\n" + BIGRESULT)
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "proofs_checks.cli", "check", "attention",
                        "--module", "bigresult.py:B", "--causal", "--max-memory", "1.0", "--quick", "--no-progress"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    code, peak_kb = (int(v) for v in r.stdout.split())
    # the check's own child stays near its ~0.7 GB; tverify's process parsed the flood (bytes, text, a list of 200 M)
    assert code == 2 and peak_kb < 1.5 * 1024 * 1024, (code, peak_kb, r.stderr[-600:])
