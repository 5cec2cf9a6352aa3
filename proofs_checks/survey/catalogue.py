"""The survey's catalogue: real attention implementations, each a pinned release plus an adapter of
0–10 lines that presents it as ``(batch, T, D) -> (batch, T, D)`` (a ``make()`` factory, D = 32, tiny
configurations, no weights downloaded) and the structure it declares to ``tverify check attention``.

``known`` records what the library's history says about a release: a documented bug (with the
upstream fix) or the release that fixed it; the survey compares the checker's verdict with it.
``by_design`` names properties an approximation fails by construction (FAVOR+, linear attention are not
softmax attention): shown, not counted as findings."""

from __future__ import annotations

__all__ = ["Entry", "CATALOGUE", "get", "UnknownEntry"]

from proofs_checks.survey.entry import _PRE, HELPERS, Entry, _e  # noqa: E402,F401

_SDPA_CAUSAL = '''
class A(QKV):
    def forward(self, x):
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))
make = A
'''

_LOCAL = '''
from local_attention import LocalAttention
class A(QKV):
    def __init__(self):
        super().__init__()
        self.local = LocalAttention(window_size=4, causal=True, look_backward=1, look_forward=0, exact_windowsize=True, autopad=True, dropout=0.0)
    def forward(self, x):
        return self.merge(self.local(*self.split(x)))
make = A
'''

_ROTARY = '''
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
class A(QKV):
    def __init__(self):
        super().__init__()
        self.rot = RotaryEmbedding(dim=8)
    def forward(self, x):
        (q, k, v), f = self.split(x), self.rot(torch.arange(x.shape[1])).to(x.dtype)
        q, k = apply_rotary_emb(f, q), apply_rotary_emb(f, k)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))
make = A
'''

_XT_FLASH_MASK = '''
from x_transformers.x_transformers import Attention
def make():  # flash=True (PyTorch SDPA) with a padding mask that keeps every token
    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True, flash=True),
                call=lambda a, x: a(x, mask=torch.ones(x.shape[:2], dtype=torch.bool)))
'''

_LAT = '''
from linear_attention_transformer.linear_attention_transformer import SelfAttention
def make():
    return Wrap(SelfAttention(D, 4, causal=True, dim_head=8, blindspot_size=1, n_local_attn_heads=0))
'''

_LAT_EXTRA = ("axial-positional-embedding==0.2.1", "product-key-memory==0.1.10", "linformer==0.2.1",
              "local-attention==1.11.2")

_XT = "x-transformers"
_XTV = "2.31.10"
_HF = "5.23.0"


CATALOGUE: list[Entry] = [
    _e("torch-mha", "PyTorch nn.MultiheadAttention", "torch", None, "torch", '''
def make():
    return Wrap(nn.MultiheadAttention(D, 4, batch_first=True), call=lambda a, x: a(x, x, x, need_weights=False))
''', {}, "bidirectional, fused in_proj"),
    _e("torch-mha-causal", "PyTorch nn.MultiheadAttention", "torch", None, "torch", '''
def make():
    mask = lambda T: torch.ones(T, T, dtype=torch.bool).triu(1)
    return Wrap(nn.MultiheadAttention(D, 4, batch_first=True), call=lambda a, x: a(x, x, x, attn_mask=mask(x.shape[1]), need_weights=False))
''', {"causal": True}, "boolean causal attn_mask"),
    _e("torch-sdpa-causal", "PyTorch F.scaled_dot_product_attention", "torch", None, "torch", _SDPA_CAUSAL,
       {"causal": True}, "is_causal=True"),
    _e("xt-plain", "x-transformers Attention", _XT, _XTV, "x_transformers", '''
from x_transformers.x_transformers import Attention
def make():
    return Wrap(Attention(dim=D, heads=4, dim_head=8))
''', {"compute_dtype": "float32"}, "bidirectional; softmax in float32 (declared)"),
    _e("xt-causal", "x-transformers Attention", _XT, _XTV, "x_transformers", '''
from x_transformers.x_transformers import Attention
def make():
    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True))
''', {"causal": True, "compute_dtype": "float32"}, "causal; softmax in float32 (declared)"),
    _e("xt-gqa", "x-transformers Attention", _XT, _XTV, "x_transformers", '''
from x_transformers.x_transformers import Attention
def make():
    return Wrap(Attention(dim=D, heads=4, kv_heads=2, dim_head=8, causal=True))
''', {"causal": True, "kv_heads": 2, "compute_dtype": "float32"},
       "grouped-query, 2 key/value heads; softmax in float32 (declared)"),
    _e("xt-rope", "x-transformers Attention + RotaryEmbedding", _XT, _XTV, "x_transformers", '''
from x_transformers.x_transformers import Attention, RotaryEmbedding
class A(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn, self.rot, self.dim = Attention(dim=D, heads=4, dim_head=8, causal=True), RotaryEmbedding(8), D
    def forward(self, x):
        return self.attn(x, rotary_pos_emb=self.rot.forward_from_seq_len(x.shape[1]))
make = A
''', {"causal": True, "positional": "rope", "compute_dtype": "float32"},
       "rotary_pos_emb (what Decoder(rotary_pos_emb=True) passes), frequencies in float32"),
    _e("xt-softcap", "x-transformers Attention", _XT, _XTV, "x_transformers", '''
from x_transformers.x_transformers import Attention
def make():
    return Wrap(Attention(dim=D, heads=4, dim_head=8, causal=True, softclamp_logits=True, logit_softclamp_value=30.0))
''', {"causal": True, "softcap": 30.0, "compute_dtype": "float32"},
       "logit soft-capping 30; softmax in float32 (declared)"),
    _e("xt-1.16.11-flash-mask", "x-transformers Attention (flash, padding mask)", _XT, "1.16.11", "x_transformers",
       _XT_FLASH_MASK, {"causal": True}, "flash=True + causal + an all-keep padding mask",
       known={"bug": ["causal_no_future_leak"], "fixed_in": "xt-1.16.15-flash-mask",
              "ref": "https://github.com/lucidrains/x-transformers/commit/d731d82b99fbb3491b6a5f0d2012ea2f523411d8",
              "title": "fix masking logic for flash attention (1.16.12; completed in 1.16.15, commit d2e0700)",
              "what": "the flash path ORs the causal mask into a keep-mask, so with any padding mask every "
                      "query attends to every key"}),
    _e("xt-1.16.15-flash-mask", "x-transformers Attention (flash, padding mask)", _XT, "1.16.15", "x_transformers",
       _XT_FLASH_MASK, {"causal": True}, "the fixed release",
       known={"fix_of": "xt-1.16.11-flash-mask",
              "ref": "https://github.com/lucidrains/x-transformers/commit/d2e0700",
              "title": "just be consistent with masking convention"}),
    _e("local-attention", "local-attention LocalAttention", "local-attention", "1.11.2", "local_attention", _LOCAL,
       {"causal": True, "window": (4, 0)}, "causal window of 4 past keys (exact_windowsize)"),
    _e("local-attention-1.2.1", "local-attention LocalAttention", "local-attention", "1.2.1", "local_attention", _LOCAL,
       {"causal": True, "window": (4, 0)}, "exact_windowsize=True",
       known={"bug": ["causal_no_future_leak", "window_respected"], "fixed_in": "local-attention-1.2.2",
              "ref": "https://github.com/lucidrains/local-attention/commit/270adde5e1c68305dcbece5883d17d5b59c9f42f",
              "title": "fix exact window size masking (1.2.2)",
              "what": "causal mask AND window mask (`&` for `|`): with exact_windowsize nothing is masked"}),
    _e("local-attention-1.2.2", "local-attention LocalAttention", "local-attention", "1.2.2", "local_attention", _LOCAL,
       {"causal": True, "window": (4, 0)}, "the fixed release",
       known={"fix_of": "local-attention-1.2.1",
              "ref": "https://github.com/lucidrains/local-attention/commit/270adde5e1c68305dcbece5883d17d5b59c9f42f",
              "title": "fix exact window size masking"}),
    _e("performer", "performer-pytorch SelfAttention (FAVOR+)", "performer-pytorch", "1.1.4", "performer_pytorch", '''
from performer_pytorch import SelfAttention
def make():
    return Wrap(SelfAttention(dim=D, heads=4, dim_head=8, causal=True, nb_features=64))
''', {"causal": True}, "causal FAVOR+ (an approximation of softmax attention)",
       by_design=("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk"),
       note="the key stabiliser max is taken over the whole sequence, future keys included"),
    _e("linear-attention-0.16.0", "linear-attention-transformer SelfAttention", "linear-attention-transformer", "0.16.0",
       "linear_attention_transformer", _LAT, {"causal": True}, "causal linear attention", extra=_LAT_EXTRA,
       by_design=("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk"),
       known={"bug": ["causal_no_future_leak"], "fixed_in": "linear-attention-0.16.1",
              "ref": "https://github.com/lucidrains/linear-attention-transformer/commit/a0db8ba",
              "title": "fix leakage bug (0.16.1)",
              "what": "keys stabilised by their maximum over the whole sequence: future keys move past outputs"}),
    _e("linear-attention-0.16.1", "linear-attention-transformer SelfAttention", "linear-attention-transformer", "0.16.1",
       "linear_attention_transformer", _LAT, {"causal": True}, "the fixed release", extra=_LAT_EXTRA,
       by_design=("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk"),
       known={"fix_of": "linear-attention-0.16.0",
              "ref": "https://github.com/lucidrains/linear-attention-transformer/commit/a0db8ba",
              "title": "fix leakage bug"}),
    _e("linear-attention", "linear-attention-transformer SelfAttention", "linear-attention-transformer", "0.19.1",
       "linear_attention_transformer", _LAT, {"causal": True}, "causal linear attention, current release",
       extra=_LAT_EXTRA, by_design=("matches_reference", "gradients_match_reference", "scale_1_over_sqrt_dk")),
    _e("rotary-embedding", "rotary-embedding-torch + SDPA", "rotary-embedding-torch", "0.9.1", "rotary_embedding_torch",
       _ROTARY, {"causal": True, "positional": "rope", "compute_dtype": "float32"},
       "interleaved RoPE on every head dimension, frequencies in float32"),
    _e("rotary-embedding-0.0.11", "rotary-embedding-torch + SDPA", "rotary-embedding-torch", "0.0.11",
       "rotary_embedding_torch", _ROTARY, {"causal": True, "positional": "rope", "compute_dtype": "float32"},
       "interleaved RoPE",
       known={"bug": ["matches_reference"], "fixed_in": "rotary-embedding-0.0.12",
              "ref": "https://github.com/lucidrains/rotary-embedding-torch/commit/204cb02",
              "title": "fix bug in rotate half (0.0.12)",
              "what": "rotate_half splits interleaved pairs but concatenates halves: not a rotation"}),
    _e("rotary-embedding-0.0.12", "rotary-embedding-torch + SDPA", "rotary-embedding-torch", "0.0.12",
       "rotary_embedding_torch", _ROTARY, {"causal": True, "positional": "rope", "compute_dtype": "float32"},
       "the fixed release",
       known={"fix_of": "rotary-embedding-0.0.11",
              "ref": "https://github.com/lucidrains/rotary-embedding-torch/commit/204cb02", "title": "fix bug in rotate half"}),
    _e("hf-gpt2", "transformers GPT2Attention", "transformers", _HF, "transformers", '''
from transformers import GPT2Config
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention
def make():
    c = GPT2Config(n_embd=D, n_head=4, attn_pdrop=0.0, resid_pdrop=0.0); c._attn_implementation = "eager"
    m = lambda T, dt: torch.zeros(T, T, dtype=dt).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return Wrap(GPT2Attention(c), call=lambda a, x: a(x, attention_mask=m(x.shape[1], x.dtype)[None, None]))
''', {"causal": True}, "eager, the causal mask the model builds"),
    _e("hf-bert", "transformers BertSelfAttention", "transformers", _HF, "transformers", '''
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertSelfAttention
def make():
    return Wrap(BertSelfAttention(cfg(BertConfig, attention_probs_dropout_prob=0.0)))
''', {}, "bidirectional, no output projection", note="BertSelfAttention has no output projection (BertSelfOutput does)"),
    _e("hf-llama", "transformers LlamaAttention (RoPE, GQA)", "transformers", _HF, "transformers", '''
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
def make():
    c = cfg(LlamaConfig, num_key_value_heads=2, intermediate_size=64)
    m = lambda T, dt: torch.zeros(T, T, dtype=dt).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))[None, None]
    rot = LlamaRotaryEmbedding(c)
    return Wrap(LlamaAttention(c, 0), call=lambda a, x: a(x, rot(x, torch.arange(x.shape[1])[None]), m(x.shape[1], x.dtype)))
''', {"causal": True, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"},
       "eager, RoPE (cos, sin) from LlamaRotaryEmbedding, 2 key/value heads"),
    _e("hf-mistral-sliding", "transformers MistralAttention (sliding window)", "transformers", _HF, "transformers",
       '''
from transformers import MistralConfig
from transformers.models.mistral.modeling_mistral import MistralAttention, MistralRotaryEmbedding
from transformers.masking_utils import create_sliding_window_causal_mask
def make():
    c = cfg(MistralConfig, num_key_value_heads=2, intermediate_size=64, sliding_window=4)
    rot = MistralRotaryEmbedding(c)
    call = lambda a, x: a(x, rot(x, torch.arange(x.shape[1])[None]), create_sliding_window_causal_mask(c, x, None, None, torch.arange(x.shape[1])[None]))
    return Wrap(MistralAttention(c, 0), call=call)
''', {"causal": True, "window": 4, "positional": "rope", "kv_heads": 2, "compute_dtype": "float32"},
       "eager, sliding_window=4 with the mask transformers builds",
       note="RoPE cos/sin are float32 tables; at large logits (≈60) matches_reference sits near the precision-rule "
            "tolerance (1.01× for one draw of the weights, within it for another); the weights are now drawn from the "
            "survey's seed, so a run is reproducible"),
    _e("hopfield-layers", "hopfield-layers (ml-jku) Hopfield", "hopfield-layers", "1.0.2", "hflayers", '''
from hflayers import Hopfield
def make():
    return Wrap(Hopfield(input_size=D, num_heads=4, hidden_size=8, dropout=0.0))
''', {}, "Hopfield self-association (= attention)",
       note="not published on PyPI (installs only from git+https://github.com/ml-jku/hopfield-layers): the row shows the failed install",
       on_pypi=False),
]

from proofs_checks.survey.catalogue_bugs import ENTRIES as _BUGS  # noqa: E402
from proofs_checks.survey.catalogue_modern import ENTRIES as _MODERN  # noqa: E402

CATALOGUE += _MODERN + _BUGS
_BY_NAME = {e.name: e for e in CATALOGUE}
if len(_BY_NAME) != len(CATALOGUE):  # pragma: no cover - a catalogue edit
    raise RuntimeError("survey catalogue: two entries share a name")


class UnknownEntry(KeyError):
    pass


def get(name: str) -> Entry:
    try:
        return _BY_NAME[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(_BY_NAME), n=3)
        raise UnknownEntry(f"unknown survey entry {name!r}" + (f" (did you mean {', '.join(close)}?)" if close else "")
                           + "; tverify survey --list names them") from None
