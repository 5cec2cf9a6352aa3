"""Hostile pass 25 (a short pass at the end of the eleventh session): tests of its fixed findings."""

from __future__ import annotations

import textwrap

import pytest

from tests.cli_helpers import tv_here

PREDICTORS = textwrap.dedent("""
    import torch

    def ls(xs, ys, xq):
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        return (xq.unsqueeze(-2) @ w).reshape(-1)

    def on_prompt0(xs, ys, xq):  # every prediction reads prompt 0's labels
        return ls(xs, ys, xq) + 0.01 * ys[0].mean()

    def pair_leak(xs, ys, xq):  # prediction i reads prompt i ^ 1
        p = ls(xs, ys, xq); B = p.shape[0]
        idx = torch.arange(B) ^ 1; idx = torch.where(idx < B, idx, torch.arange(B))
        return p + 1e-3 * ys[idx].mean(-1)

    def late(xs, ys, xq):  # batch statistics at every length but M = 1
        p = ls(xs, ys, xq)
        return p + 0.01 * ys.mean() if xs.shape[1] > 1 else p

    def needs_a_batch(xs, ys, xq):  # raises on a batch of one or two
        if xs.shape[0] <= 2:
            raise RuntimeError("needs a full batch")
        return ls(xs, ys, xq) + 0.01 * ys.mean()
""")


@pytest.mark.parametrize("name, outcome", [("on_prompt0", 1), ("pair_leak", 1), ("late", 1), ("needs_a_batch", 3),
                                           ("ls", 0)])
def test_icl_batch_independence_watches_one_prompt_alone_at_every_length(tmp_path, name, outcome):
    """25a F2, 25b F1, F4: two prompts re-predicted together at the first length hid a dependence between them, on
    prompt 0 or after M = 1; a property not judged gave ok."""
    (tmp_path / "p.py").write_text(PREDICTORS)
    r = tv_here(tmp_path, "check", "icl", "--model", f"p.py:{name}", "--lambda", "1,2", "--N", "10", "--M", "10",
                "--quick")
    assert r.returncode == outcome, r.stdout[-1500:]
    if outcome:
        assert "batch_independence" in r.stdout.split("verdict:")[-1], r.stdout[-1500:]


def test_a_sweep_ships_only_file_parameters_absolute(tmp_path, monkeypatch):
    """25a F1: a file named "5" in the working folder turned --N 5 into a path on a cluster."""
    from proofs_checks.distributed.sweep import RowSpec, _shipped

    monkeypatch.chdir(tmp_path)
    (tmp_path / "5").write_text("junk")
    (tmp_path / "L.txt").write_text("1 0\n0 2\n")
    s = RowSpec("check icl", "check", "icl", (("N", "5"), ("lambda", "L.txt")), 0, 1, "quick", "cpu")
    assert dict(_shipped(s).point) == {"N": "5", "lambda": str(tmp_path / "L.txt")}
