"""Group H: Lyapunov functions (lecture notes 001, application to mathematics; Alfarano, Charton,
Hayat 2024). Binds theory/lyapunov.py and numerics/lyapunov.py to checks, tolerances and mutants,
and records lecture notes 001's statement of the Lyapunov conditions as an erratum."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from numerics import lyapunov as nl
from proofs_checks.comparisons import REL_UNITS, confirm_resolution, exact, largest
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from theory import lyapunov as tl
from proofs_checks.claims._lyapunov_common import SOURCE


def _scaled_relative(label: str, value, ref, scale, tol: float, justification: str, *, others=None, **kw) -> CheckResult:
    """``max_i |value_i − ref_i| / scale_i ≤ tol`` (a pointwise error normalised by a rounding or
    integration scale ``scale_i``), with ``others`` (further named errors, unaffected by the
    reference) in the same comparison. Resolution in relative units of the reference: scaling it by
    ``1 + δ`` moves entry ``i`` by ``|δ|·|ref_i|``, so entry ``i`` rejects every
    ``|δ| > (tol + e_i)·scale_i/|ref_i|`` (triangle inequality, ``e_i`` its error); ``ε`` is the
    smallest over the entries with ``ref_i ≠ 0``, confirmed by re-running the comparison against
    ``ref·(1 ± 2ε)`` (rejected) and ``ref·(1 ± ε/2)``."""
    v, r, sc = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (value, ref, scale)))
    v, r, sc = v.ravel(), r.ravel(), sc.ravel()
    rest = worst(others) if others else 0.0

    def err(delta: float) -> float:
        with np.errstate(all="ignore"):
            return largest(float(np.max(np.abs(v - r * (1 + delta)) / sc)) if v.size else 0.0, rest)

    with np.errstate(all="ignore"):
        e_i = np.abs(v - r) / sc
        ok = (r != 0) & (sc > 0) & np.isfinite(e_i)
        eps = float(np.min((tol + e_i[ok]) * sc[ok] / np.abs(r[ok]))) if ok.any() and np.all(np.isfinite(e_i)) else math.nan
    details = dict(kw.pop("details", {}) or {})
    details.update(resolution_confirmed=confirm_resolution(err, tol, eps))
    return compare({label: err(0.0), **(others or {})}, tol, justification, details=details, resolution=eps,
                   resolution_units=REL_UNITS, **kw)


# --------------------------------------------------------------------------------------------
# lyap.conditions
# form: a theorem, props (dict of the hypotheses in theory.lyapunov.PROPERTIES) -> "none" | "local" | "global"

_LEVEL = {name: i for i, name in enumerate(tl.LEVELS)}
#: time horizon and the largest ‖x(T)‖/‖x(0)‖ that counts as "converging"
T_COND = 5.0
TAU = 0.1


def _panel_vs_derivation(form, ctx) -> CheckResult:
    """The form's conclusion on each panel system, from the hypotheses decided symbolically
    (theory.lyapunov.decide_properties), against the stability the derivation establishes
    (escape region, linearisation, explicit flow, V̇ ≡ 0, comparison bound): a conclusion stronger
    than the truth is unsound; failing to conclude global stability of the two globally stable
    systems is a vacuous theorem. Exact counts."""
    der = tl.derive_conditions()
    concl = {name: form(p) for name, p in der.facts["properties"].items()}
    truth = der.facts["truth"]
    unsound = [n for n, c in concl.items() if _LEVEL[c] > _LEVEL[truth[n]]]
    uncovered = [n for n, t in truth.items() if t == "global" and concl[n] != "global"]
    return exact({"unsound": float(len(unsound)), "uncovered": float(len(uncovered))},
                 "conclusions vs the derived stability of each panel system (none < local < global)",
                 details={"conclusions": concl, "truth": truth, "unsound": unsound, "uncovered": uncovered})


def _trajectory_reference(ctx):
    """Form-independent: the hypotheses decided by sampling and the distance ratios
    ‖x(T)‖/‖x(0)‖ from near (radius ≤ 0.1) and far initial points of every panel system."""
    M = ctx.size(4, 12, 32)
    out = {}
    for name, c in tl.conditions_panel().items():
        rng = ctx.rng(name)
        props, det = nl.sample_properties(c, rng)
        near, far = nl.initial_points(name, rng, M, True), nl.initial_points(name, rng, M, False)
        with np.errstate(all="ignore"):
            out[name] = {"props": props, "details": det,
                         "near": nl.distance_ratios(c, near, T_COND, rtol=1e-9, atol=1e-12),
                         "far": nl.distance_ratios(c, far, T_COND, rtol=1e-9, atol=1e-12)}
    return out, M


def _trajectories(form, ctx) -> CheckResult:
    """Integrate every panel system (SciPy DOP853, rtol 1e-9) from near and far initial points and
    test the conclusion the form draws from the sampled hypotheses: "local" predicts convergence
    from the near points, "global" from the far points too. Error: the largest ‖x(T)‖/‖x(0)‖ over
    the points a conclusion covers, T = 5; tolerance 0.1."""
    ref, M = ctx.reference("panel", lambda: _trajectory_reference(ctx))
    errs, concl = {}, {}
    for name, r in ref.items():
        c = form(dict(r["props"]))
        concl[name] = c
        if _LEVEL[c] >= _LEVEL["local"]:
            errs[f"{name}_near"] = worst([r["near"]])
        if c == "global":
            errs[f"{name}_far"] = worst([r["far"]])
    gas_bound = math.exp(-T_COND)
    return compare(errs or {"no_conclusion": 0.0}, TAU,
                   f"a covered trajectory must shrink to ‖x(T)‖ ≤ {TAU:g}‖x(0)‖ by T = {T_COND:g}: the derived comparison "
                   f"bound gives ‖x(T)‖ ≤ e^(−T)‖x(0)‖ = {gas_bound:.4f}‖x(0)‖ for the globally stable systems, and the "
                   "linearisation (double eigenvalue −4) ≈ (1 + 4T)e^(−4T) for Khalil's near points, both far below "
                   f"{TAU:g} (integration error ~1e-9 is negligible); a trajectory that does not converge has ratio ≥ 1 "
                   "(exactly 1 for the rotation), one that escapes far more",
                   seeds=[ctx.seed_for(n) for n in ref], sizes={"points_per_set": M, "T": T_COND},
                   details={"conclusions": concl, "properties": {n: r["props"] for n, r in ref.items()},
                            "sampled": {n: r["details"] for n, r in ref.items()},
                            "ratio_near_max": {n: float(np.max(r["near"])) for n, r in ref.items()},
                            "ratio_far_max": {n: float(np.max(r["far"])) for n, r in ref.items()},
                            "comparison_bound": gas_bound},
                   resolution=TAU - worst(errs) if errs else TAU,
                   resolution_units=f"absolute increase of the contraction ratio ‖x(T)‖/‖x(0)‖ (T = {T_COND:g}) of the "
                   "worst covered trajectory that is rejected (tolerance − error; one-sided: a covered trajectory that "
                   f"shrinks by less than {TAU:g} is rejected, one that does not converge has ratio ≥ 1)")


def _covers_stable_systems(form, ctx) -> CheckResult:
    """A theorem that never applies is not the Lyapunov theorem: on the two systems whose global
    asymptotic stability the derivation proves (V̇ ≤ −2V) and whose trajectories the reference
    integrates, the form must conclude "global" from the sampled hypotheses. Exact count."""
    ref, M = ctx.reference("panel", lambda: _trajectory_reference(ctx))
    truth = tl.derive_conditions().facts["truth"]
    gas = [n for n, t in truth.items() if t == "global"]
    concl = {n: form(dict(ref[n]["props"])) for n in gas}
    missed = [n for n in gas if concl[n] != "global"]
    bound_ok = {n: bool(np.all(ref[n]["far"] <= math.exp(-T_COND) * (1 + 1e-6))) for n in gas}
    return exact({"not_concluded": float(len(missed)), "reference_violates_bound": float(sum(not v for v in bound_ok.values()))},
                 "the form concludes global stability for every system proven globally stable",
                 seeds=[ctx.seed_for(n) for n in gas], sizes={"points_per_set": M},
                 details={"conclusions": concl, "missed": missed, "reference_within_derived_bound": bound_ok})


def _no_radial_unboundedness(props):
    base = all(props[k] is True for k in ("f_zero_at_origin", "V_zero_at_origin", "V_positive_off_origin",
                                          "Vdot_negative_off_origin"))
    return "global" if base else "none"


def _no_V0_zero(props):
    base = all(props[k] is True for k in ("f_zero_at_origin", "V_positive_off_origin", "Vdot_negative_off_origin"))
    return ("global" if props["radially_unbounded"] is True else "local") if base else "none"


def _nonstrict_decrease(props):
    # V̇ ≤ 0 accepted in place of V̇ < 0 off the origin
    return tl.corrected_conclusion({**props, "Vdot_negative_off_origin": props["Vdot_nonpositive"]})


def _at_origin_too(props):
    # the literal reading: −∇V·f > 0 everywhere, the origin included
    return tl.corrected_conclusion(props) if props["Vdot_negative_at_origin"] is True else "none"


_BASE = ("f_zero_at_origin", "V_zero_at_origin", "V_positive_off_origin", "Vdot_negative_off_origin")


def _cx_conditions(ctx, c: tl.Candidate, dropped: str, clause: str, near: bool, what: str) -> Counterexample:
    """A system whose hypotheses, decided symbolically (theory.lyapunov.decide_properties), all hold
    but ``dropped``, integrated (SciPy DOP853, rtol 1e-9) from 4 near (radius 0.02–0.1) or far
    points to T = T_COND: the clause fails when a trajectory does not shrink to TAU·‖x(0)‖."""
    props = tl.decide_properties(c)
    others = [k for k in _BASE + ("radially_unbounded",) if k != dropped and (k != "radially_unbounded" or not near)]
    hold = all(props[k] is True for k in others) and props[dropped] is False
    X0 = nl.initial_points(c.name, ctx.rng("cx", c.name), 4, near)
    with np.errstate(all="ignore"):
        ratio = float(np.max(nl.distance_ratios(c, X0, T_COND, rtol=1e-9, atol=1e-12)))
    return Counterexample({"f": "(" + ", ".join(str(fi) for fi in c.f) + ")", "V": str(c.V), "x(0)": "near 0" if near else "far"},
                          clause, f"{what}; max ‖x(T)‖/‖x(0)‖ = {ratio:.4g} at T = {T_COND:g} "
                          f"(other hypotheses decided: {'hold' if hold else 'NOT all hold'})",
                          violated=hold and ratio > TAU, error=ratio, tolerance=TAU,
                          justification=f"a covered trajectory must shrink to ‖x(T)‖ ≤ {TAU:g}‖x(0)‖ by T = {T_COND:g} "
                                        "(the claim's trajectory check); integration error ~1e-9 is negligible",
                          details={"properties": props})


def _cx_V0(ctx):
    """Without V(0) = 0: f = (x, y), V = 1 + 1/(1 + ‖x‖²) (V > 0, V̇ < 0 off 0, V(0) = 2): unstable."""
    return _cx_conditions(ctx, tl.conditions_panel()["unstable"], "V_zero_at_origin", "asymptotic", True,
                          "V(0) = 2, x(t) = e^t x(0)")


def _cx_Vpos(ctx):
    """Without V > 0: f = (x, y), V = −‖x‖² (V(0) = 0, V̇ = −2‖x‖² < 0 off 0): unstable."""
    c = tl.Candidate((tl.x, tl.y), (tl.x, tl.y), -(tl.x**2 + tl.y**2), "negative V")
    return _cx_conditions(ctx, c, "V_positive_off_origin", "asymptotic", True, f"V̇ = {tl.lie_derivative(c.V, c.f, c.vars)}")


def _cx_Vdot(ctx):
    """Without V̇ < 0 (only V̇ ≤ 0): the rotation f = (−y, x), V = ‖x‖², V̇ ≡ 0; the origin is
    (Lyapunov) stable, every orbit a circle, but not asymptotically stable."""
    c = tl.conditions_panel()["rotation"]
    return _cx_conditions(ctx, c, "Vdot_negative_off_origin", "asymptotic", True,
                          f"V̇ = {c.vdot()} ≤ 0 (stable: ‖x(t)‖ = ‖x(0)‖)")


def _cx_radial(ctx):
    """Without radial unboundedness: Khalil's V = x²/(1 + x²) + y² (V̇ < 0 off 0, V(x, 0) → 1);
    trajectories right of y = 2/(x − √2) escape."""
    return _cx_conditions(ctx, tl.conditions_panel()["khalil"], "radially_unbounded", "global", False,
                          "V(x, 0) = x²/(1 + x²) < 1 for every x; points right of y = 2/(x − √2) escape")


_PANEL_SCOPE = ("five planar (n = 2) panel systems: the form's conclusion from symbolically and from sampled decided "
                "hypotheses vs the derived stability; 12 points per set (4 at --quick) integrated to T = 5")


declare(
    id="lyap.conditions",
    fixed_sizes="V̇(0) = 0 is derived at n = 2 for arbitrary C¹ V and f; the stability conclusions are cited theorems (Khalil), not derivations",
    title="Lyapunov conditions: V(0) = 0, V > 0 and ∇V·f < 0 off the origin (and radial unboundedness for global stability)",
    hypotheses=(
        setting("setting", r"\dot x=f(x),\ f\ \text{locally Lipschitz},\ f(0)=0,\ V\in C^1(D),\ D\ni0\ \text{open}",
                "stability of the origin is defined for an equilibrium, "
                "and V̇ = ∇V·f needs ∇V"),
        Hypothesis("V0_zero", r"V(0)=0", counterexample=_cx_V0),
        Hypothesis("V_pos", r"V(x)>0\ (x\in D\setminus\{0\})", counterexample=_cx_Vpos),
        Hypothesis("Vdot_neg", r"\dot V(x)=\nabla V(x)\cdot f(x)<0\ (x\in D\setminus\{0\})",
                   "V̇ negative definite (V̇ ≤ 0 gives only stability)", counterexample=_cx_Vdot),
        Hypothesis("radially_unbounded", r"D=\mathbb R^n,\ V(x)\to\infty\ (\|x\|\to\infty)\ \text{(global clause)}",
                   counterexample=_cx_radial),
    ),
    clauses=(
        Clause("vdot_zero_at_origin", r"\dot V(0)=\nabla V(0)\cdot f(0)=0\ \text{(so}\ \dot V<0\ \text{only off 0)}",
               "derived_at", "n = 2, V and f arbitrary (undefined) C¹ functions", ("derivation", "panel_vs_derivation")),
        Clause("stable", r"0\ \text{Lyapunov stable (needs only}\ \dot V\le0\ \text{on}\ D)", "cited",
               "Khalil, Nonlinear Systems (3rd ed., 2002) Thm 4.1: V(0) = 0, V > 0 and V̇ ≤ 0 on D ∖ {0} give stability"),
        Clause("asymptotic", r"0\ \text{asymptotically stable}", "cited",
               "Khalil, Nonlinear Systems (3rd ed., 2002) Thm 4.1: with V̇ < 0 on D ∖ {0}, asymptotic stability",
               ("panel_vs_derivation", "trajectories"),
               also=(("checked", _PANEL_SCOPE + ", near points (radius 0.02–0.1) shrink by 0.1"),)),
        Clause("global", r"0\ \text{globally asymptotically stable}", "cited",
               "Khalil, Nonlinear Systems (3rd ed., 2002) Thm 4.2 (Barbashin–Krasovskii): D = ℝⁿ and V radially unbounded",
               ("panel_vs_derivation", "trajectories", "covers_stable_systems"),
               also=(("checked", _PANEL_SCOPE + ", far points (radius 1–5) of the two globally stable systems within "
                                 "the derived bound ‖x(T)‖ ≤ e^(−T)‖x(0)‖"),)),
    ),
    source=SOURCE + "; Khalil, Nonlinear Systems (3rd ed., 2002), Thm 4.1, 4.2 and the example with V = x²/(1+x²) + y²",
    kind="erratum",
    form=tl.corrected_conclusion,
    stated=tl.stated_conclusion,
    stated_statement=r"V(x)>0\ (x\neq0)\ \text{and}\ -\nabla V\cdot f>0\Rightarrow\ \text{(global) asymptotic stability}",
    derivation=tl.derive_conditions,
    checks=(
        Check("panel_vs_derivation", "symbolic", _panel_vs_derivation,
              "conclusions from symbolically decided hypotheses vs the derived stability of five systems"),
        Check("trajectories", "numeric", _trajectories,
              "conclusions from sampled hypotheses vs integrated trajectories (SciPy): covered ones must converge"),
        Check("covers_stable_systems", "numeric", _covers_stable_systems,
              "the theorem applies to the systems proven globally stable (it is not vacuous)"),
    ),
    mutants=(
        Mutant("no_radial_unboundedness", "dropped term", "global stability without V radially unbounded",
               _no_radial_unboundedness),
        Mutant("no_V0_zero", "dropped term", "V(0) = 0 dropped (V > 0 off the origin kept)", _no_V0_zero),
        Mutant("nonstrict_decrease", "wrong formula", "∇V·f ≤ 0 in place of < 0", _nonstrict_decrease),
        Mutant("conditions_at_origin", "wrong formula", "the literal reading: −∇V·f > 0 at the origin too",
               _at_origin_too),
    ),
    notes="Lecture notes 001 asks for V 'strictly positive outside the origin and −∇V·f > 0'. Read literally the "
          "second condition fails at the origin for every C¹ V (∇V(0)·f(0) = 0 since f(0) = 0), so the statement "
          "never applies (mutant conditions_at_origin). Read off the origin, it omits V(0) = 0 (f = (x, y) with "
          "V = 1 + 1/(1 + ‖x‖²) satisfies the rest and is unstable) and radial unboundedness (Khalil's "
          "V = x²/(1 + x²) + y² with V̇ = −12x²/u⁴ − 4y²/u² < 0: trajectories right of y = 2/(x − √2) escape to "
          "infinity), so its global conclusion is false. Hypotheses are decided symbolically (sufficient tests, "
          "theory.lyapunov.decide_properties) and by sampling (numerics.lyapunov.sample_properties; radial "
          "unboundedness as polynomial growth of the minimum of V on circles of radius 10 and 1000).",
)


# --------------------------------------------------------------------------------------------
# lyap.backward_construction
# form: {"P": A (..., n, n) -> P, "S": B (..., n, n) -> S, "f": (g (..., n), P, S) -> f (..., n)}


def _identity_reference(ctx, M):
    der = tl.derive_backward_construction()
    inst = der.facts["instance"]
    vs = inst["vars"]
    lam = {k: sp.lambdify(vs, v, "numpy") for k, v in (("A", inst["A"]), ("B", inst["B"]), ("grad", der.facts["grad"]))}
    X = ctx.rng().uniform(-2, 2, size=(M, 2))
    stack = lambda F: np.stack([np.asarray(F(*p), dtype=np.float64) for p in X])  # noqa: E731
    A, B, g = stack(lam["A"]), stack(lam["B"]), stack(lam["grad"])[..., 0]
    vdot, scale = nl.evaluate(der.result["Vdot"], vs, X)
    return X, A, B, g, vdot, scale, len(sp.Poly(der.result["Vdot"], *vs).terms())


def _identity_vs_sympy(form, ctx) -> CheckResult:
    """At random points of [−2, 2]², the form's ∇V·f (its P, S and f applied to the instance's
    A(x), B(x) and ∇V(x), lambdified from the derivation) against the derived polynomial
    V̇ = −∇VᵀP∇V, relative to the rounding scale (sum of |terms|)."""
    M = ctx.size(64, 256, 1024)
    X, A, B, g, vdot, scale, nterms = ctx.reference("instance", lambda: _identity_reference(ctx, M), M)
    with np.errstate(all="ignore"):
        P, S = np.asarray(form["P"](A)), np.asarray(form["S"](B))
        f = np.asarray(form["f"](g, P, S))
        mine = (g * f).sum(-1)
        sc = np.maximum(scale, (g * g).sum(-1) * (np.abs(P).sum((-1, -2)) + np.abs(S).sum((-1, -2))))
    return _scaled_relative("relative_to_rounding_scale", mine, vdot, sc, 64 * (nterms + 8) * EPS,
                            f"float64 rounding of a {nterms}-term polynomial and an 8-product quadratic form (64·(terms + 8)·eps, "
                            "relative to the sum of absolute terms); resolution: the smallest relative change of the derived "
                            "V̇ that one point rejects, (tol + e)·scale/|V̇|", seeds=[ctx.seed_for()], sizes={"points": M},
                            details={"max_abs_vdot": float(np.max(np.abs(vdot)))})


RTOL_BW, ATOL_BW = 1e-10, 1e-12


def _systems(ctx):
    K, n = ctx.size(4, 8, 16), 3
    rng = ctx.rng("systems")
    s = nl.draw_backward_systems(rng, K, n)
    X0 = rng.normal(size=(K, n))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    return s, X0


def _energy_balance(form, ctx) -> CheckResult:
    """Sampled systems (random SPD quadratic + quartic V, affine A(x), B(x), n = 3) integrated
    with the form's f (SciPy DOP853, rtol 1e-10, atol 1e-12) to T = 2, together with the reference
    dissipation q' = −‖A(x)ᵀ∇V‖² (not through the form): V(x(t)) − V(x(0)) must equal q(t) at 41
    times (dV/dt = −∇VᵀP∇V along the trajectory) and V must not increase between them."""
    s, X0 = ctx.reference("systems", lambda: _systems(ctx))
    r = nl.energy_balance(s, X0, form, 2.0, 41, rtol=RTOL_BW, atol=ATOL_BW)
    V, q = r["V"], r["q"]
    V0 = V[:, :1]
    with np.errstate(all="ignore"):
        rise = np.diff(V, axis=1)
        increase = float(largest(0.0, float(np.max(rise / V0))))
        up = int(np.sum(np.max(rise, axis=1) > 0))
    steps = r["steps"] if r["steps"] > 0 else 1
    tol = 10 * steps * RTOL_BW
    return _scaled_relative("balance", V - V0, q, np.broadcast_to(V0, V.shape), tol,
                   f"global error of an rtol-controlled integration (rtol {RTOL_BW:g}): at most one rtol per step, "
                   f"{steps} steps, not amplified by a dissipative flow, ×10 for atol and the dense output "
                   "(10·steps·rtol, relative to V(x(0))); resolution: the smallest relative change of the reference "
                   "dissipation q(t) = −∫‖Aᵀ∇V‖² that one instance and time rejects, (tol + e)·V(x(0))/|q(t)|",
                   others={"increase": increase},
                   seeds=[ctx.seed_for("systems")], sizes={"systems": s.K, "n": s.n, "T": 2.0, "times": 41},
                   details={"steps": r["steps"], "nfev": r["nfev"], "stopped_at_blowup": r["stopped"],
                            "instances_where_V_increased": up, "final_V_over_initial": (V[:, -1] / V[:, 0]).tolist()})


def _structure(form, ctx) -> CheckResult:
    """The form's P is symmetric PSD and its S skew at random points of every sampled system
    (smallest eigenvalue, ‖S + Sᵀ‖), and its ∇V·f equals −‖Aᵀ∇V‖² pointwise (no integration):
    relative errors against float64 rounding."""
    s, _ = ctx.reference("systems", lambda: _systems(ctx))
    M = ctx.size(32, 128, 512)
    X = ctx.rng("points").uniform(-1.5, 1.5, size=(s.K, M, s.n))
    A, B, g = nl.A_field(s, X), nl.B_field(s, X), nl.V_grad(s, X)
    with np.errstate(all="ignore"):
        P, S = np.asarray(form["P"](A)), np.asarray(form["S"](B))
        f = np.asarray(form["f"](g, P, S))
        nP = np.linalg.norm(P, axis=(-1, -2))
        nS = np.linalg.norm(S, axis=(-1, -2))
        Ps = (P + np.swapaxes(P, -1, -2)) / 2
        lam = np.linalg.eigvalsh(Ps)[..., 0] if np.all(np.isfinite(Ps)) else np.full(nP.shape, np.nan)
        ref = -(np.einsum("k...ji,k...j->k...i", A, g) ** 2).sum(-1)
        gg = (g * g).sum(-1)
        errs = {"P_asymmetry": float(np.max(np.linalg.norm(P - np.swapaxes(P, -1, -2), axis=(-1, -2)) / nP)),
                "P_negative_eigenvalue": float(np.max(np.maximum(-lam, 0.0) / nP)),
                "S_symmetric_part": float(np.max(np.linalg.norm(S + np.swapaxes(S, -1, -2), axis=(-1, -2)) / nS))}
        gf, dscale = (g * f).sum(-1), gg * (nP + nS)
    n = s.n
    tol = 64 * n * n * EPS
    # strictness: where P ≻ 0 beyond the rounding of the S-term (λ_min > tol·(‖P‖ + ‖S‖)) and ∇V ≠ 0, V̇ < 0
    with np.errstate(all="ignore"):
        strict = (lam > tol * (nP + nS)) & (gg > 0)
        errs["strict_violations"] = float(np.sum(strict & ~(gf < 0)))
    # the structural errors have reference 0 (a symmetric P, a skew S): their resolution is in their own
    # units, tol + |error| of ‖P − Pᵀ‖/‖P‖, −λ_min/‖P‖, ‖S + Sᵀ‖/‖S‖; the check's resolution is the
    # relative one of the pointwise dissipation, the entry with a nonzero reference
    own = {k: tol + abs(v) for k, v in errs.items()}
    return _scaled_relative("pointwise_dissipation", gf, ref, dscale, tol,
                            f"float64 rounding of n×n matrix products and an eigenvalue solver (64·n²·eps, n = {n}); "
                            "resolution: the smallest relative change of the reference dissipation −‖Aᵀ∇V‖² that one point "
                            "rejects, (tol + e)·‖∇V‖²(‖P‖ + ‖S‖)/‖Aᵀ∇V‖²; the structural errors (reference 0) resolve "
                            "tol + |error| in their own units (details)", others=errs,
                            seeds=[ctx.seed_for("systems"), ctx.seed_for("points")], sizes={"systems": s.K, "points": M, "n": n},
                            details={"points_with_P_definite_and_grad_nonzero": int(np.sum(strict)),
                                     "structural_resolution": own, "structural_resolution_units":
                                     "‖P − Pᵀ‖/‖P‖, max(−λ_min(P), 0)/‖P‖, ‖S + Sᵀ‖/‖S‖ that is rejected (tolerance + |error|)"})


def _mat(f):
    return lambda g, P, S: np.einsum("...ij,...j->...i", f(P, S), g)


_BW_FORM = {"P": nl.psd_from, "S": nl.skew_from, "f": nl.construct_f}

def _vdot_at(P, S, V, X):
    """∇V·f with f = (−P + S)∇V (numerics.lyapunov.construct_f) at the rows of X, for constant P, S."""
    grad = sp.lambdify((tl.x, tl.y), [sp.diff(V, v) for v in (tl.x, tl.y)], "numpy")
    g = np.stack([np.broadcast_to(np.asarray(c, dtype=float), X.shape[:1]) for c in grad(X[:, 0], X[:, 1])], axis=-1)
    f = nl.construct_f(g, np.broadcast_to(P, (len(X), 2, 2)), np.broadcast_to(S, (len(X), 2, 2)))
    return (g * f).sum(-1), g


_BW_POINTS = np.array([[0.0, 1.0], [1.0, 0.0], [0.6, -0.8], [-0.3, 0.4]])


def _cx_P_psd(ctx) -> Counterexample:
    """Without P ⪰ 0: V = x² + y², P = diag(1, −1), S = 0; ∇V·f = −4x² + 4y² > 0 at (0, 1)."""
    P, S, V = np.diag([1.0, -1.0]), np.zeros((2, 2)), tl.x**2 + tl.y**2
    vd, _ = _vdot_at(P, S, V, _BW_POINTS)
    worst_v = float(np.max(vd))
    return exceeds({"V": "x² + y²", "P": "diag(1, −1)", "S": "0"}, "nonpositive",
                   f"∇V·f = {vd.tolist()} at {_BW_POINTS.tolist()}: positive at (0, 1)",
                   error=worst_v, tolerance=0.0, justification="exact in float64 (small integers)")


def _cx_S_skew(ctx) -> Counterexample:
    """Without Sᵀ = −S: V = x² + y², P = I, S = diag(2, 0) (symmetric); the S-term does not cancel."""
    P, S, V = nl.psd_from(np.eye(2)), np.diag([2.0, 0.0]), tl.x**2 + tl.y**2
    vd, g = _vdot_at(P, S, V, _BW_POINTS)
    ref = -np.einsum("mi,ij,mj->m", g, P, g)
    err = float(np.max(np.abs(vd - ref) / np.maximum((g * g).sum(-1) * 3.0, 1e-300)))
    tol = 64 * 4 * EPS
    return exceeds({"V": "x² + y²", "P": "I", "S": "diag(2, 0)"}, "identity",
                   f"∇V·f = {vd.tolist()} vs −∇VᵀP∇V = {ref.tolist()}", error=err, tolerance=tol,
                   justification="float64 rounding of 2×2 products (64·n²·eps relative to ‖∇V‖²(‖P‖ + ‖S‖)), as "
                                 "the claim's structure check")


def _cx_V_pd(ctx) -> Counterexample:
    """Without V ≻ 0: V = −(x² + y²), P = I, S = 0 give f = (2x, 2y) with V̇ = −‖∇V‖² < 0 off the
    origin (the identity and strictness hold), yet every trajectory grows like e^{2t}."""
    V = -(tl.x**2 + tl.y**2)
    grad = sp.Matrix([sp.diff(V, v) for v in (tl.x, tl.y)])
    f = sp.expand((-sp.eye(2) + sp.zeros(2)) * grad)
    c = tl.Candidate((tl.x, tl.y), tuple(f), V, "negative V")
    X0 = nl.initial_points("near", ctx.rng("V_pd"), 4, True)
    with np.errstate(all="ignore"):
        ratio = float(np.max(nl.distance_ratios(c, X0, T_COND, rtol=1e-9, atol=1e-12)))
    return exceeds({"V": "−(x² + y²)", "P": "I", "S": "0", "f": "(" + ", ".join(map(str, f)) + ")"}, "lyapunov",
                   f"V̇ = {c.vdot()} < 0 off 0, but max ‖x(T)‖/‖x(0)‖ = {ratio:.4g} at T = {T_COND:g}",
                   error=ratio, tolerance=TAU,
                   justification=f"asymptotic stability needs ‖x(T)‖ ≤ {TAU:g}‖x(0)‖ from near points by T = {T_COND:g} "
                                 "(as lyap.conditions' trajectory check)")


_BW_SCOPE = ("8 sampled systems (4 at --quick), n = 3, V = xᵀQx + Σc_i x_i⁴, affine A(x), B(x): 128 points each (32 at "
             "--quick) in [−1.5, 1.5]³, and trajectories integrated to T = 2")


declare(
    id="lyap.backward_construction",
    fixed_sizes="the identity V̇ = −∇Vᵀ(P − S)∇V is derived pointwise at n = 3 with generic entries; a MatrixSymbol version for symbolic n is not written yet (n = 3 systems are checked)",
    title="Backward construction: f = (−P + S)∇V with P ⪰ 0, S skew gives ∇V·f = −∇VᵀP∇V ≤ 0",
    hypotheses=(
        setting("setting", r"V\in C^1(\mathbb R^n),\ f(x)=(-P(x)+S(x))\nabla V(x)",
                "the construction needs ∇V"),
        Hypothesis("P_psd", r"P(x)\succeq0", counterexample=_cx_P_psd),
        Hypothesis("S_skew", r"S(x)^\top=-S(x)", counterexample=_cx_S_skew),
        Hypothesis("V_pd", r"V(0)=0,\ V(x)>0\ (x\neq0)\ \text{(for the stability clause)}", counterexample=_cx_V_pd),
        Hypothesis("regular", r"V\in C^2,\ P,S\in C^1\ \text{(so}\ f\ \text{is locally Lipschitz; for the stability clause)}",
                   "V ∈ C², P, S ∈ C¹, so f = (−P + S)∇V is locally Lipschitz",
                   necessary_note="a condition of the cited theorems, not shown necessary: Khalil's Thm 4.1/4.2 take f "
                                  "locally Lipschitz (existence and uniqueness of solutions); with V only C¹, f is merely "
                                  "continuous and solutions need not be unique, but no instance where the stability "
                                  "conclusion then fails is computed here (the identity clauses need only V ∈ C¹)"),
    ),
    clauses=(
        Clause("identity", r"\nabla V\cdot f=-\nabla V^\top P\nabla V", "derived_at",
               "n = 3 pointwise (general symbolic ∇V, P = AAᵀ, S = B − Bᵀ), and the polynomial instance n = 2 "
               "(V = x² + xy + y² + x⁴)", ("derivation", "identity_vs_sympy", "structure"),
               also=(("checked", _BW_SCOPE + "; 256 points (64 at --quick) of the instance"),)),
        Clause("nonpositive", r"\nabla V^\top P\nabla V\ge0,\ \text{so}\ \dot V\le0", "derived_at",
               "n = 3 pointwise: ∇Vᵀ(AAᵀ)∇V = ‖Aᵀ∇V‖² (every P ⪰ 0 is some AAᵀ)", ("derivation", "structure", "energy_balance"),
               also=(("checked", _BW_SCOPE + ": V non-increasing along them"),)),
        Clause("strict", r"\dot V(x)<0\ \text{where}\ P(x)\succ0,\ \nabla V(x)\neq0", "checked",
               _BW_SCOPE.split(", and trajectories")[0] + " (every point where λ_min(P) > 64n²eps(‖P‖ + ‖S‖))",
               ("structure",)),
        Clause("lyapunov", r"P(x)\succ0,\ \nabla V(x)\neq0\ (x\neq0)\Rightarrow0\ \text{asymptotically stable "
               r"(globally if}\ V\ \text{radially unbounded)}", "cited",
               "Khalil, Nonlinear Systems (3rd ed., 2002) Thm 4.1 and 4.2 applied to V (see lyap.conditions): f locally "
               "Lipschitz (hypothesis 'regular'), V(0) = 0, V > 0 and V̇ < 0 off 0 (radially unbounded for the global part)"),
    ),
    source=SOURCE + "; Alfarano, Charton, Hayat, Global Lyapunov functions: a long-standing open problem in mathematics, "
                    "with symbolic transformers (NeurIPS 2024), backward generation",
    kind="theorem",  # the V̇ identity is an identity, but clause lyapunov is Khalil's theorem (cited)
    form=_BW_FORM,
    derivation=tl.derive_backward_construction,
    checks=(
        Check("identity_vs_sympy", "symbolic", _identity_vs_sympy,
              "∇V·f of the form vs the derived −∇VᵀP∇V for a polynomial instance"),
        Check("energy_balance", "numeric", _energy_balance,
              "sampled systems integrated (SciPy): V(x(t)) − V(x(0)) = −∫∇VᵀP∇V, and V decreases"),
        Check("structure", "numeric", _structure,
              "P symmetric PSD, S skew, ∇V·f = −‖Aᵀ∇V‖² pointwise"),
    ),
    mutants=(
        Mutant("symmetric_S", "wrong formula", "S = B + Bᵀ (symmetric) instead of B − Bᵀ: the S-term no longer cancels",
               {**_BW_FORM, "S": lambda B: B + np.swapaxes(B, -1, -2)}),
        Mutant("plus_P", "sign flip", "f = (+P + S)∇V", {**_BW_FORM, "f": _mat(lambda P, S: S + P)}),
        Mutant("P_not_psd", "wrong formula", "P = A + Aᵀ (symmetric, indefinite)",
               {**_BW_FORM, "P": lambda A: A + np.swapaxes(A, -1, -2)}),
        Mutant("dropped_P", "dropped term", "f = S∇V (no dissipation: V̇ = 0)", {**_BW_FORM, "f": _mat(lambda P, S: S)}),
    ),
    notes="P(x) = A(x)A(x)ᵀ with A affine in x (so P is a PSD quadratic polynomial matrix) and S(x) = B(x) − B(x)ᵀ; "
          "V(x) = xᵀQx + Σ c_i x_i⁴. With a symmetric S, V increases along some sampled trajectories (counted in the "
          "energy-balance details).",
)
