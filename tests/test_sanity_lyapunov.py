"""``tverify check lyapunov``: certified (exit 0) with both Gram matrices' smallest eigenvalues and
the exact residual, refuted (exit 1) only with an exact counterexample, inconclusive (exit 3) when
the SOS search fails without one, bad input (V(0) ≠ 0 included) one line (exit 2), --json PATH|-,
--region, --report. In-process through ``proofs_checks.cli.main``."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import invoke, one_line_error

F = "-x**3 - y, x - y**3"


def run(*args: str) -> tuple[int, str, str]:
    return invoke("check", "lyapunov", *args)


def test_acceptance_certified():
    code, out, _ = run("--f", F, "--V", "x**2 + y**2")
    assert code == 0, out
    assert "verdict: ok: certified" in out
    assert "smallest Gram eigenvalues 0.999 (V − εp) and 1.33267 (−∇V·f − εq)" in out
    assert "exact re-check residuals 0 and 0" in out


def test_acceptance_refuted_with_exact_counterexample():
    code, out, _ = run("--f", F, "--V", "x**2 - y**2")
    assert code == 1, out
    assert "verdict: mismatch: refuted: V is not positive definite: V(x = 0, y = 1/100) = -1/10000 ≤ 0" in out
    assert "exact rational arithmetic" in out


def test_strogatz_quartic_decay_is_certified():
    """Issue 24: x' = −x + 4y, y' = −x − y³, V = x² + 4y² (V̇ = −2x² − 8y⁴) was 'mismatch' because the
    decay margin was fixed at x² + y²; the margin from −V̇'s Newton polytope, x² + y⁴, certifies it."""
    code, out, err = run("--f", "-x + 4*y, -x - y**3", "--V", "x**2 + 4*y**2", "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["certified"] is True and doc["counterexample"] is None, err
    assert doc["certificate"]["q"] == "x**2 + y**4" and doc["certificate"]["decay"]["exact_residual"] == "0"
    assert doc["certificate"]["decay"]["exact_psd"] is True


@pytest.mark.parametrize("V, margin", [("x**4 + y**2", "x**4 + y**2"), ("x**12 + y**2", "x**12 + y**2")])
def test_higher_even_powers_are_certified(V, margin):
    code, out, _ = run("--f", "-x, -y", "--V", V, "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["certificate"]["p"] == margin and doc["certificate"]["q"] == margin


@pytest.mark.parametrize("V, value", [("x**2 + y**2 + 0.1", "1/10"), ("x**2 + y**2 + 0**0", "1")])
def test_V_not_vanishing_at_origin_is_refused(V, value):
    code, _, err = run("--f", "-x, -y", "--V", V)
    assert f"V(0) = {value} ≠ 0" in one_line_error(code, err)


def test_failed_search_without_counterexample_is_inconclusive():
    """−V̇ = (x² + y²)/5 is positive definite, but not above ε(x² + y²) at ε = 1/2: no certificate,
    no counterexample: inconclusive (exit 3), never mismatch."""
    code, out, err = run("--f", "-x/10, -y/10", "--V", "x**2 + y**2", "--eps", "1/2", "--json", "-")
    doc = json.loads(out)
    assert code == 3 and doc["outcome"] == "inconclusive" and doc["counterexample"] is None
    assert "refutes nothing" in err and "--region" in doc["decision"]["suggestion"]


def test_region_gives_a_local_certificate_and_the_counterexample_outside():
    f = "-x + x**3, -y"
    code, out, _ = run("--f", f, "--V", "x**2 + y**2", "--json", "-")
    doc = json.loads(out)
    assert code == 1 and doc["counterexample"]["condition"] == "V̇ < 0"
    assert doc["counterexample"]["point"] == ["1", "0"] and doc["counterexample"]["value"] == "0"
    code, out, _ = run("--f", f, "--V", "x**2 + y**2", "--region", "1/2", "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["certificate"]["region"] == "1/2" and doc["certificate"]["decay"]["multiplier"]
    assert "locally asymptotically stable" in doc["verdict"]


def test_report_has_level_set_figure(tmp_path):
    code, out, _ = run("--f", F, "--V", "x**2 + y**2", "--report", str(tmp_path / "rep"))
    assert code == 0 and (tmp_path / "rep" / "figures" / "level_sets.png").is_file()


def test_level_set_figure_shows_a_counterexample_outside_the_default_window():
    """x' = −x + x³/100: ∇V·f ≥ 0 first at |x| = 10, outside the fixed ±2 window, which was all green
    for a refuted V. The window now holds the counterexample, marked."""
    import matplotlib

    matplotlib.use("Agg")
    from proofs_checks.sanity import lyapunov as sl

    res = sl.run_lyapunov("-x + x**3/100, -y", "x**2 + y**2")
    assert res.verdict.outcome == "mismatch"
    fig = res.figures["level_sets"]()
    ax = fig.axes[0]
    px = res.doc["counterexample"]["point_float"][0]
    assert abs(px) >= 2 and ax.get_xlim()[1] >= abs(px)
    assert any(line.get_label().startswith("counterexample") for line in ax.get_lines())


def test_json_stdout_and_file(tmp_path):
    code, out, err = run("--f", F, "--V", "x**2 + y**2", "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["certified"] is True and doc["outcome"] == "ok"
    assert doc["programs"]["V"]["exact_residual"] == "0" and doc["programs"]["decay"]["exact_psd"] is True
    assert doc["programs"]["decay"]["basis"] == ["x**2", "x*y", "y**2"] and "verdict: ok" in err
    p = tmp_path / "r.json"
    code, out, _ = run("--f", F, "--V", "x**2 - y**2", "--json", str(p))
    doc = json.loads(p.read_text())
    assert code == 1 and doc["certified"] is False and doc["programs"]["V"]["status"] == "infeasible"
    assert doc["decision"]["exit_code"] == 1 and doc["counterexample"]["point"] == ["0", "1/100"]


def test_three_variables_and_eps_fraction():
    code, out, _ = run("--f", "-x + y, -x - y - z, y - z", "--V", "x**2 + y**2 + z**2", "--vars", "x,y,z", "--eps", "1/100")
    assert code == 0 and "certified" in out and "ε = 1/100" in out


def test_zero_decay_is_refuted_at_a_point():
    code, out, _ = run("--f", "-y, x", "--V", "x**2 + y**2")
    assert code == 1 and "structurally infeasible" in out and "identically zero" in out
    assert "∇V·f(x = 1/100, y = 0) = 0 ≥ 0" in out


@pytest.mark.parametrize("args,fragment", [
    (("--f", "sin(x), y", "--V", "x**2"), "function calls not allowed"),
    (("--f", "-x, -y", "--V", "x**2 + z", "--vars", "x,y"), "unknown name 'z'"),
    (("--f", "-x, -y, -x", "--V", "x**2 + y**2", "--vars", "x,y"), "3 components but there are 2 variables"),
    (("--f", "-x, -y", "--V", "1/(1 + x**2)"), "not a polynomial"),
    (("--f", "-x, -y", "--V", "x**2", "--eps", "0"), "--eps must be in (0, 1)"),
    (("--f", "-x, -y", "--V", "x**2", "--eps", "nan"), "--eps: not a positive number"),
    (("--f", "-x, -y", "--V", "__import__('os')"), "not allowed"),
    (("--f", "(-x, -y", "--V", "x**2"), "cannot parse"),
    (("--f", "-x, -y", "--V", "x**2 + y**2", "--region", "0"), "--region must be in"),
    (("--f", "-x, -y", "--V", "x**2 + y**2", "--region", "abc"), "--region: not a positive number"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    code, _, err = run(*args)
    line = one_line_error(code, err)
    assert fragment in line, line


def test_help_names_the_options_and_verdicts():
    code, out, _ = run("--help")
    assert code == 0
    for word in ("--f", "--V", "--vars", "--eps", "--region", "--report", "--json", "certified", "counterexample",
                 "inconclusive", "Examples"):
        assert word in out
