"""Hostile pass 36, tester A: reproducers of the findings (the memory cgroup of docs/own-model.md, the processes, files
and caches of a check). Each was a strict xfail until fixed; each builds its own files in tmp_path."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli_helpers import MEMORY_CGROUP

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FREEZER = Path("/sys/fs/cgroup/freezer")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_process_frozen_by_the_code_does_not_outlive_the_check(tmp_path):
    if (not sys.platform.startswith("linux") or os.geteuid() != 0 or not MEMORY_CGROUP
            or not (FREEZER / "cgroup.procs").is_file()):
        pytest.skip("needs root, a memory cgroup for the checks and the v1 freezer hierarchy (as on the CI machines)")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    group = FREEZER / f"tverify-test-frz-{os.getpid()}"
    pid_file = tmp_path / "frozen.pid"
    (tmp_path / "frz.py").write_text(textwrap.dedent(f"""
        import os, time
        from my_attn import MyAttention
        if os.environ.get("FRZ_DONE") is None:
            os.environ["FRZ_DONE"] = "1"
            if os.fork() == 0:
                os.makedirs({str(group)!r}, exist_ok=True)
                open({str(group)!r} + "/cgroup.procs", "w").write(str(os.getpid()))
                open({str(pid_file)!r}, "w").write(str(os.getpid()))
                open({str(group)!r} + "/freezer.state", "w").write("FROZEN")
                while True:
                    time.sleep(1)
            time.sleep(1)
        class F(MyAttention):
            pass
    """))
    pid = None
    try:
        r = subprocess.run([sys.executable, "-m", "proofs_checks.cli", "check", "attention", "--module", "frz.py:F",
                            "--causal", "--quick", "--seq-len", "5", "--no-progress"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "TVERIFY_STORE": str(tmp_path / "st")})
        pid = int(pid_file.read_text())
        time.sleep(0.5)
        assert not _alive(pid), (r.returncode, r.stderr[-500:])
    finally:
        with contextlib.suppress(OSError):
            (group / "freezer.state").write_text("THAWED")
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            with contextlib.suppress(OSError):
                group.rmdir()
            if not group.exists():
                break
            time.sleep(0.1)
        from proofs_checks.sanity._cgroup import MemoryCgroup

        with contextlib.suppress(Exception):
            time.sleep(0.3)
            g = MemoryCgroup.make()  # (sweeps the memory group the check left)
            if g is not None:
                g.close()


def test_survey_pip_does_not_run_a_stdlib_named_module_from_pythonpath(tmp_path):
    pp = tmp_path / "pp"
    pp.mkdir()
    marker = tmp_path / "ran.txt"
    (pp / "traceback.py").write_text(f"import sys; open({str(marker)!r}, 'a').write(' '.join(sys.orig_argv) + '\\n')\n"
                                     "raise ImportError('not the standard library')\n")
    env = {**os.environ, "PYTHONPATH": str(pp), "TVERIFY_STORE": str(tmp_path / "st"),
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    script = Path(sys.executable).parent / "tverify"  # (python -m imports the package before tverify orders the path)
    if not script.is_file():
        pytest.skip("no tverify script beside this Python")
    r = subprocess.run([str(script), "survey", "local-attention-1.2.1", "--quick",
                        "--out", str(tmp_path / "sv"), "--cache-dir", str(tmp_path / "cache"), "--timeout", "60"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=150, env=env)
    assert not marker.exists(), (marker.read_text(), r.returncode, r.stderr[-400:])
