"""Hostile pass 18, tester b: findings pinned as strict xfails during the pass; fixed after it, plain tests."""

from __future__ import annotations

import math

import pytest


@pytest.mark.parametrize("per_seed, reference", [
    ([[1e308], [-1e308]], [5.0]),
    ([[math.inf], [math.inf]], [math.inf]),
])
def test_seed_spread_never_passes_on_an_overflowed_se_or_non_finite_seeds(per_seed, reference):
    from proofs_checks.comparisons import seed_spread

    try:
        r = seed_spread(per_seed, reference)
    except (ValueError, ArithmeticError):  # a VacuousCheck (no power) is an acceptable answer too
        return
    assert not r.passed
