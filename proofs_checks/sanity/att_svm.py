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
from proofs_checks.sanity._common import check_json_target, check_options, emit
from proofs_checks.sanity._verdict import Verdict, round_up
from theory.validation import InputError, as_finite_array

__all__ = ["command", "estimate_resources", "SIZES", "iterations_to"]

#: (iterations, initialisations) for --quick / default / --full.
SIZES = {"quick": (500, 4), "default": (2000, 8), "full": (20000, 16)}
#: A stationary direction turned by less than this fraction of its remaining angle over the last half.
STATIONARY_FRACTION = 0.01
#: Largest KKT residual (relative) of a certified Att-SVM solution.
KKT_TOL = 1e-6

_T_ITER = 1.5e-4       # seconds per NGD iteration (overhead of ~20 small torch ops)
_T_ITER_EL = 3e-9      # seconds per iteration per element of the (B, n, T, d) batch times d


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


def _verdict(ns, inst, fro, tr, *, level: float, iters: int) -> tuple[Verdict, list[dict]]:
    B = tr["W"].shape[0]
    svm_cache: dict[tuple, object] = {}
    seeds = []
    for b in range(B):
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
            seeds.append(info)
            continue
        c = float(ns.correlation(tr["W"][b], target))
        c_half = float(ns.correlation(tr["W_half"][b], target))
        moved = _angle(float(ns.correlation(tr["W_half"][b], tr["W"][b])))
        remaining = _angle(c)
        info.update({"corr": c, "corr_half": c_half, "turned_last_half_rad": moved, "remaining_angle_rad": remaining,
                     "selection_changed_last_half": bool(np.any(tr["selected_half"][b] != sel)),
                     "reached": c >= level})
        info["stationary"] = (not info["selection_changed_last_half"]) and moved <= STATIONARY_FRACTION * remaining
        seeds.append(info)

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
        reasons.append(f"not converged within {iters} iterations: {len(not_reached)} of {B} directions below "
                       f"{level:g} (worst {worst['corr']:.6f}, up {gain:+.2e} over the last half, still turning "
                       f"{worst['turned_last_half_rad']:.2e} rad)")
        if gain > 0:
            doublings = (level - worst["corr"]) / gain
            need = iters * 2.0 ** doublings if doublings < 40 else float("inf")
            numbers["iterations_needed_estimate"] = None if not math.isfinite(need) else round_up(math.ceil(need))
            sugg = (f"roughly {round_up(math.ceil(need))} iterations (--iters {round_up(math.ceil(need))}) if the "
                    f"correlation keeps gaining {gain:+.2e} per doubling of k (log-k extrapolation of the last half; "
                    "a rough guide)" if math.isfinite(need) and need <= 1e7 else
                    "far more iterations than --iters allows at this rate (extrapolated in log k); try a larger --lr")
        else:
            sugg = f"more iterations (--iters {4 * iters}) or a different --lr: the correlation is not rising"
    if not_local:
        reasons.append(f"reached the Att-SVM of a token set that is not locally optimal ({len(not_local)} direction(s)): "
                       "the selection may still be changing")
    if bad:
        reasons.append(f"no Att-SVM for the token set selected by {len(bad)} direction(s) ({bad[0]['error']})")
    why = "; ".join(r.split(":")[0] for r in reasons)
    return Verdict("inconclusive", f"cannot decide whether GD converges to the Att-SVM ({why})", base, numbers,
                   reasons, sugg), seeds


@click.command("att-svm")
@click.option("--data", "data_path", required=True, help=".npz with X (n,T,d), z (n,d), y (n,), v (d,)")
@click.option("--iters", default=None, type=click.IntRange(1, 10**7),
              help="Normalised-GD iterations (default 2000; --quick 500, --full 20000).")
@click.option("--lr", default=0.1, show_default=True, type=click.FloatRange(min=0, min_open=True),
              callback=guards.finite_number, help="NGD step size")
@click.option("--seeds", default=None, type=click.IntRange(1, 4096),
              help="Initialisations, one batch (default 8; --quick 4, --full 16).")
@click.option("--level", default=0.99, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              callback=guards.finite_number,
              help="Correlation with the Att-SVM direction that counts as converged.")
@check_options
def command(data_path, iters, lr, seeds, level, seed, device, mode, json_path, max_memory, no_progress):
    """Certified Att-SVM solution, the NGD correlation curve, and the verdict:
    ok (exit 0), mismatch (1), inconclusive (3: e.g. not converged within --iters).

    \b
    Examples:
      tverify check att-svm --data mydata.npz
      tverify check att-svm --data mydata.npz --iters 20000 --seeds 16 --json out.json
    """
    check_json_target(json_path)
    i0, s0 = SIZES[mode]
    iters, seeds = iters or i0, seeds or s0
    try:
        require_device(device, False)
    except UsageError:
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use --device cpu)") from None
    inst = _load(data_path)
    n, T, d = inst.X.shape
    est = estimate_resources(n, T, d, seeds, iters)
    guards.check_memory(est, max_memory, hint="lower --iters or --seeds")

    from numerics import att_svm as ns

    prog = guards.Progress("check att-svm", enabled=not no_progress, estimate=est.seconds)
    if est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(est.seconds)} and ≈ {guards.fmt_bytes(est.bytes)} of memory "
                  f"for {seeds} initialisations × {iters} iterations on n = {n}, T = {T}, d = {d}")
    doc: dict = {"check": "att-svm", "n": int(n), "T": int(T), "d": int(d), "opt": inst.opt.tolist(),
                 "inputs": {"data": data_path, "iters": iters, "lr": lr, "seeds": seeds, "seed": seed, "level": level,
                            "device": device, "mode": mode},
                 "resources": est.to_json()}
    prog.phase("solving the Att-SVM", 0, 0.05).sub(0)
    try:
        fro = ns.solve_att_svm(inst.X, inst.z, inst.opt, "fro")
    except ns.SolverFailure as exc:
        v = Verdict("inconclusive", "the Att-SVM could not be solved and certified", f"solver: {exc}", {},
                    [f"Att-SVM not certified: {exc}"], "rescale the data or remove nearly duplicated tokens")
        emit(doc, v, [f"Att-SVM (Frobenius): solver failed: {exc}"], json_path)
    try:
        nuc = ns.solve_att_svm(inst.X, inst.z, inst.opt, "nuc")
        doc["nuc"] = {"norm": nuc.value, "status": nuc.status, "max_kkt_residual": nuc.max_residual(),
                      "corr_with_fro": float(ns.correlation(fro.W, nuc.W))}
    except ns.SolverFailure as exc:  # the nuclear-norm SVM is reported, not part of the verdict
        doc["nuc"] = {"error": str(exc)}
    doc["fro"] = {"norm": fro.value, "status": fro.status, "support": fro.support_tokens(),
                  "max_kkt_residual": fro.max_residual(), "duality_gap": fro.duality_gap}
    n_segments = 1 if est.seconds < 2 else 20
    prog.phase("training", 0.05, 1.0)
    tr = _train_segmented(ns, inst, fro.W, lr=lr, iters=iters, seeds=seeds, seed=seed, device=device, prog=prog.sub,
                          n_segments=n_segments)
    prog.done()
    verdict, per_seed = _verdict(ns, inst, fro, tr, level=level, iters=iters)
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
            return f"iterations to {level:g}: {max(reached)} (slowest initialisation)"
        return (f"iterations to {level:g}: not reached within {iters} iterations by {len(reach) - len(reached)} of "
                f"{len(reach)} initialisations" + (f" (the others by {max(reached)})" if reached else ""))

    nuc_line = (f"Att-SVM (nuclear): ‖W^mm_*‖_* = {doc['nuc']['norm']:.6g}, max KKT residual "
                f"{doc['nuc']['max_kkt_residual']:.2e}, corr with Frobenius {doc['nuc']['corr_with_fro']:.4f}"
                if "error" not in doc["nuc"] else f"Att-SVM (nuclear): solver failed: {doc['nuc']['error']}")
    lines = [f"Att-SVM (Frobenius): ‖W^mm‖_F = {fro.value:.6g}, status {fro.status}, "
             f"max KKT residual {fro.max_residual():.2e}, duality gap {fro.duality_gap:.2e}",
             f"  support constraints (sequence, token): {fro.support_tokens()}",
             nuc_line,
             f"NGD (lr {lr}, {seeds} inits, seed {seed}): mean corr(W_k, W^mm) by iteration:"]
    lines += [f"  k={k:>7d}  {c:.6f}" for k, c in curve.items()]
    lines.append(f"  ‖W_k‖ at the end {doc['training']['final_norm_mean']:.4g}; softmax mass on opt "
                 f"{doc['training']['opt_mass_mean']:.6f}; {reach_text()}")
    emit(doc, verdict, lines, json_path)
