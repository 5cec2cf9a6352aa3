"""Hostile pass 15 (tester b): its findings, pinned as strict xfails during the pass (which fixes nothing); fixed
after it, plain tests.

F1-F3 (the pass's HOSTILE15B_FINDINGS.md): the comparison helpers round values that are not exactly
float64 (a scalar Decimal/Fraction/long double in compare(), an object array of long doubles, integers beyond
2**53) and so pass comparisons whose exact values fail.
"""
import decimal
import fractions

import numpy as np
import pytest

from proofs_checks.comparisons import close, relative, seed_spread
from proofs_checks.registry import compare


def _refused_or_failed(call):
    try:
        r = call()
    except TypeError:
        return True
    return not r.passed


@pytest.mark.parametrize("error, tol", [
    (decimal.Decimal("1e-400"), 0.0),
    (np.longdouble("1e-4000"), 0.0),
    (np.longdouble(1) + np.longdouble(2) ** -60, 1.0),
    (fractions.Fraction(1, 3) + fractions.Fraction(1, 10**30), fractions.Fraction(1, 3)),
])
def test_compare_scalar_not_float64_is_refused(error, tol):
    assert _refused_or_failed(lambda: compare(error, tol, "x"))


def test_object_array_of_long_doubles_is_refused():
    x = np.array([np.longdouble(1) + np.longdouble(2) ** -60], dtype=object)
    assert _refused_or_failed(lambda: close(x, [1.0], 2.0**-70, "x"))


def test_big_integers_not_rounded():
    assert _refused_or_failed(lambda: close([2**60 + 1], [2**60], 0.5, "x"))


def test_big_integers_not_rounded_relative_seed_spread():
    assert _refused_or_failed(lambda: relative([2**60 + 1], [2**60], 1e-19, "x"))
    assert _refused_or_failed(lambda: seed_spread([[2**60 + 1], [2**60 + 1]], [2**60]))


def test_big_integers_not_rounded_z_test():
    from proofs_checks.comparisons import z_test

    assert _refused_or_failed(lambda: z_test({"a": (2**60 + 2, 0.3, 2**60)}))
