"""In-process pins of end-to-end hostile reproducers moved to the integration tier for their time (issue 46): each
test names the reproducer it stands for; the reproducer still runs in ``make test-integration``."""

from __future__ import annotations

import math
from types import SimpleNamespace

import sympy as sp


def test_a_nan_error_is_no_measured_margin():
    """Pin of tests/test_hostile_round50b.py::test_f1_nan_mutant_is_no_margin_inf (45b F1)."""
    from proofs_checks.runner import _margin, _margin_json

    assert math.isnan(_margin(SimpleNamespace(error=math.nan, ratio=math.inf)))
    assert _margin_json(_margin(SimpleNamespace(error=math.nan, ratio=math.inf))) is None
    assert _margin(SimpleNamespace(error=4.0, ratio=2.0)) == 2.0


def test_an_obligation_of_complex_infinity_is_false():
    """Pin of tests/test_hostile_round50b.py::test_f2_complex_infinity_is_not_zero (45b F2)."""
    from theory.derivation import DerivationBuilder

    b = DerivationBuilder("zoo")
    beta = sp.Symbol("beta", positive=True)
    b.fact("args", (beta,))
    b.obligation("the ratio is 0", sp.Integer(1) / (beta - beta))
    b.obligation("nan is 0", sp.nan)
    d = b.done(b.step("one", beta))
    verdicts = [o.status for o in d.check_obligations()]
    assert verdicts == ["fails", "fails"], verdicts


def test_matches_derivation_judges_each_point_by_its_own_scale():
    """Pin of tests/test_hostile_round47b.py::test_41b_f1_matches_derivation_tolerance_is_per_point (41b F1): a form
    wrong by a factor 2 where the derivation's values are small is failed, whatever the largest value drawn."""
    import numpy as np

    from proofs_checks.context import RunContext
    from proofs_checks.plugin import DerivationBuilder, matches_derivation

    def derive():
        b = DerivationBuilder("derivative of exp(40x)/40")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        return b.done(b.step("Differentiate", sp.diff(sp.exp(40 * x) / 40, x)))

    check = matches_derivation(derive, lambda rng: (rng.normal(),))
    ctx = RunContext(mode="quick", seed=0)
    assert check.fn(lambda x: float(np.exp(40 * x)), ctx).passed is True
    assert check.fn(lambda x: float(np.exp(40 * x)) * (1.0 if x > 0.0 else 2.0), ctx).passed is False
