"""Every registered claim: complete entry, verified in quick mode, every mutant rejected.

These generic tests are parametrised over the registry, so a claim added in
``proofs_checks/claims/`` is covered without editing this file.
"""

from __future__ import annotations

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
    claim (a seed erratum counts as one of its claim's mutants)."""
    need = 1 if claim.is_evidence else 3
    assert len(claim.all_mutants()) >= need, f"{claim.id} has {len(claim.all_mutants())} mutants, needs {need}"
    assert len({m.kind for m in claim.all_mutants()}) >= min(need, 2), f"{claim.id}: mutants should differ in kind"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_passes_quick(claim: Claim):
    res = run_claim(claim, RunContext(mode="quick", seed=0), with_derivation=True)
    expected = "evidence" if claim.is_evidence else "verified"
    detail = "; ".join(f"{o.name}: {o.status} {o.error_message or ''} "
                       f"{(o.result.error, o.result.tolerance) if o.result else ''}" for o in res.checks + res.stated_checks)
    assert res.status == expected, f"{claim.id}: {res.status} ({res.message}) [{detail}]"
    if claim.is_evidence:
        assert res.supports, f"{claim.id}: evidence does not support the claim: {detail}"


@pytest.mark.parametrize("claim,mutant", PAIRS, ids=[f"{c.id}:{m.name}" for c, m in PAIRS])
def test_mutant_rejected(claim: Claim, mutant: Mutant):
    res = run_mutant(claim, mutant, RunContext(mode="quick", seed=0))
    crashed = [f"{o.name}: {o.error_message}" for o in res.outcomes if o.status == "error"]
    assert res.killed, f"{claim.id}:{mutant.name} survived every check (crashes: {crashed})"


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


def test_trained_checks_skip_without_cuda(monkeypatch):
    import numerics.torch_utils as tu

    monkeypatch.setattr(tu, "cuda_available", lambda: False)
    c = _claim(checks=(Check("c", "numeric", _dummy_check), Check("t", "trained", _dummy_check)))
    res = run_claim(c, RunContext(mode="quick", device="cuda"))
    assert res.status == "verified"
    assert [o.status for o in res.checks] == ["passed", "skipped"]
    assert "CUDA" in res.checks[1].result.skip_reason


def test_seeds_are_stable_and_distinct():
    a = RunContext(seed=1).for_check("x.y", "c")
    assert a.seed_for("k") == RunContext(seed=1).for_check("x.y", "c").seed_for("k")
    assert a.seed_for("k") != RunContext(seed=2).for_check("x.y", "c").seed_for("k")
    assert a.seed_for("k") != RunContext(seed=1).for_check("x.y", "d").seed_for("k")
