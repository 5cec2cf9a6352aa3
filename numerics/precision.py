"""The precision rule shared by the own-model checks (``tverify check hopfield``, ``check icl --model``;
reusable by any check that compares a user's module with a float64 reference).

A module computing in a working precision below float64 cannot be held to float64 rounding. Its error
against the float64 reference is judged against the error *of the reference itself* when computed in
the module's working precision, times a stated factor (FlashAttention's rule, Dao et al. 2022: the
low-precision kernel's error is at most :data:`PRECISION_FACTOR` = 2 times that of the standard
implementation in the same precision):

    err(module, ref64) ≤ max(PRECISION_FACTOR · err(ref_work, ref64), floor)

where ``floor`` is the float64 rounding bound of the caller (so a float64 module is still held to
float64 rounding).

Precision is a property, not a tolerance. The computation is judged at the precision the user declares
(``--compute-dtype``) or, undeclared, at the inputs' precision (float64). :func:`infer_work_dtype` is
the detector of a coarser one: an output dtype below float64, or float64 outputs whose every entry is
exactly representable in a lower precision (impossible by chance for outputs of random float64 inputs:
a module that computed there and cast back). A module found below the judged precision fails its own
property, ``precision_as_declared`` (:class:`PrecisionFinding`, :meth:`PrecisionFinding.row`), naming
the precision found; its other properties are still judged, at the precision found, so that every
other finding is seen. The tolerance of a property is never widened to the precision a module happens
to have without that failure being reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

__all__ = ["PRECISION_FACTOR", "DTYPES", "parse_dtype", "unit_roundoff", "infer_work_dtype", "in_precision",
           "precision_tolerance", "PRECISION_PROPERTY", "dtype_name", "coarser", "PrecisionFinding"]

#: The name of the property a module's working precision is judged by.
PRECISION_PROPERTY = "precision_as_declared"

#: FlashAttention's factor: error of the module ≤ 2 × error of the reference in the same precision.
PRECISION_FACTOR = 2.0
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def parse_dtype(text: str | None, option: str = "--compute-dtype") -> torch.dtype | None:
    """``"float32"`` → ``torch.float32`` (``None`` passes through); anything else a ValueError naming ``option``.

    >>> parse_dtype("float32")
    torch.float32
    """
    if text is None:
        return None
    key = str(text).strip().lower().replace("torch.", "")
    key = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "single": "float32",
           "fp64": "float64", "double": "float64"}.get(key, key)
    if key not in DTYPES:
        raise ValueError(f"{option}: must be one of {', '.join(DTYPES)}, got {text!r}")
    return DTYPES[key]


def unit_roundoff(dtype: torch.dtype) -> float:
    """``u = eps/2`` of ``dtype``.

    >>> unit_roundoff(torch.float32)
    5.960464477539063e-08
    """
    return float(torch.finfo(dtype).eps) / 2


def plain(x: Any) -> Any:
    """A tensor returned by someone else's code as a plain ``torch.Tensor`` (the same data and
    autograd graph: ``as_subclass``, which a subclass cannot override); anything else unchanged. A
    ``torch.Tensor`` subclass may redefine ``==``, ``-``, ``abs``, ``float()`` or ``__torch_function__``:
    every comparison of a check must run on the numbers, never on the object's own operators.

    >>> class Liar(torch.Tensor):
    ...     def __eq__(self, other): return True
    >>> type(plain(torch.zeros(2).as_subclass(Liar))) is torch.Tensor, plain(3)
    (True, 3)
    """
    if isinstance(x, torch.Tensor) and type(x) is not torch.Tensor:
        return x.as_subclass(torch.Tensor)
    return x


def infer_work_dtype(out: torch.Tensor, reference: torch.Tensor | None = None) -> torch.dtype:
    """The working precision of a module from one output: its dtype when below float64; for float64
    output whose entries are all exactly representable in float16 / bfloat16 / float32 (and not all
    zero or integer), that precision — unless ``reference`` (the float64 reference of the same output) is
    given and the output equals it to float64 rounding: then the entries are what float64 gives (a saturated
    Hopfield update returning patterns of ±0.5, ±1.5 was said to compute in float16; hostile pass 11); else
    float64.

    >>> infer_work_dtype(torch.tensor([0.1, 0.7], dtype=torch.float32).double())
    torch.float32
    >>> infer_work_dtype(torch.tensor([0.1, 0.7], dtype=torch.float64))
    torch.float64
    >>> infer_work_dtype(torch.tensor([0.1, 0.7], dtype=torch.bfloat16).double())
    torch.bfloat16
    >>> infer_work_dtype(torch.tensor([0.1, 0.7], dtype=torch.float16).double())
    torch.float16
    """
    if out.dtype != torch.float64:
        return out.dtype if out.dtype.is_floating_point else torch.float64
    x = out.detach().cpu()
    x = x[torch.isfinite(x)]
    if x.numel() == 0 or bool((x == x.round()).all()):
        return torch.float64
    if reference is not None:
        r = reference.detach().cpu().to(torch.float64)
        o = out.detach().cpu()
        if r.shape == o.shape and bool(torch.isfinite(r).all()):
            scale = float(r.abs().max()) if r.numel() else 0.0
            if float((o - r).abs().nan_to_num(float("inf")).max()) <= 64 * unit_roundoff(torch.float64) * max(scale, 1e-300):
                return torch.float64
    # bfloat16 before float16: values that both represent have at most bfloat16's 8 significant bits, which a
    # float16 computation's outputs (11 bits) almost never all have; a correct bfloat16 update was said to compute in
    # float16 and judged at float16's 3.7× tighter tolerance (hostile pass 12b F5)
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        if bool((x.to(dt).to(torch.float64) == x).all()):
            return dt
    return torch.float64


def in_precision(ref: Callable[..., torch.Tensor], *args: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``ref(*args)`` with every tensor argument rounded to ``dtype`` and computed there (float16 and
    bfloat16 on CPU fall back to float32 arithmetic on the rounded inputs, the result rounded to
    ``dtype``), returned as float64."""
    low = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args]
    try:
        out = ref(*low)
    except RuntimeError:
        out = ref(*[a.to(torch.float32) if isinstance(a, torch.Tensor) else a for a in low]).to(dtype)
    return out.to(torch.float64)


def precision_tolerance(ref_error_in_work: float, floor: float, factor: float = PRECISION_FACTOR) -> float:
    """``max(factor · ref_error_in_work, floor)``.

    >>> precision_tolerance(1e-7, 1e-14)
    2e-07
    """
    return max(factor * float(ref_error_in_work), float(floor))


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` → ``"float32"``."""
    return str(dtype).replace("torch.", "")


def coarser(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The coarser (larger unit roundoff) of two floating dtypes; ``a`` on a tie.

    >>> coarser(torch.float64, torch.float32)
    torch.float32
    """
    return b if torch.finfo(b).eps > torch.finfo(a).eps else a


@dataclass(frozen=True)
class PrecisionFinding:
    """The precision a module is judged at and the one found in its outputs.

    ``judged``: declared by the user (``given``) or, undeclared, the inputs' float64; ``found``: the
    coarsest precision :func:`infer_work_dtype` finds in the module's outputs (float64: none below).
    ``below``: the module computes below the judged precision (``precision_as_declared`` fails);
    ``work``: the precision its other properties are judged at (the found one when below, so that
    every other finding is still seen; else the judged one)."""
    judged: torch.dtype
    found: torch.dtype
    given: bool

    @classmethod
    def of(cls, declared: torch.dtype | None, found: torch.dtype) -> "PrecisionFinding":
        return cls(declared or torch.float64, found, declared is not None)

    @property
    def below(self) -> bool:
        return torch.finfo(self.found).eps > torch.finfo(self.judged).eps

    @property
    def work(self) -> torch.dtype:
        return coarser(self.judged, self.found)

    def row(self, how: str) -> dict:
        """The ``precision_as_declared`` property (a dict row of the sanity checks): error the unit
        roundoff of the precision found, tolerance that of the judged one; ``how``: how the outputs were
        inspected (which outputs, how many).

        >>> PrecisionFinding.of(None, torch.float32).row("4 outputs")["status"]
        'fail'
        """
        j, f = dtype_name(self.judged), dtype_name(self.found)
        src = f"declared (--compute-dtype {j})" if self.given else "undeclared: the inputs' precision"
        just = (f"u({f}) = {unit_roundoff(self.found):.3g} against u({j}) = {unit_roundoff(self.judged):.3g}: the "
                f"unit roundoff of the precision found in the outputs ({how}; output dtype, or float64 values all "
                "exactly representable in a lower precision, impossible by chance for outputs of random float64 "
                f"inputs) against that of the precision judged, {j} ({src})")
        if self.below:
            detail = (f"the module computes in {f}, below {j} ({src}); its other properties are judged at {f}; "
                      f"if intended, declare --compute-dtype {f}")
        else:
            detail = (f"computes in {j} as declared" if self.given else f"computes in {j}, the inputs' precision") + (
                "" if self.found == self.judged or self.found == torch.float64 else f" (its outputs are {f})")
        return {"name": PRECISION_PROPERTY, "status": "fail" if self.below else "pass",
                "error": unit_roundoff(self.found), "tolerance": unit_roundoff(self.judged), "justification": just,
                "detail": detail, "numbers": {"declared": j, "given": self.given, "found": f,
                                              **({"fits": f} if self.below else {})}}
