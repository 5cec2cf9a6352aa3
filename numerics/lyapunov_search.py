"""``tverify check lyapunov``: a search for a sum-of-squares Lyapunov certificate whose margin
polynomials are chosen from the candidate itself, and an exact search for counterexamples.

Certificate. ``V`` is a global Lyapunov function of ``x' = f(x)`` when ``V − εp`` and ``−V̇ − εq`` are
sums of squares for margin polynomials ``p, q`` that are positive definite and radially unbounded.
Every margin tried here has the form ``Σ_i x_i^{2k_i}`` (``k_i ≥ 1``), which is both. The exponents
are read off the polynomial it must sit under (:func:`margin_candidates`): for each variable the even
pure powers ``x_i^{2k}`` with a positive coefficient (the vertices of the Newton polytope on the
axes), lowest first, then highest, then the old default ``Σ_i x_i^{2k}`` at the lowest even total
degree. A margin outside the Newton polytope of the polynomial can never leave a sum of squares
(``2x² + 8y⁴ − ε(x² + y²)`` is negative at ``(0, √ε/4)``), so the fixed default failed textbook
cases; the axis vertices never leave it. With ``region = R`` each program instead carries an
S-procedure multiplier: ``poly − εm − s(x)(R² − ‖x‖²)`` and ``s`` sums of squares, which proves
``poly ≥ εm`` on the ball ``‖x‖ ≤ R`` (local certificate). Every Gram matrix is rounded to
rationals, projected exactly and tested for PSD exactly (:func:`theory.lyapunov.exact_recheck`).

Counterexample (:func:`exact_counterexample`). A failed search refutes nothing. A refutation is a
rational point ``x ≠ 0`` (inside the ball with a region) where ``V(x) ≤ 0`` or ``V̇(x) ≥ 0``, found
by a float screen (axes and random directions at radii 10⁻³ … 10², plus a local minimisation) and
then checked in exact rational arithmetic (SymPy).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp

from theory import lyapunov as tl
from theory.validation import InputError

__all__ = ["margin_candidates", "ProgramAttempt", "search_certificate", "exact_counterexample", "Counterexample",
           "DENOMINATOR"]

#: Gram matrices are rounded to this grid before the exact projection (as theory.lyapunov.exact_recheck).
DENOMINATOR = 2**40


def margin_candidates(poly: sp.Expr, vars) -> list[sp.Expr]:
    """Margin polynomials ``Σ_i x_i^{2k_i}`` to try under ``poly`` (see the module docstring): the
    lowest axis vertices of its Newton polytope, the highest, then the lowest-even-degree default.

    >>> x, y = sp.symbols("x y", real=True)
    >>> margin_candidates(2*x**2 + 8*y**4, (x, y))
    [x**2 + y**4, x**2 + y**2]
    >>> margin_candidates(x**4 + x**2 + y**2, (x, y))
    [x**2 + y**2, x**4 + y**2]
    """
    vars = tuple(vars)
    out: list[sp.Expr] = []
    if sp.expand(poly) == 0:
        return out
    P = sp.Poly(sp.expand(poly), *vars)
    axis: list[list[int]] = [[] for _ in vars]
    for m, c in P.terms():
        nz = [i for i, e in enumerate(m) if e]
        if len(nz) == 1 and m[nz[0]] % 2 == 0 and c > 0:
            axis[nz[0]].append(m[nz[0]])
    if all(axis):
        for pick in (min, max):
            out.append(sp.Add(*[v ** pick(a) for v, a in zip(vars, axis)]))
    try:
        out.append(tl.bound_polynomial(poly, vars))
    except InputError:
        pass
    seen, uniq = set(), []
    for e in out:
        k = sp.srepr(sp.expand(e))
        if k not in seen:
            seen.add(k)
            uniq.append(sp.expand(e))
    return uniq


@dataclass
class ProgramAttempt:
    """One SOS program tried: ``poly − eps·margin`` (minus ``s·(R² − ‖x‖²)`` with a region)."""

    which: str            # "V" or "decay"
    margin: sp.Expr
    target: sp.Expr
    status: str           # solver status, "structurally infeasible", "solver failed: ..."
    solver: str = ""
    certified: bool = False
    min_eig: float = math.nan
    exact_residual: str | None = None
    exact_psd: bool | None = None
    basis: list = field(default_factory=list)
    multiplier: str | None = None
    gram_exact: list | None = None
    message: str = ""

    def to_json(self) -> dict:
        return {"condition": self.which, "margin": str(self.margin), "polynomial": str(self.target),
                "status": self.status, "solver": self.solver, "certified": self.certified,
                "min_eig": self.min_eig if math.isfinite(self.min_eig) else None,
                "exact_residual": self.exact_residual, "exact_psd": self.exact_psd,
                "basis": [str(b) for b in self.basis], "multiplier": self.multiplier, "gram_exact": self.gram_exact,
                "message": self.message}


def _global_program(which, poly, margin, eps, vars) -> ProgramAttempt:
    from numerics import lyapunov as nl

    target = sp.expand(poly - eps * margin)
    try:
        r, gs = nl.solve_gram(target, vars)
    except nl.SolverFailure as exc:
        return ProgramAttempt(which, margin, target, f"solver failed: {exc}")
    att = ProgramAttempt(which, margin, target, r.status, r.solver, basis=gs.basis_exprs(), message=r.message)
    if r.feasible:
        ex = tl.exact_recheck(target, gs, r.G, DENOMINATOR)
        # the exact Gram matrix's own smallest eigenvalue (the one the certificate is), not the solver's: that one
        # was capped (1e20 printed for an exact 1e30, hostile pass 45a F12)
        att.min_eig, att.exact_residual, att.exact_psd = ex.min_eig, str(ex.residual), ex.psd
        att.certified = ex.certified
        att.gram_exact = [[str(v) for v in row] for row in ex.G.tolist()]
    return att


def _pairs(basis):
    pairs: dict = {}
    for i, j in itertools.combinations_with_replacement(range(len(basis)), 2):
        m = tuple(a + b for a, b in zip(basis[i], basis[j]))
        pairs.setdefault(m, []).append((i, j))
    return pairs


def _rational_matrix(G: np.ndarray) -> sp.Matrix:
    G = (G + G.T) / 2
    n = G.shape[0]
    return sp.Matrix(n, n, lambda i, j: sp.Rational(round(float(G[i, j]) * DENOMINATOR), DENOMINATOR))


def _region_program(which, poly, margin, eps, vars, R2) -> ProgramAttempt:
    """``poly − eps·margin − s·(R2 − ‖x‖²) = σ0``, ``σ0, s`` SOS with zero constant term (S-procedure)."""
    import cvxpy as cp

    target = sp.expand(poly - eps * margin)
    n = len(vars)
    P = sp.Poly(target, *vars)
    D = max(4, P.total_degree() + (P.total_degree() % 2))
    b0 = tl._monomials_between(n, 1, D // 2)
    b1 = tl._monomials_between(n, 1, D // 2 - 1)
    p0, p1 = _pairs(b0), _pairs(b1)
    g_terms = [((0,) * n, R2)] + [(tuple(2 if k == i else 0 for k in range(n)), -1) for i in range(n)]
    G0 = cp.Variable((len(b0), len(b0)), symmetric=True)
    G1 = cp.Variable((len(b1), len(b1)), symmetric=True)
    t = cp.Variable()
    rows: dict = {}
    for m, prs in p0.items():
        rows.setdefault(m, []).extend((G0[i, j] if i == j else 2 * G0[i, j]) for i, j in prs)
    for m, prs in p1.items():
        for gm, gc in g_terms:
            mm = tuple(a + b for a, b in zip(m, gm))
            rows.setdefault(mm, []).extend(float(gc) * (G1[i, j] if i == j else 2 * G1[i, j]) for i, j in prs)
    coeffs = {tuple(m): c for m, c in P.terms()}
    outside = [m for m in coeffs if m not in rows]
    if outside:
        return ProgramAttempt(which, margin, target, "structurally infeasible",
                              message=f"monomial {outside[0]} outside the Gram support")
    cons = [G0 - t * np.eye(len(b0)) >> 0, G1 >> 0, t >= 0]
    cons += [sum(e) == float(coeffs.get(m, 0)) for m, e in rows.items()]
    prob = cp.Problem(cp.Maximize(t), cons)
    status, solver = "not run", ""
    for name, opts in (("CLARABEL", {}), ("SCS", dict(eps_abs=1e-9, eps_rel=1e-9, max_iters=200000))):
        try:
            prob.solve(solver=name, **opts)
        except (cp.SolverError, ValueError, ArithmeticError) as exc:
            status = f"solver failed: {exc}"
            continue
        status, solver = prob.status, name
        if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.INFEASIBLE):
            break
    att = ProgramAttempt(which, margin, target, status, solver)
    if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or G0.value is None:
        return att
    # exact: the multiplier first (rounded, shifted to be exactly PSD), then σ0 projected onto the rest
    g1 = np.asarray(G1.value, dtype=np.float64)
    lam = float(np.linalg.eigvalsh((g1 + g1.T) / 2)[0]) if g1.size else 0.0
    S1 = _rational_matrix(g1 + (max(0.0, -lam) + 2.0**-30) * np.eye(len(b1)))
    psd1, _ = tl.exact_psd(S1)
    z1 = sp.Matrix([sp.Mul(*[v**e for v, e in zip(vars, m)]) for m in b1])
    s = sp.expand((z1.T * S1 * z1)[0])
    g = R2 - sum(v**2 for v in vars)
    rest = sp.expand(target - s * g)
    pr = sp.Poly(rest, *vars)
    rc = {tuple(m): sp.Rational(c) for m, c in pr.terms()}
    out0 = tuple(sorted(m for m in rc if m not in p0))
    gs0 = tl.GramStructure(tuple(vars), tuple(b0), p0, {m: rc.get(m, sp.Integer(0)) for m in p0}, out0)
    if out0:
        att.message = "the exact multiplier leaves monomials outside σ0's support"
        return att
    ex = tl.exact_recheck(rest, gs0, np.asarray(G0.value, dtype=np.float64), DENOMINATOR)
    att.min_eig = ex.min_eig  # (the exact σ0's, as above)
    att.exact_residual, att.exact_psd = str(ex.residual), bool(ex.psd and psd1)
    att.certified = bool(ex.certified and psd1)
    att.basis = gs0.basis_exprs()
    att.multiplier = str(s)
    att.gram_exact = [[str(v) for v in row] for row in ex.G.tolist()]
    return att


def search_certificate(c: tl.Candidate, eps, region=None) -> dict:
    """Try the margins of :func:`margin_candidates` for ``V`` and for ``−V̇`` (independent programs),
    each until one certifies. ``region``: ``None`` (global) or the radius ``R`` (exact rational) of
    the ball of a local certificate. Returns ``{"V": [ProgramAttempt...], "decay": [...],
    "certified": bool, "used": {"V": attempt | None, "decay": ...}}``."""
    eps = sp.Rational(eps)
    vdot = c.vdot()
    out: dict = {"V": [], "decay": [], "used": {"V": None, "decay": None}}
    R2 = None if region is None else sp.Rational(region) ** 2
    for which, poly in (("V", c.V), ("decay", sp.expand(-vdot))):
        margins = margin_candidates(poly, c.vars)
        if not margins:
            out[which].append(ProgramAttempt(which, sp.Integer(0), poly, "structurally infeasible",
                                             message=("V" if which == "V" else "∇V·f") + " is identically zero"))
            continue
        for m in margins:
            att = (_global_program(which, poly, m, eps, c.vars) if R2 is None else
                   _region_program(which, poly, m, eps, c.vars, R2))
            out[which].append(att)
            if att.certified:
                out["used"][which] = att
                break
    out["certified"] = out["used"]["V"] is not None and out["used"]["decay"] is not None
    return out


@dataclass
class Counterexample:
    """A rational point ``x ≠ 0`` where ``condition`` fails, with the exact ``value`` there."""

    condition: str        # "V > 0" or "V̇ < 0"
    point: tuple          # sympy Rationals
    value: sp.Rational

    def to_json(self) -> dict:
        return {"condition": self.condition, "point": [str(p) for p in self.point],
                "point_float": [float(p) for p in self.point], "value": str(self.value),
                "value_float": float(self.value)}

    def text(self, names) -> str:
        pt = ", ".join(f"{n} = {p}" for n, p in zip(names, self.point))
        what = "V" if self.condition == "V > 0" else "∇V·f"
        rel = "≤ 0" if self.condition == "V > 0" else "≥ 0"
        return f"{what}({pt}) = {self.value} {rel} (exact rational arithmetic)"


def _rational(v: float) -> sp.Rational:
    """A short rational near ``v``: a denominator up to 10^6, or up to 10^6/|v| below 1 (to 10^6 alone, every value
    under 5e-7 became 0, and a region that small had no point to try: hostile pass 54b F1)."""
    fr = Fraction(float(v))
    if fr != 0:
        fr = fr.limit_denominator(max(10**6, int(Fraction(10**6) / abs(fr))))
    return sp.Rational(fr.numerator, fr.denominator)


def exact_counterexample(c: tl.Candidate, rng: np.random.Generator, n_dirs: int = 200, region=None,
                         max_exact: int = 60) -> Counterexample | None:
    """A rational point ``x ≠ 0`` (with ``‖x‖ ≤ region``) where ``V(x) ≤ 0`` or ``∇V·f(x) ≥ 0``,
    verified exactly; ``None`` when the screen finds none (which proves nothing)."""
    from numerics.lyapunov import _directions, lambdify_candidate

    n = len(c.vars)
    _, Vf, Df = lambdify_candidate(c)
    dirs = _directions(n, rng, n_dirs)
    Rmax = 100.0 if region is None else float(region)
    # from 1e-3, or three decades below a smaller region (a region under 1e-3 had no radius left: hostile pass 54b F1)
    lo = min(1e-3, Rmax / 1e3) if Rmax / 1e3 > 0 else Rmax
    radii = np.concatenate([np.logspace(math.log10(lo), math.log10(max(Rmax, 2 * lo)), 26), [1.0, 0.1, 0.01]])
    radii = radii[radii <= Rmax]
    pts = (radii[:, None, None] * dirs[None]).reshape(-1, n)
    with np.errstate(all="ignore"):
        V, D = Vf(pts), Df(pts)
    scaleV = np.maximum(np.abs(V), 1e-300)
    # candidates: smallest V relative to size, largest V̇; exact values decide
    with np.errstate(all="ignore"):  # coefficients near 1e308: inf/NaN only reorder candidates; exact values decide
        order_V = np.argsort(V / np.maximum(np.linalg.norm(pts, axis=1) ** 2, 1e-300))[: max_exact // 2]
        order_D = np.argsort(-D / np.maximum(np.linalg.norm(pts, axis=1) ** 2, 1e-300))[: max_exact // 2]
    del scaleV
    PV = sp.Poly(c.V, *c.vars)
    vdot = c.vdot()
    PD = sp.Poly(vdot, *c.vars) if vdot != 0 else None
    tried = set()

    def at(P, q):
        if P is None:
            return sp.Integer(0)
        return sp.Rational(P.eval(dict(zip(c.vars, q))) if n > 1 else P.eval(q[0]))

    def test(q):
        if all(v == 0 for v in q) or q in tried:
            return None
        if region is not None and sum(v**2 for v in q) > sp.Rational(region) ** 2:
            return None
        tried.add(q)
        val = at(PV, q)
        if val <= 0:
            return Counterexample("V > 0", q, val)
        val = at(PD, q)
        if val >= 0:
            return Counterexample("V̇ < 0", q, val)
        return None

    # simple points first: the axes at radii 10^-2 … 10 (exact), then the screened ones, each
    # tried at 2 and 4 significant digits before its full float value
    inside = [] if region is None else [_rational(Rmax / 2)]  # (a region below 1/100 holds none of the others)
    for r in (sp.Rational(1, 100), sp.Rational(1, 10), sp.Integer(1), sp.Integer(10), *inside):
        for i in range(n):
            for sgn in (1, -1):
                ce = test(tuple(sgn * r if k == i else sp.Integer(0) for k in range(n)))
                if ce is not None:
                    return ce
    for order in (order_V, order_D):
        for k in order:
            for fmt in (".2g", ".4g", None):
                q = tuple(_rational(float(format(v, fmt)) if fmt else v) for v in pts[k])
                ce = test(q)
                if ce is not None:
                    return ce
    return None
