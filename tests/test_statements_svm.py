"""Issue 33 for the Att-SVM claims (svm.*): each statement mutant (a hypothesis dropped) is killed by
its counterexample, and the corrected statements carry the computed counterexample values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_checks.context import RunContext
from proofs_checks.registry import get_claim
from proofs_checks.runner import run_counterexample, run_mutant

SVM = ("svm.softmax_saturation", "svm.optimal_token_selection", "svm.att_svm", "svm.reg_path", "svm.gd_direction",
       "svm.gd_direction_kq", "svm.fast_rates", "svm.token_sets")


def _cx(cid, name):
    o = run_counterexample(get_claim(cid), name, RunContext(mode="quick"))
    assert o.status == "failed", (cid, name, o.error_message)
    return o.result.details["counterexample"]


@pytest.mark.parametrize("cid", SVM)
def test_statement_mutants_killed(cid):
    claim = get_claim(cid)
    assert claim.clauses
    # svm.gd_direction's hypotheses are its setting (the limits are undefined without them); its regime
    # conditions are in the clauses, with the equal-scores-only failure as a checked clause.
    # svm.gd_direction_kq states a fraction of instances, which no single cheap instance refutes
    assert claim.statement_mutants() or cid in ("svm.gd_direction", "svm.gd_direction_kq"), cid
    assert all(h.counterexample or h.necessary_note for h in claim.hypotheses)
    for m in claim.statement_mutants():
        assert run_mutant(claim, m, RunContext(mode="quick")).killed, (cid, m.name)


def test_saturation_iff_is_on_the_gaps_not_on_the_norm():
    from theory.att_svm import derive_softmax_saturation
    import torch

    d = derive_softmax_saturation(3)
    slide = float(d.facts["slide_S1"])
    assert abs(slide - 1 / (1 + math.exp(-0.1))) < 1e-15 and abs(slide - 0.525) < 1e-3
    for r in (1.0, 1e3, 1e6):  # ‖l‖ → ∞ with l_1 strictly largest: S_1 does not move
        assert abs(float(torch.softmax(torch.tensor([r, r - 0.1], dtype=torch.float64), -1)[0]) - slide) < 1e-9
    assert all(r.passed for r in d.check_obligations())
    st = get_claim("svm.softmax_saturation").statement
    assert r"\iff\|l\|\to\infty" not in st and "0.525" in st and "Longleftrightarrow" in st
    assert _cx("svm.softmax_saturation", "T_ge_2")["instance"]["T"] == 1
    assert _cx("svm.softmax_saturation", "unit_norms")["error"] > 0.1  # bound 0.119 vs 4.5e-5


def test_optimal_selection_needs_feasibility():
    cx = _cx("svm.optimal_token_selection", "feasible")
    assert cx["clause"] == "infimum" and cx["error"] > 0.1  # stated infimum 0.414 < log 2 = 0.6931
    assert "log 2 = 0.6931" in cx["shows"]
    assert _cx("svm.optimal_token_selection", "unique_opt")["clause"] == "only_opt"


def test_gd_direction_is_W_only_and_kq_is_evidence():
    gd, kq = get_claim("svm.gd_direction"), get_claim("svm.gd_direction_kq")
    assert gd.kind == "theorem" and kq.kind == "evidence"
    assert not any("K" in c.latex and "Q" in c.latex for c in gd.clauses)
    assert all(c.evidence == "checked" for c in kq.clauses) and "ngd_KQ" not in {c.name for c in gd.checks}
    stuck = next(c for c in gd.checks if c.name == "ngd_equal_scores_not_enough")
    r = stuck.fn(gd.form, RunContext(mode="quick").for_check(gd.id, stuck.name))
    assert r.passed and r.details["selected_set_locally_optimal"] and r.details["coherence"] > 0.5
    assert 1 - r.details["corr_with_Wmm"] > 0.3


def test_fast_rates_hypotheses_and_counterexample():
    from proofs_checks.claims._att_svm_common import _orth_inst, coherence

    names = {h.name for h in get_claim("svm.fast_rates").hypotheses}
    assert {"equal_scores", "near_orthogonal"} <= names
    inst = _orth_inst(0)
    assert coherence(inst.X) <= 0.09 + 1e-12
    g = inst.gamma
    assert np.allclose(np.sort(g, 1)[:, :-1], np.sort(g, 1)[:, :1])  # equal non-optimal scores
    cx = _cx("svm.fast_rates", "near_orthogonal")
    assert cx["clause"] == "reach" and cx["instance"]["coherence"] > 0.5
    assert abs(cx["error"] - 0.397) < 0.005 and cx["tolerance"] == pytest.approx(0.01)  # NGD at K = 1500
    assert "overflows float64" in cx["shows"]


def test_gd_direction_cites_what_the_sources_state():
    gd = get_claim("svm.gd_direction")
    cl = {c.name: c for c in gd.clauses}
    assert "NGD" in gd.title and "Polyak" in cl["global"].latex and "plain GD is not covered" in cl["global"].scope
    # issue 43: the cone's width is SOME μ (depending on the instance), not each μ
    assert "for some }\\mu" in cl["local"].latex and "some μ > 0" in cl["local"].scope and "step" in cl["local"].scope
    assert get_claim("svm.gd_direction_kq").title.startswith("Normalised GD")
    assert "every selection" in {c.name: c for c in get_claim("svm.reg_path").clauses}["W_path"].latex


def test_reg_path_and_token_set_counterexamples():
    cx = _cx("svm.reg_path", "feasible")
    assert "log 2" in cx["shows"]
    assert _cx("svm.reg_path", "m_ge_d")["error"] > 0.01  # rank-2 nuclear solution: rank 1 has 1 − corr ≥ 0.042
    assert _cx("svm.token_sets", "set_feasible")["clause"] == "direction"
    assert _cx("svm.att_svm", "feasible")["clause"] == "exists"
