"""Lyapunov functions in SymPy: the candidate, the Lie derivative, the Lyapunov conditions decided symbolically
(``lyap.conditions``: the panel, the hypotheses, the two readings of the theorem) and the backward construction
``f = (−P + S)∇V`` (``lyap.backward_construction``). Part of :mod:`theory.lyapunov` (conventions in its docstring)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder


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
