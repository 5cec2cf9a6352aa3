"""The value every derivation returns.

A derivation is data, not output: the ordered steps a reader follows (each a sentence and the
SymPy object it produced), the closed form that the steps end in, and the *obligations*: named
facts the derivation must establish (a residual that must be zero, an inequality that must hold).

Every step is marked:

* ``derived``: the expression was computed by SymPy from earlier steps or definitions
  (``diff``, ``integrate``, ``solve``, ``limit``, Wick sums, expansion, substitution);
* ``assumed``: a typed-in premise: a definition, a literature constant, a stated bound. An
  assumption is allowed as a premise; reports list every assumption of a claim visibly.

The closed form (``result``) must be the expression of a derived step: :meth:`DerivationBuilder.done`
records, per result entry, whether it is (``provenance``). Obligations are not evaluated when the
derivation is built but by :meth:`Obligation.evaluate`, which the runner calls as part of a claim's
symbolic layer, so a residual that fails to vanish is a reported failure, never a silent ``assert``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import sympy as sp

__all__ = ["Step", "Obligation", "ObligationResult", "Derivation", "DerivationBuilder", "STEP_KINDS", "OBLIGATION_KINDS"]

STEP_KINDS = ("derived", "assumed")
OBLIGATION_KINDS = ("zero", "true", "nonnegative", "positive")


@dataclass(frozen=True)
class Step:
    """One step of a derivation: a sentence, the expression it produced, and how it was obtained.

    ``how`` is ``"derived"`` (computed by SymPy) or ``"assumed"`` (typed in: a definition, a
    premise, a literature constant); ``role`` says which kind of assumption ("definition",
    "premise", "constant", "bound") or is empty. ``compact`` is an optional short form shown before
    the full expression (matrix symbols, factored), e.g. ``"ΛΓ_N B Λ − Λ² = 0"``.
    """

    text: str
    expr: Any = None
    how: str = "derived"
    role: str = ""
    compact: Any = None

    def latex(self) -> str:
        """LaTeX of the step's expression ('' when the step is text only)."""
        return _latex(self.expr)

    def compact_latex(self) -> str:
        """LaTeX of the compact form ('' when there is none)."""
        return _latex(self.compact)


def _latex(expr: Any) -> str:
    if expr is None:
        return ""
    if isinstance(expr, str):
        return expr
    try:
        return sp.latex(expr)
    except Exception:  # pragma: no cover - printing must never break a report
        return str(expr)


@dataclass
class ObligationResult:
    """What evaluating an obligation found: ``passed``, the residual as printed after the
    simplification that decided it, and the name of that simplification (``method``)."""

    name: str
    kind: str
    passed: bool
    residual: str
    method: str
    seconds: float = 0.0
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "passed": self.passed, "residual": self.residual,
                "method": self.method, "seconds": round(self.seconds, 4), "description": self.description}


# simplifications tried in order, cheapest first; the first that decides an obligation is recorded
_SIMPLIFIERS = (
    ("as computed", lambda e: e),
    ("expand", sp.expand),
    ("together+expand", lambda e: sp.expand(sp.together(e))),
    ("simplify", sp.simplify),
    ("exp/log rewrite+simplify", lambda e: sp.simplify(sp.powsimp(sp.expand_log(e, force=True), combine="exp"))),
)


def _entries(value: Any) -> list[Any]:
    if isinstance(value, (sp.MatrixBase,)):
        return list(value)
    if isinstance(value, dict):
        return [x for v in value.values() for x in _entries(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _entries(v)]
    return [value]


def _is_zero(e: Any) -> bool | None:
    if isinstance(e, sp.MatrixExpr):  # a matrix expression SymPy reduced (or not) symbolically
        if getattr(e, "is_ZeroMatrix", False):
            return True
        return None
    e = sp.sympify(e)
    if e == 0:
        return True
    z = getattr(e, "is_zero", None)
    if z is True:
        return True
    if e.is_number:
        try:
            v = complex(e.evalf(30))
        except (TypeError, ValueError):
            return None
        return None if v == 0 else False  # a nonzero numeric value decides "not zero"
    return None


def _truth(e: Any, kind: str) -> bool | None:
    if kind == "true":
        e = sp.sympify(e)
        if e in (sp.true, True):
            return True
        if e in (sp.false, False):
            return False
        return None
    e = sp.sympify(e)
    prop = e.is_nonnegative if kind == "nonnegative" else e.is_positive
    if prop is not None:
        return bool(prop)
    if e.is_number:
        v = e.evalf(30)
        if v.is_real:
            return bool(v >= 0) if kind == "nonnegative" else bool(v > 0)
    return None


@dataclass(frozen=True)
class Obligation:
    """A named fact the derivation must establish.

    kind ``"zero"``: ``expr`` (an expression, a matrix, or a list/dict of them) simplifies to 0
    entry by entry; ``"true"``: a relational or boolean simplifies to ``True``;
    ``"nonnegative"`` / ``"positive"``: the expression is ≥ 0 / > 0 under the symbols' assumptions.

    >>> x = sp.Symbol("x", real=True)
    >>> Obligation("pythagoras", sp.sin(x)**2 + sp.cos(x)**2 - 1).evaluate().passed
    True
    >>> Obligation("square", x**2, "nonnegative").evaluate().method
    'as computed'
    >>> r = Obligation("wrong", x + 1).evaluate(); (r.passed, r.residual)
    (False, 'x + 1')
    >>> Obligation("matrix expression", sp.ZeroMatrix(2, 2)).evaluate().passed
    True
    """

    name: str
    expr: Any
    kind: str = "zero"
    description: str = ""

    def __post_init__(self):
        if self.kind not in OBLIGATION_KINDS:
            raise ValueError(f"obligation {self.name!r}: kind must be one of {OBLIGATION_KINDS}")

    def evaluate(self) -> ObligationResult:
        """Try the simplifications in order; pass when one decides every entry in its favour.

        An entry that no simplification decides fails (a residual we cannot show to vanish is not
        shown to vanish); the residual printed is the last simplified form of the first such entry."""
        t0 = time.perf_counter()
        entries = _entries(self.expr)
        decide = _is_zero if self.kind == "zero" else (lambda e: _truth(e, self.kind))
        used = "as computed"
        for entry in entries:
            verdict, last = None, entry
            for name, simp in _SIMPLIFIERS:
                try:
                    last = simp(sp.sympify(entry)) if name != "as computed" else sp.sympify(entry)
                except Exception:  # a simplifier that cannot handle the entry decides nothing
                    continue
                verdict = decide(last)
                if verdict is not None:
                    if _SIMPLIFIERS.index((name, simp)) > [n for n, _ in _SIMPLIFIERS].index(used):
                        used = name
                    break
            if not verdict:
                return ObligationResult(self.name, self.kind, False, _short(last),
                                        name if verdict is False else "undecided after " + ", ".join(n for n, _ in _SIMPLIFIERS),
                                        time.perf_counter() - t0, self.description)
        shown = "0" if self.kind == "zero" else "True"
        return ObligationResult(self.name, self.kind, True, shown, used, time.perf_counter() - t0, self.description)


def _short(e: Any, limit: int = 300) -> str:
    s = str(e)
    return s if len(s) <= limit else s[: limit - 1] + "…"


@dataclass(frozen=True)
class Derivation:
    """Steps of a derivation, its closed form and its obligations.

    ``result`` is the closed form (a SymPy expression, matrix, or a dict of them when a derivation
    ends in several named results). ``facts`` holds named intermediate results that checks may
    use (e.g. a derived moment), so that a check never re-derives by other means what it compares.
    ``provenance`` maps each result entry (``"result"`` for a single one) to ``"derived"`` when it
    is the expression of a derived step, else ``"assumed"``. ``legend`` explains the symbols.
    """

    title: str
    steps: tuple[Step, ...]
    result: Any
    facts: dict[str, Any] = field(default_factory=dict)
    obligations: tuple[Obligation, ...] = ()
    provenance: dict[str, str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.steps)

    def as_pairs(self) -> list[tuple[str, Any]]:
        """The steps as ``(text, expr)`` pairs."""
        return [(s.text, s.expr) for s in self.steps]

    @property
    def assumptions(self) -> tuple[Step, ...]:
        """The typed-in steps (definitions, premises, constants, bounds)."""
        return tuple(s for s in self.steps if s.how == "assumed")

    @property
    def result_derived(self) -> bool:
        """Every entry of the closed form is the expression of a derived step."""
        return bool(self.provenance) and all(v == "derived" for v in self.provenance.values())

    def check_obligations(self) -> list[ObligationResult]:
        """Evaluate every obligation (see :meth:`Obligation.evaluate`)."""
        return [o.evaluate() for o in self.obligations]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        if isinstance(a, sp.MatrixBase) or isinstance(b, sp.MatrixBase):
            return isinstance(a, sp.MatrixBase) and isinstance(b, sp.MatrixBase) and a.shape == b.shape and a == b
        return bool(a == b)
    except Exception:
        return False


class DerivationBuilder:
    """Accumulates steps and obligations; ``done(result)`` freezes them into a :class:`Derivation`.

    ``step`` records a derived step (SymPy computed it), ``assume`` / ``define`` a typed-in one.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> b = DerivationBuilder("square")
    >>> e = b.define("Start from the definition", (x + 1) ** 2)
    >>> e = b.step("Expand", sp.expand(e))
    >>> _ = b.obligation("expansion is exact", e - (x + 1) ** 2)
    >>> d = b.done(e)
    >>> d.result
    x**2 + 2*x + 1
    >>> [s.how for s in d.steps], d.provenance
    (['assumed', 'derived'], {'result': 'derived'})
    >>> [o.passed for o in d.check_obligations()]
    [True]
    """

    def __init__(self, title: str):
        self.title = title
        self._steps: list[Step] = []
        self._obligations: list[Obligation] = []
        self.facts: dict[str, Any] = {}
        self.legend: dict[str, str] = {}

    def step(self, text: str, expr: Any = None, *, compact: Any = None) -> Any:
        """Record a derived step (the expression was computed by SymPy) and return its expression."""
        self._steps.append(Step(text, expr, "derived", "", compact))
        return expr

    def assume(self, text: str, expr: Any = None, *, role: str = "premise", compact: Any = None) -> Any:
        """Record a typed-in premise (``role``: "premise", "constant", "bound", "definition")."""
        self._steps.append(Step(text, expr, "assumed", role, compact))
        return expr

    def define(self, text: str, expr: Any = None, *, compact: Any = None) -> Any:
        """Record a definition: a typed-in starting point (an assumption with role "definition")."""
        return self.assume(text, expr, role="definition", compact=compact)

    def obligation(self, name: str, expr: Any, kind: str = "zero", description: str = "") -> Any:
        """Declare a fact the derivation must establish (evaluated by the runner, never asserted here)."""
        self._obligations.append(Obligation(name, expr, kind, description))
        return expr

    def inherit(self, sub: "Derivation", prefix: str) -> None:
        """Carry the obligations of a derivation this one builds on (names prefixed,
        ``prefix.name``), so that a claim's verdict covers its premises too."""
        for o in sub.obligations:
            self._obligations.append(Obligation(f"{prefix}.{o.name}", o.expr, o.kind, o.description))

    def symbols(self, **legend: str) -> None:
        """Explain symbols for the reader: ``b.symbols(l_t="logit of token t")``."""
        self.legend.update(legend)

    def fact(self, name: str, value: Any) -> Any:
        """Record a named intermediate result for checks."""
        self.facts[name] = value
        return value

    def done(self, result: Any) -> Derivation:
        entries = result.items() if isinstance(result, dict) else [("result", result)]
        derived = [s.expr for s in self._steps if s.how == "derived" and s.expr is not None]
        provenance = {str(k): ("derived" if any(_same(v, e) for e in derived) else "assumed") for k, v in entries}
        return Derivation(self.title, tuple(self._steps), result, dict(self.facts), tuple(self._obligations),
                          provenance, dict(self.legend))
