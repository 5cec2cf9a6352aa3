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
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from proofs_checks import guards
from proofs_checks.options import UsageError, require_device
from proofs_checks.parsing import as_numeric_array, parse_spd
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          compute_dtype_option, report_option, timeout_option)
from proofs_checks.sanity._verdict import Verdict, compare_seed_mean
from proofs_checks.sanity.icl_inputs import (_KQ_KEYS, _PV_KEYS, LAYOUTS, MAX_NOISE, N_MEASURE, SCALE_RANGE,  # noqa: F401
                                          _lambda, _real, _weights_verdict, layout_value, length_value,
                                          noise_value, prompts_value, tol_value)
from theory import icl as ti
from theory.validation import InputError

__all__ = ["command", "parse_lambda", "load_weights", "estimate_resources", "SIZES", "check_icl_model", "ICLModelResult",
           "LAYOUTS"]

#: (seeds, prompts per seed, Adam steps) for --quick / default / --full.
SIZES = {"quick": (8, 8192, 300), "default": (8, 32768, 300), "full": (32, 131072, 1000)}
LBFGS_STEPS = 50
DEFAULT_TOL = {"trained": 0.05, "weights": 1e-2}




def _callback(rule, *args):
    """A click callback applying ``rule`` (``None`` passes through)."""
    return lambda ctx, param, v: v if v is None else rule(v, *args)


def parse_lambda(text: str) -> np.ndarray:
    """``--lambda``: ``"1,2,3"`` → diag(1, 2, 3); ``"2,0.5;0.5,1"`` a full matrix; or a ``.npy`` /
    ``.txt`` / ``.csv`` file. Symmetric positive definite, condition number ≤ 1e12."""
    return _lambda(text)[0]




def load_weights(path: str, max_memory: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read ``W^{PV}, W^{KQ}`` from a ``.npz`` (keys Wpv/W_PV and Wkq/W_KQ) or a torch ``.pt`` file
    (a dict / state_dict with such keys, possibly prefixed like ``attn.Wpv``). Sizes are checked
    before anything is decompressed; two keys for the same matrix (``a.Wpv``, ``b.Wpv``) are
    refused, not resolved. Errors name ``--weights``."""
    from proofs_checks import parsing
    from proofs_checks.parsing import load_npz

    p = parsing.input_file(path, "--weights")
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

    out = pick(_PV_KEYS, "W_PV"), pick(_KQ_KEYS, "W_KQ")
    extra = [str(k) for k in data if str(k).split(".")[-1] not in (*_PV_KEYS, *_KQ_KEYS)]
    if p.suffix == ".npz" and extra:  # never ignored silently (as check att-svm --data; hostile pass 10, N5)
        raise InputError(f"--weights: {path} also holds array(s) {', '.join(extra[:5])}{' …' if len(extra) > 5 else ''}, "
                         "which are not read (it reads W_PV and W_KQ): save those two alone")
    return out


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
    """``numerics.icl_check.measure_weights`` on ``N_MEASURE`` test prompts, in chunks of ``chunk`` prompts
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
    # equal chunks of independent prompts: the variance of the mean of their means is the mean variance / chunks
    res["risk_M_se"] = float(math.sqrt(np.mean([o["risk_M_se"] ** 2 for o in outs]) / n_chunks))
    res["risk_M_prompts"] = int(sum(o["risk_M_prompts"] for o in outs))
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
            f"training not converged: the optimiser stopped ‖B − B*‖/‖Γ_N^(−1)‖ = {gap.max():.3g} (worst seed; "
            f"median {np.median(gap):.3g}) from the exact minimiser B* of its own training loss over W11, above "
            f"tol/10 = {gap_tol:.3g}" + (f" (the loss Hessian in w22·W11, Λ ⊗ E[hhᵀ], has condition number "
                                        f"{cond_hess:.3g}: it is flat along Λ's small eigendirections)"
                                        if cond_hess > 1e4 else ""))
        fix = f"more optimiser steps (--steps {max(4 * steps, 1000)})"
    # spread the seeds would show once converged: that of the exact per-seed minimisers B*
    Bs = res.B_star
    sampling = float(np.sqrt(((Bs - Bs.mean(0)) ** 2).sum() / max(S - 1, 1)) / nG) if S >= 2 else None
    return compare_seed_mean(res.B, Gi, tol=tol, quantity="w22·W11 vs Γ_N^(−1)", per_seed=prompts,
                             blockers=blockers, block_suggestion=fix, sampling_spread=sampling,
                             extra_numbers={"optimiser_gap_max": float(gap.max()), "optimiser_gap_tol": gap_tol,
                                            "optimiser_gap_per_seed": gap.tolist(),
                                            "loss_gap_per_seed": res.loss_gap.tolist(),
                                            "spread_at_minimiser": sampling})




# ------------------------------------------------------------------------------------------------
# the command


@click.command("icl")
@click.option("--lambda", "lam", required=True, metavar="VALUES|FILE",
              help='Covariance Λ: a diagonal "1,2,3", a matrix "2,0.5;0.5,1" (rows by ;), or a .npy/.txt/.csv file.')
@click.option("--N", "N", type=int, required=True, callback=_callback(length_value, "--N"),
              help="Training context length N (≥ 1).")
@click.option("--M", "M", type=int, default=None, callback=_callback(length_value, "--M"),
              help="Test context length M (≥ 1; default N).")
@click.option("--weights", type=str, default=None,
              help="Your trained LSA weights (.pt or .npz with W_PV and W_KQ) to test against Γ_N.")
@click.option("--tol", type=float, default=None, callback=_callback(tol_value),
              help="Relative bound on w22·W11 vs Γ_N^(−1) (default 0.05 for training, 0.01 for --weights; with --model, "
                   "1/4 of the distance from Γ_N^(−1) to the nearest alternative preconditioner).")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="Seeds trained in one batch (default 8).")
@click.option("--prompts", type=int, default=None, callback=_callback(prompts_value),
              help="Sampled training prompts per seed, at least 16 (default 32768; --quick 8192, --full 131072).")
@click.option("--steps", type=click.IntRange(min=0), default=None,
              help=f"Adam steps before {LBFGS_STEPS} L-BFGS iterations (default 300; --full 1000).")
@click.option("--model", "model_spec", type=str, default=None, metavar="FILE.py:NAME",
              help="Your in-context learner (a function, nn.Module, class or zero-argument factory): which algorithm "
                   "do its predictions match? With --model, --prompts is the number of probe prompts per length "
                   "(default 4000; --quick 1000, --full 16000).")
@click.option("--layout", default="default", show_default=True, metavar="[" + "|".join(LAYOUTS) + "]",
              callback=_callback(layout_value),
              help="How --model is called: default obj(xs, ys, xq); zfb obj(E (B, d+1, M+1)); garg obj(tokens "
                   "(B, 2M+1, d+1)).")
@click.option("--noise", type=float, default=0.0, show_default=True, callback=_callback(noise_value),
              help="Label noise σ of the --model probe prompts (ridge's Bayes-optimal λ = σ²).")
@compute_dtype_option(
    "The precision your --model computes in (default float64, the inputs'; a model whose predictions "
    "are found coarser fails precision_as_declared, mismatch); below float64 the tolerance is at "
    "least 2 × the references' distance when computed from inputs in that precision.")
@report_option
@timeout_option
@check_options
def command(lam, N, M, weights, tol, seeds, prompts, steps, model_spec, layout, noise, compute_dtype, report_dir,
            timeout, seed, device, mode, json_path, max_memory, no_progress):
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
    if model_spec is not None:
        from proofs_checks.sanity.icl_model import _model_command

        _model_command(model_spec, lam=lam, N=N, M=M, layout=layout, noise=noise, prompts=prompts, tol=tol,
                       seed=seed, device=device, mode=mode, json_path=json_path, max_memory=max_memory,
                       no_progress=no_progress, weights=weights, seeds=seeds, steps=steps, report_dir=report_dir,
                       timeout=timeout, compute_dtype=compute_dtype)
    if layout != "default" or noise:
        raise UsageError("--layout and --noise go with --model")
    if compute_dtype is not None:
        raise UsageError("--compute-dtype goes with --model (the trained LSA is computed in float64)")
    if timeout is not None:
        raise UsageError("--timeout limits the process that runs your --model; without --model nothing of yours runs")
    req = lsa_request(lam, N, M, weights=weights, tol=tol, seeds=seeds, prompts=prompts, steps=steps, mode=mode,
                      device=device, max_memory=max_memory)
    from numerics import icl_check as ni  # torch: imported only once the input is known to be good

    prog = guards.Progress("check icl", enabled=not no_progress, estimate=req.est.seconds)
    if req.est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(req.est.seconds)} and ≈ {guards.fmt_bytes(req.est.bytes)} of memory "
                  f"for {req.n_sets} seed(s) × {req.prompts} prompts, N = {req.N}, M = {req.M}, d = {req.d}")
    cf = closed_forms(req.L, req.N, req.M)
    doc: dict = {"check": "icl",
                 "inputs": {"lambda": req.L.tolist(), "N": req.N, "M": req.M, "mode": mode, "seed": seed,
                            "device": device, "tol": req.tol,
                            **({"weights": weights} if weights else
                               {"seeds": req.seeds, "prompts": req.prompts, "steps": req.steps,
                                "lbfgs_steps": LBFGS_STEPS})},
                 "conditioning": {"cond_Lambda": req.cond, "cond_Gamma_N": cf.cond_gamma,
                                  "cond_loss_hessian_B": cf.cond_hess},
                 "resources": req.est.to_json(),
                 "closed_forms": cf.values}
    if weights:
        meas = _measure(ni, req.L, req.N, cf.Gi, req.Wpv, req.Wkq, M=req.M, seed=seed, device=device, chunk=req.chunk,
                        progress=prog.phase("measuring", 0, 1).sub)
        doc["weights"] = {"file": weights, **meas, "tol": req.tol}
        verdict = _weights_verdict(meas, req.tol)
    else:
        verdict = _train_and_measure(ni, req, cf, doc, prog, seed=seed, device=device)
    prog.done()
    finish(SanityResult("icl", doc, verdict, [], _lsa_lines(req, cf, doc, verdict)), json_path, report_dir)


@dataclass(frozen=True)
class LSARequest:
    """The validated inputs of ``check icl`` without ``--model``: Λ, the sizes, your weights (or None),
    the tolerance and the resource estimate (validated once, before anything is computed)."""
    L: np.ndarray
    cond: float
    d: int
    N: int
    M: int
    seeds: int
    prompts: int
    steps: int
    Wpv: object
    Wkq: object
    tol: float
    n_sets: int
    est: guards.Estimate
    chunk: int


def lsa_request(lam, N: int, M: int | None, *, weights, tol, seeds, prompts, steps, mode: str, device: str,
                max_memory) -> LSARequest:
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
        _refuse_out_of_range(Wpv, Wkq, L)
    tol = DEFAULT_TOL["weights" if weights else "trained"] if tol is None else tol
    require_device(device, False, skip_option=False)
    n_sets = (1 if Wpv.ndim == 2 else Wpv.shape[0]) if weights else seeds
    est, chunk = estimate_resources(d, N, M, n_sets, prompts, steps, train=not weights)
    hint = "lower --seeds, --prompts, --N or --M"
    if d > 1 and estimate_resources(1, N, M, n_sets, prompts, steps, train=not weights)[0].bytes < est.bytes / 100:
        hint = f"the dimension d = {d} (the length of --lambda) drives it; use fewer dimensions, or " + hint
    guards.check_memory(est, max_memory, hint=hint)
    return LSARequest(L, cond, d, N, M, seeds, prompts, steps, Wpv, Wkq, tol, n_sets, est, chunk)


#: the largest prediction whose squared error a float64 holds (the risk squares it): √(1.8e308)
_LARGEST_PREDICTION = 1.3e154


def _refuse_out_of_range(Wpv: np.ndarray, Wkq: np.ndarray, L: np.ndarray) -> None:
    """Weights whose predictions' squares leave float64's range: one line, exit 2 (measured, they read "= inf" beside
    NumPy's overflow warnings: hostile pass 54b F4). The LSA's prediction ``x_qᵀ·w22·W11·h``, ``h = (1/M)Σ y_i x_i``,
    is at most about ``max|W_PV|·max|W_KQ|·(d+1)²·(tr Λ)^{3/2}`` times a draw's few standard deviations (10³ here)."""
    a, b = float(np.max(np.abs(Wpv), initial=0.0)), float(np.max(np.abs(Wkq), initial=0.0))
    with np.errstate(over="ignore"):
        bound = a * b * (Wpv.shape[-1] ** 2) * max(float(np.trace(L)), 1.0) ** 1.5 * 1e3
    if not bound < _LARGEST_PREDICTION:
        size = f"up to about {bound:.3g}" if math.isfinite(bound) else "beyond float64's largest number"
        raise InputError(f"--weights: W_PV and W_KQ entries up to {a:.3g} and {b:.3g}: the LSA's predictions ("
                         f"{size}) and their squared errors leave float64's range; rescale the weights")


@dataclass(frozen=True)
class ClosedForms:
    """ZFB's closed forms for Λ, N, M (:mod:`theory.icl`): Γ_N, its inverse, the conditioning, the values."""
    G: np.ndarray
    Gi: np.ndarray
    cond_gamma: float
    cond_hess: float
    values: dict


def closed_forms(L: np.ndarray, N: int, M: int) -> ClosedForms:
    G = ti.gamma_n(L, N)
    Gi = np.linalg.inv(G)
    values = {
        "d": int(L.shape[0]), "N": N, "M": M,
        "Gamma_N": G.tolist(), "Gamma_N_inv": Gi.tolist(),
        "w22_limit": math.sqrt(float(np.linalg.norm(Gi))),
        "loss_minimum": float(ti.loss_minimum(L, N)),
        "linear_task_risk_M": float(ti.linear_task_risk(L, N, M)),
        "risk_M_to_infinity": float(ti.linear_task_risk(L, N, 10**12)),
    }
    return ClosedForms(G, Gi, float(np.linalg.cond(G)), loss_hessian_cond(L, N), values)


def _train_and_measure(ni, req: LSARequest, cf: ClosedForms, doc: dict, prog, *, seed: int, device: str) -> Verdict:
    """Train the batch of LSAs, measure them on fresh prompts, fill ``doc["trained"]``; the verdict."""
    t_meas = N_MEASURE * (req.M + 2) * (req.d + 1) * _T_MEAS
    split = 1 - t_meas / max(req.est.seconds, 1e-9)
    prog.phase("training", 0, split)
    # Training runs on Λ/s, s = 4^round(log4 λ_max): an exact change of units (x → x/√s, √s a power of
    # two, so the sampled prompts are exactly rescaled copies) under which the empirical minimiser
    # maps as B → B/s and W_KQ → W_KQ/s; the optimiser's fixed step sizes then meet unit-scale data.
    L, N = req.L, req.N
    scale = 4.0 ** round(math.log(float(np.linalg.eigvalsh(L)[-1]), 4))
    res = ni.train_lsa_monitored(L / scale, N, n_seeds=req.seeds, n_prompts=req.prompts, steps=req.steps, seed=seed,
                                 device=device, lbfgs_steps=LBFGS_STEPS, progress=prog.sub)
    res.B, res.B_star, res.Wkq = res.B / scale, res.B_star / scale, res.Wkq / scale
    res.final_loss, res.loss_gap = res.final_loss * scale, res.loss_gap * scale
    doc["inputs"]["training_units_scale"] = scale
    prog.phase("measuring", split, 1)
    finite = bool(np.all(np.isfinite(res.Wpv.numpy())) and np.all(np.isfinite(res.Wkq.numpy())))
    if finite:
        meas = _measure(ni, L, N, cf.Gi, res.Wpv, res.Wkq, M=req.M, seed=seed, device=device, chunk=req.chunk,
                        progress=prog.sub)
    else:  # diverged training: nothing to measure (the verdict says so); never blame the user's weights
        meas = {"rel_err_B": None, "rel_rms_prediction": None, "max_other_block": None, "risk_M": float("nan"),
                "risk_M_se": float("nan"), "risk_M_prompts": 0}
    verdict = _trained_verdict(res, cf.Gi, req.tol, req.prompts, req.steps, cf.cond_hess)
    doc["trained"] = {"seeds": req.seeds, "prompts_per_seed": req.prompts, "steps": req.steps, "seconds": res.seconds,
                      "device": res.device, "mean_B": res.B.mean(0).tolist(),
                      "rel_err_mean_B": verdict.numbers["value"], "standard_error": verdict.numbers["standard_error"],
                      "spread": verdict.numbers["spread"],
                      "rel_err_B_per_seed": meas["rel_err_B"], "rel_rms_prediction_per_seed": meas["rel_rms_prediction"],
                      "optimiser_gap_per_seed": verdict.numbers["optimiser_gap_per_seed"],
                      "final_loss_per_seed": res.final_loss.tolist(),
                      "max_other_block": meas["max_other_block"], "risk_M_measured": meas["risk_M"],
                      "risk_M_measured_se": meas["risk_M_se"], "risk_M_test_prompts": meas["risk_M_prompts"]}
    return verdict


def _risk_text(risk: float, se: float, prompts: int) -> str:
    """A measured risk with its standard error over the test prompts (the closed form's risk is for the global
    minimum: the trained or given weights' risk differs by their own error, not only by sampling)."""
    if not math.isfinite(risk):
        return f"{risk:.6g}"
    return f"{risk:.6g} ± {se:.2g} (SE over {prompts} test prompts)"


def _lsa_lines(req: LSARequest, cf: ClosedForms, doc: dict, verdict: Verdict) -> list[str]:
    closed, M, tol = cf.values, req.M, req.tol
    lines = [f"Λ (d = {req.d}, cond {req.cond:.3g}), N = {req.N}, M = {M}; cond of the loss Hessian in w22·W11: "
             f"{cf.cond_hess:.3g}",
             f"Γ_N = (1+1/N)Λ + tr(Λ)/N·I (cond {cf.cond_gamma:.3g}) =\n{_fmt(cf.G)}",
             f"Γ_N^(−1) (= w22·W11 at the global minimum) =\n{_fmt(cf.Gi)}",
             f"gradient-flow limit w22 = ‖Γ_N^(−1)‖_F^{{1/2}} = {closed['w22_limit']:.6g}",
             f"min population loss ½[trΛ − tr(Γ_N^(−1)Λ²)] = {closed['loss_minimum']:.6g}",
             f"linear-task risk at M = {M}: {closed['linear_task_risk_M']:.6g} (M → ∞: {closed['risk_M_to_infinity']:.6g})"]
    if "weights" in doc:
        w = doc["weights"]
        lines.append(f"your weights: ‖w22·W11 − Γ_N^(−1)‖/‖Γ_N^(−1)‖ = {max(w['rel_err_B']):.3g}, "
                     f"prediction rel. RMS diff = {max(w['rel_rms_prediction']):.3g}, other blocks max |.| = "
                     f"{w['max_other_block']:.3g}, measured risk at M = {M}: "
                     f"{_risk_text(w['risk_M'], w['risk_M_se'], w['risk_M_prompts'])} (tol {tol:g})")
    else:
        t, n = doc["trained"], verdict.numbers
        lines.append(f"trained: {req.seeds} seeds × {req.prompts} prompts, {req.steps} Adam + {LBFGS_STEPS} L-BFGS steps "
                     f"on {t['device']} in {t['seconds']:.1f} s; mean w22·W11 rel. error {n['value']:.3g} ± "
                     f"{n['standard_error']:.3g} (SE), seed spread {n['spread']:.3g}, optimiser gap ≤ "
                     f"{n['optimiser_gap_max']:.3g}; measured risk at M = {M}: "
                     f"{_risk_text(t['risk_M_measured'], t['risk_M_measured_se'], t['risk_M_test_prompts'])}")
        lines.append(f"mean w22·W11 =\n{_fmt(t['mean_B'])}")
    return lines


# ------------------------------------------------------------------------------------------------
# --model lives in proofs_checks.sanity.icl_model (which imports this module's Λ parsing and the
# weights verdict); its public names are re-exported here, imported on first use

_MODEL_NAMES = ("check_icl_model", "ICLModelResult", "model_weights_tol", "PROBE_PROMPTS", "CHILD_TASK", "child_task",
                "rebuild")


def __getattr__(name):
    if name in _MODEL_NAMES:
        from proofs_checks.sanity import icl_model

        return getattr(icl_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

