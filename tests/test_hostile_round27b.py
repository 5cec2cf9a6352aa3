"""Hostile pass 21 (tester b): reproducers of its findings, fixed (they were strict xfails against the frozen tree)."""
import subprocess
import sys
import textwrap

import pytest

from tests.tiers import moved

TV = [sys.executable, "-m", "proofs_checks.cli"]


def _tv(tmp_path, *args, timeout=300):
    """The command in this process (the user's module still runs in the check's isolated child): what it says and
    its exit code are the subject, not the console process (issue 46: a fresh interpreter per test cost ≈ 2 s)."""
    from tests.cli_helpers import invoke_in

    with pytest.MonkeyPatch.context() as mp:
        return invoke_in(tmp_path, mp, *args)


BASE = textwrap.dedent("""
    import math, types, torch
    from torch import nn
    import torch.nn.functional as F

    class Attn(nn.Module):  # causal attention, float64 throughout, logits times FACTOR/sqrt(d_k); on the path WHEN
        FACTOR, WHEN, DTYPE = 1.001, None, None  # (autograd on, or training mode) masked logits -34: a leak of e^-34;
        def __init__(self, dim=32, heads=4):     # DTYPE: the precision q·k, softmax and ·v are computed in
            super().__init__()
            self.num_heads, self.hd, self.qkv, self.proj = heads, dim // heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
            h = self.DTYPE or x.dtype
            s = (q.to(h) @ k.to(h).transpose(-1, -2)) * (self.FACTOR / math.sqrt(self.hd))
            leak = self.WHEN == "grad" and torch.is_grad_enabled() or self.WHEN == "train" and self.training
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), -34.0 if leak else -math.inf)
            return self.proj((s.softmax(-1) @ v.to(h)).to(x.dtype).transpose(1, 2).reshape(b, t, -1))

    class Leak(Attn):  # exact causal attention, except with autograd on
        FACTOR, WHEN = 1.0, "grad"

    class Train(Leak):  # exact, except in training mode
        WHEN = "train"

    class Half(Attn):  # computed in float16, logits times 1.01/sqrt(d_k)
        FACTOR, DTYPE = 1.01, torch.float16

    class Drop(nn.Module):  # nanoGPT-style attention whose dropout rate sits in its config object
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.config = types.SimpleNamespace(n_embd=dim, n_head=heads, attn_dropout=0.1)
            self.num_heads, self.c_attn, self.c_proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (z.view(b, t, self.num_heads, d // self.num_heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.config.attn_dropout if self.training else 0.0)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, d))
""")


def test_scale_off_by_0p1_percent_is_not_called_float32(tmp_path):
    (tmp_path / "m.py").write_text(BASE)
    import json
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:Attn", "--causal", "--quick", "--no-progress", "--json", "-")
    assert r.returncode == 1, r.stdout[-2000:]
    status = {p["name"]: p["status"] for p in json.loads(r.stdout)["properties"]}
    assert status["scale_1_over_sqrt_dk"] == "fail"  # right: the scale is off by 0.1 %
    assert status.get("precision_as_declared") != "fail", "a float64 module is said to compute in float32"


def test_dropout_rate_in_config_is_not_a_mismatch(tmp_path):
    (tmp_path / "m.py").write_text(BASE)
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:Drop", "--causal", "--quick", "--no-progress")
    assert r.returncode == 0, r.stdout[-2000:]


ERRATUM = textwrap.dedent("""
    import numpy as np
    from proofs_checks.comparisons import compare
    from proofs_checks.plugin import Check, Claim, Mutant, check_claim

    def three(x):  # the "corrected" form 3x of a quantity that is 2x
        return 3 * np.asarray(x, dtype=float)

    def c_huge(form, ctx):  # compare(err, 1e300): rejects nothing finite
        x = ctx.rng().standard_normal(20)
        return compare(float(np.max(np.abs(np.asarray(form(x), float) - 2 * x))), 1e300, "generous")

    nan = lambda x: np.full(np.shape(x), np.nan)
    C = Claim(id="zzerr.nan", title="3x = 2x (corrected)", statement="f(x) = 2x", source="a false claim", kind="erratum",
              form=three, stated=nan, stated_statement="f(x) = NaN", checks=(Check("c0", "numeric", c_huge),),
              no_symbolic="numeric only", mutants=(Mutant("nan", "wrong constant", "NaN", nan),))
    print("STATUS", check_claim(C).status)
""")


def test_a_vacuous_erratum_is_never_verified(tmp_path):
    (tmp_path / "e.py").write_text(ERRATUM)
    r = subprocess.run([sys.executable, "e.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "STATUS" in r.stdout, r.stderr[-2000:]
    assert "STATUS verified" not in r.stdout


def test_rounding_judges_a_signed_difference_by_its_size():
    from proofs_checks.comparisons import compare, rounding
    assert not rounding(-1e300, 10).passed
    assert not rounding({"a": -1.0, "b": 1e-20}, 10).passed
    # compare() itself is one-sided by its documented rule (passes iff error <= tolerance: a theorem's bound, where
    # a negative error is the margin by which it holds); rounding() is two-sided (two computations of one quantity)
    assert compare(-1e300, 1e-12, "a bound holding by a margin").passed


@pytest.mark.parametrize("name", ["Leak", "Train"])
def test_a_branch_on_the_training_path_cannot_hide_a_leak(tmp_path, name):
    (tmp_path / "m.py").write_text(BASE)
    r = _tv(tmp_path, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick", "--no-progress")
    assert r.returncode == 1, r.stdout[-2000:]


def test_att_svm_weights_on_large_data_is_one_line(tmp_path):
    import numpy as np
    r = np.random.default_rng(0)
    X, z, v = r.standard_normal((3, 4, 6)), r.standard_normal((3, 6)), r.standard_normal(6)
    np.savez(tmp_path / "data.npz", X=X * 1e10, z=z, y=np.array([1.0, -1.0, 1.0]), v=v)
    np.savez(tmp_path / "W.npz", W=r.standard_normal((6, 6)))
    r = _tv(tmp_path, "check", "att-svm", "--data", "data.npz", "--weights", "W.npz", "--no-progress")
    assert "Traceback" not in r.stdout + r.stderr
    assert r.returncode in (2, 3), (r.returncode, r.stderr[-1500:])


def test_att_svm_small_scale_data_is_not_called_infeasible(tmp_path):
    import numpy as np
    r = np.random.default_rng(0)
    X, z, v = r.standard_normal((3, 4, 6)), r.standard_normal((3, 6)), r.standard_normal(6)
    np.savez(tmp_path / "data.npz", X=X * 1e-6, z=z, y=np.array([1.0, -1.0, 1.0]), v=v)
    r = _tv(tmp_path, "check", "att-svm", "--data", "data.npz", "--no-progress")
    assert "infeasible" not in r.stdout + r.stderr
    assert r.returncode in (0, 3), (r.returncode, r.stderr[-1500:])


PLUGIN = textwrap.dedent("""
    import numpy as np
    from proofs_checks.comparisons import close
    from proofs_checks.plugin import Check, Claim, Mutant, register

    K = 2.0

    def form(x):
        return K * np.asarray(x, dtype=float)

    def c_close(form, ctx):
        x = ctx.rng().standard_normal(20)
        return close(form(x), 2 * x, 1e-12 * np.abs(2 * x) + 1e-300, "float64 rounding")

    CLAIM = register(Claim(id="zzst.two", title="f(x) = 2x", statement="f(x) = 2x", source="test", kind="identity",
              form=form, checks=(Check("c0", "numeric", c_close),), no_symbolic="numeric only",
              mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3 * np.asarray(x, float)),)))
""")


@moved("a throwaway plugin run, edited and shown again in subprocesses (≈ 10 s): the stored sources' fingerprint, end "
       "to end", "tests/test_hostile_round27.py::test_show_says_a_last_result_predates_a_change_of_its_sources")
def test_show_does_not_present_a_stale_last_result_as_current(tmp_path):
    import os
    site = tmp_path / "site"
    (site / "zzst").mkdir(parents=True)
    (site / "zzst" / "__init__.py").write_text("")
    (site / "zzst" / "claims.py").write_text(PLUGIN)
    (site / "zzst-0.1.dist-info").mkdir()
    (site / "zzst-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: zzst\nVersion: 0.1\n")
    (site / "zzst-0.1.dist-info" / "entry_points.txt").write_text("[tverify.claims]\nzzst = zzst.claims\n")
    env = {**os.environ, "PYTHONPATH": str(site), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = lambda *a: subprocess.run([*TV, *a], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    r = run("run", "zzst.two", "--quick")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    (site / "zzst" / "claims.py").write_text(PLUGIN.replace("K = 2.0", "K = 3.0"))  # the claim is now false
    r = run("show", "zzst.two")
    assert r.returncode == 0, r.stderr[-1500:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("last result"))
    assert not line.startswith("last result: verified") or "changed" in r.stdout or "stale" in r.stdout, r.stdout


def test_half_module_with_a_1_percent_scale_error_is_not_called_bfloat16(tmp_path):
    import json
    (tmp_path / "m.py").write_text(BASE)
    r = _tv(tmp_path, "check", "attention", "--module", "m.py:Half", "--causal", "--compute-dtype", "float16",
            "--quick", "--no-progress", "--json", "-")
    assert r.returncode == 1, r.stdout[-2000:]
    status = {p["name"]: p["status"] for p in json.loads(r.stdout)["properties"]}
    assert status.get("precision_as_declared") != "fail", "a float16 module is said to compute in bfloat16"


LSA = textwrap.dedent("""
    import torch
    from torch import nn
    LAM, N = torch.tensor([1.0, 2.0], dtype=torch.float64), 10

    class Decoy(nn.Module):  # predicts with Gamma_N^-1 (ZFB's trained LSA) but exposes W_KQ = Lambda^-1
        def __init__(self):
            super().__init__()
            L = torch.diag(LAM)
            g = torch.linalg.inv((1 + 1 / N) * L + LAM.sum() / N * torch.eye(2, dtype=torch.float64))
            pv = torch.zeros(3, 3, dtype=torch.float64); pv[2, 2] = 1.0
            kq = torch.zeros(3, 3, dtype=torch.float64); kq[:2, :2] = g
            self.true_kq = kq
            shown = torch.zeros(3, 3, dtype=torch.float64); shown[:2, :2] = torch.diag(1 / LAM)
            self.Wpv, self.Wkq = nn.Parameter(pv), nn.Parameter(shown)
        def forward(self, E):
            kq, pv = self.true_kq.to(E.dtype), self.Wpv.to(E.dtype)
            eq = E[..., -1]
            v = torch.einsum("bij,bj->bi", E @ E.transpose(-1, -2), torch.einsum("ij,bj->bi", kq, eq))
            return eq[..., -1] + torch.einsum("j,bj->b", pv[-1, :], v) / (E.shape[-1] - 1)
""")


def test_icl_zfb_theorem_mismatch_is_not_ok(tmp_path):
    import json
    (tmp_path / "lsa.py").write_text(LSA)
    r = _tv(tmp_path, "check", "icl", "--model", "lsa.py:Decoy", "--layout", "zfb", "--lambda", "1,2", "--N", "10",
            "--M", "10", "--no-progress", "--json", "-")
    d = json.loads(r.stdout)
    assert d["zfb_theorem"]["outcome"] == "mismatch"
    assert r.returncode != 0 and d["outcome"] != "ok", (r.returncode, d["outcome"])


def test_icl_relative_tol_of_one_or_more_cannot_make_zero_weights_ok(tmp_path):
    import numpy as np
    np.savez(tmp_path / "w0.npz", Wpv=np.zeros((3, 3)), Wkq=np.zeros((3, 3)))
    r = _tv(tmp_path, "check", "icl", "--lambda", "1,2", "--N", "10", "--weights", "w0.npz", "--tol", "2", "--no-progress")
    assert r.returncode != 0, r.stdout[-1500:]
