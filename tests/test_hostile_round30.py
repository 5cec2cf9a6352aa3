"""Hostile pass 24, the lead's unit tests of the fixes (the testers' end-to-end reproducers are in
tests/test_hostile_round30a.py and 30b.py)."""

from __future__ import annotations

import os

import numpy as np


def test_a_link_loop_in_a_plugin_package_is_walked_once(tmp_path):
    """24a F3: two links to ``.`` made 2^40 paths; each folder is walked once by its device and inode."""
    from proofs_checks.fingerprint import _package_files

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.txt").write_text("data\n")
    for name in ("l1", "l2"):
        os.symlink(".", pkg / name)
    os.symlink("..", pkg / "sub" / "up")
    files = _package_files([str(pkg)])
    assert sorted(f.name for f in files) == ["a.py", "b.txt"]


def test_a_package_past_the_file_limit_has_no_fingerprint_to_match(tmp_path, monkeypatch):
    """A link to a folder high above the package: past the limit the walk stops, and no cache can match it."""
    from proofs_checks import fingerprint

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for i in range(5):
        (pkg / f"m{i}.py").write_text("")
    monkeypatch.setattr(fingerprint, "MAX_PLUGIN_FILES", 3)
    assert fingerprint._package_files([str(pkg)]) is None


def test_the_default_out_is_noted_at_the_start(tmp_path, monkeypatch):
    """24a F1: the command's default --out (report: reports) is noted before the heavy imports, as a named one is."""
    from proofs_checks import _console, owned

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(owned, "_AT_START", {})
    _console._note_outputs(["--store", "s", "report", "attn.complexity", "--force"])
    assert owned._seen_key("reports") in owned._AT_START
    monkeypatch.setattr(owned, "_AT_START", {})
    _console._note_outputs(["sweep", "x", "--json", "-"])  # sweep writes no folder with --json and no --out
    assert owned._seen_key("sweep") not in owned._AT_START
    _console._note_outputs(["list", "--markdown", "--docs-dir", "D"])
    assert {owned._seen_key(os.path.join("D", n)) for n in owned.CATALOGUE_FILES} <= set(owned._AT_START)


def test_zeros_stay_zero_beside_nonzero_outputs_and_move_where_all_are_zero():
    """24b F4: a 0 moved absolutely was rejected by an absolute tolerance at every size."""
    from proofs_checks.scaling import ScaleCounter, perturbed_form

    c = ScaleCounter()
    f = perturbed_form(lambda: np.array([0.0, 2.0]), 1.0, "up", counter=c, move_zeros=False)
    assert f().tolist() == [0.0, 4.0] and c.nonzero == 1
    c = ScaleCounter()
    g = perturbed_form(lambda: np.zeros(2), 0.5, "down", counter=c)
    assert g().tolist() == [-0.5, -0.5] and c.nonzero == 0


def test_a_rule_of_three_with_an_absolute_tolerance_at_zero_is_not_verified(tmp_path, monkeypatch):
    """24b F4: 3x = 2x on a grid through 0, close() at rtol·|r| + 1e-12 (numpy.isclose's shape), rtol 0.75: the zero
    entries rejected every move, and the claim was credited 0.0001 %."""
    from proofs_checks.plugin import Claim, Mutant, check_claim, close, numeric

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))

    @numeric("3x against 2x on a grid through 0")
    def against_two(form, ctx):
        x = np.concatenate([np.linspace(-1, 1, 20), [0.0]])
        return close(form(x), 2 * x, 0.75 * np.abs(2 * x) + 1e-12, "model error, relative, plus rounding")

    c = Claim(id="zz.three_is_two_zero", title="3x = 2x", statement="3x = 2x", source="hostile", kind="identity",
              form=lambda x: 3 * x, checks=(against_two,), no_symbolic="empirical", derivation=None,
              mutants=(Mutant("ten", "wrong constant", "10x", lambda x: 10 * x),))
    assert check_claim(c).status != "verified"
