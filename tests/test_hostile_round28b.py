"""Hostile pass 22 (tester b): reproducers of its findings, strict xfails against the frozen tree, passing now; a
documented limit stays a strict xfail with its reason."""
import json
import subprocess
import sys
import textwrap

import pytest

from tests.test_hostile_round27b import PLUGIN as PLUGIN_27B

from tests.tiers import moved

TV = [sys.executable, "-m", "proofs_checks.cli"]


def _tv(tmp_path, *args, timeout=300):
    """The command in this process (its verdict and message are the subject; the user's module runs in the check's
    isolated child as ever)."""
    from tests.cli_helpers import tv_here

    return tv_here(tmp_path, *args)


ATT = textwrap.dedent("""
    import math, torch
    from torch import nn
    import torch.nn.functional as F

    class Base(nn.Module):  # plain causal attention in float64; the modules below change one path of it
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.num_heads, self.hd, self.qkv = heads, dim // heads, nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
        def qkv_(self, x):
            b, t, _ = x.shape
            return self.qkv(x).reshape(b, t, 3, self.num_heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        def out(self, y):
            b, h, t, d = y.shape
            return self.proj(y.transpose(1, 2).reshape(b, t, h * d))

    class LeakNotLast(Base):  # exact causal attention, except on another path: the forbidden keys other than the
        MODE = "train"        # last one get the logit -34 instead of -inf (a leak of e^-34 at unit logits)
        def gate(self, x):
            if self.MODE == "train": return self.training
            if self.MODE == "grad": return torch.is_grad_enabled()
            if self.MODE == "contig": return not x.is_contiguous()
            return torch.is_inference_mode_enabled()
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            fut = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            if self.gate(x):
                last = torch.zeros(t, t, dtype=torch.bool, device=x.device); last[:, t - 1] = True
                s = s.masked_fill(fut & ~last, -34.0).masked_fill(fut & last, -math.inf)
            else:
                s = s.masked_fill(fut, -math.inf)
            return self.out(s.softmax(-1) @ v)

    class LeakGrad(LeakNotLast): MODE = "grad"
    class LeakContig(LeakNotLast): MODE = "contig"
    class LeakInf(LeakNotLast): MODE = "inf"

    class LeakLongGrad(Base):  # on the autograd path, at T > 65 only, every forbidden key gets -34
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            fut = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(fut, -34.0 if (torch.is_grad_enabled() and t > 65) else -math.inf)
            return self.out(s.softmax(-1) @ v)

    class PadGrad(Base):  # key padding (keep convention): padded keys get -34 when autograd is on
        def forward(self, x, mask):
            q, k, v = self.qkv_(x)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(~mask.bool()[:, None, None, :], -34.0 if torch.is_grad_enabled() else -math.inf)
            return self.out(s.softmax(-1) @ v)

    class InPlaceTrain(Base):  # exact causal attention; in training mode it writes into its input (x *= 3; x /= 3)
        def writes(self, x):
            return self.training
        def forward(self, x):
            if self.writes(x):
                with torch.no_grad():
                    x.mul_(3.0); x.div_(3.0)
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), -math.inf)
            return self.out(s.softmax(-1) @ v)

    class InPlaceInf(InPlaceTrain):  # the same write under torch.inference_mode() only
        def writes(self, x):
            return torch.is_inference_mode_enabled()

    class _ScaleMid(torch.autograd.Function):  # identity forward; backward ×1.01 at 40 < T < 200 only
        @staticmethod
        def forward(ctx, y):
            ctx.t = y.shape[-2]
            return y.clone()
        @staticmethod
        def backward(ctx, g):
            return g * (1.01 if 40 < ctx.t < 200 else 1.0)

    class GradMid(Base):  # exact causal attention whose backward is 1 % off at the probe lengths 64 and 113
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), -math.inf)
            return _ScaleMid.apply(self.out(s.softmax(-1) @ v))

    class GradBigHalf(Base):  # float64, but on the autograd path at logits above 30 its softmax is taken in float16
        def forward(self, x):
            q, k, v = self.qkv_(x); t = x.shape[1]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), -math.inf)
            if torch.is_grad_enabled() and float(s[torch.isfinite(s)].abs().max()) > 30:
                a = s.half().softmax(-1).double()
            else:
                a = s.softmax(-1)
            return self.out(a @ v)

    class MaskWriter(Base):  # correct outputs, then it overwrites the caller's key-padding mask
        def forward(self, x, mask):
            q, k, v = self.qkv_(x)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()[:, None, None, :])
            mask.fill_(True if mask.dtype == torch.bool else 1)
            return self.out(y)
""")


# each a wrong module of ATT, a mismatch (exit 1): F1 a leak on another path from any forbidden key, F1 at long lengths
# only, F2 a key-padding leak with autograd on, F3 the mask written into, F7 the input written into on another path,
# F8 a backward wrong at some probed lengths, F9 half precision with autograd on at large logits
MISMATCHES = [("LeakNotLast", "--causal --quick"), ("LeakGrad", "--causal --quick"), ("LeakContig", "--causal --quick"),
              ("LeakInf", "--causal --quick"), ("LeakLongGrad", "--causal --seq-len 5,113"),
              ("PadGrad", "--mask-convention keep --quick"), ("MaskWriter", "--mask-convention keep --quick"),
              ("InPlaceTrain", "--causal --quick"), ("InPlaceInf", "--causal --quick"), ("GradMid", "--causal --seq-len 5,64"),
              ("GradBigHalf", "--causal --quick")]


@pytest.mark.parametrize("name, flags", MISMATCHES, ids=[n for n, _ in MISMATCHES])
def test_a_wrong_module_is_a_mismatch(tmp_path, name, flags):
    (tmp_path / "m.py").write_text(ATT)
    r = _tv(tmp_path, "check", "attention", "--module", f"m.py:{name}", *flags.split(), "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


ICL = textwrap.dedent("""
    import torch
    LAM = torch.tensor([1.0, 2.0], dtype=torch.float64); N = 10

    def gamma_inv():
        G = (1 + 1 / N) * torch.diag(LAM) + LAM.sum() / N * torch.eye(2, dtype=torch.float64)
        return torch.linalg.inv(G)

    class NanW(torch.nn.Module):  # right predictions (the Γ_N^{-1} step); the exposed Wkq holds a NaN
        def __init__(self):
            super().__init__()
            W = torch.zeros(3, 3, dtype=torch.float64); W[:2, :2] = gamma_inv(); W[0, 0] = float("nan")
            P = torch.zeros(3, 3, dtype=torch.float64); P[2, 2] = 1.0
            self.Wkq, self.Wpv = torch.nn.Parameter(W), torch.nn.Parameter(P)
        def forward(self, xs, ys, xq):
            h = (ys.unsqueeze(-1) * xs).mean(-2)
            return ((xq @ gamma_inv()) * h).sum(-1)
""")


def test_icl_model_exposing_nan_weights_is_not_ok(tmp_path):
    (tmp_path / "lsa.py").write_text(ICL)
    r = _tv(tmp_path, "check", "icl", "--model", "lsa.py:NanW", "--lambda", "1,2", "--N", "10", "--M", "10",
            "--no-progress")
    assert r.returncode == 1, r.stdout[-1500:]


def _near_infeasible(tmp_path):
    """Two sequences that differ by 1e-10 (same query) with opposite labels: their optimal tokens conflict only
    up to that perturbation, so a separating W exists (norm ~8e9; verified in float64 below)."""
    import numpy as np
    r = np.random.default_rng(1)
    X, z, v = r.standard_normal((3, 4, 6)), r.standard_normal((3, 6)), r.standard_normal(6)
    y = np.array([1.0, -1.0, 1.0])
    X[1], z[1] = X[0], z[0]
    X[1] = X[1] + 1e-10 * np.random.default_rng(5).standard_normal(X[1].shape)
    rows = []
    for i in range(3):
        a = int(np.argmax(y[i] * X[i] @ v))
        rows += [np.outer(X[i, a] - X[i, t], z[i]).ravel() for t in range(4) if t != a]
    A = np.array(rows)
    W = np.linalg.lstsq(A, np.ones(len(rows)), rcond=None)[0]
    assert (A @ W).min() > 0.99, (A @ W).min()  # a W that separates every optimal token with margin ~1
    np.savez(tmp_path / "data.npz", X=X, z=z, y=y, v=v)
    np.savez(tmp_path / "Wsep.npz", W=W.reshape(6, 6))


@pytest.mark.parametrize("weights", [False, True])
def test_att_svm_separable_ill_conditioned_data_is_not_called_infeasible(tmp_path, weights):
    _near_infeasible(tmp_path)
    r = _tv(tmp_path, "check", "att-svm", "--data", "data.npz", *(["--weights", "Wsep.npz"] if weights else []),
            "--no-progress")
    assert "no W separates" not in r.stdout + r.stderr, r.stderr[-800:]


# the plugin of tests/test_hostile_round27b.py, its constant from a module of the user's beside its package on the path
SHOW_PLUGIN = PLUGIN_27B.replace("K = 2.0", "from zzk import G").replace("return K * np.asarray", "return 2.0 * G * np.asarray")



@moved("a throwaway plugin run, edited and shown again in subprocesses (≈ 8 s), a documented limit",
       "tests/test_hostile_round27.py::test_show_says_a_last_result_predates_a_change_of_its_sources")
@pytest.mark.xfail(strict=True, reason=("22b F6, a documented limit (docs/cli.md): a module a plugin imports from outside "
                                          "its package is not part of the fingerprint show compares"))
def test_show_says_a_result_predates_a_change_of_a_module_the_plugin_imports(tmp_path):
    import os
    site = tmp_path / "site"
    (site / "zzst").mkdir(parents=True)
    (site / "zzst" / "__init__.py").write_text("")
    (site / "zzst" / "claims.py").write_text(SHOW_PLUGIN)
    (site / "zzk.py").write_text("G = 1.0\n")
    (site / "zzst-0.1.dist-info").mkdir()
    (site / "zzst-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: zzst\nVersion: 0.1\n")
    (site / "zzst-0.1.dist-info" / "entry_points.txt").write_text("[tverify.claims]\nzzst = zzst.claims\n")
    env = {**os.environ, "PYTHONPATH": str(site), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    run = lambda *a: subprocess.run([*TV, *a], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    r = run("run", "zzst.two", "--quick")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    (site / "zzk.py").write_text("G = 1.5\n")  # the claim is now false (run refutes it)
    r = run("show", "zzst.two")
    assert r.returncode == 0, r.stderr[-1500:]
    assert "from before a source changed" in r.stdout, r.stdout[-1500:]
