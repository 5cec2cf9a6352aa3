"""Hostile pass 37, tester A (and 36a F1): reproducers of the findings (the memory cgroup of docs/own-model.md, the processes, files
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
from freezer_helpers import EXAMPLES, alive, check_module, freezer_case


@pytest.mark.parametrize("member", ["own", "sub"], ids=["its_own_group_frozen_36a_f1", "a_group_above_it_frozen_37a_f1"])
def test_a_process_frozen_by_the_code_does_not_outlive_the_check(tmp_path, member):
    """The code forks a child into a freezer group it makes and freezes that group: the child's own (36a F1), or the
    group above it (37a F1: in v1 a group stays frozen while a group above it is)."""
    with freezer_case(tmp_path, member) as (group, pid_file):
        joined = str(group) if member == "own" else str(group / "sub")
        (tmp_path / "frz.py").write_text(textwrap.dedent(f"""
            import os, time
            from my_attn import MyAttention
            if os.environ.get("FRZ_DONE") is None:
                os.environ["FRZ_DONE"] = "1"
                if os.fork() == 0:
                    os.makedirs({joined!r}, exist_ok=True)
                    open({joined!r} + "/cgroup.procs", "w").write(str(os.getpid()))
                    open({str(pid_file)!r}, "w").write(str(os.getpid()))
                    open({str(group)!r} + "/freezer.state", "w").write("FROZEN")
                    while True:
                        time.sleep(1)
                time.sleep(1)
            class F(MyAttention):
                pass
        """))
        r = check_module(tmp_path, "frz.py:F")
        time.sleep(0.5)
        assert not alive(int(pid_file.read_text())), (r.returncode, r.stderr[-500:])


_RMDEEP = """
import os, sys
base = sys.argv[1]
if os.path.isdir(base):
    os.chdir(base)
    depth = 0
    while True:
        subs = [d for d in os.listdir(".") if os.path.isdir(d)]
        if not subs:
            break
        os.chdir(subs[0])
        depth += 1
    for _ in range(depth):
        here = os.path.basename(os.getcwd())
        os.chdir("..")
        os.rmdir(here)
    os.chdir("/")
    os.rmdir(base)
"""


def _memory_group_of_self() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    return None


def _needs_v1_memory_group():
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not MEMORY_CGROUP:
        pytest.skip("needs root and a memory cgroup for the checks (as on the CI machines)")
    own = _memory_group_of_self()
    if own is None or not (own / "memory.usage_in_bytes").is_file():
        pytest.skip("needs the v1 memory hierarchy (as on the CI machines)")
    return own


def _make_deep(base: Path, levels: int = 24) -> None:
    """Folders of 200-character names below ``base``, deeper than PATH_MAX (made by relative mkdir/chdir)."""
    subprocess.run([sys.executable, "-c", "import os, sys\nos.chdir(sys.argv[1])\nfor _ in range(int(sys.argv[2])):\n"
                    "    os.mkdir('x' * 200)\n    os.chdir('x' * 200)\n", str(base), str(levels)], check=True)


def test_a_group_nested_deeper_than_path_max_by_the_code_gives_no_traceback(tmp_path):
    own = _needs_v1_memory_group()
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    pid_file = tmp_path / "deep.pid"
    (tmp_path / "deep.py").write_text(textwrap.dedent(f"""
        import os, time
        from my_attn import MyAttention
        if os.environ.get("DEEP_DONE") is None:
            os.environ["DEEP_DONE"] = "1"
            if os.fork() == 0:
                line = [l for l in open("/proc/self/cgroup").read().splitlines() if ":memory:" in l][0]
                os.chdir("/sys/fs/cgroup/memory" + line.split(":", 2)[2])
                for i in range(24):
                    os.mkdir("x" * 200)
                    os.chdir("x" * 200)
                open("cgroup.procs", "w").write(str(os.getpid()))
                open({str(pid_file)!r}, "w").write(str(os.getpid()))
                t0 = time.time()
                while time.time() - t0 < 100:
                    time.sleep(0.2)
                os._exit(0)
            time.sleep(1)
        class F(MyAttention):
            pass
    """))
    before = set(own.glob("tverify-*"))
    try:
        r = check_module(tmp_path, "deep.py:F")
        # (a group of a check still running beside this test, another pytest worker's, is not left behind)
        left = {g for g in set(own.glob("tverify-*")) - before if not alive(int(g.name.split("-")[1]))}
        assert "Traceback" not in r.stderr and r.returncode == 0 and not left, (r.returncode, r.stderr[-300:], left)
    finally:
        with contextlib.suppress(Exception):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        time.sleep(0.3)
        for g in {g for g in set(own.glob("tverify-*")) - before if not alive(int(g.name.split("-")[1]))}:
            subprocess.run([sys.executable, "-c", _RMDEEP, str(g)], check=False)


def test_a_leftover_group_deeper_than_path_max_does_not_turn_the_memory_cgroup_off(tmp_path):
    own = _needs_v1_memory_group()
    from proofs_checks.sanity._cgroup import MemoryCgroup, _pid_namespace

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    left = own / f"tverify-{p.pid}-0-0badc0de-{_pid_namespace()}"  # (a dead tverify's group, as a SIGKILL leaves it)
    try:
        left.mkdir()
        _make_deep(left)
        g = MemoryCgroup.make()
        made = g is not None
        if g is not None:
            g.close()
        assert made and not left.exists()
    finally:
        subprocess.run([sys.executable, "-c", _RMDEEP, str(left)], check=False)


_PLANT = """
import importlib._bootstrap_external as be, os, sys
from pathlib import Path
from proofs_checks.owned import remember_folder
from proofs_checks.survey.runner import MARKER, _tree
pkg, marker = Path(sys.argv[1]), sys.argv[2]
src = pkg / "x_transformers" / "__init__.py"
src.parent.mkdir(parents=True)
src.write_text("raise ImportError('the installed source: not run in this test')\\n")
(pkg / MARKER).write_text("")
assert remember_folder(pkg, _tree(pkg))  # (what tverify records after its own pip install)
st = os.stat(src)
code = compile(f"open({marker!r}, 'a').write('planted bytecode ran\\\\n')\\nraise ImportError('planted')\\n",
               str(src), "exec")
(src.parent / "__pycache__").mkdir()
(src.parent / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc").write_bytes(
    be._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))
"""


def test_survey_never_runs_bytecode_planted_in_its_install_cache(tmp_path):
    pkg = tmp_path / ".tverify" / "survey-cache" / "x-transformers-1.16.11"
    marker = tmp_path / "ran.txt"
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("TVERIFY_SURVEY_CACHE", None)
    subprocess.run([sys.executable, "-c", _PLANT, str(pkg), str(marker)], env=env, check=True, timeout=60)
    tv = Path(sys.executable).with_name("tverify")
    p = subprocess.run([str(tv), "survey", "xt-1.16.11-flash-mask", "--quick", "--no-install", "--out", "s"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "bytecode planted in the install cache's __pycache__ ran: " + p.stderr[-500:]


_PRODUCER = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(int(sys.argv[1]), 1 << 20, 0o1600)  # IPC_CREAT | 0600
addr = libc.shmat(shmid, None, 0)
ctypes.memset(addr, 65, 1 << 20)
libc.shmdt(ctypes.c_void_p(addr))
print(shmid)
"""


def test_a_segment_another_program_made_and_the_code_only_read_is_not_removed(tmp_path):
    if not sys.platform.startswith("linux") or not Path("/proc/sysvipc/shm").is_file():
        pytest.skip("needs Linux SysV shared memory")
    shutil.copy(EXAMPLES / "my_attn.py", tmp_path)
    key = 0x37A00000 + (os.getpid() & 0xFFFFF)
    waiting, read = tmp_path / "waiting", tmp_path / "read.txt"
    (tmp_path / "cons.py").write_text(textwrap.dedent(f"""
        import ctypes, os, time
        from my_attn import MyAttention
        if os.environ.get("C_DONE") is None:
            os.environ["C_DONE"] = "1"
            libc = ctypes.CDLL(None, use_errno=True)
            libc.shmat.restype = ctypes.c_void_p
            open({str(waiting)!r}, "w").write("1")
            for _ in range(300):
                shmid = libc.shmget({key}, 0, 0)
                if shmid >= 0:
                    break
                time.sleep(0.1)
            addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY: a consumer reading the producer's data
            open({str(read)!r}, "w").write(repr(ctypes.string_at(addr, 4)))
            libc.shmdt(ctypes.c_void_p(addr))
        class F(MyAttention):
            pass
    """))
    shmid = None
    try:
        p = subprocess.Popen([sys.executable, "-m", "proofs_checks.cli", "check", "attention", "--module", "cons.py:F",
                              "--causal", "--quick", "--seq-len", "5", "--no-progress"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TVERIFY_STORE": str(tmp_path / "st")})
        for _ in range(600):
            if waiting.exists() or p.poll() is not None:
                break
            time.sleep(0.1)
        shmid = int(subprocess.run([sys.executable, "-c", _PRODUCER, str(key)], capture_output=True, text=True,
                                   check=True).stdout)  # the user's producer: makes the segment, fills it, exits
        out, err = p.communicate(timeout=120)
        assert read.read_text() == repr(b"AAAA"), err[-300:]
        ids = {int(line.split()[1]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}
        assert shmid in ids, "the producer's segment was removed by the check: " + err[-300:]
    finally:
        if shmid is not None:
            import ctypes

            ctypes.CDLL(None).shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None)  # IPC_RMID


def test_tverify_exits_when_the_code_freezes_its_own_process_through_a_parent_freezer_group(tmp_path):
    with freezer_case(tmp_path, "fw") as (group, pid_file):
        (tmp_path / "fw.py").write_text(textwrap.dedent(f"""
            import os, time
            from my_attn import MyAttention
            N = [0]
            class F(MyAttention):
                def forward(self, x):
                    N[0] += 1
                    if N[0] == 5 and not os.path.exists({str(pid_file)!r}):
                        worker = os.getpid()
                        open({str(pid_file)!r}, "w").write(str(worker))
                        if os.fork() == 0:
                            os.makedirs({str(group)!r} + "/sub", exist_ok=True)
                            open({str(group)!r} + "/sub/cgroup.procs", "w").write(str(worker))
                            open({str(group)!r} + "/freezer.state", "w").write("FROZEN")
                            os._exit(0)
                        time.sleep(1)
                    return super().forward(x)
        """))
        try:
            r = check_module(tmp_path, "fw.py:F", "--timeout", "5", timeout=25)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"tverify still running 25 s after a --timeout of 5 s: {(exc.stderr or b'')[-300:]!r}")
        assert r.returncode == 2, r.stderr[-300:]
