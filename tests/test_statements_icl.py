"""Structured statements of icl.lsa_prediction_form, icl.population_loss, icl.gamma_n_global_min,
icl.loss_minimum and icl.linear_task_risk (issue 33): every statement mutant is killed by its
counterexample, and the corrected statements' counterexample values (exact, SymPy)."""

from __future__ import annotations

import pytest
import sympy as sp

from proofs_checks.claims import load_all

load_all()  # the built-in claims registered as built-in first: imported alone, icl_risk's claim was refused as a plugin's
import proofs_checks.claims._icl_common as cc  # noqa: E402
import proofs_checks.claims.icl_risk as cr  # noqa: E402
from proofs_checks.context import RunContext
from proofs_checks.registry import registry
from proofs_checks.runner import run_counterexample, run_mutant
from theory import icl as ti

IDS = ["icl.lsa_prediction_form", "icl.population_loss", "icl.gamma_n_global_min", "icl.loss_minimum",
       "icl.linear_task_risk"]


def _cx(claim_id, hyp):
    o = run_counterexample(registry.get(claim_id), hyp, RunContext(mode="quick"))
    assert o.status == "failed", o  # the statement without the hypothesis is refuted
    return o.result.details["counterexample"]


@pytest.mark.parametrize("claim_id", IDS)
def test_statement_mutants_killed(claim_id):
    claim = registry.get(claim_id)
    assert claim.declared and claim.hypotheses
    ms = claim.statement_mutants()
    assert ms
    for m in ms:
        assert run_mutant(claim, m, RunContext(mode="quick")).killed, m.name


def test_exact_loss_matches_population_loss_gaussian():
    # the evaluator behind the counterexamples agrees with the closed form where the hypotheses hold
    Bs = sp.Matrix(2, 2, sp.symbols("b11 b12 b21 b22"))
    lam = [1, sp.Rational(1, 2)]
    exact = ti.exact_lsa_loss(*cc._b_weights(Bs), 2, lam)
    assert sp.expand(exact - ti.population_loss(sp.diag(*lam), 2, Bs)) == 0


def test_d1_second_branch_reaches_the_minimum():
    # d = 1, N = 2, Λ = 1: Γ_N⁻¹ = 1/2; W11 = 0, w22 = 0, w21 = 1, w21' = 1/2 has loss 1/4 = min
    cx = _cx("icl.gamma_n_global_min", "d_ge_2")
    assert cx["clause"] == "all_weights_minimisers" and cx["error"] == 0.5
    assert ti.exact_lsa_loss([[0, 0], [1, 0]], [[0, 0], [sp.Rational(1, 2), 0]], 2, [1]) == sp.Rational(1, 4)
    assert ti.loss_minimum(sp.Matrix([[1]]), 2) == sp.Rational(1, 4)


def test_all_weights_minimisers_derived_at_d2():
    D = ti.derive_all_weights_min(2, 2)
    assert all(o.status == "holds" for o in D.check_obligations())
    zeros = D.facts["weights"]["w21"] + D.facts["weights"]["w21'"]
    assert D.result and all(br[z] == 0 for br in D.result for z in zeros)
    assert any(D.facts["excluded"])  # the rank-one branches (w22 = 0) are excluded by det B_eff ≡ 0


@pytest.mark.parametrize("hyp,bstar", [("gaussian_x", sp.Rational(1, 2)), ("rho_eq_N", sp.Rational(1, 2)),
                                       ("noise_free", sp.Rational(1, 5))])
def test_minimiser_moves_without_hypothesis(hyp, bstar):
    # d = 2, N = 1, Λ = I: Γ_1⁻¹ = I/4; the exact minimiser under the changed law is bstar·I
    _, law = cc._law(hyp, 2, 1)
    B, _ = cc._exact_minimiser(2, 1, [1, 1], **law)
    assert B == bstar * sp.eye(2) and cc._gamma_inv([1, 1], 1) == sp.eye(2) / 4


def test_singular_lambda_minimiser_not_unique():
    cx = _cx("icl.gamma_n_global_min", "lambda_pd")
    assert "not unique" in cx["shows"] and cx["instance"]["Lambda"] == "diag(1, 0)"


def test_unbalanced_init_changes_w22_limit():
    cx = _cx("icl.gamma_n_global_min", "zfb_init")
    assert cx["error"] > 0.1  # w22 → 0.7317 instead of ‖Γ_N⁻¹‖_F^½ = 0.6329


def test_rademacher_changes_population_loss_and_risk():
    cx = _cx("icl.population_loss", "gaussian_x")
    assert cx["shows"].endswith("gives 1/4") and "= 1/8 " in cx["shows"]  # d = 1, N = 2, B = 1/2: exact 1/8
    cx = _cx("icl.linear_task_risk", "gaussian_x")  # exact 1/4 vs closed form 5/12 (N = 2, M = 3)
    assert "= 1/4 " in cx["shows"] and "5/12" in cx["shows"]


def test_query_label_must_be_zero():
    cx = _cx("icl.lsa_prediction_form", "query_label_zero")
    assert cx["error"] > 0.1


def test_block_form_derived_for_symbolic_sizes():
    D = ti.derive_lsa_prediction_form_general()
    assert all(o.status == "holds" for o in D.check_obligations())
    assert D.facts["params_used"] == ["W11", "w21", "w21'", "w22"]


def test_evidence_declared_honestly():
    g = {c.name: c for c in registry.get("icl.gamma_n_global_min").clauses}
    assert g["flow_limit"].evidence == "cited" and "Thm 4.1" in g["flow_limit"].scope
    assert "d = 2, N = 2" in g["all_weights_minimisers"].scope
    # the moments are derived for symbolic d and N (Isserlis in index form), the d = 2/3 Wick sums kept as cross-checks
    moments = registry.get("icl.population_loss").clauses[0]
    assert moments.evidence == "derived" and "symbolic d and N" in moments.scope
    assert any(e == "derived_at" and "d = 3" in s for e, s in moments.evidences())
    # the population loss's derivation lists the assumptions it inherits (Isserlis, the general fourth moment)
    texts = ti.derive_population_loss(2).assumption_texts()
    assert any(t.startswith("(inherited from moments) Isserlis") for t in texts)
    assert any("General Λ" in t for t in texts)



def test_singular_lambda_not_needed_for_the_formulas():
    # backs the "not shown necessary" notes: at Λ = diag(1, 0) (N = 2, M = 3) the exact loss, minimum and
    # risk agree with the closed forms (Γ_N is invertible since tr Λ > 0)
    L, lam, N, M = sp.diag(1, 0), [1, 0], 2, 3
    Gi = ti._gamma(L, sp.Integer(N)).inv()
    B = sp.Matrix([[sp.Rational(1, 3), 2], [sp.Rational(1, 5), 7]])
    loss = sp.Rational(1, 2) * ((B.T * L * ti._gamma(L, sp.Integer(N)) * B * L).trace() - 2 * (L * B * L).trace() + L.trace())
    assert ti.exact_lsa_loss(*cc._b_weights(B), N, lam) == loss
    _, lmin = cc._exact_minimiser(2, N, lam)
    assert lmin == sp.Rational(1, 2) * (L.trace() - (Gi * L * L).trace())
    risk = L.trace() - 2 * (Gi * L * L).trace() + (Gi * Gi * ti._gamma(L, sp.Integer(M)) * L * L).trace()
    assert 2 * ti.exact_lsa_loss(*cc._b_weights(Gi), M, lam, query_noise=False) == risk


def test_negative_sigma_flips_w22_limit():
    # ZFB Assumption 3.3 takes σ > 0: at σ = −0.2803 (d = 2, N = 2, Λ = diag(1, 2), Θ from seed 7) uU still
    # reaches Γ_N⁻¹ but w22 → −0.632943, not +‖Γ_N⁻¹‖_F^½ = 0.632943
    claim = registry.get("icl.gamma_n_global_min")
    h = {x.name: x for x in claim.hypotheses}
    assert "sigma>0" in h["sigma_pos"].latex.replace(" ", "")
    cx = _cx("icl.gamma_n_global_min", "sigma_pos")
    assert cx["clause"] == "flow_limit" and cx["instance"]["sigma"] == pytest.approx(-0.2803, abs=1e-4)
    assert "w22 → -0.632943" in cx["shows"] and "0.632943" in cx["shows"]
    assert cx["error"] == pytest.approx(2.0, rel=1e-6)


def test_trained_risk_scope_says_seed_mean():
    c = {c.name: c for c in registry.get("icl.linear_task_risk").clauses}["trained_risk"]
    assert any("seeds' MEAN B" in s and "6 SE" in s for _, s in c.evidences())
    assert "6 SE" in cr._risk_trained.__doc__ and "5 SE" not in cr._risk_trained.__doc__
