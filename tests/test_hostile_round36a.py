"""Hostile pass 30a reproducers (frozen30), open findings as strict xfails.

F1: memory a check's code puts into a RAM-backed filesystem other than /dev/shm (a tmpfs or devtmpfs file: /tmp on
Fedora/Arch, $XDG_RUNTIME_DIR, /dev as root) is not counted by --max-memory: a module holding 1.5 GB there passes
under --max-memory 1.0.
F2: with tverify's stderr not read (a paused terminal, a slow pipe), the supervisor blocks forwarding the child's output
and polls neither --max-memory nor --timeout: the child grows past the limit."""

from __future__ import annotations

import os

import pytest

from cli_helpers import tv_here
from tests.test_hostile_round37a import _module
from tests.tiers import moved


def _ram_folder() -> str | None:
    """A writable folder on a tmpfs/devtmpfs mount other than /dev/shm, or None."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for m in mounts:
        if len(m) > 2 and m[2] in ("tmpfs", "devtmpfs") and m[1] != "/dev/shm" and not m[1].startswith("/dev/shm/"):
            if os.access(m[1], os.W_OK) and "ro" not in m[3].split(","):
                try:
                    st = os.statvfs(m[1])
                except OSError:
                    continue
                if st.f_bavail * st.f_frsize > (2 << 30):
                    return m[1]
    return None


HOG = _module("Hog", '''
import math, os
import torch
from torch import nn
''', '''
        with open(os.path.join(FOLDER, "tvhog_%d" % os.getpid()), "wb") as f:   # 1.5 GB of RAM in a tmpfs file
            for _ in range(24):
                f.write(b"\\1" * (64 << 20))
''')


@moved("a check in a fresh process writing 1.5 GB to a tmpfs (≈ 6 s)",
       "tests/test_hostile_round34.py::test_memory_held_in_any_ram_backed_filesystem_counts")
def test_tmpfs_file_outside_dev_shm_counts_against_max_memory(tmp_path):
    folder = _ram_folder()
    if folder is None:
        pytest.skip("no writable tmpfs/devtmpfs with 2 GB free other than /dev/shm")
    (tmp_path / "hog.py").write_text(f"FOLDER = {folder!r}\n" + HOG)
    try:
        r = tv_here(tmp_path, "check", "attention", "--module", "hog.py:Hog", "--causal", "--max-memory", "1.0",
                    "--quick", "--no-progress")
    finally:
        for name in os.listdir(folder):
            if name.startswith("tvhog_"):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-600:], r.stderr[-600:])


CHATTY = '''
import os, sys, threading, time
import numpy as np
from my_attn import MyAttention as _A

_keep = []


def _chat():
    while True:
        sys.stderr.write("x" * 65536 + "\\n")
        sys.stderr.flush()


threading.Thread(target=_chat, daemon=True).start()


class C(_A):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        for _ in range(24):                       # 2.4 GB in 100 MB steps, 0.1 s apart
            _keep.append(np.ones(12_500_000))
            time.sleep(0.1)
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "allocated.txt"), "w").write("2.4 GB")
'''


@moved("a check in a fresh process with its standard error unread until the memory limit stops it (≈ 17–60 s)",
       "tests/test_hostile_round34.py::test_the_childs_output_is_forwarded_without_ever_blocking_the_supervision")
def test_memory_limit_holds_while_stderr_is_not_read(tmp_path):
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copy(root / "examples" / "my_attn.py", tmp_path / "my_attn.py")
    (tmp_path / "chatty.py").write_text(CHATTY)
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)
    p = subprocess.Popen([sys.executable, "-P", "-m", "proofs_checks", "check", "attention", "--module",
                          "chatty.py:C", "--causal", "--max-memory", "1.0", "--no-progress"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    marker = tmp_path / "allocated.txt"
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and p.poll() is None and not marker.exists():
            time.sleep(0.2)   # stderr deliberately not read (a paused terminal, a slow consumer of a pipe)
        allocated = marker.exists()
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate(timeout=30)
    assert not allocated, "the user's code held 2.4 GB (+ the check's own ~0.4 GB) under --max-memory 1.0"
