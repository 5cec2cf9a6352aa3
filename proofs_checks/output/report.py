"""Report writers: ``results.json`` (machine-readable) and ``report.md`` (human-readable), plus the
HTML site of :mod:`proofs_checks.output.html_report`.

Nothing is lost to a report:

* ``--out DIR`` writes a new folder, or replaces a folder that holds a previous tverify output
  exactly as it was written: this user's record of written outputs (:mod:`proofs_checks.owned`,
  kept outside the folder, written at write time) lists the folder with the SHA-256 of every file
  in it, and it holds no other file, each unchanged. The folder's stamp :data:`MARKER` (the same
  list, for people) proves nothing on its own. Anything else (a folder with other files, a copied
  or moved report, a hand-made stamp, a file, a link) is refused unless ``force`` (a link is then
  replaced itself, never followed); the current folder, a folder containing it, the home folder
  and ``/`` are refused even then.
  :func:`check_report_target` applies these rules; the CLI calls it before any claim runs, and
  :func:`write_report` again just before the swap.
* The report is built in a temporary sibling folder and swapped into place with two renames (the
  old report is restored if the second fails), so a crash never leaves half a report.
* Folders are 0755 and files 0644 whatever the umask or ``mkdtemp``'s 0700: a report is for
  reading.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from proofs_checks.runner import resolution_text  # noqa: F401 (re-exported: tables use it)
from proofs_checks.store import OutputPathError, name_problem, nearest_existing, writable_dir_problem

if TYPE_CHECKING:  # pragma: no cover
    from proofs_checks.registry import Claim
    from proofs_checks.runner import ClaimResult, MutantResult

__all__ = ["results_document", "write_report", "render_markdown", "default_writers", "check_report_target",
           "ReportTargetError", "MARKER", "SCHEMA_VERSION"]


def default_writers() -> list[Callable[[Path, dict[str, Any]], None]]:
    """Extra writers run by ``tverify report`` into the report folder (besides Markdown/JSON):
    the static HTML site (``index.html``, ``claims/<id>.html``, ``errata.html``)."""
    from proofs_checks.output.html_report import write_html

    return [copy_survey, write_html]


def copy_survey(out: Path, doc: dict[str, Any]) -> None:
    """The latest ``tverify survey`` page (see :data:`SURVEY_POINTER`), copied into the report as
    ``survey/`` and rendered in the report's style with a link back to the index (the index links
    it). Nothing when no survey was run here."""
    src = _latest_survey_folder()
    if src is None:
        return
    try:
        md = (src / "index.md").read_text(encoding="utf-8")
    except (OSError, ValueError):
        return
    from proofs_checks.output.html_base import markdown_page

    dst = Path(out) / "survey"
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("matrix.png", "survey.json", "index.md"):
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    if (src / "repro").is_dir():
        shutil.copytree(src / "repro", dst / "repro", symlinks=True, dirs_exist_ok=True)
    nav = '<a href="../index.html">← Verification report</a><a href="../errata.html">Errata</a>'
    (dst / "index.html").write_text(markdown_page("Attention implementations survey — tverify", md, nav), encoding="utf-8")

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
        doc["kill_summary"] = mutant_kill_summary(mutants, {r.id: r.kind for r in results})
        if doc["kill_summary"] is not None:  # best resolution per layer per claim, beside the margins
            from proofs_checks.runner import best_resolution

            doc["kill_summary"]["best_resolution"] = {r.id: best_resolution([c.to_json() for c in r.checks])
                                                      for r in results}
    return doc


def mutant_kill_summary(mutants: list[MutantResult], kinds: dict[str, str] | None = None) -> dict[str, Any] | None:
    """:func:`proofs_checks.runner.kill_summary` of the kill matrix (``None`` if the runner has none)."""
    from proofs_checks import runner

    fn = getattr(runner, "kill_summary", None)
    return fn(mutants, kinds) if fn is not None else None


def margin_text(v: Any) -> str:
    """A rejection margin (error/tolerance) for tables: ``inf`` for an exact mismatch."""
    if v is None:
        return "–"
    if isinstance(v, str):
        return "∞" if v == "inf" else v
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if isinstance(v, float) and math.isnan(v):
        return "NaN output"
    return f"{float(v):.3g}"


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isnan(x):
            return "–"
        return f"{x:.3g}"
    return str(x)

def _markdown_obligations(obligations: list[dict[str, Any]]) -> list[str]:
    """The obligations table of one claim: name, kind, status (holds / fails / undecided), the
    method that decided it, the residual, and the counterexample of a false one."""
    if not obligations:
        return []
    from proofs_checks.runner import obligation_status

    def cell(x: Any) -> str:
        return str(x if x is not None else "").replace("|", "\\|").replace("\n", " ")

    lines = ["Obligations:", "", "| obligation | kind | status | method | residual | counterexample |", "|---|---|---|---|---|---|"]
    for o in obligations:
        cx = o.get("counterexample")
        cx_text = ", ".join(f"{k} = {v}" for k, v in cx.items()) if cx else "–"
        lines.append(f"| {cell(o.get('name'))} | {cell(o.get('kind'))} | **{obligation_status(o)}** | {cell(o.get('method'))} | "
                     f"`{cell(o.get('residual'))}` | {cell(cx_text)} |")
    lines.append("")
    return lines


def _markdown_statement(r: dict[str, Any]) -> list[str]:
    """Hypotheses (with counterexamples), clauses (with evidence and scope) and assumptions."""
    from proofs_checks.runner import necessity_text

    lines: list[str] = []
    if r.get("hypotheses"):
        lines += ["Hypotheses:", ""] + [f"- `{h['name']}`: ${h['latex']}$ — {necessity_text(h)}" for h in r["hypotheses"]] + [""]
    if r.get("clauses"):
        lines += ["Clauses:", ""] + [f"- `{c['name']}`: ${c['latex']}$ — {c.get('evidence_text') or c.get('evidence')}"
                                     for c in r["clauses"]] + [""]
    if r.get("assumptions"):
        lines += ["Assumptions (taken, not derived; inherited ones included):", ""] + [f"- {a}" for a in r["assumptions"]] + [""]
    return lines


def _md_text(text: Any) -> str:
    """A claim's own words (a plugin's title, source, message) as Markdown text: ``<`` as ``&lt;``, so that a
    Markdown viewer never renders a tag a plugin wrote (``<script>``); the HTML pages escape it themselves."""
    return str(text or "").replace("<", "&lt;")


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
        "| claim | kind | status | evidence | max error/tol | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        ev = str(r.get("evidence_summary") or "").replace("|", "\\|")
        lines.append(f"| [{r['id']}](#{r['id'].replace('.', '')}) | {r['kind']} | **{r['status']}** | {ev} | "
                     f"{_fmt(r.get('max_error_ratio'))} | {r['seconds']:.2f} |")
    for r in doc["results"]:
        lines += ["", f"## {r['id']}", "", f"**{_md_text(r['title'])}** ({r['kind']}; {_md_text(r.get('source'))})", ""]
        if r.get("statement"):
            lines += [f"Statement: ${r['statement']}$", ""]
        if r.get("stated_statement"):
            lines += [f"As stated in the lecture notes: ${r['stated_statement']}$", ""]
        lines += _markdown_statement(r)
        lines += [f"Status: **{r['status']}** {_md_text(r.get('message'))}", ""]
        if r.get("derivation"):
            lines.append("Derivation:")
            lines.append("")
            for i, s in enumerate(r["derivation"], 1):
                lines.append(f"{i}. {s['text']}" + (f": $${s['latex']}$$" if s["latex"] else ""))
            lines.append("")
        if r.get("derivation_error"):
            lines += [f"Derivation error: `{r['derivation_error']}`", ""]
        lines += _markdown_obligations(r.get("obligations") or [])
        for label, key in (("Checks", "checks"), ("Checks on the form as stated in the lecture notes", "stated_checks")):
            if not r.get(key):
                continue
            lines += [f"{label}:", "", "| check | layer | status | error | tolerance | resolution | justification | seeds | sizes | s |", "|---|---|---|---|---|---|---|---|---|---|"]
            for c in r[key]:
                just = (c.get("justification") or c.get("skip_reason") or c.get("error_message") or "").replace("|", "\\|")
                lines.append(
                    f"| {c['name']} | {c['layer']} | {c['status']} | {_fmt(c.get('error'))} | {_fmt(c.get('tolerance'))} | {resolution_text(c)} | {just} | "
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
        lines += ["", "## Mutants", "", f"{ms['killed']}/{ms['total']} killed (every mutant runs against every check; "
                  "a layer's entry is the best margin error/tolerance among its checks that rejected the mutant).", "",
                  "| claim | mutant | kind | symbolic | numeric | trained | killed by |", "|---|---|---|---|---|---|---|"]
        for m in doc["mutants"]:
            layers = m.get("rejected_by_layer") or {}
            cells = " | ".join(margin_text(layers.get(L)) for L in ("symbolic", "numeric", "trained"))
            who = "**not counted: claim not verified**" if m.get("refused") else (m.get("killed_by") or "**survived**")
            lines.append(f"| {m['claim']} | {m['mutant']} | {m['kind']} | {cells} | {who} |")
    if doc.get("continuous"):
        lines += ["", "## Continuous mutants", "",
                  "Each verified claim's form scaled by 1 ± 2ε, with ε the best two-sided relative resolution of its "
                  "numeric or trained checks above float64 rounding (≥ 1e-10), must be rejected by that check; 1 ± ε/2 "
                  "is reported.", "", "| claim | check | layer | ε | 1 ± 2ε | 1 ± ε/2 |", "|---|---|---|---|---|---|"]
        from proofs_checks.runner import outcome_words

        for cid, v in doc["continuous"].items():
            if "skipped" in v:
                lines.append(f"| {cid} | – | – | – | not run: {v['skipped']} | – |")
            else:
                two, half = outcome_words(v, alarm=lambda w: f"**{w}**")
                lines.append(f"| {cid} | {v['check']} | {v['layer']} | {v['epsilon']:.3g} | {two} | {half} |")
    if doc.get("reproductions"):
        lines += ["", "## Paper reproductions (quick sizes)", "", "| reproduction | status | rows agreeing | page |", "|---|---|---|---|"]
        lines += [f"| {r['name']} | {r['status']} | {r.get('agreeing')}/{r.get('rows')} | "
                  + (f"[{r['page']}]({r['page']}) |" if r.get("page") else f"– ({r.get('why')}) |")
                  for r in doc["reproductions"]]
    lines += latest_survey_link()  # the latest `tverify survey` page, when one exists
    lines.append("")
    reproduce = f"tverify run {' '.join(r['id'] for r in doc['results'])} --seed {doc['seed']} --device {doc['device']}"
    lines += ["## Reproduce", "", "```", reproduce + ("" if doc["mode"] == "default" else f" --{doc['mode']}"), "```", ""]
    return "\n".join(lines)


def _markdown_errata(doc: dict[str, Any]) -> list[str]:
    """The errata section: each erratum of the lecture notes as stated, the refuting evidence, the corrected form."""
    errata = [r for r in doc["results"] if r.get("kind") == "erratum"]
    if not errata:
        return []
    lines = ["", "## Errata", ""]
    for r in errata:
        lines += [f"### Erratum {r['id']}", "", f"{_md_text(r.get('title'))} ({_md_text(r.get('source'))}); status **{r['status']}**.", ""]
        lines += [f"- As stated in the lecture notes: ${r.get('stated_statement') or '?'}$"]
        refuting = [c for c in r.get("stated_checks") or [] if c.get("status") == "failed"]
        if refuting:
            for c in refuting:
                lines.append(f"- Refuted by `{c['name']}` ({c.get('layer')}): error {_fmt(c.get('error'))} > tolerance "
                             f"{_fmt(c.get('tolerance'))} ({c.get('justification') or ''})")
        else:
            lines.append("- Refuting evidence: none in this run (the stated form was not refuted)")
        lines += [f"- Corrected: ${r.get('statement') or '?'}$", ""]
    return lines


class ReportTargetError(OutputPathError):
    """``--out`` names something a report must not replace (one line for the user, exit code 2)."""


#: the stamp a report folder carries (for people: what wrote it, its files and their SHA-256); whether a
#: folder may be replaced is decided by the record of written outputs (:mod:`proofs_checks.owned`), not by it
MARKER = ".tverify-report"
_WALK_LIMIT = 20000


def _report_files(folder: Path) -> list[str] | None:
    """Relative paths of every non-folder entry under ``folder`` (links not followed); ``None``
    when there are more than can be a report."""
    out: list[str] = []
    # a subfolder that cannot be listed (no permission, a path beyond PATH_MAX) is an entry of its own, which no
    # record lists: the folder is then the user's (a path too long for `is_symlink` raised a traceback, hostile 14b F3)
    unread: list[OSError] = []
    for root, dirs, files in os.walk(folder, onerror=unread.append):
        rel = Path(root).relative_to(folder)
        out += [str(rel / f) if str(rel) != "." else f for f in files]
        out += [str(rel / d) if str(rel) != "." else d for d in dirs if _link_or_unreadable(Path(root) / d)]
        if len(out) > _WALK_LIMIT:
            return None
    out += [os.path.relpath(str(e.filename), folder) for e in unread if e.filename is not None]
    return out


def _link_or_unreadable(p: Path) -> bool:
    try:
        return p.is_symlink()
    except OSError:
        return True


def _foreign_files(folder: Path, made_by: str | None = None) -> tuple[str, list[str]]:
    """Why the existing folder ``folder`` is not exactly what a previous tverify output wrote there,
    and its files that are the user's (``("", [])``: it may be replaced). A folder is tverify's only
    when this user's record of written outputs (:mod:`proofs_checks.owned`, written at write time,
    outside the folder) lists it with the SHA-256 of every file it holds: a file not listed, one
    changed since, a link, or every file of a folder the record does not list (a copy, a moved
    folder, a hand-made or hand-edited :data:`MARKER`) is the user's, and only ``--force`` replaces
    the folder. An empty folder may be replaced (nothing is lost)."""
    from proofs_checks.owned import folder_problems

    files = _report_files(folder)
    if files is None:
        return "with files that are not a tverify report", [f"more than {_WALK_LIMIT} files"]
    if not files:
        return "", []
    why, foreign = folder_problems(folder, files, made_by)
    return (why, foreign) if foreign else ("", [])


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_report_target(out: str | os.PathLike, force: bool = False, made_by: str | None = None) -> Path:
    """Check that a report may be written at ``out``; returns the absolute path, or raises
    :class:`ReportTargetError` with one line saying why not and what to do. ``made_by``: the command writing it
    (``report``, ``check``, ``sweep``, ``reproduce``, ``survey``): the output folder of another is not replaced."""
    raw = str(out)
    if raw.strip() == "":
        raise ReportTargetError("--out: empty path")
    if raw == "-":  # `--json -` is standard output: a folder named '-' would be a surprise (hostile pass 7 note)
        raise ReportTargetError("--out -: a report is a folder (HTML, Markdown, JSON and figures), not standard output; "
                                "give a folder name (--json - writes the JSON document to standard output)")
    problem = name_problem(out)
    if problem:
        raise ReportTargetError(f"--out {raw[:60]}: {problem}; nothing was run")
    p = Path(out).expanduser().absolute()
    real = Path(os.path.realpath(p))
    cwd = Path.cwd().resolve()
    home = Path.home().resolve()
    if real == Path(real.anchor):
        raise ReportTargetError(f"--out {raw}: refusing to replace the root folder")
    if _contains(real, cwd):
        raise ReportTargetError(f"--out {raw}: refusing to replace the current folder or a folder containing it "
                                "(choose a new folder, e.g. --out reports)")
    if _contains(real, home):
        raise ReportTargetError(f"--out {raw}: refusing to replace your home folder or a folder containing it")
    from proofs_checks.store import own_installation

    own = own_installation(real)
    if own:  # `--out .venv --force` swapped the environment tverify ran from for a report, then crashed (pass 10, F4)
        raise ReportTargetError(f"--out {raw}: refusing to write into {own}, a folder containing it or one inside "
                                "it: tverify is running from there (choose a new folder, e.g. --out reports)")
    from proofs_checks.store import resolve_store

    store = Path(os.path.realpath(resolve_store().root))  # the default store (TVERIFY_STORE, else the per-user one):
    if _contains(real, store) or _contains(store, real):  # `reproduce`/`survey`/`sweep --out <store> --force` replaced
        raise ReportTargetError(f"--out {raw}: refusing to write over the results store ({store}), a folder "  # it (48b F7)
                                "containing it or one inside it, --force or not (choose a new folder, e.g. --out reports)")
    from proofs_checks.owned import record_dir

    record = Path(os.path.realpath(record_dir()))
    # `--force` replaced it, and every earlier output of tverify was then "not tverify's" (hostile pass 46b F8)
    if _contains(real, record) or _contains(record, real):
        raise ReportTargetError(f"--out {raw}: refusing to write over tverify's record of written outputs ({record}), "
                                "a folder containing it or one inside it, --force or not (choose a new folder, e.g. "
                                "--out reports)")
    base = nearest_existing(p.parent)
    if not base.is_dir():
        raise ReportTargetError(f"--out {raw}: {base} is a file, not a folder")
    problem = writable_dir_problem(base)
    if problem:
        raise ReportTargetError(f"--out {raw}: {problem}")
    if not os.path.lexists(p):
        return p
    if p.is_symlink():
        what = "a symbolic link"
    elif p.is_dir() and os.path.ismount(p):  # replaced by renaming: a mount point cannot be (EBUSY after the whole
        raise ReportTargetError(f"--out {raw} is a mount point, which cannot be replaced, --force or not; nothing "  # run,
                                "was written: choose a folder inside it or a new one")  # the report lost; pass 12a F8)
    elif p.is_dir():
        why, foreign = _foreign_files(p, made_by)
        if not foreign:
            return p
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        what = f"a folder {why} ({shown})"
    else:
        if not p.is_file():  # a device node, a FIFO, a socket: never replaced, --force or not
            raise ReportTargetError(f"--out {raw} is not a file or folder (a device, FIFO or socket); nothing was "
                                    "written: choose a new folder")
        what = "a file"
    if force:
        return p
    raise ReportTargetError(f"--out {raw} is {what}; nothing was written. Choose a new folder, or add --force to replace it")


def _chmod_tree(root: Path) -> None:
    """Folders 0755, files 0644 (``mkdtemp`` makes 0700; copied figures keep a temp folder's mode)."""
    os.chmod(root, 0o755)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            if not os.path.islink(os.path.join(dirpath, d)):
                os.chmod(os.path.join(dirpath, d), 0o755)
        for f in filenames:
            fp = os.path.join(dirpath, f)
            if not os.path.islink(fp):
                os.chmod(fp, 0o644)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _moved_aside(message: str) -> None:
    """One warning line: the output is complete, under another name than asked (the run's own exit code stands: a
    full run ended with 2, a usage error's code, and a check's --json and verdict were dropped; hostile pass 12)."""
    from proofs_checks.owned import moved_aside

    moved_aside(message)


def _named(text: str, option: str) -> str:
    return option + text[len("--out"):] if text.startswith("--out") else text


def build_output(out: Path, fill: Callable[[Path], None], stamp: dict[str, Any], *, force: bool = False,
                 what: str = "report", aside: bool = False, option: str = "--out", made_by: str = "report") -> Path:
    """Write an output folder safely (``tverify report``, ``sweep``, ``reproduce``, ``check --report``):
    ``out`` must pass :func:`check_report_target`; ``fill(tmp)`` writes the files into a temporary
    sibling, which gets ``stamp`` plus the list of its files as :data:`MARKER` and 0755/0644 modes;
    ``out`` is checked again (if it no longer passes, the new folder is kept beside it and named in
    a warning) and the folder is swapped into place, the previous one removed only after the swap. A target
    that no longer passes when the run is done (a folder of the user's made there meanwhile): the output is
    built beside it under a new name, said in a warning (it was dropped; hostile pass 11a, F9), once: when that fails
    too (the folder above it is a file now), the first refusal is raised (``aside``: this is that second try; it
    recursed without end, hostile pass 17a F1). ``option``: the command's name for ``out`` in those lines
    (``--report`` for a check's: 38a N2); ``made_by``: the command (:func:`check_report_target`). Returns where the
    output is."""
    try:
        out = check_report_target(out, force, made_by)
    except ReportTargetError as exc:
        if aside:
            raise
        keep = Path(out).expanduser().absolute()
        keep = keep.parent / _fit(keep.name, "", f"-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            built = build_output(keep, fill, stamp, force=False, what=what, aside=True, option=option, made_by=made_by)
        except ReportTargetError:
            raise exc from None  # nothing can be written there: one line about the place asked for
        why = _named(str(exc).split("; nothing was written")[0], option)
        _moved_aside(f"{why} (it changed during the run): it was left as it is and the new {what} is in {built}")
        return built
    from proofs_checks.owned import note_seen, unchanged_since_seen

    note_seen(out, keep=True)  # the command's check before its run noted it (check_out_and_json); else now
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_fit(out.name, ".", ".tverify-new-", 8), dir=out.parent))
    try:
        fill(tmp)
        from proofs_checks.owned import folder_hashes, remember_folder, sha256_file

        files = sorted(_report_files(tmp) or [])
        hashes = folder_hashes(tmp, files)
        stamp = {"tool": "tverify", **stamp, "files": files, "sha256": hashes}
        (tmp / MARKER).write_text(json.dumps(stamp, indent=1), encoding="utf-8")
        hashes = {**hashes, MARKER: sha256_file(tmp / MARKER)}  # what the record will list, the stamp too
        _chmod_tree(tmp)
        try:  # a folder of the user's made at `out` (or changed there) during the run is theirs: --force covered only
            check_report_target(out, force and unchanged_since_seen(out), made_by)  # what was there (19a F5, 20a F1)
        except ReportTargetError as exc:
            keep = out.parent / _fit(out.name, "", f"-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            os.replace(tmp, keep)
            # (what the message would advise before a run — "add --force" — is not what happened: 47b F4)
            why = _named(str(exc).split("; nothing was written")[0], option)
            _moved_aside(f"{why} (it changed during the run): it was left as it is and the new {what} is in {keep}")
            return keep
        from proofs_checks.committing import outputs_committing

        old, moved = None, False
        with outputs_committing():  # the swap, the record and the old folder's removal together (41a F4)
            try:  # (the set-aside inside the try: a failed replace puts the previous folder back)
                if os.path.lexists(out):
                    old = out.parent / _fit(out.name, ".", f".tverify-old-{os.getpid()}-{time.time_ns()}")
                    os.replace(out, old)
                    moved = True
                os.replace(tmp, out)
            except BaseException:
                if moved and not os.path.lexists(out):
                    os.replace(old, out)
                raise
            remember_folder(out, hashes, made_by)  # the record, outside the folder: the next run may replace exactly this
            if old is not None:
                _remove(old)
    except BaseException:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _fit(name: str, before: str, after: str, more: int = 0) -> str:
    """``before + name + after`` for a sibling of the output ``name`` (its temporary, set-aside or kept-aside
    folder), the name's bytes shortened so that the whole, with ``more`` bytes still to come (mkdtemp's random
    part), stays within 255: a name the up-front check accepted (255 − 20 bytes) failed only here, after the whole
    run (hostile pass 16a F3)."""
    raw, room = os.fsencode(name), 255 - len(os.fsencode(before + after)) - more
    return before + (name if len(raw) <= room else os.fsdecode(raw[:max(room, 1)])) + after


def check_out_and_json(out_dir, force: bool, json_path: str | None, what: str = "the report",
                       made_by: str = "report") -> Path:
    """``--out`` checked by :func:`check_report_target` and a ``--json`` file refused inside it (it
    would be replaced); both as one-line usage errors."""
    from proofs_checks.options import UsageError

    from proofs_checks.owned import note_seen

    try:
        out = check_report_target(out_dir, force, made_by)
    except ReportTargetError as exc:
        raise UsageError(str(exc)) from None
    note_seen(out)  # --force covers what is at --out now, not what the run's minutes bring there (20a F1)
    if json_inside(json_path, out):
        raise UsageError(f"--json {json_path}: inside --out {out_dir}, which {what} replaces; write it elsewhere")
    return out


def json_inside(json_path: str | None, out: Path) -> bool:
    """Whether the ``--json`` file ``json_path`` is inside the output folder ``out`` (which the run replaces), as
    written or where its folders resolve to: through a link to the folder the JSON landed in it, which the next run
    then refused as holding a file not tverify's (hostile passes 44b F11, 54b F5)."""
    if not json_path or json_path == "-":
        return False
    jp = Path(json_path).expanduser().absolute()
    real = Path(os.path.realpath(jp.parent)) / jp.name
    real_out = Path(os.path.realpath(out))
    return jp == out or out in jp.parents or real == real_out or real_out in real.parents


def write_report(out: Path, doc: dict[str, Any], figure_src: Path | None = None,
                 extra_writers: list[Callable[[Path, dict[str, Any]], None]] | None = None,
                 *, force: bool = False, render: Callable[[dict[str, Any]], str] | None = None,
                 made_by: str = "report") -> Path:
    """Write ``results.json``, ``report.md``, figures, the extra writers' files and :data:`MARKER`
    into ``out`` through :func:`build_output`. ``render`` replaces :func:`render_markdown` for
    ``report.md`` (``tverify reproduce`` writes its own)."""

    def fill(tmp: Path) -> None:
        (tmp / "results.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        (tmp / "report.md").write_text((render or render_markdown)(doc), encoding="utf-8")
        if figure_src is not None and Path(figure_src).exists():
            shutil.copytree(figure_src, tmp / "figures", dirs_exist_ok=True)
        for w in extra_writers or []:
            w(tmp, doc)

    stamp = {"schema": doc.get("schema", SCHEMA_VERSION), "version": doc.get("version"),
             "created": doc.get("created"), "command": doc.get("command"),
             "note": "written by tverify report; the next report may replace this folder if it holds only these files"}
    return build_output(out, fill, stamp, force=force, made_by=made_by)


#: where ``tverify survey`` records its latest page (``proofs_checks.survey.page.remember_latest``);
#: ``tverify report`` links it. The survey imports this name; the report imports nothing of it.
SURVEY_POINTER = Path(".tverify") / "survey-latest.json"


def _latest_survey_folder() -> Path | None:
    """The folder of the latest survey page run here: only when the pointer and that whole folder are exactly what
    tverify wrote (its record of written outputs lists them with these contents). A pointer found in the working
    folder (a cloned repository's) made the report copy another folder, links followed, and its raw HTML into the
    report (hostile pass 14a F7)."""
    from proofs_checks import owned

    try:
        if not owned.is_ours(SURVEY_POINTER):
            return None
        p = json.loads(SURVEY_POINTER.read_text(encoding="utf-8"))
        src = Path(p["page"]).parent
        if not (src / "survey.json").is_file():  # the folder now holds something else of tverify's (a report written
            return None  # over the survey's --out): no survey to link (hostile pass 44b F4)
        files = _report_files(src)
        if not files or owned.folder_problems(src, files)[1]:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return src


def latest_survey_link() -> list[str]:
    """Markdown lines for ``tverify report``: a link to the latest survey page, when one exists (and is tverify's:
    :func:`_latest_survey_folder`)."""
    if _latest_survey_folder() is None:
        return []
    try:
        p = json.loads(SURVEY_POINTER.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    summary = ", ".join(f"{k} {v}" for k, v in sorted((p.get("summary") or {}).items()))
    return ["", "## Attention implementations survey", "",
            f"Latest `tverify survey` ({p.get('created')}): [{p['page']}]({Path(p['page']).as_uri()}) — {summary}", ""]
