"""Hostile pass 17 (tester a): reproducers of its findings, strict xfails during the pass; fixed after it, plain tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_out_parent_turned_into_a_file_is_one_error_not_a_recursion(tmp_path, monkeypatch):
    from proofs_checks.output.report import ReportTargetError, build_output

    monkeypatch.chdir(tmp_path)
    parent = tmp_path / "ro2"
    parent.mkdir()
    out = parent / "rep"

    def fill(tmp: Path) -> None:  # never reached: the parent is a file by the time the output is built
        (tmp / "index.html").write_text("x")

    os.rmdir(parent)
    parent.write_text("userdata")  # what happens when the user replaces the folder while the claims run
    with pytest.raises((ReportTargetError, OSError)) as info:
        build_output(out, fill, {"command": "test"})
    assert not isinstance(info.value, RecursionError)
    assert parent.read_text() == "userdata"
