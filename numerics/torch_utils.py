"""Small torch helpers shared by the topic modules: device resolution and seeded generators."""

from __future__ import annotations

import torch

from theory.validation import InputError

__all__ = ["resolve_device", "generator", "cuda_available"]


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
