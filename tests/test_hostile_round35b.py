"""Hostile pass 29, tester B: reproducers, all fixed."""
import textwrap

import pytest
from cli_helpers import mismatch_here, causal_attn, icl_mismatch_here, tv_here

ATT = causal_attn(8, 2, '''
    class LeafGradInf(Attn):
        # the training path (autograd on, the input a leaf requiring grad) at T = 5: last row FILL
        FILL = float("inf")
        def forward(self, x):
            y = super().forward(x)
            if x.requires_grad and x.is_leaf and x.shape[1] == 5:
                y = y + torch.where(torch.arange(5)[None, :, None] == 4, self.FILL, 0.0)
            return y
    class LeafGradNaN(LeafGradInf):
        # the same with NaN
        FILL = float("nan")
    class BigBatchNaN(Attn):
        # batches of 8 or more (the batch of 16 of batch_independence, the stacked redraws): last row NaN
        def forward(self, x):
            y = super().forward(x)
            T = x.shape[1]
            if x.shape[0] >= 8:
                y = y + torch.where(torch.arange(T)[None, :, None] == T - 1, float("nan"), 0.0)
            return y
    class Batch16Wrong(Attn):
        # batches of 16 or more: every output x 1.5
        def forward(self, x):
            y = super().forward(x)
            return y * 1.5 if x.shape[0] >= 16 else y
    class B1LargeWrong(Attn):
        # a single sequence at large logits (|x| > 10): every output x 1.5
        def forward(self, x):
            y = super().forward(x)
            return y * 1.5 if x.shape[0] == 1 and x.abs().amax() > 10 else y
''')


@pytest.mark.parametrize("name", ["LeafGradInf", "LeafGradNaN"])
def test_29b_f1_nonfinite_output_on_the_training_path_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)
    assert "difference nan ≤" not in r.stdout


@pytest.mark.parametrize("name", ["BigBatchNaN", "Batch16Wrong"])
def test_29b_f2_outputs_of_the_large_batch_calls_are_judged(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)


ICL = textwrap.dedent('''
    import torch
    def least_squares(xs, ys, xq):
        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        return (xq.unsqueeze(-2) @ w).reshape(-1)
    def nan_b8(xs, ys, xq):  # NaN predictions for a batch of 8 prompts
        out = least_squares(xs, ys, xq)
        return out * float("nan") if xs.shape[0] == 8 else out
    def wrong_b8(xs, ys, xq):  # predictions x 1.5 for a batch of 8 prompts
        out = least_squares(xs, ys, xq)
        return out * 1.5 if xs.shape[0] == 8 else out
''')


@pytest.mark.parametrize("name", ["nan_b8", "wrong_b8"])
def test_29b_f3_icl_predictions_in_the_batches_of_8_are_judged(tmp_path, name):
    icl_mismatch_here(tmp_path, ICL, name)


PAD = causal_attn(8, 2, '''
    class PadBigWrong(Attn):
        # correct with a keep-mask, but every output x 1.5 in a call of 10 sequences or more (the call that pads
        # every count of keys)
        def forward(self, x, mask=None):
            B, T, _ = x.shape
            s, v = self.scores(x)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask.bool()[:, None, None, :], float("-inf"))
            y = self.o_proj((torch.nan_to_num(s.softmax(-1)) @ v).transpose(1, 2).reshape(B, T, D))
            return y * 1.5 if B >= 10 else y
    class PadB1Wrong(PadBigWrong):
        # every output x 1.5 for a padded sequence called alone (a batch of one with a padded key)
        def forward(self, x, mask=None):
            y = super().forward(x, mask)
            return y * 1.5 if x.shape[0] == 1 and mask is not None and not bool(mask.bool().all()) else y
''')


@pytest.mark.parametrize("name", ["PadBigWrong", "PadB1Wrong"])
def test_29b_f4_the_all_counts_padding_call_is_judged_against_the_reference(tmp_path, name):
    (tmp_path / "att.py").write_text(PAD)
    r = tv_here(tmp_path, "check", "attention", "--module", f"att.py:{name}", "--causal", "--mask-convention",
                "keep", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


def test_29b_f5_a_single_sequence_at_large_logits_is_judged(tmp_path):
    r = mismatch_here(tmp_path, ATT, "B1LargeWrong")
