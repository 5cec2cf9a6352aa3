"""``check attention`` reads the configuration a module carries (issue 37, item 3): a Hugging Face
``config`` (RoPE base and partial rotary, sliding window per layer, key/value heads, softcap,
``is_causal``), x-transformers and timm attributes; a flag overrides a value read when it agrees, a
contradiction or a configuration attribute of the wrong type is a one-line usage error. Also the
mapping hook's ``q_transform``/``k_transform`` (item 2). Small sizes, few lengths, in-process."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from numerics.attention_reference import Mapping, Structure, reference_attention
from proofs_checks.options import UsageError
from proofs_checks.sanity._modconfig import ConfigError, ConfigRead, merge, read_module_config
from proofs_checks.sanity.attention import run_attention
from tests.cli_helpers import invoke, one_line_error

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = "1,5,17"


class CfgAttn(nn.Module):
    """Attention whose structure comes from its ``config`` (a stand-in for a Hugging Face module):
    causal, RoPE (rotated halves) with ``config.rope_theta`` on ``rope_dims`` of each head, a causal
    sliding window ``config.sliding_window``, grouped key/value heads, a softcap."""

    def __init__(self, config, dim=16, heads=4, kv_heads=2, *, rope_dims=None, is_causal=True, scale_q=None):
        super().__init__()
        self.config, self.is_causal, self.dim = config, is_causal, dim
        d = dim // heads
        self.q_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.k_proj, self.v_proj = nn.Linear(dim, kv_heads * d), nn.Linear(dim, kv_heads * d)
        self.num_heads, self._kv = heads, kv_heads  # the key/value head count only in the config, if there
        self._st = Structure(causal=True, positional="rope", rope_base=float(getattr(config, "rope_theta", 1e4)),
                             rope_dims=rope_dims, window=(config.sliding_window - 1, 0)
                             if getattr(config, "sliding_window", None) else None,
                             softcap=getattr(config, "attn_logit_softcapping", None))
        self._scale_q = scale_q

    def forward(self, x):
        m = Mapping(self.q_proj.weight, self.q_proj.bias, self.k_proj.weight, self.k_proj.bias, self.v_proj.weight,
                    self.v_proj.bias, self.o_proj.weight, self.o_proj.bias, self.num_heads, "own",
                    kv_heads=self._kv)
        if self._scale_q is not None:  # a custom transform of q per head (declared by the mapping hook)
            m.q_transform = lambda q: q * self._scale_q.to(q.dtype)[None, :, None, None]
        return reference_attention(x, m, self._st, x.dtype)


def cfg(**kw):
    return SimpleNamespace(**kw)


def run(obj, **kw):
    kw.setdefault("seq_len", LENGTHS)
    kw.setdefault("mode", "quick")
    return run_attention(obj, **kw)


# -- reading -------------------------------------------------------------------------------------

def test_rope_theta_read_from_a_stand_in_config_is_ok_without_rope_base():
    torch.manual_seed(0)
    r = run(CfgAttn(cfg(rope_theta=500000, num_key_value_heads=2)), positional="rope")
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_base 500000 (config.rope_theta)" in r.doc["config_read"]
    assert "causal (is_causal)" in r.doc["config_read"] and "kv_heads 2 (config.num_key_value_heads)" in \
        r.doc["config_read"]
    line = [ln for ln in r.lines if ln.startswith("read from the module:")]
    assert line and "rope_base 500000 (config.rope_theta)" in line[0], r.lines
    # the Declaration's provenance (issue 42): each value read names its attribute
    decl = r.doc["inputs"]["declaration"]
    assert decl["rope_base"] == "read from the module: config.rope_theta" and "is_causal" in decl["causal"], decl
    assert r.doc["inputs"]["rope"]["base"] == 500000 and r.doc["inputs"]["causal"] is True


def test_ignore_config_checks_against_the_flags_alone():
    torch.manual_seed(0)
    r = run(CfgAttn(cfg(rope_theta=500000)), positional="rope", causal=True, ignore_config=True)
    assert r.outcome == "mismatch" and "matches_reference" in r.failed
    assert r.doc["config_read"] == [] and "the module's configuration was not read (--ignore-config)" in r.lines
    assert any("--rope-base 500000" in h for h in r.doc["hints"]), r.doc["hints"]


def test_an_agreeing_flag_is_kept_and_said_so():
    torch.manual_seed(0)
    r = run(CfgAttn(cfg(rope_theta=500000)), positional="rope", rope_base=500000.0, causal=True)
    assert r.outcome == "ok"
    assert "rope_base 500000 (config.rope_theta; as declared by --rope-base)" in r.doc["config_read"]


@pytest.mark.parametrize("kw, config, want", [
    ({"rope_base": 10000.0, "positional": "rope"}, {"rope_theta": 500000}, ("--rope-base 10000", "rope_base 500000")),
    ({"window": "8", "causal": True}, {"sliding_window": 4}, ("--window 8", "window 4")),
    ({"window": (7, 0), "causal": True}, {"sliding_window": 4}, ("--window 7,0", "window 4")),
    ({"kv_heads": 4}, {"num_key_value_heads": 2}, ("--kv-heads 4", "kv_heads 2")),
    ({"softcap": 30.0}, {"attn_logit_softcapping": 50.0}, ("--softcap 30", "softcap 50")),
])
def test_a_contradicting_flag_is_a_usage_error_naming_both(kw, config, want):
    with pytest.raises(UsageError) as e:
        run(CfgAttn(cfg(**config)), **kw)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in want) and "--ignore-config" in msg, msg


@pytest.mark.parametrize("config, attr", [({"rope_theta": "big"}, "config.rope_theta = 'big'"),
                                          ({"sliding_window": -3}, "config.sliding_window = -3"),
                                          ({"num_key_value_heads": 0}, "config.num_key_value_heads = 0"),
                                          ({"rotary_pct": 1.5}, "config.rotary_pct = 1.5"),
                                          ({"attn_logit_softcapping": True}, "config.attn_logit_softcapping = True")])
def test_a_config_attribute_of_the_wrong_type_is_one_line(config, attr):
    with pytest.raises(UsageError) as e:
        run(_with_config(config), positional="rope")
    msg = str(e.value)
    assert "\n" not in msg and attr in msg and "--ignore-config" in msg, msg


def _with_config(config):
    m = CfgAttn(cfg(rope_theta=10000))
    m.config = cfg(**config)
    return m


def test_a_wrong_config_attribute_is_not_read_with_ignore_config():
    r = run(_with_config({"rope_theta": "big"}), positional="rope", causal=True, ignore_config=True)
    assert r.outcome == "ok"


def test_window_read_for_its_layer_and_the_window_flag_may_omit_causal():
    torch.manual_seed(0)
    m = CfgAttn(cfg(rope_theta=10000, sliding_window=4))
    r = run(m, positional="rope")
    assert r.outcome == "ok" and r.doc["inputs"]["window"] == [3, 0]
    assert "window 4 (config.sliding_window)" in r.doc["config_read"]
    # --window 4 without --causal: the module's is_causal makes it the causal window, which agrees
    assert run(m, positional="rope", window="4").outcome == "ok"


def test_partial_rotary_neox_style_rotary_pct_is_read_and_ok():
    torch.manual_seed(0)
    # GPT-NeoX 4.x style: rotary_pct = 0.25 of head_dim 8 → 2 rotated dimensions
    m = CfgAttn(cfg(rope_theta=10000, rotary_pct=0.25, hidden_size=32, num_attention_heads=4), dim=32, heads=4,
                kv_heads=4, rope_dims=2)
    r = run(m, positional="rope")
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_dims 2 (config.rotary_pct 0.25 × hidden_size / num_attention_heads = 8)" in r.doc["config_read"]
    assert r.doc["inputs"]["rope"]["dims"] == 2
    # without reading it, all of d_k is rotated: a mismatch
    assert run(m, positional="rope", causal=True, ignore_config=True).outcome == "mismatch"


def test_rope_values_are_listed_not_used_when_the_scheme_is_not_rope():
    torch.manual_seed(0)
    r = run(CfgAttn(cfg(rope_theta=500000)), causal=True)
    assert "rope_base 500000 (config.rope_theta; not used: the declared scheme is --positional none)" in \
        r.doc["config_read"]


def test_hf_layer_rules():
    # transformers ≥ 5: the layer's own sliding_window decides (None on a full-attention layer)
    full = SimpleNamespace(config=cfg(sliding_window=4), sliding_window=None, layer_idx=1)
    assert read_module_config(full).get("window") is None
    # layer_types with layer_idx; Gemma 2 (transformers 4) alternation; Qwen2's use_sliding_window
    lt = cfg(sliding_window=4, layer_types=["sliding_attention", "full_attention"])
    assert read_module_config(SimpleNamespace(config=lt, layer_idx=0)).get("window") == 4
    assert read_module_config(SimpleNamespace(config=lt, layer_idx=1)).get("window") is None
    mixed = read_module_config(SimpleNamespace(config=lt))
    assert mixed.get("window") is None and "no layer_idx" in mixed.notes[0]
    # a model's config (no layer_idx) leaves the window to its first attention layer, which knows its index
    model = nn.Module()
    model.config, model.layer = lt, nn.Module()
    model.layer.config, model.layer.layer_idx = lt, 0
    r = read_module_config(model)
    assert r.lines() == ["window 4 (layer.config.sliding_window, layer 0 is 'sliding_attention')"] and r.notes == []
    g2 = cfg(model_type="gemma2", sliding_window=4)
    assert [read_module_config(SimpleNamespace(config=g2, layer_idx=i)).get("window") for i in (0, 1, 2)] == [4, None, 4]
    assert read_module_config(SimpleNamespace(config=cfg(sliding_window=4, use_sliding_window=False))).get("window") \
        is None
    # transformers ≥ 5: rope_parameters (nested per layer type in Gemma 3), partial_rotary_factor inside it
    r = read_module_config(SimpleNamespace(config=cfg(rope_parameters={"rope_theta": 1e6, "partial_rotary_factor": 0.5,
                                                                       "rope_type": "llama3"}, head_dim=8)))
    assert r.get("rope_base") == 1e6 and r.get("rope_dims") == 4 and "not modelled" in r.notes[0]
    nested = cfg(rope_parameters={"sliding_attention": {"rope_theta": 1e4}, "full_attention": {"rope_theta": 1e6}},
                 layer_types=["sliding_attention", "full_attention"])
    assert read_module_config(SimpleNamespace(config=nested, layer_idx=1)).get("rope_base") == 1e6
    # a scale other than 1/√d_k (Gemma 2's query_pre_attn_scalar) is said in a note
    r = read_module_config(SimpleNamespace(config=cfg(head_dim=8), scaling=0.0625))
    assert r.items == {} and r.notes == ["scaling = 0.0625 is not 1/√d_k = 0.353553 (head_dim 8): "
                                         "scale_1_over_sqrt_dk and matches_reference will name it"]
    # is_causal False is not read (a caller may pass a causal mask)
    assert read_module_config(SimpleNamespace(config=cfg(), is_causal=False)).get("causal") is None


def test_x_transformers_and_qk_norm_attributes():
    def xt(name, **attrs):
        cls = type(name, (nn.Module,), {"__module__": "x_transformers.x_transformers"})
        m = cls()
        for k, v in attrs.items():
            setattr(m, k, v)
        return m

    attn = xt("Attention", causal=True, heads=4, kv_heads=2, max_attend_past=3)
    attn.attend = xt("Attend", causal=True, softclamp_logits=True, logit_softclamp_value=30.0)
    rot = xt("RotaryEmbedding", interpolation_factor=1.0)
    rot.register_buffer("inv_freq", 1.0 / (500000 ** (torch.arange(0, 8, 2).float() / 8)))
    attn.rot = rot
    r = read_module_config(attn)
    assert r.lines() == ["causal (causal)", "rope_base 500000 (rot.inv_freq)", "rope_dims 8 (rot.inv_freq (4 "
                         "frequencies))", "window 4 (max_attend_past 3 + 1)", "kv_heads 2 (kv_heads)",
                         "softcap 30 (attend.logit_softclamp_value)"]
    # litgpt's CausalSelfAttention and its config
    lit = type("CausalSelfAttention", (nn.Module,), {"__module__": "litgpt.model"})()
    lit.config = cfg(rope_base=500000, rope_n_elem=4, head_size=8, n_query_groups=2, attention_logit_softcapping=50.0,
                     sliding_window_size=4)
    lit.apply_sliding_window_attention, lit.block_idx = True, 0
    assert read_module_config(lit).lines() == [
        "causal (the module is litgpt's CausalSelfAttention)", "rope_base 500000 (config.rope_base)",
        "rope_dims 4 (config.rope_n_elem)", "window 4 (config.sliding_window_size, apply_sliding_window_attention)",
        "kv_heads 2 (config.n_query_groups)", "softcap 50 (config.attention_logit_softcapping)"]
    # timm's Attention(qk_norm=True): LayerNorm on q and k, compared with --qk-norm, never declared by it
    timm_like = nn.Module()
    timm_like.q_norm, timm_like.k_norm = nn.LayerNorm(4), nn.LayerNorm(4)
    r = read_module_config(timm_like)
    assert r.get("qk_norm") == "layer"
    vals, lines = merge(r, {"qk_norm": None}, "none")
    assert vals["qk_norm"] is None and lines == ["qk_norm layer (q_norm LayerNorm, k_norm LayerNorm; not applied "
                                                 "unless declared: --qk-norm layer)"]
    with pytest.raises(ConfigError, match="--qk-norm rms contradicts the module's qk_norm layer"):
        merge(r, {"qk_norm": "rms"}, "none")
    assert read_module_config(nn.Module()).items == {} and merge(ConfigRead(), {"rope_base": None}, "rope")[1] == []


# -- the mapping hook's q/k transforms -----------------------------------------------------------

GAIN = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)


def _gain_module():
    torch.manual_seed(1)
    return CfgAttn(cfg(), kv_heads=4, scale_q=GAIN, is_causal=False)


def _hook(**extra):
    def hook(m):
        return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 4, **extra}
    return hook


def test_a_declared_q_transform_makes_the_custom_module_ok():
    m = _gain_module()
    good = run(m, positional="rope", causal=True, mapping=_hook(q_transform=lambda q: q * GAIN.to(q.dtype)[None, :,
                                                                                                          None, None]))
    assert good.outcome == "ok", good.verdict.summary
    bad = run(m, positional="rope", causal=True, mapping=_hook())
    assert bad.outcome == "mismatch" and "matches_reference" in bad.failed


@pytest.mark.parametrize("transform, want", [
    (3.0, "q_transform must be a callable"),
    (lambda q: q[..., :1], "q_transform returned (2, 4, 3, 1) for a (2, 4, 3, 4) input"),
    (lambda q: q * float("nan"), "q_transform returned NaN or inf"),
    (lambda q: q.float(), "q_transform returned float32 for a float64 input"),
    (lambda q: q.mul_(2), "q_transform writes into its input"),
    (lambda q: 1 / 0, "q_transform raised ZeroDivisionError"),
])
def test_a_bad_q_transform_is_one_usage_line(transform, want):
    with pytest.raises(UsageError) as e:
        run(_gain_module(), positional="rope", causal=True, mapping=_hook(q_transform=transform))
    assert "\n" not in str(e.value) and str(e.value).startswith("--mapping: " + want), str(e.value)


# -- the command line ----------------------------------------------------------------------------

def test_cli_contradiction_and_help(tmp_path):
    f = tmp_path / "cfgattn.py"
    f.write_text(textwrap.dedent('''
        from types import SimpleNamespace
        import torch
        class Attn(torch.nn.Module):  # the contradiction is found before the module is called
            def __init__(self):
                super().__init__()
                self.config = SimpleNamespace(rope_theta=500000, sliding_window=4)
                self.is_causal, self.q_proj = True, torch.nn.Linear(8, 8)
            def forward(self, x):
                return x
        def make():
            return Attn()
    '''))
    code, out, err = invoke("check", "attention", "--module", f"{f}:make", "--positional", "rope", "--rope-base",
                            "10000", "--no-progress")
    line = one_line_error(code, err)
    assert "--rope-base 10000 contradicts the module's rope_base 500000 (config.rope_theta)" in line
    # --window W without --causal is the causal window of a module whose is_causal is True
    code, out, err = invoke("check", "attention", "--module", f"{f}:make", "--window", "8", "--no-progress")
    line = one_line_error(code, err)
    assert "--window 8 contradicts the module's window 4 (keys t−3 … t, i.e. --window 3,0) (config.sliding_window)" \
        in line, line
    code, out, err = invoke("check", "attention", "--help")
    assert code == 0 and "--ignore-config" in out and "rope_theta, else 10000" in " ".join(out.split())


# -- a real Hugging Face module ------------------------------------------------------------------

HF = ROOT / ".tverify" / "survey-cache" / "transformers-5.23.0"


@pytest.mark.skipif(not (HF / "transformers").is_dir(), reason=f"transformers 5.23.0 is not in the survey cache "
                    f"({HF}): `tverify survey` installs it there")
def test_transformers_llama_attention_rope_theta_500000_is_ok_without_rope_base(monkeypatch):
    monkeypatch.syspath_prepend(str(HF))
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    torch.manual_seed(0)
    c = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                    num_hidden_layers=1, rope_theta=500000.0, attention_dropout=0.0)
    c._attn_implementation = "eager"
    assert c.rope_parameters["rope_theta"] == 500000.0

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.rot, self.dim = LlamaAttention(c, 0), [LlamaRotaryEmbedding(c)], 32

        def forward(self, x):
            T = x.shape[1]
            mask = torch.zeros(T, T, dtype=x.dtype).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
            return self.attn(x, self.rot[0](x, torch.arange(T)[None]), mask[None, None])[0]

    r = run(Wrap(), positional="rope", compute_dtype="float32")
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_base 500000 (attn.config.rope_parameters['rope_theta'])" in r.doc["config_read"]
    assert "causal (attn.is_causal)" in r.doc["config_read"]
    with pytest.raises(UsageError, match="contradicts the module's rope_base 500000"):
        run(Wrap(), positional="rope", rope_base=10000.0)


@pytest.mark.skipif(not (HF / "transformers").is_dir(), reason=f"transformers 5.23.0 is not in the survey cache "
                    f"({HF}): `tverify survey` installs it there")
def test_transformers_gpt_neox_rotary_pct_quarter_is_read_and_ok(monkeypatch):
    monkeypatch.syspath_prepend(str(HF))
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXAttention, GPTNeoXRotaryEmbedding

    torch.manual_seed(0)
    c = GPTNeoXConfig(hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1,
                      rotary_pct=0.25, attention_dropout=0.0, hidden_dropout=0.0)
    c._attn_implementation = "eager"

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.rot, self.dim = GPTNeoXAttention(c, 0), [GPTNeoXRotaryEmbedding(c)], 32

        def forward(self, x):
            T = x.shape[1]
            mask = torch.zeros(T, T, dtype=x.dtype).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
            return self.attn(x, mask[None, None], position_embeddings=self.rot[0](x, torch.arange(T)[None]))[0]

    r = run(Wrap(), positional="rope", compute_dtype="float32")  # head size 16: 4 rotated dimensions
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_dims 4 (attn.rotary_ndims)" in r.doc["config_read"] and r.doc["inputs"]["rope"]["dims"] == 4
