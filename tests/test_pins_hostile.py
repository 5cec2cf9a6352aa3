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


def test_a_counterexample_that_measures_no_violation_shows_nothing():
    """Pin of tests/test_hostile_round51b.py::test_f2_counterexample_with_no_measured_violation_shows_nothing (46b
    F2): a tolerance below 0, an error without its tolerance, or a violated that is not a bool."""
    from proofs_checks.registry import Counterexample
    from proofs_checks.runner import _unmeasured

    cx = lambda violated, **n: Counterexample({"beta": 0}, "slope", "nothing changes", violated=violated, **n)  # noqa: E731
    assert "below 0" in _unmeasured(cx(True, error=0.0, tolerance=-1.0))
    assert "without the tolerance" in _unmeasured(cx(True, error=0.0))
    assert "not True or False" in _unmeasured(cx("False"))
    assert _unmeasured(cx(True, error=1.0, tolerance=0.0)) == "" and _unmeasured(cx(True)) == ""


def test_a_derived_clause_on_an_unnamed_typed_in_premise_is_an_error():
    """Pin of tests/test_hostile_round51b.py::test_f3_a_derived_clause_on_a_typed_in_premise_names_it (46b F3)."""
    from proofs_checks.plugin import Claim, Clause, DerivationBuilder, Mutant, matches_derivation, scalar
    from proofs_checks.runner import _unnamed_premises

    def derive():
        b = DerivationBuilder("2x")
        x, = b.fact("args", (sp.Symbol("x", real=True),))
        return b.done(b.assume("the result, typed in", 2 * x, role="premise"))

    def claim(rests_on=()):
        return Claim(id="zzpin.twice", title="t", statement="", source="x", kind="identity", form=lambda x: 2.0 * x,
                     derivation=derive, checks=(matches_derivation(derive, (scalar("x"),)),), no_hypotheses="none",
                     clauses=(Clause("dbl", "f(x) = 2x", "derived", "every real x", ("derivation",), rests_on=rests_on),),
                     mutants=(Mutant("thrice", "wrong constant", "3x", lambda x: 3.0 * x),))

    (gap,) = _unnamed_premises(claim(), derive())
    assert "clause 'dbl'" in gap and "the result, typed in" in gap


def test_texts_a_plugin_makes_as_it_runs_are_shown_escaped():
    """Pin of tests/test_hostile_round51b.py::test_f13_runtime_texts_of_a_plugin_print_no_escape_sequences (46b F13)."""
    from proofs_checks.errors import visible_all

    info = {"steps": [{"text": "double \x1b[31mRED\x1b]0;pwned\x07", "mathml": "<math>\x1b</math>"}], "n": 3}
    out = visible_all(info)
    assert "\x1b" not in out["steps"][0]["text"] and "\\x1b[31m" in out["steps"][0]["text"]
    assert out["steps"][0]["mathml"] == "<math>\x1b</math>" and out["n"] == 3  # markup kept: escaped where written


def test_a_plugin_claim_in_a_built_in_group_is_refused():
    """Hostile pass 46, B's O1: `new-claim` refused a built-in group, a plugin's `register` did not (its claim was run
    and counted as one of the project's own)."""
    import dataclasses

    import pytest

    from proofs_checks.registry import RegistryError, get_claim, register

    real = get_claim("attn.softmax_simplex")  # loads the built-in claims
    twin = dataclasses.replace(real, id="attn.zz_plugins_own")
    with pytest.raises(RegistryError, match="'attn' is a built-in group"):
        register(twin)
    with pytest.raises(Exception):
        get_claim("attn.zz_plugins_own")


def test_a_counterexample_is_a_point_within_the_symbols_assumptions():
    """Pin of tests/test_hostile_round52b.py::test_f2_a_true_identity_over_odd_integers_is_not_refuted_at_an_even_point
    (47b F2): floor(k/2) = (k−1)/2 for every odd k was refuted at k = −6; an odd, a prime and a nonzero symbol are
    sampled within their assumptions."""
    import random

    from theory.derivation import Obligation, _sample

    k = sp.Symbol("k", integer=True, odd=True)
    r = Obligation("half", sp.floor(k / 2) - (k - 1) / 2).evaluate()
    assert r.status != "fails", r.counterexample
    rng = random.Random(0)
    p, z = sp.Symbol("p", integer=True, prime=True), sp.Symbol("z", real=True, nonzero=True)
    assert all(_sample(k, rng) % 2 == 1 for _ in range(20))
    assert all(sp.isprime(_sample(p, rng)) for _ in range(20))
    assert all(_sample(z, rng) != 0 for _ in range(50))
    assert _sample(sp.Symbol("i", irrational=True), rng) is None  # no exact value satisfies it: no point tried


def _closed_form_check(expr_of, sample):
    from proofs_checks.plugin import DerivationBuilder, matches_derivation

    def derive():
        b = DerivationBuilder("pin")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        return b.done(b.step("closed form", expr_of(x)))

    return matches_derivation(derive, sample)


def test_matches_derivation_rounds_at_float64_and_at_the_intermediates():
    """Pins of tests/test_hostile_round52b.py::test_f3_matches_derivation_does_not_refute_a_correct_cube_at_numpy_integers
    and ::test_f5_an_exact_identity_is_not_refuted_by_the_closed_forms_own_cancellation (47b F3, F5): int64 samples
    wrapped n³ around; (x+1000)² − (x−1000)² = 4000x rounds at 10⁶. Wrong forms still fail."""
    from proofs_checks.context import RunContext

    q = RunContext(mode="quick")
    cube = _closed_form_check(lambda n: n * n * n, lambda rng: (rng.integers(3_000_000, 9_000_000),))
    assert cube.fn(lambda n: float(n) ** 3, q).passed
    assert not cube.fn(lambda n: float(n) ** 3 * (1 + 1e-9), q).passed
    diff = _closed_form_check(lambda x: (x + 1000) ** 2 - (x - 1000) ** 2, lambda rng: (rng.uniform(-2, 2),))
    assert diff.fn(lambda x: 4000.0 * x, q).passed
    assert not diff.fn(lambda x: 4000.0 * x * (1 + 1e-6), q).passed
