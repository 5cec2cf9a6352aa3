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


def _precision_sites() -> list:
    """Where torch keeps its float32 precision settings: the ``fp32_precision`` of each backend (torch ≥ 2.9, which
    the legacy ``set_float32_matmul_precision`` and ``allow_tf32`` set too), else those legacy settings."""
    b = torch.backends
    sites = [(o, "fp32_precision") for o in (b, getattr(b, "mkldnn", None), getattr(getattr(b, "mkldnn", None), "matmul",
                                                                                    None),
                                             getattr(getattr(b, "mkldnn", None), "conv", None),
                                             getattr(getattr(b, "cuda", None), "matmul", None),
                                             getattr(b, "cudnn", None), getattr(getattr(b, "cudnn", None), "conv", None))
             if o is not None and hasattr(o, "fp32_precision")]
    if sites:
        return sites
    return [(b.cuda.matmul, "allow_tf32"), (b.cudnn, "allow_tf32"), (None, "float32_matmul_precision")]


_SITES = _precision_sites()


def _precision_now() -> tuple:
    return tuple(torch.get_float32_matmul_precision() if o is None else getattr(o, a, None) for o, a in _SITES)


def _set_precision(values: tuple) -> None:
    if values == _OWN_PRECISION and _OWN_LEGACY is not None:  # this process's own: its legacy setting too, first
        with contextlib.suppress(Exception):
            torch.set_float32_matmul_precision(_OWN_LEGACY)
    for (o, a), v in zip(_SITES, values):
        with contextlib.suppress(Exception):
            if o is None:
                torch.set_float32_matmul_precision(v)
            elif getattr(o, a, None) != v:
                setattr(o, a, v)


#: the float32 precision settings of this process before any user's code ran (imported with the checks, in the fork
#: server before a module is loaded): what the check's own computations run under
_OWN_PRECISION = _precision_now()
try:
    _OWN_LEGACY: str | None = torch.get_float32_matmul_precision()
except RuntimeError:  # (the legacy and the new settings mixed: no legacy value to speak of)
    _OWN_LEGACY = None
#: the settings the user's code left (at its import or in a call): what its later calls run under
_THEIRS: list = []


def own_precision_for_a_check() -> None:
    """At a check's start: the settings the user's code has left so far (at its import) kept for its calls, this
    process's own put back for the check's computations; none kept from an earlier check in this process (a module of
    an earlier in-process check that set "medium" would otherwise have run the next module under it)."""
    now = _precision_now()
    _THEIRS[:] = [now] if now != _OWN_PRECISION else []
    if _THEIRS:
        _set_precision(_OWN_PRECISION)


@contextlib.contextmanager
def defaults_kept():
    """torch's default dtype and default device as they were before the block, put back after it: a user's module that
    leaves ``torch.set_default_device("meta")`` or ``torch.set_default_dtype(torch.float64)`` set changed every tensor
    the check builds after its call (a traceback, a false mismatch; hostile pass 24b F14, F15). Likewise torch's float32
    precision settings: the block runs under those the user's code left (at its import or an earlier call), the check
    after it under this process's own."""
    dt = torch.get_default_dtype()
    get_dev = getattr(torch, "get_default_device", None)  # (torch ≥ 2.3)
    dev = get_dev() if get_dev is not None else None
    if _THEIRS:
        _set_precision(_THEIRS[0])
    try:
        yield
    finally:
        if torch.get_default_dtype() != dt:
            torch.set_default_dtype(dt)
        if get_dev is not None and get_dev() != dev:
            torch.set_default_device(None if dev == torch.device("cpu") else dev)
        now = _precision_now()
        if now != _OWN_PRECISION:  # the user's code runs with its own float32 settings; the check's own computations
            _THEIRS[:] = [now]  # with this process's (a module leaving torch.set_float32_matmul_precision("medium") set
            _set_precision(_OWN_PRECISION)  # had the check's float32 reference computed in bfloat16: 38b F4)
        elif _THEIRS:
            _THEIRS.clear()
