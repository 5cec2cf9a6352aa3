"""Issue 25: the newer commands under hostile input. One fast regression test per reported case:
a one-line message, the documented exit code, no traceback, no hang, memory bounded (the guards
refuse before allocating, so every case here runs in well under a second of work).

Cases: memory guards (hopfield patterns, .npy headers, sweep plans), user code that exits or raises
KeyboardInterrupt, device requests, sparse/meta tensors, literal-vs-path values, overflowing
numbers, store entries, output names, --json overwrite, sweep refusals, Ctrl-C, att-svm weights,
and the message texts."""

from __future__ import annotations

import json
import os
import signal
import struct
import time

import numpy as np
import pytest
import torch

from proofs_checks import guards
from proofs_checks.options import UsageError
from proofs_checks.sanity._loader import UserCodeError, user_code
from tests.cli_helpers import invoke, one_line_error

LONG = "a" * 300


@pytest.fixture()
def box(tmp_path, monkeypatch):
    """A folder with small hostile files, made the current folder."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.save("p.npy", rng.normal(size=(6, 4)))
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 64), }"
    hdr = hdr + " " * (127 - 10 - len(hdr)) + "\n"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + b"\0" * 64)
    (tmp_path / "text.npy").write_text("1 2 3\n4 5 6\n")
    torch.save(torch.eye(4).to_sparse(), "sparse.pt")
    torch.save(torch.empty(4, 4, device="meta"), "meta.pt")
    (tmp_path / "exits.py").write_text(
        "import sys\n"
        "def exit0(*a):\n    sys.exit(0)\n"
        "def exit3(*a):\n    sys.exit(3)\n"
        "def kbint(*a):\n    raise KeyboardInterrupt\n"
        "class Exit0:\n    def __init__(self):\n        sys.exit(0)\n")
    X = rng.standard_normal((6, 3, 4))
    np.savez("data.npz", X=X, z=rng.standard_normal((6, 4)), y=np.sign(rng.standard_normal(6)), v=rng.standard_normal(4))
    return tmp_path


def err_line(code, err):
    return one_line_error(code, err)


# ------------------------------------------------------------------------------------------------
# memory guards


def test_require_memory_is_one_line_usage_error():
    guards.require_memory(1e3, 1.0, "x")
    with pytest.raises(UsageError, match=r"^the probe grid needs about 2 GB of memory, over the limit of 1 GB"):
        guards.require_memory(2 * guards.GB, 1.0, "the probe grid")
    with pytest.raises(UsageError, match="more than float64 can count"):
        guards.require_memory(float("inf"), 1.0, "x")


def test_hopfield_many_patterns_refused_before_allocating(box):
    np.save("big.npy", np.zeros((20000, 64)))  # 10 MB on disk; the check would need ~14 GB
    t0 = time.perf_counter()
    line = err_line(*invoke("check", "hopfield", "--patterns", "big.npy", "--max-memory", "0.1")[::2])
    assert time.perf_counter() - t0 < 10
    assert "20000 patterns" in line and "over the limit" in line and "--max-memory 0.1" in line


def test_npy_header_claiming_a_huge_shape(box):
    line = err_line(*invoke("check", "hopfield", "--patterns", "huge.npy")[::2])
    assert "truncated" in line and "(100000000000, 64)" in line
    line = err_line(*invoke("check", "icl", "--lambda", "huge.npy", "--N", "3")[::2])
    assert "truncated" in line


def test_sweep_plan_of_ten_billion_rows_refused_at_once(box):
    vals = ",".join(str(i) for i in range(1, 1001))
    t0 = time.perf_counter()
    line = err_line(*invoke("sweep", "icl.linear_task_risk", "--grid", f"N={vals} M={vals}", "--seeds", "10000",
                            "--json", "-")[::2])
    assert time.perf_counter() - t0 < 10
    assert "10,000,000,000 rows" in line and "over the limit" in line


def test_sweep_largest_row_checked_and_progress_reports_time_left(box, capsys):
    line = err_line(*invoke("sweep", "icl.linear_task_risk", "--grid", "N=10000 M=10000", "--max-memory", "0.0001",
                            "--json", "-")[::2])
    assert "largest row" in line
    clock = iter(range(0, 1000, 7))
    lines = []

    class S:
        def write(self, t):
            lines.append(t)

        def flush(self):
            pass

    p = guards.Progress("sweep", delay=1, every=1, stream=S(), clock=lambda: float(next(clock)), estimate=300)
    p.update(0.0)
    assert "left (up-front estimate)" in "".join(lines)


# ------------------------------------------------------------------------------------------------
# user code


@pytest.mark.parametrize("name, needle", [("exit0", "called sys.exit(0)"), ("exit3", "called sys.exit(3)"),
                                          ("kbint", "raised KeyboardInterrupt itself"),
                                          ("Exit0", "called sys.exit(0)")])
def test_hopfield_module_that_exits_is_exit_2(box, name, needle):
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--module", f"exits.py:{name}")[::2])
    assert needle in line and line.startswith("tverify: error: --module")


@pytest.mark.parametrize("name, needle", [("exit0", "called sys.exit(0)"), ("exit3", "called sys.exit(3)"),
                                          ("kbint", "raised KeyboardInterrupt itself"), ("Exit0", "sys.exit(0)")])
def test_icl_model_that_exits_is_exit_2(box, name, needle):
    line = err_line(*invoke("check", "icl", "--lambda", "1,2", "--N", "5", "--model", f"exits.py:{name}",
                            "--prompts", "16", "--no-progress")[::2])
    assert needle in line and "--model" in line


def test_user_code_boundary_keeps_a_real_ctrl_c():
    with pytest.raises(UserCodeError, match=r"called sys.exit\(0\)"):
        with user_code("--module", "f"):
            raise SystemExit(0)
    with pytest.raises(UserCodeError, match="raised ValueError: bad"):
        with user_code("--module", "f"):
            raise ValueError("bad")
    with pytest.raises(KeyboardInterrupt):  # a SIGINT delivered while inside is the user's Ctrl-C
        with user_code("--module", "f"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    with pytest.raises(ValueError):  # exceptions=False: the caller reports ordinary exceptions
        with user_code("--model", "m", exceptions=False):
            raise ValueError("x")


def test_import_that_exits(box):
    (box / "bad_import.py").write_text("import sys\nsys.exit(3)\n")
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--module", "bad_import.py:f")[::2])
    assert "sys.exit(3)" in line


# ------------------------------------------------------------------------------------------------
# devices


def test_cpu_only_checks_refuse_cuda(box):
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--device", "cuda")[::2])
    assert "--device cuda" in line and "CPU only" in line
    line = err_line(*invoke("check", "lyapunov", "--f", "-x", "--V", "x**2", "--device", "cuda")[::2])
    assert "CPU only" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_reproduce_cuda_message_does_not_suggest_allow_skip(box):
    line = err_line(*invoke("reproduce", "garg-2022", "--device", "cuda")[::2])
    assert "--allow-skip" not in line and "--device cpu" in line


# ------------------------------------------------------------------------------------------------
# files


@pytest.mark.parametrize("f, needle", [("sparse.pt", "sparse tensor"), ("meta.pt", "meta tensor"),
                                       ("text.npy", "not a NumPy .npy file")])
def test_pattern_files(box, f, needle):
    line = err_line(*invoke("check", "hopfield", "--patterns", f)[::2])
    assert needle in line and "Python objects" not in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_inputs_refused_not_a_hang(box):
    for name in ("f.npy", "f.pt"):  # reading a FIFO nobody writes to blocked forever
        os.mkfifo(name)
        line = err_line(*invoke("check", "hopfield", "--patterns", name)[::2])
        assert "not a regular file" in line
    os.mkfifo("f.npz")
    line = err_line(*invoke("check", "att-svm", "--data", "f.npz")[::2])
    assert "not a regular file" in line


def test_sparse_weights(box):
    torch.save({"W": torch.eye(4).to_sparse()}, "w.pt")
    line = err_line(*invoke("check", "att-svm", "--data", "data.npz", "--weights", "w.pt")[::2])
    assert "sparse tensor" in line


def test_lambda_literal_is_never_a_path(box):
    (box / "1,2").write_text("not numbers")
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "3", "--max-memory", "1e-9")
    line = err_line(code, err)
    assert "over the limit" in line  # parsed as the numbers 1, 2: it got as far as the memory guard
    many = ",".join(str(i) for i in range(1, 201))
    line = err_line(*invoke("check", "icl", "--lambda", many, "--N", "3", "--max-memory", "1e-9")[::2])
    assert "File name too long" not in line and "over the limit" in line


def test_noise_that_overflows(box):
    line = err_line(*invoke("check", "icl", "--lambda", "1,2", "--N", "5", "--model", "exits.py:exit0",
                            "--noise", "1e308")[::2])
    assert "--noise" in line


def test_hopfield_beta_or_patterns_overflowing_is_usage_not_mismatch(box):
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--beta", "1e308")[::2])
    assert "β·M²" in line
    np.save("p300.npy", np.random.default_rng(1).normal(size=(5, 3)) * 1e300)
    line = err_line(*invoke("check", "hopfield", "--patterns", "p300.npy")[::2])
    assert "β·M²" in line
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--beta", "1e-320")[::2])
    assert "1/β" in line  # was: energy_non_increasing NaN, "mismatch" (exit 1) blamed on the user


def test_att_svm_solver_value_error_is_a_failed_attempt_not_a_traceback():
    # SCS raised ValueError("ScsWork allocation error!") on data near 1e300: `check att-svm` crashed (exit 1)
    from dataclasses import replace
    from numerics import att_svm as ns

    class Exploding:
        status = None

        def solve(self, **kw):
            raise ValueError("ScsWork allocation error!")

    rng = np.random.default_rng(0)
    X, z = rng.standard_normal((4, 3, 2)), rng.standard_normal((4, 2))
    built = ns.build_att_svm_problem(X, z, np.zeros(4, dtype=int), norm="fro")
    with pytest.raises(ns.SolverFailure, match="ScsWork allocation error"):  # -> verdict inconclusive (exit 3)
        ns.solve_problem(replace(built, problem=Exploding()))


def test_att_svm_weights_duplicates_zero_and_zip_bomb(box):
    torch.save({"a.W": torch.randn(4, 4), "b.W": torch.randn(4, 4)}, "dup.pt")
    line = err_line(*invoke("check", "att-svm", "--data", "data.npz", "--weights", "dup.pt")[::2])
    assert "a.W, b.W" in line
    torch.save({"W": torch.zeros(4, 4)}, "zero.pt")
    code, out, err = invoke("check", "att-svm", "--data", "data.npz", "--weights", "zero.pt")
    line = err_line(code, err)
    assert "all zeros" in line and "Warning" not in err
    np.savez_compressed("bomb.npz", W=np.zeros((4096, 4096)))  # 128 MB decompressed, 130 kB on disk
    t0 = time.perf_counter()
    line = err_line(*invoke("check", "att-svm", "--data", "data.npz", "--weights", "bomb.npz")[::2])
    assert "(4096, 4096)" in line and time.perf_counter() - t0 < 5


class Thing:
    """Not a tensor: torch.load(weights_only=True) refuses to unpickle it."""


def test_weights_only_message_is_whole(box):
    torch.save({"W": torch.eye(4), "o": Thing()}, "obj.pt")
    line = err_line(*invoke("check", "att-svm", "--data", "data.npz", "--weights", "obj.pt")[::2])
    assert line.endswith("model.state_dict())")


# ------------------------------------------------------------------------------------------------
# outputs


@pytest.mark.parametrize("opt", ["--json", "--report"])
def test_long_output_name_refused_before_the_run(box, opt):
    code, out, err = invoke("check", "hopfield", "--patterns", "p.npy", opt, LONG)
    line = err_line(code, err)
    assert "300 bytes" in line and out == ""


def test_long_out_for_sweep_refused(box):
    line = err_line(*invoke("sweep", "attn.scaling_variance", "--grid", "d_k=1", "--quick", "--out", LONG)[::2])
    assert "300 bytes" in line


def test_json_does_not_overwrite_a_file_it_did_not_write(box):
    (box / "notes.txt").write_text("mine")
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--json", "notes.txt")[::2])
    assert "not a previous tverify JSON" in line and "--force" in line
    assert (box / "notes.txt").read_text() == "mine"
    code, _, _ = invoke("check", "hopfield", "--patterns", "p.npy", "--json", "notes.txt", "--force")
    assert code == 0 and json.loads((box / "notes.txt").read_text())["tool"] == "tverify"
    code, _, _ = invoke("check", "hopfield", "--patterns", "p.npy", "--json", "notes.txt")  # ours now
    assert code == 0


def test_report_refusal_message_is_complete(box):
    (box / "rep").mkdir()
    (box / "rep" / "mine.txt").write_text("x")
    line = err_line(*invoke("check", "hopfield", "--patterns", "p.npy", "--report", "rep")[::2])
    assert not line.rstrip().endswith(",") and "Choose a new folder" in line


# ------------------------------------------------------------------------------------------------
# the store


@pytest.mark.parametrize("content, needle", [
    ('{"id": "attn.softmax_simplex", "status": "verified", "checks": [1, 2]}', "check 1 is a int"),
    ('{"id": "attn.softmax_simplex", "status": "[red]x"}', "has status"),
    ('{"id": "attn.softmax_simplex", "status": "verif', "not valid JSON"),
    ('{"id": "other.claim", "status": "verified"}', "holds the result of 'other.claim'"),
    ("[" * 200000 + "]" * 200000, "nested too deeply"),  # json.loads raised RecursionError: a traceback
])
def test_store_entries_validated_on_read(box, content, needle):
    last = box / "st" / "last"
    last.mkdir(parents=True)
    (last / "attn.softmax_simplex.json").write_text(content)
    code, out, err = invoke("show", "attn.softmax_simplex", "--store", str(box / "st"))
    assert code == 0 and "Traceback" not in err
    warn = [ln for ln in err.splitlines() if ln.startswith("tverify: warning:")]
    assert len(warn) == 1 and needle in warn[0] and "attn.softmax_simplex.json" in warn[0]


# ------------------------------------------------------------------------------------------------
# sweep refusals, Ctrl-C, --cluster


def test_sweep_check_with_refused_values_is_exit_2_before_running(box):
    code, out, err = invoke("sweep", "check", "icl", "--grid", "N=5 lambda=1,2|x,y", "--quick", "--json", "o.json")
    line = err_line(code, err)
    assert "lambda=x,y" in line and "nothing was run" in line and not (box / "o.json").exists()


def test_ctrl_c_during_a_sweep_is_one_line_130_and_writes_nothing(box, monkeypatch):
    from proofs_checks.distributed import sweep as sw

    (box / "prev.json").write_text('{"tool": "tverify", "old": true}')

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sw, "run_sweep", interrupted)
    # prev.json is not a recorded tverify output (what it says counts for nothing): --force lets the sweep
    # reach the point where it is interrupted, and the file is still not touched
    code, out, err = invoke("sweep", "attn.scaling_variance", "--grid", "d_k=1", "--quick", "--json", "prev.json", "--force")
    assert code == 130 and len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert json.loads((box / "prev.json").read_text())["old"] is True


def test_interrupt_once_ignores_the_second_signal():
    from proofs_checks.distributed.cluster import interrupt_once

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with interrupt_once() as state:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # ignored: shutdown goes on quietly
                time.sleep(0.05)
    assert state["hit"]
    signal.signal(signal.SIGINT, before)


def test_cluster_port_out_of_range_is_refused_at_once():
    t0 = time.perf_counter()
    line = err_line(*invoke("run", "attn.softmax_simplex", "--cluster", "tcp://127.0.0.1:99999")[::2])
    assert "outside 1 … 65535" in line and time.perf_counter() - t0 < 2


@pytest.mark.parametrize("cmd", [["reproduce", "zfb-2024", "--quick"], ["check", "hopfield", "--patterns", "p.npy"]])
def test_seed_beyond_32_bits_is_usage_not_an_error(box, cmd):
    # --seed 2**64 reached torch's seeding: "ValueError: Overflow when unpacking long long", status error (exit 1)
    line = err_line(*invoke(*cmd, "--seed", str(2**64))[::2])
    assert "--seed" in line and "4294967295" in line
