"""The console command's parent process (proofs_checks/supervisor.py; hostile pass 11a F8): a child that ends
without passing through Python's normal exit is reported (exit 1, one line), never its own status; signals sent
to the command reach the command's work once; ``kill -9`` of the command leaves no child doing its work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_hostile_round16a import run, site_with

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent process is Linux-only")


def second_time(tmp_path: Path, then: str) -> Path:
    """A plugin whose first import (the probe) is clean and whose second runs ``then``."""
    flag = tmp_path / "imported_once"
    return site_with(tmp_path, f"import os\nif os.path.exists({str(flag)!r}):\n" + "".join(
        f"    {line}\n" for line in then.splitlines()) + f"open({str(flag)!r}, 'w').write('1')\n")


@pytest.mark.parametrize("then", ["os.execv('/bin/true', ['true'])",
                                  "import atexit\natexit.register(os._exit, 0)",
                                  "os._exit(3)"], ids=["exec", "atexit", "exit3"])
def test_an_end_tverify_did_not_choose_is_exit_1_with_one_line(tmp_path, then):
    site = second_time(tmp_path, then)
    p = run(site, [sys.executable, "-m", "proofs_checks", "list", "zzh"])
    assert p.returncode == 1, (p.returncode, p.stdout[-300:], p.stderr[-300:])
    assert "before tverify finished" in p.stderr and "Traceback" not in p.stderr


def test_an_ordinary_command_keeps_its_status_and_says_nothing_more(tmp_path):
    site = site_with(tmp_path, "")
    ok = run(site, [sys.executable, "-m", "proofs_checks", "list", "zzh"])
    usage = run(site, [sys.executable, "-m", "proofs_checks", "list", "--no-such-option"])
    assert ok.returncode == 0 and "tverify: error" not in ok.stderr, ok.stderr[-300:]
    assert usage.returncode == 2 and "before tverify finished" not in usage.stderr


def _sleeper(tmp_path: Path) -> tuple[Path, list[str]]:
    """A command that waits 60 s in its (second, in-process) plugin import: somewhere to send signals."""
    return second_time(tmp_path, "import time\ntime.sleep(60)"), [sys.executable, "-m", "proofs_checks", "list", "zzh"]


def _start(site: Path, args: list[str], **extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).resolve().parents[1])]),
               TVERIFY_STORE=str(site.parent / "store"), **extra)
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=str(site.parent), start_new_session=True)
    flag = site.parent / "imported_once"
    t0 = time.monotonic()
    while not flag.exists() and time.monotonic() - t0 < 60:  # the probe has run: the child is in the second import
        time.sleep(0.05)
    time.sleep(0.3)
    return p


@pytest.mark.parametrize("to", ["command", "group"])
def test_a_sigterm_reaches_the_work_once(tmp_path, to):
    p = _start(*_sleeper(tmp_path))
    (os.kill if to == "command" else os.killpg)(p.pid, signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, (p.returncode, err[-300:])
    assert err.count("terminated (SIGTERM)") == 1 and "Traceback" not in err, err[-500:]


def test_kill_9_of_the_command_ends_its_work(tmp_path):
    p = _start(*_sleeper(tmp_path))
    children = [int(c) for c in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()]
    assert children, "the command has no child doing its work"
    p.kill()
    p.communicate(timeout=60)
    time.sleep(0.5)
    for c in children:
        state = Path(f"/proc/{c}/stat").read_text().split(")")[-1].split()[0] if Path(f"/proc/{c}").exists() else "gone"
        assert state in ("gone", "Z"), (c, state)


def test_every_terminating_signal_to_the_command_reaches_its_work(tmp_path):
    """``kill -XCPU PID`` killed the parent by its default action (hostile pass 12): passed on like SIGTERM."""
    p = _start(*_sleeper(tmp_path))
    os.kill(p.pid, signal.SIGXCPU)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGXCPU and "terminated (SIGXCPU)" in err, (p.returncode, err[-300:])


def test_a_killed_child_leaves_nothing_in_tmpdir(tmp_path):
    """The child's $TMPDIR is the command's own folder, removed by the parent however the child ended (a child
    killed by SIGKILL, SIGSEGV or SIGQUIT left pymp-* and tverify-figures-* folders; hostile pass 12)."""
    import shutil
    import tempfile

    # short: the command's folder is made only where multiprocessing's sockets inside it fit in an AF_UNIX path
    tmp = Path(tempfile.mkdtemp(prefix="tvs-", dir="/tmp"))
    try:
        _killed_child_leaves_nothing(tmp_path, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _killed_child_leaves_nothing(tmp_path: Path, tmp: Path) -> None:
    p = _start(*_sleeper(tmp_path), TMPDIR=str(tmp))
    child = int(Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()[0])
    assert [q.name for q in tmp.iterdir()][0].startswith("tv-")
    os.kill(child, signal.SIGKILL)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 137 and "killed by SIGKILL" in err, (p.returncode, err[-300:])
    assert list(tmp.iterdir()) == []


def test_a_long_tmpdir_is_used_as_it_is(tmp_path):
    """Where the command's folder would make multiprocessing's socket paths too long for AF_UNIX, none is made:
    the checks start as before (hostile pass 12: a long $TMPDIR plus the folder broke the check's fork server)."""
    from proofs_checks import supervisor

    long = tmp_path / ("x" * 60)
    long.mkdir()
    import tempfile

    saved = tempfile.tempdir
    tempfile.tempdir = str(long)
    try:
        assert supervisor._scratch() is None and list(long.iterdir()) == []
    finally:
        tempfile.tempdir = saved


@pytest.mark.integration(reason="a local Dask cluster started and interrupted from a fresh tverify process (≈ 6 CPU s); "
                                "the parent's end (kill what is left, remove the folder) is pinned by "
                                "test_a_killed_child_leaves_nothing_in_tmpdir")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_while_a_local_cluster_starts_is_one_line_and_leaves_nothing(tmp_path, sig):
    """Hostile pass 12a F1/F2: 0.3 s after the cluster's folder appeared, a signal gave the one line, then the
    resource tracker's tracebacks (the command killed its descendants before its interpreter's last clean-ups), and
    sometimes left $TMPDIR/tverify-dask-*."""
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="tvs-", dir="/tmp"))
    try:
        env = dict(os.environ, TMPDIR=str(tmp), TVERIFY_STORE=str(tmp_path / "store"))
        p = subprocess.Popen([sys.executable, "-m", "proofs_checks", "run", "attn.softmax_simplex", "scale.param_counts",
                              "--quick", "--no-progress", "--cluster", "local:2"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        while not any("dask" in str(q) for q in tmp.rglob("*")) and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 128 + sig and "Traceback" not in err, (p.returncode, err[-800:])
        assert list(tmp.iterdir()) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
