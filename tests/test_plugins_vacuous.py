"""Issue 44, item 3: no vacuous verdicts. A plugin claim stating the false ``3x = 2x`` must never be
verified through a check that cannot reject anything: ``close`` with an infinite tolerance (or a
ratio ``d/tol`` against 1), a comparison over 0 draws, ``matches_derivation(points=(0, 0, 0))``, a
size ``d = 0``, ``train(criterion=inf)`` with ``compare(floor=inf)``, a tolerance of 1e300. Each
is written as a user would: ``tverify new-claim``, its ``claims.py`` replaced by the claim, imported
from the package, run with the test kit (``assert_claim``); the registry refuses what it can see at
registration, the run reports the rest as an error in the claim (verdict ``error``, one line naming
the check and why)."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

from proofs_checks.plugin import RegistryError, check_claim
from proofs_checks.registry import registry
from proofs_checks.scaffold import write_scaffold
from proofs_checks.testkit import assert_claim

#: the false claim 3x = 2x; CHECK is the vacuous check, LAYER its layer
TEMPLATE = '''
import math

import numpy as np
import sympy as sp

from proofs_checks.plugin import (Check, Claim, DerivationBuilder, Mutant, bind, close, compare, matches_derivation,
                                  numeric, register, scalar, train, vector)

ARGS = (scalar("x"),)


def form(x):  # the claim, false: 3x = 2x
    return 3 * np.asarray(x, dtype=float)


def derive():
    b = DerivationBuilder("2x")
    (x,) = b.fact("args", bind(ARGS))
    return b.done(b.step("2x", 2 * x))


{check}

CLAIM = register(Claim(
    id="{cid}", title="3x = 2x", statement="3x = 2x", source="a false claim", kind="identity", form=form,
    derivation=derive, checks=(CHECK,), {excuse},
    mutants=(Mutant("four", "wrong constant", "4x", lambda x: 4 * np.asarray(x, dtype=float)),)))
'''

NUMERIC = 'no_symbolic="a test of vacuous checks: the numeric check alone"'
SYMBOLIC = 'no_numeric="a test of vacuous checks: the symbolic check alone"'

#: name -> (the check's source, its layer's excuse, what the one line says)
CASES = {
    "closeinf": ('''
@numeric("3x against 2x with an infinite tolerance")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(20)
    return close(form(x), 2 * x, math.inf, "no tolerance at all")
''', NUMERIC, "tolerance inf"),
    "ratio": ('''
@numeric("the ratio d/tol against 1, tol = inf")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(20)
    return compare(float(np.max(np.abs(form(x) - 2 * x))) / math.inf, 1.0, "a ratio against 1")
''', NUMERIC, "accept the form multiplied by 2"),
    "nodraws": ('''
@numeric("3x against 2x over ctx.size(0, 0, 0) draws")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(0, 0, 0))
    return close(form(x), 2 * x, 1e-12, "float64 rounding")
''', NUMERIC, "0 draws"),
    "sized": ('''
@numeric("3x against 2x at d = 0")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal((10, 0))
    return close(form(x), 2 * x, 1e-12, "float64 rounding")
''', NUMERIC, "0 draws"),
    "trained": ('''
@numeric("a trained 2x with criterion inf, compared with floor inf")
def CHECK(form, ctx):
    import torch
    run = train(lambda g, S: {"a": torch.randn(S, 1, generator=g, dtype=torch.float64)},
                lambda w: (w["a"][:, 0] - 2.0) ** 2, ctx, seeds=4, steps=5, lr=0.1, criterion=math.inf)
    slope = run.params["a"].numpy()[:, 0]
    return run.compare([form(1.0) * s / 2 for s in slope], [2.0], floor=math.inf, what="slope")
''', NUMERIC, "criterion inf"),
    "floorinf": ('''
@numeric("a trained 2x compared with floor inf")
def CHECK(form, ctx):
    import torch
    run = train(lambda g, S: {"a": torch.randn(S, 1, generator=g, dtype=torch.float64)},
                lambda w: (w["a"][:, 0] - 2.0) ** 2, ctx, seeds=4, steps=300, lr=0.1, criterion=1e-6)
    return run.compare([[float(form(1.0))] for _ in range(4)], [2.0], floor=math.inf, what="slope")
''', NUMERIC, "floor = inf"),
    "huge": ('''
@numeric("3x against 2x with a tolerance of 1e300")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(20)
    return close(form(x), 2 * x, 1e300, "a generous tolerance")
''', NUMERIC, "at least the reference's own size"),
    "hugecmp": ('''
@numeric("|3x - 2x| against a tolerance of 1e300")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(20)
    return compare(float(np.max(np.abs(form(x) - 2 * x))), 1e300, "a generous tolerance")
''', NUMERIC, "accept the form multiplied by 2"),
}

#: refused at registration: the import of the plugin fails with one line
STATIC = {
    "points": ("CHECK = matches_derivation(derive, ARGS, points=(0, 0, 0))", SYMBOLIC, "points=(0, 0, 0)"),
    "dzero": ('''
ARGS = (vector("x", "d"),)


def derive(d=2):
    b = DerivationBuilder("2x")
    (x,) = b.fact("args", bind(ARGS, d=d))
    return b.done(b.step("2x", 2 * x))


CHECK = matches_derivation(derive, ARGS, sizes={"d": (0,)})
''', SYMBOLIC, "size d = 0"),
}


def source(group: str, check: str, excuse: str) -> str:
    return TEMPLATE.format(check=textwrap.dedent(check), cid=f"{group}.three", excuse=excuse)


def scaffold(tmp_path, group: str, check: str, excuse: str):
    """``tverify new-claim GROUP.three`` with its claims.py replaced by 3x = 2x: the package folder."""
    write_scaffold(f"{group}.three", tmp_path)
    (tmp_path / f"tverify_{group}" / "claims.py").write_text(source(group, check, excuse))
    return tmp_path


def load(folder, group: str):
    """The package's claims module, imported from its file (what the entry point would import)."""
    path = folder / f"tverify_{group}" / "claims.py"
    spec = importlib.util.spec_from_file_location(f"tverify_{group}.claims", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("case", sorted(CASES))
def test_three_x_equals_two_x_through_a_vacuous_check_is_an_error_never_verified(tmp_path, case):
    check, excuse, needle = CASES[case]
    group = f"zzvac{case}"
    try:
        mod = load(scaffold(tmp_path, group, check, excuse), group)
        res = check_claim(mod.CLAIM)
        assert res.status == "error", (case, res.status, res.message)
        assert needle in res.message and "\n" not in res.message, res.message
        assert res.message.startswith("check CHECK") or "reject none of its own mutants" in res.message \
            or "accept the form multiplied by 2" in res.message, res.message
        with pytest.raises(AssertionError, match="is error"):
            assert_claim(mod.CLAIM, seeds=(0,))
    finally:
        registry._claims.pop(f"{group}.three", None)


@pytest.mark.parametrize("case", sorted(STATIC))
def test_a_vacuous_matches_derivation_is_refused_at_registration(tmp_path, case):
    check, excuse, needle = STATIC[case]
    group = f"zzvac{case}"
    try:
        with pytest.raises(RegistryError) as e:
            load(scaffold(tmp_path, group, check, excuse), group)
        assert needle in str(e.value) and "'matches_derivation'" in str(e.value) and "\n" not in str(e.value)
        assert f"{group}.three" not in registry
    finally:
        registry._claims.pop(f"{group}.three", None)


@pytest.mark.integration(reason="each vacuous plugin installed as a distribution and run by the CLI (pip installs)")
def test_the_cli_reports_each_vacuous_plugin_claim_as_an_error(tmp_path):
    """Installed as plugins (one distribution each) and run by ``tverify run``: every runtime case is
    ``error`` (exit 1, one line naming the check and why); a plugin the registry refuses is skipped
    with one warning line naming the check, and its claim is not run (exit 2 when asked for alone)."""
    from tests.test_plugin_isolation import install, tverify

    site = tmp_path / "site"
    site.mkdir()
    runtime = ["closeinf", "ratio", "huge", "trained"]
    for case in runtime:
        check, excuse, _ = CASES[case]
        install(site, f"zzvac{case}", source(f"zzvac{case}", check, excuse))
    install(site, "zzvacpoints", source("zzvacpoints", *STATIC["points"][:2]))
    code, out, err, _ = tverify(site, "run", *[f"zzvac{c}" for c in runtime], "--quick", "--json", "-", "--no-progress")
    by = {r["id"]: r for r in json.loads(out)["results"]}
    assert code == 1, (code, err[-2000:])
    for case in runtime:
        r = by[f"zzvac{case}.three"]
        assert r["status"] == "error" and CASES[case][2] in r["message"], (case, r["status"], r["message"])
    warn = [ln for ln in err.splitlines() if "zzvacpoints" in ln and "warning" in ln]
    assert len(warn) == 1 and "points=(0, 0, 0)" in warn[0] and "skipped" in warn[0], err
    code, out, err, _ = tverify(site, "run", "zzvacpoints.three", "--quick")
    assert code == 2 and "Traceback" not in err
