"""Issue 26: verdicts that separate false from undecided, the registry rule, the extension API
(proofs_checks.plugin), notebook runs, the test kit, the mutants refusal, new-claim, the cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from proofs_checks.plugin import (Check, Claim, DerivationBuilder, Mutant, RegistryError, check_claim, compare, exact,
                                  numeric, rounding, run_mutants, symbolic)
from proofs_checks.registry import registry, select
from tests.cli_helpers import invoke
from tests.tiers import moved
from theory.derivation import Obligation

sys.path.insert(0, str(Path(__file__).parent / "data"))
import entropy_plugin  # noqa: E402

COS7 = sp.cos(sp.pi / 7) - sp.cos(2 * sp.pi / 7) + sp.cos(3 * sp.pi / 7) - sp.Rational(1, 2)


# ------------------------------------------------------------------------------------------------
# obligations: holds / fails (with a counterexample) / undecided


def test_true_identity_printing_as_zero_point_e_is_not_false():
    assert str(COS7.evalf(30)) == "0.e-165"  # no significant digit: decides nothing
    r = Obligation("cosines", COS7).evaluate()
    assert r.status == "holds" and r.passed and "minimal polynomial" in r.method


def test_lambert_w_is_undecided_never_false():
    x = sp.Symbol("x", positive=True)
    for sym in (x, sp.Symbol("y")):
        r = Obligation("W e^W = x", sp.LambertW(sym) * sp.exp(sp.LambertW(sym)) - sym).evaluate()
        assert r.status == "undecided" and not r.passed and r.counterexample is None
        assert "no counterexample" in r.method


def test_false_identity_fails_with_certified_counterexample():
    x = sp.Symbol("x", positive=True)
    r = Obligation("wrong", sp.LambertW(x) * sp.exp(sp.LambertW(x)) - x - x ** 3 / 10**6).evaluate()
    assert r.status == "fails" and set(r.counterexample) == {"x", "value"}
    pt = sp.Rational(r.counterexample["x"])
    assert abs(float(sp.N((sp.LambertW(pt) * sp.exp(sp.LambertW(pt)) - pt - pt ** 3 / 10**6), 30))) > 0
    closed = Obligation("number", sp.sqrt(2) - sp.Rational(141421, 100000)).evaluate()
    assert closed.status == "fails" and closed.counterexample["value"].startswith("0.0000035")


def test_inequality_counterexample_and_exact_zero():
    x = sp.Symbol("x", real=True)
    r = Obligation("x - 1 ≥ 0", x - 1, "nonnegative").evaluate()
    assert r.status == "fails" and float(sp.Rational(r.counterexample["x"])) < 1
    assert Obligation("zero is not positive", COS7, "positive").evaluate().status == "fails"
    assert Obligation("zero is nonnegative", COS7, "nonnegative").evaluate().status == "holds"
    assert Obligation("relational", sp.Ge(x ** 2, 2 * x - 1), "true").evaluate().status in ("holds", "undecided")
    rr = Obligation("false relational", sp.Ge(x, x ** 2), "true").evaluate()
    assert rr.status == "fails" and rr.counterexample


def test_display_form_is_an_obligation():
    x = sp.Symbol("x")
    b = DerivationBuilder("d")
    raw = b.step("Differentiate", sp.diff(x * sp.exp(x), x))
    d = b.done(raw, display=x * sp.exp(x))  # wrong display form
    assert [o.status for o in d.check_obligations()] == ["fails"]


# ------------------------------------------------------------------------------------------------
# claims built with the plugin API


def _number_claim(expr, claim_id="num.cos7", value=0.0):
    def derive():
        b = DerivationBuilder("cosines")
        e = b.step("The sum", expr)
        b.obligation("the sum is zero", e)
        return b.done(e)

    @symbolic("the form equals the derived value")
    def sym(form, ctx):
        return compare(abs(form - float(sp.N(derive().result, 30))), 1e-15, "float64 rounding of a 30-digit value")

    @numeric("np.cos sum")
    def num(form, ctx):
        return rounding(abs(form - (np.cos(np.pi / 7) - np.cos(2 * np.pi / 7) + np.cos(3 * np.pi / 7) - 0.5)), 8)

    return Claim(id=claim_id, title="cosines", statement="s=0", source="t", kind="identity", form=value,
                 derivation=derive, checks=(sym, num), mutants=(Mutant("one", "wrong constant", "1", 1.0),))


def _lambert_claim(claim_id="num.lambert"):
    x = sp.Symbol("x", positive=True)

    def derive():
        b = DerivationBuilder("Lambert W")
        w = b.define("W solves w e^w = x", sp.LambertW(x))
        e = b.step("w e^w", w * sp.exp(w))
        b.obligation("w e^w = x", e - x)
        return b.done(e)

    @symbolic("SymPy's W at sampled points")
    def sym(form, ctx):
        pts = ctx.rng().uniform(0.1, 5, 10)
        return rounding(max(abs(form(p) - float(sp.N(derive().result.subs(x, p), 20))) for p in pts), 10, scale=5)

    @numeric("scipy.special.lambertw")
    def num(form, ctx):
        from scipy.special import lambertw
        pts = ctx.rng().uniform(0.1, 5, 10)
        return rounding(max(abs(form(p) - float((lambertw(p) * np.exp(lambertw(p))).real)) for p in pts), 10, scale=5)

    return Claim(id=claim_id, title="W e^W = x", statement="W(x)e^{W(x)}=x", source="t", kind="identity",
                 form=lambda p: p, derivation=derive, checks=(sym, num),
                 mutants=(Mutant("double", "wrong constant", "2x", lambda p: 2 * p),))


def test_plugin_claim_verifies_and_mutants_die_by_numbers():
    c = entropy_plugin.build()
    res = check_claim(c)
    assert res.status == "verified", str(res)
    assert "<table>" in res._repr_html_() and "verified" in str(res)
    m = run_mutants(c)
    assert m.all_killed and not m.refused and "<table>" in m._repr_html_()
    assert all("numeric" in r.rejected_by_layer() for r in m.rows)


@pytest.mark.integration(reason="a refuted plugin claim and its counterexample search end to end")
def test_false_variant_is_refuted_with_a_counterexample_and_kills_nothing():
    c = entropy_plugin.build(wrong=True, claim_id="ent.wrong")
    res = check_claim(c)
    assert res.status == "refuted"
    obl = {o["name"]: o for o in res.result.obligations}["dH/dβ equals the stated form"]
    assert obl["status"] == "fails" and "beta" in obl["counterexample"] and "counterexample" in res.message
    m = run_mutants(c)
    assert not m.all_killed and "refuted" in m.refused and not any(r.killed for r in m.rows)


def test_cos7_claim_verified_lambert_claim_undecided():
    assert check_claim(_number_claim(COS7)).status == "verified"
    lam = check_claim(_lambert_claim())
    assert lam.status == "undecided" and "undecided" in lam.message
    assert run_mutants(_lambert_claim()).refused  # undecided is not verified: no kill counts


def test_matches_derivation_lambdifies_special_functions():
    # the usual symbolic check on a LambertW closed form: SciPy's lambertw, not a NameError crash
    from proofs_checks.plugin import matches_derivation
    from proofs_checks.context import RunContext
    from scipy.special import lambertw

    def derive():
        b = DerivationBuilder("W e^W")
        x = b.fact("args", (sp.Symbol("x", positive=True),))[0]
        return b.done(b.step("w e^w", sp.LambertW(x) * sp.exp(sp.LambertW(x))))

    chk = matches_derivation(derive, lambda rng: (rng.uniform(0.1, 5),))
    assert chk.fn(lambda x: x, RunContext(mode="quick")).passed
    assert not chk.fn(lambda x: float(lambertw(x).real), RunContext(mode="quick")).passed


def test_registry_rule_one_line_reasons():
    ok = lambda form, ctx: exact(0.0, "x")  # noqa: E731
    base = dict(id="zz.rule", title="t", statement="s", source="t", kind="theorem", form=1.0,
                mutants=(Mutant("m", "wrong constant", "2", 2.0),))
    with pytest.raises(RegistryError, match=r"no derivation .* and no symbolic check") as e:
        Claim(**base, checks=(Check("n", "numeric", ok),)).validate()
    assert "\n" not in str(e.value) and "a theorem needs" in str(e.value)
    with pytest.raises(RegistryError, match="no numeric or trained check"):
        Claim(**base, checks=(Check("s", "symbolic", ok),), derivation=lambda: None).validate()
    Claim(**base, checks=(Check("n", "numeric", ok),), no_symbolic="an empirical table").validate()
    Claim(**{**base, "kind": "evidence"}, checks=(Check("n", "numeric", ok),)).validate()


@pytest.mark.integration(reason="the pytest fixture over a plugin claim at two seeds")
def test_testkit_and_fixture(tverify):
    tverify.assert_claim(entropy_plugin.build(), seeds=(0, 1))
    from proofs_checks.testkit import assert_claim

    with pytest.raises(AssertionError, match="refuted"):
        assert_claim(entropy_plugin.build(wrong=True, claim_id="ent.wrong"), seeds=(0,))

    @symbolic()
    def only_sym(form, ctx):
        return exact(float(form != 1.0), "value")

    @numeric()
    def blind(form, ctx):
        return exact(0.0, "sees nothing")

    weak = Claim(id="zz.weak", title="t", statement="s", source="t", kind="identity", form=1.0,
                 derivation=lambda: DerivationBuilder("x").done(1), checks=(only_sym, blind),
                 mutants=(Mutant("two", "wrong constant", "2", 2.0),))
    with pytest.raises(AssertionError, match="only by the symbolic layer"):
        assert_claim(weak, seeds=(0,))


# ------------------------------------------------------------------------------------------------
# the CLI on registered plugin claims: exit codes and the mutants refusal


@pytest.fixture
def registered():
    select([])  # load the built-in claims and plugins first
    added = []

    def add(claim):
        registry.add(claim)
        added.append(claim.id)
        return claim

    yield add
    for cid in added:
        registry._claims.pop(cid, None)


@pytest.mark.integration(reason="the CLI over registered plugin claims, each status end to end")
def test_cli_statuses_and_mutants_refusal(registered, tmp_path):
    registered(entropy_plugin.build(wrong=True, claim_id="zzent.wrong"))
    registered(entropy_plugin.build(claim_id="zzent.right"))
    registered(_lambert_claim("zzent.lambert"))
    store = str(tmp_path / "store")
    code, out, err = invoke("--store", store, "mutants", "zzent.wrong", "--quick", "--no-progress", "--json", "-")
    doc = json.loads(out)
    assert code == 1 and doc["killed"] == 0 and doc["refused"] and "is refuted" in err
    assert all(m["refused"] and not m["killed"] and not m["checks"] for m in doc["mutants"])
    code, out, err = invoke("--store", store, "mutants", "zzent.right", "--quick", "--no-progress", "--json", "-")
    assert code == 0 and json.loads(out)["killed"] == 2, err
    code, out, _ = invoke("--store", store, "run", "zzent.lambert", "--quick", "--no-progress", "--json", "-")
    doc = json.loads(out)
    assert code == 3 and doc["results"][0]["status"] == "undecided" and doc["summary"] == {"undecided": 1}
    code, out, _ = invoke("--store", store, "run", "zzent.wrong", "--quick", "--no-progress", "--json", "-")
    r = json.loads(out)["results"][0]
    assert code == 1 and r["status"] == "refuted"
    assert any(o["status"] == "fails" and o["counterexample"] for o in r["obligations"])


def _slope_claim(claim_id="zz.slope_wrong"):
    """d(β²)/dβ stated as 3β: refuted, its obligation fails with a counterexample in β."""
    beta = sp.Symbol("beta", positive=True)

    def derive():
        b = DerivationBuilder("d(β²)/dβ")
        f = b.define("β²", beta ** 2)
        d = b.step("Differentiate in β", sp.diff(f, beta))
        b.obligation("d(β²)/dβ equals the stated form", d - 3 * beta)
        return b.done(d, display=None)

    @numeric("central finite difference")
    def fd(form, ctx):
        pts = ctx.rng().uniform(0.1, 3, 10)
        h = 1e-4  # the central difference of β² is exact: rounding of β² ≤ 9, twice, over 2h
        return compare(max(abs(form(p) - ((p + h) ** 2 - (p - h) ** 2) / (2 * h)) for p in pts), 2 * 2.2e-16 * 9 / h,
                       "rounding 2·eps·9/h at h = 1e-4")

    return Claim(id=claim_id, title="slope", statement=r"\frac{d\beta^2}{d\beta}=3\beta", source="t", kind="identity",
                 form=lambda p: 3 * p, derivation=derive, checks=(fd,),
                 mutants=(Mutant("four", "wrong constant", "4β", lambda p: 4 * p),))


def test_report_markdown_has_obligations_table():
    from proofs_checks.context import RunContext
    from proofs_checks.output.report import render_markdown, results_document
    from proofs_checks.runner import run_claim

    c = _slope_claim()  # a refuted claim whose failing obligation is cheap to decide (issue 46: the entropy
    doc = results_document([run_claim(c, RunContext(mode="quick"))], claims={c.id: c})  # variant's took ≈ 4 s)
    md = render_markdown(doc)
    assert "| obligation | kind | status | method | residual | counterexample |" in md
    assert "**fails**" in md and "beta = " in md


# ------------------------------------------------------------------------------------------------
# tverify new-claim


def _import_scaffold(folder: Path, module: str):
    import importlib

    sys.path.insert(0, str(folder))
    try:
        for name in [m for m in sys.modules if m == module.split(".")[0] or m.startswith(module.split(".")[0] + ".")]:
            del sys.modules[name]
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(folder))


def _new_scaffold(tmp_path):
    """``tverify new-claim zzmine.example`` into ``tmp_path/pkg``: the package folder and its claims module."""
    code, out, err = invoke("new-claim", "zzmine.example", "--dir", str(tmp_path / "pkg"))
    assert code == 0, err
    pkg = tmp_path / "pkg"
    return pkg, _import_scaffold(pkg, "tverify_zzmine.claims")


def test_new_claim_scaffold_is_a_package_that_fails_when_broken(registered, tmp_path):
    """The scaffold's package, claim and test, and its broken form refuted (the green end-to-end run at two
    seeds and the CLI's kill matrix: :func:`test_new_claim_scaffold_runs_green`, in the integration tier)."""
    from tests.cli_helpers import one_line_error

    try:
        _scaffold_fails_when_broken(tmp_path)
    finally:
        registry._claims.pop("zzmine.example", None)
    # never overwrites, writes nothing when one target exists
    pkg = tmp_path / "pkg"
    line = one_line_error(*invoke("new-claim", "zzmine.example", "--dir", str(pkg))[::2])
    assert "refusing to overwrite" in line
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README.md").write_text("mine")
    one_line_error(*invoke("new-claim", "zzmine.example", "--dir", str(tmp_path / "other"))[::2])
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["README.md"]
    assert "must look like" in one_line_error(*invoke("new-claim", "Bad", "--dir", str(tmp_path / "x"))[::2])


def _scaffold_fails_when_broken(tmp_path) -> None:
    from proofs_checks.testkit import assert_claim

    pkg, mod = _new_scaffold(tmp_path)
    assert '"tverify.claims"' in (pkg / "pyproject.toml").read_text()
    assert "tverify.assert_claim" in (pkg / "tests" / "test_claims.py").read_text()
    assert [c.layer for c in mod.CLAIM.checks] == ["symbolic", "numeric", "numeric", "trained"]
    assert len(mod.CLAIM.mutants) == 3 and [h.name for h in mod.CLAIM.hypotheses] == ["d_even", "linear_angles"]
    # a broken form: the claim is refuted and the package's own assertion fails
    src = (pkg / "tverify_zzmine" / "claims.py")
    text = src.read_text()
    assert "    return score(q, k, np.subtract(n, m))\n" in text
    src.write_text(text.replace("    return score(q, k, np.subtract(n, m))\n", "    return score(q, k, np.subtract(n, m) * 1.001)\n"))
    registry._claims.pop("zzmine.example", None)
    broken = _import_scaffold(pkg, "tverify_zzmine.claims")
    assert check_claim(broken.CLAIM).status == "refuted"
    with pytest.raises(AssertionError, match="refuted"):
        assert_claim(broken.CLAIM, seeds=(0,))


@moved("the scaffold's claim through the test kit at two seeds (each seed runs the claim and every mutant, "
       "≈ 6 s) and the CLI's kill matrix of it: the scaffold green end to end, as its own package test runs it",
       "tests/test_own_claim_toolkit.py::test_scaffold_claim_verified_mutants_killed_resolution_confirmed",
       "tests/test_plugins_features.py::test_linear_attention_claim_from_the_docs_verifies_with_every_mutant_killed",
       "tests/test_cli.py::test_mutants_kill_matrix_json",
       "tests/test_extending.py::test_new_claim_scaffold_is_a_package_that_fails_when_broken")
def test_new_claim_scaffold_runs_green(registered, tmp_path):
    from proofs_checks.testkit import assert_claim

    _, mod = _new_scaffold(tmp_path)
    registered(mod.CLAIM) if "zzmine.example" not in registry else None
    assert assert_claim(mod.CLAIM, seeds=(0, 1)).status == "verified"
    code, out, _ = invoke("mutants", "zzmine.example", "--quick", "--no-progress", "--json", "-")
    assert code == 0 and json.loads(out)["killed"] == 4  # three planted mutants and the dropped hypothesis


# ------------------------------------------------------------------------------------------------
# the catalogue cache: keyed on what it depends on, and --refresh


def test_cache_depends_on_plugin_helper_sources(tmp_path, monkeypatch):
    from proofs_checks.output import catalogue
    from proofs_checks.claims import PLUGIN_SOURCES

    helper = tmp_path / "helper.py"
    helper.write_text("X = 1\n")
    monkeypatch.setattr(catalogue, "repo_docs_dir", lambda: tmp_path / "nodocs")
    monkeypatch.setattr("proofs_checks.claims.PLUGIN_SOURCES", PLUGIN_SOURCES | {str(helper)})
    # the names of the plugins other tests of this process loaded (after tests/test_plugins_features.py, a plugin folder
    # no longer on the path resolved nowhere, and the cache was stale at once): not this test's subject
    monkeypatch.setattr("proofs_checks.claims.PLUGIN_NAMES", {})
    doc = catalogue.build([], with_derivations=False)
    assert str(helper) in doc["depends_on"]
    catalogue.save_cache(doc, tmp_path / "cache")
    assert catalogue.load_fresh(tmp_path / "cache") is not None
    helper.write_text("X = 2\n")  # a helper the plugin imports changed: the cache is stale
    assert catalogue.load_fresh(tmp_path / "cache") is None


def test_list_and_show_refresh_see_a_claim_registered_after_caching(registered, tmp_path):
    store = str(tmp_path / "store")
    code, out, _ = invoke("--store", store, "list", "--json", "-")
    assert code == 0 and "zzref.late" not in out
    registered(entropy_plugin.build(claim_id="zzref.late"))  # e.g. registered on a condition
    code, out, _ = invoke("--store", store, "list", "--refresh", "zzref.late", "--json", "-")
    assert code == 0 and [e["id"] for e in json.loads(out)] == ["zzref.late"]
    code, out, _ = invoke("--store", store, "show", "zzref.late", "--refresh", "--json", "-")
    d = json.loads(out)
    assert code == 0 and [o["status"] for o in d["obligations"]] == ["holds", "holds", "holds"]


# ------------------------------------------------------------------------------------------------
# researcher code that exits: never the process's exit status (sys.exit(0) read as success)


def test_check_or_derivation_calling_sys_exit_is_an_error_not_exit_0():
    def bye(*a):
        raise SystemExit(0)

    ok = lambda form, ctx: exact(0.0, "x")  # noqa: E731
    base = dict(id="zz.exits", title="t", statement="s", source="t", kind="identity", form=1.0,
                mutants=(Mutant("m", "wrong constant", "2", 2.0),))
    c = Claim(**base, derivation=entropy_plugin._derive(False), checks=(Check("s", "symbolic", ok), Check("n", "numeric", bye)))
    r = check_claim(c)
    assert r.status == "error" and "sys.exit(0)" in r.message
    assert run_mutants(c).refused and not any(row.killed for row in run_mutants(c).rows)
    d = Claim(**base, derivation=bye, checks=(Check("s", "symbolic", ok), Check("n", "numeric", ok)))
    assert check_claim(d).status == "error" and "sys.exit(0)" in check_claim(d).message


def test_plugin_exiting_at_import_is_skipped_with_a_warning(monkeypatch, capsys):
    import importlib.metadata as md
    from proofs_checks import claims

    class EP:
        name, value = "exits", "zz_exits.claims"

        def load(self):
            raise SystemExit(0)

    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()])
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    claims.load_plugins()
    assert claims.PLUGIN_ERRORS and "sys.exit(0)" in claims.PLUGIN_ERRORS[0][1]
    assert "failed to load" in capsys.readouterr().err


def test_a_claim_redefined_under_the_same_id_never_reads_the_old_reference():
    # a notebook cell run again: the process-wide reference cache returned the previous derivation
    # lambdified, so the corrected claim was refuted (or a stale derivation verified a wrong form)
    from proofs_checks import context
    from proofs_checks.plugin import matches_derivation

    def make(expr, form):
        def derive():
            b = DerivationBuilder("d")
            x = b.fact("args", (sp.Symbol("x", real=True),))[0]
            return b.done(b.step("s", expr(x)))

        direct = Check("direct", "numeric", lambda f, ctx: rounding(float(np.max(np.abs(f(np.ones(3)) - form(np.ones(3))))), 4))
        return Claim(id="nb.edit", title="t", statement="s", source="t", kind="identity", form=form, derivation=derive,
                     checks=(matches_derivation(derive, lambda r: (r.uniform(-1, 1),)), direct),
                     mutants=(Mutant("m", "sign flip", "-f", lambda x: -form(x) - 1),))

    assert check_claim(make(lambda x: x ** 2, lambda x: x ** 2)).status == "verified"
    assert check_claim(make(lambda x: (x + 1) ** 2, lambda x: (x + 1) ** 2)).status == "verified"
    assert check_claim(make(lambda x: (x + 1) ** 2, lambda x: x ** 2)).status == "refuted"
    hits = context._REF_STATS["hits"]
    assert run_mutants(make(lambda x: x ** 3, lambda x: x ** 3)).all_killed
    assert context._REF_STATS["hits"] > hits  # mutants still reuse the claim's references
