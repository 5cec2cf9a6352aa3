"""Hostile pass 21 and the notes of pass 20, fixed: the lead's tests (the testers' reproducers are in
test_hostile_round27a/b.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, named", [
    (["check", "attention", "--module", "m.py:A", "--scale", "1e-400"], "--scale 1e-400"),
    (["check", "hopfield", "--patterns", "P.npy", "--beta=2.5e-999"], "--beta=2.5e-999"),
])
def test_a_non_zero_number_below_float64s_range_is_named_not_read_as_zero(capsys, argv, named):
    """Pass 20 note: ``--scale 1e-400`` was refused as "got 0.0", a number the user never wrote."""
    from proofs_checks.cli import _main

    with pytest.raises(SystemExit) as e:
        _main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"tverify: error: {named}: the number is below a float64's range"), err
    assert "got 0.0" not in err


def test_a_written_zero_is_still_read_as_zero():
    from proofs_checks.cli import _underflowing_number

    assert _underflowing_number(["--scale", "0.0e-400", "--seed", "0", "--tol", "0e5"]) is None


def test_a_cached_derivations_record_sees_links_absent_files_bytecode_sources_and_enumerated_variables(tmp_path):
    """21a F1-F3, F5: a plugin's derivation cache answered after (1) a link it read through (an absolute name) was
    pointed elsewhere, (2) a file it had looked for and not found was created, (3) a helper module it imported from
    its bytecode was edited, (4) a variable of a prefix it enumerated was set. The record now holds each name's
    file (or its absence), the sources of the modules imported, and the whole environment where it was enumerated."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "two.txt").write_text("2")
    (tmp_path / "data" / "three.txt").write_text("3")
    os.symlink("two.txt", tmp_path / "data" / "current.txt")
    (tmp_path / "pp").mkdir()
    (tmp_path / "pp" / "hzhelper.py").write_text("C = 2\n")
    import sqlite3

    con = sqlite3.connect(tmp_path / "k.sqlite")
    con.execute("create table k(c)")
    con.commit()
    con.close()
    code = ("import json, os, sys, py_compile\npy_compile.compile('pp/hzhelper.py')\nsys.path.insert(0, 'pp')\n"
            "from proofs_checks.claims._plugins import _record_reads\nreads = _record_reads()\n"
            f"open({str(tmp_path / 'data' / 'current.txt')!r}).read()\n"
            "os.path.exists('override.txt')\nimport hzhelper\n[k for k in os.environ if k.startswith('HZX_')]\n"
            "import glob, sqlite3\nglob.glob('data/*.extra')\n"
            f"sqlite3.connect('file:' + {str(tmp_path / 'k.sqlite')!r} + '?mode=ro', uri=True).close()\n"
            "print(json.dumps(reads()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HZX_")}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    rec = json.loads(p.stdout)
    assert os.stat is os.stat  # (the watched functions are put back)
    check = ("import json, os, sys\nfrom proofs_checks.claims._plugins import _inputs_unchanged\n"
             "print(_inputs_unchanged(json.loads(sys.stdin.read())))")

    def unchanged(extra_env=None) -> bool:
        q = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, input=json.dumps(rec), capture_output=True,
                           text=True, timeout=120, env={**env, **(extra_env or {})})
        return q.stdout.strip() == "True"

    assert rec["env_all"] and not rec["uncacheable"], p.stderr
    assert unchanged()
    assert not unchanged({"HZX_EXTRA": "1"})
    (tmp_path / "override.txt").write_text("3")
    assert not unchanged()
    (tmp_path / "override.txt").unlink()
    os.replace(tmp_path / "data" / "current.txt", tmp_path / "old")
    os.symlink("three.txt", tmp_path / "data" / "current.txt")
    assert not unchanged()
    (tmp_path / "data" / "current.txt").unlink()
    os.replace(tmp_path / "old", tmp_path / "data" / "current.txt")
    assert unchanged()
    (tmp_path / "data" / "new.extra").write_text("3")  # a file the glob would find now (21a F2 glob)
    assert not unchanged()
    (tmp_path / "data" / "new.extra").unlink()
    assert unchanged()
    con = sqlite3.connect(tmp_path / "k.sqlite")  # the database opened by URI (21a F14)
    con.execute("insert into k values (3)")
    con.commit()
    con.close()
    assert not unchanged()
    (tmp_path / "pp" / "hzhelper.py").write_text("C = 3\n")
    assert not unchanged()


def test_a_derivation_that_starts_a_process_is_never_answered_from_the_cache(tmp_path):
    import json
    import subprocess
    import sys

    code = ("import json, subprocess, sys\nfrom proofs_checks.claims._plugins import _record_reads, _inputs_unchanged\n"
            "reads = _record_reads()\nsubprocess.run(['true'])\nr = reads()\nprint(json.dumps([r['uncacheable'], "
            "_inputs_unchanged(r)]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    why, hit = json.loads(p.stdout)
    assert why and "started a process" in why and hit is False, p.stderr


def test_pythonpath_modules_named_like_standard_or_tverify_ones_never_run_in_the_command(tmp_path):
    """21a F4: ``$PYTHONPATH``'s folders come before the standard library's: a ``json.py`` there ran inside tverify's
    own process (then a traceback), and a project's ``theory/`` package there was imported in place of tverify's."""
    import os
    import subprocess
    import sys

    pp = tmp_path / "pp"
    (pp / "theory").mkdir(parents=True)
    for f in (pp / "json.py", pp / "typing.py", pp / "theory" / "__init__.py"):
        f.write_text("import sys\nsys.stderr.write('PWNED\\n')\n")
    env = {**os.environ, "PYTHONPATH": str(pp)}
    for argv in (["list", "attn.complexity"], ["check", "lyapunov", "--f", "-x", "--V", "x**2"]):
        p = subprocess.run([sys.executable, "-P", "-m", "proofs_checks", *argv], capture_output=True, text=True,
                           timeout=300, env=env, cwd=tmp_path)
        assert p.returncode == 0 and "PWNED" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_show_says_a_last_result_predates_a_change_of_its_sources(tmp_path, monkeypatch):
    """21b F8: ``show`` presented a claim's last result as current after its source changed. Each result kept now holds
    the sources' fingerprint, and ``show`` says when it differs from the current one (and says nothing when equal)."""
    import json

    from proofs_checks.cli import _with_sources
    from proofs_checks.store import Store, save_last
    from tests.cli_helpers import invoke

    store = Store(tmp_path / "store", "--store")
    doc = {"id": "attn.complexity", "status": "verified", "mode": "quick", "seed": 0, "device": "cpu", "checks": []}
    assert save_last(_with_sources(doc), store) is None
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity")
    assert code == 0 and "last result: verified" in out and "from before a source changed" not in out, out
    stale = {**json.loads(store.last_path("attn.complexity").read_text()), "sources": "0" * 64}
    store.last_path("attn.complexity").write_text(json.dumps(stale))
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity")
    assert code == 0 and "from before a source changed" in " ".join(out.split()), out
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity", "--json", "-")
    assert json.loads(out)["last_result"]["sources_changed_since"] is True
