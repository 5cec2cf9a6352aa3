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

import sys
from pathlib import Path
from typing import Any

import click

from proofs_checks.entry import (_quiet_stdout, _stderr_line, _terminated_in, _underscored_number,
                                 _unrepresentable_number, _write_failure, run_command)
from proofs_checks.owned import CATALOGUE_FILES
from proofs_checks.distributed.cluster import cluster_option
from proofs_checks.options import UsageError, claim_run_options

from proofs_checks import cli_select as _sel
from proofs_checks.cli_select import (FAILING, _check_store, _fmt_num, _precheck_patterns, _remote,  # noqa: F401
                                      _select_entries, _store, _store_option, _warn, _with_sources,
                                      select_entries_ids, select_entries_ids_of)
from proofs_checks.run_output import LAYERS, STATUS_STYLE, _Progress, _summary_table, _totals  # noqa: F401


# the shared helpers live in proofs_checks.console (the other command modules import them there)
from proofs_checks.console import Group as _BaseGroup  # noqa: E402
from proofs_checks.console import LazySanityGroup as _LazySanityGroup  # noqa: E402
from proofs_checks.console import check_json_target as _check_json_target  # noqa: E402
from proofs_checks.console import command_line as _command_line  # noqa: E402
from proofs_checks.console import console as _console  # noqa: E402
from proofs_checks.console import esc as _esc  # noqa: E402
from proofs_checks.console import table as _table  # noqa: E402
from proofs_checks.console import write_json as _write_json  # noqa: E402


def _json_flag_option(f):
    """``--json [PATH|-]`` for ``list`` and ``show``: alone, JSON on stdout (as under ``check``)."""
    from proofs_checks.options import reserve_stdout

    return click.option("--json", "json_path", metavar="[PATH|-]", default=None, is_flag=False, flag_value="-",
                        callback=reserve_stdout, help="Print JSON (--json alone or --json -), or write it to PATH.")(f)


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
    entries = _sel._catalogue(store, refresh, patterns)[0]
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
    claims = _sel._select([])
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

    entries, origin, doc, cached = _sel._catalogue(store, refresh, [claim_id])
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
    claim = _sel._select([e["id"]])[0]
    info, from_cache = catalogue.derivation_and_origin(claim)
    if cached and usable and not info.get("timeout") and not info.get("error"):  # only a derivation that ended
        catalogue.cache_derivation(doc, e["id"], info, store.cache_dir)
    if from_cache:
        return e, info, ("the plugin's derivation cache; its sources and the inputs it read are unchanged"
                         if e.get("plugin") else "docs/catalogue.json; the built-in claims' sources are unchanged")
    return e, info, "computed now"


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

    claims, store, _ = _sel._prepare_run(patterns, device, allow_skip or _remote(cluster), json_path, store_dir)
    started = time.monotonic()
    ctx = RunContext(mode=mode, seed=seed, device=device)
    if cluster:
        results = _sel._run_on_cluster(cluster, claims, mode=mode, seed=seed, device=device, allow_skip=allow_skip,
                                  progress=not no_progress, store=store).claims
    else:
        results = _sel._run_selected(claims, ctx, progress=not no_progress, store=store)
    if json_path:
        from proofs_checks.output.report import results_document

        _write_json(json_path, results_document(results, claims={c.id: c for c in claims}, command=_command_line(),
                                                mode=mode, seed=seed, device=device))
    con = _console(stderr=json_path == "-")
    con.print(_summary_table(results))
    con.print(_totals(results, time.monotonic() - started))
    from proofs_checks.runner import exit_code

    sys.exit(exit_code(r.status for r in results))




@cli.group("check", cls=_LazySanityGroup)
def check_group():
    """Research sanity checks on your own configurations and models (one subcommand per topic)."""


def _register_extension_commands() -> None:
    from proofs_checks.cli_batch import mutants_cmd, report_cmd, reproduce_cmd, sweep_cmd

    for command in (mutants_cmd, report_cmd, reproduce_cmd, sweep_cmd):
        cli.add_command(command)
    from proofs_checks.cli_extend import new_claim_cmd

    cli.add_command(new_claim_cmd)
    from proofs_checks.survey_cmd import survey_cmd  # issue 27: tverify survey

    cli.add_command(survey_cmd)


_register_extension_commands()


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
