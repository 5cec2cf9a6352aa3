"""Hostile pass 26, tester B: reproducers (each xfails on the frozen code: the verdict is false)."""
import textwrap

import pytest
from cli_helpers import SEEDED_INIT, tv_here

ATT = textwrap.dedent('''
    import math, torch, torch.nn as nn
    D, H = 16, 4
    class Attn(nn.Module):
        fill_b1 = -50.0
        @SEEDED_INIT@
        def fill(self, B):
            return float("-inf")
        def forward(self, x):
            B, T, _ = x.shape; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            s = q @ k.transpose(-1, -2) / math.sqrt(dk)
            allow = torch.ones(T, T, dtype=torch.bool).tril()
            s = s.masked_fill(~allow, self.fill(B))
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    class FillB1(Attn):
        # a single sequence's path fills the causal mask with -50, not -inf: a future token leaks at large logits
        def fill(self, B):
            return -50.0 if B == 1 else float("-inf")
    class WinFillB1(Attn):
        # causal window 5: keys outside the window filled with -50 in calls of a single sequence
        def forward(self, x):
            B, T, _ = x.shape; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            s = q @ k.transpose(-1, -2) / math.sqrt(dk)
            i = torch.arange(T); rel = i[:, None] - i[None, :]
            s = s.masked_fill(rel < 0, float("-inf")).masked_fill(rel >= 5, -50.0 if B == 1 else float("-inf"))
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    class PadFillB1(Attn):
        # key padding (keep) filled with -50 in calls of a single sequence
        def forward(self, x, mask=None):
            B, T, _ = x.shape; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            s = q @ k.transpose(-1, -2) / math.sqrt(dk)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask[:, None, None, :], self.pad_fill(B))
            return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
        def pad_fill(self, B):
            return -50.0 if B == 1 else float("-inf")
    class PadDropB1Short(PadFillB1):
        # a single sequence shorter than 30 tokens "has no padding": its key-padding mask is ignored
        def pad_fill(self, B):
            return float("-inf")
        def forward(self, x, mask=None):
            if x.shape[0] == 1 and x.shape[1] < 30:
                mask = None
            return super().forward(x, mask)
    class CrossMeanB8(Attn):
        # batches of 8 sequences or more: every output also reads the batch's mean input (a cross-sample leak)
        def forward(self, x):
            out = super().forward(x)
            return out + 1e-3 * x.mean(0, keepdim=True) if x.shape[0] >= 8 else out
    class MaxB16FillB8(Attn):
        # at most 16 sequences a call (a static cache); batches of 8 or more fill the causal mask with -50
        def fill(self, B):
            return -50.0 if B >= 8 else float("-inf")
        def forward(self, x):
            if x.shape[0] > 16:
                raise RuntimeError(f"max batch size 16, got {x.shape[0]}")
            return super().forward(x)
    class PadFillB8(PadFillB1):
        # a large-batch path (8 sequences or more) fills the padded keys with -80
        def pad_fill(self, B):
            return -80.0 if B >= 8 else float("-inf")
''').replace("@SEEDED_INIT@", SEEDED_INIT)


ICL_MEMO = textwrap.dedent('''
    import torch
    _stat = {}
    def memo(xs, ys, xq):
        # a batch statistic (computed over the batch's labels), kept as the running value a batch of one uses
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        if xs.shape[0] > 1:
            _stat["m"] = ys.mean()
        return (xq.unsqueeze(-2) @ w).reshape(-1) + 0.05 * _stat.get("m", ys.mean())
''')


HOP = textwrap.dedent('''
    import torch
    def update(xi, patterns, beta):
        return torch.softmax(beta * xi @ patterns.T, dim=-1) @ patterns
    def wrong_single(xi, patterns, beta):
        # a single state (one query: the usual retrieval) takes another path, which forgets beta
        if xi.shape[0] == 1:
            return torch.softmax(xi @ patterns.T, dim=-1) @ patterns
        return update(xi, patterns, beta)
''')


def test_f4_hopfield_update_wrong_for_a_single_state(tmp_path):
    import numpy as np
    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).standard_normal((12, 16))))
    (tmp_path / "hop.py").write_text(HOP)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(tmp_path / "P.npy"), "--beta", "0.5", "--module",
                str(tmp_path / "hop.py") + ":wrong_single")
    assert r.returncode == 1, r.stdout + r.stderr


ICL_EXIT = textwrap.dedent('''
    import sys
    import torch
    def ls(xs, ys, xq):
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        return (xq.unsqueeze(-2) @ w).reshape(-1)
    def sysexit_alone(xs, ys, xq):
        if xs.shape[0] == 1:
            sys.exit(0)
        return ls(xs, ys, xq)
    def sysexit_m5(xs, ys, xq):
        if xs.shape[1] == 5:
            sys.exit(0)
        return ls(xs, ys, xq)
''')


def test_f5_icl_sys_exit_in_the_batch_of_one_is_a_usage_error(tmp_path):
    (tmp_path / "icl.py").write_text(ICL_EXIT)
    base = ("check", "icl", "--lambda", "1,2", "--N", "10", "--M", "10", "--model")
    r5 = tv_here(tmp_path, *base, str(tmp_path / "icl.py") + ":sysexit_m5")
    assert r5.returncode == 2, r5.stdout + r5.stderr  # the control: holds
    r = tv_here(tmp_path, *base, str(tmp_path / "icl.py") + ":sysexit_alone")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sys.exit" in r.stderr


ICL_MICRO = textwrap.dedent('''
    import torch
    def microbatch_bn(xs, ys, xq):
        # batch statistics per micro-batch of 64 prompts; a last, partial micro-batch uses none (as drop_last would)
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        p = (xq.unsqueeze(-2) @ w).reshape(-1).clone()
        for s in range(0, xs.shape[0] - 63, 64):
            p[s:s + 64] = p[s:s + 64] + 0.05 * ys[s:s + 64].mean()
        return p
''')


def test_f9_hopfield_theorem5_not_run_is_not_ok(tmp_path):
    import numpy as np
    np.save(tmp_path / "P.npy", np.array([[1.0], [-1.0]]))
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(tmp_path / "P.npy"), "--beta", "1")
    assert "one_step_within_theorem5_bound  skip" in r.stdout, r.stdout + r.stderr  # the property did not run
    assert r.returncode == 3, r.stdout + r.stderr


_KEEP = ("--mask-convention", "keep")


@pytest.mark.parametrize("cls, flags, prop", [
    pytest.param("FillB1", (), "causal_no_future_leak", id="F1-causal-fill-single-sequence"),
    pytest.param("WinFillB1", ("--window", "5"), "window_respected", id="F1-window-fill-single-sequence"),
    pytest.param("PadFillB1", _KEEP, "key_padding_respected", id="F2-padding-fill-single-sequence"),
    pytest.param("PadFillB8", _KEEP, "key_padding_respected", id="F2-padding-fill-large-batch"),
    pytest.param("PadDropB1Short", _KEEP, "key_padding_respected", id="F7-padding-dropped-short-single-sequence"),
    pytest.param("CrossMeanB8", (), "batch_independence", id="F8-cross-sample-large-batch"),
    pytest.param("MaxB16FillB8", (), "causal_no_future_leak", id="F10-fill-below-the-maximum-batch")])
def test_a_wrong_module_on_a_small_or_large_batch_path_is_a_mismatch(tmp_path, cls, flags, prop):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", str(tmp_path / "att.py") + ":" + cls, "--causal",
                "--quick", *flags)
    assert r.returncode == 1, r.stdout + r.stderr
    assert prop in r.stdout.split("verdict:")[-1]


@pytest.mark.parametrize("text, name", [pytest.param("ICL_MEMO", "memo", id="F3-statistic-kept-for-a-batch-of-one"),
                                        pytest.param("ICL_MICRO", "microbatch_bn", id="F6-outside-the-last-prompts")])
def test_an_icl_model_reading_other_prompts_is_a_mismatch(tmp_path, text, name):
    (tmp_path / "icl.py").write_text(globals()[text])
    r = tv_here(tmp_path, "check", "icl", "--model", str(tmp_path / "icl.py") + ":" + name, "--lambda", "1,2",
                "--N", "10", "--M", "10")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "batch_independence" in r.stdout.split("verdict:")[-1]
