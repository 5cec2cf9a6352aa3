"""Helpers shared by the attention claim modules (``attention``, ``attention_blocks``): torch seeding,
conversions, NaN-aware magnitudes. A module whose name starts with ``_`` registers nothing."""


from __future__ import annotations

import contextlib
import math

import numpy as np
import torch



def _quiet(f, *args):
    with np.errstate(all="ignore"):
        return f(*args)


@contextlib.contextmanager
def _torch_seed(seed: int):
    """Seed torch's global generator (module initialisers use it) without disturbing the caller."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def _T(a, device="cpu") -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _maxabs(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(np.abs(a))) if a.size and np.all(np.isfinite(a)) else (0.0 if a.size == 0 else math.inf)
