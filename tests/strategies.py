"""Hypothesis strategies shared by the topic tests (strategies as values, composed).

Tolerances that depend on drawn sizes are derived in the tests from those sizes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = ["seeds", "finite_floats", "logits", "spd_matrices", "pm1_patterns"]

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def finite_floats(bound: float = 1e3) -> st.SearchStrategy[float]:
    return st.floats(min_value=-bound, max_value=bound, allow_nan=False, allow_infinity=False)


def logits(max_len: int = 12, bound: float = 700.0) -> st.SearchStrategy[np.ndarray]:
    """1-D logit vectors, entries in [-bound, bound] (±700 probes exp overflow)."""
    return hnp.arrays(np.float64, st.integers(1, max_len), elements=finite_floats(bound))


@st.composite
def spd_matrices(draw, d_min: int = 2, d_max: int = 6, max_cond: float = 20.0):
    """Symmetric positive-definite matrices with condition number ≤ ``max_cond``:
    a random orthogonal basis (QR of a Gaussian) and eigenvalues in [1, max_cond]."""
    d = draw(st.integers(d_min, d_max))
    seed = draw(seeds)
    eig = draw(st.lists(st.floats(1.0, max_cond), min_size=d, max_size=d))
    from numerics.icl import random_spd

    return random_spd(np.random.default_rng(seed), d, eigenvalues=eig)


@st.composite
def pm1_patterns(draw, d_min: int = 8, d_max: int = 64, n_min: int = 1, n_max: int = 8):
    """A (n, d) array of ±1 patterns (rows)."""
    d = draw(st.integers(d_min, d_max))
    n = draw(st.integers(n_min, n_max))
    rng = np.random.default_rng(draw(seeds))
    return rng.choice([-1.0, 1.0], size=(n, d))


@st.composite
def att_svm_instances(draw, n_max: int = 20, T_max: int = 10, d_max: int = 16, setting: str = "generic"):
    """Feasible Att-SVM instances (numerics.att_svm.make_instance): unit tokens, unique optimal
    token per sequence with a score gap, n ≤ n_max, T ≤ T_max, d ≤ d_max."""
    from numerics.att_svm import make_instance

    T = draw(st.integers(2, T_max))
    d = draw(st.integers(4, d_max))
    # n(T−1) linear constraints on d² unknowns: keep them at most d²/2 so that random draws are
    # feasible with high probability (make_instance certifies feasibility and redraws otherwise).
    n = draw(st.integers(1, max(1, min(n_max, d * d // (2 * (T - 1))))))
    gap = draw(st.floats(0.05, 0.4))
    return make_instance(n, T, d, seed=draw(seeds), setting=setting, gap=gap)


@st.composite
def attention_problems(draw, B_max: int = 3, T_max: int = 6, d_max: int = 4, Dv_max: int = 6, scale_max: float = 30.0):
    """Random single-head attention inputs ``(Q, K, V)`` of shapes ``(B, T, d)``, ``(B, T, d)``,
    ``(B, T, D_v)``; queries scaled by a drawn factor up to ``scale_max`` (near one-hot weights)."""
    B, T = draw(st.integers(1, B_max)), draw(st.integers(1, T_max))
    d, Dv = draw(st.integers(1, d_max)), draw(st.integers(1, Dv_max))
    scale = draw(st.floats(0.1, scale_max))
    rng = np.random.default_rng(draw(seeds))
    return rng.normal(size=(B, T, d)) * scale, rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))
