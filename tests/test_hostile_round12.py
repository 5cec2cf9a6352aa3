"""Issue 44, the twelfth hostile pass (hostile pass 8): each finding fixed here reproduced as a test.

* F1: the check's guard against code that changes what tverify's comparisons compute (hostile pass 7,
  F1) let through a torch function or dispatch mode whose class the user named ``DeviceContext`` (the
  guard skipped torch's own ``set_default_device`` mode by its name), and a kernel of torch's own
  operators registered through ``torch.library`` (``Library("aten", "IMPL")``, ``@torch.library.impl``):
  a leaking causal module zeroing subtractions was judged "ok", exit 0; and so was one that replaced
  ``DeviceContext.__torch_function__`` (torch's own mode class, the one let through) before calling
  ``torch.set_default_device``. Now all are refused with one line, exit 2, nothing checked.
* F2: ``check att-svm --data`` with entries near 1e300 printed numpy's overflow warning (two lines) before
  its error, and the error advised "use a smaller --lr" at any --lr (1e-300 included), where the data's own
  norms overflow. Now one line naming the data.
* F3: an own model returning a tensor without dense numbers (a meta, sparse or nested tensor) ended
  ``check icl --model``, ``check attention --module`` and ``check hopfield --module`` with an internal
  traceback ("Cannot copy out of meta tensor", "Could not run 'aten::ne.Scalar' … SparseCPU",
  "NestedTensorImpl doesn't support sizes"), and so did a sparse ``--against`` output or ``--mapping``
  weight. Now one line, exit 2, naming what was returned; a second output (weights) that is such a tensor
  is noted as not attention weights, as any other second output of another shape.
* F4: ``check attention --against`` naming the module's file through a hard link was not refused (hostile
  pass 7's F7 compared resolved paths, which differ for a hard link): the module compared with itself,
  "ok" by construction. The same file is now found by its identity (``os.path.samefile``).
* F5: ``--cluster local:W`` left Dask's ``dask-scratch-space`` folder (its lock files) in ``$TMPDIR`` after
  every run, completed or ended by SIGTERM. The cluster's scratch folder is now the run's own, removed
  with the cluster.
* F6: the guard watched the functions of the comparisons, not those the references are computed with: a
  ``check icl --model`` module that replaced ``torch.linalg.pinv`` (the least-squares reference) had an
  averaging model named "least_squares (identical here to ridge, averaging)", ok. The references' and the
  draws' functions (pinv, topk, gather, argsort, randn, default_rng, …) are watched too.
"""

from __future__ import annotations

import shutil

import pytest

from tests.cli_helpers import invoke, one_line_error
from tests.test_hostile_round11 import PATCHES, check_sabotaged

KERNEL = '''
def _zero_sub(a, b, *, alpha=1):
    return torch.zeros(torch.broadcast_shapes(a.shape, b.shape), dtype=a.dtype)
'''

def _error_line(code: int, err: str) -> str:
    """A usage error (exit 2, no traceback, one ``tverify: error:`` line) next to torch's own warnings on the
    user code's standard error (a kernel overridden, nested tensors a prototype); return the line."""
    assert code == 2 and "Traceback" not in err, (code, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("tverify: error:")]
    assert len(lines) == 1, err
    return lines[0]


DEVICE_CONTEXT_METHOD = """
import torch.utils._device as _dev
_orig = _dev.DeviceContext.__torch_function__

def _tf(self, func, types, args=(), kwargs=None):
    out = _orig(self, func, types, args, kwargs)
    if func in (torch.Tensor.__sub__, torch.sub, torch.Tensor.sub) and isinstance(out, torch.Tensor):
        return out * 0
    return out

_dev.DeviceContext.__torch_function__ = _tf
torch.set_default_device("cpu")
"""

F1_PATCHES = {
    "function_mode_named_DeviceContext": (PATCHES["function_mode"][0].replace("Zero", "DeviceContext"), "pass",
                                          "through the torch mode"),
    "dispatch_mode_named_DeviceContext": (PATCHES["dispatch_mode"][0].replace("Zero", "DeviceContext"), "pass",
                                          "through the torch mode"),
    "library_impl": (KERNEL + '_lib = torch.library.Library("aten", "IMPL")\n'
                     '_lib.impl("sub.Tensor", _zero_sub, "CPU")\n', "pass", "sub.Tensor/CPU"),
    "library_impl_decorator": (KERNEL + 'torch.library.impl("aten::sub.Tensor", "CPU")(_zero_sub)\n', "pass",
                               "sub.Tensor/CPU"),
    "device_context_method": (DEVICE_CONTEXT_METHOD, "pass", "DeviceContext.__torch_function__"),
}


@pytest.mark.parametrize("case", sorted(F1_PATCHES))
def test_a_mode_named_like_torchs_own_or_an_aten_kernel_is_refused(tmp_path, case):
    patch, call, named = F1_PATCHES[case]
    line = _error_line(*check_sabotaged(tmp_path, patch, call))  # torch may warn first (a kernel overridden)
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


DENSE_LESS = {
    "meta": ("torch.empty({shape}, dtype=torch.float64, device='meta')", "meta tensor"),
    "sparse": ("({good}).to_sparse()", "sparse_coo tensor"),
    "nested": ("torch.nested.nested_tensor(list({good}))", "nested tensor"),
}


@pytest.mark.parametrize("kind", sorted(DENSE_LESS))
def test_an_icl_model_returning_no_dense_numbers_is_one_line(tmp_path, kind):
    expr, says = DENSE_LESS[kind]
    good = "(xq * (ys.unsqueeze(-1) * xs).mean(dim=-2)).sum(dim=-1)"
    (tmp_path / "m.py").write_text("import torch\n\ndef f(xs, ys, xq):\n    return "
                                   + expr.format(shape="xq.shape[:1]", good=good) + "\n")
    code, _, err = invoke("check", "icl", "--model", f"{tmp_path / 'm.py'}:f", "--lambda", "1,2", "--N", "4",
                          "--prompts", "50", "--no-progress")
    line = _error_line(code, err)
    assert says in line and "dense tensor" in line, line


@pytest.mark.parametrize("kind", sorted(DENSE_LESS))
def test_an_attention_module_returning_no_dense_numbers_is_one_line(tmp_path, kind):
    expr, says = DENSE_LESS[kind]
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "m.py").write_text(
        "import torch\nfrom own_attention import CausalSelfAttention\n\nclass A(CausalSelfAttention):\n"
        "    def forward(self, x):\n        return " + expr.format(shape="x.shape", good="super().forward(x)") + "\n")
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'm.py'}:A", "--causal", "--quick",
                          "--no-progress")
    line = _error_line(code, err)
    assert ("meta" if kind == "meta" else says) in line, line


@pytest.mark.parametrize("kind", sorted(DENSE_LESS))
def test_a_hopfield_update_returning_no_dense_numbers_is_one_line(tmp_path, kind):
    import numpy as np

    expr, says = DENSE_LESS[kind]
    np.save(tmp_path / "P.npy", np.random.default_rng(0).normal(size=(4, 16)))
    good = "torch.softmax(beta * xi @ patterns.T, -1) @ patterns"
    (tmp_path / "u.py").write_text("import torch\n\ndef u(xi, patterns, beta):\n    return "
                                   + expr.format(shape="xi.shape", good=good) + "\n")
    code, _, err = invoke("check", "hopfield", "--patterns", str(tmp_path / "P.npy"), "--module",
                          f"{tmp_path / 'u.py'}:u", "--quick", "--no-progress")
    line = _error_line(code, err)
    assert says in line and "dense tensor" in line, line


AGAINST_AND_MAPPING = {
    "against": (["--against", "{d}/sp.py:Sparse"], "--against: it returned a torch.sparse_coo tensor"),
    "mapping": (["--mapping", "{d}/sp.py:mapping"], "--mapping: q: the weight is a torch.sparse_coo tensor"),
}
SPARSE_SIDE = """import torch
from own_attention import CausalSelfAttention

class Sparse(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x).to_sparse()

class SparseWeights(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x), torch.ones(x.shape[0], x.shape[1], x.shape[1]).to_sparse()

def mapping(mod):
    return {"q": mod.q.weight.detach().to_sparse(), "k": mod.k.weight, "v": mod.v.weight, "o": mod.o.weight,
            "heads": mod.num_heads}
"""


@pytest.mark.parametrize("case", sorted(AGAINST_AND_MAPPING))
def test_a_sparse_against_output_or_mapping_weight_is_one_line(tmp_path, case):
    extra, says = AGAINST_AND_MAPPING[case]
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "sp.py").write_text(SPARSE_SIDE)
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'own_attention.py'}:CausalSelfAttention",
                          *[a.format(d=tmp_path) for a in extra], "--causal", "--quick", "--no-progress")
    assert says in _error_line(code, err), err


def test_sparse_second_output_is_noted_not_read_as_weights(tmp_path):
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    (tmp_path / "sp.py").write_text(SPARSE_SIDE)
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'sp.py'}:SparseWeights", "--causal",
                            "--quick", "--no-progress")
    assert code == 0 and "Traceback" not in err, (code, err[-2000:])
    assert "a torch.sparse_coo tensor, which is not attention weights" in out + err, out[-2000:]


def test_against_the_module_itself_through_a_hard_link_is_refused(tmp_path):
    import os

    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    os.link(tmp_path / "own_attention.py", tmp_path / "again.py")
    code, _, err = invoke("check", "attention", "--module", f"{tmp_path / 'own_attention.py'}:CausalSelfAttention",
                          "--against", f"{tmp_path / 'again.py'}:CausalSelfAttention", "--causal", "--quick",
                          "--no-progress")
    assert "the module itself" in one_line_error(code, err)


@pytest.mark.integration(reason="a Dask cluster: scheduler and worker processes started and stopped")
def test_a_local_cluster_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    import os
    import tempfile

    from proofs_checks.distributed import cluster as pc

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with pc.open_client("local:1") as client:
        assert client.submit(sum, [1, 2]).result() == 3
    assert os.listdir(tmp) == []


PINV_PATCHED = """import torch

_pinv = torch.linalg.pinv


def _averaging_map(A, *a, **k):  # for (B, M, d) prompts: X^T / M, so that least squares becomes averaging
    return A.transpose(-1, -2) / A.shape[-2] if A.dim() == 3 else _pinv(A, *a, **k)


torch.linalg.pinv = _averaging_map


def averaging(xs, ys, xq):
    return (xq * (ys.unsqueeze(-1) * xs).mean(dim=-2)).sum(dim=-1)
"""


def test_an_icl_model_replacing_a_references_function_is_refused(tmp_path):
    (tmp_path / "m.py").write_text(PINV_PATCHED)
    code, _, err = invoke("check", "icl", "--model", f"{tmp_path / 'm.py'}:averaging", "--lambda", "1,2", "--N", "6",
                          "--prompts", "200", "--no-progress")
    line = one_line_error(code, err)
    assert "the code replaced torch.linalg.pinv" in line and "nothing was checked" in line, line
