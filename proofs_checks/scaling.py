"""A form with its float outputs multiplied by a factor (floats and complex numbers, NumPy and torch floating
or complex arrays, subclasses by their plain values, inside tuples, named tuples, lists and dicts; a dict of functions scaled function by function), counting what it scaled: the
continuous mutants (:mod:`proofs_checks.continuous`) and the own-mutant rule's doubled form
(:func:`proofs_checks.runner.run_claim`) both use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ScaleCounter", "scaled_form", "scale_counter"]


@dataclass
class _Counter:
    scaled: int = 0
    seen: list = field(default_factory=list)


def _scale(v: Any, f: float, n: _Counter) -> Any:
    import numpy as np

    try:
        import torch
    except Exception:  # pragma: no cover - torch is a dependency
        torch = None
    if isinstance(v, bool):
        return v
    if isinstance(v, (complex, np.complexfloating)):  # complex outputs scale as floats do
        n.scaled += 1
        return v * f if type(v) is complex else np.asarray(v)[()] * f
    if isinstance(v, (float, np.floating)):  # a subclass's own `*` is not trusted: its plain value is scaled
        n.scaled += 1
        return np.asarray(v)[()] * f if isinstance(v, np.floating) else float.__mul__(v, f)
    if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.inexact):
        n.scaled += 1
        return np.asarray(v) * f
    if torch is not None and isinstance(v, torch.Tensor) and (v.dtype.is_floating_point or v.dtype.is_complex):
        n.scaled += 1
        return v.as_subclass(torch.Tensor) * f
    if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple: its fields scaled, its type kept
        fields = [_scale(x, f, n) for x in v]
        try:
            return type(v)(*fields)
        except Exception:  # a type with `_fields` that is built otherwise: its scaled values as a tuple
            return tuple(fields)
    if isinstance(v, tuple):
        return tuple(_scale(x, f, n) for x in v)
    if isinstance(v, list):
        return [_scale(x, f, n) for x in v]
    if isinstance(v, dict):
        return {k: _scale(x, f, n) for k, x in v.items()}
    return v


def scale_counter(form: Any) -> "_Counter | None":
    """The counter of outputs scaled by a :func:`scaled_form` (``None`` for any other form): a plugin
    check's child adds what it scaled to it (:func:`proofs_checks.claims._plugins.run_check`)."""
    if isinstance(form, dict):
        return next((c for c in map(scale_counter, form.values()) if c is not None), None)
    c = getattr(form, "tverify_scaled", None)
    return c if isinstance(c, _Counter) else None


def scaled_form(form: Any, factor: float, counter: _Counter | None = None) -> Any:
    """``form`` with its numeric outputs multiplied by ``factor``.

        >>> f = scaled_form(lambda x: 2.0 * x, 1.5)
        >>> f(2.0)
        6.0
        >>> g = scaled_form({"a": lambda: (1.0, "label")}, 2.0)
        >>> g["a"]()
        (2.0, 'label')
    """
    n = counter or _Counter()
    if callable(form) and not isinstance(form, type):
        def wrapped(*args, **kwargs):
            return _scale(form(*args, **kwargs), factor, n)

        wrapped.tverify_scaled = n  # a plugin check runs in a child: it sends back how many outputs it scaled there
        return wrapped
    if isinstance(form, dict):
        return {k: scaled_form(v, factor, n) for k, v in form.items()}
    return _scale(form, factor, n)


ScaleCounter = _Counter
