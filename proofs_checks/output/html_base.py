"""The HTML report's common parts: the style sheet, the page frame, escaping, badges, MathML for
a formula or a statement, claim page paths. Used by :mod:`.html_report`, :mod:`.html_claim`, the
survey and reproduction pages (one look for every page tverify writes).
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

from proofs_checks.mathml import _with_annotation, latex_to_mathml, safe_mathml

STATUS_CLASS = {"verified": "ok", "refuted": "bad", "error": "err", "skipped": "skip", "evidence": "evi",
                "incomplete": "inc", "derived": "evi", "assumed": "inc", "holds": "ok", "fails": "bad", "undecided": "inc", "inconclusive": "inc",
                "passed": "ok", "failed": "bad", "killed": "ok", "survived": "bad", "not run": "skip"}


# ------------------------------------------------------------------------------------------------
# MathML (the conversions live in proofs_checks.mathml, which the runner uses too)


_TEXT_ARG = re.compile(r"\\text\{([^{}]*)\}")


def tex_for_mathml(latex: str | None) -> str | None:
    r"""LaTeX as ``latex2mathml`` reads it best: escapes inside ``\text{}`` (``FC\_SIZES``) become the
    characters (the converter would show the backslash).

        >>> tex_for_mathml(r"\text{(FC\_SIZES: } d=2")
        '\\text{(FC_SIZES: } d=2'
    """
    if not isinstance(latex, str):
        return latex
    return _TEXT_ARG.sub(lambda m: "\\text{" + re.sub(r"\\([_&%#$])", r"\1", m[1]) + "}", latex)


#: characters latex2mathml emits that Debian's default fonts (DejaVu) lack, and the ones they have:
#: ``\setminus`` comes out as U+29F5 (a box in Chromium); U+2216 SET MINUS is in DejaVu Sans
_GLYPHS = ((re.compile(r"<mi>(?:&#x029F5;|\u29f5)</mi>", re.I), "<mo>&#x02216;</mo>"),
           (re.compile(r"&#x029F5;|\u29f5", re.I), "&#x02216;"))


def fix_glyphs(mathml: str) -> str:
    """MathML with every symbol in a font Debian ships by default (see :data:`_GLYPHS`)."""
    for pat, rep in _GLYPHS:
        mathml = pat.sub(rep, mathml)
    return mathml


def math_html(latex: str | None, mathml: str | None = None, display: str = "block") -> str:
    """HTML for a formula: validated ``mathml`` if given, else converted ``latex``, else the LaTeX
    in ``<code>``; ``''`` when there is nothing to show."""
    m = safe_mathml(mathml) if mathml else None
    if m and latex:
        m = _with_annotation(m, latex)
    m = m or latex_to_mathml(tex_for_mathml(latex), display)
    m = fix_glyphs(m) if m else m
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
        rendered = [latex_to_mathml(tex_for_mathml(x)) for x in parts]
        if all(rendered):
            return '<div class="math lines">' + "".join(f"<div>{fix_glyphs(m)}</div>" for m in rendered) + "</div>"
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
html{-webkit-text-size-adjust:100%}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1200px;padding:1.2em 1.6em;color:#1f2328;overflow-wrap:break-word}
h1{font-size:1.5em;margin:.3em 0;overflow-wrap:anywhere}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid var(--line);padding-bottom:.2em}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
nav{font-size:.9em;margin-bottom:.6em;display:flex;flex-wrap:wrap;gap:.2em 1em}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:.9em}
th,td{border:1px solid var(--line);padding:.3em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f6f8fa;overflow-wrap:normal}tr:nth-child(even) td{background:#fbfcfd}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.85em;font-weight:600;color:#fff;white-space:nowrap}
.ok{background:var(--ok)}.bad{background:var(--bad)}.err{background:var(--err)}.skip{background:var(--skip)}.evi{background:var(--evi)}
.inc{background:#bf8700}.ok2{background:#4d8f5b}.evi2{background:#6639ba}
table.matrix td.cell{text-align:center;font-variant-numeric:tabular-nums;white-space:nowrap}
td.m3{background:#1a7f37!important;color:#fff}td.m1{background:#aceebb!important}td.m0{background:#ffebe9!important}
td.mx{background:#fbefff!important}td.ms{background:#fff8c5!important}
.steptag{font-size:.75em;margin-left:.4em}
.wrap{overflow-x:auto;max-width:100%}
.dim{color:var(--dim);font-size:.9em}
.math{overflow-x:auto;overflow-y:hidden;padding:.4em 0;margin:.1em 0;max-width:100%}
.math.lines>div{margin:.35em 0}.math.left{text-align:left}
math{font-family:"Latin Modern Math","STIX Two Math","DejaVu Math TeX Gyre","Cambria Math",math,serif;font-size:1.1em}
code,pre{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.88em}
code.tex{background:#fff8c5;padding:.1em .3em;border-radius:3px;word-break:break-all}
pre{background:#f6f8fa;padding:.6em .8em;border-radius:6px;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.box{border:1px solid var(--line);border-radius:6px;padding:.6em 1em;margin:.6em 0;min-width:0}
.stated{border-left:4px solid var(--bad)}.corrected{border-left:4px solid var(--ok)}
.errorbox{border-left:4px solid var(--err);background:#fbefff}
ol.steps li{margin:.4em 0}
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top;max-width:100%}
figure img{max-width:100%;height:auto;border:1px solid var(--line)}
figcaption{font-size:.85em;color:var(--dim)}
details summary{cursor:pointer;color:var(--dim)}
.summary span{margin-right:.6em}
.ctitle{font-weight:600;margin:.2em 0 .6em}
.statement{border-left:4px solid var(--line);padding-left:.8em;margin:.6em 0}
.verdict{border:1px solid var(--line);border-left:6px solid var(--evi);border-radius:6px;padding:.6em 1em;margin:1em 0;background:#f6f8fa}
.v-ok{border-left-color:var(--ok)}.v-bad{border-left-color:var(--bad)}.v-err{border-left-color:var(--err)}.v-inc{border-left-color:#bf8700}
.vhead{display:flex;flex-wrap:wrap;gap:.3em .6em;align-items:baseline}.vhead .vstatus .badge{font-size:1em}
.vmsg{margin:.5em 0}
ul.est{padding-left:1.2em;margin:.3em 0}ul.est li{margin:.45em 0}
.by{color:var(--dim);font-size:.9em}
.cname{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.9em;font-weight:600;overflow-wrap:anywhere}
.items{border-top:1px solid var(--line)}
.item{display:grid;grid-template-columns:minmax(9em,16em) minmax(0,1fr);gap:.2em 1em;padding:.5em 0;border-bottom:1px solid var(--line)}
.iname,.ibody{min-width:0}
table.claims{table-layout:fixed}
table.claims col.c-st{width:11.5em}table.claims col.c-ev{width:10.5em}table.claims col.c-m{width:11em}
table.claims td .cid{font-weight:600}
.filters{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:center;margin:.6em 0;font-size:.9em}
@media (max-width:700px){
 body{padding:.6em .8em;font-size:14px}
 .item{grid-template-columns:minmax(0,1fr)}
 table.claims thead,table.claims colgroup{display:none}
 table.claims,table.claims tbody,table.claims tr,table.claims td{display:block;width:100%}
 table.claims tr{border:1px solid var(--line);border-radius:6px;margin:.5em 0;padding:.35em .6em}
 table.claims td{border:none;padding:.1em 0;background:none!important}
 table.claims td.st,table.claims td.ev,table.claims td.mg{display:inline-block;width:auto;margin-right:.6em}
}
"""

_TABLE = re.compile(r'(?<!<div class="wrap">)(<table\b.*?</table>)', re.S)


def _page(title: str, body: str, root: str = "", script: str = "", survey: str | None = None) -> str:
    """A page of the report: the navigation, ``body`` (every table in its own horizontal scroller,
    so a wide table never widens the page) and an optional inline ``script``."""
    sv = f'<a href="{root}{survey}">Survey</a>' if survey else ""
    nav = (f'<nav><a href="{root}index.html">Index</a><a href="{root}errata.html">Errata</a>'
           f'<a href="{root}index.html#mutants">Mutants</a>{sv}<a href="{root}report.md">report.md</a>'
           f'<a href="{root}results.json">results.json</a></nav>')
    body = _TABLE.sub(r'<div class="wrap">\1</div>', body)
    js = f"<script>{script}</script>" if script else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n{nav}\n{body}\n{js}</body></html>\n")


def markdown_page(title: str, md_text: str, nav: str = "") -> str:
    """A Markdown document (the survey's ``index.md``) as a page in the report's style: viewport
    meta, the style sheet, wide tables scrolling inside their own box; ``nav`` (HTML) on top."""
    try:
        import markdown  # type: ignore

        body = markdown.markdown(md_text, extensions=["tables", "fenced_code"])
    except Exception:  # noqa: BLE001 — no markdown package: the text, preformatted
        body = f"<pre>{_e(md_text)}</pre>"
    body = body.replace("<img ", '<img style="max-width:100%;height:auto" ')
    body = _TABLE.sub(r'<div class="wrap">\1</div>', body)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n"
            + (f"<nav>{nav}</nav>\n" if nav else "") + body + "\n</body></html>\n")


def _run_line(doc: dict[str, Any]) -> str:
    return (f'<p class="dim">Created {_e(doc.get("created"))} by <code>{_e(doc.get("command") or "tverify")}</code> '
            f'— mode {_e(doc.get("mode"))}, seed {_e(doc.get("seed"))}, device {_e(doc.get("device"))}, '
            f'{_e(doc.get("tool") or "tverify")} {_e(doc.get("version") or "")}, schema {_e(doc.get("schema"))}.</p>')


def _mutants_for(doc: dict[str, Any], claim_id: str) -> list[dict[str, Any]] | None:
    if "mutants" not in doc or doc.get("mutants") is None:
        return None
    return [m for m in doc["mutants"] if m.get("claim") == claim_id]


