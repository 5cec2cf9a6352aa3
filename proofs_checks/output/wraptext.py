"""Text wrapped to the terminal's width with a hanging indent: what every terminal view uses
(``show``, ``run``, ``mutants`` and the ``check`` commands), so a wrapped line keeps its
indentation and a table row's continuation stays under its last column.

Imports nothing from the suite (the bottom layer): the ``check`` renderers and the console both use it.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap

__all__ = ["DEFAULT_WIDTH", "width", "hang_wrap", "wrap_lines", "unbrace_scripts"]

DEFAULT_WIDTH = 100
_GAP = re.compile(r"\S( {2,})(?=\S)")
_SCRIPT = re.compile(r"(?<!\\)([_^])\{([^{}]*)\}")
_TOKEN = re.compile(r"[A-Za-z0-9]+|\w['′]*|[⊤ᵀ*]")


def unbrace_scripts(text: str) -> str:
    """Sub- and superscripts braced the LaTeX way in plain text, written as in statements: one
    token bare, more in brackets (innermost first); a set's braces ``{…}`` are kept.

    >>> unbrace_scripts("e^{−β(Δ_i−2εM)}, Θ(T^{3/2}), W^{KQ}_{11}, Γ_N^{-1}, e^{xᵀy}, max {a, b}")
    'e^(−β(Δ_i−2εM)), Θ(T^(3/2)), W^KQ_11, Γ_N^(−1), e^(xᵀy), max {a, b}'
    """
    prev = None
    while prev != text and "{" in text:
        prev = text
        text = _SCRIPT.sub(lambda m: m[1] + (m[2] if _TOKEN.fullmatch(m[2]) else
                                              "(" + re.sub(r"(?<![\w)])-", "−", m[2]) + ")"), text)
    return text


def width(stream=None, fallback: int | None = DEFAULT_WIDTH) -> int | None:
    """The width to wrap to: ``COLUMNS`` when set (a pipe too), else the terminal's, else ``fallback``
    (100; the ``check`` commands pass ``None``: piped without ``COLUMNS`` they print whole lines)."""
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isascii() and cols.isdigit() and int(cols) >= 20:
        return int(cols)
    try:
        if stream is not None and stream.isatty():
            return max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, 20)
    except (AttributeError, ValueError, OSError):
        pass
    return fallback


def hang_wrap(text: str, cols: int, indent: int = 0, hang: int = 4) -> list[str]:
    """``text`` cut at word boundaries to ``cols`` columns: the first line indented by ``indent``
    spaces, the others by ``indent + hang`` (at most half the width). Never returns an empty list.

    >>> hang_wrap("alpha beta gamma delta", 20, indent=2, hang=2)
    ['  alpha beta gamma', '    delta']
    """
    first = " " * indent
    rest = " " * min(indent + hang, max(cols // 2, 0))
    parts = textwrap.wrap(text, width=max(cols, 20), initial_indent=first, subsequent_indent=rest,
                          break_on_hyphens=False, break_long_words=True, drop_whitespace=True)
    return parts or [first]


def _hang_of(line: str, cols: int) -> int:
    """Where a continuation of ``line`` starts: under its last column (a run of two or more spaces
    inside the text starts a column) when that leaves 30 columns, else its indentation plus 4."""
    lead = len(line) - len(line.lstrip(" "))
    gaps = [m.end(1) for m in _GAP.finditer(line, lead)]
    at = next((g for g in reversed(gaps) if g <= cols - 30), None)
    return at if at is not None else lead + 4


def wrap_lines(lines, cols: int | None) -> list[str]:
    """Each line wrapped to ``cols`` keeping its indentation; a table row (columns separated by two
    or more spaces) continues under its last column; a line that fits is left as it is (every line,
    when ``cols`` is ``None``).

    >>> wrap_lines(["  a  bb  cc dd ee ff gg hh ii jj kk ll mm nn oo pp qq rr ss tt uu vv ww xx yy zz"], 60)
    ['  a  bb  cc dd ee ff gg hh ii jj kk ll mm nn oo pp qq rr ss', '         tt uu vv ww xx yy zz']
    """
    out: list[str] = []
    for line in lines:
        for piece in str(line).split("\n"):
            piece = piece.rstrip()
            if cols is None or len(piece) <= cols:
                out.append(piece)
                continue
            lead = len(piece) - len(piece.lstrip(" "))
            hang = _hang_of(piece, cols)
            body = textwrap.wrap(piece[lead:], width=max(cols, 20), initial_indent=" " * lead,
                                 subsequent_indent=" " * hang,
                                 break_on_hyphens=False, break_long_words=True, drop_whitespace=True,
                                 replace_whitespace=False)
            out.extend(body or [piece])
    return out
