"""A [derived] step is a computation, and a clause labelled derived says what it rests on.

* :class:`theory.derivation.DerivationBuilder` refuses a derived step that holds no SymPy result
  (nothing, a typed string, an object SymPy cannot represent), and turns a derived step that states an
  equality, inequality or boolean into an obligation SymPy must decide;
* a step in words is ``argued`` (or an ``assumed`` premise) and carries a key;
* every built-in clause labelled ``derived`` / ``derived_at`` on its claim's derivation names, in its
  scope (``Clause.rests_on``), every premise and argued step of that derivation it rests on; a key it
  names exists in the derivation.
"""

from __future__ import annotations

import functools

import pytest
import sympy as sp

from proofs_checks.registry import Clause, select
from theory.derivation import DerivationBuilder, DerivationError, premise_gaps

CLAIMS = {c.id: c for c in select() if c.derivation is not None}

#: (claim, clause) labelled derived by a symbolic check on ANOTHER derivation than the claim's own, and
#: why its scope is the place that names that derivation's premises
OTHER_DERIVATION = {
    ("icl.gamma_n_global_min", "all_weights_minimisers"):
        "theory.icl.derive_all_weights_min (all_weights_vs_sympy); the scope names its two premises in words",
    ("rnn.bptt", "projection_is_average"):
        "theory.rnn.derive_tied_projection_general (scalar_rnn_vs_sympy), a chain of SymPy steps with no premise",
}


@functools.lru_cache(maxsize=None)
def _derivation(cid: str):
    return CLAIMS[cid].derivation()


def _derived_clauses(claim):
    return [c for c in claim.clauses if any(e in ("derived", "derived_at") for e, _ in c.evidences())]


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_derived_clauses_name_their_premises(cid):
    claim, d = CLAIMS[cid], _derivation(cid)
    keys = {s.key for s in d.steps if s.key} | {s.key for _, s in d.inherited if s.key}
    gaps = []
    for cl in _derived_clauses(claim):
        if "derivation" not in cl.checks:
            assert (cid, cl.name) in OTHER_DERIVATION, (
                f"{cid}: clause {cl.name!r} is labelled derived but names neither 'derivation' nor an entry of "
                "OTHER_DERIVATION (what derivation establishes it?)")
            continue
        gaps += [f"{cl.name}: {g}" for g in premise_gaps(d, cl.name, cl.rests_on)]
        stale = [k for k in cl.rests_on if k not in keys]
        assert not stale, f"{cid}: clause {cl.name!r} rests on {stale}, which no step of the derivation is keyed"
    assert not gaps, f"{cid}: a clause labelled derived does not name a premise it rests on:\n  " + "\n  ".join(gaps)


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_steps_in_words_are_not_derived(cid):
    for s in _derivation(cid).steps:
        if s.how == "derived":
            assert s.expr is not None and not isinstance(s.expr, str), f"{cid}: derived step {s.text!r} holds no result"
        elif s.is_premise:
            assert s.key.strip(), f"{cid}: premise or argued step {s.text!r} has no key for clauses to name"


def test_builder_refuses_a_derived_step_without_a_result():
    b = DerivationBuilder("demo")
    for bad in (None, "x ≤ y", object()):
        with pytest.raises(DerivationError, match="badged derived"):
            b.step("the bound follows", bad)
    assert not b._steps


def test_a_stated_relation_becomes_an_obligation_sympy_decides():
    x = sp.Symbol("x", positive=True)
    b = DerivationBuilder("demo")
    b.step("x² + 1 > 0", sp.Gt(x**2 + 1, 0, evaluate=False))
    b.step("x > 1 (not true for every x > 0)", sp.Gt(x, 1))
    d = b.done(b.step("x", x))
    status = {o.name: o.evaluate().status for o in d.obligations}
    assert status["step 1"] == "holds"
    assert status["step 2"] != "holds"  # a relation SymPy cannot decide never counts as derived


def test_argued_steps_need_a_key_and_are_listed_with_the_assumptions():
    b = DerivationBuilder("demo")
    with pytest.raises(DerivationError, match="needs a key"):
        b.argue("P(G)P(G′) ≤ (1 + S₁)²", key="")
    b.argue("P(G)P(G′) ≤ (1 + S₁)²", key="denominator bound")
    d = b.done(b.step("one", sp.Integer(1)))
    assert [s.how for s in d.steps] == ["argued", "derived"]
    assert d.assumption_texts() == ["(argued) P(G)P(G′) ≤ (1 + S₁)²"]
    assert premise_gaps(d, "c", ()) and not premise_gaps(d, "c", ("denominator bound",))


def test_a_clause_shows_what_it_rests_on():
    c = Clause("same_token", "x", "derived", "every K", ("derivation",), rests_on=("series bounds",))
    assert c.evidence_text() == "derived every K (resting on: series bounds)"
    assert c.to_json()["rests_on"] == ["series bounds"]


def test_no_clause_labelled_derived_rests_on_an_argued_step():
    """docs/statements.md: a clause that rests on a step in words is *argued*, not derived; a derived clause
    may rest on assumed premises (named in its scope), never on an argued step (re-audit D found
    svm.softmax_saturation's ray_limit labelled derived at T = 3 on the argued E_t ≤ e^{−r·gap}). Read from the
    catalogue (docs/catalogue.json, held current by tests/test_cli.py), which records each step's kind and key."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[1] / "docs" / "catalogue.json").read_text())
    bad = []
    for c in doc["claims"]:
        how = {s["key"]: s["how"] for s in (c.get("derivation") or {}).get("steps") or [] if s.get("key")}
        for cl in c.get("clauses") or []:
            if cl.get("evidence") in ("derived", "derived_at"):
                bad += [(c["id"], cl["name"], k) for k in cl.get("rests_on") or [] if how.get(k) == "argued"]
    assert not bad, bad
