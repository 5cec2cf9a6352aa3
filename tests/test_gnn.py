"""Property tests of numerics/gnn.py (claim ``gnn.attention_is_gnn``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path

from numerics import gnn as ng
from theory.validation import InputError

from strategies import seeds

EPS = np.finfo(np.float64).eps


@st.composite
def digraphs(draw, self_loops=False):
    n = draw(st.integers(1, 9))
    p = draw(st.floats(0.0, 1.0))
    G = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(seeds))
    return G, n, rng, ng.random_digraph_edges(G, n, p, rng, self_loops=self_loops)


@settings(max_examples=25)
@given(digraphs(self_loops=True), st.integers(1, 5))
def test_message_passing_equals_masked_sdpa(graph, d):
    G, n, rng, (g, s, t, _) = graph
    X = rng.normal(size=(G, n, d))
    Wq, Wk, Wv = (rng.normal(size=(d, d)) for _ in range(3))
    out = ng.attention_message_passing(X.reshape(G * n, d), Wq, Wk, Wv, s + g * n, t + g * n).reshape(G, n, d)
    M = ng.adjacency_mask(s, t, n, G, g)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(X @ W) for W in (Wq, Wk, Wv)), attn_mask=torch.from_numpy(M)).numpy()
    scale = max(1.0, float(np.abs(ref).max()))
    tol = 64 * n * d * EPS * scale * max(1.0, float(np.abs(X).max()) ** 2 * d)
    np.testing.assert_allclose(out, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(ng.masked_attention(X, Wq, Wk, Wv, M), ref, rtol=0, atol=tol)


@settings(max_examples=25)
@given(digraphs())
def test_min_gnn_equals_scipy_shortest_path(graph):
    G, n, rng, (g, s, t, w) = graph
    D = ng.min_aggregation_gnn(G, n, g, s, t, w, ng.bellman_ford_rounds(n))
    W = ng.dense_weights(n, s, t, w, G, g)
    for k in range(G):
        sel = g == k
        R = shortest_path(sps.csr_matrix((w[sel], (s[sel], t[sel])), shape=(n, n)), method="BF")
        assert np.array_equal(np.isinf(R), np.isinf(D[k]))
        fin = np.isfinite(R)
        np.testing.assert_allclose(D[k][fin], R[fin], rtol=8 * n * EPS, atol=0)
        # a fixed point: one more round changes nothing, and distances obey the triangle inequality
        assert np.all(D[k][:, :, None] + W[k][None] >= D[k][:, None, :] - 8 * n * EPS)
    assert np.array_equal(ng.min_aggregation_gnn(G, n, g, s, t, w, n), D)


@pytest.mark.parametrize("n", [2, 3, 6, 11])
def test_chain_needs_n_minus_1_rounds(n):
    s, t, w = ng.chain_with_shortcuts(n)
    z = np.zeros_like(s)
    assert ng.min_aggregation_gnn(1, n, z, s, t, w, n - 1)[0, 0, n - 1] == n - 1
    assert ng.min_aggregation_gnn(1, n, z, s, t, w, n - 2)[0, 0, n - 1] > n - 1


def test_isolated_node_gets_zero_output_and_inf_distance():
    X = np.eye(3)
    out = ng.attention_message_passing(X, np.eye(3), np.eye(3), np.eye(3), [0, 1], [1, 0])
    assert np.all(out[2] == 0)
    D = ng.min_aggregation_gnn(1, 3, [0, 0], [0, 1], [1, 0], [1.0, 2.0], 2)[0]
    assert np.isinf(D[0, 2]) and np.isinf(D[2, 0]) and D[2, 2] == 0


def test_bad_inputs():
    with pytest.raises(InputError, match="non-negative"):
        ng.min_aggregation_gnn(1, 2, [0], [0], [1], [-1.0], 1)
    with pytest.raises(InputError, match="node ids"):
        ng.attention_message_passing(np.eye(2), np.eye(2), np.eye(2), np.eye(2), [0], [5])
    with pytest.raises(InputError, match="p in"):
        ng.random_digraph_edges(1, 3, 1.5, np.random.default_rng(0))


def test_masked_softmax_limit_derivation():
    from theory import gnn as tg

    d = tg.derive_masked_softmax_limit(3, (1,))
    assert d.facts["residual"] == 0
    assert d.result == (0, 1, 0)
