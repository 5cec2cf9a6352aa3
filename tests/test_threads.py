"""proofs_checks.threads: the thread count every computing command, the API and the fixture set."""

from __future__ import annotations

import os

import pytest

from proofs_checks import threads
from proofs_checks.errors import UsageError


def test_order_flag_then_env_then_omp_then_cores(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    assert threads.resolve(3, env={"TVERIFY_THREADS": "5"}) == threads.Threads(3, "--threads")
    assert threads.resolve(None, env={"TVERIFY_THREADS": "5", "OMP_NUM_THREADS": "2"}) == threads.Threads(5, "TVERIFY_THREADS")
    assert threads.resolve(None, env={"OMP_NUM_THREADS": "2"}) == threads.Threads(2, "OMP_NUM_THREADS")
    assert threads.resolve(None, env={}) == threads.Threads(8, "cores")
    assert threads.resolve(None, env={}, default=1) == threads.Threads(1, "default")


def test_workers_share_the_cores(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    assert threads.resolve(None, env={"PYTEST_XDIST_WORKER_COUNT": "2"}).threads == 1
    assert threads.resolve(None, env={"PYTEST_XDIST_WORKER_COUNT": "4"}).threads == 1  # never 0
    assert threads.resolve(None, workers=1, env={}).threads == 2


def test_cores_are_the_affinity_not_the_machine():
    assert threads.available_cores() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_bad_env_value_is_one_line_usage_error(bad):
    with pytest.raises(UsageError, match="TVERIFY_THREADS must be a whole number from 1 to 4096"):
        threads.resolve(None, env={"TVERIFY_THREADS": bad})


def test_pin_sets_torch_blas_and_the_environment(monkeypatch):
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    monkeypatch.setenv("TVERIFY_THREADS", "2")  # restored by monkeypatch, also after pin(before) wrote it
    try:
        assert threads.pin() == threads.Threads(2, "TVERIFY_THREADS")
        assert torch.get_num_threads() == 2
        assert os.environ["OMP_NUM_THREADS"] == "2"
        assert all(p["num_threads"] <= 2 for p in threadpool_info())
    finally:
        threads.pin(before)
    assert torch.get_num_threads() == before and os.environ["TVERIFY_THREADS"] == str(before)


def test_a_pinned_decision_is_not_mistaken_for_the_users_omp(monkeypatch):
    """pin writes OMP_NUM_THREADS for libraries and children; a later resolve (a cluster's per-worker
    count) reads the value this process inherited, not that write."""
    monkeypatch.setattr(threads, "_INHERITED_OMP", None)
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # as pin() wrote it
    monkeypatch.delenv("TVERIFY_THREADS", raising=False)
    assert threads.resolve(None, workers=2) == threads.Threads(4, "cores")
    monkeypatch.setattr(threads, "_INHERITED_OMP", "3")
    assert threads.resolve(None, workers=2) == threads.Threads(3, "OMP_NUM_THREADS")


def test_commands_take_threads_and_say_so_in_help():
    from click.testing import CliRunner

    from proofs_checks.cli import cli

    for argv in (["run"], ["mutants"], ["report"], ["sweep"], ["survey"], ["reproduce"], ["check", "icl"]):
        out = CliRunner().invoke(cli, [*argv, "--help"]).output
        assert "--threads N" in out and "TVERIFY_THREADS" in out, argv


def test_bad_threads_flag_is_a_usage_error():
    from click.testing import CliRunner

    from proofs_checks.cli import cli

    res = CliRunner().invoke(cli, ["run", "attn.softmax_simplex", "--threads", "0"])
    assert res.exit_code == 2 and "--threads" in res.output


def test_the_api_puts_back_the_callers_environment_and_thread_counts(monkeypatch):
    """Hostile pass 40 (left open then): an API call left OMP_NUM_THREADS & co. set in the caller's environment,
    and torch at one thread, after it returned. Pinned for the call only, everything is as the caller had it."""
    import torch

    from proofs_checks import api
    from theory.validation import InputError

    monkeypatch.delenv("TVERIFY_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setattr(threads, "_INHERITED_OMP", "3")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "5")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with api._as_value_errors():
            assert os.environ["MKL_NUM_THREADS"] == "3" and torch.get_num_threads() == 3  # pinned inside
        assert "MKL_NUM_THREADS" not in os.environ and os.environ["OPENBLAS_NUM_THREADS"] == "5"
        assert os.environ["OMP_NUM_THREADS"] == "3" and torch.get_num_threads() == 2
        with pytest.raises(InputError):  # an API function's bad input: put back all the same
            api.check_lyapunov("x**", "x**2")
        assert "MKL_NUM_THREADS" not in os.environ and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
