"""`tverify report --out` never destroys what it did not write, and every output path is checked
before a claim runs (issue 13). In-process through ``proofs_checks.cli.main``."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from proofs_checks import runner
from proofs_checks.cli import main
from proofs_checks.output.report import MARKER

CLAIM = "attn.softmax_simplex"


@pytest.fixture(autouse=True)
def sandbox(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def tv(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("tverify: error:")
    return err


@pytest.fixture
def no_claim_runs(monkeypatch):
    def boom(*a, **k):  # pragma: no cover - reached only when the check comes too late
        raise AssertionError("a claim ran although an output path was unusable")

    monkeypatch.setattr(runner, "run_claim", boom)
    monkeypatch.setattr(runner, "run_mutant", boom)


def report(capsys, out: str, *extra: str) -> tuple[int, str, str]:
    return tv(capsys, "report", CLAIM, "--quick", "--no-progress", "--out", out, *extra)


def test_user_folder_is_refused_and_kept(capsys, sandbox, no_claim_runs):
    d = sandbox / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("years of work")
    err = usage_error(*report(capsys, "mine")[::2])
    assert "thesis.tex" in err and "--force" in err
    assert (d / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in d.iterdir()) == ["thesis.tex"]


@pytest.mark.parametrize("target", [".", "..", "~", "/"])
def test_cwd_home_root_refused_even_with_force(capsys, sandbox, no_claim_runs, target):
    (sandbox / "keep.txt").write_text("x")
    usage_error(*report(capsys, target, "--force")[::2])
    assert (sandbox / "keep.txt").read_text() == "x"


def test_file_and_parent_file_refused(capsys, sandbox, no_claim_runs):
    (sandbox / "f").write_text("data")
    err = usage_error(*report(capsys, "f")[::2])
    assert "file" in err
    err = usage_error(*report(capsys, "f/sub")[::2])
    assert "is a file, not a folder" in err
    assert (sandbox / "f").read_text() == "data"


def test_new_folder_modes_and_replacing_a_previous_report(capsys, sandbox):
    old = os.umask(0o077)  # a strict umask must not make the report private
    try:
        code, out, err = report(capsys, "rep/nested")
    finally:
        os.umask(old)
    assert code == 0, err
    rep = sandbox / "rep" / "nested"
    assert (rep / "index.html").is_file() and (rep / "results.json").is_file() and (rep / MARKER).is_file()
    for p in [rep, *rep.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))
    stamp = json.loads((rep / MARKER).read_text())
    assert "results.json" in stamp["files"] and "index.html" in stamp["files"]
    first = json.loads((rep / "results.json").read_text())
    # a previous report is replaced (no merge, no leftovers, no temporary folders)
    code, out, err = report(capsys, "rep/nested", "--seed", "3", "--no-mutants")
    assert code == 0, err
    second = json.loads((rep / "results.json").read_text())
    assert first["seed"] == 0 and second["seed"] == 3
    assert [p.name for p in (sandbox / "rep").iterdir()] == ["nested"]


def test_previous_report_with_a_user_file_is_refused(capsys, sandbox):
    code, _, err = report(capsys, "rep", "--no-mutants")
    assert code == 0, err
    (sandbox / "rep" / "figures" / "my-notes.txt").write_text("mine")
    err = usage_error(*report(capsys, "rep", "--no-mutants")[::2])
    assert "my-notes.txt" in err
    assert (sandbox / "rep" / "figures" / "my-notes.txt").read_text() == "mine"
    # --force replaces it (the user asked for it)
    code, _, err = report(capsys, "rep", "--no-mutants", "--force")
    assert code == 0, err
    assert not (sandbox / "rep" / "figures" / "my-notes.txt").exists()


def test_legacy_report_without_marker_needs_force(capsys, sandbox):
    """A folder laid out like a report but without tverify's stamp (with its hashes) may be a user's:
    refused without --force, nothing lost; replaced with it."""
    rep = sandbox / "reports"
    (rep / "claims").mkdir(parents=True)
    (rep / "results.json").write_text(json.dumps({"tool": "tverify", "results": []}))
    (rep / "report.md").write_text("# old")
    (rep / "claims" / "x.y.html").write_text("<p>old</p>")
    code, _, err = report(capsys, "reports", "--no-mutants")
    assert code == 2 and (rep / "report.md").read_text() == "# old", err
    code, _, err = report(capsys, "reports", "--no-mutants", "--force")
    assert code == 0, err
    assert (rep / MARKER).is_file() and not (rep / "claims" / "x.y.html").exists()


def test_force_replaces_a_file(capsys, sandbox):
    (sandbox / "out").write_text("a file in the way")
    code, _, err = report(capsys, "out", "--no-mutants", "--force")
    assert code == 0, err
    assert (sandbox / "out" / "index.html").is_file()


def test_unwritable_json_path_fails_before_any_claim(capsys, sandbox, no_claim_runs):
    (sandbox / "f").write_text("x")
    (sandbox / "adir").mkdir()
    for cmd in (["run", CLAIM, "--quick"], ["mutants", CLAIM, "--quick"], ["report", CLAIM, "--quick", "--out", "r"]):
        for bad in ("f/out.json", "adir", ""):
            code, _, err = tv(capsys, *cmd, "--json", bad)
            usage_error(code, err)
    assert not (sandbox / "r").exists()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_fails_before_any_claim(capsys, sandbox, no_claim_runs):
    ro = sandbox / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        usage_error(*tv(capsys, "run", CLAIM, "--quick", "--json", "ro/out.json")[::2])
        usage_error(*report(capsys, "ro/rep")[::2])
    finally:
        ro.chmod(0o755)


def test_json_inside_out_is_refused(capsys, sandbox, no_claim_runs):
    usage_error(*report(capsys, "rep", "--json", "rep/results-copy.json")[::2])


def test_report_json_and_markdown(capsys, sandbox):
    code, out, err = report(capsys, "rep", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["mode"] == "quick" and doc["results"][0]["status"] == "verified"
    assert doc["mutant_summary"]["survived"] == [] and {m["mode"] for m in doc["mutants"]} == {"quick"}
    assert doc["kill_summary"]["overall"]["total"] == len(doc["mutants"])
    md = (sandbox / "rep" / "report.md").read_text()
    assert "| claim | mutant | kind | symbolic | numeric | trained | killed by |" in md
    assert "../shared" not in md


def test_folder_changed_during_the_run_keeps_both(sandbox, capsys):
    """A file the user puts into --out while the report is being built is not destroyed: the new
    report goes to a sibling folder, returned and named in a warning."""
    from proofs_checks.output.report import write_report

    out = sandbox / "rep"
    doc = {"schema": 1, "tool": "tverify", "created": "now", "command": "t", "mode": "quick", "seed": 0, "device": "cpu",
           "summary": {}, "results": []}
    write_report(out, doc)

    def user_writes_meanwhile(tmp: Path, d: dict) -> None:
        (out / "added-during-run.txt").write_text("mine")

    capsys.readouterr()
    where = write_report(out, doc, extra_writers=[user_writes_meanwhile])
    warning = capsys.readouterr().err
    assert (out / "added-during-run.txt").read_text() == "mine"
    kept = [p for p in sandbox.iterdir() if p.name.startswith("rep-")]
    assert kept == [where] and (where / "report.md").is_file() and str(where) in warning
    assert not [p for p in sandbox.iterdir() if p.name.startswith(".")]
