"""Derivations say what they did: every registered claim's derivation

* meets every obligation it declares (residuals vanish, inequalities hold), each cheaply;
* marks every step ``derived`` (SymPy computed it), ``argued`` (words) or ``assumed`` (a typed-in definition, premise,
  literature constant or bound), and gives a legend of its symbols;
* ends in a closed form that is the output of a derived step (``provenance == "derived"``), except
  the entries listed in ``ASSUMED_RESULTS`` with the reason each stays typed in;

and an obligation cannot be met by a wrong residual (a planted error is reported as a failure).
"""

from __future__ import annotations

import functools

import pytest
import sympy as sp

from proofs_checks.registry import select
from theory.derivation import STEP_KINDS, Obligation

CLAIMS = {c.id: c for c in select() if c.derivation is not None}

#: (claim id, result entry) -> why the entry is typed in rather than derived
ASSUMED_RESULTS = {
    ("hop.classical_capacity", "bit_error"):
        "α_c ≈ 0.138 is the Amit–Gutfreund–Sompolinsky critical load from replica theory; the "
        "signal-to-noise argument of this suite cannot derive it, so C_bit = α_c·d is a literature constant",
}

ASSUMPTION_ROLES = {"definition", "premise", "constant", "bound", "argument"}

#: a generous per-obligation ceiling (seconds): the symbolic layer must stay fast even on a busy machine
OBLIGATION_SECONDS = 5.0


@functools.lru_cache(maxsize=None)
def _derivation(cid: str):
    """Each claim's derivation, built once per test process (every test here only reads it; the
    parametrised tests of one claim run on one xdist worker, see tests/conftest.py)."""
    return CLAIMS[cid].derivation()


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_every_obligation_holds(cid):
    d = _derivation(cid)
    assert d.obligations, f"{cid}: a derivation must state at least one fact it establishes"
    names = [o.name for o in d.obligations]
    assert len(set(names)) == len(names), f"{cid}: duplicate obligation names {names}"
    for r in d.check_obligations():
        assert r.passed, f"{cid}: obligation {r.name} fails ({r.method}): residual {r.residual}"
        assert r.seconds < OBLIGATION_SECONDS, f"{cid}: obligation {r.name} took {r.seconds:.1f} s"


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_every_step_is_marked(cid):
    d = _derivation(cid)
    assert d.steps
    for s in d.steps:
        assert s.how in STEP_KINDS, f"{cid}: step {s.text!r} is marked {s.how!r}"
        assert s.text.strip(), f"{cid}: a step without text"
        if s.how == "derived":
            assert s.expr is not None, f"{cid}: derived step {s.text!r} has no computed expression"
            assert not isinstance(s.expr, str), f"{cid}: derived step {s.text!r} holds a typed string"
        else:
            assert s.role in ASSUMPTION_ROLES, f"{cid}: assumed step {s.text!r} has role {s.role!r}"
    assert any(s.how == "derived" for s in d.steps), f"{cid}: nothing was derived"
    assert d.legend, f"{cid}: no legend of symbols"


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_closed_form_is_derived(cid):
    d = _derivation(cid)
    assert d.provenance, f"{cid}: no provenance recorded"
    for entry, how in d.provenance.items():
        if (cid, entry) in ASSUMED_RESULTS:
            # keeps the allow-list honest: an entry that becomes derived must leave the list
            assert how == "assumed", f"{cid}: {entry} is now derived; remove it from ASSUMED_RESULTS"
        else:
            assert how == "derived", f"{cid}: closed form entry {entry!r} is typed in, not derived"


def test_allow_listed_results_are_visible_assumptions():
    """The one typed-in closed form rests on a step marked as a literature constant."""
    for cid, entry in ASSUMED_RESULTS:
        d = _derivation(cid)
        value = d.result[entry] if isinstance(d.result, dict) else d.result
        constants = [s for s in d.assumptions if s.role == "constant"]
        assert any(s.expr is not None and sp.sympify(s.expr) == value for s in constants), (cid, entry)


def test_named_derivations_compute_their_answer():
    """The closed forms the audit found typed in are now outputs of SymPy computations."""
    jac = _derivation("attn.softmax_simplex")
    assert jac.provenance == {"result": "derived"}
    names = {o.name for o in jac.obligations}  # the general (every T) derivation, with the T = 3 one inherited
    assert "jacobian.agrees_with_derivative" in names and "at_T3.jacobian_residual" in names
    cost = _derivation("attn.complexity")
    N, K, D = (cost.facts[k] for k in "NKD")
    assert sp.expand(cost.result["head_cost"] - (4 * N * K * D + 2 * N**2 * K)) == 0
    gm = _derivation("icl.gamma_n_global_min")
    assert {"conserved_along_flow", "solution_is_gamma_inverse", "hessian_is_kronecker"} <= {o.name for o in gm.obligations}
    assert gm.facts["conserved_rate"] == 0
    assert _derivation("icl.limits").provenance["shift_factor"] == "derived"
    assert _derivation("hop.one_step_retrieval").provenance == {"result": "derived"}


def test_big_matrices_have_compact_forms():
    d = _derivation("icl.gamma_n_global_min")
    compact = {s.text.split(":")[0]: s.compact for s in d.steps if s.compact is not None}
    assert any(t.startswith("Stationarity") for t in compact)
    assert any(t.startswith("Hessian") for t in compact)


# --------------------------------------------------------------------------------------------
# no false passes


def _plant(expr, kind):
    """A wrong version of an obligation's expression: the first entry off by one (zero), made
    negative (nonnegative/positive), or false (true)."""
    if isinstance(expr, sp.MatrixExpr):  # e.g. ZeroMatrix(n, n) from matrix calculus
        return expr + sp.Identity(expr.rows)
    if isinstance(expr, sp.MatrixBase):
        wrong = sp.Matrix(expr)
        wrong[0] = _plant(wrong[0], kind)
        return wrong
    if isinstance(expr, dict):
        k = next(iter(expr))
        return {**expr, k: _plant(expr[k], kind)}
    if isinstance(expr, (list, tuple)):
        return [_plant(expr[0], kind), *expr[1:]] if expr else [_plant(sp.Integer(0), kind)]
    if kind == "zero":
        return sp.sympify(expr) + 1
    if kind in ("nonnegative", "positive"):
        return -sp.Abs(sp.sympify(expr)) - 1
    return sp.false


def test_search_does_not_sample_indexed_symbols():
    """A wrong entry in indexed symbols (``x[t]`` under a sum over ``t``) fails on SymPy's assumptions with no
    sampled point: a number put in for the label ``x`` would make ``x[t]`` the meaningless ``(40/13)[t]``,
    which evalf neither values nor rejects quickly (attn.softmax_simplex's planted ``jacobian_psd`` spent
    5 s there, issue 46)."""
    t, T = sp.symbols("t T", integer=True, positive=True)
    x, S = sp.IndexedBase("x", real=True), sp.IndexedBase("S", positive=True)
    r = Obligation("psd", -sp.Sum(S[t] * x[t] ** 2, (t, 1, T)) - 1, "nonnegative").evaluate()
    assert (r.status, r.counterexample) == ("fails", None)
    r = Obligation("sum", sp.Sum(S[t], (t, 1, T)) - sp.Sum(S[t], (t, 1, T - 1)) - S[T] + 1).evaluate()
    assert not r.passed and "[" not in str(r.counterexample), r.counterexample  # never a "value" in (40/13)[t]


def test_obligation_has_no_false_pass_on_simple_residuals():
    x = sp.Symbol("x", real=True)
    assert not Obligation("off by one", sp.sin(x) ** 2 + sp.cos(x) ** 2).evaluate().passed
    assert not Obligation("free symbol", x + 1).evaluate().passed
    assert not Obligation("matrix", sp.Matrix([[0, 0], [x - x, 1]])).evaluate().passed
    assert not Obligation("negative", -x**2 - 1, "nonnegative").evaluate().passed
    assert not Obligation("zero is not positive", x - x, "positive").evaluate().passed
    assert not Obligation("undecided sign", x, "nonnegative").evaluate().passed
    assert not Obligation("false", sp.Eq(x, x + 1), "true").evaluate().passed
    assert Obligation("right", (x + 1) ** 2 - x**2 - 2 * x - 1).evaluate().passed


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_planted_wrong_residual_fails(cid):
    """Each obligation of each claim, planted with an error, is reported as failing."""
    for o in _derivation(cid).obligations:
        planted = Obligation(o.name, _plant(o.expr, o.kind), o.kind)
        r = planted.evaluate()
        assert not r.passed, f"{cid}: planted error in {o.name} passed ({r.method})"
    x = sp.Symbol("planted_x", real=True)
    zero = [o for o in _derivation(cid).obligations if o.kind == "zero"]
    for o in zero[:1]:  # an extra free symbol cannot be simplified away
        entries = o.expr if isinstance(o.expr, (list, tuple)) else [o.expr]
        assert not Obligation(o.name, [*entries, x]).evaluate().passed


def test_derivation_tests_run_in_their_claims_group(request):
    """Under ``make test`` (``--dist loadgroup``) each claim's derivation tests run in its claim's xdist group
    (tests/conftest.py), where its symbolic checks build the same lru-cached derivation; the ICL-LSA claims,
    which share a trained LSA and sub-derivations, are one group (issue 46)."""
    import conftest

    mine = [it for it in request.session.items if getattr(it, "module", None) is request.module and "cid" in getattr(
        getattr(it, "callspec", None), "params", {})]
    for it in mine:
        cid = it.callspec.params["cid"]
        assert it.get_closest_marker("xdist_group").args[0] == conftest.claim_group(CLAIMS[cid]), it.nodeid
    groups = {conftest.claim_group(CLAIMS[c]) for c in ("icl.gamma_n_global_min", "icl.linear_task_risk",
                                                         "icl.population_loss", "icl.loss_minimum")}
    assert groups == {"proofs_checks.claims.icl-lsa"}
    assert conftest.claim_group(CLAIMS["perf.favor_unbiased"]) == "proofs_checks.claims.favor"
