"""Properties of single calls of ``tverify check attention``: key-padding masks (the module called
with a mask), finite outputs, exposed attention weights, the convex-combination structure of one head,
a single-head fit, extreme logits, dtype and device.

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import torch

from numerics import attention_structural
from numerics.attention_reference import reference_attention
from numerics.torch_utils import not_dense
from numerics.attention_rules import (MASK_WRITTEN, OutputOffError, Property, _chunks, _judge, _rel, _skip, call, dtype_name,
                                      exc_text, exposed_weights,
                                      short_text, unavailable, unit_roundoff, unsupported)

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

    def forward(self, x, key_padding_mask=None):
        """``key_padding_mask``: what a declared ``--mask-convention`` gives (:class:`WithMask` passes it second), as
        torch's own argument (a bare module with a convention was called with it positionally: a TypeError of this
        adapter's, blamed on the module, hostile pass 35b F2)."""
        T = x.shape[1]
        mask = None if self.allowed is None else ~self.allowed(T).to(x.device)
        xx = x if self.inner.batch_first else x.transpose(0, 1)
        o = self.inner(xx, xx, xx, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return o if self.inner.batch_first else o.transpose(0, 1)


class WithMask(torch.nn.Module):
    """``f(x, mask)`` presented as ``g(x)``: every key valid unless :attr:`valid` is set."""

    def __init__(self, inner: Any, convention: str):
        super().__init__()
        self.inner, self.convention, self.valid = inner, convention, None
        self.mask_written = 0  # calls after which the mask given differed from what was passed (an input written)

    def forward(self, x):
        valid = self.valid if self.valid is not None else torch.ones(x.shape[:2], dtype=torch.bool)
        mask = make_mask(valid, self.convention, x.dtype).to(x.device)
        before = mask.clone()
        out = self.inner(x, mask)
        if mask.shape != before.shape or not torch.equal(torch.nan_to_num(mask.double(), nan=1e300, neginf=-1e300),
                                                         torch.nan_to_num(before.double(), nan=1e300, neginf=-1e300)):
            self.mask_written += 1  # a caller reusing its mask for the next layer attends to padding (22b F3)
            MASK_WRITTEN.add(int(x.shape[1]) if x.dim() > 1 else 0)
        return out


def prop_key_padding(probe: Any, w: "WithMask") -> list[Property]:
    """With a key-padding mask: outputs at real positions match the reference with those keys
    masked and do not move when the padded tokens are redrawn (``key_padding_respected``, central);
    a sample whose keys are all padding leaves the other samples of its batch unchanged, its own NaN rows
    reported as a convention (``fully_masked_rows_finite``: :func:`_fully_masked`)."""
    worst, padded_w = None, None
    left = bool(probe.st.causal)
    large = probe._large_lengths()
    for T in [t for t in probe.outs if t >= 2]:  # every probe length at unit logits (a mask dropped on short
        x = probe.xs[T]  # sequences only passed: hostile pass 31b F2); huge logits at the three lengths of those
        longest = T == max(large or [T])
        # and at the longest length, every sample padded alike (a "fast path" that skips a mask whose samples all
        # pad as many keys passed: hostile pass 24b F2)
        for key, uniform in ([("unit", False)] + ([("huge", False)] if T in large else [])
                             + ([("unit", True)] if longest and probe.B > 1 else [])):
            valid = padding_mask(probe, T, uniform)
            c = probe.factor(x, key)
            if c is None:  # beyond the precision's range here: not a probe (probe.out_of_range)
                continue
            xk = x * c
            x2 = xk.clone()
            x2[~valid] = probe.probe(T, salt=41)[~valid] * c * 3
            w.valid = valid
            try:
                if key == "unit":  # the judged call follows a call with another mask: weights (or outputs) computed with
                    w.valid = torch.ones_like(valid)  # the previous call's mask are not taken for this call's (24b F3)
                    probe.run(xk)
                    w.valid = valid
                _, o1, w1 = probe.run(xk)
                o1 = attention_structural.kept(o1)
                if key == "unit":
                    padded_w = _padded_weight(probe, xk, w1, valid, T, padded_w)
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
            t_move, j_move = attention_structural.structural_tolerance(jit, "redrawing a padded key",
                                                                       attention_structural.noise_floor(probe, T),
                                                                       attention_structural.is_noisy(probe))
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
    if worst is None:
        return [_skip("key_padding_respected", "no probe length ≥ 2", True)]
    try:
        others = _padding_other_shapes(probe, w)
        for e, tol, just, T_, where in others:
            if not ratio(e, tol) <= worst[0]:
                worst = (ratio(e, tol), e, tol, just, T_, where, e, float("nan"))
    except Exception as exc:
        return [Property("key_padding_respected", "fail", float("inf"), 0.0, "must run",
                         f"raised {exc_text(exc)} with a padding mask in a call of another batch shape", {}, True)]
    _, e, tol, just, T, key, e_move, e_ref = worst
    other = f"keys at the {'end' if left else 'start'}"  # the second side's call (60a F1)
    where = (f"{key} (T = {T})" if key.endswith(other) else
             f"keys padded at the {'start (left padding: a causal mask hides nothing there)' if left else 'end'} of "
             f"each sample (T = {T}, {key if ' ' in key else key + ' logits'})")
    detail = (f"{where}: outputs at real positions move by "
              f"{e_move:.3g} when the padded tokens are redrawn" + (f"; against the reference with those keys masked "
                                                                    f"{e_ref:.3g}" if math.isfinite(e_ref) else "")
              # (an output that is NaN/inf at real positions is no sign of an inverted convention: that one is tested
              # where it shows, every output non-finite with every key real; 59a F1)
              + (f"; a key-padding mask may pad any keys, not only the {'first' if left else 'last'} (a module that "
                 f"takes the real keys to be the {'last' if left else 'first'} n fails here)"
                 if key.endswith(other) and math.isfinite(e) and not e <= tol
                 else "; the mask convention may be inverted (--mask-convention keep/drop)" if math.isfinite(e) and not
                 e <= tol else "; the outputs at real positions are not finite (NaN/inf) with these keys padded"
                 if not math.isfinite(e) else "")
              + ("; redrawn also in calls of " + ", ".join(dict.fromkeys(f"{o[4]} (T = {o[3]})" for o in others))
                 if others and e <= tol else ""))
    return ([_judge("key_padding_respected", e, tol, just, detail, central=True), _fully_masked_every(probe, w, T)]
            + ([_padded_weights_row(*padded_w)] if padded_w is not None else []))


def _padding_other_shapes(probe: Any, w: "WithMask") -> list[tuple[float, float, str, int, str]]:
    """The padded-key redraw in calls of other batch shapes, at unit and huge logits (a finite mask fill leaks at large
    logits only: hostile pass 26b F2), each ``(move, tolerance, its reason, T, where)``: every sample of each padding
    length's probe alone (a batch of one "has no padding": a module dropping the mask there passed, 25b F2; a short
    one only: 26b F7),
    and one call padding every count of keys from 1 to T − 1 (at most 64 counts) at the longest length ≤ 65 (the
    probe's three samples pad three counts per length: 25b F3)."""
    Ts = [T for T in probe._large_lengths() if T >= 3]
    if not Ts:
        return []
    out = []
    for key in ("unit", "huge"):
        # at every padding length (a short single sequence: 26b F7), at unit logits every probe length of three tokens
        # or more (a path for a single sequence at T = 5 alone passed: 54a F5)
        for T in ([t for t in probe.outs if t >= 3] if key == "unit" else Ts) if probe.B > 1 else []:
            c = probe.factor(probe.xs[T], key)
            valid = padding_mask(probe, T)
            for b in range(probe.B) if c is not None else []:
                out.append(_padded_redraw(probe, w, probe.xs[T][b:b + 1] * c, valid[b:b + 1], c)[:3]
                           + (T, f"{key} logits, a single sequence"))
        T = max([t for t in Ts if t <= 65] or Ts[:1])
        c = probe.factor(probe.xs[T], key)
        if c is None:
            continue
        counts = sorted({int(round(n)) for n in torch.linspace(1, T - 1, min(T - 1, 64)).tolist()})
        # at the usual side (the start for a causal module, else the end), then at the other: a module that reads the
        # mask as a count of real keys, assumed first (or last), passed with the padding only where it assumed it
        # (hostile pass 60a F1); a causal module padded at the end is judged against the reference
        for start in (bool(probe.st.causal), not probe.st.causal):
            valid = torch.ones(len(counts), T, dtype=torch.bool)
            for i, n_pad in enumerate(counts):
                if start:
                    valid[i, :n_pad] = False
                else:
                    valid[i, T - n_pad:] = False
            x = probe.xs[T][torch.arange(len(counts)) % probe.B] * c
            *r, made = _padded_redraw(probe, w, x, valid, c)
            out.append(tuple(r) + (T, f"{key} logits, {len(counts)} sequences padding {counts[0]} to {counts[-1]} "
                                   f"keys at the {'start' if start else 'end'}"
                                   + (f" (in calls of at most {made}: the module refused {len(counts)})"
                                      if made < len(counts) else "")))
    return out


def _padded_redraw(probe: Any, w: "WithMask", x: torch.Tensor, valid: torch.Tensor, c: float
                   ) -> tuple[float, float, str, int]:
    """``(move, tolerance, reason, largest call made)``: how far the outputs at real positions of ``x`` (unit logits) move when its
    padded keys are redrawn, in calls of ``x``'s own shape (where the module refuses that batch size, halved until it
    runs, as the stacked redraws are: hostile passes 25b F5, 26b F10); the tolerance is the structural one."""
    T = x.shape[1]
    fresh = probe.probe(T, salt=43)[torch.arange(x.shape[0]) % probe.B] * c
    x2 = x.clone()
    x2[~valid] = fresh[~valid] * 3

    made = [0]  # the largest call that ran (the module may refuse x's batch size: said, not taken as made, 33b F7)

    def outputs(xx: torch.Tensor) -> torch.Tensor:
        def rows(a: int, b: int) -> torch.Tensor:
            w.valid = valid[a:b]
            try:
                o = attention_structural.kept(probe.run(xx[a:b])[1])
                made[0] = max(made[0], b - a)
                return o
            finally:
                w.valid = None

        n = xx.shape[0]  # in calls of ≤ 256 MB (64 sequences of T = 900 in one call, and the reference, took 2.3 GB
        # of a 0.5 GB --max-memory the estimate had let start: hostile pass 46a F9)
        step = _chunks(n, attention_structural._per_sequence_bytes(probe, T))
        return torch.cat([attention_structural.in_halves(rows, min(step, n - a), 1, a) for a in range(0, n, step)], 0)

    o1, again, o2 = outputs(x), outputs(x), outputs(x2)
    fin = o1[torch.isfinite(o1)]
    jit = attention_structural._move(again, o1, float(fin.abs().max()) if fin.numel() else 1.0)
    attention_structural.mark_noisy(probe, jit, T)
    e = _rel(o2[valid], o1[valid], float(o1[valid].abs().max()))
    tol, just = attention_structural.structural_tolerance(jit, "redrawing a padded key",
                                                          attention_structural.noise_floor(probe, T),
                                                          attention_structural.is_noisy(probe))
    if probe.m is None:
        return e, tol, just, made[0]
    step = _chunks(x.shape[0], attention_structural._per_sequence_bytes(probe, T))
    with torch.no_grad():  # and the real positions against the reference with those keys masked (a call whose outputs
        r = torch.cat([reference_attention(x[a:a + step].to(probe.device), probe.m, probe.st, torch.float64,  # were
                                           key_valid=valid[a:a + step]).double().cpu()  # compared with themselves
                       for a in range(0, x.shape[0], step)], 0)  # only passed 1.5× outputs: 29b F4)
    e_ref = _rel(o1[valid], r[valid])
    key = "unit" if c == 1.0 or (T, "huge") not in probe.L else "huge"
    t_ref, j_ref = probe.tol_at(T, key)

    def ratio(e_: float, t_: float) -> float:
        return (e_ / t_ if t_ > 0 else (0.0 if e_ == 0 else float("inf"))) if math.isfinite(e_) else float("inf")
    return ((e_ref, t_ref, j_ref) if ratio(e_ref, t_ref) > ratio(e, tol) else (e, tol, just)) + (made[0],)


def padding_mask(probe: Any, T: int, uniform: bool = False) -> torch.Tensor:
    """The key-padding probe's mask ``(B, T)`` (True: a real key): from one padded key (sample 0) to all but one (the
    last sample), evenly between (it padded at most 3/7 of the keys, then at least a third: hostile passes 23b F5,
    24b F2); at the start of each sample for a causal module (a decoder's left padding, which the causal mask does not
    hide; at the end it would test nothing), else at the end. ``uniform``: every sample pads (T − 1) // 2 keys."""
    valid = torch.ones(probe.B, T, dtype=torch.bool)
    for b in range(probe.B):
        n_pad = (1 + round((T - 2) * b / (probe.B - 1))) if probe.B > 1 and not uniform else max(1, (T - 1) // 2)
        if probe.st.causal:
            valid[b, :n_pad] = False
        else:
            valid[b, T - n_pad:] = False
    return valid


def _padded_weight(probe: Any, x: torch.Tensor, returned: Any, valid: torch.Tensor, T: int, worst: Any) -> Any:
    """The largest weight the attention weights the module exposes on the padding call put on a padded key, at a real
    query (``(weight, T, where)``, the worse of this length's and ``worst``): returned weights judged with an all-real
    mask only passed weights that ignore the padding (hostile pass 23b F8)."""
    wn, where = exposed_weights(probe.f, x, returned)
    if wn is None:
        return worst
    wn = wn.double().cpu()
    sel = (~valid)[:, None, None, :] & valid[:, None, :, None]  # padded key, real query
    vals = wn.masked_select(sel.expand_as(wn))
    got = float("nan") if not bool(torch.isfinite(vals).all()) else float(vals.abs().max()) if vals.numel() else 0.0
    if worst is None or not got <= worst[0]:
        return (got, T, where)
    return worst


def _padded_weights_row(weight: float, T: int, where: str) -> Property:
    """``weights_are_distributions`` on the padding call: no weight on a padded key, exactly (see :func:`_padded_weight`)."""
    return _judge("weights_are_distributions", weight, 0.0,
                  "exact: a padded key gets weight 0 in any precision (its logit is −∞, or a finite mask value whose "
                  "exponential underflows to 0)",
                  f"weights {where} on the key-padding probe (T = {T}): largest weight on a padded key at a real query "
                  f"{weight:.3g}" + ("" if weight == 0 else ": the weights returned ignore the key-padding mask"))


#: what a row with no key to attend gives in the libraries measured (torch 2.13, transformers 5.23)
_CONVENTIONS = ("softmax over no key at all is undefined (0/0 when the padded logits are −∞, as the declared "
                "mask convention gives them or the module fills them); torch 2.13's nn.MultiheadAttention returns NaN "
                "there on its need_weights and inference fast paths, its scaled_dot_product_attention 0, and Hugging "
                "Face's models, which pass finfo.min rather than −∞, the mean of the values: a convention, not judged")


def _fully_masked_every(probe: Any, w: "WithMask", T: int) -> Property:
    """:func:`_fully_masked` at every probed length of two tokens or more (``T`` where there is none): the first
    that fails, else the longest's row (at the key-padding row's worst length alone, a module that drops the batch's
    mask from 8 tokens on was ok at T = 2: hostile pass 54a F1)."""
    rows = [_fully_masked(probe, w, t) for t in sorted(t for t in probe.outs if t >= 2) or [T]]
    return next((r for r in rows if r.status == "fail"), rows[-1])


def _fully_masked(probe: Any, w: "WithMask", T: int) -> Property:
    """``fully_masked_rows_finite``: one sample (sample 0) with every key padded, at length ``T``. Its rows
    have no key to attend, so attention defines no output there: NaN is reported (a convention, not
    judged: skipped with the reason). What is judged, exactly, is that the other samples of the same call
    are unchanged (finite and equal to their outputs in a call where sample 0 is padded as in the key-padding probe, every
    sample keeping its own padded keys, within twice the run-to-run difference): a NaN that spreads through the batch,
    a mask dropped for the whole batch, or a call that raises, fails."""
    name = "fully_masked_rows_finite"
    x = probe.xs[T]
    padded = padding_mask(probe, T)  # the other samples keep padding of their own: a module that drops the whole
    allpad = padded.clone()  # batch's mask when one sample is empty (a NaN guard) changed nothing on all-real
    allpad[0] = False  # samples, and passed (hostile pass 24b F8)
    try:
        w.valid = padded
        base = attention_structural.kept(probe.run(x)[1])
        jit = attention_structural.jitter(probe, x, base)
        w.valid = allpad
        o = attention_structural.kept(probe.run(x)[1])
    except Exception as exc:
        return Property(name, "fail", float("inf"), 0.0, "must run",
                        f"a sample whose keys are all padding (T = {T}): the call raised {exc_text(exc)}, so the other "
                        "samples of the batch got no output", {}, False)
    finally:
        w.valid = None
    own = int((~torch.isfinite(o[0])).any(-1).sum())
    tol, just = attention_structural.structural_tolerance(jit, "padding every key of another sample",
                                                          attention_structural.noise_floor(probe, T),
                                                          attention_structural.is_noisy(probe))
    others, e = 0, 0.0
    if probe.B > 1:  # their rows at real queries (a causal module's padded queries before them attend to nothing)
        real = padded[1:]
        others = int((~torch.isfinite(o[1:][real])).any(-1).sum())
        fin = base[1:][real][torch.isfinite(base[1:][real])]
        e = attention_structural._move(o[1:][real], base[1:][real], float(fin.abs().max()) if fin.numel() else 1.0)
    rest = ("" if probe.B < 2 else "the other sample of the batch " if probe.B == 2 else
            f"the other {probe.B - 1} samples of the batch ")
    if others or not e <= tol:
        return _judge(name, float("inf") if others else e, tol, just,
                      f"a sample whose keys are all padding (T = {T}) changes {rest.rstrip()}: "
                      + (f"{others} of their rows NaN/inf" if others else f"relative change {e:.3g}")
                      + " (its own rows have no key to attend; the others keep their own padded keys)")
    unchanged = f"; {rest}unchanged (relative change {e:.3g})" if rest else ""
    if own == 0:
        return Property(name, "pass", e, tol, just, f"a sample whose keys are all padding (T = {T}): all its outputs "
                        f"finite{unchanged}", {}, False)
    return Property(name, "skip", e, tol, just,
                    f"a sample whose keys are all padding (T = {T}): {own} of its rows NaN/inf — {_CONVENTIONS}"
                    f"{unchanged}", {"nan_rows": own}, False)


# ------------------------------------------------------------------------------------------------
# properties of single calls (kept from the single-length probe)


def prop_finite(outs: dict[int, torch.Tensor]) -> Property:
    """Every output entry is finite at every length (NaN/inf fail with their count)."""
    bad = sum(int((~torch.isfinite(o)).sum()) for o in outs.values())
    n = sum(o.numel() for o in outs.values())
    where = [T for T, o in outs.items() if not torch.isfinite(o).all()]
    return _judge("finite_output", bad / max(n, 1), 0.0, "none may be NaN/inf (exact)",
                  f"{bad} of {n} output entries are NaN/inf (at T = {', '.join(map(str, where))})" if bad
                  else "all outputs finite at unit logits, every length (at large and huge logits: "
                       "stable_at_extreme_logits)", central=True)  # (it read "all outputs finite" over NaN there: 46a F7)


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


def _imaginary(w: torch.Tensor) -> float:
    """The largest |imaginary part| of complex weights (NaN counts as one), 0.0 for real ones."""
    if not w.is_complex():
        return 0.0
    im = w.imag.detach().double().cpu().abs()
    return float("nan") if bool(torch.isnan(im).any()) else float(im.max()) if im.numel() else 0.0


def prop_weights_distribution(w: torch.Tensor, where: str, work: torch.dtype | None = None,
                              allowed: torch.Tensor | None = None) -> Property:
    """Exposed weights ``(B, H, T, T)``: rows are probability vectors (≥ 0, sum 1) over the keys the
    declared mask ``allowed`` (``(T, T)`` bool) permits — no weight on a forbidden key, exactly —, to the
    rounding of the coarser of the weights' own dtype and the module's working precision ``work`` (a
    float32 softmax returned as float64 rounds as float32)."""
    im = _imaginary(w)
    if im:  # (47a F6: .double() dropped the imaginary part, and rows summing to 1 + 0.3i were "ok")
        return _judge("weights_are_distributions", im, 0.0, "a probability is real: an imaginary part of any size is "
                      "not rounding", f"weights {where}: complex ({w.dtype}), largest |imaginary part| {im:.3g}")
    w = w.real if w.is_complex() else w
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
    if forbidden > 0:  # exp(−∞) = 0 in any precision: a weight on a forbidden key is a leak, not rounding (38b F3)
        return _judge("weights_are_distributions", forbidden, 0.0, "exactly 0 on a key the declared mask forbids "
                      "(its logit is −∞ before the softmax: a weight of exactly 0 in any precision)", detail)
    return _judge("weights_are_distributions", max(err_sum, err_neg), 4 * u * T,
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
    im = _imaginary(w)
    if im:
        return _judge("weights_match_reference", im, 0.0, "the reference's weights are real: an imaginary part of any "
                      "size is not rounding", f"weights {where}: complex ({w.dtype}), largest |imaginary part| {im:.3g}")
    w = w.real if w.is_complex() else w
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
    if not rows:  # at T = 1 there is no pair; at longer T, weights at 0 or 1 (a map mixing no tokens: 48a F4)
        why = ("T = 1: no logit differences to fit" if T == 1 else
               f"at T = {T} every recovered weight is 0 or 1 (each output is one token's own: no tokens are mixed), so "
               "there are no logit differences to fit")
        return None, why, 0.0
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


def own_dtype_policy(obj: Any) -> tuple[str, str] | None:
    """``(where, dtype)`` of a computation dtype the module keeps in a policy of its own, which
    torch's ``.to()`` does not convert: a Keras 3 layer's ``dtype_policy.compute_dtype`` (on the
    torch backend a layer is an ``nn.Module``, and it casts its inputs to its policy's dtype)."""
    if not isinstance(obj, torch.nn.Module):
        return None
    for path, mod in obj.named_modules():
        pol = getattr(type(mod), "dtype_policy", None) is not None and getattr(mod, "dtype_policy", None)
        dt = getattr(pol, "compute_dtype", None) if pol is not None else None
        if isinstance(dt, str) and dt.startswith(("float", "bfloat")):
            pkg = type(mod).__module__.split(".")[0]
            return (f"{path + '.' if path else ''}dtype_policy ({'' if pkg.startswith('_') else pkg + ' '}"
                    f"{type(mod).__name__})", dt)
    return None


def _unconverted_tensors(obj: Any, other: torch.dtype) -> list[str]:
    """Floating tensors held as plain attributes (not parameters or buffers) in another dtype than
    ``other``: torch's ``.to()`` leaves them as they are."""
    if not isinstance(obj, torch.nn.Module):
        return []
    found = []
    for path, mod in obj.named_modules():
        for k, v in vars(mod).items():
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and v.is_floating_point() \
                    and v.dtype != other and k not in mod._buffers:
                found.append(f"{path + '.' if path else ''}{k} ({dtype_name(v.dtype)})")
    return found[:3]


def _raised_after_to(name: str, obj: Any, other: torch.dtype, exc: BaseException) -> Property:
    """The module converted by torch's ``.to(other)`` raised. When it keeps its dtype in a policy of
    its own (a Keras layer), the property cannot run as built: skipped with the reason (torch's
    conversion left the module inconsistent, which says nothing about the dtype it returns). Any
    other raise is a finding: a module whose parameters and buffers are in ``other`` must run there."""
    od = dtype_name(other)
    pol = own_dtype_policy(obj)
    if pol is not None and pol[1] != od:
        p = unavailable(name, "", exc_text(exc), device_limit=False)
        why = (f"the module keeps its computation dtype in {pol[0]} = {pol[1]}, which torch's .to({od}) does not "
               f"convert")
        p.detail = (f"not available as built: {why}; after the conversion its code raised {short_text(exc_text(exc))}"
                    f"; nothing to compare (build the module in {od}, e.g. dtype=\"{od}\", to check it there)")
        p.numbers["why"] = why
        return p
    left = _unconverted_tensors(obj, other)
    return Property(name, "fail", float("inf"), 0.0, "must run in " + od,
                    f"after torch's .to({od}) converted its parameters and buffers, the module raised {exc_text(exc)}"
                    + (f"; tensors .to() does not convert (plain attributes): {', '.join(left)}" if left else ""))


def prop_dtype_device(f: Callable, obj: Any, x: torch.Tensor, out: torch.Tensor, *, other: torch.dtype,
                      device: str, tol: float, just: str, more: list | None = None) -> Property:
    """The output keeps the input's dtype and device: the object (a copy cast to ``other`` when it is
    a module) on ``x`` in ``other``; agreement with the main run within ``other``'s rounding, at unit
    logits and at each ``(x, out, tol, why, where)`` of ``more`` (the other probe lengths: a float32 path wrong at
    one length only, 28b F1; the large-logit probe: a mask filled with −30 only in float32 leaks there)."""
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
    except OutputOffError as exc:  # no numbers in it: named below as what it is
        o = exc.out
    except Exception as exc:
        if unsupported(exc):  # the module's (or its kernel's) limitation, not a dtype it loses
            p = unavailable(name, device, f"{exc_text(exc)}")
            p.detail = p.detail.replace("the module's backward raised",
                                        f"the module in {dtype_name(other)} raised")
            return p
        return _raised_after_to(name, obj, other, exc)
    if isinstance(g, WithMask) and xo.dim() == 3 and xo.shape[1] >= 2:  # the mask of this dtype's call watched with a
        g.valid = torch.ones(xo.shape[:2], dtype=torch.bool)  # padded key (an all-True mask written True changes
        g.valid[:, -1] = False  # nothing): a write is counted in MASK_WRITTEN, input_unchanged's (24b F5)
        try:
            call(g, xo.clone())
        except Exception:  # noqa: BLE001 - this call only watches the mask
            pass
        finally:
            g.valid = None
    if not isinstance(o, torch.Tensor):
        return Property(name, "fail", float("inf"), 0.0, "", f"returned {type(o).__name__} for {other} input")
    problems = []
    if not_dense(o):
        problems.append(f"a {dtype_name(other)} input gave {not_dense(o)}")
    elif tuple(o.shape) != tuple(xo.shape):
        problems.append(f"a {dtype_name(other)} input of shape {tuple(xo.shape)} gave shape {tuple(o.shape)}")
    if o.dtype != other:
        problems.append(f"{dtype_name(other)} input gave {dtype_name(o.dtype)} output")
    if o.device != xo.device:
        problems.append(f"input on {xo.device} gave output on {o.device}")
    if problems:
        return Property(name, "fail", float("inf"), 0.0, "dtype and device must be those of the input", "; ".join(problems))
    def ratio(e: float, t: float) -> float:  # a row without a finite tolerance decides nothing: the worst only alone
        return -0.5 if not math.isfinite(t) else (e / t if math.isfinite(e) else float("inf"))

    err = _rel(o, out)
    worst = (ratio(err, tol), err, tol, just, f"unit logits, T = {x.shape[-2]}")
    unsure = not math.isfinite(tol)
    checked = []
    for xm, om, tm, why, at in more or ():
        xm = xm.to(dtype=other, device=device)
        try:
            o2, _ = call(g, xm)
        except Exception as exc:  # at one probe only, while it ran at the first: the module's failure there, unless
            if unsupported(exc):  # the operation is unsupported (dropped, not listed as checked: 33b F6)
                continue
            return Property(name, "fail", float("inf"), 0.0, "the module runs in the other dtype wherever it runs in it",
                            f"the module in {dtype_name(other)} raised {exc_text(exc)} at {at} while it ran at unit "
                            f"logits, T = {x.shape[-2]}", {"raised": exc_text(exc)}, True)
        checked.append(at)
        if not isinstance(o2, torch.Tensor) or o2.dtype != other or o2.device != xm.device or o2.shape != xm.shape:
            what = (f"{dtype_name(o2.dtype)} of shape {tuple(o2.shape)} on {o2.device}" if isinstance(o2, torch.Tensor)
                    else type(o2).__name__)
            return Property(name, "fail", float("inf"), 0.0, "dtype and device must be those of the input",
                            f"a {dtype_name(other)} input at {at} gave {what}")
        e2 = _rel(o2.detach().to(device="cpu", dtype=torch.float64, copy=True), om)
        if ratio(e2, tm) > worst[0]:
            worst = (ratio(e2, tm), e2, tm, why, at)
        if not math.isfinite(tm):
            unsure = True
    _, err, tol, just, where = worst
    if unsure and err <= tol:  # a probe without a tolerance in that precision: open, not passed (19b F6)
        tol = math.nan
    return _judge(name, err, tol, just, f"{dtype_name(other)} on {xo.device}: same dtype and device out; relative "
                                        f"difference from the {dtype_name(x.dtype)} run {err:.2g} (worst at {where}"
                                        + (f"; checked at {', '.join(checked)} too)" if checked else ")"))
