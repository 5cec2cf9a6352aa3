"""Group H, continued: sum-of-squares certificates of Lyapunov functions (lecture notes 001, application to
mathematics; Alfarano, Charton, Hayat 2024). Binds theory/lyapunov.py and numerics/lyapunov.py to checks,
tolerances and mutants."""

from __future__ import annotations

import numpy as np
import sympy as sp

from numerics import lyapunov as nl
from proofs_checks.comparisons import exact
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare
from proofs_checks.claims._common import declare, setting
from proofs_checks.tolerances import EPS
from theory import lyapunov as tl
from proofs_checks.claims._lyapunov_common import SOURCE


# --------------------------------------------------------------------------------------------
# lyap.sos_certificate
# form: a tuple of theory.lyapunov.Candidate, each to be certified at margin EPS_SOS

EPS_SOS = sp.Rational(1, 1000)
_PROGRAMS = {"V": "V − εp", "decay": "−∇V·f − εq"}


def _certificates(form):
    return [(c.name or f"candidate {i}", nl.certify(c, EPS_SOS)) for i, c in enumerate(form)]


def _exact_recheck(form, ctx) -> CheckResult:
    """Each candidate's two SOS programs (cvxpy, Clarabel; SCS as fallback) re-checked exactly:
    the Gram matrix rounded to rationals and projected onto the coefficient equations, SymPy
    expands z(x)ᵀGz(x) and compares with the polynomial (the residual must be exactly 0), and the
    rational G must be PSD (pivoted LDLᵀ). An infeasible program has no certificate to re-check."""
    failures, rows = [], {}
    for name, ce in _certificates(form):
        for key, label in _PROGRAMS.items():
            res, ex = ce.results[key], ce.rechecks[key]
            row = {"status": res.status, "solver": res.solver}
            if ex is None:
                failures.append(f"{name}: {label}: no certificate (solver status {res.status})")
            else:
                row.update(residual=str(ex.residual), psd=ex.psd, min_pivot=ex.min_pivot, min_eig=ex.min_eig,
                           solver_coefficient_residual=ex.rounding_residual)
                if not ex.certified:
                    failures.append(f"{name}: {label}: exact re-check failed (residual {ex.residual}, psd {ex.psd})")
            rows[f"{name}: {label}"] = row
    r = exact({"programs_without_exact_certificate": float(len(failures))},
              "exact rational Gram certificates (SymPy residual 0, exact PSD)", details={"programs": rows})
    if failures:
        r.reason = "; ".join(failures[:4])
    return r


#: accepted solver output: smallest Gram eigenvalue and coefficient mismatch (the solver's
#: tolerances are 1e-10 for Clarabel, 1e-9 for SCS; 1e-7 leaves room for the conditioning of G)
SOLVER_TOL = 1e-7


def _solver_status(form, ctx) -> CheckResult:
    """The status of each SOS program, checked explicitly: optimal (a certificate), with the
    Gram matrix PSD and matching the coefficients within the solver's tolerance; infeasible
    (no certificate exists) is a failure reported with the solver's status."""
    failures, rows = [], {}
    for name, ce in _certificates(form):
        for key, label in _PROGRAMS.items():
            res = ce.results[key]
            rows[f"{name}: {label}"] = {"status": res.status, "solver": res.solver, "t": res.t, "min_eig": res.min_eig,
                                        "coefficient_residual": res.residual, "attempts": [list(a) for a in res.attempts]}
            if not res.feasible:
                failures.append(f"{name}: {label} is not SOS: solver status {res.status}")
            elif not (res.min_eig >= -SOLVER_TOL and res.residual <= SOLVER_TOL):
                failures.append(f"{name}: {label}: Gram min eigenvalue {res.min_eig:.2e}, residual {res.residual:.2e}")
    r = exact({"programs_not_certified": float(len(failures))},
              f"every SOS program optimal with λ_min(G) ≥ −{SOLVER_TOL:g} and coefficient residual ≤ {SOLVER_TOL:g}",
              details={"programs": rows})
    if failures:
        r.reason = "; ".join(failures[:4])
    return r


def _sample_points(ctx, n):
    rng = ctx.rng("points", n)
    M = ctx.size(200, 1000, 5000)
    d = rng.normal(size=(M, n))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.concatenate([d * 10 ** rng.uniform(-2, 1.5, size=(M, 1)), np.eye(n), -np.eye(n)])


def _sampled_inequalities(form, ctx) -> CheckResult:
    """What a certificate implies, tested pointwise without the solver: V − εp ≥ 0 and
    −∇V·f − εq ≥ 0 at random points (radii 10^-2 … 10^1.5, and the axes). Error: the largest
    negative value relative to the polynomial's rounding scale (sum of |terms|)."""
    errs, worst_pt = {}, {}
    for i, c in enumerate(form):
        name = c.name or f"candidate {i}"
        X = ctx.reference("points", lambda: _sample_points(ctx, len(c.vars)), len(c.vars))
        tg = tl.sos_targets(c, EPS_SOS) if sp.expand(c.vdot()) != 0 and sp.expand(c.V) != 0 else None
        for key, label in _PROGRAMS.items():
            poly = tg[key] if tg is not None else (c.V if key == "V" else -c.vdot())
            val, scale = nl.evaluate(poly, c.vars, X)
            with np.errstate(all="ignore"):
                rel = np.where(scale > 0, np.maximum(-val, 0.0) / scale, np.where(val < 0, np.inf, 0.0))
            if tg is None and key == "decay":
                rel = np.ones_like(rel)  # ∇V·f ≡ 0: no decay at all
            errs[f"{name}: {label}"] = float(np.max(rel))
            worst_pt[f"{name}: {label}"] = X[int(np.argmax(rel))].tolist()
    tol = 64 * 16 * EPS
    return compare(errs, tol, "float64 rounding of a polynomial with ≤ 16 terms (64·16·eps relative to the sum of "
                   "absolute terms): a nonnegative polynomial is never below it", seeds=[ctx.seed_for("points", 2)],
                   sizes={"points": ctx.size(200, 1000, 5000) + 4}, details={"most_negative_at": worst_pt},
                   resolution=tol,
                   resolution_units="negative value of V − εp or −∇V·f − εq at a sampled point, relative to the "
                   "polynomial's sum of absolute terms there, beyond which it is rejected (one-sided: the certified "
                   "polynomials are ≥ 0; a value below −tolerance·Σ|terms| at any sampled point fails)")


def _with_V(fn, what):
    return tuple(tl.Candidate(c.vars, c.f, sp.expand(fn(c)), f"{c.name} ({what})") for c in tl.sos_panel())


def _semidefinite_decay():
    """f = (−x, 0), V = x² + y²: V̇ = −2x² ≤ 0 only semidefinite; every point (0, y) is an equilibrium."""
    return tl.Candidate((tl.x, tl.y), (-tl.x, sp.Integer(0)), tl.x**2 + tl.y**2, "semidefinite decay")


def _certified(poly, vars) -> bool:
    res, gs = nl.solve_gram(poly, vars)
    return bool(res.feasible and tl.exact_recheck(poly, gs, res.G).certified)


def _cx_sos(ctx, eps, q_of, what: str, instance: dict) -> Counterexample:
    """Both programs certified (exact re-check) for the semidefinite-decay system with margin
    ``eps`` and bound ``q_of(c)``, yet (0, 0.1) is an equilibrium: the origin is not asymptotically stable."""
    c = _semidefinite_decay()
    p = tl.bound_polynomial(c.V, c.vars)
    both = _certified(sp.expand(c.V - eps * p), c.vars) and _certified(sp.expand(-c.vdot() - eps * q_of(c)), c.vars)
    f, _, _ = nl.lambdify_candidate(c)
    X = np.array([[0.0, 0.1]])
    speed = float(np.linalg.norm(f(X)[0]))
    return Counterexample({"f": "(−x, 0)", "V": "x² + y²", **instance}, "gas",
                          f"{what}: both SOS programs certified exactly ({both}), V̇ = {c.vdot()}; f(0, 0.1) = "
                          f"{f(X)[0].tolist()}: (0, 0.1) is an equilibrium, so 0 is not asymptotically stable",
                          violated=both and speed == 0.0, error=float(both and speed == 0.0), tolerance=0.0,
                          justification="exact: a nonzero equilibrium in every neighbourhood of 0 (the y-axis)")


def _cx_sos_eps(ctx):
    """Without ε > 0: at ε = 0 the programs only show V ≥ 0 and V̇ ≤ 0."""
    return _cx_sos(ctx, sp.Integer(0), lambda c: tl.bound_polynomial(-c.vdot(), c.vars), "ε = 0", {"eps": 0})


def _cx_sos_bound(ctx):
    """Without q covering every variable: q = x² (y missing) makes −V̇ − εq = (2 − ε)x² SOS."""
    return _cx_sos(ctx, EPS_SOS, lambda c: c.vars[0] ** 2, "q = x² (no y term), ε = 1/1000", {"eps": "1/1000", "q": "x²"})


def _cx_sos_certificates(ctx):
    """Without the certificates: x' = (x, y), V = x² + y², ε = 1/1000, p = q = x² + y² satisfy every
    other hypothesis, but −∇V·f − εq = −2.001(x² + y²) is negative at (1, 0), so it is not a sum of
    squares (its program has no certificate), and the trajectory from (0.1, 0) grows like e^t."""
    c = tl.Candidate((tl.x, tl.y), (tl.x, tl.y), tl.x**2 + tl.y**2, "unstable linear")
    tg = tl.sos_targets(c, EPS_SOS)
    at = float(tg["decay"].subs({tl.x: 1, tl.y: 0}))
    f, _, _ = nl.lambdify_candidate(c)
    X0 = np.array([[0.1, 0.0]])
    XT, _, ok = nl.integrate(f, X0, 1.0)
    grow = float(np.linalg.norm(XT[0]) / np.linalg.norm(X0[0]))
    return Counterexample({"f": "(x, y)", "V": "x² + y²", "eps": "1/1000", "p": str(tg["p"]), "q": str(tg["q"])}, "gas",
                          f"−∇V·f − εq = {tg['decay']} equals {at:g} at (1, 0) < 0, so it is not SOS (no certificate); "
                          f"‖x(1)‖/‖x(0)‖ = {grow:.4f} from (0.1, 0): the origin is unstable",
                          violated=bool(ok and at < 0 and grow > 1.0), error=grow - 1.0, tolerance=0.0,
                          justification="exact: x(t) = x(0)·e^t, so every nonzero trajectory leaves every ball",
                          details={"decay_at_1_0": at, "growth_T1": grow})


_y = tl.y

declare(
    id="lyap.sos_certificate",
    fixed_sizes="a sum-of-squares certificate belongs to one polynomial system: each candidate is certified exactly in rational arithmetic, there is no size to generalise",
    title="SOS certificates: V − εp and −∇V·f − εq sums of squares (cvxpy), re-checked exactly in SymPy",
    hypotheses=(
        setting("setting", r"f,\ V\ \text{polynomial},\ f(0)=0,\ z,w\ \text{monomials of degree}\ "
                r"\lceil d_{\min}/2\rceil..\lfloor d_{\max}/2\rfloor",
                "the programs are built from these polynomials and bases (the "
                "basis loses no certificate: the squares of an SOS decomposition use only these degrees)"),
        Hypothesis("eps_pos", r"\varepsilon>0", counterexample=_cx_sos_eps),
        Hypothesis("bounds_definite", r"p=\textstyle\sum_{i=1}^nx_i^{2k},\ q=\sum_{i=1}^nx_i^{2l},\ k,l\ge1",
                   "p, q positive definite (every variable)", counterexample=_cx_sos_bound),
        Hypothesis("sos_certificates", r"V-\varepsilon p=z^\top G_1z,\ -\nabla V\cdot f-\varepsilon q=w^\top G_2w,"
                   r"\ G_1,G_2\succeq0\ \text{(for the bounds and stability clauses)}",
                   "V − εp and −∇V·f − εq are sums of squares (Gram matrices G₁, G₂ ⪰ 0), for the bounds and stability "
                   "clauses (clause certified is that the panel candidates have such certificates)",
                   counterexample=_cx_sos_certificates),
        Hypothesis("V0_zero", r"V(0)=0",
                   necessary_note="with V ≥ εp and V̇ ≤ −εq, LaSalle's invariance principle gives "
                                  "global asymptotic stability even when V(0) > 0; it is kept because Khalil's Thm 4.2, "
                                  "which the gas clause cites, assumes it (every panel candidate has V(0) = 0)"),
    ),
    clauses=(
        Clause("certified", r"\text{the panel candidates (cubic, cancelling, damped) have such certificates at}"
               r"\ \varepsilon=10^{-3}\ \text{with rational}\ G_1,G_2", "derived_at",
               "the three panel candidates (cubic, cancelling, damped; n = 2, deg V = 2, deg f ≤ 3) at ε = 1/1000: "
               "rational Gram matrices with SymPy residual 0 and exact LDLᵀ PSD",
               ("exact_recheck", "solver_status", "derivation"),
               also=(("derived_at", "the cubic candidate at every 0 < ε < 1 (derivation: Gram families and their eigenvalues)"),
                     ("checked", "cvxpy (Clarabel, SCS fallback) status optimal, λ_min(G) ≥ −1e-7, coefficient residual ≤ 1e-7"))),
        Clause("bounds", r"V\ge\varepsilon p,\ \dot V\le-\varepsilon q\ \text{on}\ \mathbb R^n", "cited",
               "Parrilo (2000), SOS programming: zᵀGz = ‖Lz‖² ≥ 0 for G = LᵀL ⪰ 0", ("sampled_inequalities",),
               also=(("checked", "1000 random directions (200 at --quick) at radii 10^−2 … 10^1.5 and the axes, per candidate"),)),
        Clause("gas", r"0\ \text{globally asymptotically stable}", "cited",
               "Khalil, Nonlinear Systems (3rd ed., 2002) Thm 4.2: V ≥ εp is positive definite and radially unbounded, "
               "V̇ ≤ −εq negative definite"),
    ),
    source=SOURCE + "; Parrilo (2000), SOS programming; Peyrl & Parrilo (2008), exact certificates by rounding and projection",
    kind="theorem",
    form=tl.sos_panel(),
    derivation=tl.derive_sos_certificate,
    checks=(
        Check("exact_recheck", "symbolic", _exact_recheck,
              "rational Gram matrices: SymPy expansion residual exactly 0 and exact PSD"),
        Check("solver_status", "numeric", _solver_status,
              "each SOS program's cvxpy status checked explicitly (infeasible = no certificate)"),
        Check("sampled_inequalities", "numeric", _sampled_inequalities,
              "V − εp ≥ 0 and −∇V·f − εq ≥ 0 at sampled points"),
    ),
    mutants=(
        Mutant("f_sign_flip", "sign flip", "x' = −f(x): V increases along trajectories",
               tuple(c.flipped() for c in tl.sos_panel())),
        Mutant("V_indefinite", "wrong formula", "V(x, 0) − y² (indefinite)", _with_V(lambda c: c.V.subs(_y, 0) - _y**2, "indefinite")),
        Mutant("V_semidefinite", "dropped term", "V(x, 0): every term with y dropped (zero on the y-axis)",
               _with_V(lambda c: c.V.subs(_y, 0), "semidefinite")),
    ),
    notes="'Certified' covers exactly the panel candidates at ε = 1/1000 (and the cubic one for every 0 < ε < 1): an "
          "infeasible program does not show that a candidate fails, since a nonnegative polynomial need not be a sum of "
          "squares (Motzkin). "
          "ε = 1/1000; p and q are Σ x_i^{2k} at the lowest even degree of V and of −∇V·f (the cubic system's decay "
          "2x⁴ + 2y⁴ is certified against x⁴ + y⁴). Monomial bases span degrees ⌈d_min/2⌉..⌊d_max/2⌋ with basis "
          "elements whose diagonal entry is forced to 0 removed. The programs maximise t with G ⪰ tI, t ≥ 0, so a "
          "polynomial that is not SOS makes the solver report 'infeasible'.",
)
