"""Pages of ``tverify reproduce``: ``index.html`` and one ``<name>.html`` per reproduction (what the
paper or reference code states, our numbers with uncertainty next to the reference ones, the
verdict with its tolerance, measurements, figures, sizes, seeds, time), ``report.md`` and
``results.json``. Written through :func:`proofs_checks.output.report.write_report` (same safety rules as
``tverify report --out``: a new folder or a previous tverify output only, built aside and swapped
in atomically), or into a subfolder of a ``tverify report`` (:func:`subsite_writer`).

Self-contained HTML in the style of :mod:`proofs_checks.output.html_report` (its style sheet, no
JavaScript); every string is escaped.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from proofs_checks.output.html_report import CSS, _badge, _e, _num

__all__ = ["page_name", "render_page", "render_index", "render_markdown", "write_pages", "subsite_writer", "VERDICT_CLASS"]

VERDICT_CLASS = {"agrees": "ok", "disagrees": "bad", "error": "err", "not run": "skip"}


def page_name(name: str) -> str:
    return quote(f"{name}.html")


def _vbadge(v: Any) -> str:
    s = str(v or "?")
    return f'<span class="badge {VERDICT_CLASS.get(s, "skip")}">{_e(s)}</span>'


def _shell(title: str, body: str, nav: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n<nav>{nav}</nav>\n{body}\n</body></html>\n")


def _pm(x: Any, se: Any) -> str:
    """A value with 5 significant digits (correlations near 1 need them) and its SE with 2."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return _num(x)
    return f"{x:.5g}" + (f" ± {se:.2g}" if isinstance(se, (int, float)) and se else "")


def _command(doc: dict[str, Any], names: list[str]) -> str:
    mode = doc.get("mode") or "default"
    return (f"tverify reproduce {' '.join(names)} --seed {doc.get('seed', 0)} --device {doc.get('device') or 'cpu'}"
            + ("" if mode == "default" else f" --{mode}"))


def render_page(r: dict[str, Any], doc: dict[str, Any], out: Path | None = None) -> str:
    """One reproduction's page body."""
    b = [f"<h1>{_e(r.get('name'))}</h1>", f"<p><b>{_e(r.get('paper'))}</b></p>",
         f"<p>Reproduces: {_e(r.get('figure'))}</p>",
         f"<p>{_vbadge(r.get('status'))} <span class=dim>{_num(r.get('seconds'))} s · mode {_e(r.get('mode'))} · "
         f"seed {_e(r.get('seed'))} · device {_e(r.get('device'))}</span></p>"]
    if r.get("why"):
        cls = "errorbox" if r.get("status") in ("error", "disagrees") else ""
        b.append(f'<div class="box {cls}">{_e(r["why"])}</div>')
    if r.get("stated"):
        b.append("<h2>What the paper and the reference state</h2><table>"
                 + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in r["stated"]) + "</table>")
    b.append("<h2>Comparison</h2>")
    rows = r.get("rows") or []
    if rows:
        b.append('<p class="dim">Agreement: |ours − reference| ≤ tolerance; the tolerance is k combined standard errors '
                 "(ours: the standard error over seeds/samples of this run; the reference's: its published or measured one, "
                 "0 for a closed form) plus any stated floor. z = |difference| / combined standard error; for a one-sided "
                 "reference (a bound or an inequality) z is the signed distance past the bound in standard errors of ours "
                 "(negative: on the allowed side).</p>")
        b.append('<div class="wrap"><table><tr><th>quantity</th><th>ours</th><th>reference</th><th>reference source</th>'
                 "<th>tolerance</th><th>z</th><th>verdict</th></tr>" + "".join(
                     f"<tr><td>{_e(x.get('quantity'))}" + (f"<div class=dim>{_e(x['note'])}</div>" if x.get("note") else "")
                     + f"</td><td class=num>{_pm(x.get('ours'), x.get('ours_se'))}</td>"
                     f"<td class=num>{_pm(x.get('reference'), x.get('reference_se'))}</td><td>{_e(x.get('reference_source'))}</td>"
                     f"<td class=num>{_num(x.get('tolerance'))}<div class=dim>{_e(x.get('justification'))}</div></td>"
                     f"<td class=num>{_num(x.get('z'))}</td><td>{_vbadge(x.get('verdict'))}</td></tr>" for x in rows)
                 + "</table></div>")
    else:
        b.append('<p class="dim">No compared quantities (see the status above).</p>')
    if r.get("facts"):
        b.append("<h2>Measurements and what they mean</h2><table>"
                 + "".join(f"<tr><th>{_e(k)}</th><td>{'<pre>' + _e(v) + '</pre>' if k == 'traceback' else _e(v)}</td></tr>"
                           for k, v in r["facts"]) + "</table>")
    figs = []
    for f in r.get("figures") or []:
        if out is not None and not (out / "figures" / f).is_file():
            figs.append(f'<p class="dim">figure {_e(f)} is missing.</p>')
            continue
        src = f"figures/{quote(str(f))}"
        figs.append(f'<figure><a href="{src}"><img src="{src}" alt="{_e(f)}"></a><figcaption>{_e(f)}</figcaption></figure>')
    if figs:
        b.append("<h2>Figures</h2>" + "".join(figs))
    b.append("<h2>Sizes and seeds</h2><table>"
             + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in (r.get("sizes") or {}).items())
             + f"<tr><th>seeds</th><td>{_e(_short(r.get('seeds')))}</td></tr></table>")
    b.append("<h2>Reproduce</h2><pre>" + _e(_command(dict(doc, mode=r.get("mode"), seed=r.get("seed"),
                                                          device=r.get("device")), [str(r.get("name"))])) + "</pre>")
    return "\n".join(b)


def _short(seeds: Any) -> str:
    s = list(seeds or [])
    if len(s) > 12 and all(isinstance(x, int) for x in s) and s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}..{s[-1]} ({len(s)})"
    return ", ".join(map(str, s)) or "–"


def render_index(doc: dict[str, Any], *, back: str | None = None) -> str:
    reps = doc.get("reproductions") or []
    b = ["<h1>Reproductions</h1>",
         f'<p class="dim">Created {_e(doc.get("created"))} by <code>{_e(doc.get("command") or "tverify reproduce")}</code> — '
         f'mode {_e(doc.get("mode"))}, seed {_e(doc.get("seed"))}, device {_e(doc.get("device"))}.</p>',
         "<p>Each page: what the paper or the reference code states, our numbers with their standard errors next to "
         "the reference ones, the verdict and its tolerance, figures and time.</p>"]
    b.append("<table><tr><th>reproduction</th><th>paper</th><th>reproduces</th><th>status</th><th>rows agreeing</th>"
             "<th>s</th></tr>" + "".join(
                 f'<tr><td><a href="{page_name(str(r.get("name")))}">{_e(r.get("name"))}</a></td><td>{_e(r.get("paper"))}</td>'
                 f"<td>{_e(r.get('figure'))}</td><td>{_vbadge(r.get('status'))}</td>"
                 f"<td class=num>{sum(1 for x in r.get('rows') or [] if x.get('verdict') == 'agrees')}/{len(r.get('rows') or [])}</td>"
                 f"<td class=num>{_num(r.get('seconds'))}</td></tr>" for r in reps) + "</table>")
    b.append("<h2>Reproduce</h2><pre>" + _e(doc.get("command") or _command(doc, [str(r.get("name")) for r in reps])) + "</pre>")
    return "\n".join(b)


def _nav(back: str | None) -> str:
    nav = '<a href="index.html">Reproductions</a>'
    if back:
        nav = f'<a href="{back}index.html">Verification report</a>' + nav
    else:
        nav += '<a href="report.md">report.md</a><a href="results.json">results.json</a>'
    return nav


def write_pages(out: Path, doc: dict[str, Any], figure_src: Path | None = None, *, back: str | None = None) -> None:
    """Write ``index.html`` and ``<name>.html`` (and copy figures into ``out/figures``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if figure_src is not None and Path(figure_src).is_dir() and any(Path(figure_src).iterdir()):
        shutil.copytree(figure_src, out / "figures", dirs_exist_ok=True)
    nav = _nav(back)
    (out / "index.html").write_text(_shell("Reproductions", render_index(doc, back=back), nav), encoding="utf-8")
    for r in doc.get("reproductions") or []:
        (out / f"{r.get('name')}.html").write_text(_shell(f"{r.get('name')} — tverify reproduce", render_page(r, doc, out), nav),
                                                   encoding="utf-8")


def subsite_writer(doc: dict[str, Any], figure_src: Path | None, folder: str = "reproduce") -> Callable[[Path, dict[str, Any]], None]:
    """An extra writer for :func:`proofs_checks.output.report.write_report`: the reproduction pages in
    ``<report>/<folder>/``, linking back to the report's index."""

    def write(tmp: Path, _report_doc: dict[str, Any]) -> None:
        write_pages(Path(tmp) / folder, doc, figure_src, back="../")

    return write


def render_markdown(doc: dict[str, Any]) -> str:
    """``report.md`` of a reproduction folder: one table per reproduction."""
    lines = ["# Reproductions", "", f"Created {doc.get('created')} by `{doc.get('command') or 'tverify reproduce'}` "
             f"(mode {doc.get('mode')}, seed {doc.get('seed')}, device {doc.get('device')}).", ""]
    for r in doc.get("reproductions") or []:
        lines += [f"## {r.get('name')}: {r.get('status')}", "", f"{r.get('paper')} — {r.get('figure')}", "",
                  f"{r.get('why') or ''}", "", "| quantity | ours | reference | source | tolerance | z | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for x in r.get("rows") or []:
            cell = lambda a, s: "–" if a is None else (f"{a:.4g}" + (f" ± {s:.2g}" if s else ""))  # noqa: E731
            lines.append(f"| {x.get('quantity')} | {cell(x.get('ours'), x.get('ours_se'))} | "
                         f"{cell(x.get('reference'), x.get('reference_se'))} | {x.get('reference_source')} | "
                         f"{'–' if x.get('tolerance') is None else format(x['tolerance'], '.3g')} | "
                         f"{'–' if x.get('z') is None else format(x['z'], '.2f')} | {x.get('verdict')} |")
        for k, v in r.get("facts") or []:
            lines.append(f"- {k}: {v}")
        lines.append("")
    return "\n".join(lines)
