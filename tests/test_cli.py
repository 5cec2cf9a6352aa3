"""The CLI through a subprocess: exit codes, --json schema, usage errors as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tverify(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600)


def _one_line_error(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("tverify: error:")


def test_help_everywhere():
    for args in ([], ["run"], ["list"], ["show"], ["report"], ["mutants"], ["check"]):
        p = tverify(*args, "--help")
        assert p.returncode == 0, (args, p.stderr)
        assert "Usage" in p.stdout


def test_unknown_claim_is_usage_error():
    p = tverify("run", "no.such.claim")
    _one_line_error(p)
    assert "no.such.claim" in p.stderr


@pytest.mark.parametrize("args", [["run", "--device", "tpu"], ["run", "--seed", "abc"], ["show", "no.such"], ["frobnicate"]])
def test_bad_arguments_exit_2(args):
    _one_line_error(tverify(*args))


def test_list_json():
    p = tverify("list", "--json")
    assert p.returncode == 0
    items = json.loads(p.stdout)
    assert {"id", "kind", "title", "source", "checks", "mutants"} <= set(items[0])


def test_run_json_schema(tmp_path):
    out = tmp_path / "out.json"
    p = tverify("run", "attn.softmax_simplex", "--quick", "--json", str(out), "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["mode"] == "quick" and doc["seed"] == 0
    (r,) = doc["results"]
    assert r["id"] == "attn.softmax_simplex" and r["status"] == "verified" and r["kind"] == "identity"
    c = r["checks"][0]
    assert {"name", "layer", "status", "error", "tolerance", "justification", "seeds", "sizes", "device", "seconds"} <= set(c)
    # show prints the last result recorded by that run
    s = tverify("show", "attn.softmax_simplex", cwd=tmp_path)
    assert s.returncode == 0 and "verified" in s.stdout


def test_report_writes_atomically(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    p = tverify("report", "attn.softmax_simplex", "--quick", "--out", str(out), "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (out / "report.md").exists() and (out / "results.json").exists()
    assert not (out / "stale.txt").exists(), "the report folder is replaced, not merged"
    doc = json.loads((out / "results.json").read_text())
    assert doc["mutant_summary"]["survived"] == []
    leftovers = [q.name for q in tmp_path.iterdir() if q.name.startswith(".rep")]
    assert not leftovers, f"temporary folders left behind: {leftovers}"


def test_run_cuda_without_cuda_skips_trained(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("machine has CUDA; the no-CUDA path is not reachable here")
    p = tverify("run", "--quick", "--device", "cuda", "--json", "-", "--no-progress", "attn.*", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    for r in doc["results"]:
        for c in r["checks"]:
            if c["layer"] == "trained":
                assert c["status"] == "skipped" and "CUDA" in c["skip_reason"]


def test_group_a_verifies_through_the_cli(tmp_path):
    """Acceptance of the spine issue: every group-A claim verified (errata: stated form refuted)."""
    p = tverify("run", "attn.*", "--quick", "--json", "-", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    ids = {r["id"]: r["status"] for r in doc["results"]}
    assert len(ids) == 11, sorted(ids)
    assert set(ids.values()) == {"verified"}, ids
    for r in doc["results"]:
        if r["kind"] == "erratum":
            assert any(c["status"] == "failed" for c in r["stated_checks"]), r["id"]
