"""Static HTML report: ``index.html``, one page per claim under ``claims/``, ``errata.html``.

The site is self-contained and opens offline: no JavaScript, no CDN, one small inline style sheet.
Mathematics is native MathML (rendered by the browser): statements are converted from their LaTeX
with ``latex2mathml``; derivation steps use the ``mathml`` the runner stored for each step (made
from the SymPy expression's LaTeX, or SymPy's presentation printer), else their LaTeX. Anything
that cannot be converted cleanly is shown as LaTeX source in ``<code>`` -- printing never breaks a
report. Every string from a results document is escaped; stored MathML is re-validated against a
whitelist of MathML elements before it is embedded.

Entry point: :func:`write_html` ``(out, doc)``, one of :func:`proofs_checks.output.report.default_writers`.
"""

from __future__ import annotations

import html
import json
import math
import re
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import quote

from proofs_checks.mathml import (MATHML_NS, _with_annotation, expr_mathml, latex_to_mathml, safe_mathml,  # noqa: F401
                                   sympy_to_mathml)
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

STATUS_CLASS = {"verified": "ok", "refuted": "bad", "error": "err", "skipped": "skip", "evidence": "evi",
                "incomplete": "inc", "derived": "evi", "assumed": "inc", "holds": "ok", "fails": "bad", "undecided": "inc", "inconclusive": "inc",
                "passed": "ok", "failed": "bad", "killed": "ok", "survived": "bad", "not run": "skip"}


# ------------------------------------------------------------------------------------------------
# MathML (the conversions live in proofs_checks.mathml, which the runner uses too)


def math_html(latex: str | None, mathml: str | None = None, display: str = "block") -> str:
    """HTML for a formula: validated ``mathml`` if given, else converted ``latex``, else the LaTeX
    in ``<code>``; ``''`` when there is nothing to show."""
    m = safe_mathml(mathml) if mathml else None
    if m and latex:
        m = _with_annotation(m, latex)
    m = m or latex_to_mathml(latex, display)
    if m:
        return f'<div class="math">{m}</div>' if display == "block" else m
    if latex:
        return f'<code class="tex" title="LaTeX (not converted)">{_e(latex)}</code>'
    return ""


_SEPARATORS = (r",\qquad", r",\quad", r",\ ", r",\;", r",\,", r";\qquad", r";\quad", r";\ ")
_OPEN = re.compile(r"\\(left|begin)(?![A-Za-z])")
_CLOSE = re.compile(r"\\(right|end)(?![A-Za-z])")


def split_statement(latex: str, min_len: int = 90) -> list[str]:
    r"""Split a long statement at its top-level list separators (``,\ ``, ``;\quad``, ...), so
    that each part gets its own display line (MathML has no automatic line breaking). Short
    statements, and separators inside braces, ``\left..\right`` or environments, are kept.

    >>> split_statement(r"a=1,\ b=\frac{1,\ 2}{3},\quad \left(c,\ d\right)", min_len=0)
    ['a=1,', 'b=\\frac{1,\\ 2}{3},', '\\left(c,\\ d\\right)']
    >>> split_statement(r"a=1,\ b=2")
    ['a=1,\\ b=2']
    """
    if not isinstance(latex, str) or len(latex) < min_len:
        return [latex]
    parts, depth, start, i, n = [], 0, 0, 0, len(latex)
    while i < n:
        ch = latex[i]
        if ch == "\\":
            m = _OPEN.match(latex, i) or _CLOSE.match(latex, i)
            if m:
                depth += 1 if m.group(1) in ("left", "begin") else -1
                i = m.end()
                continue
            i += 2  # skip the escaped character or the first letter of a command
            while i < n and latex[i - 1].isalpha() and latex[i].isalpha():
                i += 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch in ",;" and depth == 0:
            sep = next((x for x in _SEPARATORS if latex.startswith(x, i)
                        and not latex[i + len(x) : i + len(x) + 1].isalpha() or x.endswith(" ") and latex.startswith(x, i)), None)
            if sep:
                parts.append(latex[start : i + 1].strip())
                i += len(sep)
                start = i
                continue
        i += 1
    parts.append(latex[start:].strip())
    parts = [x for x in parts if x]
    return parts if len(parts) > 1 and depth == 0 else [latex]


def statement_html(latex: str | None) -> str:
    """A statement as MathML, one display line per top-level part when it is long (falls back to
    the whole statement, then to its LaTeX source)."""
    parts = split_statement(latex) if latex else [latex]
    if len(parts) > 1:
        rendered = [latex_to_mathml(x) for x in parts]
        if all(rendered):
            return '<div class="math lines">' + "".join(f"<div>{m}</div>" for m in rendered) + "</div>"
    return math_html(latex)


# ------------------------------------------------------------------------------------------------
# helpers


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: Any) -> str:
    if x is None or isinstance(x, bool):
        return "–" if x is None else str(x)
    if isinstance(x, (int, float)):
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return "–"
        return f"{x:.3g}"
    return _e(x)


def _badge(status: Any, text: str | None = None) -> str:
    s = str(status or "?")
    return f'<span class="badge {STATUS_CLASS.get(s, "skip")}">{_e(text or s)}</span>'


def _status_badge(r: dict[str, Any]) -> str:
    st = r.get("status")
    if st == "evidence":
        sup = r.get("supports")
        txt = "evidence: supports" if sup else ("evidence: does not support" if sup is False else "evidence")
        return _badge("evidence", txt)
    return _badge(st)


def _slug(claim_id: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(claim_id)) or "claim"


def claim_page(claim_id: Any) -> str:
    """Path of a claim's page relative to the report root."""
    return f"claims/{_slug(claim_id)}.html"


def _ratio(c: dict[str, Any]) -> float | None:
    e, t = c.get("error"), c.get("tolerance")
    if not isinstance(e, (int, float)) or not isinstance(t, (int, float)) or isinstance(e, bool):
        return None
    if t > 0:
        return e / t
    return 0.0 if e == 0 else math.inf


def _worst_check(r: dict[str, Any]) -> dict[str, Any] | None:
    best, best_ratio = None, -1.0
    for c in r.get("checks") or []:
        q = _ratio(c)
        if q is not None and not math.isnan(q) and q > best_ratio:
            best, best_ratio = c, q
    return best


def _err_vs_tol(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    q = _ratio(c)
    rel = "≤" if c.get("status") == "passed" or (q is not None and q <= 1) else ">"
    return f'{_num(c.get("error"))} {rel} {_num(c.get("tolerance"))} <span class="dim">({_e(c.get("name"))})</span>'


def _reproduce(doc: dict[str, Any], ids: list[str], verb: str = "run") -> str:
    mode = doc.get("mode") or "default"
    flag = "" if mode == "default" else f" --{mode}"
    q = " ".join("'" + i.replace("'", "") + "'" if any(ch in i for ch in "*?[ ") else i for i in ids)
    return f"tverify {verb} {q} --seed {doc.get('seed', 0)} --device {doc.get('device') or 'cpu'}{flag}"


CSS = """
:root{--ok:#1a7f37;--bad:#cf222e;--err:#8250df;--skip:#9a6700;--evi:#0969da;--line:#d0d7de;--dim:#57606a}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1200px;padding:1.2em 1.6em;color:#1f2328}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid var(--line);padding-bottom:.2em}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
nav{font-size:.9em;margin-bottom:.6em}nav a{margin-right:1em}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:.9em}
th,td{border:1px solid var(--line);padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}tr:nth-child(even) td{background:#fbfcfd}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.85em;font-weight:600;color:#fff;white-space:nowrap}
.ok{background:var(--ok)}.bad{background:var(--bad)}.err{background:var(--err)}.skip{background:var(--skip)}.evi{background:var(--evi)}
.inc{background:#bf8700}
table.matrix td.cell{text-align:center;font-variant-numeric:tabular-nums;white-space:nowrap}
td.m3{background:#1a7f37!important;color:#fff}td.m1{background:#aceebb!important}td.m0{background:#ffebe9!important}
td.mx{background:#fbefff!important}td.ms{background:#fff8c5!important}
.steptag{font-size:.75em;margin-left:.4em}
.wrap{overflow-x:auto;max-width:100%}
.dim{color:var(--dim);font-size:.9em}
.math{overflow-x:auto;overflow-y:hidden;padding:.4em 0;margin:.1em 0}
.math.lines>div{margin:.35em 0}
math{font-family:"Latin Modern Math","STIX Two Math","Cambria Math",math,serif;font-size:1.1em}
code,pre{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.88em}
code.tex{background:#fff8c5;padding:.1em .3em;border-radius:3px;word-break:break-all}
pre{background:#f6f8fa;padding:.6em .8em;border-radius:6px;overflow-x:auto;white-space:pre-wrap}
.box{border:1px solid var(--line);border-radius:6px;padding:.6em 1em;margin:.6em 0}
.stated{border-left:4px solid var(--bad)}.corrected{border-left:4px solid var(--ok)}
.errorbox{border-left:4px solid var(--err);background:#fbefff}
ol.steps li{margin:.4em 0}
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top}
figure img{max-width:100%;height:auto;border:1px solid var(--line)}
figcaption{font-size:.85em;color:var(--dim)}
details summary{cursor:pointer;color:var(--dim)}
.summary span{margin-right:.6em}
"""


def _page(title: str, body: str, root: str = "") -> str:
    nav = (f'<nav><a href="{root}index.html">Index</a><a href="{root}errata.html">Errata</a>'
           f'<a href="{root}index.html#mutants">Mutants</a><a href="{root}report.md">report.md</a>'
           f'<a href="{root}results.json">results.json</a></nav>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n{nav}\n{body}\n</body></html>\n")


def _run_line(doc: dict[str, Any]) -> str:
    return (f'<p class="dim">Created {_e(doc.get("created"))} by <code>{_e(doc.get("command") or "tverify")}</code> '
            f'— mode {_e(doc.get("mode"))}, seed {_e(doc.get("seed"))}, device {_e(doc.get("device"))}, '
            f'{_e(doc.get("tool") or "tverify")} {_e(doc.get("version") or "")}, schema {_e(doc.get("schema"))}.</p>')


def _mutants_for(doc: dict[str, Any], claim_id: str) -> list[dict[str, Any]] | None:
    if "mutants" not in doc or doc.get("mutants") is None:
        return None
    return [m for m in doc["mutants"] if m.get("claim") == claim_id]


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
    b = [f"<h1>{_e(cid)}</h1>", f"<p><b>{_e(r.get('title'))}</b></p>",
         f"<p>{_status_badge(r)} <span class=dim>{_e(r.get('kind'))} · source: {_e(r.get('source') or '–')} · "
         f"{_num(r.get('seconds'))} s · device {_e(r.get('device'))} · mode {_e(r.get('mode'))} · seed {_e(r.get('seed'))}</span></p>"]
    if r.get("message"):
        cls = "errorbox" if r.get("status") == "error" else ""
        b.append(f'<div class="box {cls}">{_e(r["message"])}</div>')
    if r.get("kind") == "erratum":
        b.append("<h2>Statement</h2>")
        b.append(f'<div class="box stated"><b>As stated in the lecture notes</b>{statement_html(r.get("stated_statement"))}</div>')
        b.append(f'<div class="box corrected"><b>Corrected</b>{statement_html(r.get("statement"))}</div>')
    else:
        b.append("<h2>Statement</h2>")
        b.append(statement_html(r.get("statement")) or '<p class="dim">(no statement recorded)</p>')
    b.append(_statement_parts_html(r))
    if r.get("notes"):
        b.append(f"<p><b>Notes.</b> {_e(r['notes'])}</p>")
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


def _statement_parts_html(r: dict[str, Any]) -> str:
    """Hypotheses (each with the counterexample that shows it necessary, or "not shown necessary")
    and clauses (each with its evidence and scope) of a claim's result."""
    b = []
    hyps = r.get("hypotheses") or []
    if hyps:
        rows = []
        for h in hyps:
            cx = h.get("counterexample")
            if h.get("necessary") and cx:
                inst = ", ".join(f"{k} = {v}" for k, v in (cx.get("instance") or {}).items())
                why = f"dropping it breaks <i>{_e(cx.get('clause'))}</i>: {_e(inst)}: {_e(cx.get('shows'))}"
            else:
                why = '<span class="dim">not shown necessary</span>' + (
                    f" ({_e(h.get('why_not_shown'))})" if h.get("why_not_shown") else "")
            rows.append(f"<tr><td>{_e(h.get('name'))}</td><td>{math_html(h.get('latex'), display='inline')}"
                        f"{'<div class=dim>' + _e(h['text']) + '</div>' if h.get('text') else ''}</td><td>{why}</td></tr>")
        b.append("<h3>Hypotheses</h3><table><tr><th>hypothesis</th><th>statement</th><th>necessary?</th></tr>"
                 + "".join(rows) + "</table>")
    elif r.get("no_hypotheses"):
        b.append(f"<p><b>Hypotheses:</b> none ({_e(r['no_hypotheses'])})</p>")
    clauses = r.get("clauses") or []
    if clauses:
        rows = [f"<tr><td>{_e(c.get('name'))}</td><td>{math_html(c.get('latex'), display='inline')}</td>"
                f"<td>{_e(c.get('evidence_text') or c.get('evidence'))}</td><td>{_e(', '.join(c.get('checks') or []))}</td></tr>"
                for c in clauses]
        b.append("<h3>Clauses</h3><table><tr><th>clause</th><th>statement</th><th>evidence and scope</th><th>by</th></tr>"
                 + "".join(rows) + "</table>")
    if r.get("evidence_summary"):
        b.append(f"<p><b>Evidence:</b> {_e(r['evidence_summary'])}</p>")
    if r.get("fixed_sizes"):
        b.append(f"<p><b>Derivation at fixed sizes:</b> {_e(r['fixed_sizes'])}</p>")
    if r.get("assumptions"):
        b.append("<p><b>Assumptions</b> (taken, not derived; inherited ones included):</p><ul>"
                 + "".join(f"<li>{_e(a)}</li>" for a in r["assumptions"]) + "</ul>")
    return "".join(b)


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


def _index_body(doc: dict[str, Any]) -> str:
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
    b.append(f'<p class="summary">{len(results)} claims: ' + " · ".join(parts) + "</p>")
    rows = []
    for r in results:
        cid = str(r.get("id"))
        rows.append(
            f'<tr><td><a href="{quote(claim_page(cid))}">{_e(cid)}</a><div class=dim>{_e(r.get("title"))}</div></td>'
            f"<td>{_e(r.get('kind'))}</td><td>{_e(r.get('source'))}</td><td>{_status_badge(r)}"
            f"<div class=dim>{_e(r.get('evidence_summary') or '')}</div></td>"
            f"<td class=num>{_err_vs_tol(_worst_check(r))}</td>{_best_res_cells(r)}<td class=num>{_num(r.get('seconds'))}</td>"
            f"<td>{_e(r.get('device'))}</td></tr>")
    b.append("<table><tr><th>claim</th><th>kind</th><th>source</th><th>status</th><th>max error vs tolerance</th>"
             "<th>best resolution: symbolic</th><th>numeric</th><th>trained</th><th>s</th><th>device</th></tr>" + "".join(rows) + "</table>")
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
        f'<tr><td><a href="{quote(str(r.get("page") or ""))}">{_e(r.get("name"))}</a></td><td>{_e(r.get("paper"))}</td>'
        f'<td><span class="badge {cls.get(str(r.get("status")), "skip")}">{_e(r.get("status"))}</span></td>'
        f"<td class=num>{_e(r.get('agreeing'))}/{_e(r.get('rows'))}</td><td class=num>{_num(r.get('seconds'))}</td></tr>"
        for r in reps)
    return ('<h2 id="reproductions">Paper reproductions</h2><p>Headline experiments of the anchor papers at quick sizes '
            '(<a href="reproduce/index.html">all pages</a>; <code>tverify reproduce</code> runs them at default or full '
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
    expected under ``out/figures``, as :func:`proofs_checks.output.report.write_report` copies them)."""
    out = Path(out)
    (out / "claims").mkdir(parents=True, exist_ok=True)
    (out / "index.html").write_text(_page("Verification report", _safe_render(_index_body, doc)), encoding="utf-8")
    (out / "errata.html").write_text(_page("Errata", _safe_render(_errata_body, doc, out)), encoding="utf-8")
    for r in doc.get("results") or []:
        cid = str(r.get("id"))
        body = _safe_render(_claim_body, doc, r, out)
        (out / claim_page(cid)).write_text(_page(f"{cid} — tverify", body, root="../"), encoding="utf-8")
