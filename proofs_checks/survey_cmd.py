"""The ``tverify survey`` click command (registered in :mod:`proofs_checks.cli`); the work is in
:mod:`proofs_checks.survey.command`."""

from __future__ import annotations

import sys

import click

from proofs_checks.options import json_option, mode_options
from proofs_checks.owned import DEFAULT_OUT


def _timeout(ctx, param, value):
    from proofs_checks.sanity._common import finite_timeout

    return finite_timeout(value, "--timeout")


@click.command("survey")
@click.argument("names", nargs=-1)
@click.option("--list", "list_only", is_flag=True, help="List the catalogue (name, library, pinned release, declared "
                                                        "structure, adapter lines, known bug) and exit.")
@mode_options
@json_option
@click.option("--out", "out_dir", default=DEFAULT_OUT["survey"], show_default=True, metavar="DIR",
              help="Page folder: a new one, or a previous survey's output (replaced atomically); anything else is "
                   "refused unless --force.")
@click.option("--force", is_flag=True, help="Replace --out even if it is not a previous survey's output.")
@click.option("--cache-dir", default=None, metavar="DIR", help="Install cache, one folder per pinned release "
              "(default $TVERIFY_SURVEY_CACHE or .tverify/survey-cache).")
@click.option("--no-install", is_flag=True, help="Install nothing: entries whose pins are neither in the running "
                                                 "environment nor in the cache are rows saying so.")
@click.option("--timeout", default=180.0, show_default=True, type=float, metavar="S", callback=_timeout,
              help="Per-entry time limit in seconds, at most 1e7 (the entry's process is killed; its row says so).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1), help="Base seed (0 … 4294967295).")
@click.option("--no-progress", is_flag=True, help="No progress lines on stderr (problems are still reported).")
def survey_cmd(names, list_only, mode, json_path, out_dir, force, cache_dir, no_install, timeout, seed, no_progress):
    """Run `tverify check attention` over a catalogue of real attention implementations (all, or NAMES),
    each pinned release in its own process with its own install, and write a page: one row per
    implementation and release, one column per property (verdict, error / tolerance), the adapter,
    and the upstream issue or a reproduction script for each finding (docs/survey.md).

    \b
    Examples:
      tverify survey --list
      tverify survey --quick --out survey --json -
      tverify survey local-attention-1.2.1 local-attention-1.2.2 --quick

    Exit 0 when the survey ran (library findings, failed installs and time-outs are rows); 1 when a
    check itself erred or contradicted a recorded known-bug/fixed release; 2 usage error."""
    from proofs_checks.survey.command import run_command

    sys.exit(run_command(names, list_only=list_only, mode=mode, json_path=json_path, out_dir=out_dir, force=force,
                         cache_dir=cache_dir, install=not no_install, timeout=timeout, seed=seed,
                         progress=not no_progress))
