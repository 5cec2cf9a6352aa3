"""Hostile pass 25a reproducers: all fixed (F3's, a lazily imported helper edited, is one case of
tests/test_hostile_round32a.py::test_a_pure_derivation_is_built_again_after_what_it_read_changes)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.tiers import moved


def _tv(args, cwd, tmp_path, timeout=240):
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-P", "-m", "proofs_checks.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@moved("a sweep on a local cluster in a fresh process (≈ 10 s)",
       "tests/test_hostile_round32.py::test_a_lambda_grid_value_is_shipped_as_a_path_only_when_its_suffix_names_a_file")
def test_cluster_sweep_value_named_like_a_file(tmp_path):
    (tmp_path / "5").write_text("junk\n")
    r = _tv(["sweep", "check", "icl", "--grid", "N=5", "--quick", "--cluster", "local:1", "--json", "-",
             "--no-progress"], tmp_path, tmp_path)
    assert r.returncode != 2, r.stderr[-800:]


LEAK = '''
import torch
def least_squares(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1)
def pair_leak(xs, ys, xq):
    p = least_squares(xs, ys, xq)
    B = p.shape[0]
    idx = torch.arange(B) ^ 1
    idx = torch.where(idx < B, idx, torch.arange(B))
    return p + 1e-3 * ys[idx].mean(-1)
'''


def test_icl_pair_leak_is_not_ok(tmp_path):
    (tmp_path / "leak.py").write_text(LEAK)
    from tests.cli_helpers import tv_here  # in this process: the verdict is the subject (issue 46)

    r = tv_here(tmp_path, "check", "icl", "--model", "leak.py:pair_leak", "--lambda", "1,2", "--N", "10", "--M", "10",
                "--no-progress")
    assert r.returncode == 1 and "batch_independence" in r.stdout.split("verdict:")[-1], r.stdout[-1500:]
