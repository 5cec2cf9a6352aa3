"""Sum-of-squares certificates, the exact side (``lyap.sos_certificate``): monomial bases and the Gram structure of
a polynomial, the bound polynomials, and the exact re-check of a numeric Gram matrix (rounding to rationals, exact
projection, exact PSD test by pivoted LDLᵀ). Part of :mod:`theory.lyapunov`."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.validation import InputError
from theory.lyapunov_conditions import Candidate, x, y


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
