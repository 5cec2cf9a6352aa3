"""Group C, continued: the regularisation path and gradient descent converge in direction to the
Att-SVM solution (GD on (K,Q): evidence only, svm.gd_direction_kq) (lecture notes 002, optimisation part;
Tarzanagh et al. 2023). Binds theory/att_svm.py and numerics/att_svm.py to checks, tolerances and mutants."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from numerics import att_svm as ns
from numerics.att_svm import AttSVMInstance
from proofs_checks.registry import Check, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, relative, smallest
from proofs_checks.claims._att_svm_common import (ANGLE_UNITS, ANGLE_WHY, ORTH_SIZE, SOURCE, _cos, _figure, _inst,
                                                  _kq_instance, _orth_inst, coherence, direction_resolution, _stuck_run,
                                                  STUCK_SEED, STUCK_STEPS, _UNIQUE)


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
    rp = ctx.reference("path", lambda: ns.regularization_path(inst, radii, inner=ctx.size(150, 250), lr=0.3, B=1, seed=seed,
                                                              switches=True, device=ctx.device))  # form-independent
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


def nuclear_excess(W, nuc) -> float:
    """How far the direction of ``W`` is from the SET of nuclear-norm Att-SVM minimisers: scale ``W`` so
    that its smallest margin ⟨A_k, W⟩ is 1 and return ‖W/m‖_⋆ / v⋆ − 1 (``nuc``: the certified solve,
    ``A`` its constraints, ``value`` v⋆). 0 exactly on the minimisers' directions, whichever minimiser
    (the optimum can be a segment); ``inf`` when some margin is ≤ 0 (the direction violates a constraint)."""
    m = float(np.min(np.einsum("kij,ij->k", np.asarray(nuc.A), np.asarray(W, dtype=float))))
    if not m > 0:
        return math.inf
    return float(np.linalg.norm(np.asarray(W, dtype=float) / m, "nuc") / nuc.value - 1.0)


#: the (K,Q) path's criterion: nuclear excess of its margin-normalised end point ≤ KQ_PATH_TOL (measured
#: 0.0067 at R = 100 on the fixed instance, decaying like log R / R: 0.057 at R = 9.5, 0.017 at R = 31)
KQ_PATH_TOL = 0.02


def _regpath_KQ(form, ctx):
    """(K,Q) path (‖K‖²+‖Q‖² ≤ 2R) on an instance where the nuclear and Frobenius solutions differ: the
    clause says the path's direction tends to the SET of nuclear-norm minimisers (the optimum can be a
    segment), so the end point is scored by its nuclear excess after margin normalisation
    (:func:`nuclear_excess`), compared with the form's limit scored the same way: the error is
    |‖W_R/m(W_R)‖_⋆ − ‖W_form/m(W_form)‖_⋆| / ‖W_form/m(W_form)‖_⋆ (inf when the form's limit violates
    a constraint). Correlation with the form's limit (one minimiser) is reported, not judged."""
    inst, sd, fro_nuc = _kq_instance(0)  # fixed: an instance where the two solutions differ (see _kq_instance)
    target = form["limit"](inst, inst.opt, "KQ")
    radii = np.geomspace(0.5, ctx.size(100.0, 200.0), ctx.size(10, 14))

    def reference():  # form-independent: the certified nuclear solve, the path, the Frobenius solution
        return (ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc"),
                ns.regularization_path(inst, radii, param="KQ", inner=ctx.size(200, 300), lr=0.3, B=1, seed=sd, device=ctx.device),
                ns.solve_att_svm(inst.X, inst.z, inst.opt).W)

    nu, rp, W_fro = ctx.reference("path", reference)
    excess = [nuclear_excess(rp.W[k, 0], nu) for k in range(len(radii))]
    e_form = nuclear_excess(target, nu)
    err = abs((1 + excess[-1]) / (1 + e_form) - 1) if math.isfinite(e_form) else math.inf
    c = _cos(rp.W[:, 0], target)
    c_fro = _cos(rp.W[:, 0], W_fro)
    _figure(ctx, "regpath_KQ", {"nuclear excess of the margin-normalised path": (radii, np.maximum(excess, 1e-16))},
            "nuclear excess", "R", logx=True)
    return compare(err, KQ_PATH_TOL, "TLTO'23: the (K,Q) path's direction tends to the set of nuclear-norm Att-SVM minimisers; "
                   f"the margin-normalised end point's nuclear norm within {KQ_PATH_TOL:g} (relative) of the form's limit's at "
                   "the largest R (the path's excess decays like log R/R: measured 0.0067 at R = 100)",
                   seeds=[sd], sizes={"n": 2, "T": 3, "d": 4}, device=ctx.device,
                   resolution_units="relative nuclear-norm excess (tolerance + |error|)",
                   details={"nuclear_excess_path": excess, "nuclear_excess_form_limit": e_form, "optimum": nu.value,
                            "corr_with_form_limit": c.tolist(), "corr_fro": c_fro.tolist(), "corr_fro_nuc_solutions": fro_nuc})


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


def _limit_form() -> dict:
    """The form of the three path/GD claims: the Att-SVM limit and the correlation that measures alignment."""
    return {"limit": _limit, "correlation": ns.correlation}


#: their shared check of the form's correlation
_CORR_CHECK = Check("correlation_vs_torch", "numeric", _corr_numeric, "form's correlation vs torch cosine_similarity")


def _opposite_label_pair(scores):
    """One sequence (T = 4, d = 5, unit tokens with the given scores vᵀx, query e_5) twice, labels +1 and −1:
    the Att-SVM for (opt, opt') = (argmax, argmin) is infeasible (the two sequences' constraints cancel)."""
    rng = np.random.default_rng(0)
    v = np.eye(5)[0]
    X1 = ns._tokens_with_scores(np.asarray(scores, dtype=float), v, rng.normal(size=(len(scores), 5)))
    X = np.stack([X1, X1])
    z = np.stack([np.eye(5)[4], np.eye(5)[4]])
    y = np.array([1.0, -1.0])
    return AttSVMInstance(X, z, y, v, np.argmax(ns.token_scores(X, y, v), 1), ns.token_scores(X, y, v))


def _regpath_infeasible(ctx) -> Counterexample:
    """Without feasibility: one sequence with scores of both signs, repeated with the opposite label. Every
    W gives outputs a, −a, so L(W) = (ℓ(a) + ℓ(−a))/2 ≥ ℓ(0) (convexity), with equality where a(W) = 0:
    such a W* is found at finite norm (bisection along r·x_tᵀ-direction), so for every R ≥ ‖W*‖ the
    constrained minimum is attained at the fixed W*: the selection W̄_R = W* has W̄_R/R → 0, no unit direction."""
    inst = _opposite_label_pair((0.5, 0.2, 0.1, -0.6))
    X, z, y, v = ns._as_batch(inst, 1, torch.device("cpu"))
    D = torch.as_tensor(np.outer(inst.X[0, 3], inst.z[0]))[None]  # raises the logit of the negative-score token

    def a(r):
        s = ns.softmax_mass(r * D, X, z)
        return float((s[0, 0] * torch.as_tensor(inst.gamma[0])).sum())

    lo, hi = 0.0, 50.0  # a(0) = mean score > 0, a(50) ≈ −0.6 < 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if a(mid) > 0 else (lo, mid)
    Wstar = lo * D
    Lstar = float(ns.loss_and_grad(Wstar, X, z, y, v)[0][0])
    floor = float(np.logaddexp(0.0, 0.0))
    nW = float(torch.linalg.norm(Wstar))
    return Counterexample({"n": 2, "T": 4, "d": 5, "scores": "(0.5, 0.2, 0.1, −0.6), sequence repeated with label −y"},
                          "W_path", f"L(W*) = {Lstar:.15f} = log 2 (the global minimum) at ‖W*‖ = {nW:.4f}: the selection W̄_R = W* "
                          f"(a minimiser in every ball of radius R ≥ {nW:.3f}) has W̄_R/R → 0, not a unit direction", violated=abs(Lstar - floor) < 1e-12,
                          error=1.0, tolerance=0.0, justification="L ≥ log 2 everywhere (Jensen) and L(W*) = log 2 to "
                          "float64 rounding: W* is a global minimiser inside every ball of radius ≥ ‖W*‖")


#: relative spread of the nuclear Att-SVM's optimal face on instance KQ_STUCK_SEED: extremising 3 random linear
#: functionals over {margins ≥ 1, ‖W‖_⋆ ≤ (1 + 1e-7)v⋆} (Clarabel) moved W by at most 1.3e-3 of ‖W^mm_⋆‖ (measured,
#: issue 43): the set of minimisers is W^mm_⋆ to that accuracy, so its directions lie within ~1.3e-3 of W^mm_⋆'s
KQ_STUCK_FACE_SPREAD = 1.3e-3


def _regpath_rank(ctx) -> Counterexample:
    """Without m ≥ d: K, Q ∈ R^{d×1} make KQᵀ rank 1; on an instance whose nuclear Att-SVM has rank 2 (and whose
    set of minimisers is a single point to KQ_STUCK_FACE_SPREAD), the best rank-1 direction has corr
    σ₁/‖W^mm_⋆‖_F < 1 with it (Eckart–Young), so no rank-1 path tends to the set of minimisers: the distance of
    every rank-1 direction from the set's directions exceeds 1 − σ₁/‖W^mm_⋆‖_F − 2·spread."""
    inst = ns.make_instance(*KQ_SIZE, seed=KQ_STUCK_SEED, setting="global")
    sv = np.linalg.svd(ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc").W, compute_uv=False)
    best = float(sv[0] / np.linalg.norm(sv))
    tol = 1e-3 + 2 * KQ_STUCK_FACE_SPREAD
    return exceeds({"n": KQ_SIZE[0], "T": KQ_SIZE[1], "d": KQ_SIZE[2], "m": 1, "instance": f"global seed {KQ_STUCK_SEED}"},
                   "KQ_path", f"W^mm_⋆ has singular values {sv[0]:.3f}, {sv[1]:.3f} and is the only minimiser to "
                   f"{KQ_STUCK_FACE_SPREAD:g}: every rank-1 KQᵀ has 1 − corr ≥ {1 - best:.4f} with every minimiser's "
                   "direction, so the path cannot tend to the set", error=1 - best,
                   tolerance=tol,
                   justification="Eckart–Young: corr(W, M) ≤ σ₁(M)/‖M‖_F for rank-1 W; the tolerance adds twice the "
                   "optimal face's measured spread (KQ_STUCK_FACE_SPREAD) to 1e-3")


_FEASIBLE = Hypothesis("feasible", r"\text{Att-SVM feasible: }\exists W:\ (x_{i,\mathrm{opt}_i}-x_{it})^\top Wz_i\ge1\ \forall i,\,t\ne\mathrm{opt}_i",
                       counterexample=_regpath_infeasible)
_LOSS = setting("logistic_loss", r"\ell(u)=\log(1+e^{-u})\ \text{(TLTO'23 Assumption A: strictly decreasing, } \ell'\text{ bounded, Lipschitz)}",
                "the model's loss")

_FEASIBLE_GD = setting("feasible", _FEASIBLE.latex, (
    "the limits W^mm, W^mm_sel are the Att-SVM solutions, undefined without it (nearly orthogonal "
    "tokens make it feasible, and a locally optimal set is one whose Att-SVM is feasible)"))

declare(
    id="svm.reg_path",
    title="Regularisation path converges in direction to the Att-SVM (Frobenius for W, nuclear for (K,Q) with m ≥ d)",
    hypotheses=(_UNIQUE, _FEASIBLE, _LOSS,
                Hypothesis("m_ge_d", r"(K,Q):\ K,Q\in\mathbb R^{d\times m},\ m\ge d\ \text{(here }m=d)",
                           "the key/query width m is at least d (else KQᵀ has rank ≤ m)", counterexample=_regpath_rank)),
    clauses=(
        Clause("W_path", r"\text{every selection }\bar W_R\in\mathrm{argmin}_{\|W\|_F\le R}\mathcal L(W)\text{ has }"
               r"\lim_{R\to\infty}\bar W_R/R=W^{mm}/\|W^{mm}\|_F",
               "cited", "Tarzanagh, Li, Thrampoulidis, Oymak (2023) Thm 2 (stated in the lecture notes with these hypotheses): "
               "the limit of the global constrained minimisers", ("W_path",),
               also=(("checked", "one instance per seed, n = 4, T = 5, d = 6: 1 − corr ≤ 0.01 at R = 150 (quick) / 300 "
                                 "(default), no drop of corr above 0.01 between consecutive radii of the upper half of 10/14 radii "
                                 "(global search per radius)"),)),
        Clause("KQ_path", r"\|K\|_F^2+\|Q\|_F^2\le2R:\ \mathrm{dist}\Big(\frac{\bar K_R\bar Q_R^\top}{\|\bar K_R\bar Q_R^\top\|},"
               r"\frac{\mathcal W^{mm}_\star}{\|\mathcal W^{mm}_\star\|}\Big)\to0\ "
               r"(\mathcal W^{mm}_\star=\text{the set of minimisers of }\|W\|_\star\text{ s.t. the constraints, possibly a segment})",
               "cited",
               "Tarzanagh, Li, Thrampoulidis, Oymak (2023): the (K,Q) regularisation path converges in direction to the "
               "set of nuclear-norm Att-SVM solutions (with n = T = d = 2, x_{1,·} = (±½, 0), x_{2,·} = (0, ±½), queries "
               "z_1 = e_1, z_2 = e_2, opt = the +½ tokens, every [[1, b], [b, 1]], |b| ≤ 1, is optimal)", ("KQ_path",),
               also=(("checked", "one fixed instance n = 2, T = 3, d = 4 (Frobenius and nuclear solutions at corr 0.90): "
                                 f"the margin-normalised path end's nuclear norm within {KQ_PATH_TOL:g} (relative) of the "
                                 "form's limit's at R = 100 (quick) / 200 (default)"),)),
    ),
    source=SOURCE + "; Thm 2",
    kind="theorem",
    form=_limit_form(),
    checks=(
        _CORR_CHECK,
        Check("W_path", "trained", _regpath_W, "projected GD path over increasing R vs the Frobenius Att-SVM"),
        Check("KQ_path", "trained", _regpath_KQ, "(K,Q) path vs the nuclear Att-SVM where Frobenius differs"),
    ),
    mutants=REG_GD_MUTANTS,
    no_symbolic="an asymptotic statement about an optimisation path (a limit of argmins / GD iterates): the evidence is the "
                "trained path against the cvxpy Att-SVM solution, no closed form to derive in SymPy",
)


#: per-init tolerance of ngd_global on 1 − corr(W_k, W^mm): NGD grows ‖W_k‖ ≈ 0.1k, the initial component
#: off W^mm (‖0.01·N(0, I_{24×24})‖ ≈ 0.24) stays, so 1 − corr ≈ 0.24²/(2(0.1k)²) ≈ 3e-6 at k = 1000
#: (measured: worst 3.5e-6 over 60 instances × 4 inits); 1e-4 leaves a factor 30
GLOBAL_TOL = 1e-4


def _gd_global(form, ctx):
    """Normalised GD (lr 0.1, as the reference code) from small init, several inits batched, on an
    instance of the regime of the global-convergence theorem (Vasudeva, Deora, Thrampoulidis 2024, as
    the lecture notes state it): equal non-optimal scores AND nearly orthogonal tokens (here token
    components ⟂ v orthonormal, scores ≤ 0.3, so |⟨x_it, x_jτ⟩| ≤ 0.09; orthonormal queries).
    Every init: ‖W_k‖ grows, attention → opt, 1 − corr(W_k, form's limit) ≤ GLOBAL_TOL after the
    budget. (Before: random tokens and queries, n = 5, T = 6, d = 8: equal scores only; 7 of 300
    instance seeds ended above 0.01 after 1000 iterations, 5 of them in another token set for good:
    see ngd_equal_scores_not_enough.)"""
    seed = ctx.seed_for()
    inst = _orth_inst(seed % 1000)
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
    return compare(worst(errs), GLOBAL_TOL, "VDT'24 global convergence (equal non-optimal scores, nearly orthogonal tokens); "
                   f"every init: 1 − corr ≤ {GLOBAL_TOL:g} after the budget (1 − corr ≈ ‖W_0,⊥‖²/(2‖W_k‖²) ≈ 3e-6 at "
                   "k = 1000, ‖W_k‖ ≈ 0.1k; measured worst 3.5e-6 over 60 instances × 4 inits), attention on opt",
                   seeds=[seed], sizes={"n": ORTH_SIZE[0], "T": ORTH_SIZE[1], "d": ORTH_SIZE[2], "iters": iters, "B": B},
                   device=ctx.device, resolution=direction_resolution(errs["one_minus_corr_final"], GLOBAL_TOL),
                   resolution_units=ANGLE_UNITS,
                   details={**errs, "final_corr": c.tolist(), "norm_final": r.norm[-1].tolist(), "coherence": coherence(inst.X),
                            "iterations_to_0.99 (vs numerics' W^mm; iters+1 = not reached)": reach.tolist(),
                            "log10_grad_norm_final": r.log10_grad_norm[-1].tolist()})


def _gd_equal_scores_not_enough(form, ctx):
    """Equal non-optimal scores alone do not give global convergence: on STUCK_SEED (n = 5, T = 6, d = 8,
    random tokens and queries) NGD from init 0.01 settles by iteration ~50 in a token set other than opt
    that is locally optimal (TLTO'23: every support token of its Att-SVM scores lower), and its direction
    follows that set's Att-SVM (form's limit for the selected set), not W^mm. Errors (each ≤ 1 holds):
    corr(W_k, W^mm_sel)/0.8 inverted, (1 − corr(W_k, W^mm))/0.1 inverted, the set equal to opt or not
    locally optimal (inf). The limit itself is TLTO'23's local convergence; measured runs (module
    constant) show it persisting to k = 20000."""
    inst, r = _stuck_run()
    sel = r.selected[0]
    to_opt = form["limit"](inst, inst.opt, "W")
    to_sel = form["limit"](inst, sel, "W")
    c_sel, c_opt = float(_cos(r.W[0], to_sel)), float(_cos(r.W[0], to_opt))
    local = bool(ns.is_locally_optimal(inst, sel))
    errs = {"set_is_opt_or_not_locally_optimal": math.inf if (np.array_equal(sel, inst.opt) or not local) else 0.0,
            "corr_with_selected_set_svm_below_0.8": 0.8 / c_sel if c_sel > 0 else math.inf,
            "one_minus_corr_with_Wmm_below_0.1": 0.1 / (1 - c_opt) if c_opt < 1 else math.inf}
    return compare(worst(errs), 1.0, "normalised: the run selects a locally optimal set ≠ opt, aligns with its Att-SVM "
                   "(corr ≥ 0.8 after 300 steps; measured 0.947, 0.955 at 1000) and stays away from W^mm (1 − corr ≥ 0.1; measured 0.34)",
                   seeds=[STUCK_SEED], sizes={"n": 5, "T": 6, "d": 8, "steps": STUCK_STEPS},
                   details={**errs, "selected": sel.tolist(), "opt": inst.opt.tolist(), "corr_with_selected_set_svm": c_sel,
                            "corr_with_Wmm": c_opt, "selected_set_locally_optimal": local,
                            "settled_at_iteration": int(r.settled[0]), "coherence": coherence(inst.X)})


LOCAL_SLACK, LOCAL_CORR0, LOCAL_RHO = 0.5, 0.97, 8.0
#: the largest fraction of runs that may leave their starting set: the theorem's cone width μ depends on the
#: instance, so a fixed start can lie outside it (instance seed 866: 1 of 3 runs left at corr 0.97, ‖W_0‖ = 8‖W^mm_local‖)
LOCAL_MAX_LEFT = 0.5


def _local_start(Wl: np.ndarray, rng: np.random.Generator, B: int) -> np.ndarray:
    """B initialisations ``W_0 = ρ‖W_l‖(c₀ Ŵ_l + √(1 − c₀²) N̂_b)`` (ρ = LOCAL_RHO, c₀ = LOCAL_CORR0):
    correlation exactly c₀ with W^mm_local, N̂_b a Gaussian direction orthogonal to it; (B,d,d)."""
    Wh = Wl / np.linalg.norm(Wl)
    N = rng.normal(size=(B,) + Wl.shape)
    N -= np.einsum("bij,ij->b", N, Wh)[:, None, None] * Wh
    N /= np.linalg.norm(N, axis=(1, 2))[:, None, None]
    return LOCAL_RHO * np.linalg.norm(Wl) * (LOCAL_CORR0 * Wh + np.sqrt(1 - LOCAL_CORR0 ** 2) * N)


def _gd_local(form, ctx):
    """Local regime: NGD started in the cone of a locally-optimal token set, at correlation 0.97 with
    its Att-SVM W^mm_local (1 − corr = 0.03, three times the tolerance) and ‖W_0‖ = 8‖W^mm_local‖,
    converges in direction to THAT set's Att-SVM (form's limit for the starting set), as the clause
    says. The cone's width μ depends on the instance (the clause: "for some μ"), so a fixed start can lie
    outside it: a run that leaves its starting set is never scored against the set it ends in; it is
    counted, and more than LOCAL_MAX_LEFT of the runs leaving fails the check (error: the fraction
    scaled so that LOCAL_MAX_LEFT maps to the tolerance; all runs leaving: inf).

    Measured (instance seeds 0–11, B = 3, 2000 iterations): at correlation 0.97, ‖W_0‖ = 8‖W^mm_local‖
    no run left the local set, worst 1 − corr 7.6e-4; at correlation 0.9, ‖W_0‖ = 4‖W^mm_local‖ 1 of 36
    runs left it (1 − corr 0.21 with W^mm_local), so that start is not inside the cone of the theorem
    for every instance. (Until issue 43 each run was scored against the set it ended in.)

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
    target = form["limit"](inst, inst.local, "W")
    in_local = np.all(sel == inst.local, axis=1)
    for b in range(B):
        final.append(float(_cos(r.W[b], target)))
        start.append(float(_cos(W0[b], target)))
        if in_local[b]:  # a run that left started outside this instance's cone: counted below, never scored elsewhere
            errs[f"run{b}"] = 1.0 - final[-1]
    scored = dict(errs)  # the direction errors of the runs that stayed: the stated angle is theirs, not the leave count's
    left = float(np.mean(~in_local))
    errs["fraction_left_starting_set (1/2 ↦ tolerance, a stated policy)"] = 0.01 * left / LOCAL_MAX_LEFT if left < 1 else math.inf
    in_opt = np.all(sel == inst.opt, axis=1)
    reach = r.iterations_to(0.99, "local")
    _figure(ctx, "ngd_local_corr", {f"run {b}": (np.arange(1, iters + 1), r.corr["local"][:, b]) for b in range(smallest(4, B))},
            "corr(W_k, W^mm_local)", logx=True)
    return compare(worst(errs), 0.01, "local convergence (TLTO'23 Thm 3): every run that stays in its starting set has "
                   "1 − corr with that set's Att-SVM ≤ 0.01 after the budget, and at most half the runs leave it, from "
                   "1 − corr = 0.03 at the start (measured ≤ 7.6e-4 over 12 instances × 3 runs at "
                   "2000 iterations; 1 − corr decays like ‖W^⊥‖²/‖W_k‖²). " + ANGLE_WHY,
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 8, "B": B, "iters": iters}, device=ctx.device,
                   resolution=direction_resolution(worst(scored), 0.01) if scored else math.inf, resolution_units=ANGLE_UNITS,
                   details={**errs, "worst_direction_error_of_scored_runs": worst(scored) if scored else None,
                            "start_corr_with_form": start, "final_corr_with_form": final,
                            "start_norm_over_norm_Wmm_local": LOCAL_RHO, "final_norm": r.norm[-1].tolist(),
                            "iterations_to_0.99_vs_W^mm_local (iters+1 = not reached; runs that left the set never)": reach.tolist(),
                            "runs_in_local_set": int(in_local.sum()), "runs_at_opt": int(in_opt.sum()),
                            "runs_in_other_set": int((~in_local & ~in_opt).sum()),
                            "selection_settled_at_iteration": r.settled.tolist(), "selected": sel.tolist(),
                            "local": inst.local.tolist(), "opt": inst.opt.tolist()})


KQ_SIZE, KQ_FRO_NUC_MAX = (2, 5, 8), 0.92
#: instances per seed (quick, default) and the per-instance criterion of svm.gd_direction_kq
KQ_INSTANCES, KQ_TOL, KQ_MIN_FRACTION = (8, 16), 0.02, 0.5
#: the instance on which (K,Q) NGD does not align with W^mm_⋆ (the 4th of base seed 11's draws)
KQ_STUCK_SEED = 11005


@functools.lru_cache(maxsize=8)
def _kq_instances(seed: int, count: int = 5):
    """``count`` instances of size KQ_SIZE drawn from ``seed`` ("global" setting), each the first
    draw (instance seeds seed·1000 + j, j = 0, 1, …) whose Frobenius and nuclear Att-SVM solutions
    have correlation < KQ_FRO_NUC_MAX, so that the (K,Q) check can tell them apart. Returns
    (instances, nuclear results, instance seeds, Frobenius–nuclear correlations, Frobenius solutions W),
    tuples computed once per process (form-independent: ≈ 2 cvxpy solves per draw); callers must not modify them."""
    insts, nucs, sds, cfn, fros = [], [], [], [], []
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
            insts.append(inst), nucs.append(nu), sds.append(base + j), cfn.append(c), fros.append(f)
        j += 1
    return tuple(insts), tuple(nucs), tuple(sds), tuple(cfn), tuple(fros)


def _gd_KQ(form, ctx):
    """NGD on (K,Q) (each gradient normalised, as the reference code, with the direction computed
    stably: numerics.loss_and_scaled_grad) on KQ_INSTANCES instances drawn from the seed, each
    with distinct Frobenius and nuclear solutions; B inits per instance, one batch.

    Evidence, not a theorem (TLTO'23 prove the nuclear limit for the (K,Q) regularisation path, not for
    GD; GD on the factorised model can end at another KKT point of the factorised margin problem, see
    ngd_KQ_not_always). Per instance: the worst init's 1 − corr(K_kQ_kᵀ, form's (K,Q) limit) after the
    budget, against KQ_TOL; the claim's criterion is that at least KQ_MIN_FRACTION of the drawn
    instances meet it (error: KQ_MIN_FRACTION / fraction, ≤ 1 supports). Measured at the quick budget
    (1500 iterations, B = 4) over 150 instances: 135 met 0.02 (90%), 4 were above 0.05, one stayed at
    0.67; at n = 2, T = 5, d = 8 after 2500 iterations 4 of 100 were above 0.02 (0.041–0.052). Every
    instance is reported: its runs' 1 − corr, nuclear-norm excess, correlation with the Frobenius
    solution, and where the reference code's ∇L/(‖∇L‖ + eps) would have frozen.

    float64: with the eps-normalised step every run froze once ‖∇L‖ < eps (iteration 85–97 at n=2,
    T=3, d=4, ‖W‖ ≈ 65–190); with the scaled gradient the direction is exact (vs mpmath: 2e-15 at
    ‖∇L‖ ≈ 1e-1300) and ‖W_k‖ grows to ~1.5e4 within the quick budget. What remains at large ‖W‖ is
    the fixed step: 1 − corr bottoms out near ‖W‖ ≈ 1e3–1e4 and rises to 1.2e-4 at ‖W‖ = 5e5 with
    lr 0.1 (7e-5 with lr 0.05, 2.5e-5 with lr 0.025): discretisation, not rounding."""
    seed = ctx.seed_for()
    B, iters, count = ctx.size(4, 8), ctx.size(1500, 2500), ctx.size(*KQ_INSTANCES)

    insts, nucs, sds, cfn, fros = _kq_instances(seed, count)
    targets = [form["limit"](inst, inst.opt, "KQ") for inst in insts]  # the form, before the (cached) training

    def run():
        return ns.train([i for i in insts for _ in range(B)], method="ngd", lr=0.1, iters=iters, param="KQ", seed=seed,
                        init=0.01, targets={"nuc": np.stack([nu.W for nu in nucs for _ in range(B)])}, device=ctx.device)

    r = ctx.reference("ngd_KQ", run, B, iters, count)
    per, det = [], []
    eps = float(np.finfo(np.float64).eps)
    for j, (inst, target) in enumerate(zip(insts, targets)):
        rows = slice(j * B, (j + 1) * B)
        c = _cos(r.W[rows], target)
        per.append(float(np.max(1 - c)))
        W = r.W[rows]
        m = np.einsum("kij,bij->bk", nucs[j].A, W)
        excess = [float(np.linalg.norm(W[b] / m[b].min(), "nuc") / nucs[j].value - 1) for b in range(B)]
        lg = r.log10_grad_norm[:, rows]
        below = lg < np.log10(eps)
        frozen_at = [int(np.argmax(below[:, b]) + 1) if below[:, b].any() else None for b in range(B)]
        det.append({"instance_seed": sds[j], "corr_fro_nuc_solutions": cfn[j], "one_minus_corr": (1 - c).tolist(),
                    "meets_tolerance": bool(per[-1] <= KQ_TOL),
                    "nuclear_norm_excess_of_margin_normalised_W_k": excess,
                    "corr_with_fro": _cos(W, fros[j]).tolist(),
                    "norm_W_final": r.norm[-1, rows].tolist(), "log10_grad_norm_final": lg[-1].tolist(),
                    "iteration_where_grad_norm_fell_below_eps (eps-normalised step froze)": frozen_at,
                    "selected_is_opt": bool(np.all(r.selected[rows] == inst.opt))})
    ok = [p <= KQ_TOL for p in per if math.isfinite(p)]
    frac = sum(ok) / len(per)
    err = KQ_MIN_FRACTION / frac if frac > 0 else math.inf
    return compare(err, 1.0, f"evidence: the fraction of drawn instances whose worst init has 1 − corr ≤ {KQ_TOL:g} after "
                   f"the budget must be ≥ {KQ_MIN_FRACTION:g} (error {KQ_MIN_FRACTION:g}/fraction; measured 90% over 150 "
                   "instances at the quick budget). A fraction, by design: the statement is that NGD aligns on most "
                   "instances, not on all (ngd_KQ_not_always)",
                   seeds=[seed, *sds], sizes={"n": KQ_SIZE[0], "T": KQ_SIZE[1], "d": KQ_SIZE[2], "instances": len(insts),
                                              "B": B, "iters": iters},
                   device=ctx.device, resolution=(1.0 / err - 1.0) if math.isfinite(err) and err > 0 else math.nan,
                   resolution_units="relative decrease of the fraction of aligned instances that is rejected (one-sided)",
                   details={"fraction_meeting_tolerance": frac, "worst_one_minus_corr_per_instance": per, "instances": det})


def _gd_KQ_stuck(form, ctx):
    """The instance KQ_STUCK_SEED (n = 2, T = 5, d = 8; nuclear Att-SVM of rank 2, σ = 3.06, 0.91): NGD on
    (K,Q) from init 0.01 ends near a rank-1 direction with 1 − corr(K_kQ_kᵀ, form's (K,Q) limit) ≈ 0.65 on
    every init (measured with 8 inits to 3000 iterations: 0.63–0.68, the second singular value of the
    margin-normalised K_kQ_kᵀ decaying, its nuclear norm 3% above the optimum). Error: 0.3/min over inits of
    1 − corr (≤ 1: every init stays ≥ 0.3 away)."""
    B, iters = ctx.size(4, 8), ctx.size(1500, 3000)
    inst = ns.make_instance(*KQ_SIZE, seed=KQ_STUCK_SEED, setting="global")
    target = form["limit"](inst, inst.opt, "KQ")  # the form, before the (cached) training
    r = ctx.reference("ngd_KQ_stuck", lambda: ns.train(inst, method="ngd", lr=0.1, iters=iters, B=B, param="KQ",
                                                        seed=KQ_STUCK_SEED, init=0.01, device=ctx.device), B, iters)
    c = _cos(r.W, target)
    gap = float(np.min(1 - c))
    sv = np.linalg.svd(r.W / np.linalg.norm(r.W, axis=(1, 2))[:, None, None], compute_uv=False)
    return compare(0.3 / gap if gap > 0 else math.inf, 1.0, "evidence that (K,Q) GD → W^mm_⋆ is not a theorem: every "
                   "init stays ≥ 0.3 from it in 1 − corr after the budget (measured 0.63–0.68)",
                   seeds=[KQ_STUCK_SEED], sizes={"n": KQ_SIZE[0], "T": KQ_SIZE[1], "d": KQ_SIZE[2], "B": B, "iters": iters},
                   device=ctx.device, details={"one_minus_corr": (1 - c).tolist(),
                                               "singular_values_of_normalised_W_k": sv[:, :3].tolist()})


declare(
    id="svm.gd_direction",
    title="GD/NGD on W diverge in norm and converge in direction to the Att-SVM (NGD and Polyak globally for equal scores "
          "and near-orthogonal tokens; GD locally from a cone of some width μ > 0, ‖W₀‖ ≥ R, small step)",
    hypotheses=(_UNIQUE, _FEASIBLE_GD, _LOSS),
    clauses=(
        Clause("global", r"\text{NGD and Polyak step, if }\gamma_{it}=\gamma_{i\tau}\ (t,\tau\ne\mathrm{opt}_i)\text{, tokens nearly "
               r"orthogonal, }W_0\text{ small: }"
               r"\|W_k\|\to\infty,\ \frac{\langle W_k,W^{mm}\rangle}{\|W_k\|\|W^{mm}\|}\to1", "cited",
               "Vasudeva, Deora, Thrampoulidis (2024), as the lecture notes state it (informal theorem): NGD and Polyak step "
               "converge globally to the Att-SVM under equal non-optimal scores and nearly orthogonal tokens (plain GD is not "
               "covered by this citation)", ("ngd_global",),
               also=(("checked", f"NGD lr 0.1 from 0.01·N(0, I), n = {ORTH_SIZE[0]}, T = {ORTH_SIZE[1]}, d = {ORTH_SIZE[2]}, "
                                 f"orthogonal tokens (|⟨x, x'⟩| ≤ 0.09), orthonormal queries: every init 1 − corr ≤ "
                                 f"{GLOBAL_TOL:g} after 1000 (quick) / 2000 iterations, 4 / 16 inits"),)),
        Clause("equal_scores_not_enough", r"\text{equal scores alone do not suffice: on a random-token instance NGD stays in a "
               r"locally optimal set }\ne\mathrm{opt}", "checked",
               f"n = 5, T = 6, d = 8, instance seed {STUCK_SEED}: after {STUCK_STEPS} NGD steps the selected set is locally "
               "optimal, corr with its Att-SVM ≥ 0.8 (measured 0.95), 1 − corr with W^mm ≥ 0.1 (measured 0.34; 0.40 still at 20000 steps)",
               ("ngd_equal_scores_not_enough",)),
        Clause("local", r"\text{GD with a small enough step }\eta\le\eta_0\text{ from }W_0\text{ in the cone of a locally optimal "
               r"set (}\mathrm{corr}(W_0,W^{mm}_{\text{sel}})\ge1-\mu,\ \|W_0\|\ge R\text{, for some }\mu=\mu(\text{instance})>0"
               r"\text{ and }R\text{): }W_k/\|W_k\|\to W^{mm}_{\text{sel}}/\|W^{mm}_{\text{sel}}\|"
               r"\ \text{(the Att-SVM of that set)}", "cited",
               "Tarzanagh, Li, Thrampoulidis, Oymak (2023), local-convergence theorem for GD, under its conditions: there are "
               "some μ > 0 (depending on the instance) and R such that GD with a small enough step "
               "size started in the cone {corr(W₀, W^mm_sel) ≥ 1 − μ, ‖W₀‖ ≥ R} of a locally optimal token set converges in "
               "direction to that set's Att-SVM. Not for each μ: on instance seed 0 of the check corr(W^mm_opt, W^mm_local) = "
               "−0.514, so for μ ≥ 1.52 the cone holds the ray of W^mm_opt, along which GD converges to opt",
               ("ngd_local_set",),
               also=(("checked", "normalised GD (not the cited plain GD) from corr 0.97 with W^mm_local, ‖W_0‖ = 8‖W^mm_local‖, "
                                 "n = 4, T = 5, d = 8 (margin slack 0.5), 3 / 8 runs, 2000 (quick) / 2500 iterations: every "
                                 "run that stays in its STARTING set ends with 1 − corr ≤ 0.01 to that set's Att-SVM; a run "
                                 "that leaves is counted, not scored (by the theorem its start lay outside that instance's "
                                 "cone: inferred, not measured), and at most half may leave, a stated policy rather than a "
                                 "computed tolerance (instance seed 866: 1 of 3 left; seeds 0–11: none of 36); the stated "
                                 "angle is that of the scored runs"),)),
    ),
    source=SOURCE + "; Vasudeva, Deora, Thrampoulidis (2024)",
    kind="theorem",
    form=_limit_form(),
    checks=(
        _CORR_CHECK,
        Check("ngd_global", "trained", _gd_global, "NGD in the global regime vs the Frobenius Att-SVM, every init"),
        Check("ngd_equal_scores_not_enough", "trained", _gd_equal_scores_not_enough,
              "equal scores without near-orthogonality: NGD aligns with a locally optimal set's Att-SVM, not W^mm"),
        Check("ngd_local_set", "trained", _gd_local, "NGD in a local cone vs the Att-SVM of the selected set"),
    ),
    mutants=tuple(m for m in REG_GD_MUTANTS if m.name != "fro_for_KQ"),
    no_symbolic="an asymptotic statement about an optimisation path (a limit of argmins / GD iterates): the evidence is the "
                "trained path against the cvxpy Att-SVM solution, no closed form to derive in SymPy",
    notes="Corrected (issue 33): the (K,Q) clause (GD → nuclear Att-SVM) was stated as a theorem and passed on the median "
          "of 5 instances; the cited papers prove it for the regularisation path only, and one instance in 150 stays at "
          "1 − corr 0.67: it is now the evidence claim svm.gd_direction_kq. 'Global when non-optimal scores are equal' "
          "needed near-orthogonal tokens as well (VDT'24); the global check drew instances outside that regime.",
)


declare(
    id="svm.gd_direction_kq",
    title="Normalised GD on (K,Q) aligns with the nuclear-norm Att-SVM on most instances, not all (evidence, not a theorem)",
    hypotheses=(_UNIQUE,
                setting("feasible", _FEASIBLE.latex, "W^mm_⋆ is not defined otherwise"),
                _LOSS,
                Hypothesis("m_ge_d", r"K,Q\in\mathbb R^{d\times m},\ m\ge d\ \text{(here }m=d)", necessary_note=(
                    "not shown necessary for the fraction: with m < d, K_kQ_kᵀ has rank ≤ m, and on instance "
                    f"{KQ_STUCK_SEED} (W^mm_⋆ of rank 2) every rank-1 product has 1 − corr ≥ 0.042 (svm.reg_path's "
                    "counterexample), but the share of instances with a nuclear solution of rank > m was not measured")),
                Hypothesis("small_init", r"K_0,Q_0\sim0.01\,\mathcal N(0,I)",
                           necessary_note="the regime measured; other initialisations were not measured")),
    clauses=(
        Clause("most", r"\text{NGD (lr 0.1): }1-\frac{\langle K_kQ_k^\top,W^{mm}_\star\rangle}{\|K_kQ_k^\top\|\|W^{mm}_\star\|}\le0.02"
               r"\text{ after the budget on at least half of the instances (measured 90\%)}", "checked",
               f"n = {KQ_SIZE[0]}, T = {KQ_SIZE[1]}, d = {KQ_SIZE[2]}, {KQ_INSTANCES[0]} / {KQ_INSTANCES[1]} instances with "
               "distinct Frobenius and nuclear solutions, 4 / 8 inits, 1500 / 2500 iterations", ("ngd_KQ",)),
        Clause("not_all", r"\text{not on all: on instance }" + str(KQ_STUCK_SEED) + r"\text{ every init stays at }1-\mathrm{corr}"
               r"\approx0.65\text{ near rank 1 (}W^{mm}_\star\text{ has rank 2)}", "checked",
               "4 / 8 inits, 1500 / 3000 iterations: 1 − corr ≥ 0.3 on every init", ("ngd_KQ_not_always",)),
    ),
    source=SOURCE + " (the (K,Q) result there is for the regularisation path, svm.reg_path)",
    kind="evidence",
    form=_limit_form(),
    checks=(
        _CORR_CHECK,
        Check("ngd_KQ", "trained", _gd_KQ, "NGD on (K,Q) vs the nuclear Att-SVM: fraction of instances aligned"),
        Check("ngd_KQ_not_always", "trained", _gd_KQ_stuck, "an instance where (K,Q) NGD stays away from the nuclear Att-SVM"),
    ),
    mutants=REG_GD_MUTANTS,
)
