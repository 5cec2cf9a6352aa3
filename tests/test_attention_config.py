"""``check attention`` reads the configuration a module carries (issue 37, item 3): a Hugging Face
``config`` (RoPE base and partial rotary, sliding window per layer, key/value heads, softcap,
``is_causal``), x-transformers and timm attributes; a flag overrides a value read when it agrees, a
contradiction or a configuration attribute of the wrong type is a one-line usage error. Also the
mapping hook's ``q_transform``/``k_transform`` (item 2). Small sizes, few lengths, in-process."""

from __future__ import annotations

import importlib.util
import math
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from numerics.attention_reference import Mapping, Structure, reference_attention
from proofs_checks.options import UsageError
from proofs_checks.sanity._libsemantics import library_of
from proofs_checks.sanity._modconfig import ConfigRead, merge, read_module_config
from proofs_checks.sanity.attention import run_attention
from tests.cli_helpers import invoke
from tests.tiers import moved

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


@pytest.mark.parametrize("given, config, want", [
    ({"rope_base": 10000.0}, {"rope_theta": 500000}, "rope_base 500000 (config.rope_theta; differs from --rope-base 10000, "
                                                     "which the check uses)"),
    # a window of an unknown library release: its keys are not known, so it is not compared (issue 42)
    ({"window": (7, 0)}, {"sliding_window": 4}, "the check uses --window 7,0; not compared with it"),
    ({"kv_heads": 4}, {"num_key_value_heads": 2}, "kv_heads 2 (config.num_key_value_heads; differs from --kv-heads 4, "
                                                  "which the check uses)"),
    ({"softcap": 30.0}, {"attn_logit_softcapping": 50.0}, "softcap 50 (config.attn_logit_softcapping; differs from "
                                                          "--softcap 30, which the check uses)"),
])
def test_a_differing_declaration_wins_and_the_difference_is_said(given, config, want):
    """Config is evidence: a declared value that differs from the one read is the one checked."""
    vals, lines = merge(read_module_config(SimpleNamespace(config=cfg(**config))), given, "rope")
    key = next(iter(given))
    assert vals[key] == given[key] and [d.key for d in vals["_differs"]] == ([] if key == "window" else [key])
    assert any(want in ln for ln in lines), lines


def test_a_differing_rope_base_is_checked_as_declared():
    torch.manual_seed(0)
    r = run(CfgAttn(cfg(rope_theta=500000)), positional="rope", rope_base=10000.0, causal=True)
    assert r.outcome == "mismatch" and "matches_reference" in r.failed and r.doc["inputs"]["rope"]["base"] == 10000
    assert "rope_base 500000 (config.rope_theta; differs from --rope-base 10000, which the check uses)" in \
        r.doc["config_read"]


@pytest.mark.parametrize("config, attr", [({"rope_theta": "big"}, "config.rope_theta = 'big'"),
                                          ({"sliding_window": -3}, "config.sliding_window = -3"),
                                          ({"num_key_value_heads": 0}, "config.num_key_value_heads = 0"),
                                          ({"rotary_pct": 1.5}, "config.rotary_pct = 1.5"),
                                          ({"attn_logit_softcapping": True}, "config.attn_logit_softcapping = True")])
def test_a_config_attribute_of_the_wrong_type_is_one_line_and_not_read(config, attr):
    r = read_module_config(_with_config(config))
    assert len(r.problems) == 1 and attr in r.problems[0] and "\n" not in r.problems[0], r.problems
    assert r.problems[0] in r.notes and all(it.source.split(" ")[0] not in attr for it in r.items.values())


class _Raising:
    @property
    def rope_theta(self):
        raise RuntimeError("no network")


class _Lying:
    def __init__(self):
        self.n = 0

    @property
    def sliding_window(self):
        self.n += 1
        return 4 if self.n % 2 else 8


def test_a_config_attribute_that_raises_or_lies_is_one_line_and_the_check_goes_on():
    for config, want in ((_Raising(), "config.rope_theta: reading it raised RuntimeError: no network"),
                         (_Lying(), "config.sliding_window changed between two reads (4, then 8)")):
        m = CfgAttn(cfg(rope_theta=10000))
        m.config = config
        r = read_module_config(m)
        assert len(r.problems) == 1 and r.problems[0].startswith(want), r.problems
    torch.manual_seed(0)
    m = CfgAttn(cfg(rope_theta=10000))
    m.config = _Raising()
    r = run(m, positional="rope", causal=True)
    assert r.outcome == "ok", r.verdict.summary
    notes = [ln for ln in r.lines if "reading it raised" in ln]
    assert len(notes) == 1 and "not read (the check uses what is declared)" in notes[0], r.lines


def _with_config(config):
    m = CfgAttn(cfg(rope_theta=10000))
    m.config = cfg(**config)
    return m


def test_a_wrong_config_attribute_is_not_read_with_ignore_config():
    r = run(_with_config({"rope_theta": "big"}), positional="rope", causal=True, ignore_config=True)
    assert r.outcome == "ok"


def test_a_window_of_an_unknown_library_is_reported_not_used_and_the_window_flag_may_omit_causal():
    torch.manual_seed(0)
    m = CfgAttn(cfg(rope_theta=10000, sliding_window=4))
    vals, lines = merge(read_module_config(m), {"window": None}, "rope")
    assert vals["window"] is None and lines[-1].startswith("window 4 (config.sliding_window; as read, not used: which "
                                                           "keys it means is not known"), lines
    # --window 4 without --causal: the module's is_causal makes it the causal window
    r = run(m, positional="rope", window="4")
    assert r.outcome == "ok" and r.doc["inputs"]["window"] == [3, 0]


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
    assert r.lines() == ["window 4 (layer.config.sliding_window, layer 0 is 'sliding_attention'; as read, not used: "
                         "which keys it means is not known for this library; declare --window)"] and r.notes == []
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
    # is_causal False is not read as a declaration (a caller may pass a causal mask) ...
    assert read_module_config(SimpleNamespace(config=cfg(), is_causal=False)).get("causal") is None
    # ... but it decides: a submodule's is_causal = True is about its own role, not the module's
    outer = nn.Module()
    outer.is_causal, outer.inner = False, nn.Module()
    outer.inner.is_causal = True
    assert read_module_config(outer).get("causal") is None
    outer.is_causal = None  # the module says nothing: its attention's claim is read
    assert read_module_config(outer).lines() == ["causal (inner.is_causal)"]


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
    L = f", {library_of(attn)}"  # the release running, or "(version unknown)"
    assert r.lines() == [f"causal (causal{L})", f"rope_base 500000 (rot.inv_freq{L})", f"rope_dims 8 (rot.inv_freq (4 "
                         f"frequencies){L})", f"window 4 (max_attend_past = 3{L}: keys t−3 … t (4 keys); keys with q − k "
                         "> 3 masked: a look-back; causal by the module's causal)", f"kv_heads 2 (kv_heads{L})",
                         f"softcap 30 (attend.logit_softclamp_value{L})"]
    # max_attend_past without causal: a look-back, every later key stays visible
    bi = xt("Attention", causal=False, heads=4, max_attend_past=3)
    r = read_module_config(bi)
    assert r.get("causal") is None and r.items["window"].span == (3, None)
    assert merge(r, {"window": None, "causal": False}, "none")[0]["window"] == (3, None)
    assert r.lines()[0].startswith(f"window 3,∞ (max_attend_past = 3{L}: keys t−3 … every later key")
    # litgpt's CausalSelfAttention and its config
    lit = type("CausalSelfAttention", (nn.Module,), {"__module__": "litgpt.model"})()
    lit.config = cfg(rope_base=500000, rope_n_elem=4, head_size=8, n_query_groups=2, attention_logit_softcapping=50.0,
                     sliding_window_size=4)
    lit.apply_sliding_window_attention, lit.block_idx = True, 0
    L = f", {library_of(lit)}"
    assert read_module_config(lit).lines() == [
        f"causal (the module is litgpt's CausalSelfAttention{L})", f"rope_base 500000 (config.rope_base{L})",
        f"rope_dims 4 (config.rope_n_elem{L})", f"window 4 (config.sliding_window_size, apply_sliding_window_attention{L}"
        ": keys t−3 … t (4 keys) (its mask cache masks tril(diagonal = −W)))", f"kv_heads 2 (config.n_query_groups{L})",
        f"softcap 50 (config.attention_logit_softcapping{L})"]
    # timm's Attention(qk_norm=True): LayerNorm on q and k, the kind measured on a probe vector
    timm_like = nn.Module()
    timm_like.q_norm, timm_like.k_norm = nn.LayerNorm(4), nn.LayerNorm(4)
    r = read_module_config(timm_like)
    assert r.get("qk_norm") == "layer"
    vals, lines = merge(r, {"qk_norm": None}, "none")
    assert vals["qk_norm"] == "layer" and lines == ["qk_norm layer (q_norm LayerNorm, k_norm LayerNorm: measured: a "
                                                    "layer norm (mean subtracted: a shift moves it by "
                                                    + lines[0].split("shift moves it by ")[1]]
    vals, lines = merge(r, {"qk_norm": "rms"}, "none")
    assert vals["qk_norm"] == "rms" and "differs from --qk-norm rms, which the check uses" in lines[0]
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
    (lambda q: q[..., :1], "q_transform returned (2, 4, 3, 1) on a (2, 4, 3, 4) float64 input"),
    (lambda q: q * float("nan"), "q_transform returned NaN or inf"),
    (lambda q: q.float(), "q_transform returned a float32 tensor on cpu on a (2, 4, 3, 4) float64 input"),
    (lambda q: q.detach(), "q_transform cuts the gradient"),
    (lambda q: q.mul_(2), "q_transform writes into its input"),
    (lambda q: 1 / 0, "q_transform raised ZeroDivisionError"),
])
def test_a_bad_q_transform_is_one_usage_line(transform, want):
    with pytest.raises(UsageError) as e:
        run(_gain_module(), positional="rope", causal=True, mapping=_hook(q_transform=transform))
    assert "\n" not in str(e.value) and str(e.value).startswith("--mapping: " + want), str(e.value)


# -- the command line ----------------------------------------------------------------------------

def test_cli_a_differing_declaration_is_checked_and_help(tmp_path):
    f = tmp_path / "cfgattn.py"
    f.write_text(textwrap.dedent('''
        from types import SimpleNamespace
        import torch
        class Attn(torch.nn.Module):
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
                            "10000", "--no-progress", "--quick", "--seq-len", "1,5")
    text = " ".join(out.split())
    assert code != 2 and "rope_base 500000 (config.rope_theta; differs from --rope-base 10000, which the check uses)" \
        in text, (code, out, err)
    # --window W without --causal is the causal window of a module whose is_causal is True
    code, out, err = invoke("check", "attention", "--module", f"{f}:make", "--window", "8", "--no-progress", "--quick",
                            "--seq-len", "1,5")
    text = " ".join(out.split())
    assert code != 2 and "window 4 (config.sliding_window; as read, not used: which keys it means is not known for " \
        "this library; declare --window; the check uses --window 8; not compared with it)" in text, (code, out, err)
    code, out, err = invoke("check", "attention", "--help")
    assert code == 0 and "--ignore-config" in out and "rope_theta, else 10000" in " ".join(out.split())


# -- a real Hugging Face module ------------------------------------------------------------------

def _survey_cache():
    from proofs_checks.survey.runner import default_cache

    c = default_cache()
    return c if c.is_absolute() else ROOT / c


HF = _survey_cache() / "transformers-5.23.0"


@pytest.fixture
def survey_transformers(monkeypatch):
    """transformers 5.23.0 from the survey cache on ``sys.path`` (skipped where ``tverify survey`` has
    not installed it there), torch's generator seeded."""
    if not (HF / "transformers").is_dir():
        pytest.skip(f"transformers 5.23.0 is not in the survey cache ({HF}): `tverify survey` installs it there")
    monkeypatch.syspath_prepend(str(HF))
    torch.manual_seed(0)


def _causal_additive(T: int, dtype) -> torch.Tensor:
    """The T × T additive causal mask (0 on and below the diagonal, −∞ above)."""
    return torch.zeros(T, T, dtype=dtype).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)


class _Wrapped(nn.Module):
    """A transformers attention layer called the way its model calls it: the causal additive mask and the rotary
    embedding's (cos, sin) of positions 0..T-1, passed by ``call(attn, x, mask, position_embeddings)``."""

    def __init__(self, attn, rotary, call):
        super().__init__()
        self.attn, self.rot, self.call, self.dim = attn, [rotary], call, 32

    def forward(self, x):
        T = x.shape[1]
        return self.call(self.attn, x, _causal_additive(T, x.dtype)[None, None],
                         self.rot[0](x, torch.arange(T)[None]))[0]


def test_transformers_llama_attention_rope_theta_500000_is_ok_without_rope_base(survey_transformers):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    c = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                    num_hidden_layers=1, rope_theta=500000.0, attention_dropout=0.0)
    c._attn_implementation = "eager"
    assert c.rope_parameters["rope_theta"] == 500000.0

    def Wrap():
        return _Wrapped(LlamaAttention(c, 0), LlamaRotaryEmbedding(c), lambda a, x, mask, pe: a(x, pe, mask))

    r = run(Wrap(), positional="rope", compute_dtype="float32")
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_base 500000 (attn.config.rope_parameters['rope_theta'], transformers 5.23.0)" in r.doc["config_read"]
    assert "causal (attn.is_causal, transformers 5.23.0)" in r.doc["config_read"]
    r = run(Wrap(), positional="rope", rope_base=10000.0, compute_dtype="float32")
    assert r.outcome == "mismatch" and "differs from --rope-base 10000" in " ".join(r.doc["config_read"])


def test_transformers_gpt_neox_rotary_pct_quarter_is_read_and_ok(survey_transformers):
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXAttention, GPTNeoXRotaryEmbedding

    c = GPTNeoXConfig(hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1,
                      rotary_pct=0.25, attention_dropout=0.0, hidden_dropout=0.0)
    c._attn_implementation = "eager"

    wrapped = _Wrapped(GPTNeoXAttention(c, 0), GPTNeoXRotaryEmbedding(c),
                       lambda a, x, mask, pe: a(x, mask, position_embeddings=pe))
    r = run(wrapped, positional="rope", compute_dtype="float32")  # head size 16: 4 rotated dimensions
    assert r.outcome == "ok", r.verdict.summary
    assert "rope_dims 4 (attn.rotary_ndims, transformers 5.23.0)" in r.doc["config_read"] and r.doc["inputs"]["rope"]["dims"] == 4


# -- readings that need no library (issue 42) -------------------------------------------------------

def test_qk_norm_kind_is_measured_not_read_from_the_class_name():
    class T5LayerNorm(nn.Module):  # named a layer norm, computes an RMS norm (as transformers' T5LayerNorm)
        def __init__(self, n):
            super().__init__()
            self.weight, self.variance_epsilon = nn.Parameter(torch.ones(n)), 1e-6

        def forward(self, x):
            return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)

    m = nn.Module()
    m.q_norm, m.k_norm = T5LayerNorm(8), T5LayerNorm(8)
    r = read_module_config(m)
    assert r.get("qk_norm") == "rms" and "measured: an RMS norm" in r.lines()[0], r.lines()
    m.q_norm, m.k_norm = nn.Linear(8, 8), nn.Linear(8, 8)  # not a norm: said, not read
    r = read_module_config(m)
    assert r.get("qk_norm") is None and "could not be told" in r.notes[0], r.notes


def test_per_head_qk_norm_weights_are_applied_per_head():
    from numerics.attention_reference import qk_normalise

    torch.manual_seed(0)
    H, dk = 4, 8
    t, w = torch.randn(2, 5, H * dk, dtype=torch.float64), torch.randn(H, dk, dtype=torch.float64)
    y = qk_normalise(t, "layer", (w, None, 1e-5), H)
    h = t.view(2, 5, H, dk).transpose(1, 2)
    want = nn.functional.layer_norm(h, (dk,), eps=1e-5) * w[:, None, :]
    assert y.shape == (2, H, 5, dk) and torch.allclose(y, want, rtol=1e-12, atol=1e-12)
    W = torch.eye(32, dtype=torch.float64)
    m = Mapping(W, None, W, None, W, None, None, None, H, "per head")
    m.q_norm = (torch.ones(dk, H, dtype=torch.float64), None, 1e-5)  # transposed: not per head
    assert "is not per head (heads, d_k) = (4, 8)" in m.consistent(32)


def test_a_projection_then_dropout_is_the_output_projection_and_a_sharded_qkv_asks_for_a_mapping():
    from numerics.attention_mapping import find_mappings

    class Attention(nn.Module):  # diffusers' layout
        def __init__(self):
            super().__init__()
            self.heads = 4
            self.to_q, self.to_k, self.to_v = (nn.Linear(16, 16) for _ in range(3))
            self.to_out = nn.ModuleList([nn.Linear(16, 16), nn.Dropout(0.0)])

    c = find_mappings(Attention(), 16)
    assert c and ".to_out[0] (nn.Linear)" in c[0].source
    CodeGenAttention = type("CodeGenAttention", (nn.Module,), {})
    cg = CodeGenAttention()
    cg.qkv_proj, cg.out_proj, cg.num_attention_heads = nn.Linear(16, 48, bias=False), nn.Linear(16, 16), 4
    c = find_mappings(cg, 16)
    assert c == [] and "mp_num = 4" in c.why and "--mapping" in c.why


def test_a_declared_number_is_the_one_read_only_when_equal_and_is_shown_unrounded():
    r = ConfigRead()
    r.add("rope_base", 1234567.0, "config.rope_theta")
    vals, lines = merge(r, {"rope_base": 1234607.0}, "rope")  # 40 apart: not "as declared"
    assert vals["rope_base"] == 1234607.0 and lines == ["rope_base 1234567 (config.rope_theta; differs from --rope-base "
                                                        "1234607, which the check uses)"]
    # a base recovered from a float32 inv_freq buffer agrees within its own precision (1e-5)
    r = ConfigRead()
    r.add("rope_base", 500000.0, "rot.inv_freq", rel_tol=1e-5)
    assert merge(r, {"rope_base": 500001.0}, "rope")[1] == ["rope_base 500000 (rot.inv_freq; as declared by --rope-base)"]


# -- issue 42: the readings wired into the pipeline ----------------------------------------------------

def test_qk_norms_that_fit_no_head_split_are_said_not_silently_dropped():
    torch.manual_seed(0)
    m = CfgAttn(cfg(num_key_value_heads=2))
    m.q_norm, m.k_norm = nn.LayerNorm(5), nn.LayerNorm(5)  # width 5: neither d_k = 4 nor the projection's 16
    r = run(m, causal=True)
    assert r.outcome == "inconclusive", r.verdict.summary
    notes = [ln for ln in r.lines if ln.startswith("note: 4 head(s), 2 key/value head(s)")]
    assert notes and "q_norm weight of width 5 fits neither the head size d_k = 4" in notes[0], r.lines
    assert any(ln.startswith("weights: none mapped: the projections found do not fit the module's q/k norms")
               for ln in r.lines), r.lines


def test_a_hint_compares_the_window_a_release_means_never_the_raw_number():
    from proofs_checks.sanity._modconfig import Item
    from proofs_checks.sanity.attention_hints import _read_differs

    it = Item("window", 5, "m.config.sliding_window = 4", library="transformers 4.40.0", span=(4, 0))
    assert _read_differs({"window": it}, Structure(causal=True, window=(4, 0)), None) == ""
    said = _read_differs({"window": it}, Structure(causal=True, window=(3, 0)), None)
    assert "m.config.sliding_window = 4 says otherwise" in said and "--window 4" in said, said
    raw = Item("window", 4, "config.sliding_window", interpreted=False)  # its keys are not known: never compared
    assert _read_differs({"window": raw}, Structure(causal=True, window=(7, 0)), None) == ""


def test_gpt_neo_local_layer_type_read_from_attention_layers_when_the_layer_lacks_it():
    """transformers 4.x keeps ``attention_type`` on the wrapping GPTNeoAttention only; its GPTNeoSelfAttention
    has ``config`` and ``layer_id``: the type is ``config.attention_layers[layer_id]`` (4.57.1's local layer was
    read as no window)."""
    neo = SimpleNamespace(model_type="gpt_neo", attention_layers=["global", "local"], window_size=3)
    r = read_module_config(SimpleNamespace(config=neo, layer_id=1))
    assert r.get("window") == 3
    assert any("config.attention_layers[1] 'local'" in ln for ln in r.lines()), r.lines()
    assert read_module_config(SimpleNamespace(config=neo, layer_id=0)).get("window") is None
    assert read_module_config(SimpleNamespace(config=neo, layer_id=5)).get("window") is None  # out of range: nothing
    own = read_module_config(SimpleNamespace(config=neo, layer_id=0, attention_type="local"))  # 5.x: its own type wins
    assert own.get("window") == 3 and any("attention_type 'local'" in ln for ln in own.lines())


def test_a_layer_that_applies_no_rope_says_the_base_is_the_models():
    """SmolLM3's (and Llama 4's) NoPE layers keep ``use_rope = config.no_rope_layers[i] = 0``; Cohere2's full
    layers have ``sliding_window = None`` and rotate only on sliding ones: the config's base is listed as the
    model's, with the layer's own evidence that it applies none (it was listed as if the layer used it)."""
    smol = SimpleNamespace(model_type="smollm3", rope_theta=2e6, no_rope_layers=[1, 1, 1, 0])
    line = read_module_config(SimpleNamespace(config=smol, layer_idx=3, use_rope=0)).lines()
    assert any("rope_base 2000000" in ln and "this layer applies no RoPE (use_rope = 0 (config.no_rope_layers[3])"
               in ln for ln in line), line
    line = read_module_config(SimpleNamespace(config=smol, layer_idx=0, use_rope=1)).lines()
    assert not any("no RoPE" in ln for ln in line), line
    co = SimpleNamespace(model_type="cohere2", rope_theta=1e4, sliding_window=4)
    line = read_module_config(SimpleNamespace(config=co, layer_idx=3, sliding_window=None)).lines()
    assert any("this layer applies no RoPE (sliding_window = None: Cohere2 rotates only on its sliding-window layers)"
               in ln for ln in line), line
    line = read_module_config(SimpleNamespace(config=co, layer_idx=0, sliding_window=4)).lines()
    assert not any("no RoPE" in ln for ln in line), line
    mistral = SimpleNamespace(model_type="mistral", rope_theta=1e4, sliding_window=None)  # rotates on every layer
    assert not any("no RoPE" in ln for ln in read_module_config(SimpleNamespace(config=mistral, sliding_window=None)).lines())


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
@moved("SmolLM3's real attention layer (importing transformers in the test's process: ~3 CPU s); it adds the "
       "real library's attribute names end to end",
       "tests/test_attention_config.py::test_a_layer_that_applies_no_rope_says_the_base_is_the_models")
def test_smollm3_nope_layer_of_the_real_library_is_said():
    import transformers
    from transformers.models.smollm3 import modeling_smollm3 as M

    c = transformers.SmolLM3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4)
    line = read_module_config(M.SmolLM3Attention(c, 3)).lines()
    assert any("this layer applies no RoPE (use_rope = 0 (config.no_rope_layers[3])" in ln for ln in line), line
    assert not any("no RoPE" in ln for ln in read_module_config(M.SmolLM3Attention(c, 0)).lines())


def test_a_hint_that_drops_a_read_window_gives_flags_that_declare_it():
    """No flag declares "no window": a verified hint "no window" against a window read from the module ends its
    flags with --ignore-config (without it, the flags as printed would read the window again)."""
    from proofs_checks.sanity._modconfig import Item
    from proofs_checks.sanity.attention_hints import _read_differs

    it = Item("window", 4, "attn.sliding_window = 4", library="transformers 5.23.0", span=(3, 0))
    said = _read_differs({"window": it}, Structure(causal=True), None)
    assert "attn.sliding_window = 4 says otherwise" in said and "no flag declares no window" in said, said
    assert said.rstrip().endswith("--causal --ignore-config"), said
    said = _read_differs({"window": it}, Structure(causal=True, window=(4, 0)), None)  # a window is declarable
    assert "--ignore-config" not in said and "--window 5" in said, said


def test_exaone4_full_layer_keeps_the_configs_window_but_does_not_slide():
    """Exaone 4 (transformers 5.23) sets ``self.sliding_window = config.sliding_window`` on every layer and
    slides (and rotates) only where ``is_sliding``: its full layers' mask is causal and they apply no RoPE
    (global NoPE). Its window was read on a full layer: a correct module was a mismatch ("LEAK")."""
    ex = SimpleNamespace(model_type="exaone4", rope_theta=1e4, sliding_window=4,
                         layer_types=["sliding_attention"] * 3 + ["full_attention"])
    r = read_module_config(SimpleNamespace(config=ex, layer_idx=3, sliding_window=4, is_sliding=False))
    assert r.get("window") is None, r.lines()
    assert any("sliding_window = 4 on a full-attention layer (is_sliding = False" in n for n in r.notes), r.notes
    assert any("this layer applies no RoPE (is_sliding = False" in ln for ln in r.lines()), r.lines()
    r = read_module_config(SimpleNamespace(config=ex, layer_idx=0, sliding_window=4, is_sliding=True))
    assert r.get("window") == 4 and not any("no RoPE" in ln for ln in r.lines()), r.lines()


def test_llama4_chunked_attention_is_said_beside_the_mismatch_it_causes():
    """Llama 4's RoPE layers are 'chunked_attention': its model's mask keeps the keys of the query's own chunk
    (attention_chunk_size). No flag declares it; the mismatch it causes had no stated reason."""
    l4 = SimpleNamespace(model_type="llama4_text", rope_theta=5e5, attention_chunk_size=4,
                         layer_types=["chunked_attention"] * 3 + ["full_attention"])
    r = read_module_config(SimpleNamespace(config=l4, layer_idx=0))
    assert any("attention_chunk_size = 4 on a 'chunked_attention' layer" in n and "q // 4 = k // 4" in n
               for n in r.notes), r.notes
    assert not any("chunk" in n for n in read_module_config(SimpleNamespace(config=l4, layer_idx=3)).notes)


def _fake(module: str, name: str, **attrs):
    """An object whose class claims to live in ``module`` (a library's reader keys on it)."""
    cls = type(name, (), {"__module__": module})
    obj = cls()
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def test_torchtune_rope_is_read_and_its_norm_order_said():
    """torchtune 0.6's RotaryPositionalEmbeddings rotates pairs (2i, 2i+1) of ``dim`` entries with ``base``; its
    MultiHeadAttention applies q_norm/k_norm after RoPE (the reference before: equal only for pair-wise equal
    norm weights): a trained torchtune Qwen3-like layer was a mismatch with no stated reason."""
    rope = _fake("torchtune.modules.position_embeddings", "RotaryPositionalEmbeddings", base=5e5, dim=8)
    r = read_module_config(rope)
    assert r.get("rope_base") == 5e5 and r.get("rope_dims") == 8 and r.get("rope_convention") == "interleaved"
    mha = _fake("torchtune.modules.attention", "MultiHeadAttention", pos_embeddings=rope, q_norm=object(),
                k_norm=object(), is_causal=True)
    notes = read_module_config(mha).notes
    assert any("torchtune normalises q and k after its RoPE" in n for n in notes), notes
    mha.q_norm = mha.k_norm = None
    assert not any("after its RoPE" in n for n in read_module_config(mha).notes)


def test_torchscale_sub_ln_and_xpos_are_said():
    """torchscale 0.3's MultiheadAttention with subln=True (a LayerNorm before out_proj) or xpos_rel_pos=True
    (XPOS): mismatches whose reason was not stated."""
    mha = _fake("torchscale.component.multihead_attention", "MultiheadAttention", inner_attn_ln=object(), xpos=None)
    notes = read_module_config(mha).notes
    assert any("inner_attn_ln" in n and "sub-LN" in n for n in notes) and not any("XPOS" in n for n in notes), notes
    mha.inner_attn_ln, mha.xpos = None, object()
    notes = read_module_config(mha).notes
    assert any("XPOS relative positions" in n for n in notes) and not any("sub-LN" in n for n in notes), notes


def test_hunyuan_norms_after_rope_are_found_and_their_order_said():
    """HunYuan dense v1 names its q/k norms query_layernorm/key_layernorm (not found before) and applies them
    after RoPE; the reference normalises before it."""
    hy = SimpleNamespace(model_type="hunyuan_v1_dense", rope_theta=1e4)
    m = nn.Module()
    m.config, m.query_layernorm, m.key_layernorm = hy, nn.RMSNorm(8, eps=1e-5), nn.RMSNorm(8, eps=1e-5)
    r = read_module_config(m)
    assert r.get("qk_norm") == "rms", r.lines()
    assert any("query_layernorm/key_layernorm" in n and "normalises q and k after RoPE" in n for n in r.notes), r.notes


def test_a_norm_weight_gradient_mismatch_names_the_norm_order_the_note_names():
    """The gradient detail of a module whose note says it normalises q and k after RoPE names that order when the
    worst gradient is a norm weight's (the detail HunYuan's real layer gets), and not otherwise."""
    import dataclasses

    from proofs_checks.sanity.attention_render import _CUSTOM_BACKWARD, _norm_order_in_context

    @dataclasses.dataclass(frozen=True)
    class Row:
        name: str
        status: str
        detail: str

    def said(worst, notes, status="fail"):
        rows = [Row("gradients_match_reference", status, f"input gradient and 6 parameter gradients at T = 17; worst: "
                    f"parameter {worst} at T = 17; the gradient differs from the reference's autograd gradient "
                    f"{_CUSTOM_BACKWARD}")]
        _norm_order_in_context(rows, notes)
        return rows[0].detail

    note = ["query_layernorm/key_layernorm (RMSNorm): HunYuan normalises q and k after RoPE"]
    d = said("attn.key_layernorm.weight", note)
    assert "(the q/k norm applied after RoPE, which the note names)" in d and "custom backward" not in d, d
    assert _CUSTOM_BACKWARD in said("attn.q_proj.weight", note)  # another worst parameter: not the norms' order
    assert _CUSTOM_BACKWARD in said("attn.key_layernorm.weight", [])  # no note: nothing to name
    assert _CUSTOM_BACKWARD in said("attn.key_layernorm.weight", note, status="pass")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
@moved("HunYuan dense v1's real attention layer checked (importing transformers in the test's process, a check "
       "with gradients: ~2.5 CPU s); it adds the real library's layer end to end",
       "tests/test_attention_config.py::test_hunyuan_norms_after_rope_are_found_and_their_order_said",
       "tests/test_attention_config.py::test_a_norm_weight_gradient_mismatch_names_the_norm_order_the_note_names")
def test_hunyuan_at_init_names_the_norm_order_for_its_gradient_mismatch():
    """At initialisation (norm weights 1) the outputs agree with the reference, but the norm weights' gradients
    do not: the detail names the order, not "a custom backward?"."""
    import transformers
    from transformers.masking_utils import create_causal_mask
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as M

    c = transformers.HunYuanDenseV1Config(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, head_dim=4,
                                          num_hidden_layers=1, intermediate_size=32, attention_dropout=0.0)
    c._attn_implementation = "eager"

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.rot, self.dim = M.HunYuanDenseV1Attention(c, 0), M.HunYuanDenseV1RotaryEmbedding(c), 16

        def forward(self, x):
            pos = torch.arange(x.shape[1])[None]
            return self.attn(x, attention_mask=create_causal_mask(c, x, None, None, pos),
                             position_embeddings=self.rot(x, pos))[0]

    torch.manual_seed(0)
    r = run_attention(Layer(), causal=True, positional="rope", compute_dtype="float32", mode="quick", seq_len="1,5,17")
    g = {p["name"]: p for p in r.doc["properties"]}["gradients_match_reference"]
    assert g["status"] == "fail" and "the q/k norm applied after RoPE" in g["detail"], g["detail"]
    assert "custom backward" not in g["detail"]


def test_bitnet_attn_sub_norm_is_said():
    m = nn.Module()
    m.config, m.attn_sub_norm = SimpleNamespace(model_type="bitnet", rope_theta=5e5), nn.RMSNorm(16)
    notes = read_module_config(m).notes
    assert any(n.startswith("attn_sub_norm (RMSNorm") and "sub-LN" in n for n in notes), notes


def test_falcon_h1_key_multiplier_is_the_scale_said():
    """Falcon-H1 multiplies k by config.key_multiplier: the scale factor was explained only by numerical
    coincidences ("fits 1/√H …; or 1/(layer index + 1)"); the module's own multiplier is said, declarable."""
    m = nn.Module()
    m.config, m.scaling, m.key_multiplier, m.head_dim = SimpleNamespace(model_type="falcon_h1"), 8 ** -0.5, 0.5, 8
    r = read_module_config(m)
    note = next(n for n in r.notes if n.startswith("scaling × key_multiplier = 0.176777"))
    assert "Falcon-H1's µP multiplier" in note and "--scale 0.1767766952966369 declares it" in note, note
    from proofs_checks.sanity._modconfig import scaling_note

    assert scaling_note(r, 0.1767766952966369).endswith("as declared by --scale")
