"""Hostile pass 47, tester B: reproducers; each asserts the correct behaviour, failed on da19604 (run there as xfail, strict) and passes since its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_hostile_round50b import _plugin  # an installed plugin distribution on PYTHONPATH
from tests.tiers import moved

_E2E = "a plugin claim's whole run in fresh processes (5 to 8 s); the in-process pin decides the same fix"

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, site: Path | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("TVERIFY_")]:
        del env[k]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), TVERIFY_STORE=str(tmp_path / "store"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               OMP_NUM_THREADS="1", COLUMNS="200",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + ([str(site)] if site else [])))
    env.update(extra)
    return env


def _tv(tmp_path: Path, *args: str, site: Path | None = None, timeout: int = 280) -> subprocess.CompletedProcess:
    """The command: a fresh interpreter where a plugin's distribution is on PYTHONPATH or the environment is the subject;
    otherwise in this process, the command's verdict or message being the subject (issue 46: ≈ 2.5 CPU s a test)."""
    if site is None:
        from tests.cli_helpers import tv_here

        return tv_here(tmp_path, *args)
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=tmp_path, env=_env(tmp_path, site),
                          capture_output=True, text=True, timeout=timeout)


def _run_plugin(tmp_path: Path, name: str, source: str, cid: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``run CID --quick --json out.json`` with the plugin ``name`` (its module ``source``) installed: the command
    (asserted free of tracebacks) and the claim's result."""
    r = _tv(tmp_path, "run", cid, "--quick", "--no-progress", "--json", "out.json", site=_plugin(tmp_path, name, source))
    assert "Traceback" not in r.stderr, r.stderr
    return r, json.loads((tmp_path / "out.json").read_text())["results"][0]


# ---------------------------------------------------------------------------------------------------------------
# F1: the simplifier "exp/log rewrite+simplify" calls expand_log(force=True), which ignores the symbols' assumptions:
# log(xy) - log x - log y "holds" for real x, y (it is -2*pi*I at x = y = -1), and the claim is verified.

F1_PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register

def form(x, y):
    return np.log(x) + np.log(y)

def sample(rng):
    return rng.uniform(0.1, 5.0), rng.uniform(0.1, 5.0)

def derive():
    b = DerivationBuilder("log of a product")
    x, y = sp.symbols("x y", real=True)
    b.fact("args", (x, y))
    return b.done(b.step("log of the product", sp.log(x * y)), display=sp.log(x) + sp.log(y))

@numeric("np.log(x*y) at uniform draws in (0.1, 5)")
def direct(form, ctx):
    rng = ctx.rng()
    xs, ys = rng.uniform(0.1, 5.0, 200), rng.uniform(0.1, 5.0, 200)
    ref = np.log(xs * ys)
    return close([form(a, b) for a, b in zip(xs, ys)], ref, 64 * np.finfo(float).eps * (1 + np.abs(ref)), "rounding")

CLAIM = register(Claim(
    id="hzlog.split", title="log(xy) = log x + log y for real x, y", statement=r"\\log(xy) = \\log x + \\log y",
    source="test", kind="identity", form=form, derivation=derive,
    checks=(matches_derivation(derive, sample), direct),
    mutants=(Mutant("double", "wrong constant", "2 log x + log y", lambda x, y: 2 * np.log(x) + np.log(y)),)))
'''


@moved(_E2E, "tests/test_hostile_round52b.py::test_f1_obligation_log_square_is_not_held_for_real_x")
def test_f1_an_obligation_false_within_the_symbols_assumptions_does_not_hold(tmp_path):
    r, res = _run_plugin(tmp_path, "hzlog", F1_PLUGIN, "hzlog.split")
    obligations = {o["name"]: o["status"] for o in res["obligations"]}
    # log(x*y) - log(x) - log(y) is -2*pi*I at x = y = -1, a point within the assumptions (real): not "holds"
    assert obligations.get("displayed form equals the derived result") != "holds", obligations
    assert res["status"] != "verified" and r.returncode != 0, (res["status"], res["message"])


def test_f1_obligation_log_square_is_not_held_for_real_x(tmp_path):
    code = ("import sympy as sp; from theory.derivation import Obligation; x = sp.Symbol('x', real=True); "
            "print(Obligation('o', sp.log(x**2) - 2*sp.log(x)).evaluate().status)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=200)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != "holds", r.stdout


# ---------------------------------------------------------------------------------------------------------------
# F2: the counterexample search samples integers outside the symbol's assumptions (an odd k at -6, a nonpositive n at 4):
# a true identity over odd k is refuted with the "counterexample" k = -6.

F2_PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register

def form(k):
    return (k - 1) / 2

def sample(rng):
    return (2 * int(rng.integers(-50, 50)) + 1,)

def derive():
    b = DerivationBuilder("floor of half an odd integer")
    k = sp.Symbol("k", integer=True, odd=True)
    b.fact("args", (k,))
    return b.done(b.step("floor(k/2)", sp.floor(k / 2)), display=(k - 1) / 2)

@numeric("np.floor(k/2) at odd k in -99..99")
def direct(form, ctx):
    ks = 2 * ctx.rng().integers(-50, 50, 200) + 1
    ref = np.floor(ks / 2)
    return close([form(int(k)) for k in ks], ref, np.full(len(ks), 1e-9), "exact up to float64 rounding")

CLAIM = register(Claim(
    id="hzodd.half", title="floor(k/2) = (k-1)/2 for every odd integer k", statement=r"\\lfloor k/2 \\rfloor = (k-1)/2",
    source="test", kind="identity", form=form, derivation=derive,
    checks=(matches_derivation(derive, sample), direct),
    mutants=(Mutant("plus", "sign flip", "(k+1)/2", lambda k: (k + 1) / 2),)))
'''


@moved(_E2E, "tests/test_pins_hostile.py::test_a_counterexample_is_a_point_within_the_symbols_assumptions")
def test_f2_a_true_identity_over_odd_integers_is_not_refuted_at_an_even_point(tmp_path):
    r, res = _run_plugin(tmp_path, "hzodd", F2_PLUGIN, "hzodd.half")
    for o in res["obligations"]:
        cx = o.get("counterexample") or {}
        if "k" in cx:
            assert int(cx["k"]) % 2 == 1, ("a counterexample at an even k for an odd symbol", o)
    assert res["status"] in ("verified", "undecided"), (res["status"], res["message"])
    assert r.returncode in (0, 3), r.returncode


def test_f2_nonpositive_integer_obligation_is_not_refuted_at_a_positive_point(tmp_path):
    code = ("import sympy as sp; from theory.derivation import Obligation; n = sp.Symbol('n', integer=True, "
            "nonpositive=True); r = Obligation('o', sp.floor(n/(n-1))).evaluate(); print(r.status, r.counterexample)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=200)
    assert r.returncode == 0, r.stderr
    # floor(n/(n-1)) is 0 for every integer n <= 0
    assert not r.stdout.startswith("fails"), r.stdout


# ---------------------------------------------------------------------------------------------------------------
# F3: matches_derivation evaluates the closed form n*n*n in the sample's numpy.int64 (what rng.integers gives): it wraps
# around silently past 9.2e18, and the correct identity is refuted.

F3_PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register

def form(n):
    return float(n) ** 3

def sample(rng):
    return (rng.integers(3_000_000, 9_000_000),)

def derive():
    b = DerivationBuilder("cube")
    n = sp.Symbol("n", integer=True, positive=True)
    b.fact("args", (n,))
    return b.done(b.step("n*n*n", n * n * n))

@numeric("the cube in float64 at n in [3e6, 9e6)")
def direct(form, ctx):
    ns = ctx.rng().integers(3_000_000, 9_000_000, 50)
    ref = ns.astype(float) ** 3
    return close([form(int(k)) for k in ns], ref, 8 * np.finfo(float).eps * ref, "float64 rounding")

CLAIM = register(Claim(
    id="hzcube.cube", title="n*n*n = n^3 for large counts n", statement=r"n \\cdot n \\cdot n = n^3",
    source="test", kind="identity", form=form, derivation=derive,
    checks=(matches_derivation(derive, sample), direct),
    mutants=(Mutant("square", "wrong formula", "n^2", lambda n: float(n) ** 2),)))
'''


@moved(_E2E, "tests/test_pins_hostile.py::test_matches_derivation_rounds_at_float64_and_at_the_intermediates")
def test_f3_matches_derivation_does_not_refute_a_correct_cube_at_numpy_integers(tmp_path):
    r, res = _run_plugin(tmp_path, "hzcube", F3_PLUGIN, "hzcube.cube")
    checks = {c["name"]: c["status"] for c in res["checks"]}
    assert checks.get("direct") == "passed", checks  # the independent float64 reference agrees with the form
    assert checks.get("matches_derivation") == "passed", (checks, res["message"])
    assert res["status"] != "refuted" and r.returncode != 1, (res["status"], res["message"])


# ---------------------------------------------------------------------------------------------------------------
# F4: report --out <store>/last --force: the run writes the store's results into --out first, so the report is diverted
# to <store>/last-<date>, under a warning that says "nothing was written ... add --force" (given) and then where it is.

def test_f4_report_out_inside_the_store_is_refused_or_said_truly(tmp_path):
    store = tmp_path / "store"
    r0 = _tv(tmp_path, "run", "attn.softmax_simplex", "--quick", "--no-progress")
    assert r0.returncode == 0, r0.stderr
    r = _tv(tmp_path, "report", "attn.softmax_simplex", "--quick", "--no-progress", "--out", str(store / "last"),
            "--force")
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 2:  # refused before the run, as --out <store> is: fine
        assert "store" in r.stderr
        return
    # otherwise the line must not say both that nothing was written (and to add the --force it was given) and where
    # the new report is
    assert "nothing was written" not in r.stderr and "add --force" not in r.stderr, r.stderr
    assert not any(p.name.startswith("last-") for p in store.iterdir()), sorted(p.name for p in store.iterdir())


# ---------------------------------------------------------------------------------------------------------------
# F5: matches_derivation judges the float64 closed form (x + 1000)^2 - (x - 1000)^2 by rounding at the size of its
# result, not of its 1e6-sized squares: the exact identity 4000x is refuted.

F5_PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register

A = 1000

def form(x):
    return 4.0 * A * x

def sample(rng):
    return (rng.uniform(-2.0, 2.0),)

def derive():
    b = DerivationBuilder("difference of two squares")
    x = sp.Symbol("x", real=True)
    b.fact("args", (x,))
    return b.done(b.step("(x + a)^2 - (x - a)^2 at a = 1000", (x + A) ** 2 - (x - A) ** 2))

@numeric("4 a x against (x + a)**2 - (x - a)**2 in long double")
def direct(form, ctx):
    xs = ctx.rng().uniform(-2.0, 2.0, 50)
    ref = np.array([float((np.longdouble(v) + A) ** 2 - (np.longdouble(v) - A) ** 2) for v in xs])
    return close([form(v) for v in xs], ref, 1e-6 * (1 + np.abs(ref)), "long double rounding of 1e6-sized squares")

CLAIM = register(Claim(
    id="hzsq.diff", title="(x + 1000)^2 - (x - 1000)^2 = 4000 x", statement=r"(x + a)^2 - (x - a)^2 = 4 a x",
    source="test", kind="identity", form=form, derivation=derive,
    checks=(matches_derivation(derive, sample), direct),
    mutants=(Mutant("two", "wrong constant", "2 a x", lambda x: 2.0 * A * x),)))
'''


@moved(_E2E, "tests/test_pins_hostile.py::test_matches_derivation_rounds_at_float64_and_at_the_intermediates")
def test_f5_an_exact_identity_is_not_refuted_by_the_closed_forms_own_cancellation(tmp_path):
    r, res = _run_plugin(tmp_path, "hzsq", F5_PLUGIN, "hzsq.diff")
    checks = {c["name"]: c["status"] for c in res["checks"]}
    assert checks.get("direct") == "passed", checks
    assert checks.get("matches_derivation") == "passed", (checks, res["message"])
    assert res["status"] != "refuted" and r.returncode != 1, (res["status"], res["message"])


# ---------------------------------------------------------------------------------------------------------------
# F6: sweep check icl --grid "N=5,05,+5" runs --N 5 three times (the claim targets refuse 5 and 05 as one value).

def test_f6_sweep_check_refuses_one_value_spelled_twice(tmp_path):
    r = _tv(tmp_path, "sweep", "check", "icl", "--grid", "N=5,05", "--quick", "--no-progress", "--json", "-")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stdout[-500:])
    assert "repeated" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------------------------
# F7: editing one plugin's file makes `show` call a built-in claim's last result "from before a source changed".

def test_f7_an_unrelated_plugins_edit_does_not_make_a_builtin_result_stale(tmp_path):
    site = _plugin(tmp_path, "hzcube", F3_PLUGIN)
    r = _tv(tmp_path, "run", "attn.softmax_simplex", "--quick", "--no-progress", site=site)
    assert r.returncode == 0, r.stderr
    s0 = _tv(tmp_path, "show", "attn.softmax_simplex", site=site)
    assert s0.returncode == 0 and "from before a source changed" not in s0.stdout, s0.stdout + s0.stderr
    with open(site / "hzcube.py", "a") as fh:
        fh.write("\n# an edit of another claim's plugin\n")
    s1 = _tv(tmp_path, "show", "attn.softmax_simplex", site=site)
    assert s1.returncode == 0, s1.stderr
    assert "from before a source changed" not in s1.stdout, s1.stdout


# ---------------------------------------------------------------------------------------------------------------
# F8: an entry point whose value is empty is skipped with importlib's internal AttributeError as the reason.

def test_f8_a_malformed_entry_point_is_named_not_an_attribute_error(tmp_path):
    site = tmp_path / "site"
    info = site / "bad1-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad1\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[tverify.claims]\nbad1 = \n")
    r = _tv(tmp_path, "list", "attn.causal_mask", site=site)
    assert r.returncode == 0, r.stderr
    assert "bad1" in r.stderr, r.stderr
    assert "NoneType" not in r.stderr and "AttributeError" not in r.stderr, r.stderr


F3_FLOAT32 = '''
import numpy as np, sympy as sp
import proofs_checks as pc
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric

def form(x):
    return float(x) ** 3 / 3.0 + float(x)

def sample(rng):
    return (np.float32(rng.uniform(1, 3)),)

def derive():
    b = DerivationBuilder("antiderivative")
    x = sp.Symbol("x", real=True)
    b.fact("args", (x,))
    return b.done(b.step("integrate x^2 + 1", sp.integrate(x**2 + 1, x)))

@numeric("x^3/3 + x in float64")
def direct(form, ctx):
    xs = ctx.rng().uniform(1, 3, 50)
    ref = xs**3 / 3 + xs
    return close([form(v) for v in xs], ref, 8 * np.finfo(float).eps * np.abs(ref), "rounding")

c = Claim(id="hzc.f32", title="antiderivative", statement="x^3/3+x", source="t", kind="identity", form=form,
          derivation=derive, checks=(matches_derivation(derive, sample), direct),
          mutants=(Mutant("half", "wrong constant", "x^3/2 + x", lambda x: float(x) ** 3 / 2 + float(x)),))
r = pc.check_claim(c, mode="quick")
print(r.status, [(o.name, o.status) for o in r.result.checks])
'''


def test_f3_float32_samples_do_not_make_the_reference_float32(tmp_path):
    (tmp_path / "f32.py").write_text(F3_FLOAT32)
    r = subprocess.run([sys.executable, "f32.py"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=280)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "('direct', 'passed')" in r.stdout, r.stdout
    assert r.stdout.startswith("verified"), r.stdout
