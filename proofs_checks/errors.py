"""The one-line user error of every command (the lowest layer of ``proofs_checks``: it imports
nothing of the project).

>>> UsageError("--seed: must be ≥ 0").exit_code
2
"""

from __future__ import annotations

import click

__all__ = ["UsageError"]


class UsageError(click.UsageError):
    """A user mistake: printed as one line, exit code 2."""
