"""The Att-SVM solved and certified (:mod:`numerics.att_svm`): the constraint matrices, the cvxpy problem (Frobenius
or nuclear norm), the KKT residuals and certified duality gap, the Frobenius polish and distance bound, SciPy's dual
as an independent solver, TLTO'23 local optimality, and the generated instances (made feasible, or locally optimal,
by a solve)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics.att_svm_data import (
    AttSVMError, AttSVMInstance, InfeasibleAttSVM, SolverFailure, _tokens_with_scores, _unit, token_scores,
    validate_instance,
)
from theory.validation import InputError


class _LazyModule:
    """A module imported at its first use: cvxpy (with SciPy's stats it pulls in) costs ≈ 1.5 CPU
    seconds to import, paid by every process that loads the claim registry, while only the Att-SVM
    solves use it (issue 46)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._name), attr)


cp = _LazyModule("cvxpy")

# --------------------------------------------------------------------------------------------
# Att-SVM via cvxpy


def constraint_matrix(X: np.ndarray, z: np.ndarray, opt=None, sets=None):
    """The constraints as rows of matrices ``A_k = (x_{i,a} − x_{i,b}) z_iᵀ`` (shape (K, d, d)).

    Returns ``(A_ineq, index_ineq, A_eq, index_eq)``: ``A_ineq[k] : W ≥ 1`` with
    ``index_ineq[k] = (i, t)`` (for ``opt``: the suppressed token t; for ``sets``: (i, t, τ) with
    t selected, τ not); equality rows ``A_eq[k] : W = 0`` inside each selected set."""
    n, T, d = X.shape
    if sets is None:  # rows in (sequence, token) order; each the outer product np.outer would form
        o = np.asarray(opt, dtype=np.int64)
        keep = np.arange(T)[None, :] != o[:, None]
        diff = X[np.arange(n), o][:, None, :] - X  # (n, T, d): x_{i,opt} − x_{i,t}
        A = (diff[..., :, None] * z[:, None, None, :])[keep]
        return A, np.argwhere(keep).astype(np.int64), np.zeros((0, d, d)), np.zeros((0, 3), dtype=np.int64)
    Ai, Ii, Ae, Ie = [], [], [], []
    for i in range(n):
        sel = np.flatnonzero(sets[i])
        for t in sel:
            for tau in np.flatnonzero(~np.asarray(sets[i], dtype=bool)):
                Ai.append(np.outer(X[i, t] - X[i, tau], z[i]))
                Ii.append((i, int(t), int(tau)))
        for t in sel[1:]:
            Ae.append(np.outer(X[i, sel[0]] - X[i, t], z[i]))
            Ie.append((i, int(sel[0]), int(t)))
    Ae_arr = np.array(Ae).reshape(-1, d, d)
    return np.array(Ai), np.array(Ii, dtype=np.int64), Ae_arr, np.array(Ie, dtype=np.int64).reshape(-1, 3)


@dataclass(frozen=True)
class AttSVMProblem:
    """A built (unsolved) Att-SVM: the cvxpy problem, its variable and constraint handles."""

    problem: cp.Problem
    W: cp.Variable
    ineq: cp.Constraint
    eq: cp.Constraint | None
    A: np.ndarray
    index: np.ndarray
    A_eq: np.ndarray
    index_eq: np.ndarray
    norm: str


def build_att_svm_problem(X, z, opt=None, *, norm: str = "fro", sets=None) -> AttSVMProblem:
    """Build (not solve) the Att-SVM. ``norm="fro"`` minimises ``½‖W‖_F²`` (a QP with the same
    minimiser as ``‖W‖_F``, so that stationarity reads ``W = Σ α_k A_k``); ``norm="nuc"``
    minimises ``‖W‖_*`` (an SDP). ``sets`` (n,T) bool gives the generalised SVM with equality
    constraints inside each selected set."""
    if norm not in ("fro", "nuc"):
        raise InputError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    if (opt is None) == (sets is None):
        raise InputError("give exactly one of opt (token indices) or sets (boolean selected sets)")
    X, z, opt = validate_instance(X, z, opt, sets)
    S = None if sets is None else np.asarray(sets, dtype=bool)
    A, idx, Ae, idx_e = constraint_matrix(X, z, opt, S)
    d = X.shape[2]
    W = cp.Variable((d, d), name="W")
    w = cp.vec(W, order="C")
    ineq = A.reshape(len(A), -1) @ w >= 1
    cons = [ineq]
    eq = None
    if len(Ae):
        eq = Ae.reshape(len(Ae), -1) @ w == 0
        cons.append(eq)
    obj = 0.5 * cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    return AttSVMProblem(cp.Problem(cp.Minimize(obj), cons), W, ineq, eq, A, idx, Ae, idx_e, norm)


@dataclass(frozen=True)
class AttSVMResult:
    """A solved, certified Att-SVM.

    W            (d,d) the solution (never ``None``: an uncertified solve raises instead)
    status       the cvxpy status of the accepted solve: "optimal", or "optimal_inaccurate" when
                 the certificate recomputed from the returned point met the tolerance anyway
    norm         "fro" or "nuc";  value: ‖W‖_F or ‖W‖_*
    duals        (K,) multipliers α_k ≥ 0 of the inequality rows; ``index`` (K,2|3) names them
    duals_eq     (K_eq,) multipliers of the equality rows (generalised SVM)
    margins      (K,) ``A_k : W`` (≥ 1 when feasible)
    residuals    KKT residuals of the returned (W, α, μ): primal_infeasibility, dual_infeasibility,
                 complementary_slackness, stationarity (relative), duality_gap (relative)
    support      indices k of the support (tight, α_k > 0) constraints
    solver       the solver that produced W ("CLARABEL" or "SCS")
    certificate  how the result was accepted (see :func:`certify`): ``tolerance``, ``max_residual``,
                 ``certified_gap`` (a rigorous bound on the relative suboptimality of ``value``, from
                 a feasible rescaling of W and of α), ``settings`` ("tight" or "relaxed") and
                 ``attempts``: every solve tried, in order, as ``(solver, settings, status,
                 max_residual or nan, accepted)``
    """

    W: np.ndarray
    status: str
    norm: str
    value: float
    duals: np.ndarray
    duals_eq: np.ndarray
    index: np.ndarray
    index_eq: np.ndarray
    margins: np.ndarray
    residuals: dict[str, float]
    support: np.ndarray
    solver: str
    A: np.ndarray = field(repr=False, default=None)
    A_eq: np.ndarray = field(repr=False, default=None)
    certificate: dict[str, Any] = field(default_factory=dict)

    @property
    def duality_gap(self) -> float:
        return self.residuals["duality_gap"]

    def max_residual(self) -> float:
        return max(self.residuals.values())

    def support_tokens(self) -> list[tuple[int, ...]]:
        """``(i, t)`` (or ``(i, t, τ)``) of the support constraints."""
        return [tuple(int(a) for a in self.index[k]) for k in self.support]


def kkt_residuals(W, A, duals, norm: str, A_eq=None, duals_eq=None) -> dict[str, float]:
    """KKT residuals of a candidate ``(W, α, μ)`` for the Att-SVM with rows ``A`` (≥ 1) and
    ``A_eq`` (= 0). Stationarity: Frobenius ``W = Σ α_k A_k + Σ μ_j E_j``; nuclear
    ``G = Σ α_k A_k + Σ μ_j E_j ∈ ∂‖W‖_*`` i.e. ``‖G‖_2 ≤ 1`` and ``⟨G, W⟩ = ‖W‖_*``. Gap: primal
    objective minus the dual objective ``Σα − ½‖G‖_F²`` (fro) or ``Σα`` (nuc), relative."""
    W = np.asarray(W, dtype=np.float64)
    A_eq = np.zeros((0,) + W.shape) if A_eq is None else A_eq
    duals_eq = np.zeros(len(A_eq)) if duals_eq is None else duals_eq
    m = np.einsum("kab,ab->k", A, W)
    G = np.einsum("k,kab->ab", duals, A) + (np.einsum("k,kab->ab", duals_eq, A_eq) if len(A_eq) else 0.0)
    scale = max(1.0, float(np.max(np.abs(duals), initial=0.0)))
    r = {
        "primal_infeasibility": float(max(0.0, np.max(1.0 - m, initial=0.0),
                                          np.max(np.abs(np.einsum("kab,ab->k", A_eq, W)), initial=0.0))),
        "dual_infeasibility": float(max(0.0, -np.min(duals, initial=0.0)) / scale),
        "complementary_slackness": float(np.max(np.abs(duals * (m - 1.0)), initial=0.0) / scale),
    }
    if norm == "fro":
        nW = float(np.linalg.norm(W))
        primal = 0.5 * nW ** 2
        dual = float(np.sum(duals) - 0.5 * np.sum(G * G))
        r["stationarity"] = float(np.linalg.norm(W - G) / max(nW, 1e-300))
    else:
        nuc = float(np.linalg.norm(W, "nuc"))
        primal = nuc
        dual = float(np.sum(duals))
        r["stationarity"] = float(max(np.linalg.norm(G, 2) - 1.0, 0.0) + abs(np.sum(G * W) - nuc) / max(nuc, 1e-300))
    r["duality_gap"] = float(abs(primal - dual) / max(abs(primal), 1e-300))
    return r


def certified_gap(W, A, duals, norm: str, A_eq=None, duals_eq=None) -> float:
    """A rigorous bound on the relative suboptimality of ``(W, α, μ)``, whatever the solver said.

    Primal: ``W / min(1, min_k A_k:W)`` satisfies every inequality row (requires the smallest margin
    > 0; the equality rows are not repaired, their violation is the KKT ``primal_infeasibility``).
    Dual: ``α⁺ = max(α, 0)`` is feasible for the Frobenius dual ``Σα − ½‖G‖_F²`` (any α ≥ 0 gives a
    lower bound), and ``(α⁺, μ)/max(1, ‖G‖_2)`` for the nuclear dual ``max Σα s.t. ‖G‖_2 ≤ 1``, with
    ``G = Σ α⁺_k A_k + Σ μ_j E_j``. Returns ``(P − D)/P`` ≥ 0 up to rounding (``inf`` when some
    margin is ≤ 0)."""
    W = np.asarray(W, dtype=np.float64)
    m = np.einsum("kab,ab->k", A, W)
    mmin = float(np.min(m, initial=1.0))
    if not mmin > 0:
        return math.inf
    shrink = min(1.0, mmin)
    a = np.maximum(np.asarray(duals, dtype=np.float64), 0.0)
    G = np.einsum("k,kab->ab", a, A)
    if A_eq is not None and len(A_eq):
        G = G + np.einsum("k,kab->ab", np.asarray(duals_eq, dtype=np.float64), A_eq)
    if norm == "fro":
        P = 0.5 * float(np.sum(W * W)) / shrink ** 2
        D = float(np.sum(a) - 0.5 * np.sum(G * G))
    else:
        P = float(np.linalg.norm(W, "nuc")) / shrink
        D = float(np.sum(a)) / max(1.0, float(np.linalg.norm(G, 2)))
    return float((P - D) / max(P, 1e-300))


def certify(W, A, duals, norm: str, A_eq=None, duals_eq=None, *, tol: float = 1e-6) -> dict[str, Any]:
    """The acceptance test for a solver's output: KKT residuals (:func:`kkt_residuals`) and the
    rigorous :func:`certified_gap`, all ≤ ``tol``. Returns ``{"residuals", "max_residual",
    "certified_gap", "tolerance", "passed"}``; NaN anywhere fails."""
    r = kkt_residuals(W, A, duals, norm, A_eq, duals_eq)
    gap = certified_gap(W, A, duals, norm, A_eq, duals_eq)
    worst = max(list(r.values()) + [abs(gap)])
    ok = bool(np.all(np.isfinite(list(r.values()) + [gap])) and worst <= tol)
    return {"residuals": r, "max_residual": float(max(r.values())), "certified_gap": gap, "tolerance": tol, "passed": ok}


SOLVER_OPTS = {
    "CLARABEL": dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10),
    "SCS": dict(eps_abs=1e-9, eps_rel=1e-9, max_iters=200000),
}
# Used only after the tight settings failed to produce a certified point. Clarabel: its default
# tolerances (1e-8) with more iterations; SCS: 1e-7 and more iterations. Any point accepted from
# them still has to pass the same certificate (CERT_TOL), so relaxing a solver never relaxes it.
SOLVER_OPTS_RELAXED = {
    "CLARABEL": dict(tol_gap_abs=1e-8, tol_gap_rel=1e-8, tol_feas=1e-8, max_iter=400),
    "SCS": dict(eps_abs=1e-7, eps_rel=1e-7, max_iters=500000),
}
CERT_TOL = 1e-6
_CHAIN = {None: (("CLARABEL", "tight"), ("SCS", "tight"), ("CLARABEL", "relaxed"), ("SCS", "relaxed"))}


#: a Farkas residual (relative to the largest constraint) at float64 rounding's level: 0 ∈ hull of the constraints
FARKAS_ROUNDING = 1e-13


def _infeasibility_certificate(A: np.ndarray, index: np.ndarray) -> tuple[list[tuple[int, ...]], float]:
    """Farkas: α ≥ 0, Σα = 1, Σ α_k A_k = 0 proves ``A_k:W ≥ 1`` infeasible; its support names
    the conflicting constraints. Returns (named constraints, ‖Σ α_k A_k‖_F at the minimiser relative to the
    largest ‖A_k‖_F): 0 up to rounding when the instance is infeasible, ``1 / (‖W^mm‖_F·max‖A_k‖_F)`` when it is
    feasible (the hard-margin SVM's nearest point of the constraints' hull). Solved by non-negative least squares
    (an active-set method: accurate to rounding, where a conic solver's point left ~1e-5), on the constraints scaled
    to unit size (data at scale 1e-6 made every residual tiny, and a feasible instance was called infeasible:
    hostile pass 21b F7)."""
    import scipy.optimize

    K = len(A)
    M = A.reshape(K, -1).astype(np.float64)
    size = float(np.max(np.linalg.norm(M, axis=1))) if K else 0.0
    if not size > 0 or not math.isfinite(size):
        return [], math.inf
    M = M / size
    w = 1.0  # the weight of Σα = 1 (an infeasible instance's residual is 0 at any weight; 1 keeps the system best conditioned: 2e-16 where 1e4 left 6e-13)
    B = np.vstack([M.T, w * np.ones((1, K))])
    rhs = np.concatenate([np.zeros(M.shape[1]), [w]])
    try:
        val, _ = scipy.optimize.nnls(B, rhs, maxiter=50 * K + 100)
    except RuntimeError:  # pragma: no cover - no convergence: nothing certified
        return [], math.inf
    if not val.sum() > 0:
        return [], math.inf
    val = val / val.sum()
    sup = np.flatnonzero(val > 1e-6)
    resid = float(np.linalg.norm(val @ M))
    return [tuple(int(x) for x in index[k]) for k in sup[:8]], resid


def solve_att_svm(X, z, opt=None, norm: str = "fro", solver: str | None = None, *, sets=None,
                  support_rtol: float = 1e-6, cert_tol: float = CERT_TOL) -> AttSVMResult:
    """Solve and certify the Att-SVM (``opt``: token per sequence) or its generalised form
    (``sets``: (n,T) boolean selected sets, equality constraints inside each set).

    ``solver=None`` tries, in order, Clarabel at tight tolerances (1e-10), SCS at tight tolerances
    (1e-9), then both at relaxed settings, and returns the first point whose certificate
    (:func:`certify`: KKT residuals and the rigorous gap, recomputed from the returned point, all
    ≤ ``cert_tol``) passes; a solver's "optimal_inaccurate" is accepted only on that condition
    (Clarabel reports it on most nuclear-norm SDPs with n(T−1) close to d², whose points
    nevertheless certify to ~1e-8). ``solver="CLARABEL"``/``"SCS"`` uses that solver only (tight,
    then relaxed): an independent second solve. The result names the solver, the status and the
    certificate. Raises :class:`TiedTokens` / :class:`InfeasibleAttSVM` (both
    :class:`~theory.validation.InputError`) naming the sequence and token, and
    :class:`SolverFailure` (listing every attempt) when no attempt certifies. Never returns ``None``.
    """
    built = build_att_svm_problem(X, z, opt, norm=norm, sets=sets)
    return solve_problem(built, solver=solver, support_rtol=support_rtol, cert_tol=cert_tol)


def _extract(built: AttSVMProblem):
    W = np.asarray(built.W.value, dtype=np.float64)
    duals = np.asarray(built.ineq.dual_value, dtype=np.float64).reshape(-1)
    # cvxpy's equality multipliers enter its Lagrangian with the opposite sign to ours (W = Σ α A + Σ μ E)
    duals_eq = (-np.asarray(built.eq.dual_value, dtype=np.float64).reshape(-1) if built.eq is not None else np.zeros(0))
    return W, duals, duals_eq


def solve_problem(built: AttSVMProblem, solver: str | None = None, *, support_rtol: float = 1e-6,
                  cert_tol: float = CERT_TOL) -> AttSVMResult:
    """Solve a built Att-SVM through the solver chain of :func:`solve_att_svm`; return the first
    certified point, raise on infeasibility or when no attempt certifies."""
    chain = _CHAIN[None] if solver is None else ((solver.upper(), "tight"), (solver.upper(), "relaxed"))
    attempts = []
    for name, settings in chain:
        opts = (SOLVER_OPTS if settings == "tight" else SOLVER_OPTS_RELAXED).get(name, {})
        try:
            with warnings.catch_warnings():  # "Solution may be inaccurate": the certificate below decides
                warnings.simplefilter("ignore", UserWarning)
                built.problem.solve(solver=name, **opts)
        except cp.SolverError as exc:
            attempts.append((name, settings, f"SolverError: {exc}", math.nan, False))
            continue
        except (ValueError, ArithmeticError) as exc:  # e.g. SCS's "ScsWork allocation error!" on data near 1e300
            attempts.append((name, settings, f"{type(exc).__name__}: {exc}", math.nan, False))
            continue
        status = built.problem.status
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            who, resid = _infeasibility_certificate(built.A, built.index)
            # the solver's word alone is not evidence: the Farkas point must confirm it, to rounding. Its residual is
            # 1/(‖W^mm‖·max‖A_k‖) for a feasible instance: 1e-10 is a separable one whose separating W has norm 1e10
            # (hostile pass 22b F5), so only a residual at rounding's level confirms; between, nothing is decided
            if resid <= FARKAS_ROUNDING:
                named = ", ".join(f"sequence {c[0]} token {c[1:] if len(c) > 2 else c[1]}" for c in who)
                raise InfeasibleAttSVM(f"Att-SVM infeasible ({status}, {name}): no W separates the optimal tokens; "
                                       f"conflicting constraints: {named}")
            attempts.append((name, settings, f"{status} (Farkas residual {resid:.1e}: not confirmed)", math.nan, False))
            continue
        if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):  # cannot happen for a norm objective
            raise AttSVMError(f"Att-SVM reported unbounded ({status}); the instance is malformed")
        if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or built.W.value is None or built.ineq.dual_value is None:
            attempts.append((name, settings, str(status), math.nan, False))
            continue
        W, duals, duals_eq = _extract(built)
        cert = certify(W, built.A, duals, built.norm, built.A_eq, duals_eq, tol=cert_tol)
        attempts.append((name, settings, str(status), _cert_error(cert), cert["passed"]))
        if not cert["passed"]:
            continue
        if built.norm == "fro" and (built.A_eq is None or not len(built.A_eq)):
            W, duals, cert = _polished_fro(built.A, W, duals, cert, support_rtol, cert_tol)
        margins = np.einsum("kab,ab->k", built.A, W)
        support = np.flatnonzero(duals > support_rtol * max(duals.max(initial=0.0), 1e-300))
        value = float(np.linalg.norm(W) if built.norm == "fro" else np.linalg.norm(W, "nuc"))
        cert = {**cert, "settings": settings, "attempts": tuple(attempts)}
        return AttSVMResult(W, str(status), built.norm, value, duals, duals_eq, built.index, built.index_eq, margins,
                            cert["residuals"], support, name, built.A, built.A_eq, cert)
    tried = "; ".join(f"{a[0]} ({a[1]}): {a[2]}, max residual {a[3]:.1e}" for a in attempts)
    raise SolverFailure(f"no solver produced a certified Att-SVM point (tolerance {cert_tol:g}): {tried}")


def _polished_fro(A: np.ndarray, W: np.ndarray, duals: np.ndarray, cert: dict[str, Any], support_rtol: float,
                  cert_tol: float) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The certified solver point of a Frobenius Att-SVM (no equality rows) polished onto its active
    set (:func:`polish_fro`: the KKT equalities on the support solved in float64), so that the
    returned ``W`` is the exact optimum up to float64 rounding of that solve (``cond(G_S)·eps``)
    instead of the solver's stopping tolerance. Kept only when the polished point is dual feasible
    (``α ≥ 0``, exact zeros off the support) and certifies at least as well as the solver's point;
    else the solver's point is returned unchanged. ``cert["polished"]`` says which, and
    ``cert["support_gram_condition"]`` holds ``cond(G_S)`` of the support's Gram matrix."""
    try:
        with np.errstate(all="ignore"):
            Wp, ap = polish_fro(A, duals, support_rtol=support_rtol)
    except (np.linalg.LinAlgError, ValueError):  # e.g. an SVD that does not converge on extreme data
        return W, duals, {**cert, "polished": False}
    S = np.flatnonzero(ap > 0)
    if S.size == 0 or np.array_equal(ap, duals):
        return W, duals, {**cert, "polished": False}
    with np.errstate(all="ignore"):
        cp_ = certify(Wp, A, ap, "fro", tol=cert_tol)
    if not (cp_["passed"] and _cert_error(cp_) <= _cert_error(cert)):
        return W, duals, {**cert, "polished": False}
    M = A.reshape(len(A), -1)[S]
    cond = float(np.linalg.cond(M @ M.T))
    return Wp, ap, {**cp_, "polished": True, "support_gram_condition": cond, "solver_point_certificate": cert}


def _cert_error(cert: dict[str, Any]) -> float:
    """The quantity a certificate compares with its tolerance: max(KKT residuals, |certified gap|)."""
    return float(max(cert["max_residual"], abs(cert["certified_gap"])))


def fro_distance_bound(A: np.ndarray, W: np.ndarray, duals: np.ndarray) -> float:
    """A rigorous bound on ``‖W − W*‖_F / ‖W*‖_F`` for the Frobenius Att-SVM
    ``min ½‖W‖² s.t. ⟨A_k, W⟩ ≥ 1`` from ``W``'s own certificate (KKT residual and duality gap):

    * ``W' = W/(1 − v)``, ``v = max(0, 1 − min_k ⟨A_k, W⟩)`` is feasible, ``‖W' − W‖ = ‖W‖v/(1 − v)``;
    * any ``α ≥ 0`` gives the dual value ``D = Σα_k − ½‖Σα_k A_k‖² ≤ ½‖W*‖²`` (Lagrangian);
    * ``½‖·‖²`` is 1-strongly convex and ``W*`` minimises it over the convex feasible set, so
      ``½‖W'‖² − ½‖W*‖² ≥ ½‖W' − W*‖²``, i.e. ``‖W' − W*‖ ≤ √(2(½‖W'‖² − D))``;
    * ``‖W*‖ ≥ √(2D)``.

    Hence ``‖W − W*‖/‖W*‖ ≤ (‖W‖v/(1−v) + √(2 max(0, ½‖W'‖² − D))) / √(2D)`` (inf if ``D ≤ 0``
    or ``v ≥ 1``). A relative duality gap δ gives a distance ~√δ (the square root is the price of
    a first-order certificate).

    >>> A = np.array([[[1.0, 0.0], [0.0, 0.0]]]); round(fro_distance_bound(A, A[0], np.array([1.0])), 12)
    0.0
    """
    A, W, al = np.asarray(A, float), np.asarray(W, float), np.maximum(np.asarray(duals, float), 0.0)
    m = np.einsum("kab,ab->k", A, W)
    v = max(0.0, 1.0 - float(m.min()))
    G = np.einsum("k,kab->ab", al, A)
    D = float(al.sum() - 0.5 * np.sum(G * G))
    if v >= 1.0 or D <= 0.0:
        return math.inf
    nW = float(np.linalg.norm(W))
    Pp = 0.5 * (nW / (1.0 - v)) ** 2
    return (nW * v / (1.0 - v) + math.sqrt(2.0 * max(0.0, Pp - D))) / math.sqrt(2.0 * D)


def polish_fro(A: np.ndarray, duals: np.ndarray, *, support_rtol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """The Frobenius Att-SVM optimum from an approximate dual: on the support
    ``S = {α_k > support_rtol·max α}`` solve the KKT equalities ``⟨A_j, Σ_{k∈S} α_k A_k⟩ = 1`` (j ∈ S)
    exactly (least squares on the Gram matrix), ``W = Σ α_k A_k``. Stationarity and complementary
    slackness then hold by construction; if also ``α ≥ 0`` and every margin ``≥ 1`` (up to rounding)
    it is the optimum, and :func:`fro_distance_bound` certifies it to ~√eps. Returns ``(W, α)``
    (the input dual unchanged when the support solve is not dual feasible)."""
    A, al = np.asarray(A, float), np.asarray(duals, float)
    M = A.reshape(len(A), -1)
    S = np.flatnonzero(al > support_rtol * max(float(al.max()), 1e-300))
    aS = np.linalg.lstsq(M[S] @ M[S].T, np.ones(S.size), rcond=None)[0]
    if aS.size == 0 or aS.min() < 0:
        return (M.T @ al).reshape(A.shape[1:]), al
    a = np.zeros_like(al)
    a[S] = aS
    return (M.T @ a).reshape(A.shape[1:]), a


def solve_att_svm_dual_scipy(X, z, opt) -> tuple[np.ndarray, np.ndarray]:
    """An independent Frobenius solve: the dual ``max_{α≥0} Σα − ½‖Σ α_k A_k‖_F²`` by SciPy's
    L-BFGS-B, then ``W = Σ α_k A_k``. Returns ``(W, α)``."""
    X, z, opt = validate_instance(X, z, opt)
    A, _, _, _ = constraint_matrix(X, z, opt)
    M = A.reshape(len(A), -1)
    G = M @ M.T

    def fun(a):
        Ga = G @ a
        return 0.5 * a @ Ga - a.sum(), Ga - 1.0

    import scipy.optimize

    out = scipy.optimize.minimize(fun, np.zeros(len(A)), jac=True, method="L-BFGS-B",
                                  bounds=[(0, None)] * len(A), options=dict(ftol=1e-15, gtol=1e-12, maxiter=20000))
    a = out.x
    return (M.T @ a).reshape(X.shape[2], X.shape[2]), a


def is_locally_optimal(inst: AttSVMInstance, ids: np.ndarray, *, rel: float = 1e-6, slack: float = 0.0) -> bool:
    """TLTO'23 local optimality of ``ids``: its Att-SVM is feasible and every support token
    (positive dual) of sequence ``i`` has a score below ``γ_{i,ids_i}``. With ``slack > 0``,
    additionally every token scoring at least ``γ_{i,ids_i}`` has margin ≥ ``1 + slack``."""
    res = solve_att_svm(inst.X, inst.z, ids)
    g = inst.gamma
    for (i, t), a, m in zip(res.index, res.duals, res.margins):
        if g[i, t] >= g[i, ids[i]] and (a > rel * res.duals.max() or m < 1 + slack):
            return False
    return True


def make_instance(n: int, T: int, d: int, *, seed: int = 0, setting: str = "generic", gap: float = 0.1,
                  top: tuple[float, float] = (0.5, 0.9), local_slack: float = 0.0,
                  queries: str = "random", tokens: str = "random") -> AttSVMInstance:
    """A random instance with a unique optimal token per sequence (score gap ≥ ``gap``).

    setting
      "generic"  non-optimal scores uniform in ``[−0.9, γ_opt − gap]``.
      "global"   every non-optimal token of a sequence has the same score ``γ_opt − gap``
                 (the global-convergence regime of Vasudeva, Deora, Thrampoulidis 2024).
      "local"    additionally a second token ``local_i`` (score ``γ_opt − gap``) that is locally
                 optimal (its Att-SVM is feasible and every support token has a lower score),
                 built by putting ``x_opt`` antipodal to ``x_local`` orthogonally to ``v``.
                 ``local_slack > 0`` further requires every token scoring above ``local_i`` to
                 have margin ≥ ``1 + local_slack`` under the local Att-SVM ``W^mm_local``: the
                 cone around ``W^mm_local`` from which GD stays local (TLTO'23 Thm 3) has a
                 width that shrinks to 0 as that margin approaches 1 (a near-tight higher-score
                 token pulls GD out of the set), so a slack keeps the instance in the regime
                 where a modest initialisation is inside the cone.
    queries
      "random"      ``z_i`` independent uniform unit vectors.
      "orthogonal"  ``z_i`` orthonormal (needs n ≤ d): ``W z_i`` are then independent free vectors,
                    the loss separates over sequences, and in the "global" setting each
                    sequence's term is a decreasing function of its own ``s_opt`` alone, so no
                    other token set can attract GD. With random queries and n = 5, d = 8 about 1
                    instance in 60 has a region where NGD lingers in a non-opt set for thousands
                    of iterations (the cross-talk ``z_iᵀz_j`` couples the sequences).
    tokens
      "random"      the component of each token orthogonal to ``v`` is a random direction.
      "orthogonal"  those components are orthonormal across ALL tokens of all sequences (needs
                    n·T ≤ d − 1; "generic"/"global" only): ``⟨x_it, x_jτ⟩ = (vᵀx_it)(vᵀx_jτ)``
                    exactly, so with small scores (``top``) the tokens are nearly orthogonal,
                    the data assumption of Vasudeva, Deora, Thrampoulidis (2024). The random
                    draws are the same as for "random" (the components are orthonormalised).
    Tokens are unit rows; ``vᵀx`` is set exactly, the rest of each token is a random direction.
    Each draw is checked with :func:`validate_instance` (shapes, ties) and certified feasible by
    solving its Att-SVM; infeasible draws are redrawn (up to 200 times, then :class:`InputError`).
    """
    if setting not in ("generic", "global", "local"):
        raise InputError(f"unknown setting {setting!r} (generic, global, local)")
    if not (n >= 1 and T >= 2 and d >= 2):
        raise InputError(f"need n ≥ 1, T ≥ 2, d ≥ 2, got n={n}, T={T}, d={d}")
    if not (0 < gap < 1):
        raise InputError(f"gap must lie in (0, 1), got {gap}")
    if queries not in ("random", "orthogonal") or (queries == "orthogonal" and n > d):
        raise InputError(f"queries must be 'random' or 'orthogonal' (the latter needs n ≤ d), got {queries!r} with n={n}, d={d}")
    if tokens not in ("random", "orthogonal") or (tokens == "orthogonal" and (n * T > d - 1 or setting == "local")):
        raise InputError(f"tokens must be 'random' or 'orthogonal' (the latter needs n·T ≤ d − 1 and setting generic or "
                         f"global), got {tokens!r} with n={n}, T={T}, d={d}, setting={setting!r}")
    rng = np.random.default_rng(seed)
    for _attempt in range(200):
        v = _unit(rng.normal(size=d))
        y = rng.choice([-1.0, 1.0], size=n)
        z = _unit(rng.normal(size=(n, d)))
        if queries == "orthogonal":
            z = np.linalg.qr(z.T)[0].T.copy()
        g_opt = rng.uniform(*top, size=n)
        opt = rng.integers(0, T, size=n)
        if setting == "generic":
            g = -0.9 + rng.uniform(size=(n, T)) * (g_opt[:, None] - gap + 0.9)
        else:
            g = np.repeat((g_opt - gap)[:, None], T, axis=1)
        g[np.arange(n), opt] = g_opt
        u = rng.normal(size=(n, T, d))
        local = None
        if setting == "local":
            local = (opt + 1 + rng.integers(0, T - 1, size=n)) % T
            g = np.repeat((g_opt - 2 * gap)[:, None], T, axis=1)
            g[np.arange(n), opt] = g_opt
            g[np.arange(n), local] = g_opt - gap
            u[np.arange(n), opt] = -u[np.arange(n), local]
        if tokens == "orthogonal":  # orthonormal components ⟂ v across every (i, t)
            U = u.reshape(n * T, d) - np.outer(u.reshape(n * T, d) @ v, v)
            u = np.linalg.qr(U.T)[0].T.reshape(n, T, d)
        X = _tokens_with_scores(y[:, None] * g, v, u)
        inst = AttSVMInstance(X, z, y, v, opt, token_scores(X, y, v), setting, local)
        try:
            validate_instance(inst.X, inst.z, inst.opt)
            solve_att_svm(inst.X, inst.z, inst.opt)  # raises InfeasibleAttSVM when no W separates
            if setting == "local" and not is_locally_optimal(inst, inst.local, slack=local_slack):
                continue
        except AttSVMError:
            continue
        return inst
    raise InputError(f"could not draw a feasible {setting!r} instance with n={n}, T={T}, d={d} (try a larger d)")
