"""Issue 34 for icl.gd_one_step, icl.nonconvex and icl.general_target_risk: their derivations are for symbolic
sizes (theory.icl_general), inherit the fixed-size derivations as cross-checks, and the general closed forms,
evaluated beyond the fixed sizes, reject every form mutant."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from numerics import icl as ni
from proofs_checks.claims import load_all

load_all()  # the built-in claims registered as built-in first (imported alone, a claim module's claim was refused as a plugin's)
from proofs_checks.claims.icl_gd import gd_layer, nonconvex_hessian  # noqa: E402
from proofs_checks.registry import get_claim  # noqa: E402
from theory import icl as ti  # noqa: E402
from theory import icl_general as tg  # noqa: E402

GENERAL = {
    "icl.gd_one_step": (tg.derive_gd_one_step_general, "at_d2_N2", ("token_map", "prediction", "preconditioned_step")),
    "icl.nonconvex": (tg.derive_nonconvex_general, "at_d2", ("negative_curvature", "min_eigenvalue", "spectrum")),
    "icl.general_target_risk": (tg.derive_general_target_risk_general, "at_d2", ("risk", "notes_form_wrong")),
}


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_general_derivation_holds_and_cross_checks_the_fixed_size(cid):
    fn, prefix, _ = GENERAL[cid]
    D = fn()
    assert get_claim(cid).derivation() is D
    names = {o.name for o in D.obligations}
    assert any(n.startswith(prefix + ".") for n in names), "the fixed-size derivation is inherited"
    assert any(n.startswith("general_at_d2") for n in names), "the specialisation obligation is there"
    assert all(r.passed for r in D.check_obligations())
    assert set(D.provenance.values()) == {"derived"}
    d = sp.Symbol("d", integer=True, positive=True)
    assert D.facts["sizes"][0] == d  # symbolic, not instantiated


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_clauses_are_derived_at_symbolic_sizes_with_the_fixed_size_kept(cid):
    cl = {c.name: c for c in get_claim(cid).clauses}
    for name in GENERAL[cid][2]:
        assert cl[name].evidence == "derived" and "symbolic" in cl[name].scope, (cid, name)
    assert any(ev == "derived_at" for c in cl.values() for ev, _ in c.also)


def test_gd_general_closed_form_is_the_layer_and_rejects_the_mutants():
    rng = np.random.default_rng(3)
    c = get_claim("icl.gd_one_step")
    for d, N in ((1, 4), (4, 3), (6, 1)):
        X, y, xq, W0 = rng.normal(size=(1, N, d)), rng.normal(size=(1, N)), rng.normal(size=(1, d)), rng.normal(size=d)
        ref = tg.gd_layer_general(X[0].T, y[0], xq[0], W0, 0.8)
        got = gd_layer(X, y, xq, W0, 0.8)
        np.testing.assert_allclose(got[0][0], ref[0], atol=1e-12)
        assert got[1][0] == pytest.approx(ref[1], abs=1e-12)
        for m in c.mutants:
            new_y, pred = m.form(X, y, xq, W0, 0.8)
            assert max(np.max(np.abs(new_y[0] - ref[0])), abs(pred[0] - ref[1])) > 1e-6, (m.name, d, N)


def test_nonconvex_full_spectrum_at_d3():
    """The full Hessian assembled from the general derivation: eigenvalues ±‖Λ²‖_F, ±λ_i², 0 (2d² + 2d times)."""
    L = ni.random_spd(np.random.default_rng(5), 3)
    H = nonconvex_hessian(L)
    d = 3
    assert H.shape == (2 * (d + 1) ** 2,) * 2 and np.allclose(H, H.T)
    lam = np.linalg.eigvalsh(L)
    F = np.linalg.norm(L @ L)
    expected = np.sort(np.concatenate([[F, -F], lam**2, -(lam**2), np.zeros(2 * d * d + 2 * d)]))
    np.testing.assert_allclose(np.linalg.eigvalsh(H), expected, atol=1e-10)
    c = get_claim("icl.nonconvex")
    assert c.form(L, 4) == pytest.approx(-F, rel=1e-12)
    for m in c.mutants:
        assert abs(m.form(L, 4) + F) > 1e-6 * F, m.name


def test_general_target_risk_closed_form_and_mutants_beyond_d2():
    rng = np.random.default_rng(7)
    c = get_claim("icl.general_target_risk")
    D = tg.derive_general_target_risk_general()
    for d, N, M in ((1, 2, 3), (4, 3, 5), (6, 1, 2)):  # N ≠ M (else 1/N for 1/M is no mutant)
        L = ni.random_spd(rng, d)
        A = rng.normal(size=(d, d))
        S, a = A @ A.T, rng.normal(size=d)
        ref = float(tg.evaluate(D.result, {"Lambda": L, "Sigma": S, "a": a[:, None], "N": N, "M": M, "d": d}))
        assert ti.general_target_risk(L, N, M, a, S, 0.0) == pytest.approx(ref, rel=1e-11)
        for m in c.mutants:
            assert abs(m.form(L, N, M, a, S, 0.0) - ref) > 1e-6 * ref, (m.name, d)
        stated = ti.stated_general_target_risk(L, N, M, a, S, 0.0)
        assert abs(stated - ref) > 1e-6 * ref


def test_notes_form_gap_at_identity_for_every_d():
    """At Λ = I_d, Σ = 0 the notes' risk exceeds the derived one by ‖a‖²(d+1)³(2N+d+1)/(N²(N+d+1)²)."""
    for d, N in ((1, 1), (3, 2), (5, 7)):
        a = np.arange(1.0, d + 1)
        gap = (ti.stated_general_target_risk(np.eye(d), N, 3, a, np.zeros((d, d)), 0.0)
               - ti.general_target_risk(np.eye(d), N, 3, a, np.zeros((d, d)), 0.0))
        assert gap == pytest.approx(a @ a * (d + 1) ** 3 * (2 * N + d + 1) / (N**2 * (N + d + 1) ** 2), rel=1e-12)


def test_new_obligations_hold():
    """Issue 33 audit: ŷ(tθ) = t²ŷ(θ) is derived (not only assumed), and the notes' form is refuted at a real law
    (linear target at Λ = I_d) for every d, N, M."""
    for fn, name in ((tg.derive_nonconvex_general, "yhat_homogeneous_degree_2"),
                     (tg.derive_general_target_risk_general, "stated_form_differs_linear_target")):
        res = {r.name: r for r in fn().check_obligations()}
        assert res[name].passed, name
