"""Hostile pass 60, tester B: reproducers, each failing on 379edce (run there as xfail, strict). A true claim
f(x) = 2x whose own check or obligation gives a NaN, whose Monte Carlo draws equal the form up to rounding, or whose
hand-built result contradicts its own numbers."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from proofs_checks.plugin import (CheckResult, Claim, DerivationBuilder, Mutant, check_claim, close,
                                  matches_derivation, numeric, z_test)

Y = sp.Symbol("y", real=True)


def _claim(cid: str, check, obligation=None) -> Claim:
    def derive():
        b = DerivationBuilder("double")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        if obligation is not None:
            b.obligation(*obligation(x))
        return b.done(b.step("f", 2 * x))

    return Claim(id=cid, title="f(x) = 2x", statement="f(x)=2x", source="s", kind="identity", form=lambda x: 2 * x,
                 derivation=derive, checks=(matches_derivation(derive, lambda rng: (rng.standard_normal(),)), check),
                 mutants=(Mutant("m3", "wrong constant", "3x", lambda x: 3 * x),))


@numeric("reference 2x computed as 2x·exp(800|x|)/exp(800|x|) (overflows to nan)")
def nan_reference(form, ctx):
    x = ctx.rng().standard_normal(50)
    with np.errstate(all="ignore"):
        ref = 2 * x * np.exp(800 * np.abs(x)) / np.exp(800 * np.abs(x))
    return close(form(x), ref, 1e-12 * np.abs(2 * x), "rounding")


@numeric("Monte Carlo mean of x(1 + tanh Z) + x(1 − tanh Z) (= 2x for every draw), 10^4 draws")
def constant_draws(form, ctx):
    rng = ctx.rng()
    x = rng.standard_normal(5)
    t = np.tanh(rng.standard_normal((10000, 1)))
    s = x * (1 + t) + x * (1 - t)
    est, se = s.mean(0), s.std(0, ddof=1) / np.sqrt(len(s))
    return z_test({f"x{i}": (est[i], se[i], form(x[i])) for i in range(5)})


@numeric("direct")
def direct(form, ctx):
    x = ctx.rng().standard_normal(50)
    return close(form(x), 2 * x, 1e-12 * np.abs(2 * x), "rounding")


@numeric("hand-built: passed, with the numbers 5 against 1")
def says_passed_5_against_1(form, ctx):
    x = ctx.rng().standard_normal(50)
    return CheckResult(bool(np.max(np.abs(form(x) - 2 * x)) <= 1e-12), error=5.0, tolerance=1.0, justification="j")


@numeric("hand-built: tolerance -1")
def negative_tolerance(form, ctx):
    x = ctx.rng().standard_normal(50)
    err = float(np.max(np.abs(form(x) - 2 * x)))
    return CheckResult(err <= 1e-12, error=err, tolerance=-1.0, justification="j")


def _undefined(kind):
    return lambda x: ("(x² − y²)/(x − y) at y = x minus 2x", ((x**2 - Y**2) / (x - Y)).subs(Y, x) - 2 * x, kind)


@pytest.mark.parametrize("check, obligation", [
    (nan_reference, None),  # F1: a NaN reference is no measured difference
    (direct, _undefined("zero")),  # F1: an obligation that is nan (0/0) is no counterexample
    (direct, _undefined("nonnegative")),  # ... under either kind
], ids=["nan_reference", "nan_obligation_zero", "nan_obligation_nonnegative"])
def test_1_a_true_claim_is_not_refuted_by_a_nan(check, obligation):
    r = check_claim(_claim("zz60.nan", check, obligation))
    assert r.status == "error", (r.status, r.message)
    assert "refut" in r.message and ("non-finite" in r.message or "undefined" in r.message), r.message


def test_2_draws_equal_to_the_form_up_to_rounding_are_not_a_difference():
    r = check_claim(_claim("zz60.mc", constant_draws))
    assert r.status == "verified", (r.status, r.message)


def test_2_the_rounding_floor_follows_the_draws_stated():
    # one draw's rounding does not cover a difference of 900 ulps; 10^4 draws' does
    m = {"a": (2.0 + 900 * 2 * np.finfo(float).eps, 4e-15, 2.0)}
    assert not z_test(m, draws=10).passed
    assert z_test(m, draws=10**4).passed
    with pytest.raises(ValueError, match="draws"):
        z_test(m, draws=0)


@pytest.mark.parametrize("check", [says_passed_5_against_1, negative_tolerance], ids=["5_against_1", "tolerance_-1"])
def test_3_a_result_that_contradicts_its_own_numbers_is_an_error_in_the_claim(check):
    r = check_claim(_claim("zz60.hand", check))
    assert r.status == "error", (r.status, r.message)
    assert "contradicts itself" in r.message, r.message


def test_note_an_evidence_claim_whose_check_measured_nothing_is_an_error():
    import dataclasses

    c = dataclasses.replace(_claim("zz60.ev", nan_reference), kind="evidence")
    r = check_claim(c)
    assert r.status == "error" and "measured nothing" in r.message, (r.status, r.message)


def test_note_check_claim_refuses_a_notebook_claim_in_a_builtin_group():
    from proofs_checks.plugin import RegistryError, run_mutants

    for fn in (check_claim, run_mutants):
        with pytest.raises(RegistryError, match="'icl' is a built-in group"):
            fn(_claim("icl.zz60", direct))


@pytest.mark.parametrize("value, words", [("", "is blank"), ("afile", "is a file, not a folder"),
                                          ("/dev/full", "not a folder")])
def test_note_a_survey_cache_named_by_the_environment_is_checked_as_cache_dir_is(tmp_path, monkeypatch, value,
                                                                                 words):
    from tests.test_hostile_round53a import _here

    (tmp_path / "afile").write_text("mine")
    monkeypatch.setenv("TVERIFY_SURVEY_CACHE", value)
    r = _here(tmp_path, "survey", "--no-install", "--quick", "--out", str(tmp_path / "o"), "--no-progress",
              "local-attention-1.2.1")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2 and "TVERIFY_SURVEY_CACHE" in r.stderr and words in r.stderr, (r.returncode, r.stderr)
    assert (tmp_path / "afile").read_text() == "mine"
