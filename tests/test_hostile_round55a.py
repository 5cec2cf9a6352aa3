"""Hostile pass 55, tester A: reproducers, each failing on 4f60651 (run there as xfail, strict)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_hostile_round53a import ROOT, _env, _here, _tv, _write  # the same environment, commands and writer
from tests.test_hostile_round54a import BASE  # exact causal multi-head attention, class Base, `attend(x, keep=None)`

# BASE whose logits are (1 + 1e-7)/√d_k · q·k: a forward hook scales the keys the projection k_proj gives
SCALED = BASE + """

def _scale_keys(module, inputs, output):
    return output * (1 + 1e-7)

class SlightScale(Base):
    def __init__(self):
        super().__init__()
        self.k_proj.register_forward_hook(_scale_keys)
"""


def _attention(tmp_path: Path, cls: str, *flags: str) -> subprocess.CompletedProcess:
    """``check attention --module att.py:CLS --causal --quick FLAGS`` on SCALED, in this process."""
    _write(tmp_path, "att.py", SCALED)
    r = _here(tmp_path, "check", "attention", "--module", f"att.py:{cls}", "--causal", "--quick", "--no-progress",
              *flags)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def _row(r: subprocess.CompletedProcess, prop: str) -> str:
    return next((ln for ln in r.stdout.splitlines() if ln.startswith(prop + " ")), "")


def _script_beside(tmp_path: Path, files: tuple[str, ...], call: str) -> subprocess.CompletedProcess:
    """``python run.py`` in ``tmp_path/proj`` calling ``proofs_checks.api.CALL`` (numpy as np, torch, nn and the
    module text BASE as ``base`` imported first), with ``files`` beside it: each name (``x.py`` or ``pkg/__init__.py``)
    a file that writes ``tmp_path/RAN`` when it is imported."""
    proj = tmp_path / "proj"
    for name in files:
        _write((proj / name).parent, Path(name).name, f"open({str(tmp_path / 'RAN')!r}, 'a').write('{name} ran\\n')\n")
    _write(proj, "base.py", BASE)
    script = _write(proj, "run.py", f"""
        import numpy as np
        import torch
        from torch import nn
        from proofs_checks import api
        from base import Base
        np.random.default_rng(0)
        print("OUTCOME", api.{call}.outcome)
    """)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(tmp_path),
                          cwd=str(proj), timeout=280)


def _ran(tmp_path: Path) -> str:
    return (tmp_path / "RAN").read_text() if (tmp_path / "RAN").exists() else ""


def test_1_a_failed_scale_row_does_not_say_off_by_a_factor_1(tmp_path):
    r = _attention(tmp_path, "SlightScale")
    row = _row(r, "scale_1_over_sqrt_dk")
    assert r.returncode == 1 and " FAIL " in row, (r.returncode, r.stdout[-2500:])
    # the verified hint prints the fitted scale exactly (--scale 0.5000000500000001); the row that fails must not
    # say the opposite of its verdict: "s·√d_k = 1", "scale is 1/√d_k × 1: off by a factor 1"
    assert not re.search(r"off by a factor 1(?![\d.])", row), row
    assert not re.search(r"s·√d_k = 1(?![\d.])", row), row


def test_2_a_small_declared_scale_does_not_say_no_scale_fits(tmp_path):
    r = _attention(tmp_path, "Base", "--scale", "1e-16")
    # the module computes plain 1/√d_k = 0.5 (ok without --scale; with --scale 1e-12 the same command fits s = 0.5 and
    # hints "--scale 0.5 … (verified …)"): check-attention.md, Hints: "when scale_1_over_sqrt_dk fails, the fitted logit
    # scale as --scale S"
    assert r.returncode == 1, r.stdout[-2500:]
    assert "no logit scale makes the outputs match" not in r.stdout, _row(r, "scale_1_over_sqrt_dk")
    assert "--scale 0.5" in r.stdout, r.stdout[-2500:]


@pytest.mark.parametrize("name", ["gmpy2.py", "sympy.py", "colorsys.py"])
def test_3_an_in_process_check_runs_no_file_beside_the_script(tmp_path, name):
    r = _script_beside(tmp_path, (name,), "check_attention(Base(), causal=True, mode='quick', seq_len=[3], "
                                             "isolate=False)")
    # own-model.md, "Nothing runs that you did not ask for": "a gmpy2.py beside your script is not what SymPy's
    # optional import finds there"; isolate=False gives up the process's protections (exit, signal, time-out, memory),
    # not that (the same call with isolate=True runs nothing); the script imports no sympy itself
    assert not _ran(tmp_path), _ran(tmp_path) + r.stderr[-2000:]
    assert "OUTCOME ok" in r.stdout, (r.stdout[-1000:], r.stderr[-2000:])


def test_4_att_svm_training_options_with_weights_are_refused_or_said_to_change_nothing(tmp_path):
    data, weights = str(ROOT / "examples" / "data.npz"), str(ROOT / "examples" / "W.pt")
    plain = _tv(tmp_path, "check", "att-svm", "--data", data, "--weights", weights, "--no-progress")
    trained = _tv(tmp_path, "check", "att-svm", "--data", data, "--weights", weights, "--no-progress", "--iters", "5",
                  "--lr", "3")
    help_text = " ".join(_tv(tmp_path, "check", "att-svm", "--help").stdout.split())
    assert plain.returncode == 0, plain.stderr[-1000:]
    # check icl --model refuses its training options ("--steps trains or reads LSA weights; it does not go with
    # --model"); check hopfield's help says "--quick Accepted, and changes nothing here" (hostile pass 54a F4)
    refused = trained.returncode == 2 and "--weights" in trained.stderr
    honest = "changes nothing" in help_text and "--weights" in help_text
    assert refused or honest or trained.stdout != plain.stdout, (trained.returncode, trained.stderr[-500:])


_CALLS = {
    "att_svm": f"check_att_svm({str(ROOT / 'examples' / 'data.npz')!r}, weights={str(ROOT / 'examples' / 'W.pt')!r})",
    "hopfield": "check_hopfield(np.sign(np.random.default_rng(0).standard_normal((12, 16))), beta=8, "
                "module=lambda xi, P, b: torch.softmax(b * xi @ P.T, -1) @ P)",
    "icl": "check_icl_model(lambda xs, ys, xq: xs.new_zeros(xs.shape[0]), lambdas='1,2', N=10, M=10, prompts=64)",
    "lyapunov": "check_lyapunov('-x + 4*y, -x - y**3', 'x**2 + 4*y**2')",
}


@pytest.mark.parametrize("check", sorted(_CALLS))
def test_5_a_numerics_package_beside_the_script_is_not_run(tmp_path, check):
    r = _script_beside(tmp_path, ("numerics/__init__.py", "threadpoolctl.py"), _CALLS[check])
    # own-model.md, "Nothing runs that you did not ask for": "a random.py, json.py, html.py or numerics/ beside your
    # module or in the working folder is never what import random (or tverify's own numerics) finds"; the command line
    # runs neither from its working folder; the script imports neither itself
    assert "OUTCOME" in r.stdout, (r.stdout[-1000:], r.stderr[-2000:])
    assert not _ran(tmp_path), _ran(tmp_path)


# a second implementation of BASE's attention with a key-padding `keep` mask: einsum and a combined boolean mask
PADDED = """
class PadA(Base):
    def forward(self, x, mask):
        return self.attend(x, mask.bool())

class PadB(Base):
    def forward(self, x, mask):
        b, T, _ = x.shape
        sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        s = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(self.head_dim)
        allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None] & mask.bool()[:, None, None, :]
        s = s.masked_fill(~allowed, float("-inf"))
        return self.o_proj(torch.einsum("bhts,bhsd->bthd", s.softmax(-1), v).reshape(b, T, -1))
"""


def test_6_against_with_a_mask_convention_gets_the_mask_or_is_refused_up_front(tmp_path):
    _write(tmp_path, "pad.py", BASE + PADDED)
    flags = ("--causal", "--quick", "--no-progress", "--mask-convention", "keep")
    alone = _here(tmp_path, "check", "attention", "--module", "pad.py:PadB", *flags)
    r = _here(tmp_path, "check", "attention", "--module", "pad.py:PadA", "--against", "pad.py:PadB", *flags)
    assert alone.returncode == 0, alone.stdout[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    # check-attention.md: --against "compares two implementations ... on the same probes"; with --mask-convention "the
    # module is called as obj(x, mask)"; flags that do not go together are refused before anything runs, naming them
    refused_as_a_pair = r.returncode == 2 and "--mask-convention" in r.stderr
    assert r.returncode == 0 or refused_as_a_pair, (r.returncode, r.stderr[-1000:])


_LYAPUNOV = ("check", "lyapunov", "--f", "-x + 4*y, -x - y**3", "--V", "x**2 + 4*y**2")
_ATT_SVM = ("check", "att-svm", "--data", str(ROOT / "examples" / "data.npz"), "--weights",
            str(ROOT / "examples" / "W.pt"), "--no-progress")


@pytest.mark.parametrize("name, argv", [("gmpy2.py", _LYAPUNOV), ("flint.py", _LYAPUNOV), ("dill.py", _ATT_SVM)])
def test_7_the_command_runs_no_optional_import_of_a_pythonpath_folder(tmp_path, name, argv):
    proj = tmp_path / "proj"
    _write(proj, name, f"open({str(tmp_path / 'RAN')!r}, 'a').write('{name} ran')\n")
    env = dict(_env(tmp_path), PYTHONPATH=str(proj))  # the installed `tverify` script finds tverify by itself
    tverify = Path(sys.executable).with_name("tverify")
    r = subprocess.run([str(tverify), *argv], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=280)
    # own-model.md: the tverify command puts "$PYTHONPATH's folders after" the system ones, "so a json.py, typing.py or
    # a project's own theory/ package in a folder of $PYTHONPATH is not what tverify imports"; the optional imports of
    # its libraries are tverify's too (hostile passes 48a F1, 53a F1, 54a F7: imported with the system folders alone)
    assert not _ran(tmp_path), r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stdout[-1000:]
