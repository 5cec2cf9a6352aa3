"""``tverify show`` leads with the answer (issue 45): for every built-in claim the default view is at
most 60 lines at 100 columns, ends with the last result, holds no LaTeX command and no machine path;
``--full`` has the derivation and the rest. ``run`` ends with a totals line; an unknown id is refused
from the catalogue, fast, with "did you mean"."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.cli_helpers import invoke, one_line_error

_IDS = [e["id"] for e in json.loads((Path(__file__).resolve().parents[1] / "docs" / "catalogue.json")
                                    .read_text(encoding="utf-8"))["claims"]]
_LATEX = re.compile(r"\\[A-Za-z]+")
#: LaTeX grouping leaking into text (``e^{−β…}``, ``Γ_N^{-1}``) and a product sign beside prose
#: (``(1/(2βM))·, then``, ``(and ·((e^…``); a set's braces ``max {a, b}`` are fine
_ARTEFACT = re.compile(r"[_^]\{|\)·[,)\s]|[(\s]·\(")
_ABS = re.compile(r"(?<![\w.])/(?:home|root|tmp|work|usr|var|Users)/")


@pytest.fixture()
def cols100(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    return tmp_path


@pytest.mark.parametrize("cid", _IDS)
def test_show_summary_fits_and_reads(cols100, cid):
    code, out, err = invoke("show", cid)
    assert code == 0, err
    lines = out.rstrip("\n").splitlines()
    assert len(lines) <= 60, f"{cid}: {len(lines)} lines"
    assert all(len(ln) <= 100 for ln in lines), max(lines, key=len)
    assert any(ln.startswith("last result:") for ln in lines)
    assert not _LATEX.search(out), _LATEX.search(out)[0]
    assert not _ARTEFACT.search(out), next(ln for ln in lines if _ARTEFACT.search(ln))
    assert "\u0338" not in out.replace("∝\u0338", ""), "a combining slash off its relation"
    assert not _ABS.search(out), out


def test_show_full_has_the_rest_without_latex(cols100):
    code, out, _ = invoke("show", "icl.gamma_n_global_min", "--full")
    assert code == 0
    for word in ("derivation (", "obligations:", "assumptions", "checks:", "mutants:", "last result:",
                 "[derived]"):
        assert word in out, word
    assert not _LATEX.search(out), _LATEX.search(out)[0]
    header = next(ln for ln in out.splitlines() if ln.startswith("derivation ("))
    assert not _ABS.search(header), header
    assert "(from computed" not in header, header
    assert len(out.splitlines()) > 60


def test_show_statement_keeps_grouping(cols100):
    out = invoke("show", "icl.gamma_n_global_min")[1]
    flat = " ".join(out.split())
    assert "Γ_N = (1 + 1/N)·Λ + (1/N)·tr(Λ)·I_d" in flat
    assert "x_q ∼[iid] 𝒩(0, Λ)" in flat and "‖Γ_N^(-1)‖_F^(1/2)" in flat
    assert "Λ ≻ 0" in out  # the hypothesis, Unicode (its LaTeX was \Lambda\succ0)


def test_show_wraps_to_columns_keeping_indentation(monkeypatch, tmp_path):
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("COLUMNS", "60")
    out = invoke("show", "icl.gamma_n_global_min")[1].splitlines()
    assert all(len(ln) <= 60 for ln in out), max(out, key=len)
    i = out.index("statement:")
    assert out[i + 1].startswith("  ") and out[i + 2].startswith("    ")  # continuation lines keep their indent


def test_run_ends_with_totals_and_refuses_unknown_fast(cols100):
    code, out, err = invoke("run", "attn.softmax_simplex", "--quick", "--no-progress")
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"1 claim: 1 verified, 0 evidence, 0 refuted in [0-9.]+ s", last), last
    t = time.monotonic()
    code, out, err = invoke("run", "icl.gama_n_global_min", "--quick")
    line = one_line_error(code, err)
    assert "did you mean icl.gamma_n_global_min" in line
    assert time.monotonic() - t < 2.0
