"""Hostile pass 12 (tester b, the acceptance pass of issue 44): its findings' reproducers, written as strict xfails
during the pass (which fixed nothing); fixed after it, each is a plain test. Each test states the documented behaviour."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli_helpers import invoke_in
from tests.test_hostile_round16b import _WRONG_GRAD
from tests.test_hostile_round18 import _SEND_REWRITE
from tests.tiers import moved

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "own_attention.py"


@pytest.fixture(autouse=True)
def _short_tmp(tmp_path):
    """$TMPDIR a short folder (xdist's tmp_path plus the command's own folder and multiprocessing's socket names
    exceed an AF_UNIX path), reached through ``tmp_path / "tmp"``."""
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="t17b-", dir="/tmp"))
    (tmp_path / "tmp").symlink_to(short)
    yield
    shutil.rmtree(short, ignore_errors=True)


def _env(tmp_path):
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": os.path.realpath(tmp_path / "tmp"),
            "OMP_NUM_THREADS": "1"}


def _tverify(tmp_path, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=timeout)


def _own(tmp_path):
    (tmp_path / "own_attention.py").write_text(OWN.read_text())


def _check_module(tmp_path, source: str, name: str):
    """``check attention --causal --quick`` of class ``name`` of a module ``source`` beside own_attention.py."""
    _own(tmp_path)
    (tmp_path / "m.py").write_text(source)
    return _tverify(tmp_path, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick", "--no-progress")


#: tests/test_hostile_round18.py's replacement of multiprocessing's Connection.send_bytes, rewriting the result
_SEND_BYTES = _SEND_REWRITE


@moved("a check from a fresh process (≈ 2 s), the same case as round 18's",
       'tests/test_hostile_round18.py::test_the_result_channel_is_not_the_users_to_rewrite')
# F1: the result's pipe (multiprocessing.connection) is neither watched nor restored: a leak rewritten into "ok".
def test_replaced_connection_send_bytes_is_not_ok(tmp_path):
    r = _check_module(tmp_path, _SEND_BYTES, "Leak")
    assert r.returncode != 0, r.stdout[-600:] + r.stderr[-600:]


#: tests/test_hostile_round16b.py's wrong backward, its replacement of torch.autograd.grad wrapped by torch._dynamo.disable
_DYNAMO_DISABLED_GRAD = _WRONG_GRAD.replace("import torch\n", "import torch, torch._dynamo\n", 1).replace(
    "torch.autograd.grad = _grad", "torch.autograd.grad = torch._dynamo.disable(_grad)")


@moved('a check from a fresh process (≈ 3 s)',
       'tests/test_hostile_round14.py::test_torchs_own_rewrites_are_told_from_a_users')
# F4: any replacement wrapped by torch._dynamo.disable is taken for torch's own rewrite: a wrong backward is "ok".
def test_dynamo_disabled_replacement_is_refused(tmp_path):
    r = _check_module(tmp_path, _DYNAMO_DISABLED_GRAD, "WrongGrad")
    assert r.returncode == 2 and "replaced torch.autograd.grad" in r.stderr, r.stdout[-600:] + r.stderr[-600:]


_BF16_UPDATE = '''
import torch
def bf16(xi, patterns, beta):
    x, p = xi.bfloat16(), patterns.bfloat16()
    return (torch.softmax(beta * x @ p.T, -1) @ p).double()
'''


@moved("a check from a fresh process (≈ 5 s), the same case as round 18's",
       'tests/test_hostile_round18.py::test_a_bfloat16_update_is_named_bfloat16_and_judged_there')
# F5: a correct bfloat16 Hopfield update is "float16" and, judged at float16, "not the modern Hopfield update".
def test_bfloat16_update_is_named_bfloat16(tmp_path):
    np.save(tmp_path / "P.npy", np.load(ROOT / "examples" / "P.npy"))
    (tmp_path / "hp3.py").write_text(_BF16_UPDATE)
    r = _tverify(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "2", "--module", "hp3.py:bf16",
                 "--quick", "--no-progress")
    verdict = [line for line in r.stdout.splitlines() if line.startswith("verdict")]
    assert r.returncode == 1 and verdict, r.stdout[-600:] + r.stderr[-600:]
    assert "bfloat16" in verdict[0] and "update_matches_modern" not in verdict[0], verdict[0]


_HANG = '''
import time
from own_attention import CausalSelfAttention
class Hang(CausalSelfAttention):
    def forward(self, x):
        while True: time.sleep(1)
'''


def _signalled(tmp_path, sig, *, to_child: bool):
    """Start a hanging check under the supervisor, send ``sig`` (to the parent, or to the command's process)
    once the check's server is up; return (exit status, stderr, what is left in $TMPDIR)."""
    _own(tmp_path)
    (tmp_path / "hang.py").write_text(_HANG)
    proc = subprocess.Popen([sys.executable, "-m", "proofs_checks", "check", "attention", "--module", "hang.py:Hang",
                             "--causal", "--quick", "--no-progress", "--report", "rep"], cwd=tmp_path,
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.name.startswith("pymp-") for p in (tmp_path / "tmp").rglob("*")):
            time.sleep(0.1)
        time.sleep(3)
        target = proc.pid
        if to_child:
            kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            target = int(kids[0])
        os.kill(target, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(4)
    return proc.returncode, err, sorted(p.name for p in (tmp_path / "tmp").iterdir())


@moved('a hanging check started and signalled from a fresh process (≈ 8 s)',
       'tests/test_supervisor.py::test_every_terminating_signal_to_the_command_reaches_its_work')
# F3: the supervisor parent does not pass SIGXCPU on (docs/cli.md: SIGXCPU is one line, 128 + 24, temp removed).
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux-only")
def test_sigxcpu_to_the_command_is_one_line(tmp_path):
    rc, err, left = _signalled(tmp_path, signal.SIGXCPU, to_child=False)
    assert rc == 128 + signal.SIGXCPU and "terminated (SIGXCPU)" in err and not left, (rc, err[-400:], left)


@moved('a hanging check started and its process killed (≈ 8 s)',
       'tests/test_supervisor.py::test_a_killed_child_leaves_nothing_in_tmpdir')
# F2: the command's process killed (the OOM killer's SIGKILL): the parent lives on but leaves the temp folders.
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux-only")
def test_child_killed_leaves_no_temp_folder(tmp_path):
    rc, err, left = _signalled(tmp_path, signal.SIGKILL, to_child=True)
    assert rc == 128 + signal.SIGKILL and "killed by SIGKILL" in err, (rc, err[-400:])
    assert not left, left


# F6: check_claim / run_mutants / assert_claim take device="cuda" without CUDA and run on the CPU ("verified");
# the CLI, run_claims and check_icl_model refuse it.
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_check_claim_refuses_cuda_without_cuda():
    import proofs_checks as pc
    from theory.validation import InputError

    with pytest.raises(InputError, match="CUDA"):
        pc.check_claim(pc.get_claim("attn.softmax_simplex"), device="cuda")


_TAKES_THE_REPORT_FOLDER = '''
import os
from own_attention import CausalSelfAttention
os.makedirs("race", exist_ok=True)
open(os.path.join("race", "mine.txt"), "w").write("mine")
class Good(CausalSelfAttention):
    pass
'''


# F7: the --report folder taken during the run: the report is built beside it, but --json is never written.
def test_json_written_when_the_report_folder_was_taken(tmp_path, monkeypatch):
    """The files written and the line said are the subject: run in-process (the module takes the folder from the
    check's isolated child, in the working folder, as from the console)."""
    _own(tmp_path)
    (tmp_path / "race.py").write_text(_TAKES_THE_REPORT_FOLDER)
    r = invoke_in(tmp_path, monkeypatch, "check", "attention", "--module", "race.py:Good", "--causal", "--quick",
                  "--no-progress", "--report", "race", "--json", "race.json")
    assert (tmp_path / "race" / "mine.txt").read_text() == "mine"
    assert "it changed during the run" in r.stderr, r.stderr[-600:]
    assert (tmp_path / "race.json").exists(), r.stderr[-600:]


_BF16_ICL = '''
import torch
def ls_bf16(xs, ys, xq):
    xs, ys, xq = xs.bfloat16().float(), ys.bfloat16().float(), xq.bfloat16().float()
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1).bfloat16().double()
'''


# F5 (ICL): a model computing in bfloat16, declared float16 (as the undeclared run advises), passes
# precision_as_declared; bfloat16 is coarser than float16.
def test_bfloat16_icl_model_declared_float16_is_not_ok(tmp_path, monkeypatch):
    """The check's exit code is the subject, not the console process: run in-process (the model runs in the check's
    isolated child)."""
    (tmp_path / "ic3.py").write_text(_BF16_ICL)
    r = invoke_in(tmp_path, monkeypatch, "check", "icl", "--lambda", "1,2", "--N", "10", "--M", "10", "--model",
                  "ic3.py:ls_bf16", "--compute-dtype", "float16", "--quick", "--no-progress")
    assert r.returncode == 1, r.stdout[-600:] + r.stderr[-600:]
