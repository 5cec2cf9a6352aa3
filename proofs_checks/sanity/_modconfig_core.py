"""What :mod:`proofs_checks.sanity._modconfig` and :mod:`proofs_checks.sanity._modconfig_libs` share: the
readings (:class:`Item`, :class:`ConfigRead`, :class:`Difference`) and the guarded attribute access that
never lets a module's attribute raise into the check."""

from __future__ import annotations

import contextlib
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from proofs_checks.sanity import _libsemantics as sem  # noqa: F401

KEYS = ("causal", "rope_base", "rope_dims", "rope_convention", "window", "kv_heads", "softcap", "qk_norm")
_MISSING = object()
_QK = (("q_norm", "k_norm"), ("query_norm", "key_norm"), ("q_layernorm", "k_layernorm"), ("norm_q", "norm_k"),
       ("q_ln", "k_ln"), ("qnorm", "knorm"), ("query_layernorm", "key_layernorm"),
       ("qk_norm", "qk_norm"))  # qk_norm: one weightless norm for both (Llama 4)
_MAX_MODULES = 400


class ConfigError(ValueError):
    """A configuration attribute that raises, changes between reads or has the wrong type (one line)."""


@dataclass
class Item:
    """One value read: ``source`` the attribute path, ``library`` the release it came from ("" unknown),
    ``meaning`` what that release does with it; ``span`` a window's ``(L, R)`` keys ``t−L … t+R``
    (``R`` None: unbounded); ``interpreted`` False: reported as read, never used."""
    key: str
    value: Any
    source: str
    note: str = ""
    library: str = ""
    meaning: str = ""
    span: tuple | None = None
    interpreted: bool = True
    rel_tol: float = 0.0  # how far a declared number may be from it and still be the same (the read's precision)

    def text(self) -> str:
        src = self.source + (f", {self.library}" if self.library else "") + (f": {self.meaning}" if self.meaning else "")
        src += f"; {self.note}" if self.note else ""
        if self.key == "window" and self.span is not None and self.span[1] != 0:
            return f"window {self.span[0]},{'∞' if self.span[1] is None else self.span[1]} ({src})"
        return f"causal ({src})" if self.key == "causal" else f"{self.key} {_fmt(self.value)} ({src})"


@dataclass
class Difference:
    """A declared value that differs from the one read: the check runs on ``declared``."""
    key: str
    flag: str
    declared: Any
    read: Item


@dataclass
class ConfigRead:
    items: dict[str, Item] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # attributes not read (raised, changed, wrong type)
    decided: set = field(default_factory=set)  # values a module settled (a layer with no window: decided, not read)
    pending: dict[str, str] = field(default_factory=dict)  # notes kept unless a deeper module decides
    noted: set = field(default_factory=set)
    scaling: tuple | None = None  # (value, source, 1/√d_k) of a module's logit scale other than 1/√d_k: said, not read
    #: what the module computes that no declaration models and that binds at every probe (scaled RoPE, XPOS, a
    #: sub-norm): a mismatch then has that cause, so no coarser precision is named for it
    unmodelled: list = field(default_factory=list)

    def get(self, key: str) -> Any:
        it = self.items.get(key)
        return None if it is None else it.value

    def add(self, key: str, value: Any, source: str, note: str = "", **kw: Any) -> None:
        old = self.items.get(key)
        if old is None:
            self.items[key] = Item(key, value, source, note, **kw)
        elif not _same(old.value, value):
            self.notes.append(f"the module also carries {key} {_fmt(value)} ({source}); the first found, "
                              f"{_fmt(old.value)} ({old.source}), is the one read")

    def note(self, kind: str, text: str) -> None:
        """A note, once per kind (several modules may carry the same config)."""
        if kind not in self.noted:
            self.noted.add(kind)
            self.notes.append(text)

    def problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)
            self.notes.append(text)

    def lines(self) -> list[str]:
        return [self.items[k].text() for k in KEYS if k in self.items]


def _fmt(v: Any) -> str:
    """A number as read, every digit kept (a value shown rounded is not the value read)."""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    return str(v)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-4)
        except (TypeError, ValueError):
            return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _short_exc(exc: BaseException) -> str:
    from theory.validation import exception_text

    text = exception_text(exc)
    return text if len(text) <= 220 else text[:219] + "…"


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (bool, numbers.Number, str, tuple, list, dict))


def _get(obj: Any, name: str, where: str = "") -> Any:
    """``getattr`` read twice: absent → ``_MISSING``; an access that raises (other than
    ``AttributeError``), or a plain value that changes between the two reads, raises
    :class:`ConfigError` naming ``where + name``."""
    if obj is None or obj is _MISSING:
        return _MISSING
    try:
        a = getattr(obj, name, _MISSING)
        b = getattr(obj, name, _MISSING)
    except Exception as exc:
        raise ConfigError(f"{where}{name}: reading it raised {_short_exc(exc)}") from None
    if a is not b and _plain(a) and (not _plain(b) or not (_same(a, b) or repr(a) == repr(b)) or type(a) is not type(b)):
        raise ConfigError(f"{where}{name} changed between two reads ({a!r}, then {b!r})")
    return a


def _item(d: Any, key: str) -> Any:
    if isinstance(d, dict):
        return d.get(key, _MISSING)
    return _MISSING


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _bad(source: str, v: Any, want: str) -> ConfigError:
    return ConfigError(f"{source} = {v!r}: expected {want}")


def _scalar(v: Any) -> Any:
    """A one-element tensor or array (``tensor(500000.)`` as a config's ``rope_theta``) as its number;
    anything else as it is."""
    if not isinstance(v, (numbers.Number, str, bytes)) and callable(getattr(v, "item", None)):
        with contextlib.suppress(Exception):
            n = v.numel() if callable(getattr(v, "numel", None)) else getattr(v, "size", None)
            if n == 1:
                return v.item()
    return v


def _number(v: Any, source: str, *, gt: float, want: str) -> float:
    v = _scalar(v)  # "tensor(500000.): expected a number > 1" said a true thing falsely
    if not _is_num(v) or not float(v) > gt:
        raise _bad(source, v, want)
    return float(v)


def _posint(v: Any, source: str) -> int:
    if not _is_int(v) or int(v) < 1:
        raise _bad(source, v, "a positive integer")
    return int(v)


def _modules(obj: Any) -> list[tuple[str, Any]]:
    out = [("", obj)]
    try:
        nm = getattr(obj, "named_modules", None)
    except Exception:
        nm = None
    if callable(nm):
        try:
            subs = [(n, m) for n, m in nm() if n]
        except Exception:
            subs = []
        subs.sort(key=lambda t: t[0].count("."))
        out += subs[:_MAX_MODULES]
    return out


def _is_config(c: Any) -> bool:
    if c is _MISSING or c is None or isinstance(c, (str, bytes, numbers.Number, dict, list, tuple)) or callable(c):
        return False
    try:
        return not callable(getattr(c, "named_modules", None))
    except Exception:
        return False


def _guard(r: ConfigRead, fn: Callable, *args: Any) -> None:
    """Run one reader; an attribute it cannot read is one problem line, and the others go on."""
    try:
        fn(r, *args)
    except ConfigError as exc:
        r.problem(f"{exc}: not read (the check uses what is declared)")


@dataclass
class _Ctx:
    """One module being read: its path prefix, its config, the library and release of its class."""
    m: Any
    pre: str
    cfg: Any = None
    lib: Any = None

    @property
    def cp(self) -> str:
        return f"{self.pre}config."

    @property
    def libtext(self) -> str:
        return str(self.lib) if self.lib is not None else ""


def _window_value(v: Any, source: str) -> int:
    if not _is_int(v) or int(v) < 1:
        raise _bad(source, v, "a positive integer (the number of keys each query sees) or None")
    return int(v)
