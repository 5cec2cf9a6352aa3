"""``tverify``: list, show, run and report claims; run mutants; sanity-check user configurations.

Exit codes: 0 everything verified (or evidence), 1 something refuted, errored or incomplete (or a
mutant survived, or was run against a claim that is not verified), 2 usage error (one line on
stderr, never a traceback), 3 undecided claims (nothing failed) or ``tverify check`` inconclusive. The CLI holds no maths: it selects claims, calls the runner and the report writers,
and formats.

Every output path (``--out``, ``--json``, the results store) is checked before any claim runs.
``list`` and ``show`` read the generated catalogue (:mod:`proofs_checks.output.catalogue`) when it is
up to date, so they answer without importing the claim modules (torch, cvxpy, SciPy).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from proofs_checks.entry import (_quiet_stdout, _stderr_line, _terminated_in, _underscored_number,
                                 _unrepresentable_number, _write_failure, run_command)
from proofs_checks.guards import max_memory_option
from proofs_checks.owned import CATALOGUE_FILES, DEFAULT_OUT
from proofs_checks.distributed.cluster import cluster_option
from proofs_checks.options import (UsageError, claim_run_options, device_option, json_option, mode_options, require_device,
                                   seed_option)

from proofs_checks.run_output import (LAYERS, MUTANT_CELLS, STATUS_STYLE, _mutant_table,  # noqa: E402,F401
                                      _mutants_document, _Progress, _summary_table, _totals)

#: claim statuses that make ``run`` / ``report`` exit 1 (the runner's ``FAILING``)
FAILING = ("refuted", "error", "incomplete")

# the shared helpers live in proofs_checks.console (the other command modules import them there)
from proofs_checks.console import Group as _BaseGroup  # noqa: E402
from proofs_checks.console import LazySanityGroup as _LazySanityGroup  # noqa: E402
from proofs_checks.console import check_json_target as _check_json_target  # noqa: E402
from proofs_checks.console import command_line as _command_line  # noqa: E402
from proofs_checks.console import console as _console  # noqa: E402
from proofs_checks.console import esc as _esc  # noqa: E402
from proofs_checks.console import print_wrapped as _print_wrapped  # noqa: E402
from proofs_checks.console import table as _table  # noqa: E402
from proofs_checks.console import write_json as _write_json  # noqa: E402

def _warn(message: str) -> None:
    click.echo(f"tverify: warning: {message}", err=True)


# ------------------------------------------------------------------------------------------------
# selecting claims: the registry (slow: imports every claim module) or the catalogue (fast)


def _select(patterns) -> list:
    from proofs_checks.registry import UnknownClaimError, select

    try:
        return select(patterns)
    except UnknownClaimError as exc:
        msg = str(exc).strip("'\"")
        from proofs_checks.claims import PLUGIN_ERRORS
        from proofs_checks.output.suggest import unknown_message
        from proofs_checks.registry import registry

        bad = next((p for p in patterns if not select_entries_ids(registry, p)), None)
        if bad is not None:
            msg = unknown_message(bad, [c.id for c in registry], [c.group for c in registry])
        if PLUGIN_ERRORS:  # the claim may be one of a plugin that did not load: say which
            names = ", ".join(repr(n.split(" = ")[0]) for n, _ in PLUGIN_ERRORS[:3])
            msg += f"; claims plugin {names} failed to load and was skipped (the warning above says why)"
        raise UsageError(msg) from None


def select_entries_ids(claims, pattern: str) -> list[str]:
    """Ids of ``claims`` that ``pattern`` selects (the registry's rule: id, glob, group name)."""
    import fnmatch

    return [c.id for c in claims if fnmatch.fnmatchcase(c.id, pattern) or c.group == pattern]


def select_entries_ids_of(entries, pattern: str) -> list[str]:
    """Ids of catalogue ``entries`` that ``pattern`` selects."""
    import fnmatch

    return [e["id"] for e in entries if fnmatch.fnmatchcase(e["id"], pattern) or e["group"] == pattern]


def _precheck_patterns(patterns) -> None:
    """A pattern that matches nothing is refused from the catalogue, before the registry imports
    every claim module (seconds): with the closest ids. Without a fresh catalogue the registry decides."""
    if not patterns:
        return
    from proofs_checks.output import catalogue

    try:
        fresh = catalogue.load_fresh(_store(None).cache_dir)
    except (OSError, UsageError):
        return
    if fresh is None or fresh[0].get("plugin_errors"):  # a plugin that failed: the registry says which
        return
    from proofs_checks.registry import registry

    # claims registered in this process (a notebook, a test, the API) are not in any catalogue
    live = [{"id": c.id, "group": c.group} for c in registry if c.id not in {e["id"] for e in fresh[0]["claims"]}]
    _select_entries(fresh[0]["claims"] + live, patterns)


def _catalogue(store, refresh: bool = False, patterns=()) -> tuple[list[dict[str, Any]], str, dict[str, Any], bool]:
    """Catalogue entries of every claim, where they came from, the document, and whether it is
    the store's cache (which ``show`` may complete with the derivations it computes). ``refresh``
    ignores every cached document and recomputes from the registry; so does a cached document that recorded a plugin's
    failure when one of ``patterns`` matches none of its claims: the claim may be that plugin's, which may load now
    (`run` had just verified it, and `show` said no claim matched: hostile pass 58b F6)."""
    from proofs_checks.claims import check_environment
    from proofs_checks.output import catalogue

    check_environment()  # a cache hit loads no claim module: the environment is read here too
    fresh = None if refresh else (catalogue.load_fresh(store.cache_dir) or catalogue.load_with_plugins(store.cache_dir))
    if fresh is not None and fresh[0].get("plugin_errors") and any(
            not select_entries_ids_of(fresh[0]["claims"], p) for p in patterns):
        fresh, refresh = None, "the registry (the cached catalogue recorded a plugin's failure to load: tried again)"
    if fresh is not None:
        doc, path = fresh
        from proofs_checks.claims import PLUGIN_ERRORS

        for name, why in [] if PLUGIN_ERRORS else doc.get("plugin_errors") or []:  # a cache hit is not silent
            _warn(f"claims plugin {name} was skipped: it failed to load when this catalogue was cached (a time "
                  f"limit, the folder it ran in: --refresh tries it again): {why}"[:300])
        return doc["claims"], str(path), doc, Path(path).parent == Path(store.cache_dir)
    fp = catalogue.source_fingerprint()  # before the import (see catalogue.build)
    doc = catalogue.build(_select([]), with_derivations=False, fingerprint=fp)
    from proofs_checks.claims import PLUGIN_ERRORS

    if PLUGIN_ERRORS:
        doc["plugin_errors"] = [list(e) for e in PLUGIN_ERRORS]
    catalogue.save_cache(doc, store.cache_dir)
    if refresh:
        return doc["claims"], refresh if isinstance(refresh, str) else "the registry (--refresh)", doc, True
    return doc["claims"], "the registry (docs/catalogue.json is out of date: `tverify list --markdown` regenerates it)", doc, True


def _select_entries(entries, patterns) -> list[dict[str, Any]]:
    from proofs_checks.output.catalogue import UnknownPatternError, select_entries

    try:
        return select_entries(entries, patterns)
    except UnknownPatternError as exc:
        from proofs_checks.output.suggest import unknown_message

        ids, groups = [e["id"] for e in entries], [e["group"] for e in entries]
        bad = next((p for p in patterns if not select_entries_ids_of(entries, p)), None)
        raise UsageError(unknown_message(bad, ids, groups) if bad is not None else str(exc).strip("'\"")) from None


# ------------------------------------------------------------------------------------------------
# output paths and the store, all checked before a run


def _store_option(f):
    return click.option("--store", "store_dir", metavar="DIR", default=None,
                        help="Results store (last result per claim, read by `show`). Default: $TVERIFY_STORE, "
                             "else $XDG_CACHE_HOME/tverify or ~/.cache/tverify.")(f)


def _store(store_dir: str | None):
    """The store from this command's ``--store``, else ``tverify --store``, else env/default."""
    from proofs_checks.store import resolve_store

    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    top = root.params.get("store_dir") if root is not None and root is not ctx else None
    if store_dir is None:
        store_dir = top
    elif top is not None and top != store_dir:  # `tverify --store a run --store b`: which one? (hostile pass 10)
        raise UsageError(f"--store is given twice, as {top} before the command and {store_dir} after it; give it once")
    if store_dir is not None and str(store_dir).strip() == "":  # was taken as "no --store" (hostile pass 7, F6)
        raise UsageError("--store: empty path (leave --store out for $TVERIFY_STORE or the per-user default)")
    import os

    if store_dir is None and os.environ.get("TVERIFY_STORE") is not None and not os.environ["TVERIFY_STORE"].strip():
        raise UsageError("TVERIFY_STORE is blank: name a folder, or unset it for the per-user default")
    store = resolve_store(store_dir)
    from proofs_checks.store import OutputPathError, refuse_own_installation

    # the per-user default too: an XDG_CACHE_HOME inside tverify's own code put the store there (hostile pass 12)
    named = {"--store": "--store", "TVERIFY_STORE": "TVERIFY_STORE"}.get(store.source, "the per-user store (XDG_CACHE_HOME)")
    try:
        refuse_own_installation(store.root, named)
        if store.explicit:  # (the per-user default holds the record beside its own folders)
            from proofs_checks.store import refuse_inside_record

            refuse_inside_record(store.root, named, str(store.root))
        for sub in (store.last_dir, store.cache_dir):  # and where its folders lead: `last/ -> theory/` was written
            refuse_own_installation(sub, f"{named} {store.root}: its folder")  # through (hostile pass 14a F2)
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
    from proofs_checks.store import name_problem

    problem = name_problem(store.last_path("x" * 40))  # its files' names too (a name over 255 bytes: hostile 14a F8)
    if problem and store.explicit:  # (the per-user default: a warning, and the run goes on unsaved)
        from proofs_checks.store import _short

        raise UsageError(f"{named} {_short(str(store.root))}: {problem}")
    if store.explicit and store.root.exists() and not store.root.is_dir():  # a file the user named: said, not used
        raise UsageError(f"results store {store.root} (from {store.source}) is not a folder")
    return store


def _check_store(store) -> bool:
    """Can results be saved? An explicit store (--store, TVERIFY_STORE) that cannot be written is a
    usage error; the default one gets a warning (the run goes on; `show` will not see it)."""
    from proofs_checks.store import check_store_writable

    problem = check_store_writable(store)
    if problem is None:
        return True
    if store.explicit:
        raise UsageError(problem)
    _warn(f"{problem}; this run's results will not be kept for `tverify show` (use --store DIR or TVERIFY_STORE)")
    return False


def _json_flag_option(f):
    """``--json [PATH|-]`` for ``list`` and ``show``: alone, JSON on stdout (as under ``check``)."""
    from proofs_checks.options import reserve_stdout

    return click.option("--json", "json_path", metavar="[PATH|-]", default=None, is_flag=False, flag_value="-",
                        callback=reserve_stdout, help="Print JSON (--json alone or --json -), or write it to PATH.")(f)


# ------------------------------------------------------------------------------------------------
# running


def _run_selected(claims, ctx, progress: bool, store=None):
    from proofs_checks import runner as _r
    from proofs_checks.runner import run_claim
    from proofs_checks.store import save_last

    _r.PROGRESS_LINES = progress

    results, save_problem = [], None
    with _Progress(len(claims), "verifying", progress) as bar:
        for c in claims:
            bar.start(c.id)
            r = run_claim(c, ctx)
            if store is not None:
                save_problem = save_last(_with_sources(r.to_json()), store) or save_problem
            results.append(r)
            bar.advance(c.id, r.status, r.seconds)
    if save_problem:
        _warn(save_problem)
    return results


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


def _remote(cluster: str | None) -> bool:
    """``--cluster`` names a running scheduler (its workers, not this machine, need CUDA)."""
    return bool(cluster) and not str(cluster).strip().startswith("local")


def _run_on_cluster(cluster, claims, *, mode, seed, device, allow_skip, progress: bool, claims_run: bool = True,
                    mutants: bool = False, figure_dir=None, store=None, continuous: bool = False, extra=()):
    """``--cluster``: the claims (and/or their kill matrix) as tasks on a Dask cluster (see
    :mod:`proofs_checks.distributed.cluster`); the same results as :func:`_run_selected` / :func:`_run_mutants`.
    Returns a :class:`~proofs_checks.distributed.cluster.ClusterRun` (``continuous``: the claims'
    continuous-mutant rows, when the run was cut per claim; ``extra``: more tasks, run beside them).
    The store is written only once every task has finished (Ctrl-C leaves nothing half-done)."""
    from proofs_checks.distributed.cluster import granularity, interrupt_once, open_client, plan_claims, run_tasks
    from proofs_checks.store import save_last

    with interrupt_once() as interrupted, open_client(cluster, device=device) as client:
        plan = plan_claims(claims, mode=mode, seed=seed, device=device, claims_run=claims_run, mutants=mutants,
                           figure_dir=figure_dir, continuous=continuous, per=granularity(client, claims), extra=extra,
                           store=store)  # longest first, from the store's last seconds (issue 46)
        with _Progress(len(plan.tasks), f"tasks on {cluster}", progress) as bar:
            def tick(label, value):
                bar.advance(label, "task failed" if type(value).__name__ == "TaskFailure" else "")

            run = plan.assemble(run_tasks(client, plan.tasks, tick, allow_no_gpu=allow_skip))
    if interrupted["hit"]:  # a library swallowed the KeyboardInterrupt: still write nothing
        raise KeyboardInterrupt
    if store is not None and run.claims:
        problem = None
        for r in run.claims:
            problem = save_last(_with_sources(r.to_json()), store) or problem
        if problem:
            _warn(problem)
    return run


# ------------------------------------------------------------------------------------------------
# the commands


class _Interrupted(Exception):
    """Ctrl-C inside a command, carried past click (which would print an empty line and raise
    Abort) to :func:`main`: one line, exit 130."""


class _Group(_BaseGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="transformer-theory-verify", prog_name="tverify")
@_store_option
def cli(store_dir):
    """Verify claims from the theory of transformers: SymPy derivation, numeric reference and
    trained torch model, compared under justified tolerances.

    \b
    Examples:
      tverify list
      tverify run 'attn.*' --quick --json out.json
      tverify show icl.gamma_n_global_min
      tverify mutants 'icl.*'
      tverify report --out reports

    \b
    Exit codes: 0 verified (or evidence); 1 refuted, error, incomplete, or a mutant survived;
    2 usage error (one line on stderr); 3 undecided (an obligation SymPy could not decide, no
    counterexample found) or `tverify check` inconclusive.
    """


@cli.command("list")
@click.argument("patterns", nargs=-1)
@_json_flag_option
@click.option("--markdown", is_flag=True,
              help="Regenerate the catalogue: docs/CATALOGUE.md and docs/catalogue.json (every claim).")
@click.option("--docs-dir", metavar="DIR", default=None, help="With --markdown: write there instead of the checkout's docs/.")
@click.option("--refresh", is_flag=True, help="Recompute the catalogue from the registry (ignore every cached copy).")
@click.option("--force", "markdown_force", is_flag=True,
              help="With --markdown --docs-dir: replace CATALOGUE.md / catalogue.json there even when they are not a "
                   "catalogue tverify wrote (not --json's: list never replaces a file it did not write).")
@_store_option
def list_cmd(patterns, json_path, markdown, docs_dir, store_dir, refresh, markdown_force):
    """List registered claims (optionally only those matching PATTERNS: ids, globs, group names)."""
    store = _store(store_dir)
    if markdown:
        if patterns or json_path:
            raise UsageError("--markdown writes the whole catalogue: give no PATTERN and no --json")
        _write_catalogue(docs_dir, store, markdown_force)
        return
    if docs_dir or markdown_force:
        raise UsageError("--docs-dir and --force go with --markdown")
    entries = _catalogue(store, refresh, patterns)[0]
    if json_path and json_path != "-" and not patterns:
        from proofs_checks.output.catalogue import UnknownPatternError, select_entries

        try:
            select_entries(entries, [json_path])
        except UnknownPatternError:
            pass
        else:
            if not json_path.lower().endswith(".json"):
                raise UsageError(f"--json {json_path}: that names claims; for JSON on stdout write `tverify list "
                                 f"{json_path} --json`, for a file give a path ending in .json")
    _check_json_target(json_path)
    chosen = _select_entries(entries, patterns)
    if json_path:
        _write_json(json_path, chosen)  # type: ignore[arg-type]
        return
    _console().print(_list_table(chosen))


def _list_table(chosen):
    """``list``: one row per claim; the id never cut, its evidence, the checks counted per layer (``show``
    names them and the kind)."""
    from proofs_checks.output.evidence import evidence_label
    from proofs_checks.output.terminal import text_of

    t = _table(f"{len(chosen)} claim{'' if len(chosen) == 1 else 's'}", ("id", "evidence", "title", "checks", "mutants"))
    t.caption = "checks: symbolic/numeric/trained (`tverify show ID --full` names them)"
    for i in (0, 1, 3):
        t.columns[i].no_wrap = True
    t.columns[2].min_width = 24
    for e in chosen:
        n = [sum(ch["layer"] == layer for ch in e["checks"]) for layer in LAYERS]
        t.add_row(e["id"], _esc(evidence_label(e)), _esc(text_of(e["title"])), "/".join(map(str, n)),
                  str(len(e["mutants"])))
    return t


def _write_catalogue(docs_dir: str | None, store, force: bool = False) -> None:
    import os
    import time

    from proofs_checks import owned
    from proofs_checks.output import catalogue
    from proofs_checks.store import OutputPathError, check_output_file

    if docs_dir is not None and not docs_dir.strip():  # ('' wrote the checkout's own docs/: hostile pass 57b F3)
        raise UsageError("--docs-dir: empty path; give a folder (leave --docs-dir out for the checkout's docs/)")
    out = Path(docs_dir).expanduser() if docs_dir else catalogue.repo_docs_dir()
    if docs_dir:
        from proofs_checks.store import refuse_own_installation

        try:
            refuse_own_installation(docs_dir, "--docs-dir")
        except OutputPathError as exc:
            raise UsageError(str(exc)) from None
    for name in CATALOGUE_FILES:
        try:
            check_output_file(out / name, "--markdown")
        except OutputPathError as exc:
            raise UsageError(str(exc)) from None
        p = out / name
        # a folder the user names may hold their own files of these names: replaced only when tverify wrote
        # them (its record of written outputs) or with --force; the checkout's own docs/ is regenerated
        if docs_dir and not force and p.is_file() and not owned.is_ours(p):
            raise UsageError(f"--docs-dir {docs_dir}: {name} exists and is not a catalogue as tverify wrote it there "
                             "(not written by tverify, or changed since); nothing was run or written: choose another "
                             "folder, or add --force to replace it")
        if docs_dir:
            owned.note_seen(p)  # what is there now (at the command's start): --force covers that, not what comes later
    checkout = not docs_dir  # the project's own docs/ document its own claims, never an installed plugin's
    fp = catalogue.source_fingerprint(plugins=not checkout)  # before the import (see catalogue.build)
    claims = _select([])
    if checkout:
        from proofs_checks.claims import is_builtin

        others = [c.id for c in claims if not is_builtin(c)]
        claims = [c for c in claims if is_builtin(c)]
        if others:
            click.echo(f"tverify: note: {len(others)} claim(s) of installed plugins ({', '.join(others[:3])}"
                       f"{', …' if len(others) > 3 else ''}) are not written into this project's catalogue "
                       "(--docs-dir DIR writes one with them)", err=True)
    click.echo(f"deriving {len(claims)} claims for the catalogue (evaluates every derivation's obligations)...", err=True)
    doc = catalogue.build(claims, with_derivations=True, fingerprint=fp,
                          progress=lambda k, n, cid: click.echo(f"[{k}/{n}] {cid}", err=True))
    if checkout:
        doc.pop("depends_on", None)  # the plugins' helper sources: no plugin claim is in this document
        doc.pop("resolves", None)
    if catalogue.source_fingerprint(plugins=not checkout) != fp:
        click.echo("tverify: warning: the sources changed while the catalogue was generated; run it again", err=True)
    names = {}
    for name in CATALOGUE_FILES:  # a file of the user's made there during the run (24a F2): kept, the catalogue beside
        if docs_dir and not owned.unchanged_since_seen(out / name):
            stem, dot, ext = name.rpartition(".")
            names[name] = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{dot}{ext}"
            owned.moved_aside(f"--docs-dir {docs_dir}: {name} changed during the run; it was left as it is and the "
                              f"catalogue was written to {out / names[name]}")
    from proofs_checks.committing import outputs_committing

    with outputs_committing():  # the files and their records together (41a F5's family)
        try:
            paths = catalogue.write_docs(doc, out, names)
        except OSError as exc:
            raise UsageError(f"--markdown: cannot write {out}: {exc.strerror or exc}") from None
        for p in paths:
            owned.remember(p)
    catalogue.save_cache(doc, store.cache_dir)
    for p in paths:
        click.echo(f"wrote {p}")


def _show_data(claim_id: str, store, refresh: bool = False) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The claim's catalogue entry, its derivation info, and where the derivation came from."""
    from proofs_checks.output import catalogue

    entries, origin, doc, cached = _catalogue(store, refresh, [claim_id])
    chosen = _select_entries(entries, [claim_id])
    if len(chosen) != 1:
        raise UsageError(f"{claim_id!r} matches {len(chosen)} claims; show takes one id")
    e = chosen[0]
    from proofs_checks.fingerprint import derivation_cache_on

    # a plugin's derivation may read files and variables beyond its sources: only its own cache, which checks them,
    # answers for it (the catalogue's copy answered after such an input changed: hostile pass 19a F1); with the
    # derivation caches off, nothing cached answers
    usable = derivation_cache_on() and not e.get("plugin")
    if usable and e.get("derivation") is not None:
        return e, e["derivation"], f"{origin}; its sources are unchanged since it was generated"
    claim = _select([e["id"]])[0]
    info, from_cache = catalogue.derivation_and_origin(claim)
    if cached and usable and not info.get("timeout") and not info.get("error"):  # only a derivation that ended
        catalogue.cache_derivation(doc, e["id"], info, store.cache_dir)
    if from_cache:
        return e, info, ("the plugin's derivation cache; its sources and the inputs it read are unchanged"
                         if e.get("plugin") else "docs/catalogue.json; the built-in claims' sources are unchanged")
    return e, info, "computed now"


def _fmt_num(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "–" if x is None else str(x)


@cli.command("show")
@click.argument("claim_id")
@_json_flag_option
@click.option("--full", "full", is_flag=True,
              help="Also print each clause's evidence and scope, the derivation (steps, assumptions, obligations, "
                   "provenance, legend), the checks, the mutants and the last result's checks.")
@click.option("--refresh", is_flag=True, help="Recompute from the registry (ignore every cached catalogue).")
@click.option("--latex", "as_latex", is_flag=True, help="Print statements and steps as LaTeX (default: Unicode maths).")
@_store_option
def show_cmd(claim_id, json_path, store_dir, refresh, as_latex, full):
    """Show a claim, summary first: title, statement, hypotheses and clauses (one line each, with
    their evidence) and its last result. --full adds the derivation (each step derived or assumed;
    the assumptions; the obligations and their residuals; provenance; legend), checks and mutants."""
    from proofs_checks.store import load_last

    store = _store(store_dir)
    _check_json_target(json_path)
    e, info, how = _show_data(claim_id, store, refresh)
    last_path = store.last_path(e["id"])
    last = load_last(e["id"], store)
    if last and last.get("sources"):  # kept before a source it depends on changed (tverify's, a plugin's): said
        from proofs_checks.fingerprint import source_fingerprint

        # a built-in claim depends on tverify's code alone, not on the plugins installed beside it (47b F7)
        own = last.get("sources_tverify")
        changed = own != source_fingerprint(plugins=False) if isinstance(own, str) else \
            last["sources"] != source_fingerprint()
        last = {**last, "sources_changed_since": changed}
    if json_path:
        _write_json(json_path, {**{k: v for k, v in e.items() if k != "derivation"},
                                "derivation": info.get("steps") or [], "derivation_error": info.get("error"),
                                "derivation_from": how, "obligations": info.get("obligations") or [],
                                "assumptions": info.get("assumptions") or [], "provenance": info.get("provenance") or {},
                                "hypotheses": info.get("hypotheses") or e.get("hypotheses") or [],
                                "legend": info.get("legend") or {}, "store": str(store.root),
                                "last_result_path": str(last_path), "last_result": last})
        return
    _show_print(e, info, how, last, last_path, store, full=full, as_latex=as_latex)


def _with_sources(result_json: dict) -> dict:
    """A claim's result with the fingerprint of the sources it came from (tverify's, the plugins'): `show` says when
    they have changed since it was kept (hostile pass 21b F8)."""
    try:
        from proofs_checks.fingerprint import source_fingerprint

        from proofs_checks.registry import BUILTIN

        own = {"sources_tverify": source_fingerprint(plugins=False)} if result_json.get("id") in BUILTIN else {}
        return {**result_json, "sources": source_fingerprint(), **own}
    except Exception:  # noqa: BLE001 - no fingerprint: kept without one (show then says nothing of it)
        return result_json


def _show_print(e, info, how, last, last_path, store, *, full: bool, as_latex: bool) -> None:
    """``show``'s text: the summary, and with ``--full`` the rest (see :mod:`proofs_checks.output.terminal`)."""
    from proofs_checks.output import terminal

    out = _console()
    cols = terminal.width(sys.stdout)
    math = (lambda x: str(x or "")) if as_latex else terminal.math_text
    hyps = info.get("hypotheses") or e.get("hypotheses") or []
    unreadable = not last and Path(str(last_path)).exists()
    import shlex

    flag = f"--store {shlex.quote(str(store.root))} " if store.source == "--store" else ""
    lines = terminal.show_summary(e, hyps, last, cols=cols, unreadable=unreadable, math=math, store_flag=flag)
    if full:
        lines = lines[:-1] + terminal.show_full(e, info, how, math=math, as_latex=as_latex)
        lines += terminal.last_checks(last, f"looked in {last_path}; store {store.describe()}")
    terminal.print_lines(out, lines, cols, STATUS_STYLE, unbrace=not as_latex)


def _prepare_run(patterns, device, allow_skip, json_path, store_dir, save: bool = True, extra_check=None):
    """Everything a run needs checked before it starts, in this order: the claims, the device,
    ``extra_check()`` (the report folder), the JSON path, the store (an unwritable default store
    only warns, after every usage error had its chance). Returns (claims, store or None, extra)."""
    _precheck_patterns(patterns)
    if json_path == "-":
        _check_json_target(json_path)  # a closed standard output: refused before the registry loads (about 4 s)
    from proofs_checks.runner import derivation_budget

    derivation_budget()  # a bad TVERIFY_DERIVATION_BUDGET: one line before anything runs
    claims = _select(patterns)
    require_device(device, allow_skip)
    extra = extra_check() if extra_check is not None else None
    _check_json_target(json_path)
    store = _store(store_dir) if save else None
    if store is not None and json_path and json_path != "-":  # (the store --store names: 48b F8)
        from proofs_checks.store import refuse_inside_store

        refuse_inside_store(Path(json_path).expanduser().absolute(), "--json", json_path, store)
    if store is not None and not _check_store(store):
        store = None
    return claims, store, extra


@cli.command("run")
@click.argument("patterns", nargs=-1)
@claim_run_options
@_store_option
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
@cluster_option
def run_cmd(patterns, mode, device, allow_skip, seed, json_path, store_dir, no_progress, cluster):
    """Verify claims (all, or those matching PATTERNS: ids, globs like 'icl.*', group names).

    Exit 0 when every claim is verified (or evidence); 1 when one is refuted, errored or incomplete;
    3 when none failed but one is undecided."""
    import time

    from proofs_checks.context import RunContext

    claims, store, _ = _prepare_run(patterns, device, allow_skip or _remote(cluster), json_path, store_dir)
    started = time.monotonic()
    ctx = RunContext(mode=mode, seed=seed, device=device)
    if cluster:
        results = _run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                                  progress=not no_progress, store=store).claims
    else:
        results = _run_selected(claims, ctx, progress=not no_progress, store=store)
    if json_path:
        from proofs_checks.output.report import results_document

        _write_json(json_path, results_document(results, claims={c.id: c for c in claims}, command=_command_line(),
                                                mode=mode, seed=seed, device=device))
    con = _console(stderr=json_path == "-")
    con.print(_summary_table(results))
    con.print(_totals(results, time.monotonic() - started))
    from proofs_checks.runner import exit_code

    sys.exit(exit_code(r.status for r in results))


@cli.command("mutants")
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

    claims, _, _ = _prepare_run(patterns, device, allow_skip or _remote(cluster), json_path, None, save=False)
    if cluster:
        run = _run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                              progress=not no_progress, claims_run=True, mutants=True)
        results, res = run.claims, run.mutants
        refusals = refuse_mutants(results, res)
    else:
        ctx = RunContext(mode=mode, seed=seed, device=device)
        results = _run_selected(claims, ctx, progress=not no_progress)
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


@cli.command("report")
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
        root = _store(store_dir).root  # the run writes there before the folder is replaced: never inside it
        if root == out or out in root.parents:
            raise UsageError(f"results store {root}: inside --out {out_dir}, which the report replaces (the run "
                             "would write there first, and the report would then be refused); keep the store elsewhere")
        if root in out.parents:  # the mirror: the report in the store's own folders (its results, its caches: 47b F4)
            raise UsageError(f"--out {out_dir}: inside the results store {root}, whose folders the run writes and "
                             "tverify keeps (results, caches); write the report elsewhere")
        return out

    import time

    claims, store, out = _prepare_run(patterns, device, allow_skip or _remote(cluster), json_path, store_dir,
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
            run = _run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                                  progress=not no_progress, mutants=mutants, figure_dir=Path(figs), store=store,
                                  continuous=mutants, extra=extra)
            results, mres = run.claims, run.mutants
        else:
            results = _run_selected(claims, ctx, progress=not no_progress, store=store)
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


@cli.command("reproduce")
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


@cli.command("sweep")
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
    require_device(device, allow_skip or _remote(cluster))
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
                  *(_fmt_num(r.get(h)) for h in tgt.headline[:4]), _esc((r.get("error") or r.get("reason") or "")[:120]))
    con = _console(stderr=json_path == "-")
    con.print(t)
    if out is not None:
        con.print(f"sweep written to {path}")
    sys.exit(sw.exit_code(doc))


@cli.group("check", cls=_LazySanityGroup)
def check_group():
    """Research sanity checks on your own configurations and models (one subcommand per topic)."""


def _register_extension_commands() -> None:
    from proofs_checks.cli_extend import new_claim_cmd

    cli.add_command(new_claim_cmd)
    from proofs_checks.survey_cmd import survey_cmd  # issue 27: tverify survey

    cli.add_command(survey_cmd)


_register_extension_commands()


def _os_error_text(exc: OSError) -> str:
    """An OS error in a few words: a copy of a folder (``shutil.Error``) fails with a list of ``(source, target, why)``,
    one per file (a full disk gave a 1.5 kB list: hostile pass 31a note); its first reason, and how many there were."""
    import shutil

    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        errors = exc.args[0]
        first = errors[0][-1] if isinstance(errors[0], tuple) else errors[0]
        return f"{str(first)[:200]}" + (f" (and {len(errors) - 1} more files)" if len(errors) > 1 else "")
    return str(exc.strerror or exc)[:300]


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``argv`` None: ``sys.argv``) or one command in the caller's process: the command line run
    as a process of its own by :func:`proofs_checks.entry.run_command` (its start, signals, exit codes)."""
    run_command(argv, lambda args: _main(args))


def _main(argv: list[str] | None = None) -> None:
    """One command line (``sys.argv[1:]`` when ``argv`` is None) run by the click group in this process; what ends it
    as one line and an exit code (:class:`SystemExit`)."""
    from proofs_checks.store import OutputPathError

    bad = _unrepresentable_number(list(sys.argv[1:] if argv is None else argv))
    if bad is not None:
        _stderr_line(f"tverify: error: {bad[0]}: " + ("the number overflows a float64 (the largest is about 1.8e308)"
                                                      if bad[1] == "over" else "the number is below a float64's range "
                                                      "and would be read as 0 (the smallest positive is about 4.9e-324)"))
        sys.exit(2)
    under = _underscored_number(list(sys.argv[1:] if argv is None else argv))
    if under is not None:
        path = "" if under.startswith("--") else f"; a path that reads as a number: write it ./{under}"
        _stderr_line(f"tverify: error: {under}: write the number in ASCII digits 0-9 without '_' (Python reads 1_0 as "
                     f"10 and ١٠ as 10{path})")
        sys.exit(2)

    from proofs_checks.console import set_argv

    set_argv(argv)
    import os

    for var in ("COLUMNS", "LINES"):  # rich reads them with int(): COLUMNS=²² was a traceback (48b F2); not a
        v = os.environ.get(var)  # number in ASCII digits, the terminal's own size is used, as for COLUMNS=abc
        if v is not None and not (v.strip().isascii() and v.strip().isdigit()):
            del os.environ[var]
    try:
        cli.main(args=argv, prog_name="tverify", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _stderr_line("tverify: interrupted; nothing was written after the interrupt (earlier outputs are as they were)")
        sys.exit(130)
    except click.ClickException as exc:  # usage errors, bad options, UsageError above
        msg = " ".join(exc.format_message().split())
        _stderr_line(f"tverify: error: {msg}")
        sys.exit(2)
    except OutputPathError as exc:
        _stderr_line(f"tverify: error: {' '.join(str(exc).split())}")
        sys.exit(2)
    except FileNotFoundError as exc:
        _stderr_line(f"tverify: error: file not found: {exc.filename or exc}")
        sys.exit(2)
    except (KeyboardInterrupt, _Interrupted):
        _stderr_line("tverify: interrupted; nothing was written after the interrupt (earlier outputs are as they were)")
        sys.exit(130)
    except Exception as exc:
        from theory.validation import InputError

        cause = _terminated_in(exc)
        if cause is not None:  # a signal turned into another exception on its way (an extension's ImportError)
            raise cause from None
        if isinstance(exc, InputError):
            _stderr_line(f"tverify: error: {' '.join(str(exc).split())}")
            sys.exit(2)
        msg = _write_failure(exc) if isinstance(exc, OSError) else None
        if msg is not None:
            _stderr_line(f"tverify: error: {msg}")
            _quiet_stdout()
            sys.exit(2)
        raise
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
