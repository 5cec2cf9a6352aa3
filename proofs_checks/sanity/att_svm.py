"""``tverify check att-svm --data file.npz``: certify the Att-SVM of your data, train normalised GD
on it and say whether the direction converges to the certified solution.

The file holds arrays ``X`` (n,T,d), ``z`` (n,d), ``y`` (n,) with entries ±1 and ``v`` (d,).

Verdicts (see :mod:`proofs_checks.sanity._verdict`) and exit codes:

* 0 ``ok``: every initialisation's direction ``W_K/‖W_K‖`` reaches correlation ≥ ``--level`` (0.99)
  with the certified ``W^mm`` (or, where GD selected another token set, with that set's Att-SVM, the
  set being locally optimal as the theory requires);
* 1 ``mismatch``: a direction has stopped moving (over the last half of the run it turned by less
  than 1/100 of its remaining angle to the Att-SVM of its selected tokens, the selection unchanged)
  while its correlation stays below the level: a stationary direction that is no Att-SVM solution;
* 3 ``inconclusive``: not converged within the iteration budget (with an extrapolated number of
  iterations that would reach the level), a selected set that is not locally optimal, or an Att-SVM
  the solver could not certify;
* 2 bad input, one line on stderr: missing arrays, wrong shapes, NaN, object/complex arrays, tied or
  infeasible instances, sizes over the memory limit (``--max-memory``), ``--device cuda`` without CUDA.

With ``--weights FILE`` (``W`` (d,d), or ``K`` and ``Q`` (d,m) with ``W = K Qᵀ``; .npz or .pt) no training
runs: your trained attention is compared with the Att-SVM (:func:`weights_result`): the tokens it
selects, ``corr(W, W^mm)`` (Frobenius) and ``corr(W, W^mm_*)`` (nuclear), whether the selected tokens
are the optimal ones and, when not, the Att-SVM of the selected tokens. ok (exit 0) when the
correlation the theory predicts → 1 reaches ``--level``; inconclusive (3) below it; weights whose
shapes disagree with the data: one line, exit 2. ``--report DIR`` writes HTML/Markdown/JSON and a figure
(the correlation per NGD iteration; with ``--weights`` the correlations and the softmax tail mass per sequence).

Iteration counts that were not reached are shown as "not reached within K iterations" (``null`` in
JSON), never as a number.
"""

from __future__ import annotations

import math

import click
import numpy as np

from proofs_checks import guards
from proofs_checks.options import UsageError, require_device
from proofs_checks.parsing import load_npz
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          report_option)
from proofs_checks.sanity._verdict import Verdict, round_up
# the --weights stages (re-exported: this module's historical names)
from proofs_checks.sanity.att_svm_weights import (  # noqa: F401
    SATURATION_ADVICE, load_weights, saturation, weights_from, weights_result)
from theory.validation import InputError, as_finite_array

__all__ = ["command", "estimate_resources", "SIZES", "iterations_to", "run_att_svm", "weights_result", "load_weights",
           "weights_from"]

#: (iterations, initialisations) for --quick / default / --full.
SIZES = {"quick": (500, 4), "default": (2000, 8), "full": (20000, 16)}
#: The fewest iterations at which a stall over the last half is evidence (at K = 1 the last half holds no step).
MIN_STALL_ITERS = 20
#: A stationary direction turned by less than this fraction of its remaining angle over the last half.
STATIONARY_FRACTION = 0.01
#: Largest KKT residual (relative) of a certified Att-SVM solution.
KKT_TOL = 1e-6

_T_ITER = 1.5e-4       # seconds per NGD iteration (overhead of ~20 small torch ops)
_T_ITER_EL = 3e-9      # seconds per iteration per element of the (B, n, T, d) batch times d


# ------------------------------------------------------------------------------------------------
# the inputs' rules, each in one place: the command's options (click callbacks) and the API's
# check_att_svm call these, so a flag and its keyword say the same line


def _count_rule(v, option: str, lo: int, hi: int) -> int:
    import numbers

    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not lo <= v <= hi:
        raise UsageError(f"{option} must be in {lo} … {hi}, got {v!r}")
    return int(v)


def iters_value(iters) -> int:
    """``--iters``: normalised-GD iterations, 1 … 10⁷."""
    return _count_rule(iters, "--iters", 1, 10**7)


def seeds_value(seeds) -> int:
    """``--seeds``: initialisations in one batch, 1 … 4096."""
    return _count_rule(seeds, "--seeds", 1, 4096)


def _real(v) -> bool:
    import numbers

    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def lr_value(lr) -> float:
    """``--lr``: a positive finite step size."""
    if not (_real(lr) and math.isfinite(lr) and lr > 0):
        raise UsageError(f"--lr must be a positive finite number, got {float(lr) if _real(lr) else lr!r}")
    return float(lr)


def level_value(level) -> float:
    """``--level``: the correlation that counts as converged, strictly between 0 and 1."""
    if not (_real(level) and 0 < level < 1):
        raise UsageError(f"--level must be strictly between 0 and 1, got {float(level) if _real(level) else level!r}")
    return float(level)


def _callback(rule):
    return lambda ctx, param, v: v if v is None else rule(v)


def _load(path: str):
    from numerics import att_svm as ns

    data = load_npz(path, "--data", keys=("X", "z", "y", "v"))
    try:
        X = as_finite_array(data["X"], "X", ndim=3)
        n, T, d = X.shape
        z = as_finite_array(data["z"], "z", shape=(n, d))
        y = as_finite_array(data["y"], "y", shape=(n,))
        v = as_finite_array(data["v"], "v", shape=(d,))
        if not np.all(np.isin(y, (-1.0, 1.0))):
            raise InputError("y must contain labels ±1 only")
        if T < 2:
            raise InputError(f"X must have at least 2 tokens per sequence, got T = {T}")
        opt = ns.optimal_tokens(X, y, v)
    except InputError as exc:
        raise InputError(f"--data: {path}: {exc}") from None
    return ns.AttSVMInstance(X, z, y, v, opt, ns.token_scores(X, y, v), "user")


def estimate_resources(n: int, T: int, d: int, seeds: int, iters: int) -> guards.Estimate:
    """Peak bytes and seconds: the per-iteration curves (``iters × seeds``, six of them, kept twice),
    the batched data and its softmax/gradient temporaries (``seeds × n × T × d``), and the Att-SVM
    constraint matrix (``n(T−1) × d²``) held by the conic solver.

    >>> estimate_resources(3, 4, 6, 8, 2000).bytes < 2**30
    True
    >>> estimate_resources(3, 4, 6, 4096, 10**6).bytes > 1e11
    True
    """
    parts = {f"training curves {iters} iterations × {seeds} seeds × 6": 2.0 * 6 * iters * seeds * 8,
             f"batched data {seeds} seeds × {n} × {T} × {d}": 6.0 * seeds * n * T * max(d, T) * 8,
             f"Att-SVM constraints {n * (T - 1)} × {d}²": 20.0 * n * (T - 1) * d * d * 8}
    seconds = iters * (_T_ITER + _T_ITER_EL * seeds * n * T * d * d) + 1e-7 * (n * T * d * d) ** 1.5
    return guards.Estimate(sum(parts.values()), seconds, parts)


def _refuse_training_options() -> None:
    """--iters, --lr or --seeds given on the command line with --weights: refused, one line (they train; your W is
    compared as it is: they were accepted and ignored, hostile pass 55a F4)."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return
    given = [n for n in ("iters", "lr", "seeds") if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE]
    if given:
        raise UsageError(f"--{given[0]}: trains, and --weights compares your W as it is (no training): give one or the "
                         "other")


def _check_memory(est: guards.Estimate, max_memory: float | None) -> None:
    """The memory guard, its advice naming what drives the estimate: the data's Att-SVM programme (n·(T−1)
    constraints over d² unknowns, which no option of the check changes: hostile pass 55b F2), or the training's
    --iters and --seeds."""
    data = est.dominant.startswith(("Att-SVM", "batched data"))
    guards.check_memory(est, max_memory, hint="the data's size drives it (fewer sequences, tokens or dimensions)"
                        if est.dominant.startswith("Att-SVM") else "lower --seeds or use fewer sequences"
                        if data else "lower --iters or --seeds")


def iterations_to(corr: np.ndarray, level: float) -> list[int | None]:
    """Per column of ``corr (iters, B)``: the first iteration (1-based) from which the correlation
    stays ≥ ``level``; ``None`` where that never happens within the run (no budget sentinel).

    >>> iterations_to(np.array([[0.5, 0.5], [0.995, 0.5], [0.999, 0.995]]), 0.99)
    [2, 3]
    >>> iterations_to(np.array([[0.995], [0.5]]), 0.99)
    [None]
    """
    c = np.asarray(corr) >= level
    stay = np.flip(np.cumprod(np.flip(c, 0), 0), 0).astype(bool)
    return [int(stay[:, b].argmax()) + 1 if stay[:, b].any() else None for b in range(c.shape[1])]


def _train_segmented(ns, inst, fro_W, *, lr, iters, seeds, seed, device, prog, n_segments):
    """``numerics.att_svm.train`` run in segments, each continuing from the previous ``W`` (the
    same iterates as one run): yields progress, and ``W`` at the half-way point."""
    half = iters // 2
    bounds = sorted({0, half, iters} | {round(iters * j / n_segments) for j in range(1, n_segments)})
    corr, norm, opt_mass = [], [], []
    W = None
    W_half = sel_half = None
    r = None
    for a, b in zip(bounds, bounds[1:]):
        if b == a:
            continue
        r = ns.train(inst, method="ngd", lr=lr, iters=b - a, B=seeds, init=0.01 if W is None else W, seed=seed,
                     opt=inst.opt, targets={"fro": fro_W}, device=device)
        W = r.W
        corr.append(r.corr["fro"])
        norm.append(r.norm)
        opt_mass.append(r.opt_mass)
        if b == half:
            W_half, sel_half = r.W.copy(), r.selected.copy()
        prog(b / iters)
    if W_half is None:  # iters == 1
        W_half, sel_half = W.copy(), r.selected.copy()
    return {"W": W, "W_half": W_half, "selected": r.selected, "selected_half": sel_half,
            "corr": np.concatenate(corr), "norm": np.concatenate(norm), "opt_mass": np.concatenate(opt_mass)}


def _angle(c: float) -> float:
    return float(math.acos(min(1.0, max(-1.0, c))))


def _seed_direction(ns, inst, fro, tr, b: int, svm_cache: dict, *, level: float, iters: int) -> dict:
    """Initialisation ``b``: its selected tokens, the Att-SVM it is judged against (W^mm when they are the
    optimal ones), its correlation now and at half the iterations, how far it turned, whether it stalled."""
    sel = tr["selected"][b]
    is_opt = bool(np.all(sel == inst.opt))
    info = {"seed_index": b, "selected_is_opt": is_opt, "target": "W^mm" if is_opt else "Att-SVM of the selected tokens"}
    if is_opt:
        target = fro.W
    else:
        key = tuple(int(t) for t in sel)
        if key not in svm_cache:
            try:
                svm_cache[key] = ns.solve_att_svm(inst.X, inst.z, np.asarray(key)).W
            except (InputError, ns.SolverFailure) as exc:
                svm_cache[key] = exc
        target = svm_cache[key]
        info["selected_tokens"] = list(key)
        try:
            info["locally_optimal"] = bool(ns.is_locally_optimal(inst, np.asarray(key)))
        except (InputError, ns.SolverFailure):
            info["locally_optimal"] = False
    if isinstance(target, Exception):
        info.update({"corr": None, "error": f"{type(target).__name__}: {target}"})
        return info
    c = float(ns.correlation(tr["W"][b], target))
    c_half = float(ns.correlation(tr["W_half"][b], target))
    moved = _angle(float(ns.correlation(tr["W_half"][b], tr["W"][b])))
    remaining = _angle(c)
    info.update({"corr": c, "corr_half": c_half, "turned_last_half_rad": moved, "remaining_angle_rad": remaining,
                 "selection_changed_last_half": bool(np.any(tr["selected_half"][b] != sel)),
                 "reached": c >= level})
    # a stall is evidence only when W moved: enough steps in the last half (MIN_STALL_ITERS), and W changed
    # there (an --lr of 1e-300 leaves W where it was: frozen by the step, not stationary by the dynamics)
    step = float(np.linalg.norm(tr["W"][b] - tr["W_half"][b]))
    info["frozen"] = not step > 1e-9 * float(np.linalg.norm(tr["W"][b]))
    # and only past the Att-SVM's own norm: below it no W attains the margin 1 on every constraint, the softmax has not
    # begun to select, and a slow turn is the early phase of the dynamics (the direction converges as ‖W‖ → ∞), not a
    # limit elsewhere (data at scale 1e-6 needs ‖W‖ ≈ 4e5: 2000 steps reach 200; hostile pass 21b F7)
    norm_w, norm_svm = float(np.linalg.norm(tr["W"][b])), float(np.linalg.norm(target))
    info["norm_W_over_svm"] = norm_w / norm_svm if norm_svm > 0 else math.inf
    info["stationary"] = (iters >= MIN_STALL_ITERS and not info["frozen"] and norm_w >= norm_svm
                          and (not info["selection_changed_last_half"]) and moved <= STATIONARY_FRACTION * remaining)
    return info


def _verdict(ns, inst, fro, tr, *, level: float, iters: int, tick=lambda f: None) -> tuple[Verdict, list[dict]]:
    B = tr["W"].shape[0]
    svm_cache: dict[tuple, object] = {}
    seeds = []
    for b in range(B):
        tick(b / B)
        seeds.append(_seed_direction(ns, inst, fro, tr, b, svm_cache, level=level, iters=iters))

    cert = fro.max_residual()
    numbers = {"quantity": "corr(W_K, Att-SVM of the selected tokens)", "level": level, "iterations": iters,
               "seeds": B, "kkt_residual": cert, "kkt_tolerance": KKT_TOL,
               "min_corr": min((s["corr"] for s in seeds if s.get("corr") is not None), default=None),
               "stationary_fraction": STATIONARY_FRACTION}
    base = (f"correlation of each of the {B} directions W_K/‖W_K‖ after K = {iters} NGD iterations with the Att-SVM "
            f"of the tokens it selects (W^mm when they are the optimal ones), against level {level:g}; min "
            f"{numbers['min_corr'] if numbers['min_corr'] is None else format(numbers['min_corr'], '.6f')}")
    if not cert <= KKT_TOL:
        return Verdict("inconclusive", "the Att-SVM solution is not certified",
                       base + f"; largest KKT residual {cert:.2e} > {KKT_TOL:g}", numbers,
                       [f"Att-SVM not certified: KKT residual {cert:.2e} > {KKT_TOL:g} (ill-conditioned data?)"],
                       "rescale or deduplicate nearly equal tokens so that the conic solver certifies the solution"), seeds
    bad = [s for s in seeds if s.get("corr") is None]
    stationary_off = [s for s in seeds if s.get("corr") is not None and not s["reached"] and s["stationary"]]
    if stationary_off:
        s = min(stationary_off, key=lambda s: s["corr"])
        return Verdict("mismatch", "a GD direction has stopped moving away from the Att-SVM of its selected tokens",
                       base + f"; mismatch because seed {s['seed_index']} turned by {s['turned_last_half_rad']:.2e} rad "
                              f"over the last half (≤ {STATIONARY_FRACTION:g} × its remaining angle "
                              f"{s['remaining_angle_rad']:.3g} rad, selection unchanged) at correlation "
                              f"{s['corr']:.6f} < {level:g}", numbers), seeds
    not_reached = [s for s in seeds if s.get("corr") is not None and not s["reached"]]
    not_local = [s for s in seeds if s.get("reached") and not s["selected_is_opt"] and not s.get("locally_optimal")]
    if not not_reached and not bad and not not_local:
        n_opt = sum(s["selected_is_opt"] for s in seeds)
        summary = ("converges to W^mm" if n_opt == B else
                   "converges to a locally optimal token set" if n_opt == 0 else
                   f"converges to W^mm ({n_opt} of {B} initialisations) or to the Att-SVM of a locally optimal token set")
        return Verdict("ok", summary, base + f"; ok because every correlation is ≥ {level:g}", numbers), seeds
    reasons, sugg = [], None
    if not_reached:
        worst = min(not_reached, key=lambda s: s["corr"])
        gain = worst["corr"] - worst["corr_half"]
        trend = (f", up {gain:+.2e} over the last half, still turning {worst['turned_last_half_rad']:.2e} rad"
                 if iters >= 2 else ": one iteration has no trend to measure")  # (45a F8: "not rising" at --iters 1)
        reasons.append(f"not converged within {iters} iterations: {len(not_reached)} of {B} directions below "
                       f"{level:g} (worst {worst['corr']:.6f}{trend})")
        if iters < 2:
            sugg = f"more iterations (at least --iters {MIN_STALL_ITERS}): one iteration has no trend to measure"
        elif gain > 0:
            doublings = (level - worst["corr"]) / gain
            need = iters * 2.0 ** doublings if doublings < 40 else float("inf")
            numbers["iterations_needed_estimate"] = None if not math.isfinite(need) else round_up(math.ceil(need))
            sugg = (f"roughly {round_up(math.ceil(need))} iterations (--iters {round_up(math.ceil(need))}) if the "
                    f"correlation keeps gaining {gain:+.2e} per doubling of k (log-k extrapolation of the last half; "
                    "a rough guide)" if math.isfinite(need) and need <= 1e7 else
                    "far more iterations than --iters allows at this rate (extrapolated in log k); try a larger --lr")
        else:
            sugg = f"more iterations (--iters {4 * iters}) or a different --lr: the correlation is not rising"
        if iters < MIN_STALL_ITERS:
            if iters >= 2:
                sugg = f"at least {MIN_STALL_ITERS} iterations (--iters {MIN_STALL_ITERS}) to judge a stall; " + sugg
        elif worst.get("frozen"):
            reasons.append(f"W did not move over the last half (seed {worst['seed_index']}): the step --lr is too small "
                           "for ‖W‖ in float64")
            sugg = "a larger --lr (the default is 0.1)"
    if not_local:
        reasons.append(f"reached the Att-SVM of a token set that is not locally optimal ({len(not_local)} direction(s)): "
                       "the selection may still be changing")
    if bad:
        reasons.append(f"no Att-SVM for the token set selected by {len(bad)} direction(s) ({bad[0]['error']})")
    why = "; ".join(r.split(":")[0] for r in reasons)
    return Verdict("inconclusive", f"cannot decide whether GD converges to the Att-SVM ({why})", base, numbers,
                   reasons, sugg), seeds


def check_step(inst, lr: float, iters: int, words=("--lr", "--iters")) -> None:
    """Normalised GD moves W by ``lr`` per step, so after ``iters`` steps ‖W‖ ≤ lr·iters and every
    logit is at most lr·iters·max‖x‖·max‖z‖; norms and correlations square these: beyond 1e150 the
    training overflows float64 (a usage error naming the bound, not numpy's overflow warnings and a
    meaningless correlation)."""
    import numpy as np

    def largest_norm(a) -> float:  # scaled first: the squares of entries of 1e200 overflowed, and the message said
        m = float(np.max(np.abs(a))) if a.size else 0.0  # "inf" for a norm of 2e200 (hostile pass 45a F3)
        return m * float(np.max(np.linalg.norm(a / m, axis=-1))) if m > 0 and math.isfinite(m) else m

    with np.errstate(over="ignore"):  # numpy's overflow warning is not the message (hostile pass 8, F2)
        xs, zs = largest_norm(inst.X), largest_norm(inst.z)
    if not math.isfinite(xs * zs):  # no step size helps: the data's own norms overflow
        raise UsageError(f"the data's max‖x‖·max‖z‖ overflows float64 ({xs:.3g}·{zs:.3g}): the logits xᵀWz of any "
                         "W cannot be computed (no step size helps); rescale the tokens and queries")
    from numerics.att_svm_data import scale_refusal

    try:  # a scale no step size helps is said before any --lr advice (it advised a smaller --lr: hostile pass 59b F2)
        scale_refusal(inst.X, inst.z)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    bound = lr * iters * max(1.0, xs * zs)
    if not bound <= 1e150:
        raise UsageError(f"{words[0]} {lr:g}: after {words[1]} {iters} normalised steps ‖W‖ and the logits can reach "
                         f"{lr:g}·{iters}·max(1, max‖x‖·max‖z‖) = {bound:.3g}, whose squares (in norms and "
                         f"correlations) overflow float64 (≤ 1e150 needed): use a smaller {words[0]}")


def run_att_svm(inst, *, iters: int, lr: float, seeds: int, level: float, seed: int = 0, device: str = "cpu",
                mode: str = "default", progress: bool = False, est=None, inputs: dict | None = None) -> SanityResult:
    """Certify the Att-SVM of ``inst``, train normalised GD, and return the verdict as a
    :class:`SanityResult` (what ``tverify check att-svm --data`` prints)."""
    from numerics import att_svm as ns

    n, T, d = inst.X.shape
    est = est or estimate_resources(n, T, d, seeds, iters)
    prog = guards.Progress("check att-svm", enabled=progress, estimate=est.seconds)
    if est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(est.seconds)} and ≈ {guards.fmt_bytes(est.bytes)} of memory "
                  f"for {seeds} initialisations × {iters} iterations on n = {n}, T = {T}, d = {d}")
    doc: dict = {"check": "att-svm", "n": int(n), "T": int(T), "d": int(d), "opt": inst.opt.tolist(),
                 "inputs": {**(inputs or {}), "iters": iters, "lr": lr, "seeds": seeds, "seed": seed, "level": level,
                            "device": device, "mode": mode},
                 "resources": est.to_json()}
    prog.phase("solving the Att-SVM", 0, 0.05).sub(0)
    with guards.Heartbeat(prog, lambda: prog.last_fraction):  # a line every few seconds, whatever step is slow
        return _run_att_svm_body(ns, inst, prog, doc, iters=iters, lr=lr, seeds=seeds, level=level, seed=seed,
                                 device=device, est=est)


def _run_att_svm_body(ns, inst, prog, doc, *, iters, lr, seeds, level, seed, device, est):
    n, T, d = inst.X.shape
    try:
        fro = ns.solve_att_svm(inst.X, inst.z, inst.opt, "fro")
    except ns.SolverFailure as exc:
        v = Verdict("inconclusive", "the Att-SVM could not be solved and certified", f"solver: {exc}", {},
                    [f"Att-SVM not certified: {exc}"], "rescale the data or remove nearly duplicated tokens")
        return SanityResult("att-svm", doc, v, lines=[f"Att-SVM (Frobenius): solver failed: {exc}"])
    try:
        nuc = ns.solve_att_svm(inst.X, inst.z, inst.opt, "nuc")
        doc["nuc"] = {"norm": nuc.value, "status": nuc.status, "max_kkt_residual": nuc.max_residual(),
                      "corr_with_fro": float(ns.correlation(fro.W, nuc.W))}
    except ns.SolverFailure as exc:  # the nuclear-norm SVM is reported, not part of the verdict
        doc["nuc"] = {"error": str(exc)}
    doc["fro"] = {"norm": fro.value, "status": fro.status, "support": fro.support_tokens(),
                  "max_kkt_residual": fro.max_residual(), "duality_gap": fro.duality_gap}
    n_segments = 1 if est.seconds < 2 and seeds * iters < 200_000 else 20
    prog.phase("training", 0.05, 0.7)
    tr = _train_segmented(ns, inst, fro.W, lr=lr, iters=iters, seeds=seeds, seed=seed, device=device, prog=prog.sub,
                          n_segments=n_segments)
    prog.phase("the target of each initialisation", 0.7, 1.0)
    verdict, per_seed = _verdict(ns, inst, fro, tr, level=level, iters=iters, tick=prog.sub)
    prog.done()
    marks = sorted({k for k in (1, 10, 100, 1000, 10000, 100000, 1000000, iters) if k <= iters})
    curve = {k: float(np.mean(tr["corr"][k - 1])) for k in marks}
    reach = iterations_to(tr["corr"], level)
    reached = [k for k in reach if k is not None]
    final = tr["corr"][-1]
    doc["training"] = {"method": "ngd", "lr": lr, "iters": iters, "seeds": seeds, "seed": seed, "corr_curve": curve,
                       "final_corr_min": float(final.min()), "final_norm_mean": float(tr["norm"][-1].mean()),
                       "opt_mass_mean": float(tr["opt_mass"][-1].mean()),
                       "selected_is_opt": bool(np.all(tr["selected"] == inst.opt)),
                       "iterations_to_level": reach,
                       "iterations_to_level_max": max(reached) if len(reached) == len(reach) else None,
                       "per_seed": per_seed}

    def reach_text() -> str:
        if len(reached) == len(reach):
            return f"iterations to {level:g} with W^mm: {max(reached)} (slowest initialisation)"
        return (f"iterations to {level:g} with W^mm: not reached within {iters} iterations by {len(reach) - len(reached)} "
                f"of {len(reach)} initialisations" + (f" (the others by {max(reached)})" if reached else ""))

    nuc_line = (f"Att-SVM (nuclear): ‖W^mm_*‖_* = {doc['nuc']['norm']:.6g}, max KKT residual "
                f"{doc['nuc']['max_kkt_residual']:.2e}, corr with Frobenius {doc['nuc']['corr_with_fro']:.4f}"
                if "error" not in doc["nuc"] else f"Att-SVM (nuclear): solver failed: {doc['nuc']['error']}")
    lines = [f"Att-SVM (Frobenius): ‖W^mm‖_F = {fro.value:.6g}, status {fro.status}, "
             f"max KKT residual {fro.max_residual():.2e}, duality gap {fro.duality_gap:.2e}",
             f"  support constraints (sequence, token): {fro.support_tokens()}",
             nuc_line,
             f"NGD (lr {lr}, {seeds} inits, seed {seed}): mean corr(W_k, W^mm) by iteration (the globally optimal "
             "W^mm; the verdict judges each direction against the Att-SVM of the tokens it selects):"]
    lines += [f"  k={k:>7d}  {c:.6f}" for k, c in curve.items()]
    lines.append(f"  ‖W_k‖ at the end {doc['training']['final_norm_mean']:.4g}; softmax mass on opt "
                 f"{doc['training']['opt_mass_mean']:.6f}; {reach_text()}")
    corr = tr["corr"]

    def _fig():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        k = np.arange(1, corr.shape[0] + 1)
        ax.semilogx(k, corr, lw=0.8)
        ax.axhline(level, color="k", ls="--", lw=0.8)
        ax.set_xlabel("NGD iteration k")
        ax.set_ylabel("corr(W_k, W^mm)")
        ax.set_title("correlation with the Att-SVM direction")
        return fig

    return SanityResult("att-svm", doc, verdict, lines=lines, figures={"correlation_curves": _fig})


@click.command("att-svm")
@click.option("--data", "data_path", required=True, help=".npz with X (n,T,d), z (n,d), y (n,), v (d,)")
@click.option("--weights", "weights_path", default=None, metavar="FILE",
              help="Your trained attention: .npz/.pt with W (d,d), or K and Q (d,m), W = K Qᵀ; compared with the "
                   "Att-SVM instead of training (--iters, --lr and --seeds, which train, are refused with it; --quick "
                   "and --full change nothing then).")
@click.option("--iters", default=None, type=int, callback=_callback(iters_value),
              help="Normalised-GD iterations, 1 … 10^7 (default 2000; --quick 500, --full 20000).")
@click.option("--lr", default=0.1, show_default=True, type=float, callback=_callback(lr_value),
              help="NGD step size (positive, finite)")
@click.option("--seeds", default=None, type=int, callback=_callback(seeds_value),
              help="Initialisations, one batch, 1 … 4096 (default 8; --quick 4, --full 16).")
@click.option("--level", default=0.99, show_default=True, type=float, callback=_callback(level_value),
              help="Correlation with the Att-SVM direction that counts as converged (strictly between 0 and 1).")
@report_option
@check_options
def command(data_path, weights_path, iters, lr, seeds, level, report_dir, seed, device, mode, json_path, max_memory,
            no_progress):
    """Certified Att-SVM solution, the NGD correlation curve (or your --weights), and the verdict:
    ok (exit 0), mismatch (1), inconclusive (3: e.g. not converged within --iters).

    \b
    Examples:
      tverify check att-svm --data mydata.npz
      tverify check att-svm --data mydata.npz --iters 20000 --seeds 16 --json out.json
      tverify check att-svm --data mydata.npz --weights my_trained_W.npz
    """
    check_report_dir(report_dir, json_path)  # first: a --json inside --report is refused for that reason
    check_json_target(json_path)
    i0, s0 = SIZES[mode]
    iters, seeds = iters or i0, seeds or s0
    require_device(device, False, skip_option=False)
    if weights_path:
        _refuse_training_options()
    if weights_path and device != "cpu":
        raise UsageError(f"--device {device}: check att-svm --weights compares your W on the CPU (the device is for "
                         "training); use --device cpu")
    inst = _load(data_path)
    n, T, d = inst.X.shape
    if weights_path:
        W, form = load_weights(weights_path, d, max_memory)
        _check_memory(estimate_resources(n, T, d, 0, 0), max_memory)  # no training: the Att-SVM programme alone
        result = weights_result(inst, W, form=form, level=level)
        result.doc.update({"n": int(n), "T": int(T), "d": int(d), "opt": inst.opt.tolist(),
                           "inputs": {"data": data_path, "weights": weights_path, "level": level}})
        finish(result, json_path, report_dir)
    check_step(inst, lr, iters)
    est = estimate_resources(n, T, d, seeds, iters)
    _check_memory(est, max_memory)
    result = run_att_svm(inst, iters=iters, lr=lr, seeds=seeds, level=level, seed=seed, device=device, mode=mode,
                         progress=not no_progress, est=est, inputs={"data": data_path})
    finish(result, json_path, report_dir)
