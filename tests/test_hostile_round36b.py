"""Hostile pass 30, tester B: reproducers (expected failures until fixed)."""
import textwrap

import pytest
from cli_helpers import mismatch_here, causal_attn, icl_mismatch_here, tv_here
from tests.test_hostile_round35b import ICL as ICL_29B  # (its least_squares predictor and the 29b F3 models)

ATT = causal_attn(8, 2, '''
    class StackWrong(Attn):
        # every batch larger than 4 but 16 (the stacked redraw calls): output x 1.5
        def forward(self, x):
            y = super().forward(x)
            return y * 1.5 if x.shape[0] > 4 and x.shape[0] != 16 else y
    class StackNaN(Attn):
        # the same batches: one NaN in sample 0
        def forward(self, x):
            y = super().forward(x)
            if x.shape[0] > 4 and x.shape[0] != 16:
                y = y.clone(); y[0, 0, 0] = float("nan")
            return y
    class StackRoundBF16(Attn):
        # the same batches: outputs rounded to bfloat16 (precision silently lowered there)
        def forward(self, x):
            y = super().forward(x)
            return y.to(torch.bfloat16).to(x.dtype) if x.shape[0] > 4 and x.shape[0] != 16 else y
    class TrainDiff(Attn):
        # training mode (`on`): the same numbers up to rounding, and x 1.5 for a single sequence
        def on(self):
            return self.training
        def forward(self, x):
            y = super().forward(x)
            if self.on():
                y = (y * 3.0) / 3.0
                if x.shape[0] == 1: y = y * 1.5
            return y
    class GradDiff(TrainDiff):
        # the same with autograd on
        def on(self):
            return torch.is_grad_enabled()
    class TrainBatchLeak(Attn):
        # training mode: the same numbers up to rounding; batches of 16 or more read the batch mean
        def forward(self, x):
            y = super().forward(x)
            if self.training:
                y = (y * 3.0) / 3.0
                if x.shape[0] >= 16: y = y + 1e-3 * x.mean(0, keepdim=True)
            return y
''')


@pytest.mark.parametrize("name", ["StackWrong", "StackNaN", "StackRoundBF16"])
def test_30b_f1_wrong_output_in_the_stacked_calls_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)


@pytest.mark.parametrize("name", ["TrainDiff", "GradDiff"])
def test_30b_f2_single_sequence_wrong_on_another_path_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)


ICL = ICL_29B + textwrap.dedent('''
    def nan8(xs, ys, xq):
        # in a batch of 8, prompt 3's prediction is NaN
        y = least_squares(xs, ys, xq)
        if xs.shape[0] == 8:
            y = y.clone(); y[3] = float("nan")
        return y
    def b8last(xs, ys, xq):
        # in a batch of 8, the last prediction x 1.5
        y = least_squares(xs, ys, xq)
        if xs.shape[0] == 8:
            y = y.clone(); y[-1] = y[-1] * 1.5
        return y
''')


@pytest.mark.parametrize("name", ["nan8", "b8last"])
def test_30b_f3_icl_model_wrong_prediction_in_a_batch_of_8_is_not_ok(tmp_path, name):
    icl_mismatch_here(tmp_path, ICL, name)


@pytest.mark.xfail(strict=True, reason="a documented limit (docs/extending.md, 'The power rule'): 30b F4: the perturbations are relative to the outputs' size; an absolute tolerance that admits the claimed difference behind a large constant offset still rejects them")
def test_30b_f4_a_false_identity_behind_a_large_offset_is_not_verified():
    import numpy as np
    from proofs_checks.comparisons import close
    from proofs_checks.plugin import Check, Claim, Mutant, check_claim

    def form(x):  # the claim says 1e6 + 2x
        return 1e6 + 3 * np.asarray(x, dtype=float)

    def chk(f, ctx):
        x = ctx.rng().standard_normal(20)
        return close(np.asarray(f(x)), 1e6 + 2 * x, 5.0, "absolute 5")

    c = Claim(id="zzb30.offset", title="1e6 + 3x = 1e6 + 2x", statement="1e6 + 3x = 1e6 + 2x", source="false",
              kind="identity", form=form, checks=(Check("c0", "numeric", chk),), no_symbolic="numeric only",
              mutants=(Mutant("huge", "wrong constant", "1e5 x", lambda x: 1e5 * form(x)),))
    r = check_claim(c)
    assert r.status != "verified", r.message


def test_30b_f5_cross_sample_term_in_large_batches_on_the_training_path_is_not_ok(tmp_path):
    r = mismatch_here(tmp_path, ATT, "TrainBatchLeak")


CAUSAL = causal_attn(8, 2)  # a correct causal attention


def test_30b_f6_a_window_whose_look_back_is_never_reached_is_inconclusive(tmp_path):
    (tmp_path / "att.py").write_text(CAUSAL)
    same = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--causal", "--window", "4",
                   "--seq-len", "4")
    assert same.returncode == 3, (same.returncode, same.stdout[-800:])
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Attn", "--window", "3,0", "--seq-len", "4")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 3, (r.returncode, r.stdout[-1500:])
