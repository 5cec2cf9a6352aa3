"""Input validation shared by every layer.

``InputError`` is the one exception type for user mistakes (a non-SPD Λ, a wrong shape, NaN,
an infeasible instance): the CLI turns it into one line and exit code 2, never a traceback.
It lives in ``theory`` because it is the bottom layer that every other layer may import.
"""

from __future__ import annotations

__all__ = ["InputError", "as_finite_array", "as_spd_matrix", "exception_text", "printable", "require"]


class InputError(ValueError):
    """A user-supplied input is invalid; the message names the problem."""


def printable(obj, how=str) -> str:
    """``how(obj)`` (``str`` or ``repr``) of an object the user's code made, for a message: an object whose
    ``__str__``/``__repr__`` raises or returns a non-string is ``<unprintable TypeName>``, never the
    formatting error in place of what is being reported (hostile pass 42a: an exception whose ``__str__``
    raised was reported as that ``RuntimeError``). A real Ctrl-C while formatting goes on.

        >>> class Bad:
        ...     def __repr__(self): raise RuntimeError("boom")
        >>> printable(Bad(), repr), printable(3, repr)
        ('<unprintable Bad>', '3')
    """
    try:
        text = how(obj)
        if isinstance(text, str):
            return text
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - the user's formatting code: any exception, SystemExit included
        pass
    return f"<unprintable {type_name(obj)}>"


def type_name(obj) -> str:
    """The name of ``obj``'s class (``type.__name__`` read from ``type`` itself, so a metaclass cannot
    change or break it)."""
    return type.__dict__["__name__"].__get__(type(obj))


def exception_text(exc: BaseException) -> str:
    """``TypeName: message`` of a user's exception on one line (whitespace folded), uncut; the real
    class is named even when its message cannot be printed.

        >>> exception_text(ValueError("a\\n b")), exception_text(KeyError())
        ('ValueError: a b', 'KeyError')
    """
    msg = visible(" ".join(printable(exc).split()))
    return f"{type_name(exc)}: {msg}" if msg else type_name(exc)


def visible(text: str) -> str:
    """``text`` with every character that is not printable (an escape that retitles or recolours a terminal, a
    backspace that overwrites what is shown, a bell) written as its escape, ``\\x1b``: a user's text quoted in a message
    reaches the terminal as text (hostile pass 54a F6).

        >>> visible("bad\\x08ok \\x1b]0;t\\x07")
        'bad\\\\x08ok \\\\x1b]0;t\\\\x07'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   for c in text)


def require(condition: bool, message: str) -> None:
    """Raise :class:`InputError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise InputError(message)


def as_finite_array(a, name: str, *, ndim: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """Return ``a`` as a float64 array, checking finiteness and (optionally) ndim / shape.

    ``shape`` entries may be ``None`` for "any size".

    >>> as_finite_array([1, 2], "v", ndim=1)
    array([1., 2.])
    >>> as_finite_array([1, float("nan")], "v")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: v contains NaN or inf
    """
    import numpy as np  # (here: list/show import this module for printable() and load no NumPy)

    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} is not numeric: {exc}") from None
    if ndim is not None and arr.ndim != ndim:
        raise InputError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None:
        ok = arr.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, arr.shape))
        if not ok:
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise InputError(f"{name} must have shape {want}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf")
    return arr


def as_spd_matrix(a, name: str = "Lambda", *, rtol: float = 1e-12) -> np.ndarray:
    """Return ``a`` as a symmetric positive-definite float64 matrix or raise :class:`InputError`.

    A 1-D input is read as a diagonal. Symmetry is checked to ``rtol`` relative to the largest
    entry (float64 rounding of a user's file), positive definiteness by Cholesky.

    >>> as_spd_matrix([1, 2])
    array([[1., 0.],
           [0., 2.]])
    >>> as_spd_matrix([[1, 2], [2, 1]])
    Traceback (most recent call last):
    ...
    theory.validation.InputError: Lambda is not positive definite (smallest eigenvalue -1)
    >>> as_spd_matrix([[2e-12, 5e-13], [4e-13, 1e-12]])
    Traceback (most recent call last):
    ...
    theory.validation.InputError: Lambda is not symmetric (max |A − Aᵀ| = 1e-13, 0.05 of its largest entry)
    """
    import numpy as np

    arr = as_finite_array(a, name)
    if arr.ndim == 1:
        arr = np.diag(arr)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise InputError(f"{name} must be a square matrix (or a diagonal), got shape {arr.shape}")
    # relative to the largest entry, whatever the unit (a floor of 1 accepted a 20 % asymmetry in entries ~1e-12 and
    # averaged it away: hostile pass 58a F5)
    scale = float(np.max(np.abs(arr)))
    if not np.allclose(arr, arr.T, rtol=0.0, atol=rtol * scale * 100):
        gap = float(np.max(np.abs(arr - arr.T)))
        raise InputError(f"{name} is not symmetric (max |A − Aᵀ| = {gap:.3g}, {gap / scale:.3g} of its largest entry)")
    arr = (arr + arr.T) / 2
    try:
        np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        lam_min = float(np.linalg.eigvalsh(arr)[0])
        raise InputError(f"{name} is not positive definite (smallest eigenvalue {lam_min:.3g})") from None
    return arr
