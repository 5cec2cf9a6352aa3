"""Hostile pass 34, tester A: reproducers of the findings (docs/own-model.md's memory cgroup and default limit, the
fork server's groups, --json names). Each was a strict xfail until fixed; each builds its own files in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli_helpers import tv_here
from tiers import moved

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _own_v1_memory_group() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, rel = line.split(":", 2)
            if "memory" in ctrls.split(","):
                g = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
                return g if (g / "memory.limit_in_bytes").is_file() and os.access(g, os.W_OK) else None
    except OSError:
        return None
    return None


def _remove_group(g: Path) -> None:
    for _ in range(50):
        try:
            pids = (g / "cgroup.procs").read_text().split()
        except OSError:
            break
        if not pids:
            break
        for p in pids:
            try:
                os.kill(int(p), 9)
            except OSError:
                pass
        time.sleep(0.05)
    for _ in range(20):
        try:
            g.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


@moved("a job cgroup reading a 1.75 GB file twice before a check (≈ 17 s, 1.75 GB written to disk): the end to end "
       "case of the room counting active page cache",
       "tests/test_cgroup.py::test_a_jobs_page_cache_active_or_not_is_room_and_the_default_is_never_below_256_mb")
def test_default_limit_does_not_count_a_jobs_active_page_cache(tmp_path):
    own = _own_v1_memory_group()
    if os.geteuid() != 0 or own is None:
        pytest.skip("needs root and a writable v1 memory cgroup (as on the CI machines)")
    if shutil.disk_usage(tmp_path).free < 4 * 2**30:
        pytest.skip("needs 4 GB of disk")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    g = own / f"hostile34a-lim-{os.getpid()}"
    g.mkdir()
    try:
        (g / "memory.limit_in_bytes").write_text(str(2048 * 2**20))
        data = tmp_path / "dataset.bin"
        prep = textwrap.dedent(f"""
            import os
            open({str(g / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))
            with open({str(data)!r}, 'wb') as f:
                for _ in range(1750):
                    f.write(b'\\1' * 2**20)
                f.flush(); os.fsync(f.fileno())
            fd = os.open({str(data)!r}, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
            for _ in range(2):  # a job reading its dataset twice: 1.3 GB of active page cache, reclaimable
                with open({str(data)!r}, 'rb') as f:
                    while f.read(2**24):
                        pass
            os.execv({sys.executable!r}, [{sys.executable!r}, '-m', 'proofs_checks.cli', 'check', 'attention',
                     '--module', 'my_attn.py:MyAttention', '--causal', '--dim', '64', '--quick', '--seq-len',
                     '257', '--no-progress'])
        """)
        r = subprocess.run([sys.executable, "-c", prep], cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr[-800:]
    finally:
        _remove_group(g)


SLEEPER = """
import time
from my_attn import MyAttention
class S(MyAttention):
    def forward(self, x):
        time.sleep(0.02)
        return super().forward(x)
"""


def test_a_killed_sandboxed_checks_group_is_removed_by_a_later_check(tmp_path):
    import signal

    own = _own_v1_memory_group()
    if os.geteuid() != 0 or own is None or shutil.which("unshare") is None:
        pytest.skip("needs root, unshare -p and a writable v1 memory cgroup (as on the CI machines)")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    before = {p.name for p in own.glob("tverify-*")}
    ours = f"n{os.stat('/proc/self/ns/pid').st_ino}"
    proc = subprocess.Popen(["unshare", "-pf", "--mount-proc", sys.executable, "-m", "proofs_checks.cli", "check",
                             "attention", "--module", "sleeper.py:S", "--causal", "--no-progress"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    left: set[str] = set()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and proc.poll() is None:
            left = {p.name for p in own.glob("tverify-*") if not p.name.endswith(ours)} - before
            if left:
                break
            time.sleep(0.1)
        if not left:
            pytest.skip("the sandboxed check made no memory cgroup")
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGKILL)  # a container killed / a CI job cancelled: the whole namespace ends
        proc.wait(10)
        time.sleep(1.0)
        from proofs_checks.sanity._cgroup import MemoryCgroup

        g = MemoryCgroup.make()  # what the next check does: its sweep removes groups tverifys that are gone left
        if g is not None:
            g.close()
        still = {name for name in left if (own / name).exists()}
        assert not still, f"left for good: {still}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for name in left:
            if (own / name).exists():
                _remove_group(own / name)


@pytest.mark.parametrize("name", ["new/.", "new/.."])
def test_json_names_that_can_only_be_a_folder_are_refused_before_the_run(tmp_path, name):
    r = tv_here(tmp_path, "run", "attn.scaling_variance", "--quick", "--json", name)
    assert "verified" not in r.stderr + r.stdout.split("tverify results")[0], "the claim ran"
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-500:])
    assert not (tmp_path / "new").exists(), "a file or folder 'new' was made"


HUGE = """
import mmap, time
from my_attn import MyAttention
_KEEP = []
class Hg(MyAttention):
    def __init__(self):
        super().__init__()
        m = mmap.mmap(-1, 1500 * 2**20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)  # MAP_HUGETLB
        for i in range(0, len(m), 2**21):
            m[i] = 1
        _KEEP.append(m)
        time.sleep(1.5)
"""


def test_huge_pages_count_against_max_memory(tmp_path):
    knob = Path("/proc/sys/vm/nr_overcommit_hugepages")
    if not sys.platform.startswith("linux") or not os.access(knob, os.W_OK):
        pytest.skip("needs Linux and a writable vm.nr_overcommit_hugepages (root)")
    old = knob.read_text().strip()
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    (tmp_path / "hugeesc.py").write_text(HUGE)
    try:
        knob.write_text("800")  # what an admin sets for a database / DPDK: surplus huge pages taken on demand
        r = tv_here(tmp_path, "check", "attention", "--module", "hugeesc.py:Hg", "--causal", "--quick",
                    "--max-memory", "1.0")
    finally:
        knob.write_text(old)
    if "Cannot allocate memory" in r.stderr or "OSError" in r.stderr:
        pytest.skip("no huge pages to be had here")
    assert r.returncode == 2 and "over the limit" in r.stderr, (r.returncode, r.stdout[-300:], r.stderr[-300:])


UNIXHOG = """
import socket, time
from my_attn import MyAttention
_KEEP = []
class U(MyAttention):
    def __init__(self):
        super().__init__()
        # the bytes queued, counted by what was sent (the machine's MemAvailable moves with every other process on
        # it: under load the loop stopped short of the limit and the check ran to "ok")
        sent, chunk = 0, b"\\0" * 2**20
        while sent < 1.3e9 and len(_KEEP) < 2000:  # no privileges: SO_SNDBUF up to net.core.wmem_max
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 2**20)
            a.setblocking(False)
            try:
                while True:
                    sent += a.send(chunk)
            except BlockingIOError:
                pass
            _KEEP.append((a, b))
        print(f"holding {sent / 1e9:.2f} GB in AF_UNIX socket buffers", flush=True)
        time.sleep(1.5)
"""


def test_unix_socket_buffers_count_against_max_memory_without_a_cgroup(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux")
    try:
        wmem_max = int(Path("/proc/sys/net/core/wmem_max").read_text())
        nofile = __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        pytest.skip("no /proc/sys/net/core/wmem_max")
    if 2 * 2000 * min(wmem_max, 4 * 2**20) < 1.4e9 or nofile < 4100:
        pytest.skip("socket buffers too small here to hold 1.3 GB")
    from proofs_checks.sanity import _cgroup

    monkeypatch.setattr(_cgroup.MemoryCgroup, "make", classmethod(lambda cls: None))  # as for an unprivileged user
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    (tmp_path / "unixesc.py").write_text(UNIXHOG)
    r = tv_here(tmp_path, "check", "attention", "--module", "unixesc.py:U", "--causal", "--quick", "--max-memory", "1.0")
    # (stopped over the limit before the module is done filling, or after it said "holding 1.x GB")
    assert r.returncode == 2 and "over the limit" in r.stderr, (r.returncode, r.stdout[-300:], r.stderr[-300:])


NEGDENT = """
import os
from my_attn import MyAttention
class Nd(MyAttention):
    def __init__(self):
        super().__init__()
        for i in range(1_500_000):  # names looked up and not found (a search path, a cache probed): negative dentries
            os.path.exists(os.path.join(os.getcwd(), f"nope-{i}"))
"""


@moved("a check whose module looks up 1.5 M absent names under --max-memory 0.26 (≈ 7 s): the end to end case of "
       "the group's caches reclaimed before a stop",
       "tests/test_cgroup.py::test_the_reclaimable_caches_of_a_group_are_freed_before_its_figure_is_believed")
def test_reclaimable_dentry_caches_are_not_held_memory(tmp_path):
    from cli_helpers import MEMORY_CGROUP

    if not MEMORY_CGROUP:
        pytest.skip("the kernel's count of a memory cgroup is the subject")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    (tmp_path / "negdent.py").write_text(NEGDENT)
    r = tv_here(tmp_path, "check", "attention", "--module", "negdent.py:Nd", "--causal", "--quick",
                "--max-memory", "0.26")
    assert r.returncode == 0, (r.returncode, r.stderr[-400:])
