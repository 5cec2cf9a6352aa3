"""``tverify sweep``'s document and its files: the table of rows, its exit code, the CSV, Parquet and JSON files
and the HTML page (heatmaps over two parameters, curves along one), written atomically by :func:`write_sweep`. Split
out of :mod:`proofs_checks.distributed.sweep`, which re-exports it."""

from __future__ import annotations

import csv
import html
import io
import json
import math
import time
from itertools import product
from pathlib import Path
from typing import Any




# ------------------------------------------------------------------------------------------------
# the document and its files


def _columns(rows: list[dict[str, Any]], grid_names: list[str]) -> list[str]:
    first = [*grid_names, "replicate", "seed", "status", "verdict"]
    seen: dict[str, None] = dict.fromkeys(first)
    for r in rows:
        for k in r:
            seen.setdefault(k, None)
    cols = [c for c in seen if c not in ("error", "seconds")]
    return cols + ["error", "seconds"]


def sweep_document(target: Any, grid: dict[str, list[str]], rows: list[dict[str, Any]], *, seeds: int,
                   base_seed: int, mode: str, device: str, cluster: str | None, command: str) -> dict[str, Any]:
    """The JSON of a sweep (``target``: the sweep's :class:`~proofs_checks.distributed.sweep.Target`): what ran, the accepted parameters, the table (``columns``, ``rows``)
    and a summary (rows, errors, verdict counts)."""
    verdicts: dict[str, int] = {}
    for r in rows:
        v = str(r.get("verdict")) if r.get("status") == "ok" else "error"
        verdicts[v] = verdicts.get(v, 0) + 1
    return {"tool": "tverify", "kind": "sweep", "command": command, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "target": target.name, "target_kind": target.kind, "parameters": target.accepted,
            "grid": grid, "seeds": seeds, "base_seed": base_seed, "mode": mode, "device": device,
            "cluster": cluster, "headline": list(target.headline), "curves": [list(c) for c in target.curves],
            "columns": _columns(rows, list(grid)),
            "summary": {"rows": len(rows), "errors": sum(r.get("status") != "ok" for r in rows), "verdicts": verdicts},
            "rows": rows}


def exit_code(doc: dict[str, Any]) -> int:
    """0 every row ran and passed (or ok); 1 a row errored or failed (mismatch); 3 otherwise
    inconclusive rows."""
    v = doc["summary"]["verdicts"]
    if doc["summary"]["errors"] or v.get("fail") or v.get("mismatch"):
        return 1
    if v.get("inconclusive"):
        return 3
    return 0


def csv_text(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = doc["columns"]
    w.writerow(cols)
    for r in doc["rows"]:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    return buf.getvalue()


def _parquet(doc: dict[str, Any], path: Path) -> bool:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    cols = doc["columns"]
    data = {c: [None if r.get(c) is None else str(r.get(c)) if isinstance(r.get(c), (dict, list)) else r.get(c)
                for r in doc["rows"]] for c in cols}
    try:
        pq.write_table(pa.table(data), path)
    except Exception:  # mixed types in one column: keep the CSV and JSON, skip Parquet
        return False
    return True


# --- the HTML page


def _num(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return "–" if x is None else str(x)
    if isinstance(x, (int, float)):
        return "–" if isinstance(x, float) and not math.isfinite(x) else (f"{x:.4g}" if isinstance(x, float) else str(x))
    return html.escape(str(x))


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def _mean_by(rows, keys: tuple[str, ...], col: str) -> dict[tuple, float]:
    acc: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get("status") == "ok" and _is_num(r.get(col)):
            acc.setdefault(tuple(str(r.get(k)) for k in keys), []).append(float(r[col]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _color(t: float) -> str:
    t = 0.0 if not math.isfinite(t) else min(1.0, max(0.0, t))
    r, g, b = (int(247 - t * (247 - 8)), int(251 - t * (251 - 81)), int(255 - t * (255 - 156)))
    return f"rgb({r},{g},{b})"


def _heatmap(rows, a: str, b: str, av: list[str], bv: list[str], col: str, where: str) -> str:
    vals = _mean_by(rows, (a, b), col)
    if not vals:
        return ""
    lo, hi = min(vals.values()), max(vals.values())
    head = "".join(f"<th>{html.escape(b)}={html.escape(v)}</th>" for v in bv)
    body = []
    for x in av:
        cells = []
        for y in bv:
            v = vals.get((x, y))
            t = (v - lo) / (hi - lo) if v is not None and hi > lo else 0.3
            fg = "#fff" if v is not None and t > 0.6 else "#1f2328"
            cells.append(f'<td class="num" style="background:{_color(t)};color:{fg}">{_num(v)}</td>' if v is not None
                         else '<td class="num">–</td>')
        body.append(f"<tr><th>{html.escape(a)}={html.escape(x)}</th>{''.join(cells)}</tr>")
    return (f'<div class="box"><b>{html.escape(col)}</b> <span class="dim">(mean over replicates{where}; '
            f"{_num(lo)} … {_num(hi)})</span><table class=\"heat\"><tr><th></th>{head}</tr>{''.join(body)}</table></div>")


def _verdict_map(rows, a: str, b: str | None, av: list[str], bv: list[str]) -> str:
    cls = {"pass": "ok", "ok": "ok", "fail": "bad", "mismatch": "bad", "inconclusive": "skip", "error": "err"}
    cnt: dict[tuple, dict[str, int]] = {}
    for r in rows:
        v = str(r.get("verdict")) if r.get("status") == "ok" else "error"
        k = (str(r.get(a)), str(r.get(b)) if b else "")
        cnt.setdefault(k, {})[v] = cnt.setdefault(k, {}).get(v, 0) + 1
    bv = bv if b else [""]
    head = "".join(f"<th>{html.escape(b)}={html.escape(v)}</th>" for v in bv) if b else "<th>verdicts</th>"
    body = []
    for x in av:
        cells = []
        for y in bv:
            c = cnt.get((x, y), {})
            badges = " ".join(f'<span class="badge {cls.get(k, "skip")}">{html.escape(k)} {n}</span>'
                              for k, n in sorted(c.items()))
            cells.append(f"<td>{badges or '–'}</td>")
        body.append(f"<tr><th>{html.escape(a)}={html.escape(x)}</th>{''.join(cells)}</tr>")
    return f'<div class="box"><b>verdicts</b><table><tr><th></th>{head}</tr>{"".join(body)}</table></div>'


def _svg_curves(series: list[tuple[str, list[float], list[float], bool]], xlabel: str, title: str) -> str:
    """A small inline SVG line chart: ``series`` of (label, xs, ys, dashed); log x when the x
    values are positive and span more than a factor 10."""
    pts = [(x, y) for _, xs, ys, _ in series for x, y in zip(xs, ys) if _is_num(x) and _is_num(y)]
    if len(pts) < 2:
        return ""
    W, H, L, R, T, B = 560, 300, 64, 150, 24, 40
    xs_all = [p[0] for p in pts]
    logx = min(xs_all) > 0 and max(xs_all) / min(xs_all) > 10
    fx = (lambda v: math.log10(v)) if logx else (lambda v: float(v))
    x0, x1 = fx(min(xs_all)), fx(max(xs_all))
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - abs(y0) * 0.1 - 1e-12, y1 + abs(y1) * 0.1 + 1e-12
    px = lambda v: L + (fx(v) - x0) / (x1 - x0) * (W - L - R)  # noqa: E731
    py = lambda v: H - B - (v - y0) / (y1 - y0) * (H - T - B)  # noqa: E731
    palette = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#9a6700", "#57606a", "#bf3989", "#0a7ea4"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" aria-label="{html.escape(title)}">',
             f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#d0d7de"/>']
    for v in (y0, (y0 + y1) / 2, y1):
        parts.append(f'<text x="{L - 4}" y="{py(v) + 4:.1f}" font-size="10" text-anchor="end">{_num(float(v))}</text>')
    for v in sorted(set(xs_all)):
        parts.append(f'<text x="{px(v):.1f}" y="{H - B + 14}" font-size="10" text-anchor="middle">{_num(v)}</text>')
    parts.append(f'<text x="{(L + W - R) / 2}" y="{H - 6}" font-size="11" text-anchor="middle">'
                 f'{html.escape(xlabel)}{" (log scale)" if logx else ""}</text>')
    for i, (label, xs, ys, dashed) in enumerate(series):
        c = palette[(i // 2 if any(s[3] for s in series) else i) % len(palette)]
        good = sorted((x, y) for x, y in zip(xs, ys) if _is_num(x) and _is_num(y))
        if not good:
            continue
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in good)
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        parts.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="1.6"{dash}/>')
        if not dashed:
            parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{c}"/>' for x, y in good]
        ly = T + 12 + 14 * i
        parts.append(f'<line x1="{W - R + 8}" y1="{ly - 4}" x2="{W - R + 26}" y2="{ly - 4}" stroke="{c}"{dash}/>'
                     f'<text x="{W - R + 30}" y="{ly}" font-size="10">{html.escape(label)}</text>')
    parts.append("</svg>")
    return f'<figure>{"".join(parts)}<figcaption>{html.escape(title)}</figcaption></figure>'


def _as_float(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def _curves_html(doc, rows, axes: list[str]) -> str:
    """Curves along the last varying parameter with numeric values, one series per value of the
    first other varying parameter (if any; at most 8): each pair (measured, closed form) as a solid
    and a dashed line, else the first headline number."""
    numeric = [a for a in axes if all(_as_float(v) is not None for v in doc["grid"][a])]
    if not numeric:
        return ""
    x = numeric[-1]
    others = [a for a in axes if a != x]
    gname = others[0] if others else None
    groups = doc["grid"][gname] if gname else [None]
    pairs = [tuple(p) for p in doc.get("curves") or []] or [(h, "") for h in (doc.get("headline") or [])[:1]]
    figs = []
    for meas, closed in pairs:
        series = []
        for g in groups[:8]:
            sub = [r for r in rows if g is None or str(r.get(gname)) == g]
            for col, dashed in ((meas, False), (closed, True)):
                if not col:
                    continue
                m = _mean_by(sub, (x,), col)
                xs = [float(k[0]) for k in m]
                tag = f"{gname}={g} " if g is not None else ""
                series.append((f"{tag}{col.split('.')[-1]}", xs, list(m.values()), dashed))
        figs.append(_svg_curves(series, x, f"{meas}{' (solid) and ' + closed + ' (dashed)' if closed else ''} vs {x}"))
    return "".join(figs)


def render_html(doc: dict[str, Any]) -> str:
    """The sweep page: what ran, the verdicts, heatmaps over the first two varying parameters (one
    set per value of any further ones, at most 12), curves, and the whole table."""
    from proofs_checks.output.html_report import CSS

    rows = doc["rows"]
    axes = [k for k, v in doc["grid"].items() if len(v) > 1] or list(doc["grid"])[:1]
    numeric_cols = [c for c in doc["columns"] if c not in doc["grid"] and c not in ("replicate", "seed", "seconds")
                    and any(_is_num(r.get(c)) for r in rows)]
    heads = [h for h in (doc.get("headline") or []) if h in numeric_cols] or numeric_cols[:4]
    s = doc["summary"]
    parts = [f"<h1>Sweep: {html.escape(doc['target'])}</h1>",
             f'<p class="dim">Created {html.escape(str(doc["created"]))} by <code>{html.escape(doc["command"])}</code> — '
             f'mode {html.escape(doc["mode"])}, base seed {doc["base_seed"]}, {doc["seeds"]} replicate(s), device '
             f'{html.escape(doc["device"])}, {"cluster " + html.escape(doc["cluster"]) if doc.get("cluster") else "in-process"}.</p>',
             "<p>Grid: " + "; ".join(f"<code>{html.escape(k)}</code> = {html.escape(', '.join(v))}"
                                     for k, v in doc["grid"].items()) + "</p>",
             f"<p>{s['rows']} rows, {s['errors']} errors; verdicts: "
             + ", ".join(f"{html.escape(k)} {v}" for k, v in sorted(s["verdicts"].items())) + "</p>",
             '<p class="dim">Files: <a href="results.json">results.json</a> · <a href="results.csv">results.csv</a></p>']
    a = axes[0]
    b = axes[1] if len(axes) > 1 else None
    rest = axes[2:]
    parts.append("<h2>Verdicts</h2>")
    parts.append(_verdict_map(rows, a, b, doc["grid"][a], doc["grid"][b] if b else []))
    if b:
        parts.append("<h2>Heatmaps</h2>")
        combos = list(product(*(doc["grid"][k] for k in rest)))[:12] if rest else [()]
        for combo in combos:
            sub = [r for r in rows if all(str(r.get(k)) == v for k, v in zip(rest, combo))]
            where = "".join(f", {k}={v}" for k, v in zip(rest, combo))
            for col in heads:
                parts.append(_heatmap(sub, a, b, doc["grid"][a], doc["grid"][b], col, where))
    curves = _curves_html(doc, rows, axes)
    if curves:
        parts += ["<h2>Curves</h2>", curves]
    cols = doc["columns"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f'<td class="num">{_num(r.get(c))}</td>' for c in cols) + "</tr>" for r in rows)
    parts += ["<h2>Table</h2>", f'<div class="wrap"><table><tr>{head}</tr>{body}</table></div>']
    css = CSS + "table.heat{width:auto}table.heat td{min-width:5.5em;text-align:right}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>sweep {html.escape(doc['target'])} — tverify</title><style>{css}</style></head>\n<body>\n"
            + "\n".join(p for p in parts if p) + "\n</body></html>\n")


def write_sweep(out: Path, doc: dict[str, Any], *, force: bool = False) -> Path:
    """Write ``results.json``, ``results.csv`` (``results.parquet`` if pyarrow is importable),
    ``index.html`` and the report stamp into ``out``, with the rules of ``tverify report --out``
    (:func:`proofs_checks.output.report.check_report_target`): a new folder or a previous tverify output is
    replaced, built in a temporary sibling and swapped in; anything else is refused unless ``force``."""
    from proofs_checks.output.report import build_output
    from proofs_checks.runner import _jsonable

    def fill(tmp: Path) -> None:
        (tmp / "results.json").write_text(json.dumps(_jsonable(doc), indent=1), encoding="utf-8")
        (tmp / "results.csv").write_text(csv_text(doc), encoding="utf-8")
        _parquet(doc, tmp / "results.parquet")
        (tmp / "index.html").write_text(render_html(doc), encoding="utf-8")

    stamp = {"kind": "sweep", "created": doc.get("created"), "command": doc.get("command"),
             "note": "written by tverify sweep; the next sweep may replace this folder if it holds only these files"}
    return build_output(out, fill, stamp, force=force, what="sweep", made_by="sweep")
