"""Properties of ``tverify check attention`` made of calls of their own, beyond the probe's: finite outputs at extreme
logits on every probe length, and outputs that a later call overwrites (a warning, not a property).

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

from typing import Callable

import torch

from numerics.attention_reference import Mapping, Structure, max_logit, scale_to_logit
from numerics.attention_rules import Property, _judge, _skip, call, dtype_name, exc_text

__all__ = ["prop_extreme_logits", "overwritten_outputs"]


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
