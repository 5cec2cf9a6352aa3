"""The configuration an attention module carries, read for ``tverify check attention`` as evidence,
never as a fact: each value carries where it was read (the attribute path) and the library release it
came from, and is interpreted with that release's semantics where they are known
(:mod:`proofs_checks.sanity._libsemantics`), else reported as read and not used.

Read on the object and its submodules, shallowest first (nothing called but ``named_modules()``, the
properties of the objects read, and a QK-norm module on a probe vector to tell its kind):

* a Hugging Face ``config`` (on a module that has one, or any module of ``transformers``):
  ``rope_parameters["rope_theta"]`` (transformers ≥ 5; ``rope_scaling`` is its alias there) or
  ``rope_theta`` / ``rotary_emb_base`` (transformers 4), per layer type when ``rope_parameters`` is
  nested (Gemma 3); ``partial_rotary_factor`` / ``rotary_pct`` (or the module's ``rotary_ndims``,
  GPT-NeoX; ``rotary_dim``, GPT-J and CodeGen, whose RoPE is interleaved) → ``rope_dims``;
  ``sliding_window`` for this layer (the module's own ``sliding_window`` when it has one —
  transformers ≥ 5 sets it per layer —, else ``config.layer_types[layer_idx]``,
  ``use_sliding_window`` / ``max_window_layers`` (Qwen2), Gemma 2's even layers), interpreted by
  release (Mistral 4.40 keeps ``t−W … t``, 4.39's SDPA path ignores it, ...); GPT-Neo's
  ``window_size`` on its local layers; ``num_key_value_heads``; ``attn_logit_softcapping``;
* causality: the shallowest module's own ``is_causal`` (or x-transformers' ``causal``) decides, ``True``
  or ``False`` (a submodule's ``True`` never overrides the module's ``False``); a Hugging Face
  model (it builds the mask) whose ``config.is_decoder`` is ``True`` (RoFormer) is causal;
* x-transformers: ``Attention.kv_heads``, ``Attention.max_attend_past`` (a look-back of that many
  keys on top of the module's causality); ``Attend.softclamp_logits`` with
  ``logit_softclamp_value``; a ``RotaryEmbedding``'s ``inv_freq`` (base and rotated dimensions, when
  exactly geometric);
* litgpt's ``CausalSelfAttention`` (causal) and its ``config``: ``rope_base`` (``rope_local_base_freq``
  where ``rope_indices`` marks the layer), ``rope_n_elem``, ``n_query_groups``,
  ``attention_logit_softcapping``, ``sliding_window_size`` where ``apply_sliding_window_attention``;
* the q/k norms by name (``q_norm``/``k_norm``, ...): their kind (RMS or layer norm) measured on a
  probe vector (:func:`numerics.attention_mapping.norm_kind`), never read from a class name, shared or
  per head (a weight of shape ``(heads, d_k)``, Cohere).

An attribute whose access raises, that changes between two reads, or of the wrong type is one line in
:attr:`ConfigRead.problems` (and the notes) and is not read: the check goes on with what the user
declared. :func:`merge` fills what the caller did not declare; a declaration that differs from what
was read wins, and the difference is returned (``"_differs"``) and said in its line.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from proofs_checks.sanity import _libsemantics as sem

from proofs_checks.sanity._modconfig_core import (  # noqa: F401  (re-exported: the readings live there)
    KEYS, _MISSING, _QK, _MAX_MODULES, ConfigError, Item, Difference, ConfigRead, _fmt, _same, _short_exc, _plain, _get, _item, _is_int, _is_num, _bad, _scalar, _number, _posint, _modules, _is_config, _guard, _Ctx, _window_value)

__all__ = ["ConfigError", "Item", "ConfigRead", "Difference", "read_module_config", "merge", "KEYS"]

#: what is read (run_attention's keyword arguments), in the order the line lists them


def read_module_config(obj: Any) -> ConfigRead:
    """What ``obj`` carries (see the module docstring). Never raises for an attribute: a problem line."""
    from proofs_checks.sanity import _modconfig_libs as libs

    r = ConfigRead()
    for prefix, m in _modules(obj):
        pre = f"{prefix}." if prefix else ""
        mod = type(m).__module__ or ""
        try:
            cfg = _get(m, "config", pre)
        except ConfigError as exc:
            r.problem(f"{exc}: not read (the check uses what is declared)")
            cfg = _MISSING
        c = _Ctx(m, pre, cfg if _is_config(cfg) else None, sem.library_of(m))
        _raising_reads(r, m, pre)
        _guard(r, _causal, c)
        if c.cfg is not None or mod.startswith("transformers"):
            _hf(r, c)
        if mod.startswith("x_transformers"):
            libs.xt(r, c)
        if mod.startswith("torchtune"):
            _guard(r, libs.torchtune, c)
        if mod.startswith("torchscale"):
            _guard(r, libs.torchscale, c)
        if mod.startswith("local_attention") and type(m).__name__ == "LocalAttention":
            _guard(r, libs.local_attention, c)
        if mod.startswith("litgpt") and c.cfg is not None:
            _guard(r, libs.litgpt, c)
        _guard(r, _qk_norms, c)
        if "rotary" in type(m).__name__.lower() or (mod.startswith("local_attention")
                                                    and type(m).__name__ == "SinusoidalEmbeddings"):
            _guard(r, libs.inv_freq, c, mod.startswith("x_transformers"))
    r.notes.extend(n for k, n in r.pending.items() if k not in r.items and k not in r.decided)
    return r


def _raising_reads(r: ConfigRead, m: Any, pre: str) -> None:
    """A problem line for each attribute the weight mapping reads by name (head counts, dimensions, positional
    tables: :mod:`numerics.attention_mapping`) whose access raises or changes: the mapping takes it as absent, and the
    line says so (hostile pass 47a F5: a raising ``num_key_value_heads`` was passed over without a word)."""
    from numerics import attention_mapping as am

    for name in am._HEAD_ATTRS + am._KV_ATTRS + am._POS + ("head_dim", "embed_dim", "hidden_size"):
        try:
            _get(m, name, pre)
        except ConfigError as exc:
            r.problem(f"{exc}: not read (the check uses what is declared)")


def _causal(r: ConfigRead, c: _Ctx) -> None:
    """The shallowest module that says decides (``True`` or ``False``); a deeper one then reads
    nothing (its claim is about its own role inside the module)."""
    if "causal" in r.decided or "causal" in r.items:
        return
    mod = type(c.m).__module__ or ""
    for name in ("is_causal",) + (("causal",) if mod.startswith(("x_transformers", "local_attention")) else ()):
        v = _get(c.m, name, c.pre)
        if v is _MISSING or v is None or callable(v):
            continue
        if not isinstance(v, bool) and type(v).__name__ != "bool_":
            raise _bad(f"{c.pre}{name}", v, "True or False")
        if bool(v):
            r.add("causal", True, f"{c.pre}{name}", library=c.libtext)
        r.decided.add("causal")
        return
    if c.cfg is not None and mod.startswith("transformers") and _builds_mask(c.m):
        d = _get(c.cfg, "is_decoder", c.cp)
        if d is True and _get(c.cfg, "is_encoder_decoder", c.cp) is not True:
            r.add("causal", True, f"{c.cp}is_decoder", library=c.libtext,
                  meaning=f"{type(c.m).__name__} builds a causal mask")
            r.decided.add("causal")


def _builds_mask(m: Any) -> bool:
    """A Hugging Face model (not a layer): it builds the attention mask from its config."""
    return any(k.__name__ == "PreTrainedModel" for k in type(m).__mro__)


def _layer(r: ConfigRead, c: _Ctx) -> tuple[int | None, str | None]:
    idx = _get(c.m, "layer_idx", c.pre)
    idx = int(idx) if _is_int(idx) and idx >= 0 else None
    lt = _get(c.m, "layer_type", c.pre)
    if isinstance(lt, str):
        return idx, lt
    types = _get(c.cfg, "layer_types", c.cp)
    if types is not _MISSING and types is not None:
        if not isinstance(types, (list, tuple)) or not all(isinstance(t, str) for t in types):
            raise _bad(f"{c.cp}layer_types", types, "a list of layer-type names")
        if idx is not None and idx < len(types):
            return idx, types[idx]
        if idx is not None and types:
            raise ConfigError(f"{c.pre}layer_idx = {idx}, beyond {c.cp}layer_types ({len(types)} layers), so this "
                              "layer's type cannot be read")
    return idx, None


def _hf(r: ConfigRead, c: _Ctx) -> None:
    try:
        idx, ltype = _layer(r, c)
    except ConfigError as exc:
        r.problem(f"{exc}: not read (the check uses what is declared)")
        idx, ltype = None, None
    rp = _Holder()
    _guard(r, _hf_rope, c, ltype, rp)
    _guard(r, _hf_rope_dims, c, rp)
    _guard(r, _hf_no_rope, c, idx)
    _guard(r, _hf_window, c, idx, ltype)
    _guard(r, _hf_local_window, c)
    _guard(r, _hf_scaling, c)
    _guard(r, _hf_kv, c)
    _guard(r, _hf_softcap, c)
    _guard(r, _hf_clip_qkv, c)
    _guard(r, _hf_sinks, c)
    _guard(r, _hf_chunked, c, idx, ltype)
    _guard(r, _hf_norm_after_rope, c)
    _guard(r, _hf_sub_norm, c)


@dataclass
class _Holder:
    rp: Any = _MISSING
    src: str = ""


def _hf_rope(r: ConfigRead, c: _Ctx, ltype: str | None, h: _Holder) -> None:
    for nm in ("rope_parameters", "rope_scaling"):
        v = _get(c.cfg, nm, c.cp)
        if isinstance(v, dict):
            h.rp, h.src = v, f"{c.cp}{nm}"
            break
        if v is not _MISSING and v is not None:
            raise _bad(f"{c.cp}{nm}", v, "a dict (rope_theta, rope_type, ...)")
    if isinstance(h.rp, dict) and h.rp and all(isinstance(v, dict) for v in h.rp.values()):  # per layer type
        if ltype in h.rp:
            h.rp, h.src = h.rp[ltype], f"{h.src}[{ltype!r}]"
        else:
            r.pending.setdefault("rope_base", f"{h.src} is given per layer type ({', '.join(map(str, h.rp))}) and "
                                 "this layer's type is unknown (no layer_type / layer_idx): the RoPE parameters are not "
                                 "read")
            h.rp = _MISSING
    theta, src = _item(h.rp, "rope_theta"), f"{h.src}['rope_theta']"
    if theta is _MISSING:
        for nm in ("rope_theta", "rotary_emb_base"):
            theta, src = _get(c.cfg, nm, c.cp), f"{c.cp}{nm}"
            if theta is not _MISSING and theta is not None:
                break
    if theta is not _MISSING and theta is not None:
        r.add("rope_base", _number(theta, src, gt=1, want="a number > 1 (the RoPE base)"), src, library=c.libtext)
    rtype = _item(h.rp, "rope_type")
    rtype = _item(h.rp, "type") if rtype is _MISSING else rtype
    if rtype not in (_MISSING, None, "default"):
        r.unmodelled.append(f"{h.src}['rope_type'] = {rtype!r} (scaled RoPE)")
        r.note("rope_type", f"{h.src}['rope_type'] = {rtype!r}: the reference computes plain RoPE (rope_type "
                            "'default') with the base read; scaled RoPE is not modelled")


#: model types whose RoPE rotates interleaved pairs (rotate_every_two), read from their source
_INTERLEAVED = {"gptj": "rotate_every_two", "codegen": "rotate_every_two", "cohere": "rotate_half on interleaved pairs",
                "llama4_text": "view_as_complex on pairs (2i, 2i+1)"}


def _hf_rope_dims(r: ConfigRead, c: _Ctx, h: _Holder) -> None:
    mt = _get(c.cfg, "model_type", c.cp)
    if isinstance(mt, str) and mt in _INTERLEAVED and c.lib is not None:
        r.add("rope_convention", "interleaved", f"{c.cp}model_type {mt!r}", library=c.libtext,
              meaning=_INTERLEAVED[mt])
    nd = _get(c.m, "rotary_ndims", c.pre)
    if nd is not _MISSING and nd is not None:
        r.add("rope_dims", _posint(nd, f"{c.pre}rotary_ndims"), f"{c.pre}rotary_ndims", library=c.libtext)
        return
    rd = _get(c.m, "rotary_dim", c.pre)  # GPT-J, CodeGen: the first rotary_dim entries of each head rotate
    if rd is not _MISSING and c.lib is not None:
        if rd is not None:
            r.add("rope_dims", _posint(rd, f"{c.pre}rotary_dim"), f"{c.pre}rotary_dim", library=c.libtext)
        return
    fac, fsrc = _item(h.rp, "partial_rotary_factor"), f"{h.src}['partial_rotary_factor']"
    for nm in ("partial_rotary_factor", "rotary_pct"):
        if fac is not _MISSING and fac is not None:
            break
        fac, fsrc = _get(c.cfg, nm, c.cp), f"{c.cp}{nm}"
    if fac is _MISSING or fac is None:
        return
    if not _is_num(fac) or not 0 < float(fac) <= 1:
        raise _bad(fsrc, fac, "a fraction in (0, 1] of the head size")
    hd, hsrc = _head_dim(c)
    if float(fac) < 1 and hd is not None:
        dims = int(hd * float(fac))
        if dims < 2 or dims % 2:
            raise ConfigError(f"{fsrc} = {fac!r} × head_dim {hd} = {dims} rotated dimensions: RoPE rotates "
                              "pairs, so it must be an even number ≥ 2")
        r.add("rope_dims", dims, f"{fsrc} {float(fac):g} × {hsrc} {hd}", library=c.libtext)
        r.add("head_dim", hd, hsrc)  # only compared with the weights' head size (not a flag)
    elif float(fac) < 1:
        r.note("partial_rotary", f"{fsrc} = {float(fac):g}: partial rotary, but no head size to apply it to "
                                 "(no head_dim, nor hidden_size with num_attention_heads): not read; declare "
                                 "--rope-dims (the rotated dimensions per head)")


def _hf_scaling(r: ConfigRead, c: _Ctx) -> None:
    """A scale other than 1/√d_k (Gemma 2's query_pre_attn_scalar; Falcon-H1's ``key_multiplier``, by which it
    multiplies k, µP): said, not read."""
    sc, (hd, _) = _get(c.m, "scaling", c.pre), _head_dim(c)
    km = _get(c.m, "key_multiplier", c.pre)
    if _is_num(km) and not isinstance(km, bool) and float(km) not in (0.0, 1.0) and _is_num(sc) and hd is not None:
        s = float(sc) * float(km)
        r.scaling = r.scaling or (s, f"{c.pre}scaling × {c.pre}key_multiplier", hd ** -0.5)
        r.note("scaling", f"{c.pre}scaling × {c.pre}key_multiplier = {s:.6g}: the module multiplies k by "
                          f"key_multiplier = {_fmt(km)} (Falcon-H1's µP multiplier), so its logit scale is not 1/√d_k "
                          f"= {hd ** -0.5:.6g}: scale_1_over_sqrt_dk names the factor, and --scale {_fmt(s)} declares it")
        return
    if _is_num(sc) and hd is not None and not math.isclose(float(sc), hd ** -0.5, rel_tol=1e-6):
        r.scaling = r.scaling or (float(sc), f"{c.pre}scaling", hd ** -0.5)
        r.note("scaling", f"{c.pre}scaling = {float(sc):.6g} is not 1/√d_k = {hd ** -0.5:.6g} (head_dim {hd}): "
                          "scale_1_over_sqrt_dk and matches_reference will name it")


def _hf_clip_qkv(r: ConfigRead, c: _Ctx) -> None:
    """OLMo's ``config.clip_qkv``, DBRX's ``attn.clip_qkv`` (its config keeps it in ``attn_config``): q, k
    and v are clamped to ±clip before attention. No flag declares it (the reference does not clamp):
    said, so that a mismatch it causes is not left unexplained. The module's own attribute first."""
    cl, src = _get(c.m, "clip_qkv", c.pre), f"{c.pre}clip_qkv"
    if cl is _MISSING or cl is None:
        cl, src = _get(c.cfg, "clip_qkv", c.cp), f"{c.cp}clip_qkv"
    if _is_num(cl) and not isinstance(cl, bool) and float(cl) > 0:
        r.note("clip_qkv", f"{src} = {_fmt(cl)}: the module clamps q, k and v to ±{_fmt(cl)} before "
                           "attention (no flag declares it; the reference does not clamp): where the probes' q, k or "
                           "v exceed it, matches_reference differs by that clamp")


def _hf_no_rope(r: ConfigRead, c: _Ctx, idx: int | None) -> None:
    """A layer that applies no RoPE though its model's config has a base: SmolLM3's, Llama 4's and Mistral
    Large 4's NoPE layers (``self.use_rope = config.no_rope_layers[layer_idx]``, 0 there: ``if self.use_rope:``
    rotates), Cohere2's full-attention layers (``if self.sliding_window is not None:`` rotates; the layer's
    ``sliding_window`` is None), a hybrid Exaone 4's global layers (``if self.sliding_window is None or
    self.is_sliding:`` rotates). The base is then the model's, not this layer's: said on its entry."""
    it = r.items.get("rope_base")
    if it is None or it.source.startswith(c.pre + "inv_freq"):
        return
    ur = _get(c.m, "use_rope", c.pre)
    mt = _get(c.cfg, "model_type", c.cp)
    if ur is not _MISSING and (isinstance(ur, bool) or _is_int(ur)) and not ur:
        where = f"{c.pre}use_rope = {ur!r}" + (f" (config.no_rope_layers[{idx}])" if idx is not None else "")
        why = "it rotates only where use_rope is set"
    elif mt == "cohere2" and _get(c.m, "sliding_window", c.pre) is None:
        where, why = f"{c.pre}sliding_window = None", "Cohere2 rotates only on its sliding-window layers"
    elif (isinstance(mt, str) and mt.startswith(("exaone4", "exaone_moe", "kolibri1"))
          and _get(c.m, "sliding_window", c.pre) not in (_MISSING, None) and _get(c.m, "is_sliding", c.pre) is False):
        where, why = f"{c.pre}is_sliding = False", "a hybrid Exaone 4 rotates only on its sliding layers (global NoPE)"
    else:
        return
    it.note = "; ".join(n for n in (it.note, f"the model's base: this layer applies no RoPE ({where}: {why})") if n)


def _hf_chunked(r: ConfigRead, c: _Ctx, idx: int | None, ltype: str | None) -> None:
    """Llama 4's chunked attention: on a ``"chunked_attention"`` layer its model masks every key outside the
    query's chunk of ``config.attention_chunk_size`` (``create_chunked_causal_mask``: q // C == k // C, k ≤ q).
    No flag declares it and the reference has no chunks: said, so that the mismatch it causes has its reason."""
    C = _get(c.cfg, "attention_chunk_size", c.cp)
    if ltype != "chunked_attention" or not _is_int(C) or C < 1:
        return
    r.note("chunked", f"{c.cp}attention_chunk_size = {C} on a 'chunked_attention' layer ({c.cp}layer_types[{idx}], "
                      f"{c.libtext}): its model's mask keeps only the keys of the query's own chunk of {C} (q // {C} "
                      f"= k // {C}, k ≤ q); no flag declares chunks and the reference has none, so at lengths above {C} "
                      "matches_reference differs by them")


#: model types whose layers normalise q and k after RoPE (their forward: apply_rotary_pos_emb, then the norms)
_NORM_AFTER_ROPE = {"hunyuan_v1_dense": ("query_layernorm", "key_layernorm"),
                    "hunyuan_v1_moe": ("query_layernorm", "key_layernorm")}


def _hf_norm_after_rope(r: ConfigRead, c: _Ctx) -> None:
    """HunYuan's ``query_layernorm``/``key_layernorm`` run after RoPE; the reference normalises before it,
    the same computation only where the norm's weight is equal within each rotated pair (an RMS norm's
    statistic is rotation-invariant): said, so that the mismatch a trained weight causes has its reason."""
    mt = _get(c.cfg, "model_type", c.cp)
    names = _NORM_AFTER_ROPE.get(mt) if isinstance(mt, str) else None
    if names and all(_get(c.m, n, c.pre) not in (_MISSING, None) for n in names):
        r.note("norm_order", f"{c.pre}{names[0]}/{names[1]} ({c.libtext}, model_type {mt!r}): the module normalises q "
                             "and k after RoPE, the reference before it: the same only where the norm's weight is equal "
                             "within each rotated pair (as at its initialisation to ones); otherwise matches_reference "
                             "differs by the order, which no flag declares, and the norm weights' gradients differ even "
                             "where the outputs agree")


def _hf_sub_norm(r: ConfigRead, c: _Ctx) -> None:
    """BitNet's ``attn_sub_norm``: an RMSNorm over the heads' concatenated output before ``o_proj`` (sub-LN).
    The reference has none and no flag declares it: said beside the mismatch it causes."""
    sn = _get(c.m, "attn_sub_norm", c.pre)
    if sn is not _MISSING and callable(getattr(sn, "named_modules", None)):
        r.unmodelled.append(f"{c.pre}attn_sub_norm (a norm before {c.pre}o_proj)")
        r.note("subln", f"{c.pre}attn_sub_norm ({type(sn).__name__}, {c.libtext}): a norm on the heads' output before "
                        f"{c.pre}o_proj (sub-LN), which the reference does not have and no flag declares: "
                        "matches_reference differs by it")


def _hf_sinks(r: ConfigRead, c: _Ctx) -> None:
    """GPT-OSS's attention sinks (``attn.sinks``, one learned logit per head that joins each softmax row's
    denominator and is then dropped). No flag declares them (the reference has no sink): said, so that a
    mismatch they cause is not left unexplained."""
    sk = _get(c.m, "sinks", c.pre)
    shape = getattr(sk, "shape", None)
    if shape is None or not callable(getattr(sk, "numel", None)) or len(shape) != 1:
        return
    r.note("sinks", f"{c.pre}sinks ({shape[0]} values): read as attention sinks, as GPT-OSS's (a logit per head that "
                    "joins each softmax row's denominator; no flag declares them, the reference has none): where "
                    "exp(sink) is not negligible against the row's sum, matches_reference differs by them")


def _hf_kv(r: ConfigRead, c: _Ctx) -> None:
    kv, ksrc = _get(c.m, "num_key_value_heads", c.pre), f"{c.pre}num_key_value_heads"
    if kv is _MISSING or kv is None:
        kv, ksrc = _get(c.cfg, "num_key_value_heads", c.cp), f"{c.cp}num_key_value_heads"
    if kv is not _MISSING and kv is not None:
        r.add("kv_heads", _posint(kv, ksrc), ksrc, library=c.libtext)


def _hf_softcap(r: ConfigRead, c: _Ctx) -> None:
    for holder, hp in ((c.m, c.pre), (c.cfg, c.cp)):
        sc = _get(holder, "attn_logit_softcapping", hp)
        if sc is _MISSING:
            continue
        if sc is not None:
            r.add("softcap", _number(sc, f"{hp}attn_logit_softcapping", gt=0, want="a positive number or None"),
                  f"{hp}attn_logit_softcapping", library=c.libtext)
        break  # the module's own value (None: no cap on this layer) decides over its config's


def _head_dim(c: _Ctx) -> tuple[int | None, str]:
    for holder, hp in ((c.m, c.pre), (c.cfg, c.cp)):
        for nm in ("qk_head_dim", "head_dim", "head_size", "attention_head_size"):  # qk_head_dim: MLA (DeepSeek)
            v = _get(holder, nm, hp)
            if _is_int(v) and v >= 1:
                return int(v), f"{hp}{nm}"
    hs, nh = _get(c.cfg, "hidden_size", c.cp), _get(c.cfg, "num_attention_heads", c.cp)
    if _is_int(hs) and _is_int(nh) and nh >= 1 and hs % nh == 0:
        return int(hs) // int(nh), "hidden_size / num_attention_heads ="
    return None, ""




def _add_window(r: ConfigRead, c: _Ctx, W: int, src: str, where: str = "", own: bool = False) -> None:
    """``config.sliding_window = W`` (``own``: the layer's own ``sliding_window``) as the release of ``c``
    means it (see :mod:`._libsemantics`), for a causal layer or one that says it is not (its
    ``is_causal`` False: a bidirectional window)."""
    mt = _get(c.cfg, "model_type", c.cp)
    path = sem.hf_attn_path(c.m, c.cfg)
    causal = True if r.get("causal") is True else (False if "causal" in r.decided else None)
    wm = sem.hf_window(mt if isinstance(mt, str) else None, W, c.lib, path, causal=causal, own=own)
    if wm is None:
        who = f"{c.lib} ({mt})" if c.lib is not None and isinstance(mt, str) else str(c.lib or "this library")
        r.add("window", W, src + where, library=c.libtext, interpreted=False,
              note=f"as read, not used: which keys it means is not known for {who}; declare --window")
    elif wm.span is None:
        r.note("window", f"{src} = {W}{where} ({c.libtext}, {wm.why}): not used as a window")
    else:
        r.add("window", wm.keys if wm.keys is not None else W, f"{src} = {W}{where}", library=c.libtext,
              meaning=f"{sem.window_text(wm.span)} ({wm.why})", span=wm.span)
    r.decided.add("window")


def _hf_window(r: ConfigRead, c: _Ctx, idx: int | None, ltype: str | None) -> None:
    """This layer's sliding window; a module whose layer is unknown (a model's config, no ``layer_idx``)
    leaves the decision to a deeper one that knows it (a note only when none does)."""
    if "window" in r.decided:
        return
    cp = c.cp
    own = _get(c.m, "sliding_window", c.pre)
    if own is not _MISSING and c.cfg is not None:  # transformers ≥ 5: the layer's own (None on full-attention layers)
        full = _full_layer(c, idx, ltype)
        if own is not None and full:  # Exaone 4 keeps the config's window on every layer and slides where is_sliding
            r.note("window", f"{c.pre}sliding_window = {own} on a full-attention layer ({full}, {c.libtext}: its model "
                             "passes it a causal mask, and the layer passes its window only where it slides): not "
                             "read as a window")
        elif own is not None:
            _add_window(r, c, _window_value(own, f"{c.pre}sliding_window"), f"{c.pre}sliding_window", own=True)
        r.decided.add("window")
        return
    sw = _get(c.cfg, "sliding_window", cp)
    if sw is _MISSING or sw is None:
        return
    W = _window_value(sw, f"{cp}sliding_window")
    types = _get(c.cfg, "layer_types", cp)
    use, mwl = _get(c.cfg, "use_sliding_window", cp), _get(c.cfg, "max_window_layers", cp)
    if use is not _MISSING and use is not None and not isinstance(use, bool) and type(use).__name__ != "bool_":
        raise _bad(f"{cp}use_sliding_window", use, "True or False")
    if use is not _MISSING and use is not None:
        use = bool(use)
    if isinstance(types, (list, tuple)) and types:
        if ltype is None and len(set(types)) > 1 and "sliding_attention" in types:
            r.pending.setdefault("window", f"{cp}layer_types mixes sliding and full attention and the module has no "
                                           "layer_idx: its window is not read (declare --window)")
            return
        if (ltype or types[0]) == "sliding_attention":
            _add_window(r, c, W, f"{cp}sliding_window", f", layer {idx} is {ltype!r}" if ltype else "")
    elif use is False:
        pass
    elif _get(c.cfg, "model_type", cp) == "gemma2":  # transformers 4: even layers slide
        if idx is None:
            r.pending.setdefault("window", f"{cp}sliding_window applies to Gemma 2's even layers and the module has "
                                           "no layer_idx: its window is not read (declare --window)")
            return
        if idx % 2 == 0:
            _add_window(r, c, W, f"{cp}sliding_window", f", layer {idx} (Gemma 2: even layers slide)")
    elif use is True and _is_int(mwl):  # Qwen2 (transformers 4): from layer max_window_layers on
        if idx is None:
            r.pending.setdefault("window", f"{cp}sliding_window applies from layer max_window_layers = {mwl} on and "
                                           "the module has no layer_idx: its window is not read (declare --window)")
            return
        if idx >= mwl:
            _add_window(r, c, W, f"{cp}sliding_window", f", layer {idx} ≥ max_window_layers {mwl}")
    else:
        _add_window(r, c, W, f"{cp}sliding_window")
    r.decided.add("window")


def _full_layer(c: _Ctx, idx: int | None, ltype: str | None) -> str:
    """The layer's own word that it is a full-attention layer (``is_sliding = False``, or ``layer_types[i]``
    "full_attention", which a transformers 5 model's mask follows), as text, or "" when it says nothing."""
    if _get(c.m, "is_sliding", c.pre) is False:
        return f"{c.pre}is_sliding = False"
    if ltype == "full_attention":
        return f"{c.cp}layer_types[{idx}] = 'full_attention'" if idx is not None else "layer_type 'full_attention'"
    return ""


def _hf_local_window(r: ConfigRead, c: _Ctx) -> None:
    """GPT-Neo's local layers: the layer's own causal band of ``config.window_size`` keys (every release:
    ``bias ^ tril(bias, −window_size)``). The layer's type is its ``attention_type`` (transformers ≥ 5 keeps
    it on the self-attention), else ``config.attention_layers[layer_id]`` (transformers 4 keeps it only on
    the wrapping ``GPTNeoAttention``)."""
    if "window" in r.decided or _get(c.cfg, "model_type", c.cp) != "gpt_neo":
        return
    at, asrc = _get(c.m, "attention_type", c.pre), f"{c.pre}attention_type"
    if at is _MISSING:
        lid, layers = _get(c.m, "layer_id", c.pre), _get(c.cfg, "attention_layers", c.cp)
        if _is_int(lid) and isinstance(layers, (list, tuple)) and 0 <= lid < len(layers):
            at, asrc = layers[lid], f"{c.cp}attention_layers[{lid}]"
    if at not in ("local", "global"):
        return
    if at == "local":
        W = _window_value(_get(c.cfg, "window_size", c.cp), f"{c.cp}window_size")
        r.add("window", W, f"{c.cp}window_size = {W}, {asrc} 'local'", library=c.libtext,
              meaning=f"{sem.window_text((W - 1, 0))} (the layer's bias ^ tril(bias, −window_size))", span=(W - 1, 0))
    r.decided.add("window")


def _qk_norms(r: ConfigRead, c: _Ctx) -> None:
    """The q/k norms' kind, measured on a probe vector (a class name says nothing: T5LayerNorm is an
    RMS norm): ``rms`` or ``layer``, per head when the weight is ``(heads, d_k)``."""
    from numerics.attention_mapping import norm_kind

    for qn, kn in _QK:
        a, b = _get(c.m, qn, c.pre), _get(c.m, kn, c.pre)
        if a is _MISSING or b is _MISSING or not callable(getattr(a, "named_modules", None)):
            continue
        if qn == kn and getattr(a, "weight", None) is not None:
            continue  # a shared norm is read only without a weight (see numerics.attention_mapping._QK_NORMS)
        (ka, wa), (kb, wb) = norm_kind(a), norm_kind(b)
        if ka is not None and ka == kb:
            r.add("qk_norm", ka, f"{c.pre}{qn} {type(a).__name__}, {c.pre}{kn} {type(b).__name__}",
                  library=c.libtext, meaning=wa)
        elif ka != kb or ka is None:
            r.note("qk_norm", f"{c.pre}{qn} ({type(a).__name__}) and {c.pre}{kn} ({type(b).__name__}): their kind "
                              f"could not be told ({wa}; {wb}); declare --qk-norm")
        return


# ------------------------------------------------------------------------------------------------
# read values and the caller's declaration

#: how each key is named on the command line
FLAGS = {"causal": "--causal", "rope_base": "--rope-base", "rope_dims": "--rope-dims",
         "rope_convention": "--rope-convention", "window": "--window", "kv_heads": "--kv-heads", "softcap": "--softcap",
         "qk_norm": "--qk-norm"}
#: read values used where not declared (the head counts are only compared: the weight finder reads them)
FILLS = ("causal", "rope_base", "rope_dims", "rope_convention", "window", "softcap", "qk_norm")


def _span(it: Item) -> tuple | None:
    """A window's ``(L, R)`` as its library means it; ``None`` for one not interpreted (its keys unknown)."""
    return it.span if it.interpreted else None


def _agrees(g: Any, v: Any, rel_tol: float) -> bool:
    """A declared value is the one read: equal, or for a number within the read's own precision
    (``rel_tol``: a base recovered from a float32 ``inv_freq`` buffer), never "close enough"."""
    if isinstance(g, numbers.Real) and isinstance(v, numbers.Real) and not isinstance(g, bool):
        return math.isclose(float(g), float(v), rel_tol=rel_tol, abs_tol=0.0) or float(g) == float(v)
    return _same(g, v)


def _declared_text(key: str, g: Any, shown: dict[str, str] | None) -> str:
    if (shown or {}).get(key):
        return f"{FLAGS[key]} {shown[key]}"
    if key == "causal":
        return "--causal"
    if key == "window":
        return f"--window {g[0]},{'' if g[1] is None else g[1]}"
    return f"{FLAGS[key]} {_fmt(g)}"


def scaling_note(read: ConfigRead, declared: float | None) -> str | None:
    """The note on a module's logit scale other than 1/√d_k, against a declared ``--scale``: as declared,
    or which one the check uses (``None``: nothing to say beyond :func:`_hf_scaling`'s own note).

        >>> r = ConfigRead(); r.scaling = (0.3, "attn.scaling", 0.35355339)
        >>> scaling_note(r, 0.3)
        'attn.scaling = 0.3 (not 1/√d_k = 0.353553): as declared by --scale'
        >>> scaling_note(r, 0.25)
        'attn.scaling = 0.3 (not 1/√d_k = 0.353553): differs from --scale 0.25, which the check uses'
    """
    if read.scaling is None or declared is None:
        return None
    val, src, inv = read.scaling
    head = f"{src} = {_fmt(val)} (not 1/√d_k = {inv:.6g}): "
    if math.isclose(val, declared, rel_tol=1e-6):
        return head + "as declared by --scale"
    return head + f"differs from --scale {_fmt(declared)}, which the check uses"


def merge(read: ConfigRead, given: dict[str, Any], positional: str,
          shown: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The values to use: each declared one (``given``, ``None`` or ``False`` = not declared;
    ``window`` as the parsed ``(L, R)``), else the read one where it fills (:data:`FILLS`, and only a
    value interpreted in its library's semantics). A declaration that differs from a read value wins:
    the difference is listed under ``"_differs"`` (:class:`Difference`) and said in its line. Returns
    the values and the ``config_read`` lines (what was read, from where, and whether it was used).
    ``shown``: a flag's value as the user wrote it (``{"window": "8"}``), for the lines.

        >>> r = ConfigRead(); r.add("rope_base", 500000.0, "config.rope_theta")
        >>> merge(r, {"rope_base": None}, "rope")[0]["rope_base"], merge(r, {"rope_base": None}, "rope")[1]
        (500000.0, ['rope_base 500000 (config.rope_theta)'])
        >>> vals, lines = merge(r, {"rope_base": 10000.0}, "rope")
        >>> vals["rope_base"], vals["_differs"][0].read.value, lines
        (10000.0, 500000.0, ['rope_base 500000 (config.rope_theta; differs from --rope-base 10000, which the check uses)'])
    """
    out = dict(given)
    out["_differs"] = []
    lines = []
    for key in KEYS:
        it = read.items.get(key)
        if it is None:
            continue
        g = given.get(key)
        declared = g not in (None, False)
        rv = _span(it) if key == "window" else it.value
        note = ""
        if declared and not it.interpreted:  # what it means is not known: neither "as declared" nor a difference
            note = f"the check uses {_declared_text(key, g, shown)}; not compared with it"
        elif declared and not _agrees(tuple(g) if key == "window" else g, rv, it.rel_tol):
            decl = _declared_text(key, g, shown)
            out["_differs"].append(Difference(key, FLAGS[key], g, it))
            note = f"differs from {decl}, which the check uses"
        elif declared:
            note = f"as declared by {FLAGS[key]}"
        elif key in ("rope_base", "rope_dims", "rope_convention") and positional != "rope":
            note = f"not used: the declared scheme is --positional {positional}"
        elif not it.interpreted:
            pass
        elif key in FILLS:
            out[key] = rv
        shown_it = Item(it.key, it.value, it.source, "; ".join(n for n in (it.note, note) if n), it.library,
                        it.meaning, it.span, it.interpreted, it.rel_tol)
        lines.append(shown_it.text())
    return out, lines
