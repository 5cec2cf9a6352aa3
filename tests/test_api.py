"""The Python API (``proofs_checks.check_*``, ``run_claims``): lazy re-exports, the same result
objects as the CLI (text table, HTML, JSON), bad input as ``InputError`` (a ValueError) with the
CLI's one-line message."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import proofs_checks
from theory.validation import InputError

sys.path.insert(0, "tests/data")
from own_attention import CausalSelfAttention, leaky  # noqa: E402

sys.path.pop(0)


def test_names_are_reexported_lazily():
    for name in ("check_attention", "check_icl_model", "check_hopfield", "check_att_svm", "run_claims"):
        assert name in dir(proofs_checks) and callable(getattr(proofs_checks, name))


def test_attention_result_renders_as_table_html_and_json():
    # quick sizes, in this process (issue 46): what is tested is the rendering of a result, the same at any
    # size and wherever the module ran
    r = proofs_checks.check_attention(CausalSelfAttention(), causal=True, mode="quick", isolate=False)
    assert r.ok and r.exit_code == 0
    text = str(r)
    assert text.splitlines()[0].startswith("tverify check attention: ok") and "causal_no_future_leak" in text
    html = r._repr_html_()
    assert "<table>" in html and "causal_no_future_leak" in html
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert doc["ok"] is True and doc["decision"]["exit_code"] == 0
    bad = proofs_checks.check_attention(leaky(), causal=True, mode="quick", isolate=False)
    assert not bad.ok and "causal_no_future_leak" in bad.failed and "FAIL" in str(bad)
    assert bad.to_markdown().count("| causal_no_future_leak | FAIL |") == 1


def test_bad_input_is_a_value_error():
    with pytest.raises(InputError, match="returned shape"):
        proofs_checks.check_attention(lambda x: x[:, :1], dim=4)
    with pytest.raises(ValueError, match="at least 2"):
        proofs_checks.check_hopfield(np.ones((1, 3)))
    with pytest.raises(InputError, match="no claim matches"):
        proofs_checks.run_claims("no_such_group_xyz")


def test_hopfield_with_user_module_and_att_svm_weights():
    def modern(xi, patterns, beta):
        import torch

        return torch.softmax(beta * xi @ patterns.T, -1) @ patterns

    P = np.sign(np.random.default_rng(1).normal(size=(5, 12)))
    r = proofs_checks.check_hopfield(P, beta=0.5, module=modern)
    assert r.ok and "update_matches_modern" in [p["name"] for p in r.properties]
    from numerics.att_svm import make_instance

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    with pytest.raises(InputError, match=r"weights: W must be \(6, 6\) for the data.s d = 6"):
        proofs_checks.check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=np.ones((4, 4)))


def test_run_claims_result():
    run = proofs_checks.run_claims(["attn.softmax_simplex"], mode="quick", seed=3)
    assert run.ok and run.exit_code == 0 and "attn.softmax_simplex" in str(run)
    assert run.to_json()["seed"] == 3 and "<table>" in run._repr_html_()
