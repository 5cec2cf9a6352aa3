"""ICL derivations for symbolic sizes (issue 34): icl.population_loss, icl.gamma_n_global_min,
icl.loss_minimum, icl.linear_task_risk.

Each general derivation meets its obligations (the d = 2 cross-check among them), is the claim's
derivation, puts the Isserlis contraction among its derived steps, agrees exactly with the closed
forms at explicit sizes d = 1…4, and every form mutant of the four claims differs from the general
closed form at the sizes beyond d = 2 that the symbolic checks evaluate.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp

from numerics import icl as ni
from proofs_checks.registry import registry
from proofs_checks.claims import _icl_common as cc
from proofs_checks.claims import load_all

load_all()  # the built-in claims registered as built-in first (imported alone, a claim module's claim was refused as a plugin's)
from proofs_checks.claims import icl as ci  # noqa: E402
from proofs_checks.tolerances import EPS  # noqa: E402
from theory import gaussian as g  # noqa: E402
from theory import icl as ti  # noqa: E402
from theory.sizes import instantiate  # noqa: E402

GENERAL = {
    "icl.population_loss": ti.derive_population_loss_general,
    "icl.gamma_n_global_min": ti.derive_global_min_general,
    "icl.loss_minimum": ti.derive_loss_minimum_general,
    "icl.linear_task_risk": ti.derive_linear_task_risk_general,
}
CROSS_CHECK = {
    "icl.population_loss": {"general_equals_at_d2", "hh_equals_at_d3"},
    "icl.gamma_n_global_min": {"general_minimiser_equals_at_d2", "hessian_equals_at_d2"},
    "icl.loss_minimum": {"general_equals_at_d2"},
    "icl.linear_task_risk": {"general_equals_at_d2", "eigen_term_equals_at_d2"},
}


@functools.lru_cache(maxsize=None)
def _obligations(cid):
    return {r.name: r for r in GENERAL[cid]().check_obligations()}


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_general_derivation_is_the_claims_and_holds(cid):
    D = GENERAL[cid]()
    assert registry.get(cid).derivation is GENERAL[cid]
    assert D.result_derived
    res = _obligations(cid)
    assert all(r.status == "holds" for r in res.values()), [(r.name, r.residual) for r in res.values() if not r.passed]
    names = set(res)
    assert CROSS_CHECK[cid] <= names
    assert any(n.startswith("at_d2.") for n in names), "the fixed-size derivation is inherited as at_d2"
    d = D.facts["sizes"][0]
    assert isinstance(d, sp.Symbol) and not d.is_number


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_clauses_derived_for_symbolic_sizes(cid):
    derived = [c for c in registry.get(cid).clauses if c.evidence == "derived"]
    assert derived
    for c in derived:
        assert "symbolic d" in c.scope and ("N" in c.scope)
        assert any(e == "derived_at" for e, _ in c.evidences()), f"{c.name}: the fixed-size result stays as also="
    if cid == "icl.linear_task_risk":
        assert all("M" in c.scope for c in derived)


def test_isserlis_contraction_is_derived_in_the_population_loss():
    steps = ti.derive_population_loss_general().steps
    derived = [s.text for s in steps if s.how == "derived"]
    assert any(t.startswith("Isserlis for E[x_ia x_ip x_jq x_jc]") for t in derived)
    assert any(t.startswith("i = j: the single-sample moment") for t in derived)
    assert any(t.startswith("Number of pairs with i ≠ j") for t in derived)
    assert not any(s.text.startswith("General Λ") for s in steps if s.how == "assumed"), "no typed-in fourth moment"


def _rat_spd(rng, k):
    """Q diag(1, …, k) Q with Q = I − 2vvᵀ/vᵀv (a rational reflection): a non-diagonal rational SPD Λ
    whose eigenvalues SymPy can decide (the closed forms validate Λ ≻ 0)."""
    v = sp.Matrix([int(x) for x in rng.integers(1, 5, size=k)])
    Q = sp.eye(k) - 2 * v * v.T / (v.T * v)[0, 0]
    return Q * sp.diag(*range(1, k + 1)) * Q


@pytest.mark.parametrize("k", [1, 3, 4])
def test_general_closed_forms_exact_at_explicit_sizes(k):
    rng = np.random.default_rng(k)
    L = _rat_spd(rng, k)
    B = sp.Matrix(k, k, lambda i, j: sp.Rational(int(rng.integers(-5, 6)), 3))
    n, m = 3, 5
    P = ti.derive_population_loss_general()
    d, N = P.facts["sizes"]
    assert instantiate(P.result["loss"], {d: k, N: n}, {"Lambda": L, "B": B}) == ti.population_loss(L, n, B)
    Gam = instantiate(P.facts["Gamma_N"], {d: k, N: n}, {"Lambda": L})
    assert Gam == ti.gamma_n(L, n)
    assert instantiate(P.result["hh"], {d: k, N: n}, {"Lambda": L}) == L * Gam
    Mn = ti.derive_loss_minimum_general()
    assert instantiate(Mn.facts["in_G"], {d: k}, {"Lambda": L, "G": Gam}) == ti.loss_minimum(L, n)
    R = ti.derive_linear_task_risk_general()
    dR, NR, MR = R.facts["sizes"]
    assert sp.cancel(instantiate(R.result, {dR: k, MR: m}, {"Lambda": L, "G": Gam}) - ti.linear_task_risk(L, n, m)) == 0


def test_second_order_form_positive_and_a_sum_of_squares():
    rng = np.random.default_rng(3)
    D = ti.derive_global_min_general()
    d, N = D.facts["sizes"]
    for k, n in ((1, 1), (3, 2), (4, 7)):
        L = ni.random_spd(rng, k)
        H = rng.normal(size=(k, k))
        q = ci._eval_general(D.facts["second_order"], {d: k, N: n}, Lambda=L, H=H)
        w, V = np.linalg.eigh(L)
        C = V @ np.diag(np.sqrt(w)) @ V.T
        sos = (1 + 1 / n) * np.linalg.norm(L @ H @ C) ** 2 + np.trace(L) / n * np.linalg.norm(C @ H @ C) ** 2
        assert q > 0 and abs(q - sos) <= 1e3 * EPS * sos
        Gi = ci._eval_general(D.result, {d: k, N: n}, Lambda=L)
        base = ti.population_loss(L, n, Gi)
        assert abs(ti.population_loss(L, n, Gi + H) - base - q / 2) <= 1e3 * EPS * (1 + abs(base))


def test_n_plus_1_mutant_differs_as_a_rational_function_of_N_and_d():
    D = ti.derive_population_loss_general()
    d, N = D.facts["sizes"]
    L = D.facts["Lambda"]
    diff = g.tidy(sp.Trace(g.zfb_gamma(L, N)) - sp.Trace(g.zfb_gamma(L, N + 1)), [L])
    ratio = sp.factor(diff / sp.Trace(L))
    assert ratio == sp.factor((d + 1) / (N * (N + 1)))


_PAIRS = {
    "icl.population_loss": ci._general_loss_pairs,
    "icl.gamma_n_global_min": cc._general_gamma_inv_pairs,
    "icl.loss_minimum": cc._general_minimum_pairs,
    "icl.linear_task_risk": cc._general_risk_pairs,
}


def _worst(pairs):
    return max(float(np.linalg.norm(np.asarray(v, float) - np.asarray(r, float)) / (1 + np.linalg.norm(np.asarray(r, float))))
               for v, r in pairs.values())


@pytest.mark.parametrize("cid", sorted(_PAIRS))
def test_form_mutants_rejected_at_general_sizes(cid):
    claim = registry.get(cid)
    tol = 1e3 * EPS * 20
    assert _worst(_PAIRS[cid](claim.form, np.random.default_rng(0))) <= tol
    for m in claim.mutants:
        assert _worst(_PAIRS[cid](m.form, np.random.default_rng(0))) > 1e6 * tol, m.name


def test_commuting_trace_image_refuses_nonlinear_terms():
    d = sp.Symbol("d", integer=True, positive=True)
    L, G = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("G", d, d)
    lam, t = sp.symbols("lambda t", positive=True)
    with pytest.raises(ValueError):
        g.commuting_trace_image(sp.Trace(G * L) * sp.Trace(G), {L: lam, G: lam}, {sp.Trace(L): t})
