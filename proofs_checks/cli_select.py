"""What the claim commands share (``run``, ``show``, ``list`` in :mod:`proofs_checks.cli`; ``mutants``, ``report``,
``sweep`` in :mod:`proofs_checks.cli_batch`): selecting claims (from the registry, or from the catalogue without
importing the claim modules), the results store and the output paths checked before a run, and running the selected
claims in this process or on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from proofs_checks.console import check_json_target as _check_json_target
from proofs_checks.options import UsageError, require_device
from proofs_checks.run_output import _Progress

#: claim statuses that make ``run`` / ``report`` exit 1 (the runner's ``FAILING``)
FAILING = ("refuted", "error", "incomplete")


def _warn(message: str) -> None:
    click.echo(f"tverify: warning: {message}", err=True)


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


def _remote(cluster: str | None) -> bool:
    """``--cluster`` names a running scheduler (its workers, not this machine, need CUDA)."""
    return bool(cluster) and not str(cluster).strip().startswith("local")


def _run_on_cluster(cluster, claims, *, mode, seed, device, allow_skip, progress: bool, claims_run: bool = True,
                    mutants: bool = False, figure_dir=None, store=None, continuous: bool = False, extra=()):
    """``--cluster``: the claims (and/or their kill matrix) as tasks on a Dask cluster (see
    :mod:`proofs_checks.distributed.claim_tasks`); the same results as :func:`_run_selected` / :func:`proofs_checks.cli_batch._run_mutants`.
    Returns a :class:`~proofs_checks.distributed.claim_tasks.ClusterRun` (``continuous``: the claims'
    continuous-mutant rows, when the run was cut per claim; ``extra``: more tasks, run beside them).
    The store is written only once every task has finished (Ctrl-C leaves nothing half-done)."""
    from proofs_checks.distributed.claim_tasks import granularity, plan_claims
    from proofs_checks.distributed.cluster import interrupt_once, open_client, run_tasks
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


def _fmt_num(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "–" if x is None else str(x)
