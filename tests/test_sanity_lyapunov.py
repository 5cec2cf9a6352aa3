"""``tverify check lyapunov``: certified (exit 0) with both Gram matrices' smallest eigenvalues and
the exact residual, not certified (exit 1) naming the infeasible condition, bad input one line
(exit 2), --json PATH|-. In-process through ``proofs_checks.cli.main``."""

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


def test_acceptance_not_certified_names_the_condition():
    code, out, _ = run("--f", F, "--V", "x**2 - y**2")
    assert code == 1, out
    assert "verdict: mismatch: not certified: V − εp infeasible" in out
    assert "solver status infeasible" in out and "negative at (0, 0.01)" in out


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
    assert doc["decision"]["exit_code"] == 1


def test_three_variables_and_eps_fraction():
    code, out, _ = run("--f", "-x + y, -x - y - z, y - z", "--V", "x**2 + y**2 + z**2", "--vars", "x,y,z", "--eps", "1/100")
    assert code == 0 and "certified" in out and "ε = 1/100" in out


def test_zero_decay_is_not_certified():
    code, out, _ = run("--f", "-y, x", "--V", "x**2 + y**2")
    assert code == 1 and "structurally infeasible" in out and "identically zero" in out


@pytest.mark.parametrize("args,fragment", [
    (("--f", "sin(x), y", "--V", "x**2"), "function calls not allowed"),
    (("--f", "-x, -y", "--V", "x**2 + z", "--vars", "x,y"), "unknown name 'z'"),
    (("--f", "-x, -y, -x", "--V", "x**2 + y**2", "--vars", "x,y"), "3 components but there are 2 variables"),
    (("--f", "-x, -y", "--V", "1/(1 + x**2)"), "not a polynomial"),
    (("--f", "-x, -y", "--V", "x**2", "--eps", "0"), "--eps must be in (0, 1)"),
    (("--f", "-x, -y", "--V", "x**2", "--eps", "nan"), "--eps: not a positive number"),
    (("--f", "-x, -y", "--V", "__import__('os')"), "not allowed"),
    (("--f", "(-x, -y", "--V", "x**2"), "cannot parse"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    code, _, err = run(*args)
    line = one_line_error(code, err)
    assert fragment in line, line


def test_help_names_the_options_and_verdicts():
    code, out, _ = run("--help")
    assert code == 0
    for word in ("--f", "--V", "--vars", "--eps", "--json", "certified", "not certified", "inconclusive", "Examples"):
        assert word in out
