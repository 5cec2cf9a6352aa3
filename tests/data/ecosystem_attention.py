"""Adapters (a few lines each) that present real attention implementations from pip-installable
libraries (the ``[ecosystem]`` extra, pinned in pyproject.toml) as ``(batch, T, D) -> (batch, T, D)``
maps for ``tverify check attention``. Tiny configurations, no weights downloaded."""

import torch
from torch import nn

D = 32


class Wrap(nn.Module):
    """Calls ``attn(x)`` and keeps the first output (some return ``(out, intermediates)``)."""

    def __init__(self, attn, **call_kw):
        super().__init__()
        self.attn, self.dim, self.call_kw = attn, D, call_kw

    def forward(self, x):
        o = self.attn(x, **self.call_kw)
        return o[0] if isinstance(o, tuple) else o


def xt_causal():
    from x_transformers.x_transformers import Attention

    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True))


def xt_gqa():
    from x_transformers.x_transformers import Attention

    return Wrap(Attention(dim=D, heads=4, kv_heads=2, dim_head=8, causal=True))


def xt_softcap():
    from x_transformers.x_transformers import Attention

    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True, softclamp_logits=True, logit_softclamp_value=30.0))


class HFGPT2(nn.Module):
    """Hugging Face's eager GPT2Attention; ``mask=True`` passes the causal mask the model would build."""

    def __init__(self, scale=True, mask=True):
        super().__init__()
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

        cfg = GPT2Config(n_embd=D, n_head=4, n_positions=2048, attn_pdrop=0.0, resid_pdrop=0.0,
                         scale_attn_weights=scale)
        cfg._attn_implementation = "eager"
        self.attn, self.dim, self.mask = GPT2Attention(cfg), D, mask

    def forward(self, x):
        if not self.mask:
            return self.attn(x)[0]
        T = x.shape[1]
        m = torch.zeros(T, T, dtype=x.dtype).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.attn(x, attention_mask=m[None, None])[0]


def hf_gpt2():
    return HFGPT2()


def hf_gpt2_unscaled():
    return HFGPT2(scale=False)


def hf_gpt2_no_mask():
    return HFGPT2(mask=False)


class LocalAttn(nn.Module):
    """local-attention's LocalAttention behind q/k/v/o projections (it takes q, k, v)."""

    def __init__(self, window=4, exact=True):
        super().__init__()
        from local_attention import LocalAttention

        self.dim, self.num_heads = D, 4
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.local = LocalAttention(window_size=window, causal=True, look_backward=1, look_forward=0,
                                    exact_windowsize=exact, autopad=True, dropout=0.0)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (m(x).view(B, T, 4, 8).transpose(1, 2) for m in (self.to_q, self.to_k, self.to_v))
        o = self.local(q, k, v)
        return self.to_out(o.transpose(1, 2).reshape(B, T, D))


def performer_causal():
    from performer_pytorch import SelfAttention

    return Wrap(SelfAttention(dim=D, heads=4, dim_head=8, causal=True, nb_features=64))


def local_mha(**kw):
    """local-attention 1.11.2's ``LocalMHA`` (window 4, 4 heads of 8): it takes x itself; RoPE on by default,
    its frequencies (``SinusoidalEmbeddings.inv_freq``) built in float32."""
    from local_attention import LocalMHA

    return LocalMHA(dim=D, window_size=4, dim_head=8, heads=4, **kw)


def local_mha_causal():
    return local_mha(causal=True)


def local_mha_causal_buckets():
    return local_mha(causal=True, exact_windowsize=False)
