"""Hostile pass 48, tester B: reproducers; each asserts the correct behaviour, failed on 2b4060f (run there as xfail, strict) and passes since its fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_hostile_round52b import _env, _plugin  # the same private environment and installed plugin

ROOT = Path(__file__).resolve().parents[1]


def _tv(tmp_path: Path, *args: str, site: Path | None = None, timeout: int = 280, **extra: str):
    """The command: a fresh interpreter where a plugin's distribution is on PYTHONPATH or the environment is the subject;
    otherwise in this process, the command's verdict or message being the subject (issue 46: ≈ 2.5 CPU s a test)."""
    if site is None and not extra:
        from tests.cli_helpers import tv_here

        return tv_here(tmp_path, *args)
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=tmp_path,
                          env=_env(tmp_path, site, **extra), capture_output=True, text=True, timeout=timeout)


def _usage_error(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr, r.stderr[-800:]
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]


# F1: --cluster with a port of Unicode digits that str.isdigit() accepts but int() refuses ('²'): a ValueError
# traceback from cluster._check_port instead of the one-line usage error for a bad port.
def test_f1_cluster_superscript_port(tmp_path):
    r = _tv(tmp_path, "run", "attn.softmax_simplex", "--quick", "--no-progress", "--cluster", "tcp://127.0.0.1:²")
    _usage_error(r)


# F2: COLUMNS holding a superscript digit: console.py / wraptext.py test cols.isdigit() then int(cols): traceback.
def test_f2_columns_superscript(tmp_path):
    r = _tv(tmp_path, "list", "attn", COLUMNS="²²")
    assert "Traceback" not in r.stderr, r.stderr[-800:]
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    r = _tv(tmp_path, "check", "lyapunov", "--f", "-x", "--V", "x**2", "--no-progress", COLUMNS="²²")
    assert "Traceback" not in r.stderr, r.stderr[-800:]
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])


# F3: OMP_NUM_THREADS holding a superscript digit: threads.resolve tests omp.isdigit() then int(omp): traceback
# (TVERIFY_THREADS=² is one line, exit 2).
def test_f3_omp_superscript(tmp_path):
    r = _tv(tmp_path, "check", "lyapunov", "--f", "-x", "--V", "x**2", "--no-progress", OMP_NUM_THREADS="²")
    assert "Traceback" not in r.stderr, r.stderr[-800:]
    assert r.returncode in (0, 2), (r.returncode, r.stderr[-800:])
    if r.returncode == 2:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]


# F4: check lyapunov refuses '_' in numbers ("write numbers without '_' (Python would read 1_0 as 10)"), but its
# pattern misses an underscore after an exponent or a base prefix: '-x*1e0_1' is read as -10*x, '-x*0x1_0' as -16*x.
def test_f4_lyapunov_underscore_in_exponent(tmp_path):
    for f in ("-x*1e0_1", "-x*0x1_0"):
        r = _tv(tmp_path, "check", "lyapunov", "--f", f, "--V", "x**2", "--no-progress")
        _usage_error(r)


# F5: `show` prints a plugin's LaTeX statement "in Unicode", but the converter drops or changes the meaning of
# common constructs: \overline{z}\,z -> "z z", \sqrt[3]{8} -> "√(8)", \underset{\theta}{\arg\min} -> "θ min",
# (also a \over b -> "a b", \binom nk -> "nk", \widehat{\theta} -> "θ"): the statement shown is a different, false one.
F5_PLUGIN = r'''
import dataclasses
from proofs_checks.plugin import example_claim, register

CLAIM = register(dataclasses.replace(example_claim(), id="ovl.modulus", title="modulus; cube root; argmin",
    statement=r"\overline{z}\,z = |z|^2,\quad \sqrt[3]{8} = 2,\quad \hat\theta = \underset{\theta}{\arg\min}\, L(\theta)"))
'''


def test_f5_show_statement_meaning_lost(tmp_path):
    r = _tv(tmp_path, "show", "ovl.modulus", site=_plugin(tmp_path, "ovl", F5_PLUGIN))
    assert r.returncode == 0, r.stderr[-800:]
    statement = r.stdout.split("statement:", 1)[1].split("\n")[1]
    assert "√(8)" not in statement, statement        # a cube root shown as a square root: "√(8) = 2" is false
    assert "z z =" not in statement, statement       # the conjugate dropped: "z z = |z|^2" is false for complex z
    assert "θ min" not in statement, statement       # argmin shown as a min (a value, not a minimiser)


# F6: a built-in claim's statement shown wrong by `show`: gnn.attention_is_gnn's hypothesis A_{ij}=1\iff j\in N(i)
# is printed "A_ij = 1j ∈ N(i)" (\iff dropped) and its clause's e^{q_i\cdot k_j/\sqrt{d_k}} is printed
# "e^q_i·k_j/√(d_k)" (the exponent's grouping lost: it reads as e^{q_i}·k_j/√d_k).
def test_f6_builtin_statement_iff_and_exponent_grouping(tmp_path):
    r = _tv(tmp_path, "show", "gnn.attention_is_gnn")
    assert r.returncode == 0, r.stderr[-800:]
    assert "= 1j ∈ N(i)" not in r.stdout, r.stdout[:1500]
    assert "e^q_i·k_j/√(d_k)" not in r.stdout, r.stdout[:1500]
    r = _tv(tmp_path, "show", "approx.contextual_mapping")  # x=\rho^{a_k/a_{\min}} shown "x = ρ^a_k/a_min"
    assert r.returncode == 0, r.stderr[-800:]
    assert "ρ^a_k/a_min" not in r.stdout, r.stdout[:1500]


# F7: `reproduce --out <the results store> --force` replaces the store with the reproduction pages (every kept result
# and cache gone); `report --out` refuses a store inside DIR or DIR itself before the run (47b F4), and reproduce's
# --out help says "(as `tverify report --out`)". (The sweep variant is a known item; this is reproduce.)
def test_f7_reproduce_out_store_force(tmp_path):
    r = _tv(tmp_path, "run", "attn.softmax_simplex", "--quick", "--no-progress")
    assert r.returncode == 0, r.stderr[-800:]
    entry = tmp_path / "store" / "last" / "attn.softmax_simplex.json"
    assert entry.is_file()
    r = _tv(tmp_path, "reproduce", "ramsauer-2021", "--quick", "--no-progress", "--out", str(tmp_path / "store"),
            "--force")
    assert entry.is_file(), "the results store was replaced by the reproduction pages"
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])


# F8: `run --json STORE/last/ID.json` (a new file where tverify's own store entry for the claim goes): the run's store
# write takes the path, and the --json output is put beside it under a timestamped name with a warning blaming a file
# "not written by tverify, or changed since (it changed during the run)" — both files were written by this run; the
# store's last/ folder is left with extra JSON files. Correct: refused before the run (as report --out in the store),
# or the --json file holds the run's JSON.
def test_f8_json_path_is_the_store_entry(tmp_path):
    target = tmp_path / "store" / "last" / "attn.softmax_simplex.json"
    r = _tv(tmp_path, "run", "attn.softmax_simplex", "--quick", "--no-progress", "--json", str(target))
    if r.returncode == 2:
        return
    import json
    doc = json.loads(target.read_text())
    assert "results" in doc, (sorted(doc)[:8], r.stderr[-600:])
