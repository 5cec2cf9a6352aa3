"""Readers of :mod:`proofs_checks.sanity._modconfig` for x-transformers (``Attention``'s ``kv_heads`` and
``max_attend_past``, ``Attend``'s soft clamp), litgpt's ``CausalSelfAttention`` and its ``config``,
local-attention's ``LocalAttention`` window (its ``causal`` is read with ``is_causal``), torchtune's
``RotaryPositionalEmbeddings`` and the order of its ``MultiHeadAttention``'s q/k norms, and a rotary
embedding's ``inv_freq`` buffer (x-transformers' ``RotaryEmbedding``; local-attention's
``SinusoidalEmbeddings``, whose float32 rounding is said)."""

from __future__ import annotations

import math

from proofs_checks.sanity import _libsemantics as sem
from proofs_checks.sanity._modconfig_core import (_MISSING, ConfigError, ConfigRead, _Ctx, _bad, _get, _guard, _is_int,
                                             _is_num, _number, _posint, _window_value)

__all__ = ["xt", "litgpt", "inv_freq", "local_attention", "torchtune", "torchscale"]


def xt(r: ConfigRead, c: _Ctx) -> None:
    name = type(c.m).__name__
    if name == "Attention":
        _guard(r, _xt_attention, c)
    _guard(r, _xt_softclamp, c)


def _xt_attention(r: ConfigRead, c: _Ctx) -> None:
    m, pre = c.m, c.pre
    kv = _get(m, "kv_heads", pre)
    if kv is not _MISSING and kv is not None:
        r.add("kv_heads", _posint(kv, f"{pre}kv_heads"), f"{pre}kv_heads", library=c.libtext)
    mp = _get(m, "max_attend_past", pre)
    if mp is _MISSING or mp is None:
        return
    if not _is_int(mp) or mp < 0:
        raise _bad(f"{pre}max_attend_past", mp, "a non-negative integer or None")
    causal = _get(m, "causal", pre)
    wm = sem.xt_window(int(mp), causal is True, c.lib)
    r.add("window", int(mp) + 1, f"{pre}max_attend_past = {int(mp)}", library=c.libtext,
          meaning=f"{sem.window_text(wm.span)}; {wm.why}", span=wm.span)


def _rounded_note(r: ConfigRead, pre: str, vals: list, base: float, dims: int) -> None:
    """Say a rounded frequency table: each ``inv_freq[i]`` against ``base^(−2i/dims)`` computed in float64
    (local-attention's ``SinusoidalEmbeddings`` builds it in float32, and ``.double()`` keeps the rounding),
    since a float64 check rotates with the exact frequencies and the angle error grows with the position."""
    e = max(abs(v - base ** (-2 * i / dims)) / base ** (-2 * i / dims) for i, v in enumerate(vals))
    if not 1e-12 < e <= 1e-5:  # exact in float64, or not this base (then the base is not read at all)
        return
    r.note("inv_freq_rounded",
           f"{pre}inv_freq: the module's RoPE frequencies differ from {_fmt_base(base)}^(−2i/{dims}) computed in float64 "
           f"by up to {e:.2g} relative (rounded in float32, whose unit roundoff is 6e-08): its angle at position t is "
           f"off by up to t·{e:.2g} of the exact one, so matches_reference in float64 differs by that rounding (not a "
           "float64 computation's); if the table is float32 by design, declare --compute-dtype float32")


def _fmt_base(b: float) -> str:
    return str(int(b)) if b.is_integer() else repr(b)


def local_attention(r: ConfigRead, c: _Ctx) -> None:
    """lucidrains local-attention's ``LocalAttention`` (``LocalMHA.attn_fn``): with ``exact_windowsize`` its
    mask keeps keys ``q − W·look_backward … q`` (causal) or ``… q + W·look_forward`` (``bq_t > bq_k + W·lb``
    and ``bq_k − W·lf > bq_t`` masked: 1.11.2's ``local_attention.py``); without it a query reads whole
    buckets (its own and ``look_backward`` before it), which no sliding window declares: said, not read."""
    m, pre = c.m, c.pre
    W, lb, lf = (_get(m, n, pre) for n in ("window_size", "look_backward", "look_forward"))
    causal, exact = _get(m, "causal", pre), _get(m, "exact_windowsize", pre)
    if not (_is_int(W) and W > 0 and _is_int(lb) and lb >= 0 and _is_int(lf) and lf >= 0 and isinstance(causal, bool)):
        return
    src = f"{pre}window_size = {W}, look_backward = {lb}" + ("" if causal else f", look_forward = {lf}")
    if exact is not True:
        r.note("window", f"{src}, exact_windowsize = {exact} ({c.libtext}): each query reads its whole bucket of "
                         f"{W} and the {lb} before it{'' if causal else f' and {lf} after it'}, a look-back that "
                         "depends on the position in the bucket: no sliding window declares it (not read)")
        return
    span = (W * lb, 0 if causal else W * lf)
    r.add("window", W * lb + 1 if causal else W * lb, src + ", exact_windowsize", library=c.libtext, span=span,
          meaning=f"{sem.window_text(span)} (keys with q − k > {W * lb}"
                  + ("" if causal else f" or k − q > {W * lf}") + " masked)")


def torchtune(r: ConfigRead, c: _Ctx) -> None:
    """torchtune (0.6): ``RotaryPositionalEmbeddings(dim, base)`` rotates pairs (2i, 2i+1) (``x.reshape(…, −1,
    2)``) of all ``dim`` entries with ``base``; ``MultiHeadAttention`` applies ``q_norm``/``k_norm`` *after* its
    ``pos_embeddings`` (the reference normalises before RoPE: the same only where the norm's weight is equal
    within each rotated pair, as at its initialisation to ones): said, not modelled."""
    m, pre, name = c.m, c.pre, type(c.m).__name__
    if name == "RotaryPositionalEmbeddings":
        base, dim = _get(m, "base", pre), _get(m, "dim", pre)
        if _is_num(base) and float(base) > 1:
            r.add("rope_base", float(base), f"{pre}base", library=c.libtext)
        if _is_int(dim) and dim >= 2 and dim % 2 == 0:
            r.add("rope_dims", int(dim), f"{pre}dim", library=c.libtext)
        r.add("rope_convention", "interleaved", f"{pre.rstrip('.') or 'the module'} (RotaryPositionalEmbeddings)",
              library=c.libtext, meaning="x.reshape(…, −1, 2): pairs (2i, 2i+1)")
    elif name == "MultiHeadAttention" and _get(m, "pos_embeddings", pre) not in (_MISSING, None):
        if any(_get(m, n, pre) not in (_MISSING, None) for n in ("q_norm", "k_norm")):
            r.note("norm_order", f"{pre}q_norm/k_norm ({c.libtext}): torchtune normalises q and k after its RoPE "
                                 f"({pre}pos_embeddings), the reference before it: the same only where the norm's "
                                 "weight is equal within each rotated pair (as at its initialisation to ones); "
                                 "otherwise matches_reference differs by the order, which no flag declares, and the "
                                 "norm weights' gradients differ even where the outputs agree")


def torchscale(r: ConfigRead, c: _Ctx) -> None:
    """torchscale (0.3)'s ``MultiheadAttention``: ``inner_attn_ln`` (``subln=True``: a LayerNorm on the heads'
    concatenated output before ``out_proj``, Magneto's sub-LN) and ``xpos`` (``xpos_rel_pos``: XPOS, a rotation
    with a per-dimension decay) are not attention as the reference computes it and no flag declares them:
    said, so that the mismatch they cause has its reason."""
    m, pre = c.m, c.pre
    if type(m).__name__ != "MultiheadAttention":
        return
    if _get(m, "inner_attn_ln", pre) not in (_MISSING, None):
        r.unmodelled.append(f"{pre}inner_attn_ln (a norm before {pre}out_proj)")
        r.note("subln", f"{pre}inner_attn_ln ({c.libtext}, subln=True): a LayerNorm on the heads' output before "
                        f"{pre}out_proj (sub-LN), which the reference does not have and no flag declares: "
                        "matches_reference differs by it")
    if _get(m, "xpos", pre) not in (_MISSING, None):
        r.unmodelled.append(f"{pre}xpos (XPOS)")
        r.note("xpos", f"{pre}xpos ({c.libtext}, xpos_rel_pos=True): XPOS relative positions (a rotation with a "
                       "per-dimension decay of q and k), not modelled by the reference (--positional rope is plain "
                       "RoPE): matches_reference differs by it")


def _xt_softclamp(r: ConfigRead, c: _Ctx) -> None:
    m, pre = c.m, c.pre
    sc = _get(m, "softclamp_logits", pre)
    v = _get(m, "logit_softclamp_value", pre)
    if sc is _MISSING and type(m).__name__ == "Attend":  # x-transformers 1.31.4: the value alone turns the clamp on
        sc = v is not _MISSING and v is not None
    if sc is True:
        r.add("softcap", _number(v, f"{pre}logit_softclamp_value", gt=0, want="a positive number"),
              f"{pre}logit_softclamp_value", library=c.libtext)


def litgpt(r: ConfigRead, c: _Ctx) -> None:
    """litgpt's ``CausalSelfAttention``: causal by construction; ``config.rope_base`` (or
    ``rope_local_base_freq`` on the layers ``rope_indices`` marks), ``rope_n_elem`` rotated
    dimensions, ``n_query_groups`` key/value heads, ``attention_logit_softcapping``, and
    ``sliding_window_size`` where the module's ``apply_sliding_window_attention`` is set."""
    m, cfg, pre, cp, lib = c.m, c.cfg, c.pre, c.cp, c.libtext
    if type(m).__name__ == "CausalSelfAttention" and "causal" not in r.decided:
        r.add("causal", True, f"{pre.rstrip('.') or 'the module'} is litgpt's CausalSelfAttention", library=lib)
    idx = _get(m, "block_idx", pre)
    local, ind = _get(cfg, "rope_local_base_freq", cp), _get(cfg, "rope_indices", cp)
    if (local not in (_MISSING, None) and _is_int(idx) and isinstance(ind, (list, tuple)) and idx < len(ind)
            and ind[idx] == 1):
        r.add("rope_base", _number(local, f"{cp}rope_local_base_freq", gt=1, want="a number > 1"),
              f"{cp}rope_local_base_freq (rope_indices[{idx}] = 1)", library=lib)
    else:
        b = _get(cfg, "rope_base", cp)
        if b not in (_MISSING, None):
            r.add("rope_base", _number(b, f"{cp}rope_base", gt=1, want="a number > 1 (the RoPE base)"), f"{cp}rope_base",
                  library=lib)
    n, hs = _get(cfg, "rope_n_elem", cp), _get(cfg, "head_size", cp)
    if _is_int(n) and _is_int(hs) and 0 < n < hs:
        if n % 2:
            raise ConfigError(f"{cp}rope_n_elem = {n}: RoPE rotates pairs, so it must be even")
        r.add("rope_dims", int(n), f"{cp}rope_n_elem", library=lib)
    kv = _get(cfg, "n_query_groups", cp)
    if kv not in (_MISSING, None):
        r.add("kv_heads", _posint(kv, f"{cp}n_query_groups"), f"{cp}n_query_groups", library=lib)
    sc = _get(cfg, "attention_logit_softcapping", cp)
    if sc not in (_MISSING, None):
        r.add("softcap", _number(sc, f"{cp}attention_logit_softcapping", gt=0, want="a positive number or None"),
              f"{cp}attention_logit_softcapping", library=lib)
    if _get(m, "apply_sliding_window_attention", pre) in (True, 1):
        W = _get(cfg, "sliding_window_size", cp)
        if W not in (_MISSING, None):
            W = _window_value(W, f"{cp}sliding_window_size")
            r.add("window", W, f"{cp}sliding_window_size, {pre}apply_sliding_window_attention", library=lib,
                  span=(W - 1, 0), meaning=f"{sem.window_text((W - 1, 0))} (its mask cache masks tril(diagonal = −W))")


def inv_freq(r: ConfigRead, c: _Ctx, x_transformers: bool) -> None:
    """RoPE base and rotated dimensions from an exactly geometric ``inv_freq`` buffer
    (``inv_freq[i] = base^(−2i/dims)``), as x-transformers' ``RotaryEmbedding`` holds it."""
    m, pre = c.m, c.pre
    inv = _get(m, "inv_freq", pre)
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
    _rounded_note(r, pre, vals, base, dims)
    # recovered from a float32 buffer through a power of dims / (dims − 2), then rounded to 6 digits: 1e-5
    r.add("rope_base", base, f"{pre}inv_freq", library=c.libtext, rel_tol=1e-5)
    r.add("rope_dims", dims, f"{pre}inv_freq ({len(vals)} frequencies)", library=c.libtext)
    if x_transformers:
        f = _get(m, "interpolation_factor", pre)
        if _is_num(f) and float(f) != 1.0:
            r.note("interpolation", f"{pre}interpolation_factor = {f}: positions are divided by it, which the reference "
                                    "does not model")
        s = _get(m, "scale", pre)
        if s is not _MISSING and s is not None:
            r.note("xpos", f"{pre}scale: xpos scaling (use_xpos=True) is not modelled by the reference")

