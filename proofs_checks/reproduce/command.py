"""The body of ``tverify reproduce`` (the CLI command only parses options and calls :func:`run_command`)
and the hook ``tverify report`` uses to run the reproductions at quick sizes (:func:`for_report`).

Order of work, as in ``tverify report``: names, device, ``--out``, ``--json`` are all checked before
anything runs; then the reproductions run; then the pages are written (built aside, swapped in).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from proofs_checks.options import UsageError, require_device
from proofs_checks.reproduce import FAILING, REPRODUCTIONS, UnknownReproduction, document, get, run_all

__all__ = ["select", "run_command", "for_report", "repro_task"]


def select(names) -> list:
    """The named reproductions (all when none is named), in the order given; unknown → UsageError."""
    if not names:
        return list(REPRODUCTIONS)
    out = []
    for n in names:
        try:
            r = get(n)
        except UnknownReproduction as exc:
            raise UsageError(str(exc).strip("'\"")) from None
        if r not in out:
            out.append(r)
    return out


def _list(reps) -> None:
    from proofs_checks.console import console as _console, esc as _esc, table as _table

    t = _table(f"{len(reps)} reproductions", ("name", "paper", "reproduces"))
    for r in reps:
        t.add_row(r.name, _esc(r.paper), _esc(r.figure))
    _console().print(t)


def _progress(enabled: bool):
    def tick(name: str, res) -> None:
        if not enabled:
            return
        if res is None:
            click.echo(f"reproducing {name} ...", err=True)
        else:
            click.echo(f"  {name}: {res.status} ({res.seconds:.1f}s)", err=True)

    return tick


def _table(results):
    from proofs_checks.console import esc as _esc, table

    style = {"agrees": "green", "disagrees": "bold red", "error": "bold magenta", "not run": "yellow"}
    t = table("tverify reproduce", ("reproduction", "quantity", "ours", "reference", "tol", "z", "verdict"))
    for r in results:
        if not r.rows:
            t.add_row(r.name, "–", "", "", "", "", f"[{style.get(r.status, '')}]{r.status}[/]")
        for x in r.rows:
            f = lambda a, s=None: "–" if a is None else (f"{a:.4g}" + (f" ± {s:.2g}" if s else ""))  # noqa: E731
            t.add_row(r.name, _esc(x.quantity), f(x.ours, x.ours_se), f(x.reference, x.reference_se), f(x.tolerance),
                      "–" if x.z is None else f"{x.z:.2f}", f"[{style.get(x.verdict, '')}]{x.verdict}[/]")
    return t


def run_command(names, *, list_only: bool, mode: str, device: str, seed: int, json_path: str | None, out_dir: str,
                force: bool, progress: bool = True, sizes: dict[str, Any] | None = None) -> int:
    """``tverify reproduce``: returns the exit code (0 all agree; 1 one disagrees, errors or did not
    run); usage errors raise :class:`UsageError` (exit 2)."""
    from proofs_checks.console import (check_json_target as _check_json_target, command_line as _command_line,
                                       console as _console, write_json as _write_json)
    from proofs_checks.output.report import ReportTargetError, check_out_and_json, write_report
    from proofs_checks.reproduce.pages import render_markdown, write_pages

    reps = select(names)
    if list_only:
        if json_path:
            _check_json_target(json_path)
            _write_json(json_path, {"reproductions": [{"name": r.name, "paper": r.paper, "figure": r.figure,
                                                       "summary": r.summary} for r in reps]})
        else:
            _list(reps)
        return 0
    require_device(device, False, skip_option=False)  # reproduce has no --allow-skip
    out = check_out_and_json(out_dir, force, json_path, what="tverify reproduce", made_by="reproduce")
    _check_json_target(json_path)
    with tempfile.TemporaryDirectory(prefix="tverify-repro-") as figs:
        results = run_all(reps, progress=_progress(progress), mode=mode, seed=seed, device=device, figure_dir=Path(figs),
                          sizes=sizes)
        doc = document(results, command=_command_line(), mode=mode, seed=seed, device=device)
        try:
            path = write_report(out, doc, extra_writers=[lambda tmp, d: write_pages(tmp, d, Path(figs))], force=force,
                                render=render_markdown, made_by="reproduce")
        except ReportTargetError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write the pages to {out_dir}: {exc.strerror or exc}") from None
    if json_path:
        _write_json(json_path, doc)
    con = _console(stderr=json_path == "-")
    con.print(_table(results))
    for r in results:
        if r.status != "agrees":
            con.print(f"{r.name}: {r.status}: {r.why}", markup=False)
    con.print(f"pages written to {path}", markup=False)
    return 1 if any(r.status in FAILING for r in results) else 0


def repro_task(name: str, seed: int, device: str) -> tuple[Any, dict[str, bytes]]:
    """Worker side of ``tverify report --cluster``: one reproduction at quick sizes (as :func:`for_report`),
    with its figures as bytes (the worker's folder is not this machine's)."""
    from proofs_checks.distributed.cluster import worker_scratch
    from proofs_checks.reproduce import run_reproduction

    # in the cluster's scratch folder (removed with it): a worker killed by SIGTERM never cleans up (pass 10, F5)
    with tempfile.TemporaryDirectory(prefix="tverify-repro-task-", dir=worker_scratch()) as d:
        r = run_reproduction(get(name), mode="quick", seed=seed, device=device, figure_dir=Path(d))
        return r, {p.name: p.read_bytes() for p in sorted(Path(d).iterdir()) if p.is_file()}


def for_report(*, seed: int, device: str, progress: bool = True, names=None, sizes: dict[str, Any] | None = None,
               ran: list | None = None):
    """Run the reproductions at quick sizes for ``tverify report``. Returns (summary list for the
    report document, an extra writer that puts the pages under ``reproduce/``, a cleanup callable,
    whether any disagreed or crashed). ``ran``: the reproductions already run elsewhere (a report on
    a cluster), as (result, figures) pairs of :func:`repro_task`, in the order of ``names``."""
    from proofs_checks.reproduce.pages import subsite_writer

    tmp = tempfile.TemporaryDirectory(prefix="tverify-repro-")
    reps = select(names or [])
    if ran is None:
        results = run_all(reps, progress=_progress(progress), mode="quick", seed=seed, device=device,
                          figure_dir=Path(tmp.name), sizes=sizes)
    else:
        results = []
        for r, figures in ran:
            for fname, data in figures.items():
                (Path(tmp.name) / Path(fname).name).write_bytes(data)
            results.append(r)
    doc = document(results, command=f"tverify reproduce --quick --seed {seed} --device {device}", mode="quick", seed=seed,
                   device=device)
    summary = [{"name": r.name, "paper": r.paper, "figure": r.figure, "status": r.status, "why": r.why,
                "seconds": round(r.seconds, 2), "rows": len(r.rows),
                "agreeing": sum(1 for x in r.rows if x.verdict == "agrees"), "page": f"reproduce/{r.name}.html"}
               for r in results]
    bad = any(r.status in ("disagrees", "error") for r in results)
    return summary, subsite_writer(doc, Path(tmp.name)), tmp.cleanup, bad
