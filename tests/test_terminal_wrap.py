"""Every terminal view wraps to ``COLUMNS`` keeping its indentation (issue 45): the mutants table and
its notes, the ``check`` commands' text; tables never split an id or a check's name; braced scripts
read as in statements; ``--help`` examples name files that ship and fit 100 columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proofs_checks.output.terminal import math_text, text_of
from proofs_checks.output.wraptext import unbrace_scripts, wrap_lines
from tests.cli_helpers import invoke

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def cols(monkeypatch, tmp_path):
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))

    def at(n: int) -> None:
        monkeypatch.setenv("COLUMNS", str(n))

    at(100)
    return at


def test_mutants_wraps_with_hanging_indent_and_keeps_ids_whole(cols):
    code, out, err = invoke("mutants", "attn.convex_combination", "--quick", "--no-progress")
    assert code == 0, err
    lines = out.rstrip("\n").splitlines()
    assert all(len(ln) <= 100 for ln in lines), max(lines, key=len)
    assert "attn.convex_combination" in out and "output_vs_sympy" in out and "unnormalised_weights" in out
    i = next(k for k, ln in enumerate(lines) if ln.startswith("  cells: best margin"))
    assert lines[i + 1].startswith("      ") and "mismatch)" in lines[i + 1]  # hanging, not a centred fragment
    j = next(k for k, ln in enumerate(lines) if "finite_inputs not shown necessary" in ln)
    assert lines[j].startswith("  attn.convex_combination:")
    assert all(ln.startswith("      ") for ln in lines[j + 1:]), lines[j + 1:]


def test_check_text_wraps_to_columns(cols):
    cols(60)
    code, out, err = invoke("check", "lyapunov", "--f", "-x + 4*y, -x - y**3", "--V", "x**2 + 4*y**2")
    assert code == 0, err
    lines = out.rstrip("\n").splitlines()
    assert all(len(ln) <= 60 for ln in lines), max(lines, key=len)
    i = next(k for k, ln in enumerate(lines) if ln.startswith("  criterion:"))
    assert lines[i + 1].startswith("      ")  # the criterion's continuation keeps its indentation (+4)


def test_a_table_row_continues_under_its_last_column():
    row = "matches_reference  ok  1.47e-16  " + "the detail of this property, long enough to wrap " * 2
    out = wrap_lines([row], 70)
    at = row.index("the detail")
    assert all(len(ln) <= 70 for ln in out) and len(out) > 1
    assert all(ln.startswith(" " * at) and ln[at] != " " for ln in out[1:]), out


def test_list_says_one_claim(cols):
    code, out, _ = invoke("list", "attn.convex_combination")
    assert code == 0
    assert re.search(r"\b1 claim\b(?!s)", out), out


def test_braced_scripts_and_prose_beside_fractions_read_as_statements():
    assert text_of("a bound e^{−β(Δ_i−2εM)} and Θ(T^{3/2})") == "a bound e^(−β(Δ_i−2εM)) and Θ(T^(3/2))"
    assert unbrace_scripts("W^{KQ}_{11}, Γ_N^{-1}, max {a, b}") == "W^KQ_11, Γ_N^(−1), max {a, b}"
    assert math_text(r"\|\xi-x_i\|\le\frac1{2\beta M}\text{, then}") == "‖ξ − x_i‖ ≤ 1/(2βM), then"
    assert "·" not in math_text(r"\text{(and } \frac{a}{b},\ \frac{c}{d}\text{)}")
    assert math_text(r"\Lambda\not\propto I") == "Λ ∝\u0338 I"


@pytest.mark.parametrize("topic", ["attention", "hopfield"])
def test_check_help_examples_ship_and_fit(cols, topic):
    code, out, _ = invoke("check", topic, "--help")
    assert code == 0
    assert all(len(ln) <= 100 for ln in out.splitlines()), max(out.splitlines(), key=len)
    at = out.index("Examples:")
    examples = out[at:out.find("\n\n", at) if "\n\n" in out[at:] else len(out)]
    files = set(re.findall(r"(\S+\.(?:py|npy|npz|pt))(?::\w+)?", examples))
    assert files, out
    for f in files:
        assert (ROOT / f).is_file(), f"--help names {f}, which does not ship"
