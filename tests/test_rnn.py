"""Property tests of numerics/rnn.py and theory/rnn.py (claim ``rnn.bptt``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics import rnn as nr
from theory import rnn as tr
from theory.validation import InputError

from strategies import seeds

EPS = np.finfo(np.float64).eps


@st.composite
def rnn_problems(draw):
    d_x, d_h, d_y = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    T, B = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(seeds))
    p = nr.random_params(d_x, d_h, d_y, rng, gain=draw(st.floats(0.1, 1.5)))
    return p, rng.normal(size=(B, T, d_x)), rng.normal(size=(B, T, d_y))


def _tol(p, X, ref):
    T, d_h = X.shape[1], p["Wh"].shape[0]
    return 256 * T * (d_h + X.shape[2]) * EPS * max(1.0, float(np.abs(ref).max()))


@settings(max_examples=15)
@given(rnn_problems())
def test_tied_gradient_is_sum_of_untied(prob):
    p, X, Z = prob
    ref = nr.tied_gradients_nn_rnn(p, X, Z)
    unt = nr.untied_gradients(p, X, Z)
    mine = nr.bptt_numpy(p, X, Z)
    for k in nr.PARAM_NAMES:
        assert unt[k].shape == (X.shape[1], *p[k].shape)
        np.testing.assert_allclose(nr.sum_over_steps(unt[k]), ref[k], rtol=0, atol=_tol(p, X, ref[k]))
        np.testing.assert_allclose(mine[k], ref[k], rtol=0, atol=_tol(p, X, ref[k]))


@settings(max_examples=15)
@given(rnn_problems())
def test_projection_is_average_and_idempotent(prob):
    p, X, Z = prob
    G = nr.untied_gradients(p, X, Z)["Wh"]
    P = nr.project_tied(G)
    T = G.shape[0]
    tol = 16 * T * EPS * max(1.0, float(np.abs(G).max()))
    np.testing.assert_allclose(nr.project_tied(P), P, rtol=0, atol=tol)
    np.testing.assert_allclose(T * P[0], nr.sum_over_steps(G), rtol=0, atol=T * tol)
    # the residual is orthogonal to the tied subspace
    assert abs(float(np.sum((G - P) * P[0]))) <= T * tol * max(1.0, float(np.abs(G).max())) * G[0].size


def test_one_step_sequence_has_no_recurrent_term():
    rng = np.random.default_rng(0)
    p = nr.random_params(2, 3, 1, rng)
    X, Z = rng.normal(size=(2, 1, 2)), rng.normal(size=(2, 1, 1))
    a, b = nr.bptt_numpy(p, X, Z), nr.bptt_numpy(p, X, Z, recurrent_path=False)
    for k in nr.PARAM_NAMES:
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("bad,msg", [
    (lambda X, Z: (X[:, :, :1], Z), "Wx must be"),
    (lambda X, Z: (X, Z[:1]), "share"),
    (lambda X, Z: (X * np.nan, Z), "NaN"),
    (lambda X, Z: (X[0], Z), "3 dimension"),
])
def test_bad_inputs_raise_input_error(bad, msg):
    rng = np.random.default_rng(1)
    p = nr.random_params(2, 3, 1, rng)
    X, Z = rng.normal(size=(2, 4, 2)), rng.normal(size=(2, 4, 1))
    with pytest.raises(InputError, match=msg):
        nr.bptt_numpy(p, *bad(X, Z))


def test_derivations():
    for T in (1, 2, 3):
        d = tr.derive_bptt_scalar(T)
        assert d.facts["tied_minus_sum_untied"] == 0 and d.facts["bptt_minus_tied"] == 0
        assert len(d.result["untied"]) == T
    pr = tr.derive_tied_projection(5)
    assert pr.result["tied_over_projection"] == 5
    assert pr.facts["projected_step_minus_tied_step_eta_over_T"] == 0


def test_bptt_derivation_prints_the_same_in_every_process():
    """σ′(a) as ``sp.diff`` writes it binds a Dummy whose index follows the process's string hashes, and
    that index ordered the printed factors: a report's rnn.bptt page differed between a cluster worker
    and the tverify process. σ′ is now a function of its own: no step holds a Dummy, and two processes
    with different hash seeds print the same LaTeX."""
    import os
    import subprocess
    import sys

    import sympy as sp

    fn = getattr(tr.derive_bptt_scalar, "__wrapped__", tr.derive_bptt_scalar)
    steps = [s.expr for s in fn().steps if isinstance(s.expr, sp.Basic)]
    assert steps and not any(e.atoms(sp.Dummy) or e.atoms(sp.Subs) for e in steps)
    assert any(e.atoms(tr.dsigma) for e in steps)
    code = "from theory import rnn; print(repr([s.latex() for s in rnn.derive_bptt_scalar().steps]))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": h}).stdout for h in ("1", "6640")}
    assert len(outs) == 1 and "\\sigma'" in outs.pop()
