"""Hostile pass 45, tester B: reproducers; each failed on 2d3b35e and passes since its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tiers import moved

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _plugin(tmp_path: Path, name: str, source: str, **helpers: str) -> Path:
    """A folder on PYTHONPATH holding module ``name`` installed as a ``tverify.claims`` plugin (and helper modules)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / f"{name}.py").write_text(textwrap.dedent(source))
    for h, src in helpers.items():
        (site / f"{h}.py").write_text(textwrap.dedent(src))
    info = site / f"{name}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[tverify.claims]\n{name} = {name}\n")
    return site


def _tv(tmp_path: Path, site: Path | None, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """The command: a fresh interpreter where a plugin's distribution is on PYTHONPATH or the environment is the subject;
    otherwise in this process, the command's verdict or message being the subject (issue 46: ≈ 2.5 CPU s a test)."""
    if site is None and not env:
        from tests.cli_helpers import tv_here

        return tv_here(tmp_path, *argv)
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1", **env)
    e["PYTHONPATH"] = os.pathsep.join(([str(site)] if site else []) + [str(ROOT)])
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True, env=e,
                          cwd=str(tmp_path), timeout=240)


ENTROPY_WITH = """
import sys
sys.path.insert(0, {data!r})
import entropy_plugin as E
from proofs_checks.plugin import Claim, Mutant, matches_derivation, register
derive = E._derive(False)
CLAIM = register(Claim(id={cid!r}, title="t", statement="s", source="x", kind="identity", form=E.claimed,
    derivation=derive, checks=(matches_derivation(derive, E._sample), E.finite_difference),
    mutants=(Mutant("plus", "sign flip", "+", lambda b, *l: -E.claimed(b, *l)), {extra})))
"""


@moved("a plugin claim's mutants in a fresh process, each check in a child (≈ 11 CPU s); the margin rule is "
       "pinned in-process", "tests/test_pins_hostile.py::test_a_nan_error_is_no_measured_margin")
def test_f1_nan_mutant_is_no_margin_inf(tmp_path):
    site = _plugin(tmp_path, "zzf1", ENTROPY_WITH.format(
        data=str(DATA), cid="zzf1.nan", extra='Mutant("nanm", "wrong formula", "nan", lambda b, *l: float("nan"))'))
    out = tmp_path / "m.json"
    r = _tv(tmp_path, site, "mutants", "zzf1.nan", "--quick", "--no-progress", "--json", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    d = json.loads(out.read_text())
    (nanm,) = [m for m in d["mutants"] if "nanm" in json.dumps(m)[:200]]
    margins = [c.get("margin") for c in nanm["checks"]]
    # a NaN error is no measured mismatch: neither an infinite margin nor evidence of power (docs/verdicts.md)
    assert "inf" not in margins and float("inf") not in margins, margins
    assert d["summary"]["overall"]["non_symbolic_margin_ge_3"] == 1, d["summary"]["overall"]


OBLIGATION_PLUGIN = """
import sys
sys.path.insert(0, {data!r})
import sympy as S
import entropy_plugin as E
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, matches_derivation, register

def derive():
    {pre}
    b = DerivationBuilder("dH")
    beta = S.Symbol("beta", positive=True)
    l = S.symbols("l1:4", real=True)
    b.fact("args", (beta, *l))
    Z = sum(S.exp(beta * li) for li in l)
    p = [S.exp(beta * li) / Z for li in l]
    dH = b.step("d", S.diff(-sum(pi * S.log(pi) for pi in p), beta))
    mean = sum(pi * li for pi, li in zip(p, l))
    var = sum(pi * (li - mean) ** 2 for pi, li in zip(p, l))
    b.obligation("dH is -beta Var", dH + beta * var)
    {extra}
    return b.done(dH, display=-beta * var)

CLAIM = register(Claim(id={cid!r}, title="t", statement="s", source="x", kind="identity", form=E.claimed,
    derivation=derive, checks=(matches_derivation(derive, E._sample), E.finite_difference),
    mutants=(Mutant("plus", "sign flip", "+", lambda b, *l: -E.claimed(b, *l)),)))
"""


@moved("a plugin claim run in a fresh process with its derivation and checks in children (≈ 7 CPU s); the "
       "obligation's verdict is pinned in-process",
       "tests/test_pins_hostile.py::test_an_obligation_of_complex_infinity_is_false")
def test_f2_complex_infinity_is_not_zero(tmp_path):
    site = _plugin(tmp_path, "zzf2", OBLIGATION_PLUGIN.format(
        data=str(DATA), cid="zzf2.zoo", pre="pass",
        extra='b.obligation("the normaliser ratio is 0", S.Integer(1) / (beta - beta))'))
    out = tmp_path / "r.json"
    r = _tv(tmp_path, site, "run", "zzf2.zoo", "--quick", "--no-progress", "--json", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    (res,) = json.loads(out.read_text())["results"]
    # 1/0 is complex infinity: the obligation is not shown, never "undecided" (exit 3); and not a number, it refutes
    # nothing either (hostile pass 60b F1): an error in the claim, exit 1
    assert res["status"] == "error" and r.returncode == 1, (r.returncode, res["status"], res["message"])
    assert "obligation undefined" in res["message"], res["message"]


def test_f3_budget_names_where_it_stopped(tmp_path):
    site = _plugin(tmp_path, "zzf3", OBLIGATION_PLUGIN.format(
        data=str(DATA), cid="zzf3.slow", extra="pass",
        pre="import time\n    t = time.monotonic()\n    while time.monotonic() - t < 3: pass"))
    out = tmp_path / "r.json"
    r = _tv(tmp_path, site, "run", "zzf3.slow", "--quick", "--no-progress", "--json", str(out),
            TVERIFY_DERIVATION_BUDGET="1")
    assert "Traceback" not in r.stderr, r.stderr
    (res,) = json.loads(out.read_text())["results"]
    assert res["status"] == "undecided", (res["status"], res["message"])
    # no obligation had been stated yet: the derivation was stopped in its own code before its first step
    assert "stopped in the obligations" not in res["message"], res["message"]


def test_f4_reproduce_z_is_what_it_says(tmp_path):
    out = tmp_path / "rr.json"
    r = _tv(tmp_path, None, "reproduce", "ramsauer-2021", "--quick", "--no-progress", "--json", str(out),
            "--out", str(tmp_path / "RP"))
    assert "Traceback" not in r.stderr, r.stderr
    rows = json.loads(out.read_text())["rows"]
    bad = []
    for row in rows:
        diff, z = row["ours"] - row["reference"], row["z"]
        if abs(diff) > 1e-12 and z == 0:  # ours is not the reference, yet z reads "exactly on it"
            bad.append((row["quantity"][:40], row["ours"], row["reference"], z))
        elif row["ours_se"] and z * diff < 0:  # z points the other way from ours − reference
            bad.append((row["quantity"][:40], row["ours"], row["reference"], z))
    assert not bad, bad


def test_f5_sweep_rows_do_not_replace_each_others_report(tmp_path):
    r = _tv(tmp_path, None, "sweep", "check", "lyapunov", "--grid", "f=-x**3-y,x-y**3|-x,-y V=x**2+y**2 report=LR",
            "--quick", "--no-progress", "--json", str(tmp_path / "sw.json"))
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 2:  # refusing a grid whose rows would share one report folder is a fix too
        return
    kept = {json.loads(p.read_text())["inputs"]["f"] for p in tmp_path.rglob("report.json")}
    assert kept == {"-x**3-y,x-y**3", "-x,-y"}, (r.returncode, kept)


def test_f6_sweep_flag_parameters_take_a_value(tmp_path):
    r = _tv(tmp_path, None, "sweep", "check", "attention", "--grid", "zz=1", "--quick")
    assert "causal" in r.stderr.split("accepted:")[1], r.stderr  # listed as a parameter of the grid
    r = _tv(tmp_path, None, "sweep", "check", "attention", "--grid",
            f"module={ROOT / 'examples' / 'my_attn.py'}:MyAttention causal=1", "--quick", "--no-progress",
            "--json", str(tmp_path / "sw.json"))
    assert "Traceback" not in r.stderr, r.stderr
    # either the flag is set (the row runs with --causal) or the message says how a flag is given / that it cannot be
    assert "unexpected extra argument" not in r.stderr, r.stderr


def test_f7_sweep_out_does_not_swallow_a_rows_report(tmp_path):
    r = _tv(tmp_path, None, "sweep", "check", "lyapunov", "--grid", "f=-x V=x**2 report=SW", "--quick",
            "--no-progress", "--out", "SW")
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 2:  # refused before running, as `report --json` inside `--out` is: a fix
        return
    reports = list(tmp_path.rglob("report.json"))
    assert reports, (r.returncode, r.stderr[-500:], sorted(p.name for p in (tmp_path / "SW").iterdir()))


EXITING_CHECK = """
import os, sys
sys.path.insert(0, {data!r})
import entropy_plugin as E
from proofs_checks.plugin import Claim, Mutant, matches_derivation, numeric, register
derive = E._derive(False)

@numeric("ends its own process")
def exits(form, ctx):
    os._exit(0)

CLAIM = register(Claim(id="zzf8.exit", title="t", statement="s", source="x", kind="identity", form=E.claimed,
    derivation=derive, checks=(matches_derivation(derive, E._sample), E.finite_difference, exits),
    mutants=(Mutant("plus", "sign flip", "+", lambda b, *l: -E.claimed(b, *l)),)))
"""


@pytest.mark.integration(reason="a Dask cluster of one worker")
def test_f8_cluster_blames_the_check_that_exited(tmp_path):
    site = _plugin(tmp_path, "zzf8", EXITING_CHECK.format(data=str(DATA)))
    out = tmp_path / "r.json"
    r = _tv(tmp_path, site, "run", "zzf8.exit", "--quick", "--no-progress", "--cluster", "local:1", "--json", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    (res,) = json.loads(out.read_text())["results"]
    assert res["status"] == "error" and r.returncode == 1, (r.returncode, res["status"])
    by_name = {c["name"]: c for c in res["checks"]}
    # as without --cluster: the plugin's check runs in a process of its own, and only `exits` is the error
    assert by_name["matches_derivation"]["status"] == "passed", (by_name["matches_derivation"]["status"], res["message"])
    assert "matches_derivation" not in res["message"], res["message"]


def test_f8_an_entry_point_of_the_importlib_metadata_backport_is_probed():
    """The cause of F8, in-process: Dask imports ``importlib_metadata``, whose finder then answers
    ``importlib.metadata.entry_points`` with its own ``EntryPoint`` class; such a plugin was neither probed nor
    isolated in a worker."""
    importlib_metadata = pytest.importorskip("importlib_metadata")
    from proofs_checks.claims import _plugins

    ep = importlib_metadata.EntryPoint("zzf8", "zzf8", "tverify.claims")
    assert _plugins.probed(ep)
    assert not _plugins.probed(type("EntryPoint", (), {})())  # a stand-in only this process knows: never probed
