"""The pytest plugin (``pytest11`` entry point ``tverify``) and the ``tverify.claims`` entry-point
group: a user's test passes on a correct module and fails with the property table on a leaking
one; claims from another installed package appear in ``tverify list``, run and report, and a broken
plugin is one warning line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import re
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration(reason="the pytest plugin in a child pytest session")

pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent


def test_plugin_is_registered_and_light():
    assert any(ep.value == "proofs_checks.pytest_plugin" for ep in entry_points(group="pytest11")), \
        "refresh the editable install: pip install --no-deps --no-build-isolation -e ."
    code = ("import sys, proofs_checks.pytest_plugin; heavy = [m for m in ('torch', 'sympy', 'cvxpy', 'numpy', "
            "'scipy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_fixture_passes_and_fails_with_the_table(pytester):
    pytester.makepyfile(test_user=textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(DATA)!r})
        from own_attention import CausalSelfAttention, leaky

        def test_good(tverify):
            assert tverify.check_attention(CausalSelfAttention(), causal=True).ok

        def test_leaky(tverify):
            tverify.check_attention(leaky(), causal=True)

        def test_expected_leak(tverify):
            tverify.check_attention(leaky(), causal=True, expect="mismatch")

        def test_bad_input(tverify):
            tverify.check_attention(lambda x: x[:, :1], dim=4)

        def test_typo_in_expect(tverify):
            tverify.check_attention(CausalSelfAttention(), causal=True, expect="fine")
    """))
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")
    res.assert_outcomes(passed=2, failed=3)
    out = res.stdout.str()
    assert "expect must be one of ok, mismatch, inconclusive, got 'fine'" in out
    assert "expected ok, got mismatch" in out and re.search(r"causal_no_future_leak +FAIL", out)
    assert "LEAK: output at position" in out and "bad input: obj: <lambda> returned shape" in out
    assert "proofs_checks/api.py" not in out  # pytest.fail(pytrace=False): no traceback into the package


def test_claims_entry_point_group(tmp_path):
    """A package on the path with a ``tverify.claims`` entry point (a dist-info folder, as pip
    writes it) registers its claim: listed, verified, reported; a broken one only warns."""
    pkg = tmp_path / "own_plugclaims"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from proofs_checks.registry import Check, Claim, Mutant, compare, register

        def _sum(form, ctx):
            return compare(abs(form["two"] - 2.0), 0.0, "1 + 1 is exact in float64")

        register(Claim(id="plug.one_plus_one", title="One plus one is two (plugin)", kind="identity",
                       statement="1+1=2", source="a plugin package", form={"two": 1.0 + 1.0},
                       checks=(Check("sum", "numeric", _sum, "1 + 1"),),
                       mutants=(Mutant("three", "wrong constant", "1 + 1 = 3", {"two": 3.0}),),
                       no_symbolic="float64 arithmetic on small integers: nothing to derive"))
    """))
    dist = tmp_path / "own_plugclaims-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: own-plugclaims\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nplug = own_plugclaims\nbroken = own_missing_module_xyz\n")
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.cli_helpers import invoke
        store = {str(tmp_path / 'store')!r}
        out = {{}}
        out["list"] = invoke("--store", store, "list", "plug", "--json", "-")
        out["run"] = invoke("--store", store, "run", "plug", "--quick", "--no-progress", "--json", "-")
        out["report"] = invoke("--store", store, "report", "plug", "--quick", "--no-progress", "--out",
                               {str(tmp_path / 'rep')!r})
        print("@@" + json.dumps(out))
    """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.split("@@", 1)[1])
    code, out, err = res["list"]
    assert code == 0 and [e["id"] for e in json.loads(out)] == ["plug.one_plus_one"]
    assert err.count("tverify: warning: claims plugin 'broken'") == 1 and "ModuleNotFoundError" in err
    code, out, _ = res["run"]
    doc = json.loads(out)
    assert code == 0 and doc["results"][0]["id"] == "plug.one_plus_one" and doc["results"][0]["status"] == "verified"
    code, out, _ = res["report"]
    assert code == 0 and "plug.one_plus_one" in (tmp_path / "rep" / "report.md").read_text()
