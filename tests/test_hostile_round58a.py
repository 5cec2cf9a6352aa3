"""Hostile pass 58, tester A: reproducers, each failing on 419946f (run there as xfail, strict)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.test_hostile_round53a import _here, _py, _write  # the same commands, scripts and writer

# a correct causal attention A (4 heads, d_k = 4, D = 16) of pass 57a, its softmax ``probs(s, T)`` for subclasses to
# change, also named Attn
from tests.test_hostile_round57a import ATTN as _BASE  # noqa: E402

ATTN = _BASE + """
Attn = A

class F32Soft(A):
    # exact in float64, but the softmax taken in float32 from T = 21 on
    def probs(self, s, T):
        return s.float().softmax(-1).to(s.dtype) if T > 20 else s.softmax(-1)
"""


def _attention(tmp_path: Path, cls: str, *flags: str) -> subprocess.CompletedProcess:
    """``check attention --module att.py:CLS --causal --no-progress FLAGS`` on ATTN, from ``tmp_path``."""
    _write(tmp_path, "att.py", ATTN)
    r = _here(tmp_path, "check", "attention", "--module", f"att.py:{cls}", "--causal", "--no-progress", *flags)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def _to_decide(r: subprocess.CompletedProcess) -> str:
    return next((ln for ln in r.stdout.splitlines() if ln.strip().startswith("to decide:")), "")


def test_1_a_hint_never_names_the_declared_scale_as_a_change(tmp_path):
    r = _attention(tmp_path, "F32Soft", "--seq-len", "2,5,33")
    assert r.returncode == 1, r.stdout[-1500:]
    hint = _to_decide(r)
    assert "--scale 0.5" not in hint, hint  # 1/√4: the scale declared (by default) already
    assert "--compute-dtype float32" in hint, hint


def test_2_a_wrong_kv_head_count_gets_the_head_count_hint(tmp_path):
    r = _attention(tmp_path, "Attn", "--quick", "--kv-heads", "2")
    assert r.returncode == 1, r.stdout[-1500:]
    hint = _to_decide(r)
    assert "4 heads" in hint or "--kv-heads 4" in hint, r.stdout[-1500:]


def test_3_att_svm_names_no_tie_where_the_optimum_is_unique(tmp_path):
    rng = np.random.default_rng(0)
    X, z, y, v = rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 6)), np.array([1., -1., 1.]), \
        rng.standard_normal(6)
    X[0, 2, 3] = 1e10  # sequence 0's scores: [-0.359, 2.239, -7.35e9, 0.770]: token 1 alone at the top
    scores = y[0] * X[0] @ v
    assert np.sum(scores >= scores.max() - 1.0) == 1
    tmp_path.mkdir(parents=True, exist_ok=True)
    np.savez(tmp_path / "data.npz", X=X, z=z, y=y, v=v)
    r = _here(tmp_path, "check", "att-svm", "--data", "data.npz", "--quick", "--no-progress")
    assert "share the top score" not in r.stderr, r.stderr


def test_4_an_infinite_bound_is_vacuous_not_unconverged(tmp_path):
    P = np.sign(np.random.default_rng(0).standard_normal((12, 16)))  # 12 ±1 patterns, d = 16 (as examples/P.npy)
    tmp_path.mkdir(parents=True, exist_ok=True)
    np.save(tmp_path / "P.npy", np.vstack([P, 0.5 * P[:1]]))  # a 13th, 0.5·x_0: Δ = −4, its bound inf at β = 200
    r = _here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "200", "--no-progress")
    assert "13/13 converged" in r.stdout, r.stdout[-2000:]
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("one_step_within_theorem5_bound"))
    assert "without a converged" not in row, row


def test_5_an_asymmetric_lambda_is_refused_whatever_its_scale(tmp_path):
    _write(tmp_path, "ls.py", """
        import torch

        def least_squares(xs, ys, xq):
            w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
            return (xq.unsqueeze(-2) @ w).reshape(-1)
    """)
    argv = ("check", "icl", "--model", "ls.py:least_squares", "--N", "5", "--quick", "--no-progress", "--lambda")
    at_one = _here(tmp_path, *argv, "2,0.5;0.4,1")
    assert at_one.returncode == 2 and "not symmetric" in at_one.stderr, at_one.stderr
    small = _here(tmp_path, *argv, "2e-12,5e-13;4e-13,1e-12")
    assert small.returncode == 2 and "not symmetric" in small.stderr, (small.returncode, small.stdout[-500:])


def test_6_an_exit_while_the_api_copies_the_object_is_an_input_error(tmp_path):
    _write(tmp_path, "att.py", ATTN)
    script = _write(tmp_path, "run.py", """
        import sys, torch
        import proofs_checks as pc
        from theory.validation import InputError
        from att import Attn

        class Leaky(Attn):  # a future-token leak, whose pickling exits
            def forward(self, x):
                return super().forward(x) + 1e-3 * torch.roll(x, -1, 1)
            def __getstate__(self):
                sys.exit(0)

        try:
            print("OUTCOME", pc.check_attention(Leaky(), causal=True, mode="quick").outcome)
        except InputError as exc:
            print("REFUSED", exc)
    """)
    r = _py(tmp_path, script)
    assert "REFUSED" in r.stdout and "sys.exit" in r.stdout, (r.returncode, r.stdout[-500:], r.stderr[-1000:])


def _att_svm_with_weights(**given):
    import proofs_checks as pc
    from numerics.att_svm import make_instance

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    return pc.check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=np.eye(6), **given)


def _hopfield_without_module(**given):
    import proofs_checks as pc

    return pc.check_hopfield(np.sign(np.random.default_rng(0).standard_normal((12, 16))), beta=0.5, **given)


@pytest.mark.parametrize("call, given", [(_att_svm_with_weights, dict(iters=5)),
                                         (_att_svm_with_weights, dict(mode="bogus")),
                                         (_att_svm_with_weights, dict(device="tpu")),
                                         (_hopfield_without_module, dict(timeout=5))])
def test_7_the_api_refuses_the_options_the_command_refuses(call, given):
    from theory.validation import InputError

    with pytest.raises(InputError):
        call(**given)
