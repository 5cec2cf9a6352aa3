"""Hostile pass 32 (run at the end of the fourteenth session), tester B: reproducers. F2, F3 fixed in the
fourteenth session, F1, F2's single sequence under inference mode, F4 and F5 in the fifteenth."""

import textwrap

import pytest
from cli_helpers import mismatch_here, causal_attn, tv_here

from tests.test_hostile_round37b import ATT as ATT37

# --- 32B F1: the power rule's "one input where every output is 0" guard, escaped by two such inputs -------------------

def _false_claim(points, two_args, form=None):
    """The false identity ``3x = 2x`` (``3xy = 2xy`` with ``two_args``), its checks reading it at ``points`` only;
    ``form`` instead of ``3x`` (one argument; its mutant ``form(x) + 1``)."""
    import numpy as np
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, compare, numeric, symbolic

    def derive():
        b = DerivationBuilder("2xy" if two_args else "2x")
        syms = (sp.Symbol("x", real=True), sp.Symbol("y", real=True)) if two_args else (sp.Symbol("x", real=True),)
        a = b.fact("args", syms)
        return b.done(b.step("product", 2 * a[0] * a[1] if two_args else 2 * a[0]))

    def err(form):
        if two_args:
            return max(abs(float(form(x, y)) - 2 * x * y) for x, y in points)
        return max(float(np.max(np.abs(np.asarray(form(x), float) - 2 * np.asarray(x, float)))) for x in points)

    @symbolic("at x = 0")
    def sym(form, ctx):
        return compare(err(form), 1e-12, "float64 rounding")

    @numeric("at x = 0")
    def num(form, ctx):
        return compare(err(form), 1e-12, "float64 rounding")

    if two_args:
        form, mut = (lambda x, y: 3 * x * y), (lambda x, y: x * y + 1)
    elif form is not None:
        mut = lambda x: form(x) + 1  # noqa: E731
    else:
        form, mut = (lambda x: 3 * x), (lambda x: x + 1)
    return Claim(id="mine.threex", title="3x = 2x", statement="3x = 2x", source="none", kind="identity", form=form,
                 derivation=derive, checks=(sym, num), mutants=(Mutant("plus1", "extra term", "x+1", mut),))


def test_32b_f1_false_identity_read_on_its_zero_set_at_two_inputs_is_not_verified():
    from proofs_checks.plugin import check_claim

    r = check_claim(_false_claim([(0.0, 1.0), (0.0, 2.0)], True))
    assert r.status != "verified", r.message


def test_32b_f1_false_identity_read_at_one_zero_in_two_shapes_is_not_verified():
    import numpy as np
    from proofs_checks.plugin import check_claim

    r = check_claim(_false_claim([0.0, np.zeros(3)], False))
    assert r.status != "verified", r.message


# --- 32B F2: another path (autograd on, training mode) wrong only at batch sizes >= 5 and T >= 3 ----------------------

ATT = causal_attn(8, 2, '''
    def _leaky(cond):
        # the causal mask dropped where cond(module, B, T) holds
        class L(Attn):
            def forward(self, x):
                B, T, _ = x.shape
                s, v = self.scores(x)
                if not cond(self, B, T):
                    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
                return self.finish(s, v, B, T)
        return L
    GradBigLeak = _leaky(lambda m, B, T: torch.is_grad_enabled() and B >= 5 and T >= 3)  # autograd on (a training step)
    TrainBigLeak = _leaky(lambda m, B, T: m.training and B >= 5 and T >= 3)  # training mode
    InfBigLeak = _leaky(lambda m, B, T: torch.is_inference_mode_enabled() and B >= 5 and T >= 3)  # serving
    InfAloneLeak = _leaky(lambda m, B, T: torch.is_inference_mode_enabled() and B == 1 and T >= 3)  # one prompt served
''')


@pytest.mark.parametrize("name", ["GradBigLeak", "TrainBigLeak", "InfBigLeak", "InfAloneLeak"])
def test_32b_f2_leak_on_another_path_at_real_batch_sizes_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)


# --- 32B F3: 31b F1's large-batch path, taken only at T >= 3, on the eval path -----------------------------------------

ATT3 = ATT37 + textwrap.dedent('''
    class BigBatchNoScaleT3(BigBatchNoScale):
        # 31b F1's path for batches above 16, taken at T >= 3 only (a kernel with a minimum length)
        def forward(self, x):
            return super().forward(x) if x.shape[1] >= 3 else Attn.forward(self, x)
    class BigBatchWrongT3(BigBatchWrong):
        def forward(self, x):
            return super().forward(x) if x.shape[1] >= 3 else Attn.forward(self, x)
''')


@pytest.mark.parametrize("name", ["BigBatchNoScaleT3", "BigBatchWrongT3"])
def test_32b_f3_wrong_large_batch_path_at_lengths_from_3_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT3, name)


# --- 32B F4: a custom backward wrong only for a single sequence --------------------------------------------------------

ATT4 = causal_attn(8, 2, '''
    class _G1(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            ctx.one = y.shape[0] == 1
            return y.clone()
        @staticmethod
        def backward(ctx, g):
            return 1.5 * g if ctx.one else g
    class GradWrongAlone(Attn):
        # the forward is right; the backward of a single sequence is 1.5 x the gradient
        def forward(self, x):
            return _G1.apply(super().forward(x))
''')


def _mismatch(tmp_path, text: str, cls: str) -> None:
    r = mismatch_here(tmp_path, text, cls)


def test_32b_f4_backward_wrong_for_a_single_sequence_is_not_ok(tmp_path):
    _mismatch(tmp_path, ATT4, "GradWrongAlone")


# --- 32B F5: training mode with autograd on (a training step) is never called -----------------------------------------

ATT5 = ATT + "TrainGradLeak = _leaky(lambda m, B, T: m.training and torch.is_grad_enabled())  # a training step\n"


def test_32b_f5_leak_in_a_training_step_is_not_ok(tmp_path):
    _mismatch(tmp_path, ATT5, "TrainGradLeak")
