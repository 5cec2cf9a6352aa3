"""Hostile pass 9 (issue 44's acceptance): what it found, each failing before its fix.

* F1) the guard of the functions the comparisons call compared their identities only: a module that assigns the
  *code* of one (``DeviceContext.__torch_function__.__code__ = ...``, torch's own mode class, the one let through)
  or the contents of a closure cell of one (``torch.Tensor.__rsub__``'s wrapped function) changed it in place, and a
  leaking causal module was "ok" (exit 0). The guard now also compares a Python function's code, defaults and
  closure cells (proofs_checks/sanity/_loader.py).
"""

from __future__ import annotations

import pytest

from tests.test_hostile_round11 import check_sabotaged
from tests.test_hostile_round12 import _error_line

CODE_SWAP = """
import torch.utils._device as _dev

def _tf(self, func, types, args=(), kwargs=None):
    kwargs = kwargs or {}
    out = func(*args, **kwargs)
    if func in (torch.Tensor.__sub__, torch.sub, torch.Tensor.sub) and isinstance(out, torch.Tensor):
        return out * 0
    return out

_dev.DeviceContext.__torch_function__.__code__ = _tf.__code__
torch.set_default_device("cpu")
"""

CELL_SWAP = """
import inspect
_rsub = inspect.getattr_static(torch.Tensor, "__rsub__")
_rsub.__closure__[0].cell_contents = lambda self, other: 0 * self
"""

PATCHES = {
    "code_of_device_context_method": (CODE_SWAP, "pass", "DeviceContext.__torch_function__"),
    "closure_cell_of_tensor_rsub": (CELL_SWAP, "pass", "torch.Tensor.__rsub__"),
}


@pytest.mark.parametrize("case", sorted(PATCHES))
def test_a_function_changed_in_place_is_refused(tmp_path, case):
    patch, call, named = PATCHES[case]
    line = _error_line(*check_sabotaged(tmp_path, patch, call))
    assert "the code replaced" in line and named in line and "nothing was checked" in line, line


def test_compare_of_an_empty_dict_of_errors_is_never_a_pass():
    """F2: ``compare({}, tol, ...)`` (a check whose loop drew nothing) passed with error 0."""
    from proofs_checks import compare

    r = compare({}, 1e-3, "rounding")
    assert not r.passed and "empty" in r.reason, r
    assert compare({"a": 0.0}, 1e-3, "rounding").passed


def test_torchs_own_lazy_kernels_are_not_the_users():
    """Merging pass 8's kernel guard: importing flex_attention makes torch register its vmap decompositions
    (aten/addr, mse_loss_backward, … for FuncTorchBatched) through torch.library on first use, and a correct
    FlexAttention module was refused as "the code replaced torch's kernel addr". The snapshot registers them first."""
    import subprocess
    import sys

    code = ("import torch\nfrom proofs_checks.sanity import _loader\nsnap = _loader.function_snapshot()\n"
            "from torch.nn.attention.flex_attention import flex_attention\n"
            "from torch._functorch import predispatch\npredispatch.lazy_load_decompositions()\n"
            "print('REPLACED', _loader.replaced_functions(snap))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "REPLACED []" in p.stdout, (p.stdout[-500:], p.stderr[-1500:])
