"""Properties of ``tverify check attention`` made of calls of their own, beyond the probe's: finite outputs at extreme
logits on every probe length, outputs that a later call overwrites (a warning, not a property), and the mask
conventions tried when the declared one leaves no output finite.

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

from typing import Callable

import torch

from numerics.attention_reference import Mapping, Structure, max_logit, scale_to_logit
from numerics.attention_rules import Property, _judge, _skip, call, dtype_name, exc_text

__all__ = ["prop_extreme_logits", "overwritten_outputs", "inverted_convention", "late_dtype"]

#: the key-padding mask conventions of ``--mask-convention`` (:func:`numerics.attention_props_single.make_mask`)
CONVENTIONS = ("keep", "drop", "additive")


def prop_extreme_logits(f: Callable, xs_at: dict[int, torch.Tensor], m: Mapping | None, st: Structure,
                        targets=(700.0, 1e4)) -> Property:
    """Finite outputs when the largest logit reaches ±700 (the edge of float64's exp) and ±10⁴, at every probe length
    of ``xs_at`` (``{T: probe}``): at one length alone, a module overflowing at T = 2, 5 or 33 only was ok (hostile
    pass 34b, a note)."""
    xs, reached, beyond = [], [], set()
    Ts = sorted(xs_at)
    for T in Ts:
        x = xs_at[T]
        if m is None:
            xs += [(T, x * 10), (T, x * 100)]
            continue
        for tgt in targets:
            c = scale_to_logit(x.double(), m, st, tgt, x.dtype)  # None: no such probe in the input's precision
            if c is None:
                beyond.add(tgt)
                continue
            xs.append((T, x * c))
            reached.append(max_logit((x * c).double(), m, st))
    dt = dtype_name(xs_at[Ts[0]].dtype) if Ts else "float64"
    how = ("no mapping: input scaled ×10 and ×100" if m is None else "largest logits reached " + (
        f"{min(reached):.3g} to {max(reached):.3g}" if reached else "none") + (
        f"; not probed: logits of {', '.join(f'{t:g}' for t in sorted(beyond))} (beyond {dt}'s range at this "
        "declaration for any implementation forming q·kᵀ, at some lengths)" if beyond else "")) + (
        f" (T = {', '.join(map(str, Ts))})")
    if not xs:
        return _skip("stable_at_extreme_logits", how)
    bad = total = 0
    worst_T = None
    for T, z in xs:
        try:
            o, _ = call(f, z)
        except Exception as exc:
            return Property("stable_at_extreme_logits", "fail", float("inf"), 0.0, "must run and stay finite",
                            f"{how}; raised {exc_text(exc)} (T = {T})")
        n_bad = int((~torch.isfinite(o)).sum())
        if n_bad and worst_T is None:
            worst_T = T
        bad += n_bad
        total += o.numel()
    return _judge("stable_at_extreme_logits", bad / max(total, 1), 0.0,
                  "none may be NaN/inf: a log-sum-exp softmax is finite at any logit (exact)",
                  how + (f"; {bad} of {total} outputs NaN/inf, first at T = {worst_T} (exp overflow: subtract the row "
                         "max)" if bad else "; all finite"))


def overwritten_outputs(f: Callable, x: torch.Tensor) -> list[str]:
    """A warning line (a list of at most one) when what a call returned is changed by the module's next call on another
    input (the probe's samples in another order, or negated for a batch of one): the module returns one buffer it keeps
    and overwrites, as inference code with static output buffers (CUDA graphs) does. Not a property: each call's
    values are right as returned, and the check copies every output, so every property judges them as they were; a
    caller who keeps two outputs gets the second twice, which the warning says (hostile pass 36b F2)."""
    try:
        a, _ = call(f, x, copy=False)
        first = a.detach().clone() if isinstance(a, torch.Tensor) else None
        call(f, x.flip(0) if x.shape[0] > 1 else -x, copy=False)
    except Exception:  # noqa: BLE001 - the user's code: judged where it raises first
        return []
    if first is None or torch.nan_to_num(a.detach(), nan=1e300).equal(torch.nan_to_num(first, nan=1e300)):
        return []
    return [f"warning: the module returns one output buffer that its next call overwrites (an output at T = "
            f"{x.shape[1]} changed when it ran on another input): each call's values are judged as returned; a caller "
            "keeping two outputs must copy the first"]


def inverted_convention(probe, wm) -> tuple[list[Property], list[str]]:
    """Every output non-finite on the probe, whose keys are all real, under the declared mask convention (``wm``: the
    :class:`~numerics.attention_props_single.WithMask` around the module): the same call under each other convention.
    Where one gives finite outputs, the module reads its mask that way: with the declared one it attends to no key
    at all, which ``key_padding_respected`` reports (a fail: the real keys are not attended), with the declaration
    under which it runs as a hint. It was only "finite_output" failing, the convention never named (56a F7)."""
    declared = wm.convention
    T = min(probe.xs)
    x = probe.xs[T].to(dtype=probe.pdt, device=probe.device)
    finite = []
    try:
        for conv in CONVENTIONS:
            if conv == declared:
                continue
            wm.convention = conv
            out, _ = call(wm, x, watch=False)
            if isinstance(out, torch.Tensor) and out.shape == x.shape and bool(torch.isfinite(out).all()):
                finite.append(conv)
    except Exception:  # noqa: BLE001 - the module's call under another convention: no evidence either way
        finite = []
    finally:
        wm.convention = declared
    if not finite:
        return [], []
    detail = (f"every key real, the mask given as --mask-convention {declared}: every output is NaN/inf (T = {T}); "
              f"with the same keys as --mask-convention {' or '.join(finite)}, every output is finite: the module "
              "attends to none of the real keys under the declared convention")
    row = Property("key_padding_respected", "fail", float("inf"), 0.0, "real keys attended, padded ones ignored, under "
                   "the declared mask convention", detail, central=True)
    return [row], [f"declare --mask-convention {finite[0]}: under it the module's outputs on real keys are finite "
                   f"(the declared {declared} marks every real key as padding for it)"]


def late_dtype(props: list, probe) -> None:
    """``dtype_and_device_preserved`` judged again once every property ran: the output of any call of the module (a
    single sequence, a stacked redraw) in the input's dtype and on its device, not only the probe batch's (27b F7)."""
    from numerics.attention_rules import OUTPUT_OFF

    off = list(OUTPUT_OFF)
    i = next((k for k, p in enumerate(props) if p.name == "dtype_and_device_preserved" and p.status != "fail"), None)
    if i is not None and off:
        props[i] = Property("dtype_and_device_preserved", "fail", float("inf"), 0.0, "the output is a tensor of "
                            "the input's shape, dtype and device, at every call on every path", off[0], central=True)
