"""Issue 44, the twelfth hostile pass (hostile pass 8): each finding fixed here reproduced as a test.

* F1: the check's guard against code that changes what tverify's comparisons compute (hostile pass 7,
  F1) let through a torch function or dispatch mode whose class the user named ``DeviceContext`` (the
  guard skipped torch's own ``set_default_device`` mode by its name), and a kernel of torch's own
  operators registered through ``torch.library`` (``Library("aten", "IMPL")``, ``@torch.library.impl``):
  a leaking causal module zeroing subtractions was judged "ok", exit 0. Now both are refused with one
  line, exit 2, nothing checked.
* F2: ``check att-svm --data`` with entries near 1e300 printed numpy's overflow warning (two lines) before
  its error, and the error advised "use a smaller --lr" at any --lr (1e-300 included), where the data's own
  norms overflow. Now one line naming the data.
"""

from __future__ import annotations

import shutil

import pytest

from tests.cli_helpers import invoke, one_line_error
from tests.test_hostile_round11 import LEAK, PATCHES

KERNEL = '''
def _zero_sub(a, b, *, alpha=1):
    return torch.zeros(torch.broadcast_shapes(a.shape, b.shape), dtype=a.dtype)
'''

F1_PATCHES = {
    "function_mode_named_DeviceContext": (PATCHES["function_mode"][0].replace("Zero", "DeviceContext"), "pass",
                                          "through the torch mode"),
    "dispatch_mode_named_DeviceContext": (PATCHES["dispatch_mode"][0].replace("Zero", "DeviceContext"), "pass",
                                          "through the torch mode"),
    "library_impl": (KERNEL + '_lib = torch.library.Library("aten", "IMPL")\n'
                     '_lib.impl("sub.Tensor", _zero_sub, "CPU")\n', "pass", "sub.Tensor/CPU"),
    "library_impl_decorator": (KERNEL + 'torch.library.impl("aten::sub.Tensor", "CPU")(_zero_sub)\n', "pass",
                               "sub.Tensor/CPU"),
}


@pytest.mark.parametrize("case", sorted(F1_PATCHES))
def test_a_mode_named_like_torchs_own_or_an_aten_kernel_is_refused(tmp_path, case):
    patch, call, named = F1_PATCHES[case]
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "sabot.py").write_text(LEAK.replace("@PATCH@", patch).replace("@CALL@", call))
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'sabot.py'}:Leak", "--causal", "--quick",
                          "--no-progress")
    if "library" in case:  # torch warns (on the code's own standard error) that it overrides a kernel
        assert code == 2 and "Traceback" not in err, (code, err)
        line = [ln for ln in err.splitlines() if ln.startswith("tverify: error:")]
        assert len(line) == 1, err
        line = line[0]
    else:
        line = one_line_error(code, err)
    assert "the code replaced" in line and named in line and "nothing was checked" in line, line


def test_att_svm_data_whose_norms_overflow_is_one_line_naming_the_data(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "huge.npz", X=rng.normal(size=(6, 4, 3)) * 1e300, z=rng.normal(size=(6, 3)) * 1e300,
             y=np.sign(rng.normal(size=6)), v=rng.normal(size=3))
    code, _, err = invoke("check", "att-svm", "--data", str(tmp_path / "huge.npz"), "--quick", "--lr", "1e-300",
                          "--no-progress")
    line = one_line_error(code, err)
    assert "overflows float64" in line and "rescale" in line and "smaller --lr" not in line, line
