"""Hostile pass 58, tester B: reproducers, each failing on 419946f (run there as xfail, strict)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


from tests.test_hostile_round53a import _env  # the same private environment (store, home, cache under tmp_path)

LYAP = ("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--no-progress")


def _tv(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m proofs_checks ARGV`` in ``tmp_path`` with the private environment plus ``env``."""
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True,
                          env={**_env(tmp_path), **env}, cwd=str(tmp_path), timeout=280)


def test_1_a_survey_timeout_below_one_second_is_not_called_0s(tmp_path):
    r = _tv(tmp_path, "survey", "torch-mha", "--no-install", "--quick", "--out", "sv", "--timeout", "0.4",
            "--no-progress")
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if "per-entry limit" in ln]
    assert said, r.stdout[-2000:] + r.stderr[-2000:]
    assert all("limit of 0s" not in ln and "0.4" in ln for ln in said), said


def test_2_an_empty_threads_variable_is_refused_as_the_other_variables_are(tmp_path):
    r = _tv(tmp_path, *LYAP, TVERIFY_THREADS="")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2 and "TVERIFY_THREADS" in r.stderr, (r.returncode, r.stderr[-2000:])


def test_3_an_empty_json_path_is_called_an_empty_path(tmp_path):
    r = _tv(tmp_path, *LYAP, "--json", "")
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "empty path" in r.stderr and "is a folder" not in r.stderr, r.stderr[-2000:]


def test_4_another_commands_json_does_not_replace_a_sweeps_json(tmp_path):
    sweep = _tv(tmp_path, "sweep", "check", "lyapunov", "--grid", "V=x**2+y**2 f=-x,-y|", "--json", "sj.json",
                "--out", "sw", "--no-progress")
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    before = (tmp_path / "sj.json").read_text()
    assert '"kind": "sweep"' in before
    r = _tv(tmp_path, *LYAP, "--json", "sj.json")
    assert (tmp_path / "sj.json").read_text() == before, "the sweep's JSON was replaced by check lyapunov's"
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])


def test_5_json_into_the_record_of_written_outputs_is_refused(tmp_path):
    first = _tv(tmp_path, *LYAP, "--json", "a.json")  # an output of tverify's: its record folder now exists
    record = tmp_path / "cache" / "tverify" / "outputs"
    assert first.returncode == 0 and record.is_dir(), first.stderr[-2000:]
    kept = sorted(p.name for p in record.iterdir())
    r = _tv(tmp_path, *LYAP, "--json", str(record / "mine.json"))
    assert not (record / "mine.json").exists(), "the check wrote its JSON into the record of written outputs"
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    r = _tv(tmp_path, *LYAP, "--json", str(record / kept[0]), "--force")
    assert r.returncode == 2, "an entry of the record of written outputs was replaced under --force"


PLUGIN = '''
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, bind, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)


def derive():
    b = DerivationBuilder("2x")
    (x,) = b.fact("args", bind(ARGS))
    return b.done(b.step("2x", sp.expand(2 * x)))


@numeric("2x against 2x drawn")
def good(form, ctx):
    x = ctx.rng().standard_normal(50)
    return close(form(x), 2 * x, 1e-12, "float64 rounding")


register(Claim(id="zzb.good", title="twice", statement="f(x) = 2x", source="a test", kind="identity",
               form=lambda x: 2 * np.asarray(x, dtype=float), derivation=derive,
               checks=(matches_derivation(derive, ARGS), good),
               mutants=(Mutant("four", "wrong constant", "4x", lambda x: 4 * np.asarray(x, dtype=float)),)))
'''


def _plugin_site(tmp_path: Path) -> str:
    """A folder holding the installed distribution ``zzb`` (entry point ``zzb = zzb``): its path."""
    site = tmp_path / "site"
    info = site / "zzb-0.0.dist-info"
    info.mkdir(parents=True)
    (site / "zzb.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zzb\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[tverify.claims]\nzzb = zzb\n")
    return str(site)


def test_6_show_finds_a_plugin_claim_that_run_just_verified(tmp_path):
    path = f"{_plugin_site(tmp_path)}:{_env(tmp_path)['PYTHONPATH']}"
    _tv(tmp_path, "list", "zzb", PYTHONPATH=path, TVERIFY_PLUGIN_IMPORT_TIMEOUT="0.001")  # the import times out
    ran = _tv(tmp_path, "run", "zzb.good", "--quick", "--no-progress", PYTHONPATH=path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    shown = _tv(tmp_path, "show", "zzb.good", PYTHONPATH=path)
    assert "no claim matches" not in shown.stderr and shown.returncode == 0, shown.stderr[-2000:]
