"""scale.param_counts: the closed form against numel() of torch modules, input handling."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import scale as ns
from theory import scale as ts
from theory.validation import InputError


@st.composite
def configs(draw):
    heads = draw(st.sampled_from([1, 2, 3, 4]))
    d = heads * draw(st.integers(1, 12))
    return ns.ModelConfig("h", draw(st.integers(1, 4)), d, heads, draw(st.integers(1, 200)), draw(st.integers(1, 64)),
                          draw(st.sampled_from(["gpt", "bert"])), type_vocab=draw(st.integers(1, 3)))


@settings(max_examples=25)
@given(configs())
def test_formula_equals_numel_of_meta_models(cfg):
    n = ns.total_params(cfg)
    assert n == ns.count_params(ns.build_meta_model(cfg, "torch")) == ns.count_params(ns.build_meta_model(cfg, "gpt"))


@settings(max_examples=25)
@given(st.integers(1, 40), st.sampled_from([1, 2, 4]))
def test_per_layer_equals_transformer_encoder_layer(d, heads):
    d = d * heads
    with torch.device("meta"):
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d)
    assert ns.per_layer_params(d) == ns.count_params(layer) == 12 * d * d + 13 * d


@given(st.integers(1, 10_000), st.integers(1, 8))
def test_general_mlp_ratio_matches_derivation(d, r):
    der = ts.derive_param_counts()
    s = der.facts["symbols"]
    assert ns.per_layer_params(d, r) == int(der.facts["per_layer_r"].subs({s["d"]: d, s["r"]: r}))


def test_gpt_block_runs_and_counts_on_cpu():
    blk = ns.GPTBlock(16, 4).double()
    y = blk(torch.randn(2, 5, 16, dtype=torch.float64))
    assert y.shape == (2, 5, 16) and ns.count_params(blk) == ns.per_layer_params(16)


def test_table_counts_are_the_known_ones():
    # BertModel (bert-base-uncased) has 109,482,240 parameters; GPT-2 XL 1,557,611,200
    counts = {c.name: ns.total_params(c) for c in ns.TABLE}
    assert counts["BERT-Base"] == 109_482_240 and counts["GPT-2"] == 1_557_611_200


@pytest.mark.parametrize("text,expected", [("110M", (110e6, 105e6, 120e6)), ("8.3B", (8.3e9, 8.25e9, 8.4e9)),
                                           ("175B", (175e9, 174.5e9, 176e9)), ("~340M", (340e6, 335e6, 350e6))])
def test_published_interval(text, expected):
    assert ns.published_interval(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["110", "abcM", ""])
def test_published_interval_rejects_bad_text(text):
    with pytest.raises(InputError):
        ns.published_interval(text)


def test_bad_configs_raise_input_error():
    with pytest.raises(InputError, match="must divide"):
        ns.ModelConfig("x", 1, 10, 3, 5, 5)
    with pytest.raises(InputError, match="positive"):
        ns.ModelConfig("x", 0, 8, 2, 5, 5)
    with pytest.raises(InputError, match="style"):
        ns.ModelConfig("x", 1, 8, 2, 5, 5, style="t5")
    with pytest.raises(InputError, match="block"):
        ns.build_meta_model(ns.TABLE[0], "rnn")
