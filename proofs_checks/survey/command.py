"""``tverify survey``: the body of the command (the click command in :mod:`proofs_checks.survey_cmd`
only parses options). Order of work: names, ``--out``, ``--json`` are checked before anything runs;
then each entry installs (cached) and runs in its own process; then the pages are written (built
aside, swapped in, :func:`proofs_checks.output.report.build_output`).

Exit code: 0 when the survey ran — whatever it found in the libraries (a survey that finds library
bugs is a successful survey), and even when entries could not be installed, imported or timed out
(those are rows); 1 when a check itself erred (the checker crashed on an entry) or contradicted the
catalogue's record of a known-bug or fixed release (the checker regressed); 2 usage error."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import click

from proofs_checks.options import UsageError
from proofs_checks.survey.catalogue import CATALOGUE, UnknownEntry, get
from proofs_checks.survey.runner import default_cache, row_verdict, run_entry

__all__ = ["run_command", "select"]


def select(names) -> tuple[list, list[str]]:
    """(entries, unknown names): all entries when no name is given."""
    if not names:
        return list(CATALOGUE), []
    out, unknown = [], []
    for n in names:
        try:
            e = get(n)
        except UnknownEntry as exc:
            unknown.append((n, str(exc).strip("'\"")))
            continue
        if e not in out:
            out.append(e)
    return out, unknown


def _list(entries, json_path) -> None:
    from proofs_checks.console import check_json_target as _check_json_target, console as _console, esc as _esc, table as _table, write_json as _write_json  # noqa: E501

    if json_path:
        _check_json_target(json_path)
        _write_json(json_path, {"entries": [{"name": e.name, "library": e.library, "spec": e.spec,
                                             "declaration": e.declaration(), "adapter_lines": e.adapter_lines,
                                             "known": e.known, "what": e.what} for e in entries]})
        return
    t = _table(f"{len(entries)} implementations", ("name", "library", "release", "declared", "lines", "known"))
    for e in entries:
        k = e.known or {}
        t.add_row(e.name, _esc(e.library), _esc(e.spec), _esc(e.declaration()), str(e.adapter_lines),
                  "bug: " + ", ".join(k["bug"]) if "bug" in k else ("fix of " + k["fix_of"] if "fix_of" in k else ""))
    _console().print(t)


def _check_cache(cache: Path, given: bool, named: str = "--cache-dir") -> None:
    """The install cache, refused up front (one line) when it, or a folder above it, exists and is no
    folder: every row said "cannot create the install cache /dev/full: File exists" before."""
    what = f"{named} {cache}" if given else f"the install cache {cache}"
    from proofs_checks.store import name_problem

    problem = name_problem(cache / ("x" * 40))  # a name over 255 bytes: a traceback from exists() (hostile 14a F8)
    if problem:
        raise UsageError(f"{what}: {problem}; nothing was installed")
    for p in (cache, *cache.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                kind = "a file" if p.is_file() else "a device, FIFO or socket" if p.exists() else "a broken link"
                where = "" if p == cache else f": {p} is "
                raise UsageError(f"{what}{where or ' is '}{kind}, not a folder; nothing was installed: choose a folder")
            return


def run_command(names, *, list_only: bool, mode: str, json_path: str | None, out_dir: str, force: bool,
                cache_dir: str | None, install: bool, timeout: float, seed: int = 0, progress: bool = True) -> int:
    from proofs_checks.console import check_json_target as _check_json_target, command_line as _command_line, console as _console, write_json as _write_json  # noqa: E501
    from proofs_checks.output.report import ReportTargetError, build_output, check_out_and_json
    from proofs_checks.survey.page import finding_ref, remember_latest, write_pages

    entries, unknown = select(names)
    if unknown:  # a name the catalogue lacks is the user's input: one line, exit 2, nothing run or written
        raise UsageError("; ".join(why for _, why in unknown))
    if list_only:
        _list(entries, json_path)
        return 0
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and 0 < timeout <= 1e7):
        raise UsageError(f"--timeout: must be a positive number of seconds, at most 1e7, got {timeout}")
    out = check_out_and_json(out_dir, force, json_path, what="tverify survey", made_by="survey")
    _check_json_target(json_path)
    cache = Path(cache_dir) if cache_dir else default_cache()
    where = cache.expanduser().absolute()
    if where == out or out in where.parents:  # installed there during the run, then replaced with the page folder
        raise UsageError(f"--cache-dir {cache}: inside --out {out_dir}, which the survey replaces; keep the install "
                         "cache elsewhere")
    named = "--cache-dir" if cache_dir else "TVERIFY_SURVEY_CACHE" if os.environ.get("TVERIFY_SURVEY_CACHE") else ""
    # (the default cache, with --no-install, is only read: no folder holds nothing, 44b F8; one the user named is
    # checked either way, --cache-dir or TVERIFY_SURVEY_CACHE: a file there was accepted, 60b note)
    if install or named:
        _check_cache(cache, given=bool(named), named=named or "--cache-dir")
        from proofs_checks.store import OutputPathError, refuse_own_installation

        try:  # installs land there: never inside tverify's own code, through a `.tverify` link either (14a F5)
            refuse_own_installation(cache, named or "the install cache")
        except OutputPathError as exc:
            raise UsageError(str(exc)) from None
    say = (lambda s: click.echo(s, err=True)) if progress else (lambda s: None)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for e in entries:
        say(f"survey: {e.name} ({e.spec}) ...")
        row = row_verdict(e, run_entry(e, cache=cache, mode=mode, seed=seed, timeout=timeout, install=install))
        row.update(adapter=e.adapter, known=e.known, note=e.note, by_design_props=list(e.by_design))
        row["reference"] = finding_ref(e, row)
        row.pop("traceback", None) if row.get("status") != "check-failed" else None
        rows.append(row)
        msg = f"survey: {e.name}: {row['verdict']}"
        if row.get("findings"):
            msg += f" ({', '.join(row['findings'])})"
        if row.get("why"):
            msg += f": {row['why']}"
        if row.get("expected"):
            msg += f" [{row['expected']}]"
        click.echo(msg, err=True) if (row.get("why") or row.get("expected") == "contradicts the record") else say(msg)
    summary: dict[str, int] = {}
    for r in rows:
        summary[r["verdict"]] = summary.get(r["verdict"], 0) + 1
    doc = {"schema": 1, "kind": "survey", "created": time.strftime("%Y-%m-%d %H:%M:%S"), "command": _command_line(),
           "mode": mode, "seed": seed, "cache": str(cache), "seconds": round(time.perf_counter() - t0, 2),
           "summary": summary, "properties_checked": sorted({p["name"] for r in rows for p in r.get("properties") or []}),
           "rows": rows}
    by_name = {e.name: e for e in entries}
    import warnings

    try:
        with warnings.catch_warnings():  # matplotlib's layout remarks on the page figure are not for the user
            warnings.filterwarnings("ignore", category=UserWarning)  # e.g. "Tight layout not applied"
            path = build_output(out, lambda tmp: write_pages(tmp, doc, by_name),
                                {"kind": "survey", "created": doc["created"], "command": doc["command"],
                                 "note": "written by tverify survey; the next survey may replace this folder"},
                                force=force, what="survey", made_by="survey")
    except ReportTargetError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write the survey page to {out_dir}: {exc.strerror or exc}") from None
    why = remember_latest(path, doc)
    if why:
        click.echo(f"tverify: warning: {why}", err=True)
    if json_path:
        _write_json(json_path, doc)
    con = _console(stderr=json_path == "-")
    con.print(f"survey: {len(rows)} row{'' if len(rows) == 1 else 's'} ({', '.join(f'{k} {v}' for k, v in sorted(summary.items()))}) in "
              f"{doc['seconds']:.0f}s; page written to {path / 'index.html'}", markup=False)
    failed = [r["name"] for r in rows if r.get("status") in ("install-failed", "import-failed", "version-mismatch")]
    off_index = [n for n in failed if n in by_name and not by_name[n].on_pypi]  # expected: not on the package index
    unrun = [n for n in failed if n not in off_index]
    if unrun:  # an entry that could not run is not a survey result: said, and the exit is not 0
        con.print(f"survey: {len(unrun)} entr{'y' if len(unrun) == 1 else 'ies'} did not run (install or import failed): "
                  + ", ".join(unrun[:10]) + (" ..." if len(unrun) > 10 else ""), markup=False)
    if off_index:
        con.print(f"survey: not on the package index (expected not to install): {', '.join(off_index)}", markup=False)
    bad = [r["name"] for r in rows if r.get("status") == "check-failed" or r.get("expected") == "contradicts the record"]
    return 1 if bad or unrun else 0
