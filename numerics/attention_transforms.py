"""A mapping hook's ``q_transform``/``k_transform`` (docs/check-attention.md, "The mapping hook"): callables on q and
k per head, ``(batch, heads, T, d_k)`` → same, part of the declared reference. Each is tried once on a probe and then
checked again on every call it gets (a transform may be fine on the small sample and fail at a longer length): it
must keep the shape, dtype and device, return finite values, leave its input alone, and carry the gradient to its
input when that input requires one (a ``.detach()`` there made the reference's gradient wrong, and the module was
blamed for it: hostile pass 43a F8).

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

from typing import Any

import torch

from theory.validation import exception_text

__all__ = ["TransformFailed", "checked_transform"]


class TransformFailed(BaseException):
    """A hook's q/k transform misbehaved on a later call (it raised, changed the shape, the dtype or the
    device, returned NaN/inf, wrote into its input or cut its gradient): the user's code, reported in one line by the
    caller. A ``BaseException`` so that no ``except Exception`` on the way reads it as "this variant does not fit"; it
    passes through the boundary around the module's calls, which would name the module (hostile pass 56a F5)."""

    tverify_reported_by_caller = True


def _short(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def _call(fn: Any, t: torch.Tensor, key: str, where: str) -> torch.Tensor:
    """``fn(t)`` judged: the output, or :class:`TransformFailed` naming what is wrong ``where``."""
    before = t.detach().clone()
    try:
        out = fn(t)
    except Exception as exc:
        raise TransformFailed(f"{key} raised {exception_text(exc)[:340]} {where}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(t.shape):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise TransformFailed(f"{key} returned {got} {where}: it must keep the shape")
    if out.device != t.device or out.dtype != t.dtype:
        raise TransformFailed(f"{key} returned a {_short(out.dtype)} tensor on {out.device} {where} on {t.device}: it "
                              "must keep the dtype and device (cast its own weights with .to(t.dtype))")
    if not bool(torch.isfinite(out).all()):
        raise TransformFailed(f"{key} returned NaN or inf {where}")
    if not torch.equal(t.detach(), before):
        raise TransformFailed(f"{key} writes into its input {where}: return a new tensor")
    if t.requires_grad and torch.is_grad_enabled() and not out.requires_grad:
        raise TransformFailed(f"{key} cuts the gradient {where}: its output carries none to its input (.detach(), "
                              "torch.no_grad()?), so the reference's gradients would be wrong; compute it with autograd")
    return out


def checked_transform(fn: Any, key: str, heads: int, d_k: int, dtype: torch.dtype):
    """A hook's transform, tried on a probe ``(2, heads, 3, d_k)`` in the weights' dtype and in float64 (the
    reference's), with autograd on; returned wrapped so that every later call is judged the same way. Raises
    ``ValueError`` (one line)."""
    if not callable(fn):
        raise ValueError(f"{key} must be a callable (batch, heads, T, d_k) -> same shape, got {type(fn).__name__}")
    g = torch.Generator().manual_seed(0)
    for dt in dict.fromkeys((dtype, torch.float64)):
        t = torch.randn(2, heads, 3, d_k, generator=g, dtype=torch.float64).to(dt)
        where = f"on a {tuple(t.shape)} {_short(dt)} input (batch, heads, T, d_k)"
        try:
            with torch.no_grad():
                _call(fn, t, key, where)
            with torch.enable_grad():  # (a non-leaf input, as the reference's q and k are)
                _call(fn, t.clone().requires_grad_(True) * 1, key, where)
        except TransformFailed as exc:
            raise ValueError(str(exc)) from None
    return _per_call_checked(fn, key)


def _per_call_checked(fn: Any, key: str):
    """``fn`` with the checks of :func:`checked_transform` repeated on every call."""

    def checked(t: torch.Tensor) -> torch.Tensor:
        return _call(fn, t, key, f"on a {tuple(t.shape)} {_short(t.dtype)} input (T = {t.shape[-2]})")

    checked.__wrapped__ = fn
    return checked
