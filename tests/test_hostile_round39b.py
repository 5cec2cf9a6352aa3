"""Hostile pass 33, tester B: reproducers (strict xfails: open findings)."""

import pytest
from cli_helpers import SEEDED_INIT, mismatch_here, tv_here


def _seeded(text: str) -> str:
    return text.replace("    @SEEDED_INIT@", "    " + SEEDED_INIT)


# --- 33B F1: `check ... --json NEW/` (a path ending in '/' that does not exist) writes a file and exits 0 -------------

def test_33b_f1_check_json_path_ending_in_slash_is_refused(tmp_path):
    r = tv_here(tmp_path, "check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--json", "out.json/")
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert not (tmp_path / "out.json").exists()


# --- 33B F2: the own-mutant rule credits a kill of a NaN (inf, None) mutant by matches_derivation -------------------

def _true_claim_with_mutant(mut, **mutant_keywords):
    import numpy as np
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, scalar

    args = (scalar("x"),)

    def derive():
        b = DerivationBuilder("x + x")
        (x,) = b.fact("args", (sp.Symbol("x", real=True),))
        return b.done(b.step("sum", 2 * x))

    @numeric("x + x against 2x on draws")
    def num(form, ctx):
        x = ctx.rng().standard_normal(ctx.size(20, 200))
        return close(form(x), 2 * x, 4e-15 * np.abs(x) + 1e-300, "float64 rounding")

    return Claim(id="mine.double", title="x + x = 2x", statement="x + x = 2x", source="none", kind="identity",
                 form=lambda x: x + x, derivation=derive,
                 checks=(matches_derivation(derive, args, points=(5, 20, 50)), num),
                 mutants=(Mutant("bad", "wrong formula", "no numbers", mut, **mutant_keywords),))


@pytest.mark.parametrize("kind", ["nan", "inf", "none"])
def test_33b_f2_a_nan_mutant_killed_by_matches_derivation_is_no_evidence(kind):
    import numpy as np
    from proofs_checks.plugin import check_claim

    mut = {"nan": lambda x: x * np.nan, "inf": lambda x: x * np.inf, "none": lambda x: None}[kind]
    r = check_claim(_true_claim_with_mutant(mut), mode="quick")
    assert r.status == "error" and "reject none of its own mutants" in r.message, (r.status, r.message)


# --- 33B F3: a correct float64 Hopfield update (exp(a − logsumexp a), a listed standard formulation) is a mismatch
#     at large logits: the float64 bound 16·u·(N+d) does not scale with |βXᵀξ|

_LSE = '''
import torch
def lse(xi, patterns, beta):
    a = beta * (xi @ patterns.T)
    return torch.exp(a - torch.logsumexp(a, -1, keepdim=True)) @ patterns
'''


def test_33b_f3_float64_logsumexp_hopfield_update_is_ok_at_large_beta(tmp_path):
    import numpy as np

    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).standard_normal((12, 16))))
    (tmp_path / "upd.py").write_text(_seeded(_LSE))
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "1e4", "--module", "upd.py:lse")
    assert r.returncode == 0, r.stdout[-1500:]


# --- 33B F4: a backward that raises at one probed length only (or with a plain RuntimeError) is "not available": ok --

_GRAD_BOOM = '''
import math, torch, torch.nn as nn
D, H = 8, 2

class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        ctx.T = y.shape[1]
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        if ctx.T == 33:
            raise RuntimeError("shape mismatch in backward")
        return g

class Attn(nn.Module):
    @SEEDED_INIT@

    def forward(self, x):
        B, T, _ = x.shape
        sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = (q @ k.transpose(-1, -2) / math.sqrt(D // H)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return Boom.apply(self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)))
'''


@pytest.mark.xfail(strict=True, reason="33B F4, a documented limit (docs/check-attention.md, gradients_match_reference): "
                   "a backward that raises is not a wrong gradient: that length is not judged, and the row says so")
def test_33b_f4_backward_raising_at_one_probed_length_is_not_ok(tmp_path):
    mismatch_here(tmp_path, _seeded(_GRAD_BOOM), "Attn", file="gb.py")


# --- 33B F5: a forward that raises at one probed length on the autograd / inference-mode path only: ok, unsaid ------

_RAISE_ON_PATH = _GRAD_BOOM.replace("return Boom.apply(", "return (").replace(
    "        B, T, _ = x.shape\n        sp =",
    "        B, T, _ = x.shape\n        if T == 33 and (@COND@):\n            raise RuntimeError('kernel: unsupported length')\n        sp =")


@pytest.mark.parametrize("cond", ["torch.is_grad_enabled()", "torch.is_inference_mode_enabled()"])
def test_33b_f5_forward_raising_at_one_length_on_another_path_is_said(tmp_path, cond):
    # a path that raises at a length is not judged there (as the backward that raises: a documented limit), but said,
    # in the path's own row, as the forward's raise, not the backward's
    (tmp_path / "rp.py").write_text(_seeded(_RAISE_ON_PATH.replace("@COND@", cond)))
    r = tv_here(tmp_path, "check", "attention", "--module", "rp.py:Attn", "--causal", "--quick")
    rows = [ln for ln in r.stdout.splitlines() if "kernel: unsupported length" in ln]
    assert rows and "T = 33" in rows[0] and "the backward raised" not in rows[0], r.stdout[-2500:]


# --- 33B F6: the other-dtype call raising at one probe length (not an "unsupported" error) passes, "checked at T = 5" -

def test_33b_f6_other_dtype_call_raising_at_one_length_fails(tmp_path):
    text = _GRAD_BOOM.replace("return Boom.apply(", "return (").replace(
        "        B, T, _ = x.shape\n        sp =",
        "        B, T, _ = x.shape\n        if T == 5 and x.dtype == torch.float32:\n"
        "            raise RuntimeError('fp32 kernel: bad length')\n        sp =")
    mismatch_here(tmp_path, _seeded(text), "Attn", file="f32.py")


# --- 33B F7: key padding's every-count call (32 sequences at T = 33) raising is dropped and still listed as judged ----

_KP_BIG = '''
import math, torch, torch.nn as nn, torch.nn.functional as F
D, H = 8, 2

class Attn(nn.Module):
    @SEEDED_INIT@

    def forward(self, x, mask):
        B, T, _ = x.shape
        if B > 20 and not bool(mask.all()):
            raise RuntimeError("padded batch too large")
        sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None] & mask[:, None, None, :]
        o = torch.nan_to_num(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))
        return self.o_proj(o.transpose(1, 2).reshape(B, T, D))
'''


def test_33b_f7_key_padding_every_count_call_refused_is_said_not_listed_as_made(tmp_path):
    # a module refusing a batch size is halved, as every batch the check makes (docs/check-attention.md, "Batch
    # sizes"): not a mismatch, but the row says in which calls the rows were judged, not a call that was never made
    (tmp_path / "kp.py").write_text(_seeded(_KP_BIG))
    r = tv_here(tmp_path, "check", "attention", "--module", "kp.py:Attn", "--causal", "--quick", "--mask-convention", "keep")
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("key_padding_respected"))
    assert "in calls of at most 16: the module refused 32" in row, row


# --- 33B F8: a future-token leak on another path (autograd on / inference mode / training / non-contiguous) is hidden
#     when the module also raises on that path at one other length -------------------------------------------------

_EPS_LEAK = _GRAD_BOOM.replace("return Boom.apply(", "return self.leak(x, ").replace(
    "        B, T, _ = x.shape\n        sp =",
    "        B, T, _ = x.shape\n        if T == 2 and (@COND@):\n            raise RuntimeError('path kernel: unsupported length')\n        sp =") + '''
    def leak(self, x, y):
        # the last token reaches every output (1e-14 relative: below matches_reference's float64 bound, exact for the
        # structural properties) on that path at T = 33 only
        if x.shape[1] == 33 and (@COND@):
            return y + 1e-14 * x[:, -1:, :1]
        return y
'''


@pytest.mark.parametrize("cond", ["torch.is_grad_enabled()", "torch.is_inference_mode_enabled()", "self.training",
                                  "not x.is_contiguous()"])
def test_33b_f8_a_raise_at_one_length_hides_a_leak_on_that_path(tmp_path, cond):
    mismatch_here(tmp_path, _seeded(_EPS_LEAK.replace("@COND@", cond)), "Attn", file="eps.py")


def test_33b_f8_control_the_same_leak_without_the_raise_is_a_mismatch(tmp_path):
    text = _EPS_LEAK.replace("if T == 2 and", "if T == -1 and").replace("@COND@", "torch.is_grad_enabled()")
    mismatch_here(tmp_path, _seeded(text), "Attn", file="eps.py")


_HALF_GRAD_LEAK = '''
import math, torch, torch.nn as nn, torch.nn.functional as F
D, H = 8, 2

class Attn(nn.Module):
    RAISE = @RAISE@
    @SEEDED_INIT@

    def forward(self, x):
        g = torch.is_grad_enabled(); B, T, _ = x.shape
        if self.RAISE and g and T == 2:
            raise RuntimeError("grad kernel: unsupported length")
        h = torch.float16
        sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
        q, k, v = (sp(x.to(h) @ l.weight.to(h).T) for l in (self.q_proj, self.k_proj, self.v_proj))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = (o.transpose(1, 2).reshape(B, T, D) @ self.o_proj.weight.to(h).T).to(x.dtype)
        if g and T == 33:  # training step: the last token leaks into every output, 1e-3 of the largest
            y = y + 1e-3 * y.detach().abs().max() * torch.tanh(x[:, -1:, :1])
        return y
'''


def test_33b_f8_float16_leak_of_1e_3_on_the_autograd_path_hidden_by_a_raise(tmp_path):
    mismatch_here(tmp_path, _seeded(_HALF_GRAD_LEAK.replace("@RAISE@", "True")), "Attn", "--compute-dtype", "float16", file="h16.py")
