"""The reference attention of ``tverify check attention``: a user's weights mapped onto multi-head
softmax attention with a declared structure (causal mask, sliding window, RoPE, ALiBi, additive
positions, logit softcapping), computed with plain torch ops in any working precision.

Conventions. Tokens are rows: ``x`` is ``(batch, T, D)``. Projections are in ``nn.Linear`` form,
``y = x Wᵀ + b`` with ``W`` of shape ``(out, in)``. Queries are split into ``heads`` heads of width
``d_k``; keys and values into ``kv_heads`` heads (grouped-query attention when ``kv_heads <
heads``: query head ``h`` uses key/value head ``h // (heads / kv_heads)``, as Hugging Face's
``repeat_kv``). Per head, the logits are ``s_ts = scale · q_t·k_s`` (``scale = 1/√d_k`` unless
given), then ALiBi adds ``−m_h·(t − s)`` (causal) or ``−m_h·|t − s|``, then softcapping maps
``s ↦ C·tanh(s/C)``, then keys that the mask forbids get ``−∞`` *after* the cap, the softmax runs
over keys (the last axis), and the heads' outputs are concatenated and projected by ``W_o``.

* ``window = (L, R)``: query ``t`` sees keys ``t − L … t + R`` (``None`` for unbounded on that side;
  FlashAttention's ``window_size``); Hugging Face's ``sliding_window = W`` with a causal mask is
  ``(W − 1, 0)``.
* RoPE (Su et al., 2021): the first ``rope_dims`` dimensions of each query/key head are rotated by
  the angle ``t·base^(−2i/rope_dims)`` for pair ``i``; the pairs are ``(2i, 2i+1)`` ("interleaved",
  as the RoFormer code and rotary-embedding-torch) or ``(i, i + rope_dims/2)`` ("half", as Hugging
  Face's ``rotate_half`` and x-transformers). Positions are ``0 … T−1``; ``rope_offset = (a, b)``
  (a variant the hints try) rotates queries at ``a … T−1+a`` and keys at ``b … T−1+b``. Only the
  difference ``a − b`` is observable: the logit of ``q_t·k_s`` depends on ``(t + a) − (s + b)`` alone,
  so a common offset leaves RoPE attention unchanged.
* ALiBi (Press et al., 2022): slopes ``2^(−8(h+1)/H)`` for ``H`` a power of two, otherwise those of
  the closest lower power of two followed by every other slope of the next one.
* ``sinusoidal``/``learned``: a table ``P (T_max, D)`` added to the input before the projections
  (Vaswani et al.'s sines and cosines, or the module's own learned table).

This module imports torch only (no ``proofs_checks``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any
import torch

__all__ = ["Mapping", "Structure", "alibi_slopes", "sinusoidal_table", "rope_rotate", "allowed_mask",
           "reference_attention", "logits", "max_logit", "qk_normalise"]


@dataclass
class Mapping:
    """Projections of a multi-head attention in ``nn.Linear`` form (weights ``(out, in)``), possibly
    views of the module's own parameters (so that gradients reach them). ``heads`` query heads,
    ``kv_heads`` key/value heads (``kv_heads`` divides ``heads``), ``wo = None``: no output
    projection. ``source`` says where the weights came from."""

    wq: torch.Tensor
    bq: torch.Tensor | None
    wk: torch.Tensor
    bk: torch.Tensor | None
    wv: torch.Tensor
    bv: torch.Tensor | None
    wo: torch.Tensor | None
    bo: torch.Tensor | None
    heads: int
    source: str
    kv_heads: int | None = None
    pos_table: torch.Tensor | None = None  # a learned additive table found on the module
    kv_grouping: str = "interleave"  # GQA: head h uses kv head h // g ("interleave", HF) or h % kv ("tile")
    # QK-norm (Structure.qk_norm): the module's norms on q and k as (weight | None, bias | None, eps | None),
    # the weight of width d_k (per head: Qwen3, Gemma 3) or of the whole projection (OLMo 2)
    q_norm: tuple | None = None
    k_norm: tuple | None = None
    # the mapping hook's own transforms of q and k per head, (B, heads, T, d_k) → same (k: kv_heads), applied
    # after the projection (and QK-norm) and before RoPE
    q_transform: Any = None
    k_transform: Any = None
    #: a hook's entries returned as copies with no graph to the module's parameters (their gradients not judged)
    detached: list = field(default_factory=list)

    def __post_init__(self):
        if self.kv_heads is None:
            self.kv_heads = self.heads

    @property
    def d_k(self) -> int:
        return self.wq.shape[0] // self.heads

    @property
    def d_v(self) -> int:
        return self.wv.shape[0] // self.kv_heads

    def consistent(self, D: int) -> str:
        """'' when the shapes fit an input width ``D``, else what is wrong (one line)."""
        H, Hkv = self.heads, self.kv_heads
        for nm, w in (("q", self.wq), ("k", self.wk), ("v", self.wv)):
            if w.dim() != 2 or w.shape[1] != D:
                return f"{nm} weight of shape {tuple(w.shape)} does not take inputs of width D = {D}"
        if H < 1 or Hkv < 1 or H % Hkv:
            return f"kv_heads = {Hkv} does not divide heads = {H}"
        if self.wq.shape[0] % H:
            return f"q width {self.wq.shape[0]} is not a multiple of heads = {H}"
        dk = self.wq.shape[0] // H
        if self.wk.shape[0] != Hkv * dk:
            return f"k width {self.wk.shape[0]} ≠ kv_heads·d_k = {Hkv}·{dk}"
        if self.wv.shape[0] % Hkv:
            return f"v width {self.wv.shape[0]} is not a multiple of kv_heads = {Hkv}"
        for nm, w, b in (("q", self.wq, self.bq), ("k", self.wk, self.bk), ("v", self.wv, self.bv),
                         ("o", self.wo, self.bo)):
            if b is not None and (w is None or b.shape != (w.shape[0],)):
                return f"{nm} bias of shape {tuple(b.shape)} does not fit its weight"
        for nm, nrm, heads in (("q_norm", self.q_norm, H), ("k_norm", self.k_norm, Hkv)):
            for part, t in zip(("weight", "bias"), (nrm or (None, None))[:2]):
                if t is not None and t.dim() == 2 and tuple(t.shape) != (heads, dk):
                    return (f"{nm} {part} of shape {tuple(t.shape)} is not per head (heads, d_k) = ({heads}, {dk}): "
                            "a 2-D norm weight is applied to each head's d_k entries")
                if t is not None and t.numel() not in (dk, heads * dk):
                    return (f"{nm} {part} of width {t.numel()} fits neither the head size d_k = {dk} nor the "
                            f"projection's width {heads * dk}")
        width = H * self.d_v
        if self.wo is not None and (self.wo.dim() != 2 or self.wo.shape[1] != width):
            return f"output weight of shape {tuple(self.wo.shape)} does not take the heads' width {width}"
        return ""

    def out_width(self) -> int:
        return self.wo.shape[0] if self.wo is not None else self.heads * self.d_v


@dataclass(frozen=True)
class Structure:
    """What the module declares besides its weights (see the module docstring)."""

    causal: bool = False
    window: tuple[int | None, int | None] | None = None
    positional: str = "none"  # none | learned | sinusoidal | rope | alibi
    rope_convention: str = "half"  # half | interleaved
    rope_base: float = 10000.0
    rope_dims: int | None = None
    softcap: float | None = None
    scale: float | None = None  # None: 1/sqrt(d_k)
    qk_norm: str | None = None  # None | rms | layer: a norm on q and k before RoPE (Mapping.q_norm/k_norm)
    swap_axes: bool = False  # a variant for hints only: the module reads axis 0 as time
    rope_offset: tuple[int, int] = (0, 0)  # a variant for hints: RoPE positions of queries and keys start here

    def describe(self) -> str:
        parts = ["causal" if self.causal else "not causal"]
        if self.window is not None:
            L, R = self.window
            parts.append(f"window ({'∞' if L is None else L}, {'∞' if R is None else R})")
        if self.positional == "rope":
            parts.append(f"RoPE {self.rope_convention} base {self.rope_base:g}"
                         + (f" on {self.rope_dims} dims" if self.rope_dims else "")
                         + (" at positions q {0}…T−1{0:+d}, k {1}…T−1{1:+d}".format(*self.rope_offset)
                            if self.rope_offset != (0, 0) else ""))
        elif self.positional == "alibi":  # which of the two forms (47a F1: a one-sided module's mismatch said nothing)
            parts.append("ALiBi −m_h·(t−s)" if self.causal else "ALiBi −m_h·|t−s| (symmetric, without --causal)")
        elif self.positional != "none":
            parts.append(self.positional)
        if self.softcap is not None:
            parts.append(f"softcap {self.softcap:g}")
        if self.qk_norm is not None:
            parts.append(f"QK-norm {self.qk_norm}")
        if self.scale is not None:
            parts.append(f"scale {self.scale:.4g}")
        return ", ".join(parts)

    def variant(self, **kw) -> "Structure":
        return replace(self, **kw)


def alibi_slopes(H: int) -> list[float]:
    """ALiBi slopes of ``H`` heads (Press et al.).

        >>> tuple(round(s, 4) for s in alibi_slopes(4))
        (0.25, 0.0625, 0.0156, 0.0039)
        >>> len(alibi_slopes(6)), alibi_slopes(6)[4:] == alibi_slopes(8)[0:4:2]
        (6, True)
    """
    def pow2(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if H & (H - 1) == 0:
        return pow2(H)
    n = 2 ** math.floor(math.log2(H))
    return pow2(n) + pow2(2 * n)[0::2][: H - n]


def sinusoidal_table(T: int, D: int, dtype=torch.float64) -> torch.Tensor:
    """Vaswani et al.'s table ``(T, D)``: ``sin(t/10000^(2i/D))`` at even, ``cos`` at odd columns."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(0, D, 2, dtype=torch.float64)
    ang = pos / (10000.0 ** (i / D))
    P = torch.zeros(T, D, dtype=torch.float64)
    P[:, 0::2] = torch.sin(ang)
    P[:, 1::2] = torch.cos(ang[:, : D // 2])
    return P.to(dtype)


def rope_rotate(t: torch.Tensor, *, base: float, dims: int | None, convention: str, offset: int = 0) -> torch.Tensor:
    """RoPE on ``t (B, H, T, d)``: rotate the first ``dims`` (default ``d``, even) dimensions, token
    ``i`` at position ``i + offset``."""
    d = t.shape[-1]
    r = dims or d
    r -= r % 2
    if r <= 0:
        return t
    T = t.shape[-2]
    # the angles in the working precision too ("entirely in p"), float32 for the half precisions (as
    # every implementation: Hugging Face computes them in float32 with autocast off)
    adt = torch.float64 if t.dtype == torch.float64 else torch.float32
    inv = base ** (-torch.arange(0, r, 2, dtype=adt) / r)  # (r/2,)
    ang = (torch.arange(T, dtype=adt) + offset)[:, None] * inv[None]  # (T, r/2)
    cos, sin = torch.cos(ang).to(t.dtype).to(t.device), torch.sin(ang).to(t.dtype).to(t.device)
    rot, rest = t[..., :r], t[..., r:]
    if convention == "interleaved":
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    else:
        a, b = rot[..., : r // 2], rot[..., r // 2:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    return torch.cat([out, rest], -1)


def allowed_mask(T: int, st: Structure, device=None) -> torch.Tensor:
    """``(T, T)`` bool: ``[t, s]`` is True when query ``t`` may see key ``s``.

        >>> allowed_mask(4, Structure(causal=True, window=(1, 0))).int().tolist()
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    """
    t = torch.arange(T, device=device)[:, None]
    s = torch.arange(T, device=device)[None, :]
    ok = torch.ones(T, T, dtype=torch.bool, device=device)
    if st.causal:
        ok &= s <= t
    if st.window is not None:
        L, R = st.window  # a window wider than T is no window at T (and an int64 cannot hold 2**64)
        if L is not None:
            ok &= (t - s) <= min(int(L), T)
        if R is not None:
            ok &= (s - t) <= min(int(R), T)
    return ok


def _proj(x, W, b, dtype):
    # the reference follows the input's device: a mapping read from a module on CUDA holds CUDA
    # weights while the probes are kept on the CPU (and the other way round)
    y = x @ W.to(dtype=dtype, device=x.device).T
    return y if b is None else y + b.to(dtype=dtype, device=x.device)


def _heads(t: torch.Tensor, h: int) -> torch.Tensor:
    B, T, E = t.shape
    return t.reshape(B, T, h, E // h).transpose(1, 2)


def _inputs(x: torch.Tensor, m: Mapping, st: Structure, dtype) -> torch.Tensor:
    x = x.to(dtype)
    if st.swap_axes:
        x = x.transpose(0, 1)
    T = x.shape[1]
    if st.positional == "sinusoidal":
        x = x + sinusoidal_table(T, x.shape[-1], dtype).to(x.device)
    elif st.positional == "learned":
        if m.pos_table is None or m.pos_table.shape[0] < T:
            raise ValueError("no learned position table of this length")
        x = x + m.pos_table[:T].to(dtype=dtype, device=x.device)
    return x


def qk_normalise(t: torch.Tensor, kind: str, params: tuple | None, h: int) -> torch.Tensor:
    """RMSNorm (``t / √(mean t² + eps) · w``) or LayerNorm (``(t − mean) / √(var + eps) · w + b``) of
    the projection ``t (B, T, E)`` over each head's ``d_k`` entries, or over all ``E`` when the
    weight has width ``E`` (OLMo 2); returned split into ``h`` heads ``(B, h, T, d_k)``. ``params``
    ``(weight | None, bias | None, eps | None)``, a weight ``(heads, d_k)`` per head; eps ``None``: the dtype's machine epsilon (as
    ``nn.RMSNorm``)."""
    w, b, eps = params if params is not None else (None, None, 1e-6)
    E = t.shape[-1]
    whole = w is not None and w.dim() == 1 and w.numel() == E and E != E // h
    if w is not None and w.dim() == 2:  # per head (heads, d_k) (Cohere): broadcast over (B, heads, T, d_k)
        w = w[:, None, :]
    if b is not None and b.dim() == 2:
        b = b[:, None, :]
    y = t if whole else _heads(t, h)
    eps = torch.finfo(t.dtype).eps if eps is None else float(eps)
    if kind == "layer":
        y = y - y.mean(-1, keepdim=True)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
    else:
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
    if w is not None:
        y = y * w.to(y.dtype).to(y.device)
    if b is not None:
        y = y + b.to(y.dtype).to(y.device)
    return _heads(y, h) if whole else y


def logits(x: torch.Tensor, m: Mapping, st: Structure, dtype=torch.float64) -> tuple:
    """``(s (B, H, T, T) after scale, ALiBi and cap, before the mask; v (B, H, T, d_v))`` in ``dtype``."""
    x = _inputs(x, m, st, dtype)
    H, Hkv = m.heads, m.kv_heads
    if st.qk_norm is not None:
        q = qk_normalise(_proj(x, m.wq, m.bq, dtype), st.qk_norm, m.q_norm, H)
        k = qk_normalise(_proj(x, m.wk, m.bk, dtype), st.qk_norm, m.k_norm, Hkv)
    else:
        q = _heads(_proj(x, m.wq, m.bq, dtype), H)
        k = _heads(_proj(x, m.wk, m.bk, dtype), Hkv)
    if m.q_transform is not None:
        q = m.q_transform(q)
    if m.k_transform is not None:
        k = m.k_transform(k)
    v = _heads(_proj(x, m.wv, m.bv, dtype), Hkv)
    if Hkv != H:
        g = H // Hkv
        if m.kv_grouping == "tile":
            k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
        else:
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    if st.positional == "rope":
        q = rope_rotate(q, base=st.rope_base, dims=st.rope_dims, convention=st.rope_convention,
                        offset=st.rope_offset[0])
        k = rope_rotate(k, base=st.rope_base, dims=st.rope_dims, convention=st.rope_convention,
                        offset=st.rope_offset[1])
    scale = st.scale if st.scale is not None else 1 / math.sqrt(m.d_k)
    s = (q @ k.transpose(-1, -2)) * scale
    T = x.shape[1]
    if st.positional == "alibi":
        t = torch.arange(T, device=x.device)
        dist = (t[:, None] - t[None, :]).to(dtype)
        dist = dist if st.causal else dist.abs()
        sl = torch.tensor(alibi_slopes(H), dtype=dtype, device=x.device)[:, None, None]
        s = s - sl * dist
    if st.softcap is not None:
        s = st.softcap * torch.tanh(s / st.softcap)
    return s, v


def reference_attention(x: torch.Tensor, m: Mapping, st: Structure, dtype=torch.float64,
                        key_valid: torch.Tensor | None = None) -> torch.Tensor:
    """The reference attention of ``x (B, T, D)`` computed with plain ops in ``dtype`` (the
    projections, logits, softmax and output all in ``dtype``; differentiable). Returns
    ``(B, T, D_out)`` in ``dtype``.

        >>> g = torch.Generator().manual_seed(0)
        >>> W = [torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(4)]
        >>> m = Mapping(W[0], None, W[1], None, W[2], None, W[3], None, heads=2, source="test")
        >>> x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
        >>> mha = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64)
        >>> with torch.no_grad():
        ...     _ = mha.in_proj_weight.copy_(torch.cat(W[:3])); _ = mha.out_proj.weight.copy_(W[3])
        ...     ref = mha(x, x, x, need_weights=False)[0]
        >>> bool(torch.allclose(reference_attention(x, m, Structure()), ref))
        True
    """
    s, v = logits(x, m, st, dtype)
    T = s.shape[-1]
    s = s.masked_fill(~allowed_mask(T, st, s.device), float("-inf"))
    if key_valid is not None:  # (B, T) bool: keys that are not padding
        s = s.masked_fill(~key_valid.to(s.device)[:, None, None, :], float("-inf"))
    p = torch.softmax(s, -1)
    o = p @ v
    B = o.shape[0]
    o = o.transpose(1, 2).reshape(B, T, -1)
    if m.wo is not None:
        o = _proj(o, m.wo, m.bo, dtype)
    if st.swap_axes:
        o = o.transpose(0, 1)
    return o


def scale_to_logit(x64: torch.Tensor, m: Mapping, st: Structure, target: float, dtype=torch.float64) -> float | None:
    """The input factor ``c`` that brings the largest logit of ``c·x64`` to about ``target`` (logits are about
    quadratic in the input), or ``None`` where that probe does not exist in ``dtype``: the factor, the input ``c·x``
    or the plain reference's logits or outputs there beyond the precision's range, for any implementation that
    forms ``q·kᵀ`` (a declared scale of 1e-308 needs inputs of ~1e155; at float32 and a scale of 1e-36 the unscaled
    ``q·kᵀ`` of the huge-logit probe is ~1e39: hostile pass 19b F3, F4). Never ``sqrt(target / L0)``, which
    overflowed to inf at a tiny ``L0``. A huge declared scale whose own logits overflow is sized from the
    unscaled logits."""
    import math
    from dataclasses import replace

    L0 = max_logit(x64, m, st)
    if math.isfinite(L0) and L0 > 0:
        c = math.sqrt(target) / math.sqrt(L0)
    elif not math.isfinite(L0) and st.scale is not None and st.scale > 0:
        Lu = max_logit(x64, m, replace(st, scale=1.0))
        c = math.sqrt(target) / (math.sqrt(Lu) * math.sqrt(st.scale)) if math.isfinite(Lu) and Lu > 0 else math.nan
    else:
        return None
    if not (math.isfinite(c) and c > 0):
        return None
    xc = x64 * c
    with torch.no_grad():
        ok = (bool(torch.isfinite(xc.to(dtype)).all()) and math.isfinite(max_logit(xc, m, st))
              and bool(torch.isfinite(reference_attention(xc, m, st, dtype)).all()))
    return c if ok else None


def max_logit(x: torch.Tensor, m: Mapping, st: Structure) -> float:
    """``max |s_ts|`` over allowed pairs of the probe (float64)."""
    with torch.no_grad():
        s, _ = logits(x, m, replace(st, softcap=None), torch.float64)
        T = s.shape[-1]
        s = s.masked_fill(~allowed_mask(T, st, s.device), 0.0)
        return float(s.abs().max()) if s.numel() else 0.0
