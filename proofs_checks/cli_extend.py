"""``tverify new-claim``: the commands for claim authors (registered in :mod:`proofs_checks.cli`)."""

from __future__ import annotations

from pathlib import Path

import click

from proofs_checks.options import UsageError


@click.command("new-claim")
@click.argument("claim_id")
@click.option("--dir", "folder", default=".", show_default=True, metavar="DIR",
              help="Folder to write the package into (created if missing). Existing files are never overwritten.")
def new_claim_cmd(claim_id, folder):
    """Write a plugin package with one claim CLAIM_ID (group.name) that verifies as written: a
    pyproject with the `tverify.claims` entry point, a claim module (derivation, symbolic, numeric and
    trained checks, two hypotheses, a clause, three mutants) and a test using the `tverify` fixture.
    Then: pip install -e DIR."""
    from proofs_checks.scaffold import ScaffoldError, files_for, write_scaffold
    from proofs_checks.store import OutputPathError, refuse_own_installation

    if not folder.strip():  # (an empty --dir wrote into the working folder without a word: 38a N3)
        raise UsageError("--dir: empty path; give a folder (--dir . for the working folder)")
    try:
        refuse_own_installation(folder, "--dir")
        # each file where it would land: a folder of the package linked into tverify's code was written through
        # (hostile pass 12a F5)
        for rel in files_for(claim_id):
            refuse_own_installation(Path(folder).expanduser() / rel, "--dir")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from None
    try:
        paths = write_scaffold(claim_id, Path(folder).expanduser())
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # the folder, or a folder on the way to a file, is a file (or cannot be made)
        where = Path(exc.filename) if getattr(exc, "filename", None) else Path(folder)
        what = f"{where} is a file, not a folder" if where.is_file() else f"{where}: {exc.strerror or exc}"
        raise UsageError(f"--dir {folder}: cannot write the package there: {what}") from None
    for p in paths:
        click.echo(f"wrote {p}")
    click.echo(f"next: pip install -e {folder}  &&  tverify run {claim_id} --quick  &&  tverify mutants {claim_id} --quick")
