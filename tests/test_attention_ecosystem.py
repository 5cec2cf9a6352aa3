"""``tverify check attention`` on real implementations from pip-installable libraries (the
``[ecosystem]`` extra: ``pip install -e '.[ecosystem]'``; ``.ci/run`` installs it). Each test skips,
with the reason, when its library is absent. Adapters: ``tests/data/ecosystem_attention.py``. GPT-2 and
x-transformers (several checks, each importing the library in its own process) run in the integration tier; what
they find is pinned in ``make test`` on the small corpus modules (each mark's ``pinned_by``)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.cli_helpers import invoke
from tests.tiers import moved

MOD = "tests/data/ecosystem_attention.py"


def need(pkg: str):
    return pytest.mark.skipif(importlib.util.find_spec(pkg) is None,
                              reason=f"{pkg} not installed (pip install -e '.[ecosystem]')")


def run(name, *args):
    code, out, err = invoke("check", "attention", "--module", f"{MOD}:{name}", "--quick", "--no-progress", *args)
    failed = [line.split()[0] for line in out.splitlines() if "  FAIL  " in line]
    return code, out + err, failed


@need("x_transformers")
@moved("x-transformers' real attention (three configurations, each checked undeclared then declared: six checks, "
       "each importing the library in its own process, ~11 CPU s); it adds the real library end to end: its "
       "float32 softmax found and, declared, every property holding",
       "tests/test_attention_corpus.py::test_float32_internals_are_a_precision_finding_not_a_tolerance",
       "tests/test_attention_corpus.py::test_correct_implementations_are_ok",
       "tests/test_attention_hints.py::test_float32_undeclared_is_a_precision_mismatch_with_the_verified_hint",
       "tests/test_attention_declared_pins.py::test_float32_internals_declared_print_the_declared_working_precision")
@pytest.mark.parametrize("name, args", [
    ("xt_causal", ("--causal",)),
    ("xt_gqa", ("--causal",)),  # grouped-query attention, key/value heads tiled (h % kv)
    ("xt_softcap", ("--causal", "--softcap", "30")),
])
def test_x_transformers_float32_internals_are_named_then_declared(name, args):
    """Its softmax is float32: undeclared, precision_as_declared names it (issue 42: precision is never found
    by probing); declared, every property holds."""
    code, out, failed = run(name, *args)
    assert code == 1 and "precision_as_declared" in failed and "it computes in float32, not float64" in out, out
    code, out, failed = run(name, *args, "--compute-dtype", "float32")
    assert code == 0 and "working precision: float32 (declared: --compute-dtype float32)" in out, out


@need("transformers")
@moved("Hugging Face GPT-2's real attention (three checks, each importing transformers in its own process, "
       "~11 CPU s); it adds the real library end to end: its Conv1D projections read, its unscaled and its "
       "unmasked variants named",
       "tests/test_attention_corpus.py::test_correct_implementations_are_ok",
       "tests/test_attention_corpus.py::test_planted_bugs_are_named",
       "tests/test_attention_declared_pins.py::test_hugging_face_conv1d_projections_are_read_and_named",
       "tests/test_attention_declared_pins.py::test_a_module_not_causal_declared_causal_leaks_and_the_hint_says_not_causal")
def test_hugging_face_gpt2_attention():
    code, out, _ = run("hf_gpt2", "--causal")
    assert code == 0 and "Conv1D" in out, out
    code, out, failed = run("hf_gpt2_unscaled", "--causal")  # scale_attn_weights=False
    assert code == 1 and "scale_1_over_sqrt_dk" in failed and "missing 1/√d_k" in out, out
    code, out, failed = run("hf_gpt2_no_mask", "--causal")  # the eager attention is not causal on its own
    assert code == 1 and "causal_no_future_leak" in failed and "not causal instead of the declaration" in out, out


@need("local_attention")
def test_local_attention_window():
    code, out, _ = run("LocalAttn", "--causal", "--window", "5")  # window_size 4, exact: 5 keys
    assert code == 0, out
    code, out, failed = run("LocalAttn", "--causal", "--window", "4")
    assert code == 1 and "window_respected" in failed and "--window 5 instead of the declaration" in out, out


@need("performer_pytorch")
def test_performer_causal_leak_found():
    """performer-pytorch 1.1.4's causal FAVOR+ leaks future tokens through its key max-stabiliser
    (an open upstream issue); it is also an approximation, so it does not match exact attention."""
    code, out, failed = run("performer_causal", "--causal")
    assert code == 1 and {"causal_no_future_leak", "prefix_consistency", "matches_reference"} <= set(failed), out


@need("local_attention")
def test_local_mha_causal_window_and_float32_rope_table_are_read():
    """LocalMHA says itself that it is causal (``causal = True``) and keeps keys t−4 … t (``window_size = 4``,
    ``exact_windowsize``: q − k > 4 masked): both read, the window measured. Its RoPE table is float32: a
    float64 run is a mismatch of 6e-10, whose reason is said (the frequencies against base^(−2i/d) in float64),
    not called a float32 computation (0.01·u32); declared --compute-dtype float32 it is ok."""
    code, out, failed = run("local_mha_causal", "--positional", "rope")
    assert code == 1 and failed == ["matches_reference", "gradients_match_reference"], out
    assert "causal (causal" in out and "window 5 (attn_fn.window_size = 4, look_backward = 1, exact_windowsize" in out
    assert "the module keeps 5 keys (t−4 … t) as measured" in out, out
    assert "attn_fn.rel_pos.inv_freq: the module's RoPE frequencies differ from 10000^(−2i/8) computed in float64" in out
    assert "instead of the declaration" not in out, out  # no hint restating the declaration
    code, out, _ = run("local_mha_causal", "--positional", "rope", "--compute-dtype", "float32")
    assert code == 0, out


@need("local_attention")
def test_local_mha_bucket_look_back_is_said_not_read_as_a_window():
    code, out, _ = run("local_mha_causal_buckets", "--positional", "rope", "--compute-dtype", "float32")
    assert "exact_windowsize = False" in out and "no sliding window declares it (not read)" in out, out
    assert "window 5 (" not in out and code == 1, out
