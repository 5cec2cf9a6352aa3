"""Every registered claim: complete entry, verified in quick mode, every mutant rejected by
every check that can see it (the kill matrix), every check reads its form, no bare max/min.

These generic tests are parametrised over the registry, so a claim added in
``proofs_checks/claims/`` is covered without editing this file.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from proofs_checks import Check, Claim, Mutant, RunContext, compare
from proofs_checks.registry import RegistryError, select
from proofs_checks.runner import run_claim, run_mutant

CLAIMS = select()
PAIRS = [(c, m) for c in CLAIMS for m in c.all_mutants()]


def test_catalogue_is_not_empty():
    assert len(CLAIMS) >= 1


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_entry_complete(claim: Claim):
    claim.validate()
    assert claim.all_mutants(), "every claim needs a mutant"
    assert any(ch.layer in ("symbolic", "numeric") for ch in claim.checks) or claim.is_evidence


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_mutant_minimum(claim: Claim):
    """At least three mutants per theorem/identity/erratum claim, one per evidence/conjecture
    claim (an erratum as stated counts as one of its claim's mutants)."""
    need = 1 if claim.is_evidence else 3
    assert len(claim.all_mutants()) >= need, f"{claim.id} has {len(claim.all_mutants())} mutants, needs {need}"
    assert len({m.kind for m in claim.all_mutants()}) >= min(need, 2), f"{claim.id}: mutants should differ in kind"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_passes_quick(claim: Claim):
    # The derivation's obligations are evaluated (and required to hold) by tests/test_derivations.py;
    # here the checks of every layer, so that each derivation runs once per `make test`, not twice.
    res = run_claim(claim, RunContext(mode="quick", seed=0), with_derivation=False)
    expected = "evidence" if claim.is_evidence else "verified"
    detail = "; ".join(f"{o.name}: {o.status} {o.error_message or ''} "
                       f"{(o.result.error, o.result.tolerance) if o.result else ''}" for o in res.checks + res.stated_checks)
    assert res.status == expected, f"{claim.id}: {res.status} ({res.message}) [{detail}]"
    if claim.is_evidence:
        assert res.supports, f"{claim.id}: evidence does not support the claim: {detail}"


@pytest.mark.parametrize("claim,mutant", PAIRS, ids=[f"{c.id}:{m.name}" for c, m in PAIRS])
def test_mutant_rejected(claim: Claim, mutant: Mutant):
    """The full kill-matrix row: every check ran on the mutant (none stops the others), and at
    least one rejected it."""
    res = run_mutant(claim, mutant, RunContext(mode="quick", seed=0))
    crashed = [f"{o.name}: {o.error_message}" for o in res.outcomes if o.status == "error"]
    # a statement mutant (a hypothesis dropped) is refuted by its counterexample, the one row of its matrix
    expected = ["counterexample"] if mutant.hypothesis else [c.name for c in claim.checks]
    assert [o.name for o in res.outcomes] == expected, "every form mutant runs against every check"
    assert res.killed, f"{claim.id}:{mutant.name} survived every check (crashes: {crashed})"
    row = res.to_json()["checks"]
    assert len(row) == len(expected)
    for entry in row:
        assert {"check", "layer", "rejected", "error", "tolerance", "margin"} <= set(entry)
        if entry["rejected"]:
            m = entry["margin"]
            # (a NaN error rejects by no measured distance: its margin is not given, 45b F1)
            assert m == "inf" or (isinstance(m, float) and m > 1.0) or (m is None and entry["error"] is None), entry


class PoisonError(BaseException):
    """Raised by any use of a poisoned form. A BaseException, so that a check's own
    ``except Exception`` cannot swallow it."""


class _Poison:
    """A form that raises on any use: attribute, item, call, iteration, arithmetic, conversion."""

    def _boom(self, *a, **k):
        raise PoisonError("the check read its form")

    __getattr__ = __getitem__ = __call__ = __iter__ = __len__ = __float__ = __int__ = __index__ = _boom
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _boom
    __pow__ = __rpow__ = __neg__ = __matmul__ = __rmatmul__ = __eq__ = __lt__ = __gt__ = __bool__ = _boom
    __contains__ = __array__ = __abs__ = __ne__ = __le__ = __ge__ = __mod__ = __floordiv__ = _boom
    __hash__ = None


CHECKS = [(c, ch) for c in CLAIMS for ch in c.checks]


@pytest.mark.parametrize("claim,check", CHECKS, ids=[f"{c.id}:{ch.name}" for c, ch in CHECKS])
def test_check_reads_its_form(claim: Claim, check):
    """A check that never reads its form cannot reject a mutant: handed a form that raises on
    any use, every check must raise."""
    ctx = RunContext(mode="quick", seed=0).for_check(claim.id, check.name)
    with pytest.raises(PoisonError):
        check.fn(_Poison(), ctx)


DICT_CHECKS = [(c, ch) for c, ch in CHECKS if isinstance(c.form, dict)]


@pytest.mark.parametrize("claim,check", DICT_CHECKS, ids=[f"{c.id}:{ch.name}" for c, ch in DICT_CHECKS])
def test_check_reads_its_form_entries(claim: Claim, check):
    """For a form that is a dict of parts (functions, tables), a check must read at least one part,
    not only the dict: every value poisoned, the check must still raise."""
    ctx = RunContext(mode="quick", seed=0).for_check(claim.id, check.name)
    with pytest.raises(PoisonError):
        check.fn({k: _Poison() for k in claim.form}, ctx)


def _bare_max_min(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{n.lineno} {n.func.id}()" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("max", "min")]


def test_no_bare_max_min_in_claim_modules():
    """Python's max/min skip a NaN that is not first (max(1.0, nan) == 1.0): every reduction in the
    claim modules goes through worst()/largest()/smallest(), which propagate it."""
    claims_dir = Path(__file__).resolve().parent.parent / "proofs_checks" / "claims"
    found = [hit for p in sorted(claims_dir.glob("*.py")) for hit in _bare_max_min(p)]
    assert not found, "bare max/min in claim modules: " + ", ".join(found)


def test_nan_anywhere_fails_with_reason():
    from proofs_checks.comparisons import largest

    r = compare({"ok": 1e-16, "grad_B": math.nan}, 1e-12, "rounding")
    assert r.passed is False and "grad_B" in r.reason
    assert compare(math.inf, 1.0, "x").passed is False
    assert math.isnan(largest(0.0, math.nan)) and math.isnan(largest(math.nan, 0.0))

    def nan_check(form, ctx):
        from proofs_checks.registry import CheckResult

        return CheckResult(True, error=math.nan, tolerance=1.0)  # a hand-built "pass" with a NaN error

    res = run_claim(_claim(checks=(Check("c", "numeric", nan_check),)), RunContext(mode="quick"))
    # NaN fails (never verified); a hand-built pass with no measured error contradicts itself: an error in the claim,
    # not a refutation (60b F1, 61b F3)
    assert res.status == "error" and "no measured error" in res.message, res.message


def _dummy_check(form, ctx):
    return compare(abs(form - 1.0), 1e-12, "exact")


def _claim(**kw):
    base = dict(id="zz.dummy", title="t", statement="1=1", source="test", kind="identity", form=1.0,
                checks=(Check("c", "numeric", _dummy_check),), mutants=(Mutant("m", "wrong constant", "2", 2.0),))
    base.update(kw)
    return Claim(**base)


@pytest.mark.parametrize("field,value,msg", [
    ("statement", "", "missing statement"),
    ("source", " ", "missing source"),
    ("mutants", (), "no mutant"),
    ("checks", (), "no checks"),
    ("kind", "lemma", "kind must be"),
    ("id", "NoGroup", "id must look like"),
])
def test_registry_refuses_incomplete_entries(field, value, msg):
    with pytest.raises(RegistryError, match=msg):
        _claim(**{field: value}).validate()


def test_erratum_needs_stated_form():
    with pytest.raises(RegistryError, match="erratum needs"):
        _claim(kind="erratum").validate()


def test_runner_statuses_and_crash_isolation():
    def boom(form, ctx):
        raise RuntimeError("kaput")

    ok = run_claim(_claim(), RunContext(mode="quick"))
    assert ok.status == "verified"
    bad = run_claim(_claim(form=1.5), RunContext(mode="quick"))
    assert bad.status == "refuted"
    err = run_claim(_claim(checks=(Check("c", "numeric", _dummy_check), Check("b", "numeric", boom))), RunContext(mode="quick"))
    assert err.status == "error" and "kaput" in err.message
    # an erratum passes only when the stated form is refuted and the corrected one verified
    e_ok = run_claim(_claim(kind="erratum", stated=3.0, stated_statement="x=3"), RunContext(mode="quick"))
    assert e_ok.status == "verified"
    e_bad = run_claim(_claim(kind="erratum", stated=1.0, stated_statement="x=1"), RunContext(mode="quick"))
    assert e_bad.status == "refuted"
    ev = run_claim(_claim(kind="evidence", form=1.5), RunContext(mode="quick"))
    assert ev.status == "evidence" and ev.supports is False


def test_skipped_check_is_incomplete_never_verified(monkeypatch):
    """With --device cuda --allow-skip and no CUDA, device checks skip and the claim is
    'incomplete'; CPU reference checks run on CPU whatever the flag."""
    import numerics.torch_utils as tu

    monkeypatch.setattr(tu, "cuda_available", lambda: False)
    seen = {}

    def cpu_ref(form, ctx):
        seen["device"] = ctx.device
        return _dummy_check(form, ctx)

    c = _claim(checks=(Check("c", "numeric", cpu_ref), Check("t", "trained", _dummy_check)))
    res = run_claim(c, RunContext(mode="quick", device="cuda"))
    assert res.status == "incomplete"
    assert [o.status for o in res.checks] == ["passed", "skipped"]
    assert "CUDA" in res.checks[1].result.skip_reason
    assert seen["device"] == "cpu"
    assert res.device == "cpu" and res.to_json()["device"] == "cpu"  # nothing ran on a GPU (hostile pass 46, B's O2)
    ev = run_claim(_claim(kind="evidence", checks=c.checks), RunContext(mode="quick", device="cuda"))
    assert ev.status == "incomplete"


def test_erratum_whose_stated_form_crashes_is_not_shown():
    def strict(form, ctx):
        if form == 3.0:
            raise TypeError("cannot evaluate the stated form")
        return _dummy_check(form, ctx)

    res = run_claim(_claim(kind="erratum", stated=3.0, stated_statement="x=3", checks=(Check("c", "numeric", strict),)),
                    RunContext(mode="quick"))
    assert res.status == "error" and "crash" in res.message


def test_obligations_decide_the_verdict():
    import sympy as sp

    from theory.derivation import DerivationBuilder

    x = sp.Symbol("x", real=True)

    def deriv(wrong):
        b = DerivationBuilder("t")
        e = b.step("expand", sp.expand((x + 1) ** 2))
        b.obligation("expansion", e - (x + 1) ** 2 + (1 if wrong else 0))
        return b.done(e)

    ok = run_claim(_claim(derivation=lambda: deriv(False)), RunContext(mode="quick"))
    assert ok.status == "verified" and ok.obligations[0]["passed"]
    bad = run_claim(_claim(derivation=lambda: deriv(True)), RunContext(mode="quick"))
    assert bad.status == "refuted" and "obligation" in bad.message


def test_reference_is_computed_once_per_seed_and_size():
    calls = []

    def check(form, ctx):
        ref = ctx.reference("one", lambda: calls.append(1) or 1.0)
        return compare(abs(form - ref), 1e-12, "exact")

    c = _claim(id="zz.cached", checks=(Check("c", "numeric", check),))
    run_claim(c, RunContext(mode="quick", seed=12345))
    for m in c.all_mutants():
        run_mutant(c, m, RunContext(mode="quick", seed=12345))
    assert len(calls) == 1


def test_seeds_are_stable_and_distinct():
    a = RunContext(seed=1).for_check("x.y", "c")
    assert a.seed_for("k") == RunContext(seed=1).for_check("x.y", "c").seed_for("k")
    assert a.seed_for("k") != RunContext(seed=2).for_check("x.y", "c").seed_for("k")
    assert a.seed_for("k") != RunContext(seed=1).for_check("x.y", "d").seed_for("k")


def test_the_builtin_groups_are_the_groups_of_the_builtin_claims():
    """registry.BUILTIN_GROUPS refuses a plugin's claim in a built-in group before the built-in claims load (list and
    show answer without them: hostile pass 54b F8); it must name exactly their groups."""
    from proofs_checks.claims import load_all
    from proofs_checks.registry import BUILTIN, BUILTIN_GROUPS

    load_all()
    assert BUILTIN_GROUPS == {i.split(".", 1)[0] for i in BUILTIN}
