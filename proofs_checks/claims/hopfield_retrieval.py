"""Group D, continued: one-step retrieval in modern Hopfield networks and their exponential capacity
(lecture notes 002, memorisation part). Binds theory/hopfield.py and numerics/hopfield.py to checks,
tolerances and mutants. Threshold checks report z-scores as in :mod:`proofs_checks.claims.hopfield`."""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp
import torch

from numerics import hopfield as nh
from numerics.torch_utils import resolve_device
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, smallest, REL_UNITS, confirm_resolution
from theory import hopfield as th
from proofs_checks.claims._hopfield_common import _half_crossing


# --------------------------------------------------------------------------------------------
# hop.one_step_retrieval
# form: (P (B,N,d), xi (B,d), i, beta) -> bound (B,)


def _np_fixed_point(P, i, beta, max_iter=100_000, tol=1e-15):
    """x_i* in NumPy: the update iterated from x_i until every step is ≤ tol·max(1, M); raises if
    that is not reached (a fixed number of steps is not known to give the fixed point: 200 steps
    left a default-size instance 3e4 ulp-relative away in the bound)."""
    x = P[:, i, :].copy()
    thr = tol * largest(1.0, float(np.linalg.norm(P, axis=-1).max()))
    for _ in range(max_iter):
        z = beta * np.einsum("bd,bnd->bn", x, P)
        z -= z.max(-1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(-1, keepdims=True)
        nxt = np.einsum("bn,bnd->bd", p, P)
        step = float(np.max(np.linalg.norm(nxt - x, axis=-1)))
        x = nxt
        if step <= thr:
            return x
    raise RuntimeError(f"fixed-point iteration not converged after {max_iter} steps (last step {step:.2e})")


def _retrieval_instances(rng, B):
    """Random well-separated instances (patterns of norm ≤ M in random directions, query near x_0)
    plus an adversarial family: x_0 = M u, the other N−1 patterns antipodal (−M u, tiny jitter),
    queries displaced from x_0 towards −u; there ‖f(ξ) − x_0‖ ≈ 2M(N−1)e^{−β(Δ−2εM)}, nearly the bound."""
    out = []
    for _ in range(B):
        N, d = int(rng.integers(2, 12)), int(rng.integers(3, 10))
        P = rng.normal(size=(N, d))
        P *= (rng.uniform(2.0, 4.0) / np.linalg.norm(P, axis=1, keepdims=True)) * rng.uniform(0.8, 1.0, size=(N, 1))
        xi = P[0] + rng.normal(size=d) * rng.uniform(0.0, 0.1)
        out.append((P, xi, float(rng.uniform(0.5, 4.0))))
    for N in (3, 6, 12):
        for beta in (0.2, 0.5, 1.0):
            d = 4
            u = np.eye(d)[0]
            M = 1.5
            P = np.stack([M * u] + [-M * u + 1e-3 * rng.normal(size=d) for _ in range(N - 1)])
            P *= np.minimum(1.0, M / np.linalg.norm(P, axis=1, keepdims=True))
            for shift in (0.0, 0.05):
                out.append((P, P[0] - shift * u, beta))
    return out


def _unseparated_instances(rng):
    """Boundary instances of the bound (no separation needed): x_0 duplicated (Δ_0 = 0), x_1 within
    0.05 of x_0 (Δ_0 small or negative), and queries far from x_0 (ε up to 3M)."""
    out = []
    for beta in (0.3, 1.0, 3.0):
        d, N = 4, 5
        P = rng.normal(size=(N, d))
        P /= np.linalg.norm(P, axis=1, keepdims=True) / 1.5
        dup, near = P.copy(), P.copy()
        dup[1] = dup[0]
        near[1] = near[0] + 0.05 * rng.normal(size=d)
        near[1] *= 1.5 / np.linalg.norm(near[1])
        out += [(dup, dup[0].copy(), beta), (near, near[0].copy(), beta),
                (P, P[0] + 4.5 * rng.normal(size=d) / math.sqrt(d), beta)]
    return out


def _rel_resolution(got: np.ndarray, ref: np.ndarray, tol: float) -> tuple[float, dict]:
    """Resolution of ``max_i |got_i − ref_i|/|ref_i| ≤ tol`` against ``ref·(1 + δ)``: the relative error
    is then ≥ ``(|δ| − e)/(1 + δ)``, rejected for ``|δ| > (tol + e)/(1 − tol − e)``; confirmed at ±2ε, ±ε/2."""
    def err(delta):
        r = ref * (1 + delta)
        return float(np.max(np.abs(got - r) / np.abs(r))) if got.shape == r.shape and r.size else math.inf

    e = err(0.0)
    eps = (tol + e) / (1 - tol - e) if tol + e < 0.5 else math.nan
    return eps, confirm_resolution(err, tol, eps)


def _retrieval_symbolic(form, ctx) -> CheckResult:
    """The form's bound equals SymPy's bound expression evaluated at independently computed
    N, β, Δ_i, ε = max{‖ξ−x_i‖, ‖x_i*−x_i‖} and M (relative error)."""
    der = th.derive_retrieval_bound()
    f = sp.lambdify(der.facts["args"], der.result, "numpy")
    rng = ctx.rng()
    rel, refs, gots = 0.0, [], []
    for P, xi, beta in _retrieval_instances(rng, 24):
        Pb = P[None]
        xs = _np_fixed_point(Pb, 0, beta)[0]
        dots = P @ P[0]
        Delta = dots[0] - dots[1:].max()
        eps = largest(np.linalg.norm(xi - P[0]), np.linalg.norm(xs - P[0]))
        M = np.linalg.norm(P, axis=1).max()
        ref = f(len(P), beta, Delta, eps, M)
        got = float(form(torch.from_numpy(Pb), torch.from_numpy(xi[None]), 0, beta)[0])
        rel = largest(rel, abs(got - ref) / abs(ref))
        refs.append(float(ref))
        gots.append(got)
    floor = 150 * EPS + 32 * 1e-13
    eps, conf = _rel_resolution(np.array(gots), np.array(refs), 10 * floor)
    return compare(rel, 10 * floor, "10 × the derived floor: relative float64 rounding of exp(a), |a| ≤ β(Δ + 2εM) ≲ "
                   "150 (150·eps ≈ 3e-14), plus the two fixed points x_i* (iterations stopped at steps 1e-15 vs "
                   "1e-14, distance ≲ 1e-13) moved through ∂log(bound)/∂ε = 2βM ≤ 32 (3.2e-12; measured 2.4e-12); "
                   f"= {10 * floor:.2g}, within the exact-check target 1e-9",
                   seeds=[ctx.seed_for()], sizes={"instances": 24 + 18},
                   details={"max_relative_error": rel, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (SymPy's bound; per-instance relative error)")


def _retrieval_numeric(form, ctx) -> CheckResult:
    """‖f(ξ) − x_i‖ ≤ bound on every instance: random separated ones, the near-tight antipodal family,
    and the boundaries where the bound is vacuous but must still hold (a duplicate pattern, Δ_i = 0; a
    near pattern; a query far from x_i)."""
    rng = ctx.rng()
    inst = _retrieval_instances(rng, ctx.size(64, 256, 1024)) + _unseparated_instances(rng)
    worst_ratio, rows = 0.0, []
    for P, xi, beta in inst:
        Pt, xt = torch.from_numpy(P[None]), torch.from_numpy(xi[None])
        f = nh.modern_update(xt[:, None], Pt, beta)[0, 0].numpy()
        err = float(np.linalg.norm(f - P[0]))
        bound = float(form(Pt, xt, 0, beta)[0])
        r = err / bound if bound > 0 else math.inf
        worst_ratio = largest(worst_ratio, r)
        rows.append(r)
    tol = 1 + 1e-9
    return compare(worst_ratio, tol, "a bound: error/bound ≤ 1 up to float64 rounding (one-sided; the two-sided "
                   "resolution of the bound is tight_family_exact's)",
                   seeds=[ctx.seed_for()], sizes={"instances": len(inst)},
                   resolution=(1 - worst_ratio / tol) if math.isfinite(worst_ratio) else math.nan,
                   resolution_units="relative decrease of the bound that is rejected (1 − error/tolerance; one-sided: "
                   "a bound can only be too small here)",
                   details={"max_error_over_bound": worst_ratio, "median_ratio": float(np.median(rows))})


def _retrieval_exponential(form, ctx) -> CheckResult:
    """The one-step error is exponentially small in βΔ_i: on the antipodal family (N = 5, M = 1,
    Δ = 2) the slopes of log error and of log bound in βΔ agree (both −1)."""
    d, N, M = 3, 5, 1.0
    u = np.eye(d)[0]
    P = np.stack([M * u] + [-M * u] * (N - 1))
    betas = np.linspace(4.0, 10.0, 7)
    errs_, bounds = [], []
    Pt = torch.from_numpy(P[None])
    for beta in betas:
        xt = torch.from_numpy(P[0][None].copy())
        f = nh.modern_update(xt[:, None], Pt, float(beta))[0, 0].numpy()
        errs_.append(np.linalg.norm(f - P[0]))
        bounds.append(float(form(Pt, xt, 0, float(beta))[0]))
    Delta = 2 * M ** 2
    s_err = np.polyfit(betas * Delta, np.log(errs_), 1)[0]
    s_bnd = np.polyfit(betas * Delta, np.log(bounds), 1)[0]
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.semilogy(betas * Delta, errs_, "o-", label="‖f(x_0) − x_0‖ (one update)")
        ax.semilogy(betas * Delta, bounds, "--", label="Theorem 5 bound")
        ax.set_xlabel("βΔ")
        ax.legend(fontsize=7)
        ax.set_title(f"One-step retrieval, N={N} (N−1 antipodal patterns)")
        ctx.save_figure(fig, "error_vs_beta_delta")
    e = abs(s_err - s_bnd)
    return compare(e, 0.02, "error ∝ (N−1)e^{−βΔ}/(1+(N−1)e^{−βΔ}): its log-slope differs from −1 by "
                   "≤ (N−1)e^{−βΔ} ≈ 1e-3 at βΔ ≥ 8, and the ε-term 2βεM ≤ 0.03 with slope ≪ 0.02 there. Resolution "
                   "(0.02 + error)/|slope| ≈ 2%: a rate check, its tolerance is the derived slope allowance; the "
                   "two-sided exact resolution of the bound is tight_family_exact's",
                   resolution=(0.02 + e) / abs(s_bnd) if s_bnd else math.nan,
                   resolution_units="relative change of the bound's log-slope in βΔ (−1) that is rejected: "
                   "(tolerance + |slope difference|)/|slope of the bound|",
                   sizes={"N": N, "d": d, "betas": betas.tolist()},
                   details={"slope_log_error": float(s_err), "slope_log_bound": float(s_bnd)})


@functools.lru_cache(maxsize=None)
def _delta_min_fn():
    der = th.derive_retrieval_bound()
    Nn, b, _, _, Ms = der.facts["args"]
    return sp.lambdify((Nn, b, Ms), der.facts["delta_min"], "math")


def _delta_min(N: int, beta: float, M: float) -> float:
    """The separation threshold (Ramsauer et al., App. A Lemmas A5–A7) Δ_min(β) = 2/(βN) + β⁻¹ln(2(N−1)NβM²), lambdified from the derivation."""
    return float(_delta_min_fn()(N, beta, M))


def _separated_instances(rng, B):
    """Random patterns (norms in [0.8M, M]) with β chosen so that x_0 is well separated: β = κ·β_*,
    κ ∈ {1, 1.5, 3}, where β_* solves Δ_0 = Δ_min(β) (bisection; κ = 1 is the boundary of the
    hypothesis). Queries ξ = x_0 + δ with ‖δ‖ ∈ {0, ½, 1}·1/(2βM) (the last on the boundary)."""
    out = []
    while len(out) < B:
        N, d = int(rng.integers(2, 9)), int(rng.integers(3, 9))
        P = rng.normal(size=(N, d))
        M0 = float(rng.uniform(1.0, 3.0))
        P *= M0 / np.linalg.norm(P, axis=1, keepdims=True) * rng.uniform(0.8, 1.0, size=(N, 1))
        P[0] *= M0 / np.linalg.norm(P[0])
        M = float(np.linalg.norm(P, axis=1).max())
        dots = P @ P[0]
        Delta = float(dots[0] - dots[1:].max())
        if Delta <= 0:
            continue
        lo, hi = 1e-6, 1e6
        if _delta_min(N, hi, M) > Delta:
            continue
        for _ in range(200):  # Δ_min(β) − Δ changes sign once on [lo, hi] here; bisect in log β
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if _delta_min(N, mid, M) > Delta else (lo, mid)
        for kappa in (1.0, 1.5, 3.0):
            beta = hi * kappa
            u = rng.normal(size=d)
            u /= np.linalg.norm(u)
            for r in (0.0, 0.5, 1.0):
                out.append((P, P[0] + r * u / (2 * beta * M), beta, Delta, M))
    return out[:B]


def _retrieval_separated(form, ctx) -> CheckResult:
    """The retrieval clause on every instance satisfying its hypotheses (Δ_0 ≥ Δ_min(β), ‖ξ − x_0‖ ≤
    1/(2βM)), boundaries included: x_0* (iterated to convergence) lies within 1/(βNM) of x_0 (Theorem
    4), and ‖f(ξ) − x_0‖ ≤ the form's bound ≤ 2e(N−1)M e^{−βΔ_0} ≤ e^{1−2/N}/(βNM)."""
    rng = ctx.rng()
    inst = _separated_instances(rng, ctx.size(36, 108, 360))
    worst_r, rows = {"err_over_bound": 0.0, "bound_over_2e": 0.0, "2e_over_separated": 0.0, "fixed_point_radius": 0.0}, []
    for P, xi, beta, Delta, M in inst:
        N = len(P)
        Pt, xt = torch.from_numpy(P[None]), torch.from_numpy(xi[None])
        err = float(np.linalg.norm(nh.modern_update(xt[:, None], Pt, beta)[0, 0].numpy() - P[0]))
        bound = float(np.asarray(form(Pt, xt, 0, beta), dtype=float).ravel()[0])
        xs = _np_fixed_point(P[None], 0, beta)[0]
        two_e = 2 * math.e * (N - 1) * M * math.exp(-beta * Delta)
        sep = math.exp(1 - 2 / N) / (beta * N * M)
        for k, v in (("err_over_bound", err / bound if bound > 0 else math.inf), ("bound_over_2e", bound / two_e),
                     ("2e_over_separated", two_e / sep),
                     ("fixed_point_radius", float(np.linalg.norm(xs - P[0])) * beta * N * M)):
            worst_r[k] = largest(worst_r[k], v)
        rows.append({"N": N, "beta": beta, "Delta": Delta, "error": err, "bound": bound, "separated_bound": sep})
    tol = 1e-9
    err = worst(worst_r) - 1.0  # the excess of the worst ratio over 1
    return compare(err, tol, "each ratio ≤ 1: the excess of the worst one over 1 against float64 rounding (1e-9); at the "
                   "boundaries ‖ξ − x_0‖ = 1/(2βM) and Δ_0 = Δ_min the middle ratios are 1 exactly", seeds=[ctx.seed_for()],
                   sizes={"instances": len(inst)}, details={**{k: float(v) for k, v in worst_r.items()},
                                                            "examples": rows[:6]},
                   resolution=tol + abs(err) if math.isfinite(err) else math.nan,
                   resolution_units="relative increase of the form's bound that is rejected (it equals 2e(N−1)Me^{−βΔ_0} "
                   "at the boundary queries, so bound/2e(N−1)Me^{−βΔ_0} rises above 1)")


def _converged_fixed_point(P: np.ndarray, beta: float, i: int, tol: float = 1e-15, max_iter: int = 100_000):
    """x_i* by iterating the update from x_i until the step is below ``tol`` (raises if it is not
    reached: a fixed point taken after a fixed number of steps is not known to be one)."""
    Pt = torch.from_numpy(P[None])
    x = Pt[:, i : i + 1].clone()
    for k in range(max_iter):
        nxt = nh.modern_update(x, Pt, beta)
        step = float((nxt - x).norm())
        x = nxt
        if step <= tol:
            return x[0, 0].numpy(), k + 1
    raise RuntimeError(f"fixed-point iteration did not converge in {max_iter} steps (last step {step:.2e})")


def _retrieval_tight(form, ctx) -> CheckResult:
    """On the antipodal family (x_0 = M u, the other N−1 patterns = −M u, query ξ = x_0) the
    one-step error is known exactly: f(x_0) = M u (2p_0 − 1), p_0 = 1/(1 + (N−1)e^{−βΔ}), Δ = 2M², so
    ‖f(ξ) − x_0‖ = 2M(N−1)e^{−βΔ}/(1 + (N−1)e^{−βΔ}), and Theorem 5's bound with ε = ‖x_0* − x_0‖ is
    that error times (1 + (N−1)e^{−βΔ}) e^{2βεM}. The form's bound must equal this (two-sided), with
    x_0* from a fixed-point iteration run to convergence (step ≤ 1e-15). A bound missing its (N−1) or
    its factor 2 is off by that factor here, far outside rounding."""
    d, M = 4, 1.5
    u = np.eye(d)[0]
    rows, errs, tight = [], {}, []
    for N in (3, 6, 12):
        P = np.stack([M * u] + [-M * u] * (N - 1))
        for beta in (0.5, 1.0, 2.0):
            Delta = 2 * M * M
            a = (N - 1) * math.exp(-beta * Delta)
            err = 2 * M * a / (1 + a)  # exact one-step error (also measured below)
            xs, iters = _converged_fixed_point(P, beta, 0)
            eps = float(np.linalg.norm(xs - P[0]))
            expected = err * (1 + a) * math.exp(2 * beta * eps * M)
            Pt, xt = torch.from_numpy(P[None]), torch.from_numpy(P[0][None].copy())
            measured = float(np.linalg.norm(nh.modern_update(xt[:, None], Pt, beta)[0, 0].numpy() - P[0]))
            got = float(np.asarray(form(Pt, xt, 0, beta), dtype=float).ravel()[0])
            key = f"N{N}_beta{beta:g}"
            errs[key + "_bound"] = abs(got - expected) / expected
            errs[key + "_error_formula"] = abs(measured - err) / err
            tight.append((got, expected))
            rows.append({"N": N, "beta": beta, "error": measured, "bound": got, "expected_bound": expected,
                         "eps": eps, "fixed_point_iterations": iters})
    floor = 64 * EPS + 2 * 2.0 * M * 1e-12
    tol = 10 * floor
    eps, conf = _rel_resolution(np.array([g for g, _ in tight]), np.array([x for _, x in tight]), tol)
    return compare(errs, tol, "10 × the derived floor: float64 rounding of exp/softmax at exponents βΔ ≤ 9 (64·eps) plus "
                   "the form's fixed-point iterate, whose ε differs from the converged one by ≤ 1e-12 here, moved "
                   f"through ∂log(bound)/∂ε = 2βM ≤ 6 (6e-12): {tol:.2g}, within the exact-check target 1e-9",
                   sizes={"d": d, "M": M, "N": [3, 6, 12], "beta": [0.5, 1.0, 2.0]},
                   details={"rows": rows, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (the exact bound of the antipodal family; relative error)")


def _bound_variant(scale_fn):
    def f(P, xi, i, beta):
        return scale_fn(nh.retrieval_bound(P, xi, i, beta), P, xi, i, beta)
    return f


def _bound_eps_sign(P, xi, i, beta):
    """exp(−β(Δ + 2εM)) instead of exp(−β(Δ − 2εM))."""
    b = nh.retrieval_bound(P, xi, i, beta)
    xs = P[:, i, :]
    x_star = xs[:, None]
    for _ in range(200):
        x_star = nh.modern_update(x_star, P, beta)
    eps = torch.maximum((xi - xs).norm(dim=-1), (x_star[:, 0] - xs).norm(dim=-1))
    M = P.norm(dim=-1).amax(-1)
    return b * torch.exp(-4 * beta * eps * M)


def _sympy_bound(N, beta, Delta, eps, M) -> float:
    der = th.derive_retrieval_bound()
    return float(der.result.subs(dict(zip(der.facts["args"], (N, beta, Delta, eps, M)))))


def _cx_retrieval_negative_beta(ctx) -> Counterexample:
    """Without β > 0: the softmax then favours the pattern least aligned with ξ. d = 1, x_0 = 1, x_1 = −1
    (M = 1, Δ_0 = 2), ξ = 3 (ε = 2), β = −1: f(ξ) ≈ −1, far outside the bound."""
    P = torch.tensor([[[1.0], [-1.0]]], dtype=torch.float64)
    xi, beta = torch.tensor([[[3.0]]], dtype=torch.float64), -1.0
    err = float((nh.modern_update(xi, P, beta)[0, 0] - P[0, 0]).norm())
    bound = _sympy_bound(2, beta, 2.0, 2.0, 1.0)
    return Counterexample({"d": 1, "X": "(1, -1)", "xi": 3.0, "beta": beta, "eps": 2.0}, "bound",
                          f"‖f(ξ) − x_0‖ = {err:.4f} > bound 2(N−1)M e^(−β(Δ−2εM)) = {bound:.4f}",
                          violated=err > bound * (1 + 1e-9), error=err / bound, tolerance=1.0 + 1e-9,
                          justification="error/bound against 1 up to float64 rounding")


def _cx_not_separated(ctx) -> Counterexample:
    """Without the separation of Ramsauer et al.'s Lemmas A5–A7: two patterns of norm 1 at angle 0.3 (Δ_0 = 1 − cos 0.3 ≈ 0.045
    against Δ_min ≈ 0.47 at β = 10), ξ = x_0: one update returns a mixture of both patterns (and iterating
    ends at their midpoint, a metastable state), far from x_0 on the scale e^(1−2/N)/(βNM)."""
    th_ = 0.3
    P = np.array([[1.0, 0.0], [math.cos(th_), math.sin(th_)]])
    beta, N, M = 10.0, 2, 1.0
    Pt = torch.from_numpy(P[None])
    err = float(np.linalg.norm(nh.modern_update(Pt[:, :1], Pt, beta)[0, 0].numpy() - P[0]))
    Delta, dmin = 1 - math.cos(th_), _delta_min(N, beta, M)
    der = th.derive_retrieval_bound()
    Nn, b, _, _, Ms = der.facts["args"]
    sep = float(der.facts["separated_error"].subs({Nn: N, b: beta, Ms: M}))
    xs = _np_fixed_point(P[None], 0, beta)[0]
    return Counterexample({"d": 2, "N": N, "angle": th_, "beta": beta, "M": M, "xi": "x_0"}, "retrieval",
                          f"Δ_0 = {Delta:.4f} < Δ_min = {dmin:.4f}; ‖f(x_0) − x_0‖ = {err:.4f} > e^(1−2/N)/(βNM) = {sep:.4f}; "
                          f"the iteration from x_0 ends {float(np.linalg.norm(xs - P[0])):.4f} from x_0 (the midpoint is "
                          f"{math.sin(th_ / 2):.4f} away; the lemmas' sphere has radius {1 / (beta * N * M):.3f})",
                          violated=err > sep and Delta < dmin, error=err / sep, tolerance=1.0,
                          justification="one-sided: the clause's error bound, float64 rounding ≪ the margin")


def _cx_query_far(ctx) -> Counterexample:
    """Without ‖ξ − x_i‖ ≤ 1/(2βM): a well-separated antipodal family (x_0 = Mu, x_1 = x_2 = −Mu, M = 1.5,
    β = 2), queried at ξ = x_1: the update retrieves x_1, not x_0."""
    d, M, beta, N = 4, 1.5, 2.0, 3
    u = np.eye(d)[0]
    P = np.stack([M * u, -M * u, -M * u])
    Pt = torch.from_numpy(P[None])
    err = float(np.linalg.norm(nh.modern_update(Pt[:, 1:2], Pt, beta)[0, 0].numpy() - P[0]))
    Delta, dmin = 2 * M * M, _delta_min(N, beta, M)
    sep = math.exp(1 - 2 / N) / (beta * N * M)
    return Counterexample({"d": d, "N": N, "M": M, "beta": beta, "xi": "x_1 = -x_0"}, "retrieval",
                          f"separated (Δ_0 = {Delta:g} ≥ Δ_min = {dmin:.3f}) but ‖ξ − x_0‖ = {2 * M:g} > 1/(2βM) = "
                          f"{1 / (2 * beta * M):.3f}: ‖f(ξ) − x_0‖ = {err:.4f} > {sep:.4f}",
                          violated=err > sep and Delta >= dmin, error=err / sep, tolerance=1.0,
                          justification="one-sided; the margin is a factor ≈ 20")


declare(
    id="hop.one_step_retrieval",
    title="Theorem 5 (Ramsauer et al.): ‖f(ξ) − x_i‖ ≤ 2(N−1)M e^{−β(Δ_i−2εM)} for every query; one-step retrieval when x_i is well separated",
    hypotheses=(
        setting("setting", r"N\ge2,\ x_1,\dots,x_N\in\mathbb R^d,\ M=\max_j\|x_j\|,\ f(\xi)=X\,S(\beta X^\top\xi),\ \Delta_i=x_i^\top x_i-\max_{j\neq i}x_i^\top x_j",
                "Δ_i is a maximum over the other patterns (none when N = 1)"),
        Hypothesis("beta_positive", r"\beta>0", counterexample=_cx_retrieval_negative_beta),
        Hypothesis("separated", r"\text{for (ii): }\Delta_i\ge\frac{2}{\beta N}+\frac1\beta\ln\!\big(2(N-1)N\beta M^2\big)",
                   "x_i well separated (Ramsauer et al., App. A Lemmas A5–A7); needed for the retrieval clause only", counterexample=_cx_not_separated),
        Hypothesis("query_near", r"\text{for (ii): }\|\xi-x_i\|\le\frac1{2\beta M}",
                   "the query is near x_i; needed for the retrieval clause only", counterexample=_cx_query_far),
    ),
    clauses=(
        Clause("bound", r"\text{(i) for every }\xi\text{ and }\epsilon\ge\|\xi-x_i\|\ (\text{e.g. }\epsilon=\max\{\|\xi-x_i\|,\|x_i^*-x_i\|\}):\ \|f(\xi)-x_i\|\le2(N-1)\,M\,e^{-\beta(\Delta_i-2\epsilon M)}",
               "derived_at", "N = 3, d = 2 for the identities (decomposition over j ≠ i, softmax ratio, exponent split); the "
               "sum of the N − 1 terms in symbolic N", ("derivation", "bound_vs_sympy", "bound_holds", "tight_family_exact"),
               rests_on=("triangle inequality, p_1 ≤ 1", "exponent bound −Δ + 2Mε", "‖x_j − x_1‖ ≤ 2M"),
               also=(("cited", "Ramsauer et al. (ICLR 2021) Thm 5, first part (no separation needed)"),
                     ("checked", "every instance of 64/256 random ones (N = 2–11, d = 3–9, β ∈ [0.5, 4]), 18 antipodal "
                      "near-tight ones and 9 boundary ones (duplicate pattern Δ = 0, near pattern, far query); "
                      "exact on the antipodal family N = 3, 6, 12, β = 0.5, 1, 2"))),
        Clause("retrieval", r"\text{(ii) }\|x_i^*-x_i\|\le\tfrac1{\beta NM},\ \|f(\xi)-x_i\|\le2e(N-1)M\,e^{-\beta\Delta_i}\le\frac{e^{1-2/N}}{\beta NM}",
               "derived_at", "N = 3, d = 2, as bound (i) it builds on (its identities); from the bound on, symbolic N ≥ 2, "
               "β, M (SymPy: ε ≤ 1/(2βM) in the bound, then Δ_i = Δ_min), with the lemmas' premise that x_i* lies within "
               "1/(βNM) ≤ 1/(2βM) of x_i", ("derivation", "retrieval_when_separated"),
               rests_on=("triangle inequality, p_1 ≤ 1", "exponent bound −Δ + 2Mε", "‖x_j − x_1‖ ≤ 2M", "well-separated patterns"),
               also=(("cited", "Ramsauer et al. (ICLR 2021) App. A Lemmas A5–A7 (well-separated x_i: the update maps the "
                      "sphere of radius 1/(βNM) into itself, contracts on it, fixed point x_i* inside) and Thm 5, second part"),
                     ("checked", "every instance of 36/108 (quick/default): N = 2–8, d = 3–8, β = 1, 1.5, 3 × the β at "
                      "which Δ_0 = Δ_min (boundary included), ‖ξ − x_0‖ = 0, ¼, ½ of 1/(βM)"))),
        Clause("exponent_attained", r"\text{antipodal family }x_j=-x_i\ (j\neq i):\ \|f(x_i)-x_i\|=\frac{2M(N-1)e^{-\beta\Delta_i}}{1+(N-1)e^{-\beta\Delta_i}}",
               "checked", "N = 3, 6, 12, β = 0.5, 1, 2 (exact); log-slope −1 in βΔ for β ∈ [4, 10], N = 5",
               ("tight_family_exact", "exponential_in_beta_delta")),
    ),
    source="lecture notes 002; Ramsauer et al. (2021), Theorem 5",
    kind="theorem",
    form=nh.retrieval_bound,
    derivation=th.derive_retrieval_bound,
    fixed_sizes="the identities the bound starts from (decomposition over j ≠ i, softmax ratio, exponent split) are derived "
                "with explicit patterns at N = 3, d = 2; the algebra after them is symbolic in N, β, M, ε, Δ",
    notes="The bound holds for every ξ (the derivation uses only ‖x_j‖ ≤ M); the max with ‖x_i*−x_i‖ only loosens it.",
    checks=(
        Check("bound_vs_sympy", "symbolic", _retrieval_symbolic, "form's bound vs SymPy's expression"),
        Check("bound_holds", "numeric", _retrieval_numeric, "random separated + antipodal instances"),
        Check("exponential_in_beta_delta", "numeric", _retrieval_exponential, "log-slope in βΔ"),
        Check("tight_family_exact", "numeric", _retrieval_tight, "bound = exact error × (1+(N−1)e^{−βΔ})e^{2βεM} on antipodal patterns"),
        Check("retrieval_when_separated", "numeric", _retrieval_separated,
              "Lemmas A5–A7 separation: x_i* within 1/(βNM); error ≤ bound ≤ 2e(N−1)Me^{−βΔ} ≤ e^{1−2/N}/(βNM)"),
    ),
    mutants=(
        Mutant("no_N_minus_1", "dropped term", "2 exp(−β(Δ−2εM)) M: the (N−1) factor removed (tighter, false)",
               _bound_variant(lambda b, P, xi, i, beta: b / (P.shape[-2] - 1))),
        Mutant("no_factor_2", "wrong constant", "(N−1) exp(−β(Δ−2εM)) M",
               _bound_variant(lambda b, P, xi, i, beta: b / 2)),
        Mutant("eps_sign_flipped", "sign flip", "exp(−β(Δ + 2εM))", _bound_eps_sign),
        Mutant("beta_squared", "wrong formula", "exp(−β²(Δ − 2εM)) (β misplaced)",
               _bound_variant(lambda b, P, xi, i, beta: b ** (beta) * (2 * (P.shape[-2] - 1) * P.norm(dim=-1).amax(-1)) ** (1 - beta))),
    ),
)


# --------------------------------------------------------------------------------------------
# hop.modern_capacity (evidence)
# form: {"growth": "exponential" | "polynomial"}


def _modern_capacity_check(form, ctx) -> CheckResult:
    """Patterns uniform on the sphere of radius √d, β = 1, retrieval = ‖f(x_i) − x_i‖ ≤ 0.1√d after
    one update. N_½(d) (half retrieved) is measured for small d; the form's growth model (exponential:
    log N_½ linear in d; polynomial: log N_½ linear in log d) must fit better than the other."""
    dev = resolve_device(ctx.device)
    ds = ctx.size([4, 6, 8, 10, 12], [4, 6, 8, 10, 12, 14], [4, 6, 8, 10, 12, 14, 16])
    g = torch.Generator(device=dev).manual_seed(ctx.seed_for())
    nhalf, curves = [], {}
    for d in ds:
        grid, fr = [], []
        for k in range(1, 16):
            N = 2 ** k
            B = largest(4, smallest(64, int(2e6 // (N * N))))
            P = torch.randn(B, N, d, generator=g, device=dev, dtype=torch.float64)
            P = P / P.norm(dim=-1, keepdim=True) * math.sqrt(d)
            f = nh.modern_update(P, P, 1.0)
            grid.append(N)
            fr.append(float(((f - P).norm(dim=-1) <= 0.1 * math.sqrt(d)).double().mean()))
            if fr[-1] < 0.2:
                break
        curves[d] = (grid, fr)
        nhalf.append(_half_crossing(grid, fr))
    ds_a, nh_a = np.array(ds, float), np.log(np.array(nhalf))
    ok = np.isfinite(nh_a)

    def r2(x, y):
        coef = np.polyfit(x, y, 1)
        res = y - np.polyval(coef, x)
        return 1 - res.var() / y.var(), coef[0]

    r2_exp, rate = r2(ds_a[ok], nh_a[ok])
    r2_poly, power = r2(np.log(ds_a[ok]), nh_a[ok])
    want_exp = form["growth"] == "exponential"
    margin = (r2_exp - r2_poly) if want_exp else (r2_poly - r2_exp)
    err = 0.0 if (margin > 0 and ok.sum() >= 4 and (rate > 0 if want_exp else power > 0)) else 1.0
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.4))
        ax.semilogy(ds, nhalf, "o-", label="measured N½")
        ax.semilogy(ds, np.exp(np.polyval(np.polyfit(ds_a[ok], nh_a[ok], 1), ds_a)), "--", label=f"exp fit, rate {rate:.2f}/dim")
        ax.set_xlabel("d")
        ax.set_ylabel("patterns retrieved by half")
        ax.legend(fontsize=7)
        ax.set_title("Modern Hopfield capacity (β=1, radius √d)")
        ctx.save_figure(fig, "capacity")
    return compare(err, 0.0, "model comparison: the form's growth law must fit log N½(d) better (R²) than the alternative",
                   seeds=[ctx.seed_for()], sizes={"d": ds}, device=str(dev),
                   details={"N_half": nhalf, "r2_exponential": r2_exp, "r2_polynomial": r2_poly,
                            "rate_per_dim": rate, "rate_bits_per_dim": rate / math.log(2), "power": power})


def _cx_unit_radius(ctx) -> Counterexample:
    """Without βM² growing with d: patterns on the sphere of radius √d (as the clause) at β = 1/d, so
    βM² = 1 instead of d. The self-score is β‖x_i‖² = 1 and the cross scores β⟨x_i, x_j⟩ = O(1/√d), so
    p_i ≈ e/(e + N − 1) stays bounded away from 1 and ‖f(x_i) − x_i‖ ≈ (1 − p_i)√(2d) > 0.1√d already
    at N = 2: under the clause's own criterion (within 0.1·√d) no pattern is retrieved at any d, so
    N_½(d) < 2 does not grow. (Until issue 43 this counterexample shrank the radius to 1 and measured
    retrieval within 0.1·radius, a proxy: within the stated 0.1·√d every unit pattern counts as
    retrieved at d = 16.)"""
    g = torch.Generator().manual_seed(ctx.seed_for("unit_radius"))
    fr, dist = {}, {}
    for d in (8, 16, 32, 64):
        P = torch.randn(256, 2, d, generator=g, dtype=torch.float64)
        P = P / P.norm(dim=-1, keepdim=True) * math.sqrt(d)
        err = (nh.modern_update(P, P, 1.0 / d) - P).norm(dim=-1) / math.sqrt(d)
        fr[f"d{d}"] = float((err <= 0.1).double().mean())
        dist[f"d{d}"] = float(err.min())
    return Counterexample({"radius": "√d", "beta": "1/d (βM² = 1)", "N": 2, "d": "8, 16, 32, 64", "trials": 256},
                          "exponential_growth",
                          f"fraction retrieved within 0.1·√d at N = 2: {fr} (smallest ‖f(x_i) − x_i‖/√d: "
                          f"{smallest(dist.values()):.3f}): N_½ < 2 at every d, no growth in d",
                          violated=worst(list(fr.values())) < 0.5, error=0.5 - worst(list(fr.values())), tolerance=0.0,
                          justification="the clause's criterion: retrieved when ‖f(x_i) − x_i‖ ≤ 0.1√d; N_½ is where the "
                          "retrieved fraction crosses ½, below ½ already at N = 2",
                          details={"fractions": fr, "smallest_distance_over_sqrt_d": dist})


declare(
    id="hop.modern_capacity",
    title="Modern Hopfield capacity grows exponentially in d (measured at d ≤ 12–16, β = 1, radius √d; Ramsauer et al. Thm 3)",
    hypotheses=(
        setting("random_sphere", r"x_1,\dots,x_N\ \text{i.i.d. uniform on the sphere }\|x\|=\sqrt d",
                "N_retrievable(d) is a statement about this distribution (Ramsauer "
                "et al. Thm 3 takes patterns at random on the sphere of radius K√(d−1))"),
        Hypothesis("beta_radius", r"\beta=1,\ \beta M^2=d\ (\text{the radius grows like }\sqrt d)",
                   "inverse temperature times squared radius grows with d", counterexample=_cx_unit_radius),
        setting("criterion", r"x_i\text{ retrieved}:\ \|X S(\beta X^\top x_i)-x_i\|\le0.1\sqrt d;\ N_{1/2}(d):\text{ half retrieved}",
                "the measured quantity (one update from the stored pattern itself)"),
    ),
    clauses=(
        Clause("exponential_growth", r"N_{1/2}(d)=e^{\Theta(d)}:\ \log N_{1/2}\text{ is fitted better by a line in }d\text{ than in }\log d,\text{ with a positive rate}",
               "checked", "d = 4–12 (quick) / 4–14 (default) / 4–16 (full), N = 2, 4, …, 2^15, up to 64 trials per point: R² "
               "of the linear-in-d fit above that of the linear-in-log d fit, rate > 0, at least 4 bracketed d",
               ("exponential_growth_fit",),
               also=(("cited", "Ramsauer et al. (ICLR 2021) Thm 3: with probability 1 − p, N ≥ √p·c^{(d−1)/4} random patterns "
                      "on the sphere of radius K√(d−1) are well separated (stored: App. A Lemmas A5–A7); c ≈ 1.37 for β = 1, K = 1 at "
                      "d = 75, p = 0.001 — a lower bound in a related, not the measured, criterion"),)),
    ),
    source="lecture notes 002; Ramsauer et al. (2021), Theorem 3",
    kind="evidence",
    form={"growth": "exponential"},
    notes="Evidence at d ≤ 12–16 only: one-step retrieval of the stored pattern itself within 0.1·√d. A model comparison at "
          "small d, not a proof of e^{Θ(d)}.",
    checks=(Check("exponential_growth_fit", "numeric", _modern_capacity_check, "log N½ vs d and vs log d", uses_device=True),),
    mutants=(Mutant("polynomial_growth", "wrong formula", "capacity polynomial in d", {"growth": "polynomial"}),),
)
