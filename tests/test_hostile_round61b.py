"""Hostile pass 61, tester B: reproducers, each failing on 217129f (run there as xfail, strict). A relation obligation
with an undefined side; an evidence claim whose check measured nothing, or ran without deciding. (61b F5, a
counterexample whose measured error is NaN against a stated tolerance, is a violation as docs/statements.md says: an
undefined value where the clause asks for a defined one; not reproduced here.)"""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

from proofs_checks.plugin import CheckResult, Inconclusive, check_claim, numeric
from tests.test_hostile_round60b import _claim, direct

X = sp.Symbol("x", real=True)


@pytest.mark.parametrize("relation", [
    sp.Eq((sp.sin(X) / X).subs(X, 0), 1, evaluate=False),  # Eq(nan, 1): F1 (refuted)
    sp.Eq((1 / X).subs(X, 0), (2 / X).subs(X, 0), evaluate=False),  # Eq(zoo, zoo): F2 (verified)
], ids=["nan_side", "zoo_sides"])
def test_1_2_a_relation_with_an_undefined_side_is_neither_refuted_nor_verified(relation):
    r = check_claim(_claim("zz61.rel", direct, lambda x: ("an undefined relation", relation, "true")))
    assert r.status == "error" and "obligation undefined" in r.message, (r.status, r.message)


@numeric("a result built by hand with no numbers")
def no_numbers(form, ctx):
    return CheckResult(True)


@numeric("a check that ran without deciding")
def undecided(form, ctx):
    raise Inconclusive("the training did not reach its loss criterion (final loss ≤ 1e-12)")


def _evidence(check):
    return dataclasses.replace(_claim("zz61.ev", check), kind="evidence", derivation=None,
                               checks=(check,))


def test_3_an_evidence_claim_whose_check_measured_nothing_does_not_support_it():
    r = check_claim(_evidence(no_numbers))
    assert r.status == "error" and "no measured error" in r.message, (r.status, r.message)


def test_4_an_evidence_claim_whose_check_did_not_decide_is_inconclusive_with_its_reason():
    r = check_claim(_evidence(undecided))
    assert r.status == "inconclusive" and "loss criterion" in r.message, (r.status, r.message)
    assert "()" not in r.message, r.message


def test_61a_note_a_masked_array_is_refused_not_read_without_its_mask():
    import numpy as np

    from proofs_checks.api import check_hopfield
    from theory.validation import InputError

    P = np.eye(3)
    with pytest.raises(InputError, match="masked array"):
        check_hopfield(np.ma.masked_array(P, mask=np.ones_like(P, bool)), beta=4.0)
