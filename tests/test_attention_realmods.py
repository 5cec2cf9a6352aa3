"""Real modules the survey had not seen, tried as an independent tester (issue 42): each finding is
reproduced by a small hand-written module with the library's behaviour, and checked against the real
library where it is installed (integration tests, skipped cleanly otherwise).

* a declared ``--scale`` equal to the module's ``scaling`` (Granite's ``attention_multiplier``, T5's
  unscaled logits) is said to agree, not "will name it";
* OLMo's ``config.clip_qkv`` is said (the reference does not clamp);
* one key/value head (GPTBigCode's multi-query attention): no grouping is tried or named, so a float32
  softmax is named as the precision, not as ``--kv-grouping tiled``;
* a learned relative position bias (T5) is out of scope: inconclusive, never a mismatch;
* a hint that contradicts the module's own ``is_causal`` gives flags that really declare it
  (``--ignore-config``: no flag declares a module not causal);
* a head count read from a model-wide config that the layer's weights cannot split (Whisper's
  ``num_key_value_heads``, the encoder's heads) is evidence said and not used.
"""

from __future__ import annotations

import importlib.util
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from numerics.attention_reference import Mapping, Structure, reference_attention
from proofs_checks.sanity.attention import run_attention

LENGTHS = "1,5,17"


def run(obj, **kw):
    kw.setdefault("seq_len", LENGTHS)
    kw.setdefault("mode", "quick")
    torch.manual_seed(0)
    return run_attention(obj, **kw)


class Attn(nn.Module):
    """Softmax attention on its own projections under ``st`` (4 heads of 4, D = 16), with a config."""

    def __init__(self, st: Structure, config=None, dim=16, kv_heads=4, **attrs):
        super().__init__()
        self.dim, self.st, self._kv = dim, st, kv_heads
        if config is not None:
            self.config = config
        for k, v in attrs.items():
            setattr(self, k, v)
        d = dim // 4
        self.q_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.k_proj, self.v_proj = nn.Linear(dim, kv_heads * d), nn.Linear(dim, kv_heads * d)

    def mapping(self) -> Mapping:
        return Mapping(self.q_proj.weight, self.q_proj.bias, self.k_proj.weight, self.k_proj.bias, self.v_proj.weight,
                       self.v_proj.bias, self.o_proj.weight, self.o_proj.bias, 4, "own", kv_heads=self._kv)

    def forward(self, x):
        return reference_attention(x, self.mapping(), self.st, x.dtype)


def test_a_declared_scale_equal_to_the_modules_scaling_is_said_to_agree():
    m = Attn(Structure(causal=True, scale=0.3), SimpleNamespace(head_dim=4), scaling=0.3, is_causal=True)
    r = run(m, scale=0.3)
    assert r.outcome == "ok", r.verdict.summary
    assert "note: scaling = 0.3 (not 1/√d_k = 0.5): as declared by --scale" in r.lines, r.lines
    assert not any("will name it" in ln for ln in r.lines)
    r = run(m, scale=0.25)
    assert r.outcome == "mismatch" and any("differs from --scale 0.25, which the check uses" in ln for ln in r.lines)
    r = run(m)  # undeclared: the scale is said, scale_1_over_sqrt_dk names it, and a verified hint declares it
    assert r.outcome == "mismatch" and any("will name it" in ln for ln in r.lines), r.lines
    assert "the module matches the reference with --scale 0.3 instead of the declaration" in r.verdict.suggestion
    assert "(verified: with it, every probed length matches)" in r.verdict.suggestion


class Clipped(Attn):
    """OLMo's ``clip_qkv``: q, k, v clamped before attention."""

    def forward(self, x):
        c = self.config.clip_qkv  # a clamp after each projection, as OLMo's forward
        q = (x @ self.q_proj.weight.T + self.q_proj.bias).clamp(-c, c)
        k = (x @ self.k_proj.weight.T + self.k_proj.bias).clamp(-c, c)
        v = (x @ self.v_proj.weight.T + self.v_proj.bias).clamp(-c, c)
        B, T, D = x.shape
        q, k, v = (t.view(B, T, 4, 4).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_clip_qkv_is_said_beside_the_mismatch_it_causes():
    r = run(Clipped(Structure(causal=True), SimpleNamespace(clip_qkv=0.05), is_causal=True))
    assert r.outcome == "mismatch" and "matches_reference" in r.failed, r.verdict.summary
    assert any(ln.startswith("note: config.clip_qkv = 0.05: the module clamps q, k and v to ±0.05") for ln in r.lines)


class ClippedOwn(Clipped):
    """DBRX's layout: ``clip_qkv`` is the layer's own attribute (its config keeps it in ``attn_config``)."""

    @property
    def clip_qkv(self):
        return self.config.clip_qkv


def test_clip_qkv_on_the_module_itself_is_said_dbrx():
    r = run(ClippedOwn(Structure(causal=True), SimpleNamespace(clip_qkv=0.05), is_causal=True))
    assert r.outcome == "mismatch" and "matches_reference" in r.failed, r.verdict.summary
    assert any(ln.startswith("note: clip_qkv = 0.05: the module clamps q, k and v to ±0.05") for ln in r.lines), r.lines


class Sinks(Attn):
    """GPT-OSS's attention sinks: one learned logit per head joins each row's softmax, then is dropped."""

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, 4, 4).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        s = torch.cat([s, self.sinks.view(1, 4, 1, 1).expand(B, 4, T, 1).to(s.dtype)], -1).softmax(-1)[..., :-1]
        return self.o_proj((s @ v).transpose(1, 2).reshape(B, T, D))


def test_attention_sinks_are_said_beside_the_mismatch_they_cause_gpt_oss():
    m = Sinks(Structure(causal=True), SimpleNamespace(num_attention_heads=4), is_causal=True)
    m.sinks = nn.Parameter(torch.zeros(4))
    r = run(m)
    assert r.outcome == "mismatch" and "matches_reference" in r.failed, r.verdict.summary
    assert any(ln.startswith("note: sinks (4 values): read as attention sinks, as GPT-OSS's") for ln in r.lines), r.lines
    with torch.no_grad():
        m.sinks.fill_(-1e4)  # exp(sink) negligible: the same module computes plain attention, and the note stays
    r = run(m)
    assert r.outcome == "ok" and any(ln.startswith("note: sinks") for ln in r.lines), r.verdict.summary
    plain = Attn(Structure(causal=True), SimpleNamespace(num_attention_heads=4), is_causal=True)
    assert not any(ln.startswith("note: sinks") for ln in run(plain).lines)


class MultiQueryFloat32Softmax(nn.Module):
    """GPTBigCode's multi-query attention (one key/value head in a fused ``c_attn``), softmax in float32."""

    def __init__(self, dim=16):
        super().__init__()
        self.dim, self.num_heads, self.is_causal = dim, 4, True
        self.c_attn, self.c_proj = nn.Linear(dim, dim + 2 * 4), nn.Linear(dim, dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split([D, 4, 4], -1)
        q = q.view(B, T, 4, 4).transpose(1, 2)
        s = (q @ k[:, None].transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        w = s.float().softmax(-1).to(x.dtype)
        return self.c_proj((w @ v[:, None]).transpose(1, 2).reshape(B, T, D))


def test_one_key_value_head_tries_no_grouping_and_names_the_precision():
    r = run(MultiQueryFloat32Softmax(), causal=True)
    assert r.outcome == "mismatch", r.verdict.summary
    assert "precision_as_declared (it computes in float32, not float64)" in r.verdict.summary
    assert "kv-grouping" not in (r.verdict.suggestion or "") + " ".join(r.lines), r.lines
    assert "key/value grouping: one key/value head shared by all 4 query heads (multi-query attention)" in r.lines
    assert run(MultiQueryFloat32Softmax(), causal=True, compute_dtype="float32").outcome == "ok"


class RelativeBias(Attn):
    """T5's learned relative position bias (buckets of t − s), unscaled logits."""

    def __init__(self):
        super().__init__(Structure(scale=1.0))
        self.relative_attention_bias = nn.Embedding(8, 4)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, 4, 4).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        rel = (torch.arange(T)[None] - torch.arange(T)[:, None]).clamp(-4, 3) + 4
        bias = self.relative_attention_bias(rel).permute(2, 0, 1).to(x.dtype)
        return self.o_proj(((q @ k.transpose(-1, -2) + bias).softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_a_relative_position_bias_is_out_of_scope_inconclusive_never_a_mismatch():
    r = run(RelativeBias(), scale=1.0)
    by = {p["name"]: p for p in r.doc["properties"]}
    assert r.outcome == "inconclusive", r.verdict.summary
    assert "relative position bias" in by["matches_reference"]["detail"]
    assert by["permutation_equivariance"]["status"] == "skip", by["permutation_equivariance"]
    assert "relative position bias is out of its scope" in (r.verdict.suggestion or ""), r.verdict.suggestion


class SaysCausalIsNot(Attn):
    """A layer with ``is_causal = True`` that applies no mask itself (a Hugging Face layer on the
    eager path called without the mask its model builds): bidirectional as called."""

    def __init__(self):
        super().__init__(Structure(causal=False), is_causal=True)


def test_a_hint_against_the_modules_own_is_causal_gives_flags_that_declare_it():
    r = run(SaysCausalIsNot())
    assert r.outcome == "mismatch" and "causal_no_future_leak" in r.failed, r.verdict.summary
    hint = r.verdict.suggestion or ""
    assert "not causal" in hint and "is_causal = True says otherwise" in hint, hint
    assert hint.rstrip().endswith("--ignore-config"), hint
    assert run(SaysCausalIsNot(), heads=4, ignore_config=True).outcome == "ok"


# -- the real libraries ------------------------------------------------------------------------------

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers is not installed")


def _causal(T, dtype):
    return torch.zeros(T, T, dtype=dtype).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)[None, None]


class Wrap(nn.Module):
    def __init__(self, attn, call, dim=32):
        super().__init__()
        self.attn, self.call, self.dim = attn, call, dim

    def forward(self, x):
        o = self.call(self.attn, x)
        return o[0] if isinstance(o, tuple) else o


@pytest.mark.integration(reason="real transformers modules (the [ecosystem] extra, installed by .ci/run only)")
@needs_transformers
def test_real_transformers_gpt_bigcode_t5_and_whisper():
    from transformers import GPTBigCodeConfig, T5Config, WhisperConfig
    from transformers.models.gpt_bigcode.modeling_gpt_bigcode import GPTBigCodeAttention
    from transformers.models.t5.modeling_t5 import T5Attention
    from transformers.models.whisper.modeling_whisper import WhisperAttention

    c = GPTBigCodeConfig(n_embd=32, n_head=4, multi_query=True, attn_pdrop=0.0, resid_pdrop=0.0)
    c._attn_implementation = "eager"
    big = Wrap(GPTBigCodeAttention(c, layer_idx=0), lambda a, x: a(x, attention_mask=_causal(x.shape[1], x.dtype)))
    r = run(big, causal=True)
    assert r.outcome == "mismatch" and "precision_as_declared (it computes in float32" in r.verdict.summary
    assert "kv-grouping" not in (r.verdict.suggestion or "")
    assert run(big, causal=True, compute_dtype="float32").outcome == "ok"

    t5 = Wrap(T5Attention(T5Config(d_model=32, d_kv=8, num_heads=4, dropout_rate=0.0), has_relative_attention_bias=True,
                          layer_idx=0), lambda a, x: a(x))
    r = run(t5, scale=1.0)
    assert r.outcome == "inconclusive", r.verdict.summary

    wc = WhisperConfig(d_model=32, encoder_attention_heads=6, decoder_attention_heads=4)
    wc._attn_implementation = "sdpa"  # SDPA: is_causal without a mask
    dec = Wrap(WhisperAttention(32, 4, dropout=0.0, is_decoder=True, is_causal=True, config=wc, layer_idx=0),
               lambda a, x: a(x))
    r = run(dec)
    assert r.outcome == "ok", r.verdict.summary
    assert any("num_key_value_heads = 6" in ln and "not used" in ln for ln in r.lines), r.lines


@pytest.mark.integration(reason="real transformers modules (the [ecosystem] extra, installed by .ci/run only)")
@needs_transformers
def test_real_transformers_granite_scale_and_olmo_clip():
    from transformers import GraniteConfig, OlmoConfig
    from transformers.masking_utils import create_causal_mask
    from transformers.models.granite.modeling_granite import GraniteAttention, GraniteRotaryEmbedding
    from transformers.models.olmo.modeling_olmo import OlmoAttention, OlmoRotaryEmbedding

    def rope(cfgcls, attn, rot, **kw):
        c = cfgcls(hidden_size=32, num_attention_heads=4, attention_dropout=0.0, **kw)
        c._attn_implementation = "eager"
        r_, pos = rot(c), (lambda x: torch.arange(x.shape[1])[None])
        return Wrap(attn(c, 0), lambda a, x: a(x, position_embeddings=r_(x, pos(x)),
                                               attention_mask=create_causal_mask(c, x, None, None, pos(x))))

    g = rope(GraniteConfig, GraniteAttention, GraniteRotaryEmbedding, attention_multiplier=0.3, num_key_value_heads=2)
    r = run(g, positional="rope", compute_dtype="float32", scale=0.3)
    assert r.outcome == "ok", r.verdict.summary
    assert "note: attn.scaling = 0.3 (not 1/√d_k = 0.353553): as declared by --scale" in r.lines
    o = rope(OlmoConfig, OlmoAttention, OlmoRotaryEmbedding, clip_qkv=0.5)
    r = run(o, positional="rope", compute_dtype="float32")
    assert r.outcome == "mismatch" and any("clip_qkv = 0.5" in ln for ln in r.lines), r.lines


class PerHeadLayerNorm(nn.Module):
    """StableLM's ``LayerNormPerHead``: one LayerNorm over d_k per head, in a ``ModuleList``."""

    def __init__(self, d=4, heads=4):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(d, eps=1e-5, bias=False) for _ in range(heads)])
        with torch.no_grad():
            for i, n in enumerate(self.norms):
                n.weight.copy_(torch.linspace(0.5, 1.5, d) * (i + 1))

    def forward(self, x):  # (batch, heads, T, d)
        return torch.cat([n(h) for n, h in zip(self.norms, torch.split(x, 1, dim=1))], dim=1)


class QKPerHeadNorm(Attn):
    def __init__(self):
        super().__init__(Structure(causal=True), is_causal=True)
        self.q_layernorm, self.k_layernorm = PerHeadLayerNorm(), PerHeadLayerNorm()

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, 4, 4).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = self.q_layernorm(q), self.k_layernorm(k)
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_per_head_norms_in_a_module_list_are_read_per_head():
    r = run(QKPerHeadNorm())
    assert r.outcome == "ok", r.verdict.summary
    assert any("qk_norm layer" in ln and "per head (4 × 4 weight)" in ln for ln in r.doc["config_read"]), r.doc


@pytest.mark.integration(reason="real transformers modules (the [ecosystem] extra, installed by .ci/run only)")
@needs_transformers
def test_real_transformers_stablelm_per_head_qk_layernorm():
    from transformers import StableLmConfig
    from transformers.masking_utils import create_causal_mask
    from transformers.models.stablelm.modeling_stablelm import StableLmAttention, StableLmRotaryEmbedding

    c = StableLmConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, qk_layernorm=True,
                       attention_dropout=0.0)
    c._attn_implementation = "eager"
    a = StableLmAttention(c, 0)
    with torch.no_grad():  # distinct weights per head, so that a shared or misplaced norm shows
        for i, n in enumerate(list(a.q_layernorm.norms) + list(a.k_layernorm.norms)):
            n.weight.copy_(torch.linspace(0.5, 1.5, 8) * (1 + i % 4))
    rot, pos = StableLmRotaryEmbedding(c), (lambda x: torch.arange(x.shape[1])[None])
    m = Wrap(a, lambda a, x: a(x, position_embeddings=rot(x, pos(x)),
                               attention_mask=create_causal_mask(c, x, None, None, pos(x))))
    r = run(m, positional="rope", compute_dtype="float32")
    assert r.outcome == "ok", r.verdict.summary


class Band(nn.Module):
    """Bidirectional banded attention: query t reads keys t − L … t + R."""

    def __init__(self, L=2, R=1):
        super().__init__()
        self.dim, self.L, self.R = 16, L, R
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        i = torch.arange(x.shape[1])
        bad = (i[None] < i[:, None] - self.L) | (i[None] > i[:, None] + self.R)
        return self.mha(x, x, x, attn_mask=bad, need_weights=False)[0]


def test_a_window_declared_for_a_bidirectional_module_is_measured_and_said():
    r = run(Band(), window=(2, 1))
    note = [ln for ln in r.lines if ln.startswith("note: window:")]
    assert r.outcome == "ok" and note, r.lines
    assert "declared keys t−2 … t+1; the module reads keys t−2 … t+1 as measured" in note[0], note
    r = run(Band(3, 1), window=(2, 1))
    note = [ln for ln in r.lines if ln.startswith("note: window:")]
    assert r.outcome == "mismatch" and "window_respected" in r.failed
    assert "the module reads keys t−3 … t+1 as measured: redrawing token t+k moves output t for −3 ≤ k ≤ 1" in note[0]


class IdentityThenLinear(nn.Module):
    """ring-attention-pytorch's ``to_qkv = Sequential(Identity, Linear)`` (``prenorm=False``): the
    switched-off norm is an identity, the projection is the Linear after it; causal, tiled groups."""

    def __init__(self):
        super().__init__()
        self.dim = 16
        self.to_qkv = nn.Sequential(nn.Identity(), nn.Linear(16, 16 + 2 * 8, bias=False))
        self.to_out = nn.Linear(16, 16, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.to_qkv(x).split([16, 8, 8], -1)
        q = q.view(B, T, 4, 4).transpose(1, 2)
        k, v = (t.view(B, T, 2, 4).transpose(1, 2).repeat(1, 2, 1, 1) for t in (k, v))  # head h uses h % 2
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.to_out((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_a_projection_after_an_identity_in_a_sequential_is_found():
    r = run(IdentityThenLinear(), causal=True)
    assert r.outcome == "ok", r.verdict.summary
    assert any(ln.startswith("weights: found by name: .to_qkv[1] (nn.Linear)[q]") for ln in r.lines), r.lines
    assert any("tiled" in ln for ln in r.lines if ln.startswith("key/value grouping"))


@pytest.mark.integration(reason="a real ring-attention-pytorch module (the [ecosystem] extra, installed by .ci/run only)")
@pytest.mark.skipif(importlib.util.find_spec("ring_attention_pytorch") is None,
                    reason="ring-attention-pytorch is not installed")
def test_real_ring_attention_pytorch():
    from ring_attention_pytorch import RingAttention

    m = RingAttention(32, dim_head=8, heads=4, num_grouped_query_heads=2, causal=True, bucket_size=4, prenorm=False)
    r = run(m, causal=True, dtype="float32")
    by = {p["name"]: p for p in r.doc["properties"]}
    assert by["matches_reference"]["status"] == "pass" and by["causal_no_future_leak"]["status"] == "pass", r.lines
    # its chunked kernel fills a float32 buffer with float64's most negative value: float64 raises (a finding)
    assert r.failed == ["dtype_and_device_preserved"], r.verdict.summary
    assert "without overflow" in by["dtype_and_device_preserved"]["detail"]


def test_a_bidirectional_layers_sliding_window_is_read_on_both_sides():
    # ModernBERT's local layers (transformers ≥ 5): is_causal False, their own sliding_window = W + 1 where
    # the model's mask keeps |q − k| ≤ config.sliding_window = W; it was read as a causal window (a correct
    # module: mismatch, "LEAK" on window_respected)
    from proofs_checks.sanity._libsemantics import Library, hf_window
    from proofs_checks.sanity._modconfig import read_module_config

    lib = Library("transformers", "5.23.0")
    assert hf_window("modernbert", 5, lib, "eager", causal=False, own=True).span == (4, 4)
    assert hf_window("modernbert", 4, lib, "eager", causal=False).span == (4, 4)
    assert hf_window("modernbert", 5, Library("transformers", "4.57.1"), "eager", causal=False) is None
    assert hf_window("mistral", 4, lib, "eager", causal=True).span == (3, 0)  # causal layers as before
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("the library release is read from the installed transformers")

    Local = type("ModernBertAttention", (nn.Module,), {"__module__": "transformers.models.modernbert.standin"})
    m = Local()
    m.config, m.is_causal, m.sliding_window = SimpleNamespace(model_type="modernbert", sliding_window=4), False, 5
    it = read_module_config(m).items["window"]
    assert it.span == (4, 4) and "keys t−4 … t+4" in it.meaning, it


@pytest.mark.integration(reason="real transformers modules (the [ecosystem] extra, installed by .ci/run only)")
@needs_transformers
def test_real_transformers_modernbert_local_layer_is_ok_with_its_window_read():
    from transformers import ModernBertConfig
    from transformers.masking_utils import create_bidirectional_sliding_window_mask
    from transformers.models.modernbert.modeling_modernbert import ModernBertAttention, ModernBertRotaryEmbedding

    c = ModernBertConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=3,
                         local_attention=8, global_attn_every_n_layers=3, attention_dropout=0.0)
    c._attn_implementation = "eager"
    rot, pos = ModernBertRotaryEmbedding(c), (lambda x: torch.arange(x.shape[1])[None])
    m = Wrap(ModernBertAttention(c, 1), lambda a, x: a(
        x, position_embeddings=rot(x, pos(x), "sliding_attention"),
        attention_mask=create_bidirectional_sliding_window_mask(config=c, inputs_embeds=x,
                                                                attention_mask=torch.ones(x.shape[:2], dtype=torch.long))))
    r = run(m, positional="rope", compute_dtype="float32")
    assert r.outcome == "ok", r.verdict.summary
    assert any("the module reads keys t−4 … t+4 as measured" in ln for ln in r.lines), r.lines


class UnmappedLengthRounding(nn.Module):
    """Causal attention on projections under names no rule knows (DeepSeek's MLA: kv_a_proj_with_mqa,
    kv_b_proj), whose outputs move by a rounding-level 1e-9·T with the length (RoPE tables computed per
    length in float32 do that)."""

    def __init__(self):
        super().__init__()
        self.dim, self.num_heads = 16, 2
        self.mixer_a, self.mixer_b = nn.Linear(16, 48, bias=False), nn.Linear(16, 16, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (t.view(B, T, 2, 8).transpose(1, 2) for t in self.mixer_a(x).split(16, -1))
        s = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.mixer_b((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)) * (1 + 1e-9 * T)


def test_unmapped_weights_are_judged_at_the_declared_precision():
    # no weights mapped: no reference ran to set the working precision, and prefix_consistency was judged
    # at float64 though --compute-dtype float32 was declared (DeepSeek V3's MLA: a false mismatch)
    r = run(UnmappedLengthRounding(), causal=True, compute_dtype="float32")
    by = {p["name"]: p for p in r.doc["properties"]}
    assert by["prefix_consistency"]["status"] == "pass", by["prefix_consistency"]
    assert r.outcome == "inconclusive", r.verdict.summary
    r = run(UnmappedLengthRounding(), causal=True)  # undeclared: the input's precision, float64
    assert r.outcome == "mismatch" and "prefix_consistency" in r.failed, r.verdict.summary


class Float32Inside(Attn):
    """A float64 module that computes in float32 (Jamba's and GPT-Neo's eager paths for float64 input)."""

    def forward(self, x):
        m = self.mapping()
        m32 = Mapping(*(t.float() for t in (m.wq, m.bq, m.wk, m.bk, m.wv, m.bv, m.wo, m.bo)), 4, "own", kv_heads=4)
        return reference_attention(x.float(), m32, self.st, torch.float32).to(x.dtype)


def test_a_prefix_difference_from_float32_rounding_is_not_called_a_length_dependence():
    r = run(Float32Inside(Structure(causal=True), is_causal=True))
    assert r.outcome == "mismatch" and {"precision_as_declared", "prefix_consistency"} <= set(r.failed), r.failed
    ps = {p["name"]: p for p in r.doc["properties"]}
    assert "chunk padding" not in ps["prefix_consistency"]["detail"], ps["prefix_consistency"]["detail"]
    assert "precision_as_declared names: rerun under it, it holds" in ps["prefix_consistency"]["detail"]
    assert run(Float32Inside(Structure(causal=True), is_causal=True), compute_dtype="float32").outcome == "ok"


def test_a_prefix_difference_from_float32_rounding_is_said_when_a_scale_hint_needs_float32_too():
    """GPT-Neo undeclared (no 1/√d_k, q·k in float32): the mismatch is scale *and* precision, so the verified
    hint is ``--scale 1 (and --compute-dtype float32)``. The precision is then its own failed property (the
    error under the hint's scale, not the scale's), and prefix_consistency names the rounding, not a guess."""
    r = run(Float32Inside(Structure(causal=True, scale=1.0), is_causal=True))
    assert r.outcome == "mismatch", r.verdict.summary
    assert {"precision_as_declared", "scale_1_over_sqrt_dk", "prefix_consistency"} <= set(r.failed), r.failed
    assert "--scale 1 (and --compute-dtype float32" in r.verdict.suggestion
    assert "precision_as_declared (it computes in float32, not float64)" in r.verdict.summary
    ps = {p["name"]: p for p in r.doc["properties"]}
    pad = ps["precision_as_declared"]
    assert "with --scale 1 (the verified hint)" in pad["detail"] and pad["numbers"]["with"] == "--scale 1"
    assert pad["error"] < 1e-4 < ps["matches_reference"]["error"], (pad["error"], ps["matches_reference"]["error"])
    assert "chunk padding" not in ps["prefix_consistency"]["detail"], ps["prefix_consistency"]["detail"]
    assert "precision_as_declared names: rerun under it, it holds" in ps["prefix_consistency"]["detail"]
    # a scale alone (float64 internals): no precision finding
    r = run(Attn(Structure(causal=True, scale=1.0), is_causal=True))
    assert "precision_as_declared" not in r.failed and "scale_1_over_sqrt_dk" in r.failed, r.failed


class L2Norm(nn.Module):
    """Llama 4's ``Llama4TextL2Norm``: an RMS norm without a weight (eps 1e-5), one module for q and k."""

    def __init__(self, eps=1e-5, weight=False):
        super().__init__()
        self.eps = eps
        if weight:
            self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class SharedQKNorm(Attn):
    """One weightless norm, ``qk_norm``, on q and k (Llama 4's RoPE layers; it rotates first, which an RMS norm
    without a weight commutes with)."""

    def __init__(self, weight=False):
        super().__init__(Structure(causal=True, qk_norm="rms"), is_causal=True)
        self.qk_norm = L2Norm(weight=weight)

    def forward(self, x):
        m = self.mapping()
        m.q_norm = m.k_norm = (None, None, 1e-5)
        return reference_attention(x, m, self.st, x.dtype)


def test_one_weightless_qk_norm_shared_by_q_and_k_is_found_llama4():
    """Llama 4's ``qk_norm`` (no weight, eps 1e-5) was not found: with --qk-norm rms the reference took eps 1e-6
    (a mismatch of 1e-4 whose note told the user to write a mapping hook). Found, measured (rms) and read."""
    r = run(SharedQKNorm())
    assert r.outcome == "ok", r.verdict.summary
    assert any("qk_norm rms (qk_norm L2Norm, qk_norm L2Norm" in ln for ln in r.lines), r.lines
    r = run(SharedQKNorm(), qk_norm="rms")
    assert r.outcome == "ok" and not any("no norm modules found" in ln for ln in r.lines), r.lines
    # with a weight, the order against RoPE would matter: a shared norm is not read then
    r = run(SharedQKNorm(weight=True), qk_norm="rms")
    assert any("no norm modules found by name" in ln for ln in r.lines), r.lines


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_llama4_rope_layer_reads_interleaved_pairs_and_its_shared_norm():
    import transformers
    from transformers.models.llama4 import modeling_llama4 as M

    from proofs_checks.sanity._modconfig import read_module_config

    c = transformers.Llama4TextConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      num_hidden_layers=4, intermediate_size=64, intermediate_size_mlp=64)
    lines = read_module_config(M.Llama4TextAttention(c, 0)).lines()
    assert any(ln.startswith("rope_convention interleaved (config.model_type 'llama4_text'") for ln in lines), lines
    assert any(ln.startswith("qk_norm rms (qk_norm Llama4TextL2Norm") for ln in lines), lines
    nope = read_module_config(M.Llama4TextAttention(c, 3)).lines()  # no_rope_layers[3] = 0: no norm either
    assert any("this layer applies no RoPE (use_rope = 0" in ln for ln in nope) and not any("qk_norm" in ln for ln in nope)


class HeadsFirstWeights(Attn):
    """Returns its weights as (heads, batch, T, T), as torchscale 0.3's MultiheadAttention does."""

    def forward(self, x):
        B, T = x.shape[:2]
        return super().forward(x), torch.full((4, B, T, T), 1.0 / T, dtype=x.dtype)


def test_weights_whose_first_axis_is_not_the_batch_are_said_not_silently_dropped():
    r = run(HeadsFirstWeights(Structure(causal=False)))
    assert r.outcome == "ok", r.verdict.summary
    note = [ln for ln in r.lines if "returned a second output" in ln]
    assert note and "(its first axis is not the batch, 2)" in note[0] and "not checked there" in note[0], r.lines
    assert "weights_match_reference" not in {p["name"] for p in r.doc["properties"]}


def test_a_scaling_attribute_the_module_applies_elsewhere_is_not_said_to_be_named():
    """ESM keeps ``scaling = 1`` and multiplies q by 1/√d_k before RoPE: the note said "scale_1_over_sqrt_dk and
    matches_reference will name it", beside an ok that named nothing. Said with what was measured."""
    r = run(Attn(Structure(causal=True), SimpleNamespace(head_dim=4), scaling=1.0, is_causal=True))
    assert r.outcome == "ok", r.verdict.summary
    note = [ln for ln in r.lines if ln.startswith("note: scaling = 1 is not 1/√d_k")]
    assert note and "will name it" not in note[0] and "scale_1_over_sqrt_dk holds" in note[0], r.lines


class GatedQueries(nn.Module):
    """Qwen3-Next's full attention: ``q_proj`` carries a per-head output gate beside the queries (width
    2 × heads × d_k), so the projections found by name fit no head split."""

    def __init__(self):
        super().__init__()
        self.dim, self.num_heads, self.num_key_value_heads = 16, 4, 2
        self.q_proj, self.k_proj = nn.Linear(16, 32), nn.Linear(16, 8)
        self.v_proj, self.o_proj = nn.Linear(16, 8), nn.Linear(16, 16)

    def forward(self, x):
        B, T, _ = x.shape
        q, g = self.q_proj(x).view(B, T, 4, 8).chunk(2, -1)
        k, v = (p(x).view(B, T, 2, 4).repeat_interleave(2, 2) for p in (self.k_proj, self.v_proj))
        a = torch.softmax(torch.einsum("bthd,bshd->bhts", q, k) / 2.0, -1)
        o = torch.einsum("bhts,bshd->bthd", a, v) * torch.sigmoid(g)
        return self.o_proj(o.reshape(B, T, 16))


def test_projections_that_fit_no_head_split_are_named_not_called_missing():
    """The weights line said "no projections found by name" and the verdict asked for "projections under common
    names (q_proj/k_proj/v_proj, ...)" — which the module has. Now the widths and the gate are named."""
    r = run(GatedQueries())
    assert r.outcome == "inconclusive", r.verdict.summary
    w = next(ln for ln in r.lines if ln.startswith("weights:"))
    assert "no projections found by name" not in w and "found by name, but no head split fits their widths" in w, w
    assert "twice as wide as .o_proj (nn.Linear)'s input (32 = 2 × 16)" in w, w
    assert "projections under common names" not in (r.verdict.suggestion or ""), r.verdict.suggestion


class Perturbed(Attn):
    """Attention plus a systematic 4e-4 difference (as Apertus's llama3-scaled RoPE gives against plain RoPE):
    not rounding, yet within float16's looser rule."""

    def forward(self, x):
        o = super().forward(x)
        return o + 4e-4 * torch.sin(3.0 * o)


def test_no_coarser_precision_is_named_for_a_difference_a_read_note_explains():
    """Apertus (transformers 5.23, rope_type 'llama3') declared --compute-dtype float32 was "precision_as_declared
    (it computes in float16, not float32)" — false: it computes in float32 and its scaled RoPE, which the note
    names, differs from plain RoPE by 1e-3, inside float16's rule. With such a note no precision is named."""
    plain = run(Perturbed(Structure(causal=True), is_causal=True), compute_dtype="float32")
    assert "precision_as_declared" in plain.failed, plain.failed  # without a note: what the rule can say
    cfg = SimpleNamespace(rope_parameters={"rope_type": "llama3", "rope_theta": 1e4})
    r = run(Perturbed(Structure(causal=True), cfg, is_causal=True), compute_dtype="float32")
    assert r.outcome == "mismatch" and "precision_as_declared" not in r.failed, r.failed
    assert "float16" not in (r.verdict.suggestion or "") and any("scaled RoPE is not modelled" in ln for ln in r.lines)


def test_a_scale_the_module_says_is_named_instead_of_the_factors_that_happen_to_fit():
    """Falcon-H1 (k × key_multiplier 0.5, 4 heads): the factor 1/2 was explained as "fits 1/√H …; or
    1/(layer index + 1) = 1/2" — coincidences; the module's own scale, read, is the cause said."""
    m = Attn(Structure(causal=True, scale=0.25), SimpleNamespace(head_dim=4), scaling=0.25, is_causal=True)
    r = run(m)
    sc = {p["name"]: p for p in r.doc["properties"]}["scale_1_over_sqrt_dk"]
    assert sc["status"] == "fail" and "(the module's own scaling = 0.25, read)" in sc["detail"], sc["detail"]
    assert "fits 1/√H" not in sc["detail"] and "layer index" not in sc["detail"], sc["detail"]
