"""numerics.att_svm_direct: the Att-SVM solved without cvxpy (NNLS; Clarabel on the dual SDP), every
point certified, against the solver chain of numerics.att_svm (issue 46 item 6)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from numerics import att_svm as ns
from numerics.att_svm_direct import DirectAttSVM
from tests.strategies import att_svm_instances


def _chain_and_direct(inst, norm):
    s = DirectAttSVM(*inst.X.shape, norm)
    return ns.solve_att_svm(inst.X, inst.z, inst.opt, norm=norm), s.solve(inst.X, inst.z, inst.opt), s


@settings(max_examples=8, deadline=None)
@given(att_svm_instances(n_max=12, T_max=8, d_max=10))
def test_direct_solves_agree_with_the_solver_chain(inst):
    # n < d (solved in the span of the queries) and n ≥ d (no reduction) are both drawn
    for norm in ("fro", "nuc"):
        ref, W, s = _chain_and_direct(inst, norm)
        A = ns.constraint_matrix(inst.X, inst.z, inst.opt)[0]
        margins = np.einsum("kab,ab->k", A, W)
        assert margins.min() >= 1 - ns.CERT_TOL  # feasible to the certificate's tolerance
        value = np.linalg.norm(W) if norm == "fro" else np.linalg.norm(W, "nuc")
        # both points are certified optimal to CERT_TOL (relative gap), so their values agree to 2·CERT_TOL
        assert abs(value - ref.value) <= 2 * ns.CERT_TOL * ref.value, (norm, s.fallbacks)
        if norm == "fro":  # strongly convex: the minimiser is unique, both are within √(gap) of it
            assert np.linalg.norm(W - ref.W) <= 4 * np.sqrt(ns.CERT_TOL) * np.linalg.norm(ref.W)


def test_direct_falls_back_to_the_chain_and_it_raises_on_infeasible():
    inst = ns.make_instance(3, 4, 5, seed=1)
    # the same sequence twice with two different optimal tokens: no W separates both; the queries
    # are rank-deficient, so the direct solver hands the instance to the chain, which names it
    Xi, zi = np.concatenate([inst.X[:1]] * 2), np.concatenate([inst.z[:1]] * 2)
    for norm in ("fro", "nuc"):
        s = DirectAttSVM(2, 4, 5, norm)
        with pytest.raises(ns.InfeasibleAttSVM, match="sequence"):
            s.solve(Xi, zi, np.array([0, 1]))
        assert s.fallbacks == 1
    with pytest.raises(ns.InputError, match="compiled for shape"):
        DirectAttSVM(2, 4, 5, "fro").solve(inst.X, inst.z, inst.opt)
    with pytest.raises(ns.InputError, match="norm"):
        DirectAttSVM(2, 4, 5, "l1")


def test_an_uncertified_clarabel_point_goes_to_the_chain(monkeypatch):
    inst = ns.make_instance(4, 4, 5, seed=1)
    monkeypatch.setitem(ns.SOLVER_OPTS, "CLARABEL", dict(max_iter=2))  # stops far from the optimum
    s = DirectAttSVM(4, 4, 5, "nuc")
    W = s.solve(inst.X, inst.z, inst.opt)
    assert s.fallbacks == 1  # the direct point failed its certificate; the chain (SCS) certified one
    monkeypatch.undo()
    ref = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc")
    assert abs(np.linalg.norm(W, "nuc") - ref.value) <= 2 * ns.CERT_TOL * ref.value
