"""tverify survey (issue 27): the catalogue, a two-entry survey from what the running environment has
(--no-install: nothing is downloaded), the page, the JSON, a flagged finding, bad input rows."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import invoke_in

ROOT = Path(__file__).resolve().parents[1]


def _tverify(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_list_names_at_least_12_implementations(tmp_path, monkeypatch):
    """The catalogue's content is the subject: in-process."""
    p = invoke_in(tmp_path, monkeypatch, "survey", "--list", "--json", "-")
    assert p.returncode == 0, p.stderr
    entries = json.loads(p.stdout)["entries"]
    assert len({e["library"] for e in entries}) >= 12 and len(entries) >= 20
    assert all(e["adapter_lines"] <= 10 for e in entries)
    bugs = [e for e in entries if e["known"] and "bug" in e["known"]]
    names = {e["name"] for e in entries}
    assert len(bugs) >= 3 and all(b["known"]["fixed_in"] in names for b in bugs)


def test_catalogue_adapters_compile():
    from proofs_checks.survey.catalogue import _PRE, CATALOGUE, HELPERS

    for e in CATALOGUE:
        compile(_PRE + HELPERS + e.adapter, e.name, "exec")


@pytest.mark.integration(reason="the ecosystem survey over installed releases")
@pytest.mark.skipif(importlib.util.find_spec("performer_pytorch") is None
                    or importlib.util.find_spec("x_transformers") is None,
                    reason="needs performer-pytorch and x-transformers (the [ecosystem] extra)")
def test_two_entry_survey_page_json_and_finding(tmp_path):
    from importlib.metadata import version

    from proofs_checks.survey.catalogue import get

    if version("performer-pytorch") != get("performer").version or version("x-transformers") != get("xt-causal").version:
        pytest.skip("the installed ecosystem releases are not the catalogue's pins")
    p = _tverify("survey", "xt-causal", "performer", "--quick", "--no-install", "--no-progress",
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "page"), "--json", "-", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = {r["name"]: r for r in doc["rows"]}
    assert set(rows) == {"xt-causal", "performer"}
    assert rows["xt-causal"]["verdict"] == "ok" and rows["xt-causal"]["findings"] == []
    perf = rows["performer"]
    assert perf["verdict"] == "mismatch" and "causal_no_future_leak" in perf["findings"]
    leak = next(c for c in perf["properties"] if c["name"] == "causal_no_future_leak")
    assert leak["error"] > leak["tolerance"]
    assert perf["reference"]["kind"] == "not reported upstream"
    page = tmp_path / "page"
    md = (page / "index.md").read_text()
    assert "causal_no_future_leak" in md and "xt-causal" in md and "repro/performer.py" in md
    assert (page / "matrix.png").stat().st_size > 1000 and (page / "index.html").exists()
    assert (page / "repro" / "performer.py").exists()
    compile((page / "repro" / "performer.py").read_text(), "repro", "exec")
    assert json.loads((page / "survey.json").read_text())["rows"][1]["name"] in rows
    # tverify report links the latest survey (the pointer the survey leaves in the working folder)
    from proofs_checks.survey import page as pg

    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert any("index.html" in ln for ln in pg.latest_survey_link())
    finally:
        os.chdir(cwd)


@pytest.mark.integration(reason="the ecosystem survey with failing installs and hanging modules")
def test_bad_entries_are_rows_not_crashes(tmp_path, monkeypatch):
    """A failed install, a hanging module and a check that errs: one row each, the survey goes on."""
    from proofs_checks.survey import runner
    from proofs_checks.survey.catalogue import Entry

    hang = Entry("hang", "test", "torch", None, "torch", "import time\ntime.sleep(60)\nmake = None\n", {})
    r = runner.run_entry(hang, cache=tmp_path, mode="quick", seed=0, timeout=3)
    assert r["status"] == "timeout" and "killed" in r["why"]
    missing = Entry("missing", "test", "no-such-dist-tverify", "0.0.1", "nope", "make = None\n", {})
    monkeypatch.setattr(runner, "_install", lambda spec, cache, timeout: (None, f"pip install {spec} failed: no match"))
    r = runner.run_entry(missing, cache=tmp_path, mode="quick", seed=0, timeout=3)
    assert r["status"] == "install-failed" and "no-such-dist-tverify" in r["why"]
    r = runner.run_entry(missing, cache=tmp_path, mode="quick", seed=0, timeout=3, install=False)
    assert r["status"] == "not-installed"
    bad = Entry("bad", "test", "torch", None, "torch", "def make():\n    return lambda x: x[:, :1]\n", {})
    r = runner.run_entry(bad, cache=tmp_path, mode="quick", seed=0, timeout=60)
    assert r["status"] in ("adapter-failed", "check-failed") and r["why"]


def test_known_record_comparison():
    from proofs_checks.survey.catalogue import get
    from proofs_checks.survey.runner import row_verdict

    bug = get("local-attention-1.2.1")
    row = row_verdict(bug, {"status": "checked", "outcome": "mismatch", "properties": [
        {"name": "causal_no_future_leak", "status": "fail"}, {"name": "window_respected", "status": "fail"}]})
    assert row["expected"] == "as documented"
    row = row_verdict(bug, {"status": "checked", "outcome": "ok", "properties": []})
    assert row["expected"] == "contradicts the record"
    fix = get("linear-attention-0.16.1")  # an approximation: matches_reference fails by design
    row = row_verdict(fix, {"status": "checked", "outcome": "mismatch",
                            "properties": [{"name": "matches_reference", "status": "fail"}]})
    assert row["expected"] == "as documented" and row["verdict"] == "approximation"


def test_unknown_entry_is_a_usage_error_and_nothing_is_written(tmp_path, monkeypatch):
    """The line, the exit code and the folder left empty are the subject: in-process."""
    p = invoke_in(tmp_path, monkeypatch, "survey", "xt-causal", "no-such-lib", "--quick", "--no-install")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "unknown survey entry 'no-such-lib'" in lines[0], p.stderr
    assert not any(tmp_path.iterdir())
