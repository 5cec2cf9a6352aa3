"""Small torch helpers shared by the topic modules: device resolution and seeded generators."""

from __future__ import annotations

import contextlib

import torch

from theory.validation import InputError

__all__ = ["resolve_device", "generator", "cuda_available", "not_dense"]


def cuda_available() -> bool:
    """True when torch sees a CUDA device."""
    return bool(torch.cuda.is_available())


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Map ``"cpu"``/``"cuda"``/``None`` to a ``torch.device``; raise :class:`InputError` for a
    CUDA request on a machine without CUDA or an unknown name."""
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"unknown device {device!r}: {exc}") from None
    if dev.type == "cuda" and not cuda_available():
        raise InputError("device 'cuda' requested but torch sees no CUDA device")
    return dev


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed`` (reproducible sampling)."""
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(int(seed))
    return g


def not_dense(t: torch.Tensor) -> str | None:
    """What a tensor returned by someone else's code is when it holds no dense numbers to compare (a meta
    tensor: shapes only; a nested or sparse tensor: no shape or no comparisons), else ``None``: the checks
    refuse it with one line instead of failing inside torch (hostile pass 8, F3)."""
    if t.is_meta:
        return "a meta tensor (shapes only, no data)"
    if t.is_nested:
        return "a nested tensor"
    if t.layout != torch.strided:
        return f"a {t.layout} tensor"
    return None


@contextlib.contextmanager
def defaults_kept():
    """torch's default dtype and default device as they were before the block, put back after it: a user's module that
    leaves ``torch.set_default_device("meta")`` or ``torch.set_default_dtype(torch.float64)`` set changed every tensor
    the check builds after its call (a traceback, a false mismatch; hostile pass 24b F14, F15)."""
    dt = torch.get_default_dtype()
    get_dev = getattr(torch, "get_default_device", None)  # (torch ≥ 2.3)
    dev = get_dev() if get_dev is not None else None
    try:
        yield
    finally:
        if torch.get_default_dtype() != dt:
            torch.set_default_dtype(dt)
        if get_dev is not None and get_dev() != dev:
            torch.set_default_device(None if dev == torch.device("cpu") else dev)
