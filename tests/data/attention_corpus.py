"""A corpus of attention implementations for ``tests/test_attention_corpus.py``: correct ones in the
layouts real libraries use, and one-line bugs of the kinds found in the public trackers of
attention libraries (cross-chunk terms forgotten, the last chunk padded, a wrong custom backward,
a stabiliser over the whole batch, softcapping after masking, half-precision logits, a window off
by one, a RoPE convention swapped, mixed batch and time axes).

Every class takes ``dim`` (D) and uses plain torch ops; tokens are rows, ``x`` is ``(B, T, D)``.
"""

import math

import torch
from torch import nn


def _heads(t, h):
    B, T, E = t.shape
    return t.view(B, T, h, E // h).transpose(1, 2)


def _merge(o):
    B, H, T, d = o.shape
    return o.transpose(1, 2).reshape(B, T, H * d)


class Plain(nn.Module):
    """Multi-head attention with q/k/v/o projections (the baseline the bugs below modify)."""

    def __init__(self, dim=32, heads=4, causal=True):
        super().__init__()
        g = torch.Generator().manual_seed(11)
        self.dim, self.num_heads, self.causal = dim, heads, causal
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim) for _ in range(4))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(dim))

    def qkv(self, x):
        h = self.num_heads
        return _heads(self.q_proj(x), h), _heads(self.k_proj(x), h), _heads(self.v_proj(x), h)

    def logits(self, q, k):
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])

    def mask(self, T, device):
        return torch.ones(T, T, dtype=torch.bool, device=device).tril() if self.causal else None

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k)
        m = self.mask(x.shape[1], x.device)
        if m is not None:
            s = s.masked_fill(~m, float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class Blockwise(Plain):
    """Causal attention computed key block by key block with an online softmax (FlashAttention's
    recurrence), block ``chunk``; ``forget_cross`` drops the blocks before the query's own block."""

    def __init__(self, dim=32, heads=4, chunk=16, forget_cross=False):
        super().__init__(dim, heads, True)
        self.chunk, self.forget_cross = chunk, forget_cross

    def forward(self, x):
        q, k, v = self.qkv(x)
        B, H, T, d = q.shape
        out = torch.zeros_like(q)
        c = self.chunk
        for qs in range(0, T, c):
            qb = q[:, :, qs:qs + c]
            m = torch.full(qb.shape[:-1], float("-inf"), dtype=q.dtype)
            l = torch.zeros(qb.shape[:-1], dtype=q.dtype)
            acc = torch.zeros_like(qb)
            for ks in range(0, qs + 1, c):
                if self.forget_cross and ks < qs:
                    continue
                kb, vb = k[:, :, ks:ks + c], v[:, :, ks:ks + c]
                s = qb @ kb.transpose(-1, -2) / math.sqrt(d)
                tq = torch.arange(qs, qs + qb.shape[2])[:, None]
                tk = torch.arange(ks, ks + kb.shape[2])[None, :]
                s = s.masked_fill(tk > tq, float("-inf"))
                m_new = torch.maximum(m, s.amax(-1))
                p = torch.exp(s - m_new[..., None])
                corr = torch.exp(m - m_new)
                l = l * corr + p.sum(-1)
                acc = acc * corr[..., None] + p @ vb
                m = m_new
            out[:, :, qs:qs + c] = acc / l[..., None]
        return self.o_proj(_merge(out))


def blockwise_forgets_cross_chunk():
    return Blockwise(forget_cross=True)


class PaddedChunks(Plain):
    """Non-causal attention over key chunks of ``chunk``; the last chunk is zero-padded when ``T``
    is not a multiple of the chunk, and (the bug) the padded keys are not masked."""

    def __init__(self, dim=32, heads=4, chunk=16, mask_padding=False):
        super().__init__(dim, heads, False)
        self.chunk, self.mask_padding = chunk, mask_padding

    def forward(self, x):
        B, T, D = x.shape
        pad = (-T) % self.chunk
        q, k, v = self.qkv(x)
        if pad:  # the last chunk, filled up with zero keys and values
            z = k.new_zeros(B, self.num_heads, pad, k.shape[-1])
            k, v = torch.cat([k, z], 2), torch.cat([v, z], 2)
        s = self.logits(q, k)
        if self.mask_padding and pad:
            s[..., T:] = float("-inf")
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class _WrongBackward(torch.autograd.Function):
    """softmax whose backward forgets the −p·(p·g) term."""

    @staticmethod
    def forward(ctx, s):
        p = torch.softmax(s, -1)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return p * g


class CustomBackward(Plain):
    """A custom autograd softmax with a wrong backward (the forward is right)."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k).masked_fill(~self.mask(x.shape[1], x.device), float("-inf"))
        return self.o_proj(_merge(_WrongBackward.apply(s) @ v))


class BatchStabiliser(Plain):
    """Softmax stabilised by the maximum over the whole batch (not per row): exact in real
    arithmetic, but one sample's large logits underflow the others."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k).masked_fill(~self.mask(x.shape[1], x.device), float("-inf"))
        e = torch.exp(s - s.amax())
        return self.o_proj(_merge((e / e.sum(-1, keepdim=True)) @ v))


class Softcapped(Plain):
    """Logit softcapping ``C·tanh(s/C)`` (Gemma 2); ``after_mask`` caps the masked logits too, so
    they become ``−C`` instead of ``−∞``."""

    def __init__(self, dim=32, heads=4, cap=30.0, after_mask=False):
        super().__init__(dim, heads, True)
        self.cap, self.after_mask = cap, after_mask

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k)
        m = ~self.mask(x.shape[1], x.device)
        if self.after_mask:
            s = self.cap * torch.tanh(s.masked_fill(m, float("-inf")) / self.cap)
        else:
            s = (self.cap * torch.tanh(s / self.cap)).masked_fill(m, float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


def softcap_after_mask():
    return Softcapped(after_mask=True)


class Float32Softmax(Plain):
    """Takes the softmax in float32 whatever the input dtype (as x-transformers does)."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k).masked_fill(~self.mask(x.shape[1], x.device), float("-inf"))
        return self.o_proj(_merge(torch.softmax(s.float(), -1).to(x.dtype) @ v))


class HalfLogits(Plain):
    """Logits rounded to float16 (a bug in a float32 module)."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = self.logits(q, k).half().to(x.dtype).masked_fill(~self.mask(x.shape[1], x.device), float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class Windowed(Plain):
    """Causal sliding window: query t sees keys t−W+1 … t (Hugging Face's sliding_window = W)."""

    def __init__(self, dim=32, heads=4, window=3):
        super().__init__(dim, heads, True)
        self.window = window

    def mask(self, T, device):
        t = torch.arange(T, device=device)
        return (t[None, :] <= t[:, None]) & (t[:, None] - t[None, :] < self.window)


def _rope(t, convention, base=10000.0):
    d = t.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(t.shape[-2], dtype=torch.float64)[:, None] * inv
    cos, sin = ang.cos().to(t.dtype), ang.sin().to(t.dtype)
    if convention == "interleaved":
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    a, b = t[..., : d // 2], t[..., d // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class Rotary(Plain):
    """Causal attention with RoPE on q and k (rotated halves, as Hugging Face's LLaMA)."""

    def __init__(self, dim=32, heads=4, convention="half"):
        super().__init__(dim, heads, True)
        self.convention = convention

    def forward(self, x):
        q, k, v = self.qkv(x)
        q, k = _rope(q, self.convention), _rope(k, self.convention)
        s = self.logits(q, k).masked_fill(~self.mask(x.shape[1], x.device), float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class GQA(nn.Module):
    """Grouped-query attention: 4 query heads, 2 key/value heads (Hugging Face's repeat_kv), causal."""

    def __init__(self, dim=32, heads=4, kv_heads=2):
        super().__init__()
        self.dim, self.num_heads, self.num_key_value_heads = dim, heads, kv_heads
        d = dim // heads
        self.q_proj = nn.Linear(dim, heads * d, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * d, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * d, bias=False)
        self.o_proj = nn.Linear(heads * d, dim, bias=False)

    def forward(self, x):
        q = _heads(self.q_proj(x), self.num_heads)
        k = _heads(self.k_proj(x), self.num_key_value_heads).repeat_interleave(2, 1)
        v = _heads(self.v_proj(x), self.num_key_value_heads).repeat_interleave(2, 1)
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(_merge(o))


class HFConv1D(nn.Module):
    """Hugging Face's Conv1D: ``x @ W + b`` with ``W`` of shape (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) / math.sqrt(nx))
        self.bias = nn.Parameter(torch.randn(nf) / 10)

    def forward(self, x):
        return x @ self.weight + self.bias


HFConv1D.__name__ = "Conv1D"


class GPT2Style(nn.Module):
    """GPT-2's layout: fused, transposed ``c_attn`` and ``c_proj``; ``scale_attn_weights``."""

    def __init__(self, dim=32, heads=4, scale_attn_weights=True):
        super().__init__()
        self.embed_dim, self.num_heads, self.scale_attn_weights = dim, heads, scale_attn_weights
        self.c_attn = HFConv1D(3 * dim, dim)
        self.c_proj = HFConv1D(dim, dim)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(self.embed_dim, -1)
        q, k, v = (_heads(t, self.num_heads) for t in (q, k, v))
        s = q @ k.transpose(-1, -2)
        if self.scale_attn_weights:
            s = s / math.sqrt(q.shape[-1])
        T = x.shape[1]
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.c_proj(_merge(torch.softmax(s, -1) @ v))


def gpt2_unscaled():
    return GPT2Style(scale_attn_weights=False)


class SingleHeadUnscaled(nn.Module):
    """One head, no 1/√d_k (a fitted single-head reference would absorb the scale)."""

    def __init__(self, dim=16):
        super().__init__()
        self.dim = dim
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))

    def forward(self, x):
        return torch.softmax(self.to_q(x) @ self.to_k(x).transpose(-1, -2), -1) @ self.to_v(x)


class MHATimeFirst(nn.Module):
    """nn.MultiheadAttention with the default batch_first=False: it reads (T, B, D)."""

    def __init__(self, dim=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 2)

    def forward(self, x):
        T = x.shape[0]
        m = torch.ones(T, T, dtype=torch.bool).triu(1)
        return self.attn(x, x, x, attn_mask=m, need_weights=False)[0]


class RaisesLong(Plain):
    """Raises for sequences longer than 100 tokens (a fixed-size buffer)."""

    def forward(self, x):
        if x.shape[1] > 100:
            raise RuntimeError("sequence longer than the 100-token buffer")
        return super().forward(x)


class ALiBi(Plain):
    """Causal attention with ALiBi biases (Press et al.)."""

    def logits(self, q, k):
        H, T = q.shape[1], q.shape[2]
        slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)], dtype=q.dtype)
        t = torch.arange(T)
        return super().logits(q, k) - slopes[:, None, None] * (t[:, None] - t[None, :]).to(q.dtype)


class SDPAFused(Plain):
    """The same weights through torch's fused scaled_dot_product_attention."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.o_proj(_merge(nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)))


def sibling_factory():
    """A factory that imports a sibling module of this file when it is called."""
    import attention_corpus_sibling

    return attention_corpus_sibling.make()


def mapping_hook(module):
    """A --mapping hook for :class:`Opaque`: its weights are kept in one tensor."""
    W = module.w
    return {"q": W[0], "k": W[1], "v": W[2], "o": W[3], "heads": 2}


class Opaque(nn.Module):
    """Weights under names nobody guesses (the mapping hook declares them)."""

    def __init__(self, dim=16):
        super().__init__()
        self.dim = dim
        g = torch.Generator().manual_seed(5)
        self.w = nn.Parameter(torch.randn(4, dim, dim, generator=g) / math.sqrt(dim))

    def forward(self, x):
        q, k, v = (_heads(x @ self.w[i].T, 2) for i in range(3))
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return _merge(torch.softmax(s, -1) @ v) @ self.w[3].T


class Exits(Plain):
    def forward(self, x):
        raise SystemExit(0)


class Masked(Plain):
    """Non-causal attention taking a key-padding mask ``(B, T)``, True = attend; a row with no key
    gives zeros."""

    def __init__(self, dim=32, heads=4, invert=False, nan_rows=False):
        super().__init__(dim, heads, False)
        self.invert, self.nan_rows = invert, nan_rows

    def forward(self, x, mask):
        keep = ~mask if self.invert else mask
        q, k, v = self.qkv(x)
        s = self.logits(q, k).masked_fill(~keep[:, None, None, :], float("-inf"))
        p = torch.softmax(s, -1)
        if not self.nan_rows:
            p = p.nan_to_num(0.0)
        return self.o_proj(_merge(p @ v))


def masked_inverted():
    """Reads the mask the other way round (True = padding) while the caller means True = attend."""
    return Masked(invert=True)


def masked_nan_rows():
    """A fully masked row is a softmax over −∞ only: NaN."""
    return Masked(nan_rows=True)


class MaskedNaNSpreads(Masked):
    """NaN rows of a fully padded sample reach every sample: a batch-wide statistic (here a centring by the
    batch's mean output) mixes them in."""

    def __init__(self):
        super().__init__(nan_rows=True)

    def forward(self, x, mask):
        o = super().forward(x, mask)
        return o - 0.0 * o.mean()


class MaskedRaisesOnEmpty(Masked):
    """Refuses a sample with no real key (an assert), so no sample of the batch gets an output."""

    def forward(self, x, mask):
        if not bool(mask.any(-1).all()):
            raise ValueError("a sample has no real key")
        return super().forward(x, mask)


class GQAFusedWidths(nn.Module):
    """Grouped-query attention through one fused projection of unequal widths ``[q (D); k (D/2); v
    (D/2)]`` (4 query heads, 2 key/value heads) that declares no head counts by attribute."""

    def __init__(self, dim=32):
        super().__init__()
        self.dim = dim
        self.Wqkv = nn.Linear(dim, 2 * dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x):
        D = self.dim
        q, k, v = self.Wqkv(x).split([D, D // 2, D // 2], -1)
        q, k, v = _heads(q, 4), _heads(k, 2).repeat_interleave(2, 1), _heads(v, 2).repeat_interleave(2, 1)
        s = (q @ k.transpose(-1, -2) / math.sqrt(D // 4)).masked_fill(~torch.ones(x.shape[1], x.shape[1],
                                                                                 dtype=torch.bool).tril(), float("-inf"))
        return self.out_proj(_merge(torch.softmax(s, -1) @ v))


class RotaryAnglesF32(Plain):
    """RoPE whose angles are computed in float32 whatever the input dtype (Hugging Face's rotary
    embedding, local-attention's): the rest of the module runs in the input dtype."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        d, T = q.shape[-1], x.shape[1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None]
        ang = torch.cat([ang, ang], -1)
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)

        def rot(t):
            a, b = t[..., : d // 2], t[..., d // 2:]
            return t * cos + torch.cat([-b, a], -1) * sin

        s = self.logits(rot(q), rot(k)).masked_fill(~self.mask(T, x.device), float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class ConvOnly(nn.Module):
    """Projections that are Hugging Face Conv1D (qkv) and a 1×1 convolution (output), no attribute
    naming the width: D is read from the projections."""

    def __init__(self):
        super().__init__()
        self.c_attn = HFConv1D(48, 16)
        self.proj = nn.Conv1d(16, 16, 1)
        self.n_head = 2

    def forward(self, x):
        q, k, v = (_heads(t, 2) for t in self.c_attn(x).split(16, -1))
        o = _merge(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), -1) @ v)
        return self.proj(o.transpose(1, 2)).transpose(1, 2)


class NaNAtLengthOne(Plain):
    """A length normalisation ``(T − 1)/(T − 1)``: NaN at T = 1, exact elsewhere."""

    def forward(self, x):
        T = x.shape[1]
        return super().forward(x) * (T - 1) / (T - 1)


class EvenLengthsOnly(Plain):
    """Raises on odd lengths above 4 (a kernel that needs pairs of tokens)."""

    def forward(self, x):
        if x.shape[1] % 2 and x.shape[1] > 4:
            raise ValueError("odd length")
        return super().forward(x)


class TwoSidedWindow(Plain):
    """Non-causal window: query t sees keys t−2 … t+1 (FlashAttention's window_size = (2, 1))."""

    def __init__(self, dim=32, heads=4):
        super().__init__(dim, heads, False)

    def mask(self, T, device):
        t = torch.arange(T, device=device)
        return (t[:, None] - t[None, :] <= 2) & (t[None, :] - t[:, None] <= 1)


class GQAWindow(GQA):
    """Grouped-query attention (4 query heads, 2 key/value heads) with a causal sliding window of 4
    keys (Mistral's layout)."""

    def forward(self, x):
        T = x.shape[1]
        q = _heads(self.q_proj(x), self.num_heads)
        k = _heads(self.k_proj(x), self.num_key_value_heads).repeat_interleave(2, 1)
        v = _heads(self.v_proj(x), self.num_key_value_heads).repeat_interleave(2, 1)
        t = torch.arange(T)
        ok = (t[None, :] <= t[:, None]) & (t[:, None] - t[None, :] < 4)
        s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~ok, float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))


class RotaryFreqsF32(Plain):
    """RoPE whose frequencies were computed in float32 (a float32 buffer, as local-attention's, cast
    with the module): angles and the rest in the input dtype."""

    def forward(self, x):
        q, k, v = self.qkv(x)
        d, T = q.shape[-1], x.shape[1]
        inv = (1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))).to(x.dtype)
        ang = torch.arange(T, dtype=x.dtype)[:, None] * inv[None]
        ang = torch.cat([ang, ang], -1)
        cos, sin = ang.cos(), ang.sin()

        def rot(t):
            a, b = t[..., : d // 2], t[..., d // 2:]
            return t * cos + torch.cat([-b, a], -1) * sin

        s = self.logits(rot(q), rot(k)).masked_fill(~self.mask(T, x.device), float("-inf"))
        return self.o_proj(_merge(torch.softmax(s, -1) @ v))
