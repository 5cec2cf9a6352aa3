"""Group D: Hopfield networks and attention (lecture notes 002, memorisation part). Binds
theory/hopfield.py and numerics/hopfield.py to checks, tolerances and mutants.

Threshold checks on Monte Carlo fractions report a z-score: how many standard errors the worst
measured point lies on the wrong side of its threshold (negative: inside). They pass when no point
is more than 3 SE on the wrong side; the standard error is the spread of per-trial fractions over
the trials (a floor of 1/(number of Bernoulli samples) when every trial gives the same value).
"""

from __future__ import annotations

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
from proofs_checks.comparisons import largest, smallest, REL_UNITS
from theory import hopfield as th

from proofs_checks.claims._hopfield_common import (Z_JUST, Z_TOL, _z, abs_resolution, capacity_units,
                                                   threshold_load_resolution)


# --------------------------------------------------------------------------------------------
# hop.classical_energy
# form: {"energy": (xi, W, b) -> E, "flip_delta": (xi, W, b, i) -> ΔE,
#        "async_update": (xi, W, b, i) -> xi', "sync_step": (xi, W, b) -> xi'}


def _np_energy(xi, W, b):
    """Independent reference: the double sum −½ Σ_ij w_ij ξ_i ξ_j + Σ_i b_i ξ_i in NumPy."""
    return -0.5 * np.einsum("...i,...ij,...j->...", xi, W, xi) + np.einsum("...i,...i->...", b, xi)


def _sym_instances(rng, B, d):
    """Symmetric ``W`` with ``w_ii ≥ 0`` and random ``b``, ``ξ``. The last quarter of the batch sits on
    the boundaries of the hypotheses: zero-diagonal Hebbian ``W`` with ``b = 0`` (integer fields, so
    ties ``h_i = 0`` occur and ``w_ii = 0``: flips with ``ΔE = 0``), and the lecture notes' Hebbian
    ``W = Σ x_μ x_μᵀ`` with its diagonal ``w_ii = N`` kept."""
    A = rng.normal(size=(B, d, d))
    W = A + np.swapaxes(A, -1, -2)
    idx = np.arange(d)
    W[:, idx, idx] = np.abs(W[:, idx, idx])  # w_ii ≥ 0
    b = rng.normal(size=(B, d))
    xi = rng.choice([-1.0, 1.0], size=(B, d))
    k = B // 8
    if k:
        for lo, zero_diag in ((B - 2 * k, True), (B - k, False)):
            P = rng.choice([-1.0, 1.0], size=(k, int(rng.integers(2, 5)), d))
            Wh = np.swapaxes(P, -1, -2) @ P
            if zero_diag:
                Wh[:, idx, idx] = 0.0
            W[lo:lo + k], b[lo:lo + k] = Wh, 0.0
    return xi, W, b


def _classical_symbolic(form, ctx) -> CheckResult:
    """ΔE of the form and the form's own energy difference against SymPy's ΔE, for every unit."""
    d = 5
    rng = ctx.rng()
    xi, W, b = _sym_instances(rng, 16, d)
    errs, pairs = {}, []
    for i in range(d):
        der = th.derive_classical_flip(d, i)
        syms = list(der.facts["xi"]) + sorted(der.result.free_symbols - set(der.facts["xi"]), key=str)
        f = sp.lambdify(syms, der.result, "numpy")
        vals = []
        for k in range(len(xi)):
            sub = {f"xi_{j + 1}": xi[k, j] for j in range(d)}
            sub.update({f"w_{r + 1}{c + 1}": W[k, r, c] for r in range(d) for c in range(r, d)})
            sub.update({f"b_{j + 1}": b[k, j] for j in range(d)})
            vals.append(f(*[sub[str(s)] for s in syms]))
        ref = np.asarray(vals)
        t = [torch.from_numpy(a) for a in (xi, W, b)]
        got = form["flip_delta"](*t, i).numpy()
        flipped = t[0].clone()
        flipped[:, i] = -flipped[:, i]
        e_diff = (form["energy"](flipped, t[1], t[2]) - form["energy"](*t)).numpy()
        errs[f"flip_delta_unit{i}"] = float(np.max(np.abs(got - ref)))
        errs[f"energy_diff_unit{i}"] = float(np.max(np.abs(e_diff - ref)))
        pairs += [(got, ref), (e_diff, ref)]
    scale = float(np.max(np.abs(W)) * d + np.max(np.abs(b)))
    tol = 64 * d * EPS * scale
    eps, conf = abs_resolution(pairs, tol)
    return compare(worst(errs), tol,
                   f"float64 rounding of sums of d={d} terms of size ≤ {scale:.1f} (64·d·eps·scale)",
                   seeds=[ctx.seed_for()], sizes={"d": d, "instances": len(xi)},
                   details={**errs, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (SymPy's ΔE of one unit; (tol + error)/max|ΔE|)")


def _classical_async(form, ctx) -> CheckResult:
    """Along asynchronous updates of the form (random unit order), the form's energy equals the
    NumPy double sum, never increases, and drops by at least 2w_ii at every flip; the form's ΔE for
    flipping each unit equals the measured change of the NumPy energy at every visited state;
    dynamics reach a fixed point."""
    rng = ctx.rng()
    B, d = ctx.size(64, 256, 1024), 12
    xi, W, b = _sym_instances(rng, B, d)
    xt, Wt, bt = (torch.from_numpy(a) for a in (xi, W, b))
    E = form["energy"](xt, Wt, bt)
    E_ref0 = _np_energy(xi, W, b)
    pair0 = (E.numpy().copy(), E_ref0)
    errs = {"energy_vs_numpy": float(np.max(np.abs(E.numpy() - E_ref0)))}
    worst_rise, worst_gap, flips = -np.inf, -np.inf, 0
    trace = [E.numpy()]
    sweeps = 30
    delta_err = 0.0
    for _ in range(sweeps):
        for i in rng.permutation(d):
            # the form's ΔE for flipping unit i vs the measured change of the NumPy double sum
            x_np = xt.numpy()
            flip = x_np.copy()
            flip[:, i] = -flip[:, i]
            pred = np.asarray(form["flip_delta"](xt, Wt, bt, int(i)), dtype=float)
            delta_err = largest(delta_err, float(np.max(np.abs(pred - (_np_energy(flip, W, b) - _np_energy(x_np, W, b))))))
            new = form["async_update"](xt, Wt, bt, int(i))
            E_new = form["energy"](new, Wt, bt)
            flipped = (new[:, i] != xt[:, i]).numpy()
            dE = (E_new - E).numpy()
            worst_rise = largest(worst_rise, float(np.max(dE)))
            if flipped.any():
                worst_gap = largest(worst_gap, float(np.max((dE + 2 * W[:, i, i])[flipped])))
                flips += int(flipped.sum())
            xt, E = new, E_new
            trace.append(E.numpy())
    h = np.einsum("bij,bj->bi", W, xt.numpy()) - b
    unstable = float(np.mean(np.where(h >= 0, 1.0, -1.0) != xt.numpy()))
    errs.update({"flip_delta_vs_measured": delta_err, "max_energy_rise": largest(worst_rise, 0.0),
                 "max_dE_plus_2wii_at_flips": largest(worst_gap, 0.0),
                 "unstable_units_after": unstable})
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        tr = np.asarray(trace)
        for k in range(smallest(12, B)):
            ax.plot(tr[: d * 4, k], lw=1)
        ax.set_xlabel("asynchronous unit update")
        ax.set_ylabel("E(ξ)")
        ax.set_title("Classical Hopfield energy along async updates")
        ctx.save_figure(fig, "energy_traces")
    scale = float(np.max(np.abs(W)) * d * d + np.max(np.abs(b)) * d)
    tol = 64 * d * EPS * scale
    eps, conf = abs_resolution([pair0], tol, rest=worst({k: v for k, v in errs.items() if k != "energy_vs_numpy"}))
    return compare(worst(errs), tol, "float64 rounding of energies (sums of d² terms, 64·d·eps·scale)",
                   seeds=[ctx.seed_for()], sizes={"instances": B, "d": d, "sweeps": sweeps},
                   details={**errs, "flips": flips, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (the NumPy energy at the start states; (tol + error)/max|E|)")


def _classical_sync_cycle(form, ctx) -> CheckResult:
    """Synchronous updates of the form (same W, b, w_ii ≥ 0) enter a 2-cycle on some instance:
    ξ → ξ' → ξ with ξ' ≠ ξ and E(ξ) = E(ξ), so the async energy argument does not extend to sync."""
    seed = ctx.seed_for()
    found, xi, W, b = nh.find_sync_two_cycles(256, 8, seed, step=form["sync_step"])
    n = int(found.sum())
    details = {"instances": 256, "two_cycles_found": n}
    err = 0.0 if n > 0 else 1.0
    if n:
        k = int(torch.nonzero(found)[0])
        x1 = form["sync_step"](xi[k], W[k], b[k])
        details["example_xi"] = xi[k].tolist()
        details["example_xi_next"] = x1.tolist()
        # exhibit it with the independent NumPy update
        x1n = np.where(W[k].numpy() @ xi[k].numpy() - b[k].numpy() >= 0, 1.0, -1.0)
        x2n = np.where(W[k].numpy() @ x1n - b[k].numpy() >= 0, 1.0, -1.0)
        err = 0.0 if (np.array_equal(x2n, xi[k].numpy()) and not np.array_equal(x1n, xi[k].numpy())) else 1.0
    return compare(err, 0.0, "exact: a 2-cycle found by the form's sync step and confirmed by the NumPy update",
                   seeds=[seed], sizes={"instances": 256, "d": 8}, details=details)


def _sync_as_sweep(xi, W, b):
    """A 'synchronous' step that is really one in-place sweep of asynchronous updates (units in
    order): it descends the energy, so it never 2-cycles."""
    for i in range(xi.shape[-1]):
        xi = nh.async_unit_update(xi, W, b, i)
    return xi


def _flip_delta_no2(xi, W, b, i):
    return nh.flip_energy_change(xi, W, b, i) / 2


def _flip_delta_with_self(xi, W, b, i):
    return 2 * xi[..., i] * ((W[..., i, :] * xi).sum(-1) - b[..., i])


def _async_no_bias(xi, W, b, i):
    return nh.async_unit_update(xi, W, torch.zeros_like(b), i)


_CLASSICAL = {"energy": nh.classical_energy, "flip_delta": nh.flip_energy_change,
              "async_update": nh.async_unit_update, "sync_step": nh.sync_step}

def _np_async(xi, W, b, i):
    """One asynchronous update in NumPy (``sgn(0) = +1``), independent of the form."""
    out = np.array(xi, dtype=float)
    out[i] = 1.0 if float(W[i] @ out - b[i]) >= 0 else -1.0
    return out


def _cx_energy_rise(W, b, xi, i, what, justification):
    """``E`` before and after the NumPy asynchronous update of unit ``i``; the clause ``descent`` is
    violated when ``E`` rises (computed with :func:`numerics.hopfield.classical_energy`)."""
    Wt, bt = torch.tensor(W, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    new = _np_async(xi, np.asarray(W, float), np.asarray(b, float), i)
    E0 = float(nh.classical_energy(torch.tensor(xi, dtype=torch.float64), Wt, bt))
    E1 = float(nh.classical_energy(torch.from_numpy(new), Wt, bt))
    formula = float(nh.flip_energy_change(torch.tensor(xi, dtype=torch.float64), Wt, bt, i))
    return Counterexample({"W": str(W), "b": str(b), "xi": str(xi), "unit": i}, "descent",
                          f"{what}: updating unit {i + 1} moves ξ {tuple(xi)} → {tuple(new)} and E from {E0:g} to {E1:g} "
                          f"(a rise of {E1 - E0:g}); the symmetric-W formula 2ξ_i(Σ_(j≠i) w_ij ξ_j − b_i) would give {formula:g}",
                          violated=E1 > E0, error=E1 - E0, tolerance=0.0, justification=justification)


def _cx_nonsymmetric(ctx) -> Counterexample:
    """Without W = Wᵀ: w_12 = 1, w_21 = −3 (zero diagonal) — one asynchronous update raises E by 2."""
    return _cx_energy_rise([[0.0, 1.0], [-3.0, 0.0]], [0.0, 0.0], [-1.0, 1.0], 0, "W ≠ Wᵀ",
                           "exact ±1 and small-integer arithmetic; any rise > 0 violates 'E never increases'")


def _cx_negative_diagonal(ctx) -> Counterexample:
    """Without w_ii ≥ 0: symmetric W with w_11 = −2 — the update flips unit 1 and E rises by 2."""
    return _cx_energy_rise([[-2.0, 1.0], [1.0, 0.0]], [0.0, 0.0], [1.0, 1.0], 0, "w_11 = −2 < 0",
                           "exact small-integer arithmetic; ΔE = 2s − 2w_ii is positive once w_ii < s ≤ 0")


def _cx_synchronous(ctx) -> Counterexample:
    """Without asynchrony: the synchronous step ξ ← sgn(Wξ − b) (all units at once) on a symmetric,
    zero-diagonal W raises E and then returns: a 2-cycle, never a fixed point."""
    W = torch.tensor([[0.0, -2.0], [-2.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([0.0, 1.0], dtype=torch.float64)
    x0 = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    x1 = nh.sync_step(x0, W, b)
    x2 = nh.sync_step(x1, W, b)
    E0, E1 = float(nh.classical_energy(x0, W, b)), float(nh.classical_energy(x1, W, b))
    cycle = bool(torch.equal(x2, x0)) and not bool(torch.equal(x1, x0))
    return Counterexample({"W": "[[0, -2], [-2, 0]]", "b": "(0, 1)", "xi": "(-1, -1)", "update": "synchronous"}, "descent",
                          f"ξ {tuple(x0.tolist())} → {tuple(x1.tolist())} → {tuple(x2.tolist())}: E {E0:g} → {E1:g} "
                          f"(rise {E1 - E0:g}), and the state returns after two steps (2-cycle: {cycle}), so it also "
                          "never reaches a fixed point", violated=E1 > E0 and cycle, error=E1 - E0, tolerance=0.0,
                          justification="exact small-integer arithmetic; the async argument bounds one flip at a time, "
                          "here two units flip together")


def _cx_unfair(ctx) -> Counterexample:
    """Without fairness: d = 2, W = 0, b = (1, 0), ξ = (1, 1), and only unit 2 is ever updated. Its
    update leaves ξ unchanged for ever, yet unit 1 is unstable: ξ is not a fixed point."""
    W = torch.zeros(2, 2, dtype=torch.float64)
    b = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x0 = torch.tensor([1.0, 1.0], dtype=torch.float64)
    x = x0
    for _ in range(10):  # unit 2 (index 1) updated ten times: a fixed state from the first update on
        x = nh.async_unit_update(x, W, b, 1)
    stuck = bool(torch.equal(x, x0))
    target = nh.sync_step(x, W, b)
    unstable = [i + 1 for i in range(2) if float(target[i]) != float(x[i])]
    return Counterexample({"d": 2, "W": "0", "b": "(1, 0)", "xi": "(1, 1)", "updates": "unit 2 only"}, "converges",
                          f"updating only unit 2 keeps ξ = {tuple(x.tolist())} (unchanged: {stuck}), but "
                          f"sgn(Wξ − b) = {tuple(target.tolist())}: unit(s) {unstable} unstable, so the dynamics stop "
                          "at a state that is not a fixed point",
                          violated=stuck and bool(unstable), error=float(len(unstable)), tolerance=0.0,
                          justification="exact ±1 arithmetic: ξ ≠ sgn(Wξ − b) while no update changes ξ")


declare(
    id="hop.classical_energy",
    title="Classical Hopfield (W = Wᵀ, w_ii ≥ 0): asynchronous updates never increase the energy; synchronous ones can cycle",
    hypotheses=(
        setting("states", r"\xi\in\{-1,1\}^d,\ W\in\mathbb R^{d\times d},\ b\in\mathbb R^d,\ E(\xi)=-\tfrac12\xi^\top W\xi+\xi^\top b,\ \operatorname{sgn}(0)=+1",
                "the update writes ±1 values, and ΔE uses ξ_i² = 1",
                text="±1 states, any real W and b (the lecture notes' Hebbian W = Σ x_μ x_μᵀ is one case: symmetric, w_ii = N)"),
        Hypothesis("symmetric", r"W=W^\top", "symmetric weights", counterexample=_cx_nonsymmetric),
        Hypothesis("nonneg_diagonal", r"w_{ii}\ge0", "non-negative self-couplings (zero diagonal included)",
                   counterexample=_cx_negative_diagonal),
        Hypothesis("asynchronous", r"\text{one unit at a time: }\xi_i\leftarrow\operatorname{sgn}((W\xi-b)_i)",
                   "asynchronous updates (any order of units)", counterexample=_cx_synchronous),
        Hypothesis("fair", r"\text{every unit is updated infinitely often (e.g. sweeps) (for the convergence clause)}",
                   "fairness: no unit is left out for ever (e.g. sequential or random-order sweeps)",
                   counterexample=_cx_unfair),
    ),
    clauses=(
        Clause("flip_formula", r"\text{flipping }\xi_i\text{ changes }E\text{ by }\Delta E=2\xi_i\big(\textstyle\sum_{j\neq i}w_{ij}\xi_j-b_i\big)",
               "derived", "every d (block matrix symbols of symbolic size d − 1; needs only W = Wᵀ and ξ_i² = 1)",
               ("derivation", "flip_delta_vs_sympy", "async_energy_descent"),
               also=(("derived_at", "d = 5, every unit (SymPy entries, symbolic check)"),
                     ("checked", "d = 12, 64/256/1024 instances (quick/default/full) incl. Hebbian W, 30 sweeps")), rests_on=("symmetric W", "flip rule")),
        Clause("descent", r"\text{an update that flips }\xi_i\text{ has }\Delta E\le-2w_{ii}\le0:\ E\text{ never increases}",
               "derived", "every d (the flip happens only when s = ξ_i h_i ≤ 0, so ΔE = 2s − 2w_ii)",
               ("derivation", "async_energy_descent"),
               also=(("checked", "d = 12, 64/256/1024 instances, every update of 30 random-order sweeps, incl. ties "
                      "h_i = 0 with w_ii = 0 (ΔE = 0) and w_ii = N"),), rests_on=("symmetric W", "flip rule")),
        Clause("converges", r"\text{asynchronous dynamics with every unit updated infinitely often make finitely many flips and "
               r"stop at a fixed point }\xi=\operatorname{sgn}(W\xi-b)",
               "argued", "every d: a flip has ΔE ≤ −2w_ii ≤ 0 (clause descent), and a ΔE = 0 flip (w_ii = 0, h_i = 0, "
               "sgn(0) = +1) only turns −1 into +1, so (E, −#{+1 units}) strictly decreases lexicographically at every flip; "
               "it takes finitely many values, so the flips are finitely many, and with every unit updated infinitely often "
               "the last state is a fixed point",
               ("async_energy_descent",),
               also=(("cited", "Hopfield (PNAS 1982): the tie-free case (his rule leaves a unit unchanged at a tie, "
                      "with zero diagonal T_ii = 0): E bounded and non-increasing"),
                     ("checked", "d = 12, 64/256/1024 instances: no unstable unit after 30 sweeps"),)),
        Clause("sync_can_cycle", r"\text{synchronous updates }\xi\leftarrow\operatorname{sgn}(W\xi-b)\text{ can enter a 2-cycle (some }W=W^\top,\ w_{ii}\ge0)",
               "checked", "a 2-cycle among 256 random instances (d = 8), confirmed by an independent NumPy update; "
               "and the d = 2 instance of the 'asynchronous' counterexample",
               ("sync_two_cycle",)),
    ),
    source="lecture notes 002; Hopfield (1982)",
    kind="theorem",
    form=_CLASSICAL,
    derivation=th.derive_classical_flip_general,
    checks=(
        Check("flip_delta_vs_sympy", "symbolic", _classical_symbolic, "ΔE and the energy difference vs SymPy's ΔE"),
        Check("async_energy_descent", "numeric", _classical_async, "energy vs NumPy, monotone, drop ≥ 2w_ii per flip"),
        Check("sync_two_cycle", "numeric", _classical_sync_cycle, "a synchronous 2-cycle exists (counterexample)"),
    ),
    mutants=(
        Mutant("energy_sign_flipped", "sign flip", "E = +½ξᵀWξ − ξᵀb",
               {**_CLASSICAL, "energy": lambda xi, W, b: -nh.classical_energy(xi, W, b)}),
        Mutant("delta_without_2", "wrong constant", "ΔE = ξ_i(Σ_{j≠i} w_ij ξ_j − b_i) (factor 2 dropped)",
               {**_CLASSICAL, "flip_delta": _flip_delta_no2}),
        Mutant("delta_includes_self", "extra term", "ΔE = 2ξ_i(Σ_j w_ij ξ_j − b_i) (j = i not excluded)",
               {**_CLASSICAL, "flip_delta": _flip_delta_with_self}),
        Mutant("sync_is_sequential_sweep", "wrong formula", "the synchronous step replaced by one sweep of asynchronous updates (no 2-cycle)",
               dict(_CLASSICAL, sync_step=_sync_as_sweep)),
        Mutant("update_ignores_bias", "dropped term", "ξ_i ← sgn((Wξ)_i) with the bias dropped",
               {**_CLASSICAL, "async_update": _async_no_bias}),
    ),
)


# --------------------------------------------------------------------------------------------
# hop.classical_capacity (erratum)
# form: {"exact_recall", "exact_recall_all", "bit_error"}: SymPy expressions in the symbol d

# the symbol d of th.derive_capacity_formulas (positive; SymPy symbols of one name and assumptions are equal):
# built here, not by running that derivation at import (0.7 CPU s in every process that loads the registry)
_d = sp.Symbol("d", positive=True)


def _cap_fn(expr):
    return sp.lambdify(_d, expr, "math")


def _capacity_symbolic(form, ctx) -> CheckResult:
    """Exact-recall capacities equal the SNR derivation; the bit-error capacity is linear in d with
    the AGS slope 0.138; bit-error over exact-recall capacity → ∞ (the criteria differ)."""
    der = th.derive_classical_capacity()
    ref = der.result
    details = {}
    bad = 0
    for key in ("exact_recall", "exact_recall_all"):
        diff = sp.simplify(sp.sympify(form[key]) - ref[key])
        details[f"{key}_minus_derived"] = str(diff)
        bad += diff != 0
    slope = sp.limit(sp.sympify(form["bit_error"]) / _d, _d, sp.oo)
    details["bit_error_slope"] = str(slope)
    bad += not (slope.is_finite and abs(float(slope) - float(th.AGS_ALPHA_C)) <= 0.0025)
    ratio = sp.limit(sp.sympify(form["bit_error"]) / sp.sympify(form["exact_recall"]), _d, sp.oo)
    details["bit_over_exact_limit"] = str(ratio)
    bad += ratio != der.facts["bit_over_most_limit"]
    details["stated_ratio"] = str(der.facts["stated_ratio"])
    return compare(float(bad), 0.0, "exact symbolic comparison (AGS slope to its quoted precision 0.138 ± 0.0025)",
                   sizes={}, details=details)


def _capacity_exact_measured(form, ctx) -> CheckResult:
    """Scaling-threshold test of the exact-recall capacities, measured on random ±1 patterns:
    at N = C(d) a stored pattern is an exact fixed point with frequency ≥ 0.75 (all patterns: the
    all-fixed frequency ≥ 0.75) for every d, and at N = 2C(d) the frequency at the largest d is ≤ 0.25.
    (SNR theory: at C_most the frequency → exp(−1/√(4π ln d)) ≈ 0.9; at 2C it → 0.)"""
    ds = ctx.size([64, 256, 1024], [64, 128, 256, 512, 1024], [64, 128, 256, 512, 1024, 2048])
    trials = ctx.size(24, 48, 96)
    seed = ctx.seed_for()
    dev = resolve_device(ctx.device)
    zs, rows, loads = {}, [], []
    for crit, f, fld in (("most", _cap_fn(form["exact_recall"]), "frac_fixed"),
                         ("all", _cap_fn(form["exact_recall_all"]), "all_fixed")):
        for d in ds:
            C = float(f(d))
            Ns = [largest(1, round(C)), largest(2, round(2 * C))]
            if not all(1 <= N <= 4 * d for N in Ns):
                zs[f"{crit}_d{d}_C_out_of_range"] = math.inf
                continue
            # the simulation at (d, N) does not depend on the form: cached, so mutants that land on
            # the same loads cost only the comparison
            p1, p2 = ctx.reference("sweep", lambda: nh.classical_capacity_sweep(d, Ns, trials, seed + d, device=dev), d, Ns)
            n1 = trials * (p1.N if crit == "most" else 1)
            n2 = trials * (p2.N if crit == "most" else 1)
            zs[f"{crit}_d{d}_at_C"] = _z(getattr(p1, fld), getattr(p1, fld + "_se"), 0.75, "ge", n1)
            pts = [(Ns[0], getattr(p1, fld), getattr(p1, fld + "_se"), n1), (Ns[1], getattr(p2, fld), getattr(p2, fld + "_se"), n2)]
            loads.append((pts, 0, 0.75, "ge", "up"))
            if d == ds[-1]:
                zs[f"{crit}_d{d}_at_2C"] = _z(getattr(p2, fld), getattr(p2, fld + "_se"), 0.25, "le", n2)
                loads.append((pts, 1, 0.25, "le", "down"))
            rows.append({"criterion": crit, "d": d, "C": C, "N": Ns, "at_C": getattr(p1, fld), "at_2C": getattr(p2, fld)})
    err = worst(zs)
    eps, res_det = threshold_load_resolution(loads)
    return compare(err, Z_TOL, Z_JUST + ". " + CAPACITY_RES_JUST, seeds=[seed + d for d in ds], sizes={"d": ds, "trials": trials},
                   device=str(dev), details={"z_scores": zs, "points": rows, "worst_z": err, "resolution": res_det},
                   resolution=eps, resolution_units=capacity_units(res_det))


def _capacity_bit_measured(form, ctx) -> CheckResult:
    """Bit-error criterion measured with asynchronous dynamics run to a fixed point from every stored
    pattern: at N = 0.8·C_bit(d) the wrong-bit fraction is ≤ 1.5 %, at N = 1.25·C_bit(d) it is > 1.5 %."""
    ds = ctx.size([256, 512], [256, 512, 1024], [256, 512, 1024, 2048])
    trials = ctx.size(8, 16, 32)
    starts = ctx.size(16, 32, None)
    seed = ctx.seed_for()
    dev = resolve_device(ctx.device)
    f = _cap_fn(form["bit_error"])
    zs, rows, loads = {}, [], []
    for d in ds:
        C = float(f(d))
        Ns = [largest(2, round(0.8 * C)), largest(3, round(1.25 * C))]
        if not all(N <= d for N in Ns):
            zs[f"d{d}_C_out_of_range"] = math.inf
            continue
        lo, hi = ctx.reference("sweep", lambda: nh.classical_capacity_sweep(d, Ns, trials, seed + d, bit_error=True, device=dev,
                                                                            starts=starts), d, Ns)
        n_lo, n_hi = trials * smallest(lo.N, starts or lo.N) * d, trials * smallest(hi.N, starts or hi.N) * d
        zs[f"d{d}_below"] = _z(lo.bit_error, lo.bit_error_se, 0.015, "le", n_lo)
        zs[f"d{d}_above"] = _z(hi.bit_error, hi.bit_error_se, 0.015, "ge", n_hi)
        pts = [(Ns[0], lo.bit_error, lo.bit_error_se, n_lo), (Ns[1], hi.bit_error, hi.bit_error_se, n_hi)]
        loads += [(pts, 0, 0.015, "le", "up"), (pts, 1, 0.015, "ge", "down")]
        rows.append({"d": d, "C": C, "N": Ns, "bit_error": [lo.bit_error, hi.bit_error]})
    if ctx.want_figures:
        _capacity_figure(ctx, seed, dev)
    err = worst(zs)
    eps, res_det = threshold_load_resolution(loads)
    return compare(err, Z_TOL, Z_JUST + ". " + CAPACITY_RES_JUST, seeds=[seed + d for d in ds],
                   sizes={"d": ds, "trials": trials, "starts_per_trial": starts or "all"},
                   device=str(dev), details={"z_scores": zs, "points": rows, "worst_z": err, "resolution": res_det},
                   resolution=eps, resolution_units=capacity_units(res_det))


#: the capacity threshold checks' resolution (:func:`threshold_load_resolution`, :func:`capacity_units`)
CAPACITY_RES_JUST = ("Resolution: the measured fraction is interpolated log-linearly in N between the two measured loads "
                     "of each d (it decreases in N); a capacity scaled by 1 + δ moves a tested load to N(1 + δ), "
                     "rejected where the interpolated fraction is 3 SE past its threshold. Far above the 0.5% Monte "
                     "Carlo target by construction: these are scaling-threshold tests at loads C and 2C (0.8C and "
                     "1.25C), where the fraction sits at ~0.9 against 0.75 (≤ 1.5% wrong bits at 0.8C), so δ is the "
                     "distance in load from the threshold crossing, not a standard error of C; the formulas are "
                     "asymptotic (the fraction at C → exp(−1/√(4π ln d)) only as d → ∞), so no finite-d estimate of "
                     "C converges to the form's C")


def _capacity_figure(ctx, seed, dev):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for d in (64, 128, 256, 512):
        alphas = np.linspace(0.02, 0.25, 12)
        pts = nh.classical_capacity_sweep(d, [largest(2, round(a * d)) for a in alphas], 8, seed + 31 * d,
                                          bit_error=d <= 256, device=dev, starts=16)
        axes[0].plot([p.N / d for p in pts], [p.frac_fixed for p in pts], "o-", ms=3, label=f"d={d}")
        axes[0].axvline(1 / (2 * math.log(d)), color=axes[0].lines[-1].get_color(), ls=":", lw=1)
        if d <= 256:
            axes[1].plot([p.N / d for p in pts], [p.bit_error for p in pts], "o-", ms=3, label=f"d={d}")
    axes[0].axvline(0.138, color="k", ls="--", lw=1, label="0.138")
    axes[0].set_xlabel("N/d")
    axes[0].set_ylabel("fraction of patterns exactly fixed")
    axes[0].set_title("exact recall (dotted: 1/(2 ln d))")
    axes[0].legend(fontsize=7)
    axes[1].axhline(0.015, color="k", ls=":", lw=1)
    axes[1].axvline(0.138, color="k", ls="--", lw=1)
    axes[1].set_xlabel("N/d")
    axes[1].set_ylabel("wrong-bit fraction after async dynamics")
    axes[1].set_title("bit-error criterion (AGS 0.138)")
    axes[1].legend(fontsize=7)
    ctx.save_figure(fig, "capacity_curves")


_CAP = {"exact_recall": _d / (2 * sp.log(_d)), "exact_recall_all": _d / (4 * sp.log(_d)), "bit_error": th.AGS_ALPHA_C * _d}


def _cx_correlated(ctx) -> Counterexample:
    """Without i.i.d. patterns: N = 3 patterns equal to one base pattern except on a disjoint block of d/8
    bits each. At x_1 a bit l of its own block has the field b_l((N − 2)d − 4k(N − 1) + N) = 3b_l (k = d/8, N = 3),
    the wrong sign, so no stored pattern is a fixed point at any d, though N = 3 ≤ C_all(d) ≤ C_most(d) for d ≥ 64."""
    der = th.derive_classical_capacity()
    c_all = sp.lambdify(der.facts["d"], der.result["exact_recall_all"], "math")
    fracs, ok = {}, True
    for d in (64, 256, 1024):
        base = nh.random_patterns((1, 1, d), ctx.seed_for("base", d))[0, 0]
        P = base.repeat(3, 1)
        k = d // 8
        for m in range(3):
            P[m, m * k:(m + 1) * k] *= -1
        frac = float(nh.fixed_point_fraction(P[None])[0][0])
        fracs[f"d{d}"] = frac
        ok &= frac == 0.0 and 3 <= c_all(d)
    return Counterexample({"N": 3, "d": "64, 256, 1024", "patterns": "one base pattern, block μ of d/8 bits flipped"},
                          "exact_most", f"fraction of stored patterns that are fixed points: {fracs} at N = 3 ≤ C_all(d) "
                          f"(C_all(64) = {c_all(64):.2f}); the clause says it tends to 1",
                          violated=ok, error=1.0 - worst(list(fracs.values())), tolerance=0.25,
                          justification="exact ±1 integer fields; the checks' threshold at N ≤ C is a fraction ≥ 0.75",
                          details={"fractions": fracs})


def _cx_diagonal_kept(ctx) -> Counterexample:
    """Without the zero diagonal: with w_ii = N kept (W = Σ x_μ x_μᵀ as written in the lecture notes), each
    pattern's own bit gets N − 1 extra signal; at N = d² (far above C_most) the patterns stay fixed points."""
    d, N, trials = 32, 32 * 32, 4
    P = nh.random_patterns((trials, N, d), ctx.seed_for("diag", d))
    W = nh.hebbian_weights(P, zero_diagonal=False)
    kept = float((nh.sgn(P @ W) == P).all(-1).double().mean())
    zero = float(nh.fixed_point_fraction(P)[0].mean())
    c_most = float(_cap_fn(th.derive_classical_capacity().result["exact_recall"])(d))
    return Counterexample({"d": d, "N": N, "trials": trials, "W": "Σ x_μ x_μᵀ with w_ii = N"}, "exact_most",
                          f"at N = d² = {N} = {N / c_most:.0f}·C_most(d) the fraction of fixed patterns is {kept:g} with "
                          f"the diagonal kept ({zero:g} with w_ii = 0); the clause says it tends to 0 above C_most",
                          violated=kept >= 0.75 and zero <= 0.25, error=kept, tolerance=0.25,
                          justification="signal d + N − 1 against crosstalk √((N−1)(d−1)): SNR ≈ √d → ∞ along N = d²; "
                          "0.25 is the checks' threshold above C", details={"diag_kept": kept, "zero_diag": zero})


declare(
    id="hop.classical_capacity",
    title="Classical Hopfield capacity (random ±1 patterns, d → ∞): exact recall d/(2 ln d) (all: d/(4 ln d)) versus ≈1.5 % wrong bits at 0.138 d",
    stated_statement=r"C\approx\frac{d}{2\log(d)}\approx0.14\,d",
    hypotheses=(
        Hypothesis("iid_patterns", r"x_1,\dots,x_N\ \text{i.i.d. uniform on }\{-1,1\}^d",
                   "random patterns (the capacities are statements about this distribution)", counterexample=_cx_correlated),
        Hypothesis("hebbian_zero_diagonal", r"W=\textstyle\sum_\mu x_\mu x_\mu^\top-NI\ (w_{ii}=0),\ b=0",
                   "Hebbian weights with zero diagonal, no bias", counterexample=_cx_diagonal_kept),
        setting("asymptotic", r"d\to\infty\ (\text{leading order; a fixed point: }\operatorname{sgn}(Wx_\nu)=x_\nu)",
                "the capacities are leading-order statements as d → ∞ "
                "(at finite d the fraction at C_most is only ≈ exp(−1/√(4π ln d)), ≈ 0.9 at these d)"),
    ),
    clauses=(
        Clause("exact_most", r"C_{\text{exact, most}}\sim\frac{d}{2\ln d}:\ P(x_\nu\text{ fixed})\to1\text{ for }N\le(1-\epsilon)\tfrac{d}{2\ln d},\ \to0\text{ for }N\ge(1+\epsilon)\tfrac{d}{2\ln d}",
               "cited", "McEliece, Posner, Rodemich, Venkatesh (IEEE Trans. IT 1987): asymptotic capacity n/(2 log n) of "
               "the zero-diagonal Hebbian memory with i.i.d. ±1 patterns when each given pattern must be recalled exactly",
               ("derivation", "formulas_vs_snr_derivation", "exact_recall_measured"),
               also=(("assumed", "SymPy's signal-to-noise derivation gives d/(2 ln d) only under its premises: Gaussian "
                      "crosstalk (central limit) and a per-bit error exp(−SNR²/2) at leading order"),
                     ("checked", "d = 64, 256, 1024 (quick) / 64–1024 (default), 24/48 trials: fraction fixed ≥ 0.75 at "
                      "N = C(d) for every d, ≤ 0.25 at N = 2C(d) at the largest d"))),
        Clause("exact_all", r"C_{\text{exact, all}}\sim\frac{d}{4\ln d}\ (\text{every stored pattern a fixed point})",
               "cited", "McEliece et al. (1987): n/(4 log n) when all patterns must be fixed points at once",
               ("derivation", "formulas_vs_snr_derivation", "exact_recall_measured"),
               also=(("assumed", "the same signal-to-noise premises, with N·d·P_err = O(1)"),
                     ("checked", "d = 64–1024: all-fixed frequency ≥ 0.75 at N = C_all(d), ≤ 0.25 at 2C_all at the largest d"))),
        Clause("bit_error", r"C_{\le1.5\%\text{ wrong bits}}\approx0.138\,d",
               "cited", "Amit, Gutfreund, Sompolinsky (PRL 1985; Ann. Phys. 1987): replica-symmetric critical load "
               "α_c ≈ 0.138 for retrieval states with ≈1.5 % wrong bits (a physics calculation, not a proof)",
               ("bit_error_measured",),
               also=(("assumed", "α_c = 0.138 enters the derivation as a literature constant (not derivable by SNR)"),
                     ("checked", "d = 256, 512 (quick) / 256–1024 (default): async dynamics from the stored patterns end "
                      "with ≤ 1.5 % wrong bits at 0.8·C_bit(d) and > 1.5 % at 1.25·C_bit(d)"))),
        Clause("criteria_differ", r"\frac{0.138\,d}{d/(2\ln d)}=0.276\ln d\to\infty\ (\text{the notes' }\tfrac{d}{2\log d}\approx0.14d\text{ equates two criteria})",
               "derived", "every d (exact limit of the ratio of the two expressions)",
               ("derivation", "formulas_vs_snr_derivation", "bit_error_measured"), rests_on=("α_c ≈ 0.138 (AGS)", "C_bit = α_c d", "random ±1 patterns", "Gaussian crosstalk (CLT)", "Gaussian tail exp(−SNR²/2)")),
    ),
    source="lecture notes 002; McEliece, Posner, Rodemich, Venkatesh (1987); Amit, Gutfreund, Sompolinsky (1985, 1987)",
    kind="erratum",
    form=_CAP,
    stated={"exact_recall": _d / (2 * sp.log(_d)), "exact_recall_all": _d / (4 * sp.log(_d)),
            "bit_error": _d / (2 * sp.log(_d))},
    derivation=th.derive_classical_capacity,
    notes=("Lecture notes 002 equates two capacities of different criteria: d/(2 ln d) (exact recall, McEliece et al.) "
           "and 0.14 d (a small fraction of wrong bits, AGS). Their ratio 0.28 ln d equals 1 only at d ≈ 36. "
           "The stated form is encoded as one capacity d/(2 log d) serving both criteria. The notes' W = Σ x_μ x_μᵀ keeps "
           "w_ii = N; the capacities are those of the zero-diagonal rule (see the hypothesis hebbian_zero_diagonal)."),
    checks=(
        Check("formulas_vs_snr_derivation", "symbolic", _capacity_symbolic, "capacities vs SymPy's SNR derivation"),
        Check("exact_recall_measured", "numeric", _capacity_exact_measured, "fixed-point frequency at C and 2C", uses_device=True),
        Check("bit_error_measured", "numeric", _capacity_bit_measured, "wrong bits at 0.8 C and 1.25 C", uses_device=True),
    ),
    mutants=(
        Mutant("exact_recall_0.14d", "wrong formula", "0.14 d used for the exact-recall criterion",
               {**_CAP, "exact_recall": sp.Rational(14, 100) * _d}),
        Mutant("exact_all_as_most", "wrong constant", "all patterns exact up to d/(2 ln d) (should be d/(4 ln d))",
               {**_CAP, "exact_recall_all": _d / (2 * sp.log(_d))}),
        Mutant("exact_recall_no_2", "wrong constant", "exact recall up to d/ln d (factor 2 dropped)",
               {**_CAP, "exact_recall": _d / sp.log(_d)}),
        Mutant("bit_error_0.3d", "wrong constant", "bit-error capacity 0.3 d",
               {**_CAP, "bit_error": sp.Rational(3, 10) * _d}),
    ),
)
