"""``tverify sweep``: the grid, the accepted parameters, one row per grid point and replicate with
every measured number, the same numbers on a Dask cluster (also when a worker dies mid-sweep),
safe --out. One LocalCluster for the module (2 worker processes, 1 thread each)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from proofs_checks.distributed import sweep as sw
from proofs_checks.options import UsageError
from tests.cli_helpers import invoke, one_line_error

ACCEPT = ("sweep", "icl.linear_task_risk", "--grid", "N=5,10 M=5,20", "--quick", "--json", "-", "--no-progress")



def _rows(doc):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in doc["rows"]]


@pytest.fixture(scope="module")
def accepted():
    code, out, err = invoke(*ACCEPT)
    assert "Traceback" not in err, err
    return code, json.loads(out)


def test_acceptance_one_row_per_point_with_risk_closed_form_verdict(accepted):
    code, doc = accepted
    assert code == 0, doc["summary"]
    assert [(r["N"], r["M"]) for r in doc["rows"]] == [(5, 5), (5, 20), (10, 5), (10, 20)]
    for r in doc["rows"]:
        assert r["status"] == "ok" and r["verdict"] == "pass"
        assert r["risk_measured"] > 0 and r["risk_closed_form"] > 0 and r["risk_se"] > 0
        assert abs(r["risk_measured"] - r["risk_closed_form"]) <= r["z_tolerance"] * r["risk_se"]
    # one replicate: the same Λ and seed at every point; the risk falls with M at fixed N
    assert len({r["seed"] for r in doc["rows"]}) == 1
    assert doc["rows"][1]["risk_closed_form"] < doc["rows"][0]["risk_closed_form"]
    assert {"N", "M", "risk_measured", "risk_closed_form", "verdict", "seed"} <= set(doc["columns"])


@pytest.mark.integration(reason="a sweep on a Dask cluster")
def test_acceptance_same_numbers_on_the_cluster(accepted, cluster):
    addr, _ = cluster
    code, out, err = invoke(*ACCEPT, "--cluster", addr)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cluster"] == addr
    assert _rows(doc) == _rows(accepted[1])


# integration: the only test of `make test` that started a Dask cluster (12.5 s on the CI machine, issue 46);
# the rows and numbers it compares are pinned in-process by
# test_acceptance_one_row_per_point_with_risk_closed_form_verdict, and a cluster's worker loss is the
# integration tier's to check (with test_acceptance_same_numbers_on_the_cluster and tests/test_cluster.py)
@pytest.mark.integration(reason="a Dask worker killed mid-sweep")
def test_a_worker_killed_mid_sweep_still_gives_every_row(cluster):
    """SIGKILL one worker after the first row finishes: its tasks go to the other worker (the
    nanny restarts the dead one) and every row comes back, with the in-process numbers."""
    _, client = cluster
    tgt = sw.resolve_target(["attn.scaling_variance"])
    rows = sw.plan_rows(tgt, sw.parse_grid("d_k=1,2,3,4,5,6,7,8 n=150000"), seeds=1, base_seed=0, mode="quick",
                        device="cpu")
    pids = client.run(os.getpid)
    killed = []

    def kill_one(label, row):
        if not killed:
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    got = sw.run_sweep(tgt, rows, client=client, progress=kill_one)
    assert killed and len(got) == len(rows)
    assert all(r["status"] == "ok" for r in got), [r.get("error") for r in got]
    local = sw.run_sweep(tgt, rows)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(got) == strip(local)


def test_grid_parsing():
    assert sw.parse_grid("N=5,10,20 M=5") == {"N": ["5", "10", "20"], "M": ["5"]}
    assert sw.parse_grid(["lambda=1,2|2,0.5;0.5,1", "N=3"]) == {"lambda": ["1,2", "2,0.5;0.5,1"], "N": ["3"]}
    for bad in ("", "N", "N=", "N=1,,2", "=3", "N=1 N=2", "N=1,1", "2N=3"):
        with pytest.raises(UsageError):
            sw.parse_grid(bad)


@pytest.mark.parametrize("argv, needle", [
    (("icl.linear_task_risk", "--grid", "N=5 X=1"), "accepted: N, M, d"),
    (("icl.linear_task_risk", "--grid", "N=5,,6"), "empty value"),
    (("icl.linear_task_risk", "--grid", "N=0"), "N=0"),
    (("icl.linear_task_risk", "--grid", "N 5"), "NAME=VALUES"),
    (("icl.limits", "--grid", "N=5"), "no sweep adapter"),
    (("no.such", "--grid", "N=5"), "no claim"),
    (("check", "icl", "--grid", "bogus=1"), "accepted: lambda, N"),
    (("check", "icl", "--grid", "N=0"), "--N"),
    (("check", "nosuch", "--grid", "N=1"), "available: check"),
])
def test_bad_targets_and_grids_are_one_line_exit_2(argv, needle, tmp_path):
    code, _, err = invoke("sweep", *argv, "--quick", "--out", str(tmp_path / "s"))
    assert needle in one_line_error(code, err)
    assert not (tmp_path / "s").exists()


def test_out_folder_is_written_and_only_replaced_when_ours(tmp_path):
    out = tmp_path / "sw"
    argv = ("sweep", "attn.scaling_variance", "--grid", "d_k=1,4,16 dist=normal,uniform", "--quick", "--no-progress",
            "--seeds", "2", "--out", str(out))
    code, _, err = invoke(*argv)
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert {".tverify-report", "index.html", "results.csv", "results.json"} <= set(names)
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["rows"]) == 3 * 2 * 2 and doc["summary"]["errors"] == 0
    lines = (out / "results.csv").read_text().splitlines()
    assert len(lines) == 1 + 12 and lines[0].startswith("d_k,dist,replicate,seed,status,verdict")
    page = (out / "index.html").read_text()
    assert "<svg" in page and "heat" in page and "var_measured" in page
    assert invoke(*argv)[0] == 0  # a previous sweep is replaced
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    code, _, err = invoke(*argv[:-1], str(mine))
    assert "nothing was written" in one_line_error(code, err)
    assert (mine / "notes.txt").read_text() == "keep" and len(list(mine.iterdir())) == 1


def test_sanity_target_rows_carry_the_checks_numbers():
    code, out, err = invoke("sweep", "check", "icl", "--grid", "N=4 M=2,8 seeds=2 prompts=256 steps=5", "--quick",
                            "--json", "-", "--no-progress")
    assert "Traceback" not in err, err
    doc = json.loads(out)
    assert code in (0, 1, 3) and len(doc["rows"]) == 2
    for r in doc["rows"]:
        assert r["status"] == "ok" and r["verdict"] in ("ok", "mismatch", "inconclusive")
        assert r["closed_forms.linear_task_risk_M"] > 0 and "trained.risk_M_measured" in r
    assert doc["rows"][0]["closed_forms.linear_task_risk_M"] > doc["rows"][1]["closed_forms.linear_task_risk_M"]
