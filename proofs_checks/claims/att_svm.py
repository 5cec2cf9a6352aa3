"""Group C: implicit bias of attention, Att-SVM (seed 002, optimisation part). Binds
theory/att_svm.py and numerics/att_svm.py to checks, tolerances and mutants."""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from numerics import att_svm as ns
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, Claim, Mutant, compare, register, worst
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, smallest
from theory import att_svm as ta
from theory.validation import InputError

SOURCE = "seed 002 (optimisation part); Tarzanagh, Li, Thrampoulidis, Oymak (2023); code umich-sota/TF-as-SVM"


def _figure(ctx, name, curves, ylabel, xlabel="iteration", logx=False):
    if not ctx.want_figures:
        return
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for label, (x, y) in curves.items():
        ax.plot(x, y, label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, name)


def _cos(A, B) -> np.ndarray:
    """Reference correlation: torch's cosine_similarity on the flattened matrices (the real thing)."""
    A = torch.as_tensor(np.asarray(A, dtype=np.float64))
    B = torch.as_tensor(np.broadcast_to(np.asarray(B, dtype=np.float64), A.shape).copy())
    return torch.nn.functional.cosine_similarity(A.flatten(-2), B.flatten(-2), dim=-1, eps=1e-300).numpy()


@lru_cache(maxsize=None)
def _inst(n, T, d, seed, setting="generic", local_slack=0.0, queries="random"):
    return ns.make_instance(n, T, d, seed=seed, setting=setting, local_slack=local_slack, queries=queries)


@lru_cache(maxsize=None)
def _kq_instance(seed: int):
    """A small instance (n=2, T=3, d=4) on which the Frobenius and nuclear solutions differ
    (correlation < 0.92): the (K,Q) regularisation-path check's instance (svm.gd_direction's
    ngd_KQ draws its own from the seed: :func:`_kq_instances`)."""
    for k in range(50):
        inst = ns.make_instance(2, 3, 4, seed=seed + k, setting="global")
        f = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc").W
        if ns.correlation(f, nu) < 0.92:
            return inst, seed + k, float(ns.correlation(f, nu))
    raise RuntimeError("no instance with distinct Frobenius and nuclear solutions")


# --------------------------------------------------------------------------------------------
# svm.softmax_saturation     form: {"limit": l (..., T) -> lim_{r→∞} S(r l)}


def _sat_symbolic(form, ctx):
    """form's limit vs SymPy's exact limit of S(r·l) for rational logits, ties included; and vs
    the derivation's closed forms (unique maximum, tie)."""
    d = ta.derive_softmax_saturation(3)
    cases = [[1, 0, 0], [0, 2, -1], [3, 3, 1], [-1, -1, -1], [sp.Rational(1, 3), 0, sp.Rational(1, 3) - sp.Rational(1, 10**6)], [5, -2, 4, 5]]
    errs = {}
    for c in cases:
        ref = np.array([float(x) for x in ta.ray_limit(c)])
        errs[str(c)] = float(np.max(np.abs(form["limit"](np.array([float(x) for x in c])) - ref)))
    errs["derived_unique"] = float(np.max(np.abs(form["limit"](np.array([2.0, 1.0, 0.5])) - np.array(d.result["limit"], dtype=float))))
    errs["derived_tie"] = float(np.max(np.abs(form["limit"](np.array([2.0, 2.0, 0.5])) - np.array(d.result["tie_limit"], dtype=float))))
    return compare(worst(errs), 4 * EPS, "exact rational limits; float64 division by the number of maximisers (a few ulps)",
                   sizes={"cases": len(cases)}, details=errs)


def _sat_numeric(form, ctx):
    """Along rays W = r·W0 on data, S(X r W0 z) approaches form(X W0 z) at the rate e^{−r·gap},
    on distinct scores and on data with two tokens tied at the top (the mass splits); at finite
    ‖W‖ ≤ R the top mass misses 1 by at least the derived bound (so ‖W‖ → ∞ is needed)."""
    seed = ctx.seed_for()
    inst = _inst(4, 5, 6, seed % 1000)
    rng = ctx.rng("W0")
    W0 = rng.normal(size=(6, 6))
    l = np.einsum("ntd,de,ne->nt", inst.X, W0, inst.z)
    srt = np.sort(l, -1)
    gap = float(np.min(srt[:, -1] - srt[:, -2]))
    # tied data: in each sequence the top-scoring token is copied over the lowest-scoring one, so
    # two tokens share the largest score and the limit splits its mass between them
    Xt = inst.X.copy()
    top, low = np.argmax(l, -1), np.argmin(l, -1)
    Xt[np.arange(len(Xt)), low] = Xt[np.arange(len(Xt)), top]
    lt = np.einsum("ntd,de,ne->nt", Xt, W0, inst.z)
    srt_t = np.sort(lt, -1)
    gap_t = float(np.min(srt_t[:, -1] - srt_t[:, -3]))
    errs, rows = {}, []
    for name, logits, g in (("distinct", l, gap), ("tied", lt, gap_t)):
        lim = form["limit"](logits)
        for r in [1.0, 10.0, 1e2, 1e3, 1e4]:
            S = np.asarray(torch.softmax(torch.as_tensor(r * logits), -1))
            dev = float(np.max(np.abs(S - lim)))
            pred = 2 * (logits.shape[1] - 1) * np.exp(-r * g) + 8 * EPS
            rows.append((name, r, dev, pred))
            errs[f"{name}_r={r:g}"] = largest(0.0, dev - pred)
    bound = sp.lambdify(ta.derive_softmax_saturation(5).facts["R"], ta.derive_softmax_saturation(5).result["gap_bound"])
    viol = 0.0
    for R in [0.5, 2.0, 8.0]:
        Wr = rng.normal(size=(20, 6, 6))
        Wr *= R / np.linalg.norm(Wr, 2, axis=(1, 2))[:, None, None]
        S = np.asarray(torch.softmax(torch.as_tensor(np.einsum("ntd,bde,ne->bnt", inst.X, Wr, inst.z)), -1))
        viol = largest(viol, float(np.max(bound(R) - (1 - S.max(-1)))))
    errs["finite_norm_bound_violation"] = largest(0.0, viol)
    return compare(worst(errs), 1e-12, "deviation allowed: 2(T−1)e^{−r·gap} + 8 eps (the derived rate); bound exact up to rounding",
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 6}, details={"gap": gap, "gap_tied": gap_t, "rows": rows, **errs})


register(Claim(
    id="svm.softmax_saturation",
    title="Softmax saturates on one token only as ‖W‖ → ∞ with that token's logit strictly largest",
    statement=r"S(l)_t\to1\iff\|l\|\to\infty\ \text{and}\ l_t>l_\tau\ \forall\tau\ne t;\quad l=XWz,\ \|x_t\|=\|z\|=1:\ 1-\max_tS_t\ge\frac{(T-1)e^{-2\|W\|_2}}{1+(T-1)e^{-2\|W\|_2}}",
    source=SOURCE,
    kind="theorem",
    form={"limit": ns.saturation_limit},
    derivation=lambda: ta.derive_softmax_saturation(3),
    checks=(
        Check("limit_vs_sympy", "symbolic", _sat_symbolic, "form's ray limit vs SymPy's exact limit, ties included"),
        Check("rays_on_data", "numeric", _sat_numeric, "softmax along rays r·W0 vs the limit at the derived rate; finite-norm bound"),
    ),
    mutants=(
        Mutant("argmin", "sign flip", "all mass on the smallest logit", {"limit": lambda l: ns.saturation_limit(-np.asarray(l))}),
        Mutant("tie_first_index", "wrong formula", "ties resolved to the first maximiser (mass 1) instead of splitting",
               {"limit": lambda l: np.eye(np.shape(l)[-1])[np.argmax(l, -1)]}),
        Mutant("no_saturation", "dropped term", "the limit taken as S(l) itself (r = 1)",
               {"limit": lambda l: np.asarray(torch.softmax(torch.as_tensor(np.asarray(l, dtype=float)), -1))}),
    ),
))

# --------------------------------------------------------------------------------------------
# svm.optimal_token_selection   form: {"opt": (X,y,v) -> (n,), "inf_loss": (X,y,v) -> float}


def _inf_loss(X, y, v):
    g = ns.token_scores(X, y, v)
    return float(np.mean(np.logaddexp(0.0, -g.max(1))))


def _ots_symbolic(form, ctx):
    """With the derived identity γ_opt − yf = Σ_t s_t(γ_opt − γ_t): at form's opt the coefficients
    (evaluated at every vertex s = e_t) are ≥ 0, i.e. sup yf = γ_opt; form's inf_loss = ℓ(sup yf)."""
    T = 5
    dv = ta.derive_optimal_selection(T)
    rhs = sp.lambdify([dv.facts["gamma"], dv.facts["s"]], dv.result)
    inst = _inst(6, T, 6, ctx.seed_for() % 1000, "generic")
    y_neg = inst.y.copy()
    opt = np.asarray(form["opt"](inst.X, inst.y, inst.v))
    g = inst.gamma
    worst_coef = 0.0
    supf = []
    for i in range(len(g)):
        order = [int(opt[i])] + [t for t in range(T) if t != opt[i]]
        gi = g[i, order]
        vals = [rhs(gi, np.eye(T - 1)[k]) for k in range(T - 1)]
        worst_coef = smallest(worst_coef, float(smallest(vals)))
        supf.append(gi[0])  # γ_opt − yf ≥ 0 with equality at s = e_opt
    ref_inf = float(np.mean(np.logaddexp(0.0, -np.array(supf))))
    errs = {"negative_gap_coefficient": -worst_coef,
            "inf_loss_vs_l(sup yf)": abs(float(form["inf_loss"](inst.X, inst.y, inst.v)) - ref_inf)}
    return compare(worst(errs), 1e-12, "exact identity evaluated in float64 (rounding of O(1) numbers)",
                   seeds=[ctx.seed_for()], sizes={"n": 6, "T": T}, details={**errs, "labels": y_neg.tolist()})


def _ots_trained(form, ctx):
    """NGD drives the loss down to form's inf_loss (never below) with all attention on form's
    opt; at every finite W_k the loss stays strictly above the infimum (not attained)."""
    seed = ctx.seed_for()
    inst = _inst(5, 6, 8, seed % 1000, "global")
    iters = ctx.size(600, 1500)
    r = ns.train(inst, method="ngd", lr=0.1, iters=iters, B=4, seed=seed, init=0.01, device=ctx.device)
    fo = np.asarray(form["opt"](inst.X, inst.y, inst.v))
    finf = float(form["inf_loss"](inst.X, inst.y, inst.v))
    X, z, y, v = ns._as_batch(inst, 4, torch.device("cpu"))
    s = torch.as_tensor(r.s)
    excess = ns._excess_loss(s, y, X, v).numpy()  # L(W_k) − inf L without cancellation, > 0
    final = r.loss[-1]
    errs = {
        "loss_minus_form_inf": float(np.max(np.abs(final - finf))),
        "selected_not_form_opt": float(np.mean(r.selected != fo)),
        "infimum_attained": float(np.sum(excess <= 0)),
    }
    _figure(ctx, "loss", {"L(W_k) − form inf": (np.arange(1, iters + 1), np.maximum(r.loss.mean(1) - finf, 1e-300))}, "excess loss")
    nmm = np.linalg.norm(ns.solve_att_svm(inst.X, inst.z, inst.opt).W)
    gmax = float(np.max(np.ptp(inst.gamma, 1)))
    tol = 2 * (inst.X.shape[1] - 1) * gmax * float(np.exp(-0.9 * r.norm[-1].min() / nmm)) + 1e-12
    return compare(worst(errs), tol, "rate: excess ≤ (T−1)·max gap·e^{−margin}, margin ≈ ‖W_k‖/‖W^mm‖ (0.9 for the"
                   " direction not yet exact, 2 for the loss slope ≤ 1)",
                   seeds=[seed], sizes={"n": 5, "T": 6, "d": 8, "iters": iters, "B": 4}, device=ctx.device,
                   details={**errs, "final_excess": excess.tolist(), "final_norm": r.norm[-1].tolist(), "norm_Wmm": nmm})


register(Claim(
    id="svm.optimal_token_selection",
    title="The loss infimum is approached only by all attention on the top-score token, never attained",
    statement=r"\inf_W\mathcal L(W)=\frac1n\sum_i\ell(\gamma_{i,\mathrm{opt}_i}),\ \mathrm{opt}_i=\arg\max_t\gamma_{it},\ \gamma_{it}=y_iv^\top x_{it};\ \text{approached iff }S(X_iWz_i)\to e_{\mathrm{opt}_i};\ \mathcal L(W)>\inf\mathcal L\ \forall W",
    source=SOURCE,
    kind="theorem",
    form={"opt": ns.optimal_tokens, "inf_loss": _inf_loss},
    derivation=lambda: ta.derive_optimal_selection(3),
    checks=(
        Check("vertex_identity", "symbolic", _ots_symbolic, "derived identity γ_opt − yf = Σ s_t(γ_opt − γ_t) at form's opt"),
        Check("ngd_reaches_infimum", "trained", _ots_trained, "NGD loss → form's infimum from above, attention → form's opt"),
    ),
    mutants=(
        Mutant("second_best", "wrong formula", "opt replaced by the second-best token",
               {"opt": ns.second_best_tokens,
                "inf_loss": lambda X, y, v: float(np.mean(np.logaddexp(0, -np.sort(ns.token_scores(X, y, v), 1)[:, -2])))}),
        Mutant("ignore_label", "dropped term", "opt = argmax vᵀx_t (label y dropped)",
               {"opt": lambda X, y, v: np.argmax(X @ v, 1),
                "inf_loss": lambda X, y, v: float(np.mean(np.logaddexp(0, -(y * np.max(X @ v, 1)))))}),
        Mutant("uniform_attention", "wrong constant", "infimum at uniform attention (W = 0)",
               {"opt": ns.optimal_tokens,
                "inf_loss": lambda X, y, v: float(np.mean(np.logaddexp(0, -ns.token_scores(X, y, v).mean(1))))}),
    ),
))

# --------------------------------------------------------------------------------------------
# svm.att_svm     form: solve(X, z, opt, norm) -> AttSVMResult


def _svm_symbolic(form, ctx):
    """At n=2, T=3, d=2 (4 constraints): form's W equals the SymPy-derived representer Σ α_k A_k
    at form's duals, α ≥ 0, complementary slackness, and the derived dual function closes the gap."""
    inst = _inst(2, 3, 2, ctx.seed_for() % 1000, "generic")
    A, _, _, _ = ns.constraint_matrix(inst.X, inst.z, inst.opt)
    K = len(A)
    dv = ta.derive_att_svm_kkt(K, 2)
    syms = list(dv.facts["alpha"]) + [e for M in dv.facts["A"] for e in M]
    Wf = sp.lambdify(syms, dv.result["W"])
    dual = sp.lambdify(syms, dv.result["dual"])
    res = form(inst.X, inst.z, inst.opt, "fro")
    al = np.asarray(res.duals, dtype=float)
    if al.shape != (K,):
        return compare(np.inf, 1e-6, "form returned duals of the wrong shape", details={"duals_shape": list(al.shape)})
    args = list(al) + list(A.reshape(-1))
    m = np.einsum("kab,ab->k", A, res.W)
    nW = largest(np.linalg.norm(res.W), 1e-300)
    errs = {
        "representer": float(np.linalg.norm(res.W - np.asarray(Wf(*args), dtype=float)) / nW),
        "primal_infeasibility": float(largest(0.0, np.max(1 - m))),
        "negative_dual": float(largest(0.0, -al.min())),
        "complementary_slackness": float(np.max(np.abs(al * (m - 1)))),
        "gap_vs_derived_dual": float(abs(0.5 * nW ** 2 - dual(*args)) / (0.5 * nW ** 2)),
    }
    return compare(worst(errs), 1e-6, "Clarabel tolerances 1e-10 on a 4-constraint QP; 1e-6 leaves room for conditioning",
                   seeds=[ctx.seed_for()], sizes={"n": 2, "T": 3, "d": 2, "K": K}, details=errs)


def _kkt_independent(X, z, opt, W, duals, index, norm):
    """KKT conditions of the Att-SVM recomputed from the data, not from numerics' constraint matrices
    or residual function: margins ``m_it = l_{i,opt} − l_{it}`` from the logits ``l = X W z``; the
    form's duals placed at ``(i, t)`` by its index (every t ≠ opt_i exactly once, else inf);
    stationarity against ``G = Σ_i (Σ_t α_it (x_{i,opt} − x_{it})) z_iᵀ`` (Frobenius: ``W = G``;
    nuclear: ``‖G‖_2 ≤ 1`` and ``⟨G, W⟩ = ‖W‖_*``, norms by torch's SVD); duality gap against the
    dual value of a feasible rescaling ``α⁺/max(1, ‖G‖_2)`` (nuclear) or ``Σα⁺ − ½‖G‖²`` (Frobenius)."""
    n, T, _ = X.shape
    W = np.asarray(W, dtype=np.float64)
    idx = np.asarray(index)
    want = {(i, t) for i in range(n) for t in range(T) if t != opt[i]}
    got = [tuple(int(v) for v in row[:2]) for row in idx] if idx.ndim == 2 and idx.shape[1] >= 2 else []
    if len(got) != len(want) or set(got) != want or np.shape(duals) != (len(want),):
        return {"index_or_duals_mismatch": np.inf}
    al = np.zeros((n, T))
    for (i, t), a in zip(got, np.asarray(duals, dtype=np.float64)):
        al[i, t] = a
    l = np.einsum("ntd,de,ne->nt", X, W, z)
    m = l[np.arange(n), opt][:, None] - l
    off = np.ones((n, T), dtype=bool)
    off[np.arange(n), opt] = False
    scale = largest(1.0, float(np.max(np.abs(al))))
    ap = np.maximum(al, 0.0)
    diff = X[np.arange(n), opt][:, None, :] - X  # (n,T,d): x_opt − x_t
    G = np.einsum("ntd,ne->de", ap[..., None] * diff, z)
    sv = torch.linalg.svdvals(torch.as_tensor(W)).numpy()
    svG = torch.linalg.svdvals(torch.as_tensor(G)).numpy()
    r = {"primal_infeasibility": float(largest(0.0, float(np.max(1.0 - m[off])))),
         "dual_infeasibility": float(largest(0.0, -float(np.min(al[off])))) / scale,
         "complementary_slackness": float(np.max(np.abs(al[off] * (m[off] - 1.0)))) / scale}
    if norm == "fro":
        P = 0.5 * float(np.sum(sv ** 2))
        D = float(ap.sum() - 0.5 * np.sum(svG ** 2))
        r["stationarity"] = float(np.sqrt(np.sum((W - G) ** 2)) / largest(np.sqrt(2 * P), 1e-300))
    else:
        P = float(sv.sum())
        D = float(ap.sum()) / largest(1.0, float(svG[0]))
        r["stationarity"] = float(largest(0.0, float(svG[0]) - 1.0)) + abs(float(np.sum(G * W)) - P) / largest(P, 1e-300)
    r["duality_gap"] = abs(P - D) / largest(P, 1e-300)
    return r


def _svm_numeric(form, ctx):
    """Form's Frobenius solution vs SciPy's dual solve (L-BFGS-B), nuclear solution vs an SCS-only
    solve; every KKT residual recomputed here from the data (:func:`_kkt_independent`, not
    numerics' residual function), and the form's reported residuals compared with them.

    Includes a near-square instance (n(T−1) = 24 constraints on d² = 25 unknowns), where Clarabel
    stops at "optimal_inaccurate" on most draws and the solver chain must still return a certified
    point. There the nuclear minimiser is ill-conditioned (a value gap δ moves W by up to ~√δ:
    certified gaps ~1e-8 gave ‖ΔW‖/‖W‖ up to 2.3e-5 between Clarabel and SCS over seeds 0–9), so
    the nuclear comparison is by value (and W only in the details)."""
    sizes = ctx.size([(5, 4, 6), (8, 5, 8), (6, 5, 5)], [(5, 4, 6), (10, 6, 8), (20, 10, 16), (6, 5, 5)])
    errs, det, seeds, fro_res = {}, {}, [], []
    for (n, T, d) in sizes:
        sd = ctx.seed_for(n, T, d) % 1000
        seeds.append(sd)
        inst = _inst(n, T, d, sd, "generic")
        square = n * (T - 1) >= 0.9 * d * d
        for norm in ("fro", "nuc"):
            res = form(inst.X, inst.z, inst.opt, norm)
            tol = SOLVER_TOL
            if norm == "fro":  # SciPy's dual, polished on its support to the exact KKT point, certified
                def exact_ref():
                    A = ns.constraint_matrix(inst.X, inst.z, inst.opt)[0]
                    Wp, ap = ns.polish_fro(A, ns.solve_att_svm_dual_scipy(inst.X, inst.z, inst.opt)[1])
                    return Wp, ns.fro_distance_bound(A, Wp, ap)
                Wref, dref = ctx.reference("scipy_dual_polished", exact_ref, n, T, d)
                vref = float(np.linalg.norm(Wref))
                tol = FRO_DIST + dref  # the form's stopping tolerance through strong convexity + the reference's certificate
            else:
                ref = ctx.reference("scs", lambda: ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc", solver="SCS"), n, T, d)
                Wref, vref, dref = ref.W, float(np.sum(torch.linalg.svdvals(torch.as_tensor(ref.W)).numpy())), math.nan
            key = f"{norm}_{n}x{T}x{d}"
            W = np.asarray(res.W, dtype=np.float64)
            dW = float(np.linalg.norm(W - Wref) / np.linalg.norm(Wref))
            v = float(np.sum(torch.linalg.svdvals(torch.as_tensor(W)).numpy())) if norm == "nuc" else float(np.linalg.norm(W))
            if norm == "nuc" and square:
                errs[key + "_value_vs_independent"] = abs(v - vref) / vref / tol
            else:
                errs[key + "_vs_independent"] = dW / tol
            if norm == "fro":
                fro_res.append(tol + dW)
            r = _kkt_independent(inst.X, inst.z, inst.opt, W, res.duals, res.index, norm)
            det[key] = {**r, "W_vs_independent": dW, "tolerance": tol, "reference_certified_distance": dref,
                        "solver": getattr(res, "solver", None), "status": getattr(res, "status", None)}
            errs[key + "_kkt"] = worst(r) / SOLVER_TOL
            reported = list(getattr(res, "residuals", {}).values())
            errs[key + "_reported_vs_recomputed"] = (abs(largest(reported) - worst(r)) if reported else np.inf) / SOLVER_TOL
    return compare(worst(errs), 1.0, "normalised: Frobenius W within √(2τ) + τ (τ = 1e-9: 10× the form's Clarabel gap and "
                   f"feasibility tolerances, turned into a distance by the 1-strong convexity of ½‖W‖²: {FRO_DIST:.2g}) plus the "
                   "reference's own certified distance (SciPy's dual polished to the exact KKT point, ~1e-7) of the exact "
                   f"optimum; nuclear W (value on near-square instances) and recomputed KKT residuals within {SOLVER_TOL:g} "
                   "(SCS eps 1e-9, certify tolerance 1e-6: no exact nuclear layer)",
                   seeds=seeds, sizes={"instances": [list(s) for s in sizes]}, details={**errs, "kkt": det},
                   resolution=smallest(fro_res) if fro_res else math.nan,
                   resolution_units="relative change of the Frobenius optimum W* (‖ΔW‖/‖W*‖) that is rejected")


#: the form's solver tolerance (Clarabel tol_gap_rel = tol_feas = 1e-10) as a relative distance from
#: the Frobenius optimum: a point with relative gap ≤ τ and infeasibility ≤ τ is within √(2τ) + τ
#: (numerics.att_svm.fro_distance_bound); τ is taken 10× the stopping tolerance for Clarabel's scaling
FRO_DIST = math.sqrt(2 * 1e-9) + 1e-9
#: KKT residuals and nuclear comparisons: SCS (eps 1e-9) vs the chain's certify tolerance 1e-6, with 10× room
SOLVER_TOL = 1e-5


def _svm_rejects(form, ctx):
    """Tied (x_opt = x_t), zero-query and infeasible instances raise an InputError naming the
    sequence and token; none is silently solved."""
    inst = _inst(3, 4, 5, 7, "generic")
    cases = {}
    Xt = inst.X.copy()
    t = (inst.opt[1] + 1) % 4
    Xt[1, t] = Xt[1, inst.opt[1]]
    cases["tied"] = (Xt, inst.z, inst.opt)
    zz = inst.z.copy()
    zz[2] = 0
    cases["zero_z"] = (inst.X, zz, inst.opt)
    Xi = np.concatenate([inst.X[:1], inst.X[:1]])
    cases["infeasible"] = (Xi, np.concatenate([inst.z[:1], inst.z[:1]]), np.array([0, 1]))
    bad = {}
    for name, (X, z, opt) in cases.items():
        try:
            out = form(X, z, opt, "fro")
            bad[name] = f"returned {type(out).__name__} (W={'None' if getattr(out, 'W', None) is None else 'array'})"
        except InputError as exc:
            if "sequence" not in str(exc):
                bad[name] = f"message does not name the sequence: {exc}"
    return compare(len(bad), 0, "exact: every invalid instance must raise", details={"not_rejected": bad})


def _flip_sign(X, z, opt, norm="fro"):
    res = ns.solve_att_svm(X, z, opt, norm)
    return dataclasses.replace(res, W=-res.W)


def _margin_two(X, z, opt, norm="fro"):
    res = ns.solve_att_svm(X, z, opt, norm)
    return dataclasses.replace(res, W=2 * res.W, duals=2 * res.duals)


def _drop_sequence(X, z, opt, norm="fro"):
    return ns.solve_att_svm(X[1:], z[1:], opt[1:], norm) if len(X) > 1 else ns.solve_att_svm(X, z, opt, norm)


def _silent(X, z, opt, norm="fro"):
    try:
        return ns.solve_att_svm(X, z, opt, norm)
    except InputError:
        d = np.shape(X)[2]
        return ns.AttSVMResult(np.zeros((d, d)), "infeasible", norm, 0.0, np.zeros(0), np.zeros(0), np.zeros((0, 2), int),
                               np.zeros((0, 3), int), np.zeros(0), {}, np.zeros(0, int), "none")


register(Claim(
    id="svm.att_svm",
    title="Att-SVM: certified max-margin token separator (Frobenius QP and nuclear-norm SDP)",
    statement=r"W^{mm}=\arg\min\|W\|\ \text{s.t.}\ (x_{i,\mathrm{opt}_i}-x_{i,t})^\top Wz_i\ge1\ \forall t\ne\mathrm{opt}_i;\ \text{Frobenius: }W^{mm}=\sum\alpha_{it}(x_{i,\mathrm{opt}}-x_{i,t})z_i^\top,\ \alpha\ge0,\ \alpha_{it}>0\Rightarrow\text{tight}",
    source=SOURCE,
    kind="theorem",
    form=lambda X, z, opt, norm="fro": ns.solve_att_svm(X, z, opt, norm),
    derivation=lambda: ta.derive_att_svm_kkt(2, 2),
    checks=(
        Check("kkt_vs_sympy", "symbolic", _svm_symbolic, "representer form and dual function derived from the KKT conditions"),
        Check("certificate_and_independent_solve", "numeric", _svm_numeric, "KKT residuals recomputed; SciPy dual / SCS agree"),
        Check("rejects_invalid", "numeric", _svm_rejects, "tied, zero-query and infeasible instances raise InputError"),
    ),
    mutants=(
        Mutant("constraint_sign_flipped", "sign flip", "solves (x_opt − x_t)ᵀWz ≤ −1 (returns −W^mm)", _flip_sign),
        Mutant("margin_two", "wrong constant", "margin 2 instead of 1 (W and α doubled)", _margin_two),
        Mutant("sequence_dropped", "dropped term", "constraints of the first sequence dropped", _drop_sequence),
        Mutant("wrong_norm", "wrong norm", "nuclear solution returned for Frobenius and vice versa",
               lambda X, z, opt, norm="fro": ns.solve_att_svm(X, z, opt, "nuc" if norm == "fro" else "fro")),
        Mutant("silent_infeasible", "wrong solver output", "an infeasible/tied instance returns W = 0 instead of raising", _silent),
    ),
))

# --------------------------------------------------------------------------------------------
# svm.reg_path and svm.gd_direction   form: {"limit": (inst, ids, param) -> (d,d), "correlation": (A,B) -> cos}


def _limit(inst, ids, param="W"):
    return ns.solve_att_svm(inst.X, inst.z, ids, "fro" if param == "W" else "nuc").W


def _corr_numeric(form, ctx):
    """form's correlation vs torch.nn.functional.cosine_similarity (batched random matrices)."""
    rng = ctx.rng()
    A, B = rng.normal(size=(16, 5, 5)) * 7, rng.normal(size=(16, 5, 5)) * 0.3
    A[0] = 3 * B[0]
    err = float(np.max(np.abs(np.asarray(form["correlation"](A, B)) - _cos(A, B))))
    return compare(err, 64 * EPS, "float64 rounding of a 25-term inner product and two norms", seeds=[ctx.seed_for()])


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
                   "≤ 0.003 on 600 instances)",
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 6, "radii": len(radii)}, device=ctx.device,
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
    return compare(float(1 - c[-1]), 0.01, "TLTO'23: (K,Q) path → nuclear Att-SVM; 1 − corr ≤ 0.01 at the largest R",
                   seeds=[sd], sizes={"n": 2, "T": 3, "d": 4}, device=ctx.device,
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
    return compare(worst(errs), 0.01, "TLTO'23 / VDT'24 global convergence; 1 − corr ≤ 0.01 after the iteration budget",
                   seeds=[seed], sizes={"n": 5, "T": 6, "d": 8, "iters": iters, "B": B}, device=ctx.device,
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
                   "iterations; 1 − corr decays like ‖W^⊥‖²/‖W_k‖²)",
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 8, "B": B, "iters": iters}, device=ctx.device,
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
                   "worst init's 1 − corr ≤ 0.02 after the budget (90th percentile 0.008 over 80 instances)",
                   seeds=[seed] + sds, sizes={"n": KQ_SIZE[0], "T": KQ_SIZE[1], "d": KQ_SIZE[2], "instances": len(insts),
                                              "B": B, "iters": iters},
                   device=ctx.device, details={"worst_one_minus_corr_per_instance": per, "instances": det})


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
    return compare(worst(errs), 1.0, "evidence: log-log slopes of 1 − corr over [K/10, K]: fast methods ≤ −0.5 "
                   "(C log²k/k), GD's slope ≤ a quarter of theirs (1/log k), fast methods at 0.99 within K; error = largest of "
                   "−0.5/s_fast, 4 s_GD/s_fast, k_0.99/K",
                   seeds=[seed], sizes={"n": 5, "T": 6, "d": 8, "K": K, "B": B}, device=ctx.device,
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
                   "1 − corr ≈ ‖W^fin_⊥‖²/(2‖W_k‖²) ≤ 0.02 for ‖W^fin‖ ≈ 3, ‖W_k‖ ≈ 20 (this head grows ‖W_k‖ slowly)",
                   seeds=[seed], sizes={"n": 4, "T": 5, "d": 8, "iters": iters, "B": B}, device=ctx.device,
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
