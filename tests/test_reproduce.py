"""``tverify reproduce``: --list, bad names, the JSON rows schema, a planted wrong reference exits 1,
``--out`` safety, each reproduction at tiny sizes (internal size overrides), the report hook's link."""

from __future__ import annotations

import json

import numpy as np
import pytest

from proofs_checks.reproduce import REPRODUCTIONS, ReproContext, compare_row, get, run_reproduction
from tests.cli_helpers import invoke, one_line_error

ROW_KEYS = {"quantity", "ours", "ours_se", "reference", "reference_source", "verdict"}
EPS = float(np.finfo(np.float64).eps)

#: sizes that exercise every code path in well under a second or two each (the verdicts are not asserted)
TINY = {
    "tf-as-svm": {"seeds": 3, "iters": 250, "path_seeds": 2, "path_iters": 150, "path_lambdas": [1e-2, EPS]},
    "zfb-2024": {"seeds": 4, "train_prompts": 2048, "steps": 20, "test_prompts": 200, "train_N": [4], "test_M": [4]},
    "von-oswald-2023": {"d": 2, "seeds": 4, "train_prompts": 2048, "steps": 20, "test_prompts": 200},
    "garg-2022": {"d": 2, "n_max": 4, "steps": 15, "width": 8, "layers": 1, "test_prompts": 40},
    "ramsauer-2021": {"instances": 8, "storage_d": [4, 6, 8]},
    "choromanski-2021": {"draws": 300, "features": [4, 16]},
}


@pytest.fixture
def tiny(monkeypatch):
    """``tverify reproduce --quick`` at the TINY sizes (issue 46: ≈ 3 s of ramsauer-2021 and choromanski-2021 at
    quick sizes), for the tests of the command itself — its JSON rows, pages, ``--out`` and exit codes — whose
    assertions hold at any size (both reproductions agree at these sizes too)."""
    pick = ReproContext.pick

    def tiny_pick(self, key, quick, default, full=None):
        if self.mode == "quick" and key in TINY.get(self.name, {}) and key not in self.sizes:
            self.sizes[key] = TINY[self.name][key]
        return pick(self, key, quick, default, full)

    monkeypatch.setattr(ReproContext, "pick", tiny_pick)


def test_list_names_every_reproduction():
    code, out, err = invoke("reproduce", "--list")
    assert code == 0, err
    for r in REPRODUCTIONS:
        assert r.name in out
    code, out, _ = invoke("reproduce", "--list", "--json", "-")
    assert code == 0
    assert [r["name"] for r in json.loads(out)["reproductions"]] == [r.name for r in REPRODUCTIONS]


def test_bad_name_is_one_line_exit_2():
    line = one_line_error(*invoke("reproduce", "no-such-paper", "--quick")[::2])
    assert "no-such-paper" in line and "tf-as-svm" in line


def test_quick_and_full_together_is_a_usage_error():
    one_line_error(*invoke("reproduce", "ramsauer-2021", "--quick", "--full")[::2])


@pytest.mark.parametrize("name", list(TINY))
def test_each_reproduction_runs_at_tiny_sizes(name):
    assert {r.name for r in REPRODUCTIONS} == set(TINY)
    res = run_reproduction(get(name), mode="quick", sizes=TINY[name])
    assert res.status in ("agrees", "disagrees"), res.why  # not "error": every path ran
    assert res.rows and all(ROW_KEYS <= set(r.to_json()) for r in res.rows)
    assert res.sizes and res.seeds and res.seconds > 0
    if name == "tf-as-svm":  # both (K,Q) variants are reported
        qs = " | ".join(r.quantity for r in res.rows)
        assert "with the reference's ridge" in qs and "without the ridge" in qs


def test_json_rows_schema_and_pages(tmp_path, tiny):
    out = tmp_path / "pages"
    code, stdout, err = invoke("reproduce", "ramsauer-2021", "choromanski-2021", "--quick", "--json", "-", "--out", str(out),
                               "--no-progress")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["rows"] and {r["reproduction"] for r in doc["rows"]} == {"ramsauer-2021", "choromanski-2021"}
    for row in doc["rows"]:
        assert ROW_KEYS <= set(row) and row["verdict"] == "agrees"
        assert isinstance(row["quantity"], str) and isinstance(row["reference_source"], str)
    assert (out / "index.html").is_file() and (out / "ramsauer-2021.html").is_file()
    assert "ramsauer-2021.html" in (out / "index.html").read_text()
    assert json.loads((out / "results.json").read_text())["rows"] == doc["rows"]
    page = (out / "choromanski-2021.html").read_text()
    assert "Lemma 2" in page and "tolerance" in page


def test_planted_wrong_reference_disagrees_and_exits_1(tmp_path, monkeypatch, tiny):
    import numerics.favor as nf

    true = nf.mse_positive
    monkeypatch.setattr(nf, "mse_positive", lambda x, y, m: 2.0 * true(x, y, m))  # a wrong closed form
    code, stdout, err = invoke("reproduce", "choromanski-2021", "--quick", "--json", "-", "--out", str(tmp_path / "o"),
                               "--no-progress")
    assert code == 1
    doc = json.loads(stdout)
    assert doc["reproductions"][0]["status"] == "disagrees"
    assert any(r["verdict"] == "disagrees" and "positive" in r["quantity"] for r in doc["rows"])
    assert "disagrees" in err  # says so, and why


def test_compare_row_rule():
    assert compare_row("q", 1.0, 0.1, 1.4, 0.0, "s").verdict == "agrees"  # 4 SE
    assert compare_row("q", 1.0, 0.1, 1.6, 0.0, "s").verdict == "disagrees"  # 6 SE
    assert compare_row("q", float("nan"), 0.1, 1.0, 0.0, "s").verdict == "disagrees"


def test_out_is_safe(tmp_path, monkeypatch, tiny):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    line = one_line_error(*invoke("reproduce", "ramsauer-2021", "--quick", "--out", str(mine))[::2])
    assert "--out" in line and (mine / "notes.txt").read_text() == "keep me"
    f = tmp_path / "afile"
    f.write_text("x")
    one_line_error(*invoke("reproduce", "ramsauer-2021", "--quick", "--out", str(f))[::2])
    assert f.read_text() == "x"
    monkeypatch.chdir(tmp_path)
    one_line_error(*invoke("reproduce", "ramsauer-2021", "--quick", "--out", ".", "--force")[::2])
    # a previous output is replaced (atomically), twice in a row
    prev = tmp_path / "prev"
    for _ in range(2):
        code, _, err = invoke("reproduce", "ramsauer-2021", "--quick", "--out", str(prev), "--no-progress")
        assert code == 0, err
    assert {"index.html", "ramsauer-2021.html", "report.md", "results.json"} <= {p.name for p in prev.iterdir()}
    assert not any(p.name.startswith(".prev.tverify") for p in tmp_path.iterdir())


def test_report_index_links_reproductions(tmp_path):
    from proofs_checks.output.html_report import write_html

    doc = {"results": [], "summary": {}, "mode": "default", "seed": 0, "device": "cpu", "created": "now", "command": "tverify report",
           "reproductions": [{"name": "tf-as-svm", "paper": "P", "status": "agrees", "rows": 3, "agreeing": 3, "seconds": 1.0,
                              "page": "reproduce/tf-as-svm.html"}]}
    write_html(tmp_path, doc)
    html = (tmp_path / "index.html").read_text()
    assert 'href="reproduce/tf-as-svm.html"' in html and 'href="reproduce/index.html"' in html


def test_report_hook_writes_linked_pages(tmp_path):
    from proofs_checks.output.report import write_report
    from proofs_checks.reproduce.command import for_report

    summary, writer, cleanup, bad = for_report(seed=0, device="cpu", progress=False, names=["ramsauer-2021"],
                                               sizes=TINY["ramsauer-2021"])
    try:
        doc = {"schema": 1, "tool": "tverify", "results": [], "summary": {}, "mode": "quick", "seed": 0, "device": "cpu",
               "created": "now", "command": "tverify report", "reproductions": summary}
        from proofs_checks.output.report import default_writers

        out = write_report(tmp_path / "rep", doc, extra_writers=default_writers() + [writer])
    finally:
        cleanup()
    assert not bad and summary[0]["page"] == "reproduce/ramsauer-2021.html"
    assert (out / "reproduce" / "ramsauer-2021.html").is_file() and (out / "reproduce" / "index.html").is_file()
    assert 'href="reproduce/ramsauer-2021.html"' in (out / "index.html").read_text()
    assert "Paper reproductions" in (out / "report.md").read_text()
    assert 'href="../index.html"' in (out / "reproduce" / "ramsauer-2021.html").read_text()
