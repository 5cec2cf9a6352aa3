"""Small torch helpers shared by the topic modules: device resolution and seeded generators."""

from __future__ import annotations

import contextlib
import weakref

import torch

from theory.validation import InputError

__all__ = ["resolve_device", "generator", "cuda_available", "not_dense", "cpu_threads"]


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


class cpu_threads:
    """Context manager: torch's intra-op threads set to ``n`` (one by default) while on the CPU, the previous count
    put back after; on another ``device`` nothing changes. Small batched tensors gain nothing from threads and lose a lot
    to contention on a busy machine (the CI machine's two cores are shared by the test workers)."""

    def __init__(self, n: int = 1, device: str | torch.device | None = None):
        self.n, self.cpu, self._old = n, device is None or torch.device(device).type == "cpu", None

    def __enter__(self):
        if self.cpu:
            self._old = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self._old is not None:
            torch.set_num_threads(self._old)


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


#: the device types whose autocast state (on, and its dtype) is part of the settings: a module that turns autocast on at
#: import had the check's own float32 reference computed in bfloat16 (hostile pass 39b F4)
_AUTOCAST = ("cpu", "cuda")


def _autocast_now() -> tuple:
    try:
        return tuple((torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST)
    except (TypeError, AttributeError, RuntimeError):  # (torch < 2.4: no device-type arguments; the CPU's alone)
        return ((torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()),)


def _set_autocast(values: tuple) -> None:
    with contextlib.suppress(TypeError, AttributeError, RuntimeError):
        if len(values) == 1:
            torch.set_autocast_cpu_enabled(values[0][0])
            torch.set_autocast_cpu_dtype(values[0][1])
            return
        for d, (on, dtype) in zip(_AUTOCAST, values):
            if torch.get_autocast_dtype(d) != dtype:
                torch.set_autocast_dtype(d, dtype)
            if torch.is_autocast_enabled(d) != on:
                torch.set_autocast_enabled(d, on)


def _precision_now() -> tuple:
    return tuple(torch.get_float32_matmul_precision() if o is None else getattr(o, a, None)
                 for o, a in _SITES) + (_autocast_now(),)


def _set_precision(values: tuple) -> None:
    if values == _OWN_PRECISION and _OWN_LEGACY is not None:  # this process's own: its legacy setting too, first
        with contextlib.suppress(Exception):
            torch.set_float32_matmul_precision(_OWN_LEGACY)
    _set_autocast(values[-1])
    for (o, a), v in zip(_SITES, values[:-1]):
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
#: what the user's code left (at its import or in a call) and its later calls run under, the check's own computations
#: never: ``"precision"`` (torch's float32 precision settings) and ``"defaults"`` (torch's default dtype and device)
_THEIRS: dict = {}
_IN_CHECK = [0]
#: a second implementation's own record (``check attention --against``), by the object: its import's and calls'
#: settings are its own, never the checked module's (a reference file setting "medium" at import ran the checked
#: module's calls in bfloat16: hostile pass 40b F1)
SETTINGS_OF: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _store_of(obj) -> dict:
    if obj is None:
        return _THEIRS
    try:
        return SETTINGS_OF.get(obj, _THEIRS)
    except TypeError:  # an object that takes no weak reference: a record of its own for this call, never the checked
        return {}  # module's (what it left was blamed on the module: hostile pass 41b F3)


@contextlib.contextmanager
def own_settings(store: dict):
    """What the user's code leaves inside the block is recorded in ``store`` (a second implementation's or a mapping
    hook's own record, see :data:`SETTINGS_OF`), not in the checked module's; ``store``'s settings apply to its code
    inside, and the settings of the block's start are in force again after it (:func:`defaults_kept`): a mapping hook or
    its ``q_transform`` that left autocast on had the check's own float32 reference computed in bfloat16 after it, and
    a module with a wrong scale was ok (hostile pass 41b F4, F6); one that left the default device "meta" had the
    module's next call fail, and the module was blamed (41b F4b)."""
    saved = dict(_THEIRS)
    _THEIRS.clear()
    _THEIRS.update(store)
    try:
        with defaults_kept():
            yield store
    finally:
        store.clear()
        store.update(_THEIRS)
        _THEIRS.clear()
        _THEIRS.update(saved)


def _get_device():
    get_dev = getattr(torch, "get_default_device", None)  # (torch ≥ 2.3)
    return get_dev() if get_dev is not None else None


def _defaults_now() -> tuple:
    return torch.get_default_dtype(), _get_device()


def _set_defaults(values: tuple) -> None:
    dtype, dev = values
    if torch.get_default_dtype() != dtype:
        torch.set_default_dtype(dtype)
    if dev is not None and _get_device() != dev:
        torch.set_default_device(None if dev == torch.device("cpu") else dev)


@contextlib.contextmanager
def precision_for_a_check():
    """Around one check: this process's own float32 settings for the check's computations, and what the user's code
    left (at its import, which may come before this block, or in a call) for its calls; a caller's own settings in
    force at the start count as the code's, and are in force again after. Nothing the code left outlives the check:
    an in-process check of a later module starts from nothing kept (a module of an earlier check that set "medium"
    had otherwise run the next module under it; 38b F4's family). Setting the float32 precision at import is
    the module's as much as setting it in ``__init__`` (39b F1), and so is the default dtype (39b F2)."""
    at_start = _precision_now()
    if at_start != _OWN_PRECISION:
        _THEIRS["precision"] = at_start
        _set_precision(_OWN_PRECISION)
    _IN_CHECK[0] += 1
    try:
        yield
    finally:
        _IN_CHECK[0] -= 1
        _THEIRS.clear()
        _set_precision(at_start)


@contextlib.contextmanager
def defaults_kept(apply: bool = True, of=None):
    """The user's code inside the block (an import, a call), the check's own computations outside: the block runs under
    the default dtype and device and the float32 settings (precision, autocast) the code left before — at its import or
    an earlier call — as a caller of the module would; what the code changes inside is recorded for its next calls, and
    the settings of the block's start are put back after it, so a module that leaves
    ``torch.set_default_device("meta")`` or ``torch.set_default_dtype(torch.float64)`` set changes none of the tensors
    the check builds (a traceback, a false mismatch; hostile pass 24b F14, F15), nor its float32 reference ("medium"
    or autocast left on had it computed in bfloat16: 38b F4, 39b F4). ``apply=False``: a region of the check that
    calls the code through blocks of its own (its own computations stay under its own settings), where what the code
    changes outside those is still recorded and put back. ``of``: the object called, whose own record
    (:data:`SETTINGS_OF`) is used where it has one."""
    theirs = _store_of(of)
    if _IN_CHECK[0]:  # in a check its own settings are in force between calls: a difference was made by the code since
        now = _precision_now()  # (a thread it started: the check's float32 reference ran under it, 40b F3)
        if now != _OWN_PRECISION:
            theirs["precision"] = now
            _set_precision(_OWN_PRECISION)
    entry = _defaults_now(), _precision_now()
    grad = torch.is_grad_enabled()  # (autograd switched off and left off: the check's own gradients failed, 41b F4c)
    if apply:
        if "defaults" in theirs:
            _set_defaults(theirs["defaults"])
        if "precision" in theirs:
            _set_precision(theirs["precision"])
    placed = _defaults_now(), _precision_now()
    try:
        yield
    finally:
        left = _defaults_now(), _precision_now()
        for key, was, now in zip(("defaults", "precision"), placed, left):
            if now != was:
                theirs[key] = now
        if left[0] != entry[0]:
            _set_defaults(entry[0])
        if left[1] != entry[1]:
            _set_precision(entry[1])
        if torch.is_grad_enabled() != grad:
            torch.set_grad_enabled(grad)
