"""The one-line user error of every command, and :func:`visible` (text a plugin or a store gave, shown with its
control characters escaped); the lowest layer of ``proofs_checks``: it imports nothing of the project.

>>> UsageError("--seed: must be ≥ 0").exit_code
2
"""

from __future__ import annotations

import re

import click

__all__ = ["UsageError", "CONTROL", "visible"]


class UsageError(click.UsageError):
    """A user mistake: printed as one line, exit code 2."""


#: control characters and bidirectional overrides: a terminal obeys them (recolours, clears, reorders)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    r"""``text`` with its control characters (:data:`CONTROL`) written as escapes: a message a plugin's
    check computed (its justification, its exception) is printed by ``run``/``show``, where an escape
    sequence would recolour or clear the terminal (hostile pass 7, F4).

    >>> visible("a\x1b[2Jb\u202ec")
    'a\\x1b[2Jb\\u202ec'
    """
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                        text)
