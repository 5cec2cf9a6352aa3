"""The ``tverify`` script's entry point (and ``python -m proofs_checks``'s): ``sys.path`` put in order before the
command imports anything of its own.

Python puts ``$PYTHONPATH``'s folders before the standard library's and the installed packages': a ``json.py`` there
ran inside tverify, and a project's own ``theory/`` package there (an ordinary name for one) was imported in place of
tverify's (hostile pass 21a F4). The standard library's, the installed packages' and tverify's own folders now come
first, and tverify's three packages are bound from its own folder, before the command's modules are imported; the
other folders (``$PYTHONPATH``, the working folder for ``python -m``) stay on the path after them, so a plugin or a
user's module found there still imports. This module imports nothing the interpreter has not loaded at start; what
Python itself imports before it runs (``site``, ``re`` for the script) is Python's start-up, outside any program's
reach (``python -I`` ignores ``$PYTHONPATH`` altogether).
"""

import os
import sys


def working_folder() -> None:
    """Exit 2 with one line where the working folder no longer exists (a shell left in a folder a ``git checkout`` or
    ``rm -rf`` removed): every command reads it (relative paths, the path of ``python -m``), and ``os.getcwd()``
    raised a traceback (hostile pass 47a F3)."""
    try:
        os.getcwd()
    except OSError as exc:
        try:
            sys.stderr.write("tverify: error: the working folder no longer exists or cannot be read "
                             f"({exc.strerror or exc}): run tverify from a folder that exists\n")
        except (OSError, ValueError):
            pass
        raise SystemExit(2) from None


def main():
    working_folder()
    try:  # Ctrl-C while the command's modules load (before its own handler is set): one line, exit 130 (23a F2)
        from proofs_checks import syspath

        sys.path[:] = syspath.child_sys_path(sys.path)
        sys.path[:] = syspath.without_own(sys.path)  # (binds the three packages through the path just set)
        _note_outputs(sys.argv[1:])
        from proofs_checks.cli import main as command
    except KeyboardInterrupt:
        try:
            sys.stderr.write("tverify: interrupted while starting; nothing was run or written\n")
        except (OSError, ValueError):
            pass
        raise SystemExit(130) from None
    return command()


def _note_outputs(argv: list[str]) -> None:
    """What is at each ``--out``/``--json`` path now, at the command's start, before its heavy imports (seconds):
    ``--force`` consents to replacing that, not what appears there while the command starts (hostile pass 23a F3).
    The command's own check later takes this first note (:func:`proofs_checks.owned.note_seen`, ``at_start``)."""
    from proofs_checks import owned

    given: dict[str, list[str]] = {}
    for i, tok in enumerate(argv):
        for opt in ("--out", "--json", "--docs-dir"):
            value = tok[len(opt) + 1:] if tok.startswith(opt + "=") else (
                argv[i + 1] if tok == opt and i + 1 < len(argv) else None)
            if value:
                given.setdefault(opt, []).append(value)
    paths = [v for v in given.get("--out", []) + given.get("--json", []) if v != "-"]
    paths += [os.path.join(d, n) for d in given.get("--docs-dir", []) for n in owned.CATALOGUE_FILES]
    default = owned.DEFAULT_OUT.get(_command(argv) or "")
    if default and "--out" not in given and not (default == "sweep" and "--json" in given):
        paths.append(default)  # the command's default --out (24a F1: only a named one was noted)
    for value in paths:
        try:
            owned.note_seen(value, at_start=True)
        except (OSError, ValueError):
            pass


def _command(argv: list[str]) -> str | None:
    """The command word of ``argv`` (the first word that is not an option; ``--store DIR`` is the group's option)."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
        elif tok == "--store":
            skip = True
        elif not tok.startswith("-"):
            return tok
    return None
