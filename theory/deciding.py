"""How an obligation of a derivation is decided (:class:`theory.derivation.Obligation` calls these): the simplifications
tried in order, cheapest first (the first that decides is recorded), a certified numerical evaluation to ``DIGITS``
digits, and a bounded search for a counterexample at sampled points; what evaluating found is an
:class:`ObligationResult`. Part of :mod:`theory.derivation`, which re-exports what it names."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sympy as sp


@dataclass
class ObligationResult:
    """What evaluating an obligation found.

    ``status`` is one of :data:`OBLIGATION_STATUSES`:

    * ``"holds"``: a simplification (or an exact method: minimal polynomial, ``Expr.equals``)
      decided every entry in the obligation's favour;
    * ``"fails"``: an entry is false, and ``counterexample`` shows it (a point of the free symbols
      where the value, certified to 30 significant digits by ``evalf(strict=True)``, violates the
      obligation; for a closed number, its certified value);
    * ``"undecided"``: no method decided an entry, and a numeric search found no counterexample.
      Never a pass, never a refutation.

    ``undefined`` marks a ``"fails"`` whose entry is not a number (``nan``, ``zoo``): the obligation is not shown,
    and no certified value refutes it (the claim is an error, not refuted).

    ``passed`` is ``status == "holds"``; ``residual`` the entry as printed after the last
    simplification tried; ``method`` names what decided it (or what was tried)."""

    name: str
    kind: str
    passed: bool
    residual: str
    method: str
    seconds: float = 0.0
    description: str = ""
    status: str = ""
    counterexample: dict[str, str] | None = None
    #: the entry that fails is not a number (``nan``: 0/0; ``zoo``: 1/0): it is not shown, and it refutes nothing
    undefined: bool = False

    def __post_init__(self):
        if not self.status:
            self.status = "holds" if self.passed else "fails"

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "passed": self.passed, "status": self.status,
               "residual": self.residual, "method": self.method, "seconds": round(self.seconds, 4),
               "description": self.description, "counterexample": self.counterexample}
        if self.undefined:
            out["undefined"] = True
        return out


#: what an obligation's evaluation can conclude (see :class:`ObligationResult`)
OBLIGATION_STATUSES = ("holds", "fails", "undecided")


# simplifications tried in order, cheapest first; the first that decides an obligation is recorded
_SIMPLIFIERS = (
    ("as computed", lambda e: e),
    ("expand", sp.expand),
    ("together+expand", lambda e: sp.expand(sp.together(e))),
    ("simplify", sp.simplify),
    # expand_log within the symbols' assumptions (force=True took log(xy) = log x + log y for every real x, y: a false
    # obligation "held", hostile pass 47b F1)
    ("exp/log rewrite+simplify", lambda e: sp.simplify(sp.powsimp(sp.expand_log(e), combine="exp"))),
)


_NAMES = [n for n, _ in _SIMPLIFIERS]

#: how an entry that is not a number is said (``how`` of :func:`_is_zero` / :func:`_truth`)
UNDEFINED_VALUE = {sp.zoo: "value zoo (complex infinity)", sp.nan: "value nan (undefined)"}


#: significant digits a numeric value must be certified to before it decides anything
DIGITS = 30


_MAXN = 400  # working precision (bits) evalf may use to certify DIGITS digits


def _entries(value: Any) -> list[Any]:
    if isinstance(value, (sp.MatrixBase,)):
        return list(value)
    if isinstance(value, sp.MatrixExpr) and any(sp.sympify(n).is_zero for n in value.shape):
        return []  # ZeroMatrix(0, 0), ZeroMatrix(3, 0), a (0 × n) symbol: no entry either (hostile pass 54b F2)
    if isinstance(value, dict):
        return [x for v in value.values() for x in _entries(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _entries(v)]
    return [value]


def certified(e: Any, digits: int = DIGITS) -> Any:
    """The value of the closed number ``e`` certified to ``digits`` significant digits, or ``None``
    when rounding cannot tell it from zero (SymPy's ``evalf(strict=True)`` ran out of precision:
    a value printed as ``0.e-165`` has no significant digit and decides nothing).

    >>> certified(sp.sqrt(2) - 1, 5)
    0.41421
    >>> certified(sp.cos(sp.pi / 7) - sp.cos(2 * sp.pi / 7) + sp.cos(3 * sp.pi / 7) - sp.Rational(1, 2)) is None
    True
    """
    try:
        v = sp.sympify(e).evalf(digits, strict=True, maxn=_MAXN)
    except Exception:  # PrecisionExhausted (indistinguishable from 0), or not evaluable
        return None
    if v.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or not v.is_number:
        return None
    return v


def _exactly_zero(e: Any) -> str | None:
    """Name of an exact method that proves the closed number ``e`` is 0, else ``None``:
    a minimal polynomial equal to ``x`` (algebraic numbers, cosines of rational multiples of π),
    then ``Expr.equals(0)``."""
    x = sp.Dummy("x")
    try:
        if sp.minimal_polynomial(e, x) == x:
            return "minimal polynomial"
    except Exception:  # not algebraic, or SymPy cannot compute it
        pass
    try:
        if e.equals(0) is True:
            return "Expr.equals"
    except Exception:
        pass
    return None


def _is_zero(e: Any) -> tuple[bool | None, str]:
    """(verdict, how): True/False when decided (``how`` names an exact method used beyond the
    simplification, or a certified value), None when not."""
    if isinstance(e, sp.MatrixExpr):  # a matrix expression SymPy reduced (or not) symbolically
        if getattr(e, "is_ZeroMatrix", False):
            return True, ""
        return None, ""
    e = sp.sympify(e)
    if e == 0:
        return True, ""
    z = getattr(e, "is_zero", None)
    if z is True:
        return True, ""
    if e in (sp.zoo, sp.oo, -sp.oo, sp.nan):  # certainly not 0: complex infinity (1/0) was "undecided" (45b F2)
        return False, UNDEFINED_VALUE.get(e, f"value {e}")
    if e.is_number:
        v = certified(e)
        if v is not None and v != 0:
            return False, f"value {_short(v, 60)} (certified to {DIGITS} digits)"
        how = _exactly_zero(e)
        if how:
            return True, how
        return None, ""  # a value rounding cannot tell from zero decides nothing
    if z is False:
        return False, "SymPy's assumptions"
    return None, ""


def _truth_entrywise(e: "sp.MatrixExpr", kind: str) -> tuple[bool | None, str]:
    """A sign obligation on a matrix expression, read as on the explicit matrix: entry by entry where its size is a
    number (the first entry that fails decides; one undecided leaves it undecided), else undecided."""
    if not all(isinstance(n, (int, sp.Integer)) for n in e.shape):
        return None, ""
    decided = [_truth(x, kind) for x in sp.Matrix(e)]
    bad = next((i for i, (ok, _) in enumerate(decided) if ok is False), None)
    if bad is not None:
        r, c = divmod(bad, int(e.shape[1]))
        return False, f"entry ({r}, {c}): {decided[bad][1] or 'false'}"
    if all(ok for ok, _ in decided):
        return True, "entry by entry"
    return None, ""


def _truth(e: Any, kind: str) -> tuple[bool | None, str]:
    if kind == "true":
        e = sp.sympify(e)
        if isinstance(e, sp.core.relational.Relational):  # a side that is not a number decides nothing (61b F1, F2)
            bad = next((side for side in (e.lhs, e.rhs) if side in UNDEFINED_VALUE), None)
            if bad is not None:
                return False, UNDEFINED_VALUE[bad]
        if e in (sp.true, True):
            return True, ""
        if e in (sp.false, False):
            return False, "evaluates to False"
        return None, ""
    e = sp.sympify(e)
    if e in (sp.zoo, sp.nan):  # not a number: false as the "zero" kind says it, and marked undefined (60b F1)
        return False, UNDEFINED_VALUE[e]
    if isinstance(e, sp.MatrixExpr):  # is_positive is False for any matrix expression (not a scalar): entry by entry
        return _truth_entrywise(e, kind)  # where its size is known, else undecided (hostile pass 54b F9)
    # in the extended reals: +∞ > 0, as SymPy's own `oo > 0` (is_positive is False for oo: positive implies finite
    # there, and a limit growing without bound was "false" with no counterexample, hostile pass 54b F6)
    prop = e.is_extended_nonnegative if kind == "nonnegative" else e.is_extended_positive
    if prop is not None:
        return bool(prop), ("" if prop else "SymPy's assumptions")
    if e.is_number:
        v = certified(e)
        if v is not None:
            if v.is_real:
                ok = bool(v >= 0) if kind == "nonnegative" else bool(v > 0)
                return ok, f"value {_short(v, 60)} (certified to {DIGITS} digits)"
            return None, ""
        if _exactly_zero(e):  # exactly 0: nonnegative, not positive
            return kind == "nonnegative", "exactly zero"
    return None, ""


def _candidate(s: sp.Symbol, rng: "Any") -> sp.Expr:
    """An exact value of the symbol's kind (integer or rational) and sign."""
    if s.is_integer:
        lo = 1 if s.is_positive else (0 if s.is_nonnegative else -12)
        hi = -1 if s.is_negative else (0 if s.is_nonpositive else 12)
        return sp.Integer(rng.randint(lo, hi))
    q = sp.Rational(rng.randint(0 if (s.is_nonnegative or s.is_nonpositive) else 1, 40), rng.choice((7, 10, 13)))
    if s.is_nonnegative or s.is_positive:
        return q
    if s.is_nonpositive or s.is_negative:
        return -q
    return q * rng.choice((1, -1))


def _sample(s: sp.Symbol, rng: "Any") -> sp.Expr | None:
    """An exact (rational or integer) value that satisfies every assumption of the symbol (odd, even, prime, nonzero,
    nonpositive, ...), or ``None`` when none of the values tried does (an irrational symbol): a counterexample is a
    point within the symbols' assumptions (hostile pass 47b F2: k = −6 for an odd k, n = 4 for a nonpositive n)."""
    want = {k: v for k, v in s.assumptions0.items() if v is not None}
    for _ in range(200):
        v = _candidate(s, rng)
        if all(getattr(v, "is_" + k, None) == val for k, val in want.items()):
            return v
    return None


#: points the counterexample search tries per undecided entry, and its time budget (seconds)
SEARCH_POINTS = 16


SEARCH_SECONDS = 5.0


def _violates(v: Any, kind: str) -> bool:
    if kind == "zero":
        return v != 0
    if not v.is_real:
        return False  # a non-real value of an inequality is not a counterexample we can state
    return bool(v < 0) if kind == "nonnegative" else bool(v <= 0)


def _search(entry: Any, kind: str) -> tuple[dict[str, str] | None, int]:
    """Look for a point of the free symbols where ``entry`` violates the obligation, beyond
    rounding (the value certified to :data:`DIGITS` digits). Returns (counterexample or None,
    number of points evaluated)."""
    import random

    if isinstance(entry, sp.MatrixExpr):
        return None, 0
    e = sp.sympify(entry)
    if kind == "true":
        if not isinstance(e, sp.core.relational.Relational) or isinstance(e, sp.Ne):
            return None, 0
        if isinstance(e, sp.Eq):
            e, kind = e.lhs - e.rhs, "zero"
        elif isinstance(e, (sp.Ge, sp.Gt)):
            e, kind = e.lhs - e.rhs, ("nonnegative" if isinstance(e, sp.Ge) else "positive")
        else:
            e, kind = e.rhs - e.lhs, ("nonnegative" if isinstance(e, sp.Le) else "positive")
    syms = sorted(e.free_symbols, key=str)
    # an entry in indexed symbols (x[t] under a Sum over t) has no point to sample: a number put in for the
    # label x makes x[t] the meaningless (40/13)[t], which evalf neither values nor rejects quickly (issue 46)
    if not syms or len(syms) > 20 or any(isinstance(s, sp.Indexed) for s in syms):
        return None, 0
    rng = random.Random(_short(e, 200))  # deterministic per expression
    t0, n = time.perf_counter(), 0
    for _ in range(SEARCH_POINTS):
        if time.perf_counter() - t0 > SEARCH_SECONDS:
            break
        point = {s: _sample(s, rng) for s in syms}
        if any(v is None for v in point.values()):
            return None, n  # a symbol no exact value of ours satisfies: no point to try
        try:
            at = e.subs(point)
        except Exception:
            continue
        n += 1
        v = certified(at)
        if v is None:
            if kind == "positive" and _exactly_zero(at):
                return {**{str(k): str(p) for k, p in point.items()}, "value": "0 (exactly)"}, n
            continue  # indistinguishable from zero here (or undefined): no counterexample
        if _violates(v, kind):
            return {**{str(k): str(p) for k, p in point.items()}, "value": _short(v, 60)}, n
    return None, n


def _short(e: Any, limit: int = 300) -> str:
    s = str(e)
    return s if len(s) <= limit else s[: limit - 1] + "…"
