"""Outputs of inputs the structural checks made, against the reference; and the rows judged again once every property
ran (:func:`late_rows`).

The leak checks redraw a token and compare a module with itself: a module that returns a stale output for an input it
has not seen (a cache keyed on the first tokens, a prefix shared with the previous call) moves nothing, which reads as
no leak. The outputs of those very inputs are compared here with the reference, as ``matches_reference`` compares the
probe's (hostile pass 36b F1).

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from numerics.attention_noise import late_deterministic
from numerics.attention_rules import FACTOR_FORWARD, _judge, _rel, tolerance

__all__ = ["late_rows"]


def _redraws_against_reference(probe: Any, flat: torch.Tensor, o: torch.Tensor, T: int, key: str) -> None:
    """The outputs of a stacked redraw (every block: the unchanged probe and each redrawn one) against the reference on
    those very inputs, the worst relative error over the forward tolerance kept on the probe (:func:`late_rows`): a
    module returning a stale output for an input it had not seen (a cache keyed on the first token) moved nothing
    there, which the leak checks read as no leak, and nothing else compared those outputs (hostile pass 36b F1)."""
    if getattr(probe, "m", None) is None or getattr(probe, "against", None) is not None or hasattr(probe, "_probe"):
        return  # (another path's view: that path's outputs are judged by its own rows, not the eval path's)
    try:
        with torch.no_grad():
            ref = probe.reference(flat).double().cpu().reshape(o.shape)
        tols = _tolerances(probe, flat, ref, T, key)
    except Exception:  # noqa: BLE001 - no reference on these inputs: nothing is judged here
        return
    held = getattr(probe, "_probe", probe).__dict__
    for b in range(o.shape[0]):
        e = _rel(o[b], ref[b])
        tol, just = tols[b]
        r = e / tol if tol > 0 and math.isfinite(e) else (0.0 if e == 0 else math.inf)
        worst = held.get("redraw_worst")
        if r > 1 and (worst is None or r > worst[0]):
            held["redraw_worst"] = (r, e, tol, T, key, just)


def _tolerances(probe: Any, flat: torch.Tensor, ref: torch.Tensor, T: int, key: str) -> list[tuple[float, str]]:
    """Each block's tolerance: ``matches_reference``'s rule on that very input — FACTOR × the plain reference's own
    error computed in the working precision p on it (or one rounding of its largest logit in p, where larger) + B64 —
    or the probe's forward tolerance at that length and logit scale, where larger. The probe's tolerance alone failed
    correct float32 attentions on inputs where the plain reference's rounding is larger than on the probe (hostile
    pass 37b F5); a bound of p's worst case instead, hundreds of times that, let outputs 3 % off at large logits, or
    doubled in bfloat16, pass (38b F1)."""
    tol0, just0 = probe.tol_at(T, key)
    p = probe.precision.dtype if probe.precision else (probe.compute_dtype or probe.pdt)
    if p == torch.float64:
        return [(tol0, just0)] * ref.shape[0]
    blocks = flat.reshape(ref.shape)
    with torch.no_grad():
        plain = probe.reference(flat, p).double().cpu().reshape(ref.shape)
    out = []
    for b in range(ref.shape[0]):
        tol, just = tolerance(_rel(plain[b], ref[b]), probe.D, T, probe.logit_max(blocks[b]), p, FACTOR_FORWARD)
        out.append((tol, "on that input, " + just) if tol > tol0 else (tol0, just0))
    return out


def _shared_prefix(probe: Any) -> None:
    """A call on the probe at a middle length, then one on the same probe with its last token redrawn (the same shape
    and first tokens), that second call's outputs against the reference (:func:`_redraws_against_reference`): a module
    reusing the keys or the output of a call whose first tokens it shares (a cache keyed on them) was ok where no mask
    is declared, no redraw then being made (hostile pass 36b F1)."""
    Ts = [T for T in probe.outs if T >= 2]
    if not Ts or getattr(probe, "m", None) is None or hasattr(probe, "_probe"):  # (a path's view: not recorded)
        return
    T = Ts[len(Ts) // 2]
    x2 = probe.xs[T].clone()
    x2[:, -1] = probe.probe(T, salt=23)[:, -1]
    try:
        probe.run(probe.xs[T])
        o2 = probe.run(x2)[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
    except Exception:  # noqa: BLE001 - the module at these inputs: judged by the properties that call it there
        return
    _redraws_against_reference(probe, x2, o2.unsqueeze(0), T, "unit")


#: the properties a run-to-run difference moves as a real defect would: within the module's own noise, not judged
_NOISE_SENSITIVE = ("causal_no_future_leak", "prefix_consistency", "batch_independence", "batch_size_independence",
                    "window_respected", "key_padding_respected", "permutation_equivariance", "matches_reference",
                    "gradients_match_reference", "matches_reference_with_grad", "matches_reference_on_other_paths",
                    "dtype_and_device_preserved")


def _within_noise(props: list) -> None:
    """Where ``deterministic`` failed, a failure of a property in :data:`_NOISE_SENSITIVE` whose error is within the run-to-run
    difference measured is not judged: a move below the module's own noise cannot be told from it, and is never called
    a leak (an intermittent dropout read "LEAK … a correct module moves it by exactly nothing": hostile pass 46a F12)."""
    det = next((p for p in props if p.name == "deterministic" and p.status == "fail"), None)
    noise = det.error if det is not None and det.error is not None and math.isfinite(det.error) else None
    if noise is None:
        return
    for i, p in enumerate(props):
        if p.name in _NOISE_SENSITIVE and p.status == "fail" and p.error is not None and p.error <= noise:
            props[i] = replace(p, status="skip", detail=(
                f"not judged: deterministic failed (two calls on the same input differ by {noise:.3g}), and the "
                f"change measured here, {p.error:.3g}, is within that noise: it cannot be told from it"))


def late_rows(probe: Any, props: list) -> None:
    """The rows judged again once every property ran: ``deterministic`` (:func:`late_deterministic`) and
    ``matches_reference`` over the outputs of the leak probes' redrawn inputs (:func:`_redraws_against_reference`)."""
    late_deterministic(probe, props)
    _within_noise(props)
    worst = getattr(probe, "__dict__", {}).get("redraw_worst")
    if worst is None:
        return
    r, e, tol, T, key, just = worst
    late = _judge("matches_reference", e, tol, just,
                  f"on an input the check made by redrawing a token (T = {T}, {key} logits) the outputs differ from "
                  f"the reference by {e:.3g} (a stale or cached output for an input not seen before?)", central=True)
    props[:] = [late if p.name == late.name and p.status == "pass" else p for p in props]


def own_sequence_move(probe: Any, T: int, key: str, j: int, t: int, stacked: Any, per_sequence: float) -> float | None:
    """The move of output ``t`` when token ``j`` is redrawn in one sample alone, in a stacked call of the size the
    redraws use (every other sample unchanged): the largest over the probe's samples, relative to the call's largest
    output. A stacked redraw changes token ``j`` in every sample of a block, so a module that mixes the samples of a
    large batch moved output ``t`` there without any leak within a sequence, and was named a future-token leak at
    offset ``j − t`` (hostile pass 54a F2). ``stacked``: :func:`numerics.attention_structural._stacked`;
    ``per_sequence``: the bytes one sequence of a stacked call holds. ``None`` where the probe ``key`` does not exist
    in float64 here."""
    from numerics.attention_rules import _chunks

    c = probe.factor(probe.xs[T], key)
    if c is None:
        return None
    x64, noise = probe.xs[T] * c, probe.probe(T, salt=17) * c
    J = probe._positions(T)
    blocks = min(len(J), max(1, _chunks(len(J) + 1, per_sequence * probe.B) - 1)) + 1
    shape = (blocks, probe.B, T, probe.D)
    same = x64.unsqueeze(0).repeat(blocks, 1, 1, 1)
    base = stacked(probe, same.reshape(-1, T, probe.D), blocks).reshape(shape)
    fin = base[torch.isfinite(base)]
    scale = max(float(fin.abs().max()) if fin.numel() else 0.0, 1e-300)
    worst = 0.0
    for s in range(probe.B):
        x2 = same.clone()
        x2[1, s, j] = noise[s, j]
        o = stacked(probe, x2.reshape(-1, T, probe.D), blocks).reshape(shape)
        worst = max(worst, float((o[1, s, t] - base[1, s, t]).abs().max()) / scale)
    return worst
