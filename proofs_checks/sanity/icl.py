"""``tverify check icl``: closed forms of the trained LSA for your Λ, N, M; a freshly trained batch of
full-parameter LSAs compared with them; or your own LSA weights tested against Γ_N.

Verdicts (see :mod:`proofs_checks.sanity._verdict`) and exit codes:

* 0 ``ok``: the trained ``w22·W11`` (mean over seeds) is within the relative bound ``--tol`` of
  ``Γ_N^{-1}`` with ``k`` standard errors to spare; or your ``--weights`` match within ``--tol``.
* 1 ``mismatch``: beyond the bound by more than ``k`` standard errors, the optimiser converged and
  the seeds agree with each other (spread ≤ tol); or your weights are not the ``Γ_N^{-1}`` predictor.
* 3 ``inconclusive``: too few seeds, seeds disagreeing, a standard error too large for the bound, or
  an optimiser that stopped short of the minimum of its own training loss (measured exactly: the
  loss is quadratic in ``W^{KQ}_{11}``). The verdict names the criterion and how many seeds
  (``--seeds``), prompts (``--prompts``) or steps (``--steps``) would decide it.
* 2 bad input, one line on stderr: malformed ``--lambda`` (see :mod:`proofs_checks.parsing`),
  a condition number above 1e12, sizes whose estimated memory exceeds the limit (``--max-memory``),
  an unreadable weights file, ``--device cuda`` without CUDA.

``--model FILE.py:NAME`` asks instead which in-context algorithm your model computes (see
:func:`check_icl_model`): ok (exit 0) when one reference algorithm (:data:`numerics.icl_probe.EXTENDED_ALGORITHMS`)
is *identified*: within tolerance at every prompt length probed ((1/4)² × its distance to the nearest
distinct reference or to the zero prediction, 3 standard errors to spare); mismatch (exit 1) when every
reference is beyond its tolerance at some length (none identified: the per-M table is the evidence) or
the model returns NaN or inf; inconclusive (exit 3) when none is identified and one is within 3 SE of its tolerance (with
the prompts that would decide). Lengths where the model raises are skipped and listed (exit 2 only
when every length raises); the wrong shape or an integer dtype is a usage error (exit 2, one line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from proofs_checks import guards
from proofs_checks.options import UsageError, require_device
from proofs_checks.parsing import as_numeric_array, parse_spd
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          report_option, timeout_option)
from proofs_checks.sanity._verdict import Z_SIGMA, Verdict, compare_seed_mean
from theory import icl as ti
from theory.validation import InputError

__all__ = ["command", "parse_lambda", "load_weights", "estimate_resources", "SIZES", "check_icl_model", "ICLModelResult",
           "LAYOUTS"]

#: (seeds, prompts per seed, Adam steps) for --quick / default / --full.
SIZES = {"quick": (8, 8192, 300), "default": (8, 32768, 300), "full": (32, 131072, 1000)}
LBFGS_STEPS = 50
N_MEASURE = 4000  # fresh test prompts of length M for the prediction and risk measurements
DEFAULT_TOL = {"trained": 0.05, "weights": 1e-2}
#: how ``--model`` is called (see :func:`check_icl_model`)
LAYOUTS = ("default", "zfb", "garg")
#: Eigenvalues of Λ must lie in this range: the closed forms form Λ² (fourth moments of x) and the test
#: prompts Λ-sized Gram matrices summed over M tokens; training itself runs in rescaled units.
SCALE_RANGE = (1e-100, 1e100)
#: Largest --noise σ: σ² and the label moments stay far inside float64's range.
MAX_NOISE = 1e50


def parse_lambda(text: str) -> np.ndarray:
    """``--lambda``: ``"1,2,3"`` → diag(1, 2, 3); ``"2,0.5;0.5,1"`` a full matrix; or a ``.npy`` /
    ``.txt`` / ``.csv`` file. Symmetric positive definite, condition number ≤ 1e12."""
    return _lambda(text)[0]


def _lambda(text) -> tuple[np.ndarray, float]:
    from proofs_checks.parsing import spd_from_array

    L, cond = parse_spd(text, "--lambda") if isinstance(text, str) else spd_from_array(text, "--lambda")
    diagonal = not np.any(L - np.diag(np.diagonal(L)))
    ev = np.sort(np.diagonal(L)) if diagonal else np.linalg.eigvalsh(L)  # a diagonal's entries are its eigenvalues
    if ev[0] < SCALE_RANGE[0] or ev[-1] > SCALE_RANGE[1]:
        raise InputError(f"--lambda: eigenvalues {ev[0]:.3g} … {ev[-1]:.3g} lie outside {SCALE_RANGE[0]:g} … "
                         f"{SCALE_RANGE[1]:g}, where the moments of Λ leave float64's range (rescale x: Γ_N^{{-1}} "
                         "scales as 1/Λ)")
    return L, cond


_PV_KEYS = ("Wpv", "W_PV", "WPV", "W_pv", "pv")
_KQ_KEYS = ("Wkq", "W_KQ", "WKQ", "W_kq", "kq")


def load_weights(path: str, max_memory: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read ``W^{PV}, W^{KQ}`` from a ``.npz`` (keys Wpv/W_PV and Wkq/W_KQ) or a torch ``.pt`` file
    (a dict / state_dict with such keys, possibly prefixed like ``attn.Wpv``). Sizes are checked
    before anything is decompressed; two keys for the same matrix (``a.Wpv``, ``b.Wpv``) are
    refused, not resolved. Errors name ``--weights``."""
    from proofs_checks import parsing
    from proofs_checks.parsing import load_npz

    p = Path(path)
    if not p.exists():
        raise InputError(f"--weights: file not found: {path}")
    if p.is_dir():
        raise InputError(f"--weights: {path} is a directory, not a file")
    if p.suffix == ".npz":
        data = load_npz(p, "--weights", max_memory=max_memory)
    elif p.suffix in (".pt", ".pth"):
        obj = parsing.load_torch_file(p, "--weights", max_memory)
        if not (isinstance(obj, dict) or hasattr(obj, "state_dict")):
            raise InputError(f"--weights: {path} must hold a dict or state_dict with W_PV and W_KQ")
        data = {k: parsing.tensor_to_numpy(v, "--weights", f"{k!r} in {path}") if hasattr(v, "detach") else v
                for k, v in parsing.named_arrays(obj, "--weights", path).items()}
    else:
        raise InputError(f"--weights: must be a .npz or .pt file, got {path}")

    def pick(keys, what):
        found = [k for k in data if str(k).split(".")[-1] in keys]
        if len(found) > 1:
            raise InputError(f"--weights: {path} holds {what} under {len(found)} keys ({', '.join(found)}); keep one")
        if found:
            return as_numeric_array(data[found[0]], "--weights", f"{what} (key {found[0]!r})")
        raise InputError(f"--weights: {path} has no {what} (looked for keys {', '.join(keys)}; "
                         f"found {', '.join(map(str, data)) or 'none'})")

    return pick(_PV_KEYS, "W_PV"), pick(_KQ_KEYS, "W_KQ")


def _fmt(a) -> str:
    return np.array2string(np.asarray(a, dtype=float), precision=5, suppress_small=True)


# ------------------------------------------------------------------------------------------------
# resources

# Single-thread CPU throughput of this code, measured (rough; the ETA printed while running is
# measured, this is only the up-front estimate): seconds per unit of work.
_T_STATS_F2 = 0.3e-9   # per seed·prompt·F² (bmm of the features)
_T_STATS_TOK = 40e-9   # per seed·prompt·(N+2)(d+1) (sampling, Gram matrices)
_T_EVAL = 0.35e-3      # per optimiser evaluation (overhead)
_T_EVAL_F2 = 2e-9      # per optimiser evaluation per seed·F²
_T_MEAS = 80e-9        # per test prompt·(M+2)(d+1)


def estimate_resources(d: int, N: int, M: int, seeds: int, prompts: int, steps: int, *, train: bool = True,
                       n_measure: int = N_MEASURE, measure_budget: float = 256 * 2**20) -> tuple[guards.Estimate, int]:
    """Peak bytes and seconds of ``check icl`` for these sizes, and the number of test prompts
    measured per chunk (bounded memory). Training holds the per-seed second moments of the
    ``F = (d+1)²d`` LSA features (``seeds × F × F``) and one chunk of sampled prompts; the
    measurement holds chunks of test prompts of length ``M``.

    >>> est, chunk = estimate_resources(3, 20, 20, 8, 32768, 300)
    >>> est.bytes < 2**30 and est.seconds < 60 and chunk == 4000
    True
    >>> estimate_resources(2, 10, 10**9, 8, 32768, 300)[0].bytes > 5e10
    True
    """
    F = (d + 1) ** 2 * d
    parts: dict[str, float] = {}
    seconds = 0.0
    if train:
        k = max(1, min(prompts, 2**22 // max(1, seeds * (N + 1) * d)))
        parts[f"feature moments {seeds} seeds × {F} × {F}"] = 3.0 * seeds * F * F * 8
        parts[f"sampled prompts {seeds} seeds × {k} × {N + 1} tokens × {d + 1}"] = \
            5.0 * seeds * k * (N + 2) * (d + 1) * 8 + 3.0 * seeds * k * F * 8
        parts[f"convergence check {seeds} seeds × {F} × {d * d}"] = 3.0 * seeds * F * d * d * 8
        seconds += seeds * prompts * (_T_STATS_F2 * F * F + _T_STATS_TOK * (N + 2) * (d + 1))
        seconds += (steps + 1.25 * LBFGS_STEPS) * (_T_EVAL + _T_EVAL_F2 * seeds * F * F)
    train_bytes = sum(parts.values())
    per_prompt = 4.0 * (M + 2) * (d + 1) * 8
    chunk = int(max(1, min(n_measure, measure_budget // per_prompt)))
    parts[f"test prompts {chunk} × {M + 1} tokens × {d + 1}"] = chunk * per_prompt
    seconds += n_measure * (M + 2) * (d + 1) * _T_MEAS
    peak = max(train_bytes, chunk * per_prompt)
    return guards.Estimate(peak, seconds, parts), chunk


def _measure(ni, L, N, Gi, Wpv, Wkq, *, M, seed, device, chunk, progress=None) -> dict:
    """``numerics.icl.measure_weights`` on ``N_MEASURE`` test prompts, in chunks of ``chunk`` prompts
    (memory bounded for long test contexts M). Risk: mean over all prompts; relative RMS prediction
    difference: root mean of the per-chunk squares (the chunks are equal in size)."""
    n_chunks = math.ceil(N_MEASURE / chunk)
    size = math.ceil(N_MEASURE / n_chunks)
    outs = []
    for i in range(n_chunks):
        outs.append(ni.measure_weights(L, N, Gi, Wpv, Wkq, M=M, n=size, seed=seed + 1 + 104729 * i, device=device))
        if progress:
            progress((i + 1) / n_chunks)
    if n_chunks == 1:
        return outs[0]
    res = dict(outs[0])
    res["rel_rms_prediction"] = np.sqrt(np.mean([np.square(o["rel_rms_prediction"]) for o in outs], 0)).tolist()
    res["risk_M"] = float(np.mean([o["risk_M"] for o in outs]))
    res["measure_chunks"] = n_chunks
    return res


# ------------------------------------------------------------------------------------------------
# verdicts


def loss_hessian_cond(L: np.ndarray, N: int) -> float:
    """Condition number of the population loss as a function of ``B = w22·W11``: its Hessian is
    ``Λ ⊗ E[hhᵀ]`` (:func:`numerics.icl.population_moments`), so ``cond = cond(Λ)·cond(E[hhᵀ])``; it
    sets how slowly an optimiser and how noisily a finite sample pin down ``B``."""
    from numerics.icl import population_moments

    hh = population_moments(L, N)[0]
    a, b = np.linalg.eigvalsh(L), np.linalg.eigvalsh(hh)
    return float(a[-1] * b[-1] / (a[0] * b[0]))


def _trained_verdict(res, Gi: np.ndarray, tol: float, prompts: int, steps: int, cond_hess: float) -> Verdict:
    nG = float(np.linalg.norm(Gi))
    S = res.B.shape[0]
    gap = np.linalg.norm(res.B - res.B_star, axis=(1, 2)) / nG
    gap_tol = tol / 10
    blockers, fix = [], None
    if not np.all(np.isfinite(gap)):
        bad = int(np.sum(~np.isfinite(gap)))
        blockers.append(f"training diverged: {bad} of {S} seeds ended with non-finite weights or an unmeasurable "
                        "optimiser gap")
        fix = "another --seed or --steps; a diverging optimiser says nothing about the closed form"
    elif float(gap.max()) > gap_tol:
        blockers.append(
            f"training not converged: the optimiser stopped ‖B − B*‖/‖Γ_N^{{-1}}‖ = {gap.max():.3g} (worst seed; "
            f"median {np.median(gap):.3g}) from the exact minimiser B* of its own training loss over W11, above "
            f"tol/10 = {gap_tol:.3g}" + (f" (the loss Hessian in w22·W11, Λ ⊗ E[hhᵀ], has condition number "
                                        f"{cond_hess:.3g}: it is flat along Λ's small eigendirections)"
                                        if cond_hess > 1e4 else ""))
        fix = f"more optimiser steps (--steps {max(4 * steps, 1000)})"
    # spread the seeds would show once converged: that of the exact per-seed minimisers B*
    Bs = res.B_star
    sampling = float(np.sqrt(((Bs - Bs.mean(0)) ** 2).sum() / max(S - 1, 1)) / nG) if S >= 2 else None
    return compare_seed_mean(res.B, Gi, tol=tol, quantity="w22·W11 vs Γ_N^{-1}", per_seed=prompts,
                             blockers=blockers, block_suggestion=fix, sampling_spread=sampling,
                             extra_numbers={"optimiser_gap_max": float(gap.max()), "optimiser_gap_tol": gap_tol,
                                            "optimiser_gap_per_seed": gap.tolist(),
                                            "loss_gap_per_seed": res.loss_gap.tolist(),
                                            "spread_at_minimiser": sampling})


def _weights_verdict(meas: dict, tol: float, tol_reason: str | None = None) -> Verdict:
    eB, eP = max(meas["rel_err_B"]), max(meas["rel_rms_prediction"])
    numbers = {"quantity": "w22·W11 vs Γ_N^{-1} and predictions", "rel_err_B": eB, "rel_rms_prediction": eP,
               "tolerance": tol, "max_other_block": meas["max_other_block"]}
    if tol_reason:
        numbers["tolerance_reason"] = tol_reason
    crit = (f"‖w22·W11 − Γ_N^{{-1}}‖_F/‖Γ_N^{{-1}}‖_F = {eB:.3g} and the relative RMS difference of predictions "
            f"from the Γ_N^{{-1}} predictor on {N_MEASURE} fresh prompts = {eP:.3g}, each against tol = {tol:.3g} "
            + (f"({tol_reason}; " if tol_reason else "(") + "exact for the weights; no seeds involved)")
    if eB <= tol and eP <= tol:
        return Verdict("ok", "your weights match Γ_N^{-1} within tol", crit, numbers)
    which = " and ".join(w for w, bad in (("w22·W11", eB > tol), ("predictions", eP > tol)) if bad)
    return Verdict("mismatch", f"your weights are not the Γ_N^{{-1}} predictor within tol ({which})", crit, numbers)


# ------------------------------------------------------------------------------------------------
# the command


@click.command("icl")
@click.option("--lambda", "lam", required=True, metavar="VALUES|FILE",
              help='Covariance Λ: a diagonal "1,2,3", a matrix "2,0.5;0.5,1" (rows by ;), or a .npy/.txt/.csv file.')
@click.option("--N", "N", type=click.IntRange(min=1), required=True, help="Training context length N.")
@click.option("--M", "M", type=click.IntRange(min=1), default=None, help="Test context length M (default N).")
@click.option("--weights", type=str, default=None,
              help="Your trained LSA weights (.pt or .npz with W_PV and W_KQ) to test against Γ_N.")
@click.option("--tol", type=click.FloatRange(min=0, min_open=True), default=None, callback=guards.finite_number,
              help="Relative bound on w22·W11 vs Γ_N^{-1} (default 0.05 for training, 0.01 for --weights; with --model, "
                   "1/4 of the distance from Γ_N^{-1} to the nearest alternative preconditioner).")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="Seeds trained in one batch (default 8).")
@click.option("--prompts", type=click.IntRange(min=16), default=None,
              help="Sampled training prompts per seed (default 32768; --quick 8192, --full 131072).")
@click.option("--steps", type=click.IntRange(min=0), default=None,
              help=f"Adam steps before {LBFGS_STEPS} L-BFGS iterations (default 300; --full 1000).")
@click.option("--model", "model_spec", type=str, default=None, metavar="FILE.py:NAME",
              help="Your in-context learner (a function, nn.Module, class or zero-argument factory): which algorithm "
                   "do its predictions match? With --model, --prompts is the number of probe prompts per length "
                   "(default 4000; --quick 1000, --full 16000).")
@click.option("--layout", type=click.Choice(LAYOUTS), default="default", show_default=True,
              help="How --model is called: default obj(xs, ys, xq); zfb obj(E (B, d+1, M+1)); garg obj(tokens "
                   "(B, 2M+1, d+1)).")
@click.option("--noise", type=click.FloatRange(min=0), default=0.0, show_default=True, callback=guards.finite_number,
              help="Label noise σ of the --model probe prompts (ridge's Bayes-optimal λ = σ²).")
@report_option
@timeout_option
@check_options
def command(lam, N, M, weights, tol, seeds, prompts, steps, model_spec, layout, noise, report_dir, timeout, seed, device,
            mode, json_path, max_memory, no_progress):
    """Closed forms of the trained LSA (Zhang–Frei–Bartlett) for your Λ, N, M; a trained batch of
    full-parameter LSAs (or your --weights) measured against them, and a verdict:
    ok (exit 0), mismatch (1), inconclusive (3: says how many seeds/prompts/steps would decide).

    \b
    Examples:
      tverify check icl --lambda "1,2,3" --N 20 --M 10
      tverify check icl --lambda "2,0.5;0.5,1" --N 20 --seeds 16
      tverify check icl --lambda cov.npy --N 20 --weights my_lsa.pt --json out.json
      tverify check icl --lambda "1,2" --N 10 --M 10 --model my_model.py:least_squares
    """
    check_report_dir(report_dir, json_path)  # first: a --json inside --report is refused for that reason
    check_json_target(json_path)
    if not noise <= MAX_NOISE:
        raise UsageError(f"--noise: must be a number in [0, {MAX_NOISE:g}] (σ² and the label moments must stay "
                         f"within float64's range), got {noise:g}")
    if model_spec is not None:
        _model_command(model_spec, lam=lam, N=N, M=M, layout=layout, noise=noise, prompts=prompts, tol=tol,
                       seed=seed, device=device, mode=mode, json_path=json_path, max_memory=max_memory,
                       no_progress=no_progress, weights=weights, seeds=seeds, steps=steps, report_dir=report_dir,
                       timeout=timeout)
    if layout != "default" or noise:
        raise UsageError("--layout and --noise go with --model")
    if timeout is not None:
        raise UsageError("--timeout limits the process that runs your --model; without --model nothing of yours runs")
    L, cond = _lambda(lam)
    M = N if M is None else M
    d = int(L.shape[0])
    s0, p0, st0 = SIZES[mode]
    seeds, prompts, steps = seeds or s0, prompts or p0, st0 if steps is None else steps
    Wpv = Wkq = None
    if weights:
        Wpv, Wkq = load_weights(weights, max_memory)
        if Wpv.shape[-2:] != (d + 1, d + 1) or Wkq.shape[-2:] != (d + 1, d + 1) or Wpv.ndim not in (2, 3) \
                or Wpv.shape != Wkq.shape:
            raise InputError(f"--weights: W_PV and W_KQ must be ({d + 1}, {d + 1}) for d = {d} (from --lambda), "
                             f"got W_PV {Wpv.shape}, W_KQ {Wkq.shape}")
    tol = DEFAULT_TOL["weights" if weights else "trained"] if tol is None else tol
    try:
        require_device(device, False)
    except UsageError:
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use --device cpu)") from None
    n_sets = (1 if Wpv.ndim == 2 else Wpv.shape[0]) if weights else seeds
    est, chunk = estimate_resources(d, N, M, n_sets, prompts, steps, train=not weights)
    hint = "lower --seeds, --prompts, --N or --M"
    if d > 1 and estimate_resources(1, N, M, n_sets, prompts, steps, train=not weights)[0].bytes < est.bytes / 100:
        hint = f"the dimension d = {d} (the length of --lambda) drives it; use fewer dimensions, or " + hint
    guards.check_memory(est, max_memory, hint=hint)

    from numerics import icl as ni  # torch: imported only once the input is known to be good

    prog = guards.Progress("check icl", enabled=not no_progress, estimate=est.seconds)
    if est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(est.seconds)} and ≈ {guards.fmt_bytes(est.bytes)} of memory "
                  f"for {n_sets} seed(s) × {prompts} prompts, N = {N}, M = {M}, d = {d}")
    G = ti.gamma_n(L, N)
    Gi = np.linalg.inv(G)
    cond_gamma = float(np.linalg.cond(G))
    cond_hess = loss_hessian_cond(L, N)
    closed = {
        "d": d, "N": N, "M": M,
        "Gamma_N": G.tolist(), "Gamma_N_inv": Gi.tolist(),
        "w22_limit": math.sqrt(float(np.linalg.norm(Gi))),
        "loss_minimum": float(ti.loss_minimum(L, N)),
        "linear_task_risk_M": float(ti.linear_task_risk(L, N, M)),
        "risk_M_to_infinity": float(ti.linear_task_risk(L, N, 10**12)),
    }
    doc: dict = {"check": "icl",
                 "inputs": {"lambda": L.tolist(), "N": N, "M": M, "mode": mode, "seed": seed, "device": device,
                            "tol": tol, **({"weights": weights} if weights else
                                           {"seeds": seeds, "prompts": prompts, "steps": steps,
                                            "lbfgs_steps": LBFGS_STEPS})},
                 "conditioning": {"cond_Lambda": cond, "cond_Gamma_N": cond_gamma, "cond_loss_hessian_B": cond_hess},
                 "resources": est.to_json(),
                 "closed_forms": closed}
    t_meas = N_MEASURE * (M + 2) * (d + 1) * _T_MEAS
    split = 1 - t_meas / max(est.seconds, 1e-9) if not weights else 0.0
    if weights:
        meas = _measure(ni, L, N, Gi, Wpv, Wkq, M=M, seed=seed, device=device, chunk=chunk,
                        progress=prog.phase("measuring", 0, 1).sub)
        doc["weights"] = {"file": weights, **meas, "tol": tol}
        verdict = _weights_verdict(meas, tol)
    else:
        prog.phase("training", 0, split)
        # Training runs on Λ/s, s = 4^round(log4 λ_max): an exact change of units (x → x/√s, √s a power of
        # two, so the sampled prompts are exactly rescaled copies) under which the empirical minimiser
        # maps as B → B/s and W_KQ → W_KQ/s; the optimiser's fixed step sizes then meet unit-scale data.
        scale = 4.0 ** round(math.log(float(np.linalg.eigvalsh(L)[-1]), 4))
        res = ni.train_lsa_monitored(L / scale, N, n_seeds=seeds, n_prompts=prompts, steps=steps, seed=seed,
                                     device=device, lbfgs_steps=LBFGS_STEPS, progress=prog.sub)
        res.B, res.B_star, res.Wkq = res.B / scale, res.B_star / scale, res.Wkq / scale
        res.final_loss, res.loss_gap = res.final_loss * scale, res.loss_gap * scale
        doc["inputs"]["training_units_scale"] = scale
        prog.phase("measuring", split, 1)
        finite = bool(np.all(np.isfinite(res.Wpv.numpy())) and np.all(np.isfinite(res.Wkq.numpy())))
        if finite:
            meas = _measure(ni, L, N, Gi, res.Wpv, res.Wkq, M=M, seed=seed, device=device, chunk=chunk,
                            progress=prog.sub)
        else:  # diverged training: nothing to measure (the verdict says so); never blame the user's weights
            meas = {"rel_err_B": None, "rel_rms_prediction": None, "max_other_block": None, "risk_M": float("nan")}
        verdict = _trained_verdict(res, Gi, tol, prompts, steps, cond_hess)
        mean = res.B.mean(0)
        doc["trained"] = {"seeds": seeds, "prompts_per_seed": prompts, "steps": steps, "seconds": res.seconds,
                          "device": res.device, "mean_B": mean.tolist(),
                          "rel_err_mean_B": verdict.numbers["value"], "standard_error": verdict.numbers["standard_error"],
                          "spread": verdict.numbers["spread"],
                          "rel_err_B_per_seed": meas["rel_err_B"], "rel_rms_prediction_per_seed": meas["rel_rms_prediction"],
                          "optimiser_gap_per_seed": verdict.numbers["optimiser_gap_per_seed"],
                          "final_loss_per_seed": res.final_loss.tolist(),
                          "max_other_block": meas["max_other_block"], "risk_M_measured": meas["risk_M"]}
    prog.done()

    lines = [f"Λ (d = {d}, cond {cond:.3g}), N = {N}, M = {M}; cond of the loss Hessian in w22·W11: {cond_hess:.3g}",
             f"Γ_N = (1+1/N)Λ + tr(Λ)/N·I (cond {cond_gamma:.3g}) =\n{_fmt(G)}",
             f"Γ_N^{{-1}} (= w22·W11 at the global minimum) =\n{_fmt(Gi)}",
             f"gradient-flow limit w22 = ‖Γ_N^{{-1}}‖_F^{{1/2}} = {closed['w22_limit']:.6g}",
             f"min population loss ½[trΛ − tr(Γ_N^{{-1}}Λ²)] = {closed['loss_minimum']:.6g}",
             f"linear-task risk at M = {M}: {closed['linear_task_risk_M']:.6g} (M → ∞: {closed['risk_M_to_infinity']:.6g})"]
    if weights:
        w = doc["weights"]
        lines.append(f"your weights: ‖w22·W11 − Γ_N^{{-1}}‖/‖Γ_N^{{-1}}‖ = {max(w['rel_err_B']):.3g}, "
                     f"prediction rel. RMS diff = {max(w['rel_rms_prediction']):.3g}, other blocks max |.| = "
                     f"{w['max_other_block']:.3g}, measured risk at M = {M}: {w['risk_M']:.6g} (tol {tol:g})")
    else:
        t, n = doc["trained"], verdict.numbers
        lines.append(f"trained: {seeds} seeds × {prompts} prompts, {steps} Adam + {LBFGS_STEPS} L-BFGS steps on "
                     f"{t['device']} in {t['seconds']:.1f} s; mean w22·W11 rel. error {n['value']:.3g} ± {n['standard_error']:.3g} "
                     f"(SE), seed spread {n['spread']:.3g}, optimiser gap ≤ {n['optimiser_gap_max']:.3g}; "
                     f"measured risk at M = {M}: {t['risk_M_measured']:.6g}")
        lines.append(f"mean w22·W11 =\n{_fmt(t['mean_B'])}")
    finish(SanityResult("icl", doc, verdict, [], lines), json_path, report_dir)


# ------------------------------------------------------------------------------------------------
# --model: which in-context algorithm does your model compute? (numerics.icl_probe)

#: probe prompts per prompt length for --quick / default / --full (``--prompts`` overrides)
PROBE_PROMPTS = {"quick": 1000, "default": 4000, "full": 16000}


def model_weights_tol(L: np.ndarray, N: int) -> tuple[float, str]:
    """The tolerance of the ZFB verdict on the weights a ``--model`` exposes (a model trained by the
    user, on a budget this tool does not know): a quarter of the relative distance from Γ_N^{-1} to the
    nearest other preconditioner a trained layer could have learned instead, Λ^{-1} (the N → ∞ limit)
    and ((1 + 1/N)Λ)^{-1} (Γ_N without its trace term). Within it, the weights are nearer Γ_N^{-1} than
    any of those by a factor of 3 or more; the same 1/4 as the probe's identification bound."""
    Gi = np.linalg.inv(ti.gamma_n(L, N))
    nrm = np.linalg.norm(Gi)
    alts = {"Λ^{-1} (N → ∞)": np.linalg.inv(L), "((1 + 1/N)Λ)^{-1} (no trace term)": np.linalg.inv((1 + 1 / N) * L)}
    dist = {k: float(np.linalg.norm(A - Gi) / nrm) for k, A in alts.items()}
    near = min(dist, key=dist.get)
    tol = dist[near] / 4
    return tol, (f"1/4 of the relative distance {dist[near]:.3g} from Γ_N^{{-1}} to the nearest alternative "
                 f"preconditioner, {near}")


class _ModelRaised(Exception):
    """The user's model raised on the probe input (carries the one-line description)."""


def _zero_argument(obj) -> bool:
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind is p.VAR_KEYWORD for p in sig.parameters.values()) and \
        not any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())


def _instantiate(obj, name: str, device: str):
    """A class (nn.Module or other) or a zero-argument factory is called once to get the model;
    an nn.Module is put in eval mode and moved to ``device``."""
    import torch

    from proofs_checks.sanity._loader import user_code

    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, torch.nn.Module) and _zero_argument(obj)):
        with user_code("--model", f"instantiating {name}"):
            obj = obj()
    if not callable(obj):
        raise UsageError(f"--model: {name} is not callable (give a function, an nn.Module, a class or a factory), "
                         f"got {type(obj).__name__}")
    if isinstance(obj, torch.nn.Module):
        with user_code("--model", f"{name}.eval() / moving it to {device}"):
            obj.eval()
            obj.to(device)
    return obj


def _layout_call(model, layout: str, name: str = "the model"):
    """``predict(X, y, x_q)`` for the probe, calling ``model`` in the given layout."""
    from numerics.icl import prompt_matrix
    from numerics.icl_classes import garg_tokens
    from proofs_checks.sanity._loader import describe_exception, user_code

    def predict(X, y, x_q):
        if layout == "zfb":
            args = (prompt_matrix(X, y, x_q),)
        elif layout == "garg":
            args = (garg_tokens(X, y, x_q),)
        else:
            args = (X, y, x_q)
        try:
            with user_code("--model", name, exceptions=False):  # sys.exit, KeyboardInterrupt: exit 2
                return model(*args)
        except UsageError:
            raise
        except Exception as exc:
            raise _ModelRaised(describe_exception(exc)) from None

    return predict


def _exposed_lsa_weights(model, d: int, name: str = "the model"):
    """``(W_PV, W_KQ)`` as NumPy ``(d+1, d+1)`` (or a batch) when the model exposes them as attributes
    or in its ``state_dict`` under the names ``--weights`` reads (Wpv/W_PV…, Wkq/W_KQ…); else a string
    saying why not. Reading them runs the user's code (properties, ``state_dict``): inside the
    user-code boundary (its exceptions and ``sys.exit`` are one line, exit 2)."""
    from proofs_checks.sanity._loader import user_code

    with user_code("--model", f"reading {name}'s LSA weights (attributes / state_dict)"):
        found = _find_lsa_weights(model)
    if len(found) != 2:
        return ("the model exposes no LSA weights (attributes or state_dict entries Wpv/W_PV and Wkq/W_KQ "
                f"of shape ({d + 1}, {d + 1}))" if not found else
                f"the model exposes only {'W_PV' if 'pv' in found else 'W_KQ'} of the LSA weights")
    try:
        pv, kq = (np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, dtype=np.float64)
                  for v in (found["pv"], found["kq"]))
    except (TypeError, ValueError) as exc:
        return f"the model's LSA weights are not numeric arrays ({exc})"
    if not (pv.shape == kq.shape and pv.shape[-2:] == (d + 1, d + 1) and pv.ndim in (2, 3)):
        return (f"the model exposes LSA weights of shapes W_PV {pv.shape}, W_KQ {kq.shape}, not ({d + 1}, {d + 1}) "
                f"for d = {d} (from --lambda)")
    if not (np.all(np.isfinite(pv)) and np.all(np.isfinite(kq))):
        return "the model's LSA weights have non-finite entries"
    return pv, kq


def _find_lsa_weights(model) -> dict:
    found = {}
    for keys, what in ((_PV_KEYS, "pv"), (_KQ_KEYS, "kq")):
        for k in keys:
            v = getattr(model, k, None)
            if v is not None and hasattr(v, "shape"):
                found[what] = v
                break
        if what not in found and hasattr(model, "state_dict"):
            for k, v in model.state_dict().items():
                if k.split(".")[-1] in keys:
                    found[what] = v
                    break
    return found


def _g3(x) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.3g}"


def _probe_verdict(pr: dict, name: str) -> Verdict:
    """ok: one reference identified (within tolerance at every length probed); mismatch: NaN/inf
    predictions, or every reference beyond its tolerance at some length by k SE (the evidence: the
    per-M table); inconclusive: no reference identified and one not excluded either."""
    from proofs_checks.sanity._verdict import round_up

    Ms, P = pr["M_values"], pr["prompts"]
    idf = pr.get("identification")
    numbers = {"identified": idf["identified"] if idf else None, "closest_algorithm": pr["closest"],
               "prompts_per_length": P, "M_values": Ms, "skipped_lengths": pr.get("skipped_lengths", []),
               "geometric_distance": pr["geometric_distance"]}
    bad = pr["nonfinite"]
    if sum(bad):
        where = ", ".join(f"M = {m}: {b} of {P}" for m, b in zip(Ms, bad) if b)
        return Verdict("mismatch", f"{name} returned NaN or inf predictions ({where})",
                       "every prediction must be finite; a non-finite prediction is a finding about the model, "
                       "no algorithm can be matched", {**numbers, "nonfinite": bad})
    k, rho = idf["k"], idf["ratio"]
    skipped = pr.get("skipped_lengths") or []
    skip_txt = ("; lengths skipped because the model raised: " + ", ".join(f"M = {s_['M']}" for s_ in skipped)
                if skipped else "")
    crit = (f"at every prompt length M = {Ms} ({P} fresh prompts each) the model's mean squared distance to an "
            f"algorithm (normalised by E y_q² = {pr['normaliser']:.3g}) must lie within {rho:g}² × that algorithm's "
            f"distance to its nearest distinct reference or to the zero prediction (RMS ratio {rho:g} < 1/2: at most "
            "one algorithm passes), "
            f"with {k:g} standard errors to spare (pass: d + {k:g}·SE ≤ tol; beyond: d − {k:g}·SE > tol, or the same "
            "bound for the distances truncated at 4 × tol)"
            + (f"; working precision {idf['work_dtype']}: tolerance at least {idf['precision_factor']:g} × the "
               "references' distance when computed from inputs in that precision" if idf["work_dtype"] != "float64" else "")
            + skip_txt)
    tab = idf["table"]

    def worst(a):
        r = max(tab[a], key=lambda r_: r_["ratio"])
        return f"{a} at M = {r['M']}: distance {r['distance']:.3g} ± {r['se']:.2g} vs tolerance {r['tolerance']:.3g}"

    def graded(a):
        """How near ``a`` is: its worst RMS distance as a share of the distance from ``a`` to its nearest
        other reference (the tolerance is (1/4)² of that distance: 25 % is the identification bound)."""
        r = max(tab[a], key=lambda r_: r_["ratio"])
        try:
            share = 100 * (1 / 4) * math.sqrt(max(r["distance"], 0.0) / r["tolerance"])
        except (TypeError, ValueError, ZeroDivisionError):
            return a
        lam_ = {"ridge": pr.get("ridge_lambda"), "ridge_lambda_grid": pr.get("ridge_grid_lambda")}.get(a)
        near = r.get("nearest_reference")
        return (f"{a}{f' (λ = {lam_:.3g})' if isinstance(lam_, (int, float)) else ''}, at {share:.0f} % of the "
                f"distance to {near or 'the nearest other reference'} (identified below 25 %), worst at M = {r['M']}")

    numbers["closest_graded"] = graded(pr["closest"]) if pr.get("closest") in tab else None
    best = idf["identified"]
    if best is not None:
        group = next((g for g in pr["equivalent"] if best in g), [best])
        alias = f" (identical here to {', '.join(x for x in group if x != best)})" if len(group) > 1 else ""
        lam = f" (λ = {pr['ridge_grid_lambda']:.3g})" if best == "ridge_lambda_grid" else ""
        return Verdict("ok", f"{name} computes what {best}{lam} computes{alias}: within tolerance at every M probed",
                       crit + f"; identified {best}: worst {worst(best)}", numbers)
    closest = pr["closest"]
    if not idf["undecided"]:
        return Verdict("mismatch", f"{name} computes none of the reference algorithms (closest: {graded(closest)})",
                       crit + f"; every reference is beyond its tolerance at some length (closest {closest}: "
                              f"{worst(closest)})", numbers)
    und = idf["undecided"]
    need = [v for a, v in idf["prompts_needed"].items() if v is not None]
    sugg = (f"about {round_up(math.ceil(max(need) * 1.2))} prompts per length (--prompts; SE ∝ 1/√prompts)"
            if need else "no number of prompts: a distance equals its tolerance")
    return Verdict("inconclusive", f"cannot tell whether {name} computes {' or '.join(und)} (closest: "
                   f"{graded(closest) if closest in tab else closest})",
                   crit, numbers, [f"{a} is within {k:g} SE of its tolerance at some length ({worst(a)})" for a in und],
                   sugg)


@dataclass
class ICLModelResult:
    """What ``check icl --model`` found: ``verdict`` (:class:`~proofs_checks.sanity._verdict.Verdict`:
    ok = an algorithm identified, mismatch = none of the references or non-finite predictions,
    inconclusive = undecided at these sizes), ``identified`` (the algorithm or None),
    ``closest_algorithm`` (a name of :data:`numerics.icl_probe.EXTENDED_ALGORITHMS`, None only for
    non-finite predictions), ``probe`` (the dict of
    :func:`numerics.icl_probe.probe_algorithms`), ``zfb`` (the ZFB weights verdict when the model
    exposes LSA weights, else a ``skipped`` reason) and ``doc`` (the whole JSON document)."""

    verdict: Verdict
    closest_algorithm: str | None
    probe: dict
    zfb: dict
    doc: dict
    lines: list = field(default_factory=list)
    identified: str | None = None

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def to_json(self) -> dict:
        from proofs_checks.sanity._verdict import _jsonable

        doc = dict(self.doc)
        doc.update(outcome=self.verdict.outcome, verdict=self.verdict.summary, ok=self.verdict.ok,
                   decision=self.verdict.to_json())
        return _jsonable(doc)

    def __str__(self) -> str:
        return "\n".join(self.lines + self.verdict.lines())

    def _repr_html_(self) -> str:
        import html

        pr = self.probe
        head = "".join(f"<th>M={m}</th>" for m in pr["M_values"])
        rows = []
        for a in pr["algorithms"]:
            cells = "".join(f"<td>{v:.3g} ± {s:.2g}</td>" for v, s in zip(pr["distance"][a], pr["distance_se"][a]))
            mark = " <b>(closest)</b>" if a == self.closest_algorithm else ""
            rows.append(f"<tr><td>{html.escape(a)}{mark}</td>{cells}</tr>")
        v = self.verdict
        return (f"<div><p><b>check icl --model: {html.escape(v.outcome)}</b>: {html.escape(v.summary)}</p>"
                f"<p>distance of the model's predictions to each algorithm (mean squared difference / E y_q², ± SE)</p>"
                f"<table><tr><th>algorithm</th>{head}</tr>{''.join(rows)}</table>"
                f"<p>{html.escape(v.criterion)}</p>"
                + (f"<p>to decide: {html.escape(v.suggestion)}</p>" if v.suggestion else "") + "</div>")


def _parse_lambdas(lambdas) -> tuple[np.ndarray, float]:
    return _lambda(lambdas)  # text or an array: the same checks (size, overflow, conditioning, scale)


def check_icl_model(obj, *, lambdas, N: int, M: int | None = None, layout: str = "default", noise: float = 0.0,
                    seed: int = 0, device: str = "cpu", prompts: int | None = None, mode: str = "default",
                    M_values=None, tol: float | None = None, name: str | None = None, max_memory: float | None = None,
                    progress: bool = False) -> ICLModelResult:
    """Which in-context algorithm does ``obj`` compute? Probe it on fresh linear-regression prompts
    (``x ~ N(0, Λ)``, ``w ~ N(0, I)``, label noise σ = ``noise``) at the prompt lengths ``M_values``
    (default :func:`numerics.icl_probe.prompt_lengths` of ``M``, itself ``N`` by default) and decide,
    with standard errors, which of ``gamma_n_preconditioned_gd``, ``least_squares``, ``ridge``,
    ``gd_one_step``, ``knn``, ``averaging`` its predictions are closest to.

    ``obj``: a callable mapping a batch of prompts to query predictions ``(B,)``; a class (e.g. an
    ``nn.Module`` subclass) or zero-argument factory is instantiated first. ``layout`` "default":
    ``obj(xs (B, M, d), ys (B, M), xq (B, d))``; "zfb": ``obj(E)`` with ZFB's ``E (B, d+1, M+1)``
    (columns ``(x_i, y_i)``, last ``(x_q, 0)``); "garg": ``obj(tokens (B, 2M+1, d+1))`` (Garg et
    al.'s interleaved tokens, :func:`numerics.icl_classes.garg_tokens`), the object reading its
    prediction at the last token. Inputs are float64 tensors on ``device``. ``lambdas``: Λ as a
    string (``"1,2"``, ``"2,0.5;0.5,1"``, a file), a ``(d,)`` diagonal or a ``(d, d)`` matrix; ``N``:
    the context length the model was trained at (sets Γ_N and the plain-GD step). When ``obj``
    exposes LSA weights (attributes or state_dict entries named as ``--weights`` reads them), they
    are also measured against ZFB's ``Γ_N^{-1}`` (relative bound ``tol``; default :func:`model_weights_tol`,
    a quarter of the distance from Γ_N^{-1} to the nearest alternative preconditioner).

    The verdict is the identification of :func:`numerics.icl_probe._identify` (see the module
    docstring): ``identified`` names the algorithm within tolerance at every length (or None);
    ``closest_algorithm`` always the nearest. Lengths where the model raises are skipped and listed.

    Raises :class:`~proofs_checks.options.UsageError` (one line) for bad input: an unknown layout,
    an object that cannot be instantiated or raises at every probe length (its exception named),
    predictions of the wrong shape or a non-floating dtype. Returns an :class:`ICLModelResult`.
    """
    from numerics.icl_probe import ALGORITHMS, EXTENDED_KNN_K, ProbeOutputError, probe_algorithms, prompt_lengths

    if layout not in LAYOUTS:
        raise UsageError(f"--layout: must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if mode not in PROBE_PROMPTS:
        raise UsageError(f"mode must be one of {', '.join(PROBE_PROMPTS)}, got {mode!r}")
    if not (isinstance(noise, (int, float)) and math.isfinite(noise) and 0 <= noise <= MAX_NOISE):
        raise UsageError(f"--noise: must be a number in [0, {MAX_NOISE:g}] (σ² and the label moments must stay "
                         f"within float64's range), got {noise!r}")
    try:
        N = int(N)
    except (TypeError, ValueError):
        raise UsageError(f"--N: must be an integer ≥ 1, got {N!r}") from None
    if N < 1 or (M is not None and int(M) < 1):
        raise UsageError(f"--N and --M must be ≥ 1, got N = {N}, M = {M}")
    L, cond = _parse_lambdas(lambdas)
    d = int(L.shape[0])
    M = N if M is None else int(M)
    Ms = prompt_lengths(M, d) if M_values is None else sorted({int(m) for m in M_values})
    # the grid reaches beyond 2d, where the consistent algorithms meet, and beyond the largest k of the k-NN
    # references, below which k-NN and the label mean coincide (d = 1, M = 2 probed only M ≤ 4: a label-mean
    # model was indistinguishable from knn_5, and least squares up to M = 5 then the label mean was "least squares")
    kmax = max(EXTENDED_KNN_K)
    if M_values is None and Ms[-1] <= max(2 * d, kmax):
        Ms.append(max(4 * d, 2 * kmax))
    if not Ms or Ms[0] < 1:
        raise UsageError(f"prompt lengths must be ≥ 1, got {Ms}")
    P = PROBE_PROMPTS[mode] if prompts is None else int(prompts)
    if P < 16:
        raise UsageError(f"--prompts: at least 16 probe prompts per length, got {P}")
    tol_reason = "given (--tol)"
    if tol is not None:
        tol = float(tol)
    try:
        require_device(device, False)
    except UsageError:
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use --device cpu)") from None
    Mmax = Ms[-1]
    per_prompt = 8.0 * (6 * Mmax * (d + 1) + 2 * (2 * Mmax + 1) * (d + 1) + 4 * d * d)
    est = guards.Estimate(P * per_prompt, 2e-6 * P * sum(Ms) * (d + 1) + 0.2,
                          {f"probe prompts {P} × {Mmax} tokens × {d + 1} (and their copies)": P * per_prompt})
    guards.check_memory(est, max_memory, hint="lower --prompts or --M")
    name = name or getattr(obj, "__name__", type(obj).__name__)
    model = _instantiate(obj, name, device)
    prog = guards.Progress("check icl --model", enabled=progress, estimate=est.seconds)
    try:
        pr = probe_algorithms(_layout_call(model, layout, name), lam=L, N=N, M_values=Ms, noise=float(noise),
                              prompts=P, seed=seed, device=device, z_threshold=Z_SIGMA, progress=prog.sub,
                              extended=True, skip=(_ModelRaised,))
    except ProbeOutputError as exc:
        raise UsageError(f"--model: {name}: {exc}") from None
    prog.done()
    if not pr["M_values"]:  # the model raised at every length: nothing to judge
        shapes = {"default": "xs (B, M, d), ys (B, M), xq (B, d)", "zfb": "E (B, d+1, M+1)",
                  "garg": "tokens (B, 2M+1, d+1)"}[layout]
        first = pr["skipped_lengths"][0]
        raise UsageError(f"--model: {name} raised {first['error']} on the probe input at every prompt length "
                         f"({layout} layout: {shapes}, float64, d = {d}; first at M = {first['M']})")
    verdict = _probe_verdict(pr, name)
    # the ZFB theorem on the model's own LSA weights, when it exposes them
    weights = _exposed_lsa_weights(model, d, name)
    if isinstance(weights, str):
        zfb = {"skipped": f"{weights}, so ZFB's theorem on its weights was not checked; the probe above still says "
                          "whether it predicts like the Γ_N-preconditioned step", "reason": weights}
    else:
        from numerics import icl as ni

        Gi = np.linalg.inv(ti.gamma_n(L, N))
        meas = ni.measure_weights(L, N, Gi, weights[0], weights[1], M=M, n=N_MEASURE, seed=seed + 1, device=device)
        if tol is None:
            tol, tol_reason = model_weights_tol(L, N)
        wv = _weights_verdict(meas, tol, tol_reason)
        zfb = {"outcome": wv.outcome, "summary": wv.summary, "criterion": wv.criterion, "tol": tol,
               "tol_reason": tol_reason,
               "rel_err_B": meas["rel_err_B"], "rel_rms_prediction": meas["rel_rms_prediction"],
               "max_other_block": meas["max_other_block"], "B": meas["B"], "Gamma_N_inv": Gi.tolist()}
    closest = pr["closest"]
    idf = pr.get("identification") or {}
    identified = idf.get("identified") if verdict.outcome == "ok" else None
    if identified and identified in (pr.get("closest_group") or []):  # the same predictions: name the identified one
        closest = identified
    doc = {"check": "icl", "kind": "model",
           "inputs": {"model": name, "layout": layout, "lambda": L.tolist(), "N": N, "M": M, "noise": float(noise),
                      "prompts_per_length": P, "M_values": Ms, "mode": mode, "seed": seed, "device": device, "tol": tol},
           "conditioning": {"cond_Lambda": cond},
           "resources": est.to_json(),
           "algorithms": list(ALGORITHMS),
           "identified": identified,
           "closest_algorithm": closest,
           "closest_measured": pr["closest"],
           "ridge_grid_lambda": pr.get("ridge_grid_lambda"),
           "skipped_lengths": pr.get("skipped_lengths", []),
           "output_dtype": pr.get("output_dtype"), "work_dtype": pr.get("work_dtype"),
           "per_M": _per_m_table(pr),
           "equivalent_algorithms": pr["closest_group"],
           "runner_up": pr["runner_up"], "z_runner_up": pr["z_runner_up"],
           "probe": pr, "zfb_theorem": zfb}
    lines = [f"Λ (d = {d}, cond {cond:.3g}), trained at N = {N}, probed at M = {Ms}, noise σ = {noise:g}, "
             f"{P} prompts per length, layout {layout}",
             f"distance of {name}'s predictions to each algorithm (mean squared difference / E y_q² "
             f"= {pr['normaliser']:.3g}; ± SE):"]
    w = 28
    lines.append(" " * w + "".join(f"{'M=' + str(m):>20}" for m in Ms))
    for a in pr["algorithms"]:
        marks = [t["status"] for t in idf["table"][a]] if idf else [""] * len(Ms)
        cells = "".join(f"{f'{v:.3g} ± {s_:.1g}' + ('' if st == 'pass' or not st else (' ×' if st == 'fail' else ' ?')):>20}"
                        for v, s_, st in zip(pr["distance"][a], pr["distance_se"][a], marks))
        lines.append(f"{a:<{w}}{cells}")
    lines.append(f"{'(risk of the model)':<{w}}" + "".join(
        f"{f'{v:.3g} ± {s:.1g}':>20}" for v, s in zip(pr["risk_model"], pr["risk_model_se"])))
    lines.append("(× beyond the tolerance at that M, ? undecided; tolerance = (1/4)² × the distance from the algorithm to "
                 "its nearest distinct reference or to the zero prediction)")
    lines.append(f"plain GD step η* = {pr['gd_step']:.4g}; ridge λ = σ² = {pr['ridge_lambda']:.4g}; ridge_lambda_grid λ = "
                 f"{pr['ridge_grid_lambda']:.3g} (grid 1e-4 … 1e2); k-NN k = {pr['knn_k']} (knn_1, knn_5: k = 1, 5)"
                 + (f"; equivalent here: {', '.join(' = '.join(g) for g in pr['equivalent'])}" if pr["equivalent"] else ""))
    if "skipped" in zfb:
        lines.append(f"ZFB theorem on the weights: skipped ({zfb['reason']})")
    else:
        lines.append(f"ZFB theorem on the exposed LSA weights: {zfb['outcome']}: {zfb['summary']} "
                     f"(‖w22·W11 − Γ_N^{{-1}}‖/‖Γ_N^{{-1}}‖ = {max(zfb['rel_err_B']):.3g}, tol {tol:.3g}: {tol_reason})")
    for sk in pr.get("skipped_lengths", []):
        lines.append(f"M = {sk['M']} skipped: {name} raised {sk['error']}")
    lines.append(f"closest algorithm: {closest or 'none (non-finite predictions)'}; identified: "
                 f"{identified or 'none of the reference algorithms'}")
    res = ICLModelResult(verdict, closest, pr, zfb, doc, lines)
    res.identified = identified
    return res


def _per_m_table(pr: dict) -> list[dict]:
    """One row per prompt length: the distance to each reference with its SE, tolerance and status."""
    idf = pr.get("identification")
    rows = []
    for i, m in enumerate(pr["M_values"]):
        row = {"M": m, "risk_model": pr["risk_model"][i], "algorithms": {}}
        for a in pr["algorithms"]:
            cell = {"distance": pr["distance"][a][i], "se": pr["distance_se"][a][i]}
            if idf:
                t = idf["table"][a][i]
                cell.update(tolerance=t["tolerance"], status=t["status"], nearest_reference=t["nearest_reference"],
                            truncated_lower_bound=t.get("truncated_lower_bound"))
            row["algorithms"][a] = cell
        rows.append(row)
    return rows


def _model_command(spec, *, lam, N, M, layout, noise, prompts, tol, seed, device, mode, json_path, max_memory,
                   no_progress, weights, seeds, steps, report_dir=None, timeout=None):
    from proofs_checks.sanity._loader import _split

    for given, opt in ((weights, "--weights"), (seeds, "--seeds"), (steps, "--steps")):
        if given is not None:
            raise UsageError(f"{opt} trains or reads LSA weights; it does not go with --model")
    L, _ = _lambda(lam)  # the --lambda errors first, as without --model
    _split(spec, "--model")
    name = spec.strip().rpartition(":")[2]
    from proofs_checks.sanity import _isolate

    payload = _isolate.run_isolated(
        CHILD_TASK, {"kwargs": dict(N=N, M=M, layout=layout, noise=noise, seed=seed, device=device, prompts=prompts,
                               mode=mode, tol=tol, name=name, max_memory=max_memory, progress=not no_progress),
                "module_spec": spec},
        label="--model", what=f"check icl --model {name}", arrays={"lambda": L}, timeout=timeout,
        max_memory=max_memory, progress=not no_progress, figures=bool(report_dir))
    res = rebuild(payload)
    doc = res.to_json()
    for key in ("outcome", "verdict", "ok", "decision"):
        doc.pop(key, None)
    result = SanityResult("icl", doc, res.verdict, [], res.lines, res.figures)
    try:
        finish(result, json_path, report_dir)
    finally:
        _isolate.cleanup(res)


def _distance_figure(pr: dict, name: str):
    """Per-M distance of the model to each reference (± 2 SE), the identification tolerance dashed."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    Ms = pr["M_values"]
    idf = pr.get("identification") or {}
    for a in pr["algorithms"]:
        m = np.maximum(np.asarray(pr["distance"][a], dtype=float), 1e-32)
        se = np.asarray(pr["distance_se"][a], dtype=float)
        line = ax.errorbar(Ms, m, yerr=2 * se, marker="o", ms=3, capsize=2, label=a, lw=1)
        if a == (idf.get("identified") or pr.get("closest")) and idf:
            tol = [r["tolerance"] for r in idf["table"][a]]
            ax.plot(Ms, np.maximum(tol, 1e-32), "--", color=line[0].get_color(), lw=1, label=f"tolerance ({a})")
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xlabel("prompt length M")
    ax.set_ylabel("mean squared distance / E y_q²")
    ax.set_title(f"{name}: distance to each reference algorithm per M", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    return fig


# ------------------------------------------------------------------------------------------------
# in the check's own process (proofs_checks.sanity._isolate)

CHILD_TASK = "proofs_checks.sanity.icl:child_task"


def child_task(req: dict, obj, arrays: dict) -> dict:
    """In the child: load ``--model`` (or take the API's), run :func:`check_icl_model`, return the
    payload (the probe's distances, from which the parent computes the verdict)."""
    from proofs_checks.sanity._isolate import draw_figures
    from proofs_checks.sanity._loader import load_object

    kw = dict(req.get("kwargs") or {})
    if obj is not None:  # the Python API: the caller's objects and arguments
        kw.update(obj.get("kwargs") or {})
        target, lam = obj["obj"], obj["lambdas"]
    else:
        target, lam = load_object(req["module_spec"], "--model"), arrays["lambda"]
    res = check_icl_model(target, lambdas=lam, **kw)
    name = res.doc["inputs"]["model"]
    figs = draw_figures({"distance_per_M": lambda: _distance_figure(res.probe, name)}, res.lines, req)
    return {"kind": "icl", "doc": res.doc, "probe": res.probe, "zfb": res.zfb, "lines": res.lines,
            "closest": res.closest_algorithm, "identified": res.identified, "name": name, "figures": figs}


def rebuild(payload: dict) -> ICLModelResult:
    """In the parent: the :class:`ICLModelResult` of :func:`child_task`'s payload, its verdict
    recomputed here from the probe's distances."""
    pr = payload["probe"]
    verdict = _probe_verdict(pr, payload["name"])
    res = ICLModelResult(verdict, payload["closest"], pr, payload["zfb"], payload["doc"], payload["lines"],
                         payload["identified"] if verdict.outcome == "ok" else None)
    res.figures = {n: Path(p) for n, p in (payload.get("figures") or {}).items()}
    res.figures_dir = payload.get("figures_dir")
    return res
