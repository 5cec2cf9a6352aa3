"""Batch independence of an in-context predictor (``check icl --model``): does one prompt's prediction depend on the
other prompts of its batch? Each prompt alone, small batches, and the prompts among a second fresh batch, against the
predictions of the whole batch (:func:`_batch_alone`; summarised by :func:`_batch_summary`). Also how a
predictor's output is read (:func:`_as_predictions`). Split from :mod:`numerics.icl_probe`, which calls them at every
probed length."""

from __future__ import annotations

import math

import numpy as np
import torch

from numerics.precision import DTYPES, plain
from numerics.torch_utils import defaults_kept, not_dense
from theory.validation import InputError

DTYPE = torch.float64


class ProbeOutputError(InputError):
    """The predictor returned something that is not ``(P,)`` real floating predictions."""


def _as_predictions(raw, P: int, where: str) -> torch.Tensor:
    if isinstance(raw, np.ndarray) or np.isscalar(raw):
        arr = np.asarray(raw)
        if not (np.issubdtype(arr.dtype, np.floating)):
            raise ProbeOutputError(f"{where}: predictions must be real floating point, got NumPy dtype {arr.dtype}")
        t = torch.from_numpy(np.array(arr, dtype=np.float64)).reshape(arr.shape)  # a scalar stays (); a copy (below)
    elif isinstance(raw, torch.Tensor):
        if raw.is_quantized or raw.dtype not in DTYPES.values():  # (float8: a KeyError traceback, 43a F16)
            raise ProbeOutputError(f"{where}: predictions must be real floating point (float16, bfloat16, float32 "
                                   f"or float64), got torch dtype {raw.dtype}")
        what = not_dense(raw)
        if what:
            raise ProbeOutputError(f"{where}: predictions must be a dense tensor of numbers, got {what}")
        # a copy: a model returning one output buffer it reuses at every call (a CUDA graph, torch.compile's
        # "reduce-overhead") would otherwise have every kept prediction read as its last call's (hostile pass 19b F5)
        t = raw.detach().to("cpu", DTYPE, copy=True)
    else:
        raise ProbeOutputError(f"{where}: predictions must be a torch tensor or NumPy array of shape ({P},), "
                               f"got {type(raw).__name__}")
    if tuple(t.shape) != (P,):
        raise ProbeOutputError(f"{where}: predictions must have shape ({P},) (one per prompt), got {tuple(t.shape)}")
    return t


def _batch_alone(predict, Pr, f: torch.Tensor, M: int, d: int, i: int, others=None) -> dict:
    """One prompt of the batch predicted again alone (a batch of one; at the ``i``-th length the prompt at (i + 1)·0.618…
    (mod 1) of the batch, so the lengths watch prompts spread over it), against its prediction within the whole batch: a prediction may depend on its own prompt
    only (a model reading the other prompts — batch statistics, a BatchNorm left in training mode — was identified as
    Γ_N-preconditioned GD: hostile pass 24b F10; two prompts re-predicted together hid a dependence between them, on
    prompt 0, or at the lengths after the first: 25a F2, 25b F1). ``others``: a fresh batch of the same size, into which
    the watched prompt is put in its own place: a statistic computed for large batches only was kept and read by the
    small ones (27b F3). ``error``: the change relative to ``max(1, |prediction|)`` (``None``: the call raised, said in
    ``why``)."""
    P = int(f.shape[0])
    k = int((i + 1) * _GOLDEN % 1.0 * P) % P  # spread over the batch (the last prompts alone missed a dependence
    # on the prompts of full micro-batches before a partial last one: hostile pass 26b F6)
    out = {"M": int(M), "prompt": k, "ops": max(int(d * (M + d)), 256), "error": None, "why": ""}
    try:
        with torch.no_grad(), defaults_kept():
            raw = predict(Pr.X[k:k + 1].clone(), Pr.y[k:k + 1].clone(), Pr.x_q[k:k + 1].clone())
        sub = _as_predictions(plain(raw), 1, f"prompt length M = {M}, prompt {k} alone")
    except _raised(predict) as exc:  # the user's model raised: said, not judged (a sys.exit goes on: 26b F5)
        out["why"] = f"prompt {k} alone raised {type(exc).__name__.lstrip('_')}: {str(exc)[:200]}"
        return out
    ref = f[k:k + 1]
    out["error"] = _change(sub, ref)
    try:  # the same call again: a model random in its forward differs from itself, which is no batch dependence
        with torch.no_grad(), defaults_kept():  # (it was called one: 46a F13)
            again = _as_predictions(plain(predict(Pr.X[k:k + 1].clone(), Pr.y[k:k + 1].clone(),
                                                  Pr.x_q[k:k + 1].clone())), 1, f"prompt length M = {M}, prompt {k} alone")
        out["noise"] = _change(again, sub)
    except _raised(predict):
        out["noise"] = None
    n = min(7, (P - 1) // 2)
    if n < 1:
        return out
    try:  # and in two small batches whose other prompts differ: a statistic kept from the last batch, read for a
        # batch of one, equals that batch's own and hid a batch statistic (hostile pass 26b F3)
        idx = [[k] + [(k + 1 + j + s * n) % P for j in range(n)] for s in (0, 1)]
        a_all, b_all = (_small_batch(predict, Pr, ix, M) for ix in idx)
        a, b = a_all[:1], b_all[:1]
    except _raised(predict) as exc:  # the user's model raised: said, not judged (a sys.exit goes on: 26b F5)
        out["why"] = f"prompt {k} in a batch of {n + 1} raised {type(exc).__name__.lstrip('_')}: {str(exc)[:200]}"
        out["error"] = None
        return out
    among = max(_change(b, a), _change(a_all, f[idx[0]]), _change(b_all, f[idx[1]]))  # the watched prompt in each
    # against the other, and every prediction of both against the whole batch's (a NaN or 1.5× prediction in both
    # batches of 8 agreed with itself: 29b F3; another of their prompts' was never read: 30b F3)
    if not among <= out["error"]:
        out["error"], out["among"] = among, n
    if others is None:
        return out
    X, y, xq = others.X.clone(), others.y.clone(), others.x_q.clone()
    X[k], y[k], xq[k] = Pr.X[k], Pr.y[k], Pr.x_q[k]
    try:  # the whole batch's size, every other prompt redrawn
        with torch.no_grad(), defaults_kept():
            raw = predict(X, y, xq)
        full = _as_predictions(plain(raw), P, f"prompt length M = {M}, prompt {k} in a batch of other prompts")[k:k + 1]
    except _raised(predict) as exc:
        out["why"] = f"prompt {k} in a batch of {P} other prompts raised {type(exc).__name__.lstrip('_')}: {str(exc)[:200]}"
        out["error"] = None
        return out
    redrawn = _change(full, ref)
    if not redrawn <= out["error"]:
        out["error"], out["among"] = redrawn, P - 1
    return out


#: the golden ratio's fractional part: the prompt watched at the i-th length is at (i + 1)·0.618… (mod 1) of the batch
_GOLDEN = 0.6180339887498949


def _raised(predict) -> tuple:
    """The exceptions that mean "the model raised" in a call of ``predict``: what its ``raised`` attribute names (the
    caller's wrapper of the user's model), else any; with the probe's own output errors. What else its wrapper raises (a
    ``sys.exit`` or ``KeyboardInterrupt`` of the model, a usage error) goes on to the caller."""
    return (getattr(predict, "raised", Exception), ProbeOutputError)


def _small_batch(predict, Pr, idx: list[int], M: int) -> torch.Tensor:
    """The predictions of the prompts ``idx`` of the probe, predicted as a batch of their own."""
    with torch.no_grad(), defaults_kept():
        raw = predict(Pr.X[idx].clone(), Pr.y[idx].clone(), Pr.x_q[idx].clone())
    return _as_predictions(plain(raw), len(idx), f"prompt length M = {M}, a batch of {len(idx)} prompts")


def _change(sub: torch.Tensor, ref: torch.Tensor) -> float:
    """``max |sub − ref| / max(1, |ref|)`` (NaN where both are NaN, or the same infinity, counts 0: the same value
    alone and in the batch, whose NaN/inf is finite_predictions' to judge; a +inf read inf − inf as an infinite change,
    "depends on the other prompts of its batch": 46a F11; any other non-finite: inf)."""
    same = (torch.isnan(sub) & torch.isnan(ref)) | (torch.isinf(sub) & (sub == ref))
    diff = torch.where(same, 0.0, (sub - ref).abs() / torch.clamp(ref.abs(), min=1.0))
    return float("inf") if not bool(torch.isfinite(diff).all()) else float(diff.max())


def _batch_summary(rows: list[dict], work: torch.dtype) -> dict | None:
    """``batch_independence`` over the lengths (:func:`_batch_alone`): the worst change against its tolerance; a length
    where the prompt alone raised leaves the property not judged unless another length already fails it."""
    if not rows:
        return None
    u = float(torch.finfo(work).eps) / 2
    for r in rows:
        r["tolerance"] = 64 * r["ops"] * u
    measured = [r for r in rows if r["error"] is not None]
    ratio = lambda r: r["error"] / r["tolerance"] if math.isfinite(r["error"]) else math.inf  # noqa: E731
    worst = max(measured, key=ratio, default=None)
    raised = [r for r in rows if r["error"] is None]
    out = dict(worst if worst is not None and (not raised or ratio(worst) > 1) else raised[0])
    out["lengths"] = [r["M"] for r in rows]
    out["noise"] = max((r["noise"] for r in rows if r.get("noise") is not None), default=None)  # (46a F13)
    out["justification"] = (f"64·n·u({str(work).replace('torch.', '')}) = {out['tolerance']:.3g}, n = max(d·(M + d), "
                            f"256) = {out['ops']}: the rounding of one prompt's own computation (a network's sums of up "
                            "to 256 terms, which a kernel may order otherwise for another batch size), relative to "
                            "max(1, |prediction|); a batch's other prompts change it by nothing")
    return out
