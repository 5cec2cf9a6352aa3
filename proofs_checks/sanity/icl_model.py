"""``tverify check icl --model FILE.py:NAME`` (and :func:`proofs_checks.api.check_icl_model`): which
in-context algorithm does your model compute? Its predictions on fresh linear-regression prompts are
compared with the reference algorithms of :mod:`numerics.icl_probe` (see :mod:`proofs_checks.sanity.icl`
for the verdicts and exit codes). Stages: the validated request (:func:`model_request`), the model
(instantiated, called in its layout), the probe, ZFB's theorem on its exposed LSA weights, the verdict
(:func:`_probe_verdict`), the rendering (:func:`_model_doc`, :func:`_model_lines`)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from proofs_checks import guards
from proofs_checks.options import UsageError, require_device
from proofs_checks.sanity._common import SanityResult, VerdictOutcome, finish, verdict_fields
from proofs_checks.sanity.icl_batch import batch_row
from proofs_checks.sanity._verdict import Z_SIGMA, Verdict
from proofs_checks.sanity.icl_inputs import (N_MEASURE, _lambda, _weights_verdict, layout_value, length_value,
                                             lengths_value, noise_value, prompts_value, tol_value)
from proofs_checks.sanity.icl_model_load import (AMBIGUOUS, NONFINITE, _exposed_lsa_weights, _instantiate,  # noqa: F401
                                                 _layout_call, _ModelRaised)
from theory import icl as ti

__all__ = ["check_icl_model", "ICLModelResult", "model_weights_tol", "model_request", "ModelRequest", "PROBE_PROMPTS"]


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
    return tol, (f"1/4 of the relative distance {dist[near]:.3g} from Γ_N^(−1) to the nearest alternative "
                 f"preconditioner, {near}")



def _g3(x) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.3g}"


def precision_row(pr: dict) -> dict | None:
    """The model's ``precision_as_declared`` property from the probe's precisions (None: no prediction
    judged, or a probe of before the property)."""
    if not pr.get("found_dtype"):
        return None
    from numerics import precision as npr

    finding = npr.PrecisionFinding.of(npr.DTYPES[pr["judged_dtype"]] if pr.get("judged_given") else None,
                                      npr.DTYPES[pr["found_dtype"]])
    return finding.row(f"predictions at {len(pr['M_values'])} prompt length(s)")


def _probe_verdict(pr: dict, name: str) -> Verdict:
    """:func:`_precision_verdict`, a mismatch naming ``batch_independence`` first where it fails."""
    from proofs_checks.sanity.icl_batch import with_batch

    return with_batch(_precision_verdict(pr, name), pr, name)


def _precision_verdict(pr: dict, name: str) -> Verdict:
    """The identification verdict (:func:`_identification_verdict`), a mismatch naming
    ``precision_as_declared`` first when the model computes below the judged precision (the
    identification, made at the precision found, is still said)."""
    v = _identification_verdict(pr, name)
    prec = precision_row(pr)
    if prec is None:
        return v
    v.numbers["precision_as_declared"] = {"status": prec["status"], **prec["numbers"]}
    if prec["status"] == "pass":
        return v
    from proofs_checks.sanity._common import precision_named

    fits = prec["numbers"]["fits"]
    return Verdict("mismatch", f"{name} violates: {precision_named(prec)}; at {fits}: {v.outcome}: {v.summary}",
                   f"precision_as_declared: {prec['detail']} ({prec['justification']}); the identification, judged at "
                   f"{fits}: {v.criterion}", v.numbers, list(v.reasons),
                   f"if {fits} is intended, declare --compute-dtype {fits} (the verdict is then the identification's: "
                   f"{v.outcome})" + (f"; {v.suggestion}" if v.suggestion else ""))


def _identification_verdict(pr: dict, name: str) -> Verdict:
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
        skipped = [r["M"] for r in pr.get("skipped_lengths") or []]
        where = ("at every M probed" if not skipped else
                 f"at every M it ran at ({', '.join(str(m) for m in pr['M_values'])}; it raised at M = "
                 f"{', '.join(map(str, skipped))}: not judged there)")
        return Verdict("ok", f"{name} computes what {best}{lam} computes{alias}: within tolerance {where}",
                       crit + f"; identified {best}: worst {worst(best)}", numbers)
    closest = pr["closest"]
    if not idf["undecided"]:
        return Verdict("mismatch", f"{name} computes none of the reference algorithms (closest: {graded(closest)})",
                       crit + f"; every reference is beyond its tolerance at some length (closest {closest}: "
                              f"{worst(closest)})", numbers)
    und = idf["undecided"]
    need = [v for a, v in idf["prompts_needed"].items() if v is not None]
    zero = {a: [r["M"] for r in tab[a] if r.get("zero_like")] for a in und}
    sugg = (f"about {round_up(math.ceil(max(need) * 1.2))} prompts per length (--prompts; SE ∝ 1/√prompts)" if need
            else "a larger Λ (no number of prompts tells an algorithm that predicts 0 from a model returning zeros)"
            if any(zero.values()) else "no number of prompts: a distance equals its tolerance")
    why = [f"{a} predicts 0 to rounding on the labels' scale at M = {', '.join(map(str, zero[a]))}: a model returning "
           "zeros is within its tolerance too, so it is not identified there" if zero[a] else
           f"{a} is within {k:g} SE of its tolerance at some length ({worst(a)})" for a in und]
    return Verdict("inconclusive", f"cannot tell whether {name} computes {' or '.join(und)} (closest: "
                   f"{graded(closest) if closest in tab else closest})", crit, numbers, why, sugg)


@dataclass
class ICLModelResult(VerdictOutcome):
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

    def to_json(self) -> dict:
        from proofs_checks.sanity._verdict import _jsonable

        return _jsonable({**self.doc, **verdict_fields(self.verdict)})

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


@dataclass(frozen=True)
class ModelRequest:
    """The validated inputs of :func:`check_icl_model` (validated once, at the edge: the command's child,
    the API and the fixture all come through :func:`model_request`)."""
    L: np.ndarray
    cond: float
    d: int
    N: int
    M: int
    Ms: list
    prompts: int
    layout: str
    mode: str
    noise: float
    tol: float | None
    device: str
    est: guards.Estimate
    compute_dtype: Any = None  # torch dtype declared (--compute-dtype), None: the inputs' float64


def model_request(*, lambdas, N, M=None, layout="default", noise=0.0, mode="default", prompts=None, M_values=None,
                  tol=None, device="cpu", max_memory=None, compute_dtype=None) -> ModelRequest:
    """Every input of ``--model`` checked (one-line :class:`~proofs_checks.options.UsageError` naming the
    flag), the prompt lengths chosen and the memory estimated against ``max_memory``."""
    from numerics.icl_probe import EXTENDED_KNN_K, prompt_lengths

    layout = layout_value(layout)
    declared = compute_dtype_value(compute_dtype)
    if mode not in PROBE_PROMPTS:
        raise UsageError(f"mode must be one of {', '.join(PROBE_PROMPTS)}, got {mode!r}")
    noise, tol, prompts = noise_value(noise), tol_value(tol), prompts_value(prompts)
    N, M = length_value(N, "--N"), None if M is None else length_value(M, "--M")
    L, cond = _lambda(lambdas)  # text or an array: the same checks (size, overflow, conditioning, scale)
    d = int(L.shape[0])
    M = N if M is None else int(M)
    Ms = prompt_lengths(M, d) if M_values is None else lengths_value(M_values)
    # the grid reaches beyond 2d, where the consistent algorithms meet, and beyond the largest k of the k-NN
    # references, below which k-NN and the label mean coincide (d = 1, M = 2 probed only M ≤ 4: a label-mean
    # model was indistinguishable from knn_5, and least squares up to M = 5 then the label mean was "least squares")
    kmax = max(EXTENDED_KNN_K)
    if M_values is None and Ms[-1] <= max(2 * d, kmax):
        Ms.append(max(4 * d, 2 * kmax))
    if not Ms or Ms[0] < 1:
        raise UsageError(f"prompt lengths must be ≥ 1, got {Ms}")
    P = PROBE_PROMPTS[mode] if prompts is None else prompts
    require_device(device, False, skip_option=False)
    Mmax = Ms[-1]
    per_prompt = 8.0 * (6 * Mmax * (d + 1) + 2 * (2 * Mmax + 1) * (d + 1) + 4 * d * d)
    est = guards.Estimate(P * per_prompt, 2e-6 * P * sum(Ms) * (d + 1) + 0.2,
                          {f"probe prompts {P} × {Mmax} tokens × {d + 1} (and their copies)": P * per_prompt})
    guards.check_memory(est, max_memory, hint="lower --prompts or --M")
    return ModelRequest(L, cond, d, N, M, Ms, P, layout, mode, noise, tol, device, est, declared)


def compute_dtype_value(compute_dtype, option: str = "--compute-dtype"):
    """The precision the model is declared to compute in (``None``: undeclared, judged at the inputs'
    float64); one line naming the option otherwise."""
    from numerics import precision as npr

    try:
        return npr.parse_dtype(compute_dtype, option)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _probe(model, req: ModelRequest, name: str, seed: int, progress: bool) -> dict:
    """The probe (:func:`numerics.icl_probe.probe_algorithms`); lengths where the model raises are skipped,
    every length raising is one line."""
    from numerics.icl_probe import ProbeOutputError, probe_algorithms

    prog = guards.Progress("check icl --model", enabled=progress, estimate=req.est.seconds)
    try:
        pr = probe_algorithms(_layout_call(model, req.layout, name), lam=req.L, N=req.N, M_values=req.Ms,
                              noise=req.noise, prompts=req.prompts, seed=seed, device=req.device, z_threshold=Z_SIGMA,
                              progress=prog.sub, extended=True, skip=(_ModelRaised,), work_dtype=req.compute_dtype)
    except ProbeOutputError as exc:
        raise UsageError(f"--model: {name}: {exc}") from None
    prog.done()
    if not pr["M_values"]:  # the model raised at every length: nothing to judge
        shapes = {"default": "xs (B, M, d), ys (B, M), xq (B, d)", "zfb": "E (B, d+1, M+1)",
                  "garg": "tokens (B, 2M+1, d+1)"}[req.layout]
        first = pr["skipped_lengths"][0]
        raise UsageError(f"--model: {name} raised {first['error']} on the probe input at every prompt length "
                         f"({req.layout} layout: {shapes}, float64, d = {req.d}; first at M = {first['M']})")
    return pr


def _zfb_theorem(model, req: ModelRequest, name: str, seed: int) -> tuple[dict, float | None, str]:
    """ZFB's theorem on the model's own LSA weights, when it exposes them: ``(zfb, tol, tol_reason)``."""
    tol, tol_reason = req.tol, "given (--tol)"
    weights = _exposed_lsa_weights(model, req.d, name)
    if weights == NONFINITE:  # weights it exposes and computes nothing with: a finding, never a skip (22b F4)
        return ({"outcome": "mismatch", "summary": f"the LSA weights {name} exposes have NaN or infinite entries",
                 "criterion": "the exposed W_PV and W_KQ must be finite (a NaN or inf anywhere fails its check)",
                 "tol": tol, "tol_reason": tol_reason}, tol, tol_reason)
    if isinstance(weights, str):
        return ({"skipped": f"{weights}, so ZFB's theorem on its weights was not checked; the probe above still says "
                            "whether it predicts like the Γ_N-preconditioned step", "reason": weights}, tol, tol_reason)
    from numerics import icl_check as ni

    Gi = np.linalg.inv(ti.gamma_n(req.L, req.N))
    meas = ni.measure_weights(req.L, req.N, Gi, weights[0], weights[1], M=req.M, n=N_MEASURE, seed=seed + 1,
                              device=req.device)
    if tol is None:
        tol, tol_reason = model_weights_tol(req.L, req.N)
    wv = _weights_verdict(meas, tol, tol_reason)
    return ({"outcome": wv.outcome, "summary": wv.summary, "criterion": wv.criterion, "tol": tol,
             "tol_reason": tol_reason, "rel_err_B": meas["rel_err_B"], "rel_rms_prediction": meas["rel_rms_prediction"],
             "max_other_block": meas["max_other_block"], "B": meas["B"], "Gamma_N_inv": Gi.tolist()}, tol, tol_reason)


def check_icl_model(obj, *, lambdas, N: int, M: int | None = None, layout: str = "default", noise: float = 0.0,
                    seed: int = 0, device: str = "cpu", prompts: int | None = None, mode: str = "default",
                    M_values=None, tol: float | None = None, name: str | None = None, max_memory: float | None = None,
                    progress: bool = False, compute_dtype: str | None = None) -> ICLModelResult:
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
    a quarter of the distance from Γ_N^{-1} to the nearest alternative preconditioner). ``compute_dtype``
    (``--compute-dtype``): the precision the model computes in (default: the inputs' float64); a model
    whose predictions are found coarser fails ``precision_as_declared`` (mismatch), its identification
    made at the precision found.

    The verdict is the identification of :func:`numerics.icl_probe._identify` (see the module
    docstring): ``identified`` names the algorithm within tolerance at every length (or None);
    ``closest_algorithm`` always the nearest. Lengths where the model raises are skipped and listed.

    Raises :class:`~proofs_checks.options.UsageError` (one line) for bad input: an unknown layout,
    an object that cannot be instantiated or raises at every probe length (its exception named),
    predictions of the wrong shape or a non-floating dtype. Returns an :class:`ICLModelResult`.
    """
    req = model_request(lambdas=lambdas, N=N, M=M, layout=layout, noise=noise, mode=mode, prompts=prompts,
                        M_values=M_values, tol=tol, device=device, max_memory=max_memory, compute_dtype=compute_dtype)
    name = name or getattr(obj, "__name__", type(obj).__name__)
    model = _instantiate(obj, name, device, req.d, req.N)
    pr = _probe(model, req, name, seed, progress)
    verdict = _probe_verdict(pr, name)
    idf = pr.get("identification") or {}
    identified = idf.get("identified") if verdict.outcome == "ok" else None  # (the probe's identification)
    zfb, tol, tol_reason = _zfb_theorem(model, req, name, seed)
    zfb = _weights_against_predictions(zfb, pr)
    verdict = _with_weights(verdict, zfb, name)
    closest = pr["closest"]
    if identified and identified in (pr.get("closest_group") or []):  # the same predictions: name the identified one
        closest = identified
    doc = _model_doc(req, name, seed, tol, pr, zfb, identified, closest)
    lines = _model_lines(req, name, tol, tol_reason, pr, zfb, identified, closest)
    res = ICLModelResult(verdict, closest, pr, zfb, doc, lines)
    res.identified = identified
    return res


def _weights_against_predictions(zfb: dict, pr: dict) -> dict:
    """ZFB's theorem on the exposed weights, and whether they are what the model computes with: weights that are the
    Γ_N⁻¹ predictor beside predictions the probe identifies as another algorithm's are a mismatch (the theorem was "ok"
    on predictions of the weights' LSA, which the model does not give: hostile pass 23b F2)."""
    idf = pr.get("identification") or {}
    same = set(pr.get("closest_group") or []) | {idf.get("identified")}
    if zfb.get("outcome") != "ok" or "gamma_n_preconditioned_gd" in same or not idf.get("identified"):
        return zfb
    return {**zfb, "outcome": "mismatch",
            "summary": (f"the weights are ZFB's Γ_N^(−1) predictor, but the model's predictions are "
                        f"{idf['identified']}'s: the weights are not what it computes with"),
            "criterion": f"{zfb.get('criterion')}; the probe identifies the model's own predictions as {idf['identified']}"}


def _with_weights(verdict, zfb: dict, name: str):
    """The probe's verdict, and ZFB's theorem on the LSA weights the model exposes where it was checked: weights that
    are not the Γ_N^{-1} predictor make the verdict a mismatch (the model predicts otherwise than its weights say:
    it was ``ok`` beside a printed mismatch, hostile pass 21b F9); undecided weights leave an ``ok`` inconclusive."""
    from proofs_checks.sanity._verdict import Verdict

    wo = zfb.get("outcome")
    if wo == "mismatch" and verdict.outcome != "mismatch":
        return Verdict("mismatch", f"the LSA weights {name} exposes are not ZFB's Γ_N^(−1) predictor "
                       f"({zfb.get('summary')})", f"{verdict.criterion}; ZFB's theorem on the exposed weights: "
                       f"{zfb.get('criterion')}", verdict.numbers)
    if wo == "inconclusive" and verdict.outcome == "ok":
        return Verdict("inconclusive", f"{verdict.summary}; ZFB's theorem on the exposed weights is undecided",
                       f"{verdict.criterion}; ZFB's theorem on the exposed weights: {zfb.get('criterion')}",
                       verdict.numbers, [str(zfb.get("summary"))], verdict.suggestion)
    return verdict


def _model_doc(req: ModelRequest, name: str, seed: int, tol, pr: dict, zfb: dict, identified, closest) -> dict:
    from numerics.icl_probe import ALGORITHMS

    return {"check": "icl", "kind": "model",
            "inputs": {"model": name, "layout": req.layout, "lambda": req.L.tolist(), "N": req.N, "M": req.M,
                       "noise": req.noise, "prompts_per_length": req.prompts, "M_values": req.Ms, "mode": req.mode,
                       "seed": seed, "device": req.device, "tol": tol,
                       "compute_dtype": None if req.compute_dtype is None else str(req.compute_dtype)[6:]},
            "conditioning": {"cond_Lambda": req.cond},
            "resources": req.est.to_json(),
            "algorithms": list(ALGORITHMS),
            "identified": identified,
            "closest_algorithm": closest,
            "closest_measured": pr["closest"],
            "ridge_grid_lambda": pr.get("ridge_grid_lambda"),
            "skipped_lengths": pr.get("skipped_lengths", []),
            "output_dtype": pr.get("output_dtype"), "work_dtype": pr.get("work_dtype"),
            "precision_as_declared": precision_row(pr), "batch_independence": batch_row(pr),
            "per_M": _per_m_table(pr),
            "equivalent_algorithms": pr["closest_group"],
            "runner_up": pr["runner_up"], "z_runner_up": pr["z_runner_up"],
            "probe": pr, "zfb_theorem": zfb}


def _blocks(heads: list[str], rows: list[tuple[str, list[str]]], cols: int | None = None) -> list[str]:
    """A table of named rows, its columns split into blocks that fit the width (``COLUMNS``, else the
    terminal's; piped without it, one block), so no row wraps.

    >>> print("\\n".join(_blocks(["M=1", "M=2", "M=3"], [("ridge", ["0 ± 0", "1 ± 0.1", "2 ± 0.2"])], cols=30)))
                 M=1      M=2
    ridge      0 ± 0  1 ± 0.1
                 M=3
    ridge    2 ± 0.2
    """
    from proofs_checks.output.wraptext import width

    w = max(len(r[0]) for r in rows) + 2
    cell = max(len(c) for c in [*heads, *(x for r in rows for x in r[1])]) + 2
    cols = cols or width(sys.stdout, fallback=None)  # piped without COLUMNS: one block
    per = max((cols - w) // cell, 1) if cols else len(heads)
    out = []
    for i in range(0, len(heads), per):
        out.append(" " * w + "".join(f"{h:>{cell}}" for h in heads[i:i + per]))
        out += [f"{a:<{w}}" + "".join(f"{c:>{cell}}" for c in cells[i:i + per]) for a, cells in rows]
    return out


def _model_lines(req: ModelRequest, name: str, tol, tol_reason: str, pr: dict, zfb: dict, identified,
                 closest) -> list[str]:
    """The text: the inputs, the per-M distance table, the references' parameters, ZFB on the weights."""
    Ms, idf = req.Ms, pr.get("identification") or {}
    lines = [f"Λ (d = {req.d}, cond {req.cond:.3g}), trained at N = {req.N}, probed at M = {Ms}, noise σ = "
             f"{req.noise:g}, {req.prompts} prompts per length, layout {req.layout}",
             f"distance of {name}'s predictions to each algorithm (mean squared difference / E y_q² "
             f"= {pr['normaliser']:.3g}; ± SE):"]
    rows = []
    for a in pr["algorithms"]:
        marks = [t["status"] for t in idf["table"][a]] if idf else [""] * len(Ms)
        rows.append((a, [f"{v:.3g} ± {s_:.1g}" + ("" if st == "pass" or not st else (" ×" if st == "fail" else " ?"))
                         for v, s_, st in zip(pr["distance"][a], pr["distance_se"][a], marks)]))
    rows.append(("(risk of the model)", [f"{v:.3g} ± {s:.1g}" for v, s in zip(pr["risk_model"], pr["risk_model_se"])]))
    lines += _blocks([f"M={m}" for m in Ms], rows)
    lines.append("(× beyond the tolerance at that M, ? undecided; tolerance = (1/4)² × the distance from the algorithm to "
                 "its nearest distinct reference or to the zero prediction)")
    lines.append(f"plain GD step η* = {pr['gd_step']:.4g}; ridge λ = σ² = {pr['ridge_lambda']:.4g}; ridge_lambda_grid λ = "
                 f"{pr['ridge_grid_lambda']:.3g} (grid 1e-4 … 1e2); k-NN k = {pr['knn_k']} (knn_1, knn_5: k = 1, 5)"
                 + (f"; equivalent here: {', '.join(' = '.join(g) for g in pr['equivalent'])}" if pr["equivalent"] else ""))
    if "skipped" in zfb:
        lines.append(f"ZFB theorem on the weights: skipped ({zfb['reason']})")
    else:
        lines.append(f"ZFB theorem on the exposed LSA weights: {zfb['outcome']}: {zfb['summary']} "
                     + (f"(‖w22·W11 − Γ_N^(−1)‖/‖Γ_N^(−1)‖ = {max(zfb['rel_err_B']):.3g}, tol {tol:.3g}: {tol_reason})"
                        if "rel_err_B" in zfb else f"({zfb.get('criterion')})"))
    for sk in pr.get("skipped_lengths", []):
        lines.append(f"M = {sk['M']} skipped: {name} raised {sk['error']}")
    prec, batch = precision_row(pr), batch_row(pr)
    if batch is not None:
        lines.append(f"batch_independence: {batch['status']}: {batch['detail']}")
    if prec is not None:
        lines.append(f"precision_as_declared: {prec['status']}: {prec['detail']}; the distances judged at "
                     f"{pr.get('work_dtype')}")
    found = idf.get("identified") if prec is not None and prec["status"] == "fail" else None
    lines.append(f"closest algorithm: {closest or 'none (non-finite predictions)'}; identified: "
                 + (f"{found} at {pr.get('work_dtype')}, not at {prec['numbers']['declared']} "
                    "(precision_as_declared)" if found else identified or "none of the reference algorithms"))
    return lines


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
                   no_progress, weights, seeds, steps, report_dir=None, timeout=None, compute_dtype=None):
    from proofs_checks.sanity._loader import _split

    for given, opt in ((weights, "--weights"), (seeds, "--seeds"), (steps, "--steps")):
        if given is not None:
            raise UsageError(f"{opt} trains or reads LSA weights; it does not go with --model")
    L, _ = _lambda(lam)  # the --lambda errors first, as without --model
    compute_dtype_value(compute_dtype)
    _split(spec, "--model")
    name = spec.strip().rpartition(":")[2]
    from proofs_checks.sanity import _isolate

    payload = _isolate.run_isolated(
        CHILD_TASK, {"kwargs": dict(N=N, M=M, layout=layout, noise=noise, seed=seed, device=device, prompts=prompts,
                               mode=mode, tol=tol, name=name, max_memory=max_memory, progress=not no_progress,
                               compute_dtype=compute_dtype),
                "module_spec": spec},
        label="--model", what=f"check icl --model {name}", arrays={"lambda": L}, timeout=timeout,
        max_memory=max_memory, progress=not no_progress, figures=bool(report_dir))
    res = rebuild(payload)
    doc = res.to_json()
    for key in verdict_fields(res.verdict):
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

CHILD_TASK = "proofs_checks.sanity.icl_model:child_task"


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
    zfb = payload.get("zfb") or {}
    if "rel_err_B" in zfb:  # ZFB's theorem judged here too, from the child's measurements
        from proofs_checks.sanity.icl_inputs import _weights_verdict

        wv = _weights_verdict({k: zfb[k] for k in ("rel_err_B", "rel_rms_prediction", "max_other_block")},
                              float(zfb["tol"]), zfb.get("tol_reason"))
        zfb = {**zfb, "outcome": wv.outcome, "summary": wv.summary, "criterion": wv.criterion}
    verdict = _with_weights(verdict, _weights_against_predictions(zfb, pr), payload["name"])
    res = ICLModelResult(verdict, payload["closest"], pr, payload["zfb"], payload["doc"], payload["lines"],
                         payload["identified"])
    res.figures = {n: Path(p) for n, p in (payload.get("figures") or {}).items()}
    res.figures_dir = payload.get("figures_dir")
    return res
