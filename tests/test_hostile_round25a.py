"""Hostile pass 19, tester a: reproducers of its findings (strict xfails until fixed)."""

import subprocess
import sys
import textwrap

import pytest


def test_fixture_never_imports_the_test_folders_theory_module(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "theory.py").write_text(f"open({str(marker)!r}, 'w').write(__file__)\n")
    (tmp_path / "test_a.py").write_text(textwrap.dedent("""
        def test_a(tverify):
            pass
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                           "test_a.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not marker.exists(), f"the test folder's theory.py ran: {marker.read_text()}"


def test_catalogue_cache_cleanup_keeps_a_users_file(tmp_path):
    from proofs_checks.output.catalogue import save_cache

    cache = tmp_path / "cache"
    cache.mkdir()
    mine = cache / "catalogue-2025.json"
    mine.write_text('{"mine": 1}')
    save_cache({"fingerprint": "0" * 40, "claims": []}, cache)
    assert mine.exists(), "a file tverify did not write was deleted"


def test_force_never_deletes_a_folder_made_during_the_run(tmp_path):
    from proofs_checks.output.report import build_output

    out = tmp_path / "rep"  # absent when the command starts: --force consented to nothing there

    def fill(tmp):
        (tmp / "results.json").write_text("{}")
        out.mkdir()  # meanwhile, the user makes a folder there
        (out / "mine.txt").write_text("user data")

    build_output(out, fill, {"kind": "report"}, force=True)
    kept = [p for p in tmp_path.rglob("mine.txt")]
    assert kept and kept[0].read_text() == "user data", "the user's folder made during the run was deleted"


_PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)
CONST = CONST_PATH


def form(x):
    return 2.0 * np.asarray(x, float)


def derive():
    c = int(open(CONST).read())  # an input the derivation reads: the cached entry must follow it
    b = DerivationBuilder("doubling")
    (x,) = b.fact("args", (sp.Symbol("x", real=True),))
    b.obligation("constant is two", sp.Integer(c) - 2)
    return b.done(b.step("expand", sp.expand(b.define("Definition", 2 * x))))


@numeric("2x against x + x, float64")
def plain(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(50, 200, 400))
    return close(form(x), x + x, 4 * np.finfo(float).eps * np.abs(x) + 1e-300, "one rounding per draw")


CLAIM = register(Claim(id="hq.dbl", title="doubling", statement="f(x) = 2x", source="hostile 19a", kind="identity",
                       form=form, derivation=derive, checks=(matches_derivation(derive, ARGS), plain),
                       mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3.0 * np.asarray(x, float)),)))
'''


def _install_plugin(tmp_path, const_path: str) -> None:
    """The plugin ``hq`` (claim ``hq.dbl``, whose derivation reads ``const_path``) under ``tmp_path/pl``."""
    pkg = tmp_path / "pl" / "tverify_hq"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "claims.py").write_text(_PLUGIN.replace("CONST_PATH", repr(const_path)))
    dist = tmp_path / "pl" / "tverify_hq-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tverify-hq\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nhq = tverify_hq.claims\n")


@pytest.mark.integration(reason="two `tverify show` runs of a plugin claim in subprocesses (about a minute)")
def test_show_never_answers_a_plugin_derivation_whose_input_changed(tmp_path):
    import os

    const = tmp_path / "const.txt"
    _install_plugin(tmp_path, str(const))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pl"), TVERIFY_STORE=str(tmp_path / "store"), COLUMNS="200")

    def show():
        proc = subprocess.run([sys.executable, "-m", "proofs_checks", "show", "hq.dbl", "--full"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    const.write_text("2")
    assert "constant is two (zero): holds" in show()
    const.write_text("3")  # the obligation is false now
    assert "constant is two (zero): FAILS" in show()


@pytest.mark.integration(reason="two `tverify run` of a plugin claim in subprocesses (a minute or two)")
def test_run_never_answers_a_derivation_that_read_a_relative_file_elsewhere(tmp_path):
    import os

    _install_plugin(tmp_path, "const.txt")  # relative: the working folder's
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pl"), TVERIFY_STORE=str(tmp_path / "store"))
    codes = {}
    for name, value in (("a", "2"), ("b", "3")):  # in b the obligation "constant is two" is false
        (tmp_path / name).mkdir()
        (tmp_path / name / "const.txt").write_text(value)
        codes[name] = subprocess.run([sys.executable, "-m", "proofs_checks", "run", "hq.dbl", "--quick", "--no-progress"],
                                     cwd=tmp_path / name, env=env, capture_output=True, text=True, timeout=900).returncode
    assert codes == {"a": 0, "b": 1}


@pytest.mark.integration(reason="two `tverify show` runs of a plugin claim in subprocesses (about a minute)")
def test_a_derivation_out_of_time_is_never_cached_as_none(tmp_path):
    import os

    const = tmp_path / "const.txt"
    const.write_text("3")  # the obligation is false
    _install_plugin(tmp_path, str(const))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pl"), TVERIFY_STORE=str(tmp_path / "store"), COLUMNS="200")
    cmd = [sys.executable, "-m", "proofs_checks", "show", "hq.dbl", "--full"]
    subprocess.run(cmd + ["--refresh"], cwd=tmp_path, env=dict(env, TVERIFY_DERIVATION_BUDGET="0.001"),
                   capture_output=True, text=True, timeout=600)
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600).stdout
    at = out.find("\nderivation")
    assert "constant is two (zero): FAILS" in out, out[at:at + 600]
