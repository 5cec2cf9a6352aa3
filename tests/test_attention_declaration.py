"""The Declaration of ``check attention`` (issue 42): one object built by one function, validated once
before any user code runs; the command line, the Python API and the pytest fixture refuse the same bad
declaration with the identical line; every field carries its provenance; ``--scale`` is declarable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from proofs_checks import api
from proofs_checks.pytest_plugin import TverifyFixture
from proofs_checks.sanity.attention_declaration import (Declaration, DeclarationError, Provenance,
                                                        build_declaration)
from tests.cli_helpers import invoke, one_line_error

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import attention_corpus as C  # noqa: E402

MOD = "tests/data/attention_corpus.py"


def test_the_declaration_is_frozen_and_carries_provenance():
    d = build_declaration({"causal": True, "positional": "rope", "rope_base": 500000, "window": "4"})
    assert isinstance(d, Declaration) and d.window == (3, 0) and d.rope_base == 500000.0
    assert d.source("rope_base") == Provenance("given", "--rope-base (rope_base=)")
    assert d.source("heads").kind == "default"
    with pytest.raises(Exception):
        d.causal = False  # frozen
    r = d.read("heads", 4, "config.num_attention_heads (transformers 4.40.0)")
    assert r.heads == 4 and r.source("heads").kind == "read" and "transformers 4.40.0" in r.source("heads").text()
    assert r.read("rope_base", 10000.0, "config.rope_theta").rope_base == 500000.0  # the user's value wins


@pytest.mark.parametrize("values, cli, words", [
    ({"positional": "rope", "rope_base": 0.5}, ["--positional", "rope", "--rope-base", "0.5"],
     "--rope-base (rope_base=): must be a number > 1, got 0.5"),
    ({"causal": True, "heads": 3, "kv_heads": 2}, ["--causal", "--heads", "3", "--kv-heads", "2"],
     "heads must be a multiple of kv_heads"),
    ({"positional": "rope", "rope_dims": 3}, ["--positional", "rope", "--rope-dims", "3"],
     "--rope-dims (rope_dims=): 3: RoPE rotates pairs"),
    ({"scale": -1.0}, ["--scale", "-1"], "--scale (scale=): must be a positive number"),
    ({"softcap": 0.0}, ["--softcap", "0"], "--softcap (softcap=): must be a positive number, got 0.0"),
])
def test_the_same_bad_declaration_gets_the_identical_line_from_cli_api_and_fixture(values, cli, words, tmp_path):
    with pytest.raises(DeclarationError) as e:
        build_declaration(values)
    line = e.value.format_message()
    assert words in line, line
    # the command line: refused before the module is imported (a file that would raise on import)
    bad = tmp_path / "boom.py"
    bad.write_text("raise SystemExit('imported')\n")
    code, out, err = invoke("check", "attention", "--module", f"{bad}:A", *cli)
    assert line in one_line_error(code, err), err
    # the Python API and the pytest fixture: the identical line (InputError), before obj runs
    calls = []
    with pytest.raises(ValueError) as e_api:
        api.check_attention(lambda x: calls.append(x), **values)
    assert str(e_api.value) == line and not calls
    with pytest.raises(BaseException) as e_fix:
        TverifyFixture().check_attention(lambda x: calls.append(x), **values)
    assert line in str(e_fix.value) and not calls


def test_a_declared_scale_is_the_reference_scale():
    """T5-like unscaled logits (s = 1): a mismatch at 1/√d_k, ok with --scale 1."""
    from proofs_checks.sanity.attention import run_attention

    r = run_attention(C.gpt2_unscaled(), causal=True, mode="quick")
    assert r.outcome == "mismatch" and "scale_1_over_sqrt_dk" in r.failed, str(r)
    r = run_attention(C.gpt2_unscaled(), causal=True, mode="quick", scale=1.0)
    assert r.outcome == "ok", str(r)
    p = {q["name"]: q for q in r.properties}["scale_1_over_sqrt_dk"]
    assert "the declared 1 (--scale)" in p["detail"], p
