"""Hostile pass 20 (tester a): strict xfails, one per finding (HOSTILE20A_FINDINGS.md). Each fails on the tree
under test (83d880e) because of the finding; a fix turns it into a pass (then drop the mark)."""

from __future__ import annotations

import pytest


def test_force_never_deletes_a_folder_made_at_out_while_the_claims_run(tmp_path, monkeypatch):
    import proofs_checks.cli as cli

    out = tmp_path / "rf"
    real = cli._run_selected

    def run_and_user_makes_folder(*a, **k):  # the claims run; meanwhile the user makes a folder of theirs at --out
        res = real(*a, **k)
        out.mkdir()
        (out / "mine.txt").write_text("user data")
        return res

    monkeypatch.setattr(cli, "_run_selected", run_and_user_makes_folder)
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ex:
        cli._main(["report", "attn.complexity", "--quick", "--no-mutants", "--out", str(out), "--force", "--no-progress"])
    assert ex.value.code in (0, None)
    assert (out / "mine.txt").exists(), "the user's folder made during the run was deleted"


_PLUGIN = '''
import os
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)


def form(x):
    return 2.0 * np.asarray(x, float)


def derive():
    C = READ_C()
    b = DerivationBuilder("doubling")
    (x,) = b.fact("args", (sp.Symbol("x", real=True),))
    d = b.define("Definition", 2 * x)
    b.obligation("constant is two", C - 2)
    return b.done(b.step("expand", sp.expand(d)))


@numeric("2x against x + x, float64")
def plain(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(50, 200, 400))
    return close(form(x), x + x, 4 * np.finfo(float).eps * np.abs(x) + 1e-300, "one rounding per draw")


READ_C = {"environb": lambda: int(os.environb.get(b"HZC", b"2")),
          "sqlite": lambda: __import__("sqlite3").connect(os.environ["HZDB"]).execute("select c from k").fetchone()[0]}[os.environ["HZHOW"]]

CLAIM = register(Claim(id="hz.dbl", title="doubling", statement="f(x) = 2x", source="hostile 20a", kind="identity",
                       form=form, derivation=derive, no_hypotheses="none",
                       checks=(matches_derivation(derive, ARGS), plain),
                       mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3.0 * np.asarray(x, float)),)))
'''


@pytest.mark.integration(reason="two tverify runs of a throwaway plugin in subprocesses, 1-4 min")
@pytest.mark.parametrize("how", ["environb", "sqlite"])
def test_derivation_cache_records_environb_and_sqlite_reads(tmp_path, how):
    import os
    import subprocess
    import sys
    from pathlib import Path

    pz = tmp_path / "pz"
    (pz / "tverify_hz").mkdir(parents=True)
    (pz / "tverify_hz" / "__init__.py").write_text("")
    (pz / "tverify_hz" / "claims.py").write_text(_PLUGIN)
    dist = pz / "tverify_hz-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tverify-hz\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nhz = tverify_hz.claims\n")
    tv = Path(sys.executable).with_name("tverify")
    import sqlite3

    db = tmp_path / "hz.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table k(c int)")
    con.execute("insert into k values (2)")
    con.commit()
    env = {**os.environ, "PYTHONPATH": str(pz), "TVERIFY_STORE": str(tmp_path / "store"), "HZC": "2",
           "HZHOW": how, "HZDB": str(db)}
    first = subprocess.run([str(tv), "run", "hz.dbl", "--quick", "--no-progress"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    env["HZC"] = "3"  # the obligation is now false
    con.execute("update k set c = 3")
    con.commit()
    con.close()
    second = subprocess.run([str(tv), "run", "hz.dbl", "--quick", "--no-progress"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=900)
    assert second.returncode == 1 and "constant is two" in second.stdout, second.stdout[-2000:]


def test_force_never_overwrites_a_json_file_written_during_the_run(tmp_path, monkeypatch):
    import proofs_checks.cli as cli

    out, js = tmp_path / "rf", tmp_path / "rfj.json"
    real = cli._run_selected

    def run_and_user_writes_json(*a, **k):
        res = real(*a, **k)
        js.write_text("user json")
        return res

    monkeypatch.setattr(cli, "_run_selected", run_and_user_writes_json)
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ex:
        cli._main(["report", "attn.complexity", "--quick", "--no-mutants", "--out", str(out), "--force",
                   "--json", str(js), "--no-progress"])
    assert ex.value.code in (0, None)
    assert js.read_text() == "user json", "the user's file written during the run was overwritten"


def test_report_out_name_not_utf8_is_written(tmp_path, monkeypatch):
    import os

    import proofs_checks.cli as cli

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"r\xffx")  # what Python makes of a file name that is not UTF-8 (a surrogate escape)
    try:
        cli._main(["report", "attn.complexity", "--quick", "--no-mutants", "--out", name, "--no-progress"])
    except SystemExit as ex:
        assert ex.code in (0, None)
    assert (tmp_path / name / "report.md").exists()


def test_lyapunov_expression_not_utf8_is_one_line(tmp_path, monkeypatch):
    import proofs_checks.cli as cli

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ex:
        cli._main(["check", "lyapunov", "--f", "-x", "--V", "x**2\udcff"])
    assert ex.value.code == 2
