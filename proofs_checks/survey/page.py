"""The survey's page: ``index.md`` and ``index.html`` (one row per implementation and release, one
column per property: the verdict with the measured error / tolerance), ``matrix.png`` (property ×
implementation, coloured by verdict), ``survey.json`` and ``repro/<entry>.py`` (a minimal
reproduction beside every finding that has no upstream issue). Also the pointer ``tverify report``
follows to link the latest survey (:func:`latest_survey_link`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from proofs_checks.survey.catalogue import _PRE, HELPERS, Entry

__all__ = ["PROPERTIES", "write_pages", "latest_survey_link", "remember_latest", "POINTER"]

PROPERTIES = ["finite_output", "matches_reference", "scale_1_over_sqrt_dk", "causal_no_future_leak", "window_respected",
              "prefix_consistency", "gradients_match_reference", "batch_independence", "permutation_equivariance",
              "convex_combination_of_values", "weights_are_distributions", "stable_at_extreme_logits",
              "dtype_and_device_preserved", "runs_at_every_length"]
from proofs_checks.output.report import SURVEY_POINTER as POINTER, latest_survey_link  # noqa: E402,F401 (the report reads it)
_COLOURS = {"pass": "#4caf50", "fail": "#e53935", "by design": "#ffb300", "skip": "#e0e0e0", "not run": "#ffffff"}


def _cell(p: dict | None, by_design: bool) -> tuple[str, str]:
    """(state, text) of a property cell."""
    if p is None:
        return "not run", ""
    st = p["status"]
    state = "by design" if st == "fail" and by_design else st
    if st in ("pass", "fail") and p.get("error") is not None and p.get("tolerance") is not None:
        return state, f"{state} {p['error']:.2g}/{p['tolerance']:.2g}"
    return state, state


def finding_ref(entry: Entry, row: dict) -> dict[str, str] | None:
    """The upstream reference of a row's findings: the recorded issue or fix, else a reproduction."""
    if not row.get("findings"):
        return None
    k = entry.known or {}
    if entry.issue:
        return {"kind": "issue", "url": entry.issue["url"], "title": entry.issue.get("title", "")}
    if k.get("ref") and "bug" in k:
        return {"kind": "fixed upstream", "url": k["ref"], "title": k.get("title", ""),
                "fixed_in": k.get("fixed_in", "")}
    return {"kind": "not reported upstream", "url": f"repro/{entry.name}.py", "title": "minimal reproduction script"}


def repro_script(entry: Entry, row: dict) -> str:
    decl = ", ".join(f"{k}={v!r}" for k, v in entry.declare.items())
    return (f'"""Minimal reproduction for {entry.library} {entry.spec}: tverify check attention reports\n'
            f'{", ".join(row.get("findings") or [])} (not reported upstream as far as the survey knows).\n'
            f'Install: pip install {" ".join((entry.spec, *entry.extra))} proofs-checks; run: python {entry.name}.py"""\n'
            + _PRE + HELPERS + entry.adapter.strip() + "\n\n"
            "if __name__ == '__main__':\n"
            "    from proofs_checks.api import check_attention  # noqa: F401 (the same checks as the pytest fixture)\n"
            "    from proofs_checks.sanity.attention import run_attention\n\n"
            f"    r = run_attention(make, mode='quick'{', ' + decl if decl else ''})\n"
            "    print(r.outcome, [(p['name'], p['error'], p['tolerance']) for p in r.properties if p['status'] == 'fail'])\n")


def _read(row: dict) -> str:
    """What the checker read from the module's configuration (its ``config_read`` lines), or "–"
    (not reported: an older checker, or a row that did not run)."""
    got = row.get("config_read")
    return "; ".join(str(c) for c in got) if isinstance(got, list) and got else "–"


def render_markdown(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    lines = ["# Attention implementations survey", "",
             f"Created {doc['created']} by `{doc['command']}` (mode {doc['mode']}, seed {doc['seed']}; "
             f"{doc['seconds']:.0f} s). Each implementation runs `tverify check attention` in its own process "
             "with its own pinned install. Cells: verdict, measured error / tolerance (precision rule, see "
             "docs/check-attention.md). *by design*: an approximation failing a property of exact softmax "
             "attention by construction.", "",
             "Summary: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["summary"].items())), "",
             "![property × implementation matrix](matrix.png)", "",
             "*declared*: the flags the entry passes to `tverify check attention`; *read from the module*: what "
             "the checker read from the module's own configuration (Hugging Face configs, x-transformers and timm "
             "attributes), when it reports it.", "",
             "| implementation | release | declared | read from the module | adapter lines | verdict | findings | "
             "upstream | expected |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = r.get("reference")
        up = f"[{ref['kind']}]({ref['url']})" if ref else "–"
        why = f" ({r['why']})" if r.get("why") else ""
        lines.append(f"| {r['name']} ({r['library']}) | {r.get('installed') or r.get('version') or '–'} | "
                     f"`{r['declaration']}` | {_read(r).replace('|', '/')} | {r['adapter_lines']} | "
                     f"**{r['verdict']}**{why.replace('|', '/')} | "
                     f"{', '.join(r.get('findings') or []) or '–'} | {up} | {r.get('expected') or '–'} |")
    props = [p for p in PROPERTIES if any(c.get("name") == p for r in rows for c in r.get("properties") or [])]
    lines += ["", "## Property cells", "", "| implementation | " + " | ".join(props) + " |",
              "|---|" + "---|" * len(props)]
    for r in rows:
        by = {c["name"]: c for c in r.get("properties") or []}
        cells = [_cell(by.get(p), p in (r.get("by_design_props") or []))[1] or "–" for p in props]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    lines += ["", "## Known bugs: bug release against fixed release", ""]
    for r in rows:
        k = r.get("known") or {}
        if "bug" in k:
            lines.append(f"* **{r['name']}**: {k.get('what', '')}. Upstream: [{k.get('title')}]({k.get('ref')}). "
                         f"Documented property: {', '.join(k['bug'])}; checker: {', '.join(r.get('failed') or []) or 'nothing failed'}"
                         f" ({r.get('expected') or 'not run'}); fixed release {k.get('fixed_in')}: "
                         f"{next((x.get('expected') or x['verdict'] for x in rows if x['name'] == k.get('fixed_in')), 'not in this survey')}.")
    lines += ["", "## Adapters", ""]
    for r in rows:
        lines += [f"### {r['name']}", "", f"{r['what']}; install: {'; '.join(r.get('install') or []) or '–'}"
                  + (f"; note: {r['note']}" if r.get("note") else ""), "",
                  f"Declared: `{r['declaration']}`; read from the module: {_read(r)}.", "",
                  "```python", r["adapter"].strip(), "```", ""]
    return "\n".join(lines) + "\n"


def _figure(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rows = doc["rows"]
    props = [p for p in PROPERTIES if any(c.get("name") == p for r in rows for c in r.get("properties") or [])] or ["-"]
    states = list(_COLOURS)
    grid = []
    for r in rows:
        by = {c["name"]: c for c in r.get("properties") or []}
        grid.append([states.index(_cell(by.get(p), p in (r.get("by_design_props") or []))[0]) for p in props])
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(props), 1.2 + 0.32 * len(rows)))
    ax.imshow(grid, cmap=ListedColormap([_COLOURS[s] for s in states]), vmin=0, vmax=len(states) - 1, aspect="auto")
    ax.set_xticks(range(len(props)), props, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r['name']} [{r['verdict']}]" for r in rows], fontsize=7)
    ax.set_xticks([x - 0.5 for x in range(1, len(props))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="#9e9e9e", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    ax.legend(handles=[Patch(facecolor=_COLOURS[s], edgecolor="#9e9e9e", label=s) for s in states], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("tverify survey: property × implementation", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _html(md_text: str) -> str:
    """The survey page in the report's style (viewport meta, its style sheet, wide tables scrolling
    in their own box); a copy inside a report (``tverify report``) links back to its index."""
    from proofs_checks.output.html_base import markdown_page

    return markdown_page("Attention implementations survey — tverify", md_text)


def write_pages(tmp: Path, doc: dict[str, Any], entries: dict[str, Entry]) -> None:
    (tmp / "survey.json").write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    md_text = render_markdown(doc)
    (tmp / "index.md").write_text(md_text, encoding="utf-8")
    (tmp / "index.html").write_text(_html(md_text), encoding="utf-8")
    _figure(doc, tmp / "matrix.png")
    for r in doc["rows"]:
        ref = r.get("reference")
        if ref and ref["kind"] == "not reported upstream" and r["name"] in entries:
            (tmp / "repro").mkdir(exist_ok=True)
            (tmp / "repro" / f"{r['name']}.py").write_text(repro_script(entries[r["name"]], r), encoding="utf-8")


def remember_latest(out: Path, doc: dict[str, Any]) -> str | None:
    """Record where the latest survey page is (``tverify report`` run in this folder copies it). Returns ``None``, or
    one line saying why it was not recorded: a pointer there that tverify did not write is left as it is (a file of
    the user's was replaced, hostile pass 14a F6), and a ``.tverify`` leading into tverify's own code is not written
    into (F5). Written atomically, under a fresh temporary name (a fixed one was written through a link)."""
    from proofs_checks import owned
    from proofs_checks.store import OutputPathError, atomic_write_text

    if os.path.lexists(POINTER) and not owned.is_ours(POINTER):
        return (f"{POINTER} is not a pointer tverify recorded writing; it was left as it is, and `tverify report` here "
                "will not copy this survey (delete it to have the next survey recorded)")
    try:
        atomic_write_text(POINTER, json.dumps({"page": str((out / "index.html").resolve()), "created": doc["created"],
                                               "summary": doc["summary"]}))
        owned.remember(POINTER)
    except (OSError, OutputPathError) as exc:
        return f"the pointer to this survey page ({POINTER}) was not written: {getattr(exc, 'strerror', None) or exc}"
    return None


