"""Lyapunov functions numerically (claims ``lyap.conditions``, ``lyap.backward_construction``,
``lyap.sos_certificate``): sampled hypotheses, trajectories (SciPy ``solve_ivp``), randomly drawn
backward-constructed systems, and sum-of-squares programs in cvxpy.

Conventions: states are rows, ``X: (..., n)``; a system ``x' = f(x)`` is given as a
:class:`theory.lyapunov.Candidate` (SymPy) and lambdified to NumPy; float64 throughout; time is
dimensionless. Tolerances of the integrator are passed explicitly (``rtol``, ``atol``).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from theory import lyapunov as tl
from theory.validation import InputError, require

__all__ = [
    "lambdify_candidate", "sample_properties", "integrate", "distance_ratios", "initial_points",
    "BackwardSystems", "draw_backward_systems", "V_value", "V_grad", "A_field", "B_field", "psd_from",
    "skew_from", "construct_f", "energy_balance",
    "SOSResult", "Certificate", "SolverFailure", "solve_gram", "certify", "negative_witness", "evaluate",
]


# --------------------------------------------------------------------------------------------
# lyap.conditions


def lambdify_candidate(c: tl.Candidate):
    """NumPy callables of a candidate: ``f(X (M, n)) -> (M, n)``, ``V(X) -> (M,)``, ``vdot(X) -> (M,)``
    (``∇V·f``, from the unexpanded product so that it is exact where the terms are)."""
    vs = list(c.vars)
    fl = [sp.lambdify(vs, fi, "numpy") for fi in c.f]
    Vl = sp.lambdify(vs, c.V, "numpy")
    gl = [sp.lambdify(vs, sp.diff(c.V, v), "numpy") for v in vs]

    def bc(v, X):
        return np.broadcast_to(np.asarray(v, dtype=np.float64), X.shape[:-1])

    def f(X):
        X = np.asarray(X, dtype=np.float64)
        cols = [X[..., i] for i in range(X.shape[-1])]
        return np.stack([bc(fi(*cols), X) for fi in fl], axis=-1)

    def V(X):
        X = np.asarray(X, dtype=np.float64)
        return bc(Vl(*[X[..., i] for i in range(X.shape[-1])]), X).copy()

    def vdot(X):
        X = np.asarray(X, dtype=np.float64)
        cols = [X[..., i] for i in range(X.shape[-1])]
        return sum(bc(g(*cols), X) * bc(fi(*cols), X) for g, fi in zip(gl, fl))

    return f, V, vdot


def _directions(n: int, rng: np.random.Generator, m: int) -> np.ndarray:
    """``m`` random unit directions plus the ± coordinate axes: ``(m + 2n, n)``."""
    d = rng.normal(size=(m, n))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.concatenate([d, np.eye(n), -np.eye(n)])


def sample_properties(c: tl.Candidate, rng: np.random.Generator, n_dirs: int = 64) -> tuple[dict, dict]:
    """The hypotheses of :data:`theory.lyapunov.PROPERTIES` decided by sampling (float64):
    ``f(0) = 0`` and ``V(0) = 0`` exactly; ``V > 0``, ``V̇ < 0`` (and ``V̇ ≤ 0``) at every point of a cloud
    (radii 10^-3 … 10^3, 25 per decade-ish, ``n_dirs`` random directions and the axes);
    ``V̇(0) < 0``; radial unboundedness as growth of ``min_{‖x‖=R} V`` by at least a factor 100
    from ``R = 10`` to ``R = 1000`` (sampled evidence of polynomial growth, not a proof).
    Returns ``(properties, details)``."""
    n = len(c.vars)
    f, V, vdot = lambdify_candidate(c)
    dirs = _directions(n, rng, n_dirs)
    radii = np.logspace(-3, 3, 61)
    cloud = (radii[:, None, None] * dirs[None]).reshape(-1, n)
    zero = np.zeros((1, n))
    with np.errstate(all="ignore"):
        Vc, Dc = V(cloud), vdot(cloud)
        v10, v1000 = V(10.0 * dirs).min(), V(1000.0 * dirs).min()
        f0, V0, D0 = f(zero)[0], float(V(zero)[0]), float(vdot(zero)[0])
    props = {
        "f_zero_at_origin": bool(np.all(f0 == 0)),
        "V_zero_at_origin": V0 == 0.0,
        "V_positive_off_origin": bool(np.all(Vc > 0)),
        "Vdot_negative_off_origin": bool(np.all(Dc < 0)),
        "Vdot_nonpositive": bool(np.all(Dc <= 0)),
        "Vdot_negative_at_origin": D0 < 0,
        "radially_unbounded": bool(v10 > 0 and v1000 >= 100 * v10),
    }
    details = {"V_at_origin": V0, "Vdot_at_origin": D0, "min_V_cloud": float(Vc.min()), "max_Vdot_cloud": float(Dc.max()),
               "min_V_R10": float(v10), "min_V_R1000": float(v1000), "cloud_points": int(cloud.shape[0])}
    return props, details


def integrate(f, X0: np.ndarray, T: float, *, rtol: float = 1e-9, atol: float = 1e-12, method: str = "DOP853"):
    """Integrate ``x' = f(x)`` from every row of ``X0 (M, n)`` to time ``T`` as one ODE (the rows are
    independent): returns ``(X(T) (M, n), nfev, success)``."""
    X0 = np.asarray(X0, dtype=np.float64)
    M, n = X0.shape

    def rhs(_t, z):
        return f(z.reshape(M, n)).reshape(-1)

    from scipy.integrate import solve_ivp  # here, not at import: SciPy's integrate costs ≈ 1 CPU s (issue 46)

    sol = solve_ivp(rhs, (0.0, float(T)), X0.reshape(-1), method=method, rtol=rtol, atol=atol)
    return sol.y[:, -1].reshape(M, n), int(sol.nfev), bool(sol.success)


def distance_ratios(c: tl.Candidate, X0: np.ndarray, T: float, **kw) -> np.ndarray:
    """``‖x(T)‖/‖x(0)‖`` for trajectories of ``c``'s system from the rows of ``X0``."""
    f, _, _ = lambdify_candidate(c)
    XT, _, ok = integrate(f, X0, T, **kw)
    if not ok:
        return np.full(len(X0), np.inf)
    return np.linalg.norm(XT, axis=1) / np.linalg.norm(X0, axis=1)


def initial_points(name: str, rng: np.random.Generator, M: int, near: bool) -> np.ndarray:
    """Initial points for the panel system ``name`` (2-D): ``near``: radius 0.02–0.1, random angle;
    far: radius 1–5, random angle, except for ``khalil``, where the far points lie in the escape
    region ``x ∈ [2, 5]``, ``y = 2/(x − √2) + U[0.5, 3]`` (right of the hyperbola)."""
    if near:
        r, a = rng.uniform(0.02, 0.1, M), rng.uniform(0, 2 * math.pi, M)
        return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)
    if name == "khalil":
        x0 = rng.uniform(2.0, 5.0, M)
        return np.stack([x0, 2 / (x0 - math.sqrt(2)) + rng.uniform(0.5, 3.0, M)], axis=1)
    r, a = rng.uniform(1.0, 5.0, M), rng.uniform(0, 2 * math.pi, M)
    return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)


# --------------------------------------------------------------------------------------------
# lyap.backward_construction


@dataclass(frozen=True)
class BackwardSystems:
    """``K`` random systems of the backward construction in ``R^n`` (arrays over systems first).

    ``V(x) = xᵀQx + Σ_i c_i x_i⁴`` with ``Q`` SPD ``(K, n, n)`` and ``c > 0`` ``(K, n)``;
    ``A(x) = A0 + Σ_k x_k A1[k]`` and ``B(x) = B0 + Σ_k x_k B1[k]`` affine matrix fields
    (``A0, B0: (K, n, n)``; ``A1, B1: (K, n, n, n)``, index ``[system, k, row, col]``)."""

    Q: np.ndarray
    c: np.ndarray
    A0: np.ndarray
    A1: np.ndarray
    B0: np.ndarray
    B1: np.ndarray

    @property
    def K(self) -> int:
        return self.Q.shape[0]

    @property
    def n(self) -> int:
        return self.Q.shape[1]


def draw_backward_systems(rng: np.random.Generator, K: int, n: int) -> BackwardSystems:
    """Draw ``K`` systems (see :class:`BackwardSystems`): ``Q = LLᵀ/n + I/2`` with Gaussian ``L``,
    ``c ~ U[0.1, 1]``, ``A0, B0`` entries ``N(0, 0.5²)``, ``A1, B1`` entries ``N(0, 0.3²)``."""
    require(K >= 1 and n >= 1, "K and n must be positive")
    L = rng.normal(size=(K, n, n))
    Q = L @ np.swapaxes(L, -1, -2) / n + 0.5 * np.eye(n)
    return BackwardSystems(Q, rng.uniform(0.1, 1.0, (K, n)), 0.5 * rng.normal(size=(K, n, n)),
                           0.3 * rng.normal(size=(K, n, n, n)), 0.5 * rng.normal(size=(K, n, n)),
                           0.3 * rng.normal(size=(K, n, n, n)))


def V_value(s: BackwardSystems, X: np.ndarray) -> np.ndarray:
    """``V(x)`` for ``X (K, ..., n)`` → ``(K, ...)``."""
    Qx = np.einsum("kij,k...j->k...i", s.Q, X)
    c = s.c.reshape((s.K,) + (1,) * (X.ndim - 2) + (s.n,))
    return (X * Qx).sum(-1) + (c * X**4).sum(-1)


def V_grad(s: BackwardSystems, X: np.ndarray) -> np.ndarray:
    """``∇V(x) = 2Qx + 4c⊙x³`` for ``X (K, ..., n)`` → ``(K, ..., n)``."""
    c = s.c.reshape((s.K,) + (1,) * (X.ndim - 2) + (s.n,))
    return 2 * np.einsum("kij,k...j->k...i", s.Q, X) + 4 * c * X**3


def _field(M0: np.ndarray, M1: np.ndarray, X: np.ndarray) -> np.ndarray:
    extra = X.ndim - 2
    M0b = M0.reshape((M0.shape[0],) + (1,) * extra + M0.shape[1:])
    return M0b + np.einsum("k...a,kaij->k...ij", X, M1)


def A_field(s: BackwardSystems, X: np.ndarray) -> np.ndarray:
    """``A(x)`` for ``X (K, ..., n)`` → ``(K, ..., n, n)``."""
    return _field(s.A0, s.A1, X)


def B_field(s: BackwardSystems, X: np.ndarray) -> np.ndarray:
    """``B(x)`` for ``X (K, ..., n)`` → ``(K, ..., n, n)``."""
    return _field(s.B0, s.B1, X)


def psd_from(A: np.ndarray) -> np.ndarray:
    """``P = A Aᵀ`` (positive semidefinite), batched over leading axes: ``(..., n, n)``."""
    return A @ np.swapaxes(A, -1, -2)


def skew_from(B: np.ndarray) -> np.ndarray:
    """``S = B − Bᵀ`` (skew-symmetric), batched: ``(..., n, n)``."""
    return B - np.swapaxes(B, -1, -2)


def construct_f(g: np.ndarray, P: np.ndarray, S: np.ndarray) -> np.ndarray:
    """The backward construction ``f = −P g + S g`` for ``g = ∇V (..., n)``, ``P, S (..., n, n)``."""
    return np.einsum("...ij,...j->...i", S - P, g)


def energy_balance(s: BackwardSystems, X0: np.ndarray, form: dict, T: float, n_eval: int, *,
                   rtol: float = 1e-10, atol: float = 1e-12, blowup: float = 1e3) -> dict:
    """Integrate every system's ``x' = form["f"](∇V, form["P"](A(x)), form["S"](B(x)))`` from
    ``X0 (K, n)``, together with the reference dissipation ``q' = −‖A(x)ᵀ∇V(x)‖²`` (= ``−∇VᵀAAᵀ∇V``,
    computed as a sum of squares, not through the form), as one ODE (DOP853, ``rtol``, ``atol``).
    The integration stops early (a terminal event) when some ``V`` exceeds ``blowup`` times the
    largest initial ``V`` (a wrong construction can blow up in finite time). Returns
    ``{"t": (m,), "V": (K, m) V along the trajectory, "q": (K, m), "steps": accepted steps,
    "nfev", "stopped": time of the blow-up stop or None, "success"}`` on the ``m ≤ n_eval`` points
    of ``linspace(0, T, n_eval)`` reached."""
    K, n = s.K, s.n
    X0 = np.asarray(X0, dtype=np.float64)
    cap = blowup * float(V_value(s, X0[:, None, :]).max())

    def rhs(_t, z):
        X = z[: K * n].reshape(K, n)
        g = V_grad(s, X)
        A, B = A_field(s, X), B_field(s, X)
        dx = form["f"](g, form["P"](A), form["S"](B))
        dq = -(np.einsum("kji,kj->ki", A, g) ** 2).sum(-1)
        return np.concatenate([np.asarray(dx, dtype=np.float64).reshape(-1), dq])

    def blow(_t, z):
        return cap - float(V_value(s, z[: K * n].reshape(K, 1, n)).max())

    blow.terminal = True
    t_eval = np.linspace(0.0, T, n_eval)
    z0 = np.concatenate([X0.reshape(-1), np.zeros(K)])
    with np.errstate(all="ignore"):
        from scipy.integrate import solve_ivp  # not at import (issue 46)

        sol = solve_ivp(rhs, (0.0, T), z0, method="DOP853", rtol=rtol, atol=atol, t_eval=t_eval, events=blow)
    stopped = float(sol.t_events[0][0]) if sol.status == 1 and len(sol.t_events[0]) else None
    ts, ys = sol.t, sol.y
    if stopped is not None:  # keep the state where the blow-up stop happened
        ts, ys = np.append(ts, stopped), np.concatenate([ys, sol.y_events[0][0][:, None]], axis=1)
    m = ys.shape[1]
    Xs = ys[: K * n].reshape(K, n, m).transpose(0, 2, 1)  # (K, m, n)
    steps = int(round((sol.nfev - 1) / 12))  # DOP853: 12 evaluations per (accepted or rejected) step
    return {"t": ts, "V": V_value(s, Xs), "q": ys[K * n:], "steps": steps, "nfev": int(sol.nfev),
            "stopped": stopped, "success": sol.status >= 0 and m >= 2}


# --------------------------------------------------------------------------------------------
# lyap.sos_certificate


class SolverFailure(RuntimeError):
    """No solver returned a conclusive status (optimal or infeasible)."""


@dataclass(frozen=True)
class SOSResult:
    """One SOS program ``poly = z(x)ᵀ G z(x)``, ``G ⪰ t I``, ``t ≥ 0``, maximise ``t``.

    status     the cvxpy status of the accepted solve ("optimal", "optimal_inaccurate",
               "infeasible", "infeasible_inaccurate"), or "structurally infeasible" when a
               monomial of ``poly`` lies outside the Gram support (or ``poly`` is zero / has odd top
               degree) so that no solver is needed; never None
    solver     "CLARABEL", "SCS" or "" (structural)
    G          the Gram matrix ``(N, N)`` when the status is optimal*, else None (with the status
               saying why)
    t          the optimal ``t`` (the certified smallest eigenvalue margin), NaN when infeasible
    min_eig    smallest eigenvalue of ``G`` (NaN when infeasible)
    residual   largest absolute coefficient mismatch of ``zᵀGz`` against ``poly`` (NaN when infeasible)
    message    a sentence for reports
    attempts   every solve tried, ``(solver, status)``
    """

    status: str
    solver: str
    G: np.ndarray | None
    t: float
    min_eig: float
    residual: float
    message: str
    attempts: tuple = ()

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "optimal_inaccurate") and self.G is not None

    @property
    def infeasible(self) -> bool:
        return self.status in ("infeasible", "structurally infeasible")


_SOLVERS = (("CLARABEL", dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=400)),
            ("SCS", dict(eps_abs=1e-9, eps_rel=1e-9, max_iters=200000)))


def _build(gs: tl.GramStructure):
    import cvxpy as cp

    N = gs.size
    G = cp.Variable((N, N), symmetric=True, name="G")
    t = cp.Variable(name="t")
    cons = [G - t * np.eye(N) >> 0, t >= 0]
    for m, prs in gs.pairs.items():
        expr = sum((G[i, j] if i == j else 2 * G[i, j]) for i, j in prs)
        cons.append(expr == float(gs.coeffs[m]))
    return cp.Problem(cp.Maximize(t), cons), G, t


@contextlib.contextmanager
def _native_output_to_stderr():
    """A solver's native code may print to file descriptor 1 ("ERROR: could not determine problem
    status."), past Python's ``sys.stdout``: while it runs, descriptor 1 is the standard error, so
    standard output carries only what the command writes (``--json -`` stays one JSON document)."""
    import os
    import sys

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # no descriptor 1 (closed, or a captured stream): nothing to move
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve_gram(poly: sp.Expr, vars, *, solvers=_SOLVERS) -> tuple[SOSResult, tl.GramStructure]:
    """Solve the SOS program of ``poly`` (see :class:`SOSResult`): Clarabel at tight tolerances,
    SCS as the fallback when Clarabel fails or is not conclusive. Raises :class:`SolverFailure`
    when no solver returns optimal or infeasible (every attempt listed)."""
    import cvxpy as cp

    gs = tl.gram_structure(poly, vars)
    pz = sp.Poly(sp.expand(poly), *vars)
    if pz.is_zero:
        return SOSResult("structurally infeasible", "", None, math.nan, math.nan, math.nan,
                         "the polynomial is identically zero (no margin ε·Σx_i^{2k} below it)"), gs
    if gs.outside or gs.size == 0:
        bad = sp.Mul(*[v**e for v, e in zip(vars, gs.outside[0])]) if gs.outside else None
        return SOSResult("structurally infeasible", "", None, math.nan, math.nan, math.nan,
                         f"the monomial {bad} lies outside the Gram support (odd or too high degree): not a sum of squares"
                         if bad is not None else "no monomial basis: not a sum of squares"), gs
    prob, G, t = _build(gs)
    attempts = []
    for name, opts in solvers:
        try:
            # cvxpy's "Solution may be inaccurate … verbose=True" is advice to its caller: the exact re-check of the
            # certificate decides here, and the status is recorded in the attempts (hostile pass 45a F1)
            with _native_output_to_stderr(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
                prob.solve(solver=name, **opts)
        except (cp.SolverError, ValueError, ArithmeticError) as exc:
            attempts.append((name, f"error: {exc}"))
            continue
        status = prob.status
        attempts.append((name, status))
        if status in (cp.INFEASIBLE,):
            return SOSResult("infeasible", name, None, math.nan, math.nan, math.nan,
                             f"{name}: infeasible: no positive semidefinite Gram matrix exists", tuple(attempts)), gs
        if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and G.value is not None:
            Gv = np.asarray(G.value, dtype=np.float64)
            Gv = (Gv + Gv.T) / 2
            form = tl.gram_form(sp.Matrix(Gv), gs)
            diff = sp.Poly(sp.expand(form - poly), *vars)
            res = float(max((abs(float(c)) for c in diff.coeffs()), default=0.0))
            return SOSResult(status, name, Gv, float(t.value), float(np.linalg.eigvalsh(Gv)[0]), res,
                             f"{name}: {status}, t = {float(t.value):.3g}", tuple(attempts)), gs
    last = attempts[-1][1] if attempts else "not run"
    if any(s == cp.INFEASIBLE_INACCURATE for _, s in attempts):
        return SOSResult("infeasible_inaccurate", attempts[-1][0], None, math.nan, math.nan, math.nan,
                         f"inaccurate infeasibility only ({attempts})", tuple(attempts)), gs
    raise SolverFailure(f"no solver returned optimal or infeasible ({last}): {attempts}")


@dataclass(frozen=True)
class Certificate:
    """Both SOS programs of a candidate at margin ``eps``, with their exact re-checks.

    targets   :func:`theory.lyapunov.sos_targets` (``"V"``: V − εp, ``"decay"``: −∇V·f − εq, ``"p"``, ``"q"``)
    results   ``{"V": SOSResult, "decay": SOSResult}``; structures the Gram structures
    rechecks  ``{"V": ExactRecheck | None, "decay": …}`` (None where the program was infeasible)
    """

    candidate: tl.Candidate
    eps: sp.Rational
    targets: dict
    results: dict
    structures: dict
    rechecks: dict

    @property
    def certified(self) -> bool:
        return all(self.results[k].feasible and self.rechecks[k] is not None and self.rechecks[k].certified
                   for k in ("V", "decay"))

    def failed(self) -> list[str]:
        """The conditions without a certificate, in words."""
        label = {"V": "V − εp", "decay": "−∇V·f − εq"}
        out = []
        for k in ("V", "decay"):
            r, ex = self.results[k], self.rechecks[k]
            if not r.feasible:
                out.append(f"{label[k]} is not SOS (status {r.status}: {r.message})")
            elif ex is None or not ex.certified:
                out.append(f"{label[k]}: the exact re-check failed (psd {None if ex is None else ex.psd}, "
                           f"residual {None if ex is None else ex.residual})")
        return out


@lru_cache(maxsize=64)
def certify(c: tl.Candidate, eps) -> Certificate:
    """Both SOS programs of ``c`` at margin ``eps`` (exact rational), each re-checked exactly by
    :func:`theory.lyapunov.exact_recheck`. A candidate whose ``V`` or ``−∇V·f`` is identically
    zero gets "structurally infeasible" results. Cached (candidates are immutable)."""
    eps = sp.Rational(eps)
    vdot = c.vdot()
    targets = {"vdot": vdot}
    for key, poly in (("V", c.V), ("decay", -vdot)):
        try:
            bound = tl.bound_polynomial(poly, c.vars)
        except InputError:
            bound = sp.Integer(0)
        targets["p" if key == "V" else "q"] = bound
        targets[key] = sp.expand(poly - eps * bound)
    results, structures, rechecks = {}, {}, {}
    for key in ("V", "decay"):
        base = c.V if key == "V" else -vdot
        if sp.expand(base) == 0:
            res = SOSResult("structurally infeasible", "", None, math.nan, math.nan, math.nan,
                            ("V" if key == "V" else "∇V·f") + " is identically zero")
            gs = tl.gram_structure(sp.Integer(0), c.vars)
        else:
            res, gs = solve_gram(targets[key], c.vars)
        results[key], structures[key] = res, gs
        rechecks[key] = tl.exact_recheck(targets[key], gs, res.G) if res.feasible else None
    return Certificate(c, eps, targets, results, structures, rechecks)


def evaluate(poly: sp.Expr, vars, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``poly`` at the rows of ``X (M, n)`` and its rounding scale ``Σ_m |c_m x^m|`` (the sum of the
    absolute values of its terms): ``((M,), (M,))``."""
    p = sp.Poly(sp.expand(poly), *vars)
    X = np.asarray(X, dtype=np.float64)
    val = np.zeros(X.shape[0])
    scale = np.zeros(X.shape[0])
    for exps, coef in p.terms():
        term = float(coef) * np.prod(X ** np.asarray(exps, dtype=np.float64), axis=1)
        val += term
        scale += np.abs(term)
    return val, scale


def negative_witness(poly: sp.Expr, vars, rng: np.random.Generator, M: int = 4000):
    """A point where ``poly < 0`` (beyond its rounding, 64·terms·eps·scale), searched on random
    directions at radii 10^-2 … 10^2 and the axes; ``(point, value)`` or ``None``."""
    n = len(vars)
    dirs = _directions(n, rng, M // 20)
    pts = (np.logspace(-2, 2, 20)[:, None, None] * dirs[None]).reshape(-1, n)
    val, scale = evaluate(poly, vars, pts)
    nterms = len(sp.Poly(sp.expand(poly), *vars).terms()) or 1
    bad = val < -64 * nterms * np.finfo(np.float64).eps * scale
    if not bad.any():
        return None
    rel = np.where(bad, val / np.maximum(scale, 1e-300), np.inf)
    k = int(np.argmin(rel))
    return pts[k], float(val[k])
