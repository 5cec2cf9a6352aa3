"""Structured statements: every claim names its hypotheses and clauses, each clause says what
establishes it (evidence and scope), each hypothesis earns its place with a counterexample (its
statement mutant is killed) or says why none is shown, and assumptions propagate through inherited
derivations. The group-specific corrections have their own tests (tests/test_statements_*.py)."""

from __future__ import annotations

import json
import math

import pytest

from proofs_checks.context import RunContext
from proofs_checks.registry import (EVIDENCE, Check, Claim, Clause, Counterexample, Hypothesis, Mutant, RegistryError,
                                    compare, evidence_summary, registry, select)
from proofs_checks.runner import counterexample_json, run_mutant, statement_json

pytestmark = pytest.mark.xdist_group("statements")


def _claims():
    return select([])


def test_every_claim_declares_hypotheses_and_clauses():
    missing = [c.id for c in _claims() if not c.clauses]
    assert not missing, f"claims without clauses: {missing}"
    bare = [c.id for c in _claims() if not c.hypotheses and not c.no_hypotheses.strip()]
    assert not bare, f"claims without hypotheses or a reason for none: {bare}"


def test_a_fixed_size_derivation_says_why():
    """Issue 34: a claim whose derivation derives nothing for symbolic sizes says in one line why."""
    missing = [c.id for c in _claims() if c.derivation is not None and not c.fixed_sizes.strip()
               and not any(e == "derived" for cl in c.clauses for e, _ in cl.evidences())]
    assert not missing, f"derivations at fixed sizes without a reason: {missing}"


def test_every_clause_names_evidence_and_scope():
    for c in _claims():
        for cl in c.clauses:
            for ev, scope in cl.evidences():
                assert ev in EVIDENCE and scope.strip(), (c.id, cl.name)
            if cl.best()[0] == "cited":
                assert any(ch.isdigit() for ch in cl.best()[1]), f"{c.id}:{cl.name}: a citation names its theorem/year"


def test_statement_is_rendered_from_hypotheses_and_clauses():
    for c in _claims():
        for part in [h.latex for h in c.hypotheses] + [cl.latex for cl in c.clauses]:
            assert part in c.statement, (c.id, part)


def test_every_statement_mutant_is_killed_by_its_counterexample():
    """Each hypothesis with a counterexample: the statement without it is refuted on a concrete
    instance (computed), naming a clause of the claim."""
    ctx = RunContext(mode="quick")
    survivors = []
    for c in _claims():
        for m in c.statement_mutants():
            r = run_mutant(c, m, ctx)
            if not r.killed:
                survivors.append((c.id, m.name, [o.error_message or (o.result.reason if o.result else "") for o in r.outcomes]))
    assert not survivors, survivors


def test_hypotheses_json_have_counterexample_or_necessary_false():
    for c in _claims():
        for h in counterexample_json(c, RunContext(mode="quick")):
            if h["necessary"]:
                cx = h["counterexample"]
                assert cx["violated"] and cx["clause"] in {cl.name for cl in c.statement_clauses()} and cx["instance"]
            else:
                assert h["necessary"] is False and h["why_not_shown"], (c.id, h["name"])


def test_inherited_assumptions_are_listed():
    """A derivation built on another carries its assumptions: icl.population_loss's general-d steps
    rest on assumed ones, and no view says "assumptions: none"."""
    from proofs_checks.runner import derivation_info

    for cid in ("icl.population_loss", "icl.nonconvex", "hop.classical_capacity"):
        info = derivation_info(registry.get(cid) if cid in registry else select([cid])[0], obligations=False)
        assert info["assumptions"], cid


def _toy(hypotheses=(), clauses=None, **kw):
    ok = lambda form, ctx: compare(0.0, 0.0, "exact")  # noqa: E731
    clauses = clauses if clauses is not None else (Clause("two", "1+1=2", "checked", "once", ("num",)),)
    return Claim("demo.toy", "Toy", "", "arithmetic", "identity", 2, (Check("num", "numeric", ok),),
                 (Mutant("three", "wrong constant", "3", 3),), no_symbolic="a toy", hypotheses=hypotheses,
                 clauses=clauses, **kw)


def test_registry_refuses_incomplete_statements():
    with pytest.raises(RegistryError, match="no hypotheses"):
        _toy().validate()
    with pytest.raises(RegistryError, match="no counterexample"):
        _toy((Hypothesis("h", "x > 0"),)).validate()
    with pytest.raises(RegistryError, match="unknown checks"):
        _toy(no_hypotheses="none", clauses=(Clause("c", "x", "checked", "once", ("nope",)),)).validate()
    with pytest.raises(RegistryError, match="evidence must be one of"):
        Clause("c", "x", "proved", "always")
    with pytest.raises(RegistryError, match="needs a scope"):
        Clause("c", "x", "derived_at", " ")
    _toy(no_hypotheses="an identity of integers").validate()


def test_a_counterexample_that_does_not_violate_leaves_the_mutant_alive():
    """A hypothesis whose instance does not break the clause is *not shown necessary*: the statement
    mutant survives (and the views say so), it is never counted as killed."""
    def weak(ctx):
        return Counterexample({"x": 1}, "two", "1 + 1 = 2 still", violated=False)

    def crash(ctx):
        raise ValueError("boom")

    c = _toy((Hypothesis("weak", "x > 0", counterexample=weak), Hypothesis("crash", "y > 0", counterexample=crash)))
    c.validate()
    rows = {m.hypothesis: run_mutant(c, m, RunContext(mode="quick")) for m in c.statement_mutants()}
    assert not rows["weak"].killed and not rows["crash"].killed
    hyps = {h["name"]: h for h in counterexample_json(c)}
    assert hyps["weak"]["necessary"] is False and "does not violate" in hyps["weak"]["why_not_shown"]
    assert hyps["crash"]["necessary"] is False and "boom" in hyps["crash"]["why_not_shown"]


def test_evidence_summary_names_the_weakest_evidence():
    cl = [Clause("a", "x", "derived", "every d"), Clause("b", "y", "cited", "ZFB (2024) Thm 4.1"),
          Clause("c", "z", "derived_at", "d = 2", also=(("checked", "d ≤ 8"),))]
    s = evidence_summary(cl)
    assert s.startswith("cited from ZFB") and "derived at d = 2, checked d ≤ 8 (c)" in s
    assert evidence_summary(cl[:1]) == "derived ∀ sizes"


def test_show_json_carries_statement():
    from tests.cli_helpers import invoke

    code, out, err = invoke("show", "attn.softmax_simplex", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["hypotheses"] and doc["clauses"]
    for c in doc["clauses"]:
        assert c["evidence"] in EVIDENCE and c["scope"]
    hyp = {h["name"]: h for h in doc["hypotheses"]}
    assert hyp["T_ge_2"]["necessary"] and hyp["T_ge_2"]["counterexample"]["instance"]["T"] == 1
    assert all("pretty" in s for s in doc["derivation"])


def test_run_json_carries_statement():
    from proofs_checks.runner import run_claim

    r = run_claim(select(["attn.softmax_simplex"])[0], RunContext(mode="quick")).to_json()
    assert r["evidence_summary"] and r["hypotheses"] and r["clauses"]
    json.dumps(r)  # serialisable
    assert math.isfinite(r["seconds"])


def test_statement_json_without_counterexamples_is_cheap():
    st = statement_json(select(["attn.softmax_simplex"])[0], counterexamples=False)
    assert {h["name"] for h in st["hypotheses"]} == {"finite_logits", "T_ge_2"}


def test_a_derivation_past_its_budget_is_undecided_naming_the_step(monkeypatch):
    """SymPy that does not finish in the budget: the claim is undecided, the message names the step
    where it stopped, and no fixed-size result stands in."""
    import time

    import sympy as sp

    from proofs_checks.runner import run_claim
    from theory.derivation import DerivationBuilder

    def slow():
        b = DerivationBuilder("slow derivation")
        b.step("a first step", sp.Integer(1))
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 30:  # stands for a simplification that does not end
            pass
        return b.done(sp.Integer(1))

    monkeypatch.setenv("TVERIFY_DERIVATION_BUDGET", "0.5")
    ok = lambda form, ctx: compare(0.0, 0.0, "exact")  # noqa: E731
    c = Claim("demo.slow", "Slow", "", "arithmetic", "identity", 1,
              (Check("sym", "symbolic", ok), Check("num", "numeric", ok)), (Mutant("two", "wrong constant", "2", 2),),
              derivation=slow, no_hypotheses="a toy", clauses=(Clause("one", "1 = 1", "derived", "always", ("derivation",)),))
    t0 = time.perf_counter()
    r = run_claim(c, RunContext(mode="quick"))
    assert time.perf_counter() - t0 < 10
    assert r.status == "undecided" and "a first step" in r.message and "0.5 s" in r.message


def test_derivations_are_cached_by_source_fingerprint(tmp_path, monkeypatch):
    """A fresh catalogue (fingerprint equal to the sources') hands the runner each built-in claim's
    derivation; a stale one, or TVERIFY_DERIVATION_CACHE=0, makes it compute."""
    from proofs_checks import fingerprint
    from proofs_checks.runner import derivation_info

    claim = select(["attn.softmax_simplex"])[0]
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")
    computed = derivation_info(claim)
    assert "cached" not in computed and computed["obligations"]
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "1")
    fake = {"schema": 1, "tool": "tverify", "fingerprint": fingerprint.source_fingerprint(),
            "claims": [{"id": claim.id, "derivation": {**computed, "steps": computed["steps"][:1]}}]}
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(fake), encoding="utf-8")
    monkeypatch.setattr(fingerprint, "catalogue_path", lambda: path)
    fingerprint._FRESH.clear()
    hit = derivation_info(claim)
    assert hit.get("cached") is True and len(hit["steps"]) == 1  # read from the catalogue, not recomputed
    fake["fingerprint"] = "stale"
    path.write_text(json.dumps(fake), encoding="utf-8")
    fingerprint._FRESH.clear()
    assert "cached" not in derivation_info(claim)
    fingerprint._FRESH.clear()
