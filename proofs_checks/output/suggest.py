"""The one line for a claim pattern that matches nothing, with the closest ids or groups (difflib,
as ``tverify survey`` does for its entries)."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["unknown_message"]


def unknown_message(pattern: str, ids: Iterable[str], groups: Iterable[str] = ()) -> str:
    """The usage-error line for ``pattern``.

        >>> unknown_message("icl.gama_n_global_min", ["icl.gamma_n_global_min", "attn.softmax_simplex"], ["icl"])
        "no claim matches 'icl.gama_n_global_min' (did you mean icl.gamma_n_global_min?); `tverify list` names them"
        >>> unknown_message("zzz", ["icl.x"])
        "no claim matches 'zzz' (see `tverify list`)"
    """
    names = list(dict.fromkeys([*ids, *groups]))
    close = difflib.get_close_matches(str(pattern), names, n=3, cutoff=0.6)
    if not close:
        return f"no claim matches {pattern!r} (see `tverify list`)"
    return f"no claim matches {pattern!r} (did you mean {', '.join(close)}?); `tverify list` names them"
