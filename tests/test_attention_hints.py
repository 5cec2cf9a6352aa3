"""Hints of ``tverify check attention`` (issue 37): off-by-one windows (any W, and L,R), RoPE
position offsets between queries and keys, and the finest precision that fits — each printed only
after a rerun with the hinted declaration passes at every probed length; the verdict stays
mismatch. A correct declaration gets no hint. Modules: ``tests/data/hint_attention.py``."""

from __future__ import annotations

import math

import pytest
import torch

from tests.cli_helpers import invoke

MOD = "tests/data/hint_attention.py"
VERIFIED = "(verified: with it, every probed length matches)"


def run(name, *args):
    code, out, err = invoke("check", "attention", "--module", f"{MOD}:{name}", "--quick", "--no-progress", *args)
    return code, out + err


def hint_lines(out):
    return [line for line in out.splitlines() if line.strip().startswith("to decide:")]


@pytest.mark.parametrize("name, wrong, right", [
    ("keeps7", ("--causal", "--window", "6"), "--window 7"),  # W + 1 kept
    ("keeps7", ("--causal", "--window", "8"), "--window 7"),  # W − 1 kept
    ("keeps11", ("--causal", "--window", "12"), "--window 11"),  # not one of the usual sizes
    ("two_sided_7_6", ("--window", "7,5"), "--window 7,6"),
])
def test_off_by_one_window_hint_verified(name, wrong, right):
    code, out = run(name, *wrong)
    assert code == 1 and "mismatch" in out, out
    assert f"with {right} instead of the declaration" in out and VERIFIED in out, out
    declared = [*right.split()] + (["--causal"] if wrong[0] == "--causal" else [])
    code, out = run(name, *declared)
    assert code == 0 and not hint_lines(out), out


def test_window_hint_not_printed_when_the_rerun_fails():
    """--window 7 fits at the lengths the hints screen (17, 33) but not at T = 5 (no causal mask
    below T = 10): the rerun at every length rejects it."""
    code, out = run("keeps7_open_when_short", "--causal", "--window", "6")
    assert code == 1 and "--window 7 instead" not in out, out


def test_rope_offset_between_queries_and_keys():
    code, out = run("rope_q_ahead", "--causal", "--positional", "rope")
    assert code == 1 and "matches_reference" in out.split("violates:")[1], out
    assert ("RoPE at query positions 1…T and key positions 0…T−1 (queries rotated 1 position ahead of the keys; only "
            "this difference is observable: a common offset of both leaves RoPE attention unchanged)") in out, out
    assert VERIFIED in out and "no flag declares it" in out, out
    for name in ("rope_ok", "rope_both_ahead"):  # a common offset is the same attention: ok, no hint
        code, out = run(name, "--causal", "--positional", "rope")
        assert code == 0 and not hint_lines(out), out


@pytest.mark.parametrize("name, args, dn", [
    ("in_float16", (), "float16"),
    ("in_bfloat16", (), "bfloat16"),  # not float16: bfloat16's errors miss float16's rule
    ("in_float32", ("--compute-dtype", "float64"), "float32"),  # float32 first: not "fits a float16 computation"
])
def test_precision_hint_names_the_finest_that_fits(name, args, dn):
    code, out = run(name, "--causal", *args)
    assert code == 1, out
    hs = [h for h in hint_lines(out) if "computation" in h]
    assert len(hs) == 1 and f"fits a {dn} computation" in hs[0] and VERIFIED in hs[0], out
    assert f"declare --compute-dtype {dn}" in hs[0]
    code, out = run(name, "--causal", "--compute-dtype", dn)
    assert code == 0 and not hint_lines(out), out


def test_float32_undeclared_is_a_precision_mismatch_with_the_verified_hint():
    """Issue 42: the precision is never found by probing; undeclared, the input's (float64) is judged."""
    code, out = run("in_float32", "--causal")
    assert code == 1 and "violates: precision_as_declared (it computes in float32, not float64)" in out, out
    hs = [h for h in hint_lines(out) if "computation" in h]
    assert len(hs) == 1 and "declare --compute-dtype float32" in hs[0] and VERIFIED in hs[0], out


def test_scale_bug_is_not_called_a_precision():
    """A 1% logit scale error also fits bfloat16's looser rule: the scale explains it, no precision hint."""
    code, out = run("f32_scale_off_1pct", "--causal", "--dtype", "float32")
    assert code == 1 and "scale_1_over_sqrt_dk" in out.split("violates:")[1], out
    assert "computation" not in " ".join(hint_lines(out)), out


def test_rope_offset_reference():
    """The reference's q/k position offset: only the difference is observable."""
    from numerics.attention_reference import Mapping, Structure, reference_attention

    g = torch.Generator().manual_seed(3)
    W = [torch.randn(8, 8, generator=g, dtype=torch.float64) / math.sqrt(8) for _ in range(4)]
    m = Mapping(W[0], None, W[1], None, W[2], None, W[3], None, heads=2, source="t")
    x = torch.randn(2, 9, 8, generator=g, dtype=torch.float64)
    st = Structure(causal=True, positional="rope")
    base = reference_attention(x, m, st)
    assert torch.allclose(reference_attention(x, m, st.variant(rope_offset=(5, 5))), base, atol=1e-12)
    assert not torch.allclose(reference_attention(x, m, st.variant(rope_offset=(1, 0))), base, atol=1e-6)
    assert "positions q 1…T−1+1, k 0…T−1+0" in st.variant(rope_offset=(1, 0)).describe()


def test_float32_rule_floor_at_large_logits():
    """The float32 rule is at least one rounding of the largest logit (F·u32·L): a correct float32
    attention that scales q first (as Keras) erred up to 2.3× the plain reference's error at logits
    ~1000 (benchmarks/RESULTS.md); a 1% scale error there is still far beyond it."""
    from numerics.attention_probe import tolerance, unit_roundoff

    u = unit_roundoff(torch.float32)
    tol, just = tolerance(1e-7, 16, 64, 1000.0, torch.float32, 2.0)
    assert tol >= 2 * u * 1000 and "one rounding of the largest logit" in just
    tol1, just1 = tolerance(3e-7, 16, 64, 1.0, torch.float32, 2.0)  # unit logits: the plain error rules
    assert tol1 == pytest.approx(2 * 3e-7 + 16 * unit_roundoff(torch.float64) * (3 * 16 + 64)) and "floor" not in just1
