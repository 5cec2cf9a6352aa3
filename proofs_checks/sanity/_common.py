"""Pieces shared by the ``tverify check`` subcommands: the ``--json`` option, JSON output and
the text/JSON emission of a result with its :class:`~proofs_checks.sanity._verdict.Verdict`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from proofs_checks.options import UsageError
from proofs_checks.sanity._verdict import Verdict, _jsonable

__all__ = ["json_path_option", "check_options", "check_json_target", "emit"]


def json_path_option(f):
    """``--json PATH|-`` as under ``run`` (``PATH`` or ``-`` for stdout); a bare ``--json`` (the
    older flag spelling) also means stdout."""
    return click.option("--json", "json_path", metavar="PATH|-", default=None, is_flag=False, flag_value="-",
                        help="Write the result as JSON to PATH ('-', or --json alone: stdout).")(f)


def check_json_target(json_path: str | None) -> None:
    """Refuse, before any work, a ``--json`` target that cannot be written as a file (empty, a
    folder, a device, read-only, under a file): a usage error, one line."""
    if json_path is None or json_path == "-":
        return
    from proofs_checks.store import OutputPathError, check_output_file

    try:
        check_output_file(json_path, "--json")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None


def _write_json(path: str, doc: dict) -> None:
    text = json.dumps(_jsonable(doc), indent=1, allow_nan=False)
    if path == "-":
        click.echo(text)
        return
    from proofs_checks.store import atomic_write_text

    try:
        atomic_write_text(Path(path), text + "\n")
    except OSError as exc:
        raise UsageError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


def emit(doc: dict, verdict: Verdict, text_lines: list[str], json_path: str | None) -> None:
    """Add the verdict to ``doc`` (``outcome``, ``verdict`` = the summary, ``ok``, ``decision`` =
    the whole verdict), print the text (to stderr, reduced to the verdict, when the JSON goes to
    stdout), write the JSON, and exit with the verdict's code (0 ok, 1 mismatch, 3 inconclusive)."""
    doc["outcome"] = verdict.outcome
    doc["verdict"] = verdict.summary
    doc["ok"] = verdict.ok
    doc["decision"] = verdict.to_json()
    if json_path == "-":
        for line in verdict.lines():
            click.echo(line, err=True)
    else:
        for line in text_lines + verdict.lines():
            click.echo(line)
    if json_path:
        _write_json(json_path, doc)
    sys.stdout.flush()
    raise SystemExit(verdict.exit_code)


def check_options(f):
    """The options every ``tverify check`` subcommand shares: seed, device, sizes, --json,
    --max-memory, --no-progress."""
    from proofs_checks import guards
    from proofs_checks.options import device_option, mode_options, seed_option

    for deco in (guards.no_progress_option, guards.max_memory_option, json_path_option, mode_options, device_option,
                 seed_option):
        f = deco(f)
    return f
