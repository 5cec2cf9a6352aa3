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


def _start(site: Path, args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).resolve().parents[1])]),
               TVERIFY_STORE=str(site.parent / "store"))
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
