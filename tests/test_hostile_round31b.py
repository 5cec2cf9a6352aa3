"""Hostile pass 25, tester B: reproducers; F1, F2, F4, F5 and F6 are fixed (F2 and F6 in the twelfth session: the leak and padding redraws run in calls of a single sequence and of the probe batch too)."""
import textwrap

import pytest

ICL = textwrap.dedent('''
    import torch
    def ls(xs, ys, xq):
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        return (xq.unsqueeze(-2) @ w).reshape(-1)
    def dep_prompt0(xs, ys, xq):
        return ls(xs, ys, xq) + 0.01 * ys[0].mean()
    def dep_late(xs, ys, xq):
        p = ls(xs, ys, xq)
        if xs.shape[1] > 1:
            p = p + 0.01 * ys.mean()
        return p
    def bn_raise_b2(xs, ys, xq):
        if xs.shape[0] == 2:
            raise RuntimeError("needs a full batch")
        return ls(xs, ys, xq) + 0.01 * ys.mean()
''')

_INIT = "\n".join([  # the modules' projections, seeded
    "g = torch.Generator().manual_seed(0)",
    "self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)",
    "self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)",
    "for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):",
    "    with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)"])

ATT = textwrap.dedent('''
    import math, torch, torch.nn as nn
    D, H = 16, 2
    class PadLeakBatch1(nn.Module):
        def __init__(self):
            super().__init__()
            @INIT@
            self.num_heads = H; self.embed_dim = D
        def forward(self, x, mask=None):
            if x.shape[0] == 1:          # a single sequence "has no padding"
                mask = None
            B, T, _ = x.shape
            sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            s = q @ k.transpose(-1, -2) / math.sqrt(D // H)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
            o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
            return self.o_proj(o)
    class CausalMaxB32(PadLeakBatch1):
        def forward(self, x, mask=None):
            if x.shape[0] > 32:
                raise RuntimeError("max batch size 32")
            return super().forward(x, mask if x.shape[0] > 1 else None)
''').replace("@INIT@", _INIT.replace("\n", "\n        "))


def _cli(tmp_path, *args):
    """The command in this process (its verdict is the subject; the user's code runs in the check's isolated child as
    ever; issue 46: a fresh interpreter per test cost ≈ 3 CPU s)."""
    from tests.cli_helpers import tv_here

    return tv_here(tmp_path, *args)


@pytest.mark.parametrize("name", ["dep_prompt0", "dep_late"])
def test_icl_batch_dependence_is_not_ok(tmp_path, name):
    (tmp_path / "icl1.py").write_text(ICL)
    r = _cli(tmp_path, "check", "icl", "--model", f"icl1.py:{name}", "--lambda", "1,2", "--N", "10", "--M", "10")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]


def test_icl_batch_independence_not_run_is_not_ok(tmp_path):
    (tmp_path / "icl1.py").write_text(ICL)
    r = _cli(tmp_path, "check", "icl", "--model", "icl1.py:bn_raise_b2", "--lambda", "1,2", "--N", "10", "--M", "10")
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_attention_max_batch_is_not_a_leak(tmp_path):
    (tmp_path / "att.py").write_text(ATT)
    r = _cli(tmp_path, "check", "attention", "--module", "att.py:CausalMaxB32", "--causal", "--quick")
    assert r.returncode != 1, r.stdout[-2000:] + r.stderr[-2000:]


GEN = textwrap.dedent('''
    import math, torch, torch.nn as nn
    class SmallBatchAddLeak(nn.Module):
        def __init__(self, D=16, H=4):
            super().__init__()
            @INIT@
            self.num_heads, self.embed_dim = H, D
        def forward(self, x):
            B, T, D = x.shape; H = self.num_heads; dk = D // H
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            s = q @ k.transpose(-1, -2) / math.sqrt(dk)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            out = self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
            if B <= 4 and T > 1:   # small-batch path: output t reads 1e-7 of output t+1
                out = out + 1e-7 * torch.cat([out[:, 1:], torch.zeros_like(out[:, :1])], dim=1)
            return out
''').replace("@INIT@", _INIT.replace("\n", "\n        "))


@pytest.mark.parametrize("text, spec, flags", [
    pytest.param("ATT", "att.py:PadLeakBatch1", ("--mask-convention", "keep"), id="F2-padding-at-batch-one"),
    pytest.param("GEN", "att.py:SmallBatchAddLeak", ("--dtype", "float32"), id="F6-leak-in-small-batches")])
def test_a_small_batch_path_is_probed(tmp_path, text, spec, flags):
    (tmp_path / "att.py").write_text(globals()[text])
    r = _cli(tmp_path, "check", "attention", "--module", spec, "--causal", "--quick", *flags)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]


PAD6 = ATT.replace("        if x.shape[0] == 1:          # a single sequence \"has no padding\"\n            mask = None\n",
                   "        if mask is not None:         # a sample padding exactly 6 keys attends to them\n"
                   "            mask = mask | ((~mask).sum(-1, keepdim=True) == 6)\n")


def test_a_padding_count_the_probe_batch_does_not_draw_is_probed(tmp_path):
    """25b F3: key padding was probed at about four counts of padded keys per length; a module that ignores the mask
    of a sample padding exactly 6 keys passed. One call now pads every count from 1 to T − 1 (T ≤ 65)."""
    from cli_helpers import tv_here

    assert "== 6" in PAD6
    (tmp_path / "att.py").write_text(PAD6)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:PadLeakBatch1", "--causal", "--quick",
                "--mask-convention", "keep", "--no-progress")
    assert r.returncode == 1 and "key_padding_respected" in r.stdout.split("verdict:")[-1], r.stdout[-2000:]


def test_the_padding_count_call_runs_block_by_block_where_the_module_refuses_its_batch(tmp_path):
    """The call padding every count (16 sequences at T = 17) is refused by a module with a maximum batch of 8: it runs
    block by block at the probe's batch size, as the stacked redraws do (25b F5), never read as a failure."""
    from cli_helpers import tv_here

    text = ATT.replace("        if x.shape[0] == 1:          # a single sequence \"has no padding\"\n            mask = None\n",
                       "        if x.shape[0] > 8:\n            raise RuntimeError(\"max batch size 8\")\n")
    assert "max batch size 8" in text
    (tmp_path / "att.py").write_text(text)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:PadLeakBatch1", "--causal", "--quick",
                "--mask-convention", "keep", "--no-progress")
    assert r.returncode == 0, r.stdout[-2000:]
