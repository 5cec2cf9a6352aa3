"""``--cluster``: claims × checks as Dask tasks give the same JSON as an in-process run; a bad
address is one line and exit 2 within seconds; a task that raises is an error result, not a hang;
GPU tasks need a GPU worker; Ctrl-C cancels. One LocalCluster for the module (2 worker processes,
1 thread each); the commands reach it through its address."""

from __future__ import annotations

import json
import operator
import time

import pytest

pytestmark = pytest.mark.integration(reason="Dask clusters: scheduler and worker processes started and killed")

from proofs_checks.distributed import claim_tasks as pct
from proofs_checks.distributed import cluster as pc
from proofs_checks.options import UsageError
from tests.cli_helpers import invoke, one_line_error, without_volatile

CHEAP = ("attn.softmax_simplex", "attn.causal_mask", "attn.block_recipe")  # one module; an erratum (stated checks)
VOLATILE = {"seconds", "created", "command"}



def _norm(d):
    """The document without wall times, timestamps and the command line."""
    return without_volatile(d, VOLATILE)


def _json(*argv):
    code, out, err = invoke(*argv, "--quick", "--json", "-", "--no-progress")
    assert "Traceback" not in err, err
    return code, json.loads(out)


def test_run_on_cluster_equals_in_process(cluster):
    """Statuses, messages, errors, tolerances, seeds, sizes, details: identical JSON."""
    addr, _ = cluster
    code0, local = _json("run", *CHEAP)
    code1, remote = _json("run", *CHEAP, "--cluster", addr)
    assert code0 == code1 == 0
    assert [r["status"] for r in remote["results"]] == ["verified"] * len(CHEAP)
    assert all(c["seeds"] is not None for r in remote["results"] for c in r["checks"])
    assert _norm(remote) == _norm(local)


def test_mutants_on_cluster_equal_in_process(cluster):
    addr, _ = cluster
    code0, local = _json("mutants", "attn.causal_mask")
    code1, remote = _json("mutants", "attn.causal_mask", "--cluster", addr)
    assert code0 == code1 == 0 and remote["killed"] == remote["total"] > 0
    assert _norm(remote) == _norm(local)


def test_bad_address_is_one_line_within_seconds(monkeypatch):
    monkeypatch.setattr(pc, "CONNECT_TIMEOUT_S", 1.0)
    t0 = time.perf_counter()
    code, _, err = invoke("run", "attn.causal_mask", "--quick", "--cluster", "tcp://127.0.0.1:1")
    assert time.perf_counter() - t0 < 10
    assert "tcp://127.0.0.1:1" in one_line_error(code, err)
    for bad in ("local:x", "local:0", "nonsense", "foo://h:1", ""):
        code, _, err = invoke("mutants", "attn.causal_mask", "--quick", "--cluster", bad)
        assert "--cluster" in one_line_error(code, err)


def test_parse_cluster():
    assert pc.parse_cluster(None) is None
    assert pc.parse_cluster("local:3") == ("local", 3)
    assert pc.parse_cluster("tcp://10.0.0.1:8786") == ("address", "tcp://10.0.0.1:8786")
    with pytest.raises(UsageError):
        pc.parse_cluster("local:-1")


def test_raising_task_is_a_failure_not_a_hang(cluster):
    _, client = cluster
    tasks = [pc.Task("ok", operator.add, (1, 2)), pc.Task("boom", operator.truediv, (1, 0))]
    seen = []
    out = pc.run_tasks(client, tasks, lambda label, v: seen.append(label), retries=1)
    assert out[0] == 3
    assert isinstance(out[1], pc.TaskFailure) and "ZeroDivisionError" in out[1].message
    assert sorted(seen) == ["boom", "ok"]


def test_failed_check_task_makes_the_claim_an_error(cluster, monkeypatch):
    """A check task that fails on the cluster becomes an ``error`` outcome, so the claim is
    ``error`` (as a crashing check is in-process), and the run completes."""
    from proofs_checks.registry import select

    _, client = cluster
    claims = select(["attn.causal_mask"])
    real = pc.run_tasks

    def sabotage(client, tasks, progress=None, **kw):
        tasks = [pc.Task(t.label, operator.truediv, (1, 0)) if t.label.endswith(":matches_torch") else t for t in tasks]
        return real(client, tasks, progress, **kw)

    monkeypatch.setattr(pct, "run_tasks", sabotage)
    res, _ = pct.run_claims_on(client, claims, mode="quick", seed=0, device="cpu")
    assert res[0].status == "error"
    bad = [o for o in res[0].checks if o.status == "error"]
    assert [o.name for o in bad] == ["matches_torch"] and "ZeroDivisionError" in bad[0].error_message


def test_gpu_tasks_need_a_gpu_worker(cluster):
    _, client = cluster
    with pytest.raises(UsageError, match="GPU"):
        pc.run_tasks(client, [pc.Task("g", operator.add, (1, 1), gpu=True)])
    assert pc.run_tasks(client, [pc.Task("g", operator.add, (1, 1), gpu=True)], allow_no_gpu=True) == [2]


def test_interrupt_cancels_every_task(cluster):
    _, client = cluster

    def interrupt(label, value):
        raise KeyboardInterrupt

    tasks = [pc.Task(f"sleep{i}", time.sleep, (0.2 if i == 0 else 1.5,)) for i in range(4)]
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        pc.run_tasks(client, tasks, interrupt)
    deadline = time.time() + 10
    while client.processing() and any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values())
    assert time.perf_counter() - t0 < 15


# one claim from each of eight claim modules: on two workers the run is cut into one task per module
PER_MODULE = ("attn.causal_mask", "attn.block_recipe", "hop.attention_identity", "rnn.bptt", "gnn.attention_is_gnn",
              "sparse.connectivity", "lora.low_rank", "lyap.backward_construction")


def test_report_cut_per_module_equals_in_process(cluster, tmp_path):
    """Eight claim modules on two workers: one task per module, each carrying its claims' kill matrix and
    continuous-mutant rows; the report's JSON is the in-process one (continuous rows included)."""
    from proofs_checks.registry import select

    addr, client = cluster
    assert pct.granularity(client, select(list(PER_MODULE))) == "module"
    assert pct.granularity(client, select(list(CHEAP))) == "check"
    code0, local = _json("report", *PER_MODULE, "--out", str(tmp_path / "a"))
    code1, remote = _json("report", *PER_MODULE, "--out", str(tmp_path / "b"), "--cluster", addr)
    assert code0 == code1 == 0
    assert set(remote["continuous"]) == set(PER_MODULE)
    assert remote["continuous"]["lyap.backward_construction"]["rejected_at_2eps"] is True
    assert _norm(remote) == _norm(local)
    assert sorted(p.name for p in (tmp_path / "b" / "figures").iterdir()) == \
        sorted(p.name for p in (tmp_path / "a" / "figures").iterdir())


def test_extra_tasks_come_back_first_and_a_failed_module_fails_its_claims(cluster):
    from proofs_checks.registry import select

    _, client = cluster
    claims = select(["rnn.bptt", "gnn.attention_is_gnn"])
    plan = pct.plan_claims(claims, mode="quick", seed=0, device="cpu", per="module",
                          extra=[pc.Task("extra", operator.add, (1, 2))])
    assert [t.fn for t in plan.tasks] == [operator.add, pct.module_task, pct.module_task]
    plan.tasks[2] = pc.Task(plan.tasks[2].label, operator.truediv, (1, 0))  # the gnn module's task fails
    run = plan.assemble(pc.run_tasks(client, plan.tasks, retries=0))
    assert run.extra == [3]
    assert [r.status for r in run.claims] == ["verified", "error"]
    assert "task failed on the cluster" in run.claims[1].checks[0].error_message


def test_local_workers_keep_the_thread_caps_but_do_not_trim_malloc():
    """``local:W`` workers: OMP/MKL/OpenBLAS capped at one thread (Dask's default), but not Dask's
    MALLOC_TRIM_THRESHOLD_=65536, which made every large array fault its pages in anew (a report spent
    279 s of system time instead of 37 s and ran slower than in-process)."""
    import os

    with open_client_local(1) as client:
        env = client.run(lambda: {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")})
    (worker_env,) = env.values()
    assert worker_env["OMP_NUM_THREADS"] == "1"
    assert worker_env["MALLOC_TRIM_THRESHOLD_"] == os.environ.get("MALLOC_TRIM_THRESHOLD_")


def open_client_local(workers: int):
    return pc.open_client(f"local:{workers}")


def test_local_cluster_that_cannot_start_is_one_line(monkeypatch):
    """A machine where Dask cannot start local workers (no sockets, no shared memory): one line naming
    the way out (run in-process), exit 2, no traceback; nothing is written."""
    import distributed

    def refuse(*a, **k):
        raise OSError("[Errno 97] Address family not supported by protocol")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    code, _, err = invoke("run", "attn.causal_mask", "--quick", "--cluster", "local:2")
    line = one_line_error(code, err)
    assert "local:2" in line and "leave out --cluster" in line and "Address family" in line


@pytest.mark.parametrize("continuous", [False, True])
def test_a_module_task_carries_its_claims_statement_and_assembling_runs_no_counterexample(monkeypatch, continuous):
    """The hypotheses' counterexamples run on the worker, within the claim's task; the command's process reuses the
    statement they give (it ran every claim's counterexamples again, one after the other, after the last task: ≈ 7 s of
    `make report`'s serial end), and the result is the in-process one. The module task runs here, without Dask."""
    from proofs_checks import runner
    from proofs_checks.context import RunContext
    from proofs_checks.registry import select

    claims = select(["attn.softmax_simplex", "attn.convex_combination"])
    assert any(h.counterexample is not None for c in claims for h in c.hypotheses)
    plan = pct.plan_claims(claims, mode="quick", seed=0, device="cpu", continuous=continuous, per="module",
                          mutants=continuous)
    results = [t.fn(*t.args) for t in plan.tasks]
    assert all(got["statement"] is not None for r in results for got in r.values())

    def no_counterexample(*a, **k):
        raise AssertionError("a counterexample ran while the results were assembled")

    monkeypatch.setattr(runner, "run_counterexample", no_counterexample)
    assembled = plan.assemble(results).claims
    monkeypatch.undo()
    local = [runner.run_claim(c, RunContext(mode="quick", seed=0)) for c in claims]
    assert [r.statement for r in assembled] == [r.statement for r in local]
    assert [r.status for r in assembled] == ["verified", "verified"]
