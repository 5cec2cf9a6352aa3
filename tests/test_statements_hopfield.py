"""Statements of the Hopfield claims (issue 33): every hypothesis that carries a counterexample is
shown necessary (its statement mutant is killed), the counterexamples' computed values, and what the
corrected statements now disclose (inherited assumptions, cited theorems, derived descent)."""

from __future__ import annotations

import math

import pytest
import sympy
import torch

from numerics import hopfield as nh
from proofs_checks.context import RunContext
from proofs_checks.registry import get_claim
from proofs_checks.runner import run_mutant
from theory import hopfield as th

#: hypotheses each claim must show necessary (a counterexample, not a note)
NECESSARY = {
    "hop.classical_energy": {"symmetric", "nonneg_diagonal", "asynchronous", "fair"},
    "hop.classical_capacity": {"iid_patterns", "hebbian_zero_diagonal"},
    "hop.dense_capacity": {"iid_patterns"},
    "hop.modern_energy": {"beta_positive"},
    "hop.one_step_retrieval": {"beta_positive", "separated", "query_near"},
    "hop.modern_capacity": {"beta_radius"},
    "hop.attention_identity": {"roles", "values_through_keys", "beta"},
}


def _cx(cid, name):
    return get_claim(cid).hypothesis(name).counterexample(RunContext(mode="quick"))


@pytest.mark.parametrize("cid", sorted(NECESSARY))
def test_statement_is_declared_and_its_mutants_are_killed(cid):
    claim = get_claim(cid)
    assert claim.declared and claim.hypotheses and not claim.statement_clauses()[0].scope.startswith("not declared")
    assert {h.name for h in claim.hypotheses if h.counterexample} == NECESSARY[cid]
    for m in claim.statement_mutants():
        assert run_mutant(claim, m, RunContext(mode="quick")).killed, f"{cid}: {m.name} survived"
    for c in claim.clauses:
        assert all(scope.strip() for _, scope in c.evidences())


# --------------------------------------------------------------------------------------------
# hop.classical_energy


def test_nonsymmetric_and_negative_diagonal_raise_the_energy_by_2():
    for name in ("symmetric", "nonneg_diagonal"):
        cx = _cx("hop.classical_energy", name)
        assert cx.violated and cx.clause == "descent" and cx.error == 2.0


def test_synchronous_step_raises_energy_and_two_cycles():
    cx = _cx("hop.classical_energy", "asynchronous")
    assert cx.violated and cx.error == 2.0
    W, b = torch.tensor([[0.0, -2.0], [-2.0, 0.0]]), torch.tensor([0.0, 1.0])
    x0 = torch.tensor([-1.0, -1.0])
    x1 = nh.sync_step(x0, W, b)
    assert torch.equal(x1, -x0) and torch.equal(nh.sync_step(x1, W, b), x0)
    assert float(nh.classical_energy(x1, W, b) - nh.classical_energy(x0, W, b)) == 2.0


def test_convergence_needs_every_unit_updated():
    cx = _cx("hop.classical_energy", "fair")
    assert cx.violated and cx.clause == "converges" and cx.error == 1.0  # unit 1 unstable, never updated
    W, b, x = torch.zeros(2, 2), torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
    assert torch.equal(nh.async_unit_update(x, W, b, 1), x)
    assert nh.sync_step(x, W, b).tolist() == [-1.0, 1.0]


def test_flip_formula_and_descent_are_derived_for_every_d():
    der = th.derive_classical_flip_general()
    assert all(r.passed for r in der.check_obligations())
    assert str(der.facts["asymmetry_term"]) == "-eta.T*u*x_i + eta.T*v*x_i"  # what W = Wᵀ removes
    ev = {c.name: c.evidence for c in get_claim("hop.classical_energy").clauses}
    assert ev["flip_formula"] == ev["descent"] == "derived" and ev["converges"] == "argued"  # Hopfield's tie rule differs


# --------------------------------------------------------------------------------------------
# hop.classical_capacity, hop.dense_capacity


def test_correlated_patterns_are_never_fixed_below_capacity():
    cx = _cx("hop.classical_capacity", "iid_patterns")
    assert cx.violated and cx.details["fractions"] == {"d64": 0.0, "d256": 0.0, "d1024": 0.0}


def test_kept_diagonal_fixes_patterns_far_above_capacity():
    cx = _cx("hop.classical_capacity", "hebbian_zero_diagonal")
    assert cx.violated and cx.details["diag_kept"] == 1.0 and cx.details["zero_diag"] == 0.0


def test_capacity_shows_its_assumptions_and_citations():
    texts = th.derive_classical_capacity().assumption_texts()
    assert any("inherited from dense_capacity" in t and "Central limit" in t for t in texts)
    assert any("inherited from dense_capacity" in t and "i.i.d. uniform" in t for t in texts)
    assert any("0.138" in t and "Amit–Gutfreund–Sompolinsky" in t for t in texts)
    clauses = {c.name: c for c in get_claim("hop.classical_capacity").clauses}
    for name in ("exact_most", "exact_all", "bit_error"):
        kinds = [e for e, _ in clauses[name].evidences()]
        assert kinds[0] == "cited" and "assumed" in kinds and "checked" in kinds, name
    assert "Amit" in clauses["bit_error"].scope and clauses["criteria_differ"].evidence == "derived"


def test_near_duplicate_patterns_break_the_dense_memory():
    cx = _cx("hop.dense_capacity", "iid_patterns")
    assert cx.violated and set(cx.details["fractions"].values()) == {0.0}
    assert cx.details["exp_pair_fraction"] == 0.5


# --------------------------------------------------------------------------------------------
# hop.modern_energy


def test_negative_beta_raises_the_modern_energy():
    cx = _cx("hop.modern_energy", "beta_positive")
    assert cx.violated and math.isclose(cx.error, 0.38636, rel_tol=1e-4)


def test_descent_is_the_derived_kl_identity():
    der = th.derive_modern_energy(2, 2)
    names = {r.name: r.passed for r in der.check_obligations()}
    assert names["descent_identity"] and names["gibbs_bound_is_zero"] and names["energy_never_increases"]
    P = torch.randn(1, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    xi = 3 * torch.randn(1, 1, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    beta = 0.7
    new = nh.modern_update(xi, P, beta)
    logp, logq = (torch.log_softmax(beta * (x @ P.transpose(-1, -2)), -1) for x in (xi, new))
    pred = 0.5 * ((xi - new) ** 2).sum() + (logp.exp() * (logp - logq)).sum() / beta
    drop = nh.modern_energy(xi, P, beta) - nh.modern_energy(new, P, beta)
    assert math.isclose(float(drop), float(pred), rel_tol=1e-12)
    clause = next(c for c in get_claim("hop.modern_energy").clauses if c.name == "descent")
    assert clause.evidence == "derived" and any("Thm 1" in s for e, s in clause.evidences() if e == "cited")


# --------------------------------------------------------------------------------------------
# hop.one_step_retrieval


def test_retrieval_bound_fails_for_negative_beta():
    cx = _cx("hop.one_step_retrieval", "beta_positive")
    assert cx.violated and cx.clause == "bound"
    assert math.isclose(cx.error, 1.99505 / (2 * math.exp(-2)), rel_tol=1e-4)


def test_near_patterns_are_not_retrieved_in_one_step():
    cx = _cx("hop.one_step_retrieval", "separated")
    assert cx.violated and cx.clause == "retrieval" and cx.error > 2
    assert cx.instance["angle"] == 0.3


def test_far_query_retrieves_another_pattern():
    cx = _cx("hop.one_step_retrieval", "query_near")
    assert cx.violated and cx.error > 10


def test_separated_error_is_derived():
    der = th.derive_retrieval_bound()
    N, b, _, _, M = der.facts["args"]
    assert der.facts["separated_error"] == sympy.exp(1 - 2 / N) / (b * N * M)
    assert der.provenance == {"result": "derived"}


# --------------------------------------------------------------------------------------------
# hop.modern_capacity, hop.attention_identity


def test_unit_radius_retrieves_nothing():
    cx = _cx("hop.modern_capacity", "beta_radius")
    assert cx.violated and set(cx.details["fractions"].values()) == {0.0}


@pytest.mark.parametrize("name", ["roles", "values_through_keys", "beta"])
def test_attention_identity_needs_each_hypothesis(name):
    cx = _cx("hop.attention_identity", name)
    assert cx.violated and cx.error > 1e6 * cx.tolerance


def test_attention_identity_derived_for_every_size():
    der = th.derive_attention_identity(2, 3, 2, 2)
    assert der.facts["general_residual"].is_ZeroMatrix
    assert next(c for c in get_claim("hop.attention_identity").clauses).evidence == "derived"
