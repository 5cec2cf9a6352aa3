"""Static HTML report: ``index.html``, one page per claim under ``claims/``, ``errata.html``.

The site is self-contained and opens offline: no CDN, one small inline style sheet, and on the
index a few lines of inline script for its filters (the page works without them). Mathematics is
native MathML (rendered by the browser): statements are converted from their LaTeX with
``latex2mathml``; derivation steps use the ``mathml`` the runner stored for each step (made from
the SymPy expression's LaTeX, or SymPy's presentation printer), else their LaTeX. Anything that
cannot be converted cleanly is shown as LaTeX source in ``<code>`` -- printing never breaks a
report. Every string from a results document is escaped; stored MathML is re-validated against a
whitelist of MathML elements before it is embedded.

The common parts (style sheet, page frame, badges, MathML helpers) live in :mod:`.html_base`; a
claim page's statement, verdict, hypotheses and clauses in :mod:`.html_claim`; the index in
:mod:`.html_index`.

Entry point: :func:`write_html` ``(out, doc)``, one of :func:`proofs_checks.output.report.default_writers`.
"""

from __future__ import annotations

import json
import math
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import quote

from proofs_checks.mathml import (MATHML_NS, _with_annotation, expr_mathml, latex_to_mathml, safe_mathml,  # noqa: F401
                                   sympy_to_mathml)
from proofs_checks.output.html_base import (CSS, STATUS_CLASS, _badge, _e, _err_vs_tol, _mutants_for, _num,  # noqa: F401
                                            _page, _ratio, _reproduce, _run_line, _slug, _status_badge, _worst_check,
                                            claim_page, math_html, split_statement, statement_html)
from proofs_checks.output.html_claim import claim_head_html, evidence_badge, statement_parts_html
from proofs_checks.runner import resolution_text

__all__ = [
    "latex_to_mathml",
    "sympy_to_mathml",
    "expr_mathml",
    "safe_mathml",
    "math_html",
    "split_statement",
    "statement_html",
    "claim_page",
    "write_html",
]

# ------------------------------------------------------------------------------------------------
# pages


def _checks_table(checks: list[dict[str, Any]], root: str, out: Path | None) -> str:
    rows = []
    figs = []
    for c in checks:
        note = c.get("justification") or ""
        if c.get("skip_reason"):
            note = f"skipped: {c['skip_reason']}"
        if c.get("error_message"):
            note = f"crashed: {c['error_message']}"
        seeds = ", ".join(str(s) for s in (c.get("seeds") or [])) or "–"
        sizes = ", ".join(f"{k}={v}" for k, v in (c.get("sizes") or {}).items()) or "–"
        q = _ratio(c)
        details = c.get("details") or {}
        det = ""
        if details:
            det = ("<details><summary>details</summary><pre>"
                   f"{_e(json.dumps(details, indent=1, default=str))}</pre></details>")
        rows.append(
            f"<tr><td><b>{_e(c.get('name'))}</b></td><td>{_e(c.get('layer'))}</td><td>{_badge(c.get('status'))}</td>"
            f"<td class=num>{_num(c.get('error'))}</td><td class=num>{_num(c.get('tolerance'))}</td>"
            f"<td class=num>{_num(q)}</td><td class=num title=\"{_e(c.get('resolution_units'))}\">{_e(resolution_text(c))}</td><td>{_e(note)}{det}</td><td>{_e(seeds)}</td><td>{_e(sizes)}</td>"
            f"<td>{_e(c.get('device'))}</td><td class=num>{_num(c.get('seconds'))}</td></tr>"
        )
        for f in c.get("figures") or []:
            figs.append((c.get("name"), f))
    head = ("<table><tr><th>check</th><th>layer</th><th>status</th><th>error</th><th>tolerance</th>"
            "<th>error/tol</th><th>resolution</th><th>justification</th><th>seeds</th><th>sizes</th><th>device</th><th>s</th></tr>")
    html_ = head + "".join(rows) + "</table>"
    html_ += _figures_html(figs, root, out)
    return html_


def _figures_html(figs: list[tuple[Any, Any]], root: str, out: Path | None) -> str:
    parts = []
    for name, f in figs:
        fname = str(f)
        if "/" in fname or "\\" in fname or fname.startswith("."):
            continue
        if out is not None and not (out / "figures" / fname).is_file():
            parts.append(f'<p class="dim">figure {_e(fname)} (from {_e(name)}) is missing from this report.</p>')
            continue
        src = f"{root}figures/{quote(fname)}"
        parts.append(f'<figure><a href="{src}"><img src="{src}" alt="{_e(name)}: {_e(fname)}" loading="eager"></a>'
                     f"<figcaption>{_e(name)} — {_e(fname)}</figcaption></figure>")
    return ('<div class="figures">' + "".join(parts) + "</div>") if parts else ""


def _claim_body(doc: dict[str, Any], r: dict[str, Any], out: Path | None) -> str:
    cid = str(r.get("id"))
    root = "../"
    b = [claim_head_html(r), statement_parts_html(r)]
    if r.get("derivation") or r.get("derivation_error"):
        b.append("<h2>Derivation</h2>")
        b.append(_derivation_html(r))
        if r.get("derivation_error"):
            b.append(f'<div class="box errorbox">Derivation failed: <code>{_e(r["derivation_error"])}</code></div>')
    b.append("<h2>Checks</h2>")
    if r.get("checks"):
        b.append(_checks_table(r["checks"], root, out))
    else:
        b.append('<p class="dim">No check results.</p>')
    if r.get("stated_checks"):
        b.append("<h2>Checks on the form as stated in the lecture notes</h2>")
        layers = r.get("stated_refuted_by") or {}
        said = ("refuted by the " + ", ".join(f"{k} layer ({', '.join(v)})" for k, v in layers.items())) if layers else "not refuted by any check"
        b.append(f"<p>The stated form runs against every check: it is <b>{_e(said)}</b>. A <em>failed</em> check here is "
                 "evidence against the statement as written (a crash is not).</p>")
        b.append(_checks_table(r["stated_checks"], root, out))
    b.append("<h2>Mutants</h2>")
    b.append(_claim_mutants(doc, r))
    ids = [cid]
    seeds = sorted({s for c in (r.get("checks") or []) + (r.get("stated_checks") or []) for s in (c.get("seeds") or [])}, key=str)
    b.append("<h2>Reproduce</h2>")
    rdoc = dict(doc, mode=r.get("mode") or doc.get("mode"), seed=r.get("seed", doc.get("seed")), device=r.get("device") or doc.get("device"))
    cmds = [_reproduce(rdoc, ids), _reproduce(rdoc, ids, "report") + " --out reports",
            _reproduce(rdoc, ids, "mutants"), f"tverify show {cid}"]
    b.append("<pre>" + _e("\n".join(cmds)) + "</pre>")
    b.append(f"<p class=dim>Base seed {_e(rdoc.get('seed'))}; every check derives its own seeds from it "
             f"(seeds used: {_e(', '.join(map(str, seeds)) or '–')}).</p>")
    return "\n".join(b)


def _margin(entry: dict[str, Any]) -> float | None:
    m = entry.get("margin")
    if m == "inf":
        return math.inf
    return float(m) if isinstance(m, (int, float)) and not isinstance(m, bool) else None


def _matrix_cell(entry: dict[str, Any] | None) -> str:
    """One kill-matrix cell: the margin error/tolerance, coloured: dark green ≥ 3, light green
    1–3 (rejected, thin), pink = not rejected, purple = the check crashed, amber = skipped."""
    if entry is None:
        return '<td class="cell dim">–</td>'
    st = entry.get("status")
    m = _margin(entry)
    title = _e(f"{entry.get('check')}: {st}; error {entry.get('error')} vs tolerance {entry.get('tolerance')}"
               + (f"; {entry.get('reason')}" if entry.get("reason") else ""))
    if st == "error":
        return f'<td class="cell mx" title="{title}">crash</td>'
    if st == "skipped":
        return f'<td class="cell ms" title="{title}">skip</td>'
    txt = "∞" if m == math.inf else ("–" if m is None else f"{m:.3g}")
    cls = "m0" if not entry.get("rejected") else ("m3" if m is not None and m >= 3 else "m1")
    return f'<td class="cell {cls}" title="{title}">{_e(txt)}</td>'


def _claim_mutants(doc: dict[str, Any], r: dict[str, Any]) -> str:
    """The kill matrix: mutants × checks, each cell the margin error/tolerance of that check on
    that mutant (> 1 rejects)."""
    run = _mutants_for(doc, str(r.get("id")))
    declared = {m.get("name"): m for m in (r.get("mutants") or []) if isinstance(m, dict)}
    if run is None and not declared:
        return '<p class="dim">No mutants recorded.</p>'
    checks = [(c.get("name"), c.get("layer")) for c in r.get("checks") or []]
    head = ("<tr><th>mutant</th><th>kind</th><th>description</th><th>status</th>"
            + "".join(f"<th>{_e(n)}<div class=dim>{_e(l)}</div></th>" for n, l in checks) + "</tr>")
    rows = []
    seen = set()
    for m in run or []:
        seen.add(m.get("mutant"))
        st = "killed" if m.get("killed") else "survived"
        by = {e.get("check"): e for e in m.get("checks") or []}
        raw = str(m.get("description") or "")
        desc = (math_html(raw, None, display="inline") or _e(raw)) if raw.startswith("\\") else _e(raw)
        if m.get("exempt"):
            desc += f'<div class="dim">exempt from the non-symbolic target: {_e(m["exempt"])}</div>'
        rows.append(f"<tr><td>{_e(m.get('mutant'))}</td><td>{_e(m.get('kind'))}</td><td>{desc}</td><td>{_badge(st)}</td>"
                    + "".join(_matrix_cell(by.get(n)) for n, _ in checks) + "</tr>")
    for n, d in declared.items():
        if n not in seen:
            rows.append(f"<tr><td>{_e(d.get('name'))}</td><td>{_e(d.get('kind'))}</td><td>{_e(d.get('description'))}</td>"
                        f"<td>{_badge('not run')}</td>" + "".join('<td class="cell dim">–</td>' for _ in checks) + "</tr>")
    note = ("" if run is not None else '<p class="dim">Mutants were not run in this report (<code>--no-mutants</code>).</p>')
    legend = ('<p class="dim">Each cell is the margin error/tolerance of one check on one mutant: '
              '<span class="badge ok">≥ 3</span> rejected with a clear margin, light green rejected (margin 1–3), '
              'pink not rejected by that check, purple the check crashed (not a rejection). ∞: an exact mismatch.</p>')
    return note + legend + '<div class="wrap"><table class="matrix">' + head + "".join(rows) + "</table></div>"


def _derivation_html(r: dict[str, Any]) -> str:
    """Steps (each tagged derived/assumed; a compact form first, the full expression folded away),
    the legend of symbols, the assumptions and the obligations with their residuals."""
    out = []
    steps = [s if isinstance(s, dict) else {"text": str(s)} for s in r.get("derivation") or []]
    if steps:
        items = []
        for s in steps:
            how = s.get("how") or "derived"
            tag = (_badge("assumed", (s.get("role") or how) + (f" ({s['key']})" if s.get("key") else ""))
                   if how in ("assumed", "argued") else _badge("derived"))
            full = math_html(s.get("latex"), s.get("mathml"))
            compact = s.get("compact") or ""
            long_ = len(s.get("latex") or "") > 400
            if compact:
                body = math_html(compact, None) + (f"<details><summary>entry-wise expansion</summary>{full}</details>" if full else "")
            elif long_:
                body = f"<details><summary>expression ({len(s.get('latex') or '')} characters of LaTeX)</summary>{full}</details>"
            else:
                body = full
            items.append(f"<li>{_e(s.get('text'))}<span class=steptag>{tag}</span>{body}</li>")
        out.append('<ol class="steps">' + "".join(items) + "</ol>")
    prov = r.get("provenance") or {}
    if prov:
        bad = [k for k, v in prov.items() if v != "derived"]
        out.append("<p>" + ("Closed form: <b>derived</b> (every result entry is the output of a derived step)." if not bad else
                            f"Closed form: <b>not derived</b> for {_e(', '.join(bad))} (typed in).") + "</p>")
    legend = r.get("legend") or {}
    if legend:
        out.append("<p><b>Symbols.</b></p><table>" + "".join(f"<tr><td><code>{_e(k)}</code></td><td>{_e(v)}</td></tr>"
                                                             for k, v in legend.items()) + "</table>")
    assumed = [s for s in steps if s.get("how") in ("assumed", "argued")]
    if assumed:
        out.append("<p><b>Assumptions</b> (typed-in premises, not derived here):</p><ul>"
                   + "".join(f"<li>{_e(s.get('role') or 'premise')}: {_e(s.get('text'))}</li>" for s in assumed) + "</ul>")
    obl = r.get("obligations") or []
    if obl:
        rows = "".join(f"<tr><td>{_e(o.get('name'))}</td><td>{_e(o.get('kind'))}</td>"
                       f"<td>{_badge(o.get('status') or ('holds' if o.get('passed') else 'fails'))}</td>"
                       f"<td><code>{_e(o.get('residual'))}</code></td>"
                       f"<td>{_e(o.get('method'))}" + (f"; counterexample: {_e(', '.join(f'{k} = {v}' for k, v in o['counterexample'].items()))}"
                                                      if o.get("counterexample") else "")
                       + f"</td><td class=num>{_num(o.get('seconds'))}</td></tr>" for o in obl)
        out.append("<p><b>Obligations</b> (facts the derivation must establish, evaluated in this run):</p>"
                   "<table><tr><th>obligation</th><th>kind</th><th>status</th><th>residual</th><th>decided by</th><th>s</th></tr>"
                   + rows + "</table>")
    return "\n".join(out)


def _margin_cell(r: dict[str, Any]) -> str:
    """The worst error/tolerance among the claim's checks (≤ 1 passes), with the check's name as a tip."""
    c = _worst_check(r)
    q = _ratio(c) if c else None
    if q is None:
        return '<td class="num mg">–</td>'
    txt = "∞" if q == math.inf else f"{q:.2g}"
    return (f'<td class="num mg" title="{_e(c.get("name"))}: error {_e(c.get("error"))} vs tolerance '
            f'{_e(c.get("tolerance"))}"><span class="dim">err/tol</span> {_e(txt)}</td>')


_FILTER_JS = ("(function(){var f=document.getElementById('filters'),g=document.getElementById('f-group'),"
              "s=document.getElementById('f-status'),n=document.getElementById('f-count');f.hidden=false;"
              "function go(){var k=0;document.querySelectorAll('tr[data-group]').forEach(function(r){"
              "var ok=(!g.value||r.dataset.group===g.value)&&(!s.value||r.dataset.status===s.value);"
              "r.hidden=!ok;if(ok)k++;});n.textContent=k+' shown';}g.onchange=go;s.onchange=go;go();})();")


def _filters_html(results: list[dict[str, Any]]) -> str:
    groups = sorted({str(r.get("group") or str(r.get("id")).split(".")[0]) for r in results})
    states = sorted({str(r.get("status")) for r in results})
    opt = lambda xs: '<option value="">all</option>' + "".join(f'<option value="{_e(x)}">{_e(x)}</option>' for x in xs)  # noqa: E731
    return (f'<form class="filters" id="filters" hidden><label>group <select id="f-group">{opt(groups)}</select></label>'
            f'<label>status <select id="f-status">{opt(states)}</select></label><span id="f-count" class="dim"></span></form>')


def _index_body(doc: dict[str, Any], survey: str | None = None) -> str:
    """One row per claim (status, evidence, worst margin, title); scope and evidence text are on the
    claim's page. Filters by group and status (inline script; without it every row shows)."""
    results = doc.get("results") or []
    summ = doc.get("summary") or {}
    b = ["<h1>Verification report</h1>", _run_line(doc)]
    parts = [f"{_badge(k)} {_e(v)}" for k, v in sorted(summ.items())]
    ms = doc.get("mutant_summary")
    if ms:
        parts.append(f"mutants killed {_e(ms.get('killed'))}/{_e(ms.get('total'))}")
    n_err = sum(1 for r in results if r.get("kind") == "erratum")
    parts.append(f'<a href="errata.html">{n_err} errat{"um" if n_err == 1 else "a"}</a>')
    parts.append('<a href="#mutants">mutants</a>')
    if survey:
        parts.append(f'<a href="{_e(survey)}">attention implementations survey</a>')
    b.append(f'<p class="summary">{len(results)} claims: ' + " · ".join(parts) + "</p>")
    b.append(_filters_html(results))
    rows = []
    for r in results:
        cid = str(r.get("id"))
        group = str(r.get("group") or cid.split(".")[0])
        rows.append(
            f'<tr data-group="{_e(group)}" data-status="{_e(r.get("status"))}"><td class="st">{_status_badge(r)}</td>'
            f'<td class="ev">{evidence_badge(r)}</td>{_margin_cell(r)}'
            f'<td><a class="cid" href="{quote(claim_page(cid))}">{_e(cid)}</a> <span class="dim">{_e(r.get("kind"))}</span>'
            f'<div>{_e(r.get("title"))}</div></td></tr>')
    b.append('<table class="claims"><colgroup><col class="c-st"><col class="c-ev"><col class="c-m"><col></colgroup>'
             "<thead><tr><th>status</th><th>evidence</th><th>worst margin</th><th>claim</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>")
    b.append('<p class="dim">Evidence: the weakest clause — <i>derived ∀ sizes</i> (SymPy, every size), <i>derived at '
             "sizes</i> (SymPy at fixed sizes), <i>checked</i> (numerically over stated ranges), <i>cited</i> (a named "
             "theorem), <i>evidence</i> (numbers reported, never a proof). Worst margin: the largest error/tolerance of "
             "the claim's checks (≤ 1 passes). Each claim's page has its scope, evidence and checks.</p>")
    b.append(_reproductions_html(doc))
    b.append('<h2 id="mutants">Mutants</h2>')
    if doc.get("mutants") is None:
        b.append('<p class="dim">Mutants were not run for this report.</p>')
    else:
        ms = doc.get("mutant_summary") or {}
        b.append(f"<p>{_e(ms.get('killed', sum(1 for m in doc['mutants'] if m.get('killed'))))}/"
                 f"{_e(ms.get('total', len(doc['mutants'])))} killed (every mutant runs against every check).</p>")
        b.append(_kill_summary_html(doc))
        mrows = []
        for m in doc["mutants"]:
            st = "killed" if m.get("killed") else "survived"
            mrows.append(f'<tr><td><a href="{quote(claim_page(m.get("claim")))}">{_e(m.get("claim"))}</a></td>'
                         f"<td>{_e(m.get('mutant'))}</td><td>{_e(m.get('kind'))}</td><td>{_badge(st)}</td>"
                         f"<td>{_e(m.get('killed_by') or '–')}</td><td class=num>{_num(m.get('error'))}</td>"
                         f"<td class=num>{_num(m.get('tolerance'))}</td></tr>")
        b.append("<table><tr><th>claim</th><th>mutant</th><th>kind</th><th>status</th><th>killed by</th><th>error</th>"
                 "<th>tolerance</th></tr>" + "".join(mrows) + "</table>")
    b.append("<h2>Reproduce</h2><pre>" + _e(doc.get("command") or _reproduce(doc, [str(r.get('id')) for r in results], "report"))
             + "</pre>")
    return "\n".join(b)


def _reproductions_html(doc: dict[str, Any]) -> str:
    """Links to the paper reproductions run with the report (``tverify reproduce`` at quick sizes,
    pages under ``reproduce/``); empty when none were run."""
    reps = doc.get("reproductions")
    if not reps:
        return ""
    cls = {"agrees": "ok", "disagrees": "bad", "error": "err", "not run": "skip"}
    rows = "".join(
        (f'<tr><td><a href="{quote(str(r["page"]))}">{_e(r.get("name"))}</a></td>' if r.get("page") else
         f'<tr><td>{_e(r.get("name"))} ({_e(r.get("why"))})</td>') + f'<td>{_e(r.get("paper"))}</td>'
        f'<td><span class="badge {cls.get(str(r.get("status")), "skip")}">{_e(r.get("status"))}</span></td>'
        f"<td class=num>{_e(r.get('agreeing'))}/{_e(r.get('rows'))}</td><td class=num>{_num(r.get('seconds'))}</td></tr>"
        for r in reps)
    pages = '<a href="reproduce/index.html">all pages</a>; ' if any(r.get("page") for r in reps) else ""
    return ('<h2 id="reproductions">Paper reproductions</h2><p>Headline experiments of the anchor papers at quick sizes '
            f"({pages}<code>tverify reproduce</code> runs them at default or full "
            "sizes).</p><table><tr><th>reproduction</th><th>paper</th><th>status</th><th>rows agreeing</th><th>s</th></tr>"
            + rows + "</table>")


def _best_res_cells(r: dict[str, Any]) -> str:
    """Three cells: the best resolution of the claim's symbolic, numeric and trained checks."""
    from proofs_checks.runner import best_resolution

    best = r.get("best_resolution") or best_resolution(r.get("checks") or [])
    cells = []
    for layer in ("symbolic", "numeric", "trained"):
        b = best.get(layer)
        cells.append("<td class=num>–</td>" if not b else
                     f'<td class=num title="{_e(b.get("check"))}: {_e(b.get("units"))}">'
                     f'{_e(resolution_text({"resolution": b.get("resolution"), "resolution_units": b.get("units")}))}</td>')
    return "".join(cells)


def _kill_summary_html(doc: dict[str, Any]) -> str:
    """Per claim: how many mutants each layer rejects, and how many a numeric or trained check
    rejects with margin ≥ 3 (the target)."""
    per: dict[str, dict[str, Any]] = {}
    for m in doc.get("mutants") or []:
        c = per.setdefault(str(m.get("claim")), {"total": 0, "symbolic": 0, "numeric": 0, "trained": 0, "ns3": 0, "exempt": 0})
        c["total"] += 1
        layers = m.get("rejected_by_layer") or {}
        for k in ("symbolic", "numeric", "trained"):
            c[k] += int(k in layers)
        ns = [(math.inf if v == "inf" else v) for k, v in layers.items() if k != "symbolic" and v is not None]
        c["ns3"] += int(any(v >= 3 for v in ns))
        c["exempt"] += int(bool(m.get("exempt")))
    kinds = {str(r.get("id")): r.get("kind") for r in doc.get("results") or []}
    results = {str(r.get("id")): r for r in doc.get("results") or []}
    elig = [c for cid, c in per.items() if kinds.get(cid) in ("theorem", "identity", "erratum")]
    tot = sum(c["total"] - c["exempt"] for c in elig)
    met = sum(c["ns3"] for c in elig)
    share = f"{met}/{tot} ({100 * met / tot:.0f}%)" if tot else "–"
    rows = "".join(
        f'<tr><td><a href="{quote(claim_page(cid))}">{_e(cid)}</a></td><td>{_e(kinds.get(cid))}</td><td class=num>{c["total"]}</td>'
        f'<td class=num>{c["symbolic"]}</td><td class=num>{c["numeric"]}</td><td class=num>{c["trained"]}</td>'
        f'<td class="num {"m3" if c["ns3"] + c["exempt"] == c["total"] else "m1"}">{c["ns3"]}</td><td class=num>{c["exempt"]}</td>'
        f'{_best_res_cells(results.get(cid, {}))}{_continuous_cell((doc.get("continuous") or {}).get(cid))}</tr>'
        for cid, c in per.items())
    return (f"<p>Mutants of theorem/identity/erratum claims rejected by a numeric or trained check with margin ≥ 3: "
            f"<b>{share}</b> (exempt mutants excluded).</p><table><tr><th>claim</th><th>kind</th><th>mutants</th>"
            "<th>rejected by symbolic</th><th>by numeric</th><th>by trained</th><th>numeric/trained, margin ≥ 3</th><th>exempt</th>"
            "<th>best resolution: symbolic</th><th>numeric</th><th>trained</th><th>continuous mutant: form × (1 ± 2ε)</th></tr>"
            + rows + "</table>")


def _continuous_cell(v: dict[str, Any] | None) -> str:
    """The continuous-mutant outcome of a claim: its best relative check against the form × (1 ± 2ε)."""
    if not v:
        return "<td class=dim>–</td>"
    if "skipped" in v:
        return f'<td class=dim title="{_e(v["skipped"])}">not run</td>'
    from proofs_checks.runner import outcome_words

    two, half = outcome_words(v)
    return (f'<td class="{"m3" if v.get("rejected_at_2eps") else "m1"}" title="{_e(v.get("check"))}; form × (1 ± ε/2) {half}">'
            f'{two} (ε = {float(v["epsilon"]):.2g})</td>')


def _errata_body(doc: dict[str, Any], out: Path | None) -> str:
    errata = [r for r in doc.get("results") or [] if r.get("kind") == "erratum"]
    b = ["<h1>Errata</h1>", _run_line(doc),
         "<p>Each erratum: the statement as the lecture notes write it, the checks that refute it (every check runs "
         "on it), and the corrected statement with the status of its own checks.</p>"]
    if not errata:
        b.append('<p class="dim">No erratum claims in this report.</p>')
    for r in errata:
        cid = str(r.get("id"))
        b.append(f'<h2 id="{_e(_slug(cid))}"><a href="{quote(claim_page(cid))}">{_e(cid)}</a> — {_e(r.get("title"))}</h2>')
        b.append(f"<p>{_status_badge(r)} <span class=dim>source: {_e(r.get('source') or '–')}</span> {_e(r.get('message'))}</p>")
        b.append(f'<div class="box stated"><b>As stated in the lecture notes</b>{statement_html(r.get("stated_statement"))}</div>')
        refuting = [c for c in r.get("stated_checks") or [] if c.get("status") == "failed"]
        b.append("<p><b>Refuting evidence.</b></p>")
        if refuting:
            b.append(_checks_table(refuting, "", out))
        elif r.get("stated_checks"):
            b.append('<p class="dim">No check refuted the stated form in this run:</p>' + _checks_table(r["stated_checks"], "", out))
        else:
            b.append('<p class="dim">The stated form was not checked in this run.</p>')
        b.append(f'<div class="box corrected"><b>Corrected statement</b>{statement_html(r.get("statement"))}</div>')
        checks = r.get("checks") or []
        passed = sum(1 for c in checks if c.get("status") == "passed")
        b.append(f"<p class=dim>Corrected form: {passed}/{len(checks)} checks passed; worst {_err_vs_tol(_worst_check(r))}.</p>")
    return "\n".join(b)


def _safe_render(fn, *args) -> str:
    try:
        return fn(*args)
    except Exception:  # a malformed entry gets a page with the error instead of no report
        return f'<div class="box errorbox">Could not render this page:<pre>{_e(traceback.format_exc())}</pre></div>'


def write_html(out: Path, doc: dict[str, Any]) -> None:
    """Write ``index.html``, ``errata.html`` and ``claims/<id>.html`` into ``out`` (figures are
    expected under ``out/figures``, as :func:`proofs_checks.output.report.write_report` copies them;
    a survey copied to ``out/survey/`` by the survey writer is linked from every page)."""
    out = Path(out)
    (out / "claims").mkdir(parents=True, exist_ok=True)
    survey = "survey/index.html" if (out / "survey" / "index.html").is_file() else None
    (out / "index.html").write_text(_page("Verification report", _safe_render(_index_body, doc, survey), script=_FILTER_JS,
                                          survey=survey), encoding="utf-8")
    (out / "errata.html").write_text(_page("Errata", _safe_render(_errata_body, doc, out), survey=survey), encoding="utf-8")
    for r in doc.get("results") or []:
        cid = str(r.get("id"))
        body = _safe_render(_claim_body, doc, r, out)
        (out / claim_page(cid)).write_text(_page(f"{cid} — tverify", body, root="../", survey=survey), encoding="utf-8")
