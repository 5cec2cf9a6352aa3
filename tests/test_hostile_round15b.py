"""Hostile pass 10 (tester b): regressions for its findings (docs/extending.md: the comparison helpers)."""

import numpy as np
import pytest

from proofs_checks import compare, worst
from proofs_checks.comparisons import close, exact, relative, seed_spread, z_test


# F1: the comparison helpers read text as numbers (worst('123') was 3.0, relative('12', '12', …) passed,
# compare(worst(['0']), 0.1, …) passed), where compare() itself refuses text: never reinterpreted.
@pytest.mark.parametrize("call", [
    lambda: worst("123"),
    lambda: worst(["0.5", 2.0]),
    lambda: worst({"a": "9"}),
    lambda: worst([np.array(["1", "2"])]),
    lambda: relative("12", "12", 0.1, "j"),
    lambda: relative([1.0, 2.0], ["1", "2"], 0.1, "j"),
    lambda: close("1", "1", 0.1, "j"),
    lambda: close([1.0], [1.0], "0.1", "j"),
    lambda: seed_spread(["1", "1.0"], "1"),
    lambda: seed_spread([[1.0], [1.0]], ["1"]),
    lambda: exact("0", "j"),
    lambda: exact({"a": "0"}, "j"),
    lambda: z_test({"a": ("1", "1", "0.1")}),
])
def test_comparison_helpers_refuse_text(call):
    with pytest.raises(TypeError, match="text"):
        call()


def test_comparison_helpers_still_take_numbers():
    assert worst([np.float64(0.5), 2, np.array([1.0, 3.0])]) == 3.0
    assert worst({"a": 1, "b": [0.5, 0.25]}) == 1.0
    assert relative([1.0, 2.0], (1.0, 2.0), 1e-12, "j").passed
    assert close(np.array([1.0]), [1.0], np.array([0.1]), "j").passed
    assert seed_spread(iter([[1.0], [1.02], [0.98]]), [1.0], floor=1e-3).passed
    assert exact({"count": 0, "ok": False}, "j").passed
    assert z_test({"a": (1.0, 0.1, 1.0)}).passed
    assert not compare(worst([0.5]), 0.1, "j").passed


# F3: a module replacing torch.Tensor.transpose only where the reference called it (the reference's logits then
# carried the module's wrong 1/d_k scale) was "ok"; torch.Tensor methods the references call are watched too.
_WRONG_SCALE = '''
import math, sys, torch
from own_attention import CausalSelfAttention
_orig = torch.Tensor.transpose
def _tp(self, *a):
    out = _orig(self, *a)
    if tuple(a) == (-1, -2) and "attention_reference" in sys._getframe(1).f_code.co_filename:
        return out * (1 / math.sqrt(self.shape[-1]))
    return out
torch.Tensor.transpose = _tp
class WrongScale(CausalSelfAttention):  # logits not scaled by 1/√d_k
    def __init__(self, dim=16, heads=2):
        super().__init__(dim, heads, scale=False)
'''


def test_tensor_method_replaced_for_the_reference_is_refused(tmp_path):
    import shutil

    from tests.cli_helpers import invoke

    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "wrong_scale.py").write_text(_WRONG_SCALE)
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'wrong_scale.py'}:WrongScale", "--causal",
                            "--quick", "--seq-len", "1,2,5", "--no-progress")
    assert code == 2, out + err
    assert "torch.Tensor.transpose" in err


# N1: patterns of 1e-170 were refused as "every pattern is zero" (their squared norms underflow)
def test_hopfield_tiny_patterns_say_underflow_not_zero():
    from proofs_checks.options import UsageError
    from proofs_checks.sanity.hopfield import geometry

    with pytest.raises(UsageError, match="underflow"):
        geometry(np.eye(4) * 1e-170)
    with pytest.raises(UsageError, match="every pattern is zero"):
        geometry(np.zeros((3, 2)))


# F4: a module replacing torch.finfo by one whose eps is 1e9 times larger widened every float64 tolerance: a module off
# by a relative 1e-8 was "ok"
_ONE_HEAD = '''
class Off(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.dim, self.num_heads = dim, 1
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
    def forward(self, x):
        s = self.q(x) @ self.k(x).transpose(-1, -2) / self.dim ** 0.5
        return torch.softmax(s, -1) @ self.v(x) * (1 + 1e-8)
'''
_FINFO = '''
import torch
from torch import nn
_f = torch.finfo
class finfo:
    def __init__(self, *a): self._f = _f(*a)
    def __getattr__(self, n):
        v = getattr(self._f, n)
        return v * 1e9 if n in ("eps", "resolution") else v
torch.finfo = finfo
''' + _ONE_HEAD


def _refused(tmp_path, source: str, replaced: str) -> None:
    from tests.cli_helpers import invoke

    (tmp_path / "patching_mod.py").write_text(source)
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'patching_mod.py'}:Off", "--quick",
                            "--seq-len", "1,2,5", "--no-progress")
    assert code == 2, out + err
    own = "tverify's own " if replaced.split(".")[0] in ("proofs_checks", "numerics", "theory") else ""
    assert f"the code replaced {own}{replaced}" in err


def test_finfo_replaced_is_refused(tmp_path):
    _refused(tmp_path, _FINFO, "torch.finfo")


# F5: --seq-len '1_0,5' probed lengths 5 and 10 and --window '1_0,2' a window of 10 (int('1_0') is 10), although
# numbers with '_' are refused elsewhere on the command line (hostile pass 9)
@pytest.mark.parametrize("argv", [["--seq-len", "1_0,5"], ["--seq-len", "5,1_7"], ["--window", "1_0,0"]])
def test_attention_lists_refuse_underscored_numbers(argv):
    from tests.cli_helpers import invoke

    code, out, err = invoke("check", "attention", "--module", "tests/data/own_attention.py:CausalSelfAttention",
                            "--causal", "--quick", "--no-progress", *argv)
    assert code == 2, out + err
    assert "without '_'" in err


# F3 (operators): RoPE's ``base ** (-arange / r)`` in the reference goes through Tensor.__rpow__; replacing it (a
# wrong RoPE base given to the reference only) is refused like Tensor.transpose
_RPOW = '''
import torch
from torch import nn
_orig = torch.Tensor.__rpow__
def _rpow(self, other):
    return _orig(self, other)
torch.Tensor.__rpow__ = _rpow
''' + _ONE_HEAD


def test_tensor_operator_replaced_is_refused(tmp_path):
    _refused(tmp_path, _RPOW, "torch.Tensor.__rpow__")


# F6: check lyapunov --V 'x**2 # + y**2' dropped the rest as a Python comment; --f '-1_0*x' read -10*x
@pytest.mark.parametrize("f, V", [("-x", "x**2 # c"), ("-x, -y", "x**2 + y**2 # - x*y"), ("-1_0*x", "x**2"),
                                  ("-x", "1_0*x**2"), ("-x", "1.0_5*x**2")])
def test_lyapunov_expressions_refuse_comments_and_underscored_numbers(f, V):
    from tests.cli_helpers import invoke

    code, out, err = invoke("check", "lyapunov", "--f", f, "--V", V, "--no-progress")
    assert code == 2, out + err
    assert "'#'" in err or "without '_'" in err


def test_lyapunov_names_with_digits_and_underscores_still_parse():
    from theory.lyapunov import _check_ast

    assert _check_ast("x_1**2 + x1_2*y", "--V", None) >= {"x_1", "x1_2", "y"}


# F2: a module replacing tverify's own functions in the check's process (run_attention checking an honest copy instead
# of the module; prop_mask returning no causal row) was "ok" / lost its central row; now refused like torch's
_OWN = '''
import torch
from torch import nn
import proofs_checks.sanity.attention as A
_orig = A.run_attention
def _swap(obj, **kw):
    return _orig(obj, **kw)
A.run_attention = _swap
''' + _ONE_HEAD


def test_own_function_replaced_is_refused(tmp_path):
    _refused(tmp_path, _OWN, "proofs_checks.sanity.attention.run_attention")


_OWN_METHOD = '''
import torch
from torch import nn
import numerics.attention_probe as AP
_orig = AP.AttentionProbe.run
def _run(self, x64, grad=False):
    return _orig(self, x64, grad)
AP.AttentionProbe.run = _run
''' + _ONE_HEAD


def test_own_class_method_replaced_is_refused(tmp_path):
    _refused(tmp_path, _OWN_METHOD, "numerics.attention_probe.AttentionProbe.run")
