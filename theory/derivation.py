"""The value every derivation returns.

A derivation is data, not output: the ordered steps a reader follows (each a sentence and the
SymPy object it produced), the closed form that the steps end in, and the *obligations*: named
facts the derivation must establish (a residual that must be zero, an inequality that must hold).

Every step is marked:

* ``derived``: the step holds a SymPy result computed from earlier steps or definitions
  (``diff``, ``integrate``, ``solve``, ``limit``, Wick sums, expansion, substitution). The builder
  refuses a derived step without one (:class:`DerivationError`): no expression, a typed string, or
  an object SymPy cannot represent. A derived step that holds an equality, inequality or boolean
  is a fact, not a value: it becomes an obligation (``"step N"``), so it counts only when SymPy
  decides it ``True``;
* ``assumed``: a typed-in premise: a definition, a literature constant, a stated bound. An
  assumption is allowed as a premise; reports list every assumption of a claim visibly;
* ``argued``: a step of reasoning in words (a bound, an inequality chain) that no SymPy operation
  produced: shown as such, never as derived.

An assumed premise (any role but ``"definition"``) or an argued step carries a ``key`` (a short
name) and the clauses it supports (``clauses``, empty: every clause the derivation establishes). A
clause labelled derived names the keys it rests on (``Clause.rests_on`` in the registry), so its
scope says which steps are not computations; :func:`premise_gaps` lists what a clause leaves out.

The closed form (``result``) must be the expression of a derived step: :meth:`DerivationBuilder.done`
records, per result entry, whether it is (``provenance``); ``done(result, display=simpler)`` shows an
equal simpler form instead, with the equality as an obligation. Obligations are not evaluated when the
derivation is built but by :meth:`Obligation.evaluate`, which the runner calls as part of a claim's
symbolic layer, so a residual that fails to vanish is a reported failure, never a silent ``assert``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import sympy as sp

from theory.deciding import (DIGITS, OBLIGATION_STATUSES, UNDEFINED_VALUE, ObligationResult, _entries,  # noqa: F401
                             _is_zero, _NAMES, _sample, _search, _short, _SIMPLIFIERS, _truth,
                             certified)

__all__ = ["DerivationError", "premise_gaps", "progress", "reset_progress", "Step", "Obligation", "ObligationResult", "Derivation", "DerivationBuilder", "STEP_KINDS", "OBLIGATION_KINDS",
           "OBLIGATION_STATUSES", "certified"]

STEP_KINDS = ("derived", "assumed", "argued")
#: roles of steps that are not computations and that a clause labelled derived must name (a
#: definition is not a premise: it says what a symbol means)
PREMISE_ROLES = ("premise", "constant", "bound", "argument")


class DerivationError(ValueError):
    """A derivation was built wrongly (a step badged derived that holds no SymPy result); one line.

        >>> DerivationBuilder("demo").step("the bound follows", None)
        Traceback (most recent call last):
        ...
        theory.derivation.DerivationError: demo: step 1 'the bound follows' is badged derived but holds no SymPy result (use argue() or assume() for a step in words)
    """
OBLIGATION_KINDS = ("zero", "true", "nonnegative", "positive")


@dataclass(frozen=True)
class Step:
    """One step of a derivation: a sentence, the expression it produced, and how it was obtained.

    ``how`` is ``"derived"`` (computed by SymPy), ``"assumed"`` (typed in: a definition, a
    premise, a literature constant) or ``"argued"`` (reasoning in words); ``role`` says which kind
    of assumption ("definition", "premise", "constant", "bound", "argument") or is empty.
    ``compact`` is an optional short form shown before the full expression (matrix symbols,
    factored), e.g. ``"ΛΓ_N B Λ − Λ² = 0"``. ``key`` names a premise or argued step for the clauses
    that rest on it; ``clauses`` lists those clauses (empty: every clause of the derivation).
    """

    text: str
    expr: Any = None
    how: str = "derived"
    role: str = ""
    compact: Any = None
    key: str = ""
    clauses: tuple[str, ...] = ()

    @property
    def is_premise(self) -> bool:
        """Not a computation and not a definition: a clause labelled derived must name it."""
        return self.how in ("assumed", "argued") and self.role in PREMISE_ROLES

    def latex(self) -> str:
        """LaTeX of the step's expression ('' when the step is text only)."""
        return _latex(self.expr)

    def compact_latex(self) -> str:
        """LaTeX of the compact form ('' when there is none)."""
        return _latex(self.compact)

    def pretty(self, limit: int = 4000) -> str:
        """The expression in SymPy's Unicode pretty form, for a terminal ('' when the step is text
        only or the form would be longer than ``limit`` characters; the LaTeX is then shown).

            >>> print(Step("x", sp.Symbol("x") ** 2 / 2).pretty().replace(" ", "."))
            .2
            x.
            ──
            2.
        """
        expr = self.compact if self.compact is not None and not isinstance(self.compact, str) else self.expr
        if expr is None or isinstance(expr, str):
            return ""
        try:
            out = sp.pretty(expr, use_unicode=True, wrap_line=False)
        except Exception:  # pragma: no cover - printing must never break a report
            return ""
        return out if len(out) <= limit else ""


def _latex(expr: Any) -> str:
    if expr is None:
        return ""
    if isinstance(expr, str):
        return expr
    try:
        return sp.latex(expr)
    except Exception:  # pragma: no cover - printing must never break a report
        return str(expr)


@dataclass(frozen=True)
class Obligation:
    """A named fact the derivation must establish.

    kind ``"zero"``: ``expr`` (an expression, a matrix, or a list/dict of them) simplifies to 0
    entry by entry; ``"true"``: a relational or boolean simplifies to ``True``;
    ``"nonnegative"`` / ``"positive"``: the expression is ≥ 0 / > 0 under the symbols' assumptions (in the extended
    reals: +∞ > 0).

    :meth:`evaluate` concludes ``holds``, ``fails`` (with a counterexample) or ``undecided``.

    >>> x = sp.Symbol("x", real=True)
    >>> Obligation("pythagoras", sp.sin(x)**2 + sp.cos(x)**2 - 1).evaluate().passed
    True
    >>> Obligation("square", x**2, "nonnegative").evaluate().method
    'as computed'
    >>> r = Obligation("wrong", x + 1).evaluate(); (r.passed, r.status, r.residual)
    (False, 'fails', 'x + 1')
    >>> sorted(r.counterexample)
    ['value', 'x']
    >>> Obligation("matrix expression", sp.ZeroMatrix(2, 2)).evaluate().passed
    True
    >>> c = sp.cos(sp.pi/7) - sp.cos(2*sp.pi/7) + sp.cos(3*sp.pi/7) - sp.Rational(1, 2)
    >>> r = Obligation("cosines", c).evaluate(); (r.status, r.method)
    ('holds', 'as computed + minimal polynomial')
    >>> y = sp.Symbol("y", positive=True)
    >>> Obligation("lambert", sp.LambertW(y) * sp.exp(sp.LambertW(y)) - y).evaluate().status
    'undecided'
    """

    name: str
    expr: Any
    kind: str = "zero"
    description: str = ""

    def __post_init__(self):
        if self.kind not in OBLIGATION_KINDS:
            raise ValueError(f"obligation {self.name!r}: kind must be one of {OBLIGATION_KINDS}")

    def evaluate(self) -> ObligationResult:
        """Try the simplifications in order; an entry holds when one decides it in its favour.

        A closed number is decided only by a value certified to :data:`DIGITS` digits (nonzero)
        or by an exact method (minimal polynomial, ``Expr.equals``): a value that rounding cannot
        tell from zero decides nothing. An entry no method decides is searched for a
        counterexample (:data:`SEARCH_POINTS` exact points of its free symbols, each value
        certified): one found makes the obligation ``fails``, none ``undecided``."""
        t0 = time.perf_counter()
        entries = _entries(self.expr)
        decide = _is_zero if self.kind == "zero" else (lambda e: _truth(e, self.kind))
        used, extra = "as computed", set()
        undecided: ObligationResult | None = None
        for entry in entries:
            verdict, last, how, method = None, entry, "", "as computed"
            for name, simp in _SIMPLIFIERS:
                try:
                    last = simp(sp.sympify(entry)) if name != "as computed" else sp.sympify(entry)
                except Exception:  # a simplifier that cannot handle the entry decides nothing
                    continue
                verdict, how = decide(last)
                if verdict is not None:
                    method = name
                    break
            if verdict is True:
                if _NAMES.index(method) > _NAMES.index(used):
                    used = method
                if how:
                    extra.add(how)
                continue
            cx, n = _search(entry, self.kind)
            if verdict is False or cx is not None:
                if cx is None and how.startswith("value "):
                    cx = {"value": how.split(" (", 1)[0][len("value "):]}
                why = method + (f" ({how})" if how and not how.startswith("value ") else "")
                if verdict is not False:
                    why = f"counterexample found by a numeric search after {', '.join(_NAMES)}"
                return ObligationResult(self.name, self.kind, False, _short(last), why, time.perf_counter() - t0,
                                        self.description, "fails", cx,
                                        undefined=verdict is False and any(u in how for u in UNDEFINED_VALUE.values()))
            if undecided is None:
                undecided = ObligationResult(
                    self.name, self.kind, False, _short(last),
                    f"undecided: {', '.join(_NAMES)}, minimal polynomial and Expr.equals did not decide it; "
                    + (f"no counterexample at {n} exact points (values certified to {DIGITS} digits)" if n
                       else "no numeric search possible"),
                    0.0, self.description, "undecided", None)
        if undecided is not None:  # every other entry holds or is undecided too
            undecided.seconds = time.perf_counter() - t0
            return undecided
        shown = "0" if self.kind == "zero" else "True"
        method = used + "".join(f" + {h}" for h in sorted(extra))
        return ObligationResult(self.name, self.kind, True, shown, method, time.perf_counter() - t0, self.description,
                                "holds")


@dataclass(frozen=True)
class Derivation:
    """Steps of a derivation, its closed form and its obligations.

    ``result`` is the closed form (a SymPy expression, matrix, or a dict of them when a derivation
    ends in several named results). ``facts`` holds named intermediate results that checks may
    use (e.g. a derived moment), so that a check never re-derives by other means what it compares.
    ``provenance`` maps each result entry (``"result"`` for a single one) to ``"derived"`` when it
    is the expression of a derived step, else ``"assumed"``. ``legend`` explains the symbols.

        >>> import sympy as sp
        >>> from theory.derivation import DerivationBuilder
        >>> b = DerivationBuilder("square"); x = b.fact("args", (sp.Symbol("x"),))[0]
        >>> d = b.done(b.step("Expand", sp.expand((x + 1) ** 2)))
        >>> d.result, d.provenance
        (x**2 + 2*x + 1, {'result': 'derived'})
    """

    title: str
    steps: tuple[Step, ...]
    result: Any
    facts: dict[str, Any] = field(default_factory=dict)
    obligations: tuple[Obligation, ...] = ()
    provenance: dict[str, str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)
    inherited: tuple[tuple[str, Step], ...] = ()

    def __iter__(self):
        return iter(self.steps)

    def as_pairs(self) -> list[tuple[str, Any]]:
        """The steps as ``(text, expr)`` pairs."""
        return [(s.text, s.expr) for s in self.steps]

    @property
    def assumptions(self) -> tuple[Step, ...]:
        """The typed-in steps (definitions, premises, constants, bounds), own and inherited (from a
        derivation this one builds on, :meth:`DerivationBuilder.inherit`)."""
        return tuple(s for s in self.steps if s.how != "derived") + tuple(s for _, s in self.inherited)

    def assumption_texts(self) -> list[str]:
        """The assumptions as lines: own ones as written, inherited ones prefixed by where they come from.

            >>> b = DerivationBuilder("inner"); _ = b.assume("Λ is positive definite", None)
            >>> inner = b.done(b.step("one", sp.Integer(1)))
            >>> outer = DerivationBuilder("outer"); outer.inherit(inner, "loss")
            >>> outer.done(outer.step("two", sp.Integer(2))).assumption_texts()
            ['(inherited from loss) Λ is positive definite']
        """
        own = [(s.text if s.how == "assumed" else f"(argued) {s.text}") for s in self.steps if s.how != "derived"]
        return own + [f"(inherited from {p}) {s.text}" for p, s in self.inherited]

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


def _is_sympy_result(expr: Any) -> bool:
    """A SymPy object (or a number SymPy represents exactly, or a container of them), not ``None``,
    not a string."""
    if expr is None or isinstance(expr, str):
        return False
    if isinstance(expr, (sp.Basic, sp.MatrixBase)):
        return True
    if isinstance(expr, bool):
        return True
    if isinstance(expr, (int, float)):
        return True
    if isinstance(expr, dict):
        return bool(expr) and all(_is_sympy_result(v) for v in expr.values())
    if isinstance(expr, (list, tuple)):
        return bool(expr) and all(_is_sympy_result(v) for v in expr)
    return False


def _is_fact(expr: Any) -> bool:
    """An equality, inequality or boolean (a claim SymPy must decide), not yet the literal True.
    ``Eq(name, value)`` with a bare name (a symbol, matrix symbol, indexed or function symbol that the
    value does not contain) labels a computed value and is not a fact.

        >>> x, S = sp.Symbol("x"), sp.Symbol("S_1")
        >>> _is_fact(sp.Eq(S, x + 1)), _is_fact(sp.Eq(x + 1, 1 + x, evaluate=False)), _is_fact(sp.Le(x, x + 1))
        (False, True, True)
    """
    if isinstance(expr, bool):
        return not expr
    if isinstance(expr, sp.Eq) and _is_name(expr.lhs) and not expr.rhs.has(expr.lhs):
        return False
    if isinstance(expr, (sp.core.relational.Relational, sp.logic.boolalg.Boolean)) and not isinstance(expr, sp.Symbol):
        return expr is not sp.true
    return False


def _is_name(e: Any) -> bool:
    from sympy.core.function import AppliedUndef

    return isinstance(e, (sp.Symbol, sp.MatrixSymbol, sp.Indexed, AppliedUndef))


def premise_gaps(derivation: "Derivation", clause: str, rests_on: tuple[str, ...]) -> list[str]:
    """The premises and argued steps of ``derivation`` that clause ``clause`` rests on but does not
    name in ``rests_on`` (one line each; empty when the clause names them all). A step without a
    key is a gap too: nothing can name it.

        >>> b = DerivationBuilder("d"); _ = b.assume("γ = 1/(2(K−1))", sp.Integer(1), key="γ choice")
        >>> _ = b.argue("P P′ ≤ (1 + S₁)²", key="denominator", clauses=("other",))
        >>> d = b.done(b.step("one", sp.Integer(1)))
        >>> premise_gaps(d, "same_token", ()), premise_gaps(d, "same_token", ("γ choice",))
        (["step 1 [assumed] 'γ = 1/(2(K−1))' (key 'γ choice')"], [])
    """
    gaps = []
    own = [(f"step {i}", s) for i, s in enumerate(derivation.steps, 1)]
    inherited = [(f"inherited from {p}", s) for p, s in getattr(derivation, "inherited", ())]
    for where, s in own + inherited:
        if not s.is_premise or (s.clauses and clause not in s.clauses):
            continue
        if not s.key or s.key not in rests_on:
            gaps.append(f"{where} [{s.how}] {_short(s.text, 80)!r}" + (f" (key {s.key!r})" if s.key else " (no key)"))
    return gaps


#: the builders of derivations now being built (innermost last): where a derivation stopped when it
#: ran out of time (see :func:`progress`)
_BUILDING: list["DerivationBuilder"] = []


def progress() -> str:
    """Where the derivations now being built have got to: the innermost builder's title and the
    number and text of its last recorded step ('' when none is being built). The runner names it
    when a derivation runs past its time budget.

        >>> reset_progress(); b = DerivationBuilder("demo"); _ = b.step("first step", sp.Integer(1)); progress()
        "demo: after step 1 'first step'"
        >>> _ = b.done(sp.Integer(1)); progress()
        ''
    """
    if not _BUILDING:
        return ""
    b = _BUILDING[-1]
    if not b._steps:
        return f"{b.title}: before its first step"
    return f"{b.title}: after step {len(b._steps)} {b._steps[-1].text!r}"


def reset_progress() -> None:
    """Forget builders left unfinished (a derivation that raised or was stopped)."""
    _BUILDING.clear()


_OK = object()


def _sympifiable(e: Any) -> bool:
    try:
        sp.sympify(e, strict=True)
    except Exception:  # noqa: BLE001 - SympifyError, or what a strange object's conversion raises
        return False
    return True


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
        self._inherited: list[tuple[str, Step]] = []
        _BUILDING.append(self)

    def step(self, text: str, expr: Any = None, *, compact: Any = None, equation: bool = False) -> Any:
        """Record a derived step (the expression was computed by SymPy) and return its expression.

        Refused (:class:`DerivationError`) unless ``expr`` is a SymPy result: an expression, a
        matrix, a number, or a tuple/list/dict of them. An equality, inequality or boolean is a fact
        the step claims: it is recorded as the obligation ``"step N"`` (kind ``"true"``), decided by
        SymPy when the runner evaluates the obligations, so an undecided one is never a pass.
        ``equation=True`` marks an equation the derivation *poses* (stationarity ∂L/∂B = 0, a linear
        system) for a later step to solve: a computed left-hand side, not a claimed fact.

            >>> x = sp.Symbol("x", positive=True)
            >>> b = DerivationBuilder("demo"); _ = b.step("x² + 1 > 0", sp.Gt(x**2 + 1, 0, evaluate=False))
            >>> [(o.name, o.kind) for o in b._obligations]
            [('step 1', 'true')]
        """
        n = len(self._steps) + 1
        if not _is_sympy_result(expr):
            why = "holds no SymPy result" if expr is None or isinstance(expr, str) else \
                f"holds a {type(expr).__name__}, not a SymPy result"
            raise DerivationError(f"{self.title}: step {n} {text!r} is badged derived but {why} "
                                  "(use argue() or assume() for a step in words)")
        self._steps.append(Step(text, expr, "derived", "", compact))
        if _is_fact(expr) and not equation:
            self._obligations.append(Obligation(f"step {n}", expr, "true", f"the fact step {n} states: {text}"))
        return expr

    def assume(self, text: str, expr: Any = None, *, role: str = "premise", compact: Any = None, key: str = "",
               clauses: tuple[str, ...] = ()) -> Any:
        """Record a typed-in premise (``role``: "premise", "constant", "bound", "definition").
        ``key`` names it for the clauses that rest on it (``clauses``; empty: every clause)."""
        self._steps.append(Step(text, expr, "assumed", role, compact, key, tuple(clauses)))
        return expr

    def argue(self, text: str, expr: Any = None, *, key: str, clauses: tuple[str, ...] = (), compact: Any = None) -> Any:
        """Record a step of reasoning in words (a bound, an inequality chain) that no SymPy
        operation produced; ``expr`` is optional (the form the words arrive at). Shown as argued,
        listed with the assumptions, and named (``key``) by every clause that rests on it.

            >>> b = DerivationBuilder("demo"); _ = b.argue("P(G)P(G′) ≤ (1 + S₁)²", key="denominator bound")
            >>> b._steps[0].how, b._steps[0].role
            ('argued', 'argument')
        """
        if not str(key).strip():
            raise DerivationError(f"{self.title}: argued step {text!r} needs a key (a short name clauses cite)")
        self._steps.append(Step(text, expr, "argued", "argument", compact, key, tuple(clauses)))
        return expr

    def define(self, text: str, expr: Any = None, *, compact: Any = None) -> Any:
        """Record a definition: a typed-in starting point (an assumption with role "definition")."""
        return self.assume(text, expr, role="definition", compact=compact)

    def obligation(self, name: str, expr: Any, kind: str = "zero", description: str = "") -> Any:
        """Declare a fact the derivation must establish (evaluated by the runner, never asserted here). One with no
        entry (an empty matrix, list or dict) states nothing, and is refused: it "held" (hostile pass 46b F6)."""
        if not _entries(expr):
            raise ValueError(f"obligation {name!r}: it has no entry (an empty matrix, list or dict): it states "
                             "nothing a derivation could establish")
        bad = next((e for e in _entries(expr) if not _sympifiable(e)), _OK)
        if bad is not _OK:  # (None read "AttributeError: 'NoneType' object has no attribute 'is_number'": 47b F8)
            raise ValueError(f"obligation {name!r}: an entry is a {type(bad).__name__}, not a SymPy expression, "
                             "relation or number")
        self._obligations.append(Obligation(name, expr, kind, description))
        return expr

    def inherit(self, sub: "Derivation", prefix: str, *, clauses: tuple[str, ...] = ()) -> None:
        """Carry the obligations of a derivation this one builds on (names prefixed,
        ``prefix.name``), so that a claim's verdict covers its premises too, and its assumptions
        (own and inherited), so that no view shows "assumptions: none" for a result that rests on one.
        ``clauses`` names the clauses of this derivation that use ``sub`` (empty: every clause): its
        premises that name no clause of their own are scoped to those."""
        scope = (lambda s: s if s.clauses or not clauses else replace(s, clauses=tuple(clauses)))
        for o in sub.obligations:
            self._obligations.append(Obligation(f"{prefix}.{o.name}", o.expr, o.kind, o.description))
        for s in sub.steps:
            if s.how != "derived":
                self._inherited.append((prefix, scope(s)))
        for p, s in getattr(sub, "inherited", ()):
            self._inherited.append((f"{prefix}.{p}", scope(s)))

    def symbols(self, **legend: str) -> None:
        """Explain symbols for the reader: ``b.symbols(l_t="logit of token t")``."""
        self.legend.update(legend)

    def fact(self, name: str, value: Any) -> Any:
        """Record a named intermediate result for checks."""
        self.facts[name] = value
        return value

    def record(self, **values: Any) -> None:
        """Record several named intermediate results for checks, in the order given
        (``b.record(Q=Q, K=K)`` is ``b.fact("Q", Q); b.fact("K", K)``).

        >>> b = DerivationBuilder("demo"); b.record(a=1, b=2); list(b.facts.items())
        [('a', 1), ('b', 2)]
        """
        self.facts.update(values)

    def done(self, result: Any, *, display: Any = None) -> Derivation:
        """Freeze the derivation with closed form ``result`` (an expression of a derived step, or a
        dict of them).

        ``display`` names a simpler *equal* form to show and use as the closed form instead of
        SymPy's raw output (a ``diff`` that prints as pages of LaTeX): it is recorded as a step,
        and its equality with ``result`` becomes the obligation ``"displayed form equals the derived
        result"``, so a wrong display form fails the derivation instead of hiding in it. For a
        dict result, ``display`` is a dict replacing some of its entries.

        >>> import sympy as sp
        >>> b, x = DerivationBuilder("derivative"), sp.Symbol("x")
        >>> f = b.define("f", x * sp.exp(x))
        >>> raw = b.step("Differentiate", sp.diff(f, x))
        >>> d = b.done(raw, display=(x + 1) * sp.exp(x))
        >>> d.result, d.provenance, [o.status for o in d.check_obligations()]
        ((x + 1)*exp(x), {'result': 'derived'}, ['holds'])
        """
        if display is not None:
            if isinstance(result, dict):
                if not isinstance(display, dict) or not set(display) <= set(result):
                    raise ValueError("done(display=...): for a dict result, display must be a dict of some of its keys")
                pairs = [(k, result[k], v) for k, v in display.items()]
                shown = {**result, **display}
            else:
                pairs, shown = [("result", result, display)], display
            for key, raw, nice in pairs:
                label = "displayed form equals the derived result" + ("" if key == "result" else f" ({key})")
                diff = (nice - raw) if not isinstance(raw, sp.MatrixBase) else sp.Matrix(nice) - raw
                self._obligations.append(Obligation(label, diff, "zero", "the form shown is the derived one, simplified"))
                self._steps.append(Step(f"Simplified form{'' if key == 'result' else ' of ' + str(key)} "
                                        f"(equal to the derived result: obligation '{label}')", nice, "derived",
                                        "simplified", None))
            result = shown
        entries = result.items() if isinstance(result, dict) else [("result", result)]
        derived = [s.expr for s in self._steps if s.how == "derived" and s.expr is not None]
        provenance = {str(k): ("derived" if any(_same(v, e) for e in derived) else "assumed") for k, v in entries}
        if self in _BUILDING:
            _BUILDING.remove(self)
        return Derivation(self.title, tuple(self._steps), result, dict(self.facts), tuple(self._obligations),
                          provenance, dict(self.legend), tuple(self._inherited))
