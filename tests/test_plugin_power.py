"""Issue 44, item 3: a plugin's or notebook's claim is verified only when its checks' power is
MEASURED on its own form (proofs_checks.power): its outputs doubled and halved — all of them, and
entry by entry with signs from the run's seed — must be rejected, and the resolution measured on a
short ladder of relative perturbations is stated beside the verdict. Nothing a check says about
itself (a stated resolution) exempts a claim.

Each false claim ``3x = 2x`` below is a finding of the independent hostile passes (HOSTILE3 P1, P2,
P4, P5), rebuilt as an in-process ``check_claim`` (what ``tverify run`` does for a plugin's claim,
without the child processes), or one of the vacuous checks of ``tests/test_plugins_vacuous.py``
written so that no comparison helper can see it (a bare ``compare``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from proofs_checks.comparisons import close, compare, relative
from proofs_checks.plugin import Check, Claim, Mutant, check_claim, run_mutants
from proofs_checks.power import LADDER, measure_power
from proofs_checks.registry import CheckResult
from proofs_checks.runner import CheckOutcome, exit_code
from theory.validation import InputError


def x_of(ctx, n=20):
    return ctx.rng().standard_normal(n)


def claim(cid, form, *checks, mutants=None, kind="identity"):
    """A claim ``form = 2x`` with numeric ``checks`` (fn(form, ctx) -> CheckResult) and no derivation."""
    mutants = mutants or (Mutant("huge", "wrong constant", "1e305 x", lambda x: 1e305 * np.asarray(x, dtype=float)),)
    return Claim(id=f"zzpow.{cid}", title="3x = 2x", statement="3x = 2x", source="a false claim", kind=kind, form=form,
                 checks=tuple(Check(f"c{i}", "numeric", fn) for i, fn in enumerate(checks)),
                 no_symbolic="a test of the power rule: numeric checks alone", mutants=mutants)


def three(x):  # the false claim 3x = 2x
    return 3 * np.asarray(x, dtype=float)


def err_2x(form, ctx):
    x = x_of(ctx)
    return x, float(np.max(np.abs(np.asarray(form(x), dtype=float) - 2 * x)))


def huge(form, ctx):  # compare(err, 1e300): what no helper can see
    return compare(err_2x(form, ctx)[1], 1e300, "generous")


def check_error(c, *needles):
    res = check_claim(c)
    assert res.status == "error", (res.status, res.message)
    assert "\n" not in res.message and all(n in res.message for n in needles), res.message
    return res


# ---------------------------------------------------------------------------------------------
# HOSTILE3 findings


def test_p1_a_decoy_relative_check_no_longer_exempts_the_claim():
    """P1: ``relative(ones, ones, 1e-12)`` (never reads the form) stated a resolution of 1e-12 and switched
    the ×2 rule off; ``compare(err, 1e300)`` with a 1e305 mutant was verified."""
    def decoy(form, ctx):
        return relative(np.ones(20), np.ones(20), 1e-12, "decoy")

    res = check_error(claim("decoy", three, decoy, huge), "accept the form multiplied by 2 and by 1/2")
    assert res.to_json()["power"]["rejected"] is None


def test_p5_a_scale_invariant_check_with_a_sign_flip_mutant_is_an_error():
    """P5: ``relative(f/‖f‖, r/‖r‖, 1e-9)`` accepts 3x for 2x; its sign-flip mutant is rejected; the
    uniform perturbation (every output doubled, every output halved) is not — also with a guard that
    keeps the zero form finite."""
    def normalised(form, ctx):
        x = x_of(ctx)
        f = np.asarray(form(x), dtype=float)
        return relative(f / (np.linalg.norm(f) + 1e-300), 2 * x / np.linalg.norm(2 * x), 1e-9, "direction")

    flip = (Mutant("neg", "sign flip", "-3x", lambda x: -3 * np.asarray(x, dtype=float)),)
    res = check_error(claim("normalised", three, normalised, mutants=flip), "accept the form multiplied by 2 and by 1/2")
    probes = res.to_json()["power"]["probes"]
    assert [p["pattern"] for p in probes if p["rejected_by"]] == []  # mixed is never reached: both sides accepted


def _cmp06(form, ctx):
    x, e = err_2x(form, ctx)
    return compare(e, 0.6 * float(np.max(np.abs(2 * x))), "60 % of the reference")


TEN = (Mutant("ten", "wrong constant", "10x", lambda x: 10 * np.asarray(x, dtype=float)),)


def test_p2_a_coarse_compare_cannot_verify_an_identity():
    """P2: ``compare(err, 0.6·max|2x|)`` accepts 3x for 2x; the ×2 rule was met and the verdict stated no
    resolution. An identity's checks must reject its form halved too: this one accepts 1.5x."""
    res = check_error(claim("cmp06", three, _cmp06, mutants=TEN), "accept the form multiplied by 1/2",
                      "cannot tell the claim from half the truth")
    assert res.to_json()["power"]["rejected"] is None


def test_p2_as_a_theorem_is_verified_with_its_one_sided_resolution_said():
    """The same check for a theorem (one side is enough: it may be an inequality): verified, and the
    measured resolution says the form halved is accepted and 10 % is rejected on one side only."""
    res = check_claim(claim("cmp06t", three, _cmp06, mutants=TEN, kind="theorem"))
    assert res.status == "verified", res.message
    p = res.to_json()["power"]
    assert p["rejected"] == 0.1 and p["accepted"] == 0.01 and p["two_sided"] is None, p
    assert res.message.startswith("resolution (measured): its checks reject a relative perturbation of 10 % of the "
                                  "form's outputs on one side only (they accept every output halved"), res.message
    assert "accept 1 %" in res.message and "reject mutant ten" in res.message


def test_p4_an_object_holding_floats_is_perturbed_through_its_attributes():
    """P4: a form returning a plain object ``Box(y=3x)`` (and a dataclass) bypassed the ×2 rule; its
    attributes are perturbed on a copy now (the user's object is never changed)."""
    class Box:
        def __init__(self, y):
            self.y, self.name = y, "box"

    @dataclass(frozen=True)
    class Frozen:
        y: np.ndarray

    for wrap in (Box, Frozen):
        kept = {}

        def form(x, wrap=wrap):
            kept["last"] = wrap(three(x))
            return kept["last"]

        def boxed(f, ctx):
            x = x_of(ctx)
            return compare(float(np.max(np.abs(f(x).y - 2 * x))), 1e300, "generous")

        check_error(claim(f"box{wrap.__name__.lower()}", form, boxed), "accept the form multiplied by 2")


def test_p4_integer_outputs_are_doubled_and_halved():
    """P4: a form returning int64 ``3·round(100x)`` was not judged ("no float output"); integers are
    multiplied by 2 and halved (rounded down) at δ = 1 now (zeroed before: hostile pass 24b F6)."""
    def ints(x):
        return 3 * np.round(100 * np.asarray(x, dtype=float)).astype(np.int64)

    def cmp_int(form, ctx):
        x = x_of(ctx)
        return compare(float(np.max(np.abs(form(x) - 2 * np.round(100 * x)))), 1e300, "generous")

    res = check_error(claim("ints", ints, cmp_int), "multiplied by 2 and by 1/2 (integer outputs halved rounded down)")
    assert res.to_json()["power"]["outputs"]["ints"] > 0


def test_integer_outputs_that_the_checks_resolve_state_so():
    def count(x):
        return int(np.sum(np.asarray(x) > 0))

    def exact_count(form, ctx):
        x = x_of(ctx)
        return compare(abs(form(x) - int(np.sum(x > 0))), 0.5, "counts are integers: any miss is ≥ 1")

    res = check_claim(claim("count", count, exact_count, mutants=(Mutant("plus", "wrong constant", "+1",
                                                                        lambda x: int(np.sum(np.asarray(x) > 0)) + 1),)))
    assert res.status == "verified", res.message
    assert "integer outputs doubled and halved" in res.message, res.message


def test_outputs_nothing_can_perturb_are_inconclusive():
    """Strings (or booleans, or a library's objects): the power cannot be measured — exit 3, one line."""
    def words(x):
        return "positive" if float(np.sum(x)) > 0 else "negative"

    def same(form, ctx):
        x = x_of(ctx)
        want = "positive" if float(np.sum(x)) > 0 else "negative"
        return compare(float(form(x) != want), 0.5, "a label either matches or not")

    res = check_claim(claim("words", words, same, mutants=(Mutant("neg", "sign flip", "flipped", lambda x: "?"),)))
    assert res.status == "inconclusive", res.message
    assert res.message.startswith("the checks' power cannot be measured on outputs of type str"), res.message
    assert exit_code([res.status]) == 3


# ---------------------------------------------------------------------------------------------
# the vacuous checks of test_plugins_vacuous.py, written so that no helper sees them


def _ratio(form, ctx):  # close(tol=inf) as a ratio d/inf against 1
    return compare(err_2x(form, ctx)[1] / math.inf, 1.0, "a ratio against 1")


def _no_draws(form, ctx):  # a comparison over 0 draws
    x = ctx.rng().standard_normal(0)
    return compare(float(np.max(np.abs(form(x) - 2 * x), initial=0.0)), 1e-12, "float64 rounding")


def _no_points(form, ctx):  # matches_derivation(points=(0, 0, 0)): compares nothing, never calls the form
    return compare(0.0, 1e-12, "no point compared")


def _size_zero(form, ctx):  # a size d = 0
    x = ctx.rng().standard_normal((10, 0))
    return compare(float(np.max(np.abs(form(x) - 2 * x), initial=0.0)), 1e-12, "float64 rounding")


def _criterion_inf(form, ctx):  # train(criterion=inf) then compare(floor=inf): the spread over an infinite floor
    slope = np.full(4, float(form(1.0)) / 2)
    return compare(float(np.max(np.abs(slope - 1.0))) / math.inf, 1.0, "spread over the floor inf")


VACUOUS = {"ratio": _ratio, "nodraws": _no_draws, "points": _no_points, "dzero": _size_zero,
           "criterion": _criterion_inf, "huge": huge}


@pytest.mark.parametrize("case", sorted(VACUOUS))
def test_each_vacuous_way_behind_a_bare_compare_is_an_error(case):
    res = check_claim(claim(f"vac{case}", three, VACUOUS[case]))
    assert res.status == "error", (case, res.status, res.message)
    assert ("accept the form multiplied by 2" in res.message or "never read the form's outputs" in res.message
            or "only where every output is 0" in res.message
            or res.message.startswith("check c0")), (case, res.message)


# ---------------------------------------------------------------------------------------------
# true claims: verified, the measured resolution stated


def two(x):
    return 2 * np.asarray(x, dtype=float)


def rounding(form, ctx):
    x = x_of(ctx)
    return close(form(x), 2 * x, 4 * np.finfo(float).eps * np.abs(2 * x) + 1e-300, "float64 rounding per entry")


FOUR = (Mutant("four", "wrong constant", "4x", lambda x: 4 * np.asarray(x, dtype=float)),)


def test_a_true_claim_with_a_rounding_check_states_the_finest_rung():
    res = check_claim(claim("two", two, rounding, mutants=FOUR))
    assert res.status == "verified", res.message
    p = res.to_json()["power"]
    assert p["rejected"] == LADDER[-1] and p["two_sided"] == LADDER[-1] and p["accepted"] is None
    assert [q["delta"] for q in p["probes"]] == [1.0] * 3 + [1e-6] * 3  # δ = 1, then the finest: done
    assert res.message == ("resolution (measured): its checks reject a relative perturbation of 0.0001 % of the "
                           "form's outputs (the finest tried); its checks reject mutant four (c0)")


def test_a_true_claim_at_five_percent_states_reject_ten_accept_one():
    def five(form, ctx):
        x = x_of(ctx)
        return relative(form(x), 2 * x, 0.05, "5 %")

    res = check_claim(claim("five", two, five, mutants=FOUR))
    assert res.status == "verified", res.message
    assert "reject a relative perturbation of 10 % of the form's outputs, accept 1 %" in res.message, res.message
    sizes = [q["delta"] for q in res.to_json()["power"]["probes"]]
    assert sorted(set(sizes), key=sizes.index) == [1.0, 1e-6, 1e-2, 0.1]  # a bisection after the finest


def test_a_one_sided_bound_is_verified_and_said_one_sided():
    """A bound the form computes, checked one-sided (measured ≤ bound): the bound doubled is accepted,
    halved (and mixed) rejected: verified, "on one side only"."""
    def bound(x):
        return 1.5 * np.abs(np.asarray(x, dtype=float))

    def below(form, ctx):
        x = x_of(ctx)
        b = form(x)
        return compare(float(np.max(np.abs(x) / b)), 1.0 / 1.5 + 1e-12, "measured |x| over the bound")

    res = check_claim(claim("bound", bound, below, kind="theorem",
                            mutants=(Mutant("tight", "wrong constant", "0.5|x|", lambda x: 0.5 * np.abs(x)),)))
    assert res.status == "verified", res.message
    assert "on one side only (they accept every output doubled: a one-sided check)" in res.message, res.message


def test_the_power_json_and_the_seed_are_recorded():
    res = check_claim(claim("two", two, rounding, mutants=FOUR), seed=7)
    p = res.to_json()["power"]
    assert p["seed"] == 7 and p["ladder"] == list(LADDER) and p["outputs"]["floats"] > 0
    assert {q["pattern"] for q in p["probes"]} == {"up", "down", "mixed"}
    assert all(q["rejected_by"] == "c0" for q in p["probes"])


def test_measure_power_runs_the_cheapest_check_first_and_stops_at_the_first_rejection():
    calls = []

    def run(check, form):
        calls.append(check)
        got = np.asarray(form(np.ones(3)), dtype=float)
        e = float(np.max(np.abs(got - 2.0)))
        return CheckOutcome(check, "numeric", "failed" if e > 1e-9 else "passed", CheckResult(e <= 1e-9, e, 1e-9))

    pw = measure_power(two, ["first", "second"], run, seed=0)
    assert pw.rejected == LADDER[-1] and set(calls) == {"first"}


def test_a_built_in_claim_is_not_subject_to_the_rule():
    from proofs_checks.registry import get_claim
    from proofs_checks.runner import run_claim

    r = run_claim(get_claim("attn.convex_combination"))
    assert r.status == "verified" and r.power == {}


def test_run_mutants_keeps_the_power_rule():
    runs = run_mutants(claim("decoy2", three, huge))
    assert runs.claim.status == "error" and all(not r.killed for r in runs.rows)


# ---------------------------------------------------------------------------------------------
# P6: the plugins' time limits refused with one line


@pytest.mark.parametrize("value", ["-3", "0", "1e999", "abc", "nan", ""])
@pytest.mark.parametrize("env", ["TVERIFY_PLUGIN_IMPORT_TIMEOUT", "TVERIFY_PLUGIN_CHECK_TIMEOUT"])
def test_a_bad_plugin_time_limit_is_refused_by_check_claim(monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    with pytest.raises(InputError) as e:
        check_claim(claim("two", two, rounding, mutants=FOUR))
    assert str(e.value) == f"{env} must be a number of seconds > 0 and at most 1e+07, got {value!r}"


@pytest.mark.parametrize("command", [["list"], ["show", "attn.convex_combination"],
                                     ["run", "attn.convex_combination", "--quick"],
                                     ["mutants", "attn.convex_combination", "--quick"]])
def test_a_bad_plugin_time_limit_is_refused_by_every_command_that_loads_claims(monkeypatch, tmp_path, capsys, command):
    from proofs_checks.cli import _main

    monkeypatch.setenv("TVERIFY_PLUGIN_CHECK_TIMEOUT", "abc")
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    with pytest.raises(SystemExit) as e:
        _main(command)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == ("tverify: error: TVERIFY_PLUGIN_CHECK_TIMEOUT must be a number of seconds > 0 "
                                         "and at most 1e+07, got 'abc'\n"), err


def test_a_claim_assembled_from_a_clusters_outcomes_keeps_the_power_rule():
    """``tverify run --cluster``: the claim's outcomes computed on workers were assembled without the rule:
    a false ``3x = 2x`` checked by ``compare(err, 1e300)`` was verified, exit 0."""
    from proofs_checks.context import RunContext
    from proofs_checks.distributed.claim_tasks import _assemble_claim
    from proofs_checks.runner import derivation_info, run_check

    c = claim("cluster", three, huge)
    ctx = RunContext(mode="quick")
    r = _assemble_claim(c, "quick", 0, "cpu", (derivation_info(c), 0.0),
                        lambda ch, role: run_check(c, ch, c.form, ctx))
    assert r.status == "error" and "accept the form multiplied by 2" in r.message, (r.status, r.message)


def test_the_plugin_loader_itself_refuses_a_bad_time_limit(monkeypatch):
    """``load_plugins`` (what the catalogue cache calls without ``load_all``): never a plugin's failure."""
    from proofs_checks import claims
    from proofs_checks.errors import UsageError

    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "1e999")
    with pytest.raises(UsageError, match="TVERIFY_PLUGIN_IMPORT_TIMEOUT must be a number of seconds > 0"):
        claims.load_plugins()
    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "7.5")
    assert claims.plugin_timeouts() == (7.5, 600.0)


def test_a_dict_subclass_output_keeps_its_type_when_perturbed():
    """A model's output dict read by attribute (``out.logits``, as transformers' ``ModelOutput``): the
    perturbed output keeps its type, so the check reads it and rejects the perturbation, not crashes."""
    from collections import OrderedDict

    class Out(OrderedDict):
        def __getattr__(self, k):
            try:
                return self[k]
            except KeyError:
                raise AttributeError(k) from None

    def logits(f, ctx):
        x = x_of(ctx)
        return compare(float(np.max(np.abs(f(x).logits - 2 * x))), 1e300, "generous")

    res = check_error(claim("outdict", lambda x: Out(logits=three(x)), logits), "accept the form multiplied by 2")
    assert not any(p["crashed"] for p in res.to_json()["power"]["probes"])
