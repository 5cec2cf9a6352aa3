"""The value every derivation returns.

A derivation is data, not output: the ordered steps a reader follows (each a sentence and the
SymPy object it produced) and the closed form that the steps end in. The report writers render
the steps; the checks compare the closed form with independent numerics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

__all__ = ["Step", "Derivation", "DerivationBuilder"]


@dataclass(frozen=True)
class Step:
    """One step of a derivation: a sentence and the expression it produced."""

    text: str
    expr: Any = None

    def latex(self) -> str:
        """LaTeX of the step's expression ('' when the step is text only)."""
        if self.expr is None:
            return ""
        if isinstance(self.expr, str):
            return self.expr
        try:
            return sp.latex(self.expr)
        except Exception:  # pragma: no cover - printing must never break a report
            return str(self.expr)


@dataclass(frozen=True)
class Derivation:
    """Steps of a derivation and its closed form.

    ``result`` is the closed form (a SymPy expression, matrix, or a dict of them when a derivation
    ends in several named results). ``facts`` holds named intermediate results that checks may
    use (e.g. a derived moment), so that a check never re-derives by other means what it compares.
    """

    title: str
    steps: tuple[Step, ...]
    result: Any
    facts: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.steps)

    def as_pairs(self) -> list[tuple[str, Any]]:
        """The steps as ``(text, expr)`` pairs."""
        return [(s.text, s.expr) for s in self.steps]


class DerivationBuilder:
    """Accumulates steps; ``done(result)`` freezes them into a :class:`Derivation`.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> b = DerivationBuilder("square")
    >>> e = b.step("Start from the definition", (x + 1) ** 2)
    >>> e = b.step("Expand", sp.expand(e))
    >>> d = b.done(e)
    >>> d.result
    x**2 + 2*x + 1
    >>> len(d.steps)
    2
    """

    def __init__(self, title: str):
        self.title = title
        self._steps: list[Step] = []
        self.facts: dict[str, Any] = {}

    def step(self, text: str, expr: Any = None) -> Any:
        """Record a step and return its expression (so calls chain)."""
        self._steps.append(Step(text, expr))
        return expr

    def fact(self, name: str, value: Any) -> Any:
        """Record a named intermediate result for checks."""
        self.facts[name] = value
        return value

    def done(self, result: Any) -> Derivation:
        return Derivation(self.title, tuple(self._steps), result, dict(self.facts))
