"""Structural properties are judged by what they mean (issue 42): a token the causal mask forbids, a
padded key or another sample of the batch moves a correct module's output by *exactly nothing*, in any
precision, so their tolerance is the module's own run-to-run difference (0 when deterministic), never
the forward tolerance; outputs are copied before the next call (a reused output buffer is not a leak);
every sample of the batch is watched."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from proofs_checks.sanity.attention import run_attention

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import attention_corpus as C  # noqa: E402

_DT = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check(obj, **kw):
    kw.setdefault("mode", "quick")
    return run_attention(obj, **kw)


def by_name(r):
    return {p["name"]: p for p in r.properties}


class WorkIn(C.Plain):
    """Causal multi-head attention computed in ``work`` (None: the input's dtype), optionally adding
    ``leak``·x_{t+1} to output t (a future-token leak of a chosen size)."""

    def __init__(self, work: str | None = None, leak: float = 0.0, sdpa: bool = False):
        super().__init__()
        self.work, self.leak, self.sdpa = work, leak, sdpa

    def forward(self, x):
        dt = _DT[self.work] if self.work else x.dtype
        xw = x.to(dt)

        def lin(layer, z):
            return F.linear(z, layer.weight.to(dt), layer.bias.to(dt))

        q, k, v = (C._heads(lin(layer, xw), self.num_heads) for layer in (self.q_proj, self.k_proj, self.v_proj))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~self.mask(x.shape[1], x.device),
                                                                                float("-inf"))
            a = torch.softmax(s, -1) @ v
        o = lin(self.o_proj, C._merge(a))
        if self.leak:
            nxt = torch.zeros_like(xw)
            nxt[:, :-1] = xw[:, 1:]
            o = o + self.leak * nxt
        return o.to(x.dtype)


@pytest.mark.parametrize("work", ["float64", "float32", "bfloat16", "float16"])
def test_a_small_future_leak_is_a_mismatch_at_every_declared_precision(work):
    r = check(WorkIn(work, leak=1e-3), causal=True, compute_dtype=work)
    p = by_name(r)["causal_no_future_leak"]
    assert r.outcome == "mismatch" and p["status"] == "fail", str(r)
    assert "LEAK" in p["detail"] and "exact" in p["justification"], p
    assert p["tolerance"] == 0.0, p  # a deterministic module: nothing may move


def test_a_rounding_sized_leak_in_a_float32_module_is_a_mismatch():
    r = check(WorkIn("float32", leak=3e-8), causal=True, compute_dtype="float32")
    p = by_name(r)["causal_no_future_leak"]
    assert p["status"] == "fail" and "LEAK" in p["detail"], str(r)
    assert p["error"] < 1e-5, p  # of the size of float32 rounding, and still a leak
    r = check(WorkIn("float32", leak=3e-8), causal=True, dtype="float32")
    assert by_name(r)["causal_no_future_leak"]["status"] == "fail", str(r)


@pytest.mark.parametrize("make, kw", [
    (lambda: nn.MultiheadAttention(32, 4, batch_first=True), {"dtype": "float32"}),
    (lambda: WorkIn(sdpa=True), {"dtype": "float32"}),
    (lambda: WorkIn("bfloat16", sdpa=True), {"compute_dtype": "bfloat16"}),
    (lambda: WorkIn("bfloat16"), {"compute_dtype": "bfloat16"}),
])
def test_correct_causal_modules_stay_ok_in_lower_precisions(make, kw):
    r = check(make(), causal=True, **kw)
    p = by_name(r)
    assert p["causal_no_future_leak"]["status"] == "pass" and p["causal_no_future_leak"]["error"] == 0.0, str(r)
    assert p["batch_independence"]["status"] == "pass", str(r)
    assert r.outcome == "ok", str(r)


class ReusedBuffer(C.Plain):
    """Correct causal attention that writes every no-grad result into one output buffer it keeps
    (as inference servers do) and returns that buffer."""

    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, x):
        out = super().forward(x)
        if torch.is_grad_enabled():
            return out
        if self.buf is None or self.buf.shape != out.shape or self.buf.dtype != out.dtype:
            self.buf = torch.empty_like(out)
        self.buf.copy_(out)
        return self.buf


def test_a_reused_output_buffer_is_not_a_leak():
    r = check(ReusedBuffer(), causal=True)
    p = by_name(r)
    assert p["causal_no_future_leak"]["status"] == "pass", str(r)
    assert r.outcome == "ok", str(r)


class PackedBatch(C.Plain):
    """Correct for sample 0; every later sample also reads sample 0 (a packed batch whose samples
    see each other): only watching sample 0 misses it."""

    def forward(self, x):
        out = super().forward(x)
        return torch.cat([out[:1], out[1:] + 1e-3 * x[:1]], 0)


def test_batch_independence_watches_every_sample():
    r = check(PackedBatch(), causal=True)
    p = by_name(r)["batch_independence"]
    assert p["status"] == "fail" and "sample 1" in p["detail"], str(r)
    assert p["tolerance"] == 0.0, p


class KerasLikeFloat64CausalMHA(C.Plain):
    """A stand-in for keras 3 ``MultiHeadAttention(dtype="float64", use_causal_mask=True)``: a float64
    layer whose causal fast path computes in float32 (4e-7 relative on float64 inputs)."""

    def forward(self, x):
        y = WorkIn.forward(self, x)  # noqa: the float32 path of a float64 layer
        return y

    work, leak, sdpa = "float32", 0.0, True


def test_a_float64_layer_computing_in_float32_is_a_precision_mismatch_unless_declared():
    r = check(KerasLikeFloat64CausalMHA(), causal=True)
    assert r.outcome == "mismatch" and "precision_as_declared" in r.failed, str(r)
    assert "violates: precision_as_declared (it computes in float32, not float64)" in r.verdict.summary
    assert "float32" in r.verdict.summary and "computes in float32" in by_name(r)["precision_as_declared"]["detail"]
    assert by_name(r)["causal_no_future_leak"]["status"] == "pass", str(r)
    r = check(KerasLikeFloat64CausalMHA(), causal=True, compute_dtype="float32")
    assert r.outcome == "ok", str(r)


def test_the_window_a_module_keeps_is_measured_and_said():
    """Issue 42: where the declaration and the module may differ, what the module does is measured: redraw
    token t−k and see which k move output t."""
    r = check(C.Windowed(), causal=True, window="4")  # the module keeps 3 keys
    note = [line for line in r.lines if line.startswith("note: window:")]
    assert r.outcome == "mismatch" and note, r.lines
    assert "declared 4 keys" in note[0] and "the module keeps 3 keys (t−2 … t) as measured" in note[0], note
    assert r.doc["inputs"]["window_measured"].startswith("declared 4 keys")


class OneBatchSizeWrong(C.Plain):
    """Exact but for one batch size a property uses (the stacked redraws' 12 at the quick sizes): × 1.5 there."""

    def forward(self, x):
        out = super().forward(x)
        return out * 1.5 if x.shape[0] == 12 else out


def test_every_batch_size_the_checks_use_is_judged_against_known_outputs(monkeypatch):
    """The class of calls compared only with themselves (hostile passes 29b, 30b): with the comparisons made for the
    stacked calls switched off, the audit of every call shape still finds a module wrong at one batch size alone, and
    a correct module's row says how many batch sizes it ran again."""
    from numerics import attention_structural as S

    monkeypatch.setattr(S, "_other_sizes", lambda probe, unit=False: [])
    p = by_name(check(OneBatchSizeWrong(dim=16), causal=True, mode="quick"))["batch_size_independence"]
    assert p["status"] == "fail" and "a batch of 12" in p["detail"], p
    ok = by_name(check(C.Plain(dim=16), causal=True, mode="quick"))["batch_size_independence"]
    assert ok["status"] == "pass" and "other call shapes the checks called it with" in ok["detail"], ok


class TrainingBatchSizeNaN(C.Plain):
    """Exact on every path but in training mode at one batch size a property uses (12): a NaN in its last row."""

    def forward(self, x):
        out = super().forward(x)
        if self.training and x.shape[0] == 12:
            out = out.clone()
            out[-1, -1] = float("nan")
        return out


def test_every_batch_size_is_judged_on_the_other_paths_too(monkeypatch):
    """31b F1 on the training path: the audit of the call shapes runs through each other path as well, against that
    path's probe batch (the stacked calls' own comparisons switched off, as above)."""
    from numerics import attention_structural as S

    monkeypatch.setattr(S, "_other_sizes", lambda probe, unit=False: [])
    p = by_name(check(TrainingBatchSizeNaN(dim=16), causal=True, mode="quick"))["matches_reference_on_other_paths"]
    assert p["status"] == "fail" and "a batch of 12" in p["detail"] and "training mode" in p["detail"], p
