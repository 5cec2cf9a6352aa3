"""The report writers: the static HTML site (index, claim pages, errata), report.md, results.json.

Two sources of documents: a real ``tverify report`` run on one registered claim (quick mode), and
a hand-built document with an erratum, an evidence claim, a crashed claim, skipped checks, a
figure and hostile strings -- so these tests do not depend on which claims are registered.
"""

from __future__ import annotations

import json
import re
import types
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import sympy as sp

from proofs_checks.output import html_report as hr
from proofs_checks.output.report import default_writers, render_markdown, write_report
from proofs_checks.runner import _derivation_steps
from theory.derivation import Derivation, Step

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = '<script>alert("x")</script> & <b>'


# ------------------------------------------------------------------------------------------------
# a hand-built results document


def _png(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_title("convergence")
    fig.savefig(path, dpi=60)
    plt.close(fig)


def _check(name, layer="numeric", status="passed", error=1e-16, tol=1e-14, **kw):
    d = {"name": name, "layer": layer, "status": status, "passed": {"passed": True, "failed": False}.get(status),
         "error": error, "tolerance": tol, "justification": kw.pop("justification", "float64 rounding (8·eps)"),
         "seeds": kw.pop("seeds", [123]), "sizes": kw.pop("sizes", {"T": 4}), "device": "cpu", "seconds": 0.01,
         "details": kw.pop("details", {}), "skip_reason": None, "figures": kw.pop("figures", [])}
    d.update(kw)
    return d


def _result(cid, kind, status, checks, **kw):
    r = {"id": cid, "kind": kind, "title": kw.pop("title", f"title of {cid}"), "status": status, "message": kw.pop("message", ""),
         "supports": kw.pop("supports", None), "seconds": 0.5, "mode": "quick", "seed": 7, "device": "cpu",
         "max_error_ratio": 0.01, "checks": checks, "stated_checks": kw.pop("stated_checks", []),
         "derivation": kw.pop("derivation", []), "derivation_error": kw.pop("derivation_error", None),
         "statement": kw.pop("statement", r"a^2+b^2=c^2"), "source": kw.pop("source", "seed 000"),
         "stated_statement": kw.pop("stated_statement", None), "notes": kw.pop("notes", None),
         "mutants": kw.pop("mutants", [{"name": "sign_flip", "kind": "sign flip", "description": "minus for plus"}])}
    r.update(kw)
    return r


def sample_doc() -> dict:
    """A results document exercising every kind of entry the writers must handle."""
    x = sp.Symbol("x")
    steps = _derivation_steps(types.SimpleNamespace(derivation=lambda: Derivation(
        "d", (Step("Start", (x + 1) ** 2), Step("Expand", sp.expand((x + 1) ** 2)), Step("A text step"),
              Step("A LaTeX string", r"\frac{1}{2}\sum_i x_i"), Step("A matrix", sp.Matrix([[x, 1], [0, x]]))), None)))[0]
    results = [
        _result("demo.identity", "identity", "verified", [_check("vs_sympy", "symbolic"), _check("vs_torch")],
                derivation=steps, statement=r"S(l)_t=\frac{e^{l_t}}{\sum_\tau e^{l_\tau}}"),
        _result("demo.erratum", "erratum", "verified",
                [_check("moments", figures=["demo.erratum__fit.png"]), _check("trained", "trained", seeds=[1, 2, 3])],
                statement=r"x^{(m)} = y + \mathrm{MLP}(\bar y)", stated_statement=r"x^{(m)} = \bar y + \mathrm{MLP}(y)",
                stated_checks=[_check("moments", status="failed", error=0.8, tol=1e-12, justification="residual must be identity",
                                      figures=["demo.erratum__fit.png"])],
                message="stated form refuted by moments; corrected form verified"),
        _result("demo.evidence", "conjecture", "evidence", [_check("capacity", "trained", status="failed", error=0.3, tol=0.1,
                                                                    figures=["demo.evidence__capacity.png"])],
                supports=False, message="the measured numbers do not support the claim"),
        _result("demo.crash", "theorem", "error",
                [{"name": "numeric", "layer": "numeric", "status": "error", "error_message": "ValueError: boom " + HOSTILE},
                 _check("gpu", "trained", status="skipped", error=None, tol=None, skip_reason="CUDA requested but absent")],
                derivation_error="ZeroDivisionError: division by zero", message="check numeric crashed",
                statement=r"x^{", title=HOSTILE, notes=HOSTILE),
    ]
    # hostile MathML in a step must be dropped, not embedded
    results[0]["derivation"].append({"text": "evil", "latex": "x", "mathml": '<math><mi>x</mi><script>alert(1)</script></math>'})
    mutants = [
        {"claim": "demo.identity", "mutant": "sign_flip", "kind": "sign flip", "description": "minus", "killed": True,
         "killed_by": "vs_sympy", "error": 2.0, "tolerance": 1e-14, "seconds": 0.1, "checks": []},
        {"claim": "demo.erratum", "mutant": "as-stated-in-notes", "kind": "erratum as stated", "description": "stated", "killed": True,
         "killed_by": "moments", "error": 0.8, "tolerance": 1e-12, "seconds": 0.1, "checks": []},
        {"claim": "demo.evidence", "mutant": "sign_flip", "kind": "sign flip", "description": "m", "killed": False,
         "killed_by": None, "error": None, "tolerance": None, "seconds": 0.1, "checks": []},
    ]
    return {"schema": 1, "tool": "tverify", "version": "test", "created": "2025-01-01T00:00:00", "command": "tverify report demo.*",
            "mode": "quick", "seed": 7, "device": "cpu",
            "summary": {"verified": 2, "evidence": 1, "error": 1}, "results": results, "mutants": mutants,
            "mutant_summary": {"total": 3, "killed": 2, "survived": ["demo.evidence:sign_flip"]}}


def build_sample_report(out: Path) -> Path:
    """Write the sample document's full report (with two real PNG figures) into ``out``."""
    figs = out.parent / (out.name + "-figs")
    figs.mkdir(parents=True, exist_ok=True)
    _png(figs / "demo.erratum__fit.png")
    _png(figs / "demo.evidence__capacity.png")
    return write_report(out, sample_doc(), figure_src=figs, extra_writers=default_writers())


# ------------------------------------------------------------------------------------------------
# link checking


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.refs.append((tag, a[key]))


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def assert_site_consistent(out: Path) -> None:
    """Every href/src of every page is local and resolves to a file (and fragment to an id)."""
    pages = sorted(out.rglob("*.html"))
    assert pages
    for page in pages:
        parsed = _parse(page)
        for tag, ref in parsed.refs:
            u = urlsplit(ref)
            assert not u.scheme and not u.netloc, f"{page.name}: external reference {ref!r} (the site must work offline)"
            target = page if not u.path else (page.parent / unquote(u.path)).resolve()
            assert target.is_file(), f"{page.relative_to(out)}: {tag} -> {ref!r} does not resolve"
            assert out.resolve() in target.resolve().parents or target.resolve().parent == out.resolve()
            if u.fragment and target.suffix == ".html":
                assert u.fragment in _parse(target).ids, f"{page.name}: {ref!r}: no element with that id"
        text = page.read_text(encoding="utf-8").lower()
        scripts = re.findall(r"<script\b[^>]*>", text)  # only the index's inline filter script: nothing loaded
        assert all(tag == "<script>" for tag in scripts), f"{page.name}: a script that loads something: {scripts}"
        assert page.name == "index.html" or not scripts, f"{page.name} contains a script element"


# ------------------------------------------------------------------------------------------------
# tests on a real run


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real") / "site"
    from tests.cli_helpers import invoke

    code, sout, serr = invoke("report", "attn.softmax_simplex", "--quick", "--out", str(out), "--no-progress")
    assert code == 0, sout + serr
    return out


def test_real_report_files(real_report):
    for f in ("index.html", "errata.html", "report.md", "results.json", "claims/attn.softmax_simplex.html"):
        assert (real_report / f).is_file(), f
    assert not list(real_report.parent.glob(".site.*")), "temporary build folder left behind"
    assert_site_consistent(real_report)


def test_real_report_json_schema(real_report):
    doc = json.loads((real_report / "results.json").read_text())
    for k in ("schema", "tool", "version", "created", "command", "mode", "seed", "device", "summary", "results",
              "mutants", "mutant_summary"):
        assert k in doc, k
    assert doc["mode"] == "quick" and [r["id"] for r in doc["results"]] == ["attn.softmax_simplex"]
    r = doc["results"][0]
    for k in ("id", "kind", "title", "status", "message", "supports", "seconds", "mode", "seed", "device",
              "max_error_ratio", "checks", "stated_checks", "derivation", "derivation_error", "statement", "source", "mutants"):
        assert k in r, k
    for c in r["checks"]:
        for k in ("name", "layer", "status", "error", "tolerance", "justification", "seeds", "sizes", "device", "seconds", "figures"):
            assert k in c, k
    assert r["derivation"] and all(set(s) >= {"text", "latex", "mathml"} for s in r["derivation"])
    assert any(s["mathml"].startswith("<math") for s in r["derivation"])
    for m in doc["mutants"]:
        assert {"claim", "mutant", "kind", "killed", "killed_by", "error", "tolerance"} <= set(m)


def test_real_claim_page_content(real_report):
    page = (real_report / "claims/attn.softmax_simplex.html").read_text()
    assert page.count("<math") >= 2  # statement + derivation steps as MathML
    assert "jacobian_vs_sympy" in page and "float64 rounding" in page
    assert "tverify run attn.softmax_simplex --seed 0 --device cpu --quick" in page
    assert "killed" in page
    index = (real_report / "index.html").read_text()
    assert 'href="claims/attn.softmax_simplex.html"' in index and 'href="errata.html"' in index and "#mutants" in index


# ------------------------------------------------------------------------------------------------
# tests on the hand-built document


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory) -> Path:
    return build_sample_report(tmp_path_factory.mktemp("sample") / "site")


def test_every_claim_has_a_page_and_links_resolve(sample_report):
    doc = json.loads((sample_report / "results.json").read_text())
    for r in doc["results"]:
        assert (sample_report / hr.claim_page(r["id"])).is_file(), r["id"]
    assert_site_consistent(sample_report)
    imgs = [ref for page in sample_report.rglob("*.html") for tag, ref in _parse(page).refs if tag == "img"]
    assert len(imgs) >= 3  # two claim pages + the errata page


def test_hostile_strings_are_escaped(sample_report):
    for page in sample_report.rglob("*.html"):
        text = page.read_text()
        if page.name == "index.html":  # its own filter script, the one script element it may hold
            text = re.sub(r"<script>\(function\(\)\{var f=document.getElementById\('filters'\).*?</script>", "", text)
        assert "<script" not in text and "alert(1)" not in text
    crash = (sample_report / "claims/demo.crash.html").read_text()
    assert "&lt;script&gt;" in crash
    assert "ZeroDivisionError" in crash and "ValueError: boom" in crash and "CUDA requested but absent" in crash
    assert '<code class="tex"' in crash and "x^{" in crash  # unconvertible LaTeX shown as source


def test_erratum_page_and_errata(sample_report):
    page = (sample_report / "claims/demo.erratum.html").read_text()
    assert "As stated in the lecture notes" in page and "Corrected" in page and "Checks on the form as stated in the lecture notes" in page
    errata = (sample_report / "errata.html").read_text()
    assert "demo.erratum" in errata and "demo.identity" not in errata
    assert "residual must be identity" in errata and errata.count("<math") >= 2
    assert 'src="figures/demo.erratum__fit.png"' in errata


def test_evidence_and_mutants(sample_report):
    page = (sample_report / "claims/demo.evidence.html").read_text()
    assert "evidence: does not support" in page and "survived" in page
    assert 'src="../figures/demo.evidence__capacity.png"' in page
    index = (sample_report / "index.html").read_text()
    assert "2/3 killed" in index and index.count("<tr>") >= 1 + 4 + 1 + 3


def test_markdown_has_errata_section():
    md = render_markdown(sample_doc())
    assert "## Errata" in md and "### Erratum demo.erratum" in md
    assert "Refuted by `moments`" in md and r"$x^{(m)} = \bar y + \mathrm{MLP}(y)$" in md
    doc = sample_doc()
    doc["results"] = [r for r in doc["results"] if r["kind"] != "erratum"]
    assert "## Errata" not in render_markdown(doc)


def test_rewrite_replaces_cleanly(tmp_path):
    out = build_sample_report(tmp_path / "site")
    doc = sample_doc()
    doc["results"] = doc["results"][:1]
    doc["mutants"] = None
    write_report(out, doc, extra_writers=default_writers())
    assert sorted(p.name for p in (out / "claims").iterdir()) == ["demo.identity.html"]
    assert not (out / "figures").exists()
    assert "not run" in (out / "claims/demo.identity.html").read_text()
    assert_site_consistent(out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_minimal_doc_never_crashes(tmp_path):
    """A document with only the keys ``tverify run --json`` guarantees (no statement, no mutants)."""
    doc = {"results": [{"id": "x.y", "status": "refuted", "kind": "theorem", "checks": [{"name": "c", "status": "failed"}]}],
           "summary": {"refuted": 1}}
    hr.write_html(tmp_path, doc)
    assert (tmp_path / "claims/x.y.html").is_file() and "Could not render" not in (tmp_path / "claims/x.y.html").read_text()


# ------------------------------------------------------------------------------------------------
# MathML conversion


@pytest.mark.parametrize("latex", [r"\frac{a}{b}", r"\sum_{t=1}^T e^{l_t}", r"\operatorname{diag}(p)-pp^\top\succeq 0",
                                   r"\left[\begin{matrix}1 & x\\ 0 & 1\end{matrix}\right]", r"\mathbb{E}[x]\approx\tfrac12"])
def test_latex_to_mathml_converts(latex):
    m = hr.latex_to_mathml(latex)
    assert m and m.startswith("<math") and 'encoding="application/x-tex"' in m
    assert hr.safe_mathml(m) == m


@pytest.mark.parametrize("latex", [r"x^{", r"\undefinedmacro{x}", r"\text{a < b & c}", "", None])
def test_latex_to_mathml_falls_back(latex):
    assert hr.latex_to_mathml(latex) is None
    html_ = hr.math_html(latex)
    assert "<math" not in html_
    if latex:
        assert html_.startswith('<code class="tex"')


def test_sympy_mathml_escapes_relations():
    x = sp.Symbol("x")
    m = hr.sympy_to_mathml(sp.Piecewise((x, x < 1), (0, True)))
    assert m is not None and hr.safe_mathml(m) == m and "&lt;" in m
    assert hr.sympy_to_mathml("not sympy") is None and hr.sympy_to_mathml(None) is None


def test_derivation_steps_never_crash():
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no")

        def _latex(self, printer):
            raise RuntimeError("no")

    x = sp.Symbol("x")
    d = Derivation("d", (Step("sympy", x**2 / 2), Step("str", r"\alpha"), Step("none"), Step("odd", Unprintable()),
                         Step("bad latex string", "x^{")), None)
    steps, err = _derivation_steps(types.SimpleNamespace(derivation=lambda: d))
    assert err is None and [s["text"] for s in steps] == ["sympy", "str", "none", "odd", "bad latex string"]
    assert steps[0]["mathml"].startswith("<math") and "<mfrac>" in steps[0]["mathml"]
    assert steps[1]["mathml"].startswith("<math") and steps[2]["mathml"] == "" and steps[4]["mathml"] == ""
    assert isinstance(steps[3]["latex"], str) and isinstance(steps[3]["mathml"], str)

    def boom():
        raise ValueError("derivation broke")

    assert _derivation_steps(types.SimpleNamespace(derivation=boom)) == ([], "ValueError: derivation broke")
    assert re.fullmatch(r"claims/[A-Za-z0-9_.-]+\.html", hr.claim_page("a/b c.d"))


def test_long_statements_split_into_lines():
    long = r"W_0+\tfrac{\alpha}{r}BA,\ B\in\mathbb R^{d\times r},\quad \left(x,\ y\right)\ne 0;\ \operatorname{rank}(BA)\le r,\ " + "x" * 60
    parts = hr.split_statement(long)
    assert parts == [r"W_0+\tfrac{\alpha}{r}BA,", r"B\in\mathbb R^{d\times r},", r"\left(x,\ y\right)\ne 0;",
                     r"\operatorname{rank}(BA)\le r,", "x" * 60]
    html_ = hr.statement_html(long)
    assert html_.count("<math") == 5 and 'class="math lines"' in html_
    assert hr.split_statement(r"a,\ b") == [r"a,\ b"]  # short: one line
    assert hr.split_statement(r"\frac{a,\ b}{c}" + "y" * 100) == [r"\frac{a,\ b}{c}" + "y" * 100]  # inside braces
    assert hr.statement_html(r"a,\ \undefinedmacro" + "z" * 100).startswith("<")  # a bad part: whole-statement fallback


def test_kill_matrix_obligations_and_assumptions_render(tmp_path):
    """A claim page shows the kill matrix (one cell per check, coloured by margin), the
    obligations with their residuals, the assumptions, and the index the per-layer summary."""
    doc = sample_doc()
    r = doc["results"][0]
    r["obligations"] = [{"name": "forms_agree", "kind": "zero", "passed": True, "residual": "0", "method": "expand", "seconds": 0.01},
                        {"name": "broken", "kind": "zero", "passed": False, "residual": "x + 1", "method": "undecided", "seconds": 0.02}]
    r["derivation"] = [{"text": "Definition", "latex": "x", "mathml": "", "how": "assumed", "role": "definition", "compact": ""},
                       {"text": "Expand", "latex": "x^2", "mathml": "", "how": "derived", "role": "", "compact": r"\Lambda\Gamma_N"}]
    r["provenance"] = {"result": "derived"}
    doc["mutants"][0]["checks"] = [
        {"check": "vs_sympy", "layer": "symbolic", "status": "failed", "rejected": True, "error": 2.0, "tolerance": 1e-14, "margin": "inf"},
        {"check": "vs_torch", "layer": "numeric", "status": "failed", "rejected": True, "error": 2.0, "tolerance": 1.0, "margin": 2.0}]
    doc["mutants"][0]["rejected_by_layer"] = {"symbolic": "inf", "numeric": 2.0}
    out = write_report(tmp_path / "site", doc, extra_writers=default_writers())
    page = (out / "claims/demo.identity.html").read_text()
    assert 'class="matrix"' in page and 'class="cell m1"' in page and "∞" in page
    assert "Obligations" in page and "x + 1" in page and "fails" in page
    assert "Assumptions" in page and "Closed form: <b>derived</b>" in page and "entry-wise expansion" in page
    index = (out / "index.html").read_text()
    assert "numeric/trained, margin ≥ 3" in index and "0/2 (0%)" in index


# ------------------------------------------------------------------------------------------------
# issue 45: fixtures from the catalogue (real statements, made-up numbers)


#: claims whose pages were hard to lay out: maths in the hypotheses (icl.function_classes), long
#: statements and many clauses (icl.gamma_n_global_min), D∖{0} (lyap.conditions), an erratum
LAYOUT_CLAIMS = ("icl.function_classes", "icl.gamma_n_global_min", "lyap.conditions", "svm.softmax_saturation",
                 "attn.softmax_simplex")


def catalogue_doc(ids=LAYOUT_CLAIMS) -> dict:
    """A results document built from the catalogue's entries (statements, hypotheses, clauses,
    derivations, notes: what a real report shows) with made-up check numbers: fast, no claim runs."""
    cat = json.loads((Path(__file__).resolve().parents[1] / "docs" / "catalogue.json").read_text(encoding="utf-8"))
    by = {e["id"]: e for e in cat["claims"]}
    results = []
    for cid in ids:
        e = by[cid]
        der = e.get("derivation") or {}
        status = "evidence" if e["kind"] in ("evidence", "conjecture") else "verified"
        checks = [{"name": ch["name"], "layer": ch["layer"], "status": "passed", "error": 1e-9 * (k + 1), "tolerance": 1e-6,
                   "justification": ch["description"], "seeds": [k], "sizes": {"d": 3, "N": 5}, "device": "cpu",
                   "seconds": 0.5} for k, ch in enumerate(e["checks"])]
        results.append({**{k: v for k, v in e.items() if k not in ("derivation", "checks")}, "status": status,
                        "supports": True if status == "evidence" else None, "checks": checks, "seconds": 1.0,
                        "mode": "quick", "seed": 0, "device": "cpu",
                        "message": "every check passed" if status == "verified" else "the numbers support the claim",
                        "derivation": der.get("steps") or [], "obligations": der.get("obligations") or [],
                        "assumptions": der.get("assumptions") or [], "legend": der.get("legend") or {},
                        "provenance": der.get("provenance") or {}})
    summary: dict = {}
    for r in results:
        summary[r["status"]] = summary.get(r["status"], 0) + 1
    return {"schema": 1, "tool": "tverify", "version": "test", "created": "2026-01-01T00:00:00",
            "command": "tverify report " + " ".join(ids), "mode": "quick", "seed": 0, "device": "cpu",
            "summary": summary, "results": results, "mutants": None}


def _survey_md() -> str:
    wide = " | ".join(f"prop_{i}" for i in range(14))
    row = " | ".join("pass 1.2e-07/4.0e-06" for _ in range(14))
    return ("# Attention implementations survey\n\nCreated 2026-01-01 by `tverify survey` (mode quick).\n\n"
            "| implementation | release | declared | verdict |\n|---|---|---|---|\n"
            + "".join(f"| impl_{i} (library) | 1.{i} | `--causal --positional rope` | **ok** |\n" for i in range(6))
            + f"\n## Property cells\n\n| implementation | {wide} |\n|---|" + "---|" * 14 + "\n"
            + "".join(f"| impl_{i} | {row} |\n" for i in range(6)))



# ------------------------------------------------------------------------------------------------
# issue 45: the index, claim pages and the survey page (the browser checks are in test_report_browser)


def test_index_one_row_per_claim_with_badges_and_filters(tmp_path):
    out = write_report(tmp_path / "site", catalogue_doc(), extra_writers=default_writers())
    index = (out / "index.html").read_text(encoding="utf-8")
    assert index.count('<tr data-group="') == 5 and 'id="f-group"' in index and 'id="f-status"' in index
    for badge in ("derived ∀ sizes", "checked", "cited", "evidence"):
        assert badge in index, badge
    assert "lecture notes" not in index.split('<table class="claims"')[1].split("</table>")[0]  # scope lives on the claim page
    page = (out / "claims" / "icl.gamma_n_global_min.html").read_text(encoding="utf-8")
    assert page.index('class="statement"') < page.index('id="verdict"') < page.index("<h2>Hypotheses</h2>")
    assert "What was established" in page and 'class="items"' in page
    lim = (out / "claims" / "icl.function_classes.html").read_text(encoding="utf-8")
    assert "FC\\_SIZES" not in lim.split("<annotation")[0] and "FC_SIZES" in lim
    lyap = (out / "claims" / "lyap.conditions.html").read_text(encoding="utf-8")
    assert "&#x029F5;" not in lyap and "&#x02216;" in lyap  # set-minus in a glyph DejaVu has
    assert_site_consistent(out)


def test_reader_notes_drop_project_bookkeeping():
    from proofs_checks.output.html_claim import reader_notes

    assert reader_notes("Audit (issue 33): the old text chained limits.") == "The old text chained limits."
    assert reader_notes("Corrected (issue 33): stated without x.") == "Corrected: stated without x."
    assert reader_notes("Evidence only. Audit (issue 33): two comparisons.") == "Evidence only. Two comparisons."


def test_survey_page_in_report_style_and_copied_into_the_report(tmp_path, monkeypatch):
    from proofs_checks.output import report as rep
    from proofs_checks.survey.page import _html

    page = _html(_survey_md())
    assert 'name="viewport"' in page and "--ok:" in page and '<div class="wrap"><table>' in page
    sv = tmp_path / "sv"
    sv.mkdir()
    (sv / "index.md").write_text(_survey_md(), encoding="utf-8")
    (sv / "index.html").write_text(page, encoding="utf-8")
    (sv / "survey.json").write_text("{}", encoding="utf-8")  # (what makes a folder a survey's page: 44b F4)
    pointer = tmp_path / "survey-latest.json"
    pointer.write_text(json.dumps({"page": str(sv / "index.html"), "created": "x", "summary": {}}))
    _as_if_tverify_wrote(sv, pointer)
    monkeypatch.setattr(rep, "SURVEY_POINTER", pointer)
    out = write_report(tmp_path / "site", catalogue_doc(("attn.softmax_simplex",)), extra_writers=default_writers())
    copied = (out / "survey" / "index.html").read_text(encoding="utf-8")
    assert 'href="../index.html"' in copied and 'name="viewport"' in copied
    assert 'href="survey/index.html"' in (out / "index.html").read_text(encoding="utf-8")
    assert 'href="../survey/index.html"' in (out / "claims" / "attn.softmax_simplex.html").read_text(encoding="utf-8")
    assert_site_consistent(out)


def _as_if_tverify_wrote(survey_folder, pointer):
    """Record the hand-made survey folder and its pointer as tverify's own outputs (the report copies only a survey
    tverify wrote, unchanged: hostile pass 14a F7)."""
    from proofs_checks import owned

    files = sorted(str(f.relative_to(survey_folder)) for f in survey_folder.rglob("*") if f.is_file())
    assert owned.remember_folder(survey_folder, owned.folder_hashes(survey_folder, files)) and owned.remember(pointer)
