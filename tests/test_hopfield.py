"""Property tests of the Hopfield numerics and derivations (group D).

The generic registry tests (claims verify in quick mode, every mutant killed) live in
tests/test_registry.py; here: dynamics properties under hypothesis, retrieval from corrupted
queries, agreement with reference implementations, error handling.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import hopfield as nh
from tests.strategies import pm1_patterns, seeds
from theory import hopfield as th
from theory.validation import InputError

EPS = np.finfo(np.float64).eps


@st.composite
def symmetric_nets(draw, d_min=3, d_max=16):
    """(xi (1, 1, d), W (1, d, d) symmetric with w_ii ≥ 0, b (1, d)): Hebbian plus Gaussian noise."""
    rng = np.random.default_rng(draw(seeds))
    d = draw(st.integers(d_min, d_max))
    N = draw(st.integers(1, 6))
    X = rng.choice([-1.0, 1.0], size=(N, d))
    A = rng.normal(size=(d, d)) * draw(st.sampled_from([0.0, 0.5, 3.0]))
    W = X.T @ X + A + A.T
    np.fill_diagonal(W, np.abs(np.diag(W)) * draw(st.sampled_from([0.0, 1.0])))
    b = rng.normal(size=d) * draw(st.sampled_from([0.0, 1.0]))
    xi = rng.choice([-1.0, 1.0], size=d)
    t = torch.from_numpy
    return t(xi)[None, None], t(W)[None], t(b)[None]


# --------------------------------------------------------------------------------------------
# classical network


@given(symmetric_nets())
@settings(max_examples=30)
def test_async_energy_never_increases_and_drops_2wii_per_flip(net):
    xi, W, b = net
    d = xi.shape[-1]
    final, sweeps, trace = nh.run_async(xi, W, b, max_sweeps=60, record_energy=True)
    tr = trace[:, 0, 0].numpy()
    scale = float(W.abs().max() * d * d + b.abs().max() * d)
    assert np.all(np.diff(tr) <= 16 * d * EPS * scale)
    # converged to a fixed point of the asynchronous rule
    h = final[0] @ W[0] - b
    assert torch.equal(nh.sgn(h), final[0])
    # every single flip lowers E by at least 2 w_ii
    x = xi[0, 0].clone()
    for _ in range(3):
        for i in range(d):
            new = nh.async_unit_update(x, W[0], b[0], i)
            if new[i] != x[i]:
                dE = float(nh.classical_energy(new, W[0], b[0]) - nh.classical_energy(x, W[0], b[0]))
                assert dE <= -2 * float(W[0, i, i]) + 16 * d * EPS * scale
                assert math.isclose(dE, float(nh.flip_energy_change(x, W[0], b[0], i)), abs_tol=16 * d * EPS * scale)
            x = new


@given(symmetric_nets())
@settings(max_examples=20)
def test_greedy_async_reaches_a_fixed_point_without_raising_energy(net):
    xi, W, b = net
    final, steps = nh.run_async_greedy(xi, W, b)
    assert torch.equal(nh.sgn(final[0] @ W[0] - b), final[0])
    assert float(nh.classical_energy(final, W[:, None], b[:, None])) <= float(nh.classical_energy(xi, W[:, None], b[:, None])) + 1e-9


def test_synchronous_two_cycle_counterexample():
    W = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    b = torch.zeros(2, dtype=torch.float64)
    xi = torch.tensor([1.0, -1.0], dtype=torch.float64)
    x1 = nh.sync_step(xi, W, b)
    assert torch.equal(x1, -xi) and torch.equal(nh.sync_step(x1, W, b), xi)
    # the asynchronous rule from the same state reaches a fixed point instead
    final, _, _ = nh.run_async(xi[None, None], W[None], b[None])
    assert torch.equal(nh.sync_step(final[0, 0], W, b), final[0, 0])
    found, *_ = nh.find_sync_two_cycles(64, 8, seed=1)
    assert int(found.sum()) > 0


@given(pm1_patterns(d_min=8, d_max=48, n_min=1, n_max=10))
@settings(max_examples=25)
def test_fixed_point_fraction_matches_explicit_weights(P):
    Pt = torch.from_numpy(P)[None]
    frac, allf = nh.fixed_point_fraction(Pt)
    W = nh.hebbian_weights(Pt)[0].numpy()
    ok = np.all(np.where(P @ W >= 0, 1.0, -1.0) == P, axis=1)
    assert math.isclose(float(frac), ok.mean()) and bool(allf) == ok.all()


def test_classical_retrieval_from_corrupted_queries():
    P = nh.random_patterns((16, 5, 200), seed=3)
    W = nh.hebbian_weights(P)
    for kind, level in (("flip", 0.15), ("mask", 0.5), ("gauss", 0.8)):
        q = nh.sgn(nh.corrupt(P, kind, level, seed=4))
        final, _ = nh.run_async_greedy(q, W)
        assert (final == P).all(-1).double().mean() > 0.97, kind


def test_capacity_sweep_orders_the_two_criteria():
    """At d = 512, N = 0.11 d (above d/(2 ln d) ≈ 0.08 d): the bit-error criterion still holds
    while exact recall of all patterns has collapsed and many patterns are not exact fixed points."""
    d = 512
    lo, = nh.classical_capacity_sweep(d, [round(0.11 * d)], 6, seed=5, bit_error=True, starts=8)
    assert lo.bit_error < 0.015 and lo.all_fixed < 0.2 and lo.frac_fixed < 0.8


# --------------------------------------------------------------------------------------------
# dense associative memory


@given(pm1_patterns(d_min=4, d_max=24, n_min=1, n_max=8), seeds)
@settings(max_examples=25)
def test_dense_quadratic_update_is_the_classical_rule(P, seed):
    rng = np.random.default_rng(seed)
    xi = torch.from_numpy(rng.choice([-1.0, 1.0], size=(1, 3, P.shape[1])))
    Pt = torch.from_numpy(P)[None]
    W = nh.hebbian_weights(Pt)
    assert torch.equal(nh.dense_update(xi, Pt, "poly", 2), nh.sgn(xi @ W))


def test_dense_update_is_sign_of_energy_difference():
    P = nh.random_patterns((2, 6, 9), seed=7)
    xi = nh.random_patterns((2, 4, 9), seed=8)
    for kind, a in (("poly", 3), ("exp", None)):
        upd = nh.dense_update(xi, P, kind, a)
        for l in range(9):
            plus, minus = xi.clone(), xi.clone()
            plus[..., l], minus[..., l] = 1, -1
            diff = -nh.dense_energy(plus, P, kind, a) + nh.dense_energy(minus, P, kind, a)
            assert torch.equal(upd[..., l], nh.sgn(diff))


def test_dense_memory_stores_more_than_classical():
    d, N = 24, 40
    P = nh.random_patterns((8, N, d), seed=9)
    assert float(nh.dense_fixed_fraction(P, "poly", 3).mean()) > 0.7
    assert float(nh.fixed_point_fraction(P)[0].mean()) < 0.2


# --------------------------------------------------------------------------------------------
# modern network


@st.composite
def modern_instances(draw):
    rng = np.random.default_rng(draw(seeds))
    N, d = draw(st.integers(1, 10)), draw(st.integers(1, 8))
    P = rng.normal(size=(1, N, d)) * draw(st.floats(0.1, 4.0))
    beta = draw(st.floats(0.05, 30.0))
    xi = rng.normal(size=(1, 3, d)) * draw(st.floats(0.0, 10.0))
    return torch.from_numpy(P), torch.from_numpy(xi), beta


@given(modern_instances())
@settings(max_examples=40)
def test_modern_energy_descends_and_stays_in_bounds(inst):
    P, xi, beta = inst
    M = float(P.norm(dim=-1).max())
    tol = 64 * EPS * (1 + M ** 2 + float((xi ** 2).sum(-1).max()) + math.log(P.shape[1]) / beta)
    E = nh.modern_energy(xi, P, beta)
    assert float(E.min()) >= -tol
    for _ in range(10):
        xi_new = nh.modern_update(xi, P, beta)
        E_new = nh.modern_energy(xi_new, P, beta)
        assert float((E_new - E).max()) <= tol
        # after one update the state is in the convex hull, where E ≤ 2M²
        assert float(E_new.max()) <= 2 * M ** 2 + tol
        xi, E = xi_new, E_new


@given(modern_instances())
@settings(max_examples=20)
def test_modern_gradient_matches_autograd(inst):
    P, xi, beta = inst
    x = xi.clone().requires_grad_(True)
    nh.modern_energy(x, P, beta).sum().backward()
    assert torch.allclose(nh.modern_grad(xi, P, beta), x.grad, atol=1e-10, rtol=1e-10)


@st.composite
def separated_instances(draw):
    """Patterns with norms in [0.8M, M] in random directions, query near x_0, β in [0.2, 6]."""
    rng = np.random.default_rng(draw(seeds))
    N, d = draw(st.integers(2, 12)), draw(st.integers(2, 10))
    M = draw(st.floats(0.5, 4.0))
    P = rng.normal(size=(N, d))
    P *= M * rng.uniform(0.8, 1.0, size=(N, 1)) / np.linalg.norm(P, axis=1, keepdims=True)
    xi = P[0] + rng.normal(size=d) * draw(st.floats(0.0, 0.3))
    return torch.from_numpy(P[None]), torch.from_numpy(xi[None]), draw(st.floats(0.2, 6.0))


@given(separated_instances())
@settings(max_examples=40)
def test_theorem5_bound_holds(inst):
    P, xi, beta = inst
    err, Delta, bound = nh.retrieval_error_and_bound(P, xi, 0, beta)
    assert float(err) <= float(bound) * (1 + 1e-9)


def test_theorem5_error_is_exponentially_small_in_beta_delta():
    P = torch.tensor([[[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0]]], dtype=torch.float64)
    xi = P[:, 0].clone()
    bd, le = [], []
    for beta in np.linspace(3, 12, 6):
        err, Delta, _ = nh.retrieval_error_and_bound(P, xi, 0, float(beta))
        bd.append(beta * float(Delta))
        le.append(math.log(float(err)))
    slope = np.polyfit(bd, le, 1)[0]
    assert abs(slope + 1) < 0.05  # Δ = 1 here; error ≈ const·e^{−βΔ}


def test_theorem5_without_n_minus_1_fails_on_antipodal_instance():
    """The tighter bound 2 exp(−β(Δ − 2εM)) M is false: N − 1 antipodal copies make the error
    ≈ (N − 1) times larger."""
    N, beta = 8, 4.0
    u = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    P = torch.stack([u] + [-u] * (N - 1))[None]
    err, _, bound = nh.retrieval_error_and_bound(P, u[None], 0, beta)
    assert float(err) <= float(bound)
    assert float(err) > float(bound) / (N - 1)


def test_modern_retrieves_masked_half():
    g = torch.Generator().manual_seed(0)
    P = torch.randn(8, 30, 64, generator=g, dtype=torch.float64)
    q = nh.corrupt(P, "mask", 0.5, seed=1)
    out = nh.modern_update(q, P, beta=1.0)
    nearest = (out[..., None, :] - P[..., None, :, :]).norm(dim=-1).argmin(-1)
    assert (nearest == torch.arange(30)).double().mean() > 0.95


# --------------------------------------------------------------------------------------------
# attention identity


@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 6), st.integers(1, 5), st.integers(1, 8), st.integers(1, 4), seeds)
@settings(max_examples=30)
def test_hopfield_update_equals_sdpa(B, S, T, dm, dk, dv, seed):
    g = torch.Generator().manual_seed(seed)
    kw = dict(generator=g, dtype=torch.float64)
    R, Y = torch.randn(B, S, dm, **kw), torch.randn(B, T, dm, **kw)
    WQ, WK, WV = torch.randn(dm, dk, **kw), torch.randn(dm, dk, **kw), torch.randn(dk, dv, **kw)
    K = Y @ WK
    ref = torch.nn.functional.scaled_dot_product_attention(R @ WQ, K, K @ WV)
    assert torch.allclose(nh.hopfield_attention(R, Y, WQ, WK, WV), ref, atol=1e-12 * (1 + float(ref.abs().max())))


# --------------------------------------------------------------------------------------------
# derivations and error handling


def test_derived_capacities_and_the_stated_ratio():
    r = th.derive_classical_capacity()
    d = r.facts["d"]
    assert sp.simplify(r.result["exact_recall"] - d / (2 * sp.log(d))) == 0
    assert r.facts["stated_ratio_limit"] == sp.oo
    assert 35 < float(r.facts["crossover_d"]) < 36
    assert th.derive_capacity_formulas(4).result["most"] == d ** 3 / (30 * sp.log(d))
    assert th.derive_capacity_formulas(3).facts["double_factorial_matches"]


def test_flip_derivation_for_other_units():
    r = th.derive_classical_flip(4, 2)
    assert r.facts["residual"] == 0
    assert sp.Symbol("w_33", real=True) not in r.result.free_symbols  # the self-coupling cancels


@pytest.mark.parametrize("call,msg", [
    (lambda: nh.corrupt(torch.ones(2, 3), "blur", 0.1, 0), "unknown corruption"),
    (lambda: nh.run_async(torch.ones(3), torch.eye(3)), "expects xi"),
    (lambda: nh.run_async_greedy(torch.ones(3), torch.eye(3)), "expects xi"),
    (lambda: nh.dense_energy(torch.ones(1, 2), torch.ones(1, 2), "cosh"), "unknown interaction"),
])
def test_bad_inputs_raise_input_error(call, msg):
    with pytest.raises(InputError, match=msg):
        call()


def test_cuda_request_without_cuda_is_an_input_error(monkeypatch):
    import numerics.torch_utils as tu

    monkeypatch.setattr(tu, "cuda_available", lambda: False)
    with pytest.raises(InputError, match="CUDA"):
        nh.random_patterns((2, 3), seed=0, device="cuda")


@pytest.mark.cuda
def test_capacity_sweep_on_cuda_matches_cpu_statistics():
    pts = nh.classical_capacity_sweep(256, [12, 46], 32, seed=11, device="cuda")
    assert pts[0].frac_fixed > 0.95 and pts[1].frac_fixed < 0.4


def test_hopfield_checks_state_their_resolution_units():
    """Issue 29: the Hopfield rounding checks resolve ≤ 1e-9 relative (confirmed at 1 ± 2ε), and the
    Monte Carlo threshold checks state theirs as a change of the capacity."""
    from proofs_checks.claims._hopfield_common import threshold_load_resolution
    from proofs_checks.context import RunContext
    from proofs_checks.registry import ERROR_UNITS, get_claim

    ctx = RunContext(mode="quick", seed=0)
    for cid, name in (("hop.classical_energy", "flip_delta_vs_sympy"), ("hop.modern_energy", "descent_and_bounds"),
                      ("hop.one_step_retrieval", "tight_family_exact"), ("hop.attention_identity", "vs_sympy")):
        claim = get_claim(cid)
        chk = next(c for c in claim.checks if c.name == name)
        r = chk.fn(claim.form, ctx)
        assert r.passed and r.resolution_units != ERROR_UNITS and 0 < r.resolution <= 1e-9, (cid, name, r.resolution)
        assert r.details["resolution_confirmed"]["rejects_2eps"], (cid, name)
    # a point 3 SE past its threshold at no load inside [0, 1] rejects nothing in that direction
    pts = [(10, 0.01, 0.01, 100), (20, 0.05, 0.01, 100)]
    eps, det = threshold_load_resolution([(pts, 1, 0.015, "ge", "down"), (pts, 0, 0.015, "le", "up")])
    assert math.isinf(det["down"]["delta"]) and eps == det["up"]["delta"] > 0
