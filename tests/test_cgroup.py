"""The check's memory cgroup (proofs_checks/sanity/_cgroup.py; issue 44 item 2): made where the machine lets this
process make one, it counts what a process holds whatever that process is (shared memory, kernel memory), and
closing it leaves no process of it alive. Skipped, with the reason, where no cgroup can be made."""

from __future__ import annotations

import os
import subprocess
import sys
import time

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
