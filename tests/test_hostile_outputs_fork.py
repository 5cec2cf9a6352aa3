"""Issue 36, the hostile pass's findings 1, 3 and 7: outputs that are really ours (a forged
``.tverify-report`` stamp, a user's symbolic link at ``--json`` or ``--out``) and user code that
forks (its processes end with the check; ``tverify … | tail`` is not held open by them).
Each case: the exit code, one line, nothing of the user's lost."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from proofs_checks import runner
from proofs_checks.errors import UsageError
from tests.cli_helpers import MHA_ATTN, invoke, one_line_error
from tests.tiers import moved

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def box(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the record of written outputs
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    np.save("p.npy", np.random.default_rng(0).standard_normal((6, 16)))
    return tmp_path


@pytest.fixture()
def nothing_runs(monkeypatch):
    def boom(*a, **k):  # pragma: no cover - reached only when the refusal comes too late
        raise AssertionError("a claim ran although --out was refused")

    monkeypatch.setattr(runner, "run_claim", boom)
    monkeypatch.setattr(runner, "run_mutant", boom)


def report(out: str, *extra: str):
    return invoke("report", "attn.softmax_simplex", "--quick", "--no-mutants", "--no-progress", "--out", out, *extra)


def hopfield(*args: str):
    return invoke("check", "hopfield", "--patterns", "p.npy", "--no-progress", *args)


def forge_stamp(folder: Path) -> None:
    """The hostile tester's stamp: what tverify writes, with the real SHA-256 of the user's file."""
    names = sorted(p.name for p in folder.iterdir())
    hashes = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names}
    (folder / ".tverify-report").write_text(json.dumps({"tool": "tverify", "schema": 1, "version": "0.1.0",
                                                        "created": "2026-11-26T17:29:42+0000", "command": "x",
                                                        "note": "", "files": names, "sha256": hashes}, indent=1))


# ------------------------------------------------------------------------------------------------
# finding 1: a stamp inside the folder is not enough


def test_forged_stamp_with_real_hashes_does_not_delete_a_users_file(box, nothing_runs):
    forged = box / "forged"
    forged.mkdir()
    (forged / "thesis.txt").write_text("my thesis draft\n")
    forge_stamp(forged)
    line = one_line_error(*report("forged")[::2])
    assert "record of written outputs does not list" in line and "thesis.txt" in line and "--force" in line
    assert (forged / "thesis.txt").read_text() == "my thesis draft\n"
    # the same stamp under check --report and survey --out
    line = one_line_error(*hopfield("--report", "forged")[::2])
    assert "thesis.txt" in line and (forged / "thesis.txt").read_text() == "my thesis draft\n"
    line = one_line_error(*invoke("survey", "--out", "forged", "--no-progress")[::2])
    assert "thesis.txt" in line and (forged / "thesis.txt").read_text() == "my thesis draft\n"


def test_a_report_is_ours_where_tverify_wrote_it_not_as_a_copy(box):
    code, _, err = hopfield("--report", "rep")
    assert code == 0, err
    assert hopfield("--report", "rep")[0] == 0  # exactly what tverify wrote there: replaced
    shutil.copytree(box / "rep", box / "copy")  # a copy carries the stamp, not the record
    (box / "copy" / "report.md").write_text("my annotations on a copy")
    line = one_line_error(*hopfield("--report", "copy")[::2])
    assert "record of written outputs" in line
    assert (box / "copy" / "report.md").read_text() == "my annotations on a copy"
    os.rename(box / "rep", box / "moved")  # moved: not where tverify wrote it
    one_line_error(*hopfield("--report", "moved")[::2])
    assert (box / "moved" / "report.md").is_file()
    # a file added into a report tverify wrote is the user's
    assert hopfield("--report", "rep")[0] == 0
    (box / "rep" / "notes.txt").write_text("mine")
    line = one_line_error(*hopfield("--report", "rep")[::2])
    assert "notes.txt" in line and (box / "rep" / "notes.txt").read_text() == "mine"


def test_survey_out_uses_the_record_too(box, nothing_runs):
    (box / "page").mkdir()
    (box / "page" / "index.html").write_text("<p>my own page</p>")
    forge_stamp(box / "page")
    line = one_line_error(*invoke("survey", "--out", "page", "--no-progress")[::2])
    assert "--force" in line and (box / "page" / "index.html").read_text() == "<p>my own page</p>"


# ------------------------------------------------------------------------------------------------
# finding 3: a symbolic link at the target is the user's


def test_json_onto_a_users_symlink_is_refused_and_force_replaces_the_link_itself(box):
    (box / "notes.json").write_text("my precious notes\n")
    os.symlink("notes.json", box / "link.json")
    line = one_line_error(*hopfield("--json", "link.json")[::2])
    assert "symbolic link" in line and "--force" in line
    assert os.readlink(box / "link.json") == "notes.json" and (box / "notes.json").read_text() == "my precious notes\n"
    code, _, err = hopfield("--json", "link.json", "--force")
    assert code == 0, err
    assert not os.path.islink(box / "link.json") and json.loads((box / "link.json").read_text())["tool"] == "tverify"
    assert (box / "notes.json").read_text() == "my precious notes\n"  # never written through


@pytest.mark.parametrize("target", ["gone.json", "adir"])
def test_json_onto_a_dangling_link_or_a_link_to_a_folder_is_refused(box, target):
    (box / "adir").mkdir()
    os.symlink(target, box / "out.json")
    one_line_error(*hopfield("--json", "out.json")[::2])
    assert os.readlink(box / "out.json") == target and not (box / "gone.json").exists()
    assert list((box / "adir").iterdir()) == []


def test_json_symlink_refused_for_a_command_without_force(box):
    (box / "notes.json").write_text("mine")
    os.symlink("notes.json", box / "list.json")
    line = one_line_error(*invoke("list", "attn.softmax_simplex", "--json", "list.json")[::2])
    assert "symbolic link" in line and "--force" not in line
    assert os.path.islink(box / "list.json") and (box / "notes.json").read_text() == "mine"


def test_out_onto_a_symlink_is_refused_and_force_replaces_the_link_itself(box):
    (box / "mine").mkdir()
    (box / "mine" / "keep.txt").write_text("keep")
    os.symlink("mine", box / "rep")
    line = one_line_error(*hopfield("--report", "rep")[::2])
    assert "symbolic link" in line
    line = one_line_error(*report("rep")[::2])
    assert "symbolic link" in line and "--force" in line
    code, _, err = report("rep", "--force")
    assert code == 0, err
    assert not os.path.islink(box / "rep") and (box / "rep" / "results.json").is_file()
    assert sorted(p.name for p in (box / "mine").iterdir()) == ["keep.txt"]


def test_a_json_file_that_appears_during_the_run_is_not_replaced(box, capsys):
    from proofs_checks.owned import check_json_file, write_json_text

    check_json_file("late.json", False)  # free before the run
    (box / "late.json").write_text("written by the user meanwhile")
    write_json_text("late.json", '{"tool": "tverify"}\n', False)  # a warning line, not an error (hostile pass 12a F7)
    msg = capsys.readouterr().err
    assert msg.startswith("tverify: warning: ") and "changed during the run" in msg and len(msg.splitlines()) == 1
    assert (box / "late.json").read_text() == "written by the user meanwhile"
    aside = [p for p in box.iterdir() if p.name.startswith("late-") and p.suffix == ".json"]
    assert len(aside) == 1 and str(aside[0].name) in msg
    write_json_text("new.json", '{"tool": "tverify"}\n', False)  # nothing there: written and recorded
    check_json_file("new.json", False)  # ours now


# ------------------------------------------------------------------------------------------------
# finding 7: what user code starts ends with the check


FORKING = textwrap.dedent("""
    import os, time
    import torch

    PIDS = os.environ["FORK_PIDS"]

    def _sleeper(seconds):
        with open(PIDS, "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(seconds)
        os._exit(0)

""") + MHA_ATTN + textwrap.dedent("""

    class Fork(Attn):
        forked = False
        def forward(self, x):
            if not Fork.forked:  # once: a sleeper in the group, and one that leaves it (setsid, double fork)
                Fork.forked = True
                if os.fork() == 0:
                    _sleeper(60)
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        _sleeper(60)
                    os._exit(0)
            return super().forward(x)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the descendants are found through /proc")
@moved("a fresh tverify process (torch, a new forkserver) whose standard output is a pipe the module's forked "
       "sleepers inherit: the pipe closing as tverify exits, end to end (it closes once every holder is gone)",
       "tests/test_hostile_outputs_fork.py::test_the_isolated_child_group_is_killed_when_the_task_ends",
       "tests/test_hostile_round5.py::test_a_setsid_double_forked_sleeper_does_not_outlive_the_check")
def test_a_forking_module_leaves_no_process_and_the_pipe_closes(box):
    """``tverify check attention --module fork.py:Fork | tail``: the pipe closes when tverify exits
    (before: the orphans held it for as long as they slept, 60 s here), and nothing outlives it."""
    (box / "fork.py").write_text(FORKING)
    pids = box / "pids.txt"
    env = dict(os.environ, FORK_PIDS=str(pids), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "proofs_checks", "check", "attention", "--module", "fork.py:Fork",
                             "--quick", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=box, env=env)
    eof = threading.Event()
    chunks: list[bytes] = []

    def read():
        chunks.append(proc.stdout.read())  # returns at EOF: when every holder of the pipe is gone
        eof.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        code = proc.wait(timeout=120)
        exited = time.monotonic()
        closed = eof.wait(10)
        after = time.monotonic() - exited
        err = proc.stderr.read().decode()
        assert code == 0, err
        assert closed and after < 5, f"stdout held open {after:.1f} s after tverify exited"
        assert b"verdict: ok" in chunks[0]
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in _pids(pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_pids(pids)) == 2 and not any(_alive(p) for p in _pids(pids))
    finally:
        for p in _pids(pids):  # never leave a sleeper behind, whatever failed
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()


def fork_task(req, obj, arrays):  # runs in the check's child process (by name, as a check module's task)
    if os.fork() == 0:
        with open(req["pids"], "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(60)
        os._exit(0)
    while not _pids(Path(req["pids"])):
        time.sleep(0.01)
    if req.get("hang"):
        time.sleep(60)
    return {"rows": []}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the descendants are found through /proc")
@pytest.mark.parametrize("hang", [False, True], ids=["result", "timeout"])
def test_the_isolated_child_group_is_killed_when_the_task_ends(box, hang):
    """The process boundary every user-code path uses (``--module``, the API, plugin checks): on a
    result and on a time-out, nothing the task started survives it."""
    from proofs_checks.sanity import _isolate
    from proofs_checks.sanity._loader import UserCodeError

    pids = box / "pids.txt"
    req = {"pids": str(pids), "hang": hang}
    try:
        if hang:
            with pytest.raises(UserCodeError, match="--timeout"):
                _isolate.run_isolated(f"{__name__}:fork_task", req, label="--module", what="test", timeout=3)
        else:
            assert _isolate.run_isolated(f"{__name__}:fork_task", req, label="--module", what="test")["rows"] == []
        deadline = time.monotonic() + 3
        while any(_alive(p) for p in _pids(pids)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_pids(pids)) == 1 and not any(_alive(p) for p in _pids(pids))
    finally:
        for p in _pids(pids):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
