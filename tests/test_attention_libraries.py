"""``check attention`` on real modules of real library releases (issue 42: config is evidence, not a
fact). Each release comes from the survey's install cache (``tverify survey`` installs pinned releases
there, with the dependencies the environment lacks: docs/survey.md; ``TVERIFY_SURVEY_CACHE`` moves it);
a test whose release is not there skips, naming it. The checks run in a child process with the release
on ``PYTHONPATH`` (two transformers releases cannot share a process). The release-semantics table
itself is tested without any install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proofs_checks.sanity import _libsemantics as sem

ROOT = Path(__file__).resolve().parents[1]


def _cache() -> Path:
    from proofs_checks.survey.runner import default_cache

    c = default_cache()
    return c if c.is_absolute() else ROOT / c


def _release(*specs: str) -> list[str]:
    """The cache folders holding ``specs`` (``transformers==4.40.0``), or skip naming the missing one."""
    from proofs_checks.survey.runner import MARKER

    out = []
    for spec in specs:
        folder = _cache() / spec.replace("==", "-")
        if not (folder / MARKER).exists():
            pytest.skip(f"{spec} is not in the survey cache ({folder}): `tverify survey` installs it there")
        out.append(str(folder))
    return out


def _env(paths: list[str]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(paths + [str(ROOT)]))
    return env


def _check(tmp_path: Path, paths: list[str], source: str, fn: str, *flags: str) -> tuple[int, dict, str]:
    """``tverify check attention --module FILE:fn --quick --json -`` in a child process."""
    f = tmp_path / "mod.py"
    f.write_text(textwrap.dedent(source))
    p = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "attention", "--module", f"{f}:{fn}", "--quick",
                        "--no-progress", "--json", "-", *flags], capture_output=True, text=True, env=_env(paths),
                       cwd=tmp_path, timeout=600)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    return p.returncode, doc, p.stdout + p.stderr


def _read(paths: list[str], code: str) -> str:
    """Run ``code`` (which prints) in a child process with the releases on the path."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=_env(paths),
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _ok_reading(tmp_path: Path, paths: list[str], source: str, fn: str, key: str, *flags: str) -> tuple[str, dict]:
    """The check ends ok (exit 0); the ``config_read`` line of ``key`` and the JSON document."""
    code, doc, out = _check(tmp_path, paths, source, fn, *flags)
    assert code == 0, out[-3000:]
    line = [ln for ln in doc["config_read"] if ln.startswith(key)]
    assert line, doc["config_read"]
    return line[0], doc


def _props(doc: dict) -> dict:
    return {p["name"]: p["status"] for p in doc.get("properties", [])}


# -- the release-semantics table (no install) ------------------------------------------------------

@pytest.mark.parametrize("model, version, path, want", [
    ("mistral", "4.34.0", "eager", (4, 0)),
    ("mistral", "4.35.0", "eager", (3, 0)),
    ("mistral", "4.38.2", "sdpa", None),
    ("mistral", "4.39.3", "sdpa", None),
    ("mistral", "4.39.3", "eager", (4, 0)),
    ("mistral", "4.40.0", "sdpa", (4, 0)),
    ("mistral", "4.41.2", "eager", (4, 0)),
    ("mistral", "4.42.0", "sdpa", (3, 0)),
    ("mistral", "5.23.0", "sdpa", (3, 0)),
    ("starcoder2", "4.39.3", "sdpa", None),
    ("starcoder2", "4.40.0", "sdpa", (4, 0)),
    ("starcoder2", "4.44.0", "eager", None),
    ("starcoder2", "4.46.0", "sdpa", (3, 0)),
    ("qwen2", "4.53.0", "eager", (3, 0)),
    ("mistral", "4.40.0", "flash", (4, 0)),
])
def test_sliding_window_4_means_by_release(model, version, path, want):
    wm = sem.hf_window(model, 4, sem.Library("transformers", version), path)
    assert wm is not None and wm.span == want, wm


def test_a_window_of_an_unknown_release_is_not_interpreted():
    assert sem.hf_window("qwen2", 4, sem.Library("transformers", "4.45.0"), "sdpa") is None
    assert sem.hf_window("mistral", 4, sem.Library("transformers", None), "sdpa") is None
    assert sem.hf_window("mistral", 4, None, "sdpa") is None
    assert sem.window_text((4, 0)) == "keys t−4 … t (5 keys)" and sem.window_text((3, None)) == "keys t−3 … every later key"


# -- Mistral: one config value, three meanings --------------------------------------------------------

MISTRAL = '''
    import torch
    from torch import nn
    from transformers import MistralConfig, MistralModel

    class L(nn.Module):  # the decoder layer reduced to its attention: MistralModel passes it the mask it built
        def __init__(self, attn):
            super().__init__()
            self.self_attn = attn
        def forward(self, h, **kw):
            return (self.self_attn(h, **kw)[0],)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            c = MistralConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                              num_hidden_layers=1, vocab_size=8, sliding_window=4, attention_dropout=0.0)
            m = MistralModel(c)  # the SDPA path: transformers picks it when torch has SDPA
            m.layers[0], m.norm = L(m.layers[0].self_attn), nn.Identity()
            self.m, self.dim = m, 32
        def forward(self, x):
            # 4.39/4.40's _make_causal_mask fills torch.full(..., finfo(dtype).min) in the default dtype: a
            # float64 input overflows it unless the default dtype is the input's
            old = torch.get_default_dtype()
            torch.set_default_dtype(x.dtype if x.dtype in (torch.float32, torch.float64) else old)
            try:
                return self.m(inputs_embeds=x, use_cache=False).last_hidden_state
            finally:
                torch.set_default_dtype(old)

    def make():
        return Wrap()
'''
_MISTRAL_FLAGS = ("--positional", "rope", "--compute-dtype", "float32", "--seq-len", "1,2,5,9,17")


def test_mistral_4_40_sdpa_keeps_sliding_window_plus_one_keys_and_window_5_is_ok(tmp_path):
    paths = _release("transformers==4.40.0")
    line, doc = _ok_reading(tmp_path, paths, MISTRAL, "make", "window", "--window", "5", *_MISTRAL_FLAGS)
    assert line.startswith("window 5 (m.config.sliding_window = 4, transformers 4.40.0: keys t−4 … t (5 keys) (sdpa "
                           "path"), line
    assert "as declared by --window" in line and _props(doc)["window_respected"] == "pass"
    # the config's number as written, what 4.40 means by it, and the window the module keeps as measured
    assert doc["inputs"]["window_measured"].startswith(
        "config read m.config.sliding_window = 4 (transformers 4.40.0: keys t−4 … t (5 keys)"), doc["inputs"]
    assert "declared 5 keys (t−4 … t); the module keeps 5 keys (t−4 … t) as measured" in doc["inputs"]["window_measured"]
    # undeclared, the window read is the one checked
    code, doc, out = _check(tmp_path, paths, MISTRAL, "make", *_MISTRAL_FLAGS)
    assert code == 0 and doc["inputs"]["window"] == [4, 0], out[-3000:]


def test_mistral_4_39_3_sdpa_ignores_the_window_and_window_5_is_a_mismatch(tmp_path):
    paths = _release("transformers==4.39.3")
    code, doc, out = _check(tmp_path, paths, MISTRAL, "make", "--window", "5", *_MISTRAL_FLAGS)
    assert code == 1 and _props(doc)["window_respected"] == "fail", out[-3000:]
    assert not any(ln.startswith("window") for ln in doc["config_read"])
    (tmp_path / "mistral.py").write_text(textwrap.dedent(MISTRAL))
    notes = _read(paths, f'''
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        from mistral import make
        from proofs_checks.sanity._modconfig import read_module_config
        print(read_module_config(make()).notes)
    ''')
    assert "m.config.sliding_window = 4 (transformers 4.39.3, sdpa path: the mask the model builds has no window " \
           "(full causal attention)): not used as a window" in notes, notes


# -- x-transformers ---------------------------------------------------------------------------------------

XT = '''
    import torch
    from torch import nn
    from x_transformers.x_transformers import Attention

    def past3():  # not causal: a look-back of 3 keys, every later key visible
        return Attention(dim=32, heads=4, dim_head=8, max_attend_past=3)

    def past3_causal():
        return Attention(dim=32, heads=4, dim_head=8, max_attend_past=3, causal=True)

    class Bidir(nn.Module):  # says is_causal = False; its inner attention's True is about its own use
        is_causal = False
        def __init__(self):
            super().__init__()
            self.inner = nn.MultiheadAttention(32, 4, batch_first=True)
            self.inner.is_causal = True
            self.dim = 32
        def forward(self, x):
            return self.inner(x, x, x, need_weights=False)[0]

    def bidir():
        return Bidir()
'''


#: x-transformers' Attend computes its softmax in float32 (F.softmax(..., dtype=torch.float32) without qk_norm):
#: declared, or precision_as_declared names it
_XT32 = ("--compute-dtype", "float32")


def test_x_transformers_max_attend_past_is_a_look_back_not_causality(tmp_path):
    paths = _release("x-transformers==2.31.10")
    code, doc, out = _check(tmp_path, paths, XT, "past3", *_XT32)
    assert code == 0 and doc["inputs"]["causal"] is False and doc["inputs"]["window"] == [3, None], out[-3000:]
    assert any(ln.startswith("window 3,∞ (max_attend_past = 3, x-transformers 2.31.10: keys t−3 … every later key")
               for ln in doc["config_read"]), doc["config_read"]
    code, doc, out = _check(tmp_path, paths, XT, "past3_causal", *_XT32)
    assert code == 0 and doc["inputs"]["causal"] is True and doc["inputs"]["window"] == [3, 0], out[-3000:]
    assert "the module keeps 4 keys (t−3 … t) as measured" in doc["inputs"]["window_measured"], doc["inputs"]


def test_a_submodule_is_causal_does_not_override_the_module_false(tmp_path):
    paths = _release("x-transformers==2.31.10")  # any release: the module is plain torch
    code, doc, out = _check(tmp_path, paths, XT, "bidir")
    assert code == 0 and doc["inputs"]["causal"] is False and doc["config_read"] == [], out[-3000:]


# -- transformers 5.23 families outside the survey, diffusers ---------------------------------------------

HF5 = '''
    import math
    import torch
    from torch import nn

    def _causal(T, dt):
        return torch.zeros(T, T, dtype=dt).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)[None, None]

    class GPTJ(nn.Module):  # a layer called with the causal mask GPTJModel builds
        def __init__(self, cls="gptj"):
            super().__init__()
            if cls == "gptj":
                from transformers import GPTJConfig as C
                from transformers.models.gptj.modeling_gptj import GPTJAttention as A
            else:
                from transformers import CodeGenConfig as C
                from transformers.models.codegen.modeling_codegen import CodeGenAttention as A
            c = C(n_embd=32, n_head=4, rotary_dim=4, n_layer=1, attn_pdrop=0.0, resid_pdrop=0.0)
            c._attn_implementation = "eager"
            self.attn, self.dim = A(c, 0), 32
        def forward(self, x):
            T = x.shape[1]
            return self.attn(x, attention_mask=_causal(T, x.dtype), position_ids=torch.arange(T)[None])[0]

    class Cohere(nn.Module):
        def __init__(self):
            super().__init__()
            from transformers import CohereConfig
            from transformers.models.cohere.modeling_cohere import CohereAttention, CohereRotaryEmbedding
            c = CohereConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                             num_hidden_layers=1, use_qk_norm=True, attention_dropout=0.0)
            c._attn_implementation = "eager"
            self.attn, self.rot, self.dim = CohereAttention(c, 0), [CohereRotaryEmbedding(c)], 32
            with torch.no_grad():  # trained norms are not unit: draw them
                for n in (self.attn.q_norm, self.attn.k_norm):
                    n.weight.normal_(1.0, 0.3)
        def forward(self, x):
            T = x.shape[1]
            return self.attn(x, self.rot[0](x, torch.arange(T)[None]), _causal(T, x.dtype))[0]

    class Diffusers(nn.Module):
        def __init__(self):
            super().__init__()
            from diffusers.models.attention_processor import Attention
            self.attn, self.dim = Attention(query_dim=32, heads=4, dim_head=8, bias=True), 32
        def forward(self, x):
            return self.attn(x)

    def gptj():
        return GPTJ()

    def codegen():
        return GPTJ("codegen")

    def cohere():
        return Cohere()

    def diffusers_attention():
        return Diffusers()
'''
_RoPE32 = ("--positional", "rope", "--compute-dtype", "float32", "--seq-len", "1,2,5,17")


def test_gptj_rotary_dim_and_interleaved_rope_are_read_and_ok(tmp_path):
    paths = _release("transformers==5.23.0")
    code, doc, out = _check(tmp_path, paths, HF5, "gptj", *_RoPE32)
    assert code == 0, out[-3000:]
    assert "rope_dims 4 (attn.rotary_dim, transformers 5.23.0)" in doc["config_read"]
    assert doc["inputs"]["rope"]["dims"] == 4


def test_codegen_sharded_qkv_is_inconclusive_asking_for_a_mapping(tmp_path):
    paths = _release("transformers==5.23.0")
    code, doc, out = _check(tmp_path, paths, HF5, "codegen", *_RoPE32)
    assert code == 3 and doc["outcome"] == "inconclusive", out[-3000:]
    mr = [p for p in doc["properties"] if p["name"] == "matches_reference"][0]
    assert mr["status"] == "skip" and mr["detail"].startswith(
        "attn (CodeGenAttention): its qkv_proj packs (q, v, k) in mp_num = 4"), mr
    assert doc["decision"]["suggestion"].startswith("declare the q, k, v weights with --mapping FILE.py:fn"), doc["decision"]
    assert "no projections found by name" not in out and "no q/k/v projections" not in out
    why = _read(paths, f'''
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        from mod import codegen
        from numerics.attention_mapping import find_mappings, mapping_obstacle
        m = codegen()
        c = find_mappings(m, 32)
        print(len(c), "|", c.why, "|", mapping_obstacle(m) == c.why)
    ''')
    assert why.startswith("0 | attn (CodeGenAttention): its qkv_proj packs (q, v, k) in mp_num = 4") and \
        "cannot be mapped without a mapping" in why and why.strip().endswith("| True"), why


def test_cohere_per_head_qk_norms_are_measured_and_ok(tmp_path):
    # no --qk-norm, no --rope-convention: the kind is measured and the convention read from the module
    line, doc = _ok_reading(tmp_path, _release("transformers==5.23.0"), HF5, "cohere", "qk_norm", *_RoPE32)
    assert doc["inputs"]["qk_norm"] == "layer" and doc["inputs"]["rope"]["convention"] == "interleaved", doc["inputs"]
    assert "QK-norm weights .attn.q_norm (CohereLayerNorm)" in doc["inputs"].get("mapping", ""), doc["inputs"]
    assert line.startswith("qk_norm layer (attn.q_norm CohereLayerNorm, attn.k_norm CohereLayerNorm, transformers "
                           "5.23.0: measured: a layer norm") and "per head (4 × 8 weight)" in line, line


def test_diffusers_attention_to_out_modulelist_is_the_output_projection(tmp_path):
    paths = _release("diffusers==0.42.0")
    code, doc, out = _check(tmp_path, paths, HF5, "diffusers_attention", "--compute-dtype", "float32", "--seq-len",
                            "1,2,5,17")
    assert code == 0, out[-3000:]
    assert ".attn.to_out[0] (nn.Linear)" in out


def test_readings_of_roformer_gpt_neo_and_t5_norms(tmp_path):
    paths = _release("transformers==5.23.0")
    out = _read(paths, '''
        import torch
        from torch import nn
        from transformers import GPTNeoConfig, RoFormerConfig, RoFormerModel, T5Config
        from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention
        from transformers.models.t5.modeling_t5 import T5LayerNorm
        from proofs_checks.sanity._modconfig import read_module_config
        rc = RoFormerConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=1,
                            is_decoder=True, vocab_size=8, embedding_size=32)
        print(read_module_config(RoFormerModel(rc)).lines())
        rc.is_decoder = False
        print(read_module_config(RoFormerModel(rc)).get("causal"))
        nc = GPTNeoConfig(hidden_size=32, num_heads=4, num_layers=2, attention_types=[[["global", "local"], 1]],
                          window_size=3)
        print(read_module_config(GPTNeoSelfAttention(nc, "local", 1)).lines())
        print(read_module_config(GPTNeoSelfAttention(nc, "global", 0)).get("window"))
        t5 = nn.Module()
        t5.q_norm, t5.k_norm = T5LayerNorm(8), T5LayerNorm(8)
        print(read_module_config(t5).get("qk_norm"))
    ''').splitlines()
    assert out[0] == "['causal (config.is_decoder, transformers 5.23.0: RoFormerModel builds a causal mask)']", out
    assert out[1] == "None"
    assert "'causal (is_causal, transformers 5.23.0)'" in out[2] and "window 3 (config.window_size = 3, attention_type " \
        "'local', transformers 5.23.0: keys t−2 … t (3 keys)" in out[2], out
    assert out[3] == "None" and out[4] == "rms", out


@pytest.mark.parametrize("spec, want", [
    ("transformers==4.40.0", "window 5 (config.sliding_window = 4, transformers 4.40.0: keys t−4 … t (5 keys)"),
    ("transformers==4.39.3", "config.sliding_window = 4 (transformers 4.39.3, sdpa path: the mask the model builds has no "
                             "window (full causal attention)): not used as a window"),
])
def test_starcoder2_sliding_window_is_read_by_release(spec, want):
    out = _read(_release(spec), '''
        from transformers import Starcoder2Config, Starcoder2Model
        from proofs_checks.sanity._modconfig import read_module_config
        c = Starcoder2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                             num_hidden_layers=1, vocab_size=8, sliding_window=4)
        r = read_module_config(Starcoder2Model(c))
        print(r.lines(), r.notes)
    ''')
    assert want in out, out
