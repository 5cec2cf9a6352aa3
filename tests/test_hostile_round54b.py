"""Hostile pass 54, tester B: reproducers, each failing on 39e4a70 (run there as xfail, strict)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

ROOT = Path(__file__).resolve().parents[1]

LYAP = ("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2")


def _env(tmp_path: Path, site: Path | None = None) -> dict:
    e = dict(os.environ, TVERIFY_STORE=str(tmp_path / "store"), HOME=str(tmp_path / "home"),
             XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([str(site)] if site else []))
    return e


def _tv(tmp_path: Path, *argv: str, site: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True,
                          env=_env(tmp_path, site), cwd=str(tmp_path), timeout=280)


def _plugin(tmp_path: Path, name: str, source: str, module: str | None = None) -> Path:
    """A claims plugin installed the way the tests install one: a module (``module``, default ``name``) and its
    .dist-info on PYTHONPATH."""
    site, module = tmp_path / "site", module or name
    info = site / f"{name}-0.0.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[tverify.claims]\n{name} = {module}\n")
    return site


def _obligation(expr, kind: str = "zero"):
    """The result of one obligation of a plugin's derivation (docs/extending.md, DerivationBuilder), or None when the
    builder refuses it."""
    from proofs_checks.plugin import DerivationBuilder

    b = DerivationBuilder("one obligation")
    x = sp.Symbol("x", real=True)
    try:
        b.obligation("the obligation", expr, kind)
    except ValueError:
        return None
    return b.done(b.step("x", x)).check_obligations()[0]


# 54b-1: with --region below 1/1000 the counterexample search tries no point at all (its radii start at 1e-3), so an
# unstable system (every x != 0 has ∇V·f > 0) is "inconclusive ... no point ... was found", advising "a smaller
# --region"; at --region 1/1000 the same system is refuted with an exact counterexample.
def test_f1_an_unstable_system_is_refuted_on_a_small_ball(tmp_path):
    r = _tv(tmp_path, "check", "lyapunov", "--f", "x, y", "--V", "x**2 + y**2", "--region", "1e-6")
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])
    assert "a smaller --region" not in r.stdout, r.stdout[-1500:]


# 54b-2: an obligation over a zero-size matrix expression holds, while the same empty obligation written as an explicit
# matrix (sp.zeros(0, 0)) is refused: "it has no entry ... it states nothing a derivation could establish".
@pytest.mark.parametrize("shape", [(0, 0), (3, 0)])
def test_f2_an_obligation_over_a_zero_size_matrix_does_not_hold(shape):
    assert _obligation(sp.zeros(*shape)) is None  # the explicit empty matrix: refused
    r = _obligation(sp.ZeroMatrix(*shape))
    assert r is None or r.status != "holds", (r.status, r.method)


# 54b-3: a folder the user made inside a previous report is deleted when the report is replaced (no --force, no word);
# a file or a link put there instead is refused ("a folder with files that are not a tverify report").
def test_f3_a_users_folder_inside_a_previous_report_is_not_deleted(tmp_path):
    r = _tv(tmp_path, *LYAP, "--report", "LR")
    assert r.returncode == 0, r.stderr[-800:]
    (tmp_path / "LR" / "mine" / "deeper").mkdir(parents=True)
    r = _tv(tmp_path, *LYAP, "--report", "LR")
    assert (tmp_path / "LR" / "mine").is_dir(), "the user's folder inside the report was removed"
    assert r.returncode == 2, r.stderr[-800:]


# 54b-4: LSA weights whose products leave float64's range: NumPy's RuntimeWarnings (library file paths and source
# lines) reach the user's stderr, and the numbers are reported as inf.
def test_f4_huge_lsa_weights_leak_no_runtime_warning(tmp_path):
    np.savez(tmp_path / "w.npz", W_PV=np.eye(3) * 1e300, W_KQ=np.eye(3))
    r = _tv(tmp_path, "check", "icl", "--lambda", "1,2", "--N", "3", "--weights", "w.npz", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "RuntimeWarning" not in r.stderr, r.stderr[-2000:]


# 54b-5: `--json LINK/out.json` where LINK points at the --report folder is not refused by the check commands (the
# plain path is, and `tverify report --out` resolves the link): the JSON lands inside the report, and the same
# command then refuses to run again ("a folder with files that are not a tverify report (out.json)").
def test_f5_json_through_a_link_into_the_report_folder_is_refused(tmp_path):
    (tmp_path / "RR").mkdir()
    (tmp_path / "lnk").symlink_to("RR")
    r = _tv(tmp_path, *LYAP, "--report", "RR", "--json", "lnk/out.json")
    assert not (tmp_path / "RR" / "out.json").exists(), "the JSON was written inside the report folder"
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])


# 54b-6: an obligation "positive" whose value is +oo fails "as computed (SymPy's assumptions)" with no counterexample
# (SymPy evaluates oo > 0 to True; kind "true" of the same relation holds): a refutation without evidence.
@pytest.mark.parametrize("kind", ["positive", "nonnegative"])
def test_f6_an_infinite_positive_value_is_not_refuted_without_evidence(kind):
    y = sp.Symbol("y", real=True)
    value = sp.limit(1 / y**2, y, 0)
    assert value == sp.oo and (value > 0) == sp.true
    assert _obligation(value > 0, "true").status == "holds"
    r = _obligation(value, kind)
    assert not (r.status == "fails" and r.counterexample is None), (r.status, r.method, r.residual)


# 54b-7: `show ID --latex` prints brace-stripped "LaTeX" (W^PV(0), w_22W_11, \Gamma_N^(−1)) that LaTeX reads as W^{P}V,
# w_{2}2W_{1}1, ...; the same output's hypothesis lines and docs/catalogue.json hold W^{PV}(0), w_{22}W_{11}.
def test_f7_show_latex_keeps_the_grouping(tmp_path):
    r = _tv(tmp_path, "show", "icl.gamma_n_global_min", "--latex", "--full")
    assert r.returncode == 0, r.stderr[-800:]
    assert "W^{PV}(0)" in r.stdout, r.stdout[:1500]
    # the LaTeX the claim states (the statement, whole and in the summary); the prose of a clause's evidence or a
    # citation stays Unicode text (docs/cli.md: --latex prints statements and steps as LaTeX)
    latex = r.stdout.split("hypotheses:")[0]
    for wrong in ("W^PV(0)", "w_22W_11", r"\Gamma_N^(−1)"):
        assert wrong not in latex, wrong


# 54b-8: a plugin's claim in a built-in group: `run` skips the plugin with one warning ("RegistryError: claim
# 'attn.evil': 'attn' is a built-in group ..."), but on a fresh store `list` shows the claim, counted among attn's
# (12 claims), and `show attn.evil` shows it (exit 0, "run `tverify run attn.evil`"), with no warning.
EVIL = """
import numpy as np
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, bind, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)


def form(x):
    return 2 * np.asarray(x, dtype=float)


def derive():
    b = DerivationBuilder("2x")
    return b.done(b.step("2x", 2 * b.fact("args", bind(ARGS))[0]))


@numeric("2x against x + x")
def against_ref(form, ctx):
    x = ctx.rng().standard_normal(50)
    return close(form(x), x + x, 4e-16 * np.abs(2 * x) + 1e-300, "float64 rounding")


CLAIM = register(Claim(id=CID, title="2x", statement="2x", source="t", kind="identity", form=form,
                       derivation=derive, checks=(matches_derivation(derive, ARGS), against_ref), no_hypotheses="a test",
                       mutants=(Mutant("four", "wrong constant", "4x", lambda x: 4 * np.asarray(x, dtype=float)),)))
"""


def test_f8_list_does_not_show_a_refused_plugin_claim_in_a_builtin_group(tmp_path):
    site = _plugin(tmp_path, "zzevil", 'CID = "attn.evil"\n' + EVIL)
    r = _tv(tmp_path, "list", "attn", "--json", "-", site=site)  # a fresh store: list answers first
    assert "attn.evil" not in r.stdout, "list shows the claim the registry refuses"
    assert "built-in group" in r.stderr, r.stderr[-800:]


def test_f8c_list_warns_of_a_plugin_that_registers_a_builtin_id(tmp_path):
    site = _plugin(tmp_path, "zzshadow", 'CID = "attn.softmax_simplex"\n' + EVIL)
    r = _tv(tmp_path, "list", "attn.softmax_simplex", site=site)  # `run` warns: "... registered twice"
    assert r.returncode == 0, r.stderr[-800:]
    assert "zzshadow" in r.stderr and "skipped" in r.stderr, r.stderr[-800:]


def test_f8b_a_notebook_claim_in_a_builtin_group_is_refused(tmp_path):
    site = _plugin(tmp_path, "zzevil", 'CID = "attn.evil"\n' + EVIL)
    script = "from proofs_checks.plugin import RegistryError\ntry:\n    import zzevil\nexcept RegistryError as e:\n" \
             "    print('REFUSED', e)\nelse:\n    print('REGISTERED')\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path, site),
                       cwd=str(tmp_path), timeout=280)
    assert "REFUSED" in r.stdout, (r.stdout[-800:], r.stderr[-800:])


# 54b-9: an inequality obligation on a matrix expression (what a derivation over MatrixSymbols at symbolic size gives)
# fails "as computed (SymPy's assumptions)" with no counterexample, though true entry by entry: the same obligation on
# the explicit matrix (sp.Matrix(...)) holds. A MatrixExpr's is_nonnegative is False because it is not a scalar.
@pytest.mark.parametrize("expr, kind", [(sp.ZeroMatrix(2, 2), "nonnegative"), (sp.Identity(2), "nonnegative"),
                                        (sp.OneMatrix(2, 2), "positive")], ids=["zero", "identity", "ones"])
def test_f9_a_true_inequality_on_a_matrix_expression_is_not_refuted(expr, kind):
    assert _obligation(sp.Matrix(expr), kind).status == "holds"  # the explicit matrix: holds, entry by entry
    r = _obligation(expr, kind)
    assert r.status != "fails", (r.status, r.method, r.counterexample)


# 54b-10: a `check` whose standard output fails (a full disk here; a pipe closed by `| head -1` alike) never writes the
# --json FILE it was asked for, while its --report folder is written and `run --json FILE` writes its file.
def test_f10_a_failed_stdout_does_not_lose_the_json_file(tmp_path):
    def to_full(*argv: str) -> subprocess.CompletedProcess:
        with open("/dev/full", "w") as full:  # Linux: every write fails with ENOSPC
            return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], stdout=full, stderr=subprocess.PIPE,
                                  text=True, env=_env(tmp_path), cwd=str(tmp_path), timeout=280)

    r = to_full("run", "attn.softmax_simplex", "--quick", "--no-progress", "--json", "run.json")
    assert r.returncode == 2 and (tmp_path / "run.json").is_file(), r.stderr[-800:]  # run keeps its JSON
    r = to_full(*LYAP, "--report", "LR", "--json", "check.json")
    assert r.returncode == 2, r.stderr[-800:]
    assert (tmp_path / "LR").is_dir(), r.stderr[-800:]
    assert (tmp_path / "check.json").is_file(), "the check's --json file was not written"
