"""The one-line user error of every command, and :func:`visible` (text a plugin or a store gave, shown with its
control characters escaped); the lowest layer of ``proofs_checks``: it imports nothing of the project.

>>> UsageError("--seed: must be ≥ 0").exit_code
2
"""

from __future__ import annotations

import re
from typing import Any

import click

__all__ = ["UsageError", "CONTROL", "visible", "CLAIM_ID", "MAX_ID_LENGTH", "id_problem"]


class UsageError(click.UsageError):
    """A user mistake: printed as one line, exit code 2."""


#: a claim id: ``group.name``, lowercase letters, digits and ``_`` (matched whole: ``fullmatch``, so no trailing newline
#: passes as ``$`` let it, hostile pass 43b F3)
CLAIM_ID = re.compile(r"[a-z][a-z0-9]*\.[a-z0-9_]+")
#: an id names files (a report's page, the store's records): well under a file name's 255 bytes with their suffixes
#: (hostile pass 43b F6: a 269-character id ran, then the report could not be written)
MAX_ID_LENGTH = 120


def id_problem(claim_id: object) -> str | None:
    """What is wrong with ``claim_id`` as a claim id, or None.

    >>> id_problem("attn.softmax"), id_problem("attn.x\\n"), id_problem("a." + "b" * 200)[:22]
    (None, "must look like 'group.name' (lowercase letters, digits, _)", 'must be at most 120 ch')
    """
    if not isinstance(claim_id, str) or not CLAIM_ID.fullmatch(claim_id):
        return "must look like 'group.name' (lowercase letters, digits, _)"
    if len(claim_id) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters (it names files), got {len(claim_id)}"
    return None


#: control characters and bidirectional overrides: a terminal obeys them (recolours, clears, reorders)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")  # (lone surrogates:
# what os.fsdecode makes of a byte that is not UTF-8; no file can hold one: a report of such a title ended in a
# UnicodeEncodeError traceback, hostile pass 46b F12)


def visible(text: str) -> str:
    r"""``text`` with its control characters (:data:`CONTROL`) written as escapes: a message a plugin's
    check computed (its justification, its exception) is printed by ``run``/``show``, where an escape
    sequence would recolour or clear the terminal (hostile pass 7, F4).

    >>> visible("a\x1b[2Jb\u202ec")
    'a\\x1b[2Jb\\u202ec'
    """
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                        text)


def visible_all(obj: Any, keep: tuple[str, ...] = ("mathml",)) -> Any:
    """:func:`visible` over every string of a JSON-like ``obj`` (dict values under ``keep`` left as they are: markup
    escaped where it is written): texts a plugin's code produces as it runs — derivation steps, counterexamples —
    reach the terminal as its declared texts do (hostile pass 46b F13)."""
    if isinstance(obj, str):
        return visible(obj)
    if isinstance(obj, dict):
        return {k: (v if k in keep else visible_all(v, keep)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(visible_all(v, keep) for v in obj)
    return obj
