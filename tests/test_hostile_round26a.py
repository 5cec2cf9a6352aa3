"""Hostile pass 20 (tester a): strict xfails, one per finding (HOSTILE20A_FINDINGS.md). Each fails on the tree
under test (83d880e) because of the finding; a fix turns it into a pass (then drop the mark)."""

from __future__ import annotations

import pytest

from tests.hz_plugin import hz_plugin, install_hz


def test_force_never_deletes_a_folder_made_at_out_while_the_claims_run(tmp_path, monkeypatch):
    import proofs_checks.cli as cli
    from tests.cli_helpers import during_the_run

    out = tmp_path / "rf"
    # the claims run; meanwhile the user makes a folder of theirs at --out
    during_the_run(monkeypatch, lambda: (out.mkdir(), (out / "mine.txt").write_text("user data")))
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ex:
        cli._main(["report", "attn.complexity", "--quick", "--no-mutants", "--out", str(out), "--force", "--no-progress"])
    assert ex.value.code in (0, None)
    assert (out / "mine.txt").exists(), "the user's folder made during the run was deleted"


_PLUGIN = hz_plugin('''
READ_C = {"environb": lambda: int(os.environb.get(b"HZC", b"2")),
          "sqlite": lambda: __import__("sqlite3").connect(os.environ["HZDB"]).execute("select c from k").fetchone()[0]}[os.environ["HZHOW"]]
''', 'hostile 20a')


@pytest.mark.integration(reason="two tverify runs of a throwaway plugin in subprocesses, 1-4 min")
@pytest.mark.parametrize("how", ["environb", "sqlite"])
def test_derivation_cache_records_environb_and_sqlite_reads(tmp_path, how):
    import os
    import subprocess
    import sys
    from pathlib import Path

    pz = install_hz(tmp_path, _PLUGIN)
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
    from proofs_checks import cli_select

    real = cli_select._run_selected

    def run_and_user_writes_json(*a, **k):
        res = real(*a, **k)
        js.write_text("user json")
        return res

    monkeypatch.setattr("proofs_checks.cli_select._run_selected", run_and_user_writes_json)
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
