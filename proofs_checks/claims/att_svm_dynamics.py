"""Group C, continued: the regularisation path and gradient descent converge in direction to the
Att-SVM solution, rates, and token sets (lecture notes 002, optimisation part; Tarzanagh et al. 2023).
Binds theory/att_svm.py and numerics/att_svm.py to checks, tolerances and mutants."""


from __future__ import annotations

import math

import numpy as np

from numerics import att_svm as ns
from proofs_checks.registry import Check, Claim, Mutant, compare, register, worst
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, relative, smallest
from proofs_checks.claims._att_svm_common import (ANGLE_UNITS, ANGLE_WHY, SOURCE, _cos, _figure, _inst, _kq_instance,
                                                  direction_resolution)


# --------------------------------------------------------------------------------------------
# svm.reg_path and svm.gd_direction   form: {"limit": (inst, ids, param) -> (d,d), "correlation": (A,B) -> cos}


def _limit(inst, ids, param="W"):
    return ns.solve_att_svm(inst.X, inst.z, ids, "fro" if param == "W" else "nuc").W


def _corr_numeric(form, ctx):
    """form's correlation vs torch.nn.functional.cosine_similarity (batched random matrices)."""
    rng = ctx.rng()
    A, B = rng.normal(size=(16, 5, 5)) * 7, rng.normal(size=(16, 5, 5)) * 0.3
    A[0] = 3 * B[0]
    return relative(np.asarray(form["correlation"](A, B), dtype=float), _cos(A, B), 64 * EPS,
                    "float64 rounding of a 25-term inner product and two norms (64·eps, cosines ≤ 1 with one = 1)",
                    seeds=[ctx.seed_for()])


def _regpath_W(form, ctx):
    """W̄_R = argmin_{‖W‖_F ≤ R} L(W) along increasing R: corr(W̄_R, form's limit) increases toward
    1 and exceeds 0.99 at the largest R.

    The constrained problem is nonconvex (one basin per attended-token set), and Thm 2 is about its
    GLOBAL minimiser, which can jump between basins as R grows: a warm-started projected-GD path
    that entered a locally-optimal set at small R stays there (on 2/100 instances at R ≤ 150 it
    ended with 1 − corr ≈ 0.4, in a set whose limiting loss is higher than opt's). The path is
    therefore computed with a global search (numerics: at every R the warm start competes with all
    n(T−1) single-token switches of its selection; lowest excess loss wins). The token set selected
    along the path and the radius at which the search left the warm basin are reported."""
    seed = ctx.seed_for()
    inst = _inst(4, 5, 6, seed % 1000, "global")
    target = form["limit"](inst, inst.opt, "W")
    radii = np.geomspace(0.5, ctx.size(150.0, 300.0), ctx.size(10, 14))
    rp = ns.regularization_path(inst, radii, inner=ctx.size(150, 250), lr=0.3, B=1, seed=seed, switches=True,
                                device=ctx.device)
    c = _cos(rp.W[:, 0], target)
    upper = c[len(c) // 2:]
    errs = {"one_minus_final": float(1 - c[-1]), "decrease_upper_half": float(largest(0.0, np.max(upper[:-1] - upper[1:])))}
    _figure(ctx, "regpath_W", {"corr(W̄_R, W^mm)": (radii, c)}, "correlation", "R", logx=True)
    sel = rp.selected[:, 0]
    jumps = [float(radii[k]) for k in range(len(radii)) if rp.winner[k, 0] != 0]
    return compare(worst(errs), 0.01, "Thm 2 (TLTO'23) limit; 1 − corr ≤ 0.01 at R = 150–300 (≈ 20–40‖W^mm‖; measured "
                   "≤ 0.003 on 600 instances). " + ANGLE_WHY,
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 6, "radii": len(radii)}, device=ctx.device,
                   resolution=direction_resolution(errs["one_minus_final"], 0.01), resolution_units=ANGLE_UNITS,
                   details={**errs, "radii": radii.tolist(), "corr": c.tolist(), "opt": inst.opt.tolist(),
                            "selected_along_path": sel.tolist(), "final_set_is_opt": bool(np.all(sel[-1] == inst.opt)),
                            "radii_where_search_left_warm_basin": jumps, "excess_loss": rp.loss[:, 0].tolist()})


def _regpath_KQ(form, ctx):
    """(K,Q) path (‖K‖²+‖Q‖² ≤ 2R) aligns with form's (K,Q) limit on an instance where the nuclear
    and Frobenius solutions differ."""
    inst, sd, fro_nuc = _kq_instance(0)  # fixed: an instance where the two solutions differ (see _kq_instance)
    target = form["limit"](inst, inst.opt, "KQ")
    radii = np.geomspace(0.5, ctx.size(100.0, 200.0), ctx.size(10, 14))
    rp = ns.regularization_path(inst, radii, param="KQ", inner=ctx.size(200, 300), lr=0.3, B=1, seed=sd, device=ctx.device)
    c = _cos(rp.W[:, 0], target)
    c_fro = _cos(rp.W[:, 0], ns.solve_att_svm(inst.X, inst.z, inst.opt).W)
    _figure(ctx, "regpath_KQ", {"corr with form target": (radii, c), "corr with W^mm_F": (radii, c_fro)}, "correlation", "R", logx=True)
    return compare(float(1 - c[-1]), 0.01, "TLTO'23: (K,Q) path → nuclear Att-SVM; 1 − corr ≤ 0.01 at the largest R. " + ANGLE_WHY,
                   seeds=[sd], sizes={"n": 2, "T": 3, "d": 4}, device=ctx.device,
                   resolution=direction_resolution(float(1 - c[-1]), 0.01), resolution_units=ANGLE_UNITS,
                   details={"corr": c.tolist(), "corr_fro": c_fro.tolist(), "corr_fro_nuc_solutions": fro_nuc})


REG_GD_MUTANTS = (
    Mutant("fro_for_KQ", "wrong norm", "Frobenius solution used for the (K,Q) claim",
           {"limit": lambda inst, ids, param="W": _limit(inst, ids, "W"), "correlation": ns.correlation}),
    Mutant("second_best_tokens", "wrong formula", "Att-SVM for the second-best tokens instead of opt",
           {"limit": lambda inst, ids, param="W": _limit(inst, ns.second_best_tokens(inst.X, inst.y, inst.v) if np.array_equal(ids, inst.opt) else ids, param),
            "correlation": ns.correlation}),
    Mutant("sign_flipped", "sign flip", "limit −W^mm", {"limit": lambda inst, ids, param="W": -_limit(inst, ids, param), "correlation": ns.correlation}),
    Mutant("unnormalised_correlation", "dropped term", "⟨A, B⟩ without dividing by the norms",
           {"limit": _limit, "correlation": lambda A, B: (np.asarray(A) * np.asarray(B)).sum((-1, -2))}),
)

register(Claim(
    id="svm.reg_path",
    title="Regularisation path converges in direction to the Att-SVM (Frobenius for W, nuclear for (K,Q))",
    statement=r"\bar W_R=\arg\min_{\|W\|_F\le R}\mathcal L(W):\ \lim_{R\to\infty}\bar W_R/R=W^{mm}/\|W^{mm}\|_F;\quad(K,Q):\ \|K\|_F^2+\|Q\|_F^2\le2R\Rightarrow KQ^\top/\|KQ^\top\|\to W^{mm}_*/\|W^{mm}_*\|",
    source=SOURCE + "; Thm 2",
    kind="theorem",
    form={"limit": _limit, "correlation": ns.correlation},
    checks=(
        Check("correlation_vs_torch", "numeric", _corr_numeric, "form's correlation vs torch cosine_similarity"),
        Check("W_path", "trained", _regpath_W, "projected GD path over increasing R vs the Frobenius Att-SVM"),
        Check("KQ_path", "trained", _regpath_KQ, "(K,Q) path vs the nuclear Att-SVM where Frobenius differs"),
    ),
    mutants=REG_GD_MUTANTS,
    no_symbolic="an asymptotic statement about an optimisation path (a limit of argmins / GD iterates): the evidence is the "
                "trained path against the cvxpy Att-SVM solution, no closed form to derive in SymPy",
))


def _gd_global(form, ctx):
    """Normalised GD (lr 0.1, as the reference code) from small init, several inits batched, in
    the global regime (equal non-optimal scores): ‖W_k‖ grows, attention → opt, correlation with
    form's limit ≥ 0.99 within the measured iteration count. The run (form-independent) is a cached
    reference; its curve is recorded against numerics' W^mm, the final W against form's limit."""
    seed = ctx.seed_for()
    inst = _inst(5, 6, 8, seed % 1000, "global")
    iters, B = ctx.size(1000, 2000), ctx.size(4, 16)

    def run():
        Wmm = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        return ns.train(inst, method="ngd", lr=0.1, iters=iters, B=B, seed=seed, init=0.01, opt=inst.opt,
                        targets={"mm": Wmm}, device=ctx.device)

    r = ctx.reference("ngd_global", run, iters, B)
    target = form["limit"](inst, inst.opt, "W")
    c = _cos(r.W, target)
    reach = r.iterations_to(0.99, "mm")
    _figure(ctx, "ngd_corr", {f"init {b}": (np.arange(1, iters + 1), r.corr["mm"][:, b]) for b in range(smallest(4, B))}, "corr(W_k, W^mm)")
    errs = {"one_minus_corr_final": float(np.max(1 - c)),
            "norm_not_growing": float(np.mean(r.norm[-1] < 3 * r.norm[iters // 10])),  # NGD: ‖W_k‖ grows ~linearly
            "opt_mass_missing": float(np.max(1 - r.opt_mass[-1])),
            "selected_not_opt": float(np.mean(r.selected != inst.opt))}
    return compare(worst(errs), 0.01, "TLTO'23 / VDT'24 global convergence; 1 − corr ≤ 0.01 after the iteration budget. " + ANGLE_WHY,
                   seeds=[seed], sizes={"n": 5, "T": 6, "d": 8, "iters": iters, "B": B}, device=ctx.device,
                   resolution=direction_resolution(errs["one_minus_corr_final"], 0.01), resolution_units=ANGLE_UNITS,
                   details={**errs, "final_corr": c.tolist(), "norm_final": r.norm[-1].tolist(),
                            "iterations_to_0.99 (vs numerics' W^mm; iters+1 = not reached)": reach.tolist(),
                            "log10_grad_norm_final": r.log10_grad_norm[-1].tolist()})


LOCAL_SLACK, LOCAL_CORR0, LOCAL_RHO = 0.5, 0.9, 4.0


def _local_start(Wl: np.ndarray, rng: np.random.Generator, B: int) -> np.ndarray:
    """B initialisations ``W_0 = ρ‖W_l‖(c₀ Ŵ_l + √(1 − c₀²) N̂_b)`` (ρ = LOCAL_RHO, c₀ = LOCAL_CORR0):
    correlation exactly c₀ with W^mm_local, N̂_b a Gaussian direction orthogonal to it; (B,d,d)."""
    Wh = Wl / np.linalg.norm(Wl)
    N = rng.normal(size=(B,) + Wl.shape)
    N -= np.einsum("bij,ij->b", N, Wh)[:, None, None] * Wh
    N /= np.linalg.norm(N, axis=(1, 2))[:, None, None]
    return LOCAL_RHO * np.linalg.norm(Wl) * (LOCAL_CORR0 * Wh + np.sqrt(1 - LOCAL_CORR0 ** 2) * N)


def _gd_local(form, ctx):
    """Local regime: NGD started in the cone of a locally-optimal token set, at correlation 0.9 with
    its Att-SVM W^mm_local (1 − corr = 0.1, ten times the tolerance) and ‖W_0‖ = 4‖W^mm_local‖,
    converges in direction; each run's selected set (argmax attention at the end) is detected and
    its final direction is checked against the Att-SVM for THAT set (the constructed local set, opt,
    or another). Starting and final correlations with form's limit are both reported.

    Regime (TLTO'23 Thm 3): local convergence holds from inside a cone around W^mm_local whose width
    shrinks to 0 as the margin of a higher-score token under W^mm_local approaches 1. The instance
    therefore requires that margin ≥ 1 + LOCAL_SLACK (0.5). Start and budget measured on instance
    seeds 0–59 (stable normalised direction): at correlation 0.9, ‖W_0‖ = 4‖W^mm_local‖, 7/180 runs
    (B = 3) switched set, the last at iteration 275; the worst 1 − corr with the selected set's
    Att-SVM was 0.0033 after 2000 iterations (median 5e-4; 0.008 after 1200), and 0.0029 after 2000
    with B = 8 (instance seeds 0–39). Runs that switch set restart their convergence there, which
    sets the budget. Starting closer to 0 (‖W_0‖ = ‖W^mm_local‖) every run left the local set;
    starting at correlation 0.85 left 1 − corr up to 0.044 after 800 iterations.
    (Before: W_0 = 5·W^mm_local, 1 − corr ≈ 5e-5 before any step: nothing was tested.)"""
    seed = ctx.seed_for()
    inst = _inst(4, 5, 8, seed % 1000, "local", LOCAL_SLACK)
    B, iters = ctx.size(3, 8), ctx.size(2000, 2500)

    def run():
        Wl = ns.solve_att_svm(inst.X, inst.z, inst.local).W
        W0 = _local_start(Wl, ctx.rng("init"), B)
        r = ns.train(inst, method="ngd", lr=0.1, iters=iters, B=B, init=W0, seed=seed, targets={"local": Wl},
                     device=ctx.device)
        return W0, r

    W0, r = ctx.reference("ngd_local", run, B, iters)
    sel = r.selected
    errs, start, final = {}, [], []
    for b in range(B):
        target = form["limit"](inst, sel[b], "W")
        final.append(float(_cos(r.W[b], target)))
        start.append(float(_cos(W0[b], target)))
        errs[f"run{b}"] = 1.0 - final[-1]
    in_local = np.all(sel == inst.local, axis=1)
    in_opt = np.all(sel == inst.opt, axis=1)
    reach = r.iterations_to(0.99, "local")
    _figure(ctx, "ngd_local_corr", {f"run {b}": (np.arange(1, iters + 1), r.corr["local"][:, b]) for b in range(smallest(4, B))},
            "corr(W_k, W^mm_local)", logx=True)
    return compare(worst(errs), 0.01, "local convergence (TLTO'23 Thm 3): 1 − corr with the selected set's Att-SVM ≤ 0.01 "
                   "after the budget, from 1 − corr = 0.1 at the start (measured ≤ 0.0033 over 60 instances at 2000 "
                   "iterations; 1 − corr decays like ‖W^⊥‖²/‖W_k‖²). " + ANGLE_WHY,
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 8, "B": B, "iters": iters}, device=ctx.device,
                   resolution=direction_resolution(worst(errs), 0.01), resolution_units=ANGLE_UNITS,
                   details={**errs, "start_corr_with_form": start, "final_corr_with_form": final,
                            "start_norm_over_norm_Wmm_local": LOCAL_RHO, "final_norm": r.norm[-1].tolist(),
                            "iterations_to_0.99_vs_W^mm_local (iters+1 = not reached; runs that left the set never)": reach.tolist(),
                            "runs_in_local_set": int(in_local.sum()), "runs_at_opt": int(in_opt.sum()),
                            "runs_in_other_set": int((~in_local & ~in_opt).sum()),
                            "selection_settled_at_iteration": r.settled.tolist(), "selected": sel.tolist(),
                            "local": inst.local.tolist(), "opt": inst.opt.tolist()})


KQ_SIZE, KQ_INSTANCES, KQ_FRO_NUC_MAX = (2, 5, 8), 5, 0.92


def _kq_instances(seed: int, count: int = KQ_INSTANCES):
    """``count`` instances of size KQ_SIZE drawn from ``seed`` ("global" setting), each the first
    draw (instance seeds seed·1000 + j, j = 0, 1, …) whose Frobenius and nuclear Att-SVM solutions
    have correlation < KQ_FRO_NUC_MAX, so that the (K,Q) check can tell them apart. Returns
    (instances, nuclear results, instance seeds, Frobenius–nuclear correlations)."""
    insts, nucs, sds, cfn = [], [], [], []
    base = (seed % 100000) * 1000
    j = 0
    while len(insts) < count:
        if j >= 50 * count:
            raise RuntimeError(f"no {KQ_SIZE} instance with distinct Frobenius and nuclear solutions near seed {seed}")
        inst = ns.make_instance(*KQ_SIZE, seed=base + j, setting="global")
        f = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc")
        c = float(ns.correlation(f, nu.W))
        if c < KQ_FRO_NUC_MAX:
            insts.append(inst), nucs.append(nu), sds.append(base + j), cfn.append(c)
        j += 1
    return insts, nucs, sds, cfn


def _gd_KQ(form, ctx):
    """NGD on (K,Q) (each gradient normalised, as the reference code, with the direction computed
    stably: numerics.loss_and_scaled_grad) on KQ_INSTANCES instances drawn from the seed, each
    with distinct Frobenius and nuclear solutions; B inits per instance, one batch.

    Error: the median over instances of the worst run's 1 − corr(W_k, form's (K,Q) limit). Not the
    worst instance, because (K,Q) GD → W^mm_* is not a theorem for GD (TLTO'23 prove it for the
    regularisation path; GD on the 2-homogeneous (K,Q) model converges to a KKT point of the
    factorised margin problem, which need not be the nuclear optimum): at n=2, T=5, d=8 after 2500
    iterations (B = 4), 4 of 100 instances had a worst init above 0.02 (0.041–0.052, still
    decreasing slowly; the margin-normalised nuclear norm 1–2% above the optimum), the 90th
    percentile was 0.0094, the median 5e-4; at n=2, T=3, d=4 it was 5 of 30 (one stuck at
    1 − corr 0.7, rank 1 against a rank-2 optimum, unchanged after 20000 iterations). Over base
    seeds 0–15 (quick) the median-of-5 ratio stayed ≤ 0.31. Every instance is reported: its runs'
    1 − corr, nuclear-norm excess, correlation with the Frobenius solution, and where the
    reference code's ∇L/(‖∇L‖ + eps) would have frozen.

    float64: with the eps-normalised step every run froze once ‖∇L‖ < eps (iteration 85–97 here,
    ‖W‖ ≈ 65–190); with the scaled gradient the direction is exact (vs mpmath: 2e-15 at
    ‖∇L‖ ≈ 1e-1300) and ‖W_k‖ grows to ~1.5e4 (log10 ‖∇L‖ ≈ −2300 to −3100) within the quick
    budget. float64 then limits only tail terms > 745 nats below the largest one (dropped: below
    float64 resolution relative to it). What remains at large ‖W‖ is the fixed step: on the old
    n=2, T=3, d=4 instance 1 − corr bottoms out near ‖W‖ ≈ 1e3–1e4 and rises to 1.2e-4 at
    ‖W‖ = 5e5 with lr 0.1, 7e-5 with lr 0.05, 2.5e-5 with lr 0.025: discretisation, not rounding."""
    seed = ctx.seed_for()
    B, iters = ctx.size(4, 8), ctx.size(1500, 2500)

    def run():
        insts, nucs, sds, cfn = _kq_instances(seed)
        r = ns.train([i for i in insts for _ in range(B)], method="ngd", lr=0.1, iters=iters, param="KQ", seed=seed,
                     init=0.01, targets={"nuc": np.stack([nu.W for nu in nucs for _ in range(B)])}, device=ctx.device)
        return insts, nucs, sds, cfn, r

    insts, nucs, sds, cfn, r = ctx.reference("ngd_KQ", run, B, iters)
    per, det = [], []
    eps = float(np.finfo(np.float64).eps)
    for j, inst in enumerate(insts):
        rows = slice(j * B, (j + 1) * B)
        target = form["limit"](inst, inst.opt, "KQ")
        c = _cos(r.W[rows], target)
        per.append(float(np.max(1 - c)))
        W = r.W[rows]
        m = np.einsum("kij,bij->bk", nucs[j].A, W)
        excess = [float(np.linalg.norm(W[b] / m[b].min(), "nuc") / nucs[j].value - 1) for b in range(B)]
        lg = r.log10_grad_norm[:, rows]
        below = lg < np.log10(eps)
        frozen_at = [int(np.argmax(below[:, b]) + 1) if below[:, b].any() else None for b in range(B)]
        det.append({"instance_seed": sds[j], "corr_fro_nuc_solutions": cfn[j], "one_minus_corr": (1 - c).tolist(),
                    "nuclear_norm_excess_of_margin_normalised_W_k": excess,
                    "corr_with_fro": _cos(W, ns.solve_att_svm(inst.X, inst.z, inst.opt).W).tolist(),
                    "norm_W_final": r.norm[-1, rows].tolist(), "log10_grad_norm_final": lg[-1].tolist(),
                    "iteration_where_grad_norm_fell_below_eps (eps-normalised step froze)": frozen_at,
                    "selected_is_opt": bool(np.all(r.selected[rows] == inst.opt))})
    err = float(np.median(per))
    return compare(err, 0.02, "(K,Q) GD → nuclear Att-SVM direction on most instances; median over instances of the "
                   "worst init's 1 − corr ≤ 0.02 after the budget (90th percentile 0.008 over 80 instances). " + ANGLE_WHY,
                   seeds=[seed] + sds, sizes={"n": KQ_SIZE[0], "T": KQ_SIZE[1], "d": KQ_SIZE[2], "instances": len(insts),
                                              "B": B, "iters": iters},
                   device=ctx.device, resolution=direction_resolution(err, 0.02), resolution_units=ANGLE_UNITS,
                   details={"worst_one_minus_corr_per_instance": per, "instances": det})


register(Claim(
    id="svm.gd_direction",
    title="GD on W (or on (K,Q)) diverges in norm and converges in direction to the Att-SVM",
    statement=r"\|W_k\|\to\infty,\ \frac{\langle W_k,W^{mm}\rangle}{\|W_k\|\|W^{mm}\|}\to1\ \text{(global when non-optimal scores are equal; locally otherwise, to the Att-SVM of the selected set)};\ (K,Q):\ KQ^\top\to W^{mm}_*\ \text{in direction}",
    source=SOURCE + "; Vasudeva, Deora, Thrampoulidis (2024)",
    kind="theorem",
    form={"limit": _limit, "correlation": ns.correlation},
    checks=(
        Check("correlation_vs_torch", "numeric", _corr_numeric, "form's correlation vs torch cosine_similarity"),
        Check("ngd_global", "trained", _gd_global, "NGD in the global regime vs the Frobenius Att-SVM"),
        Check("ngd_local_set", "trained", _gd_local, "NGD in a local cone vs the Att-SVM of the selected set"),
        Check("ngd_KQ", "trained", _gd_KQ, "NGD on (K,Q) vs the nuclear Att-SVM"),
    ),
    mutants=REG_GD_MUTANTS,
    no_symbolic="an asymptotic statement about an optimisation path (a limit of argmins / GD iterates): the evidence is the "
                "trained path against the cvxpy Att-SVM solution, no closed form to derive in SymPy",
))

# --------------------------------------------------------------------------------------------
# svm.fast_rates (evidence)   form: {name: (method, lr)} optimiser configurations


RATE_LEVEL = 0.99


def _fit_slope(k: np.ndarray, gap: np.ndarray, lo: int, hi: int, floor: float = 1e-12) -> tuple[float, int]:
    """Least-squares slope of log(1 − corr) against log k over 24 log-spaced iterations in
    [lo, hi] (1-based), ignoring points below ``floor`` (float64 cannot resolve 1 − corr much
    below 1e-16). Returns (slope, points used); NaN with fewer than 4 points."""
    ks = np.unique(np.geomspace(lo, hi, 24).astype(int))
    g = gap[ks - 1]
    use = g > floor
    if use.sum() < 4:
        return float("nan"), int(use.sum())
    return float(np.polyfit(np.log(ks[use]), np.log(g[use]), 1)[0]), int(use.sum())


def _rates(form, ctx):
    """Each optimiser of form (GD, normalised GD, Polyak; batched inits) runs the same budget K;
    rates are compared as slopes of log(1 − corr(W_k, W^mm)) against log k over the last decade
    [K/10, K], fitted per init (the slowest init for the fast methods, the fastest for GD).

    Supports the claim when both fast methods' slopes are ≤ −0.5 (the local slope of
    C log²k/k at k ≈ 10³ is −1 + 2/ln k ≈ −0.7; a 1/log k rate has slope −1/ln k ≈ −0.14), GD's
    slope is at most a quarter of the slower fast slope, and both fast methods reach corr 0.99
    within K. Error: the largest of −0.5/s_fast, 4·s_GD/s_fast and (iterations to 0.99)/K of the
    slower fast method (≤ 1 supports; inf when a fast slope is ≥ 0; for a method that did not
    reach 0.99 the extrapolated estimate below, which is > K).

    Iterations to corr 0.99 are reported uncensored: a method that never reached it within K is
    reported as not reached, with the lower bound K + 1 and a power-law extrapolation from its
    fitted slope, labelled as an estimate (before: GD got exactly 5× the fast methods' budget, so
    a run that never reached 0.99 gave the ratio 5.0018 by construction).

    Regime: the VDT'24 rates are for global convergence, so the instance is drawn where it is
    guaranteed: equal non-optimal scores and orthonormal queries (the loss separates over sequences,
    each term decreasing in its own s_opt). With random queries about 1 instance in 60 has a region
    where NGD lingers in a non-opt token set for > 4000 iterations. NGD and Polyak use the scaled
    gradient (numerics.loss_and_scaled_grad): with the plain one Polyak froze at ‖∇L‖ ≈ 1e-150
    (iteration ~1000, 1 − corr stuck at 2e-5) and its slope would measure float64, not the method."""
    seed = ctx.seed_for()
    inst = _inst(5, 6, 8, seed % 1000, "global", 0.0, "orthogonal")
    K, B = ctx.size(1500, 3000), ctx.size(4, 16)

    def run(method, lr):
        Wmm = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        r = ns.train(inst, method=method, lr=lr, iters=K, B=B, seed=seed, init=0.01, targets={"mm": Wmm}, device=ctx.device)
        return 1.0 - r.corr["mm"], r.iterations_to(RATE_LEVEL, "mm"), np.any(r.selected != inst.opt, axis=1)

    slopes, reach, det, curves, over_K = {}, {}, {}, {}, {}
    for name in ("gd", "ngd", "polyak"):
        method, lr = form[name]
        gap, k99, off = ctx.reference("run", lambda: run(method, lr), method, lr, K, B)
        per = [_fit_slope(np.arange(1, K + 1), gap[:, b], K // 10, K) for b in range(B)]
        s_b = np.array([p[0] for p in per])
        slopes[name] = float(np.min(s_b)) if name == "gd" else float(worst(s_b))
        reached = k99 <= K
        worst_gap = gap[-1].max()
        entry = {"method": method, "lr": lr, "slope_per_init": s_b.tolist(), "fit_points": [p[1] for p in per],
                 "one_minus_corr_at_K": gap[-1].tolist(), "runs_ending_off_opt": int(off.sum())}
        if reached.all():
            entry["iterations_to_0.99"] = int(k99.max())
            over_K[name] = float(k99.max()) / K
        else:
            s_w = float(np.max(s_b))
            # power law through the slowest init's last point: K·(gap_K/0.01)^{1/|s|}, in logs (it can exceed float64)
            log_est = math.log(K) + math.log(worst_gap / (1 - RATE_LEVEL)) / -s_w if s_w < 0 else math.inf
            entry["iterations_to_0.99"] = (f"not reached within K = {K} by {int((~reached).sum())}/{B} inits: "
                                           f"lower bound {K + 1}")
            entry["log10_iterations_to_0.99_extrapolated_estimate (power law from the slowest init's slope)"] = log_est / math.log(10)
            over_K[name] = math.exp(smallest(log_est, 700.0)) / K
        reach[name] = entry["iterations_to_0.99"]
        det[name] = entry
        curves[f"{name} (slope {slopes[name]:.2f})"] = (np.arange(1, K + 1), np.maximum(gap.max(1), 1e-300))
    _figure(ctx, "rates", curves, "1 − corr(W_k, W^mm)  (slowest init)", logx=True)
    s_fast = largest(slopes["ngd"], slopes["polyak"])
    errs = {"fast_slope_vs_-0.5": (-0.5 / s_fast) if s_fast < 0 else np.inf,
            "4_x_gd_slope_over_fast_slope": (4 * slopes["gd"] / s_fast) if s_fast < 0 else np.inf,
            "fast_iterations_to_0.99_over_K": largest(over_K["ngd"], over_K["polyak"])}
    e = worst(errs)
    return compare(e, 1.0, "evidence: log-log slopes of 1 − corr over [K/10, K]: fast methods ≤ −0.5 "
                   "(C log²k/k), GD's slope ≤ a quarter of theirs (1/log k), fast methods at 0.99 within K; error = largest of "
                   "−0.5/s_fast, 4 s_GD/s_fast, k_0.99/K. Resolution: each criterion is a ratio to its threshold, so the "
                   "verdict turns when the largest ratio grows by tolerance/error − 1 (a property of the measured rates, "
                   "not a comparison with a reference value)",
                   seeds=[seed], sizes={"n": 5, "T": 6, "d": 8, "K": K, "B": B}, device=ctx.device,
                   resolution=(1.0 / e - 1.0) if math.isfinite(e) and e > 0 else math.nan,
                   resolution_units="relative increase of the largest criterion ratio (−0.5/s_fast, 4·s_GD/s_fast or "
                   "k_0.99/K, fitted log-log slopes s) that is rejected (tolerance/error − 1; one-sided)",
                   details={**errs, "slopes": slopes, "iterations_to_0.99": reach, "methods": det, "queries": "orthonormal"})


register(Claim(
    id="svm.fast_rates",
    title="Normalised GD and Polyak step align with W^mm far faster than GD",
    statement=r"\text{NGD, Polyak: }\Big\langle\frac{W_k}{\|W_k\|},\frac{W^{mm}}{\|W^{mm}\|}\Big\rangle\ge1-C\frac{\log^2k}{k}\ \text{vs GD: }1-O(1/\log k)",
    source=SOURCE + "; Vasudeva, Deora, Thrampoulidis (2024)",
    kind="evidence",
    form={"gd": ("gd", 1.0), "ngd": ("ngd", 0.1), "polyak": ("polyak", 1.0)},
    checks=(Check("rate_slopes", "trained", _rates, "log-log slopes of 1 − corr per optimiser; uncensored iterations to 0.99"),),
    mutants=(
        Mutant("ngd_unnormalised", "dropped term", "the 'normalised' step without the normalisation (plain GD)",
               {"gd": ("gd", 1.0), "ngd": ("gd", 0.1), "polyak": ("polyak", 1.0)}),
    ),
))

# --------------------------------------------------------------------------------------------
# svm.token_sets (conjecture)   form: (X, z, sets) -> W^dir


def _token_sets(form, ctx):
    """Nonlinear head f = vᵀa − λ‖a‖² (two jointly optimal tokens per sequence): after NGD, the
    selected sets are read off the logits (largest jump in the sorted logit gaps; see
    numerics.selected_sets_by_gap), W^dir = form(X, z, sets); report corr(W_k, W^dir), the fit
    W_k ≈ W^fin + C_k W^dir (‖W^fin‖ bounded while C_k grows) and within-set logit differences
    (→ log(s*_t/s*_τ) = 0 here). The error is 1 − min corr(W_k, W^dir) (a measured number).

    (Before: sets = tokens with softmax mass ≥ 1e-3 and a pass/fail error with tolerance 0. On base
    seeds 6, 9, 11 an outside token still sat at logit gap ≈ 6.2 (mass ≈ 1e-3) after the budget —
    ‖W_k‖ grows slowly with this head — so it was counted in the set, W^dir was solved for the wrong
    set, and corr dropped to 0.76–0.92; against the sets that the logits do select, corr ≈ 0.99.)"""
    seed = ctx.seed_for()
    inst, sets_true = ns.make_token_set_instance(4, 5, 8, seed=seed % 1000)
    iters, B = ctx.size(1500, 3000), ctx.size(4, 8)
    r = ns.train(inst, method="ngd", lr=0.1, iters=iters, B=B, seed=seed, init=0.01, lam=0.5, device=ctx.device)
    logits = np.einsum("ntd,bde,ne->bnt", inst.X, r.W, inst.z)
    sel = ns.selected_sets_by_gap(logits)
    corrs, fins, Cs, within, outside = [], [], [], [], []
    for b in range(B):
        Wd = np.asarray(form(inst.X, inst.z, sel[b]))
        corrs.append(float(_cos(r.W[b], Wd)))
        C = float(np.sum(r.W[b] * Wd) / np.sum(Wd * Wd))
        Cs.append(C)
        fins.append(float(np.linalg.norm(r.W[b] - C * Wd)))
        l = logits[b]
        within.append(float(largest(np.ptp(l[i][sel[b, i]]) for i in range(len(l)))))
        outside.append(float(smallest(l[i][sel[b, i]].min() - l[i][~sel[b, i]].max() for i in range(len(l)))))
    err = 1.0 - smallest(corrs)
    its = np.arange(1, r.norm.shape[0] + 1)
    same = bool(np.allclose(r.norm, r.norm[:, :1], rtol=1e-6))
    runs = range(1) if same else range(B)
    _figure(ctx, "norm_growth", {(f"all {B} runs (they coincide)" if same else f"run {b}")
                                 + f": corr(W_k, W^dir) {corrs[b]:.3f}, ‖W^fin‖ {fins[b]:.2f}": (its, r.norm[:, b])
                                 for b in runs}, "‖W_k‖_F  (C_k grows, ‖W^fin‖ stays bounded)")
    return compare(err, 0.02, "conjecture: 1 − corr(W_k, W^dir) ≤ 0.02 after the budget; with W_k = W^fin + C_k W^dir, "
                   "1 − corr ≈ ‖W^fin_⊥‖²/(2‖W_k‖²) ≤ 0.02 for ‖W^fin‖ ≈ 3, ‖W_k‖ ≈ 20 (this head grows ‖W_k‖ slowly). " + ANGLE_WHY,
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 8, "iters": iters, "B": B}, device=ctx.device,
                   resolution=direction_resolution(err, 0.02), resolution_units=ANGLE_UNITS.replace("limit", "W^dir"),
                   details={"corr_Wdir": corrs, "C_k": Cs, "norm_W_fin": fins, "max_within_set_logit_gap": within,
                            "min_outside_logit_gap": outside, "norm_W_k": r.norm[-1].tolist(),
                            "sets_match_construction": bool((sel == sets_true).all()),
                            "sets_by_mass_1e-3_match": bool((ns.selected_sets(r.s) == sets_true).all())})


register(Claim(
    id="svm.token_sets",
    title="Several selected tokens: GD ≈ W^fin + C_k W^dir with W^dir the set-constrained Att-SVM (conjecture)",
    statement=r"W_k\approx W^{fin}+C_kW^{dir},\ C_k\to\infty;\ W^{dir}=\arg\min\|W\|:\ (x_{i,t}-x_{i,\tau})^\top Wz_i=0\ (t,\tau\in\mathcal O_i),\ \ge1\ (t\in\mathcal O_i,\tau\notin\mathcal O_i)",
    source=SOURCE,
    kind="conjecture",
    form=lambda X, z, sets: ns.solve_att_svm(X, z, sets=sets).W,
    checks=(Check("fit_after_ngd", "trained", _token_sets, "NGD with a nonlinear head vs the set-constrained Att-SVM"),),
    mutants=(
        Mutant("no_equality_constraints", "dropped term", "plain Att-SVM for the top selected token only (equalities dropped)",
               lambda X, z, sets: ns.solve_att_svm(X, z, np.argmax(sets, 1)).W),
    ),
))
