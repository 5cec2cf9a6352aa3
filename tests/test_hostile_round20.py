"""Notes of hostile passes 12 and 13 fixed by the lead in session 7: the Python API takes torch tensors by their
values (a tensor requiring grad raised torch's RuntimeError from tverify's code)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_att_svm_data_and_weights_requiring_grad_are_their_values():
    """12b N6: check_att_svm of data or weights that require grad raised torch's "Can't call numpy() on Tensor that
    requires grad"; they are taken by their values, as numpy arrays of the same numbers are."""
    import proofs_checks as P
    from numerics.att_svm import make_instance, solve_att_svm

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    W = 50 * solve_att_svm(inst.X, inst.z, inst.opt).W
    plain = P.check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=W).to_json()
    grad = P.check_att_svm((torch.tensor(inst.X, requires_grad=True), inst.z, inst.y, inst.v),
                           weights=torch.tensor(W, requires_grad=True)).to_json()
    assert grad["weights"] == plain["weights"]


def test_api_array_takes_tensors_by_their_values():
    from proofs_checks.api import _array

    t = torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16, requires_grad=True)
    a = _array(t, np.float64)
    assert a.dtype == np.float64 and a.tolist() == [[1.5, -2.0]]
    assert _array(torch.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]
