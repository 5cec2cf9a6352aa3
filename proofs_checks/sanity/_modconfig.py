"""The configuration an attention module carries, read for ``tverify check attention``.

Pure reading (attributes only: no torch import, nothing called but ``named_modules()`` and the
properties of the objects read), on the object and its submodules, shallowest first:

* a Hugging Face ``config`` (on a module that has one, or any module of ``transformers``):
  ``rope_parameters["rope_theta"]`` (transformers ≥ 5; ``rope_scaling`` is its alias there) or
  ``rope_theta`` / ``rotary_emb_base`` (transformers 4), per layer type when ``rope_parameters`` is
  nested (Gemma 3); ``partial_rotary_factor`` / ``rotary_pct`` (or the module's ``rotary_ndims``,
  GPT-NeoX) → ``rope_dims = int(factor · head_dim)``; ``sliding_window`` for this layer (the module's
  own ``sliding_window`` when it has one — transformers ≥ 5 sets it per layer —, else
  ``config.layer_types[layer_idx]``, ``use_sliding_window`` / ``max_window_layers`` (Qwen2), Gemma 2's
  even layers); ``num_key_value_heads``; ``attn_logit_softcapping``; the module's ``is_causal``
  (read only when ``True``);
* x-transformers: a module whose ``causal`` is ``True``; ``Attention.kv_heads``,
  ``Attention.max_attend_past`` (the window: ``max_attend_past + 1`` keys); ``Attend.softclamp_logits``
  with ``logit_softclamp_value``; a ``RotaryEmbedding``'s ``inv_freq`` (base and rotated dimensions,
  when exactly geometric);
* litgpt's ``CausalSelfAttention`` (causal) and its ``config``: ``rope_base`` (``rope_local_base_freq``
  where ``rope_indices`` marks the layer), ``rope_n_elem``, ``n_query_groups``,
  ``attention_logit_softcapping``, ``sliding_window_size`` where ``apply_sliding_window_attention``;
* the q/k norms by name (``q_norm``/``k_norm``, ...: timm's ``Attention(qk_norm=True)``, Qwen3, OLMo 2):
  their kind (RMSNorm / LayerNorm) is read to be checked against ``--qk-norm``, not declared by it.

A value of the wrong type (``rope_theta = "big"``, ``sliding_window = -3``) raises
:class:`ConfigError` (one line). :func:`merge` fills what the caller did not declare and raises
:class:`ConfigError` for a declaration that contradicts what was read.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConfigError", "Item", "ConfigRead", "read_module_config", "merge", "KEYS"]

#: what is read (run_attention's keyword arguments), in the order the line lists them
KEYS = ("causal", "rope_base", "rope_dims", "window", "kv_heads", "softcap", "qk_norm")
_MISSING = object()
_QK = (("q_norm", "k_norm"), ("query_norm", "key_norm"), ("q_layernorm", "k_layernorm"), ("norm_q", "norm_k"),
       ("q_ln", "k_ln"), ("qnorm", "knorm"))
_MAX_MODULES = 400


class ConfigError(ValueError):
    """A configuration attribute of the wrong type, or a declaration that contradicts one (one line)."""


@dataclass
class Item:
    key: str
    value: Any
    source: str
    note: str = ""

    def text(self) -> str:
        src = self.source + (f"; {self.note}" if self.note else "")
        return f"causal ({src})" if self.key == "causal" else f"{self.key} {_fmt(self.value)} ({src})"


@dataclass
class ConfigRead:
    items: dict[str, Item] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    decided: set = field(default_factory=set)  # values a module settled (a layer with no window: decided, not read)
    pending: dict[str, str] = field(default_factory=dict)  # notes kept unless a deeper module decides
    noted: set = field(default_factory=set)

    def get(self, key: str) -> Any:
        it = self.items.get(key)
        return None if it is None else it.value

    def add(self, key: str, value: Any, source: str, note: str = "") -> None:
        old = self.items.get(key)
        if old is None:
            self.items[key] = Item(key, value, source, note)
        elif not _same(old.value, value):
            self.notes.append(f"the module also carries {key} {_fmt(value)} ({source}); the first found, "
                              f"{_fmt(old.value)} ({old.source}), is the one read")

    def note(self, kind: str, text: str) -> None:
        """A note, once per kind (several modules may carry the same config)."""
        if kind not in self.noted:
            self.noted.add(kind)
            self.notes.append(text)

    def lines(self) -> list[str]:
        return [self.items[k].text() for k in KEYS if k in self.items]


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-4)
        except (TypeError, ValueError):
            return False
    return a == b


def _get(obj: Any, name: str) -> Any:
    """``getattr`` that treats a raising property as absent."""
    if obj is None:
        return _MISSING
    try:
        return getattr(obj, name, _MISSING)
    except Exception:
        return _MISSING


def _item(d: Any, key: str) -> Any:
    if isinstance(d, dict):
        return d.get(key, _MISSING)
    return _MISSING


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _bad(source: str, v: Any, want: str) -> ConfigError:
    return ConfigError(f"{source} = {v!r}: expected {want}")


def _scalar(v: Any) -> Any:
    """A one-element tensor or array (``tensor(500000.)`` as a config's ``rope_theta``) as its number;
    anything else as it is."""
    if not isinstance(v, (numbers.Number, str, bytes)) and callable(getattr(v, "item", None)):
        with contextlib.suppress(Exception):
            n = v.numel() if callable(getattr(v, "numel", None)) else getattr(v, "size", None)
            if n == 1:
                return v.item()
    return v


def _number(v: Any, source: str, *, gt: float, want: str) -> float:
    v = _scalar(v)  # "tensor(500000.): expected a number > 1" said a true thing falsely
    if not _is_num(v) or not float(v) > gt:
        raise _bad(source, v, want)
    return float(v)


def _posint(v: Any, source: str) -> int:
    if not _is_int(v) or int(v) < 1:
        raise _bad(source, v, "a positive integer")
    return int(v)


def _modules(obj: Any) -> list[tuple[str, Any]]:
    out = [("", obj)]
    nm = _get(obj, "named_modules")
    if callable(nm):
        try:
            subs = [(n, m) for n, m in nm() if n]
        except Exception:
            subs = []
        subs.sort(key=lambda t: t[0].count("."))
        out += subs[:_MAX_MODULES]
    return out


def _is_config(c: Any) -> bool:
    return c is not _MISSING and c is not None and not isinstance(c, (str, bytes, numbers.Number, dict, list, tuple)) \
        and not callable(_get(c, "named_modules")) and not callable(c)


def read_module_config(obj: Any) -> ConfigRead:
    """What ``obj`` carries (see the module docstring). Raises :class:`ConfigError`."""
    r = ConfigRead()
    for prefix, m in _modules(obj):
        pre = f"{prefix}." if prefix else ""
        mod = type(m).__module__ or ""
        cfg = _get(m, "config")
        if _is_config(cfg) or mod.startswith("transformers"):
            _hf(r, m, cfg if _is_config(cfg) else None, pre)
        if mod.startswith("x_transformers"):
            _xt(r, m, pre)
        if mod.startswith("litgpt") and _is_config(cfg):
            _litgpt(r, m, cfg, pre)
        _qk_norms(r, m, pre)
        if "rotary" in type(m).__name__.lower():
            _inv_freq(r, m, pre, x_transformers=mod.startswith("x_transformers"))
    r.notes.extend(n for k, n in r.pending.items() if k not in r.items and k not in r.decided)
    return r


def _layer(m: Any, cfg: Any, pre: str) -> tuple[int | None, str | None]:
    idx = _get(m, "layer_idx")
    idx = int(idx) if _is_int(idx) and idx >= 0 else None
    lt = _get(m, "layer_type")
    if isinstance(lt, str):
        return idx, lt
    types = _get(cfg, "layer_types")
    if types is not _MISSING and types is not None:
        if not isinstance(types, (list, tuple)) or not all(isinstance(t, str) for t in types):
            raise _bad(f"{pre}config.layer_types", types, "a list of layer-type names")
        if idx is not None and idx < len(types):
            return idx, types[idx]
        if idx is not None and types:
            raise ConfigError(f"{pre}layer_idx = {idx}, beyond {pre}config.layer_types ({len(types)} layers), so this "
                              "layer's type cannot be read")
    return idx, None


def _hf(r: ConfigRead, m: Any, cfg: Any, pre: str) -> None:
    cp = f"{pre}config."
    idx, ltype = _layer(m, cfg, pre)
    # causal: HF's is_causal is the module's own claim (SDPA and flash use it when no mask is passed);
    # False is not read (a caller may still pass a causal mask)
    ic = _get(m, "is_causal")
    if ic is not _MISSING and ic is not None:
        if not isinstance(ic, bool) and type(ic).__name__ != "bool_":
            raise _bad(f"{pre}is_causal", ic, "True or False")
        if ic:
            r.add("causal", True, f"{pre}is_causal")
    # RoPE
    rp, rp_src = _MISSING, ""
    for nm in ("rope_parameters", "rope_scaling"):
        v = _get(cfg, nm)
        if isinstance(v, dict):
            rp, rp_src = v, f"{cp}{nm}"
            break
        if v is not _MISSING and v is not None:
            raise _bad(f"{cp}{nm}", v, "a dict (rope_theta, rope_type, ...)")
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):  # per layer type (Gemma 3)
        if ltype in rp:
            rp, rp_src = rp[ltype], f"{rp_src}[{ltype!r}]"
        else:
            r.pending.setdefault("rope_base", f"{rp_src} is given per layer type ({', '.join(map(str, rp))}) and "
                                 "this layer's type is unknown (no layer_type / layer_idx): the RoPE parameters are not "
                                 "read")
            rp = _MISSING
    theta, src = _item(rp, "rope_theta"), f"{rp_src}['rope_theta']"
    if theta is _MISSING:
        for nm in ("rope_theta", "rotary_emb_base"):
            theta, src = _get(cfg, nm), f"{cp}{nm}"
            if theta is not _MISSING and theta is not None:
                break
    if theta is not _MISSING and theta is not None:
        r.add("rope_base", _number(theta, src, gt=1, want="a number > 1 (the RoPE base)"), src)
    rtype = _item(rp, "rope_type")
    rtype = _item(rp, "type") if rtype is _MISSING else rtype
    if rtype not in (_MISSING, None, "default"):
        r.note("rope_type", f"{rp_src}['rope_type'] = {rtype!r}: the reference computes plain RoPE (rope_type "
                       "'default') with the base read; scaled RoPE is not modelled")
    nd = _get(m, "rotary_ndims")
    if nd is not _MISSING and nd is not None:
        r.add("rope_dims", _posint(nd, f"{pre}rotary_ndims"), f"{pre}rotary_ndims")
    else:
        fac, fsrc = _item(rp, "partial_rotary_factor"), f"{rp_src}['partial_rotary_factor']"
        for nm in ("partial_rotary_factor", "rotary_pct"):
            if fac is not _MISSING and fac is not None:
                break
            fac, fsrc = _get(cfg, nm), f"{cp}{nm}"
        if fac is not _MISSING and fac is not None:
            if not _is_num(fac) or not 0 < float(fac) <= 1:
                raise _bad(fsrc, fac, "a fraction in (0, 1] of the head size")
            hd, hsrc = _head_dim(m, cfg, pre)
            if float(fac) < 1 and hd is not None:
                dims = int(hd * float(fac))
                if dims < 2 or dims % 2:
                    raise ConfigError(f"{fsrc} = {fac!r} × head_dim {hd} = {dims} rotated dimensions: RoPE rotates "
                                      "pairs, so it must be an even number ≥ 2")
                r.add("rope_dims", dims, f"{fsrc} {float(fac):g} × {hsrc} {hd}")
                r.add("head_dim", hd, hsrc)  # only compared with the weights' head size (not a flag)
            elif float(fac) < 1:
                r.note("partial_rotary", f"{fsrc} = {float(fac):g}: partial rotary, but no head size to apply it to "
                                         "(no head_dim, nor hidden_size with num_attention_heads): not read; declare "
                                         "--rope-dims (the rotated dimensions per head)")
    # the sliding window of this layer
    _hf_window(r, m, cfg, pre, idx, ltype)
    # a scale other than 1/√d_k (Gemma 2's query_pre_attn_scalar) cannot be declared: said, not read
    sc, (hd, _) = _get(m, "scaling"), _head_dim(m, cfg, pre)
    if _is_num(sc) and hd is not None and not math.isclose(float(sc), hd ** -0.5, rel_tol=1e-6):
        r.note("scaling", f"{pre}scaling = {float(sc):.6g} is not 1/√d_k = {hd ** -0.5:.6g} (head_dim {hd}): "
                       "scale_1_over_sqrt_dk and matches_reference will name it")
    kv = _get(m, "num_key_value_heads")
    ksrc = f"{pre}num_key_value_heads"
    if kv is _MISSING or kv is None:
        kv, ksrc = _get(cfg, "num_key_value_heads"), f"{cp}num_key_value_heads"
    if kv is not _MISSING and kv is not None:
        r.add("kv_heads", _posint(kv, ksrc), ksrc)
    for holder, hp in ((m, pre), (cfg, cp)):
        sc = _get(holder, "attn_logit_softcapping")
        if sc is _MISSING:
            continue
        if sc is not None:
            r.add("softcap", _number(sc, f"{hp}attn_logit_softcapping", gt=0, want="a positive number or None"),
                  f"{hp}attn_logit_softcapping")
        break  # the module's own value (None: no cap on this layer) decides over its config's


def _head_dim(m: Any, cfg: Any, pre: str) -> tuple[int | None, str]:
    for holder, hp in ((m, pre), (cfg, f"{pre}config.")):
        for nm in ("head_dim", "head_size", "attention_head_size"):
            v = _get(holder, nm)
            if _is_int(v) and v >= 1:
                return int(v), f"{hp}{nm}"
    hs, nh = _get(cfg, "hidden_size"), _get(cfg, "num_attention_heads")
    if _is_int(hs) and _is_int(nh) and nh >= 1 and hs % nh == 0:
        return int(hs) // int(nh), "hidden_size / num_attention_heads ="
    return None, ""


def _window_value(v: Any, source: str) -> int:
    if not _is_int(v) or int(v) < 1:
        raise _bad(source, v, "a positive integer (the number of keys each query sees) or None")
    return int(v)


def _hf_window(r: ConfigRead, m: Any, cfg: Any, pre: str, idx: int | None, ltype: str | None) -> None:
    """This layer's sliding window; a module whose layer is unknown (a model's config, no ``layer_idx``)
    leaves the decision to a deeper one that knows it (a note only when none does)."""
    if "window" in r.decided:
        return
    cp = f"{pre}config."
    own = _get(m, "sliding_window")
    if own is not _MISSING and cfg is not None:  # transformers ≥ 5: the layer's own (None on full-attention layers)
        if own is not None:
            r.add("window", _window_value(own, f"{pre}sliding_window"), f"{pre}sliding_window")
        r.decided.add("window")
        return
    sw = _get(cfg, "sliding_window")
    if sw is _MISSING or sw is None:
        return
    W = _window_value(sw, f"{cp}sliding_window")
    types = _get(cfg, "layer_types")
    use, mwl = _get(cfg, "use_sliding_window"), _get(cfg, "max_window_layers")
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
            r.add("window", W, f"{cp}sliding_window" + (f", layer {idx} is {ltype!r}" if ltype else ""))
    elif use is False:
        pass
    elif _get(cfg, "model_type") == "gemma2":  # transformers 4: even layers slide
        if idx is None:
            r.pending.setdefault("window", f"{cp}sliding_window applies to Gemma 2's even layers and the module has "
                                           "no layer_idx: its window is not read (declare --window)")
            return
        if idx % 2 == 0:
            r.add("window", W, f"{cp}sliding_window, layer {idx} (Gemma 2: even layers slide)")
    elif use is True and _is_int(mwl):  # Qwen2 (transformers 4): from layer max_window_layers on
        if idx is None:
            r.pending.setdefault("window", f"{cp}sliding_window applies from layer max_window_layers = {mwl} on and "
                                           "the module has no layer_idx: its window is not read (declare --window)")
            return
        if idx >= mwl:
            r.add("window", W, f"{cp}sliding_window, layer {idx} ≥ max_window_layers {mwl}")
    else:
        r.add("window", W, f"{cp}sliding_window")
    r.decided.add("window")


def _xt(r: ConfigRead, m: Any, pre: str) -> None:
    name = type(m).__name__
    c = _get(m, "causal")
    if c is True:
        r.add("causal", True, f"{pre}causal")
    if name == "Attention":
        kv = _get(m, "kv_heads")
        if kv is not _MISSING and kv is not None:
            r.add("kv_heads", _posint(kv, f"{pre}kv_heads"), f"{pre}kv_heads")
        mp = _get(m, "max_attend_past")
        if mp is not _MISSING and mp is not None:
            if not _is_int(mp) or mp < 0:
                raise _bad(f"{pre}max_attend_past", mp, "a non-negative integer or None")
            r.add("window", int(mp) + 1, f"{pre}max_attend_past {int(mp)} + 1")
    sc = _get(m, "softclamp_logits")
    v = _get(m, "logit_softclamp_value")
    if sc is _MISSING and name == "Attend":  # x-transformers 1.31.4: the value alone turns the clamp on
        sc = v is not _MISSING and v is not None
    if sc is True:
        r.add("softcap", _number(v, f"{pre}logit_softclamp_value", gt=0, want="a positive number"),
              f"{pre}logit_softclamp_value")


def _litgpt(r: ConfigRead, m: Any, cfg: Any, pre: str) -> None:
    """litgpt's ``CausalSelfAttention``: causal by construction; ``config.rope_base`` (or
    ``rope_local_base_freq`` on the layers ``rope_indices`` marks), ``rope_n_elem`` rotated
    dimensions, ``n_query_groups`` key/value heads, ``attention_logit_softcapping``, and
    ``sliding_window_size`` where the module's ``apply_sliding_window_attention`` is set."""
    cp = f"{pre}config."
    if type(m).__name__ == "CausalSelfAttention":
        r.add("causal", True, f"{pre.rstrip('.') or 'the module'} is litgpt's CausalSelfAttention")
    idx = _get(m, "block_idx")
    local, ind = _get(cfg, "rope_local_base_freq"), _get(cfg, "rope_indices")
    if (local not in (_MISSING, None) and _is_int(idx) and isinstance(ind, (list, tuple)) and idx < len(ind)
            and ind[idx] == 1):
        r.add("rope_base", _number(local, f"{cp}rope_local_base_freq", gt=1, want="a number > 1"),
              f"{cp}rope_local_base_freq (rope_indices[{idx}] = 1)")
    else:
        b = _get(cfg, "rope_base")
        if b not in (_MISSING, None):
            r.add("rope_base", _number(b, f"{cp}rope_base", gt=1, want="a number > 1 (the RoPE base)"), f"{cp}rope_base")
    n, hs = _get(cfg, "rope_n_elem"), _get(cfg, "head_size")
    if _is_int(n) and _is_int(hs) and 0 < n < hs:
        if n % 2:
            raise ConfigError(f"{cp}rope_n_elem = {n}: RoPE rotates pairs, so it must be even")
        r.add("rope_dims", int(n), f"{cp}rope_n_elem")
    kv = _get(cfg, "n_query_groups")
    if kv not in (_MISSING, None):
        r.add("kv_heads", _posint(kv, f"{cp}n_query_groups"), f"{cp}n_query_groups")
    sc = _get(cfg, "attention_logit_softcapping")
    if sc not in (_MISSING, None):
        r.add("softcap", _number(sc, f"{cp}attention_logit_softcapping", gt=0, want="a positive number or None"),
              f"{cp}attention_logit_softcapping")
    if _get(m, "apply_sliding_window_attention") in (True, 1):
        W = _get(cfg, "sliding_window_size")
        if W not in (_MISSING, None):
            r.add("window", _window_value(W, f"{cp}sliding_window_size"),
                  f"{cp}sliding_window_size, {pre}apply_sliding_window_attention")


def _inv_freq(r: ConfigRead, m: Any, pre: str, x_transformers: bool) -> None:
    """RoPE base and rotated dimensions from an exactly geometric ``inv_freq`` buffer
    (``inv_freq[i] = base^(−2i/dims)``), as x-transformers' ``RotaryEmbedding`` holds it."""
    inv = _get(m, "inv_freq")
    try:
        vals = [float(v) for v in inv.detach().double().cpu().reshape(-1).tolist()] if hasattr(inv, "detach") else None
    except Exception:
        vals = None
    if not vals or len(vals) < 2 or not all(v > 0 and math.isfinite(v) for v in vals) or vals[0] != 1.0:
        return
    dims = 2 * len(vals)
    base = vals[-1] ** (-dims / (dims - 2))  # from the smallest frequency: the base's error is the entry's
    if not base > 1 or not all(math.isclose(v, base ** (-2 * i / dims), rel_tol=1e-5) for i, v in enumerate(vals)):
        if "rope_base" not in r.items:
            r.note("inv_freq", f"{pre}inv_freq is not the geometric series base^(−2i/d) (a scaled RoPE?): its base is not "
                           "read")
        return
    base = float(f"{base:.6g}")  # the buffer is float32: 6 significant digits
    r.add("rope_base", base, f"{pre}inv_freq")
    r.add("rope_dims", dims, f"{pre}inv_freq ({len(vals)} frequencies)")
    if x_transformers:
        f = _get(m, "interpolation_factor")
        if _is_num(f) and float(f) != 1.0:
            r.note("interpolation", f"{pre}interpolation_factor = {f}: positions are divided by it, which the reference does "
                           "not model")
        s = _get(m, "scale")
        if s is not _MISSING and s is not None:
            r.note("xpos", f"{pre}scale: xpos scaling (use_xpos=True) is not modelled by the reference")


def _norm_kind(v: Any) -> str | None:
    n = type(v).__name__.lower()
    if "rmsnorm" in n:
        return "rms"
    if "layernorm" in n:
        return "layer"
    return None


def _qk_norms(r: ConfigRead, m: Any, pre: str) -> None:
    for qn, kn in _QK:
        a, b = _get(m, qn), _get(m, kn)
        if a is _MISSING or b is _MISSING or not callable(_get(a, "named_modules")):
            continue
        ka, kb = _norm_kind(a), _norm_kind(b)
        if ka is not None and ka == kb:
            r.add("qk_norm", ka, f"{pre}{qn} {type(a).__name__}, {pre}{kn} {type(b).__name__}")
        return


# ------------------------------------------------------------------------------------------------
# read values and the caller's declaration

#: how each key is named on the command line, and what read values do: "fill" (used where not
#: declared) or "check" (only compared with the declaration: the weight finder reads the head
#: counts itself; QK-norm is declared, the module's norms are its weights)
FLAGS = {"causal": "--causal", "rope_base": "--rope-base", "rope_dims": "--rope-dims", "window": "--window",
         "kv_heads": "--kv-heads", "softcap": "--softcap", "qk_norm": "--qk-norm"}
_FILL = ("causal", "rope_base", "rope_dims", "window", "softcap")


def _window_tuple(W: int, causal: bool) -> tuple[int, int]:
    return (W - 1, 0)


def merge(read: ConfigRead, given: dict[str, Any], positional: str,
          shown: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The values to use: each declared one (``given``, ``None`` or ``False`` = not declared;
    ``window`` as the parsed ``(L, R)``), else the read one where it fills. Raises
    :class:`ConfigError` for a declaration that contradicts a read value; returns the
    ``config_read`` lines (what was read, from where, and whether it was used). ``shown``: a flag's
    value as the user wrote it (``{"window": "8"}``), for the message.

        >>> r = ConfigRead(); r.add("rope_base", 500000.0, "config.rope_theta")
        >>> merge(r, {"rope_base": None}, "rope")[0]["rope_base"], merge(r, {"rope_base": None}, "rope")[1]
        (500000.0, ['rope_base 500000 (config.rope_theta)'])
        >>> merge(r, {"rope_base": 10000.0}, "rope")
        Traceback (most recent call last):
        ...
        proofs_checks.sanity._modconfig.ConfigError: --rope-base 10000 contradicts the module's rope_base 500000 (config.rope_theta): leave out --rope-base to use the module's value, or pass --ignore-config to check against your flags alone
    """
    out = dict(given)
    lines = []
    for key in KEYS:
        it = read.items.get(key)
        if it is None:
            continue
        g = given.get(key)
        declared = g not in (None, False)
        rv = _window_tuple(it.value, True) if key == "window" else it.value
        if declared and not _same(tuple(g) if key == "window" else g, rv):
            as_given = (shown or {}).get(key) or (f"{g[0]},{g[1]}" if key == "window" else _fmt(g))
            rshown = (f"{it.value} (keys t−{it.value - 1} … t, i.e. --window {rv[0]},{rv[1]})" if key == "window"
                      else _fmt(it.value))
            raise ConfigError(f"{FLAGS[key]} {as_given} contradicts the module's {key} {rshown} ({it.source}): leave out "
                              f"{FLAGS[key]} to use the module's value, or pass --ignore-config to check against your "
                              "flags alone")
        note = ""
        if declared:
            note = f"as declared by {FLAGS[key]}"
        elif key in ("rope_base", "rope_dims") and positional != "rope":
            note = f"not used: the declared scheme is --positional {positional}"
        elif key in _FILL:
            out[key] = rv
        elif key == "qk_norm":
            note = f"not applied unless declared: --qk-norm {it.value}"
        lines.append(Item(key, it.value, it.source, note).text())
    return out, lines
