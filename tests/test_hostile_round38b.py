"""Hostile pass 32 (run at the end of the fourteenth session), tester B: reproducers. F2 (but a single sequence under
inference mode) and F3 fixed; the strict xfails are open findings for the next session."""

import pytest
from cli_helpers import causal_attn, tv_here

# --- 32B F1: the power rule's "one input where every output is 0" guard, escaped by two such inputs -------------------

def _false_claim(points, two_args):
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
    else:
        form, mut = (lambda x: 3 * x), (lambda x: x + 1)
    return Claim(id="mine.threex", title="3x = 2x", statement="3x = 2x", source="none", kind="identity", form=form,
                 derivation=derive, checks=(sym, num), mutants=(Mutant("plus1", "extra term", "x+1", mut),))


@pytest.mark.xfail(strict=True, reason="32B F1, open: a false 3xy = 2xy read at two inputs where every output is 0 is verified")
def test_32b_f1_false_identity_read_on_its_zero_set_at_two_inputs_is_not_verified():
    from proofs_checks.plugin import check_claim

    r = check_claim(_false_claim([(0.0, 1.0), (0.0, 2.0)], True))
    assert r.status != "verified", r.message


@pytest.mark.xfail(strict=True, reason="32B F1, open: a false 3x = 2x read at x = 0 as a scalar and as zeros(3) is verified")
def test_32b_f1_false_identity_read_at_one_zero_in_two_shapes_is_not_verified():
    import numpy as np
    from proofs_checks.plugin import check_claim

    r = check_claim(_false_claim([0.0, np.zeros(3)], False))
    assert r.status != "verified", r.message


# --- 32B F2: another path (autograd on, training mode) wrong only at batch sizes >= 5 and T >= 3 ----------------------

ATT = causal_attn(8, 2, '''
    class GradBigLeak(Attn):
        # autograd on (a training step), batches of 5 or more at T >= 3: the causal mask is dropped
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (torch.is_grad_enabled() and B >= 5 and T >= 3):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
    class TrainBigLeak(Attn):
        # training mode, batches of 5 or more at T >= 3: the causal mask is dropped
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (self.training and B >= 5 and T >= 3):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
    class InfBigLeak(Attn):
        # under torch.inference_mode() (serving), batches of 5 or more at T >= 3: the causal mask is dropped
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (torch.is_inference_mode_enabled() and B >= 5 and T >= 3):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
    class InfAloneLeak(Attn):
        # under torch.inference_mode(), a single sequence (one prompt served) at T >= 3: the causal mask is dropped
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (torch.is_inference_mode_enabled() and B == 1 and T >= 3):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
''')


@pytest.mark.parametrize("name", ["GradBigLeak", "TrainBigLeak", "InfBigLeak", pytest.param("InfAloneLeak", marks=pytest.mark.xfail(
    strict=True, reason="32B F2, open: a single sequence under inference mode, at T >= 3 only, is not judged"))])
def test_32b_f2_leak_on_another_path_at_real_batch_sizes_is_not_ok(tmp_path, name):
    (tmp_path / "att.py").write_text(ATT)
    r = tv_here(tmp_path, "check", "attention", "--module", f"att.py:{name}", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


# --- 32B F3: 31b F1's large-batch path, taken only at T >= 3, on the eval path -----------------------------------------

ATT3 = causal_attn(8, 2, '''
    class BigBatchNoScaleT3(Attn):
        # a path for batches above 16 at T >= 3 (a kernel with a minimum length): samples from 16 on lack 1/sqrt(d_k)
        def forward(self, x):
            y = super().forward(x)
            if x.shape[0] > 16 and x.shape[1] >= 3:
                z = x[16:]
                B, T, _ = z.shape
                s, v = self.scores(z)
                s = (s * math.sqrt(D // H)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
                y = torch.cat([y[:16], self.finish(s, v, B, T)])
            return y
    class BigBatchWrongT3(Attn):
        # the same path: the samples from 16 on are 1.5 x the right output
        def forward(self, x):
            y = super().forward(x)
            if x.shape[0] > 16 and x.shape[1] >= 3:
                y = torch.cat([y[:16], 1.5 * y[16:]])
            return y
''')


@pytest.mark.parametrize("name", ["BigBatchNoScaleT3", "BigBatchWrongT3"])
def test_32b_f3_wrong_large_batch_path_at_lengths_from_3_is_not_ok(tmp_path, name):
    (tmp_path / "att.py").write_text(ATT3)
    r = tv_here(tmp_path, "check", "attention", "--module", f"att.py:{name}", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


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


@pytest.mark.xfail(strict=True, reason="32B F4, open: gradients are judged at the probe batch only; a backward wrong only for a batch of one is ok")
def test_32b_f4_backward_wrong_for_a_single_sequence_is_not_ok(tmp_path):
    (tmp_path / "att.py").write_text(ATT4)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:GradWrongAlone", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


# --- 32B F5: training mode with autograd on (a training step) is never called -----------------------------------------

ATT5 = causal_attn(8, 2, '''
    class TrainGradLeak(Attn):
        # a training step's path (training mode and autograd on): the causal mask is dropped, at every size
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            if not (self.training and torch.is_grad_enabled()):
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T)
''')


@pytest.mark.xfail(strict=True, reason="32B F5, open: the paths are probed one at a time; a leak in training mode with autograd on (a training step) is ok")
def test_32b_f5_leak_in_a_training_step_is_not_ok(tmp_path):
    (tmp_path / "att.py").write_text(ATT5)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:TrainGradLeak", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])
