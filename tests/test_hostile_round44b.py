"""Hostile pass 38, tester B: reproducers (each was a strict xfail on the code the pass ran against; all fixed)."""

import pytest

from cli_helpers import causal_attn, tv_here

# --- 38B F1: the outputs of redrawn inputs are judged under 16·u·(3D+T)·max(1, |logit|), far above the forward
# tolerance (float32 at huge logits: 0.062 against 1.2e-4; bfloat16 declared, unit logits: ~18 against 0.036) --------

_XS = causal_attn(16, 2, """
    class Xs(Attn):
        \"\"\"Causal attention, correct except in a batch of more than 16 sequences (the stacked redraw calls): a sequence
        that shares its first token with an earlier one gets its outputs from the first token where they differ on
        multiplied by FACTOR (only at logits above LMIN).\"\"\"
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
            y = self.finish(s, v, B, T)
            if B > 16 and float(s.masked_fill(torch.isinf(s), 0).abs().max()) > LMIN:
                f = torch.ones(B, T, dtype=y.dtype)
                for i in range(1, B):
                    for j in range(i):
                        if torch.equal(x[i, 0], x[j, 0]):
                            d = (x[i] != x[j]).any(-1).int().cummax(-1).values.bool()
                            f[i] = torch.where(d, FACTOR, 1.0)
                            break
                y = y * f[:, :, None]
            return y
""")


def test_38b_f1_float32_redraw_outputs_3pct_off_not_ok(tmp_path):
    (tmp_path / "xs.py").write_text("FACTOR, LMIN = 1.03, 200.0\n" + _XS)
    r = tv_here(tmp_path, "check", "attention", "--module", "xs.py:Xs", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


def test_38b_f1b_bf16_declared_redraw_outputs_doubled_not_ok(tmp_path):
    (tmp_path / "xs.py").write_text("FACTOR, LMIN = 2.0, -1.0\n" + _XS)
    r = tv_here(tmp_path, "check", "attention", "--module", "xs.py:Xs", "--causal", "--quick",
                "--compute-dtype", "bfloat16")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


# --- 38B F2: --against a factory (a function with no arguments) that returns the --module object itself --------------

_SAME = '''import torch, torch.nn as nn
class A(nn.Module):
    def __init__(self):
        super().__init__(); torch.manual_seed(0); self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
    def forward(self, x):
        T = x.shape[1]
        m = torch.ones(T, T, dtype=torch.bool).triu(1)
        return 2 * self.mha(x, x, x, attn_mask=m, need_weights=False)[0]   # wrong: outputs doubled
inst = A()
def get():
    return inst                                                            # the very same object
'''


def test_38b_f2_against_a_factory_returning_the_module_itself_is_refused(tmp_path):
    (tmp_path / "same.py").write_text(_SAME)
    r = tv_here(tmp_path, "check", "attention", "--module", "same.py:inst", "--against", "same.py:get", "--causal",
                "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, r.stdout[-1500:]


#: the wrong and the correct modules of 38b F1c, F3, F4 and F5, subclasses of a seeded causal attention
_MODULES = causal_attn(8, 2, """
    class PrefixCache(Attn):
        \"\"\"Causal attention with a per-sequence output cache keyed on (first token, length): a too-coarse key. A
        sequence sharing its first token and length with one seen before gets that one's outputs back (stale by O(1)).\"\"\"
        def forward(self, x):
            B, T, _ = x.shape
            y = super().forward(x)
            cache, rows = self.__dict__.setdefault("cache", {}), []
            for b in range(B):
                key = (x[b, 0].detach().cpu().numpy().tobytes(), T, x.dtype, torch.is_grad_enabled())
                if key in cache and not x.requires_grad:
                    rows.append(cache[key].to(y.dtype))
                else:
                    cache[key] = y[b].detach().clone(); rows.append(y[b])
            return torch.stack(rows)

    class WLeak(Attn):
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            fut = torch.ones(T, T, dtype=torch.bool).triu(1)
            p = s.masked_fill(fut, float("-inf")).softmax(-1)
            y = self.o_proj((p @ v).transpose(1, 2).reshape(B, T, D))
            w = p * (1 - 0.01 * fut.any(-1, keepdim=True)) + 0.01 * fut / fut.sum(-1, keepdim=True).clamp(min=1)
            return y, w                        # the weights returned put 1 % on the future keys of every row

    class MedBatch(Attn):
        def forward(self, x):
            torch.set_float32_matmul_precision("medium")        # left set: bf16 matmuls where the CPU has them
            return super().forward(x)

    class PerSample(Attn):
        def forward(self, x):
            return torch.cat([Attn.forward(self, x[i:i + 1]) for i in range(x.shape[0])])
""")




@pytest.mark.parametrize("name", ["PrefixCache", "WLeak"], ids=["f1c_stale_prefix_cache", "f3_weights_on_future_keys"])
def test_38b_a_wrong_module_declared_bfloat16_is_a_mismatch(tmp_path, name):
    """F1c: a cache keyed on (first token, length) returns another input's outputs (124 % off), "ok" under the
    bfloat16 rounding bound; F3: returned weights with 1 % on every row's future keys passed weights_are_distributions
    (4·u·T in the declared bfloat16: 0.27) and weights_match_reference (0.0198)."""
    (tmp_path / "m.py").write_text(_MODULES)
    r = tv_here(tmp_path, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick",
                "--compute-dtype", "bfloat16")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


# --- 38B F4: a module leaving torch's float32 matmul precision at "medium" lowers the check's own float32 reference ----



def _medium_lowers_float32_matmuls() -> bool:
    import torch

    old = torch.get_float32_matmul_precision()
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(3, 2, 17, 4, generator=g), torch.randn(3, 2, 4, 17, generator=g)
        r = a.double() @ b.double()
        torch.set_float32_matmul_precision("medium")
        e = float(((a @ b).double() - r).abs().max() / r.abs().max())
    finally:
        torch.set_float32_matmul_precision(old)
    return e > 1e-5


@pytest.mark.skipif(not _medium_lowers_float32_matmuls(), reason="this CPU computes float32 matmuls in float32 at 'medium'")
def test_38b_f4_module_setting_matmul_precision_is_not_float32_or_finer(tmp_path):
    (tmp_path / "med.py").write_text(_MODULES)
    r = tv_here(tmp_path, "check", "attention", "--module", "med.py:MedBatch", "--causal", "--quick", "--dtype", "float32",
                "--seq-len", "2,5,17")
    assert "Traceback" not in r.stderr, r.stderr
    row = next((l for l in r.stdout.splitlines() if l.startswith("precision_as_declared")), "")
    assert row and " ok " not in row, row


# --- 38B F5: a correct float32 attention computed one sequence at a time is a mismatch on the non-contiguous path ----



def test_38b_f5_correct_per_sample_float32_attention_is_ok(tmp_path):
    (tmp_path / "ps.py").write_text(_MODULES)
    r = tv_here(tmp_path, "check", "attention", "--module", "ps.py:PerSample", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]


def test_38b_f4_a_setting_left_by_an_earlier_in_process_check_does_not_reach_the_next():
    """The float32 settings a module left are its own calls' only: after the check, this process's are back (the legacy
    getter included), and a correct module checked next in the same process is judged under this process's own."""
    import torch

    from proofs_checks.api import check_attention

    ns: dict = {}
    exec(_MODULES, ns)  # noqa: S102 - the test's own module text
    before = torch.get_float32_matmul_precision()
    check_attention(ns["MedBatch"](), causal=True, dtype="float32", mode="quick", seq_len=[2, 5], isolate=False)
    assert torch.get_float32_matmul_precision() == before
    r = check_attention(ns["Attn"](), causal=True, dtype="float32", mode="quick", seq_len=[2, 5], isolate=False)
    assert r.ok, [(p.name, p.detail) for p in r.properties if p.status == "fail"]
