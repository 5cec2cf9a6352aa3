"""Hostile pass 39, tester B: reproducers (each failed on the code the pass ran against, 018f9f0, and passes since its fix)."""

import pytest

from cli_helpers import SEEDED_INIT, causal_attn, tv_here


def _medium_lowers_cpu_matmuls() -> bool:
    import torch

    old = torch.get_float32_matmul_precision()
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
        torch.set_float32_matmul_precision("medium")
        return float((a @ b - (a.double() @ b.double())).abs().max()) > 1e-3
    finally:
        torch.set_float32_matmul_precision(old)


# --- 39B F1: a module that sets torch.set_float32_matmul_precision("medium") at its import computes in bfloat16 for
# every caller, but the check runs its calls at "highest" (the import's setting is dropped): "ok, float32 or finer" --

@pytest.mark.skipif(not _medium_lowers_cpu_matmuls(), reason="'medium' leaves float32 CPU matmuls alone here")
def test_39b_f1_import_time_medium_precision_not_ok(tmp_path):
    (tmp_path / "imp.py").write_text("import torch\ntorch.set_float32_matmul_precision('medium')\n" + causal_attn(16, 2))
    r = tv_here(tmp_path, "check", "attention", "--module", "imp.py:Attn", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


# --- 39B F2: a module that sets torch.set_default_dtype(torch.float64) at import and builds a constant in the default
# dtype in forward computes exactly in float64 for every caller that imports it; the check puts the default back to
# float32 after the import, so its calls round that constant to float32: a false mismatch ("off by a factor 1") ------

_DD = """import math, torch, torch.nn as nn
torch.set_default_dtype(torch.float64)
D, H = 16, 2
class DD(nn.Module):
    @SEEDED_INIT@
    def forward(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        scale = torch.tensor(1.0) / torch.sqrt(torch.tensor(float(dk)))   # in the default dtype (float64 after import)
        s = (q @ k.transpose(-1, -2)) * scale
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
"""
_DD = _DD.replace("@SEEDED_INIT@", SEEDED_INIT)


def test_39b_f2_import_time_default_float64_is_ok(tmp_path):
    (tmp_path / "dd.py").write_text(_DD)
    r = tv_here(tmp_path, "check", "attention", "--module", "dd.py:DD", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]


# --- 39B F3: --against a wrapper module whose only content is the --module object itself (the same parameters) is not
# refused: the comparison is 0 by construction, and a module with doubled outputs is "ok" --------------------------

_PROBE = causal_attn(16, 2, """
    class Doubled(Attn):
        def forward(self, x):
            return 2 * super().forward(x)
    winst = Doubled()
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = winst
        def forward(self, x):
            return self.inner(x)
    seq = nn.Sequential(winst)
""")


@pytest.mark.parametrize("against", ["Holder", "seq"])
def test_39b_f3_against_wrapper_of_the_module_itself_refused(tmp_path, against):
    (tmp_path / "probe.py").write_text(_PROBE)
    r = tv_here(tmp_path, "check", "attention", "--module", "probe.py:winst", "--against", f"probe.py:{against}",
                "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, r.stdout[-1500:]


# --- 39B F4: a module that enables CPU autocast at its import (torch.set_autocast_enabled("cpu", True)) has the
# check's own "plain reference computed in float32" run under it (bfloat16 matmuls): the float32 rule is bfloat16-size
# (3.4e-3 at unit logits), and a module computing its value projection in bfloat16 is "ok, float32 or finer" ---------

_AC = """import math, torch, torch.nn as nn
torch.set_autocast_enabled("cpu", True)
D, H = 16, 2
def no_backward(g):
    raise NotImplementedError("this kernel does not support backward on CPU")
class AC(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.q_proj = nn.Linear(D, D); self.k_proj = nn.Linear(D, D)
        self.v_proj = nn.Linear(D, D); self.o_proj = nn.Linear(D, D)
        self.num_heads = H; self.embed_dim = D
    def forward(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        with torch.autocast("cpu", enabled=False):
            q, k = sp(self.q_proj(x)), sp(self.k_proj(x))
        v = sp(self.v_proj(x)).to(x.dtype)   # under the autocast its import set: bfloat16
        with torch.autocast("cpu", enabled=False):
            s = (q @ k.transpose(-1, -2)) / math.sqrt(dk)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
            out = self.o_proj(o)
            if out.requires_grad:
                out.register_hook(no_backward)
            return out
"""


def test_39b_f4_import_time_autocast_bf16_values_not_ok(tmp_path):
    (tmp_path / "ac.py").write_text(_AC)
    r = tv_here(tmp_path, "check", "attention", "--module", "ac.py:AC", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


_HOP_AUTO = """import torch
torch.set_autocast_enabled("cpu", True)
def update(xi, patterns, beta):
    x, p = xi.float(), patterns.float()
    a = (beta * x) @ p.T                      # bfloat16 under the import's autocast
    o = torch.softmax(a.float(), dim=-1) @ p  # bfloat16 again
    return o.float() * (1 + 2 ** -20)
"""


def test_39b_f4b_hopfield_import_time_autocast_not_ok(tmp_path):
    import numpy as np

    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).standard_normal((12, 16))))
    (tmp_path / "upd.py").write_text(_HOP_AUTO)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "8", "--module", "upd.py:update",
                "--compute-dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout[-1500:]


_HOP_DD = """import torch
torch.set_default_dtype(torch.float64)
def update(xi, patterns, beta):
    b = torch.tensor(beta)          # the default dtype: float64 for every caller after the import
    return torch.softmax(b * xi @ patterns.T, dim=-1) @ patterns
"""


def test_39b_f2b_hopfield_import_time_default_float64_is_ok(tmp_path):
    import numpy as np

    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).standard_normal((12, 16))))
    (tmp_path / "upd.py").write_text(_HOP_DD)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "0.7", "--module", "upd.py:update")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]


def test_39b_f2c_import_time_default_device_meta_not_ok(tmp_path):
    (tmp_path / "mi.py").write_text("import torch\ntorch.set_default_device('meta')\n" + causal_attn(16, 2))
    r = tv_here(tmp_path, "check", "attention", "--module", "mi.py:Attn", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, r.stdout[-1500:]


_ICL_DD = """import torch
torch.set_default_dtype(torch.float64)
def model(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return torch.tensor((xq.unsqueeze(-2) @ w).reshape(-1).tolist())   # the default dtype: float64 after the import
"""


def test_39b_f2d_icl_import_time_default_float64_is_ok(tmp_path):
    (tmp_path / "lsdd.py").write_text(_ICL_DD)
    r = tv_here(tmp_path, "check", "icl", "--model", "lsdd.py:model", "--lambda", "1,2", "--N", "10", "--M", "10", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]


# --- lead additions ---
def test_39b_n2_matches_derivation_over_no_size_is_refused_in_one_line():
    """39b N2: sizes={"d": ()} or sizes=[] gave a raw IndexError when the check was built; a comparison at no size is
    an error in the claim, like a size 0."""
    from proofs_checks.plugin import DerivationBuilder, matches_derivation
    from proofs_checks.registry import RegistryError
    import sympy as sp

    def derive(d=2):
        b = DerivationBuilder("2x")
        b.fact("args", (sp.Symbol("x", real=True),))
        return b.done(b.step("2x", 2 * sp.Symbol("x", real=True)))

    for sizes in ({"d": ()}, []):
        with pytest.raises(RegistryError, match="no size to compare at"):
            matches_derivation(derive, lambda rng, d=2: (rng.normal(),), points=(2, 2, 2), sizes=sizes)
