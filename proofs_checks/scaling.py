"""A form with its outputs multiplied entry by entry, counting what it changed.

Two uses, one walk over the outputs (:func:`_walk`):

* :func:`scaled_form`: every float output multiplied by one factor (the continuous mutants of
  :mod:`proofs_checks.continuous`);
* :func:`perturbed_form`: entry ``i`` multiplied by ``(1 + δ)^{s_i}`` with ``s_i = ±1`` — all ``+1``
  (``"up"``), all ``−1`` (``"down"``) or drawn from a recorded seed (``"mixed"``) — an entry 0 moved to
  ``s_i·δ``, and, at ``δ = 1``, integer entries multiplied by 2 (``s_i = +1``) or halved, rounded down (``s_i = −1``): the
  power rule of a plugin's or notebook's claim (:mod:`proofs_checks.power`).

What is multiplied: floats and complex numbers, NumPy and torch floating, complex (and, when a rule
gives integer factors, integer) arrays and scalars — a subclass by its plain value (its own ``*`` is
not trusted) and in its own dtype — inside tuples, named tuples, lists, dicts, dataclasses and plain
objects' attributes (a copy; the user's object is never changed); a dict of functions is perturbed
function by function. Anything else (strings, booleans, objects of libraries) is left as it is and its
type recorded (``_Counter.kept``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ScaleCounter", "scaled_form", "scale_counter", "perturbed_form", "unchanged_form", "PATTERNS"]

#: the sign patterns of :func:`perturbed_form`
PATTERNS = ("up", "down", "mixed")
#: outputs nested deeper than this are left as they are
MAX_DEPTH = 32
#: objects of these packages are not taken apart attribute by attribute (their state is not an output)
_LIBRARIES = frozenset({"builtins", "numpy", "torch", "sympy", "scipy", "cvxpy", "pandas", "jax", "tensorflow",
                        "matplotlib", "sklearn", "dask", "click", "proofs_checks", "theory", "numerics"})


@dataclass
class _Counter:
    """What a scaled or perturbed form changed in the outputs it returned: float (and complex) entries
    ``scaled``, integer entries ``ints``, and the type names of outputs it left as they were (``kept``)."""

    scaled: int = 0
    ints: int = 0
    kept: set = field(default_factory=set)
    nonzero: int = 0  # float outputs with an entry other than 0 (a relative change has a size there)
    #: fingerprints of the inputs the form was called at (:func:`input_point`), at most two: whether the checks read it
    #: at more than one point
    points: set = field(default_factory=set)
    #: inputs (of the first two) where every output was 0 and the form, read a little off that input, is not
    #: (:func:`_nonzero_near`): the checks read a function that is not 0 only on its zero set (hostile pass 32b F1)
    near: int = 0

    def snapshot(self) -> dict[str, Any]:
        return {"scaled": self.scaled, "ints": self.ints, "kept": sorted(self.kept), "nonzero": self.nonzero,
                "points": sorted(self.points), "near": self.near}

    def since(self, before: dict[str, Any]) -> dict[str, Any]:
        """What changed after ``before`` (a :meth:`snapshot`): what a check's child sends back."""
        return {"scaled": self.scaled - before["scaled"], "ints": self.ints - before["ints"],
                "kept": sorted(self.kept - set(before["kept"])), "nonzero": self.nonzero - before.get("nonzero", 0),
                "points": sorted(self.points), "near": self.near - before.get("near", 0)}

    def note_point(self, fingerprint: str) -> None:
        if len(self.points) < 2:
            self.points.add(fingerprint)

    def add(self, d: Any) -> None:
        """Add what a check's child counted (:meth:`since`; an int: scaled floats, as older children sent)."""
        if isinstance(d, bool):
            return
        if isinstance(d, int):
            self.scaled += max(d, 0)
            return
        if isinstance(d, dict):
            for k in ("scaled", "ints", "nonzero", "near"):
                v = d.get(k)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    setattr(self, k, getattr(self, k) + v)
            self.kept.update(str(k)[:80] for k in (d.get("kept") or [])[:20])
            for fp in (d.get("points") or [])[:2]:
                self.note_point(str(fp)[:64])


class _Rule:
    """How entries are multiplied: a float factor for sign +1 and for −1, integer factors (``None``:
    integers kept), and the signs (all +1, all −1, or drawn from ``seed``)."""

    def __init__(self, up: float, down: float, signs: str = "up", seed: int = 0,
                 int_up: int | None = None, int_down: int | None = None, shift: float = 0.0, move_zeros: bool = True):
        self.up, self.down, self.pattern, self.seed = float(up), float(down), signs, int(seed)
        self.int_up, self.int_down, self.shift, self.move_zeros = int_up, int_down, float(shift), bool(move_zeros)
        self._rng = None

    def signs(self, shape: tuple) -> Any:
        """+1/−1 per entry of an output of ``shape`` (a NumPy array; drawn afresh for every output)."""
        import numpy as np

        if self.pattern == "mixed":
            if self._rng is None:
                self._rng = np.random.default_rng(self.seed)
            return self._rng.choice(np.array([-1, 1], dtype=np.int8), size=shape)
        return np.full(shape, 1 if self.pattern == "up" else -1, dtype=np.int8)

    def factors(self, shape: tuple) -> Any:
        import numpy as np

        return np.where(self.signs(shape) > 0, self.up, self.down)

    def ints(self, plain: Any) -> Any:
        """An integer NumPy array multiplied by ``int_up`` where the sign is +1 and, where it is −1, by ``int_down``
        — or halved (floor division) where ``int_down`` is 0: a two-sided tolerance that admits half the truth was
        credited when the down side zeroed every count, a 100 % change (hostile pass 24b F6)."""
        import numpy as np

        s = self.signs(plain.shape)
        down = plain // 2 if self.int_down == 0 else plain * self.int_down
        # both branches kept in the input's dtype: an object array of Python ints past int64 became scalars that
        # np.where converted to C longs (OverflowError, the true claim "error": hostile pass 57b F1)
        up, down = np.asarray(plain * self.int_up, dtype=plain.dtype), np.asarray(down, dtype=plain.dtype)
        return np.where(s > 0, up, down).astype(plain.dtype, copy=False)

    def rotates(self, complex_: bool) -> bool:
        """The *mixed* perturbation of a complex entry turns its phase by ``s_i·ln(1 + δ)`` and keeps its
        modulus (the uniform ones scale the modulus): a check of the modulus alone cannot reject it
        (hostile pass 5, H4: a modulus-only check of a complex form was credited "0.0001 %")."""
        return complex_ and self.pattern == "mixed" and self.shift > 0 and self.up > 1

    def apply(self, plain: Any) -> Any:
        """A float or complex NumPy array multiplied entry by entry; an entry that is 0 moved by ``±shift``
        (a relative change of 0 has no size), in its own dtype."""
        import numpy as np

        s = self.signs(plain.shape)
        if self.rotates(np.iscomplexobj(plain)):
            out = plain * np.exp(1j * math.log(self.up) * s)  # complex, mixed: the phase turned by ±ln(1 + δ)
        else:
            out = plain * np.where(s > 0, self.up, self.down)
        if self.shift and self.move_zeros:
            out = np.where(plain == 0, s * self.shift, out)
        return out.astype(plain.dtype, copy=False)

    def apply_torch(self, t: Any) -> Any:
        """:meth:`apply` for a torch tensor (on its device, in its dtype)."""
        import numpy as np
        import torch

        s = self.signs(tuple(t.shape))
        real = t.real.dtype if t.dtype.is_complex else t.dtype
        if self.rotates(t.dtype.is_complex):
            out = t * torch.as_tensor(np.exp(1j * math.log(self.up) * s), dtype=t.dtype, device=t.device)
        else:
            out = t * torch.as_tensor(np.where(s > 0, self.up, self.down), dtype=real, device=t.device)
        if self.shift and self.move_zeros:
            out = torch.where(t == 0, torch.as_tensor(s * self.shift, dtype=real, device=t.device).to(t.dtype), out)
        return out

    def __getstate__(self):  # a copy (a check's child) starts from the seed, not from where this one is
        d = dict(self.__dict__)
        d["_rng"] = None
        return d


def _torch():
    try:
        import torch
    except Exception:  # pragma: no cover - torch is a dependency
        return None
    return torch


def _leaf(v: Any, r: _Rule, n: _Counter) -> tuple[bool, Any]:
    """``(True, v multiplied)`` for a number, array or tensor this module multiplies, else ``(False, v)``."""
    import numpy as np

    torch = _torch()
    if isinstance(v, (bool, np.bool_)):
        return False, v
    if isinstance(v, (complex, np.complexfloating, float, np.floating)):  # a subclass: its plain value
        n.scaled += 1
        if not isinstance(v, (np.floating, np.complexfloating)):  # a Python float or complex, or a subclass
            plain = np.asarray(complex.__complex__(v) if isinstance(v, complex) else float.__float__(v))
            n.nonzero += bool(plain != 0)
            out = r.apply(plain)[()]
            return True, (complex(out) if isinstance(v, complex) else float(out))
        n.nonzero += bool(np.asarray(v) != 0)
        return True, r.apply(np.asarray(v))[()]
    if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.inexact):
        n.scaled += 1
        n.nonzero += bool(np.any(np.asarray(v) != 0))
        return True, r.apply(np.asarray(v))
    if torch is not None and isinstance(v, torch.Tensor) and (v.dtype.is_floating_point or v.dtype.is_complex):
        n.scaled += 1
        n.nonzero += bool((v.as_subclass(torch.Tensor) != 0).any())
        return True, r.apply_torch(v.as_subclass(torch.Tensor))
    if r.int_up is None:
        return False, v
    if isinstance(v, (int, np.integer)):
        n.ints += 1
        k = int(r.ints(np.asarray(int(v), dtype=object))[()])  # (object: a Python int of any size stays exact)
        return True, (k if not isinstance(v, np.integer) else np.asarray(v).dtype.type(k))
    if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.integer):
        n.ints += 1
        return True, r.ints(np.asarray(v))
    if torch is not None and isinstance(v, torch.Tensor) and v.dtype != torch.bool and not v.dtype.is_floating_point:
        n.ints += 1
        t = v.as_subclass(torch.Tensor)
        return True, torch.as_tensor(r.ints(t.detach().cpu().numpy()), device=t.device).to(t.dtype)
    return False, v


def _walk(v: Any, r: _Rule, n: _Counter, depth: int = 0) -> Any:
    """``v`` with every number, array and tensor in it multiplied by ``r`` (a new object; ``v`` unchanged)."""
    if depth > MAX_DEPTH:
        n.kept.add(f"{type(v).__name__} nested deeper than {MAX_DEPTH}")
        return v
    done, out = _leaf(v, r, n)
    if done:
        return out
    if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple: its fields, its type kept
        fields = [_walk(x, r, n, depth + 1) for x in v]
        try:
            return type(v)(*fields)
        except Exception:  # a type with `_fields` that is built otherwise (its own __new__): its fields kept
            try:
                made = type(v)._make(fields)
                if type(made) is type(v):
                    return made
            except Exception:  # noqa: BLE001 - not a named tuple's _make: its values as a tuple
                pass
            return tuple(fields)
    if isinstance(v, (tuple, list, dict)):
        items = ({k: _walk(x, r, n, depth + 1) for k, x in v.items()} if isinstance(v, dict) else
                 [_walk(x, r, n, depth + 1) for x in v])
        plain = dict if isinstance(v, dict) else (tuple if isinstance(v, tuple) else list)
        if type(v) is not plain:  # a subclass (an OrderedDict, a model's output dict): its type kept when it can be
            try:
                return type(v)(items)
            except Exception:  # noqa: BLE001 - built otherwise: the plain container
                pass
        return plain(items)
    new = _object(v, r, n, depth)
    if new is not None:
        return new
    if not _integer(v):  # integers are perturbed at δ = 1 only: not "kept" below it
        n.kept.add("None" if v is None else type(v).__name__)
    return v


def _integer(v: Any) -> bool:
    import numpy as np

    torch = _torch()
    if isinstance(v, (bool, np.bool_)):
        return False
    return (isinstance(v, (int, np.integer)) or (isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.integer))
            or (torch is not None and isinstance(v, torch.Tensor) and v.dtype != torch.bool
                and not v.dtype.is_floating_point and not v.dtype.is_complex))


def _object(v: Any, r: _Rule, n: _Counter, depth: int) -> Any:
    """A copy of a dataclass or plain object with its attributes walked (``None``: not one, nothing in it
    multiplied, or it cannot be copied without changing the original)."""
    import copy
    import dataclasses
    import types

    if isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return None
    attrs = getattr(v, "__dict__", None)
    root = str(getattr(type(v), "__module__", "") or "").partition(".")[0]
    if not isinstance(attrs, dict) or not attrs or (root in _LIBRARIES and not dataclasses.is_dataclass(v)):
        return None
    before = (n.scaled, n.ints)
    walked = {k: _walk(x, r, n, depth + 1) for k, x in list(attrs.items())}
    if (n.scaled, n.ints) == before:
        return None
    try:
        new = copy.copy(v)
        if new is v or getattr(new, "__dict__", None) is attrs:
            raise TypeError("copy returned the original")
        for k, x in walked.items():
            object.__setattr__(new, k, x)
    except Exception:  # noqa: BLE001 - cannot be copied: left as it is, said
        n.scaled, n.ints = before  # what was counted inside is not returned
        n.kept.add(f"{type(v).__name__} (not copyable)")
        return v
    return new


def scale_counter(form: Any) -> "_Counter | None":
    """The counter of outputs changed by a :func:`scaled_form` or :func:`perturbed_form` (``None`` for any
    other form): a plugin check's child adds what it changed to it (:func:`proofs_checks.claims._plugins.run_check`)."""
    if isinstance(form, dict):
        return next((c for c in map(scale_counter, form.values()) if c is not None), None)
    c = getattr(form, "tverify_scaled", None)
    return c if isinstance(c, _Counter) else None


def input_point(args: tuple, kwargs: dict) -> str:
    """A fingerprint of the input a form is called at: its numbers' values (``-0.0`` as ``0.0``; arrays and tensors by
    their float64 values and shape), anything else by its type name; two calls at the same numbers agree."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for v in (*args, *sorted(kwargs.items())):
        try:
            if hasattr(v, "detach") and hasattr(v, "cpu"):
                v = v.detach().cpu().numpy()
            a = np.asarray(v, dtype=np.float64)
            h.update(repr(a.shape).encode() + (a + 0.0).tobytes())
        except Exception:  # noqa: BLE001 - not numbers: its type
            h.update(type(v).__name__.encode())
        h.update(b"|")
    return h.hexdigest()[:32]


def _nudged(v: Any) -> Any:
    """An input a little off ``v`` (its numbers moved by 10⁻³·(1 + |v|)), or ``None`` when it holds no numbers. A list or
    tuple of numbers is nudged entry by entry (as the same kind of sequence), a torch or NumPy array of integers or
    booleans as floats, a number of any kind (complex, ``Fraction``, SymPy's) as a Python float or complex: read only at 0 given that way, a false ``3x = 2x`` was verified (hostile pass 37b F1)."""
    import numpy as np

    if isinstance(v, (list, tuple)):
        return _nudged_sequence(v)
    if isinstance(v, numbers.Number) and not isinstance(v, (bool, np.generic)):  # (complex, Fraction, SymPy numbers too)
        try:
            x = float(v) if isinstance(v, numbers.Real) or not isinstance(v, numbers.Complex) else complex(v)
        except (TypeError, ValueError, OverflowError):
            return None
        return x + 1e-3 * (1 + abs(x))
    if not isinstance(v, (np.ndarray, np.generic)) and not (hasattr(v, "detach") and hasattr(v, "dtype")):
        return None
    try:
        if hasattr(v, "detach"):
            import torch

            f = v if v.is_floating_point() or v.is_complex() else v.to(torch.float64)
            return f + 1e-3 * (1 + f.abs())
        a = np.asarray(v)
        if a.dtype.kind not in "fc":
            a = a.astype(float)
        out = a + 1e-3 * (1 + np.abs(a))
        return float(out) if np.ndim(v) == 0 and not isinstance(v, np.ndarray) else out
    except Exception:  # noqa: BLE001 - not numbers after all: no nudge
        return None


def _nudged_sequence(v: list | tuple) -> Any:
    """:func:`_nudged` of a list or tuple: each entry nudged (an entry that holds no numbers kept), the same kind of
    sequence back; ``None`` when no entry holds numbers. Entries beyond 10⁶ are left as they are."""
    import numpy as np

    try:  # a rectangular list of numbers: at once
        a = np.asarray(v, dtype=float)
        if 0 < a.size <= 10**6:
            out = (a + 1e-3 * (1 + np.abs(a))).tolist()
            return out if isinstance(v, list) else tuple(out)
    except Exception:  # noqa: BLE001 - ragged, or not numbers: entry by entry
        pass
    parts, any_number = [], False
    for e in v[:10**6]:
        n = _nudged(e) if e is not v else None
        any_number = any_number or n is not None
        parts.append(e if n is None else n)
    if not any_number:
        return None
    parts += list(v[10**6:])
    return parts if isinstance(v, list) else tuple(parts)


def _nonzero_near(form: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``form`` read a little off ``args`` (each numeric input nudged: :func:`_nudged`) has an output entry
    other than 0; where that call raises, the integers among ``args`` moved by one instead (:func:`_stepped`: a form of
    a count or a length, defined at integers only, was never read off 0: hostile pass 37b F1b). ``False`` when nothing
    could be moved, or every such call raised."""
    for move in (_nudged, _stepped):
        try:
            moved = [move(a) for a in args]
            kmoved = {k: move(v) for k, v in kwargs.items()}
        except RecursionError:  # a list nested past the interpreter's depth: nothing moved
            return False
        if all(a is None for a in moved) and all(v is None for v in kmoved.values()):
            continue
        try:
            out = form(*[a if b is None else b for a, b in zip(args, moved)],
                       **{k: v if kmoved[k] is None else kmoved[k] for k, v in kwargs.items()})
        except Exception:  # noqa: BLE001 - a form defined at those inputs only: the next way, or nothing said
            continue
        probe = _Counter()
        _walk(out, _Rule(1.0, 1.0), probe)
        return probe.nonzero > 0
    return False


def _stepped(v: Any) -> Any:
    """``v`` with each integer moved by one, of the same type (a Python, NumPy or torch integer, an integer array, a list
    or tuple of them), or ``None`` when it holds no integer."""
    import numpy as np

    if isinstance(v, (list, tuple)):
        parts = [_stepped(e) if e is not v else None for e in v[:10**6]]
        if all(p is None for p in parts):
            return None
        out = [e if p is None else p for e, p in zip(v, parts)] + list(v[10**6:])
        return out if isinstance(v, list) else tuple(out)
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return None
    if isinstance(v, (int, np.integer)):
        return v + 1
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return v + 1
    if hasattr(v, "detach") and hasattr(v, "dtype") and not (v.is_floating_point() or v.is_complex()) \
            and str(v.dtype) != "torch.bool":
        return v + 1
    return None


def _wrap(form: Any, r: _Rule, n: _Counter) -> Any:
    if callable(form) and not isinstance(form, type):
        def wrapped(*args, **kwargs):
            fresh = bool(args or kwargs) and len(n.points) < 2
            if fresh:  # (a form called without inputs is a value: no point)
                before = len(n.points)
                n.note_point(input_point(args, kwargs))
                fresh = len(n.points) > before
            nonzero = n.nonzero
            out = _walk(form(*args, **kwargs), r, n)
            if fresh and n.nonzero == nonzero and _nonzero_near(form, args, kwargs):  # every output 0 here only
                n.near += 1
            return out

        wrapped.tverify_scaled = n  # a plugin check runs in a child: it sends back what it changed there
        return wrapped
    if isinstance(form, dict):
        return {k: _wrap(v, r, n) for k, v in form.items()}
    return _walk(form, r, n)


def scaled_form(form: Any, factor: float, counter: _Counter | None = None) -> Any:
    """``form`` with its float outputs multiplied by ``factor`` (integers kept).

        >>> f = scaled_form(lambda x: 2.0 * x, 1.5)
        >>> f(2.0)
        6.0
        >>> g = scaled_form({"a": lambda: (1.0, "label")}, 2.0)
        >>> g["a"]()
        (2.0, 'label')
    """
    return _wrap(form, _Rule(factor, factor), counter if counter is not None else _Counter())


def perturbed_form(form: Any, delta: float, pattern: str, seed: int = 0, counter: _Counter | None = None, *,
                   move_zeros: bool = True) -> Any:
    """``form`` with entry ``i`` of its float outputs multiplied by ``(1 + delta)^{s_i}``: ``s_i = +1``
    everywhere (``pattern="up"``), ``−1`` everywhere (``"down"``), or ``±1`` drawn from ``seed``
    (``"mixed"``, a fresh draw for every output); a float entry that is 0 is moved to ``s_i·delta`` (a
    relative change of 0 has no size; kept at 0 with ``move_zeros=False``); at ``delta = 1`` integer entries are multiplied by 2
    (``s_i = +1``) or halved, rounded down (``s_i = −1``), below it they are kept.

        >>> perturbed_form(lambda: [1.0, 4.0], 1.0, "down")()
        [0.5, 2.0]
        >>> perturbed_form(lambda: (3, 0.5), 1.0, "up")()
        (6, 1.0)
    """
    if pattern not in PATTERNS or not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"perturbed_form: pattern one of {PATTERNS} and delta > 0, got {pattern!r}, {delta!r}")
    ints = (2, 0) if delta == 1.0 else (None, None)
    rule = _Rule(1.0 + delta, 1.0 / (1.0 + delta), pattern, seed, *ints, shift=delta, move_zeros=move_zeros)
    return _wrap(form, rule, counter if counter is not None else _Counter())


def unchanged_form(form: Any, counter: _Counter | None = None) -> Any:
    """``form`` behind the very wrapper of :func:`perturbed_form`, its outputs multiplied by 1 (the same
    values, in plain types, a new object): the control of the power rule. A check that passes on the form
    and not on this copy reads something other than the form's values (its identity, its type, a call
    count), so what it rejects among the perturbed forms says nothing of the claim.

        >>> unchanged_form(lambda: (3, 0.5))()
        (3, 0.5)
    """
    return _wrap(form, _Rule(1.0, 1.0), counter if counter is not None else _Counter())


ScaleCounter = _Counter
