"""Specifics of theory/validation.py (InputError, as_finite_array, as_spd_matrix, require).

Written against the survivors of code-level mutation testing (``make mutation``): the dtype of the
result, every shape branch, the exact symmetry tolerance ``100·rtol·max(1, max|a|)``, and that every
message names the argument (see benchmarks/RESULTS.md, "Code-level mutation testing").
"""

from __future__ import annotations

import numpy as np
import pytest

from theory.validation import InputError, as_finite_array, as_spd_matrix, require


def test_require():
    require(True, "never raised")
    with pytest.raises(InputError, match="^the message$"):
        require(False, "the message")
    assert issubclass(InputError, ValueError)


def test_as_finite_array_is_float64():
    out = as_finite_array([1, 2], "v")
    assert out.dtype == np.float64
    assert as_finite_array(np.array([True, False]), "v").dtype == np.float64


@pytest.mark.parametrize("bad,msg", [
    ("abc", r"^v is not numeric: "),
    ([1, float("nan")], r"^v contains NaN or inf$"),
    ([float("inf")], r"^v contains NaN or inf$"),
])
def test_as_finite_array_messages(bad, msg):
    with pytest.raises(InputError, match=msg):
        as_finite_array(bad, "v")


def test_as_finite_array_shape_and_ndim():
    assert as_finite_array(np.zeros((2, 3)), "x", shape=(None, 3)).shape == (2, 3)
    with pytest.raises(InputError, match=r"^x must have 1 dimension\(s\), got shape \(2, 3\)$"):
        as_finite_array(np.zeros((2, 3)), "x", ndim=1)
    with pytest.raises(InputError, match=r"^x must have shape \(\*, 4\), got \(2, 3\)$"):
        as_finite_array(np.zeros((2, 3)), "x", shape=(None, 4))
    with pytest.raises(InputError, match=r"must have shape \(2, 3, \*\)"):
        as_finite_array(np.zeros((2, 3)), "x", shape=(2, 3, None))


def test_as_spd_matrix_diagonal_and_symmetrised():
    np.testing.assert_array_equal(as_spd_matrix([1, 2]), np.diag([1.0, 2.0]))
    a = np.array([[2.0, 1.0], [1.0 + 5e-11, 2.0]])  # asymmetry below 100·rtol: accepted, symmetrised
    out = as_spd_matrix(a)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, out.T)
    assert out[0, 1] == (a[0, 1] + a[1, 0]) / 2


@pytest.mark.parametrize("bad", [np.zeros((2, 3)), np.zeros((3, 2)), np.ones((2, 2, 2)), np.zeros((0, 0)), [],
                                 np.ones((1, 1, 1))])
def test_as_spd_matrix_needs_a_square_matrix(bad):
    with pytest.raises(InputError, match=r"^Lambda must be a square matrix \(or a diagonal\), got shape"):
        as_spd_matrix(bad)


def test_as_spd_matrix_messages_name_the_argument():
    with pytest.raises(InputError, match=r"^Lambda is not symmetric \(max \|A − Aᵀ\| = "):
        as_spd_matrix([[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(InputError, match=r"^Lambda is not positive definite \(smallest eigenvalue -1\)$"):
        as_spd_matrix([[1, 2], [2, 1]])
    with pytest.raises(InputError, match=r"^Sigma is not positive definite \(smallest eigenvalue -2\)$"):
        as_spd_matrix([1, -2, 3], "Sigma")
    with pytest.raises(InputError, match=r"^Sigma contains NaN or inf$"):
        as_spd_matrix([1, float("nan")], "Sigma")


def test_as_spd_matrix_symmetry_tolerance_is_100_rtol_times_scale():
    """atol = 100 · rtol · max(1, max|a|), absolute (rtol 0 in allclose)."""
    def off(delta, big=1.0):
        return np.array([[big, 0.0], [delta, big]])

    as_spd_matrix(off(0.9e-10))                     # below 1e-10: accepted
    with pytest.raises(InputError, match="not symmetric"):
        as_spd_matrix(off(1.005e-10))               # just above 1e-10
    with pytest.raises(InputError, match="not symmetric"):
        as_spd_matrix(off(1.5e-10))                 # scale is max(1, ·), not max(2, ·)
    as_spd_matrix(off(0.9e-8, big=100.0))           # scale 100: atol 1e-8
    with pytest.raises(InputError, match="not symmetric"):
        as_spd_matrix(off(1.1e-8, big=100.0))
    with pytest.raises(InputError, match="not symmetric"):  # no relative slack (allclose's rtol=1e-5)
        as_spd_matrix(np.array([[3.0, 2.0], [2.0 + 1e-6, 3.0]]))
    as_spd_matrix(off(0.9e-8), rtol=1e-10)          # rtol is honoured
    with pytest.raises(InputError, match="not symmetric"):
        as_spd_matrix(off(1.1e-8), rtol=1e-10)
