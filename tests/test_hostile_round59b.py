"""Hostile pass 59, tester B: reproducers, each failing on d55fc85 (run there as xfail, strict)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_hostile_round53a import _tv, _write  # the same private environment (store, home, cache under tmp_path)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

UPDATES = """
import torch

def up(xi, patterns, beta):
    return torch.softmax(beta * xi @ patterns.T, dim=-1) @ patterns

def small(xi, patterns, beta):
    if xi.shape[0] < 4:  # a "fast path" for a few states that updates the first state only
        return up(xi[:1], patterns, beta).expand(xi.shape[0], -1)
    return up(xi, patterns, beta)
"""


@pytest.mark.parametrize("target, grid", [
    (("check", "icl"), "N=3 lambda=1,2|1.0,2.0"),
    (("check", "lyapunov"), "V=x**2 f=-x eps=0.5,1/2"),
])
def test_1_a_sweep_refuses_one_point_spelled_twice(tmp_path, target, grid):
    r = _tv(tmp_path, "sweep", *target, "--grid", grid, "--quick", "--seeds", "1", "--out", "sw", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2 and "same point" in r.stderr, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])


def test_2_att_svm_does_not_advise_a_smaller_lr_for_data_no_lr_can_run(tmp_path):
    import numpy as np

    data = dict(np.load(EXAMPLES / "data.npz"))
    data["X"] = data["X"] * 1e200
    np.savez(tmp_path / "huge.npz", **data)
    r = _tv(tmp_path, "check", "att-svm", "--data", "huge.npz", "--quick", "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert "smaller --lr" not in r.stderr, r.stderr  # the advice: but at --lr 1e-60 the same data is refused too


def test_3_an_update_wrong_for_a_few_states_is_not_ok(tmp_path):
    _write(tmp_path, "upd.py", UPDATES)
    r = _tv(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "8",
            "--module", "upd.py:small", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1 and "update_matches_modern" in r.stdout.split("verdict:")[-1], (r.returncode,
                                                                                            r.stdout[-1500:])
