"""The commands that run many claims or many configurations: ``mutants`` (the kill matrix), ``report`` (the report
folder), ``reproduce`` (the paper reproductions) and ``sweep`` (a grid of configurations). Registered on
:data:`proofs_checks.cli.cli` when that module is imported; what they share with ``run`` (the selection, the store,
running on a cluster) stays there and is looked up on it at call time."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

import proofs_checks.cli_select as _cli
from proofs_checks.cli_select import FAILING, _store_option
from proofs_checks.console import check_json_target as _check_json_target
from proofs_checks.console import command_line as _command_line
from proofs_checks.console import console as _console
from proofs_checks.console import esc as _esc
from proofs_checks.console import print_wrapped as _print_wrapped
from proofs_checks.console import table as _table
from proofs_checks.console import write_json as _write_json
from proofs_checks.distributed.cluster import cluster_option
from proofs_checks.guards import max_memory_option
from proofs_checks.options import (UsageError, claim_run_options, device_option, json_option, mode_options, require_device,
                                   seed_option)
from proofs_checks.owned import DEFAULT_OUT
from proofs_checks.run_output import MUTANT_CELLS, _mutant_table, _mutants_document, _Progress, _summary_table, _totals


def _run_mutants(claims, ctx, progress: bool):
    from proofs_checks import runner as _r
    from proofs_checks.runner import run_mutant

    _r.PROGRESS_LINES = progress

    pairs = [(c, m) for c in claims for m in c.all_mutants()]
    out = []
    with _Progress(len(pairs), f"mutants ({ctx.mode})", progress) as bar:
        for c, m in pairs:
            bar.start(f"{c.id}:{m.name}")
            r = run_mutant(c, m, ctx)
            out.append(r)
            bar.advance(f"{c.id}:{m.name}", "killed" if r.killed else "SURVIVED", r.seconds)
    return out


def _os_error_text(exc: OSError) -> str:
    """An OS error in a few words: a copy of a folder (``shutil.Error``) fails with a list of ``(source, target, why)``,
    one per file (a full disk gave a 1.5 kB list: hostile pass 31a note); its first reason, and how many there were."""
    import shutil

    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        errors = exc.args[0]
        first = errors[0][-1] if isinstance(errors[0], tuple) else errors[0]
        return f"{str(first)[:200]}" + (f" (and {len(errors) - 1} more files)" if len(errors) > 1 else "")
    return str(exc.strerror or exc)[:300]


@click.command("mutants")
@click.argument("patterns", nargs=-1)
@claim_run_options
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
@click.option("--continuous", is_flag=True,
              help="Also run each verified claim's form scaled by 1 ± 2ε (must be rejected) and 1 ± ε/2, with ε the "
                   "best relative resolution of its numeric or trained checks: confirms the stated resolution.")
@cluster_option
def mutants_cmd(patterns, mode, device, allow_skip, seed, json_path, no_progress, continuous, cluster):
    """The kill matrix: every planted mutant against every check of its claim, at the same sizes as
    `run` (default sizes unless --quick/--full). The table shows, per mutant, each layer's best
    rejection margin. Each claim is run first: the mutants of a claim that is not verified are not
    run and none is called killed (a check that fails on the true claim rejects anything).
    Exit 1 if any mutant survives or a claim is not verified."""
    from proofs_checks.context import RunContext
    from proofs_checks.runner import refuse_mutants, refusal_reason, refused_mutant

    claims, _, _ = _cli._prepare_run(patterns, device, allow_skip or _cli._remote(cluster), json_path, None, save=False)
    if cluster:
        run = _cli._run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                              progress=not no_progress, claims_run=True, mutants=True)
        results, res = run.claims, run.mutants
        refusals = refuse_mutants(results, res)
    else:
        ctx = RunContext(mode=mode, seed=seed, device=device)
        results = _cli._run_selected(claims, ctx, progress=not no_progress)
        why = {r.id: refusal_reason(r) for r in results}
        refusals = [w for w in why.values() if w]
        runnable = _run_mutants([c for c in claims if not why[c.id]], ctx, progress=not no_progress)
        by_claim: dict[str, list] = {}
        for m in runnable:
            by_claim.setdefault(m.claim, []).append(m)
        res = [x for c in claims for x in (by_claim.get(c.id, []) if not why[c.id] else
                                          [refused_mutant(c, m, why[c.id], mode) for m in c.all_mutants()])]
    for line in refusals:
        click.echo(f"tverify: {line}", err=True)
    doc = _mutants_document(res, claims, mode=mode, seed=seed, device=device)
    doc["refused"] = refusals
    doc["not_shown_necessary"] = [{"claim": c.id, "hypothesis": h.name, "why": h.necessary_note}
                                  for c in claims for h in c.hypotheses if h.counterexample is None]
    cont_ok = True
    if continuous:
        if cluster:
            raise UsageError("--continuous runs in this process: leave out --cluster")
        from proofs_checks.continuous import continuous_probe

        by_id = {r.id: r for r in results}
        doc["continuous"] = {c.id: continuous_probe(c, by_id[c.id], ctx) for c in claims}
        cont_ok = all(v.get("rejected_at_2eps", True) for v in doc["continuous"].values())
    if json_path:
        _write_json(json_path, doc)
    con = _console(stderr=json_path == "-")
    con.print(_mutant_table(res, doc["summary"], mode))
    _print_wrapped(con, MUTANT_CELLS, indent=2)
    n_stmt = sum(1 for r in res if r.kind == "hypothesis dropped")
    if n_stmt or doc["not_shown_necessary"]:
        _print_wrapped(con, f"statement mutants (a hypothesis dropped, refuted by its counterexample): "
                            f"{sum(r.killed for r in res if r.kind == 'hypothesis dropped')}/{n_stmt} killed")
    for x in doc["not_shown_necessary"]:
        from proofs_checks.output.terminal import text_of

        _print_wrapped(con, f"{x['claim']}: hypothesis {x['hypothesis']} not shown necessary ({text_of(x['why'])})",
                       indent=2)
    for cid, v in (doc.get("continuous") or {}).items():
        if "skipped" in v:
            con.print(f"continuous {_esc(cid)}: not run ({_esc(v['skipped'])})")
        else:
            from proofs_checks.runner import outcome_words

            two, half = outcome_words(v, alarm=lambda w: f"[bold red]{w}[/]")
            con.print(f"continuous {_esc(cid)}: ε = {v['epsilon']:.3g} ({_esc(v['check'])}, {v['layer']}); form × (1 ± 2ε) "
                      f"{two}, × (1 ± ε/2) {half}")
    sys.exit(0 if all(r.killed for r in res) and cont_ok else 1)


@click.command("report")
@click.argument("patterns", nargs=-1)
@click.option("--out", "out_dir", default=DEFAULT_OUT["report"], show_default=True, metavar="DIR",
              help="Output folder: a new one, or a previous report (replaced atomically). A folder holding other "
                   "files, or a file, is refused unless --force.")
@click.option("--force", is_flag=True, help="Replace --out even if it is not a previous report (never '.', a folder "
                                            "containing the current one, or your home folder).")
@claim_run_options
@_store_option
@click.option("--mutants/--no-mutants", default=True, show_default=True,
              help="Also run the kill matrix (same sizes as the claims) and report it.")
@click.option("--reproductions/--no-reproductions", default=None,
              help="Also run the paper reproductions (`tverify reproduce`) at quick sizes and link their pages from the "
                   "index. Default: on for a report of every claim (no PATTERNS, as `make report`), off when PATTERNS "
                   "select claims.")
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
@cluster_option
def report_cmd(patterns, out_dir, force, mode, device, allow_skip, seed, json_path, store_dir, mutants, reproductions,
               no_progress, cluster):
    """Verify claims and write a report folder (index.html, claims/, report.md, results.json, figures).

    Exit 0 when every claim is verified (or evidence) and every mutant killed, else 1."""
    import tempfile

    from proofs_checks.context import RunContext
    from proofs_checks.output.report import ReportTargetError, check_out_and_json, default_writers, results_document, write_report

    def check_out() -> Path:
        out = check_out_and_json(out_dir, force, json_path)
        root = _cli._store(store_dir).root  # the run writes there before the folder is replaced: never inside it
        if root == out or out in root.parents:
            raise UsageError(f"results store {root}: inside --out {out_dir}, which the report replaces (the run "
                             "would write there first, and the report would then be refused); keep the store elsewhere")
        if root in out.parents:  # the mirror: the report in the store's own folders (its results, its caches: 47b F4)
            raise UsageError(f"--out {out_dir}: inside the results store {root}, whose folders the run writes and "
                             "tverify keeps (results, caches); write the report elsewhere")
        return out

    import time

    claims, store, out = _cli._prepare_run(patterns, device, allow_skip or _cli._remote(cluster), json_path, store_dir,
                                      extra_check=check_out)
    started = time.monotonic()
    if reproductions is None:
        reproductions = not patterns
    # (quick sizes; pages under reproduce/) asked for on a GPU this machine lacks (--allow-skip): not run, and said so
    # in the report and the exit code — a skip is not a pass; they were dropped without a word (hostile pass 44b F10)
    not_run = reproductions and device == "cuda" and not _cuda()
    reproductions = reproductions and not not_run
    with tempfile.TemporaryDirectory(prefix="tverify-fig-") as figs:
        ctx = RunContext(mode=mode, seed=seed, device=device, figure_dir=Path(figs))
        run = None
        if cluster:  # the reproductions are tasks beside the claims' (first: they are among the longest)
            from proofs_checks.distributed.cluster import Task
            from proofs_checks.reproduce.command import repro_task, select as select_reproductions

            extra = [Task(f"reproduce {r.name}", repro_task, (r.name, seed, device), gpu=device == "cuda")
                     for r in (select_reproductions([]) if reproductions else [])]
            run = _cli._run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                                  progress=not no_progress, mutants=mutants, figure_dir=Path(figs), store=store,
                                  continuous=mutants, extra=extra)
            results, mres = run.claims, run.mutants
        else:
            results = _cli._run_selected(claims, ctx, progress=not no_progress, store=store)
            mres = _run_mutants(claims, RunContext(mode=mode, seed=seed, device=device), progress=not no_progress) if mutants else None
        if mres is not None:
            from proofs_checks.runner import refuse_mutants

            refuse_mutants(results, mres)  # a kill counts only against a verified claim
        doc = results_document(results, claims={c.id: c for c in claims}, mutants=mres, command=_command_line(),
                               mode=mode, seed=seed, device=device)
        if mres is not None:  # continuous mutants: each claim's best relative check at 1 ± 2ε, 1 ± ε/2
            if run is not None and run.continuous is not None:  # computed in each claim's task
                doc["continuous"] = {r.id: run.continuous[r.id] for r in results}
            else:
                from proofs_checks.continuous import continuous_probe

                cctx = RunContext(mode=mode, seed=seed, device=device)
                cmap = {c.id: c for c in claims}
                doc["continuous"] = {r.id: continuous_probe(cmap[r.id], r, cctx, only_best=True) for r in results}
        writers, repro_bad, cleanup = default_writers(), bool(not_run), None
        if not_run:
            from proofs_checks.reproduce.command import select as select_reproductions

            doc["reproductions"] = [{"name": r.name, "paper": r.paper, "figure": r.figure, "status": "not run",
                                     "why": "--device cuda, and torch sees no CUDA device here (--allow-skip)",
                                     "seconds": 0.0, "rows": 0, "agreeing": 0, "page": None}
                                    for r in select_reproductions([])]
        if reproductions:
            from proofs_checks.reproduce.command import for_report

            ran = None if run is None else [_repro_pair(t, v) for t, v in zip(extra, run.extra)]
            doc["reproductions"], writer, cleanup, repro_bad = for_report(seed=seed, device=device, progress=not no_progress,
                                                                          ran=ran)
            writers.append(writer)
        try:
            path = write_report(out, doc, figure_src=Path(figs), extra_writers=writers, force=force)
        except ReportTargetError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write report to {out_dir}: {_os_error_text(exc)}") from None
        finally:
            if cleanup is not None:
                cleanup()
    if json_path:
        _write_json(json_path, doc)
    sys.exit(_report_outcome(_console(stderr=json_path == "-"), results, mres, doc, path, mode,
                             time.monotonic() - started, repro_bad))


def _report_outcome(con, results, mres, doc: dict, path, mode: str, seconds: float, repro_bad: bool) -> int:
    """What ``report`` prints after writing its folder (the claims, the kill matrix, what disagreed, where it went) and
    its exit code: 1 for a failing claim, a surviving mutant, a reproduction that does not agree or a resolution not
    confirmed, else 3 for an undecided claim, else 0."""
    con.print(_summary_table(results))
    con.print(_totals(results, seconds))
    if mres is not None:
        con.print(_mutant_table(mres, doc.get("kill_summary"), mode))
        _print_wrapped(con, MUTANT_CELLS, indent=2)
    for rp in doc.get("reproductions") or []:
        if rp["status"] != "agrees":
            con.print(f"reproduction {rp['name']}: {rp['status']}: {rp['why']}", markup=False)
    con.print(f"report written to {path}")
    bad = [r for r in results if r.status in FAILING]
    survived = [m for m in (mres or []) if not m.killed]
    unconfirmed = [cid for cid, v in (doc.get("continuous") or {}).items() if v.get("rejected_at_2eps") is False]
    for cid in unconfirmed:
        con.print(f"continuous {_esc(cid)}: form × (1 ± 2ε) NOT rejected: the stated resolution is not confirmed")
    undecided = [r for r in results if r.status in ("undecided", "inconclusive")]
    return 1 if bad or survived or repro_bad or unconfirmed else (3 if undecided else 0)


def _repro_pair(task, value):
    """A reproduction task's (result, figures); a task that failed on the cluster is an ``error`` result."""
    if type(value).__name__ != "TaskFailure":
        return value
    from proofs_checks.reproduce import ReproResult, get

    rep = get(task.args[0])
    r = ReproResult(rows=[], status="error", why=f"task failed on the cluster: {value.message}")
    r.name, r.paper, r.figure = rep.name, rep.paper, rep.figure
    return r, {}


def _cuda() -> bool:
    from numerics.torch_utils import cuda_available

    return cuda_available()


@click.command("reproduce")
@click.argument("names", nargs=-1)
@click.option("--list", "list_only", is_flag=True, help="List the reproductions (name, paper, figure) and exit.")
@mode_options
@device_option
@seed_option
@json_option
@click.option("--out", "out_dir", default=DEFAULT_OUT["reproduce"], show_default=True, metavar="DIR",
              help="Pages folder: a new one, or a previous reproduction's output (replaced atomically); anything else is "
                   "refused unless --force (as `tverify report --out`).")
@click.option("--force", is_flag=True, help="Replace --out even if it is not a previous reproduction's output (never "
                                            "'.', a folder containing it, or your home folder).")
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
def reproduce_cmd(names, list_only, mode, device, seed, json_path, out_dir, force, no_progress):
    """Run anchor papers' headline experiments (all, or NAMES) with this project's numerics and write one
    page per reproduction: the paper's (or reference code's) numbers next to ours, with the verdict.

    \b
    Examples:
      tverify reproduce --list
      tverify reproduce tf-as-svm --quick --json -
      tverify reproduce --out reproductions

    Exit 0 when every compared quantity agrees; 1 when one disagrees, a reproduction crashes or could
    not run; 2 usage error."""
    from proofs_checks.reproduce.command import run_command

    sys.exit(run_command(names, list_only=list_only, mode=mode, device=device, seed=seed, json_path=json_path,
                         out_dir=out_dir, force=force, progress=not no_progress))


@click.command("sweep")
@click.argument("target", nargs=-1, required=True)
@click.option("--grid", "grids", multiple=True, required=True, metavar='"NAME=V1,V2 NAME=..."',
              help="Parameters and their values, axes separated by spaces (repeatable); values by commas, or by | when "
                   "a value holds commas (one such value ends with |: f=-x,-y|). Unknown names are refused with the "
                   "accepted ones.")
@click.option("--seeds", "n_seeds", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="Replicates per grid point (replicate seeds derived from the target and --seed).")
@claim_run_options
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help="Folder for results.json, results.csv, index.html (default: sweep, or none when --json is given); "
                   "the rules of `tverify report --out`.")
@click.option("--force", is_flag=True, help="Replace --out even if it is not a previous sweep's output.")
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
@cluster_option
@max_memory_option
def sweep_cmd(target, grids, n_seeds, mode, device, allow_skip, seed, json_path, out_dir, force, no_progress, cluster,
              max_memory):
    """Measure TARGET over a grid of configurations: a claim with a sweep adapter (e.g.
    icl.linear_task_risk) or a sanity check (`check icl`, `check att-svm`, ...). One row per grid point
    and replicate, every measured number, written as JSON, CSV and an HTML page of heatmaps and curves.

    \b
    Examples:
      tverify sweep icl.linear_task_risk --grid "N=5,10,20 M=5,10,40" --quick
      tverify sweep check icl --grid "N=5,10 lambda=1,2|1,4" --seeds 3 --cluster local:2
      tverify sweep attn.scaling_variance --grid "d_k=1,4,16,64 dist=normal,uniform" --json -

    Exit 0 when every row ran and passed (ok); 1 when one errored or failed; 3 when some are inconclusive;
    2 when the plan is refused before it runs (unknown names, bad values, more memory than --max-memory)
    or a check refuses a grid point's values (the sweep stops, nothing is written); 130 on Ctrl-C."""
    from proofs_checks import guards
    from proofs_checks.distributed import sweep as sw
    from proofs_checks.distributed.cluster import interrupt_once

    tgt = sw.resolve_target(target)
    grid = sw.parse_grid(grids)
    plan = sw.check_plan(tgt, grid, seeds=n_seeds, mode=mode, device=device, max_memory=max_memory)
    require_device(device, allow_skip or _cli._remote(cluster))
    out = None
    if out_dir is not None or not json_path:
        from proofs_checks.output.report import check_out_and_json

        out = check_out_and_json(DEFAULT_OUT["sweep"] if out_dir is None else out_dir, force, json_path,
                                 what="the sweep", made_by="sweep")  # (--out '': refused as report's is, 57b F2)
    _check_json_target(json_path)
    rows = sw.plan_rows(tgt, grid, seeds=n_seeds, base_seed=seed, mode=mode, device=device, max_memory=max_memory,
                        dry_run=True)
    label = f"sweep {tgt.name}" + (f" on {cluster}" if cluster else "")
    tasks = sw.plan_tasks(tgt, rows)
    eta = guards.Progress(label, enabled=not no_progress, delay=5.0, every=10.0, estimate=plan.seconds)
    if plan.seconds is not None and plan.seconds > 10:
        eta.note(f"{plan.rows} rows in {len(tasks)} task(s); estimated ≈ {guards.fmt_seconds(plan.seconds)}"
                 + (" of compute (divided among the workers)" if cluster else ""))
    with interrupt_once() as interrupted, _Progress(len(tasks), label, not no_progress) as bar, \
            guards.Heartbeat(eta, lambda: bar.done / max(len(tasks), 1)) if not bar.tty else contextlib.nullcontext():
        def tick(name, value):
            done = value if isinstance(value, list) else []
            bar.advance(name, " ".join(str(r.get("verdict") or r.get("status")) for r in done) or "task failed")

        if cluster:
            from proofs_checks.distributed.cluster import open_client

            with open_client(cluster, device=device) as client:
                result = sw.run_sweep(tgt, rows, client=client, progress=tick)
        else:
            result = sw.run_sweep(tgt, rows, progress=tick)
    if interrupted["hit"]:  # a library swallowed the KeyboardInterrupt: still write nothing
        raise KeyboardInterrupt
    doc = sw.sweep_document(tgt, grid, result, seeds=n_seeds, base_seed=seed, mode=mode, device=device,
                            cluster=cluster, command=_command_line())
    if out is not None:
        from proofs_checks.output.report import ReportTargetError

        try:
            path = sw.write_sweep(out, doc, force=force)
        except ReportTargetError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write the sweep to {out}: {exc.strerror or exc}") from None
    if json_path:
        from proofs_checks.runner import _jsonable

        _write_json(json_path, _jsonable(doc))
    t = _table(f"sweep {tgt.name}: {doc['summary']['rows']} rows", (*grid, "rep", "verdict", *tgt.headline[:4], "note"))
    for r in result:
        t.add_row(*(_esc(r.get(k)) for k in grid), str(r.get("replicate")), _esc(r.get("verdict") or r.get("status")),
                  *(_cli._fmt_num(r.get(h)) for h in tgt.headline[:4]), _esc((r.get("error") or r.get("reason") or "")[:120]))
    con = _console(stderr=json_path == "-")
    con.print(t)
    if out is not None:
        con.print(f"sweep written to {path}")
    sys.exit(sw.exit_code(doc))
