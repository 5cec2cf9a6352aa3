"""Lyapunov functions derived in SymPy (claims ``lyap.conditions``, ``lyap.backward_construction``,
``lyap.sos_certificate``), and the exact side of sum-of-squares certificates.

Conventions: a system ``x' = f(x)`` on ``R^n`` with ``f(0) = 0``; states are column vectors
``x = (x_1, …, x_n)``; ``V̇ = ∇V·f`` (the derivative of ``V`` along trajectories, the Lie derivative).
Symbols are real. Polynomials have rational coefficients (exact arithmetic throughout).

Three parts:

* the Lyapunov conditions (``lyap.conditions``): a panel of planar systems with their candidates
  (two globally asymptotically stable ones, Khalil's counterexample whose ``V`` is not radially
  unbounded, an unstable system whose ``V`` has ``V(0) ≠ 0``, a rotation with ``V̇ ≡ 0``), a
  symbolic decision of the hypotheses (:func:`decide_properties`) and the two readings of the
  theorem (:func:`corrected_conclusion`, :func:`stated_conclusion`);
* the backward construction ``f = (−P + S)∇V`` (``lyap.backward_construction``);
* sum-of-squares certificates (``lyap.sos_certificate``): monomial bases and the Gram structure of
  a polynomial (:func:`gram_structure`), the bound polynomials ``Σ x_i^{2k}``
  (:func:`bound_polynomial`), and the exact re-check of a numeric Gram matrix
  (:func:`exact_recheck`: rounding to rationals, exact projection onto the coefficient-matching
  subspace, exact PSD test by pivoted LDLᵀ, SymPy expansion of ``z(x)ᵀ G z(x)``).
"""

from __future__ import annotations

import ast
import itertools
import keyword
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.validation import InputError

__all__ = [
    "Candidate", "LEVELS", "PROPERTIES", "conditions_panel", "decide_properties", "corrected_conclusion",
    "stated_conclusion", "lie_derivative", "derive_conditions", "derive_backward_construction",
    "lowest_degree", "bound_polynomial", "sos_targets", "GramStructure", "gram_structure", "gram_form",
    "exact_psd", "ExactRecheck", "exact_recheck", "derive_sos_certificate", "sos_panel", "parse_system",
    "MAX_DEGREE", "MAX_VARS",
]

x, y = sp.symbols("x y", real=True)

#: Conclusions of a Lyapunov theorem, weakest first.
LEVELS = ("none", "local", "global")
#: Hypotheses a Lyapunov theorem may test (each decided True / False, or None when undecided).
PROPERTIES = ("f_zero_at_origin", "V_zero_at_origin", "V_positive_off_origin", "Vdot_negative_off_origin",
              "Vdot_nonpositive", "Vdot_negative_at_origin", "radially_unbounded")
#: Largest total degree and number of variables accepted from a user (the Gram matrices grow as
#: C(n + d/2, d/2)).
MAX_DEGREE = 12
MAX_VARS = 6
#: the most terms a supported polynomial has (every monomial of degree ≤ MAX_DEGREE in MAX_VARS variables): an
#: expression whose syntax bounds its degree above MAX_DEGREE is expanded only when it cannot have more
MAX_TERMS = math.comb(MAX_VARS + MAX_DEGREE, MAX_VARS)


@dataclass(frozen=True)
class Candidate:
    """A polynomial (or rational) system ``x' = f(x)`` and a candidate Lyapunov function ``V``.

    ``vars``: the state variables (real symbols), ``f``: one SymPy expression per variable,
    ``V``: a SymPy expression; ``name`` labels it in reports.

    >>> c = Candidate((x, y), (-x**3 - y, x - y**3), x**2 + y**2)
    >>> c.vdot()
    -2*x**4 - 2*y**4
    """

    vars: tuple
    f: tuple
    V: sp.Expr
    name: str = ""

    def vdot(self) -> sp.Expr:
        """``∇V·f`` expanded."""
        return lie_derivative(self.V, self.f, self.vars)

    def flipped(self) -> "Candidate":
        """The same candidate for ``x' = −f(x)`` (a sign flip in ``f``)."""
        return Candidate(self.vars, tuple(-fi for fi in self.f), self.V, self.name + " (f → −f)")


def lie_derivative(V: sp.Expr, f, vars) -> sp.Expr:
    """``∇V·f = Σ_i ∂V/∂x_i f_i``, expanded.

    >>> lie_derivative(x**2 + y**2, (-y, x), (x, y))
    0
    """
    return sp.expand(sum(sp.diff(V, v) * fi for v, fi in zip(vars, f)))


# --------------------------------------------------------------------------------------------
# lyap.conditions: the panel, the hypotheses, the two readings of the theorem


def conditions_panel() -> dict[str, Candidate]:
    """The planar systems the Lyapunov-conditions claim is tested on (all with ``f(0) = 0``):

    ``dissipative``  ``f = (−x + y − x³, −x − y − y³)``, ``V = x² + y²``: ``V̇ = −2V − 2(x⁴ + y⁴)``
                     (globally asymptotically stable, ``V(t) ≤ V(0)e^{−2t}``);
    ``cancelling``   ``f = (−2x + y², −y − xy)``, ``V = x² + y²``: the quadratic terms cancel,
                     ``V̇ = −4x² − 2y² ≤ −2V`` (globally asymptotically stable);
    ``khalil``       Khalil, Nonlinear Systems (3rd ed., 2002), §4.1, the example with V = x²/(1+x²) + y²:
                     ``f = (−6x/u² + 2y, −2(x + y)/u²)``, ``u = 1 + x²``, ``V = x²/u + y²``:
                     ``V̇ = −12x²/u⁴ − 4y²/u² < 0`` off the origin, but ``V`` is not radially
                     unbounded and trajectories right of the hyperbola ``y = 2/(x − √2)`` escape;
    ``unstable``     ``f = (x, y)``, ``V = 1 + 1/(1 + x² + y²)``: ``V > 0`` and ``V̇ < 0`` off the
                     origin, but ``V(0) = 2 ≠ 0``, and every trajectory grows like ``e^t``;
    ``rotation``     ``f = (−y, x)``, ``V = x² + y²``: ``V̇ ≡ 0``, stable, not asymptotically.
    """
    u = 1 + x**2
    return {
        "dissipative": Candidate((x, y), (-x + y - x**3, -x - y - y**3), x**2 + y**2, "dissipative"),
        "cancelling": Candidate((x, y), (-2 * x + y**2, -y - x * y), x**2 + y**2, "cancelling"),
        "khalil": Candidate((x, y), (-6 * x / u**2 + 2 * y, -2 * (x + y) / u**2), x**2 / u + y**2, "khalil"),
        "unstable": Candidate((x, y), (x, y), 1 + 1 / (1 + x**2 + y**2), "unstable"),
        "rotation": Candidate((x, y), (-y, x), x**2 + y**2, "rotation"),
    }


def _term_shape(term: sp.Expr, vars) -> tuple[str, frozenset]:
    """Classify one additive term of an expression: ``("cover", {x_i})`` for ``w(x)·x_i^{2k}`` with
    ``w > 0`` (zero only where ``x_i = 0``), ``("positive", all)`` for a positive term without
    variables in its numerator, ``("nonneg", ∅)`` for another nonnegative term, ``("unknown", ∅)``."""
    num, den = term.as_numer_denom()
    if not den.is_positive:
        return "unknown", frozenset()
    try:
        poly = sp.Poly(num, *vars)
    except sp.PolynomialError:
        return ("nonneg", frozenset()) if term.is_nonnegative else ("unknown", frozenset())
    if len(poly.terms()) == 1:
        (exps, coeff), = poly.terms()
        if coeff > 0 and all(e % 2 == 0 for e in exps):
            used = frozenset(v for v, e in zip(vars, exps) if e)
            if not used:
                return "positive", frozenset(vars)
            return ("cover", used) if len(used) == 1 else ("nonneg", frozenset())
    return ("nonneg", frozenset()) if term.is_nonnegative else ("unknown", frozenset())


def _positive_off_origin(expr: sp.Expr, vars) -> bool | None:
    """``expr(x) > 0`` for every ``x ≠ 0``: True when ``expr`` is a sum of nonnegative terms among
    which ``w(x) x_i^{2k}`` (``w > 0``) terms cover every variable (or a positive constant term);
    False when ``expr ≤ 0`` at a nonzero point on an axis or diagonal (a witness); else None."""
    e = sp.expand(expr)
    if e == 0:
        return False
    num, den = sp.fraction(sp.factor(sp.together(e)))
    if sp.factor(den).is_positive:  # a positive common denominator: decide on the numerator
        e = sp.expand(num)
    covered: set = set()
    for term in sp.Add.make_args(e):
        kind, used = _term_shape(term, vars)
        if kind == "unknown":
            covered = None
            break
        covered |= used
    if covered is not None and covered >= set(vars):
        return True
    for pt in itertools.product((-2, -1, 0, 1, 2), repeat=len(vars)):
        if any(pt):
            val = e.subs(dict(zip(vars, pt)))
            if val.is_number and val <= 0:
                return False
    return None


def _nonnegative(expr: sp.Expr, vars) -> bool | None:
    """``expr ≥ 0`` everywhere: True when it is 0 or a sum of nonnegative terms (over a positive
    common denominator), False at a witness point of the small grid, else None."""
    e = sp.expand(expr)
    if e == 0:
        return True
    num, den = sp.fraction(sp.factor(sp.together(e)))
    if sp.factor(den).is_positive:
        e = sp.expand(num)
    if all(_term_shape(t, vars)[0] != "unknown" for t in sp.Add.make_args(e)):
        return True
    for pt in itertools.product((-2, -1, 0, 1, 2), repeat=len(vars)):
        val = e.subs(dict(zip(vars, pt)))
        if val.is_number and val < 0:
            return False
    return None


def _radially_unbounded(V: sp.Expr, vars) -> bool | None:
    """True when ``V ≥ Σ c_i x_i^{2k_i}`` (``c_i > 0`` constants, every variable) plus nonnegative
    terms; False when ``V`` has a finite limit along a coordinate axis; else None."""
    e = sp.expand(V)
    covered: set = set()
    ok = True
    for term in sp.Add.make_args(e):
        kind, used = _term_shape(term, vars)
        if kind == "unknown":
            ok = False
            break
        if kind == "cover" and term.as_numer_denom()[1] == 1:
            covered |= used
    if ok and covered >= set(vars):
        return True
    t = sp.Symbol("t", positive=True)
    for v in vars:
        along = V.subs({w: (t if w == v else 0) for w in vars})
        lim = sp.limit(along, t, sp.oo)
        if lim.is_finite:
            return False
    return None


def decide_properties(c: Candidate) -> dict[str, bool | None]:
    """The hypotheses of :data:`PROPERTIES` for ``c``, decided symbolically (True / False, None
    when these sufficient tests cannot decide): ``f(0) = 0``, ``V(0) = 0``, ``V > 0`` off the
    origin and ``V̇ < 0`` off the origin (sums of weighted even powers covering every variable, or
    a witness point), ``V̇ ≤ 0`` everywhere, ``V̇(0) < 0``, radial unboundedness (a lower bound ``Σ c_i x_i^{2k}``, or a
    finite limit along an axis).

    >>> p = decide_properties(conditions_panel()["khalil"])
    >>> p["Vdot_negative_off_origin"], p["radially_unbounded"]
    (True, False)
    """
    origin = {v: 0 for v in c.vars}
    vdot = sp.expand(sum(sp.diff(c.V, v) * fi for v, fi in zip(c.vars, c.f)))
    vdot0 = sp.simplify(vdot.subs(origin))
    return {
        "f_zero_at_origin": all(sp.simplify(fi.subs(origin)) == 0 for fi in c.f),
        "V_zero_at_origin": sp.simplify(c.V.subs(origin)) == 0,
        "V_positive_off_origin": _positive_off_origin(c.V, c.vars),
        "Vdot_negative_off_origin": _positive_off_origin(-vdot, c.vars),
        "Vdot_nonpositive": _nonnegative(-vdot, c.vars),
        "Vdot_negative_at_origin": bool(vdot0.is_negative),
        "radially_unbounded": _radially_unbounded(c.V, c.vars),
    }


def corrected_conclusion(props: dict) -> str:
    """The corrected Lyapunov theorem: ``f(0) = 0``, ``V(0) = 0``, ``V > 0`` and ``V̇ < 0`` off the
    origin give local asymptotic stability ("local"); with ``V`` radially unbounded, global
    ("global"); otherwise it concludes nothing ("none"). An undecided hypothesis (None) counts as
    not established.

    >>> corrected_conclusion(dict.fromkeys(PROPERTIES, True))
    'global'
    >>> corrected_conclusion({**dict.fromkeys(PROPERTIES, True), "radially_unbounded": False})
    'local'
    """
    base = all(props[k] is True for k in ("f_zero_at_origin", "V_zero_at_origin", "V_positive_off_origin",
                                          "Vdot_negative_off_origin"))
    if not base:
        return "none"
    return "global" if props["radially_unbounded"] is True else "local"


def stated_conclusion(props: dict) -> str:
    """The statement of lecture notes 001, read where it can hold (off the origin): ``V`` strictly
    positive outside the origin and ``−∇V·f > 0`` give (global) asymptotic stability, with
    neither ``V(0) = 0`` nor radial unboundedness. (Read literally, ``−∇V·f > 0`` at the origin
    too, it never applies: ``V̇(0) = 0`` whenever ``f(0) = 0``.)

    >>> stated_conclusion({**dict.fromkeys(PROPERTIES, True), "V_zero_at_origin": False})
    'global'
    """
    ok = all(props[k] is True for k in ("f_zero_at_origin", "V_positive_off_origin", "Vdot_negative_off_origin"))
    return "global" if ok else "none"


def _positive_coefficients(b: DerivationBuilder, name: str, expr: sp.Expr, s: sp.Symbol, text: str):
    """Record ``expr = N(s)/D(s)``; obligations: every coefficient of ``N`` is positive and ``D > 0``
    for ``s > 0`` (so ``expr > 0`` for ``s > 0``)."""
    num, den = sp.fraction(sp.factor(sp.together(expr)))
    coeffs = sp.Poly(sp.expand(num), s).all_coeffs()
    b.step(text + ": numerator", sp.expand(num))
    b.step(text + ": denominator", den)
    b.obligation(f"{name}_numerator_coefficients_positive", [c for c in coeffs if c != 0], "positive",
                 f"{text}: every coefficient of the numerator in s is positive")
    b.obligation(f"{name}_denominator_positive", den, "positive", f"{text}: the denominator is positive for s > 0")


@lru_cache(maxsize=None)
def derive_conditions() -> Derivation:
    """Why "``V > 0`` outside the origin and ``−∇V·f > 0``" is not the Lyapunov theorem, and the
    panel's ground truth.

    1. For any ``C¹`` ``V`` and ``f(0) = 0``: ``V̇(0) = ∇V(0)·f(0) = 0``, so ``−∇V·f > 0`` cannot
       hold at the origin (the literal statement is vacuous).
    2. Khalil's system: ``V̇ = −12x²/u⁴ − 4y²/u² < 0`` off the origin, ``V(0) = 0``, ``V > 0``, yet
       ``V(x, 0) → 1`` (not radially unbounded); with ``x = √2 + s``, ``s > 0``, the function
       ``g = (x − √2)y − 2`` has ``ġ > 0`` on ``g = 0`` (rational function with positive
       coefficients) and ``ẋ > 0``, ``ẏ < 0`` in ``{g ≥ 0, x > √2}``: the region is invariant, and a
       bounded trajectory in it would have an ω-limit set where ``V̇ = 0``, i.e. the origin, which is
       outside its closure: trajectories there are unbounded (they escape, ``x → ∞``). The
       linearisation at 0 has the double eigenvalue −4: local asymptotic stability.
    3. ``f = (x, y)`` with ``V = 1 + 1/(1 + ‖x‖²)``: ``V̇ < 0`` off the origin, ``V(0) = 2``; the flow
       is ``x(t) = e^t x(0)`` (unstable).
    4. The rotation ``f = (−y, x)``: ``V̇ ≡ 0``: ``V`` is conserved, so no asymptotic stability.
    5. ``dissipative`` and ``cancelling``: ``V̇ + 2V ≤ 0``; the comparison ODE ``w' = −2w`` gives
       ``V(t) ≤ V(0)e^{−2t}``, ``‖x(t)‖ ≤ ‖x(0)‖e^{−t}``: globally asymptotically stable.

    ``result``: ``{"Vdot_at_origin": 0, "khalil_Vdot": …, "khalil_V_limit": 1}``;
    ``facts["truth"]``: the stability of each panel system ("global", "local" or "none");
    ``facts["properties"]``: :func:`decide_properties` of each; ``facts["decay_bound"]`` the
    comparison bound ``V(0)e^{−2t}``.

    >>> d = derive_conditions()
    >>> d.result["khalil_V_limit"], d.facts["truth"]["khalil"]
    (1, 'local')
    """
    b = DerivationBuilder("Lyapunov conditions: what the theorem needs, and a counterexample to the stated form")
    b.symbols(x="first state variable", y="second state variable", u="1 + x² (Khalil's example)",
              s="x − √2 > 0 (right of the escape hyperbola's asymptote)", t="time (≥ 0) or an extra coordinate",
              V="candidate Lyapunov function", g="(x − √2)y − 2: the escape region is g ≥ 0, x > √2",
              w="a comparison function w(t) ≥ V(x(t))")
    # 1. the origin
    V = sp.Function("V")
    f1, f2 = sp.Function("f_1"), sp.Function("f_2")
    b.define("A C¹ function V(x, y) and a vector field f = (f_1, f_2) with f(0) = 0 (an equilibrium at the origin)",
             sp.Eq(sp.Matrix([f1(0, 0), f2(0, 0)]), sp.zeros(2, 1)))
    vdot_gen = sp.diff(V(x, y), x) * f1(x, y) + sp.diff(V(x, y), y) * f2(x, y)
    b.step("V̇ = ∇V·f", vdot_gen)
    at0 = vdot_gen.subs({x: 0, y: 0}).doit().subs({f1(0, 0): 0, f2(0, 0): 0})
    at0 = b.step("At the origin, with f(0) = 0: V̇(0) = ∇V(0)·f(0) =", at0)
    b.obligation("Vdot_vanishes_at_origin", at0,
                 description="∇V·f = 0 at the origin for every C¹ V: '−∇V·f > 0' cannot hold there")
    # 2. Khalil
    panel = conditions_panel()
    kh = panel["khalil"]
    u = 1 + x**2
    b.define("Khalil's system and candidate: f = (−6x/u² + 2y, −2(x + y)/u²), V = x²/u + y², u = 1 + x²",
             sp.Matrix([*kh.f, kh.V]))
    kv = b.step("V̇ = ∇V·f (simplified)", sp.simplify(kh.vdot()))
    b.obligation("khalil_Vdot_closed_form", sp.simplify(kv - (-12 * x**2 / u**4 - 4 * y**2 / u**2)))
    b.obligation("khalil_Vdot_nonpositive", -kv, "nonnegative", "V̇ ≤ 0 (and = 0 only at the origin: both terms vanish only there)")
    b.obligation("khalil_V_zero_at_origin", kh.V.subs({x: 0, y: 0}))
    lim = b.step("V along the x-axis tends to lim_{x→∞} V(x, 0) =", sp.limit(kh.V.subs(y, 0), x, sp.oo))
    b.obligation("khalil_V_bounded_on_axis", lim - 1, description="V is not radially unbounded: V(x, 0) → 1")
    s = sp.Symbol("s", positive=True)
    tt = sp.Symbol("t", nonnegative=True)
    g = (x - sp.sqrt(2)) * y - 2
    gdot = sp.Matrix([sp.diff(g, x), sp.diff(g, y)]).dot(sp.Matrix(kh.f))
    on = b.step("ġ = ∇g·f on the hyperbola g = 0 (y = 2/(x − √2)), with x = √2 + s",
                sp.factor(sp.together(gdot.subs(y, 2 / (x - sp.sqrt(2))).subs(x, sp.sqrt(2) + s))))
    _positive_coefficients(b, "escape_boundary", on, s, "ġ on g = 0")
    xdot = sp.together(kh.f[0].subs(y, 2 / s + tt).subs(x, sp.sqrt(2) + s))
    b.step("ẋ at x = √2 + s, y = 2/s + t (t ≥ 0: inside the region)", xdot)
    num, den = sp.fraction(xdot)
    pnum = sp.Poly(sp.expand(num), s, tt)
    b.step("ẋ inside the region: numerator", pnum.as_expr())
    b.obligation("escape_xdot_numerator_coefficients_positive", [c for c in pnum.coeffs() if c != 0], "positive",
                 "every coefficient of ẋ's numerator in (s, t) is positive: ẋ > 0 in the region")
    b.obligation("escape_xdot_denominator_positive", den, "positive")
    xp, yp = sp.symbols("x y", positive=True)
    ydot = b.step("−ẏ for x, y > 0", (-kh.f[1]).subs({x: xp, y: yp}))
    b.obligation("escape_ydot_negative", ydot, "positive", "ẏ < 0 in the region, so y ∈ (0, y(0)]")
    J = sp.Matrix(kh.f).jacobian([x, y]).subs({x: 0, y: 0})
    eig = b.step("Jacobian at the origin", J)
    ev = b.step("its eigenvalues (with multiplicity)", sp.Matrix(list(itertools.chain.from_iterable(
        [k] * m for k, m in eig.eigenvals().items()))))
    b.obligation("khalil_linearisation_stable", [-e for e in ev], "positive", "local asymptotic stability")
    # 3. unstable with V(0) != 0
    un = panel["unstable"]
    uv = b.step("f = (x, y), V = 1 + 1/(1 + x² + y²): V̇ =", sp.factor(un.vdot()))
    b.obligation("unstable_Vdot_nonpositive", -uv, "nonnegative")
    b.obligation("unstable_V_at_origin_is_two", un.V.subs({x: 0, y: 0}) - 2)
    t, x0 = sp.Symbol("t", real=True), sp.Symbol("x_0", real=True)
    flow = b.step("the flow of x' = x: x(t) =", sp.dsolve(sp.Eq(sp.Function("X")(t).diff(t), sp.Function("X")(t)),
                                                          ics={sp.Function("X")(0): x0}).rhs)
    b.obligation("unstable_flow_grows", flow - x0 * sp.exp(t), description="x(t) = x(0)e^t: unstable")
    # 4. rotation
    rv = b.step("f = (−y, x), V = x² + y²: V̇ =", panel["rotation"].vdot())
    b.obligation("rotation_V_conserved", rv, description="V̇ ≡ 0: V is conserved, no asymptotic stability")
    # 5. the globally stable systems
    w, V0 = sp.Function("w"), sp.Symbol("V_0", positive=True)
    bound = b.step("comparison ODE w' = −2w, w(0) = V(0): w(t) =",
                   sp.dsolve(sp.Eq(w(t).diff(t), -2 * w(t)), ics={w(0): V0}).rhs)
    for name in ("dissipative", "cancelling"):
        c = panel[name]
        gap = b.step(f"{name}: −(V̇ + 2V) =", sp.expand(-(c.vdot() + 2 * c.V)))
        b.obligation(f"{name}_decays_at_rate_two", gap, "nonnegative",
                     "V̇ ≤ −2V, so V(t) ≤ V(0)e^{−2t} and ‖x(t)‖ ≤ ‖x(0)‖e^{−t} (V = ‖x‖²)")
    b.fact("decay_bound", bound)
    b.fact("truth", {"dissipative": "global", "cancelling": "global", "khalil": "local", "unstable": "none",
                     "rotation": "none"})
    b.fact("properties", {name: decide_properties(c) for name, c in panel.items()})
    return b.done({"Vdot_at_origin": at0, "khalil_Vdot": kv, "khalil_V_limit": lim})


# --------------------------------------------------------------------------------------------
# lyap.backward_construction


def backward_instance() -> dict:
    """The polynomial instance of the backward-construction derivation (2-D):
    ``V = x² + xy + y² + x⁴`` (positive definite: ``x² + xy + y² ≥ (x² + y²)/2``),
    ``A(x) = [[1, x], [y, 2]]``, ``P = A Aᵀ`` (PSD), ``B(x) = [[x, 1 + y], [x y, 0]]``,
    ``S = B − Bᵀ`` (skew). Returns ``{"vars", "V", "A", "B"}``."""
    return {"vars": (x, y), "V": x**2 + x * y + y**2 + x**4,
            "A": sp.Matrix([[1, x], [y, 2]]), "B": sp.Matrix([[x, 1 + y], [x * y, 0]])}


@lru_cache(maxsize=None)
def derive_backward_construction() -> Derivation:
    """``f = −P∇V + S∇V`` with ``P ⪰ 0``, ``Sᵀ = −S`` gives ``∇V·f = −∇VᵀP∇V ≤ 0``.

    With general symbolic entries (``n = 3``): ``gᵀSg = 0`` for every skew ``S`` (expanded: the
    terms cancel pairwise), ``gᵀ(AAᵀ)g = ‖Aᵀg‖²`` (a sum of squares, so ``P = AAᵀ ⪰ 0``), and for
    a symmetric matrix in place of ``S`` the quadratic form does not vanish. Then the polynomial
    instance of :func:`backward_instance`: ``V̇ + ∇VᵀP∇V = 0`` identically.

    ``result``: ``{"skew_form": 0, "Vdot": ∇VᵀP∇V with the sign, for the instance}``;
    ``facts``: ``"instance"``, ``"grad"`` (∇V), ``"P"``, ``"S"``, ``"f"``, ``"symmetric_form"``.

    >>> d = derive_backward_construction()
    >>> d.result["skew_form"]
    0
    """
    b = DerivationBuilder("Backward construction: f = (−P + S)∇V decreases V")
    b.symbols(g_i="entries of a gradient vector g = ∇V", b_ij="entries of a general matrix B",
              a_ij="entries of a general matrix A", S="skew-symmetric part B − Bᵀ", P="P = A Aᵀ (PSD)",
              x="first state variable", y="second state variable")
    n = 3
    g = sp.Matrix(sp.symbols(f"g_1:{n + 1}", real=True))
    B = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"b_{i + 1}{j + 1}", real=True))
    A = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"a_{i + 1}{j + 1}", real=True))
    S = b.define("A general skew-symmetric matrix S = B − Bᵀ", B - B.T)
    b.obligation("S_is_skew", S + S.T)
    q = b.step("gᵀ S g, expanded", sp.expand((g.T * S * g)[0]))
    b.obligation("skew_quadratic_form_vanishes", q, description="the S-term cancels by skew-symmetry")
    sym = b.step("with a symmetric B + Bᵀ in place of S: gᵀ(B + Bᵀ)g, expanded", sp.expand((g.T * (B + B.T) * g)[0]))
    b.obligation("symmetric_form_is_twice_gBg", sym - 2 * sp.expand((g.T * B * g)[0]))
    e1 = {**{s_: 0 for s_ in B.free_symbols | g.free_symbols}, B[0, 0]: 1, g[0]: 1}
    witness = b.step("at B = E_11, g = e_1 the symmetric form is", sym.subs(e1))
    b.obligation("symmetric_form_does_not_vanish", witness, "positive",
                 "a symmetric S does not cancel: the construction needs skew-symmetry")
    P = b.define("P = A Aᵀ", A * A.T)
    pq = b.step("gᵀ P g − ‖Aᵀg‖², expanded", sp.expand((g.T * P * g)[0] - sum(e**2 for e in A.T * g)))
    b.obligation("P_form_is_sum_of_squares", pq, description="gᵀ(AAᵀ)g = ‖Aᵀg‖² ≥ 0: P = AAᵀ is PSD")
    gen = b.step("∇V·((−P + S)∇V), expanded, minus −gᵀPg", sp.expand((g.T * (-P + S) * g)[0] + (g.T * P * g)[0]))
    b.obligation("general_identity", gen)
    inst = backward_instance()
    vs, Vp = inst["vars"], inst["V"]
    b.define("Instance: V = x² + xy + y² + x⁴, A(x) = [[1, x], [y, 2]], B(x) = [[x, 1 + y], [xy, 0]]",
             sp.Matrix([[Vp, 0], [0, 0]]).row_join(inst["A"]).row_join(inst["B"]))
    grad = b.step("∇V", sp.Matrix([sp.diff(Vp, v) for v in vs]))
    Pi = b.step("P(x) = A(x)A(x)ᵀ", sp.expand(inst["A"] * inst["A"].T))
    Si = b.step("S(x) = B(x) − B(x)ᵀ", inst["B"] - inst["B"].T)
    f = b.step("f = (−P + S)∇V", sp.expand((-Pi + Si) * grad))
    vdot = b.step("V̇ = ∇V·f, expanded", sp.expand((grad.T * f)[0]))
    rate = b.step("−∇VᵀP∇V, expanded", sp.expand(-(grad.T * Pi * grad)[0]))
    b.obligation("instance_identity", vdot - rate, description="V̇ = −∇VᵀP∇V for the polynomial instance")
    quad = b.step("Gram matrix of V's quadratic part x² + xy + y² in (x, y)",
                  sp.hessian(Vp.subs(x**4, 0), vs) / 2)
    b.obligation("instance_V_positive_definite_quadratic_part", list(quad.eigenvals()), "positive",
                 "the quadratic part x² + xy + y² has Gram matrix [[1, 1/2], [1/2, 1]] ≻ 0, and x⁴ ≥ 0")
    b.record(instance=inst, grad=grad, P=Pi, S=Si, f=f, symmetric_form=sym)
    return b.done({"skew_form": q, "Vdot": rate})


# --------------------------------------------------------------------------------------------
# lyap.sos_certificate: monomial bases, Gram structure, exact re-check


def _poly(expr: sp.Expr, vars) -> sp.Poly:
    return sp.Poly(sp.expand(expr), *vars, domain="QQ")


def lowest_degree(expr: sp.Expr, vars) -> int:
    """Lowest total degree among the monomials of a nonzero polynomial.

    >>> lowest_degree(2*x**4 + 2*y**4 + x**5, (x, y))
    4
    """
    p = _poly(expr, vars)
    if p.is_zero:
        raise InputError("the polynomial is identically zero")
    return int(min(sum(m) for m in p.monoms()))


def bound_polynomial(expr: sp.Expr, vars) -> sp.Expr:
    """``Σ_i x_i^{2k}`` at the lowest even degree ``2k ≥ lowest_degree(expr)`` (``k ≥ 1``): the
    polynomial that ``expr`` must dominate for a certificate ``expr − ε·(this) ∈ SOS``.

    >>> bound_polynomial(2*x**4 + 2*y**4, (x, y))
    x**4 + y**4
    >>> bound_polynomial(x**2 + x*y + y**2, (x, y))
    x**2 + y**2
    """
    k = max(1, math.ceil(lowest_degree(expr, vars) / 2))
    return sum(v ** (2 * k) for v in vars)


def sos_targets(c: Candidate, eps) -> dict:
    """The two polynomials an SOS certificate must show nonnegative, for a candidate ``c`` and
    ``ε > 0`` (exact): ``{"V": V − εp, "decay": −∇V·f − εq, "p": p, "q": q, "vdot": ∇V·f}`` with
    ``p = bound_polynomial(V)``, ``q = bound_polynomial(−∇V·f)``.

    >>> sos_targets(Candidate((x, y), (-x**3 - y, x - y**3), x**2 + y**2), sp.Rational(1, 10))["decay"]
    19*x**4/10 + 19*y**4/10
    """
    eps = sp.Rational(eps)
    vdot = c.vdot()
    p = bound_polynomial(c.V, c.vars)
    q = bound_polynomial(-vdot, c.vars)
    return {"V": sp.expand(c.V - eps * p), "decay": sp.expand(-vdot - eps * q), "p": p, "q": q, "vdot": vdot}


@dataclass(frozen=True)
class GramStructure:
    """The linear structure of ``poly = z(x)ᵀ G z(x)``.

    basis      monomial exponents of ``z`` (tuples of length n), degrees from ⌈d_min/2⌉ to
               ⌊d_max/2⌋, with basis elements whose diagonal entry is forced to 0 removed
    pairs      for each monomial exponent ``m`` of ``z zᵀ``: the index pairs ``(i, j)``, ``i ≤ j``,
               with ``z_i z_j = x^m``
    coeffs     the coefficient of each such monomial in ``poly`` (exact rationals; 0 when absent)
    outside    monomials of ``poly`` that no ``z_i z_j`` produces (nonempty: not SOS, structurally)
    """

    vars: tuple
    basis: tuple
    pairs: dict
    coeffs: dict
    outside: tuple

    @property
    def size(self) -> int:
        return len(self.basis)

    def basis_exprs(self) -> list:
        return [sp.Mul(*[v**e for v, e in zip(self.vars, m)]) for m in self.basis]


def _monomials_between(n: int, lo: int, hi: int) -> list[tuple]:
    out = []
    for deg in range(lo, hi + 1):
        for combo in itertools.combinations_with_replacement(range(n), deg):
            e = [0] * n
            for i in combo:
                e[i] += 1
            out.append(tuple(e))
    return out


def gram_structure(poly: sp.Expr, vars) -> GramStructure:
    """The Gram structure of ``poly`` (see :class:`GramStructure`).

    >>> gs = gram_structure(x**2 + y**2, (x, y))
    >>> gs.basis, gs.outside
    (((1, 0), (0, 1)), ())
    """
    vars = tuple(vars)
    p = _poly(poly, vars)
    terms = {tuple(m): sp.Rational(c) for m, c in p.terms() if c != 0}
    n = len(vars)
    if not terms:
        return GramStructure(vars, (), {}, {}, ())
    degs = [sum(m) for m in terms]
    lo, hi = math.ceil(min(degs) / 2), max(degs) // 2
    basis = _monomials_between(n, lo, hi)
    while True:
        pairs: dict = {}
        for i, j in itertools.combinations_with_replacement(range(len(basis)), 2):
            m = tuple(a + b for a, b in zip(basis[i], basis[j]))
            pairs.setdefault(m, []).append((i, j))
        forced = [i for i, z in enumerate(basis)
                  if terms.get(tuple(2 * e for e in z), 0) == 0 and pairs[tuple(2 * e for e in z)] == [(i, i)]]
        if not forced:
            break
        basis = [z for i, z in enumerate(basis) if i not in forced]
        if not basis:
            pairs = {}
            break
    outside = tuple(sorted(m for m in terms if m not in pairs))
    coeffs = {m: terms.get(m, sp.Integer(0)) for m in pairs}
    return GramStructure(vars, tuple(basis), pairs, coeffs, outside)


def gram_form(G, gs: GramStructure) -> sp.Expr:
    """``z(x)ᵀ G z(x)`` expanded by SymPy (``G``: an exact or float square matrix in the basis order).

    >>> gram_form(sp.eye(2), gram_structure(x**2 + y**2, (x, y)))
    x**2 + y**2
    """
    z = sp.Matrix(gs.basis_exprs())
    return sp.expand((z.T * sp.Matrix(G) * z)[0])


def exact_psd(G: sp.Matrix) -> tuple[bool, list]:
    """Exact positive-semidefiniteness of a symmetric rational matrix by LDLᵀ with diagonal
    pivoting: eliminate on a positive diagonal entry while there is one; a negative diagonal entry,
    or a zero diagonal with a nonzero entry in its row, means not PSD. Returns ``(psd, pivots)``.

    >>> exact_psd(sp.Matrix([[2, 1], [1, 1]]))
    (True, [2, 1/2])
    >>> exact_psd(sp.Matrix([[1, 2], [2, 1]]))[0]
    False
    >>> exact_psd(sp.Matrix([[0, 1], [1, 1]]))[0]
    False
    """
    M = sp.Matrix(G).applyfunc(sp.Rational)
    if M != M.T:
        return False, []
    pivots = []
    idx = list(range(M.rows))
    while idx:
        diag = [(M[i, i], i) for i in idx]
        if any(d < 0 for d, _ in diag):
            return False, pivots
        pos = [(d, i) for d, i in diag if d > 0]
        if not pos:
            ok = all(M[i, j] == 0 for i in idx for j in idx)
            return ok, pivots
        d, k = max(pos)
        pivots.append(d)
        rest = [i for i in idx if i != k]
        for i in rest:
            if M[i, k] != 0:
                r = M[i, k] / d
                for j in rest:
                    M[i, j] -= r * M[k, j]
        idx = rest
    return True, pivots


@dataclass(frozen=True)
class ExactRecheck:
    """The exact re-check of a numeric Gram matrix.

    G                  the rational Gram matrix after rounding (denominator 2^40) and exact
                       projection onto ``{G : z ᵀGz = poly}`` (each monomial's residual spread
                       equally over the entries producing it)
    residual           ``z(x)ᵀ G z(x) − poly`` expanded by SymPy (exactly 0 when the projection worked)
    rounding_residual  largest coefficient of ``zᵀ G_rounded z − poly`` before the projection (the
                       solver's own mismatch, float)
    psd                the exact LDLᵀ test of :func:`exact_psd`
    min_pivot          smallest LDLᵀ pivot (float), ``min_eig`` the smallest eigenvalue of G (float)
    """

    G: sp.Matrix
    residual: sp.Expr
    rounding_residual: float
    psd: bool
    min_pivot: float
    min_eig: float

    @property
    def certified(self) -> bool:
        return self.psd and self.residual == 0


def exact_recheck(poly: sp.Expr, gs: GramStructure, G_float, denominator: int = 2**40) -> ExactRecheck:
    """Round ``G_float`` (``(N, N)`` with ``N = gs.size``) to rationals, project it exactly onto the
    matrices whose Gram form is ``poly``, test PSD exactly and expand the Gram form in SymPy
    (Peyrl–Parrilo rounding-projection).

    >>> gs = gram_structure(x**2 + y**2, (x, y))
    >>> r = exact_recheck(x**2 + y**2, gs, np.array([[1.0 + 1e-12, 0.0], [0.0, 1.0]]))
    >>> r.residual, r.psd, r.G
    (0, True, Matrix([
    [1, 0],
    [0, 1]]))
    """
    Gf = np.asarray(G_float, dtype=np.float64)
    N = gs.size
    Gf = (Gf + Gf.T) / 2
    R = [[Fraction(round(float(Gf[i, j]) * denominator), denominator) for j in range(N)] for i in range(N)]
    rounding = 0.0
    for m, prs in gs.pairs.items():
        tot = sum((R[i][j] if i == j else 2 * R[i][j]) for i, j in prs)
        target = Fraction(int(gs.coeffs[m].p), int(gs.coeffs[m].q))
        diff = tot - target
        rounding = rounding if abs(float(diff)) <= rounding else abs(float(diff))
        if diff:
            # minimum-Frobenius-norm correction: every matrix entry producing m (an off-diagonal
            # pair counts twice, (i, j) and (j, i)) moves by the same amount
            count = sum(1 if i == j else 2 for i, j in prs)
            for i, j in prs:
                R[i][j] -= diff / count
                if i != j:
                    R[j][i] = R[i][j]
    G = sp.Matrix(N, N, lambda i, j: sp.Rational(R[i][j].numerator, R[i][j].denominator))
    residual = sp.expand(gram_form(G, gs) - sp.expand(poly)) if N else sp.expand(-poly)
    psd, pivots = exact_psd(G) if N else (True, [])
    min_pivot = float(min(pivots)) if pivots else 0.0
    min_eig = float(np.linalg.eigvalsh(np.array(G.tolist(), dtype=np.float64))[0]) if N else 0.0
    return ExactRecheck(G, residual, rounding, psd, min_pivot, min_eig)


def sos_panel() -> tuple[Candidate, ...]:
    """Candidates the SOS claim certifies: the cubic system with quartic decay
    (``f = (−x³ − y, x − y³)``, ``V = x² + y²``, ``−V̇ = 2x⁴ + 2y⁴``), a system whose quadratic
    terms cancel (``f = (−2x + y², −y − xy)``, ``V = x² + y²``, ``−V̇ = 4x² + 2y²``) and a damped
    oscillator with a cross term in ``V`` (``f = (y, −x − y)``, ``V = 3x²/2 + xy + y²``,
    ``−V̇ = x² + y²``)."""
    return (Candidate((x, y), (-x**3 - y, x - y**3), x**2 + y**2, "cubic"),
            Candidate((x, y), (-2 * x + y**2, -y - x * y), x**2 + y**2, "cancelling"),
            Candidate((x, y), (y, -x - y), sp.Rational(3, 2) * x**2 + x * y + y**2, "damped"))


@lru_cache(maxsize=None)
def derive_sos_certificate() -> Derivation:
    """An exact SOS certificate for ``f = (−x³ − y, x − y³)``, ``V = x² + y²`` at symbolic ε.

    ``V̇ = −2x⁴ − 2y⁴`` (the cubic rotation terms cancel); ``p = x² + y²``, ``q = x⁴ + y⁴`` (the
    lowest even degrees); ``V − εp = (1 − ε)(x² + y²)`` has the Gram matrix ``(1 − ε)I`` in
    ``(x, y)``; ``−V̇ − εq`` in ``(x², xy, y²)`` has the Gram family
    ``[[2 − ε, 0, −a], [0, 2a, 0], [−a, 0, 2 − ε]]`` (SymPy's linsolve of the coefficient
    equations), eigenvalues ``2a, 2 − ε ± a``; the smallest is largest at ``a = (2 − ε)/3``
    (solved), where every eigenvalue is ``≥ 2(2 − ε)/3 > 0`` for ``0 < ε < 2``. A certificate
    ``V − εp ∈ SOS`` gives ``V ≥ εp`` (positive definite, radially unbounded), and
    ``−V̇ − εq ∈ SOS`` gives ``V̇ ≤ −εq`` (negative definite): global asymptotic stability.

    ``result``: ``{"Vdot", "G_V", "G_decay"}``; ``facts``: ``"eps"``, ``"structure_V"``,
    ``"structure_decay"``, ``"min_eig_decay"``.
    """
    b = DerivationBuilder("SOS certificate for x' = (−x³ − y, x − y³), V = x² + y²")
    eps = sp.Symbol("epsilon", positive=True)
    a = sp.Symbol("a", real=True)
    b.symbols(x="first state variable", y="second state variable", epsilon="the margin ε (0 < ε < 2)",
              a="free Gram entry (the split of the x²y² coefficient)", z="monomial basis vector",
              G="Gram matrix: poly = z(x)ᵀ G z(x)")
    c = sos_panel()[0]
    b.define("f = (−x³ − y, x − y³), V = x² + y²", sp.Matrix([*c.f, c.V]))
    vdot = b.step("V̇ = ∇V·f, expanded", c.vdot())
    b.obligation("Vdot_closed_form", vdot + 2 * x**4 + 2 * y**4)
    p = b.step("p = Σ x_i^{2k} at V's lowest even degree", bound_polynomial(c.V, c.vars))
    q = b.step("q = Σ x_i^{2k} at −V̇'s lowest even degree (quartic)", bound_polynomial(-vdot, c.vars))
    tV = sp.expand(c.V - eps * p)
    tD = sp.expand(-vdot - eps * q)
    gV, gD = gram_structure(tV.subs(eps, sp.Rational(1, 2)), c.vars), gram_structure(tD.subs(eps, sp.Rational(1, 2)), c.vars)
    b.step("basis for V − εp", sp.Matrix(gV.basis_exprs()))
    b.step("basis for −V̇ − εq", sp.Matrix(gD.basis_exprs()))
    solved = []
    for label, target, gs in (("V − εp", tV, gV), ("−V̇ − εq", tD, gD)):
        N = gs.size
        ent = sp.Matrix(N, N, lambda i, j: sp.Symbol(f"G_{min(i, j) + 1}{max(i, j) + 1}", real=True))
        form = gram_form(ent, gs)
        eqs = sp.Poly(form - target, *c.vars).coeffs()
        unknowns = sorted(ent.free_symbols, key=str)
        sol, = sp.linsolve(eqs, unknowns)
        Gfam = ent.subs(dict(zip(unknowns, sol)))
        Gfam = b.step(f"Gram matrices of {label} (linsolve of the coefficient equations)", Gfam)
        solved.append(Gfam)
    GV, Gfam = solved
    free = sorted(Gfam.free_symbols - {eps}, key=str)
    Gfam = Gfam.subs(free[0], a) if free else Gfam
    evs = b.step("eigenvalues of the −V̇ − εq family (linear in the free entry a)", sp.Matrix(sorted(Gfam.eigenvals(), key=str)))
    cands = [r for e1, e2 in itertools.combinations(list(evs), 2) for r in sp.solve(sp.Eq(e1, e2), a)]
    half = {eps: sp.Rational(1, 2)}
    best = max(cands, key=lambda r: min(e.subs(a, r).subs(half) for e in evs))
    best = b.step("the a where two eigenvalues meet and the smallest eigenvalue is largest", best)
    GD = b.step("Gram matrix of −V̇ − εq at that a", Gfam.subs(a, best))
    b.obligation("gram_V_reproduces_polynomial", gram_form(GV, gV) - tV)
    b.obligation("gram_decay_reproduces_polynomial", gram_form(GD, gD) - tD)
    w = sp.Symbol("w", positive=True)  # 0 < ε < 2 written as ε = 2w/(1 + w), w > 0
    sub = {eps: 2 * w / (1 + w)}
    b.obligation("gram_V_positive_definite_for_eps_below_one", [e.subs(eps, w / (1 + w)) for e in GV.eigenvals()],
                 "positive", "eigenvalues 1 − ε > 0 for 0 < ε < 1 (ε = w/(1 + w), w > 0)")
    b.obligation("gram_decay_positive_definite", [sp.simplify(e.subs(sub)) for e in GD.eigenvals()], "positive",
                 "eigenvalues 2(2 − ε)/3 (twice) and 4(2 − ε)/3 > 0 for 0 < ε < 2 (ε = 2w/(1 + w), w > 0)")
    b.record(eps=eps, structure_V=gV, structure_decay=gD, eigenvalues_family=evs,
             min_eig_decay=min(GD.eigenvals(), key=lambda e: e.subs(half)))
    return b.done({"Vdot": vdot, "G_V": GV, "G_decay": GD})


# --------------------------------------------------------------------------------------------
# parsing a user's system (tverify check lyapunov)

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


#: deepest expression tree --f/--V may have (SymPy's parser recursed past Python's limit near 1000)
MAX_NESTING = 500


def _ast_depth(tree) -> int:
    """Depth of an expression tree, counted without recursion."""
    deepest, todo = 0, [(tree.body, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((child, d + 1) for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr_context))
    return deepest


def _underscored_number(text: str) -> bool:
    """A number token of Python's holding ``_`` (``1_0``, ``1e0_1``, ``0x1_0``), found by Python's own tokenizer: a
    pattern missed the digits after a letter (hostile pass 48b F4)."""
    import io
    import tokenize

    try:
        return any(t.type == tokenize.NUMBER and "_" in t.string
                   for t in tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):  # malformed text: the parser below says why
        return False


def _check_ast(text: str, option: str, names: set | None) -> set:
    """Whitelist the syntax of one expression: numbers, names, + − * / ** and parentheses; integer
    exponents 0..MAX_DEGREE. Returns the names used."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8 (carried as a lone surrogate): the parser's traceback (20a F5)
        raise InputError(f"{option}: holds a byte that is not UTF-8 text: {text.encode('utf-8', 'backslashreplace').decode()!r}") from None
    if "^" in text:
        raise InputError(f"{option}: use ** for powers, not ^: {text!r}")
    if "#" in text:  # Python's parser drops the rest as a comment: 'x**2 # + y**2' was certified as x**2 (hostile pass 10)
        raise InputError(f"{option}: '#' is not allowed (Python would read the rest as a comment and drop it): {text!r}")
    if _underscored_number(text):  # Python reads 1_0 as 10, 1e0_1 as 10, 0x1_0 as 16: a typo taken for a number
        raise InputError(f"{option}: write numbers without '_' (Python would read 1_0 as 10): {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except RecursionError:  # thousands of nested signs: Python's own parser gives up before any depth count
        raise InputError(f"{option}: the expression is nested deeper than Python's parser allows (a chain of "
                         f"signs or operations); at most {MAX_NESTING} levels are supported: expand or shorten it") from None
    except SyntaxError as exc:
        if "nested parentheses" in str(exc.msg):  # Python's parser stops at 200 levels of brackets
            raise InputError(f"{option}: {exc.msg} (Python's parser allows 200 levels); expand or shorten "
                             f"the expression ({len(text)} characters)") from None
        raise InputError(f"{option}: cannot parse {text!r} (allowed: numbers, the variables, + - * / ** and parentheses)") from None
    depth = _ast_depth(tree)
    if depth > MAX_NESTING:  # SymPy's parser recurses once per level (a RecursionError, a 1000-line traceback)
        raise InputError(f"{option}: the expression's tree is {depth} levels deep (a chain of operations or "
                         f"signs nested that deep); at most {MAX_NESTING} levels are supported: expand or shorten it")
    used: set = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.operator, ast.unaryop, ast.Load)):
            continue
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _ALLOWED_BINOPS):
                raise InputError(f"{option}: operator not allowed in {text!r} (allowed: + - * / **)")
            if isinstance(node.op, ast.Pow):
                e = node.right
                neg = isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub)
                inner = e.operand if neg else e
                if isinstance(inner, ast.Constant) and type(inner.value) is not int:
                    raise InputError(f"{option}: exponents must be whole numbers, got {inner.value!r} in {text!r}")
                if not isinstance(inner, ast.Constant):
                    raise InputError(f"{option}: an exponent must be a plain whole number (0 to {MAX_DEGREE}), not the "
                                     f"expression {ast.unparse(inner)[:40]!r}, in {text!r}")
                if neg:
                    raise InputError(f"{option}: not a polynomial (negative exponent) in {text!r}")
                if inner.value > MAX_DEGREE:
                    numeric = not any(isinstance(n, ast.Name) for n in ast.walk(node.left))
                    power = _short(ast.get_source_segment(text.strip(), node) or ast.unparse(node))
                    raise InputError(
                        f"{option}: exponent {inner.value} in {power} is above {MAX_DEGREE}, the largest exponent "
                        "allowed" + (" (a number raised to a power too: write its value instead)" if numeric
                                     else f" (polynomials up to degree {MAX_DEGREE})"))
            continue
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise InputError(f"{option}: operator not allowed in {text!r}")
            continue
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise InputError(f"{option}: only numbers and variables are allowed, got {node.value!r}")
            if not _fits_float64(node.value):
                number = ast.get_source_segment(text.strip(), node) or repr(node.value)
                raise InputError(f"{option}: the number {_short(number)} overflows float64 (largest about 1.8e308): "
                                 "a coefficient too large for float64 cannot be checked numerically; rescale it")
            number = ast.get_source_segment(text.strip(), node) or ""
            if node.value == 0 and isinstance(node.value, float) and _nonzero_text(number):  # 1e-400: Python reads
                raise InputError(f"{option}: the number {_short(number)} is below float64's range (it would read as "  # 0
                                 "0; smallest about 4.9e-324): rescale the system")  # (hostile pass 45a F4)
            continue
        if isinstance(node, ast.Name):
            if node.id in RESERVED_NAMES:
                raise InputError(f"{option}: {node.id!r} is not allowed (nan, inf, oo, zoo and I are not numbers a "
                                 "polynomial can have, nor variable names): use finite real numbers")
            if node.id in PARSER_NAMES:
                raise InputError(f"{option}: {node.id!r} is not allowed as a variable name (SymPy's parser writes the "
                                 "numbers with it): rename it in --f, --V and --vars")
            if names is not None and node.id not in names:
                raise InputError(f"{option}: unknown name {node.id!r} (the variables are {', '.join(sorted(names))})")
            used.add(node.id)
            continue
        what = "function calls" if isinstance(node, ast.Call) else type(node).__name__
        raise InputError(f"{option}: {what} not allowed in {text!r} (allowed: numbers, the variables, + - * / **)")
    bound = _ast_degree(tree)
    if bound > 4 * MAX_DEGREE:  # refuse before SymPy expands, e.g., ((x + y)**12)**12
        raise InputError(f"{option}: degree up to {bound} exceeds the largest supported degree {MAX_DEGREE}")
    terms = math.comb(len(used) + bound, len(used))
    if bound > MAX_DEGREE and terms > MAX_TERMS:  # ((x1+…+x6)**12)**4: minutes and GBs of expansion (44a F10)
        raise InputError(f"{option}: degree up to {bound} in {len(used)} variables: expanded it may have {terms:,} "
                         f"terms, more than the largest supported polynomial (degree {MAX_DEGREE} in {MAX_VARS} "
                         f"variables: {MAX_TERMS:,}); write it expanded, of degree at most {MAX_DEGREE}")
    return used


#: names SymPy or NumPy read as non-finite or non-real constants: refused as numbers and as variables
RESERVED_NAMES = frozenset({"nan", "NaN", "inf", "Inf", "infinity", "Infinity", "oo", "zoo", "I"})
#: the names SymPy's parser writes numbers with (auto_number, rationalize): a variable of one of them was called
#: (``-x*0.5`` → "'Symbol' object is not callable", blamed on a component that is fine: hostile pass 44a F8)
PARSER_NAMES = frozenset({"Integer", "Float", "Rational", "Symbol"})


def _nonzero_text(number: str) -> bool:
    """Whether a numeric literal's text is a number other than zero (``1e-400``, not ``0.0e5``)."""
    from decimal import Decimal, InvalidOperation

    try:
        return Decimal(number.replace("_", "")) != 0
    except (InvalidOperation, ValueError):
        return False


def _fits_float64(value) -> bool:
    """Whether a number (an int of any size, a float, a SymPy number) is finite as a float64."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _short(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]} ({len(text)} characters)"


def check_float64_coefficients(expr: sp.Expr, syms, what: str) -> None:
    """Refuse a polynomial with a coefficient that is not a finite float64 (the numeric checks
    evaluate it in float64: an int past 1.8e308 would stop them with an OverflowError), or a non-zero one below
    float64's range, which the checks would read as 0 (``-x*1e-300*1e-300``: "inconclusive", hostile pass 56b F4)."""
    for c in sp.Poly(expr, *syms).coeffs() if expr != 0 else ():
        if not _fits_float64(c):
            raise InputError(f"{what}: a coefficient ({_short(str(c))}) is too large for float64 (largest about "
                             "1.8e308): rescale the system")
        if c != 0 and float(c) == 0.0:
            raise InputError(f"{what}: a coefficient ({_short(str(c))}) is below float64's range once expanded (it "
                             "would read as 0; smallest about 4.9e-324): rescale the system")


def _ast_degree(node) -> int:
    """An upper bound on the total degree of a whitelisted expression (before SymPy expands it)."""
    if isinstance(node, ast.Expression):
        return _ast_degree(node.body)
    if isinstance(node, ast.Name):
        return 1
    if isinstance(node, ast.Constant):
        return 0
    if isinstance(node, ast.UnaryOp):
        return _ast_degree(node.operand)
    if isinstance(node, ast.BinOp):
        a, b = _ast_degree(node.left), _ast_degree(node.right)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return max(a, b)
        if isinstance(node.op, ast.Pow):
            return a * int(node.right.value)
        return a + b  # Mult, and Div (a non-constant divisor is refused later as non-polynomial)
    return 0


def _split_components(text: str, option: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    for k, p in enumerate(parts, 1):
        if not p.strip():
            raise InputError(f"{option}: empty component {k} in {text!r}")
    return parts


def natural_key(name: str) -> tuple:
    """Names in natural order: ``x2`` before ``x10`` (digit runs compare as numbers).

    >>> sorted(["x10", "x2", "x1", "y"], key=natural_key)
    ['x1', 'x2', 'x10', 'y']
    """
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def parse_system(f_text: str, V_text: str, vars_text: str | None = None) -> Candidate:
    """Parse a user's polynomial system and candidate (``tverify check lyapunov``).

    ``f_text``: the components of ``f`` separated by commas (``"-x**3 - y, x - y**3"``);
    ``V_text``: one expression; ``vars_text``: the variables separated by commas (default: the
    names used, in natural order: ``x1, x2, x10``; names must be ASCII). Only numbers, the variables, ``+ - * / **`` and parentheses
    are allowed (checked on the syntax tree before SymPy's parser sees it, with a namespace that
    holds only the variables); decimals become exact rationals. Every mistake (a parse error, an
    unknown name, a non-polynomial, a dimension mismatch, ``f(0) ≠ 0``, too many variables or too
    high a degree) is an :class:`InputError` naming it.

    >>> c = parse_system("-x**3 - y, x - y**3", "x**2 + y**2")
    >>> c.vars, c.vdot()
    ((x, y), -2*x**4 - 2*y**4)
    >>> parse_system("-x, -y", "x**2 - y**2", "x,y,z")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: --f has 2 components but there are 3 variables (x, y, z)
    """
    from sympy.parsing.sympy_parser import parse_expr, rationalize, standard_transformations

    for opt, text in (("--f", f_text), ("--V", V_text)):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{opt}: empty expression")
        if len(text) > 4000:
            raise InputError(f"{opt}: expression longer than 4000 characters")
    names = None
    if vars_text is not None:
        names_list = [v.strip() for v in vars_text.split(",")]
        for k, v in enumerate(names_list, 1):
            if not v:
                raise InputError(f"--vars: empty name at position {k} in {vars_text!r}")
            if not v.isidentifier() or keyword.iskeyword(v) or not v.isascii():
                why = "variable names are ASCII identifiers" if v.isidentifier() and not v.isascii() else \
                    "a variable name is an identifier (letters, digits, _), not a Python keyword"
                raise InputError(f"--vars: {v!r} is not a valid variable name ({why}): rename it in --f, --V and --vars")
            if v in RESERVED_NAMES:
                raise InputError(f"--vars: {v!r} is not allowed as a variable name (SymPy reads it as a constant)")
            if v in PARSER_NAMES:
                raise InputError(f"--vars: {v!r} is not allowed as a variable name (SymPy's parser writes the numbers "
                                 "with it): rename it in --f, --V and --vars")
        if len(set(names_list)) != len(names_list):
            raise InputError(f"--vars: repeated name in {vars_text!r}")
        names = set(names_list)
    comps = _split_components(f_text, "--f")
    used: set = set()
    for k, comp in enumerate(comps, 1):
        used |= _check_ast(comp, f"--f (component {k})", names)
    used |= _check_ast(V_text, "--V", names)
    if names is None:
        odd = sorted(v for v in used if not v.isascii())
        if odd:  # no evident order of Greek and Latin letters, and --vars takes ASCII names only
            raise InputError(f"--f/--V: variable names must be ASCII identifiers, got {', '.join(map(repr, odd))}: rename them "
                             "(and give --vars in the order of --f's components)")
        names_list = sorted(used, key=natural_key)
        if not names_list:
            raise InputError("no variables: --f and --V are constants (name them with --vars)")
    if len(names_list) > MAX_VARS:
        raise InputError(f"--vars: {len(names_list)} variables; at most {MAX_VARS} are supported")
    syms = tuple(sp.Symbol(v, real=True) for v in names_list)
    local = dict(zip(names_list, syms))
    glob = {"Integer": sp.Integer, "Float": sp.Float, "Rational": sp.Rational, "Symbol": sp.Symbol}
    trans = standard_transformations + (rationalize,)  # rationalize runs after auto_number

    def parse(text: str, opt: str) -> sp.Expr:
        try:
            e = parse_expr(text.strip(), local_dict=dict(local), global_dict=dict(glob), transformations=trans,
                           evaluate=True)
        except (SyntaxError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
            raise InputError(f"{opt}: cannot parse {text.strip()!r}: {exc}") from None
        except RecursionError:
            raise InputError(f"{opt}: the expression is nested too deeply for SymPy's parser: "
                             "expand or shorten it") from None
        if e.has(sp.zoo, sp.oo, sp.nan) or not e.free_symbols <= set(syms):
            raise InputError(f"{opt}: not a finite expression in {', '.join(names_list)}: {text.strip()!r}")
        e = sp.expand(sp.cancel(e))
        if not e.is_polynomial(*syms):
            raise InputError(f"{opt}: not a polynomial in {', '.join(names_list)}: {text.strip()!r}")
        deg = sp.Poly(e, *syms).total_degree() if e != 0 else 0
        if deg > MAX_DEGREE:
            raise InputError(f"{opt}: degree {deg} exceeds the largest supported degree {MAX_DEGREE}")
        check_float64_coefficients(e, syms, opt)
        return e

    f = tuple(parse(cmp, f"--f (component {k})") for k, cmp in enumerate(comps, 1))
    if len(f) != len(syms):
        raise InputError(f"--f has {len(f)} component{'s' if len(f) != 1 else ''} but there are {len(syms)} variables ({', '.join(names_list)})")
    V = parse(V_text, "--V")
    origin = {s: 0 for s in syms}
    nz = [k for k, fi in enumerate(f, 1) if fi.subs(origin) != 0]
    if nz:
        raise InputError(f"--f: f(0) ≠ 0 (component {nz[0]} is {f[nz[0] - 1].subs(origin)} at the origin); "
                         "the origin must be an equilibrium")
    cand = Candidate(syms, f, V, "user")
    check_float64_coefficients(cand.vdot(), syms, "∇V·f (from --f and --V)")
    return cand
