"""Statements of the attention claims (issue 33): every hypothesis that carries a counterexample is
shown necessary (its statement mutant is killed), and the corrected statements' counterexample values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from numerics import attention as na
from proofs_checks.context import RunContext
from proofs_checks.registry import get_claim
from proofs_checks.runner import run_mutant
from theory import attention as ta

from proofs_checks.claims import load_all  # noqa: E402

load_all()  # the built-in claims registered as built-in first: a claim module imported by a test alone was refused as a plugin's

IDS = ["attn.softmax_simplex", "attn.convex_combination", "attn.causal_mask", "attn.scaling_variance",
       "attn.forms_agree", "attn.mhsa_sum_equals_concat", "attn.permutation_equivariance", "attn.layernorm",
       "attn.block_recipe", "attn.complexity", "attn.sinusoidal_pe"]
#: hypotheses each claim must show necessary (a counterexample, not a note)
NECESSARY = {
    "attn.softmax_simplex": {"T_ge_2"},
    "attn.convex_combination": set(),
    "attn.causal_mask": {"mask_minus_infinity", "diagonal_unmasked", "tokenwise_qkv"},
    "attn.scaling_variance": {"q_independent_of_k", "independent_entries", "zero_mean", "unit_variance"},
    "attn.forms_agree": {"rename_004", "rename_000"},
    "attn.mhsa_sum_equals_concat": {"wo_blocks_in_head_order", "torch_scale_absorbed"},
    "attn.permutation_equivariance": {"no_positional_encoding", "no_causal_mask", "tokenwise_sublayers", "dropout_off"},
    "attn.layernorm": {"v_plus_eps_positive"},
    "attn.block_recipe": {"dropout_off", "relu_mlp"},
    "attn.complexity": {"shared_projection", "d_fixed"},
    "attn.sinusoidal_pe": {"d_even"},
}


def _cx(cid, name):
    return get_claim(cid).hypothesis(name).counterexample(RunContext(mode="quick"))


@pytest.mark.parametrize("cid", IDS)
def test_statement_is_declared_and_its_mutants_are_killed(cid):
    claim = get_claim(cid)
    assert claim.declared and claim.hypotheses, cid
    assert {h.name for h in claim.hypotheses if h.counterexample} == NECESSARY[cid]
    for m in claim.statement_mutants():
        assert run_mutant(claim, m, RunContext(mode="quick")).killed, f"{cid}: {m.name} survived"
    for c in claim.clauses:  # a clause at fixed sizes or checked says which ones
        assert all(scope.strip() for _, scope in c.evidences())


def test_softmax_one_token_is_not_in_the_open_interval():
    cx = _cx("attn.softmax_simplex", "T_ge_2")
    assert cx.violated and float(na.softmax(np.array([[0.3]]))[0, 0]) == 1.0


def test_layernorm_eps0_constant_token_is_0_over_0():
    cx = _cx("attn.layernorm", "v_plus_eps_positive")
    assert cx.violated and cx.clause == "mean_zero"
    with np.errstate(all="ignore"):
        assert np.isnan(na.layernorm(np.full((1, 4), 2.0), 0.0)).all()
    z = na.layernorm(np.full((1, 4), 2.0), 1e-3)  # ε > 0: defined, mean 0 and variance 0 = v/(v + ε)
    assert np.all(z == 0.0)


def test_causal_mask_counterexamples():
    assert _cx("attn.causal_mask", "mask_minus_infinity").error > 1e-6  # a finite mask (−10) leaks
    strict = _cx("attn.causal_mask", "diagonal_unmasked")
    assert strict.violated and math.isnan(strict.error)  # row 1 of the strict mask: 0/0
    assert _cx("attn.causal_mask", "tokenwise_qkv").error == pytest.approx(1.0)
    _, A = na.causal_attention(*np.random.default_rng(0).normal(size=(3, 4, 2)))
    assert A[0, 0] == 1.0 and np.allclose(A.sum(-1), 1.0)  # with the mask as stated, row 1 is e_1


@pytest.mark.parametrize("name, variance", [("q_independent_of_k", 0.0), ("independent_entries", 4.0),
                                            ("zero_mean", 6.0), ("unit_variance", 32.0)])
def test_scaling_variance_exact_counterexamples(name, variance):
    cx = _cx("attn.scaling_variance", name)
    assert cx.violated and cx.error == pytest.approx(abs(variance - 2.0))


def test_scaling_variance_holds_exactly_on_a_law_meeting_every_hypothesis():
    from proofs_checks.claims.attention_forms import _iid_law, _independent_pair

    law = _iid_law((-1.0, 1.0), 3)
    assert na.score_moments_exact(*_independent_pair(law, law)) == (0.0, 3.0)


def test_complexity_counterexamples():
    assert ta.count_attention_macs(3, 2, 4) == {"shared_scores": 42, "separate_scores": 66, "head": 132}
    assert _cx("attn.complexity", "d_fixed").error == pytest.approx(0.5)


def test_odd_width_pe_has_no_shift_matrix():
    assert _cx("attn.sinusoidal_pe", "d_even").error > 1e-4
    pos = np.arange(0.0, 4096.0)
    A, B = na.sinusoidal_pe_any_width(pos, 4), na.sinusoidal_pe_any_width(pos + 1, 4)
    assert np.abs(A @ na.pe_shift_matrix(1, 4) - B).max() < 1e-11  # even D: the rotation


@pytest.mark.parametrize("name", ["no_positional_encoding", "no_causal_mask", "tokenwise_sublayers", "dropout_off"])
def test_permutation_breakers_are_far_above_rounding(name):
    cx = _cx("attn.permutation_equivariance", name)
    assert cx.error > 1e3 * cx.tolerance


def test_permutation_dropout_counterexample_and_fixed_sizes():
    cx = _cx("attn.permutation_equivariance", "dropout_off")
    assert cx.violated and cx.clause == "equivariant" and cx.error > 0.1  # train mode, same seed: 0.253
    claim = get_claim("attn.permutation_equivariance")
    assert "N = 3" in claim.fixed_sizes and "N = 6" in claim.fixed_sizes and "every N" not in claim.fixed_sizes


def test_softmax_open_interval_is_derived_not_checked():
    (clause,) = [c for c in get_claim("attn.softmax_simplex").clauses if c.name == "open_interval"]
    assert {ev for ev, _ in clause.evidences()} == {"derived", "derived_at"}
    # float64 rounds the open interval to the closed one: exact 0 and exact 1
    assert float(na.softmax(np.array([[40.0, 0.0]]))[0, 0]) == 1.0
    assert (na.softmax(np.array([[750, -750, 0, 749, -1, 3, 750.0]])) == 0.0).sum() == 4


def test_scaling_variance_does_not_assume_identical_laws():
    claim = get_claim("attn.scaling_variance")
    assert "identically_distributed" not in {h.name for h in claim.hypotheses}
    assert "not a hypothesis" in claim.notes
