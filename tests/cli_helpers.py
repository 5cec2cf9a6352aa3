"""Running ``tverify`` in-process from tests: exit code, stdout and stderr, and the one-line
usage-error contract."""

from __future__ import annotations

import contextlib
import io

from proofs_checks.cli import main

__all__ = ["invoke", "one_line_error"]


def invoke(*argv: str) -> tuple[int, str, str]:
    """``tverify ARGV...`` in this process: ``(exit code, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def one_line_error(code: int, err: str) -> str:
    """Assert a usage error: exit 2, no traceback, one ``tverify: error:`` line; return it."""
    assert code == 2 and "Traceback" not in err, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tverify: error:"), err
    return lines[0]
