"""Structural properties of a user's attention map: what a correct module keeps *exactly*.

``causal_no_future_leak``, ``window_respected``, ``key_padding_respected`` (the redraw part) and
``batch_independence`` compare a module with itself: a token the mask forbids, a padded key, or
another sample of the batch is redrawn, and the outputs it must not reach are compared. A correct
module moves them by **exactly nothing**, in any precision (a masked weight is an exact 0, and
``0·v`` added to a sum leaves it unchanged), so the tolerance is not the forward tolerance: it is
what can legitimately move, the module's own run-to-run difference measured by calling it twice on
the identical input (:func:`jitter`; 0 for a deterministic module), doubled (each side of the
comparison carries it once).

Every compared output is a copy (:func:`kept`): a module that returns a reused output buffer must
not have its earlier result overwritten by the next call.

The base of a redraw and the redrawn inputs are run in one stacked call (same batch layout, same
kernels), so a batch-size-dependent kernel choice is not read as a leak. ``batch_size_independence``
(a sample alone against the same sample in its batch) runs a different batch shape, where kernels
may round differently: it is judged by twice the forward tolerance (each side within it of the
reference).

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from numerics.attention_noise import (NOISE_MARGIN, deterministic_tolerance, is_noisy, late_deterministic,  # noqa: F401
                                      mark_noisy, noise_floor, structural_tolerance)  # (re-exported: their home is there)
from numerics.attention_redraws import (_redraws_against_reference, _shared_prefix, late_rows,  # noqa: F401
                                        own_sequence_move)
from numerics.attention_reference import allowed_mask
from numerics.attention_rules import (HUGE_LOGIT, LARGE_LOGIT, UNDECIDABLE_TOL, Property, _chunks, _judge, _skip,
                                      exc_text)

__all__ = ["kept", "in_halves", "jitter", "structural_tolerance", "late_deterministic", "late_rows", "Dependence", "dependence", "prop_mask", "prop_batch",
           "prop_batch_size"]


def kept(t: torch.Tensor) -> torch.Tensor:
    """A float64 CPU **copy** of ``t`` (``.double().cpu()`` of a float64 CPU tensor is the same storage:
    a module reusing its output buffer would overwrite it on the next call)."""
    return t.detach().to(device="cpu", dtype=torch.float64, copy=True)


def _move(a: torch.Tensor, b: torch.Tensor, scale: float) -> float:
    """``max|a − b| / scale`` over the finite entries of both (NaN entries are counted elsewhere)."""
    d = (a - b).abs()
    d = torch.where(torch.isfinite(d), d, torch.zeros_like(d))
    return float(d.max()) / max(scale, 1e-300) if d.numel() else 0.0


def jitter(probe: Any, x: torch.Tensor, first: torch.Tensor) -> float:
    """The module's run-to-run difference: ``first`` (its output on ``x``, kept) against a second call on
    the identical ``x``, relative to ``max|first|`` (0 for a deterministic module)."""
    again = kept(probe.run(x)[1])
    fin = first[torch.isfinite(first)]  # (all NaN/inf at logits the module overflows at: max() of nothing raised, and
    got = _move(again, first, float(fin.abs().max()) if fin.numel() else 1.0)  # the leak property failed on it, 18b F3)
    mark_noisy(probe, got, x.shape[1])
    return got


@dataclass
class Dependence:
    """``delta[i, t]``: the relative change of output ``t`` (any sample) when token ``J[i]`` is redrawn,
    measured within one stacked call; ``jitter``: the run-to-run difference of that call."""

    delta: torch.Tensor
    J: list[int]
    jitter: float
    only: tuple | None = None  # per row: the one kind its redraw may be judged for (a group redraw), or None: any


def _kind_rows(dep: "Dependence", kind: str, mask: torch.Tensor) -> torch.Tensor:
    """``mask`` without the rows of ``dep`` whose redraw is judged for another kind only."""
    if dep.only is None:
        return mask
    keep = torch.tensor([o is None or o == kind for o in dep.only], dtype=torch.bool)[:, None]
    return mask & keep


def dependence(probe: Any, T: int, key: str, same_positions: bool = False) -> Dependence | None:
    """Redraw each token of ``probe._positions(T)`` in turn (at the probe ``key``'s scale); the base (the
    unchanged probe) is the first block of every stacked call. The run-to-run difference is measured on
    the unchanged probe alone, called twice (cheap; the comparison itself stays within one call).
    ``same_positions``: each block is compared with the unchanged probe at the same places of a second stacked call
    (a module whose rounding depends on a sample's place in the batch, deterministic, read as a leak of 1e-16 against
    the first block: hostile pass 24b F17); one more call per chunk, asked where a forbidden move was seen."""
    cache = probe.__dict__.setdefault("_dep_cache", {}) if key == "unit" else {}  # unit: independent of the declaration
    if (T, same_positions) in cache:
        return cache[(T, same_positions)]
    c = probe.factor(probe.xs[T], key)
    if c is None:  # the probe does not exist in float64 at this declaration (probe.large_factor)
        return None
    x64 = probe.xs[T] * c
    J = probe._positions(T)
    noise = probe.probe(T, salt=17) * c
    per = _per_sequence_bytes(probe, T) * probe.B
    n = max(1, _chunks(len(J) + 1, per) - 1)
    deltas, jit = [], None
    for i in range(0, len(J), n):
        js = J[i:i + n]
        xs = x64.unsqueeze(0).repeat(len(js) + 1, 1, 1, 1)
        for a, j in enumerate(js):
            xs[a + 1, :, j] = noise[:, j]
        flat = xs.reshape((len(js) + 1) * probe.B, T, probe.D)
        o = _stacked(probe, flat, len(js) + 1).reshape(len(js) + 1, probe.B, T, probe.D)
        _redraws_against_reference(probe, flat, o, T, key)
        if jit is None:  # the module's run-to-run difference: the unchanged probe called twice more
            jit = jitter(probe, x64, kept(probe.run(x64)[1]))
        base = o[0]
        probe.__dict__.setdefault("_stack_bases", {}).setdefault((T, key), base)  # (batch_size_independence: 30b F1)
        fin = base[torch.isfinite(base)]
        scale = max(float(fin.abs().max()) if fin.numel() else 0.0, 1e-300)
        bases = base.unsqueeze(0)
        if same_positions:
            same = x64.unsqueeze(0).repeat(len(js) + 1, 1, 1, 1).reshape((len(js) + 1) * probe.B, T, probe.D)
            bases = _stacked(probe, same, len(js) + 1).reshape(len(js) + 1, probe.B, T, probe.D)[1:]
        deltas.append((o[1:] - bases).abs().amax(dim=(1, 3)) / scale)
    dep = Dependence(torch.cat(deltas), J, jit or 0.0)
    cache[(T, same_positions)] = dep
    return dep


def _per_sequence_bytes(probe: Any, T: int) -> float:
    """What one sequence of a stacked call holds, for the chunks of ≤ 256 MB: its activations (six T×D float64
    tensors) and four T×T float64 tensors per head (logits, weights and their copies). The heads are the mapping's
    (four where none is mapped). Counted without them, the README's 4-head example at T = 257 grew by 713 MB over
    its start, over a --max-memory of 0.5 the up-front estimate had let start (hostile pass 38a F1); with them, 286 MB
    (ru_maxrss, in one process), for 22 % more CPU at the default lengths (smaller stacked calls; --quick unchanged)."""
    heads = getattr(getattr(probe, "m", None), "heads", None) or 4
    return T * probe.D * 8 * 6 + heads * T * T * 8 * logit_copies(type(getattr(probe, "f", None)).__name__ == "WithMask")


def logit_copies(masked: bool) -> int:
    """T×T float64 tensors per head a call holds: four (logits, weights and their copies), eight with a mask passed
    (the module's own additive mask per head and its merged copies: torch's MultiheadAttention at T = 900 with a
    key-padding mask used 654 MB where four per head said under 512: hostile pass 46a F9)."""
    return 8 if masked else 4


def _forbidden(T: int, J: list[int], st, causal: bool) -> dict[str, torch.Tensor]:
    """The (redrawn token, output) pairs the declaration forbids: future tokens and tokens outside the window."""
    jj = torch.tensor(J)[:, None]
    tt = torch.arange(T)[None, :]
    allowed = allowed_mask(T, st)  # [t, s]
    forb = ~allowed[tt.expand(len(J), T), jj.expand(len(J), T)]
    fut = forb & (jj > tt)
    return {"causal": fut, "window": forb & ~(jj > tt) if causal else forb}


_WHAT = {"causal": "redrawing a token after the output's position (the causal mask forbids it)",
         "window": "redrawing a token outside the declared window"}
_NAMES = {"causal": "causal_no_future_leak", "window": "window_respected"}


@dataclass
class _Worst:
    ratio: float = -1.0
    error: float = 0.0
    tol: float = 0.0
    just: str = ""
    where: tuple | None = None  # (T, key, j, t)
    nonfinite: tuple | None = None  # (T, key, tol, just)


def _scan_mask(probe: Any, kinds: list[str]) -> tuple[dict, dict, list, str | None]:
    """Every probe length and logit scale: the worst move of a forbidden pair per kind, in the stacked redraw calls
    and in the calls at the module's own batch shapes (:func:`plain_dependence`)."""
    worst = {k: _Worst() for k in kinds}
    offs = {k: set() for k in kinds}
    undecided: list[tuple] = []
    for T in probe.outs:
        if T < 2:
            continue
        plain = [(scale, n) for scale in ("unit", "large", "huge") for n in sorted({1, probe.B})]
        for key in ("unit", "large", "huge") + tuple(plain):
            if isinstance(key, str) and key != "unit" and T not in probe._large_lengths():
                continue  # (the calls of the module's own shapes at every length and scale: 27b F4)
            try:
                if isinstance(key, tuple):
                    try:
                        dep, key = plain_dependence(probe, T, *key), _plain_label(*key)
                    except Exception:  # noqa: BLE001 - a module refusing that batch size (one that takes no batch
                        continue  # of one): nothing to watch there, never its leak (27b F5)
                else:
                    dep = dependence(probe, T, key)
                    if dep is not None and _forbidden_moved(probe, dep, T, kinds):  # again, each block against the
                        dep = dependence(probe, T, key, same_positions=True)  # probe at its own places (24b F17)
            except Exception as exc:  # the user's code
                return worst, offs, undecided, f"raised {exc_text(exc)} at T = {T}"
            if dep is None:  # no such probe in float64 at this declaration (probe.out_of_range says which)
                continue
            _take(probe, dep, T, key, kinds, (worst, offs, undecided))
    return worst, offs, undecided, None


def _plain_label(scale: str, n: int) -> str:
    return f"{scale} logits, {'a single sequence' if n == 1 else f'the probe batch of {n}'} called alone"


def _logits(key: str) -> str:
    """``key`` as the text of where a redraw ran ("unit logits", or a plain call's label)."""
    return f"{key} logits" if key in ("unit", "large", "huge") else key


def _take(probe: Any, dep: Dependence, T: int, key: str, kinds: list[str], acc: tuple) -> None:
    """Fold one redraw measurement into the worst move per kind (``acc``: worst, offsets, undecided)."""
    worst, offs, undecided = acc
    tol, just = structural_tolerance(dep.jitter, "", noise_floor(probe, T), is_noisy(probe))
    if not tol < UNDECIDABLE_TOL:
        undecided.append((T, key, tol))
        return
    for kind, mask in _forbidden(T, dep.J, probe.st, probe.st.causal).items():
        mask = _kind_rows(dep, kind, mask)
        if kind not in kinds or not mask.any():
            continue
        _, just = structural_tolerance(dep.jitter, _WHAT[kind], noise_floor(probe, T), is_noisy(probe))
        dm = torch.where(mask, dep.delta, torch.zeros_like(dep.delta))
        w = worst[kind]
        if not torch.isfinite(dm).all():  # NaN/inf outputs: nothing measurable at this probe
            w.nonfinite = w.nonfinite or (T, key, tol, just)
            dm = torch.where(torch.isfinite(dm), dm, torch.zeros_like(dm))
        e = float(dm.max())
        ratio = e / tol if tol > 0 else (0.0 if e == 0 else float("inf"))
        if ratio > w.ratio or w.where is None:
            k = int(dm.argmax())
            w.ratio, w.error, w.tol, w.just, w.where = ratio, e, tol, just, (T, key, dep.J[k // T], k % T)
        for a, t in torch.nonzero(dm > tol).tolist():
            offs[kind].add(dep.J[a] - t)


def plain_dependence(probe: Any, T: int, key: str, n: int) -> Dependence | None:
    """Redraws in calls of the module's own shapes: the first ``n`` samples of the probe ``key`` (unit, large or huge
    logits; a single sequence, or the probe batch), with the first and the last token redrawn in turn (the last is in
    every earlier output's future; the first is outside a sliding window of every later output), each call against
    the unchanged input at the same shape. The stacked redraw calls have at least twice the probe batch: a path taken
    for small batches only (a batch of one "has no padding", a kernel for up to 4 sequences) leaked there unseen
    (hostile pass 25b F6), and a finite mask fill there leaks at large logits only (26b F1). ``None`` where the probe
    ``key`` does not exist in float64 at this declaration."""
    c = probe.factor(probe.xs[T], key)
    if c is None:
        return None
    x = probe.xs[T][:n] * c
    J = sorted({0, T - 1})
    noise = probe.probe(T, salt=17)[:n] * c
    base = kept(probe.run(x)[1])
    probe.__dict__.setdefault("_plain_bases", {})[(T, key, n)] = base  # (batch_size_independence compares them: 29b F5)
    jit = jitter(probe, x, base)
    fin = base[torch.isfinite(base)]
    scale = max(float(fin.abs().max()) if fin.numel() else 0.0, 1e-300)
    rows = [([j], j, None) for j in J]  # (tokens redrawn, the row's token for the forbidden pairs, its only kind)
    m = T // 2
    if probe.st.causal and 1 <= m < T - 1:  # every token from the middle on: each earlier output (a leak through
        rows.append((list(range(m, T)), m, "causal"))  # the middle future keys: 27b F1)
        if probe.st.window is not None:  # the first half: each output whose window holds none of it
            rows.append((list(range(0, m)), m - 1, "window"))
    deltas = []
    for js, _, _ in rows:
        x2 = x.clone()
        x2[:, js] = noise[:, js]
        o2 = kept(probe.run(x2)[1])
        _redraws_against_reference(probe, x2, o2.unsqueeze(0), T, key)
        deltas.append((o2 - base).abs().amax(dim=(0, 2)) / scale)
    return Dependence(torch.stack(deltas), [j for _, j, _ in rows], jit, tuple(k for _, _, k in rows))


def _stacked(probe: Any, flat: torch.Tensor, blocks: int) -> torch.Tensor:
    """The outputs of ``blocks`` probe batches stacked into one call; where the module refuses that batch size (a
    static cache sized for 32 sequences), the call halved, block-wise, until the module runs it: the checker's batch was
    blamed as a leak (hostile pass 25b F5), and blocks of the probe batch alone never ran the batch sizes between it
    and the module's largest (a leak in batches of 8 to 16 passed: 26b F10). A block that raises too is the module's
    own finding."""
    return in_halves(lambda a, b: kept(probe.run(flat[a:b])[1]), flat.shape[0], flat.shape[0] // blocks)


def in_halves(call, n: int, unit: int, start: int = 0) -> torch.Tensor:
    """``call(start, start + n)`` (rows of a batch), or where it raises, the two halves (whole ``unit``-row blocks) the
    same way, concatenated; a single block that raises raises."""
    try:
        return call(start, start + n)
    except Exception:  # noqa: BLE001 - the user's module refused this batch size
        blocks = n // unit
        if blocks <= 1:
            raise
        h = (blocks // 2) * unit
        return torch.cat([in_halves(call, h, unit, start), in_halves(call, n - h, unit, start + h)], 0)


def _forbidden_moved(probe: Any, dep: Dependence, T: int, kinds: list[str]) -> bool:
    """Whether a pair the declaration forbids moved beyond the structural tolerance (or to NaN) at this probe."""
    tol, _ = structural_tolerance(dep.jitter, "", noise_floor(probe, T), is_noisy(probe))
    for kind, mask in _forbidden(T, dep.J, probe.st, probe.st.causal).items():
        if kind in kinds and mask.any() and not bool((torch.where(mask, dep.delta, 0.0) <= tol).all()):
            return True
    return False


def _undecided(name: str, undecided: list) -> "object":
    T_, key_, tol_ = undecided[0]
    p = _skip(name, f"undecided: at every probe the module's own run-to-run difference is ≥ {UNDECIDABLE_TOL:g} "
                    f"relative (e.g. a tolerance of {tol_:.3g} at T = {T_}, {_logits(key_)}), so a leak cannot be told "
                    "from its nondeterminism", True)
    p.numbers = {"undecidable": True, "to_decide": "a deterministic run of the module (fixed kernels, no dropout)"}
    return p


def prop_mask(probe: Any) -> list:
    """``causal_no_future_leak`` (declared causal) and ``window_respected`` (declared window): redrawing a
    token the mask forbids moves no output, exactly, at unit, large and huge logits."""
    kinds = [k for k, on in (("causal", probe.st.causal), ("window", probe.st.window is not None)) if on]
    _shared_prefix(probe)
    if not kinds:
        return []
    worst, offs, undecided, raised = _scan_mask(probe, kinds)
    if raised:
        return [Property(_NAMES[kinds[0]], "fail", float("inf"), 0.0, "must run", raised, {}, True)]
    props = []
    for kind in kinds:
        name, w = _NAMES[kind], worst[kind]
        if w.where is None:
            props.append(_undecided(name, undecided) if undecided else
                         _skip(name, "no forbidden pair at the probe lengths" if probe.outs and max(probe.outs) >= 2
                               else "no length ≥ 2 ran", True))
            continue
        e, tol, just = w.error, w.tol, w.just
        T, key, j, t = w.where
        mask_word = "causal mask" if kind == "causal" else "window"
        if not e > tol and w.nonfinite:
            T, key, tol, just = w.nonfinite
            e = float("nan")
            detail = (f"no leak among the finite outputs, but outputs are NaN/inf at T = {T} ({_logits(key)}) when "
                      f"tokens are redrawn: whether the {mask_word} holds cannot be measured there (see "
                      "stable_at_extreme_logits, batch_independence)")
        elif e > tol and key in ("unit", "large", "huge") and not own_sequence_move(
                probe, T, key, j, t, _stacked, _per_sequence_bytes(probe, T)) > tol:
            props.append(_skip(name, f"output {t} moved by {e:.3g} in a stacked call of many samples when token {j} "
                               f"changed in each (T = {T}, {_logits(key)}), not when it changes in that sample alone: the "
                               "module mixes the samples of a large batch (batch_size_independence judges that), so a "
                               "leak within a sequence cannot be told from it in those calls", True))
            continue
        elif e > tol:
            o = sorted(offs[kind], key=abs)
            detail = (f"LEAK: output at position {t} moves by {e:.3g} (relative) when token {j} (= t{j - t:+d}) "
                      f"changes, at T = {T} ({_logits(key)}); a correct module moves it by exactly nothing; leaking "
                      f"offsets j − t: {', '.join(f'{v:+d}' for v in o[:8])}" + (" …" if len(o) > 8 else ""))
        else:
            skipped = sorted(getattr(probe, "out_of_range", ()))
            scales = ("unit, large and huge logits: " f"{LARGE_LOGIT:g}, {HUGE_LOGIT:g}" if not skipped else
                      f"unit logits and those of {', '.join(k for k in ('large', 'huge') if k not in skipped) or 'no other'}"
                      f" scale; not probed: {' and '.join(skipped)} logits, beyond the range of float64 or of the input's "
                      "precision at this declaration")
            detail = (f"redrawing a token the {mask_word} forbids moves no output (largest relative change {e:.2g}; "
                      f"lengths {', '.join(map(str, probe.outs))}, {scales}; stacked redraws, and calls of a single sequence "
                      f"{'' if probe.B == 1 else f'and of the probe batch of {probe.B} '}alone)")
        row = _judge(name, e, tol, just, detail, central=True)
        unreached = _sides_unreached(probe) if kind == "window" else []
        if row.status == "pass" and unreached:  # one side judged, the other never bound: not a pass (30b F6)
            side, n = unreached[0]
            row = _skip(name, f"the {side} of --window forbids a key only from T = {n} on; the longest probe is "
                              f"T = {max(probe.outs)}: that side was never judged (the other held: {detail})", True)
            row.numbers = {"to_decide": f"add a length ≥ {n} to --seq-len (the {side} of the window forbids a key "
                                        f"only from T = {n} on)"}
        props.append(row)
    return props


def _sides_unreached(probe: Any) -> list[tuple[str, int]]:
    """The sides of a declared window (``(look-back L, look-ahead R)``, the look-ahead only where not causal) that
    forbid no key at any probe length: ``(side, the shortest length at which it would)``."""
    L, R = probe.st.window
    T = max(probe.outs) if probe.outs else 0
    sides = [("look-back", L)] + ([] if probe.st.causal else [("look-ahead", R)])
    return [(name, v + 2) for name, v in sides if v is not None and T < v + 2]


def _redraw_others(probe: Any, T: int, b: int) -> tuple[torch.Tensor, str]:
    """The probe at length ``T`` with every sample but ``b`` redrawn at the huge-logit scale."""
    x2 = probe.xs[T].clone()
    fresh = probe.probe(T, salt=23 + b)
    c = probe.large_factor(fresh, HUGE_LOGIT, cache=False)
    others = [i for i in range(probe.B) if i != b]
    if c is None:  # huge logits beyond the precision's range here: the others redrawn as drawn
        x2[others] = fresh[others]
        return x2, "the other samples redrawn (at the probe's scale: huge logits are beyond the precision's range here)"
    x2[others] = fresh[others] * c
    return x2, f"the other samples redrawn at ×{c:.3g} scale (logits up to ~{HUGE_LOGIT:g})"


def _sample_move(o: torch.Tensor, base: torch.Tensor, scale: float | None = None) -> float:
    """One sample's move relative to ``scale`` (default: its own largest finite entry); inf when the
    moved output has NaN/inf where the base had none."""
    if scale is None:
        fin = base[torch.isfinite(base)]
        scale = float(fin.abs().max()) if fin.numel() else 1.0
    if not torch.isfinite(o).all() and torch.isfinite(base).all():
        return float("inf")
    return _move(o, base, scale)


def _batch_lengths(probe: Any) -> list[int]:
    """The lengths the batch properties watch (none for a batch of one: nothing to compare across)."""
    return (probe._large_lengths() or list(probe.outs)) if probe.B >= 2 else []


def prop_batch(probe: Any) -> "object":
    """``batch_independence``: no sample's output moves when the other samples of its batch are redrawn
    (at the huge-logit scale), watched for **every** sample, exactly (same batch shape, same kernels)."""
    name = "batch_independence"
    Ts = _batch_lengths(probe)
    if not Ts:
        return _skip(name, "a batch of one: no other sample to redraw")
    worst = None
    for T in Ts:
        base = probe.outs[T]
        try:
            jit = jitter(probe, probe.xs[T], base)
            for b in range(probe.B):
                x2, what = _redraw_others(probe, T, b)
                o = kept(probe.run(x2)[1])
                e = _sample_move(o[b], base[b])
                r = e / (2 * jit) if jit > 0 else (0.0 if e == 0 else float("inf"))
                if worst is None or r > worst[0]:
                    worst = (r, e, jit, T, b, what)
        except Exception as exc:  # the user's code
            return Property(name, "fail", float("inf"), 0.0, "must run", f"raised {exc_text(exc)} (T = {T})")
    if worst is None:
        return _skip(name, "no length ran")
    big = _big_batch(probe, Ts[len(Ts) // 2])
    if big is not None:
        e, jit, T, what, _ = big
        r = e / (2 * jit) if jit > 0 else (0.0 if e == 0 else float("inf"))
        if r > worst[0]:
            worst = (r, e, jit, T, 0, what)
    _, e, jit, T, b, what = worst
    tol, just = structural_tolerance(jit, "redrawing another sample of the batch", noise_floor(probe, T), is_noisy(probe))
    big_text = (f"and the first of a batch of {big[4]} (the others redrawn"
                + (f"; the module refused {_BIG})" if big[4] != _BIG else ")") if big is not None else
                f"not in a batch of {_BIG} or half of it: the module refused those batch sizes")  # (said: 27b F8)
    detail = (f"every sample of the batch watched ({probe.B}), {big_text}; "
              f"worst: sample {b} at T = {T}, {what}: relative change {e:.3g}")
    if not e <= tol:
        detail += "; one sample's output depends on the others (a statistic taken over the whole batch, or a packed batch?)"
    return _judge(name, e, tol, just, detail)


#: the batch ``batch_independence`` also watches a sample in (a path for serving batches: hostile pass 26b F8)
_BIG = 16


def _big_batch(probe: Any, T: int) -> tuple[float, float, int, str, int] | None:
    """``(move, run-to-run difference, T, what, size)`` of the first sample of a batch of ``_BIG`` (the probe's samples
    repeated) when the other ``_BIG − 1`` are redrawn (at the huge-logit scale): a statistic taken over large batches
    only stayed unseen in the probe batch, and a term common to a stacked call's rows cancels between them. Where the
    module refuses that batch size, half of it, down to a batch larger than the probe's (a module refusing 16 read the
    batch's mean in every batch of 4 or more: 28b F8). ``None`` where it refuses every such size."""
    size = _BIG
    while size > probe.B:
        idx = torch.arange(size) % probe.B
        x = probe.xs[T][idx]
        fresh = probe.probe(T, salt=29)[idx]
        c = probe.large_factor(fresh, HUGE_LOGIT, cache=False)
        x2 = x.clone()
        x2[1:] = fresh[1:] * (c if c is not None else 1.0)
        try:
            base = kept(probe.run(x)[1])
            jit = jitter(probe, x, base)
            o = kept(probe.run(x2)[1])
        except Exception:  # noqa: BLE001 - the user's module refused a batch of this size
            size //= 2
            continue
        probe.__dict__["_big_base"] = (T, idx, base)  # (batch_size_independence compares it: 29b F2)
        return _sample_move(o[0], base[0]), jit, T, f"the other {size - 1} samples of a batch of {size} redrawn", size
    return None


def prop_batch_size(probe: Any) -> "object":
    """``batch_size_independence``: each sample alone (a batch of one) against the same sample in the probe
    batch; different batch shapes may take different kernels, so twice the forward tolerance."""
    name, worst = "batch_size_independence", None
    for T in (list(probe.outs) if probe.B >= 2 else []):  # every length: a single one-token sequence too (28b F7)
        base, (tol, just) = probe.outs[T], probe.tol_at(T, "unit")
        scale = float(base[torch.isfinite(base)].abs().max()) if torch.isfinite(base).any() else 1.0
        for b in range(probe.B):
            try:
                o = kept(probe.run(probe.xs[T][b:b + 1])[1])
            except Exception as exc:  # the user's code
                return Property(name, "fail", float("inf"), 0.0, "must run",
                                f"raised {exc_text(exc)} (sample {b} alone, T = {T})")
            e = _sample_move(o[0], base[b], scale)
            r = e / (2 * tol) if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, 2 * tol, just, T, b)
    for r, e, tol2, just2, T, b in _other_sizes(probe):
        if worst is None or r > worst[0]:
            worst = (r, e, tol2, just2, T, b)
    if worst is None:
        return _skip(name, "no length ran" if probe.B >= 2 else "the probe batch is already a batch of one")
    _, e, tol, just, T, b = worst
    detail = (f"each sample alone (a batch of one) against the same sample in the batch, at unit logits; a single "
              f"sequence against the probe batch at large and huge logits; each sample of the batch of up to {_BIG} "
              f"against the probe batch; worst: sample {b} at T = {T}")
    if not e <= tol:
        detail += "; the output depends on the batch size"
    return _judge(name, e, tol, "2 × the forward tolerance (two batch shapes, each within it of the reference): "
                  + just, detail)


def _other_sizes(probe: Any, unit: bool = False) -> list[tuple]:
    """``(ratio, move, tolerance, why, T, sample)`` of the outputs of the calls at other batch sizes that the other
    properties made and compared only with themselves (a NaN or a 1.5× output there was "ok": 29b F2, F5): the single
    sequence at large and huge logits against the probe batch's first sample at that scale (:func:`plain_dependence`),
    and every sample of the large batch (:func:`_big_batch`) against its probe sample; twice the forward tolerance."""
    out = []
    bases = probe.__dict__.get("_plain_bases", {})
    for (T, key, n), b1 in bases.items():
        bB = bases.get((T, key, probe.B))
        if n != 1 or (key == "unit" and not unit) or bB is None or probe.B < 2:
            continue
        tol, just = probe.tol_at(T, key)
        e = _sample_move(b1[0], bB[0])
        out.append((e / (2 * tol) if math.isfinite(e) else float("inf"), e, 2 * tol,
                    f"2 × the forward tolerance at {key} logits: " + just, T, 0))
    for (T, key), sb in probe.__dict__.get("_stack_bases", {}).items():  # the stacked redraw calls' unchanged block
        bB = probe.outs.get(T) if key == "unit" else bases.get((T, key, probe.B))  # against the probe batch (30b F1)
        if bB is None or sb.shape != bB.shape:
            continue
        tol, just = probe.tol_at(T, key)
        for i in range(sb.shape[0]):
            e = _sample_move(sb[i], bB[i])
            out.append((e / (2 * tol) if math.isfinite(e) else float("inf"), e, 2 * tol,
                        f"2 × the forward tolerance at {key} logits (a stacked call): " + just, T, i))
    big = probe.__dict__.get("_big_base")
    if big is not None:
        T, idx, base = big
        tol, just = probe.tol_at(T, "unit")
        for i in range(base.shape[0]):
            e = _sample_move(base[i], probe.outs[T][int(idx[i])])
            out.append((e / (2 * tol) if math.isfinite(e) else float("inf"), e, 2 * tol,
                        "2 × the forward tolerance (two batch shapes): " + just, T, i))
    return out


#: the most call shapes :func:`audit_call_shapes` runs again
_AUDITED = 48


def _audited_shapes(probe: Any, every: bool = True) -> tuple[int, list[tuple[int, int]]]:
    """``(T, [(batch, T), ...])``: the call shapes of the module on the plain eval path
    (:data:`numerics.attention_rules.CALL_SHAPES`) at a probe length, but the probe batch's and a single sequence's
    (those are judged at the probe batch itself). ``every``: each shape used (a module wrong only in batches above 16
    at T ≥ 3 was "ok" when each size ran at T = 2 alone: 32b F3); else (the other paths', whose every shape would double
    the check's cost at default sizes) each batch size at the shortest probe lengths ≥ 2 and ≥ 3, a single sequence
    among them (on another path nothing else judges it where that path's outputs at the probe batch are the eval
    path's: a leak under inference mode for one sequence at T ≥ 3 was "ok", 32b F2). ``T`` is the shortest probe
    length ≥ 2."""
    from numerics.attention_rules import CALL_SHAPES

    finite = [T for T in probe.outs if torch.isfinite(probe.outs[T]).all()]
    T_a = min([T for T in finite if T >= 2] or finite or [0])
    used: dict[int, set[int]] = {}
    for B, T, dt in CALL_SHAPES:
        if dt == probe.pdt and B not in (1, probe.B) and T in finite:
            used.setdefault(B, set()).add(T)
    if not every:
        used.setdefault(1, set())
    T_b = min([T for T in finite if T >= 3] or [T_a])
    shapes = {(B, T) for B, Ts in used.items() for T in (Ts if every else {T_a, T_b})}
    return T_a, sorted(shapes)[:_AUDITED] if probe.B >= 2 and T_a in probe.outs else []


def call_shape_rows(probe: Any, bases: dict | None = None, every: bool = True
                    ) -> tuple[int, tuple | None, list[tuple[int, int]]]:
    """``(number of shapes, worst, refused)``: each audited call shape (:func:`_audited_shapes`) run once more through
    ``probe.run`` (the eval path, or another path's view) on the probe's own samples repeated to that size, each
    output row against ``bases(T)`` (the same path's probe batch at that length; the probe's outputs by default),
    twice the forward tolerance; ``worst`` is ``(ratio, move, tolerance, why, batch, T, row)`` or None; ``refused``
    the shapes ``(batch, T)`` whose call raised on those samples (not judged there, and said: 33b N3)."""
    _, shapes = _audited_shapes(probe, every)
    if not shapes:
        return 0, None, []
    worst, refused = None, []
    for B, T in shapes:
        base = probe.outs[T] if bases is None else bases(T)
        tol, just = probe.tol_at(T, "unit")
        scale = float(base[torch.isfinite(base)].abs().max()) if torch.isfinite(base).any() else 1.0
        idx = torch.arange(B) % probe.B
        try:
            o = kept(probe.run(probe.xs[T][idx])[1])
        except Exception:  # noqa: BLE001 - the module ran this shape before: what raises now is its own finding
            refused.append((B, T))
            continue
        for i in range(B):
            e = _sample_move(o[i], base[int(idx[i])], scale)
            r = e / (2 * tol) if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, 2 * tol, just, B, T, i)
    return len(shapes), worst, refused


def audit_call_shapes(probe: Any, prop: Any) -> Any:
    """``batch_size_independence`` (``prop``, as judged) with every other batch size of the module's calls that the
    properties made on the plain eval path run once more on the probe's own samples (:func:`call_shape_rows`). A call
    the check makes only to compare its outputs with each other (the stacked redraws of batches 6, 12, 36, 68) is then
    never judged by itself alone: a module wrong at one batch size only, whatever property used it, is a mismatch
    (hostile passes 29b F2, 30b F1, 31b F1: the class of calls compared only with themselves)."""
    if prop.status == "fail":
        return prop
    n, worst, refused = call_shape_rows(probe)
    said = (f" ({len(refused)} of them refused on those samples, not judged: e.g. a batch of {refused[0][0]} at T = "
            f"{refused[0][1]})" if refused else "")
    if worst is None:
        if refused and prop.status == "pass":
            prop.detail += f"; the {n} other call shapes the checks called it with, run again on the probe's samples{said}"
        return prop
    r, e, tol, just, B, T, i = worst
    if r <= 1.0:  # (a row that did not pass stays as judged: nothing here decides it)
        if prop.status == "pass":
            prop.detail += (f"; the {n} other call shapes the checks called it with, run again on the "
                            f"probe's samples: worst {r:.2g} of the tolerance (a batch of {B} at T = {T}){said}")
        return prop
    detail = (prop.detail + "; " if prop.detail else "") + (
        f"every batch size the checks called the module with, run again on the probe's samples: worst sample {i} of "
        f"a batch of {B} at T = {T}")
    if not e <= tol:
        detail += "; the output depends on the batch size"
    return _judge(prop.name, e, tol, "2 × the forward tolerance (two batch shapes, each within it of the reference): "
                  + just, detail)


@dataclass
class KeptWindow:
    """The keys a causal module measurably reads: output ``t`` moves when token ``t − k`` is redrawn for
    ``k < keys`` and for no larger ``k`` up to ``probed`` (``keys > probed``: no window shows at the
    lengths probed)."""

    keys: int
    probed: int
    T: int


def _unit_redraws(probe: Any) -> tuple[int, Dependence, float] | None:
    """``(T, dependence at unit logits, tolerance)`` at the longest probe length ≤ 40 (every position
    redrawn there; else the longest ≥ 2): the tolerance is twice the module's run-to-run difference."""
    Ts = [T for T in probe.outs if 2 <= T <= 40] or [T for T in probe.outs if T >= 2]
    if not Ts:
        return None
    T = max(Ts)
    dep = dependence(probe, T, "unit")
    return T, dep, 2.0 * dep.jitter


def kept_window(probe: Any) -> KeptWindow | None:
    """Measure the window a causal module keeps at unit logits: redraw token ``t − k`` and see which ``k``
    move output ``t`` (any change beyond twice the module's run-to-run difference), at the longest probe
    length ≤ 40 (every position redrawn there)."""
    got = _unit_redraws(probe)
    if got is None:
        return None
    T, dep, tol = got
    far, probed = -1, 0
    for i, j in enumerate(dep.J):
        for t in range(j, T):
            probed = max(probed, t - j)
            if float(dep.delta[i, t]) > tol:
                far = max(far, t - j)
    return KeptWindow(far + 1 if far < probed else probed + 2, probed, T)


@dataclass
class KeptSpan:
    """The keys a bidirectional module measurably reads: output ``t`` moves when token ``t + k`` is redrawn
    for ``−back ≤ k ≤ ahead`` and for no other ``k`` within ``±probed`` (``back`` or ``ahead`` equal to
    ``probed``: no limit shows on that side at the lengths probed)."""

    back: int
    ahead: int
    probed: int
    T: int


def kept_span(probe: Any) -> KeptSpan | None:
    """Measure the look-back and look-ahead a module keeps at unit logits (a window declared for a
    bidirectional module, ``--window L,R``): redraw token ``j`` and see which offsets ``j − t`` move output
    ``t``, at the longest probe length ≤ 40 (every position redrawn there)."""
    got = _unit_redraws(probe)
    if got is None:
        return None
    T, dep, tol = got
    back = ahead = 0
    for i, j in enumerate(dep.J):
        for t in range(T):
            if float(dep.delta[i, t]) > tol:
                back, ahead = max(back, t - j), max(ahead, j - t)
    return KeptSpan(back, ahead, T - 1, T)

