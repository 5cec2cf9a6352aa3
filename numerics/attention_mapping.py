"""Find a module's attention weights in the layouts real libraries use, as candidate
:class:`~numerics.attention_reference.Mapping` objects (``nn.Linear`` form, ``(out, in)``).

Recognised, on the object or any of its submodules (the shallowest match wins):

* ``nn.MultiheadAttention`` (``in_proj_weight`` fused, or ``q/k/v_proj_weight``; ``out_proj``);
* separate projections under the common names of torch, timm, Hugging Face and x-transformers
  (``q_proj``/``k_proj``/``v_proj``, ``query``/``key``/``value``, ``to_q``/``to_k``/``to_v``,
  ``W_q``, ``wq``, ``q_lin``, ...), with ``to_kv`` fused keys and values;
* fused projections ``qkv``, ``to_qkv``, ``c_attn``, ``in_proj``, ``Wqkv``, ``qkv_proj``,
  ``query_key_value``: split as ``[q; k; v]`` or per head ``[q_h; k_h; v_h]`` (GPT-NeoX), and as
  ``[q; k; v]`` of unequal widths for grouped-query attention when the module declares its
  key/value head count;
* the output projection ``out_proj``, ``o_proj``, ``to_out`` (or ``to_out[0]``), ``c_proj``,
  ``proj``, ``dense``, ``output.dense``, ``W_o``, ...;
* each projection may be an ``nn.Linear``, Hugging Face's ``Conv1D`` (``x @ W + b``, weight ``(in,
  out)``), a 1×1 ``nn.Conv1d``/``nn.Conv2d`` (vision attention on feature maps), an
  ``nn.Sequential`` starting with one of those, or a raw 2-D parameter (both orientations tried
  when square).

Head counts come from the object (``num_heads``, ``n_head``, ``heads``, ``num_attention_heads``,
``config.num_attention_heads``, ...; key/value heads from ``num_key_value_heads``, ``n_kv_heads``,
``kv_heads``, ...) or, unknown, every divisor up to 16. The caller keeps the candidate that agrees
best with the object. A module can also declare its mapping itself (:func:`mapping_from_hook`).

This module imports torch only (no ``proofs_checks``).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from numerics.attention_reference import Mapping
from numerics.attention_rules import JUDGED_DTYPES
from numerics.attention_transforms import checked_transform
from numerics.torch_utils import not_dense
from theory.validation import printable

__all__ = ["NoMapping", "mapping_obstacle", "norm_kind", "find_mappings", "mapping_from_hook", "head_count_hint", "kv_head_hint", "count_hints", "HOOK_METHOD", "find_qk_norms",
           "norm_params", "GROUPING_NAMES"]

#: A method a module may define to declare its own mapping (same return value as a --mapping hook).
HOOK_METHOD = "tverify_mapping"

_Q = ("q_proj", "q", "query", "to_q", "W_q", "Wq", "w_q", "wq", "q_lin", "q_linear", "W_Q", "WQ", "query_proj",
      "q_layer")
_K = ("k_proj", "k", "key", "to_k", "W_k", "Wk", "w_k", "wk", "k_lin", "k_linear", "W_K", "WK", "key_proj",
      "k_layer")
_V = ("v_proj", "v", "value", "to_v", "W_v", "Wv", "w_v", "wv", "v_lin", "v_linear", "W_V", "WV", "value_proj",
      "v_layer")
_KV = ("to_kv", "kv", "kv_proj", "c_kv", "Wkv")
_O = ("out_proj", "o_proj", "o", "out", "to_out", "proj", "W_o", "Wo", "w_o", "wo", "c_proj", "out_lin", "dense",
      "W_O", "WO", "output", "proj_out", "out_linear", "output_proj", "out_projection", "attn_out")
_QKV = ("qkv", "c_attn", "in_proj", "qkv_proj", "to_qkv", "Wqkv", "W_qkv", "query_key_value", "qkv_linear")
_HEAD_ATTRS = ("num_heads", "n_heads", "heads", "n_head", "nhead", "num_attention_heads", "h", "n_heads_",
               "num_q_heads", "nheads")
_KV_ATTRS = ("num_key_value_heads", "n_kv_heads", "kv_heads", "num_kv_heads", "n_head_kv", "n_kv_head",
             "kv_heads_")


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    """``getattr(obj, name, default)`` of the user's object, where an access that raises (a property raising
    ``RuntimeError("config not loaded")``) is an absent attribute: the mapping is found from what can be read, and the
    module's config reader says which attribute raised (hostile pass 47a F5: the check was refused)."""
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


def _int_attr_src(obj: Any, names, config: bool = True, prefix: str = "") -> tuple[int | None, str | None]:
    """The first positive int among ``names`` on ``obj`` (then on its ``config``, unless ``config`` is
    False), with where it was read (``".config.num_key_value_heads"``)."""
    holders = [(obj, prefix)] + ([(_attr(obj, "config", None), prefix + ".config")] if config else [])
    for holder, pre in holders:
        if holder is None:
            continue
        for n in names:
            try:
                v = _attr(holder, n, None)
            except Exception:  # an attribute that raises is absent
                v = None
            if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                return v, f"{pre}.{n}"
    return None, None


def _int_attr(obj: Any, names, config: bool = True) -> int | None:
    return _int_attr_src(obj, names, config)[0]


def _count_hint(obj: Any, names, config: bool, mha: bool) -> tuple[int | None, str | None]:
    v, src = _int_attr_src(obj, names, config)
    if v is not None:
        return v, src
    if isinstance(obj, torch.nn.Module):
        for nm, m in obj.named_modules():
            if mha and isinstance(m, torch.nn.MultiheadAttention):
                return int(m.num_heads), f".{nm}.num_heads" if nm else ".num_heads"
            v, src = _int_attr_src(m, names, config, f".{nm}" if nm else "")
            if v is not None:
                return v, src
    return None, None


def head_count_hint(obj: Any, config: bool = True) -> int | None:
    """A head count the object (or its first submodule that declares one) declares; ``config=False``:
    not from a ``config`` attribute."""
    return _count_hint(obj, _HEAD_ATTRS, config, True)[0]


def kv_head_hint(obj: Any, config: bool = True) -> int | None:
    """A key/value head count the object (or a submodule) declares (grouped-query attention)."""
    return _count_hint(obj, _KV_ATTRS, config, False)[0]


def count_hints(obj: Any, config: bool = True) -> dict[str, tuple[int, str]]:
    """The head counts the object declares, with where each was read: ``{"heads": (4, ".num_heads"),
    "kv_heads": (2, ".config.num_key_value_heads")}`` (absent keys: not declared)."""
    out = {}
    for key, names, mha in (("heads", _HEAD_ATTRS, True), ("kv_heads", _KV_ATTRS, False)):
        v, src = _count_hint(obj, names, config, mha)
        if v is not None:
            out[key] = (v, src)
    return out


def _as_linear(v: Any, label: str) -> list[tuple[torch.Tensor, torch.Tensor | None, str]]:
    """``(W (out, in), b, label)`` candidates for one projection-like object."""
    if isinstance(v, torch.nn.Linear):
        return [(v.weight, v.bias, f"{label} (nn.Linear)")]
    if type(v).__name__ == "Conv1D" and isinstance(_attr(v, "weight", None), torch.Tensor) and v.weight.dim() == 2:
        return [(v.weight.T, _attr(v, "bias", None), f"{label} (Conv1D, x @ W + b)")]
    if isinstance(v, (torch.nn.Conv1d, torch.nn.Conv2d)) and all(k == 1 for k in v.kernel_size) and v.groups == 1:
        return [(v.weight.reshape(v.weight.shape[0], v.weight.shape[1]), v.bias, f"{label} (1×1 convolution)")]
    if isinstance(v, torch.nn.Sequential) and len(v) > 1 and isinstance(v[0], torch.nn.Identity):
        # an optional layer switched off (ring-attention-pytorch's to_qkv = Sequential(Identity, Linear)
        # with prenorm=False): the identity computes nothing
        i = next((i for i, t in enumerate(v) if not isinstance(t, torch.nn.Identity)), None)
        return [] if i is None else _as_linear(v[i], f"{label}[{i}]")
    if isinstance(v, (torch.nn.Sequential, torch.nn.ModuleList)) and len(v) and all(
            isinstance(t, (torch.nn.Dropout, torch.nn.Identity)) for t in list(v)[1:]):
        # a projection followed by dropout (diffusers' to_out = ModuleList([Linear, Dropout])): in eval, the
        # projection alone; a ModuleList with anything else after it is not a known composition
        return _as_linear(v[0], f"{label}[0]")
    if isinstance(v, torch.nn.Sequential) and len(v):
        return _as_linear(v[0], f"{label}[0]")
    if isinstance(v, torch.Tensor) and v.dim() == 2:
        c = [(v.T, None, f"{label} (x @ W)")]
        if v.shape[0] == v.shape[1]:
            c.append((v, None, f"{label} (x @ Wᵀ)"))
        return c
    return []


def _lin(obj: Any, names, prefix: str) -> list:
    for n in names:
        v = _attr(obj, n, None)
        if v is None:
            continue
        c = _as_linear(v, f"{prefix}.{n}")
        if c:
            return c
    return []


def _outs(mod: Any, parents: list, prefix: str) -> list:
    for holder, pre in [(mod, prefix)] + parents:
        c = _lin(holder, _O, pre)
        if c:
            return c
        out = _attr(holder, "output", None)
        if out is not None and not isinstance(out, torch.Tensor):
            c = _lin(out, ("dense",), pre + ".output")
            if c:
                return c
    return []


def _mha(m: torch.nn.MultiheadAttention, prefix: str, heads: int | None = None,
         kv_heads: int | None = None) -> Mapping | None:
    """The module's weights split into ``heads`` heads (a declared count wins over ``num_heads``: it was ignored,
    hostile pass 46a F1), or None where that count cannot split them (every head has its own keys and values here)."""
    E = m.embed_dim
    h = int(heads or m.num_heads)
    if E % h or (kv_heads and kv_heads != h):
        return None
    if m.in_proj_weight is not None:
        wq, wk, wv = m.in_proj_weight.split(E)
    else:
        wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
    b = m.in_proj_bias.split(E) if m.in_proj_bias is not None else (None, None, None)
    return Mapping(wq, b[0], wk, b[1], wv, b[2], m.out_proj.weight, m.out_proj.bias, h,
                   f"found by name: nn.MultiheadAttention weights ({prefix or 'the module'}: in_proj, out_proj)"
                   + (f"; {h} head(s)" if h != m.num_heads else ""))


def _head_options(dq: int, dk_w: int, dv: int, heads: int | None, kv: int | None) -> list[tuple[int, int]]:
    hs = [heads] if heads else [h for h in range(1, dq + 1) if dq % h == 0]  # (up to 16 only: 32 heads of a
    # module whose count is not read were never tried, and a correct one was a mismatch: hostile pass 46a F4)
    opts = []
    for h in hs:
        if dq % h:
            continue
        d = dq // h
        if dk_w % d:
            continue
        hk = dk_w // d
        if hk < 1 or h % hk or (kv and hk != kv):
            continue
        if dv % hk:
            continue
        opts.append((h, hk))
    return opts


def _gqa_splits(n3: int, D: int, heads: int | None, kv: int | None) -> list[tuple[int, int, int]]:
    """``(heads, kv_heads, d)`` with ``n3 = (heads + 2·kv_heads)·d`` and ``kv_heads`` a proper divisor of
    ``heads``: the declared counts, or (undeclared) every count whose query width is ``D``.

    >>> _gqa_splits(64, 32, None, None)
    [(2, 1, 16), (4, 2, 8), (8, 4, 4), (16, 8, 2), (32, 16, 1)]
    """
    out = []
    for h in ([heads] if heads else [h for h in range(2, D + 1) if D % h == 0]):
        for hk in ([kv] if kv else [k for k in range(1, h) if h % k == 0]):
            if hk >= h or h % hk or n3 % (h + 2 * hk):
                continue
            d = n3 // (h + 2 * hk)
            if heads is None and h * d != D:
                continue
            out.append((h, hk, d))
    return out


def _triples(mod: Any, prefix: str, heads: int | None, kv: int | None) -> list[tuple]:
    qs, ks, vs = _lin(mod, _Q, prefix), _lin(mod, _K, prefix), _lin(mod, _V, prefix)
    out = []
    if qs and ks and vs:
        return [(q, k, v, "") for q, k, v in itertools.product(qs, ks, vs)]
    if qs:
        for W, b, label in _lin(mod, _KV, prefix):
            if W.shape[0] % 2 == 0:
                n = W.shape[0] // 2
                bb = b.split(n) if b is not None else (None, None)
                for q in qs:
                    out.append((q, (W[:n], bb[0], label + "[k]"), (W[n:], bb[1], label + "[v]"), ""))
        if out:
            return out
    for W, b, label in _lin(mod, _QKV, prefix):
        n3 = W.shape[0]
        if n3 % 3 == 0:
            n = n3 // 3
            bb = b.split(n) if b is not None else (None, None, None)
            ws = W.split(n)
            out.append(((ws[0], bb[0], label + "[q]"), (ws[1], bb[1], label + "[k]"), (ws[2], bb[2], label + "[v]"),
                        ""))
            # per-head interleaving (GPT-NeoX query_key_value): rows grouped [q_h; k_h; v_h] per head
            for h in ([heads] if heads else [h for h in range(2, n + 1) if n % h == 0]):  # (every count: 46a F4)
                if n % h:
                    continue
                d = n // h
                Wr = W.reshape(h, 3, d, W.shape[1])
                br = b.reshape(h, 3, d) if b is not None else None
                parts = [(Wr[:, i].reshape(n, W.shape[1]), None if br is None else br[:, i].reshape(n),
                          label + f"[{'qkv'[i]}, per head]") for i in range(3)]
                out.append((parts[0], parts[1], parts[2], f"h={h}"))
        # GQA, fused [q; k; v] of unequal widths (the head counts themselves are tried by the caller)
        for sizes in dict.fromkeys((h * d, hk * d, hk * d) for h, hk, d in _gqa_splits(n3, W.shape[1], heads, kv)):
            if sizes[1] != sizes[0]:
                sizes = list(sizes)
                ws = W.split(sizes)
                bb = b.split(sizes) if b is not None else (None, None, None)
                out.append(((ws[0], bb[0], label + "[q]"), (ws[1], bb[1], label + "[k]"),
                            (ws[2], bb[2], label + "[v]"), ""))
        # GQA grouped per key/value head (Falcon's new_decoder_architecture): [q_1 … q_g; k; v] for each of
        # the hk groups of g = h / hk query heads
        for h, hk, d in dict.fromkeys(_gqa_splits(n3, W.shape[1], heads, kv)):
            if hk >= h:
                continue
            g = h // hk
            Wr = W.reshape(hk, g + 2, d, W.shape[1])
            br = b.reshape(hk, g + 2, d) if b is not None else None
            pick = (slice(0, g), slice(g, g + 1), slice(g + 1, g + 2))
            parts = [(Wr[:, sl].reshape(-1, W.shape[1]), None if br is None else br[:, sl].reshape(-1),
                      label + f"[{'qkv'[i]}, grouped per key/value head]") for i, sl in enumerate(pick)]
            out.append((parts[0], parts[1], parts[2], ""))
    return out


class NoMapping(list):
    """An empty result of :func:`find_mappings` (falsy, a list) with ``why``: "" when nothing was
    recognised, else the reason the weights found cannot be mapped without a declared mapping (a layout
    that cannot be told from the weights: ask for ``--mapping``, never guess a split)."""

    def __init__(self, why: str = "") -> None:
        super().__init__()
        self.why = why


#: fused projections whose layout lives in the module's forward, not in its weights (class name →
#: what the layout is): split by no rule here
_SHARDED = {
    "CodeGenAttention": "its qkv_proj packs (q, v, k) in mp_num = 4 model-parallel shards, a layout fixed in "
                        "CodeGenAttention.forward and not readable from the weights",
}


#: learned relative-position biases added to the logits (T5, LongT5, MPNet: ``relative_attention_bias``;
#: Swin, BEiT: ``relative_position_bias_table``): no declaration describes them
_RELATIVE_BIAS = ("relative_attention_bias", "relative_position_bias_table", "relative_position_bias")


def _relative_bias(m: Any) -> str:
    for nm in _RELATIVE_BIAS:
        v = _attr(m, nm, None) if isinstance(m, torch.nn.Module) else None
        if isinstance(v, (torch.nn.Module, torch.Tensor)):
            shape = tuple(v.weight.shape) if isinstance(_attr(v, "weight", None), torch.Tensor) else \
                tuple(_attr(v, "shape", ()))
            return f"{nm} {type(v).__name__} {'×'.join(map(str, shape))}"
    return ""


def relative_bias(obj: Any) -> str:
    """``"attn.relative_attention_bias Embedding 32×4"`` when ``obj`` or a submodule adds a learned
    relative position bias (:data:`_RELATIVE_BIAS`), else ""."""
    mods = obj.named_modules() if isinstance(obj, torch.nn.Module) else [("", obj)]
    for nm, m in mods:
        rel = _relative_bias(m)
        if rel:
            return f"{nm + '.' if nm else ''}{rel}"
    return ""


def _obstacle(m: Any, prefix: str) -> str:
    name = type(m).__name__
    rel = _relative_bias(m)
    if rel:
        return (f"{prefix.lstrip('.') or 'the module'} ({name}) adds a learned relative position bias to its logits "
                f"({rel}); no declaration describes one (the reference knows RoPE, ALiBi and absolute position "
                "tables), so the comparison with softmax attention cannot be decided: relative position biases "
                "are not checked")
    if isinstance(m, torch.nn.MultiheadAttention) and (_attr(m, "bias_k", None) is not None
                                                       or _attr(m, "add_zero_attn", False)):
        extra = "a learned key and value (add_bias_kv=True)" if m.bias_k is not None else "a zero key and value (add_zero_attn=True)"
        return (f"{prefix.lstrip('.') or 'the module'} (nn.MultiheadAttention) appends {extra} to every sequence; no "
                "declaration describes one (an extra key every query attends to, as a sink), so the comparison with "
                "softmax attention cannot be decided: such keys are not checked")  # (a bare mismatch: 46a F10)
    if name in _SHARDED and isinstance(_attr(m, "qkv_proj", None), torch.nn.Module):
        return (f"{prefix.lstrip('.') or 'the module'} ({name}): {_SHARDED[name]}; it cannot be mapped without a "
                "mapping: declare the q, k, v weights with --mapping FILE.py:fn (or a tverify_mapping() method)")
    return ""


def mapping_obstacle(obj: Any, D: int | None = None) -> str:
    """Why ``obj``'s weights cannot be mapped without a declared mapping, or "" (see :class:`NoMapping`)."""
    mods = [("", obj)]
    if isinstance(obj, torch.nn.Module):
        mods += sorted([("." + n, m) for n, m in obj.named_modules() if n], key=lambda t: t[0].count("."))
    for prefix, m in mods:
        why = _obstacle(m, prefix)
        if why:
            return why
    return ""


def find_mappings(obj: Any, D: int, heads: int | None = None, kv_heads: int | None = None, *,
                  hints: bool = True, config: bool = True) -> list[Mapping]:
    """Candidate mappings of ``obj``'s weights (see the module docstring); empty when nothing is
    recognised. ``heads``/``kv_heads`` restrict the head counts (otherwise read from the object —
    unless ``hints`` is False; from its ``config`` too unless ``config`` is False — or tried)."""
    if hints:
        heads = heads or head_count_hint(obj, config)
        kv_heads = kv_heads or kv_head_hint(obj, config)
    mods: list[tuple[str, Any, list]] = [("", obj, [])]
    if isinstance(obj, torch.nn.Module):
        parents: dict[str, Any] = {"": obj}
        for name, m in obj.named_modules():
            if name:
                parents[name] = m
                chain = []
                parts = name.split(".")
                for i in range(len(parts) - 1, -1, -1):
                    pre = ".".join(parts[:i])
                    chain.append((parents.get(pre, obj), ("." + pre) if pre else ""))
                mods.append(("." + name, m, chain))
        mods.sort(key=lambda t: t[0].count("."))
    misfit = ""  # projections found by name that no head split fits: said, never "no projections found"
    for prefix, m, chain in mods:
        why = _obstacle(m, prefix)
        if why:
            return NoMapping(why)
        if isinstance(m, torch.nn.MultiheadAttention):
            mp = _mha(m, prefix.lstrip("."), heads, kv_heads)
            return [mp] if mp is not None and not mp.consistent(D) else []
        trips = _triples(m, prefix, heads, kv_heads)
        if not trips:
            continue
        outs = _outs(m, chain, prefix) or [(None, None, "no output projection")]
        table = _find_pos_table(m, chain, D)
        cands = []
        for (q, k, v, restrict), (o, bo, ol) in itertools.product(trips, outs):
            dq, dkw, dv = q[0].shape[0], k[0].shape[0], v[0].shape[0]
            if q[0].dim() != 2 or q[0].shape[1] != D or k[0].shape[1] != D or v[0].shape[1] != D:
                continue
            h_only = int(restrict[2:]) if restrict.startswith("h=") else None
            for h, hk in _head_options(dq, dkw, dv, h_only or heads, kv_heads):
                wo = o
                width = h * (dv // hk)
                if wo is not None and (wo.dim() != 2 or wo.shape[1] != width):
                    continue
                if wo is None and width != D:
                    continue
                src = (f"found by name: {q[2]}, {k[2]}, {v[2]}, {ol}; {h} head(s)"
                       + (f", {hk} key/value head(s)" if hk != h else ""))
                for grouping in (("interleave", "tile") if 1 < hk < h else ("interleave",)):
                    mp = Mapping(q[0], q[1], k[0], k[1], v[0], v[1], wo, bo, h,
                                 src + ("" if hk == h else f" (query head h uses key/value head "
                                        f"{'h // ' + str(h // hk) if grouping == 'interleave' else 'h % ' + str(hk)})"),
                                 kv_heads=hk, pos_table=table, kv_grouping=grouping)
                    if not mp.consistent(D):
                        cands.append(mp)
        if cands:
            return cands
        misfit = misfit or _misfit(trips, outs, D, heads, kv_heads)
    return NoMapping(misfit)


def _misfit(trips: list, outs: list, D: int, heads: int | None, kv: int | None) -> str:
    """Why projections found by name (q, k, v of input width D) fit no head split: their widths, and a query
    projection twice the output's input (a gate per head beside the queries: Qwen3-Next), not modelled."""
    for q, k, v, _ in ((q, k, v, r) for q, k, v, r in trips if q[0].dim() == 2 and q[0].shape[1] == k[0].shape[1]
                       == v[0].shape[1] == D):
        o, _, ol = outs[0]
        dq, win = q[0].shape[0], (o.shape[1] if o is not None and o.dim() == 2 else None)
        counts = " and ".join(t for t in (f"{heads} heads" if heads else "", f"{kv} key/value heads" if kv else "") if t)
        gate = (f"; {q[2]} is twice as wide as {ol}'s input ({dq} = 2 × {win}): a gate per head packed beside the "
                "queries (Qwen3-Next's output gate) is not attention the reference models" if win and dq == 2 * win else "")
        return (f"{q[2]} (out {dq}), {k[2]} (out {k[0].shape[0]}), {v[2]} (out {v[0].shape[0]}), {ol}"
                + (f" (in {win})" if win else "") + " found by name, but no head split fits their widths"
                + (f" with {counts}" if counts else "") + gate + "; a mapping hook (--mapping) declares which rows are the queries")
    return ""


_POS = ("pos_emb", "wpe", "position_embeddings", "position_embedding", "pos_embedding", "positional_embedding",
        "pos_embed", "abs_pos_emb")


def _find_pos_table(m: Any, chain: list, D: int) -> torch.Tensor | None:
    for holder in [m] + [h for h, _ in chain]:
        for n in _POS:
            v = _attr(holder, n, None)
            if isinstance(v, torch.nn.Embedding) and v.weight.shape[1] == D:
                return v.weight
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape[1] == D:
                return v
            if v is not None and isinstance(_attr(v, "emb", None), torch.nn.Embedding):  # x-transformers
                e = v.emb
                if e.weight.shape[1] == D:
                    return e.weight * float(_attr(v, "scale", 1.0))
    return None


def _pair(v: Any, what: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(v, torch.nn.Module):
        c = _as_linear(v, what)
        if not c:
            raise ValueError(f"{what}: a {type(v).__name__} is not a projection (nn.Linear, Conv1D, 1×1 conv)")
        return c[0][0], c[0][1]
    if isinstance(v, (tuple, list)) and len(v) == 2:
        W, b = v
    else:
        W, b = v, None
    if not isinstance(W, torch.Tensor) or W.dim() != 2:
        raise ValueError(f"{what}: expected a 2-D weight tensor (out, in), got {type(W).__name__}"
                         + (f" of shape {tuple(W.shape)}" if isinstance(W, torch.Tensor) else ""))
    if b is not None and not isinstance(b, torch.Tensor):
        raise ValueError(f"{what}: the bias must be a tensor or None, got {type(b).__name__}")
    for t, nm in ((W, "weight"), (b, "bias")):
        if t is not None and not_dense(t):
            raise ValueError(f"{what}: the {nm} is {not_dense(t)}: weights must be a dense tensor of numbers")
    for t, nm in ((W, "weight"), (b, "bias")):
        if t is not None and (t.is_quantized or t.dtype not in JUDGED_DTYPES):  # (float8: 43a F16b)
            raise ValueError(f"{what}: the {nm} has dtype {str(t.dtype).removeprefix('torch.')}: weights must be "
                             "real floating point (the module's own parameters, not a converted copy)")
    return W, b


#: ``--kv-grouping`` names of :attr:`Mapping.kv_grouping`: Hugging Face's ``repeat_kv`` (query head h
#: uses key/value head h // (H/K)) and a tiling repeat (h % K, as x-transformers).
GROUPING_NAMES = {"hf": "interleave", "tiled": "tile"}
#: (``qk_norm``: one norm for q and k, Llama 4's L2 norm after RoPE, read only without a weight: an RMS norm
#: without one commutes with the rotation, so the reference's norm before RoPE is the same computation)
_QK_NORMS = (("q_norm", "k_norm"), ("query_norm", "key_norm"), ("q_layernorm", "k_layernorm"), ("norm_q", "norm_k"),
             ("q_ln", "k_ln"), ("qnorm", "knorm"), ("query_layernorm", "key_layernorm"), ("qk_norm", "qk_norm"))


def _per_head_norms(v: Any) -> tuple | None:
    """A norm module holding one norm per head (StableLM's ``LayerNormPerHead``: ``norms``, a
    ``ModuleList`` of H norms over d_k) as ``(weight (H, d_k), bias (H, d_k) | None, eps)``: the per-head
    form a Cohere weight has. ``None`` for anything else (norms of different shapes or eps)."""
    ms = _attr(v, "norms", None) if isinstance(v, torch.nn.Module) and _attr(v, "weight", None) is None else None
    if not isinstance(ms, torch.nn.ModuleList) or len(ms) < 2:
        return None
    ws = [_attr(n, "weight", None) for n in ms]
    bs = [_attr(n, "bias", None) for n in ms]
    eps = {_attr(n, "eps", _attr(n, "variance_epsilon", None)) for n in ms}
    if not all(isinstance(w, torch.Tensor) and w.dim() == 1 and w.shape == ws[0].shape for w in ws) or len(eps) != 1:
        return None
    e = eps.pop()
    if not isinstance(e, (int, float)) or isinstance(e, bool) or not e >= 0:
        return None
    b = torch.stack(bs) if all(isinstance(t, torch.Tensor) and t.shape == ws[0].shape for t in bs) else None
    return (torch.stack(ws), b, float(e))


def norm_params(v: Any, what: str) -> tuple:
    """``(weight | None, bias | None, eps | None)`` of a norm module (``nn.RMSNorm``, ``nn.LayerNorm``,
    Hugging Face's ``…RMSNorm`` with ``variance_epsilon``; Gemma's ``(1 + weight)``), a weight
    tensor (eps 1e-6), or a ``(weight, eps)`` pair. Raises ``ValueError`` (one line).

        >>> norm_params(torch.nn.RMSNorm(4, eps=1e-5), "q_norm")[2]
        1e-05
    """
    per = _per_head_norms(v)
    if per is not None:
        return per
    if isinstance(v, torch.nn.Module):
        w, b = _attr(v, "weight", None), _attr(v, "bias", None)
        eps = _attr(v, "eps", _attr(v, "variance_epsilon", 1e-6))
        if w is not None and not isinstance(w, torch.Tensor) or b is not None and not isinstance(b, torch.Tensor):
            raise ValueError(f"{what}: a {type(v).__name__} whose weight/bias are not tensors")
        if w is not None and type(v).__name__.startswith("Gemma"):
            w = 1 + w  # Gemma's RMSNorm scales by (1 + weight)
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0):
            raise ValueError(f"{what}: eps must be a non-negative number, got {eps!r}")
        return (w, b, None if eps is None else float(eps))
    if isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[1], (int, float)) and not isinstance(v[1], bool):
        w, eps = v
    else:
        w, eps = v, 1e-6
    if w is not None and (not isinstance(w, torch.Tensor) or w.dim() not in (1, 2)):
        raise ValueError(f"{what}: expected a norm module, a weight tensor (d_k,), (E,) or per head (heads, d_k), or "
                         "(weight, eps), got "
                         f"{type(w).__name__}" + (f" of shape {tuple(w.shape)}" if isinstance(w, torch.Tensor) else ""))
    if not eps >= 0:
        raise ValueError(f"{what}: eps must be a non-negative number, got {eps!r}")
    return (w, None, float(eps))


#: the shift and scale invariances of a normalisation hold to rounding and to eps / variance (≤ 1e-5
#: relative for a unit-variance probe and eps ≤ 1e-5); a norm without them changes by O(1) (a shift of 3
#: moves an RMS norm's output by about its size), so 1e-3 separates the two kinds with room on both sides
_KIND_TOL = 1e-3


def norm_kind(v: Any) -> tuple[str | None, str]:
    """The kind of a norm module, measured on a probe vector (never read from its class name):
    ``("layer", words)`` when its output is unchanged by adding a constant to its input (the mean is
    subtracted) and by scaling it, ``("rms", words)`` when only by scaling, else ``(None, why)``. A
    weight of shape ``(heads, d_k)`` is a per-head norm (Cohere); the probe has that shape.

        >>> norm_kind(torch.nn.RMSNorm(8))[0], norm_kind(torch.nn.LayerNorm(8))[0]
        ('rms', 'layer')
    """
    per = _per_head_norms(v)
    w = per[0] if per is not None else _attr(v, "weight", None)
    shape = tuple(w.shape) if isinstance(w, torch.Tensor) and w.dim() in (1, 2) else None
    ns = _attr(v, "normalized_shape", None)
    if shape is None and isinstance(ns, (tuple, list)) and ns and all(isinstance(n, int) for n in ns):
        shape = tuple(ns)
    if shape is None and w is None and isinstance(v, torch.nn.Module) and not list(v.parameters()):
        shape = (16,)  # a norm without parameters (Llama 4's L2 norm) takes any width: probe one
    if shape is None or not callable(v):
        return None, "no weight shape to probe it with"
    dt = w.dtype if isinstance(w, torch.Tensor) and w.is_floating_point() else torch.float32
    dev = w.device if isinstance(w, torch.Tensor) else "cpu"
    g = torch.Generator().manual_seed(0)
    x = torch.randn((3,) + shape, generator=g, dtype=torch.float64).to(dtype=dt, device=dev)
    try:
        with torch.no_grad():
            y0, ys, yk = (v(t) for t in (x, x + 3.0, 2.0 * x))
        y0, ys, yk = (t.double() if isinstance(t, torch.Tensor) else None for t in (y0, ys, yk))
    except Exception as exc:
        return None, f"calling it on a {tuple(x.shape)} probe raised {type(exc).__name__}"
    if y0 is None or ys is None or yk is None or y0.shape != x.shape or not bool(torch.isfinite(y0).all()):
        return None, "it does not return a finite tensor of its input's shape"
    size = float(y0.abs().max()) or 1.0
    shift, scale = float((ys - y0).abs().max()) / size, float((yk - y0).abs().max()) / size
    per = f", per head ({shape[0]} × {shape[1]} weight)" if len(shape) == 2 else ""
    if scale > _KIND_TOL:
        return None, f"its output moves by {scale:.2g} (relative) when its input is doubled: not a normalisation"
    if shift <= _KIND_TOL:
        return "layer", f"measured: a layer norm (mean subtracted: a shift moves it by {shift:.1e}){per}"
    return "rms", f"measured: an RMS norm (no mean subtracted: a shift moves it by {shift:.2g}){per}"


def find_qk_norms(obj: Any) -> tuple[tuple, tuple, str] | None:
    """The module's norms on q and k, found by attribute name (``q_norm``/``k_norm``,
    ``query_norm``/``key_norm``, ``q_layernorm``/``k_layernorm``, ...) on the object or its
    shallowest submodule holding both: ``(q params, k params, where)``, or ``None``."""
    mods = [("", obj)]
    if isinstance(obj, torch.nn.Module):
        mods += sorted([("." + n, m) for n, m in obj.named_modules() if n], key=lambda t: t[0].count("."))
    for prefix, m in mods:
        for qn, kn in _QK_NORMS:
            a, b = _attr(m, qn, None), _attr(m, kn, None)
            shared_weighted = qn == kn and _attr(a, "weight", None) is not None  # see _QK_NORMS
            if isinstance(a, torch.nn.Module) and isinstance(b, torch.nn.Module) and not shared_weighted:
                return (norm_params(a, qn), norm_params(b, kn),
                        f"{prefix}.{qn} ({type(a).__name__}), {prefix}.{kn} ({type(b).__name__})")
    return None


def mapping_from_hook(value: Any, D: int, source: str) -> Mapping:
    """A :class:`Mapping` from what a mapping hook returned: a dict with ``q``, ``k``, ``v`` (each a
    weight ``(out, in)`` in ``nn.Linear`` form, a ``(weight, bias)`` pair, or a projection module),
    optional ``o`` (``None``: no output projection), ``heads`` and optional ``kv_heads``, optional
    ``q_norm``/``k_norm``, ``kv_grouping`` and ``q_transform``/``k_transform`` (callables on q and k per
    head, ``(batch, heads, T, d_k)`` → same, ``kv_heads`` for k, after the projection and QK-norm and
    before RoPE: :func:`_checked_transform` tries them). Raises
    ``ValueError`` (one line) for anything inconsistent.

        >>> W = torch.eye(4, dtype=torch.float64)
        >>> mapping_from_hook({"q": W, "k": W, "v": (W, torch.zeros(4)), "heads": 2}, 4, "hook").d_k
        2
    """
    if not isinstance(value, dict):
        raise ValueError(f"the mapping hook must return a dict with q, k, v, heads (and o, kv_heads), got "
                         f"{type(value).__name__}")
    missing = [k for k in ("q", "k", "v", "heads") if k not in value]
    if missing:
        raise ValueError(f"the mapping hook's dict lacks {', '.join(missing)}")
    allowed = ("q", "k", "v", "o", "heads", "kv_heads", "q_norm", "k_norm", "kv_grouping", "q_transform", "k_transform")
    unknown = [printable(k, repr)[:60] for k in value if not (isinstance(k, str) and k in allowed)]  # (a key 1: 43a F1)
    if unknown:
        raise ValueError(f"the mapping hook's dict has unknown keys {', '.join(unknown[:8])} (allowed: "
                         f"{', '.join(allowed)})")
    import numbers

    h = value["heads"]
    hk = h if value.get("kv_heads") is None else value["kv_heads"]  # (0 is refused, not "not given": 43a F7)
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and type(n).__name__ != "bool_"
               and n >= 1 for n in (h, hk)):
        raise ValueError(f"heads and kv_heads must be positive integers, got {printable(h, repr)[:60]} and "
                         f"{printable(hk, repr)[:60]}")
    h, hk = int(h), int(hk)  # numpy integers too
    wq, bq = _pair(value["q"], "q")
    wk, bk = _pair(value["k"], "k")
    wv, bv = _pair(value["v"], "v")
    wo, bo = (None, None) if value.get("o") is None else _pair(value["o"], "o")
    grouping = "hf" if value.get("kv_grouping") is None else value["kv_grouping"]
    if not isinstance(grouping, str) or grouping not in GROUPING_NAMES:  # (a list: unhashable, 43a F2)
        raise ValueError(f"kv_grouping must be one of {', '.join(GROUPING_NAMES)}, got "
                         f"{printable(grouping, repr)[:80]}")
    m = Mapping(wq, bq, wk, bk, wv, bv, wo, bo, h, source, kv_heads=hk, kv_grouping=GROUPING_NAMES[grouping])
    for key in ("q_norm", "k_norm"):
        if value.get(key) is not None:
            setattr(m, key, norm_params(value[key], key))
    why = m.consistent(D)
    if why:
        raise ValueError(f"the mapping hook's weights are inconsistent: {why}")
    for key, n in (("q_transform", h), ("k_transform", hk)):
        if value.get(key) is not None:
            setattr(m, key, checked_transform(value[key], key, n, m.d_k, wq.dtype))
    return m
