"""Hostile pass 31, tester B: reproducers, all fixed."""
import textwrap

import pytest
from cli_helpers import mismatch_here, SEEDED_INIT, causal_attn, tv_here

ATT = causal_attn(8, 2, '''
    class BigBatchNoScale(Attn):
        # a path for batches above 16 (a large-batch kernel): the samples from 16 on lack 1/sqrt(d_k)
        def forward(self, x):
            y = super().forward(x)
            if x.shape[0] > 16:
                z = x[16:]
                B, T, _ = z.shape
                s, v = self.scores(z)
                s = (s * math.sqrt(D // H)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
                y = torch.cat([y[:16], self.finish(s, v, B, T)])
            return y
    class BigBatchWrong(Attn):
        # the same path: the samples from 16 on are 1.5 x the right output
        def forward(self, x):
            y = super().forward(x)
            if x.shape[0] > 16:
                y = torch.cat([y[:16], 1.5 * y[16:]])
            return y
''')


@pytest.mark.parametrize("name", ["BigBatchNoScale", "BigBatchWrong"])
def test_31b_f1_wrong_large_batch_path_in_the_stacked_calls_is_not_ok(tmp_path, name):
    r = mismatch_here(tmp_path, ATT, name)


KP = textwrap.dedent('''
    import torch, torch.nn as nn, torch.nn.functional as F
    D, H = 8, 2
    class Attn(nn.Module):
        @SEEDED_INIT@
        def forward(self, x, mask=None):
            B, T, _ = x.shape
            sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            am = None if mask is None else mask[:, None, None, :]
            o = F.scaled_dot_product_attention(sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x)), attn_mask=am)
            return self.o_proj(o.transpose(1, 2).reshape(B, T, D))
    class ShortDropsMask(Attn):
        # a short-sequence path (T <= 5) that ignores the key-padding mask
        def forward(self, x, mask=None):
            return super().forward(x, None if x.shape[1] <= 5 else mask)
''').replace("    @SEEDED_INIT@", "    " + SEEDED_INIT)


def test_31b_f2_key_padding_ignored_at_short_lengths_is_not_ok(tmp_path):
    (tmp_path / "kp.py").write_text(KP)
    r = tv_here(tmp_path, "check", "attention", "--module", "kp.py:ShortDropsMask", "--mask-convention", "keep",
                "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])


def test_31b_f3_false_identity_checked_only_where_every_output_is_zero_is_not_verified():
    import sympy as sp
    from proofs_checks.plugin import (Claim, DerivationBuilder, Mutant, check_claim, matches_derivation, numeric,
                                      rounding)

    def derive():
        b = DerivationBuilder("lin")
        x = b.fact("args", (sp.Symbol("x"),))[0]
        return b.done(b.step("claimed", 2 * x))

    @numeric("direct at the origin")
    def direct(form, ctx):
        return rounding(abs(form(0.0) - 0.0), 4, scale=1.0)

    claim = Claim(id="mine.lin", title="3x = 2x", statement="3x = 2x", source="hostile", kind="identity",
                  form=lambda x: 3 * x, derivation=derive,
                  checks=(matches_derivation(derive, lambda r: (0.0,)), direct),
                  mutants=(Mutant("plus1", "wrong constant", "3x+1", lambda x: 3 * x + 1),))
    r = check_claim(claim)
    assert r.status != "verified", r.message
