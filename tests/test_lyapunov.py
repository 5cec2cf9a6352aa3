"""Group H (Lyapunov functions): the panel's hypotheses and ground truth, the backward construction on
drawn systems, SOS certificates and their exact re-check, parsing a user's system."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import lyapunov as nl
from tests.strategies import seeds
from theory import lyapunov as tl
from theory.validation import InputError

x, y = tl.x, tl.y
EPS = np.finfo(np.float64).eps


def test_symbolic_and_sampled_hypotheses_agree_on_the_panel():
    der = tl.derive_conditions()
    rng = np.random.default_rng(0)
    for name, c in tl.conditions_panel().items():
        sampled, _ = nl.sample_properties(c, rng)
        assert sampled == der.facts["properties"][name], name


def test_corrected_theorem_is_sound_and_the_stated_one_is_not():
    der = tl.derive_conditions()
    truth, props = der.facts["truth"], der.facts["properties"]
    level = {n: i for i, n in enumerate(tl.LEVELS)}
    for name, p in props.items():
        assert level[tl.corrected_conclusion(p)] <= level[truth[name]], name
    assert tl.corrected_conclusion(props["khalil"]) == "local"
    assert tl.stated_conclusion(props["khalil"]) == "global" and truth["khalil"] == "local"
    assert tl.stated_conclusion(props["unstable"]) == "global" and truth["unstable"] == "none"


def test_khalil_trajectories_escape_and_stay_in_the_region():
    """From the escape region x keeps growing (roughly 2y·t) while V stays ≥ x²/(1+x²) → 1."""
    c = tl.conditions_panel()["khalil"]
    f, V, vdot = nl.lambdify_candidate(c)
    X0 = nl.initial_points("khalil", np.random.default_rng(1), 6, near=False)
    XT, _, ok = nl.integrate(f, X0, 20.0)
    assert ok
    assert np.all(XT[:, 0] > X0[:, 0] + 10)
    assert np.all((XT[:, 0] - math.sqrt(2)) * XT[:, 1] - 2 > 0)  # still right of the hyperbola
    assert np.all(V(XT) <= V(X0)) and np.all(V(XT) > 0.9)
    assert np.all(vdot(XT) < 0)


@settings(max_examples=10, deadline=None)
@given(seeds)
def test_gas_panel_systems_obey_the_derived_comparison_bound(seed):
    rng = np.random.default_rng(seed)
    for name in ("dissipative", "cancelling"):
        c = tl.conditions_panel()[name]
        X0 = nl.initial_points(name, rng, 4, near=False)
        ratio = nl.distance_ratios(c, X0, 3.0, rtol=1e-10, atol=1e-13)
        assert np.all(ratio <= math.exp(-3.0) * (1 + 1e-6))


def test_vdot_vanishes_at_the_origin_for_any_field():
    assert tl.derive_conditions().result["Vdot_at_origin"] == 0


@settings(max_examples=8, deadline=None)
@given(seeds, st.integers(2, 4))
def test_backward_construction_decreases_V_and_balances_energy(seed, n):
    rng = np.random.default_rng(seed)
    s = nl.draw_backward_systems(rng, 3, n)
    X0 = rng.normal(size=(3, n))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    form = {"P": nl.psd_from, "S": nl.skew_from, "f": nl.construct_f}
    r = nl.energy_balance(s, X0, form, 1.0, 11, rtol=1e-10, atol=1e-12)
    V0 = r["V"][:, :1]
    assert r["success"] and r["stopped"] is None
    assert np.max(np.abs(r["V"] - V0 - r["q"]) / V0) <= 10 * r["steps"] * 1e-10
    assert np.all(np.diff(r["V"], axis=1) < 0)


def test_symmetric_S_lets_V_increase_somewhere():
    rng = np.random.default_rng(0)
    s = nl.draw_backward_systems(rng, 8, 3)
    X0 = rng.normal(size=(8, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    form = {"P": nl.psd_from, "S": lambda B: B + np.swapaxes(B, -1, -2), "f": nl.construct_f}
    r = nl.energy_balance(s, X0, form, 1.0, 21)
    assert np.any(np.diff(r["V"], axis=1) > 0)


@settings(max_examples=15, deadline=None)
@given(seeds, st.integers(1, 5))
def test_skew_part_cancels_pointwise(seed, n):
    rng = np.random.default_rng(seed)
    g, B, A = rng.normal(size=(7, n)), rng.normal(size=(7, n, n)), rng.normal(size=(7, n, n))
    f = nl.construct_f(g, nl.psd_from(A), nl.skew_from(B))
    vdot = (g * f).sum(-1)
    ref = -(np.einsum("kji,kj->ki", A, g) ** 2).sum(-1)
    scale = (g * g).sum(-1) * (np.abs(A).sum((1, 2)) ** 2 + np.abs(B).sum((1, 2)))
    assert np.all(np.abs(vdot - ref) <= 64 * n * n * EPS * scale)


def test_backward_derivation_facts():
    d = tl.derive_backward_construction()
    assert d.result["skew_form"] == 0
    assert sp.expand(d.facts["symmetric_form"]) != 0
    assert sp.expand(d.result["Vdot"] + (d.facts["grad"].T * d.facts["P"] * d.facts["grad"])[0]) == 0


def test_bound_polynomial_takes_the_lowest_even_degree():
    assert tl.bound_polynomial(2 * x**4 + 2 * y**4, (x, y)) == x**4 + y**4
    assert tl.bound_polynomial(x**3 + x**4 + y**6, (x, y)) == x**4 + y**4
    assert tl.bound_polynomial(x**2 + y**4, (x, y)) == x**2 + y**2
    with pytest.raises(InputError):
        tl.bound_polynomial(sp.Integer(0), (x, y))


def test_gram_structure_prunes_forced_zero_diagonals():
    gs = tl.gram_structure(x**2 + y**4, (x, y))
    assert (2, 0) not in gs.basis and gs.outside == ()
    gs = tl.gram_structure(x**3 + x**2, (x,))
    assert gs.outside == ((3,),)


@settings(max_examples=15, deadline=None)
@given(seeds, st.integers(1, 4))
def test_exact_psd_agrees_with_eigenvalues(seed, n):
    rng = np.random.default_rng(seed)
    L = rng.integers(-3, 4, size=(n, n))
    G = sp.Matrix(L @ L.T) - sp.eye(n) * int(rng.integers(0, 3))
    psd, _ = tl.exact_psd(G)
    lam = np.linalg.eigvalsh(np.array(G.tolist(), dtype=float))[0]
    if abs(lam) > 1e-9:
        assert psd == (lam > 0)


def test_certificates_of_the_panel_are_exact():
    for c in tl.sos_panel():
        ce = nl.certify(c, sp.Rational(1, 1000))
        assert ce.certified, ce.failed()
        for key in ("V", "decay"):
            ex = ce.rechecks[key]
            assert ex.residual == 0 and ex.psd
            assert sp.expand(tl.gram_form(ex.G, ce.structures[key]) - ce.targets[key]) == 0


def test_wrong_candidates_are_infeasible_never_none():
    c = tl.sos_panel()[0]
    flipped = nl.certify(c.flipped(), sp.Rational(1, 1000))
    assert flipped.results["decay"].status == "infeasible" and not flipped.certified
    bad = nl.certify(tl.Candidate(c.vars, c.f, x**2 - y**2), sp.Rational(1, 1000))
    assert bad.results["V"].status == "infeasible" and "not SOS" in bad.failed()[0]
    rot = nl.certify(tl.Candidate((x, y), (-y, x), x**2 + y**2), sp.Rational(1, 1000))
    assert rot.results["decay"].status == "structurally infeasible" and rot.results["decay"].message


def test_derived_sos_certificate_matches_the_solver():
    d = tl.derive_sos_certificate()
    eps = d.facts["eps"]
    ce = nl.certify(tl.sos_panel()[0], sp.Rational(1, 1000))
    derived_min = float(d.facts["min_eig_decay"].subs(eps, sp.Rational(1, 1000)))
    # maximising t over the Gram family reaches the derived balanced eigenvalue
    assert abs(ce.results["decay"].t - derived_min) <= 1e-6
    assert abs(ce.results["V"].t - float(1 - sp.Rational(1, 1000))) <= 1e-6


@pytest.mark.parametrize("f,V,vars_,fragment", [
    ("sin(x), y", "x**2", None, "function calls"),
    ("-x, -y", "x^2", None, "use **"),
    ("-x, -y", "1/x", None, "not a polynomial"),
    ("-x, -y", "x**y", None, "plain whole number"),
    ("-x, -y", "x**-2", None, "negative exponent"),
    ("-x, -y", "x**2 + z", "x,y", "unknown name 'z'"),
    ("-x", "x**2 + y**2", None, "1 component but there are 2"),
    ("-x + 1, -y", "x**2", None, "f(0) ≠ 0"),
    ("-x,, -y", "x**2", None, "empty component"),
    ("-x, -y", "x.real", None, "not allowed"),
    ("-x, -y", "x**2", "x,,y", "empty name"),
    ("-x, -y", "x**2", "x,x", "repeated"),
    ("-x, -y", "x**13", None, "the largest exponent allowed"),
    ("-x, -y", "((x + y)**12)**12", None, "degree up to 144"),
    ("-x, -y", "", None, "empty"),
])
def test_parse_errors_name_the_problem(f, V, vars_, fragment):
    with pytest.raises(InputError, match=None) as exc:
        tl.parse_system(f, V, vars_)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_parse_decimals_are_exact_and_order_follows_vars():
    c = tl.parse_system("-0.5*y, -x", "x**2 + 0.1*y**2", "y,x")
    assert c.vars == (y, x)
    assert c.V == x**2 + sp.Rational(1, 10) * y**2
    assert c.f == (-y / 2, -x)


def test_resolutions_are_stated_in_meaningful_units():
    """Issue 29: every check of lyap.backward_construction and lyap.conditions states its resolution
    in named units; the rounding checks resolve ≤ 1e-9 and the ODE energy balance ≤ 1e-6 relative
    change of the reference (confirmed by re-running against the scaled reference)."""
    from proofs_checks.comparisons import REL_UNITS
    from proofs_checks.context import RunContext
    from proofs_checks.registry import ERROR_UNITS, get_claim
    from proofs_checks.runner import run_check

    ctx = RunContext(mode="quick")
    res = {}
    for cid in ("lyap.backward_construction", "lyap.conditions"):
        c = get_claim(cid)
        res.update({ch.name: run_check(c, ch, c.form, ctx).result for ch in c.checks})
    for name, r in res.items():
        assert r.passed and r.resolution_units != ERROR_UNITS and math.isfinite(r.resolution), name
    for name, target in (("identity_vs_sympy", 1e-9), ("structure", 1e-9), ("energy_balance", 1e-6)):
        assert res[name].resolution_units == REL_UNITS and 0 < res[name].resolution <= target, name
        assert res[name].details["resolution_confirmed"]["rejects_2eps"], name
    assert 0 < res["trajectories"].resolution <= 0.1
