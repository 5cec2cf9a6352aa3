"""The checks judge a copy of the user's ``nn.Module`` (cast, moved, put in eval mode), so that the object given is
never changed. A copy that computes otherwise than the object (a ``__getstate__`` that leaves out a runtime flag, a
``__deepcopy__`` that rebuilds from constructor arguments) would be judged in its place: :func:`refuse_unfaithful_copy`
calls the object and a plain copy alike and refuses (exit 2) a copy whose outputs differ where the object's own two
calls agree (hostile passes 43a F14, 48a F5, F7, F8, F9). The object's train/eval flags, tensors and plain attributes are
put back after its calls (47a F4)."""

from __future__ import annotations

import copy
from typing import Any, Callable

from proofs_checks.options import UsageError

__all__ = ["refuse_unfaithful_copy"]


def refuse_unfaithful_copy(obj: Any, calls: list[Callable[[Any], Any]], label: str, name: str) -> None:
    """Each of ``calls`` (``call(module) -> output``, seeded alike by the caller) made on the object, on a plain copy,
    and on the object again, all in eval mode: outputs that differ between object and copy, where the object's two
    calls agree, are a :class:`UsageError` naming ``label`` and ``name``. A module that cannot run here is left to the
    check's own calls, which say so."""
    import torch

    modes = [(m, m.training) for m in obj.modules()]
    saved = _state_of(obj)
    differs = False
    try:
        twin = copy.deepcopy(obj).eval()
        obj.eval()
        for call in calls:
            a, b, a2 = call(obj), call(twin), call(obj)
            same = [_equal(u, v) for u, v in ((a, b), (a, a2))]
            differs = differs or (same[1] and not same[0])
    except Exception:  # noqa: BLE001 - the user's code: its own calls in the check say what it raises
        pass
    finally:
        for m, training in modes:
            m.training = training
        _restore(saved)
    if differs:
        raise UsageError(f"{label}: a copy of {name} computes otherwise than the object itself (its __deepcopy__ or "
                         "__getstate__/__setstate__ leaves something out or rebuilds it): the check judges a copy, so "
                         "it could not judge your object; make copying keep what the forward reads")


def _equal(u: Any, v: Any) -> bool:
    import torch

    if isinstance(u, (tuple, list)) and u:
        u = u[0]
    if isinstance(v, (tuple, list)) and v:
        v = v[0]
    if not (isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor)):
        return True  # nothing comparable: not a difference the copy made
    return u.shape == v.shape and bool(torch.equal(u, v))


def _state_of(obj: Any) -> list:
    """What the object's calls may change, to put back after :func:`_copy_faithful`'s calls (in-process, the caller's
    own object: a step counter, a decode position or a list a forward appends to advanced twice, 47a F4): per module,
    its tensors' values (parameters, buffers, tensor attributes) and copies of its other plain attributes."""
    import torch

    out = []
    for m in obj.modules():
        tensors = {k: (t, t.detach().clone()) for k, t in list(m._parameters.items()) + list(m._buffers.items())
                   if isinstance(t, torch.Tensor)}
        plain = {}
        for k, v in vars(m).items():
            if k in ("_parameters", "_buffers", "_modules") or isinstance(v, torch.nn.Module):
                continue
            try:
                plain[k] = v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
            except Exception:  # noqa: BLE001 - an attribute that cannot be copied is left as the calls leave it
                continue
        out.append((m, tensors, plain, set(vars(m))))
    return out


def _restore(saved: list) -> None:
    import torch

    with torch.no_grad():
        for m, tensors, plain, names in saved:
            for k, (t, value) in tensors.items():
                try:
                    if t.shape == value.shape:
                        t.copy_(value)
                except Exception:  # noqa: BLE001
                    pass
            for k, v in plain.items():
                try:
                    object.__setattr__(m, k, v)
                except Exception:  # noqa: BLE001
                    pass
            for k in set(vars(m)) - names:  # attributes the calls added
                try:
                    object.__delattr__(m, k)
                except Exception:  # noqa: BLE001
                    pass
