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
import sys
from dataclasses import replace
from typing import Callable

import torch

from numerics import attention_structural
from numerics.attention_mapping import find_mappings, head_count_hint, kv_head_hint  # noqa: F401 (re-exported)
from numerics.attention_props_grad import GradientProps
from numerics.attention_props_calls import overwritten_outputs, prop_extreme_logits  # noqa: F401
from numerics.attention_props_single import (MASK_CONVENTIONS, SelfMHA, WithMask, fit_single_head,  # noqa: F401
                                             make_mask, prop_convex_combination, prop_dtype_device,
                                             prop_finite, prop_key_padding,
                                             prop_weights_distribution, prop_weights_match)
from numerics.attention_reference import Mapping, Structure, max_logit, reference_attention, scale_to_logit
from numerics.attention_rules import (_DT, _SCALES, JUDGED_DTYPES, BATCH, CALL_SHAPES, WATCHED, FACTOR_FORWARD, FACTOR_GRAD, HUGE_LOGIT, INPUT_WRITTEN,  # noqa: F401
                                      LARGE_LOGIT, LENGTHS, MASK_WRITTEN, MAX_QUOTED, OUTPUT_OFF, OUTPUT_COMPARISONS,
                                      OutputOffError,
                                      SAMPLE_SCALES, UNDECIDABLE_TOL, WEIGHT_ATTRS, Precision, Property, _chunks,
                                      _judge, _rel, _scale_words, _skip, FITS, b64, call, distinct, dtype_name, exc_text,
                                      exposed_weights, probe_lengths, short_text, tolerance, unavailable,
                                      unit_roundoff, unsupported)
from numerics.torch_utils import not_dense

__all__ = ["Property", "call", "exposed_weights", "unit_roundoff", "probe_lengths", "Precision", "AttentionProbe",
           "LARGE_LOGIT", "FACTOR_FORWARD", "FACTOR_GRAD", "head_count_hint", "kv_head_hint", "prop_finite",
           "prop_weights_distribution", "prop_weights_match", "prop_convex_combination", "fit_single_head", "prop_extreme_logits"]



class AttentionProbe(GradientProps):
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
        self.out_of_range: set[str] = set()  # probes ("large", "huge") that float64 cannot hold at this declaration
        self.input_written: set[int] = set()  # lengths at which a call wrote into the input it was given
        INPUT_WRITTEN.clear()  # (and the calls outside run(): the other dtype's, the extreme logits', 24b F5)
        MASK_WRITTEN.clear()
        OUTPUT_OFF.clear()
        CALL_SHAPES.clear()
        WATCHED[0] = f

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
        if not grad and (x.shape != x64.shape or not torch.equal(  # a write into the input, at any call (23b F1)
                torch.nan_to_num(x.detach(), nan=7.0), torch.nan_to_num(x64.to(dtype=self.pdt, device=self.device),
                                                                        nan=7.0))):
            self.input_written.add(int(x64.shape[1]) if x64.dim() > 1 else 0)
        return x, out, w

    def factor(self, x64: torch.Tensor, key: str) -> float | None:
        """Input factor of the probe ``key`` ("unit", "large", "huge"); ``None`` where that probe does not exist in
        float64 (see :meth:`large_factor`)."""
        c = 1.0 if key == "unit" else self.large_factor(x64, _SCALES[key])
        if c is None:
            self.out_of_range.add(key)
        return c

    def large_factor(self, x64: torch.Tensor, target: float = LARGE_LOGIT, cache: bool = True) -> float | None:
        """Input factor ``c`` that brings the largest logit to about ``target`` (cached for the
        probes kept in ``self.xs``); ``None`` when no such probe exists in float64 or in the module's input precision
        (:func:`numerics.attention_reference.scale_to_logit`). Such a probe is not run: its NaN would be blamed on
        the module."""
        if self.m is None:
            return math.sqrt(target)
        key = (id(x64), x64.shape, id(self.m), self.st, target)
        cache = self.__dict__.setdefault("_lf_cache", {}) if cache else {}
        if key in cache:
            return cache[key]
        L0 = max_logit(x64, self.m, self.st)
        if math.isfinite(L0) and L0 <= 0:
            c = 8.0
        else:  # in float64 and in the module's input precision (a probe that overflows there for any implementation
            # is no evidence about the module)
            c = scale_to_logit(x64.to(self.device), self.m, self.st, target)
            if c is not None and self.pdt != torch.float64 and scale_to_logit(
                    x64.to(self.device), self.m, self.st, target, self.pdt) is None:
                c = None
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
            except OutputOffError as exc:  # no numbers in it: named below as what it is
                out, w = exc.out, None
            except Exception as exc:  # the user's code
                self.raised[T] = describe(exc)
                continue
            want = (self.B, T, self.D)
            if not isinstance(out, torch.Tensor):
                problems.append(f"returned {type(out).__name__} at T = {T}, expected a tensor of shape {want}")
                continue
            if out.is_quantized or out.dtype not in JUDGED_DTYPES:  # (float8, qint8: a traceback, hostile pass 43a F16)
                problems.append(f"returned a {str(out.dtype).removeprefix('torch.')} tensor at T = {T}: tverify "
                                "judges outputs in float16, bfloat16, float32 or float64 (return one of those)")
                continue
            what = not_dense(out) if out.device.type != "meta" else None  # meta: named as a device below
            if what:
                problems.append(f"returned {what} at T = {T}, expected a dense tensor of shape {want}")
                continue
            if tuple(out.shape) != want:
                problems.append(f"returned shape {tuple(out.shape)} for a {want} input; expected {want} "
                                "(batch, T, D)")
                continue
            if out.device.type == "meta":  # no numbers at all: the check's one line, as for no tensor
                problems.append(f"returned a tensor on meta for an input on {self.device}")
                continue
            # (a lost dtype or another device is the module's finding, dtype_and_device_preserved's, noted by call():
            # it was the check's one-line usage error, exit 2: hostile pass 36b F3)
            self.xs[T], self.outs[T] = x64, out.detach().to(device="cpu", dtype=torch.float64, copy=True)
            self.weights = getattr(self, "weights", {})
            self.weights[T] = w
            tick((i + 1) / len(self.lengths))
        return problems

    def against_input(self, x64: torch.Tensor) -> torch.Tensor:
        """A fresh copy of ``x64`` for the ``--against`` object, watched: a reference that writes into its input
        changed the shared probe (``.to`` returns the tensor itself when its dtype and device already match), and the
        module under test was blamed for the changed inputs (hostile pass 24b F7); the write is noted
        (``against_written``) and said in a warning line."""
        x = x64.to(dtype=self.pdt, device=self.device).clone(memory_format=torch.contiguous_format)
        before = x.clone()
        self.__dict__.setdefault("_against_watch", []).append((x, before))
        return x

    def against_wrote(self) -> bool:
        """Whether the ``--against`` object wrote into an input it was given (:meth:`against_input`)."""
        watched = self.__dict__.pop("_against_watch", [])
        wrote = any(x.shape != b.shape or not torch.equal(torch.nan_to_num(x.detach(), nan=7.0),
                                                          torch.nan_to_num(b, nan=7.0)) for x, b in watched)
        self.__dict__["_against_written"] = self.__dict__.get("_against_written", False) or wrote
        return self.__dict__["_against_written"]

    def reference_out(self, x64: torch.Tensor) -> torch.Tensor:
        """The reference on ``x64``: the mapped reference in float64, or the other implementation."""
        with torch.no_grad():
            if self.against is not None:
                o, _ = call(self.against, self.against_input(x64), watch=False)
                return o.detach().to(device="cpu", dtype=torch.float64, copy=True)
            return self.reference(x64).detach().to(device="cpu", dtype=torch.float64, copy=True)

    def tol_at(self, T: int, key: str, factor: float = FACTOR_FORWARD) -> tuple[float, str]:
        """The tolerance at length ``T`` (``key`` "unit" or "large") under the working precision."""
        # the declared working precision even when no reference ran to set it (no weights mapped)
        p = self.precision.dtype if self.precision else (self.compute_dtype or self.pdt)
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
                if c is None:  # no such probe within float64's range at this declaration (said in the detail)
                    continue
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
            if not math.isfinite(tol):  # no tolerance in this precision at this probe (the plain reference overflows
                ratio = -0.5  # there): it decides nothing, and never hides a row that does (it is the worst only alone)
            if ratio > worst_ratio:
                worst, worst_ratio, wjust = r, ratio, just
        bad = [r for r in rows if math.isfinite(r["tolerance"]) and not r["error"] <= r["tolerance"]]
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
        if self.out_of_range:
            detail += (f"; not probed: {' and '.join(sorted(self.out_of_range))} logits (the inputs they need, or the "
                       "reference's logits there, are beyond the range of float64 or of the input's precision at this "
                       "declaration)")
        unsure = [r for r in rows if not math.isfinite(r["tolerance"])]
        tol_judged = worst["tolerance"]
        if unsure and not bad:  # a probe without a tolerance in this precision leaves the property open: the other
            # probes' pass is not a pass at every probe (a module 10× off the declared scale passed on the unit probes
            # alone in float16, its large-logit rows dropped: hostile pass 19b F6)
            tol_judged = math.nan
            detail += ("; no tolerance in this precision at " + ", ".join(f"T = {r['T']} ({r['probe']} logits)"
                                                                          for r in unsure[:4])
                       + " (its plain reference is not finite there)")
        return _judge(name, worst["error"], tol_judged, wjust, detail, central=True,
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

    def audit_call_shapes(self, props: list[Property]) -> None:
        """``batch_size_independence`` in ``props`` judged again with :func:`numerics.attention_structural.audit_call_shapes`."""
        at = next((i for i, p in enumerate(props) if p.name == "batch_size_independence"), None)
        if at is not None:
            props[at] = attention_structural.audit_call_shapes(self, props[at])

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
    def _fit_scale(self, x: torch.Tensor, od: torch.Tensor, T: int, key: str, s0: float,
                   also: float | None = None) -> dict:
        """The logit scale fitted to the module's outputs ``od`` at the probe ``x`` (length ``T``, logits ``key``):
        grid then Gauss-Newton on ``log s``; its relative error against ``s0``, the tolerance (the output tolerance
        over the outputs' sensitivity to ``log s``) and the residuals at the fit and at ``s0``. The grid spans
        s0·[10⁻², 10²], and ``also``·[10⁻², 10²] besides (1/√d_k when a scale is declared: a module using 0.5 under
        --scale 1e-16 lay 10¹⁵ beyond the grid, where the outputs do not move with s, and "no scale" fitted: 55a F2)."""

        lmax = math.log(sys.float_info.max) - 1.0  # exp of log s stays a finite float64 (a declared --scale 1e308
        # put the grid's top beyond it: OverflowError, hostile pass 17b F2)

        def out_at(ls: float) -> torch.Tensor:
            with torch.no_grad():
                return self.reference(x, st=replace(self.st, scale=math.exp(min(max(ls, -lmax), lmax)))).double().cpu()

        def loss(ls: float) -> float:
            return float((out_at(ls) - od).norm())

        grid = [min(max(math.log(c) + g, -lmax), lmax) for c in ([s0] + ([also] if also and also != s0 else []))
                for g in torch.linspace(math.log(1e-2), math.log(1e2), 41).tolist()]
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
        # the sensitivity that sets the tolerance, from a central difference of step 10⁻² in log s (accurate to about
        # 10⁻⁴ relative): at the fit's step 10⁻⁵ the rounding of outputs that do not depend on the scale at all (every
        # value row equal, every key equal: the weights sum to 1 ± ε) read as a sensitivity of 10⁻¹¹, a finite
        # tolerance, and a fit to rounding noise refuted a correct scale (hostile pass 47a F9)
        hs = 1e-2
        J = (out_at(ls + hs) - out_at(ls - hs)) / (2 * hs)
        s_fit = math.exp(min(max(ls, -lmax), lmax))
        err = abs(s_fit / s0 - 1)
        out_tol, _ = self.tol_at(T, key)
        sens = float(J.norm() / od.norm().clamp_min(1e-300))
        # a correct module's outputs are within out_tol·max|out| of the reference in every entry, so the least-squares
        # fit of log s moves by at most ‖deviation‖/‖J‖ ≤ out_tol·max|out|·√(#outputs)/‖J‖ (‖out‖ in place of
        # max|out|·√n, as before, overstated the bound by up to √n: 2.6 in bfloat16, admitting any scale; 19b F2)
        # outputs that do not move with the scale at all (a zero output or value projection: exactly 0 whatever the
        # scale) measure nothing of it: an infinite tolerance, undecided (a 0/1e-300 tolerance of 0 read the fit's stop
        # at its bound, 1/100, as a finding: hostile pass 34b F5)
        jn = float(J.norm())
        tol = out_tol * float(od.abs().max()) * math.sqrt(od.numel()) / jn if jn > 0 else math.inf
        r_rel = _rel(out_at(ls), od)
        fit = {"s_fit": s_fit, "err": err, "tol": tol, "sens": sens, "r_rel": r_rel, "out_tol": out_tol, "key": key}
        if not r_rel <= max(1e3 * out_tol, 1e-6):
            return {**fit, "tol": math.inf, "no_match": f"no logit scale makes the outputs match the reference (relative "
                                                         f"residual {r_rel:.3g} at the best s = {s_fit:.4g}): the "
                                                         "difference is not (only) the scale"}
        return {**fit, "r0": _rel(out_at(math.log(s0)), od)}

    def prop_scale(self) -> Property:
        """Fit the logit scale ``s`` (instead of ``1/√d_k``) that best matches the module and compare
        ``s·√d_k`` with 1; the tolerance is the output tolerance over the outputs' sensitivity to
        ``log s``."""
        name = "scale_1_over_sqrt_dk"
        Ts = [T for T in self.outs if T >= 2]
        if not Ts:
            return _skip(name, "no length ≥ 2 ran", True)
        T = min(Ts, key=lambda t: abs(t - 17))
        m = self.m
        dk = m.d_k
        declared = self.st.scale  # --scale: the factor declared instead of 1/√d_k
        s0 = declared if declared is not None else 1 / math.sqrt(dk)
        fit = self._fit_scale(self.xs[T], self.outs[T], T, "unit", s0, 1 / math.sqrt(dk))
        if "no_match" in fit:
            return _skip(name, fit["no_match"], True)
        if T in self._large_lengths():
            # at unit logits the outputs may barely depend on the scale (a low precision, a tiny declared scale, tiny
            # query weights): the fit at the large-logit probe, where the softmax is sharper, when it measures the scale
            # more finely (a fit to 4e-10 at unit logits, rerun as a hint, was read as float32 internals: 35b F1)
            c = self.factor(self.xs[T], "large")
            if c is not None:
                try:
                    od = self.run(self.xs[T] * c)[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
                except Exception:  # the user's code at large inputs: judged by matches_reference
                    od = None
                if od is not None and bool(torch.isfinite(od).all()):
                    large = self._fit_scale(self.xs[T] * c, od, T, "large", s0, 1 / math.sqrt(dk))
                    if large["tol"] < fit["tol"]:
                        fit = large
        s_fit, err, tol, sens, r_rel, r0, out_tol = (fit[k] for k in ("s_fit", "err", "tol", "sens", "r_rel", "r0",
                                                                       "out_tol"))
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
                    f"scale differs from the declared {declared:.6g} (--scale): s/declared = {distinct(s_fit / declared)}")
        elif abs(s_fit - 1) < 1e-3 and dk > 1:
            what = "missing 1/√d_k (s ≈ 1)"
        elif err > tol and ratio > 0:
            what = _scale_words(ratio, H, dk)
            read = getattr(self, "read_scaling", None)  # (value, source) of the module's own scale, when it says one
            if read and abs(s_fit / read[0] - 1) < 1e-3:  # the cause it says, not the factors that happen to fit
                what = what.split(FITS)[0] + f" (the module's own {read[1]} = {read[0]:.6g}, read)"
        elif err > tol:
            what = "scale differs from 1/√d_k"
        else:
            what = "scale is 1/√d_k"
        detail = (f"best-fitting scale s = {distinct(s_fit, 1 / math.sqrt(dk))}, s·√d_k = "
                  f"{distinct(ratio) if err > tol else f'{ratio:.6g}'} (d_k = {dk}, T = {T}, {fit['key']} logits); "
                  f"{what}")
        if err <= tol and not tol < UNDECIDABLE_TOL:  # the outputs barely depend on the scale here (tiny logits): a
            # tolerance this wide admits a scale off by a factor of 2 or more, and one ≥ 1 admits a scale of 0: a
            # pass would name the declared scale without evidence (hostile pass 19b F2)
            return Property(name, "skip", err, tol, "",
                            f"undecided: at these logits the outputs barely depend on the scale (relative sensitivity "
                            f"{sens:.3g}), so the tolerance {tol:.3g} on |s/s₀ − 1| admits any scale from "
                            f"{max(0.0, 1 - tol):.3g}× to {1 + tol:.3g}× the {'declared' if declared is not None else '1/√d_k'}"
                            f" one (best-fitting s = {s_fit:.6g})",
                            {"undecidable": True, "s_fit": s_fit, "d_k": dk,
                             "to_decide": "larger logits (a larger scale or larger weights) make the scale measurable"},
                            True)
        return _judge(name, err, tol, f"output tolerance {out_tol:.2g} × max|out| × √(#outputs) / ‖∂out/∂log s‖ "
                                      f"(relative sensitivity of the outputs to log s {sens:.3g}) = {tol:.2g}", detail,
                      central=True,
                      s_fit=s_fit, d_k=dk, what=what)


    # -- hints ---------------------------------------------------------------------------------
    #: The properties a change of declaration can change, rerun before a hint is printed.
    RERUNNABLE = ("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk", "causal_no_future_leak",
                  "window_respected", "prefix_consistency", "batch_independence")

    def rerun(self, names: list[str], st: Structure | None = None, m: Mapping | None = None,
              compute_dtype: torch.dtype | None | str = "same") -> list[Property]:
        """``matches_reference`` at every probed length and logit scale, then those of ``names``
        that a declaration changes (:attr:`RERUNNABLE`), rerun under another declaration: the
        structure ``st``, the weights ``m`` and the working precision ``compute_dtype`` (``"same"``:
        as declared; ``None``: the input's precision). The module's outputs at unit logits are reused;
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
                        if c is None:  # beyond float64's or the input precision's range: no probe
                            continue
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

