"""TF-as-SVM reproduction: speed-ups that must not change a number (issue 46 item 6)."""

from __future__ import annotations

import numpy as np

from numerics import att_svm as ns
from proofs_checks.reproduce import tf_as_svm as tf


def test_ridge_path_solves_each_selection_once_with_the_same_numbers():
    insts = [ns.reference_instance(s) for s in range(2)]
    ini = ns.reference_notebook_inits(2, tf.D, seed=0)
    lams = [1e-2, 1e-6, tf.EPS]
    rp = tf.ridge_path(insts, ini, lams, 60)
    # the loop it replaced: every (parameterisation, λ, seed) solved on its own, in order, serially
    S, Lm = len(insts), len(lams)
    eye = np.broadcast_to(np.eye(tf.D), (S, tf.D, tf.D))
    K0 = np.concatenate([np.tile(ini["W"][:S], (Lm, 1, 1)), np.tile(ini["K"][:S], (Lm, 1, 1))])
    Q0 = np.concatenate([np.tile(eye, (Lm, 1, 1)), np.tile(ini["Q"][:S], (Lm, 1, 1))])
    res = ns.train_ngd_batch(list(insts) * (2 * Lm), K0, Q0, iters=60, lr=0.1, ridge=np.tile(np.repeat(lams, S), 2),
                             w_param=np.repeat([True, False], Lm * S), eps_guard=False, decay_after=500, snapshots=2)
    solvers = {nm: ns.CompiledAttSVM(tf.N, tf.T, tf.D, nm) for nm in ("fro", "nuc")}
    for b in range(2 * Lm * S):
        p, rest = divmod(b, Lm * S)
        li, s = divmod(rest, S)
        tgt = solvers["fro" if p == 0 else "nuc"].solve(insts[s].X, insts[s].z, res.selected[b])
        # Not bitwise: an interior-point solve of the same problem moves in its last digits with the
        # solves run before it on the same compiled problem (measured: 4e-12); both points are certified
        # to CERT_TOL, and what the reproduction reports (4 decimals of means over seeds) is unchanged.
        old = float(ns.correlation(res.W[b], tgt))
        assert abs(rp["corr"][p, li, s] - old) <= ns.CERT_TOL, (rp["corr"][p, li, s], old)
        assert f"{rp['corr'][p, li, s]:.4f}" == f"{old:.4f}"
        assert rp["global"][p, li, s] == bool(np.all(res.selected[b] == insts[s].opt))


def test_local_converge_direct_solves_report_the_numbers_of_the_cvxpy_solves():
    # local_converge solves its Att-SVMs by numerics.att_svm_direct (NNLS; Clarabel on the dual SDP);
    # the cvxpy-compiled problems it used before must give the same reported correlations
    lc = tf.local_converge(8, 300, workers=2)
    assert lc["fallbacks"] == 0 and lc["solves"] <= lc["solve_requests"]
    solvers = {nm: ns.CompiledAttSVM(tf.N, tf.T, tf.D, nm) for nm in ("fro", "nuc")}
    for name, v in lc["variants"].items():
        for s in range(8):
            inst = lc["insts"][s]
            for nm in ("fro", "nuc"):
                old = float(ns.correlation(v["W"][s], solvers[nm].solve(inst.X, inst.z, v["selected"][s])))
                new = float(v[f"corr_{nm}"][s])
                # Not bitwise: two certified interior/active-set points of the same problem. Measured at the
                # notebook's size (100 seeds × 2000 iterations, 270 solves): |Δ corr| ≤ 4.5e-7 (nuclear),
                # 2.9e-9 (Frobenius); the reproduction reports 4 decimals of means over seeds.
                assert abs(new - old) <= ns.CERT_TOL, (name, s, nm, new, old)
                assert f"{new:.4f}" == f"{old:.4f}"
