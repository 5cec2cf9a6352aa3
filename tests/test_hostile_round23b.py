"""Hostile pass 17, tester b: findings pinned as strict xfails during the pass; fixed after it, plain tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def _hopfield_with(tmp_path, package: str, init: str | None, member: str, body: str):
    from tests.test_hostile_round22b import hopfield_beside

    files = {f"{package}/{member}.py": body, **({f"{package}/__init__.py": init} if init is not None else {})}
    return hopfield_beside(tmp_path, files, head=f"from {package}.{member} import VALUE\n", factor=" * VALUE")


@pytest.mark.integration(reason="a tverify process of its own (≈ 10 s); hostile pass 17b F1's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_a_checkouts_benchmarks_or_examples_never_"
                                    "shadow_the_users",))
def test_users_own_benchmarks_package_beside_the_module_imports(tmp_path):
    r = _hopfield_with(tmp_path, "benchmarks", "", "consts", "VALUE = 1.0\n")
    assert r.returncode == 0, r.stderr


@pytest.mark.integration(reason="a tverify process of its own (≈ 10 s); hostile pass 17b F1's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_a_checkouts_benchmarks_or_examples_never_"
                                    "shadow_the_users",))
def test_users_own_examples_namespace_beside_the_module_imports(tmp_path):
    marker = tmp_path / "USER_RAN"
    r = _hopfield_with(tmp_path, "examples", None, "my_attn",
                       f"open({str(marker)!r}, 'w').write('x')\nVALUE = 1.0\n")
    assert r.returncode == 0, r.stderr
    assert marker.exists()


def _base_attention():
    import math

    import torch
    from torch import nn

    class Base(nn.Module):
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.h, self.dk = heads, dim // heads
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, self.dk).permute(2, 0, 3, 1, 4).unbind(0)
            s = q @ k.transpose(-1, -2) / math.sqrt(self.dk)
            s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), -math.inf)
            return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1))

    return Base()


def test_a_huge_declared_scale_is_a_verdict_or_one_line_not_an_overflow():
    import proofs_checks as pc

    try:
        r = pc.check_attention(_base_attention(), causal=True, scale=1e308, mode="quick", progress=False,
                               isolate=False)
    except ValueError:  # InputError: one line, in the keyword's words
        return
    assert r.verdict.outcome in ("ok", "mismatch", "inconclusive")


def test_a_softcap_beyond_float32_range_on_an_exact_module_is_not_a_mismatch():
    import proofs_checks as pc

    r = pc.check_attention(_base_attention(), causal=True, softcap=1e39, mode="quick", progress=False, isolate=False)
    assert r.verdict.outcome == "ok", r.verdict


def _modern_update(xi, patterns, beta):
    import torch

    return torch.softmax(beta * xi @ patterns.T, dim=-1) @ patterns


def test_an_exact_update_declared_float16_at_a_large_beta_is_not_a_mismatch():
    import proofs_checks as pc

    P = np.sign(np.random.default_rng(0).normal(size=(6, 16)))
    r = pc.check_hopfield(P, beta=1e5, module=_modern_update, compute_dtype="float16", isolate=False)
    assert r.verdict.outcome != "mismatch", r.verdict

