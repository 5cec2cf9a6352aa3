"""``tverify``: list, show, run and report claims; run mutants; sanity-check user configurations.

Exit codes: 0 everything verified (or evidence / skipped), 1 something refuted or errored,
2 usage error (one line on stderr, never a traceback). The CLI holds no maths: it selects claims,
calls the runner and the report writers, and formats.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from proofs_checks.context import RunContext
from proofs_checks.registry import UnknownClaimError, registry, select
from theory.validation import InputError

# Off a terminal (CI logs, pipes) rich would fold tables to 80 columns; give them room instead.
out_console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)

STATUS_STYLE = {
    "verified": "green",
    "evidence": "cyan",
    "skipped": "yellow",
    "refuted": "bold red",
    "error": "bold magenta",
}


class UsageError(click.UsageError):
    """A user mistake: printed as one line, exit code 2."""


def _mode_options(f):
    f = click.option("--full", "mode", flag_value="full", help="Larger sizes, more seeds.")(f)
    f = click.option("--quick", "mode", flag_value="quick", help="Small sizes (what the tests use).")(f)
    f = click.option("--default-size", "mode", flag_value="default", default=True, hidden=True)(f)
    return f


def _run_options(f):
    f = click.option("--seed", type=int, default=0, show_default=True, help="Base seed; every check derives its seeds from it.")(f)
    f = click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
                     help="Device for trained-model checks; without CUDA, --device cuda skips them with a reason.")(f)
    return _mode_options(f)


def _select(patterns) -> list:
    try:
        return select(patterns)
    except UnknownClaimError as exc:
        raise UsageError(str(exc).strip("'\"")) from None


def _command_line() -> str:
    return "tverify " + " ".join(shlex.quote(a) for a in sys.argv[1:])


class _Progress:
    """A rich progress bar on a terminal; one line per item otherwise (CI logs)."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.total, self.label, self.done = total, label, 0
        self.tty = err_console.is_terminal and enabled
        self.enabled = enabled
        self._p = None
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                               console=err_console, transient=True)
            self._task = self._p.add_task(label, total=total)

    def __enter__(self):
        if self._p:
            self._p.__enter__()
        return self

    def __exit__(self, *exc):
        if self._p:
            self._p.__exit__(*exc)

    def start(self, name: str):
        if self._p:
            self._p.update(self._task, description=f"{self.label}: {name}")

    def advance(self, name: str, status: str = "", seconds: float | None = None):
        self.done += 1
        if self._p:
            self._p.advance(self._task)
        elif self.enabled:
            extra = f" {status}" if status else ""
            extra += f" ({seconds:.1f}s)" if seconds is not None else ""
            err_console.print(f"[{self.done}/{self.total}] {name}{extra}")


def _run_selected(claims, ctx: RunContext, progress: bool):
    from proofs_checks.runner import run_claim
    from proofs_checks.store import save_last

    results = []
    with _Progress(len(claims), "verifying", progress) as bar:
        for c in claims:
            bar.start(c.id)
            r = run_claim(c, ctx)
            save_last(r.to_json())
            results.append(r)
            bar.advance(c.id, r.status, r.seconds)
    return results


def _run_mutants(claims, ctx: RunContext, progress: bool):
    from proofs_checks.runner import run_mutant

    pairs = [(c, m) for c in claims for m in c.all_mutants()]
    out = []
    with _Progress(len(pairs), "mutants", progress) as bar:
        for c, m in pairs:
            bar.start(f"{c.id}:{m.name}")
            r = run_mutant(c, m, ctx)
            out.append(r)
            bar.advance(f"{c.id}:{m.name}", "killed" if r.killed else "SURVIVED", r.seconds)
    return out


def _summary_table(results) -> Table:
    t = Table(title="tverify results", show_lines=False)
    for col in ("claim", "kind", "status", "max err/tol", "s", "note"):
        t.add_column(col, overflow="fold")
    for r in results:
        ratio = r.max_error_ratio
        t.add_row(r.id, r.kind, f"[{STATUS_STYLE.get(r.status, '')}]{r.status}[/]",
                  "–" if ratio != ratio else f"{ratio:.2g}", f"{r.seconds:.2f}", r.message[:120])
    return t


def _write_json(path: str, doc: dict[str, Any]) -> None:
    from proofs_checks.store import atomic_write_text

    text = json.dumps(doc, indent=1)
    if path == "-":
        click.echo(text)
    else:
        try:
            atomic_write_text(Path(path), text)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="transformer-theory-verify", prog_name="tverify")
def cli():
    """Verify claims from the theory of transformers: SymPy derivation, numeric reference and
    trained torch model, compared under justified tolerances.

    \b
    Examples:
      tverify list
      tverify run 'attn.*' --json out.json
      tverify show icl.gamma_n_global_min
      tverify mutants 'icl.*'
      tverify report --out reports
    """


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.argument("patterns", nargs=-1)
def list_cmd(patterns, as_json):
    """List registered claims (optionally only those matching PATTERNS: ids, globs, group names)."""
    claims = _select(patterns)
    if as_json:
        click.echo(json.dumps([{"id": c.id, "kind": c.kind, "title": c.title, "source": c.source,
                                "checks": [ch.name for ch in c.checks], "mutants": [m.name for m in c.all_mutants()]}
                               for c in claims], indent=1))
        return
    t = Table(title=f"{len(claims)} claims")
    for col in ("id", "kind", "title", "checks", "mutants"):
        t.add_column(col, overflow="fold")
    for c in claims:
        t.add_row(c.id, c.kind, c.title, " ".join(f"{ch.layer[:3]}:{ch.name}" for ch in c.checks), str(len(c.all_mutants())))
    out_console.print(t)


@cli.command("show")
@click.argument("claim_id")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def show_cmd(claim_id, as_json):
    """Show a claim: statement, source, derivation steps, checks, mutants and its last result."""
    from proofs_checks.runner import _derivation_steps
    from proofs_checks.store import load_last

    claims = _select([claim_id])
    if len(claims) != 1:
        raise UsageError(f"{claim_id!r} matches {len(claims)} claims; show takes one id")
    c = claims[0]
    steps, derr = _derivation_steps(c)
    last = load_last(c.id)
    if as_json:
        click.echo(json.dumps({"id": c.id, "kind": c.kind, "title": c.title, "statement": c.statement, "source": c.source,
                               "stated_statement": c.stated_statement or None, "derivation": steps, "derivation_error": derr,
                               "checks": [{"name": ch.name, "layer": ch.layer, "description": ch.description} for ch in c.checks],
                               "mutants": [{"name": m.name, "kind": m.kind, "description": m.description} for m in c.all_mutants()],
                               "last_result": last}, indent=1))
        return
    out_console.print(f"[bold]{c.id}[/] — {c.title}  ({c.kind})")
    out_console.print(f"source: {c.source}")
    out_console.print(f"statement: {c.statement}")
    if c.kind == "erratum":
        out_console.print(f"as stated in the seed: {c.stated_statement}")
    if c.notes:
        out_console.print(f"notes: {c.notes}")
    if steps:
        out_console.print("\n[bold]derivation[/]")
        for i, s in enumerate(steps, 1):
            out_console.print(f"  {i}. {s['text']}" + (f"\n       {s['latex']}" if s["latex"] else ""))
    if derr:
        out_console.print(f"[red]derivation error: {derr}[/]")
    out_console.print("\n[bold]checks[/]")
    for ch in c.checks:
        out_console.print(f"  [{ch.layer}] {ch.name}: {ch.description}")
    out_console.print("\n[bold]mutants[/]")
    for m in c.all_mutants():
        out_console.print(f"  {m.name} ({m.kind}): {m.description}")
    out_console.print("\n[bold]last result[/]")
    if not last:
        out_console.print("  none yet (run `tverify run " + c.id + "`)")
    else:
        out_console.print(f"  {last['status']} (mode {last['mode']}, seed {last['seed']}, device {last['device']}) {last.get('message') or ''}")
        for ch in last["checks"]:
            out_console.print(f"    {ch['name']}: {ch['status']} error={ch.get('error')} tol={ch.get('tolerance')} — {ch.get('justification') or ch.get('skip_reason') or ch.get('error_message') or ''}")


@cli.command("run")
@click.argument("patterns", nargs=-1)
@_run_options
@click.option("--json", "json_path", metavar="PATH", help="Write the results as JSON to PATH ('-' for stdout).")
@click.option("--no-progress", is_flag=True, help="No progress output on stderr.")
def run_cmd(patterns, mode, device, seed, json_path, no_progress):
    """Verify claims (all, or those matching PATTERNS: ids, globs like 'icl.*', group names)."""
    claims = _select(patterns)
    ctx = RunContext(mode=mode, seed=seed, device=device)
    results = _run_selected(claims, ctx, progress=not no_progress)
    if json_path:
        from proofs_checks.report import results_document

        _write_json(json_path, results_document(results, claims={c.id: c for c in claims}, command=_command_line(),
                                                mode=mode, seed=seed, device=device))
    (err_console if json_path == "-" else out_console).print(_summary_table(results))
    bad = [r for r in results if r.status in ("refuted", "error")]
    sys.exit(1 if bad else 0)


@cli.command("mutants")
@click.argument("patterns", nargs=-1)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_path", metavar="PATH", help="Write the kill table as JSON to PATH ('-' for stdout).")
@click.option("--no-progress", is_flag=True)
def mutants_cmd(patterns, seed, json_path, no_progress):
    """Run every planted mutant through its claim's checks (quick sizes); exit 1 if any survives."""
    claims = _select(patterns)
    ctx = RunContext(mode="quick", seed=seed)
    res = _run_mutants(claims, ctx, progress=not no_progress)
    if json_path:
        _write_json(json_path, {"tool": "tverify", "command": _command_line(), "seed": seed,
                                "total": len(res), "killed": sum(r.killed for r in res),
                                "mutants": [r.to_json() for r in res]})
    t = Table(title=f"mutants: {sum(r.killed for r in res)}/{len(res)} killed")
    for col in ("claim", "mutant", "kind", "killed by", "error", "tolerance"):
        t.add_column(col, overflow="fold")
    for r in res:
        t.add_row(r.claim, r.mutant, r.kind, r.killed_by or "[bold red]SURVIVED[/]",
                  f"{r.error:.3g}" if r.error == r.error else "–", f"{r.tolerance:.3g}" if r.tolerance == r.tolerance else "–")
    (err_console if json_path == "-" else out_console).print(t)
    sys.exit(0 if all(r.killed for r in res) else 1)


@cli.command("report")
@click.argument("patterns", nargs=-1)
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(file_okay=False), help="Output folder (replaced atomically).")
@_run_options
@click.option("--mutants/--no-mutants", default=True, show_default=True, help="Also run the mutants (quick sizes) and report the kill table.")
@click.option("--no-progress", is_flag=True)
def report_cmd(patterns, out_dir, mode, device, seed, mutants, no_progress):
    """Verify claims and write a report folder (report.md, results.json, figures)."""
    from proofs_checks.report import default_writers, results_document, write_report

    claims = _select(patterns)
    with tempfile.TemporaryDirectory(prefix="tverify-fig-") as figs:
        ctx = RunContext(mode=mode, seed=seed, device=device, figure_dir=Path(figs))
        results = _run_selected(claims, ctx, progress=not no_progress)
        mres = _run_mutants(claims, RunContext(mode="quick", seed=seed), progress=not no_progress) if mutants else None
        doc = results_document(results, claims={c.id: c for c in claims}, mutants=mres, command=_command_line(),
                               mode=mode, seed=seed, device=device)
        try:
            path = write_report(Path(out_dir), doc, figure_src=Path(figs), extra_writers=default_writers())
        except OSError as exc:
            raise UsageError(f"cannot write report to {out_dir}: {exc.strerror or exc}") from None
    out_console.print(_summary_table(results))
    out_console.print(f"report written to {path}")
    bad = [r for r in results if r.status in ("refuted", "error")]
    survived = [m for m in (mres or []) if not m.killed]
    sys.exit(1 if bad or survived else 0)


class _LazySanityGroup(click.Group):
    """``tverify check``: subcommands are the modules of ``proofs_checks.sanity`` (``att_svm`` ->
    ``att-svm``), imported only when used, so ``tverify --help`` does not load torch or cvxpy."""

    def _modules(self) -> dict[str, str]:
        import pkgutil

        import proofs_checks.sanity as pkg

        return {m.name.replace("_", "-"): f"{pkg.__name__}.{m.name}"
                for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}

    def list_commands(self, ctx):
        return sorted(self._modules())

    def get_command(self, ctx, name):
        import importlib

        mod = self._modules().get(name)
        if mod is None:
            return None
        cmd = getattr(importlib.import_module(mod), "command", None)
        return cmd if isinstance(cmd, click.Command) else None


@cli.group("check", cls=_LazySanityGroup)
def check_group():
    """Research sanity checks on your own configurations and models (one subcommand per topic)."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point. User mistakes: one line on stderr, exit 2."""
    try:
        cli.main(args=argv, prog_name="tverify", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:  # usage errors, bad options, UsageError above
        msg = exc.format_message().replace("\n", " ")
        click.echo(f"tverify: error: {msg}", err=True)
        sys.exit(2)
    except InputError as exc:
        click.echo(f"tverify: error: {exc}", err=True)
        sys.exit(2)
    except FileNotFoundError as exc:
        click.echo(f"tverify: error: file not found: {exc.filename or exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
