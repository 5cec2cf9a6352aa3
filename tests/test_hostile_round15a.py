"""Hostile pass 10 (tester a): what it found, each test failing before its fix.

* F1) ``tverify --store A --store B run ...``: the top-level group's own value option given twice was taken
  silently (B kept, A dropped); pass 9's refusal checked every subcommand but skipped groups.
"""

from __future__ import annotations

import os

import pytest

from tests.cli_helpers import invoke, one_line_error


@pytest.mark.parametrize("argv", [
    ("--store", "sA", "--store", "sB", "list"),
    ("--store=sA", "--store=sB", "show", "icl.gamma_n_global_min"),
])
def test_the_top_level_store_given_twice_is_refused(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(*argv)
    line = one_line_error(code, err)
    assert code == 2 and "option --store is given more than once" in line
    assert not (tmp_path / "sA").exists() and not (tmp_path / "sB").exists()


def test_the_top_level_store_once_still_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("--store", "sA", "list", "icl.gamma_n_global_min")
    assert code == 0, err


pytest_plugins = ["pytester"]


def test_the_fixture_says_a_bad_environment_variable_in_one_line(pytester, monkeypatch):
    """F2) A bad ``TVERIFY_THREADS`` (read when the fixture starts) or ``TVERIFY_DERIVATION_CACHE`` (read by a
    method) failed the user's test with a traceback through threads.py / the api: now the one line."""
    import textwrap

    pytester.makepyfile(test_user=textwrap.dedent("""
        import os

        def test_threads(tverify):
            pass

        def test_cache(tverify, monkeypatch):
            monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "maybe")
            tverify.run_claims("attn.softmax_simplex", mode="quick")
    """))
    monkeypatch.setenv("TVERIFY_THREADS", "abc")
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "-k", "threads")
    out = res.stdout.str()
    res.assert_outcomes(errors=1)
    assert "tverify fixture: TVERIFY_THREADS must be a whole number" in out and "threads.py" not in out
    monkeypatch.delenv("TVERIFY_THREADS")
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "-k", "cache")
    out = res.stdout.str()
    res.assert_outcomes(failed=1)
    assert "bad input: TVERIFY_DERIVATION_CACHE must be" in out and "During handling" not in out
    assert "proofs_checks/" not in out


def test_a_sigterm_while_python_tears_down_its_modules_keeps_the_exit_code(tmp_path):
    """F3) After the command finished, Python's finalisation resets tverify's late handler to the default action
    before it tears down the modules (0.1-0.5 s with torch loaded): a SIGTERM then killed the finished command
    silently with 143 (a report complete on disk). The signal is now ignored there: the command's own code stands."""
    import subprocess
    import sys

    script = tmp_path / "bomb.py"
    script.write_text(
        "import os, signal, sys, types\n"
        "from proofs_checks.console import terminate_cleanly, settle_signals\n"
        "terminate_cleanly(); settle_signals()\n"
        "class Bomb:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"  # during module teardown, after every exit callback
        "m = types.ModuleType('bomb_holder'); m.b = Bomb(); sys.modules['bomb_holder'] = m\n"
        "del m\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)


@pytest.mark.parametrize("where", ["prefix", "base_prefix", "package", "prefix/lib", "package/output"])
def test_a_report_never_replaces_the_environment_tverify_runs_from(where, tmp_path, monkeypatch):
    """F4) ``tverify report --out .venv --force`` (the environment tverify ran from) swapped it for the report, then
    crashed importing rich.table from the removed environment: refused now, even with --force, before any run."""
    import sys
    from pathlib import Path

    import proofs_checks
    from proofs_checks.output.report import ReportTargetError, check_report_target

    places = {"prefix": sys.prefix, "base_prefix": sys.base_prefix, "package": str(Path(proofs_checks.__file__).parent)}
    first, _, sub = where.partition("/")
    target = str(Path(places[first]) / sub) if sub else places[first]  # inside it: `--out proofs_checks/output`
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ReportTargetError, match="tverify is running from there"):
        check_report_target(target, force=True)
    code, out, err = invoke("report", "attn.softmax_simplex", "--quick", "--no-mutants", "--out", target, "--force")
    assert code == 2 and "tverify is running from there" in one_line_error(code, err)


def test_a_json_file_is_never_written_into_the_environment_tverify_runs_from(tmp_path, monkeypatch):
    """F4, --json) ``--json .venv/<file> --force`` replaced a file of the environment tverify ran from."""
    import sys
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    decoy = Path(sys.prefix) / f"tverify-hostile10a-decoy-{os.getpid()}.json"
    decoy.write_text("{}\n")
    try:
        code, out, err = invoke("report", "attn.softmax_simplex", "--quick", "--no-mutants", "--out", "r",
                                "--json", str(decoy), "--force")
        assert code == 2 and "tverify is running from there" in one_line_error(code, err)
        assert decoy.read_text() == "{}\n" and not (tmp_path / "r").exists()
    finally:
        decoy.unlink()


def test_a_cluster_task_s_figure_folder_is_inside_the_cluster_scratch_folder(tmp_path, monkeypatch):
    """F5) ``report --cluster local:2`` killed with SIGTERM left the workers' ``tverify-task-fig-*`` folders in $TMPDIR
    (a killed worker never runs its ``finally``): they are now made in Dask's ``temporary-directory`` (for local:W the
    command's own scratch folder, removed with the cluster)."""
    import tempfile

    import dask

    from proofs_checks.distributed import claim_tasks as cluster
    from proofs_checks.registry import get_claim

    made = []
    real = tempfile.mkdtemp

    def spy(*args, **kwargs):
        path = real(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", spy)
    claim = get_claim("attn.softmax_simplex")
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        cluster.check_task("", claim.id, claim.checks[0].name, "quick", 0, "cpu", ("claim",), True)
    figs = [p for p in made if "tverify-task-fig-" in p]
    assert figs and all(os.path.dirname(p) == str(tmp_path) for p in figs), made


@pytest.mark.parametrize("var, argv", [
    ("TVERIFY_THREADS", ("run", "attn.softmax_simplex", "--quick")),
    ("TVERIFY_PLUGIN_IMPORT_TIMEOUT", ("list", "attn.softmax_simplex")),
    ("TVERIFY_PLUGIN_CHECK_TIMEOUT", ("run", "attn.softmax_simplex", "--quick")),
])
def test_an_environment_number_with_an_underscore_is_refused(var, argv, tmp_path, monkeypatch):
    """F6) ``TVERIFY_THREADS=1_0`` ran with 10 threads and ``TVERIFY_PLUGIN_*_TIMEOUT=1_0`` waited 10 s (Python's
    int/float read 1_0 as 10), while pass 9 refused it on the command line and in TVERIFY_DERIVATION_BUDGET."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(var, "1_0")
    code, out, err = invoke(*argv)
    line = one_line_error(code, err)
    assert code == 2 and var in line and "'1_0'" in line


@pytest.mark.parametrize("grid", ["d_k=1_6", "d_k=4,1_6"])
def test_a_grid_value_with_an_underscore_is_refused(grid, tmp_path, monkeypatch):
    """F6) ``sweep --grid "d_k=1_6"`` ran at d_k = 16 (the '_' refusal looked at whole arguments only)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("sweep", "attn.scaling_variance", "--grid", grid, "--quick", "--json", "-")
    line = one_line_error(code, err)
    assert code == 2 and "1_6" in line


def test_an_underscore_in_a_name_is_still_a_name(tmp_path, monkeypatch):
    from proofs_checks.entry import _underscored_number

    assert _underscored_number(["check", "lyapunov", "--f", "-x_1", "--vars", "x_1", "--grid", "f=-x_1 V=x_1**2"]) is None
    assert _underscored_number(["--grid", "N=5 lambda=1,2|1_0"]) == "--grid N=5 lambda=1,2|1_0"  # (named: 46a F3)
