"""The Declaration of ``check attention``: one frozen object, built by one function, validated once.

The command line (flags), the Python API (keywords of ``check_attention``) and the pytest fixture all
build it through :func:`build_declaration` from a plain mapping of field values, before any of the
user's code is imported or run, so the same bad declaration is refused with the same one line in all
three (:class:`DeclarationError`, naming the flag and the keyword: ``--rope-base (rope_base=): …``).

Every field carries its **provenance** (:class:`Provenance`): given by the user (the flag / keyword),
read from the module (which attribute, which library and version: added by :meth:`Declaration.read`
once the module is loaded), or a default. A value the user gives wins over the module's
configuration; a difference is reported (and measured where observable), never refused.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from proofs_checks.options import UsageError

__all__ = ["Declaration", "DeclarationError", "Provenance", "build_declaration", "parse_window", "parse_lengths",
           "POSITIONAL", "QK_NORMS", "KV_GROUPINGS", "MASK_CONVENTIONS", "COMPUTE_DTYPES", "MODES", "MAX_LENGTH",
           "FLAGS"]

POSITIONAL = ("none", "learned", "sinusoidal", "rope", "alibi")
QK_NORMS = ("rms", "layer")
KV_GROUPINGS = ("hf", "tiled")
MASK_CONVENTIONS = ("keep", "drop", "additive")
COMPUTE_DTYPES = ("float64", "float32", "bfloat16", "float16")
MODES = ("quick", "default", "full")
#: the longest probe length --seq-len accepts
MAX_LENGTH = 16384

#: each field's flag (the keyword is the field's name)
FLAGS = {"causal": "--causal", "window": "--window", "positional": "--positional", "rope_base": "--rope-base",
         "rope_dims": "--rope-dims", "rope_convention": "--rope-convention", "heads": "--heads",
         "kv_heads": "--kv-heads", "kv_grouping": "--kv-grouping", "softcap": "--softcap", "qk_norm": "--qk-norm",
         "scale": "--scale", "mask_convention": "--mask-convention", "compute_dtype": "--compute-dtype",
         "dtype": "--dtype", "seq_len": "--seq-len", "mode": "--quick/--full", "seed": "--seed",
         "device": "--device", "max_memory": "--max-memory", "dim": "--dim", "ignore_config": "--ignore-config"}


class DeclarationError(UsageError):
    """A field of the declaration refused: one line naming the flag and the keyword, identical from the
    command line, the Python API and the pytest fixture (exit 2 / ``InputError``)."""


def who(name: str) -> str:
    """``--rope-base (rope_base=)``: the flag and the keyword of a field."""
    kw = f"{name}=True" if name in ("causal", "ignore_config") else f"{name}="
    return f"{FLAGS[name]} ({kw})"


def _err(name: str, text: str) -> DeclarationError:
    return DeclarationError(f"{who(name)}: {text}")


@dataclass(frozen=True)
class Provenance:
    """Where a field's value comes from: ``kind`` "given" (the user's flag / keyword), "read" (the
    module's attribute ``where``, with its library and version when known) or "default"."""

    kind: str
    where: str = ""

    def text(self) -> str:
        return {"given": f"given: {self.where}", "read": f"read from the module: {self.where}"}.get(self.kind, "default")


@dataclass(frozen=True)
class Declaration:
    """What the user declares about the module under test (see the module docstring). ``window`` is the
    parsed ``(L, R)``, or the text ``"W"`` while the module's own causality is still to be read
    (``--window W`` without ``--causal``); ``seq_len`` the sorted probe lengths or None (the mode's)."""

    causal: bool = False
    window: tuple | str | None = None
    positional: str = "none"
    rope_base: float | None = None
    rope_dims: int | None = None
    rope_convention: str | None = None
    heads: int | None = None
    kv_heads: int | None = None
    kv_grouping: str | None = None
    softcap: float | None = None
    qk_norm: str | None = None
    scale: float | None = None
    mask_convention: str | None = None
    compute_dtype: str | None = None
    dtype: str = "float64"
    seq_len: tuple | None = None
    mode: str = "default"
    seed: int = 0
    device: str = "cpu"
    max_memory: float | None = None
    dim: int | None = None
    ignore_config: bool = False
    provenance: tuple = field(default=(), compare=False)

    def source(self, name: str) -> Provenance:
        return dict(self.provenance).get(name, Provenance("default"))

    def given(self, name: str) -> bool:
        return self.source(name).kind == "given"

    def read(self, name: str, value: Any, where: str) -> "Declaration":
        """This declaration with ``name`` filled from the module (never over a given value)."""
        if self.given(name):
            return self
        prov = tuple((k, v) for k, v in self.provenance if k != name) + ((name, Provenance("read", where)),)
        return replace(self, **{name: value}, provenance=prov)

    def values(self) -> dict:
        """The fields as a plain mapping (what :func:`build_declaration` takes back)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "provenance"}

    def lines(self) -> list[str]:
        """One line per field that is not a default: ``field value (provenance)``."""
        return [f"{k} = {getattr(self, k)!r} ({p.text()})" for k, p in self.provenance if p.kind != "default"]


_DEFAULTS = Declaration().values()


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def _flags_ok(v: Mapping) -> None:
    for nm in ("causal", "ignore_config"):
        x = v.get(nm, False)
        if not isinstance(x, bool) and type(x).__name__ != "bool_":
            raise _err(nm, f"must be True or False, got {x!r}")


def _numbers_ok(v: Mapping) -> None:
    seed = v.get("seed", 0)
    if not _is_int(seed) or not 0 <= int(seed) < 2**32:
        raise _err("seed", f"must be an integer in [0, 2**32), got {seed!r}")
    for nm in ("heads", "kv_heads", "dim", "rope_dims"):
        x = v.get(nm)
        if x is not None and (not _is_int(x) or x < 1):
            raise _err(nm, f"must be a positive integer, got {x!r}")
    for nm, low, what in (("softcap", 0.0, "a positive number"), ("rope_base", 1.0, "a number > 1"),
                          ("scale", 0.0, "a positive number (the factor the logits q·k are multiplied by)"),
                          ("max_memory", 0.0, "a positive number of GB")):
        x = v.get(nm)
        if x is not None and (not _is_real(x) or not math.isfinite(float(x))):
            raise _err(nm, f"must be a finite number ({what}), got {x!r}")
        if x is not None and not float(x) > low:
            raise _err(nm, f"must be {what}, got {x!r}")
    _within_precision(v)
    h, kv = v.get("heads"), v.get("kv_heads")
    if h is not None and kv is not None and h % kv:
        raise DeclarationError(f"{who('heads')} {h} with {who('kv_heads')} {kv}: grouped-query attention shares "
                               "each key/value head among the same number of query heads, so heads must be a multiple "
                               "of kv_heads")
    rd = v.get("rope_dims")
    if rd is not None and rd % 2:
        raise _err("rope_dims", f"{rd}: RoPE rotates pairs of dimensions, so it must be even")


def _within_precision(v: Mapping) -> None:
    """A softcap or scale the probe's precision cannot work with: a cap C of √(largest float) or more caps no logit the
    probe reaches (C·tanh(s/C) = s to rounding) and its arithmetic overflows, and a scale beyond the largest float is
    none in that precision; each left every comparison with a NaN tolerance, rows then blaming the module (48a F3)."""
    dtype = v.get("dtype") or _DEFAULTS["dtype"]
    big = 3.4028234663852886e38 if dtype == "float32" else 1.7976931348623157e308  # the largest finite float
    cap, scale = v.get("softcap"), v.get("scale")
    if cap is not None and _is_real(cap) and float(cap) >= math.sqrt(big):
        raise _err("softcap", f"{float(cap):g}: a cap that large caps no logit a {dtype} probe reaches (C·tanh(s/C) = s "
                              f"to rounding) and its arithmetic overflows {dtype} (below {math.sqrt(big):.3g}); leave it "
                              "out")
    if scale is not None and _is_real(scale) and float(scale) > big:
        raise _err("scale", f"{float(scale):g} is beyond {dtype}'s range (largest {big:.3g})")


def _choices_ok(v: Mapping) -> None:
    for nm, choices, none_ok in (("positional", POSITIONAL, False), ("rope_convention", ("half", "interleaved"), True),
                                 ("kv_grouping", KV_GROUPINGS, True), ("qk_norm", QK_NORMS, True),
                                 ("mask_convention", MASK_CONVENTIONS, True),
                                 ("compute_dtype", COMPUTE_DTYPES, True), ("dtype", ("float64", "float32"), False),
                                 ("mode", MODES, False)):
        x = v.get(nm, _DEFAULTS[nm])
        if x is None and none_ok:
            continue
        if not isinstance(x, str) or x not in choices:
            raise _err(nm, f"one of {', '.join(choices)}, got {x!r}"
                       + (f" (a {type(x).__name__})" if not isinstance(x, str) else ""))
    if not isinstance(v.get("device", "cpu"), str):
        raise _err("device", f"a device name (cpu, cuda, cuda:1), got {v.get('device')!r}")
    if v.get("compute_dtype") == "float64" and v.get("dtype", "float64") == "float32":
        raise DeclarationError(f"{who('compute_dtype')} float64 with {who('dtype')} float32: a float32 probe cannot "
                               "be computed in float64")


def _structure_ok(v: Mapping) -> None:
    positional = v.get("positional", "none")
    rope = [who(n) for n in ("rope_base", "rope_dims", "rope_convention") if v.get(n) is not None]
    if positional != "rope" and rope:
        raise DeclarationError(f"{', '.join(rope)} set the rotary embedding: they need --positional rope "
                               f"(positional=\"rope\"); the declared scheme is {positional}; nothing was run")


def parse_window(text: Any, causal: bool) -> tuple[int, int] | None:
    """``--window W`` (causal: the ``W`` most recent keys including the query's own) or ``L,R``; an int
    ``W`` or a pair ``(L, R)`` from the API.

    >>> parse_window("4", True), parse_window("3,2", False), parse_window(None, False), parse_window((2, 0), True)
    ((3, 0), (3, 2), None, (2, 0))
    """
    if text is None:
        return None
    if isinstance(text, (tuple, list)):
        text = ",".join(map(str, text))
    elif _is_int(text):
        text = str(int(text))
    elif not isinstance(text, str):
        raise _err("window", f"expected W or L,R (non-negative integers), got {text!r}")
    parts = [p.strip() for p in str(text).split(",")]
    if any("_" in p for p in parts):  # int("1_0") is 10: a typo taken for another number (hostile pass 10)
        raise _err("window", f"write the numbers without '_' (Python reads 1_0 as 10, 1_000 as 1000), got {text!r}")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise _err("window", f"expected W or L,R (non-negative integers), got {text!r}") from None
    if len(vals) == 1:
        if not causal:
            raise _err("window", "W is a causal sliding window (the W most recent keys): give --causal "
                                 "(causal=True) too, or L,R for a two-sided window")
        if vals[0] < 1:
            raise _err("window", f"W must be ≥ 1, got {vals[0]}")
        return (vals[0] - 1, 0)
    if len(vals) != 2 or min(vals) < 0:
        raise _err("window", f"expected W or L,R (non-negative integers), got {text!r}")
    if causal and vals[1] != 0:
        raise _err("window", f"{text}: a causal module sees no key to the right (R must be 0)")
    return (vals[0], vals[1])


def parse_lengths(text: Any) -> list[int] | None:
    """``--seq-len "1,5,300"`` (or a list of ints from the API).

    >>> parse_lengths("5, 1,17"), parse_lengths([3, 2])
    ([1, 5, 17], [2, 3])
    """
    if text is None:
        return None
    try:
        if isinstance(text, (list, tuple)):
            if not all(_is_int(t) for t in text):
                raise ValueError
            vals = sorted({int(t) for t in text})
        else:
            parts = str(text).split(",")
            empty = [i + 1 for i, p in enumerate(parts) if not p.strip()]
            if empty:  # "1,,2" or "17,": a typo, never silently dropped
                raise _err("seq_len", f"empty field at position {empty[0]} in {text!r} (comma-separated lengths)")
            if "_" in str(text) or not str(text).isascii():  # int("1_0") is 10, int("١٧") 17 (hostile passes 10, 46a F3)
                raise _err("seq_len", f"write the lengths in ASCII digits 0-9 without '_' (Python reads 1_0 as 10 and "
                                      f"١٠ as 10), got {text!r}")
            vals = sorted({int(p) for p in parts})
    except ValueError:
        raise _err("seq_len", f"expected comma-separated positive integers, got {text!r}") from None
    if not vals or vals[0] < 1 or vals[-1] > MAX_LENGTH:
        raise _err("seq_len", f"lengths must be between 1 and {MAX_LENGTH}, got {text!r}")
    return vals


def build_declaration(values: Mapping[str, Any], given: set[str] | None = None) -> Declaration:
    """The one way to a :class:`Declaration`: ``values`` (field name → value; a missing one is its default)
    validated once, every refusal a :class:`DeclarationError` of one line. ``given``: the fields the user
    set (default: those whose value is not the default). ``--window W`` without causal stays the text
    ``"W"`` while the module's configuration may still declare it causal (not with ``ignore_config``)."""
    unknown = sorted(set(values) - set(_DEFAULTS))
    if unknown:
        raise DeclarationError(f"unknown declaration field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                               f"valid: {', '.join(_DEFAULTS)}")
    v = {**_DEFAULTS, **{k: x for k, x in values.items() if x is not None or _DEFAULTS[k] is None}}
    if v["positional"] is None:
        v["positional"] = "none"
    _flags_ok(v)
    _numbers_ok(v)
    _choices_ok(v)
    _structure_ok(v)
    w = v["window"]
    deferred = isinstance(w, (str, int)) and not isinstance(w, bool) and "," not in str(w) and not v["causal"] \
        and not v["ignore_config"]
    if deferred:
        parse_window(w, True)  # its form checked now; causal or not once the module's configuration is read
        v["window"] = str(int(w)) if _is_int(w) else w.strip()
    else:
        v["window"] = parse_window(w, bool(v["causal"]))
    lengths = parse_lengths(v["seq_len"])
    v["seq_len"] = tuple(lengths) if lengths else None
    for nm in ("softcap", "rope_base", "scale", "max_memory"):
        v[nm] = None if v[nm] is None else float(v[nm])
    for nm in ("heads", "kv_heads", "dim", "rope_dims", "seed"):
        v[nm] = None if v[nm] is None else int(v[nm])
    v["causal"], v["ignore_config"] = bool(v["causal"]), bool(v["ignore_config"])
    if given is None:
        given = {k for k in values if values[k] is not None and values[k] != _DEFAULTS.get(k)}
    prov = tuple((k, Provenance("given", who(k)) if k in given else Provenance("default")) for k in _DEFAULTS)
    return Declaration(**v, provenance=prov)
