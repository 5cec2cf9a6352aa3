"""The shared set-up of the reproducers whose code freezes a process in a v1 freezer cgroup (hostile passes 36a F1,
37a F1): the skip where the machine has no such hierarchy, the group and the pid file the code writes, the check run as
the console runs it, and what is left thawed, killed and removed afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import MEMORY_CGROUP

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FREEZER = Path("/sys/fs/cgroup/freezer")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def sweep_memory_groups() -> None:
    """The memory group a check left (its tverify killed), swept as the next check's start sweeps it."""
    from proofs_checks.sanity._cgroup import MemoryCgroup

    with contextlib.suppress(Exception):
        time.sleep(0.3)
        g = MemoryCgroup.make()
        if g is not None:
            g.close()


@contextlib.contextmanager
def freezer_case(tmp_path: Path, tag: str):
    """``(group, pid_file)``: a freezer group for the code to make (and ``group/sub``), the file it writes the frozen
    process's pid into; the README's example attention copied beside the module. Skips without root, a memory cgroup
    for the checks and the v1 freezer hierarchy (as on the CI machines)."""
    if (not sys.platform.startswith("linux") or os.geteuid() != 0 or not MEMORY_CGROUP
            or not (FREEZER / "cgroup.procs").is_file()):
        pytest.skip("needs root, a memory cgroup for the checks and the v1 freezer hierarchy (as on the CI machines)")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    group = FREEZER / f"tverify-test-{tag}-{os.getpid()}"
    pid_file = tmp_path / "frozen.pid"
    try:
        yield group, pid_file
    finally:
        with contextlib.suppress(OSError):
            (group / "freezer.state").write_text("THAWED")
        with contextlib.suppress(Exception):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        for _ in range(50):
            for g in (group / "sub", group):
                with contextlib.suppress(OSError):
                    g.rmdir()
            if not group.exists():
                break
            time.sleep(0.1)
        sweep_memory_groups()


def check_module(folder: Path, spec: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``tverify check attention --module SPEC --causal --quick --seq-len 5`` in a fresh console process in ``folder``
    (a store of its own): the process's own end is what these tests watch."""
    return subprocess.run([sys.executable, "-m", "proofs_checks.cli", "check", "attention", "--module", spec, "--causal",
                           "--quick", "--seq-len", "5", "--no-progress", *extra], cwd=folder, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "TVERIFY_STORE": str(folder / "st")})
