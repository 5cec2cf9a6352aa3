"""Hostile pass 14 (tester a): findings pinned as strict xfails during the pass (which fixes nothing); fixed after it,
each is a plain test.
Each test is written so that, while the finding stands, it writes nothing into tverify's own code."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiers import moved

import theory
from proofs_checks.errors import UsageError


def test_store_last_linked_into_own_code_is_refused(tmp_path):
    from proofs_checks.cli import _store

    root = tmp_path / "s"
    root.mkdir()
    (root / "last").symlink_to(Path(theory.__file__).resolve().parent)
    with pytest.raises(UsageError):  # the store check before the run; save_last would write theory/<id>.json
        _store(str(root))


@moved("the tester's reproducer from a fresh process (≈ 4 s); the same exit with stderr on /dev/full",
       "tests/test_hostile_round20.py::test_a_usage_error_with_stderr_on_a_full_device_is_exit_2")
def test_usage_error_with_stderr_full_exits_2(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    exe = Path(sys.executable).with_name("tverify")
    with open("/dev/full", "w") as full:
        rc = subprocess.run([str(exe), "run", "nosuch.claim"], stderr=full, stdout=subprocess.DEVNULL,
                            cwd=tmp_path, env={**os.environ, "TVERIFY_STORE": str(tmp_path / "st")}, timeout=120).returncode
    assert rc == 2


def test_survey_pointer_of_the_user_is_left(tmp_path, monkeypatch):
    from proofs_checks.survey.page import POINTER, remember_latest

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tverify").mkdir()
    (tmp_path / POINTER).write_text("mine\n", encoding="utf-8")
    remember_latest(tmp_path / "sv", {"created": "now", "summary": {}})
    assert (tmp_path / POINTER).read_text(encoding="utf-8") == "mine\n"


def test_store_name_too_long_is_one_line(tmp_path):
    from proofs_checks.cli import _store

    with pytest.raises(UsageError):
        _store(str(tmp_path / ("b" * 256)))


def test_survey_pointer_not_written_into_own_code(tmp_path, monkeypatch):
    """A stand-in for theory/ (so a failing run writes nothing into the package): own_installation says a
    tmp folder is tverify's code; `.tverify` in the cwd links there."""
    import proofs_checks.store as store
    from proofs_checks.survey.page import POINTER, remember_latest

    own = tmp_path / "own_code"
    own.mkdir()
    real = store.own_installation
    monkeypatch.setattr(store, "own_installation",
                        lambda p, holding=True: "tverify's own code" if Path(p).resolve().is_relative_to(own.resolve())
                        else real(p, holding))
    work = tmp_path / "work"
    work.mkdir()
    (work / ".tverify").symlink_to(own)
    monkeypatch.chdir(work)
    remember_latest(work / "sv", {"created": "now", "summary": {}})
    assert not (own / POINTER.name).exists()
