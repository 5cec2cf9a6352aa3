"""The Python API's edge (:mod:`proofs_checks.api`): its arguments validated once, in the words of the function
called (keyword names where the commands name flags; a number given as a string is the wrong type, never converted),
the check's imports made with a ``sys.path`` the caller's folder cannot shadow, and the usage errors of the checks
turned into :class:`theory.validation.InputError` (a ``ValueError``) with the one-line message the CLI prints."""

from __future__ import annotations

import sys
from contextlib import contextmanager


#: what each check imports besides, imported first by :func:`_own_imports`
_OWN_IMPORTS = {
    "check_attention": ("proofs_checks.sanity.attention",),
    "check_icl_model": ("proofs_checks.sanity.icl_model",),
    "check_hopfield": ("proofs_checks.sanity.hopfield",),
    "check_att_svm": ("proofs_checks.sanity.att_svm",),
    "check_lyapunov": ("proofs_checks.sanity.lyapunov",),
}


def _own_imports(fn_name: str) -> None:
    """Import what the check ``fn_name`` needs in this (the caller's) process with ``sys.path`` holding only the standard
    library's, the installed packages' and tverify's own folders (:func:`proofs_checks.syspath.import_system_only`):
    imported later, a ``click.py`` or ``gmpy2.py`` (an optional import of SymPy's) beside the caller's script, first on
    its path, was what ran (hostile pass 54a F7, F8; 55a F3, F5)."""
    from proofs_checks.syspath import LIBRARY_IMPORTS, import_system_only

    import_system_only(LIBRARY_IMPORTS + _OWN_IMPORTS[fn_name] + ("proofs_checks.sanity._isolate",))


@contextmanager
def _as_value_errors(fn=None):
    """UsageError (a click exception, for the CLI) → InputError (a ValueError) with its message; under
    ``fn`` (an API function) the message names its keyword arguments where the check's names the
    command's flags (:func:`_keyword_words`)."""
    from proofs_checks.options import UsageError
    from proofs_checks.threads import pinned as pinned_threads
    from theory.validation import InputError

    from proofs_checks.sanity.attention_declaration import DeclarationError

    try:
        # every API function computes: torch/BLAS threads from the cores (proofs_checks.threads), for the call only:
        # the caller's environment and thread counts are put back afterwards
        with pinned_threads():
            yield
    except DeclarationError as exc:  # names the flag and the keyword: the same line as the command's and the fixture's
        raise InputError(" ".join(exc.format_message().split())) from None
    except UsageError as exc:
        msg = " ".join(exc.format_message().split())
        raise InputError(_keyword_words(msg, fn) if fn is not None else msg) from None
    except InputError as exc:
        if fn is None or _keyword_words(str(exc), fn) == str(exc):
            raise
        raise InputError(_keyword_words(str(exc), fn)) from None


def _array(x, dtype=None):
    """``np.asarray(x, dtype)``, a torch tensor taken by the numbers it holds (detached, on the CPU, bfloat16 widened
    exactly to float32): a tensor that requires grad raised torch's RuntimeError through the API (hostile pass 12b N6)."""
    import numpy as np

    if isinstance(x, np.ma.MaskedArray):  # np.asarray drops the mask: the hidden values would be judged (61a note)
        from theory.validation import InputError

        raise InputError("a masked array: its mask would be dropped and the values under it judged; pass a plain "
                         "array of the values you mean")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
    return np.asarray(x, dtype=dtype)


#: keywords whose values are names (written quoted: ``positional="rope"``)
_CHOICE_KEYWORDS = {"positional": ("none", "learned", "sinusoidal", "rope", "alibi"), "qk_norm": ("rms", "layer"),
                    "kv_grouping": ("hf", "tiled"), "rope_convention": ("half", "interleaved"),
                    "mask_convention": ("keep", "drop", "additive"), "dtype": ("float64", "float32"),
                    "compute_dtype": ("float64", "float32", "bfloat16", "float16"), "device": ("cpu", "cuda", "meta"),
                    "mode": ("quick", "default", "full"), "layout": ("default", "zfb", "garg")}


#: keyword arguments an API function takes through ``**kwargs`` and passes on (named as such in its messages)
_PASSED_ON = {"check_icl_model": ("tol", "prompts", "max_memory", "mode", "M_values", "name", "progress")}


#: flags spelled otherwise in the API
_FLAG_KEYWORDS = {"--quick": 'mode="quick"', "--full": 'mode="full"', "--causal": "causal=True",
                  "--ignore-config": "ignore_config=True", "--no-progress": "progress=False", "--lambda": "lambdas",
                  "--model": "obj"}  # (check_icl_model's object: its lines said "--model", 44a F1)


def _keyword_words(msg: str, fn) -> str:
    """A check's one-line message in the words of the Python API function ``fn``: each flag that is
    one of its keyword arguments becomes the keyword (``--heads 3`` → ``heads=3``, ``--positional rope``
    → ``positional="rope"``, ``--heads:`` → ``heads:``; a message that starts with one names ``fn``).

    >>> from proofs_checks.api import check_attention
    >>> _keyword_words("--heads: must be a positive integer, got 0", check_attention)
    'check_attention: heads: must be a positive integer, got 0'
    >>> _keyword_words("--rope-base set the rotary embedding: they need --positional rope", check_attention)
    'check_attention: rope_base set the rotary embedding: they need positional="rope"'
    >>> _keyword_words("--window W is a causal sliding window: give --causal too", check_attention)
    'check_attention: window=W is a causal sliding window: give causal=True too'
    """
    import inspect
    import re

    # (and the keywords it passes on through **kwargs: check_icl_model's tol, prompts, max_memory … said "--tol", 44a F1)
    params = set(inspect.signature(fn).parameters) | set(_PASSED_ON.get(fn.__name__, ()))
    name = fn.__name__

    def word(m):
        flag, rest, value = m.group(1), (m.group(2) or "") + (m.group(3) or ""), m.group(3)
        if flag in _FLAG_KEYWORDS and flag != "--lambda":  # a flag without a value: keep what follows it
            words = _FLAG_KEYWORDS[flag]
            return words + rest if words.partition("=")[0] in params else m.group(0)
        kw = _FLAG_KEYWORDS.get(flag) or flag[2:].replace("-", "_")
        if kw not in params:
            return m.group(0)
        if value is not None:
            if value in _CHOICE_KEYWORDS.get(kw, ()):  # a choice's value; a word of the sentence is not one (44a F20)
                return f'{kw}="{value}"'
            if re.fullmatch(r"-?[0-9][0-9.e+-]*(,-?[0-9][0-9.e+-]*)?|[A-Z][A-Za-z0-9]*(,[A-Z][A-Za-z0-9]*)?", value):
                return f"{kw}={value}"
        return kw + rest

    out = re.sub(r"(?<![\w-])(--[a-zA-Z][a-zA-Z0-9-]*)( )?([^\s:;()/,]+(?:,[^\s:;()/,]+)*)?", word, msg)
    if out != msg and msg.startswith("--") and not out.startswith(name):
        out = f"{name}: {out}"
    return out


def _numbers(fn_name: str, ints: dict | None = None, reals: dict | None = None) -> None:
    """Numbers typed as the flags: an integer keyword takes an int, a number keyword an int or a float;
    a string ("2") or a bool is the wrong type, never converted (as ``causal="no"`` is not ``True``)."""
    import numbers

    from theory.validation import InputError

    for kind, vals, cls in (("an integer", ints or {}, numbers.Integral), ("a number", reals or {}, numbers.Real)):
        for nm, v in vals.items():
            if v is None or (isinstance(v, cls) and not isinstance(v, bool)):
                continue
            what = "a string: pass the number itself" if isinstance(v, str) else f"of type {type(v).__name__}"
            raise InputError(f"{fn_name}: {nm} must be {kind}, got {v!r} ({what})")
    seed = (ints or {}).get("seed")
    if seed is not None and not 0 <= seed <= 2**32 - 1:  # the commands' --seed range, for every function (44a F9:
        raise InputError(f"{fn_name}: seed must be in 0 … 4294967295, got {seed}")  # torch's overflow, numpy's error)


def _mode(fn_name: str, mode) -> None:
    """``mode`` one of the commands' sizes (--quick, the default, --full)."""
    from theory.validation import InputError

    if mode not in ("quick", "default", "full"):
        raise InputError(f"{fn_name}: mode must be quick, default or full, got {mode!r}")


def _keywords(fn_name: str, kwargs: dict, target) -> None:
    """Unknown keyword arguments: an :class:`~theory.validation.InputError` naming the known ones."""
    import inspect

    from theory.validation import InputError

    known = [p for p in inspect.signature(target).parameters if p not in ("obj", "label", "patterns", "module")]
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise InputError(f"{fn_name}: unknown keyword argument{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} (known: {', '.join(known)})")


def _flag(fn_name: str, name: str, value) -> None:
    """A bool keyword must be a bool (``causal="no"`` is not ``True``)."""
    import numpy as np

    from theory.validation import InputError

    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{fn_name}: {name} must be True or False, got {value!r}")


def _isolation(fn_name: str, isolate, timeout):
    from proofs_checks.sanity._common import finite_timeout

    _flag(fn_name, "isolate", isolate)
    _numbers(fn_name, reals={"timeout": timeout})
    return finite_timeout(timeout, f"{fn_name}: timeout")


def _memory(fn_name: str, max_memory) -> None:
    """``max_memory`` (GB): a positive finite number or None."""
    import math

    from theory.validation import InputError

    _numbers(fn_name, reals={"max_memory": max_memory})
    if max_memory is not None and not (math.isfinite(max_memory) and max_memory > 0):
        raise InputError(f"{fn_name}: max_memory must be a positive finite number of GB, got {max_memory!r}")


def inspect_params(fn) -> list[str]:
    import inspect

    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind is not p.VAR_KEYWORD]


def _refuse_unknown(fn, unknown: dict, skip: tuple = (), hint: str = "") -> None:
    """Keyword arguments ``fn`` does not take: one :class:`~theory.validation.InputError` naming its valid ones (and
    ``hint``), as every API function says it — not Python's TypeError, which the fixture shows as a traceback (44a
    F15)."""
    from theory.validation import InputError

    if unknown:
        bad = sorted(unknown)
        valid = [p for p in inspect_params(fn) if p not in skip]
        raise InputError(f"{fn.__name__}: unknown keyword argument{'s' if len(bad) > 1 else ''} "
                         f"{', '.join(map(repr, bad))}{hint}; valid: {', '.join(valid)}")


def _is_int(v) -> bool:
    """An integer (Python's or numpy's), not a bool."""
    import numbers

    import numpy as np

    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _attention_window(window):
    """``window``: None, "W" / "L,R", an int W or a pair (L, R) → what :func:`run_attention` takes."""
    from theory.validation import InputError

    if window is None or isinstance(window, str):
        return window
    if _is_int(window):
        return str(int(window))
    if isinstance(window, (tuple, list)) and len(window) == 2 and all(_is_int(v) for v in window):
        return ",".join(str(int(v)) for v in window)
    raise InputError(f"check_attention: window must be \"W\", \"L,R\", an int W or a pair (L, R) of ints, got "
                     f"{window!r}")


def _attention_lengths(seq_len):
    from theory.validation import InputError

    if seq_len is None or isinstance(seq_len, str):
        return seq_len
    if _is_int(seq_len):
        return str(int(seq_len))
    if getattr(seq_len, "ndim", None) == 1 and callable(getattr(seq_len, "tolist", None)):  # np.arange(1, 6), as
        seq_len = seq_len.tolist()  # docs/api.md shows (refused: hostile pass 46a F2)
    if isinstance(seq_len, (list, tuple)) and seq_len and all(_is_int(v) for v in seq_len):
        return ",".join(str(int(v)) for v in seq_len)
    raise InputError(f"check_attention: seq_len must be \"T1,T2,...\" or a list of ints, got {seq_len!r}")
