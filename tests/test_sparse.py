"""sparse.connectivity: pattern builders, the three Yun et al. conditions, sparse attention."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import sparse as nsp
from tests.strategies import seeds
from theory.validation import InputError


@st.composite
def directed_patterns(draw, n_min=2, n_max=7, p_max=2):
    """1..p_max random boolean (n, n) patterns with a shared n (density drawn too)."""
    n = draw(st.integers(n_min, n_max))
    p = draw(st.integers(1, p_max))
    rng = np.random.default_rng(draw(seeds))
    dens = draw(st.floats(0.1, 0.8))
    masks = [rng.random((n, n)) < dens for _ in range(p)]
    if draw(st.booleans()):
        for m in masks:
            np.fill_diagonal(m, True)
    return masks


@st.composite
def builder_patterns(draw):
    name = draw(st.sampled_from(sorted(nsp.BUILDERS)))
    if name == "fixed":
        block = draw(st.integers(1, 5))
        n = block * draw(st.integers(1, 6))
        return name, nsp.fixed(n, block, draw(st.integers(1, block)))
    n = draw(st.integers(2, 40))
    if name == "band":
        return name, nsp.band(n, draw(st.integers(1, 6)))
    if name == "strided":
        return name, nsp.strided(n, draw(st.integers(2, 8)))
    if name == "star":
        return name, nsp.star(n)
    if name == "longformer":
        g = draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=3, unique=True))
        return name, nsp.longformer(n, draw(st.integers(1, 4)), g)
    return name, nsp.bigbird(n, draw(st.integers(1, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(seeds))


@settings(max_examples=40)
@given(directed_patterns())
def test_hamiltonian_path_matches_bruteforce(masks):
    path = nsp.hamiltonian_path(masks)
    assert (path is not None) == nsp.hamiltonian_path_exists_bruteforce(masks)
    if path is not None:
        assert nsp.is_hamiltonian_path(masks, path)


@settings(max_examples=40)
@given(directed_patterns(n_max=10))
def test_layers_to_full_matches_set_recursion(masks):
    assert nsp.layers_to_full(masks) == nsp.layers_to_full_sets(masks)


@settings(max_examples=30)
@given(builder_patterns())
def test_every_builder_meets_the_three_conditions(case):
    name, masks = case
    assert nsp.has_self_loops(masks)
    path = nsp.hamiltonian_path(masks)
    assert path is not None and nsp.is_hamiltonian_path(masks, path)
    s = nsp.layers_to_full(masks)
    assert s is not None
    if len(masks) == 1:
        assert s == nsp.layers_to_full_distance(masks[0])


@given(st.integers(2, 60), st.integers(1, 10))
def test_band_layers_closed_form(n, w):
    assert nsp.layers_to_full(nsp.band(n, w)) == math.ceil((n - 1) / w)


@settings(max_examples=20)
@given(directed_patterns(n_min=2, n_max=12, p_max=1), seeds)
def test_sparse_attention_equals_masked_sdpa(masks, seed):
    m = masks[0] | np.eye(masks[0].shape[0], dtype=bool)  # non-empty rows
    n = m.shape[0]
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, n, 4, generator=g, dtype=torch.float64) for _ in range(3))
    out, ref = nsp.sparse_attention(q, k, v, m), nsp.masked_dense_attention(q, k, v, m)
    assert float((out - ref).abs().max()) <= 64 * n * np.finfo(float).eps * float(v.abs().max())


def test_negative_patterns():
    i, j = np.indices((6, 6))
    assert nsp.hamiltonian_path([(i // 3) == (j // 3)]) is None
    assert nsp.layers_to_full([(i // 3) == (j // 3)]) is None
    assert nsp.layers_to_full([(j <= i) & (i - j <= 1)]) is None  # causal: token 0 never sees the rest
    assert not nsp.has_self_loops([np.abs(i - j) == 1])


def test_input_errors():
    with pytest.raises(InputError, match="multiple"):
        nsp.fixed(7, 3)
    with pytest.raises(InputError, match="square"):
        nsp.layers_to_full([np.ones((3, 3), bool), np.ones((4, 4), bool)])
    with pytest.raises(InputError, match="at least one key"):
        nsp.sparse_attention(*(torch.zeros(3, 2, dtype=torch.float64),) * 3, np.eye(3, dtype=bool) & False)
    with pytest.raises(InputError, match="too costly"):
        rng = np.random.default_rng(0)
        m = rng.random((20, 20)) < 0.5
        m[1, 0] = m[0, 1] = False  # no witness 0→1→…
        nsp.hamiltonian_path([m])
    with pytest.raises(InputError):
        nsp.band(0)
