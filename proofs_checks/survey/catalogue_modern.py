"""Survey entries for attention as written today: FlexAttention (torch's ``flex_attention`` with
attn-gym's score_mods and mask_mods), Keras 3 on the torch backend, timm, litgpt and Hugging Face
families beyond GPT-2/BERT/Llama/Mistral (OPT, Qwen2, Qwen3, Gemma 2/3, Phi-3, OLMo 2, GPT-NeoX,
Falcon).

Each adapter stays within 10 lines (the helpers ``Wrap``/``QKV``/``cfg`` of
:mod:`proofs_checks.survey.entry` are not counted); every entry was run with ``tverify survey NAME
--quick`` and its verdict is recorded in docs/survey.md, with what was left out and why (open_clip and
torchtune import torchvision, which does not import beside a CPU torch; torchtune also needs torchao;
Falcon's grouped fused qkv is misread by the checker's weight finder)."""

from __future__ import annotations

from proofs_checks.survey.entry import Entry, _e

_HF = "5.23.0"


def _hf(key: str, title: str, *rest, **k) -> Entry:
    """An entry for a transformers attention class (the pinned transformers version, module ``transformers``)."""
    return _e(key, title, "transformers", _HF, "transformers", *rest, **k)
_GYM = ("attn-gym", "0.0.17", "attn_gym")

# -- FlexAttention --------------------------------------------------------------------------------
# torch.nn.attention.flex_attention on CPU: the forward runs (eagerly); the backward raises
# NotImplementedError, which the checker reports as gradients "not available on this device".

_FLEX = '''
from torch.nn.attention.flex_attention import flex_attention, create_block_mask
{imp}
class A(QKV):
    def forward(self, x):
        T = x.shape[1]
        bm = {bm}
        return self.merge(flex_attention(*self.split(x), score_mod={sm}, block_mask=bm))
make = A
'''


def _flex(imp: str = "", bm: str = "None", sm: str = "None") -> str:
    return _FLEX.format(imp=imp, bm=bm, sm=sm)


# the block mask is built on the input's device (a mask on the CPU beside CUDA inputs is the adapter's bug, not
# the library's)
_CAUSAL_BM = 'create_block_mask(lambda b, h, q, k: q >= k, None, None, T, T, device=x.device)'

# -- timm ---------------------------------------------------------------------------------------------
# timm/__init__.py and timm/layers/__init__.py import torchvision (timm.layers.create_norm: FrozenBatchNorm2d),
# and torchvision from PyPI does not import beside a CPU build of torch ("operator torchvision::nms does not
# exist"). The attention modules themselves need only torch: the adapter registers the two packages without
# running their __init__, marks torchvision absent (timm.layers._fx's optional import then fails with the
# ImportError it expects, not the RuntimeError of a torchvision built for CUDA) and imports
# timm.layers.attention directly. The entry's import check (``module``) is therefore torch's; the pinned
# timm release is what is on sys.path (its version is still checked).
_TIMM = "1.0.31"
_TIMM_ADAPTER = '''
import sys, types, importlib.util
sys.modules["torchvision"] = None  # absent, not broken: timm.layers._fx then skips it (ImportError)
root = importlib.util.find_spec("timm").submodule_search_locations[0]  # the package, not imported
for n, p in (("timm", root), ("timm.layers", root + "/layers")):
    sys.modules[n] = types.ModuleType(n); sys.modules[n].__path__ = [p]
from timm.layers.attention import Attention, AttentionRope
{imp}
def make():
    return Wrap({ctor}{call})
'''
_TIMM_NOTE_SHORT = "timm's package __init__ needs torchvision: the adapter imports timm.layers.attention without it"
_TIMM_NOTE = ("timm/__init__ and timm/layers/__init__ import torchvision, which from PyPI does not import beside a "
              "CPU torch; the adapter imports timm.layers.attention without running them")


def _timm(ctor: str, imp: str = "", call: str = "") -> str:
    return _TIMM_ADAPTER.format(ctor=ctor, imp=imp, call=", " + call if call else "")


# -- litgpt -------------------------------------------------------------------------------------------
_LITGPT = "0.5.13"
_LITGPT_ADAPTER = '''
from litgpt.config import Config
from litgpt.model import CausalSelfAttention, build_rope_cache
def make():
    c = Config(n_embd=D, n_head=4, n_query_groups=2, n_layer=2, block_size=1024, bias=False, rotary_percentage=1.0{kw})
    rope = lambda x: [t[None].to(x) for t in build_rope_cache(x.shape[1], c.rope_n_elem, base=c.rope_base)]
    return Wrap(CausalSelfAttention(c, 1), call=lambda a, x: a(x, *rope(x)))
'''


def _litgpt(kw: str) -> str:
    return _LITGPT_ADAPTER.format(kw=kw)


# -- Hugging Face (eager attention, the causal mask the model builds) -------------------------------
_HF_ROPE = '''
from transformers import {cfgcls}
from transformers.models.{mod}.modeling_{mod} import {pre}Attention, {pre}RotaryEmbedding
from transformers.masking_utils import {maskfn}
def make():
    c = cfg({cfgcls}, {kw})
    rot, pos = {pre}RotaryEmbedding(c), lambda x: torch.arange(x.shape[1])[None]
    call = lambda a, x: a(x, rot(x, pos(x){rarg}), {maskfn}(c, x, None, None, pos(x)))
    return Wrap({pre}Attention(c, {layer}), call=call)
'''


def _hf_rope(cfgcls: str, mod: str, pre: str, kw: str, layer: int = 0, sliding: bool = False, rarg: str = "") -> str:
    maskfn = "create_sliding_window_causal_mask" if sliding else "create_causal_mask"
    return _HF_ROPE.format(cfgcls=cfgcls, mod=mod, pre=pre, kw=kw, layer=layer, maskfn=maskfn, rarg=rarg)


def _qwen3(implementation: str | None = None) -> str:
    """The Qwen3 attention layer's source (QK-norm, RoPE, 2 key/value heads), with ``attn_implementation`` set when
    given."""
    src = _hf_rope("Qwen3Config", "qwen3", "Qwen3", "num_key_value_heads=2, intermediate_size=64, head_dim=8")
    return src if implementation is None else src.replace(
        "    rot, pos", f"    c._attn_implementation = \"{implementation}\"\n    rot, pos")


_CAUSAL_MASK = ('m = lambda T, dt: torch.zeros(T, T, dtype=dt).masked_fill(torch.ones(T, T, dtype=torch.bool)'
                '.triu(1), float("-inf"))[None, None]')

_HF_DECL = {"causal": True, "positional": "rope", "compute_dtype": "float32"}

# Keras reads its backend when it is imported, and the survey's worker imports the entry's module
# before the adapter runs: the backend is set in the entry's process environment.
_KERAS = (("KERAS_BACKEND", "torch"),)
# The projections are EinsumDense layers (kernels (D, heads, d_k) and (heads, d_k, D)): the adapter
# gives them to the checker through a tverify_mapping() hook, in nn.Linear's (out, in) form.
_KERAS_ADAPTER = '''
import keras
class A(Wrap):
    def tverify_mapping(self):
        a, w = self.attn, lambda d: (d.kernel.value.reshape(D, -1).T, d.bias.value.reshape(-1))
        o = (a._output_dense.kernel.value.reshape(-1, D).T, a._output_dense.bias.value)
        return {{"q": w(a._query_dense), "k": w(a._key_dense), "v": w(a._value_dense), "o": o, "heads": 4, "kv_heads": {kv}}}
def make():  # built now (Keras builds on the first call): the hook reads the kernels
    a = keras.layers.{layer}, dtype="float64"); a.build((1, 1, D), (1, 1, D))
    return A(a, call=lambda a, x: {call})
'''
_KERAS_NOTE = ("a float64 layer computes its attention in float32 on the torch backend: backend.result_type maps "
               "float64 to float32 on every backend but TensorFlow ('aligned with JAX's default'), and "
               "ops.dot_product_attention casts q, k, v to it (hence --compute-dtype float32; matches_reference "
               "passes at the float32 rule; undeclared, precision_as_declared fails naming float32). "
               "dtype_and_device_preserved is not available as built: a Keras layer computes in its dtype policy "
               "(attn.dtype_policy = float64), which the checker's float32 copy (torch's .to()) does not convert, so "
               "EinsumDense raises 'expected scalar type Float but found Double' (skipped with that reason)")
_KERAS_ISSUE = {"url": "https://github.com/keras-team/keras/issues/23704",
                "title": "torch: float64 Dense returns float32 since #23225, and float64 handling on torch is inconsistent"}


def _keras(layer: str, call: str, kv: int = 4) -> str:
    return _KERAS_ADAPTER.format(layer=layer, call=call, kv=kv)


ENTRIES: list[Entry] = [
    # ---------------------------------------------------------------- FlexAttention (torch only)
    _e("flex-plain", "PyTorch FlexAttention", "torch", None, "torch", _flex(), {},
       "flex_attention without score_mod or block_mask (bidirectional), forward on CPU"),
    _e("flex-causal", "PyTorch FlexAttention", "torch", None, "torch", _flex(bm=_CAUSAL_BM), {"causal": True},
       "causal mask_mod (q >= k) through create_block_mask, forward on CPU"),
    _e("flex-causal-scoremod", "PyTorch FlexAttention", "torch", None, "torch",
       _flex(sm='lambda s, b, h, q, k: torch.where(q >= k, s, float("-inf"))'), {"causal": True},
       "causality written as a score_mod (−inf above the diagonal) instead of a mask_mod"),
    # ---------------------------------------------------------------- FlexAttention + attn-gym
    _e("attn-gym-causal", "attn-gym + FlexAttention", *_GYM,
       _flex("from attn_gym.masks import causal_mask",
             'create_block_mask(causal_mask, None, None, T, T, device="cpu")'),
       {"causal": True}, "attn-gym's causal_mask mask_mod"),
    _e("attn-gym-alibi", "attn-gym + FlexAttention", *_GYM,
       _flex("from attn_gym.mods import generate_alibi_bias\nfrom attn_gym.masks import causal_mask",
             'create_block_mask(causal_mask, None, None, T, T, device="cpu")', "generate_alibi_bias(4)"),
       {"causal": True, "positional": "alibi"}, "attn-gym's ALiBi score_mod (4 heads) with its causal_mask"),
    _e("attn-gym-softcap", "attn-gym + FlexAttention", *_GYM,
       _flex("from attn_gym.mods import generate_tanh_softcap\nfrom attn_gym.masks import causal_mask",
             'create_block_mask(causal_mask, None, None, T, T, device="cpu")', "generate_tanh_softcap(30)"),
       {"causal": True, "softcap": 30.0}, "attn-gym's tanh softcap score_mod (30, Gemma 2 / Grok-1 style), causal"),
    _e("attn-gym-sliding-window", "attn-gym + FlexAttention", *_GYM,
       _flex("from attn_gym.masks import generate_sliding_window",
             'create_block_mask(generate_sliding_window(4), None, None, T, T, device="cpu")'),
       {"causal": True, "window": (4, 0)},
       "attn-gym's generate_sliding_window(4): q − k ≤ 4 and causal, i.e. keys t−4 … t (5 keys)"),
    # ---------------------------------------------------------------- Hugging Face families
    _hf("hf-opt", "transformers OPTAttention", f'''
from transformers import OPTConfig
from transformers.models.opt.modeling_opt import OPTAttention
def make():
    c = cfg(OPTConfig, ffn_dim=64, enable_bias=True)
    {_CAUSAL_MASK}
    return Wrap(OPTAttention(c, 0), call=lambda a, x: a(x, attention_mask=m(x.shape[1], x.dtype)))
''', {"causal": True}, "eager, biased projections, q scaled before the product (scaling=1.0 in the kernel)"),
    _hf("hf-qwen2", "transformers Qwen2Attention (RoPE, GQA, qkv bias)",
       _hf_rope("Qwen2Config", "qwen2", "Qwen2", "num_key_value_heads=2, intermediate_size=64"),
       {**_HF_DECL, "kv_heads": 2}, "eager, q/k/v biases, 2 key/value heads, the causal mask transformers builds"),
    _hf("hf-qwen3", "transformers Qwen3Attention (QK-norm, RoPE, GQA)",
       _qwen3(),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms"},
       "eager, per-head RMSNorm on q and k before RoPE (q_norm/k_norm), 2 key/value heads"),
    _hf("hf-qwen3-sdpa", "transformers Qwen3Attention (SDPA)",
       _qwen3("sdpa"),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms"},
       "the SDPA path (transformers' default): the mask create_causal_mask returns for SDPA (None: is_causal), GQA"),
    _hf("hf-qwen3-flex", "transformers Qwen3Attention (flex_attention)",
       _qwen3("flex_attention"),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms", "dtype": "float32"},
       "attn_implementation='flex_attention': the BlockMask create_causal_mask builds, compiled FlexAttention on "
       "CPU (float32 probe: the compiled CPU kernel takes float32, float16, bfloat16 only)"),
    _e("hf-gemma2-sliding", "transformers Gemma2Attention (softcap, sliding layer)", "transformers", _HF,
       "transformers",
       _hf_rope("Gemma2Config", "gemma2", "Gemma2", "num_key_value_heads=2, intermediate_size=64, head_dim=8, "
                "query_pre_attn_scalar=8, sliding_window=4", layer=0, sliding=True),
       {**_HF_DECL, "kv_heads": 2, "softcap": 50.0, "window": 4},
       "layer 0 of the alternating pattern (sliding_attention, sliding_window=4), logit softcap 50",
       note="query_pre_attn_scalar is set to head_dim so that the scale is 1/√d_k (Gemma 2 checkpoints use 256)"),
    _e("hf-gemma2-global", "transformers Gemma2Attention (softcap, global layer)", "transformers", _HF,
       "transformers",
       _hf_rope("Gemma2Config", "gemma2", "Gemma2", "num_key_value_heads=2, intermediate_size=64, head_dim=8, "
                "query_pre_attn_scalar=8, sliding_window=4", layer=1),
       {**_HF_DECL, "kv_heads": 2, "softcap": 50.0},
       "layer 1 of the alternating pattern (full_attention), logit softcap 50",
       note="query_pre_attn_scalar is set to head_dim so that the scale is 1/√d_k (Gemma 2 checkpoints use 256)"),
    _hf("hf-gemma3", "transformers Gemma3Attention (QK-norm, sliding layer)",
       _hf_rope("Gemma3TextConfig", "gemma3", "Gemma3", "num_key_value_heads=2, intermediate_size=64, head_dim=8, "
                "query_pre_attn_scalar=8, sliding_window=4", layer=0, sliding=True, rarg=', "sliding_attention"'),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms", "window": 4},
       "layer 0 (sliding_attention, sliding_window=4), Gemma's RMSNorm (1 + weight) on q and k",
       note="query_pre_attn_scalar is set to head_dim so that the scale is 1/√d_k"),
    _hf("hf-gemma3-global", "transformers Gemma3Attention (QK-norm, global layer)",
       _hf_rope("Gemma3TextConfig", "gemma3", "Gemma3", "num_key_value_heads=2, intermediate_size=64, head_dim=8, "
                "query_pre_attn_scalar=8, sliding_window=4", layer=5, rarg=', "full_attention"'),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms", "rope_base": 1000000.0},
       "layer 5 of the 5:1 pattern (full_attention), RoPE base 10⁶ for global layers, QK-norm",
       note="query_pre_attn_scalar is set to head_dim so that the scale is 1/√d_k"),
    _hf("hf-phi3", "transformers Phi3Attention (fused qkv_proj)",
       _hf_rope("Phi3Config", "phi3", "Phi3", "num_key_value_heads=2, intermediate_size=64, pad_token_id=0"),
       {**_HF_DECL, "kv_heads": 2}, "eager, one fused qkv_proj (q, then k, then v rows), 2 key/value heads"),
    _hf("hf-olmo2", "transformers Olmo2Attention (QK-norm over the whole width)",
       _hf_rope("Olmo2Config", "olmo2", "Olmo2", "num_key_value_heads=2, intermediate_size=64"),
       {**_HF_DECL, "kv_heads": 2, "qk_norm": "rms"},
       "eager, RMSNorm over all heads' q (and all k) before the head split, 2 key/value heads"),
    _hf("hf-gpt-neox", "transformers GPTNeoXAttention (partial rotary)", f'''
from transformers import GPTNeoXConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXAttention, GPTNeoXRotaryEmbedding
def make():
    c = cfg(GPTNeoXConfig, intermediate_size=64, rotary_pct=0.5)
    rot = GPTNeoXRotaryEmbedding(c)
    {_CAUSAL_MASK}
    call = lambda a, x: a(x, m(x.shape[1], x.dtype), position_embeddings=rot(x, torch.arange(x.shape[1])[None]))
    return Wrap(GPTNeoXAttention(c, 0), call=call)
''',
       {**_HF_DECL, "rope_dims": 4},
       "eager, rotary_pct=0.5 → RoPE on 4 of the 8 head dimensions, fused query_key_value laid out per head"),
    _hf("hf-falcon-alibi", "transformers FalconAttention (ALiBi)", f'''
from transformers import FalconConfig
from transformers.models.falcon.modeling_falcon import FalconAttention, build_alibi_tensor
def make():
    c = cfg(FalconConfig, alibi=True, multi_query=False, new_decoder_architecture=False, bias=False, hidden_dropout=0.0)
    {_CAUSAL_MASK}
    al = lambda x: build_alibi_tensor(torch.ones(x.shape[:2]), 4, x.dtype)
    return Wrap(FalconAttention(c, 0), call=lambda a, x: a(x, al(x), m(x.shape[1], x.dtype)))
''', {"causal": True, "positional": "alibi"}, "eager, ALiBi from build_alibi_tensor (Falcon-RW layout)",
       note="Falcon adds the ALiBi bias to q·kᵀ and then multiplies the sum by 1/√d_k (attention_logits *= "
            "inv_norm_factor): its slopes are Press et al.'s divided by √d_k (verified: the output equals softmax "
            "attention with slopes/√8 to 1e-16). The Falcon-RW checkpoints were trained that way, so this is the "
            "model's definition, not a bug in the port; ports to other runtimes had to copy it",
       issue={"url": "https://github.com/OpenNMT/CTranslate2/pull/1449",
              "title": "Implement converter for FalconConfig: scale_alibi, 'apply the dot product scale factor to ALiBi'"}),
    _hf("hf-falcon-gqa", "transformers FalconAttention (RoPE, grouped fused qkv)",
       f'''
from transformers import FalconConfig
from transformers.models.falcon.modeling_falcon import FalconAttention, FalconRotaryEmbedding
def make():
    c = cfg(FalconConfig, alibi=False, new_decoder_architecture=True, num_kv_heads=2, bias=False, hidden_dropout=0.0)
    rot = FalconRotaryEmbedding(c)
    {_CAUSAL_MASK}
    call = lambda a, x: a(x, None, m(x.shape[1], x.dtype), position_embeddings=rot(x, torch.arange(x.shape[1])[None]))
    return Wrap(FalconAttention(c, 0), call=call)
''', {**_HF_DECL, "kv_heads": 2}, "eager, new_decoder_architecture: query_key_value grouped per key/value head "
       "[q_1 … q_g; k; v]"),
    # ---------------------------------------------------------------- Keras 3 on the torch backend
    _e("keras-mha", "Keras 3 MultiHeadAttention (torch backend)", "keras", "3.15.1", "keras",
       _keras("MultiHeadAttention(num_heads=4, key_dim=8", "a(x, x)"), {"compute_dtype": "float32"},
       "bidirectional, EinsumDense projections with biases, dtype policy float64", env=_KERAS, note=_KERAS_NOTE, issue=_KERAS_ISSUE),
    _e("keras-mha-causal", "Keras 3 MultiHeadAttention (torch backend)", "keras", "3.15.1", "keras",
       _keras("MultiHeadAttention(num_heads=4, key_dim=8", "a(x, x, use_causal_mask=True)"),
       {"causal": True, "compute_dtype": "float32"}, "use_causal_mask=True, dtype policy float64", env=_KERAS,
       note=_KERAS_NOTE, issue=_KERAS_ISSUE),
    _e("keras-gqa", "Keras 3 GroupQueryAttention (torch backend)", "keras", "3.15.1", "keras",
       _keras("GroupQueryAttention(head_dim=8, num_query_heads=4, num_key_value_heads=2", "a(x, x, use_causal_mask=True)",
              kv=2),
       {"causal": True, "kv_heads": 2, "kv_grouping": "hf", "compute_dtype": "float32"},
       "4 query heads sharing 2 key/value heads (repeat_interleave: query head h uses h // 2), use_causal_mask=True",
       env=_KERAS, note=_KERAS_NOTE, issue=_KERAS_ISSUE),
    # ---------------------------------------------------------------- timm (timm.layers.attention)
    _e("timm-vit", "timm Attention (ViT)", "timm", _TIMM, "torch", _timm("Attention(D, num_heads=4, qkv_bias=True)"), {},
       "ViT attention: fused qkv with bias, bidirectional", note=_TIMM_NOTE),
    _e("timm-vit-qknorm", "timm Attention (ViT, qk_norm)", "timm", _TIMM, "torch",
       _timm("Attention(D, num_heads=4, qkv_bias=True, qk_norm=True, norm_layer=nn.LayerNorm)"), {"qk_norm": "layer"},
       "qk_norm=True: LayerNorm on each head's q and k (q_norm/k_norm)", note=_TIMM_NOTE),
    _e("timm-rope-column", "timm AttentionRope + RotaryEmbeddingCat (EVA, 2-D RoPE)", "timm", _TIMM, "torch", _timm(
        "AttentionRope(D, num_heads=4, num_prefix_tokens=0)",
        "from timm.layers.pos_embed_sincos import RotaryEmbeddingCat",
        "call=lambda a, x: a(x, rope=RotaryEmbeddingCat(8, in_pixels=False).get_embed([x.shape[1], 1]).to(x))"),
       {"positional": "rope", "rope_dims": 4, "rope_convention": "interleaved", "compute_dtype": "float32"},
       "EVA-style attention with timm's 2-D RoPE on a T × 1 patch grid (one column of patches)",
       note="2-D RoPE cannot be declared (the checker's RoPE is 1-D). On a T × 1 grid the x axis is 0 everywhere, "
            "so timm's RotaryEmbeddingCat rotates the first half of each head (the y bands 1, 1/100, interleaved "
            "pairs) by the row index and leaves the second half unrotated: 1-D RoPE on 4 of 8 dimensions with base "
            "10000, which can be declared. A general H × W grid is not checked. " + _TIMM_NOTE_SHORT),
    # ---------------------------------------------------------------- litgpt
    _e("litgpt-gqa-rope", "litgpt CausalSelfAttention (GQA, RoPE)", "litgpt", _LITGPT, "litgpt", _litgpt(""),
       {"causal": True, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"},
       "fused qkv (q heads, then k and v groups), 2 query groups, RoPE from build_rope_cache, SDPA is_causal"),
    _e("litgpt-softcap-sliding", "litgpt CausalSelfAttention (softcap, sliding window)", "litgpt", _LITGPT, "litgpt",
       _litgpt(", attention_logit_softcapping=50.0, sliding_window_size=4, sliding_window_indices=[0, 1]"),
       {"causal": True, "positional": "rope", "kv_heads": 2, "softcap": 50.0, "window": 4, "compute_dtype": "float32"},
       "Gemma-2-style block: logit softcap 50 then the mask, sliding_window_size=4 (keys i−3 … i)"),
    _e("litgpt-qknorm", "litgpt CausalSelfAttention (QK-norm)", "litgpt", _LITGPT, "litgpt",
       _litgpt(", norm_qk=True, norm_class_name='RMSNorm'"),
       {"causal": True, "positional": "rope", "kv_heads": 2, "qk_norm": "rms", "compute_dtype": "float32"},
       "norm_qk=True: RMSNorm per head on q and k (norm_q/norm_k) before RoPE"),
]
