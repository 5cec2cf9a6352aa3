"""``check attention``, stages *declaration completed by the module* and *weights*: the module's
configuration read as evidence (:mod:`proofs_checks.sanity._modconfig`), the reference's weights found
by name or declared by a mapping hook (:mod:`numerics.attention_mapping`), the module's q/k norms
attached to them, and the candidate layout that fits the module chosen."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from proofs_checks.options import UsageError
from proofs_checks.sanity.attention_declaration import Declaration, parse_window
from proofs_checks.sanity.attention_load import _describe, _module_state, _short, _state_changes, _user_call


@dataclass
class Weights:
    """The weights stage's result: the candidate mappings (``cands``), the hook's note (``hook``: None when
    found by name), the head counts read from the module (``read_counts``), notes, the learned-positions
    source without a table (``no_table``) and the head-count hint ``H_hint``."""

    cands: list
    hook: str | None
    read_counts: dict
    notes: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    no_table: str | None = None
    H_hint: int | None = None
    why: str = ""  # why no weights could be mapped without a declared mapping (NoMapping.why), or ""


@dataclass
class Chosen:
    """The mapping that fits the module best (``mp``, None without weights), the structure it runs under
    (``st``: the declaration, with the RoPE convention that fits when undeclared) and other head splits
    (``alts``) the hints may try."""

    mp: Any
    st: Any
    alts: list


def _read_config(obj, label, ignore_config, positional, given, window_text=None) -> tuple[dict, list[str], list[str]]:
    """The declaration completed by what the module carries (:mod:`proofs_checks.sanity._modconfig`):
    ``(values, config_read lines, notes)``. ``given["window"]`` may still be the text ``"W"`` (parsed
    here, once the module's ``is_causal`` is known). Nothing read is refused: an attribute that cannot
    be read is a note, a declared value wins over a read one (``values["_differs"]``), and
    ``values["_read"]`` holds each :class:`~proofs_checks.sanity._modconfig.Item` read (its library,
    meaning and window span)."""
    from proofs_checks.sanity import _modconfig as mc

    read = mc.ConfigRead() if ignore_config else _user_call(lambda: mc.read_module_config(obj), label)
    given = dict(given)
    scaled = mc.scaling_note(read, given.pop("scale", None))
    if scaled is not None:  # a declared --scale: the module's own scale is compared with it, not "will name it"
        read.notes = [scaled if n.startswith(read.scaling[1] + " = ") else n for n in read.notes]
    if isinstance(given.get("window"), str):
        given["window"] = parse_window(given["window"], bool(given["causal"] or read.get("causal")))
    vals, lines = mc.merge(read, given, positional, {"window": window_text} if window_text else None)
    vals["_read"], vals["_unmodelled"], vals["_scaling"] = dict(read.items), list(read.unmodelled), read.scaling
    return vals, lines, list(read.notes)


def _attach_qk_norms(f, cands, qk_norm, hook, D: int) -> tuple[list, list[str]]:
    """The module's q/k norms (by attribute name) on every candidate that has none from the hook:
    used by ``--qk-norm`` (declared or read from the module) and by the hints that try it. Returns the
    candidates whose shapes still fit (``Mapping.consistent``) and the notes: one per head split the
    norms do not fit (said, never silently dropped), and one when a QK-norm is declared and no norm
    weights were found (unit weights, eps 1e-6)."""
    from numerics.attention_mapping import find_qk_norms

    try:
        found = find_qk_norms(f)
    except ValueError as exc:
        if qk_norm is None:
            return cands, []
        raise UsageError(f"--qk-norm {qk_norm}: {_short(exc, 600)}") from None
    notes, kept = [], []
    for c in cands:
        attached = c.q_norm is None and c.k_norm is None and found is not None
        if attached:
            c.q_norm, c.k_norm = found[0], found[1]
            if qk_norm is not None:
                c.source += f"; QK-norm weights {found[2]}"
        elif qk_norm is not None and (c.q_norm is not None or c.k_norm is not None):
            c.source += "; QK-norm weights from the mapping hook"
        why = c.consistent(D)
        if why and attached and qk_norm is None:  # norms found by name, not used: the candidate stays as it was
            c.q_norm = c.k_norm = None
        elif why:
            notes.append(f"{c.heads} head(s), {c.kv_heads} key/value head(s) ({c.source.split(';')[0]}) not used: "
                         f"{why}")
            continue
        kept.append(c)
    if qk_norm is not None and found is None and not any(c.q_norm is not None or c.k_norm is not None for c in kept):
        for c in kept:
            c.source += "; QK-norm without weights (no q_norm/k_norm found: unit weights, eps 1e-6)"
        notes.append(f"--qk-norm {qk_norm}: no norm modules found by name (q_norm/k_norm, query_norm/key_norm, "
                     "q_layernorm/k_layernorm): the reference uses unit weights and eps 1e-6; return them from the "
                     "mapping hook as \"q_norm\"/\"k_norm\" if the module has others")
    return kept, notes


def _where(source: str) -> str:
    """Where a candidate mapping's weights are, from its source ("found by name: .q_proj …; 2 head(s)")."""
    return source.split(";")[0].removeprefix("declared: ").removeprefix("found by name: ")


def _hook_value(f, mapping, name: str):
    """``(value, note, who)`` of the mapping hook (``--mapping`` or the module's ``tverify_mapping()``), or
    ``(None, "", "")`` when there is none. The hook must not change the module."""
    from numerics.attention_mapping import HOOK_METHOD

    if mapping is not None:
        note, hl = "declared: the --mapping hook", "--mapping"  # (hl: who to name in a message)
        get = (lambda: mapping(f)) if callable(mapping) else (lambda: mapping)
    else:
        found = _own_hook(f, name)
        if found is None:
            return None, "", ""
        note, hl, get = found
    before = _module_state(f)
    try:
        value = _user_call(get, hl)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{hl}: the hook raised {_describe(exc)}") from None
    changed = _state_changes(before, _module_state(f))
    if changed:
        raise UsageError(f"{hl}: the hook changed the module it was given ({changed}): a mapping hook must "
                         "only read the weights, or the module checked is not the one you wrote")
    return (value, note, hl)


def _own_hook(f, name: str):
    """``(note, who, get)`` of the module's own declaration: a method ``tverify_mapping(self)`` returning the dict, or
    the dict itself held by a property or an attribute (both were ignored without a word, and the weights found by name
    judged instead: hostile pass 56a F6); None where the module has none. Anything else by that name is one line."""
    import functools
    import inspect

    from numerics.attention_mapping import HOOK_METHOD

    static = inspect.getattr_static(f, HOOK_METHOD, None)
    if static is None:
        return None
    if isinstance(static, (property, functools.cached_property)):
        return (f"declared: the module's {HOOK_METHOD} property", f"{name}.{HOOK_METHOD}",
                lambda: getattr(f, HOOK_METHOD))
    if isinstance(static, dict):
        return f"declared: the module's {HOOK_METHOD} attribute", f"{name}.{HOOK_METHOD}", lambda: static
    if callable(getattr(f, HOOK_METHOD, None)):
        return f"declared: the module's {HOOK_METHOD}()", f"{name}.{HOOK_METHOD}()", getattr(f, HOOK_METHOD)
    raise UsageError(f"{name}.{HOOK_METHOD} is a {type(static).__name__}: declare the weights with a method "
                     f"{HOOK_METHOD}(self) returning the dict of q, k, v, o (or that dict itself)")


def _through_parameters(value: Any, f: Any) -> tuple[Any, list[str]]:
    """The hook's dict with each tensor that is a detached view of one of the module's parameters (``.detach()``,
    ``.data``, a slice or transpose of them: the same storage, no graph) replaced by the same view taken of the
    parameter, which the parameter's gradient reaches; and the names of the entries so replaced. The reference's
    autograd reached no parameter through such a view, and a module whose weight gradient was zero was "ok" with its
    parameter gradients said to be compared (hostile pass 47a F2)."""
    import torch

    if not isinstance(value, dict) or not isinstance(f, torch.nn.Module):
        return value, []
    try:
        params = {p.untyped_storage().data_ptr(): p for p in f.parameters() if p.requires_grad and p.layout == torch.strided}
    except Exception:
        return value, []

    def fix(t: Any) -> tuple[Any, bool]:
        if not isinstance(t, torch.Tensor) or t.requires_grad or t.layout != torch.strided:
            return t, False
        try:
            p = params.get(t.untyped_storage().data_ptr())
        except Exception:
            return t, False
        if p is None or p.dtype != t.dtype or p.device != t.device:
            return t, False
        with torch.enable_grad():
            return p.as_strided(t.size(), t.stride(), t.storage_offset()), True

    out, names = dict(value), []
    for key in ("q", "k", "v", "o"):
        v = value.get(key)
        if isinstance(v, (tuple, list)):
            fixed = [fix(x) for x in v]
            if any(c for _, c in fixed):
                out[key] = type(v)(x for x, _ in fixed) if isinstance(v, tuple) else [x for x, _ in fixed]
                names.append(key)
        else:
            t, changed = fix(v)
            if changed:
                out[key], _ = t, names.append(key)
    return out, names


def _without_graph(value: Any, f: Any) -> list[str]:
    """The hook's entries (q, k, v, o) holding a tensor with no graph to the module's parameters (a copy: ``.detach()
    .clone()``, ``torch.tensor(...)``) while the module has parameters that train: the reference's autograd then
    reaches part of a parameter at most (one slice of a fused weight copied), and a parameter's gradient compared with
    that part was a false mismatch (hostile pass 48a F2)."""
    import torch

    if not isinstance(value, dict) or not isinstance(f, torch.nn.Module):
        return []
    try:
        if not any(p.requires_grad for p in f.parameters()):
            return []
    except Exception:  # noqa: BLE001
        return []
    out = []
    for key in ("q", "k", "v", "o"):
        v = value.get(key)
        items = v if isinstance(v, (tuple, list)) else (v,)
        if any(isinstance(t, torch.Tensor) and not t.requires_grad for t in items):
            out.append(key)
    return out


def _counts_text(heads, kv_heads) -> str:
    return " ".join(f"{n} {v}" for n, v in (("--heads", heads), ("--kv-heads", kv_heads)) if v is not None)


def _fits_text(cands) -> str:
    """The head counts of ``cands``, the first eight named and how many more there are."""
    fits = sorted({(c.heads, c.kv_heads) for c in cands})
    text = ", ".join(f"{h} head{'s' if h != 1 else ''}" + (f" / {k} key/value heads" if k != h else "")
                     for h, k in fits[:8])
    return text + (f" and {len(fits) - 8} more" if len(fits) > 8 else "")


def _by_name(f, D: int, decl: Declaration, label: str, name: str) -> tuple[list, dict, list[str]]:
    """The mappings found by name under the declared (or read) head counts, the counts read and notes.
    A head count read from the module is evidence, not a fact: one its weights cannot split is said in a
    note and not used (the module's own attributes without its ``config``, else every split the weights
    allow, the best fit kept); declared counts that cannot split them are one line naming the counts
    that fit."""
    from numerics.attention_mapping import count_hints, find_mappings

    heads, kv_heads = decl.heads, decl.kv_heads
    use_cfg = not decl.ignore_config
    cands = find_mappings(f, D, heads, kv_heads, config=use_cfg)
    declared_counts = {"heads": heads, "kv_heads": kv_heads}
    read_counts = {k: v for k, v in count_hints(f, use_cfg).items() if declared_counts[k] is None}
    unhinted = find_mappings(f, D, heads, kv_heads, hints=False) if not cands and read_counts else []
    notes: list[str] = []
    if unhinted:  # the weights split, but not by the head counts the module itself declares
        c0 = unhinted[0]
        said = " and ".join(f"{src.lstrip('.')} = {v}" for v, src in read_counts.values())
        via_cfg = any(".config." in src or src.startswith(".config") for _, src in read_counts.values())
        own = find_mappings(f, D, heads, kv_heads, config=False) if via_cfg and count_hints(f, False) else []
        counts = _counts_text(heads, kv_heads)
        notes.append(
            f"note: {said} (read from the module) does not fit its weights "
            f"({_where(c0.source)}: widths q {c0.wq.shape[0]}, k {c0.wk.shape[0]}, "
            f"v {c0.wv.shape[0]}{', with ' + counts if counts else ''}): not used; "
            + ("the module's own attributes (not its config) give the counts" if own else
               "the check keeps the split that fits best among " + _fits_text(unhinted))
            + "; declare --heads and --kv-heads to decide")
        cands = own or unhinted
        read_counts = {k: v for k, v in count_hints(f, False).items() if declared_counts[k] is None} if own else {}
    if not cands and (heads is not None or kv_heads is not None):
        # every split the weights allow, not the module's own count alone (56a F1: "counts that fit: 4 heads" where 1,
        # 2, 8 and 16 fit as well)
        free = find_mappings(f, D, hints=False) or find_mappings(f, D, config=use_cfg)
        if free:  # the weights are there, but the declared head counts cannot split them
            c0 = free[0]
            raise UsageError(
                f"{_counts_text(heads, kv_heads)}: the projections found "
                f"({_where(c0.source)}) have widths q {c0.wq.shape[0]}, k "
                f"{c0.wk.shape[0]}, v {c0.wv.shape[0]}, which that head count cannot split; counts that fit: "
                + _fits_text(free))
    return cands, read_counts, notes


def _unused_count(done, note: str) -> None:
    """A key/value head count read from the module's config that its weights cannot split (``note``):
    listed as read and not used, and never compared with a hint's declaration."""
    it = done.read.get("kv_heads")
    if it is None or f"{it.source} = " not in note:
        return
    done.read = {k: v for k, v in done.read.items() if k != "kv_heads"}
    done.lines = [ln[:-1] + "; does not fit the weights: not used)" if ln.startswith(f"kv_heads {it.value} (") and
                  ln.endswith(")") else ln for ln in done.lines]


def _rope_dims_fit(cands: list, rope_dims: int, D: int, done, notes: list[str]) -> list:
    """The candidates whose head size holds ``rope_dims`` rotated dimensions; a value that fits none is
    one line (naming the module's attribute when it was read, not declared)."""
    rd_read = done.read.get("rope_dims")
    if done.given.get("rope_dims") is None and rd_read is not None:  # read from the module, not a flag
        who = f"the module's rope_dims {rope_dims} ({rd_read.source})"
        fix = ": fix the module's value, or pass --ignore-config and declare --rope-dims"
    else:
        who, fix = f"--rope-dims {rope_dims}", ""
    hd_read = done.read.get("head_dim")
    if who.startswith("the module's") and hd_read is not None and cands and all(c.d_k != hd_read.value for c in cands):
        raise UsageError(f"{who} come from {hd_read.source.strip(' =')} {hd_read.value}, which is not the head size of the "
                         f"weights found (d_k {', '.join(sorted({f'{c.d_k} at {c.heads} heads' for c in cands}))})"
                         f"{fix}")
    if rope_dims > D:
        raise UsageError(f"{who}: larger than the model dimension D = {D} (the rotated dimensions are counted per "
                         f"head, at most its size d_k){fix}")
    fit = [c for c in cands if rope_dims <= c.d_k]
    if cands and not fit:
        raise UsageError(f"{who}: larger than the head size d_k = "
                         f"{', '.join(sorted({str(c.d_k) for c in cands}))} of the weights found "
                         f"({_where(cands[0].source)}): at most d_k{fix}")
    if fit != cands and who.startswith("the module's"):
        notes.append(f"note: {who} leaves out the head counts whose head size is smaller "
                     f"({', '.join(sorted({f'{c.heads} heads (d_k {c.d_k})' for c in cands if c not in fit}))}); "
                     "declare --heads, or --ignore-config to not read it")
    return fit


def find_weights(f, D: int, decl: Declaration, done, mapping, label: str, name: str) -> Weights:
    """Stage *weights*: the hook's weights, or those found by name, fitted to the declaration (RoPE
    dimensions, key/value grouping, q/k norms, a learned position table)."""
    from numerics.attention_mapping import GROUPING_NAMES, head_count_hint, mapping_from_hook

    hooked = _hook_value(f, mapping, name)
    read_counts: dict = {}
    hook_notes: list[str] = []
    if hooked[1]:
        value, note, hl = hooked
        value, reattached = _through_parameters(value, f)
        if reattached:
            hook_notes.append(f"{hl} returned {', '.join(reattached)} as detached views of the module's parameters "
                              "(.detach() or .data): read through the parameters themselves, so that their gradients "
                              "are compared too")
        try:
            mp = mapping_from_hook(value, D, note)
        except ValueError as exc:
            raise UsageError(f"{hl}: {_short(exc, 600)}") from None
        mp.detached = _without_graph(value, f)
        for flag, said, hooks in (("--heads", decl.heads, mp.heads), ("--kv-heads", decl.kv_heads, mp.kv_heads)):
            if said is not None and said != hooks:  # two declarations of yours that differ: neither dropped (43a F13)
                raise UsageError(f"{flag} {said} and {hl} ({hooks}) declare different head counts; give one of them, "
                                 "or the same count in both")
        if decl.kv_grouping is not None:  # the flag declares the grouping of the hook's weights too
            mp.kv_grouping = GROUPING_NAMES[decl.kv_grouping]
        cands, hook = [mp], note
    else:
        cands, read_counts, count_notes = _by_name(f, D, decl, label, name)
        hook = None
    w = Weights(cands, hook, read_counts, why=getattr(cands, "why", ""))
    w.notes += hook_notes
    if not hooked[1] and count_notes:
        w.notes += count_notes
        _unused_count(done, count_notes[0])
    if decl.positional == "rope" and done.rope_dims is not None:
        w.cands = _rope_dims_fit(w.cands, done.rope_dims, D, done, w.notes)
    if decl.kv_grouping is not None and not hook:
        w.cands = [c for c in w.cands if c.kv_heads == c.heads or c.kv_grouping == GROUPING_NAMES[decl.kv_grouping]]
    w.cands, norm_notes = _attach_qk_norms(f, w.cands, decl.qk_norm, hook, D)
    w.hints += norm_notes
    w.notes[:0] = [f"note: {n}" for n in norm_notes]
    if not w.cands and norm_notes and not w.why:
        w.why = "the projections found do not fit the module's q/k norms: " + "; ".join(norm_notes)
    w.H_hint = decl.heads or head_count_hint(f, not decl.ignore_config)
    if decl.positional == "learned" and w.cands and all(c.pos_table is None for c in w.cands):
        w.no_table = _where(w.cands[0].source)  # found, but no position table
        w.cands = []
    return w


def _scored(probe, cands: list, sts: list, Tm: int) -> list:
    """``(error, index, candidate, structure)`` of each candidate under each structure, best first."""
    import torch

    from numerics import attention_probe as ap

    scored = []
    for c in cands:
        for s2 in sts:
            try:
                with torch.no_grad():
                    e = ap._rel(probe.outs[Tm], probe.reference(probe.xs[Tm], st=s2, m=c))
            except Exception:  # a candidate of inconsistent shapes
                continue
            scored.append((e if math.isfinite(e) else float("inf"), len(scored), c, s2))
    return sorted(scored, key=lambda t: (t[0], t[1]))


def _loose_best(probe, t, Tm: int) -> float:
    """A candidate's best error over simple changes of the declaration and every change the hints try (a
    window, RoPE base or dims, ALiBi, a cap): the layout must not be picked under the wrong declaration."""
    import torch

    from numerics import attention_probe as ap
    from proofs_checks.sanity.attention_hints import _variants

    st = t[3]
    loose = [st.variant(causal=not st.causal, window=None), st.variant(window=None), st.variant(positional="none"),
             st.variant(softcap=None)]
    errs = [t[0]]
    for v in loose + [v for _, v, mm in _variants(t[3], t[2], []) if mm is None]:
        try:
            with torch.no_grad():
                errs.append(ap._rel(probe.outs[Tm], probe.reference(probe.xs[Tm], st=v, m=t[2])))
        except Exception:
            continue
    return min(e for e in errs if math.isfinite(e)) if any(math.isfinite(e) for e in errs) else 1e300


def choose_mapping(probe, weights: Weights, st, decl: Declaration, f, D: int) -> Chosen:
    """Stage *mapping*: the candidate (and RoPE convention, when undeclared) that agrees best with the
    module at a middle length; when nothing fits the declaration, ranked by the best fit over changes
    of it, and by the residual at the best scale when the head count is not declared."""
    from numerics.attention_mapping import find_mappings
    from proofs_checks.sanity.attention_props import _free_scale_residual

    if not weights.cands:
        return Chosen(None, st, [])
    Tm = min(probe.outs, key=lambda t: abs(t - 17))
    sts = [st] if not (decl.positional == "rope" and decl.rope_convention is None) else [
        st.variant(rope_convention="half"), st.variant(rope_convention="interleaved")]
    scored = _scored(probe, weights.cands, sts, Tm)
    if not scored:  # a hook's weights of inconsistent shapes: kept as declared (the properties report them)
        return Chosen(weights.cands[0] if weights.hook else None, st, [])
    if scored[0][0] > 1e-6 and len(scored) > 1:  # nothing fits the declaration: rank by the best change of it
        bests = {t[1]: _loose_best(probe, t, Tm) for t in scored}
        scored = sorted(scored, key=lambda t: (bests[t[1]], t[1]))
    else:
        bests = {t[1]: t[0] for t in scored}
    if bests[scored[0][1]] > 1e-6 and len({(c.heads, c.kv_heads, c.kv_grouping) for _, _, c, _ in scored}) > 1 \
            and decl.heads is None and min(_free_scale_residual(probe, t[2], t[3], Tm) for t in scored[:1]) > 1e-6:
        # nothing fits at 1/√d_k and the head count is not declared: a wrong scale must not pick the head
        # count, so rank the candidates by their residual at their best scale
        scored = sorted(scored, key=lambda t: (min(bests[t[1]], _free_scale_residual(probe, t[2], t[3], Tm)), t[1]))
    _, _, mp, st = scored[0]
    probe.st, probe.m = st, mp
    alts = [c for _, _, c, _ in scored[1:] if c.heads != mp.heads or c.kv_heads != mp.kv_heads][:6]
    if decl.heads is not None and weights.hook is None:
        alts += [c for c in find_mappings(f, D, None, decl.kv_heads, config=not decl.ignore_config)
                 if c.heads != decl.heads][:6]
    if decl.kv_heads is not None and weights.hook is None:  # a declared key/value head count is a hint's change too:
        # a wrong --kv-heads was a mismatch with no hint where the module's own split fits (hostile pass 58a F2)
        alts += [c for c in find_mappings(f, D, None, None, config=not decl.ignore_config)
                 if (c.heads, c.kv_heads) != (mp.heads, mp.kv_heads)
                 and all((c.heads, c.kv_heads) != (a.heads, a.kv_heads) for a in alts)][:6]
    elif weights.hook is None and decl.kv_heads is None and weights.read_counts:
        # the head counts came from the module's own attributes: other splits are hints too
        alts += [c for c in find_mappings(f, D, None, None, hints=False)
                 if (c.heads, c.kv_heads) != (mp.heads, mp.kv_heads)][:6]
    return Chosen(mp, st, alts)
