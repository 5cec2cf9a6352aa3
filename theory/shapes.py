"""Argument declarations with shapes: scalars, vectors and matrices of symbolic or sampled size.

A claim about vectors (``⟨R_m q, R_n k⟩ = ⟨q, R_{n−m} k⟩`` for ``q, k ∈ ℝ^d``) declares its
arguments once::

    ARGS = (vector("q", "d"), vector("k", "d"), scalar("m"), scalar("n"))

and the same declaration gives

* :func:`bind`: SymPy objects at a size — a column ``Matrix`` of scalar symbols ``q_0 … q_{d−1}``
  where every size is a number (``bind(ARGS, d=4)``), a ``MatrixSymbol`` ``q`` of shape ``(d, 1)``
  where a size stays a symbol (``bind(ARGS)``: derivations at symbolic size);
* :func:`explicit`: an expression over ``MatrixSymbol`` arguments at concrete sizes, with every
  ``MatrixSymbol`` replaced by its matrix of scalar symbols (what NumPy can evaluate);
* :func:`sample`: NumPy values of those shapes (a vector is a ``(d,)`` array, a matrix ``(r, c)``,
  a scalar a float), drawn by each argument's ``draw`` (default standard normal);
* :func:`lambdify_args`: the argument list for ``sympy.lambdify`` (nested symbol lists: a NumPy
  array of the declared shape unpacks into them).

Sizes are names (``"d"``: sampled or symbolic) or integers (fixed). Only SymPy and NumPy are used.

    >>> import numpy as np
    >>> q, k, m = bind((vector("q", "d"), vector("k", "d"), scalar("m")), d=3)
    >>> q.shape, m
    ((3, 1), m)
    >>> Q, = bind((vector("q", "d"),)); Q.shape
    (d, 1)
    >>> [np.shape(v) for v in sample((vector("q", "d"), matrix("W", "d", 2), scalar("m")), np.random.default_rng(0), d=3)]
    [(3,), (3, 2), ()]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np
import sympy as sp

__all__ = ["Arg", "scalar", "vector", "matrix", "bind", "sample", "explicit", "lambdify_args", "size_names",
           "size_symbol"]


def size_symbol(name: str) -> sp.Symbol:
    """The SymPy symbol of a named size (a positive integer): the same object wherever it is used."""
    return sp.Symbol(name, integer=True, positive=True)


@dataclass(frozen=True)
class Arg:
    """One declared argument: ``name``, ``shape`` (``()`` scalar, ``(n,)`` vector, ``(r, c)`` matrix;
    each entry an ``int`` or a size name), SymPy ``assumptions`` of its entries (default real), and
    ``draw(rng, shape)`` for sampled values (default standard normal; a scalar gets ``shape == ()``)."""

    name: str
    shape: tuple = ()
    assumptions: tuple = (("real", True),)
    draw: Callable[[np.random.Generator, tuple], Any] | None = None

    def dims(self, sizes: dict[str, int]) -> tuple:
        """The shape with the named sizes looked up in ``sizes`` (a name missing stays a name)."""
        return tuple(sizes.get(s, s) if isinstance(s, str) else int(s) for s in self.shape)

    def symbolic(self, sizes: dict[str, int] | None = None) -> Any:
        """The SymPy object: a ``Symbol`` (scalar), a ``Matrix`` of symbols (every size known) or a
        ``MatrixSymbol`` (a size left symbolic); vectors are columns ``(n, 1)``."""
        kw = dict(self.assumptions)
        if not self.shape:
            return sp.Symbol(self.name, **kw)
        dims = self.dims(sizes or {})
        if any(isinstance(s, str) for s in dims):
            r, c = (dims + (1,))[:2]
            as_sym = lambda s: size_symbol(s) if isinstance(s, str) else sp.Integer(s)  # noqa: E731
            return sp.MatrixSymbol(self.name, as_sym(r), as_sym(c))
        if len(dims) == 1:
            return sp.Matrix([sp.Symbol(f"{self.name}_{i}", **kw) for i in range(dims[0])])
        r, c = dims
        return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{self.name}_{i}{j}", **kw))

    def value(self, rng: np.random.Generator, sizes: dict[str, int]) -> Any:
        """A sampled value of the declared shape (every size must be known)."""
        dims = self.dims(sizes)
        if any(isinstance(s, str) for s in dims):
            raise ValueError(f"argument {self.name!r}: size {[s for s in dims if isinstance(s, str)]} not given")
        v = self.draw(rng, dims) if self.draw is not None else rng.standard_normal(dims)
        return float(v) if not dims else np.asarray(v, dtype=float)


def scalar(name: str, *, draw: Callable | None = None, **assumptions: Any) -> Arg:
    """A scalar argument (real unless ``real=False``; other SymPy assumptions such as ``positive=True``)."""
    return Arg(name, (), tuple({"real": True, **assumptions}.items()), draw)


def vector(name: str, n: "int | str", *, draw: Callable | None = None, **assumptions: Any) -> Arg:
    """A vector argument of size ``n`` (an int, or a size name such as ``"d"``)."""
    return Arg(name, (n,), tuple({"real": True, **assumptions}.items()), draw)


def matrix(name: str, rows: "int | str", cols: "int | str", *, draw: Callable | None = None, **assumptions: Any) -> Arg:
    """A matrix argument of shape ``rows × cols`` (ints or size names)."""
    return Arg(name, (rows, cols), tuple({"real": True, **assumptions}.items()), draw)


def size_names(args: Iterable[Arg]) -> list[str]:
    """The named sizes the declarations use, in order of appearance."""
    out: list[str] = []
    for a in args:
        out += [s for s in a.shape if isinstance(s, str) and s not in out]
    return out


def _positive_sizes(fn: str, sizes: dict) -> dict:
    """``sizes`` when each is a whole number ≥ 1; else one :class:`~theory.validation.InputError` line
    (``d=-1`` bound an empty ``Matrix(0, 0)``, silently: hostile pass 5, M7).

        >>> _positive_sizes("bind", {"d": -1})
        Traceback (most recent call last):
        ...
        theory.validation.InputError: bind: size d = -1: a size must be a whole number ≥ 1
    """
    from theory.validation import InputError

    for name, v in sizes.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{fn}: size {name} = {v!r:.40}: a size must be a whole number ≥ 1")
    return sizes


def bind(args: Iterable[Arg], **sizes: int) -> tuple:
    """SymPy objects of the declared arguments at ``sizes`` (see the module docstring)."""
    sizes = _positive_sizes("bind", sizes)
    return tuple(a.symbolic(sizes) for a in args)


def sample(args: Iterable[Arg], rng: np.random.Generator, **sizes: int) -> tuple:
    """NumPy values of the declared arguments at ``sizes``."""
    sizes = _positive_sizes("sample", sizes)
    return tuple(a.value(rng, sizes) for a in args)


def explicit(expr: Any, objs: Iterable[Any], **sizes: int) -> tuple[Any, tuple]:
    """``expr`` (built from the arguments ``objs``, possibly ``MatrixSymbol``s of symbolic size) at
    concrete ``sizes``: each ``MatrixSymbol`` becomes its matrix of scalar symbols and matrix
    expressions are made explicit (a ``1 × 1`` result becomes its entry). Returns the expression and
    the arguments as plain ``Symbol``/``Matrix`` objects.

        >>> Q, K = bind((vector("q", "d"), vector("k", "d")))
        >>> e, (q, k) = explicit((Q.T * K)[0, 0], (Q, K), d=2)
        >>> e
        k_0*q_0 + k_1*q_1
    """
    subs = {size_symbol(n): v for n, v in sizes.items()}
    plain, rep = [], {}
    for o in objs:
        if isinstance(o, sp.MatrixSymbol):
            r, c = (int(sp.sympify(s).xreplace(subs)) for s in o.shape)
            m = sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{o.name}_{i}" if c == 1 else f"{o.name}_{i}{j}", real=True))
            rep[o.xreplace(subs)] = sp.ImmutableMatrix(m)
            plain.append(m)
        else:
            plain.append(o)

    def conv(e: Any) -> Any:
        if isinstance(e, dict):
            return {k: conv(v) for k, v in e.items()}
        e = sp.sympify(e).xreplace(subs)
        if rep:
            e = e.xreplace(rep)
        if isinstance(e, sp.MatrixExpr) or hasattr(e, "doit"):
            e = e.doit()
        if isinstance(e, sp.MatrixExpr) and not isinstance(e, sp.MatrixBase):
            e = e.as_explicit()
        if isinstance(e, sp.MatrixBase) and e.shape == (1, 1):
            e = e[0, 0]
        return e

    return conv(expr), tuple(plain)


def lambdify_args(objs: Iterable[Any]) -> list:
    """``sympy.lambdify`` arguments for plain objects: a symbol, a vector's entries (flat list, so a
    ``(n,)`` array unpacks into it), a matrix's rows (nested list, for an ``(r, c)`` array)."""
    out = []
    for o in objs:
        if isinstance(o, sp.MatrixBase):
            out.append(list(o) if o.shape[1] == 1 else o.tolist())
        else:
            out.append(o)
    return out
