"""Black-box properties of a user's self-attention map (``tverify check attention``).

The object under test is a map ``f(x)``: ``x`` of shape ``(batch, T, D)`` (tokens are rows) to
``(batch, T, D)``, optionally returning ``(out, weights, ...)`` with ``weights`` ``(batch, [H,] T,
T)`` (the ``torch.nn.MultiheadAttention`` convention: row ``t`` holds the weights of query ``t``).
The reference is :func:`numerics.attention_reference.reference_attention` on the module's own
weights (:mod:`numerics.attention_mapping`) with the declared structure.

**Probes.** Several sequence lengths in one run (``1``, small odd lengths, and lengths past the
usual block, window and chunk sizes: ``1, 2, 5, 17, 64, 113, 257`` by default, up to ``1025`` with
``--full``), a batch whose samples have different scales, and the same probes with the inputs
scaled so that the largest logit is about :data:`LARGE_LOGIT` (a leak through a ``−30`` instead of
``−∞`` is ``e^−30`` at unit scale and O(1) there).

**Tolerance by precision** (FlashAttention's rule). The module's error against the float64
reference, relative to ``max|reference|``, may be at most ``F`` times the error of the plain
reference computed entirely in the module's working precision ``p`` (projections, logits, softmax
and output in ``p``), plus the float64 reference's own rounding bound
``B₆₄ = 16·u₆₄·(3D+T)·max(1, |logit|max)``: ``F = 2`` for outputs, ``3`` for gradients. For ``p =
float64`` there is no finer reference and the bound is ``B₆₄`` alone. ``p`` is the precision the user
declares (``--compute-dtype``) or, undeclared, the input's: never found by probing. A module that
computes below it fails ``precision_as_declared`` (named with the precision that fits, verified by a
rerun under it): a finding of its own, not a widened tolerance.

Structural properties (no future leak, window, key padding, batch independence) are exact: see
:mod:`numerics.attention_structural`.

Every property is a :class:`Property` with its measured error, its tolerance, the rule behind the
tolerance (``justification``) and whether it is *central* (``ok`` needs it to have run and held).

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from numerics.attention_mapping import find_mappings, head_count_hint, kv_head_hint  # noqa: F401 (re-exported)
from numerics import attention_structural
from numerics.attention_reference import Mapping, Structure, allowed_mask, max_logit, reference_attention

__all__ = ["Property", "call", "exposed_weights", "unit_roundoff", "probe_lengths", "Precision", "AttentionProbe",
           "LARGE_LOGIT", "FACTOR_FORWARD", "FACTOR_GRAD", "head_count_hint", "kv_head_hint", "prop_finite",
           "prop_weights_distribution", "prop_weights_match", "prop_convex_combination", "fit_single_head", "prop_extreme_logits"]

#: FlashAttention's factors: the module's error may be this many times the plain implementation's.
FACTOR_FORWARD = 2.0
FACTOR_GRAD = 3.0
#: The largest logit of the "large logits" probes (a trained model's scale) and of the "huge" ones,
#: at which whole rows of allowed logits sit far below −30 (a −30 fill or a softcap applied after the
#: mask then leaks O(1) weight).
LARGE_LOGIT = 60.0
HUGE_LOGIT = 1000.0
_SCALES = {"unit": None, "large": LARGE_LOGIT, "huge": HUGE_LOGIT}
#: Attribute names under which modules commonly keep their last attention weights.
WEIGHT_ATTRS = ("attn_weights", "attention_weights", "last_attn", "last_attention", "attn_probs", "att_weights",
                "attn", "att", "weights", "A", "probs")
LENGTHS = {"quick": (1, 2, 5, 17, 33), "default": (1, 2, 5, 17, 64, 113, 257),
           "full": (1, 2, 5, 17, 64, 113, 128, 217, 257, 1025)}
BATCH = {"quick": 2, "default": 3, "full": 4}
#: Per-sample scales of the probe batch (samples of different scale: batch coupling shows).
SAMPLE_SCALES = (1.0, 0.5, 2.0, 1.3)
_DT = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def unit_roundoff(dtype: torch.dtype) -> float:
    """``u = eps/2`` of ``dtype`` (1.1e-16 for float64, 6.0e-8 for float32)."""
    return float(torch.finfo(dtype).eps) / 2


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def probe_lengths(mode: str, T_max: int | None = None) -> list[int]:
    """The probe lengths of a size mode, capped at ``T_max`` (a learned position table).

    >>> probe_lengths("default")
    [1, 2, 5, 17, 64, 113, 257]
    >>> probe_lengths("default", 100)
    [1, 2, 5, 17, 64, 100]
    """
    Ls = list(LENGTHS.get(mode, LENGTHS["default"]))
    if T_max is not None:
        Ls = sorted({min(t, T_max) for t in Ls})
    return Ls


@dataclass
class Property:
    """One named property: ``status`` ``"pass"`` / ``"fail"`` / ``"skip"`` (did not run, or not
    applicable: ``detail`` says which and why), the measured ``error`` and its ``tolerance``, the
    rule behind the tolerance (``justification``), ``central`` (``ok`` needs it to have run and
    held) and a ``detail`` line."""

    name: str
    status: str
    error: float | None
    tolerance: float | None
    justification: str
    detail: str = ""
    numbers: dict = field(default_factory=dict)
    central: bool = False

    def to_json(self) -> dict:
        fin = lambda v: v if (v is None or math.isfinite(v)) else None  # noqa: E731
        d = {"name": self.name, "status": self.status, "error": fin(self.error), "tolerance": fin(self.tolerance),
             "justification": self.justification, "detail": self.detail, "central": self.central}
        if self.numbers:
            d["numbers"] = self.numbers
        return d


def _judge(name: str, error: float, tol: float, just: str, detail: str = "", *, central: bool = False,
           **numbers) -> Property:
    error = float(error)
    if not math.isfinite(error):
        return Property(name, "fail", error, tol, just,
                        (detail + "; " if detail else "") + "the error is not finite (NaN/inf)", numbers, central)
    if error <= tol and not tol < UNDECIDABLE_TOL and name in OUTPUT_COMPARISONS:
        # a pass under a tolerance that admits any change of the output proves nothing
        return Property(name, "skip", error, tol, just,
                        f"undecided: the tolerance {tol:.3g} (relative) admits any change of the output — the logits "
                        f"are too large for the working precision to tell a match from a mismatch "
                        f"(measured {error:.3g}); " + (detail or ""),
                        {**numbers, "undecidable": True,
                         "to_decide": "smaller logits: the module's weights make its logits too large for its working "
                                      "precision (rescale the weights, or run it in a finer precision)"}, central)
    return Property(name, "pass" if error <= tol else "fail", error, tol, just, detail, numbers, central)


#: a relative tolerance at or above this admits any change of an output: a comparison under it decides
#: nothing (a leak of 81 % passed under a float32 tolerance of 4.62 at logits ~1e8)
UNDECIDABLE_TOL = 0.5
#: the properties that compare outputs relative to their size (the rule applies to them)
OUTPUT_COMPARISONS = ("matches_reference", "matches_against", "causal_no_future_leak", "window_respected",
                      "prefix_consistency", "batch_independence", "batch_size_independence", "key_padding_respected", "gradients_match_reference",
                      "gradients_match_against", "weights_match_reference", "matches_reference_with_grad",
                      "matches_against_with_grad", "matches_reference_in_inference_mode",
                      "matches_against_in_inference_mode", "matches_reference_on_other_paths",
                      "matches_against_on_other_paths")


def _skip(name: str, why: str, central: bool = False) -> Property:
    return Property(name, "skip", None, None, "", why, {}, central)


#: the most characters of a user's exception text quoted in a detail or an error line (a 100 kB
#: message stays one short line; the plugin path cuts likewise)
MAX_QUOTED = 300


def short_text(text: Any, limit: int = MAX_QUOTED) -> str:
    """``text`` on one line, at most ``limit`` characters (a longer one is cut and says how long it was).

        >>> short_text("a\\nb"), len(short_text("E" * 100000)), short_text("E" * 100000)[-21:]
        ('a b', 300, '… (100000 characters)')
    """
    t = " ".join(str(text).split())
    if len(t) <= limit:
        return t
    tail = f"… ({len(t)} characters)"
    return t[:max(limit - len(tail), 0)] + tail


def exc_text(exc: BaseException) -> str:
    """``TypeName: message`` of a user's exception, one line of at most :data:`MAX_QUOTED` characters."""
    msg = " ".join(str(exc).split())
    return short_text(f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__)


def unavailable(name: str, device: Any, exc: str, T: int | None = None, device_limit: bool = True) -> Property:
    """A property the module cannot run (its backward raises: FlexAttention on CPU): skipped with
    the exception, ``numbers["unavailable"]`` holding it, never a failed comparison. ``device_limit``:
    the exception says the operation is not supported (:func:`unsupported`), so the skip is worded as
    this device's limit; otherwise it names only the exception."""
    exc = short_text(exc)
    at = f" at T = {T}" if T is not None else ""
    where = f"not available on this device ({device})" if device_limit else "not available"
    return Property(name, "skip", None, None, "", f"{where}: the module's backward "
                    f"raised {exc}{at}; nothing to compare", {"unavailable": exc, "device": str(device),
                                                             "device_limit": bool(device_limit)}, False)


def unsupported(exc: BaseException) -> bool:
    """An exception that says the operation is not supported (``NotImplementedError``, torch's
    "not implemented for 'Float'", "does not support"), not that the module computed wrongly.

        >>> unsupported(RuntimeError('"addmm" not implemented for Half'))
        True
        >>> unsupported(RuntimeError("mat1 and mat2 must have the same dtype"))
        False
    """
    msg = str(exc).lower()
    return isinstance(exc, NotImplementedError) or "not implemented for" in msg or "does not support" in msg \
        or "not supported" in msg


def _rel(a: torch.Tensor, b: torch.Tensor, scale: float | None = None) -> float:
    """``max|a − b| / max(max|b|, tiny)`` in float64 (NaN when either holds NaN/inf)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return float("nan")
    if not a.numel():
        return 0.0
    s = scale if scale is not None else float(b.abs().max())
    return float((a - b).abs().max()) / max(s, 1e-300)


def b64(D: int, T: int, L: float) -> float:
    """The float64 reference's own rounding bound (relative to max|out|)."""
    return 16 * unit_roundoff(torch.float64) * (3 * D + T) * max(1.0, L)


# ------------------------------------------------------------------------------------------------
# calling the object


def call(f: Callable, x: torch.Tensor, grad: bool = False) -> tuple[Any, torch.Tensor | None]:
    """``f(x)`` (under ``torch.no_grad`` unless ``grad``): ``(out, weights)``; a tuple/list result is
    ``(out, weights, ...)`` where ``weights`` is kept only if it is a tensor whose last two axes are
    ``(T, T)``."""
    if grad:
        r = f(x)
    else:
        with torch.no_grad():
            r = f(x)
    if isinstance(r, (tuple, list)):
        out = r[0] if r else None
        w = r[1] if len(r) > 1 else None
        T = x.shape[-2]
        if not (isinstance(w, torch.Tensor) and w.dim() >= 3 and tuple(w.shape[-2:]) == (T, T)):
            if w is not None:
                global LAST_UNREAD
                LAST_UNREAD = (f"a tensor of shape {tuple(w.shape)}" if isinstance(w, torch.Tensor)
                               else f"a {type(w).__name__}")
            w = None
        return out, w
    return r, None


#: What the last call returned as its second output when that was not attention weights (last two
#: axes (T, T)): said in a note, never silently ignored.
LAST_UNREAD: str | None = None


def exposed_weights(f: Any, x: torch.Tensor, returned: torch.Tensor | None) -> tuple[torch.Tensor | None, str]:
    """The attention weights ``(batch, H, T, T)`` the object returned or stored on itself."""
    B, T = x.shape[0], x.shape[-2]

    def norm(w):
        w = w.detach()
        if w.dim() == 3:
            w = w[:, None]
        return w if w.dim() == 4 and w.shape[0] == B and tuple(w.shape[-2:]) == (T, T) else None

    if returned is not None and norm(returned) is not None:
        return norm(returned), "returned by the call"
    for name in WEIGHT_ATTRS:
        w = getattr(f, name, None)
        if isinstance(w, torch.Tensor) and not isinstance(w, torch.nn.Parameter) and norm(w) is not None:
            return norm(w), f"attribute .{name}"
    return None, ""


# ------------------------------------------------------------------------------------------------
# precision


@dataclass
class Precision:
    """The working precision ``p`` the module is judged at and how it was found."""

    dtype: torch.dtype
    how: str

    @property
    def name(self) -> str:
        return dtype_name(self.dtype)


def tolerance(e_plain: float, D: int, T: int, L: float, p: torch.dtype, factor: float) -> tuple[float, str]:
    """The precision rule: ``factor·max(e_plain, u_p·max(1, |logit|max)) + B₆₄`` (``B₆₄`` alone at
    ``p = float64``).

    The floor ``u_p·max(1, |logit|max)`` is one rounding of the largest logit in ``p``: a correct
    implementation in ``p`` may move the softmax weights by that much, while the plain reference's
    own error can be far below it when its order of operations happens to round the deciding logits
    well. Measured (benchmarks/RESULTS.md, "Float32 rule at large logits"): at logits ~1000 the plain
    float32 reference erred down to 0.008·u32·L on some draws, correct float32 attentions (SDPA,
    nn.MultiheadAttention, Keras 3, a hand-written one scaling q before q·kᵀ) up to 0.41·u32·L there
    (0.63·u32·L at logits ~100), and the hand-written one 2.3× the plain reference's error on one
    draw; at unit logits the floor is below the plain reference's error (≥ 1.6·u32 measured) and
    changes nothing."""
    b = b64(D, T, L)
    if p == torch.float64:
        return b, (f"float64 working precision: the reference's own rounding bound B64 = 16·u64·(3D+T)·max(1, |logit|max)"
                   f" = 16·{unit_roundoff(torch.float64):.3g}·{3 * D + T}·{max(1.0, L):.3g} = {b:.3g} (relative to "
                   "max|reference|)")
    floor = unit_roundoff(p) * max(1.0, L)
    if e_plain >= floor or not math.isfinite(e_plain):
        return factor * e_plain + b, (f"{dtype_name(p)} working precision: {factor:g} × the error of the plain "
                                      f"reference computed in {dtype_name(p)} ({e_plain:.3g}) + B64 ({b:.3g}) = "
                                      f"{factor * e_plain + b:.3g} (FlashAttention's rule; relative to "
                                      "max|reference|)")
    return factor * floor + b, (f"{dtype_name(p)} working precision: {factor:g} × one rounding of the largest logit in "
                                f"{dtype_name(p)}, u·max(1, |logit|max) = {unit_roundoff(p):.3g}·{max(1.0, L):.3g} = "
                                f"{floor:.3g} (above the plain reference's own error {e_plain:.3g}, which is not "
                                f"representative there) + B64 ({b:.3g}) = {factor * floor + b:.3g} (FlashAttention's "
                                "rule with that floor; relative to max|reference|)")


# ------------------------------------------------------------------------------------------------
# the probe


def _scale_words(ratio: float, H: int, dk: int) -> str:
    """The fitted scale labelled by the factor measured (``ratio = s·√d_k``), then the causes that factor
    fits: ``1/√H`` (the model width instead of the head width), ``√H``, or ``1/n`` for a whole ``n`` (a
    layer index + 1, as GPT-2's ``scale_attn_by_inverse_layer_idx``). A factor that fits √H and a layer
    index alike (H = 4, layer 1) names both.

        >>> _scale_words(0.5, 4, 8)
        'scale is 1/√d_k × 0.5 = 1/(2·√d_k): off by a factor 1/2 (fits 1/√H: the model width instead of the head width (1/√32); or 1/(layer index + 1) = 1/2, as scale_attn_by_inverse_layer_idx)'
        >>> _scale_words(1 / 3, 4, 8)
        'scale is 1/√d_k × 0.333333 = 1/(3·√d_k): off by a factor 1/3 (fits 1/(layer index + 1) = 1/3, as scale_attn_by_inverse_layer_idx)'
    """
    inv = 1 / ratio
    n = round(inv)
    whole = n >= 2 and abs(inv - n) < 1e-3 * n
    head = f"scale is 1/√d_k × {ratio:.6g}" + (f" = 1/({n}·√d_k): off by a factor 1/{n}" if whole else
                                               f": off by a factor {ratio:.6g}")
    fits = []
    if H > 1 and abs(ratio * math.sqrt(H) - 1) < 1e-3:
        fits.append(f"1/√H: the model width instead of the head width (1/√{H * dk})")
    if H > 1 and abs(ratio / math.sqrt(H) - 1) < 1e-3:
        fits.append(f"√H = {math.sqrt(H):.4g}")
    if whole:
        fits.append(f"1/(layer index + 1) = 1/{n}, as scale_attn_by_inverse_layer_idx")
    return head + (f" (fits {'; or '.join(fits)})" if fits else "")


def _chunks(n: int, per_item_bytes: float, budget: float = 256e6) -> int:
    return max(1, min(n, int(budget // max(per_item_bytes, 1.0))))


class AttentionProbe:
    """The probes of one object: ``f`` (the module, a deep copy cast to the probe dtype) with an
    optional ``mapping`` (the reference's weights) and declared ``structure``. ``against`` is a
    second implementation for the differential mode (it replaces the mapped reference)."""

    def __init__(self, f: Callable, *, D: int, structure: Structure, mapping: Mapping | None, probe_dtype: torch.dtype,
                 device: str, lengths: list[int], batch: int, seed: int, compute_dtype: torch.dtype | None = None,
                 against: Callable | None = None):
        self.f, self.D, self.st, self.m = f, D, structure, mapping
        self.pdt, self.device = probe_dtype, device
        self.lengths, self.B, self.seed = list(lengths), batch, seed
        self.compute_dtype, self.against = compute_dtype, against
        self.outs: dict[int, torch.Tensor] = {}
        self.grad_outs: dict[int, torch.Tensor] = {}  # outputs of the gradient pass (autograd enabled)
        self.xs: dict[int, torch.Tensor] = {}
        self.raised: dict[int, str] = {}
        self.nonfinite_lengths: set[int] = set()  # probe lengths left out for NaN/inf outputs (the caller's)
        self.precision: Precision | None = None
        self.e_plain: dict[tuple[int, str], float] = {}
        self.L: dict[int, float] = {}

    # -- inputs ----------------------------------------------------------------------------------
    def gen(self, salt: int) -> torch.Generator:
        return torch.Generator().manual_seed(int(self.seed) * 1_000_003 + salt)

    def probe(self, T: int, salt: int = 0) -> torch.Tensor:
        """``(B, T, D)`` float64 probe; sample ``b`` has scale ``SAMPLE_SCALES[b]``."""
        g = self.gen(T * 7919 + salt)
        x = torch.randn(self.B, T, self.D, generator=g, dtype=torch.float64)
        sc = torch.tensor([SAMPLE_SCALES[b % len(SAMPLE_SCALES)] for b in range(self.B)], dtype=torch.float64)
        return x * sc[:, None, None]

    def run(self, x64: torch.Tensor, grad: bool = False):
        # a copy (also when the dtype and device already match): a module that writes into its input
        # must not change the probes kept for later properties; contiguous: modules may .view()
        x = x64.to(dtype=self.pdt, device=self.device).clone(memory_format=torch.contiguous_format)
        if grad:
            x.requires_grad_(True)
        out, w = call(self.f, x, grad=grad)
        return x, out, w

    def factor(self, x64: torch.Tensor, key: str) -> float:
        """Input factor of the probe ``key`` ("unit", "large", "huge")."""
        return 1.0 if key == "unit" else self.large_factor(x64, _SCALES[key])

    def large_factor(self, x64: torch.Tensor, target: float = LARGE_LOGIT, cache: bool = True) -> float:
        """Input factor ``c`` that brings the largest logit to about ``target`` (cached for the
        probes kept in ``self.xs``)."""
        if self.m is None:
            return math.sqrt(target)
        key = (id(x64), x64.shape, id(self.m), self.st, target)
        cache = self.__dict__.setdefault("_lf_cache", {}) if cache else {}
        if key in cache:
            return cache[key]
        L0 = max_logit(x64, self.m, self.st)
        if L0 <= 0:
            return 8.0
        c = math.sqrt(target / L0)  # logits are quadratic in x (approximately, with biases)
        cache[key] = c
        return c

    # -- the reference ---------------------------------------------------------------------------
    def reference(self, x64: torch.Tensor, dtype=torch.float64, st: Structure | None = None,
                  m: Mapping | None = None) -> torch.Tensor:
        m = m or self.m
        return reference_attention(x64.to(self.device), m, st or self.st, dtype)

    def logit_max(self, x64: torch.Tensor) -> float:
        return max_logit(x64.to(self.device), self.m, self.st) if self.m is not None else 1.0

    def plain_errors(self, x64: torch.Tensor, ref64: torch.Tensor) -> dict[str, float]:
        """Relative error of the plain reference in float32 (and a declared half precision)."""
        errs = {}
        dts = [torch.float32]
        if self.compute_dtype is not None and self.compute_dtype not in (torch.float32, torch.float64):
            dts.append(self.compute_dtype)
        with torch.no_grad():
            for dt in dts:
                try:
                    errs[dtype_name(dt)] = _rel(self.reference(x64, dt), ref64)
                except RuntimeError:  # a half-precision op missing on this device
                    errs[dtype_name(dt)] = float("nan")
        return errs

    # -- forward on every length -----------------------------------------------------------------
    def forward_all(self, describe: Callable[[BaseException], str], tick: Callable[[float], None] = lambda f: None
                    ) -> list[str]:
        """Run the object on every probe length; keep the outputs; return shape problems (one line
        each). Lengths at which it raises are kept in ``self.raised``."""
        problems = []
        for i, T in enumerate(self.lengths):
            x64 = self.probe(T)
            try:
                _, out, w = self.run(x64)
            except Exception as exc:  # the user's code
                self.raised[T] = describe(exc)
                continue
            want = (self.B, T, self.D)
            if not isinstance(out, torch.Tensor):
                problems.append(f"returned {type(out).__name__} at T = {T}, expected a tensor of shape {want}")
                continue
            if tuple(out.shape) != want:
                problems.append(f"returned shape {tuple(out.shape)} for a {want} input; expected {want} "
                                "(batch, T, D)")
                continue
            if out.dtype != self.pdt:
                problems.append(f"returned {dtype_name(out.dtype)} for a {dtype_name(self.pdt)} input "
                                "(cast inside the module?)")
                continue
            if str(out.device).split(":")[0] != str(self.device).split(":")[0]:
                problems.append(f"returned a tensor on {out.device} for an input on {self.device}")
                continue
            self.xs[T], self.outs[T] = x64, out.detach().to(device="cpu", dtype=torch.float64, copy=True)
            self.weights = getattr(self, "weights", {})
            self.weights[T] = w
            tick((i + 1) / len(self.lengths))
        return problems

    def reference_out(self, x64: torch.Tensor) -> torch.Tensor:
        """The reference on ``x64``: the mapped reference in float64, or the other implementation."""
        with torch.no_grad():
            if self.against is not None:
                o, _ = call(self.against, x64.to(dtype=self.pdt, device=self.device))
                return o.detach().to(device="cpu", dtype=torch.float64, copy=True)
            return self.reference(x64).detach().to(device="cpu", dtype=torch.float64, copy=True)

    def tol_at(self, T: int, key: str, factor: float = FACTOR_FORWARD) -> tuple[float, str]:
        """The tolerance at length ``T`` (``key`` "unit" or "large") under the working precision."""
        p = self.precision.dtype if self.precision else self.pdt
        L = self.L.get((T, key), 1.0 if key == "unit" else _SCALES[key])
        if self.m is None and p != torch.float64:  # no plain reference: the analytic bound at p
            u = unit_roundoff(p)
            tol = 16 * u * (3 * self.D + T) * max(1.0, L)
            return tol, (f"{dtype_name(p)} working precision, no mapped reference to run in it: 16·u·(3D+T)·max(1, "
                         f"|logit|max) = 16·{u:.3g}·{3 * self.D + T}·{max(1.0, L):.3g} = {tol:.3g}")
        tol, just = tolerance(self.e_plain.get((T, key, dtype_name(p)), 0.0), self.D, T, L, p, factor)
        if self.against is not None:
            return 2 * tol, "2 × (each implementation's own bound): " + just
        return tol, just

    # -- agreement with the reference --------------------------------------------------------------
    def prop_matches(self, name: str = "matches_reference", how: str = "") -> Property:
        """The module against the reference at every length, at unit and large logits, judged by the
        precision rule (the working precision found here unless declared)."""
        rows = []
        for T, out in self.outs.items():
            x64 = self.xs[T]
            for key in ("unit", "large", "huge"):
                if key != "unit" and (T < 2 or T not in self._large_lengths()):
                    continue
                c = self.factor(x64, key)
                xk = x64 * c
                try:
                    o = out if key == "unit" else self.run(xk)[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
                    r = self.reference_out(xk)
                except Exception as exc:  # the user's code at large inputs: a finding below
                    rows.append({"T": T, "probe": key, "error": float("inf"), "raised": f"{exc_text(exc)}"})
                    continue
                self.L[(T, key)] = self.logit_max(xk)
                if self.m is not None:
                    with torch.no_grad():
                        r64 = self.reference(xk).detach().to(device="cpu", dtype=torch.float64, copy=True)
                    for dn, e in self.plain_errors(xk, r64).items():
                        self.e_plain[(T, key, dn)] = e
                rows.append({"T": T, "probe": key, "error": _rel(o, r), "max_logit": self.L[(T, key)]})
        if not rows:
            return _skip(name, "no length ran", central=True)
        # the precision judged: declared, else the input's; never found by probing (a module computing below
        # it is its own finding, precision_as_declared, not a tolerance widened until it passes)
        if self.compute_dtype is not None:
            self.precision = Precision(self.compute_dtype, f"declared: --compute-dtype {dtype_name(self.compute_dtype)}")
        else:
            self.precision = Precision(self.pdt, f"undeclared: the input's precision {dtype_name(self.pdt)}")
        worst, worst_ratio = None, -1.0
        for r in rows:
            tol, just = self.tol_at(r["T"], r["probe"])
            r["tolerance"] = tol
            ratio = r["error"] / tol if math.isfinite(r["error"]) else float("inf")
            if ratio > worst_ratio:
                worst, worst_ratio, wjust = r, ratio, just
        bad = [r for r in rows if not r["error"] <= r["tolerance"]]
        detail = (how + "; " if how else "") + (f"worst at T = {worst['T']} ({worst['probe']} logits, largest "
                                                f"{worst.get('max_logit', float('nan')):.3g})")
        if bad:
            Ts = sorted({r["T"] for r in bad})
            detail += f"; beyond tolerance at T = {', '.join(map(str, Ts))}" + (
                " (large logits only)" if all(r["probe"] != "unit" for r in bad) else "")
            raised = [r for r in bad if "raised" in r]
            if raised:
                detail += f"; raised at large logits: {raised[0]['raised']}"
        detail += f"; working precision {self.precision.name} ({self.precision.how})"
        return _judge(name, worst["error"], worst["tolerance"], wjust, detail, central=True,
                      per_length=[{k: v for k, v in r.items() if k != "raised"} for r in rows],
                      working_precision=self.precision.name)

    def _large_lengths(self) -> list[int]:
        Ts = [T for T in self.outs if T >= 2]
        if not Ts:
            return []
        pick = {Ts[0], Ts[len(Ts) // 2], Ts[-1]}
        return sorted(pick)

    # -- which inputs move which outputs -----------------------------------------------------------
    def _positions(self, T: int, n_max: int = 40) -> list[int]:
        if T <= n_max:
            return list(range(T))
        g = self.gen(T * 31 + 5)
        pts = {0, 1, 2, 3, T - 1, T - 2, T // 2}
        for b in (8, 16, 32, 64, 128, 256, 512):
            for k in (b - 1, b, b + 1):
                if 0 <= k < T:
                    pts.add(k)
        extra = torch.randperm(T, generator=g)[:8].tolist()
        pts.update(extra)
        return sorted(pts)

    def dependence(self, T: int, key: str):
        """See :func:`numerics.attention_structural.dependence`."""
        return attention_structural.dependence(self, T, key)

    def prop_mask(self) -> list[Property]:
        """See :func:`numerics.attention_structural.prop_mask` (exact: no forward tolerance)."""
        return attention_structural.prop_mask(self)

    def prop_prefix(self) -> Property:
        """Causal: the first ``t`` outputs on ``x`` equal the outputs on ``x[:, :t]`` (catches padding
        of a last chunk and position bugs)."""
        name = "prefix_consistency"
        worst = None
        raised: dict[int, str] = {}
        for T in self.outs:
            if T < 3:
                continue
            cuts = [t for t in self._positions(T, 12) if 1 <= t < T]
            if len(cuts) > 12:
                g = self.gen(T + 99)
                keep = {1, T - 1} | set(cuts[i] for i in torch.randperm(len(cuts), generator=g)[:10].tolist())
                cuts = sorted(keep)
            tol, just = self.tol_at(T, "unit")
            for t in cuts:
                try:
                    o = self.run(self.xs[T][:, :t])[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
                except Exception as exc:
                    # a length the module does not run at: reported by runs_at_every_length when it is a
                    # probe length, named here otherwise; the prefix is judged at the other cuts
                    raised.setdefault(t, f"{exc_text(exc)}")
                    continue
                if not torch.isfinite(o).all() and torch.isfinite(self.outs[T][:, :t]).all():
                    raised.setdefault(t, "NaN/inf outputs (see finite_output)")
                    continue
                e = _rel(o, self.outs[T][:, :t], float(self.outs[T].abs().max()))
                r = e / (2 * tol) if math.isfinite(e) else float("inf")
                if worst is None or r > worst[0]:
                    worst = (r, e, 2 * tol, just, T, t)
        note = ""
        if raised:
            t0 = min(raised)
            note = (f"; the module raised or gave NaN/inf at cut length{'s' if len(raised) > 1 else ''} "
                    f"{', '.join(map(str, sorted(raised)))} ({raised[t0]}), not judged there")
        # a cut length that is not a probe length is a finding of its own: nothing else reports it
        new = sorted(t for t in raised if t not in self.raised and t not in self.nonfinite_lengths)
        if new:
            return Property(name, "fail", float("inf"), 0.0, "every cut length must run and be finite",
                            f"the module raised or gave NaN/inf at cut length{'s' if len(new) > 1 else ''} "
                            f"{', '.join(map(str, new))} ({raised[new[0]]}), which the probe lengths did not show "
                            "(--seq-len chooses them)", {}, True)
        if worst is None:
            return _skip(name, "no length ≥ 3 ran" + (" at any cut" + note if raised else ""), True)
        _, e, tol, just, T, t = worst
        detail = (f"outputs 0…{t - 1} of a length-{T} probe against the same probe cut to length {t}: relative "
                  f"difference {e:.3g}" + ("; the prefix's outputs depend on the length (chunk padding, or positions "
                                          "counted from the end?)" if not e <= tol else "") + note)
        return _judge(name, e, tol, "2 × the forward tolerance (each side within it of the reference): " + just,
                      detail, central=True)

    def prop_batch(self) -> Property:
        """See :func:`numerics.attention_structural.prop_batch` (every sample, exact)."""
        return attention_structural.prop_batch(self)

    def prop_batch_size(self) -> Property:
        """See :func:`numerics.attention_structural.prop_batch_size`."""
        return attention_structural.prop_batch_size(self)

    def prop_permutation(self) -> Property:
        """``f(x[:, π]) = f(x)[:, π]`` (no causal mask, window or positions)."""
        name = "permutation_equivariance"
        worst = None
        for T in self._large_lengths():
            g = self.gen(T + 7)
            perm = torch.randperm(T, generator=g)
            while bool((perm == torch.arange(T)).all()):
                perm = torch.randperm(T, generator=g)
            try:
                o = self.run(self.xs[T][:, perm])[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
            except Exception as exc:
                return Property(name, "fail", float("inf"), 0.0, "must run", f"raised {exc_text(exc)}")
            e = _rel(o, self.outs[T][:, perm])
            tol, just = self.tol_at(T, "unit")
            if worst is None or (e / tol if math.isfinite(e) else float("inf")) > worst[0]:
                worst = (e / tol if math.isfinite(e) else float("inf"), e, tol, just, T)
        if worst is None:
            return _skip(name, "no length ≥ 2 ran")
        _, e, tol, just, T = worst
        return _judge(name, e, tol, just, f"tokens permuted at T = {T}" + (
            "; not equivariant: positional information or a mask? (declare it: --positional, --causal, --window)"
            if not e <= tol else ""))

    # -- the logit scale ---------------------------------------------------------------------------
    def prop_scale(self) -> Property:
        """Fit the logit scale ``s`` (instead of ``1/√d_k``) that best matches the module and compare
        ``s·√d_k`` with 1; the tolerance is the output tolerance over the outputs' sensitivity to
        ``log s``."""
        name = "scale_1_over_sqrt_dk"
        Ts = [T for T in self.outs if T >= 2]
        if not Ts:
            return _skip(name, "no length ≥ 2 ran", True)
        T = min(Ts, key=lambda t: abs(t - 17))
        x, od = self.xs[T], self.outs[T]
        m = self.m
        dk = m.d_k
        declared = self.st.scale  # --scale: the factor declared instead of 1/√d_k
        s0 = declared if declared is not None else 1 / math.sqrt(dk)

        def out_at(ls: float) -> torch.Tensor:
            with torch.no_grad():
                return self.reference(x, st=replace(self.st, scale=math.exp(ls))).double().cpu()

        def loss(ls: float) -> float:
            return float((out_at(ls) - od).norm())

        grid = [math.log(s0) + g for g in torch.linspace(math.log(1e-2), math.log(1e2), 41).tolist()]
        vals = [loss(g) for g in grid]
        ls = grid[min(range(len(vals)), key=vals.__getitem__)]
        h = 1e-5
        J = None
        for _ in range(40):  # Gauss-Newton on log s (central-difference Jacobian: exact at a zero residual)
            r = out_at(ls) - od
            J = (out_at(ls + h) - out_at(ls - h)) / (2 * h)
            jj = float((J * J).sum())
            if jj == 0:
                break
            step = float((J * r).sum()) / jj
            step = max(min(step, 1.0), -1.0)
            ls -= step
            if abs(step) < 1e-14:
                break
        if J is None:
            J = (out_at(ls + h) - out_at(ls - h)) / (2 * h)
        s_fit = math.exp(ls)
        err = abs(s_fit / s0 - 1)
        out_tol, _ = self.tol_at(T, "unit")
        sens = float(J.norm() / od.norm().clamp_min(1e-300))
        tol = out_tol * math.sqrt(od.numel()) / max(sens, 1e-300)
        r_rel = _rel(out_at(ls), od)
        if not r_rel <= max(1e3 * out_tol, 1e-6):
            return _skip(name, f"no logit scale makes the outputs match the reference (relative residual {r_rel:.3g} "
                               f"at the best s = {s_fit:.4g}): the difference is not (only) the scale", True)
        r0 = _rel(out_at(math.log(s0)), od)
        if r_rel > out_tol and r_rel > 0.5 * r0:
            # fitting the scale leaves the outputs beyond tolerance and removes less than half of the
            # difference: something else differs (a leak, a cap, a precision), and the fitted scale
            # only absorbs part of it, so it says nothing about the scale
            return _skip(name, f"the difference from the reference is not the logit scale: the best-fitting s = "
                               f"{s_fit:.6g} (s·√d_k = {s_fit * math.sqrt(dk):.6g}) only lowers the relative error "
                               f"from {r0:.3g} to {r_rel:.3g} (tolerance {out_tol:.3g}); see matches_reference", True)
        ratio = s_fit * math.sqrt(dk)
        H = m.heads
        if declared is not None:
            what = (f"scale is the declared {declared:.6g} (--scale)" if err <= tol else
                    f"scale differs from the declared {declared:.6g} (--scale): s/declared = {s_fit / declared:.6g}")
        elif abs(s_fit - 1) < 1e-3 and dk > 1:
            what = "missing 1/√d_k (s ≈ 1)"
        elif err > tol and ratio > 0:
            what = _scale_words(ratio, H, dk)
        elif err > tol:
            what = "scale differs from 1/√d_k"
        else:
            what = "scale is 1/√d_k"
        detail = f"best-fitting scale s = {s_fit:.6g}, s·√d_k = {ratio:.6g} (d_k = {dk}, T = {T}); {what}"
        return _judge(name, err, tol, f"output tolerance {out_tol:.2g} × √(#outputs) / relative sensitivity of the "
                                      f"outputs to log s ({sens:.3g}) = {tol:.2g}", detail, central=True,
                      s_fit=s_fit, d_k=dk)

    # -- gradients -----------------------------------------------------------------------------
    def prop_gradients(self) -> Property:
        """Gradients with respect to the input and, where weights are mapped, the module's
        parameters, against the reference's autograd gradients (the precision rule with factor 3)."""
        name = "gradients_match_reference" if self.against is None else "gradients_match_against"
        if self.m is None and self.against is None:
            return _skip(name, "no mapped reference to differentiate (declare the projections: --mapping)")
        Ts = [T for T in self.outs if T >= 2]
        if not Ts:
            return _skip(name, "no length ≥ 2 ran")
        Ts = sorted({min(Ts, key=lambda t: abs(t - 17)), max(t for t in Ts if t <= 257)})
        named = [(n, p) for n, p in self.f.named_parameters() if p.requires_grad] if isinstance(
            self.f, torch.nn.Module) else []
        params = [p for _, p in named]
        p_dt = self.precision.dtype if self.precision else self.pdt
        worst = None
        for T in Ts:
            x64 = self.xs[T]
            g = torch.Generator().manual_seed(self.seed * 31 + T)
            cot = torch.randn(self.B, T, self.D, generator=g, dtype=torch.float64)
            try:
                with torch.enable_grad():
                    xm, out, _ = self.run(x64, grad=True)
                    if not isinstance(out, torch.Tensor) or not out.requires_grad:
                        if params:  # parameters that train, an output no gradient can reach them through
                            return Property(name, "fail", float("inf"), 0.0, "gradients must reach the parameters",
                                            f"the output does not require grad although {len(params)} parameter(s) "
                                            "do (computed under no_grad, or detached): no gradient reaches the "
                                            "input or the parameters", {}, False)
                        return _skip(name, "the output does not require grad (computed without autograd): nothing "
                                           "to compare")
                    self.grad_outs[T] = out.detach().to(device="cpu", dtype=torch.float64, copy=True)
                    gm = torch.autograd.grad(out, [xm] + params, cot.to(out.dtype).to(out.device), allow_unused=True)
                if params and all(a is None for a in gm):
                    return Property(name, "fail", float("inf"), 0.0, "gradients must reach the parameters",
                                    f"the output requires grad but no gradient reaches the input or any of the "
                                    f"{len(params)} parameter(s) (a new leaf: .detach().requires_grad_(), "
                                    "nn.Parameter(…)): training through it updates nothing", {}, False)
            except Exception as exc:
                # torch.autograd.grad refuses what .backward() runs (reentrant torch.utils.checkpoint): the
                # module's gradients through .backward(), from a fresh forward pass
                gm = self._grads_by_backward(x64, params, cot)
                if gm is None:
                    # a backward that raises (FlexAttention has none on CPU) is not a wrong gradient:
                    # the property is skipped with the exception, and the verdict says so
                    return unavailable(name, self.device, f"{exc_text(exc)}", T, unsupported(exc))
            labels = ["input"] + [f"parameter {n}" for n, _ in named]
            if self.against is not None:
                try:
                    with torch.enable_grad():
                        xa = x64.to(dtype=self.pdt, device=self.device).requires_grad_(True)
                        oa, _ = call(self.against, xa, grad=True)
                        ga = torch.autograd.grad(oa, [xa], cot.to(oa.dtype).to(oa.device), allow_unused=True)
                except Exception as exc:
                    return unavailable(name, self.device, f"{exc_text(exc)} (in --against)", T)
                pairs = [("input", gm[0], ga[0], None)]
            else:
                gr, gp = [], []
                for dt, store in ((torch.float64, gr), (p_dt, gp)):
                    if dt == torch.float64 and store is gp:
                        gp.extend(gr)
                        continue
                    with torch.enable_grad():
                        xr = x64.clone().to(self.device).requires_grad_(True)
                        r = reference_attention(xr, self.m, self.st, dt)
                        # retain_graph: a mapping may hold weights computed from the parameters once
                        # (m.q.weight * 1.0, a reshaped fused weight), whose graph every backward shares
                        store.extend(torch.autograd.grad(r, [xr] + params, cot.to(dt).to(self.device),
                                                         allow_unused=True, retain_graph=True))
                pairs = [(lab, a, b, c) for lab, a, b, c in zip(labels, gm, gr, gp)]
            L = self.L.get((T, "unit"), 1.0)
            G = max([float(b.detach().abs().max()) for _, a, b, _ in pairs if a is not None and b is not None
                     and b.numel()] + [1e-300])  # gradients are compared relative to the largest entry
            for lab, a, b, c in pairs:
                if a is None or b is None:
                    continue
                e = _rel(a, b, G)
                e_plain = _rel(c, b, G) if c is not None and p_dt != torch.float64 else 0.0
                tol, just = tolerance(e_plain, self.D, T, 2 * L, p_dt, FACTOR_GRAD)
                if self.against is not None:
                    tol, just = 2 * tol, "2 × each implementation's bound: " + just
                r_ = e / tol if math.isfinite(e) else float("inf")
                if worst is None or r_ > worst[0]:
                    worst = (r_, e, tol, just, T, lab)
        if worst is None:
            return _skip(name, "no gradient reached both the module and the reference")
        _, e, tol, just, T, lab = worst
        n_par = sum(1 for p in params)
        detail = (f"input gradient{' and ' + str(n_par) + ' parameter gradients' if n_par and self.against is None else ''}"
                  f" at T = {', '.join(map(str, Ts))}; worst: {lab} at T = {T}"
                  + ("; the gradient differs from the reference's autograd gradient (if the forward pass matches: a "
                     "custom backward?)" if not e <= tol else ""))
        return _judge(name, e, tol, just + " (B64 doubled for the backward pass; errors relative to the largest "
                                           "gradient entry at that length)", detail)

    def prop_grad_mode_forward(self) -> Property:
        """The outputs the gradient pass computed (autograd enabled, the input requiring grad: the
        training path) against the reference, as ``matches_reference`` judges the no-grad outputs at
        unit logits: a module that branches on ``torch.is_grad_enabled()`` or ``x.requires_grad`` is
        judged on both paths."""
        name = "matches_reference_with_grad" if self.against is None else "matches_against_with_grad"
        if not self.grad_outs:
            return _skip(name, "no output was computed with autograd enabled (see the gradient property)")
        for T in self.outs:  # every probed length, not only those the gradients were compared at
            if T in self.grad_outs:
                continue
            try:
                with torch.enable_grad():
                    _, out, _ = self.run(self.xs[T], grad=True)
                if isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(self.outs[T].shape):
                    self.grad_outs[T] = out.detach().to(device="cpu", dtype=torch.float64, copy=True)
            except Exception:  # a length the module cannot run with autograd: judged by the gradient property
                continue
        worst = None
        for T, o in self.grad_outs.items():
            ref = self.reference_out(self.xs[T])
            e = _rel(o, ref)
            tol, just = self.tol_at(T, "unit")
            r = e / tol if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, tol, just, T, _rel(o, self.outs[T]) if T in self.outs else float("nan"))
        _, e, tol, just, T, e_nograd = worst
        if not e <= tol and not e_nograd > tol:  # the same outputs as without autograd: matches_reference judges them
            return _skip(name, f"the outputs computed with autograd enabled equal those without it (difference "
                               f"{e_nograd:.3g} ≤ {tol:.3g}): judged by "
                               f"{'matches_reference' if self.against is None else 'matches_against'}")
        detail = (f"the outputs computed with autograd enabled (the input requiring grad, as in training) at T = "
                  f"{', '.join(map(str, sorted(self.grad_outs)))}; worst at T = {T}")
        if not e <= tol:
            detail += (f"; they differ from the same module's outputs without autograd by {e_nograd:.3g}: the module "
                       "computes something else when gradients are on (a branch on torch.is_grad_enabled() or "
                       "x.requires_grad?)" if e_nograd > tol else "")
        return _judge(name, e, tol, just, detail, central=True)

    def prop_other_paths(self) -> Property | None:
        """Two more ways the module is called in practice, on a copy of it: in training mode
        (``.train()``, when it holds no active dropout, whose randomness would decide nothing) and
        on a non-contiguous view of the same input (kernels that fall back on ``x.is_contiguous()``).
        ``None`` when both give the no-grad eval outputs; else the differing path's outputs against
        the reference, under ``matches_reference``'s rule."""
        name = "matches_reference_on_other_paths" if self.against is None else "matches_against_on_other_paths"
        paths = []
        if isinstance(self.f, torch.nn.Module) and not _active_dropout(self.f):
            try:
                g = copy.deepcopy(self.f).train()
                paths.append(("training mode (.train())", g, False))
            except Exception:
                pass
        paths.append(("a non-contiguous input (a transposed view)", self.f, True))
        worst, differs = None, []
        for label, g, noncontig in paths:
            for T in self.outs:
                x = self.xs[T].to(dtype=self.pdt, device=self.device)
                x = x.transpose(1, 2).contiguous().transpose(1, 2) if noncontig else x.clone()
                try:
                    o, _ = call(g, x)
                    o = o.detach().to(device="cpu", dtype=torch.float64, copy=True)
                except Exception:
                    continue
                if not isinstance(o, torch.Tensor) or tuple(o.shape) != tuple(self.outs[T].shape):
                    continue
                tol, just = self.tol_at(T, "unit")
                if _rel(o, self.outs[T]) <= tol:
                    continue
                if label not in differs:
                    differs.append(label)
                e = _rel(o, self.reference_out(self.xs[T]))
                r = e / tol if math.isfinite(e) else float("inf")
                if worst is None or r > worst[0]:
                    worst = (r, e, tol, just, T, label)
        if worst is None:
            return None
        _, e, tol, just, T, label = worst
        return _judge(name, e, tol, just, f"the outputs on {' and on '.join(differs)} differ from the eval-mode, "
                      f"contiguous ones; against the reference: worst on {label} at T = {T}", central=True)

    def prop_inference_mode(self) -> Property | None:
        """The module under ``torch.inference_mode()`` (the path serving code takes) on a copy of it
        (inference tensors it caches must not reach the other properties' autograd), at every probed
        length: ``None`` when its outputs equal the no-grad ones (``matches_reference`` judged them);
        else those outputs against the reference, under ``matches_reference``'s rule."""
        name = "matches_reference_in_inference_mode" if self.against is None else "matches_against_in_inference_mode"
        g = self.f
        if isinstance(self.f, torch.nn.Module):
            try:
                g = copy.deepcopy(self.f)
            except Exception:
                return None
        outs = {}
        for T in self.outs:
            x = self.xs[T].to(dtype=self.pdt, device=self.device).clone(memory_format=torch.contiguous_format)
            try:
                with torch.inference_mode():
                    o, _ = call(g, x)
                    o = o.detach().to(device="cpu", dtype=torch.float64, copy=True)
            except Exception:  # a path the module does not support: not this property's finding
                continue
            if isinstance(o, torch.Tensor) and tuple(o.shape) == tuple(self.outs[T].shape):
                outs[T] = o.clone()
        worst, differs = None, False
        for T, o in outs.items():
            tol, just = self.tol_at(T, "unit")
            if not _rel(o, self.outs[T]) <= tol:
                differs = True
            e = _rel(o, self.reference_out(self.xs[T]))
            r = e / tol if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, tol, just, T)
        if not differs or worst is None:
            return None
        _, e, tol, just, T = worst
        return _judge(name, e, tol, just, f"the outputs under torch.inference_mode() at T = "
                      f"{', '.join(map(str, sorted(outs)))} differ from those under no_grad; against the reference: "
                      f"worst at T = {T} (a branch on torch.is_inference_mode_enabled()?)", central=True)

    def _grads_by_backward(self, x64: torch.Tensor, params: list, cot: torch.Tensor) -> tuple | None:
        """The gradients of ``<out, cot>`` with respect to the input and ``params`` through
        ``.backward()`` (the parameters' own ``.grad`` restored afterwards), or None when that raises too."""
        saved = [p.grad for p in params]
        try:
            for p in params:
                p.grad = None
            with torch.enable_grad():
                xm, out, _ = self.run(x64, grad=True)
                if not isinstance(out, torch.Tensor) or not out.requires_grad:
                    return None
                out.backward(cot.to(out.dtype).to(out.device))
            return tuple([xm.grad] + [p.grad for p in params])
        except Exception:
            return None
        finally:
            for p, g in zip(params, saved):
                p.grad = g

    # -- hints ---------------------------------------------------------------------------------
    #: The properties a change of declaration can change, rerun before a hint is printed.
    RERUNNABLE = ("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk", "causal_no_future_leak",
                  "window_respected", "prefix_consistency", "batch_independence")

    def rerun(self, names: list[str], st: Structure | None = None, m: Mapping | None = None,
              compute_dtype: torch.dtype | None | str = "same") -> list[Property]:
        """``matches_reference`` at every probed length and logit scale, then those of ``names``
        that a declaration changes (:attr:`RERUNNABLE`), rerun under another declaration: the
        structure ``st``, the weights ``m`` and the working precision ``compute_dtype`` (``"same"``:
        as declared; ``None``: found by probing). The module's outputs at unit logits are reused;
        the large-logit probes are rerun (their input factor depends on the declaration). The probe
        itself is left as it was."""
        q = copy.copy(self)
        q.__dict__.pop("_lf_cache", None)
        q.st, q.m = st or self.st, m or self.m
        if compute_dtype != "same":
            q.compute_dtype = compute_dtype
        q.precision, q.e_plain, q.L = None, {}, {}
        props = [q.prop_matches()]
        done = {"matches_reference"}
        for nm in names:
            if nm in done or nm not in self.RERUNNABLE:
                continue
            if nm in ("causal_no_future_leak", "window_respected"):
                done.update(("causal_no_future_leak", "window_respected"))
                props.extend(q.prop_mask())  # the mask the new declaration has (none: nothing to check)
            elif nm == "prefix_consistency":
                if q.st.causal:
                    props.append(q.prop_prefix())
            elif nm == "gradients_match_reference":
                props.append(q.prop_gradients())
            elif nm == "scale_1_over_sqrt_dk":
                props.append(q.prop_scale())
            elif nm == "batch_independence":
                props.append(q.prop_batch())
            done.add(nm)
        return props

    def variant_errors(self, variants: list[tuple[str, Structure, Mapping | None]],
                       precision: torch.dtype | None = None) -> list[tuple[float, float, str]]:
        """``(error/tolerance, error, label)`` of each variant of the declaration, best first, at a
        middle length (unit logits) and the largest large-logit probe; tolerances at the working
        precision, or at ``precision`` when given (a float32-internal module whose declaration is
        wrong: no working precision could be found from the declared reference)."""
        Ts = [T for T in self.outs if T >= 2]
        if not Ts or self.m is None:
            return []
        T = min(Ts, key=lambda t: abs(t - 17))
        TL = self._large_lengths()[-1] if self._large_lengths() else T
        saved = self.precision
        if precision is not None:
            self.precision = Precision(precision, "assumed for a hint")
        outs: dict = {}  # the module's outputs do not depend on the variant
        res = []
        try:
            for label, st, m in variants:
                worst = 0.0
                err = 0.0
                try:
                    for TT, key in ((T, "unit"), (TL, "large"), (TL, "huge")):
                        x = self.xs[TT]
                        c = self.factor(x, key)
                        if (TT, key) not in outs:
                            outs[(TT, key)] = (self.outs[TT] if key == "unit"
                                               else self.run(x * c)[1].detach().to(device="cpu", dtype=torch.float64, copy=True))
                        o = outs[(TT, key)]
                        with torch.no_grad():
                            r = reference_attention((x * c).to(self.device), m or self.m, st,
                                                    torch.float64).double().cpu()
                        e = _rel(o, r)
                        tol, _ = self.tol_at(TT, key)
                        if not e / tol <= worst:
                            worst, err = e / tol if math.isfinite(e) else float("inf"), e
                except Exception:
                    continue
                res.append((worst, err, label))
        finally:
            self.precision = saved
        return sorted(res)


# ------------------------------------------------------------------------------------------------
# key-padding masks


MASK_CONVENTIONS = ("keep", "drop", "additive")


def make_mask(valid: torch.Tensor, convention: str, dtype: torch.dtype) -> torch.Tensor:
    """The module's mask for ``valid`` ``(B, T)`` (True: a real key): ``keep`` (True attends),
    ``drop`` (True is padding, as torch's ``key_padding_mask``), ``additive`` (0 or −∞, float)."""
    if convention == "keep":
        return valid.clone()
    if convention == "drop":
        return ~valid
    return torch.zeros(valid.shape, dtype=dtype).masked_fill(~valid, float("-inf"))


class SelfMHA(torch.nn.Module):
    """A bare ``nn.MultiheadAttention`` used as self-attention: ``m(x, x, x, attn_mask=mask)`` with
    the declared mask (``allowed``: a function of T giving the (T, T) bool matrix of allowed pairs,
    or None), in ``(T, batch, D)`` when the module is not ``batch_first`` (its documented layout)."""

    def __init__(self, inner: torch.nn.MultiheadAttention, allowed: Callable[[int], torch.Tensor] | None):
        super().__init__()
        self.inner, self.allowed = inner, allowed
        self.embed_dim = inner.embed_dim

    def forward(self, x):
        T = x.shape[1]
        mask = None if self.allowed is None else ~self.allowed(T).to(x.device)
        xx = x if self.inner.batch_first else x.transpose(0, 1)
        o = self.inner(xx, xx, xx, attn_mask=mask, need_weights=False)[0]
        return o if self.inner.batch_first else o.transpose(0, 1)


class WithMask(torch.nn.Module):
    """``f(x, mask)`` presented as ``g(x)``: every key valid unless :attr:`valid` is set."""

    def __init__(self, inner: Any, convention: str):
        super().__init__()
        self.inner, self.convention, self.valid = inner, convention, None

    def forward(self, x):
        valid = self.valid if self.valid is not None else torch.ones(x.shape[:2], dtype=torch.bool)
        return self.inner(x, make_mask(valid, self.convention, x.dtype).to(x.device))


def prop_key_padding(probe: "AttentionProbe", w: "WithMask") -> list[Property]:
    """With a key-padding mask: outputs at real positions match the reference with those keys
    masked and do not move when the padded tokens are redrawn (``key_padding_respected``, central);
    a sample whose keys are all padding gives finite outputs (``fully_masked_rows_finite``)."""
    worst = None
    nan_rows = None
    left = bool(probe.st.causal)
    for T in probe._large_lengths():
        if T < 3:
            continue
        x = probe.xs[T]
        valid = torch.ones(probe.B, T, dtype=torch.bool)
        for b in range(probe.B):
            n_pad = max(1, (T * (b + 1)) // (2 * probe.B + 1))
            if left:  # a causal module: padding before the real tokens (a decoder's left padding), where the
                valid[b, :n_pad] = False  # causal mask does not hide it; at the end it would test nothing
            else:
                valid[b, T - n_pad:] = False
        for key in ("unit", "huge"):
            c = probe.factor(x, key)
            xk = x * c
            x2 = xk.clone()
            x2[~valid] = probe.probe(T, salt=41)[~valid] * c * 3
            w.valid = valid
            try:
                o1 = attention_structural.kept(probe.run(xk)[1])
                jit = attention_structural.jitter(probe, xk, o1)
                o2 = attention_structural.kept(probe.run(x2)[1])
            except Exception as exc:
                w.valid = None
                return [Property("key_padding_respected", "fail", float("inf"), 0.0, "must run",
                                 f"raised {exc_text(exc)} with a padding mask", {}, True)]
            finally:
                w.valid = None
            q = valid  # queries at real positions
            e_move = _rel(o2[q], o1[q], float(o1[q].abs().max()))
            t_move, j_move = attention_structural.structural_tolerance(jit, "redrawing a padded key")
            e_ref = float("nan")
            if probe.m is not None:
                with torch.no_grad():
                    r = reference_attention(xk.to(probe.device), probe.m, probe.st, torch.float64, key_valid=valid)
                e_ref = _rel(o1[q], r.double().cpu()[q])
            tol, just = probe.tol_at(T, key if key != "huge" or (T, "huge") in probe.L else "unit")
            # each part against its own tolerance: the move exactly (structural), the reference by precision
            parts = [(e_move, t_move, j_move)] + ([(e_ref, tol, just)] if math.isfinite(e_ref) else [])
            ratio = lambda e, t: (e / t if t > 0 else (0.0 if e == 0 else float("inf"))) if math.isfinite(e) \
                else float("inf")  # noqa: E731
            e, tol, just = max(parts, key=lambda p_: ratio(p_[0], p_[1]))
            if worst is None or not ratio(e, tol) <= worst[0]:
                worst = (ratio(e, tol), e, tol, just, T, key, e_move, e_ref)
        # one sample with every key padded
        allpad = torch.ones(probe.B, T, dtype=torch.bool)
        allpad[0] = False
        w.valid = allpad
        try:
            o = probe.run(x)[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
            nan_rows = int((~torch.isfinite(o[0])).any(-1).sum())
        except Exception:
            nan_rows = -1
        finally:
            w.valid = None
    if worst is None:
        return [_skip("key_padding_respected", "no probe length ≥ 3", True)]
    _, e, tol, just, T, key, e_move, e_ref = worst
    detail = (f"keys padded at the {'start (left padding: a causal mask hides nothing there)' if left else 'end'} of "
              f"each sample (T = {T}, {key} logits): outputs at real positions move by "
              f"{e_move:.3g} when the padded tokens are redrawn" + (f"; against the reference with those keys masked "
                                                                    f"{e_ref:.3g}" if math.isfinite(e_ref) else "")
              + ("; the mask convention may be inverted (--mask-convention keep/drop)" if not e <= tol else ""))
    props = [_judge("key_padding_respected", e, tol, just, detail, central=True)]
    if nan_rows is not None:
        props.append(_judge("fully_masked_rows_finite", float(max(nan_rows, 0)) if nan_rows >= 0 else float("inf"),
                            0.0, "none may be NaN/inf (exact)",
                            "a sample whose keys are all padding: " + (
                                "all outputs finite" if nan_rows == 0 else
                                (f"{nan_rows} of its rows NaN/inf (softmax over −∞ only)" if nan_rows > 0
                                 else "the call raised"))))
    return props


# ------------------------------------------------------------------------------------------------
# properties of single calls (kept from the single-length probe)


def prop_finite(outs: dict[int, torch.Tensor]) -> Property:
    """Every output entry is finite at every length (NaN/inf fail with their count)."""
    bad = sum(int((~torch.isfinite(o)).sum()) for o in outs.values())
    n = sum(o.numel() for o in outs.values())
    where = [T for T, o in outs.items() if not torch.isfinite(o).all()]
    return _judge("finite_output", bad / max(n, 1), 0.0, "none may be NaN/inf (exact)",
                  f"{bad} of {n} output entries are NaN/inf (at T = {', '.join(map(str, where))})" if bad
                  else "all outputs finite", central=True)


def _active_dropout(m: torch.nn.Module) -> bool:
    """Whether the module would drop anything in training mode: an ``nn.Dropout*`` with p > 0, an
    ``nn.MultiheadAttention`` with dropout > 0, or a ``dropout``-named float attribute > 0 (Hugging
    Face's ``attention_dropout``, passed to ``F.dropout`` in ``forward``)."""
    try:
        for sub in m.modules():
            if isinstance(sub, torch.nn.modules.dropout._DropoutNd) and sub.p > 0:
                return True
            if isinstance(sub, torch.nn.MultiheadAttention) and sub.dropout > 0:
                return True
            for k, v in vars(sub).items():
                if "drop" in k.lower() and isinstance(v, float) and v > 0:
                    return True
    except Exception:
        return True
    return False


def prop_weights_distribution(w: torch.Tensor, where: str, work: torch.dtype | None = None,
                              allowed: torch.Tensor | None = None) -> Property:
    """Exposed weights ``(B, H, T, T)``: rows are probability vectors (≥ 0, sum 1) over the keys the
    declared mask ``allowed`` (``(T, T)`` bool) permits — no weight on a forbidden key —, to the
    rounding of the coarser of the weights' own dtype and the module's working precision ``work`` (a
    float32 softmax returned as float64 rounds as float32)."""
    u = max(unit_roundoff(w.dtype if w.dtype.is_floating_point else torch.float64),
            unit_roundoff(work) if work is not None else 0.0)
    w = w.double().cpu()
    T = w.shape[-1]
    if not bool(torch.isfinite(w).all()):
        return _judge("weights_are_distributions", float("nan"), 4 * u * T, "finite weights",
                      f"weights {where}: NaN or inf entries")
    err_sum = float((w.sum(-1) - 1).abs().max())
    err_neg = float((-w).clamp_min(0).max())
    cols = float((w.sum(-2) - 1).abs().max())
    forbidden = 0.0
    if allowed is not None and not bool(allowed.all()):
        forbidden = float(w.masked_fill(allowed.cpu(), 0.0).abs().max())
    detail = (f"weights {where}: max |row sum − 1| = {err_sum:.3g}, most negative entry {-err_neg:.3g}"
              + (f", largest weight on a key the declared mask forbids {forbidden:.3g}" if allowed is not None
                 and not bool(allowed.all()) else "")
              + (f"; columns sum to 1 within {cols:.2g}: the softmax runs over the query axis (wrong axis)"
                 if err_sum > 1e-6 and cols < 1e-6 else ""))
    return _judge("weights_are_distributions", max(err_sum, err_neg, forbidden), 4 * u * T,
                  f"4·u·T = {4 * u * T:.3g}: rounding of a T-term sum of numbers in [0, 1] (u = {u:.3g}, the "
                  "working precision's unit roundoff)", detail)


def prop_weights_match(w: torch.Tensor, where: str, ref: torch.Tensor, ref_work: torch.Tensor | None,
                       out_tol: float, work_name: str) -> Property:
    """Exposed weights ``(B, H', T, T)`` against the reference's ``ref (B, H, T, T)`` (float64) on the
    module's weights: per head when ``H' = H``, the mean over heads when ``H' = 1 < H`` (as
    ``nn.MultiheadAttention`` averages them). Error: the largest absolute difference (weights lie in
    [0, 1]). Tolerance: the larger of the output's tolerance at this length (the weights feed the
    output) and twice the plain reference's own weights error in the working precision
    (``ref_work``), FlashAttention's factor."""
    u_w = unit_roundoff(w.dtype) if w.dtype.is_floating_point else 0.0
    w = w.double().cpu()
    H1, H = w.shape[1], ref.shape[1]
    if H1 == H:
        r, how = ref, "per head"
    elif H1 == 1:
        r, how = ref.mean(1, keepdim=True), "averaged over the heads (as nn.MultiheadAttention returns them)"
    else:
        return _skip("weights_match_reference", f"weights {where} have {H1} heads, the reference {H}: not compared")
    e_plain = float((ref_work.double().cpu() - ref).abs().max()) if ref_work is not None else 0.0
    if H1 == 1 and ref_work is not None and H > 1:
        e_plain = float((ref_work.double().cpu().mean(1, keepdim=True) - r).abs().max())
    tol = max(out_tol, 2 * e_plain, 2 * u_w)
    err = float((w - r).abs().max()) if bool(torch.isfinite(w).all()) else float("nan")
    return _judge("weights_match_reference", err, tol,
                  f"max(the output's tolerance at this length {out_tol:.3g}, 2 × the plain reference's weights error "
                  f"in {work_name} {e_plain:.3g}, 2 × one rounding of weights ≤ 1 to their dtype {u_w:.3g}): weights "
                  "feed the output, so an error beyond it would show there",
                  f"weights {where}, {how}, against the reference's softmax on your weights: largest difference "
                  f"{err:.3g}" + ("" if err <= tol or not math.isfinite(err) else
                                  "; the weights returned are not the ones the output was computed with, or the "
                                  "attention differs (see matches_reference)"))


def prop_convex_combination(f: Callable, x: torch.Tensor, out: torch.Tensor) -> tuple[Property, torch.Tensor | None]:
    """Single head: each output row is a convex combination of the value rows (the outputs on
    one-token inputs); for ``T ≤ D`` the coefficients ``P`` are unique (least squares). The
    property: ``P`` ≥ 0, rows sum to 1, the fit exact. Returns ``(property, P)``."""
    B, T, D = x.shape
    name = "convex_combination_of_values"
    if T > D:
        return _skip(name, f"T = {T} > D = {D}: value rows not linearly independent"), None
    u_rows, _ = call(f, x.reshape(B * T, 1, D))
    if not isinstance(u_rows, torch.Tensor) or tuple(u_rows.shape) != (B * T, 1, D):
        return _skip(name, "the object does not accept one-token sequences (batch·T, 1, D)"), None
    U = u_rows.reshape(B, T, D).double().cpu()
    Y = out.double().cpu()
    if not (torch.isfinite(U).all() and torch.isfinite(Y).all()):
        return _judge(name, float("nan"), 0.0, "value rows or outputs non-finite"), None
    sol = torch.linalg.lstsq(U.transpose(1, 2), Y.transpose(1, 2), driver="gelsd").solution
    P = sol.transpose(1, 2)
    resid = float(((P @ U - Y).norm(dim=(1, 2)) / Y.norm(dim=(1, 2)).clamp_min(1e-300)).max())
    sv = torch.linalg.svdvals(U)
    cond = float((sv[:, 0] / sv[:, -1].clamp_min(1e-300)).max())
    e_sum = float((P.sum(-1) - 1).abs().max())
    e_neg = float((-P).clamp_min(0).max())
    u = unit_roundoff(x.dtype)
    tol = 16 * u * (T + D) * cond
    cols = float((P.sum(-2) - 1).abs().max())
    detail = (f"value rows = outputs on one-token inputs; recovered weights P at T = {T}: fit residual {resid:.2g}, "
              f"max |row sum − 1| {e_sum:.3g}, most negative {-e_neg:.3g}, cond(values) {cond:.3g}")
    if e_sum > 1e-6 and cols < 1e-6:
        detail += "; the recovered weights' COLUMNS sum to 1: softmax over the query axis (wrong axis)"
    prop = _judge(name, max(resid, e_sum, e_neg), tol,
                  f"16·u·(T+D)·cond(value rows) = {tol:.3g}: least-squares recovery of P amplifies rounding by the "
                  "condition number", detail)
    return prop, P


def fit_single_head(f: Callable, x: torch.Tensor, P: torch.Tensor, *, causal: bool, gen: torch.Generator,
                    max_dim: int = 32) -> tuple[Callable | None, str, float]:
    """Least-squares fit of a single-head softmax attention to the object: the value map from
    one-token outputs and the logits ``l_ts = x_t A x_sᵀ + w·x_s`` from the recovered weights,
    each pair weighted by its attention (an error ``δ`` in ``P`` is ``δ/P`` in ``log P``) and
    pairs below the recovery accuracy (``P < 1e-8``) left out. Returns ``(reference, why, cond)``."""
    B, T, D = x.shape
    if D > max_dim:
        return None, f"fitting {D * D + D} logit parameters needs D ≤ {max_dim}; declare the projections", 0.0
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool)) if causal else torch.ones(T, T, dtype=torch.bool)
    if bool((P[:, allowed] < -1e-6).any()):
        return None, "recovered weights are negative: not a softmax attention", 0.0
    n = 2 * (D + 1)
    xs = torch.randn(n, 1, D, generator=gen, dtype=torch.float64)
    us, _ = call(f, xs.to(x.dtype))
    Xa = torch.cat([xs[:, 0], torch.ones(n, 1, dtype=torch.float64)], 1)
    coef = torch.linalg.lstsq(Xa, us[:, 0].double().cpu(), driver="gelsd").solution
    Av, c = coef[:D], coef[D]
    xd = x.double().cpu()
    floor = 1e-8
    rows, rhs, wts = [], [], []
    for t in range(T):
        ref_s = int(torch.argmax(P[:, t, : (t + 1) if causal else T], -1).mode().values)
        for s in range((t + 1) if causal else T):
            if s == ref_s:
                continue
            dx = xd[:, s] - xd[:, ref_s]
            pts, pr = P[:, t, s], P[:, t, ref_s]
            ok = (pts > floor) & (pr > floor)
            if not ok.any():
                continue
            rows.append(torch.cat([(xd[:, t, :, None] * dx[:, None, :]).reshape(B, D * D), dx], 1)[ok])
            rhs.append((torch.log(pts) - torch.log(pr))[ok])
            wts.append(torch.minimum(pts, pr)[ok].sqrt())
    if not rows:
        return None, "T = 1: no logit differences to fit", 0.0
    G, r, wt = torch.cat(rows), torch.cat(rhs), torch.cat(wts)
    if G.shape[0] < G.shape[1]:
        return None, f"only {G.shape[0]} logit differences for {G.shape[1]} parameters (more probes needed)", 0.0
    Gw, rw = G * wt[:, None], r * wt
    sol = torch.linalg.lstsq(Gw, rw, driver="gelsd").solution
    sv = torch.linalg.svdvals(Gw)
    cond = float(sv[0] / sv[-1].clamp_min(1e-300))
    A, w = sol[:D * D].reshape(D, D), sol[D * D:]

    def ref(z: torch.Tensor) -> torch.Tensor:
        z = z.double().cpu()
        s = (z @ A) @ z.transpose(-1, -2) + (z @ w)[..., None, :]
        if causal:
            Tz = z.shape[-2]
            s = s.masked_fill(~torch.ones(Tz, Tz, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, -1) @ (z @ Av + c)

    return ref, "", cond


def prop_extreme_logits(f: Callable, x: torch.Tensor, m: Mapping | None, st: Structure,
                        targets=(700.0, 1e4)) -> Property:
    """Finite outputs when the largest logit reaches ±700 (the edge of float64's exp) and ±10⁴."""
    xs, reached = [], []
    if m is not None:
        L0 = max_logit(x.double(), m, st)
        for tgt in targets:
            c = math.sqrt(tgt / max(L0, 1e-300))
            xs.append(x * c)
            reached.append(max_logit((x * c).double(), m, st))
        how = "largest logits reached " + ", ".join(f"{r:.3g}" for r in reached)
    else:
        xs = [x * 10, x * 100]
        how = "no mapping: input scaled ×10 and ×100"
    bad = total = 0
    for z in xs:
        try:
            o, _ = call(f, z)
        except Exception as exc:
            return Property("stable_at_extreme_logits", "fail", float("inf"), 0.0, "must run and stay finite",
                            f"{how}; raised {exc_text(exc)}")
        bad += int((~torch.isfinite(o)).sum())
        total += o.numel()
    return _judge("stable_at_extreme_logits", bad / max(total, 1), 0.0,
                  "none may be NaN/inf: a log-sum-exp softmax is finite at any logit (exact)",
                  how + (f"; {bad} of {total} outputs NaN/inf (exp overflow: subtract the row max)" if bad
                         else "; all finite"))


def prop_dtype_device(f: Callable, obj: Any, x: torch.Tensor, out: torch.Tensor, *, other: torch.dtype,
                      device: str, tol: float, just: str, more: list | None = None) -> Property:
    """The output keeps the input's dtype and device: the object (a copy cast to ``other`` when it is
    a module) on ``x`` in ``other``; agreement with the main run within ``other``'s rounding, at unit
    logits and at each ``(x, out, tol, why)`` of ``more`` (the large-logit probe: a mask filled with −30
    only in float32 leaks there)."""
    name = "dtype_and_device_preserved"
    g = f
    if isinstance(obj, torch.nn.Module):
        try:  # an eval-mode copy, as every other property's (dropout off)
            g = copy.deepcopy(obj).to(dtype=other, device=device).eval()
        except Exception as exc:  # pragma: no cover - deepcopy of exotic modules
            return _skip(name, f"cannot copy the module to {other}: {exc_text(exc)}")
    xo = x.to(dtype=other, device=device)
    try:
        o, _ = call(g, xo)
    except Exception as exc:
        if unsupported(exc):  # the module's (or its kernel's) limitation, not a dtype it loses
            p = unavailable(name, device, f"{exc_text(exc)}")
            p.detail = p.detail.replace("the module's backward raised",
                                        f"the module in {dtype_name(other)} raised")
            return p
        return Property(name, "fail", float("inf"), 0.0, "must run in " + dtype_name(other),
                        f"raised {exc_text(exc)}")
    if not isinstance(o, torch.Tensor):
        return Property(name, "fail", float("inf"), 0.0, "", f"returned {type(o).__name__} for {other} input")
    problems = []
    if o.dtype != other:
        problems.append(f"{dtype_name(other)} input gave {dtype_name(o.dtype)} output")
    if o.device != xo.device:
        problems.append(f"input on {xo.device} gave output on {o.device}")
    if problems:
        return Property(name, "fail", float("inf"), 0.0, "dtype and device must be those of the input", "; ".join(problems))
    err = _rel(o, out)
    worst = (err / tol if math.isfinite(err) else float("inf"), err, tol, just, "unit logits")
    for xm, om, tm, why in more or ():
        try:
            o2, _ = call(g, xm.to(dtype=other, device=device))
            e2 = _rel(o2.detach().to(device="cpu", dtype=torch.float64, copy=True), om)
        except Exception:
            continue
        r2 = e2 / tm if math.isfinite(e2) else float("inf")
        if r2 > worst[0]:
            worst = (r2, e2, tm, why, "large logits")
    _, err, tol, just, where = worst
    return _judge(name, err, tol, just, f"{dtype_name(other)} on {xo.device}: same dtype and device out; relative "
                                        f"difference from the {dtype_name(x.dtype)} run {err:.2g} (worst at {where}"
                                        + (", checked at large logits too)" if more else ")"))
