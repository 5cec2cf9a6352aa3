"""``tverify check hopfield --patterns``: the modern update passes with the Theorem-5 bound
(numerics.hopfield.retrieval_bound) above the measured one-step error; a wrong update is named;
bad pattern files are one-line usage errors; --json/--report; the capacity estimate solves the
derived bound."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from proofs_checks.sanity import hopfield as sh
from tests.cli_helpers import invoke, one_line_error
from tests.tiers import moved

MOD = "tests/data/own_hopfield.py"


@pytest.fixture()
def pats(tmp_path):
    p = tmp_path / "own_patterns.npy"
    np.save(p, np.sign(np.random.default_rng(0).normal(size=(10, 16))))
    return str(p)


def run(*args: str) -> tuple[int, str, str]:
    return invoke("check", "hopfield", "--no-progress", *args)


def test_modern_update_passes_with_bound_above_error(pats):
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["ok"], doc["verdict"]
    for r in doc["per_pattern"]:
        assert r["error_from_pattern"] <= r["bound_from_pattern"] and r["error_from_noisy"] <= r["bound_from_noisy"]
        assert r["fixed_point_converged"]
    assert [p["name"] for p in doc["properties"]] == ["finite_updates", "one_step_within_theorem5_bound",
                                                      "energy_non_increasing"]
    assert doc["capacity"]["N_max"] > 10 and doc["capacity"]["beta_needed"] < 0.5


def test_users_module(pats, tmp_path):
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{MOD}:modern")
    assert code == 0 and "update_matches_modern           ok" in out and "verdict: ok" in out, out
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{MOD}:too_hot")
    assert code == 1 and "one_step_within_theorem5_bound  FAIL" in out and "update_matches_modern" in out
    code, out, _ = run("--patterns", pats, "--module", f"{MOD}:uphill")
    assert code == 1 and "energy_non_increasing           FAIL" in out


@moved("the report of a mismatching user module, drawn in the check's own process (matplotlib imported there "
       "again: ~2.5 CPU s); it adds, end to end, the figures for a module that fails",
       "tests/test_sanity_hopfield.py::test_users_module",
       "tests/test_sanity_hopfield.py::test_report_has_error_against_beta",
       "tests/test_sanity_hopfield.py::test_update_exiting_while_the_report_is_drawn_keeps_the_verdict")
def test_users_module_report_for_a_mismatch(pats, tmp_path):
    code, out, _ = run("--patterns", pats, "--module", f"{MOD}:uphill", "--report", str(tmp_path / "r"))
    assert code == 1 and "energy_non_increasing           FAIL" in out
    assert (tmp_path / "r" / "figures" / "retrieval_and_energy.png").exists()


def test_pt_file_and_unseparated_patterns(tmp_path):
    p = tmp_path / "own_p.pt"
    P = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)  # pattern 0 = pattern 2
    torch.save({"patterns": P}, p)
    code, out, _ = run("--patterns", str(p))
    # a duplicated pattern: nothing is separated, every bound vacuous: inconclusive, not ok (issue 36)
    assert code == 3 and "Δ_i ≤ 0" in out and "none (Δ_min ≤ 0" in out


@pytest.mark.parametrize("content, frag", [
    (np.zeros((0, 4)), "is empty"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "non-finite"),
    (np.ones(4), "(N, d) array"),
    (np.ones((1, 4)), "at least 2"),
    (np.array([["a", "b"], ["c", "d"]]), "not numbers"),
])
def test_bad_pattern_files_one_line(tmp_path, content, frag):
    p = tmp_path / "own_bad.npy"
    np.save(p, content)
    line = one_line_error(*run("--patterns", str(p))[::2])
    assert line.startswith("tverify: error: --patterns") and frag in line, line


def test_missing_and_odd_files(tmp_path, pats):
    assert "file not found" in one_line_error(*run("--patterns", str(tmp_path / "no.npy"))[::2])
    (tmp_path / "x.csv").write_text("1,2")
    assert ".npy or .pt" in one_line_error(*run("--patterns", str(tmp_path / "x.csv"))[::2])
    assert "--beta" in one_line_error(*run("--patterns", pats, "--beta", "0")[::2])
    assert "raised" in one_line_error(*run("--patterns", pats, "--module", "tests/data/own_attention.py:raises")[::2])


def test_capacity_estimate_solves_the_derived_bound():
    c = sh.capacity_estimate(2.0, 1.0, 5.0, 0.5, 3)
    # the bound 2(N−1)e^{−βΔ}M equals τ at N_max, and at β_needed for N = 3
    assert math.isclose(2 * (c["N_max"] - 1) * math.exp(-5.0 * 2.0) * 1.0, 0.5, rel_tol=1e-12)
    assert math.isclose(2 * 2 * math.exp(-c["beta_needed"] * 2.0) * 1.0, 0.5, rel_tol=1e-12)


# ------------------------------------------------------------------------------------------------
# issue 24: the precision rule (numerics.precision)

LOWP = '''
import torch


def paper_float32(xi, patterns, beta):
    """The paper's update X softmax(β Xᵀξ) written in float32 (returns float32)."""
    X, s = patterns.float(), xi.float()
    return torch.softmax(beta * s @ X.T, -1) @ X


def float32_cast_back(xi, patterns, beta):
    """The same, cast back to float64: float32 is found in the values (precision_as_declared)."""
    return paper_float32(xi, patterns, beta).double()


def hot_float32(xi, patterns, beta):
    """float32 and β/4: wrong beyond any rounding."""
    X, s = patterns.float(), xi.float()
    return torch.softmax(beta / 4 * s @ X.T, -1) @ X


def grows(xi):
    return torch.cat([xi, xi])


def shrinks_on_big_batches(xi, patterns, beta):
    """Right on the first (small) call, one state short on the batches that follow."""
    out = torch.softmax(beta * xi @ patterns.T, -1) @ patterns
    return out if xi.shape[0] <= 4 else out[1:]


def numpy_float32(xi, patterns, beta):
    return paper_float32(xi, patterns, beta).numpy()


def exits_at_other_beta(xi, patterns, beta):
    """Wrong (2β) at the β checked; sys.exit(0) at the other β of the report's β figure."""
    if beta != 0.5:
        raise SystemExit(0)
    return torch.softmax(2 * beta * xi @ patterns.T, -1) @ patterns


class ExitsWhenCast(torch.nn.Module):
    """torch's .double() runs the module's _apply: here it exits (was exit 0 with no verdict)."""

    def _apply(self, fn, *args, **kwargs):
        raise SystemExit(0)

    def forward(self, xi):
        return xi


def normalises_in_place(xi, patterns, beta):
    """The update on unit-norm copies of the patterns, normalised in the caller's tensor."""
    patterns.div_(patterns.norm(dim=-1, keepdim=True))
    return torch.softmax(beta * xi @ patterns.T, -1) @ patterns
'''


@pytest.fixture()
def lowp(tmp_path):
    p = tmp_path / "lowp_hopfield.py"
    p.write_text(LOWP)
    return str(p)


@pytest.fixture(scope="module")
def lowp_updates():
    """The updates of :data:`LOWP` in this process, for the tests of the precision rule that run the check through
    the API with ``isolate=False``: what they test is the judgement, not the check's own process (which costs a
    child process per run, ~0.9 CPU s); the CLI's JSON of the same rule: the tests below that call ``run``."""
    import types

    mod = types.ModuleType("tverify_tests_lowp_hopfield")
    exec(compile(LOWP, "lowp_hopfield.py", "exec"), mod.__dict__)
    return mod


def judged(pats, lowp_updates, name, **kw):
    """``check hopfield`` at β = 0.5 on the update ``name`` of :data:`LOWP`, in this process: its JSON document."""
    import proofs_checks

    return proofs_checks.check_hopfield(np.load(pats), beta=0.5, module=getattr(lowp_updates, name), isolate=False,
                                        **kw).to_json()


@pytest.mark.parametrize("name", ["paper_float32", "float32_cast_back"])
def test_float32_update_is_the_modern_update_as_declared(pats, lowp_updates, name):
    """Declared (--compute-dtype float32), a float32 update (float32 output, or float64 holding float32
    values) is the modern update at float32's rule, and precision_as_declared holds."""
    doc = judged(pats, lowp_updates, name, compute_dtype="float32")
    assert doc["ok"] and doc["outcome"] == "ok", (doc["verdict"], doc["properties"])
    assert doc["precision"]["work_dtype"] == "float32"
    row = next(p for p in doc["properties"] if p["name"] == "update_matches_modern")
    assert row["status"] == "pass" and 1e-9 < row["tolerance"] < 1e-5 and "factor 2" in row["justification"]
    prec = next(p for p in doc["properties"] if p["name"] == "precision_as_declared")
    assert prec["status"] == "pass" and "computes in float32 as declared" in prec["detail"], prec


@pytest.mark.parametrize("name", ["paper_float32", "float32_cast_back"])
def test_float32_update_undeclared_fails_precision_as_declared(pats, lowp_updates, name):
    """Issue 42: undeclared, the update is judged at the inputs' float64; one found computing in float32
    (its output dtype, or float64 values all float32-representable) fails precision_as_declared, named
    in the verdict line with the precision found; the others are judged at float32 and hold."""
    doc = judged(pats, lowp_updates, name)
    assert not doc["ok"] and doc["outcome"] == "mismatch", doc["verdict"]
    assert "violates: precision_as_declared (it computes in float32, not float64)" in doc["verdict"]
    assert "--compute-dtype float32" in doc["decision"]["suggestion"]
    by = {p["name"]: p for p in doc["properties"]}
    assert by["precision_as_declared"]["status"] == "fail" and "--compute-dtype float32" in by[
        "precision_as_declared"]["detail"]
    assert [n for n, p in by.items() if p["status"] == "fail"] == ["precision_as_declared"]
    assert "judged at float32" in by["update_matches_modern"]["justification"]
    assert doc["precision"]["work_dtype"] == "float32" and doc["precision"]["judged_dtype"] == "float64"


def test_float64_update_computing_in_float32_is_named_in_the_text(pats, lowp):
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:float32_cast_back")
    assert code == 1 and "verdict: mismatch" in out and "precision_as_declared (it computes in float32" in out, out
    # the float64 modern update's text says "verdict: ok": test_users_module (the same run)


def test_float64_update_passes_precision_as_declared(pats):
    r = sh.run_hopfield(np.load(pats), beta=0.5, module=lambda xi, X, b: torch.softmax(b * xi @ X.T, -1) @ X)
    prec = next(p for p in r.properties if p["name"] == "precision_as_declared")
    assert r.verdict.outcome == "ok" and prec["status"] == "pass" and "computes in float64" in prec["detail"], prec


def test_float32_paper_update_at_large_beta_is_held_to_its_own_rounding(tmp_path, lowp):
    """Gaussian patterns, β = 20: the paper's float32 update `beta * s @ X.T` (β applied to the states
    first) differs from float64 by 1.05e-6 (relative to M), while the float32 reference written as
    softmax(β·(ξXᵀ)) happened to round to 6e-8: tolerance 1.25e-7, a false mismatch. The reference's
    rounding is now that of every standard formulation (the largest), and β/4 still fails."""
    p = tmp_path / "gauss.npy"
    np.save(p, np.random.default_rng(2).normal(size=(10, 16)))
    code, out, _ = run("--patterns", str(p), "--beta", "20", "--module", f"{lowp}:paper_float32", "--compute-dtype",
                       "float32", "--json", "-")
    row = next(r for r in json.loads(out)["properties"] if r["name"] == "update_matches_modern")
    assert code == 0 and row["status"] == "pass", row
    assert "beta_on_states" in row["justification"] and row["tolerance"] < 1e-5
    code, out, _ = run("--patterns", str(p), "--beta", "20", "--module", f"{lowp}:hot_float32")
    assert code == 1 and "update_matches_modern" in out


def test_float32_wrong_update_still_fails_and_declared_dtype(pats, lowp):
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:hot_float32")
    assert code == 1 and "update_matches_modern" in out and "FAIL" in out
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{MOD}:modern", "--compute-dtype", "float32",
                       "--json", "-")
    assert code == 0 and json.loads(out)["precision"]["declared"] is True


def test_module_changing_pattern_count_is_one_line(pats, lowp):
    code, _, err = run("--patterns", pats, "--module", f"{lowp}:grows")
    assert "expected the same shape" in one_line_error(code, err)


def test_shape_change_after_the_first_call_is_one_line_and_numpy_is_accepted(pats, lowp):
    """The shape was checked on the first call only: a later (35, d) for (36, d) states was a traceback."""
    code, _, err = run("--patterns", pats, "--module", f"{lowp}:shrinks_on_big_batches")
    msg = one_line_error(code, err)
    assert "expected the same shape" in msg and "for states of shape (" in msg
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:numpy_float32", "--compute-dtype",
                       "float32", "--json", "-")
    assert code == 0 and json.loads(out)["precision"]["work_dtype"] == "float32"


def test_module_exiting_when_cast_to_float64_is_one_line(pats, lowp):
    code, _, err = run("--patterns", pats, "--module", f"{lowp}:ExitsWhenCast")
    assert "ExitsWhenCast.double() called sys.exit(0)" in one_line_error(code, err)


def test_update_altering_the_patterns_in_place_is_judged_on_the_given_patterns(pats, lowp):
    """The check passed its own patterns tensor: an update normalising it in place changed the
    reference too, and a different update was "ok". It now gets copies: mismatch."""
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:normalises_in_place")
    assert code == 1 and "update_matches_modern" in out and "FAIL" in out


def test_update_exiting_while_the_report_is_drawn_keeps_the_verdict(pats, lowp, tmp_path):
    """The β figure called the update outside the user-code boundary: its sys.exit(0) ended the run
    with exit 0, no verdict printed and no report, for a mismatching update."""
    code, out, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:exits_at_other_beta", "--report",
                       str(tmp_path / "rep"))
    assert code == 1 and "verdict: mismatch" in out and (tmp_path / "rep" / "report.md").is_file()
    assert "retrieval_error_vs_beta not drawn" in out and "at β = " in out


def test_report_has_error_against_beta(pats, lowp, tmp_path):
    code, _, _ = run("--patterns", pats, "--beta", "0.5", "--module", f"{lowp}:paper_float32", "--compute-dtype",
                     "float32", "--report", str(tmp_path / "rep"))
    assert code == 0 and (tmp_path / "rep" / "figures" / "retrieval_error_vs_beta.png").is_file()
    assert (tmp_path / "rep" / "figures" / "retrieval_and_energy.png").is_file()


@pytest.mark.parametrize("args, kwargs", [
    (("--beta", "0"), {"beta": 0}),
    (("--beta", "-2"), {"beta": -2.0}),
    (("--beta", "inf"), {"beta": float("inf")}),
    (("--beta", "nan"), {"beta": float("nan")}),
    (("--compute-dtype", "float8"), {"compute_dtype": "float8", "module": lambda xi: xi}),
    (("--compute-dtype", "float32"), {"compute_dtype": "float32"}),
])
def test_command_and_api_refuse_with_the_same_line(pats, args, kwargs):
    """One validation at the edge (issue 42): the flag and the API keyword go through the same function
    (sanity.hopfield.beta_value, compute_dtype_value) and say the same line, in the API's words."""
    import proofs_checks
    from proofs_checks.api_args import _keyword_words
    from theory.validation import InputError

    cli = one_line_error(*run("--patterns", pats, *args)[::2]).removeprefix("tverify: error: ")
    with pytest.raises(InputError) as exc:
        proofs_checks.check_hopfield(np.load(pats), isolate=False, **kwargs)
    assert str(exc.value) == _keyword_words(cli, proofs_checks.check_hopfield), (cli, str(exc.value))
