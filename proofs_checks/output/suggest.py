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
        >>> unknown_message("icl.gama", ["icl.gamma_n_global_min", "icl.limits", "attn.layernorm"])
        "no claim matches 'icl.gama' (did you mean icl.gamma_n_global_min?); `tverify list` names them"
    """
    close = closest(str(pattern), list(dict.fromkeys([*ids, *groups])))
    if not close:
        return f"no claim matches {pattern!r} (see `tverify list`)"
    return f"no claim matches {pattern!r} (did you mean {', '.join(close)}?); `tverify list` names them"


def closest(pattern: str, names: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``n`` names most like ``pattern`` (difflib's ratio), a name's beginning counting as much as
    the whole: a typo in the first letters of a long id (``icl.gama``) still finds it."""
    def score(name: str) -> float:
        whole = difflib.SequenceMatcher(None, pattern, name).ratio()
        head = difflib.SequenceMatcher(None, pattern, name[: len(pattern) + 1]).ratio() if len(pattern) >= 4 else 0.0
        return max(whole, 0.95 * head)

    scored = sorted(((score(x), x) for x in names), key=lambda t: -t[0])
    best = [x for sc, x in scored if sc >= cutoff][:n]
    return [x for x in best if score(x) >= score(best[0]) - 0.1] if best else []
