"""approx.*: the one-layer rank-1 contextual mapping and its margin, connection counts of the sparse
patterns, and the tiny batched transformers of the universal-approximation evidence."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import approx as na
from numerics import sparse as nsp
from tests.strategies import seeds
from theory import approx as ta
from theory.validation import InputError

EPS = np.finfo(np.float64).eps
GRIDS = [(1, 3, 2), (1, 4, 2), (2, 2, 2), (2, 2, 3), (3, 2, 3)]


def test_grid_ids_are_a_bijection_spaced_by_delta():
    for d, b in ((1, 5), (2, 3), (3, 2)):
        X = na.grid_tokens(d, b)
        W = na.construction_weights(d, b)
        a = X @ W["u"]
        K, delta = b**d, 1 / b
        c0 = (K - 1) / (b - 1)
        assert np.allclose(a, delta * (c0 + np.arange(K)), atol=1e-12)
        assert len({tuple(r) for r in X}) == K and X.min() == delta and X.max() == 1.0


def test_layer_equals_a_hand_written_softmax():
    d, b, n = 2, 2, 3
    W = na.construction_weights(d, b)
    X = torch.from_numpy(na.grid_tokens(d, b)[[0, 2, 3]])
    a = X.numpy() @ W["u"]
    w = np.exp(W["lam"] * np.outer(a, a))
    f = (w / w.sum(1, keepdims=True)) @ a
    ref = X.numpy() + W["gamma"] * np.outer(f, np.eye(d)[0])
    assert np.max(np.abs(na.attention_layer(X, W).numpy() - ref)) <= 64 * n * EPS * 4


@pytest.mark.parametrize("d,b,n", GRIDS)
def test_bound_holds_and_is_nearly_attained_on_the_predicted_pair(d, b, n):
    W = na.construction_weights(d, b)
    B = na.margin_bound(d, b)
    s = na.separations(d, b, n, W)
    rnd = 64 * n * EPS * (math.sqrt(d) + 1)
    assert np.all(s.same_token >= B["same_token"] * (1 - rnd / B["same_token"].min()))
    assert s.distinct_tokens >= B["distinct_tokens"]
    assert s.equivariance <= rnd
    K = b**d
    # the closest pair of contexts is the top token with {.., 1} vs {.., 0}
    assert s.closest[0] == K - 1 and {tuple(s.closest[1]), tuple(s.closest[2])} == {
        tuple(sorted([K - 1 - c for c in range(n - 1)] + [1])), tuple(sorted([K - 1 - c for c in range(n - 1)] + [0]))}
    x = (1 / 8) ** b
    tau = 1 / ((1 - x) ** 3 * float(ta.derive_contextual_margin().facts["phi"].subs(sp.Symbol("x", positive=True), x)))
    assert na.tight_pair_separation(d, b, n, W) <= tau * B["same_token"][-1] * (1 + rnd / B["same_token"][-1])


def test_bound_matches_the_derivation():
    der = ta.derive_contextual_margin()
    S = der.facts["symbols"]
    f = sp.lambdify((S["x"], S["K"], S["delta"]), der.result["same_token"])
    for d, b in ((1, 3), (2, 2), (1, 4)):
        B = na.margin_bound(d, b)["same_token"]
        K = b**d
        c0 = (K - 1) / (b - 1)
        xs = (1 / 8) ** ((c0 + np.arange(K)) / c0)
        ref = np.array([f(x, K, 1 / b) for x in xs])
        assert np.allclose(B, ref, rtol=1e-12, atol=0)


def test_uniform_attention_collides_and_random_full_rank_does_not():
    """Mean pooling collides on equal-sum sets; a generic full-rank random attention separates
    (the catalogue's 'random attention is not a contextual mapping' is false in general)."""
    d, b, n = 3, 2, 3
    B = na.margin_bound(d, b)["same_token"].min()
    assert na.separations(d, b, n, na.uniform_attention_weights(d, b)).same_token.min() <= 64 * n * EPS * 3
    for seed in range(3):
        assert na.separations(d, b, n, na.random_full_rank_weights(d, b, seed=seed)).same_token.min() > B


def test_yun_grid_origin_breaks_the_rank1_construction():
    """The hidden condition: with the origin as a token (Yun's grid), its query is 0, its attention
    row uniform, and its outputs in contexts with equal sums coincide."""
    W = na.construction_weights(1, 5)
    X = torch.tensor([[[0.0], [0.2], [0.8]], [[0.0], [0.4], [0.6]]], dtype=torch.float64)
    Y = na.attention_layer(X, W)
    assert float((Y[0, 0] - Y[1, 0]).abs().max()) <= 8 * EPS


def test_margin_decays_exponentially_in_the_number_of_tokens():
    # B(top) ~ (K−2) ρ^{b(K−2)}: halving δ at d = 1 multiplies the exponent
    tops = [na.margin_bound(1, b)["same_token"][-1] for b in (3, 4, 5)]
    assert tops[0] > 1e3 * tops[1] > 1e6 * tops[2]


def test_input_errors():
    with pytest.raises(InputError):
        na.grid_tokens(2, 1)
    with pytest.raises(InputError):
        na.all_sequences(3, 4)
    with pytest.raises(InputError):
        na.tight_pair_separation(2, 2, 4, na.construction_weights(2, 2))
    with pytest.raises(InputError, match="perfect square"):
        na.CONNECTION_COUNTS["strided_local"](10)


# ---- connection counts


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 30), st.integers(1, 4))
def test_counts_match_built_masks(s, c):
    T = s * s
    c = min(c, s)
    for name in ("strided_local", "strided_stride", "fixed_block"):
        assert na.CONNECTION_COUNTS[name](T) == na.mask_counts(name, T)
    assert na.CONNECTION_COUNTS["fixed_summary"](T, c) == na.mask_counts("fixed_summary", T, c=c)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 200), st.integers(1, 4), st.integers(0, 3), seeds)
def test_linear_patterns_match_built_masks(T, w, g, seed):
    assert na.CONNECTION_COUNTS["star"](T) == int(nsp.star(T)[0].sum())
    if T - g >= 2 * w:
        lf = na.CONNECTION_COUNTS["longformer"](T, w, g)
        assert lf == na.mask_counts("longformer", T, w=w, g=g)
        assert lf == na.mask_counts("bigbird", T, w=w, g=g, r=0)
        bb = na.mask_counts("bigbird", T, w=w, g=g, r=2, seed=seed % 1000)
        assert lf <= bb <= lf + 2 * T


def test_derived_counts_and_growth():
    der = ta.derive_sparse_counts()
    T = der.facts["symbols"]["T"]
    assert der.result["star"] == 5 * T - 6
    assert sp.simplify(der.result["strided_local"] - (2 * T**sp.Rational(3, 2) - 2 * T + sp.sqrt(T))) == 0
    assert der.facts["leading"]["strided_stride"] == 1 and der.facts["leading"]["star"] == 5


# ---- evidence machinery


def test_shift_floor_is_the_best_equivariant_error():
    """The mean of the other tokens attains (n−2)/(n−1) (Monte Carlo within 5 SE)."""
    n, N = 4, 20000
    g = torch.Generator().manual_seed(0)
    X = torch.randn(N, n, 2, generator=g, dtype=torch.float64)
    pred = (X.sum(1, keepdim=True) - X) / (n - 1)
    err = ((pred - na.shift_target(X)) ** 2).mean((1, 2))
    assert abs(float(err.mean()) - na.shift_floor(n)) <= 5 * float(err.std()) / math.sqrt(N)


def test_targets_and_models_are_permutation_equivariant():
    t = na.equivariant_target(3)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(5, 4, 2, generator=g, dtype=torch.float64)
    perm = torch.tensor([2, 0, 3, 1])
    assert torch.allclose(t(X[:, perm]), t(X)[:, perm], atol=1e-13)
    model = na.BatchedTransformer([1, 2], [0, 1], 4, 2, 2, width=8, seed=0, dtype=torch.float64)
    Xm = X[None].expand(2, -1, -1, -1)
    out, outp = model(Xm), model(Xm[:, :, perm])
    assert torch.allclose(outp[0], out[0][:, perm], atol=1e-12)  # no PE: equivariant
    assert not torch.allclose(outp[1], out[1][:, perm], atol=1e-6)  # learned PE breaks it


def test_depth_gate_switches_blocks_off():
    model = na.BatchedTransformer([1, 3], [0, 0], 4, 2, 2, width=8, seed=0, dtype=torch.float64)
    with torch.no_grad():
        model.Wq[:, 1:] += torch.randn(model.Wq[:, 1:].shape, dtype=torch.float64)  # blocks 2-3: off for model 0 (depth 1), on for model 1 (depth 3)
    X = torch.randn(2, 3, 4, 2, dtype=torch.float64)
    ref = na.BatchedTransformer([1, 3], [0, 0], 4, 2, 2, width=8, seed=0, dtype=torch.float64)
    assert torch.allclose(model(X)[0], ref(X)[0]) and not torch.allclose(model(X)[1], ref(X)[1])


def test_bound_vs_derivation_resolution_is_relative_and_confirmed():
    """Issue 29: the symbolic bound check resolves a relative change of the derived bound ≤ 1e-9."""
    from proofs_checks.comparisons import REL_UNITS
    from proofs_checks.context import RunContext
    from proofs_checks.registry import get_claim
    from proofs_checks.runner import run_check

    c = get_claim("approx.contextual_mapping")
    check = next(ch for ch in c.checks if ch.name == "bound_vs_derivation")
    r = run_check(c, check, c.form, RunContext(mode="quick")).result
    assert r.passed and r.resolution_units == REL_UNITS and r.resolution <= 1e-9
    conf = r.details["resolution_confirmed"]
    assert conf["rejects_2eps"] and conf["accepts_half_eps"]
    # the same check on the bound scaled by 1 + 2ε is rejected
    scaled = {**c.form, "bound": lambda d, b, rho: {k: np.asarray(v) * (1 + 2 * r.resolution)
                                                    for k, v in na.margin_bound(d, b, rho).items()}}
    assert run_check(c, check, scaled, RunContext(mode="quick")).result.passed is False
