"""Report writers: ``results.json`` (machine-readable) and ``report.md`` (human-readable).

Reports are written atomically: everything is built in a temporary sibling folder which then
replaces the output folder in one rename, so a crash never leaves half a report.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from proofs_checks.registry import Claim
from proofs_checks.runner import ClaimResult, MutantResult

__all__ = ["results_document", "write_report", "render_markdown", "default_writers", "SCHEMA_VERSION"]


def default_writers() -> list[Callable[[Path, dict[str, Any]], None]]:
    """Extra writers run by ``tverify report`` into the report folder (besides Markdown/JSON):
    the static HTML site (``index.html``, ``claims/<id>.html``, ``errata.html``)."""
    from proofs_checks.html_report import write_html

    return [write_html]

SCHEMA_VERSION = 1


def results_document(
    results: list[ClaimResult],
    *,
    claims: dict[str, Claim] | None = None,
    mutants: list[MutantResult] | None = None,
    command: str = "",
    mode: str = "default",
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, Any]:
    """The JSON object written by ``--json`` and ``results.json``.

    ``results`` holds one object per claim with at least ``id``, ``status``, ``kind`` and its checks'
    measured numbers; ``summary`` counts statuses."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("transformer-theory-verify")
    except PackageNotFoundError:  # pragma: no cover
        ver = "unknown"
    summary: dict[str, int] = {}
    items = []
    for r in results:
        summary[r.status] = summary.get(r.status, 0) + 1
        j = r.to_json()
        if claims and r.id in claims:
            c = claims[r.id]
            j.update(
                statement=c.statement,
                source=c.source,
                stated_statement=c.stated_statement or None,
                notes=c.notes or None,
                mutants=[{"name": m.name, "kind": m.kind, "description": m.description} for m in c.all_mutants()],
            )
        items.append(j)
    doc: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "tool": "tverify",
        "version": ver,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "mode": mode,
        "seed": seed,
        "device": device,
        "summary": summary,
        "results": items,
    }
    if mutants is not None:
        doc["mutants"] = [m.to_json() for m in mutants]
        doc["mutant_summary"] = {
            "total": len(mutants),
            "killed": sum(m.killed for m in mutants),
            "survived": [f"{m.claim}:{m.mutant}" for m in mutants if not m.killed],
        }
    return doc


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isnan(x):
            return "–"
        return f"{x:.3g}"
    return str(x)


def render_markdown(doc: dict[str, Any]) -> str:
    """Markdown rendering of a results document (summary table, then one section per claim)."""
    lines = [
        "# Verification report",
        "",
        f"Created {doc['created']} by `{doc['command'] or 'tverify'}` "
        f"(mode {doc['mode']}, seed {doc['seed']}, device {doc['device']}).",
        "",
        "Summary: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["summary"].items())),
        "",
        "| claim | kind | status | max error/tol | seconds |",
        "|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        lines.append(f"| [{r['id']}](#{r['id'].replace('.', '')}) | {r['kind']} | **{r['status']}** | {_fmt(r.get('max_error_ratio'))} | {r['seconds']:.2f} |")
    for r in doc["results"]:
        lines += ["", f"## {r['id']}", "", f"**{r['title']}** ({r['kind']}; {r.get('source') or ''})", ""]
        if r.get("statement"):
            lines += [f"Statement: ${r['statement']}$", ""]
        if r.get("stated_statement"):
            lines += [f"As stated in the seed: ${r['stated_statement']}$", ""]
        lines += [f"Status: **{r['status']}** {r.get('message') or ''}", ""]
        if r.get("derivation"):
            lines.append("Derivation:")
            lines.append("")
            for i, s in enumerate(r["derivation"], 1):
                lines.append(f"{i}. {s['text']}" + (f": $${s['latex']}$$" if s["latex"] else ""))
            lines.append("")
        if r.get("derivation_error"):
            lines += [f"Derivation error: `{r['derivation_error']}`", ""]
        for label, key in (("Checks", "checks"), ("Checks on the seed's stated form", "stated_checks")):
            if not r.get(key):
                continue
            lines += [f"{label}:", "", "| check | layer | status | error | tolerance | justification | seeds | sizes | s |", "|---|---|---|---|---|---|---|---|---|"]
            for c in r[key]:
                just = (c.get("justification") or c.get("skip_reason") or c.get("error_message") or "").replace("|", "\\|")
                lines.append(
                    f"| {c['name']} | {c['layer']} | {c['status']} | {_fmt(c.get('error'))} | {_fmt(c.get('tolerance'))} | {just} | "
                    f"{','.join(map(str, c.get('seeds') or [])) or '–'} | {json.dumps(c.get('sizes') or {})} | {_fmt(c.get('seconds'))} |"
                )
            lines.append("")
            for c in r[key]:
                for fig in c.get("figures") or []:
                    lines.append(f"![{c['name']}](figures/{fig})")
        if r.get("mutants"):
            lines.append("Mutants: " + "; ".join(f"`{m['name']}` ({m['kind']})" for m in r["mutants"]))
            lines.append("")
    lines += _markdown_errata(doc)
    if doc.get("mutants") is not None:
        ms = doc.get("mutant_summary") or {"killed": sum(bool(m.get("killed")) for m in doc["mutants"]), "total": len(doc["mutants"])}
        lines += ["", "## Mutants", "", f"{ms['killed']}/{ms['total']} killed.", "", "| claim | mutant | kind | killed by | error | tolerance |", "|---|---|---|---|---|---|"]
        for m in doc["mutants"]:
            lines.append(f"| {m['claim']} | {m['mutant']} | {m['kind']} | {m['killed_by'] or '**survived**'} | {_fmt(m['error'])} | {_fmt(m['tolerance'])} |")
    lines.append("")
    reproduce = f"tverify run {' '.join(r['id'] for r in doc['results'])} --seed {doc['seed']} --device {doc['device']}"
    lines += ["## Reproduce", "", "```", reproduce + ("" if doc["mode"] == "default" else f" --{doc['mode']}"), "```", ""]
    return "\n".join(lines)


def _markdown_errata(doc: dict[str, Any]) -> list[str]:
    """The errata section: each seed erratum as stated, the refuting evidence, the corrected form."""
    errata = [r for r in doc["results"] if r.get("kind") == "erratum"]
    if not errata:
        return []
    lines = ["", "## Errata", ""]
    for r in errata:
        lines += [f"### Erratum {r['id']}", "", f"{r.get('title') or ''} ({r.get('source') or ''}); status **{r['status']}**.", ""]
        lines += [f"- As stated in the seed: ${r.get('stated_statement') or '?'}$"]
        refuting = [c for c in r.get("stated_checks") or [] if c.get("status") == "failed"]
        if refuting:
            for c in refuting:
                lines.append(f"- Refuted by `{c['name']}` ({c.get('layer')}): error {_fmt(c.get('error'))} > tolerance "
                             f"{_fmt(c.get('tolerance'))} ({c.get('justification') or ''})")
        else:
            lines.append("- Refuting evidence: none in this run (the stated form was not refuted)")
        lines += [f"- Corrected: ${r.get('statement') or '?'}$", ""]
    return lines


def write_report(out: Path, doc: dict[str, Any], figure_src: Path | None = None,
                 extra_writers: list[Callable[[Path, dict[str, Any]], None]] | None = None) -> Path:
    """Write ``results.json``, ``report.md`` (and figures, and any extra writers' files) into
    ``out`` atomically: build in a temporary sibling, then swap it into place."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "results.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        (tmp / "report.md").write_text(render_markdown(doc), encoding="utf-8")
        if figure_src is not None and Path(figure_src).exists():
            shutil.copytree(figure_src, tmp / "figures", dirs_exist_ok=True)
        for w in extra_writers or []:
            w(tmp, doc)
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
