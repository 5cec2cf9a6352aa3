"""Property tests of numerics/adam.py and theory/adam.py (claim ``opt.adam``)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import adam as na
from theory import adam as ta
from theory.validation import InputError

from strategies import seeds

EPS = np.finfo(np.float64).eps


@st.composite
def adam_hps(draw):
    return dict(
        lr=draw(st.floats(1e-4, 0.1)),
        betas=(draw(st.floats(0.0, 0.99)), draw(st.floats(0.5, 0.9999))),
        eps=draw(st.sampled_from([1e-8, 1e-6, 1e-3])),
        weight_decay=draw(st.sampled_from([0.0, 1e-3, 0.1])),
        amsgrad=draw(st.booleans()),
        decoupled=draw(st.booleans()),
    )


@settings(max_examples=20)
@given(adam_hps(), st.integers(1, 4), st.integers(1, 5), seeds)
def test_reference_matches_torch_optim(hp, S, n, seed):
    N = 40
    rng = np.random.default_rng(seed)
    gf = na.NoisyQuadratic.draw((S, n), N, rng)
    theta0 = rng.normal(size=(S, n))
    mine = na.run_steps(na.adam_step, theta0, gf, N, hp)
    ref = na.run_torch(theta0, gf, N, hp)
    assert mine.shape == ref.shape == (N + 1, S, n)
    # rounding: a few ulps per step, relative to the iterate's size
    assert np.max(np.abs(mine - ref)) <= 64 * N * EPS * max(1.0, float(np.max(np.abs(ref))))


@settings(max_examples=25)
@given(st.floats(1e-6, 1e3).flatmap(lambda a: st.sampled_from([a, -a])), adam_hps(), st.integers(1, 30))
def test_constant_gradient_step_is_scale_free(g, hp, N):
    hp = dict(hp, weight_decay=0.0, amsgrad=False)
    traj = na.run_steps(na.adam_step, np.zeros(1), lambda th, t: np.array([g]), N, hp)
    steps = np.diff(traj[:, 0])
    expected = -hp["lr"] * g / (abs(g) + hp["eps"])
    # Rounding: a few ulps per step, amplified by the bias corrections 1/(1 − β^t), whose
    # denominators lose relative precision eps/(1 − β) at t = 1 (β2 = 0.9999: ×1e4; hypothesis
    # found a 1.3e-13 relative gap there, above an unamplified 64·N·eps).
    b1, b2 = hp["betas"]
    amplification = 1.0 / (1.0 - b1) + 1.0 / (1.0 - b2)
    np.testing.assert_allclose(steps, expected, rtol=64 * N * EPS * amplification, atol=0)


def test_seed001_formula_is_not_scale_invariant():
    hp = na.check_hp(dict(lr=1e-3))
    small = np.diff(na.run_steps(na.seed001_step, np.zeros(1), lambda th, t: np.array([1e-3]), 1, hp)[:, 0])
    large = np.diff(na.run_steps(na.seed001_step, np.zeros(1), lambda th, t: np.array([1e3]), 1, hp)[:, 0])
    assert abs(small[0]) > 1e3 * abs(large[0])  # Adam's first step is ≈ α for both


@pytest.mark.parametrize("hp,msg", [
    (dict(lr=-1.0), "lr"),
    (dict(betas=(1.0, 0.9)), "betas"),
    (dict(betas=(0.9, -0.1)), "betas"),
    (dict(eps=-1e-8), "eps"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(momentum=0.9), "unknown"),
])
def test_bad_hyperparameters(hp, msg):
    with pytest.raises(InputError, match=msg):
        na.check_hp(hp)


def test_bad_inputs():
    gf = na.NoisyQuadratic.draw((2,), 3, np.random.default_rng(0))
    with pytest.raises(InputError, match="3 steps"):
        na.run_steps(na.adam_step, np.zeros(2), gf, 5, {})
    with pytest.raises(InputError, match="NaN"):
        na.run_steps(na.adam_step, np.array([np.nan, 0.0]), gf, 1, {})


def test_derivation():
    d = ta.derive_adam_bias_correction()
    alpha, g, eps, b1, b2, t = d.facts["symbols"]
    assert d.result["sign_limit"] == -alpha * sp.sign(g)
    assert d.facts["mhat_mean"] == sp.Symbol("mu", real=True)
    ratio = d.facts["first_step_uncorrected_ratio"]
    assert abs(float(ratio.subs({b1: 0.9, b2: 0.999})) - 0.1 / np.sqrt(0.001)) < 1e-12
