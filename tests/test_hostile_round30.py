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


def test_the_catalogue_pair_is_replaced_together_and_a_signal_waits_for_it(tmp_path):
    """24a F2b: a SIGTERM between the two renames left a new CATALOGUE.md beside the old JSON."""
    import signal

    from proofs_checks import store

    a, b = tmp_path / "CATALOGUE.md", tmp_path / "catalogue.json"
    a.write_text("old md")
    b.write_text("old json")
    seen, real = [], os.replace

    def replace_then_signal(src, dst):
        real(src, dst)
        if not seen:
            seen.append("sent")
            os.kill(os.getpid(), signal.SIGTERM)  # between the two renames

    got = []
    old = signal.signal(signal.SIGTERM, lambda s, f: got.append((a.read_text(), b.read_text())))
    try:
        import pytest

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(store.os, "replace", replace_then_signal)
            store.atomic_write_pair([(a, "new md"), (b, "new json")])
    finally:
        signal.signal(signal.SIGTERM, old)
    assert got == [("new md", "new json")]  # acted on once both were in place
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_catalogue_of_the_users_made_during_list_markdown_is_kept(tmp_path, monkeypatch, capsys):
    """24a F2: a CATALOGUE.md the user wrote into --docs-dir while the catalogue was derived was replaced."""
    from proofs_checks import cli
    from proofs_checks.output import catalogue

    docs = tmp_path / "D"
    docs.mkdir()

    def build(claims, *, with_derivations, fingerprint, progress):
        (docs / "CATALOGUE.md").write_text("my notes")  # meanwhile, the user
        return {"schema": catalogue.SCHEMA, "claims": [], "fingerprint": fingerprint}

    monkeypatch.setattr(catalogue, "build", build)
    monkeypatch.setattr(catalogue, "save_cache", lambda doc, d: None)
    monkeypatch.setattr("proofs_checks.cli_select._select", lambda patterns: [])

    class Store:
        cache_dir = tmp_path / "cache"

    cli._write_catalogue(str(docs), Store())
    assert (docs / "CATALOGUE.md").read_text() == "my notes"
    beside = [p for p in docs.iterdir() if p.name.startswith("CATALOGUE-") and p.suffix == ".md"]
    assert len(beside) == 1 and (docs / "catalogue.json").exists()
    assert "changed during the run" in capsys.readouterr().err


def test_a_worker_that_imported_other_code_refuses_the_task():
    """24a F4: a long-lived worker answered with a plugin's old code."""
    import pytest

    from proofs_checks.distributed import cluster
    from proofs_checks.errors import UsageError

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cluster, "_LOADED_CODE", "old")
        with pytest.raises(RuntimeError, match="imported other code"):
            cluster._guarded("new", str, 1)
        assert cluster._guarded("old", str, 1) == "1"

        class Client:
            def run(self, fn):
                return {"tcp://w1": "old", "tcp://w2": "new"}

        with pytest.raises(UsageError, match="1 of 2 worker"):
            cluster._refuse_stale_workers(Client(), "new")


def test_local_workers_are_spawned_ignoring_sigint(monkeypatch):
    """24a F10: the spawned workers printed tracebacks on the terminal's Ctrl-C."""
    from multiprocessing import util

    from proofs_checks.distributed import cluster

    seen = []
    monkeypatch.setattr(util, "spawnv_passfds", lambda path, args, fds: seen.append(list(args)) or 0)
    with cluster._workers_ignore_sigint():
        util.spawnv_passfds("python", ["python", "-c", "print(1)"], ())
    assert seen[0][-1].startswith("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); ")


def test_a_sweeps_file_valued_grid_values_are_shipped_absolute(tmp_path, monkeypatch):
    """24a F12: a worker of a cluster read its own L.txt under the user's label."""
    from proofs_checks.distributed.sweep import RowSpec, _shipped

    monkeypatch.chdir(tmp_path)
    (tmp_path / "L.txt").write_text("1 0\n0 2\n")
    (tmp_path / "m.py").write_text("")
    s = RowSpec("check icl", "check", "icl", (("lambda", "L.txt"), ("model", "m.py:predict"), ("N", "5")), 0, 1,
                "quick", "cpu")
    shipped = dict(_shipped(s).point)
    assert shipped == {"lambda": str(tmp_path / "L.txt"), "model": str(tmp_path / "m.py") + ":predict", "N": "5"}
