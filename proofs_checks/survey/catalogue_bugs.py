"""Survey entries pairing a release with a documented attention bug (found in the library's tracker) with the release that fixed it.

Each pair shares one adapter (the same ``make()`` runs on both releases); ``known`` names the property
that names the bug, the upstream issue / pull request / commit, and what went wrong."""

from __future__ import annotations

from proofs_checks.survey.entry import Entry, _e  # noqa: F401

_HF_MISTRAL_434 = '''
import transformers.models.mistral.modeling_mistral as mm
from transformers import MistralConfig
def mask(x, w):  # the sliding-window causal mask MistralModel builds (4.34: its own helper; 4.35: modeling_attn_mask_utils), in float32
    f = getattr(mm, "_make_sliding_window_causal_mask", None)
    m = f(x.shape[:2], torch.float32, x.device, 0, w) if f else mm._prepare_4d_causal_attention_mask(None, x.shape[:2], x.float(), 0, w)
    return m.to(x.dtype)
def make():
    c = cfg(MistralConfig, num_key_value_heads=2, intermediate_size=64, sliding_window=4)
    return Wrap(mm.MistralAttention(c), call=lambda a, x: a(x, mask(x, 4), torch.arange(x.shape[1])[None]))
'''

_XT_SOFTCLAMP = '''
import inspect
from x_transformers.x_transformers import Attention
def make():  # logit soft-clamping at 30 (1.31.4 turns it on by the value alone, 1.31.5 by softclamp_logits=True)
    on = {"softclamp_logits": True} if "softclamp_logits" in inspect.signature(Attention).parameters else {}
    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True, logit_softclamp_value=30.0, **on))
'''

_MEA = "memory-efficient-attention-pytorch"
_MEA_PLAIN = '''
from memory_efficient_attention_pytorch import Attention
def make():  # the plain (not chunked) path, bidirectional
    return Wrap(Attention(dim=D, heads=4, dim_head=8))
'''
_MEA_CHUNKED = '''
from memory_efficient_attention_pytorch import Attention
def make():  # the chunked path, causal, buckets of 4 queries x 4 keys
    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True, memory_efficient=True, q_bucket_size=4, k_bucket_size=4))
'''

_HF_QWEN2_NO_SWA = '''
from transformers import Qwen2Config, Qwen2Model
class L(nn.Module):  # the decoder layer reduced to its attention: Qwen2Model passes it the mask it built
    def __init__(self, attn):
        super().__init__(); self.self_attn = attn
    def forward(self, h, **kw):
        return (self.self_attn(h, **kw)[0],)
def make():  # use_sliding_window=False (Qwen2 checkpoints ship sliding_window=4096 beside it): full causal attention
    c = cfg(Qwen2Config, num_key_value_heads=2, intermediate_size=64, use_sliding_window=False, sliding_window=4, num_hidden_layers=1, vocab_size=8)
    m = Qwen2Model(c); m.layers[0], m.norm = L(m.layers[0].self_attn), nn.Identity()
    return Wrap(m, call=lambda a, x: a(inputs_embeds=x, use_cache=False).last_hidden_state)
'''

_MISTRAL_DECL = {"causal": True, "window": 4, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"}

_VIT = '''
from vit_pytorch.vit_pytorch import Attention
def make():
    return Wrap(Attention(D, heads=4, dim_head=8))
'''

ENTRIES: list[Entry] = [
    _e("hf-mistral-4.34.0-window", "transformers MistralAttention (sliding window)", "transformers", "4.34.0",
       "transformers", _HF_MISTRAL_434, _MISTRAL_DECL, "eager, sliding_window=4 with the mask MistralModel builds",
       known={"bug": ["window_respected"], "fixed_in": "hf-mistral-4.35.0-window",
              "ref": "https://github.com/huggingface/transformers/pull/26792",
              "title": "Remove ambiguous `padding_mask` and instead use a 2D->4D Attn Mask Mapper (4.35.0)",
              "what": "the sliding-window mask is banded with triu(diagonal=-sliding_window): each query keeps "
                      "sliding_window + 1 keys"},
       note="the convention moved again later: from 4.39 (seen in 4.39.3-4.41.0) eager/SDPA keep sliding_window + 1 "
            "keys again (aligned with FlashAttention's window_size=(W, W) after issue #29623); 5.23.0 keeps W"),
    _e("hf-mistral-4.35.0-window", "transformers MistralAttention (sliding window)", "transformers", "4.35.0",
       "transformers", _HF_MISTRAL_434, _MISTRAL_DECL, "the fixed release",
       known={"fix_of": "hf-mistral-4.34.0-window", "ref": "https://github.com/huggingface/transformers/pull/26792",
              "title": "the band starts at past_key_values_length - sliding_window + 1"}),
    _e("xt-1.31.4-softclamp", "x-transformers Attention (logit soft-clamping)", "x-transformers", "1.31.4",
       "x_transformers", _XT_SOFTCLAMP, {"causal": True, "softcap": 30.0}, "causal, logits soft-clamped at 30",
       known={"bug": ["causal_no_future_leak"], "fixed_in": "xt-1.31.5-softclamp",
              "ref": "https://github.com/lucidrains/x-transformers/commit/907861187a1fa55fa2708e841845add0e78b67a8",
              "title": "softclamping of attention logits needs to happen before masking (1.31.5)",
              "what": "the soft clamp runs after the causal mask: a masked logit (-max float) becomes -30, so future keys get weight"}),
    _e("xt-1.31.5-softclamp", "x-transformers Attention (logit soft-clamping)", "x-transformers", "1.31.5",
       "x_transformers", _XT_SOFTCLAMP, {"causal": True, "softcap": 30.0}, "the fixed release",
       known={"fix_of": "xt-1.31.4-softclamp",
              "ref": "https://github.com/lucidrains/x-transformers/commit/907861187a1fa55fa2708e841845add0e78b67a8",
              "title": "soft clamp before masking"}),
    _e("mea-0.0.4-scale", "memory-efficient-attention-pytorch Attention", _MEA, "0.0.4",
       "memory_efficient_attention_pytorch", _MEA_PLAIN, {}, "bidirectional, plain path",
       known={"bug": ["scale_1_over_sqrt_dk"], "fixed_in": "mea-0.0.5-scale",
              "ref": "https://github.com/lucidrains/memory-efficient-attention-pytorch/commit/2b93d552c9a64bf406cd414d58bc8abb47d76b3f",
              "title": "fix bug with scale (0.0.5)",
              "what": "queries are scaled by dim_head^-0.5 twice (in Attention.forward and in attention()): logits / d_k"}),
    _e("mea-0.0.5-scale", "memory-efficient-attention-pytorch Attention", _MEA, "0.0.5",
       "memory_efficient_attention_pytorch", _MEA_PLAIN, {}, "the fixed release",
       known={"fix_of": "mea-0.0.4-scale",
              "ref": "https://github.com/lucidrains/memory-efficient-attention-pytorch/commit/2b93d552c9a64bf406cd414d58bc8abb47d76b3f",
              "title": "the scale applied once"}),
    _e("mea-0.0.12-chunk-max", "memory-efficient-attention-pytorch Attention (chunked)", _MEA, "0.0.12",
       "memory_efficient_attention_pytorch", _MEA_CHUNKED, {"causal": True, "dtype": "float32"},
       "memory_efficient=True, causal, 4 x 4 buckets",
       known={"bug": ["causal_no_future_leak"], "fixed_in": "mea-0.0.14-chunk-max",
              "ref": "https://github.com/lucidrains/memory-efficient-attention-pytorch/commit/9ecb55a2c9926d7aea1dfbbbe8ea18d49df7a29a",
              "title": "max for numerical stability should be taken after masking (0.0.14)",
              "what": "each chunk subtracts its row maximum taken before the causal mask: a large future logit "
                      "underflows the past keys' weights"},
       note="float32 probe: the chunked path divides by (sum + 1e-8), a relative 1e-8 that float64 tolerances would flag"),
    _e("mea-0.0.14-chunk-max", "memory-efficient-attention-pytorch Attention (chunked)", _MEA, "0.0.14",
       "memory_efficient_attention_pytorch", _MEA_CHUNKED, {"causal": True, "dtype": "float32"}, "the fixed release",
       known={"fix_of": "mea-0.0.12-chunk-max",
              "ref": "https://github.com/lucidrains/memory-efficient-attention-pytorch/commit/9ecb55a2c9926d7aea1dfbbbe8ea18d49df7a29a",
              "title": "the row maximum taken after masking"},
       note="float32 probe (see the bug release)"),
    _e("hf-qwen2-4.51.3-no-swa", "transformers Qwen2Model (eager, use_sliding_window=False)", "transformers", "4.51.3",
       "transformers", _HF_QWEN2_NO_SWA, {"causal": True, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"},
       "eager, use_sliding_window=False with sliding_window=4: the mask Qwen2Model builds, its one layer reduced to the attention",
       known={"bug": ["matches_reference"], "fixed_in": "hf-qwen2-4.52.0-no-swa",
              "ref": "https://github.com/huggingface/transformers/issues/38002",
              "title": "[bug] `use_sliding_window` doesn't work as expected (fixed in 4.52.0)",
              "what": "the causal mask applies config.sliding_window without reading use_sliding_window: "
                      "a model declared full-attention keeps only sliding_window keys"}),
    _e("hf-qwen2-4.52.0-no-swa", "transformers Qwen2Model (eager, use_sliding_window=False)", "transformers", "4.52.0",
       "transformers", _HF_QWEN2_NO_SWA, {"causal": True, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"},
       "the fixed release",
       known={"fix_of": "hf-qwen2-4.51.3-no-swa", "ref": "https://github.com/huggingface/transformers/issues/38002",
              "title": "the mask reads use_sliding_window"}),
    _e("vit-0.6.6-scale", "vit-pytorch Attention", "vit-pytorch", "0.6.6", "vit_pytorch", _VIT, {},
       "bidirectional, 4 heads of 8 (the ViT block's attention)",
       known={"bug": ["scale_1_over_sqrt_dk"], "fixed_in": "vit-0.6.7-scale",
              "ref": "https://github.com/lucidrains/vit-pytorch/issues/65",
              "title": "scale should be dim_head ** -0.5, not dim ** -0.5 (fixed in 0.6.7, commit 85314cf)",
              "what": "the logits are scaled by 1/√D (D = heads · dim_head) instead of 1/√d_k: off by √H"},
       note="found by an independent validation run of check attention on libraries outside the survey"),
    _e("vit-0.6.7-scale", "vit-pytorch Attention", "vit-pytorch", "0.6.7", "vit_pytorch", _VIT, {}, "the fixed release",
       known={"fix_of": "vit-0.6.6-scale", "ref": "https://github.com/lucidrains/vit-pytorch/commit/85314cf",
              "title": "fix scale to dim_head ** -0.5"}),
]
