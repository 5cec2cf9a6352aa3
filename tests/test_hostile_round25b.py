"""Hostile pass 19, tester b: findings pinned as strict xfails (the tree under test is frozen; fixes come after)."""

from __future__ import annotations

import math

import pytest
import torch

from examples.my_attn import MyAttention


class _Attn(MyAttention):
    """Plain causal multi-head attention (D 32, 4 heads; examples/my_attn.py's weights) at logit scale ``SCALE``
    (1/√d_k when None)."""

    SCALE = None

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        sc = self.SCALE if self.SCALE is not None else 1 / math.sqrt(self.head_dim)
        s = torch.einsum("bhtd,bhsd->bhts", q, k) * sc
        ahead = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        a = s.masked_fill(ahead, -math.inf).softmax(-1)
        o = torch.einsum("bhts,bhsd->bhtd", a, v).transpose(1, 2).reshape(b, t, -1)
        return self.proj(o)


class _Tiny100(_Attn):  # 100 × the declared --scale 1e-300
    SCALE = 1e-298


class _T308(_Attn):  # exactly the declared --scale 1e-308
    SCALE = 1e-308


class _Big39(_Attn):  # exactly the declared --scale 1e39 (beyond float32's range at any logit)
    SCALE = 1e39


def _status(r, name):
    p = next(p for p in r.properties if (p["name"] if isinstance(p, dict) else p.name) == name)
    return p["status"] if isinstance(p, dict) else p.status


def test_seed_spread_compares_a_same_size_reference_entry_by_entry():
    from proofs_checks.comparisons import seed_spread

    r = seed_spread([[1.0, 2.0], [1.1, 2.1]], [[1.05], [2.05]])
    assert r.passed or "shape" in (r.justification + str(getattr(r, "reason", ""))).lower()


def test_relative_compares_a_same_size_reference_entry_by_entry():
    from proofs_checks.comparisons import relative

    r = relative([1.0, 2.0], [[1.0], [2.0]], 1e-3, "x")
    assert r.passed or "shape" in (r.justification + str(getattr(r, "reason", ""))).lower()


def test_scale_row_is_not_ok_when_its_tolerance_admits_any_scale():
    from proofs_checks import check_attention

    r = check_attention(_Tiny100(), causal=True, mode="quick", scale=1e-300, isolate=False)
    assert _status(r, "scale_1_over_sqrt_dk") != "pass"


def test_dtype_row_is_not_a_failure_where_float32_overflows_for_any_implementation():
    from proofs_checks import check_attention

    r = check_attention(_Big39(), causal=True, mode="quick", scale=1e39, isolate=False)
    assert _status(r, "dtype_and_device_preserved") != "fail"


def test_a_correct_module_at_a_tiny_declared_scale_is_not_a_mismatch():
    from proofs_checks import check_attention

    r = check_attention(_T308(), causal=True, mode="quick", scale=1e-308, isolate=False)
    assert _status(r, "causal_no_future_leak") != "fail"
    assert r.verdict.outcome != "mismatch"


_BUF: dict = {}


def _ls_reused_buffer(xs, ys, xq):
    """Least squares, returned in one buffer the model reuses at every call (as a CUDA-graph output is)."""
    out = (torch.linalg.lstsq(xs, ys[..., None]).solution[..., 0] * xq).sum(-1)
    b = _BUF.setdefault(tuple(out.shape), torch.empty_like(out))
    b.copy_(out)
    return b


def test_icl_model_returning_a_reused_buffer_is_still_least_squares():
    from proofs_checks import check_icl_model

    r = check_icl_model(_ls_reused_buffer, lambdas="1,1", N=10, mode="quick", isolate=False)
    assert r.closest_algorithm == "least_squares" and r.verdict.outcome == "ok"


class _S1em7(_Attn):  # 10 × the declared --scale 1e-8
    SCALE = 1e-7


def test_probes_without_a_finite_float16_tolerance_do_not_let_a_wrong_scale_pass():
    from proofs_checks import check_attention

    r = check_attention(_S1em7(), causal=True, mode="quick", scale=1e-8, compute_dtype="float16", isolate=False)
    assert r.verdict.outcome != "ok"
    assert _status(r, "matches_reference") != "pass"


def _zero_predictor(xs, ys, xq):
    return torch.zeros(xq.shape[:-1], dtype=xq.dtype)


def test_icl_zero_model_is_not_identified_through_an_overflowed_float16_tolerance():
    from proofs_checks import check_icl_model

    r = check_icl_model(_zero_predictor, lambdas="1e4,1e4", N=10, mode="quick", compute_dtype="float16", isolate=False)
    assert r.verdict.outcome != "ok"
