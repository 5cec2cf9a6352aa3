"""Issue 44, the sixth (independent) hostile pass: each finding reproduced as a test.

* H1: an output of the user's code that is a ``torch.Tensor`` subclass redefining ``==``, ``float()``
  or ``-`` judged itself: a causal attention leaking 1e-3·x_{t+1} was **ok** (exit 0) when its output
  class lied, and ``check hopfield`` / ``check icl`` ended in an internal traceback.
* H2: ``relative(value, ref, 0.99)`` stated no relative resolution, so a plugin claim ``3x = 2x``
  checked with it was verified.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn


class _Liar(torch.Tensor):
    """A tensor whose own operators lie: every comparison equal, every number 0."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __float__(self):
        return 0.0

    def __bool__(self):
        return True


class _Shrink(torch.Tensor):
    """A tensor whose difference and absolute value are 0."""

    def __sub__(self, other):
        return self.as_subclass(torch.Tensor) * 0

    def abs(self):
        return self.as_subclass(torch.Tensor) * 0


class _LeakyAttn(nn.Module):
    """Causal attention with a leak 1e-3·x_{t+1}, its output returned as ``cls``."""

    def __init__(self, cls=torch.Tensor, d: int = 8):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d, d, dtype=torch.float64) for _ in range(3))
        self.cls = cls

    def forward(self, x):
        T = x.shape[1]
        s = self.q(x) @ self.k(x).transpose(-1, -2) / math.sqrt(x.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        nxt = torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1)
        return (s.softmax(-1) @ self.v(x) + 1e-3 * nxt).as_subclass(self.cls)


def test_plain_strips_a_tensor_subclass_and_keeps_the_graph():
    from numerics.precision import plain

    x = torch.ones(3, requires_grad=True)
    y = plain((2 * x).as_subclass(_Liar))
    assert type(y) is torch.Tensor and y.grad_fn is not None and float(y.detach().sum()) == 6.0
    assert plain(None) is None and plain(3) == 3


@pytest.mark.parametrize("cls", [_Liar, _Shrink], ids=["lying_eq_float", "lying_sub_abs"])
def test_call_hands_the_checks_a_plain_tensor(cls):
    from numerics.attention_rules import call

    m = _LeakyAttn(cls)
    out, _ = call(m, torch.randn(1, 3, 8, dtype=torch.float64))
    assert type(out) is torch.Tensor
    out, w = call(lambda x: (m(x), torch.ones(1, 3, 3).as_subclass(cls)), torch.randn(1, 3, 8, dtype=torch.float64))
    assert type(out) is torch.Tensor and type(w) is torch.Tensor


@pytest.mark.parametrize("cls", [_Liar, _Shrink], ids=["lying_eq_float", "lying_sub_abs"])
def test_a_leaky_attention_whose_output_class_lies_is_a_mismatch(cls):
    import proofs_checks

    r = proofs_checks.check_attention(_LeakyAttn(cls), causal=True, mode="quick", isolate=False, seq_len="1,5,9")
    assert r.verdict.outcome == "mismatch" and "causal_no_future_leak" in r.failed, (r.verdict.outcome, r.failed)


def test_a_hopfield_update_whose_output_class_lies_is_judged_on_its_numbers():
    import numpy as np

    from proofs_checks.sanity.hopfield import run_hopfield

    P = np.sign(np.random.default_rng(0).standard_normal((6, 8)))

    def hot(xi, patterns, beta):  # beta doubled: wrong
        return (torch.softmax(2 * beta * xi @ patterns.T, -1) @ patterns).as_subclass(_Liar)

    r = run_hopfield(P, beta=2.0, module=hot)
    assert r.verdict.outcome == "mismatch" and "update_matches_modern" in r.failed, (r.verdict.outcome, r.failed)


def test_an_icl_model_whose_output_class_lies_is_judged_on_its_numbers():
    import proofs_checks

    def zeros(xs, ys, xq):
        return torch.zeros(xq.shape[:-1], dtype=xq.dtype).as_subclass(_Liar)

    r = proofs_checks.check_icl_model(zeros, lambdas="1,2", N=10, mode="quick", isolate=False)
    assert r.verdict.outcome == "mismatch", r.verdict.outcome


def test_relative_with_a_tolerance_near_one_states_an_infinite_resolution():
    from proofs_checks.comparisons import relative

    r = relative([3.0, 6.0], [2.0, 4.0], 0.99, "99 percent")
    assert r.passed and r.resolution == math.inf
    r = relative([1.0, 2.0 + 1e-12], [1.0, 2.0], 1e-10, "rounding")
    assert r.passed and r.resolution < 2e-10


def test_a_plugin_claim_checked_with_relative_099_is_not_verified(tmp_path, monkeypatch):
    from tests import test_hostile_round5 as r5

    check = '''
@numeric("3x against 2x with a relative tolerance of 0.99")
def CHECK(form, ctx):
    from proofs_checks.plugin import relative

    x = ctx.rng().standard_normal(20) + 5
    return relative(form(x), 2 * x, 0.99, "99 percent")
'''
    monkeypatch.setitem(r5._VACUOUS, "rel", (check, r5._FOUR, "accept the form multiplied by 1/2"))
    r5.test_nan_mutants_zero_references_and_resolutions_past_one_verify_nothing(tmp_path, "rel")


# --- H3: `tverify check … --json -` with the standard output closed ran the whole check first ------

def test_check_json_dash_with_stdout_closed_is_refused_before_the_check(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "tverify"
    cmd = [str(script)] if script.exists() else [sys.executable, "-P", "-m", "proofs_checks"]
    line = " ".join([*cmd, "check", "lyapunov", "--f", "'-x, -y'", "--V", "'x**2 + y**2'", "--json", "-"])
    r = subprocess.run(["sh", "-c", f"{line} >&-"], stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=120,
                       env={**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert r.returncode == 2 and "--json -" in r.stderr and "standard output is closed" in r.stderr, r.stderr
    assert "verdict" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# --- H4: messages that said something untrue ---------------------------------------------------

@pytest.mark.parametrize("f, words", [("-x*2**13, -y", "a number raised to a power too"),
                                      ("-x*(2*3)**20, -y", "a number raised to a power too"),
                                      ("-x**13, -y", "polynomials up to degree 12")])
def test_lyapunov_exponent_above_the_limit_says_what_it_is(f, words):
    from theory.lyapunov import parse_system
    from theory.validation import InputError

    with pytest.raises(InputError) as e:
        parse_system(f, "x**2 + y**2")
    msg = str(e.value)
    assert "is above 12, the largest exponent allowed" in msg and words in msg and "degree 12" not in msg.split("(")[0]


def test_new_claim_into_a_file_says_it_is_a_file(tmp_path):
    from click.testing import CliRunner

    from proofs_checks.cli_extend import new_claim_cmd

    (tmp_path / "keep.txt").write_text("mine")
    r = CliRunner().invoke(new_claim_cmd, ["zzhs.one", "--dir", str(tmp_path / "keep.txt")])
    assert r.exit_code == 2 and "is a file, not a folder" in r.output and "File exists" not in r.output, r.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


# --- H5: `--seq-len 1,,2` dropped the empty field silently (and probed lengths 1, 2) -----------------

@pytest.mark.parametrize("text", ["1,,2", "17,", ",5"])
def test_seq_len_with_an_empty_field_is_refused(text):
    from proofs_checks.sanity.attention_declaration import DeclarationError, parse_lengths

    with pytest.raises(DeclarationError) as e:
        parse_lengths(text)
    assert "empty field at position" in str(e.value) and "--seq-len" in str(e.value)
    assert parse_lengths("5, 1,17") == [1, 5, 17]


# --- H6: an absurd planted mutant (1e305·x) satisfied the own-mutant rule for `compare(err, 1e300)` ----------

def test_a_bare_huge_tolerance_with_an_absurd_mutant_is_not_verified(tmp_path, monkeypatch):
    """No check states a relative resolution below 1: the checks must reject the form multiplied by 2 (what
    the claim's own mutants prove nothing about when they are absurd); `compare(err, 1e300)` does not."""
    from tests import test_hostile_round5 as r5

    absurd = 'Mutant("huge", "wrong constant", "1e305 x", lambda x: 1e305 * np.asarray(x, dtype=float))'
    monkeypatch.setitem(r5._VACUOUS, "hugemut", ("hugecmp", absurd, "accept the form multiplied by 2"))
    r5.test_nan_mutants_zero_references_and_resolutions_past_one_verify_nothing(tmp_path, "hugemut")
