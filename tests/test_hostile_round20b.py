"""Hostile pass 14 (tester b, the acceptance pass of issue 44): reproducers of its deterministic findings, written as
strict xfails during the pass (which fixes nothing); fixed after it, each is a plain test (F4 a documented limit, still
a strict xfail). F1, a thread of the user's code replacing ``_isolate.json`` after the guard compared, is a race: its
test is tests/test_hostile_round20.py's."""

import decimal
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tiers import moved

from proofs_checks.comparisons import close, relative


def test_long_double_difference_below_float64_is_not_a_pass():
    one = np.array([1], dtype=np.longdouble)
    if np.finfo(np.longdouble).eps >= 2.0 ** -60:
        pytest.skip("long double is float64 on this platform")
    value = one + np.longdouble(2) ** -60  # 1024 × the tolerance away from the reference
    for fn in (close, relative):
        try:
            r = fn(value, one, 2.0 ** -70, "long double")
        except (TypeError, ValueError):
            continue  # refused: fine
        assert not r.passed


def test_decimal_below_float64_range_is_not_an_exact_pass():
    try:
        r = close([decimal.Decimal("1e-400")], [0.0], 0.0, "exact")
    except (TypeError, ValueError):
        return
    assert not r.passed


@moved("the tester's reproducer from a fresh process (≈ 4.5 s); the same folder and command in-process",
       "tests/test_hostile_round20.py::test_a_report_folder_holding_a_path_beyond_path_max_is_the_users")
def test_report_folder_with_an_overlong_path_is_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "proofs_checks", "check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2",
            "--report", "rep", "--no-progress"]
    first = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    fd = os.open(".", os.O_RDONLY)
    try:
        os.chdir(tmp_path / "rep")
        for i in range(24):
            name = f"deep{i:02d}" + "d" * 200
            os.mkdir(name)
            os.chdir(name)
        Path("precious.txt").write_text("user data\n")
    finally:
        os.fchdir(fd)
        os.close(fd)
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in again.stderr + again.stdout
    assert again.returncode == 2


ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "own_attention.py"

#: F4: leaks 1e-14 of the last token into every output the first time a prefix is seen, then replays that first output
_PREFIX_CACHE = '''
import hashlib, torch
from own_attention import CausalSelfAttention
_cache = {}
class Memo(CausalSelfAttention):
    def forward(self, x):
        y = super().forward(x) + 1e-14 * x[:, -1:, :].sum(-1, keepdim=True)
        xs = x.detach().contiguous()
        outs = []
        for t in range(x.shape[1]):
            rows = []
            for b in range(x.shape[0]):
                key = (xs.dtype, hashlib.sha1(xs[b, :t + 1].numpy().tobytes()).hexdigest())
                c = _cache.setdefault(key, y[b, t].detach().clone())
                rows.append(y[b, t] - y[b, t].detach() + c)
            outs.append(torch.stack(rows))
        return torch.stack(outs, 1)
'''


@pytest.mark.integration(reason="a check from a fresh process (≈ 10 s) of what docs/check-attention.md says of a module "
                                "replaying its outputs")
def test_a_prefix_cache_does_not_hide_a_leak(tmp_path):  # (a documented limit until the redrawn inputs' outputs
    # were compared with the reference: hostile pass 36b F1's fix sees the replayed outputs, 1.05e-13 off)
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "memo.py").write_text(_PREFIX_CACHE)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "attention", "--module", "memo.py:Memo",
                        "--causal", "--quick", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]


_LONG = "j" * 300


@pytest.mark.parametrize("args", [
    ["check", "attention", "--module", f"{_LONG}.py:A", "--quick"],
    ["check", "att-svm", "--data", f"{_LONG}.npz"],
    ["check", "icl", "--lambda", "1,2", "--N", "5", "--weights", f"{_LONG}.pt"],
], ids=["module", "att-svm-data", "icl-weights"])
@moved("the tester's reproducers from fresh processes (≈ 3 s each); the same options in-process",
       "tests/test_hostile_round20.py::test_a_file_name_over_255_bytes_is_one_line")
def test_an_overlong_file_name_is_one_line(tmp_path, args):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "proofs_checks", *args, "--no-progress"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert "Traceback" not in r.stdout + r.stderr
    assert r.returncode == 2


@moved("the tester's reproducer, a fresh process (≈ 3 s); the same encodings from a fresh process",
       "tests/test_hostile_round20.py::test_a_non_utf8_standard_output_gets_the_verdict_with_escapes")
def test_a_latin1_stdout_gets_the_verdict(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "latin-1"}
    r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "lyapunov", "--f", "-x, -y", "--V",
                        "x**2 + y**2", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, timeout=600)
    assert b"Traceback" not in r.stdout + r.stderr
    assert r.returncode == 0
