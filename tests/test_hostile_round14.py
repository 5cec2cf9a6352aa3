"""What hostile pass 9 noticed and left, fixed before the acceptance pass; each test fails before its fix.

* N3) ``worst([])`` was 0: ``compare(worst([]), tol)`` passed over nothing. Now a ValueError (the check is an
  error in the claim); ``relative``/``seed_spread`` broadcast a (1,) reference over every value (a 3-vector of
  ones "matched" [1]): a shape mismatch now fails, as ``close`` did.
* N2) ``--store /etc``: a JSON at ``STORE/last/ID.json`` that tverify did not write was replaced by the next run.
* N7) ``--json A --json B`` wrote B only (click keeps the last value): a value option given twice is refused.
* N1) ``check icl`` left ``$TMPDIR/torchinductor_$USER`` (made when torch.optim imports torch._dynamo).
* N4) ``check att-svm --data`` scaled by 1e-300: "tokens share the top score" (the tie test had an absolute floor
  of 1) and then "z_0 = 0" (its norm underflowed); N5) extra arrays in the .npz were ignored silently.
* Pass 7, F8) a catalogue cache hand-edited with terminal escapes was shown as it was (now rebuilt).
* Notes of pass 9: ``TVERIFY_DERIVATION_BUDGET=1_0`` (and ``--N 1_0``) read as 10; ``--cluster LOCAL:1`` tried as
  a host's address; ``--vars α`` refused without saying why.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
import pytest

from proofs_checks.errors import UsageError
from tests.cli_helpers import invoke, one_line_error


def test_worst_of_nothing_is_an_error_not_zero():
    from proofs_checks.registry import compare, worst

    with pytest.raises(ValueError, match="no errors to reduce"):
        worst([])
    with pytest.raises(ValueError):
        worst({})
    r = compare({}, 1e-9, "x")
    assert r.passed is False and "no error measured" in r.reason


@pytest.mark.parametrize("which", ["relative", "seed_spread"])
def test_a_smaller_reference_is_not_broadcast(which):
    from proofs_checks import comparisons as cmp

    r = cmp.relative([1.0, 1.0, 1.0], [1.0], 1e-6, "x") if which == "relative" else \
        cmp.seed_spread([[1.0, 1.0], [1.0, 1.0]], [1.0], floor=1e-6)
    assert r.passed is False and "against 1 reference" in r.reason
    ok = cmp.relative([1.0, 2.0], [1.0, 2.0], 1e-6, "x") if which == "relative" else \
        cmp.seed_spread([[1.0, 2.0], [1.0, 2.0]], [1.0, 2.0], floor=1e-6)
    assert ok.passed is True


def test_a_foreign_file_in_the_store_is_never_replaced(tmp_path):
    from proofs_checks.store import Store, save_last

    st = Store(tmp_path, "--store")
    st.last_dir.mkdir()
    foreign = st.last_path("attn.softmax_convex")
    foreign.write_text('{"mine": 1}')
    msg = save_last({"id": "attn.softmax_convex", "status": "verified"}, st)
    assert msg and "not a previous tverify result" in msg and foreign.read_text() == '{"mine": 1}'
    foreign.write_text(json.dumps({"id": "attn.softmax_convex", "status": "refuted"}))  # tverify's own: replaced
    assert save_last({"id": "attn.softmax_convex", "status": "verified"}, st) is None
    assert json.loads(foreign.read_text())["status"] == "verified"


@pytest.mark.parametrize("argv, option", [
    (("run", "attn.softmax_convex", "--json", "a.json", "--json", "b.json"), "--json"),
    (("check", "lyapunov", "--f", "-x", "--V", "x**2", "--f", "-2*x"), "--f"),
    (("run", "attn.softmax_convex", "--seed", "1", "--seed=2"), "--seed"),
])
def test_a_value_option_given_twice_is_refused(argv, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(*argv)
    line = one_line_error(code, err)
    assert code == 2 and f"option {option} is given more than once" in line
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_flags_may_repeat():
    from proofs_checks.console import refuse_repeated_options
    from proofs_checks.cli import cli
    import click

    with click.Context(cli) as ctx:
        refuse_repeated_options(cli.commands["run"], "run", ["x", "--quick", "--quick"], ctx)  # no error


def test_torch_cache_folder_is_tverifys_own(tmp_path, monkeypatch):
    """torch's inductor cache goes to tverify's per-user cache folder (kept; nothing in $TMPDIR, even after a
    kill -9: hostile pass 10 N2); where that cannot be written, to a temporary folder of the command's own, removed
    when it ends; the user's TORCHINDUCTOR_CACHE_DIR wins; the environment is restored after main()."""
    from proofs_checks import cli

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen = {}

    def fake_main(argv):
        d = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        os.makedirs(os.path.join(d, "dynamo"), exist_ok=True)
        seen["dir"] = d

    monkeypatch.setattr(cli, "_main", fake_main)
    cli.main(["list"])
    assert seen["dir"] == str(tmp_path / "cache" / "tverify" / "torch") and os.path.isdir(seen["dir"])
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and os.listdir(tmp_path / "tmp") == []
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # no per-user cache: a temporary folder
    cli.main(["list"])
    assert seen["dir"].startswith(str(tmp_path / "tmp")) and not os.path.exists(seen["dir"])
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and os.listdir(tmp_path / "tmp") == []
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))  # the user's own: kept
    cli.main(["list"])
    assert seen["dir"] == str(tmp_path / "mine") and (tmp_path / "mine").is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def _data(scale=1.0):
    rng = np.random.default_rng(0)
    X, z = rng.normal(size=(4, 3, 3)), rng.normal(size=(4, 3))
    return X * scale, z * scale, np.sign(rng.normal(size=4)), rng.normal(size=3)


def test_att_svm_tiny_data_refused_for_its_scale_not_for_ties():
    from numerics import att_svm as ns
    from theory.validation import InputError

    X, z, y, v = _data(1e-300)
    opt = ns.optimal_tokens(X, y, v)  # raised TiedTokens before: every score within 1e-9 of 1e-300
    np.testing.assert_array_equal(opt, ns.optimal_tokens(X * 1e300, y, v))
    with pytest.raises(InputError, match="too small for float64") as info:
        ns.validate_instance(X, z, opt)
    assert "z_0 = 0" not in str(info.value)
    ns.validate_instance(*_data(1e-20)[:2], opt)  # small but solvable: accepted


def test_att_svm_data_with_extra_arrays_is_refused(tmp_path):
    X, z, y, v = _data()
    np.savez(tmp_path / "d.npz", X=X, z=z, y=y, v=v, W=np.eye(3))
    code, out, err = invoke("check", "att-svm", "--data", str(tmp_path / "d.npz"), "--iters", "10")
    line = one_line_error(code, err)
    assert code == 2 and "also holds array(s) W" in line


def test_hand_edited_catalogue_cache_is_rebuilt_not_shown(tmp_path):
    from proofs_checks.output import catalogue as cat

    doc = json.loads((cat.repo_docs_dir() / "catalogue.json").read_text(encoding="utf-8"))
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    assert cat._read(p) is not None
    doc["claims"][0]["title"] = "\x1b[2J\x1b[31mPWNED"
    p.write_text(json.dumps(doc))
    assert cat._read(p) is None


@pytest.mark.parametrize("value", ["1_0", "1_000.5"])
def test_underscored_numbers_are_refused(value, monkeypatch):
    from proofs_checks.fingerprint import derivation_budget

    monkeypatch.setenv("TVERIFY_DERIVATION_BUDGET", value)
    with pytest.raises(UsageError, match="TVERIFY_DERIVATION_BUDGET"):
        derivation_budget()
    monkeypatch.delenv("TVERIFY_DERIVATION_BUDGET")
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", value)
    assert code == 2 and "without '_'" in one_line_error(code, err)


def test_cluster_in_capitals_is_refused():
    from proofs_checks.distributed.cluster import parse_cluster

    with pytest.raises(UsageError, match="lower case"):
        parse_cluster("LOCAL:1")
    assert parse_cluster("local:1") == ("local", 1)


def test_lyapunov_non_ascii_vars_says_why():
    code, out, err = invoke("check", "lyapunov", "--f", "-a", "--V", "a**2", "--vars", "α")
    assert code == 2 and "ASCII identifiers" in one_line_error(code, err)
    assert math.isfinite(1.0)


def test_local_cluster_starts_its_workers_with_a_safe_path(monkeypatch, tmp_path):
    """Pins pass 7 F9 in `make test` (the end-to-end run of a local:1 cluster from a folder of stdlib-named files is
    in the integration tier): the LocalCluster is built with PYTHONSAFEPATH=1, so its `python -c` workers never put
    the working folder on sys.path, inside a scratch folder of its own; the variable is restored after."""
    import distributed

    from proofs_checks.distributed import cluster

    seen = {}

    class Refused(Exception):
        pass

    def fake_cluster(**kw):
        import dask

        seen.update(safe=os.environ.get("PYTHONSAFEPATH"), scratch=dask.config.get("temporary-directory"),
                    local=kw.get("local_directory"))
        raise Refused("no workers in this test")

    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(distributed, "LocalCluster", fake_cluster)
    with pytest.raises(UsageError, match="could not start 1 local Dask worker"):
        with cluster.open_client("local:1"):
            pass
    assert seen["safe"] == "1" and "PYTHONSAFEPATH" not in os.environ
    assert seen["scratch"] == seen["local"] and seen["local"].startswith(str(tmp_path) + os.sep + "tverify-dask-")
    assert os.listdir(tmp_path) == []  # the scratch folder removed


def test_store_before_and_after_the_command_is_refused_and_a_blank_store_too(tmp_path, monkeypatch):
    """Hostile pass 10 (a, notes): `tverify --store A run --store B` took B silently; TVERIFY_STORE=' ' made a
    folder named ' '; `--store ' '` too."""
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("--store", "sa", "run", "attn.softmax_simplex", "--store", "sb", "--quick")
    assert code == 2 and "--store is given twice" in one_line_error(code, err)
    code, out, err = invoke("run", "attn.softmax_simplex", "--store", " ", "--quick")
    assert code == 2 and "empty path" in one_line_error(code, err)
    monkeypatch.setenv("TVERIFY_STORE", " ")
    code, out, err = invoke("run", "attn.softmax_simplex", "--quick")
    assert code == 2 and "TVERIFY_STORE is blank" in one_line_error(code, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


OWN_SWAPS = {
    # an honest copy of the module checked in its place (hostile pass 10, F2)
    "run_attention": ('''
import proofs_checks.sanity.attention as A
_orig = A.run_attention
def _swap(obj, **kw):
    good = CausalSelfAttention(16, 2)
    return _orig(good, **kw)
A.run_attention = _swap
''', "tverify's own proofs_checks.sanity.attention.run_attention"),
    # the causal probe made to draw nothing
    "prop_mask": ('''
import numerics.attention_structural as S
S.prop_mask = lambda probe: []
''', "tverify's own numerics.attention_structural.prop_mask"),
    # a Tensor method inherited from the C base class, hidden by one on torch.Tensor (pass 10, F3's general form)
    "tensor_method_hidden": ('''
_t = torch.Tensor.transpose
torch.Tensor.transpose = lambda self, *a: _t(self, *a)
''', "torch.Tensor.transpose"),
}


@pytest.mark.parametrize("case", sorted(OWN_SWAPS))
def test_a_module_replacing_tverifys_own_functions_is_refused(tmp_path, case):
    """The guard watches every attribute of torch, torch.Tensor, numpy, math, builtins, … and the functions,
    classes and numbers of tverify's own modules loaded in the check's process, not a list of names."""
    from tests.test_hostile_round11 import check_sabotaged

    patch, named = OWN_SWAPS[case]
    line = one_line_error(*check_sabotaged(tmp_path, patch, "pass"))
    assert "the code replaced" in line and named in line and "nothing was checked" in line, line


def test_compare_of_arrays_says_which_call_or_reads_every_element():
    """Hostile pass 10 (b, N3): a torch tensor of several errors raised torch's own ValueError; a dict entry
    holding an array raised numpy's TypeError from the finiteness pre-check (worst() reads every element)."""
    import torch

    from proofs_checks.registry import compare

    with pytest.raises(TypeError, match="compare: the error and the tolerance are numbers"):
        compare(torch.tensor([0.5, 2.0]), 1.0, "x")
    r = compare({"a": np.array([0.1, np.nan])}, 1.0, "x")
    assert r.passed is False and r.reason == "non-finite error: a = nan"
    assert compare({"a": np.array([0.1, 0.2])}, 1.0, "x").passed is True


def test_icl_weights_npz_with_extra_arrays_is_refused(tmp_path):
    """Hostile pass 10 (b, N5): `check icl --weights` ignored extra .npz arrays silently (att-svm refused them)."""
    np.savez(tmp_path / "w.npz", W_PV=np.eye(3), W_KQ=np.eye(3), other=np.ones(2))
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "5", "--weights", str(tmp_path / "w.npz"))
    assert code == 2 and "also holds array(s) other" in one_line_error(code, err)


def test_a_one_dimensional_shape_is_written_as_a_tuple():
    from theory.validation import InputError, as_finite_array

    with pytest.raises(InputError, match=r"must have shape \(6,\), got \(7,\)"):
        as_finite_array(np.zeros(7), "v", shape=(6,))


def test_relative_against_a_zero_reference_is_a_vacuous_check():
    from proofs_checks.comparisons import VacuousCheck, relative

    with pytest.raises(VacuousCheck, match="reference is 0 everywhere"):
        relative([0.0, 0.0], [0.0, 0.0], 1e-6, "x")


def test_an_inherited_plugin_child_mark_is_no_mark(monkeypatch):
    """Hostile pass 11 (a, F2): TVERIFY_PLUGIN_CHILD=1 set by hand or inherited ran plugins unprobed in the Python API
    and the fixture (an os._exit(0) at import ended a test session with exit 0). A plugin's process marks itself with
    its own process id; any other value, in any other process, is no mark."""
    from proofs_checks.claims._plugins import CHILD_ENV, _PROBE, in_child

    monkeypatch.setenv(CHILD_ENV, "1")
    assert not in_child()
    monkeypatch.setenv(CHILD_ENV, str(os.getpid() + 1))
    assert not in_child()
    monkeypatch.setenv(CHILD_ENV, str(os.getpid()))
    assert in_child()
    assert 'os.environ["TVERIFY_PLUGIN_CHILD"] = str(os.getpid())' in _PROBE


def test_a_signal_while_local_workers_start_leaves_nothing(monkeypatch, tmp_path):
    """Hostile pass 11 (a, F3): a SIGTERM/SIGHUP/Ctrl-C while `--cluster local:W` started its workers left
    $TMPDIR/tverify-dask-*; whatever stops the start now closes what started and removes the folder."""
    import distributed

    from proofs_checks.distributed import cluster

    class Stop(BaseException):
        pass

    def interrupted(**kw):
        os.makedirs(os.path.join(kw["local_directory"], "dask-scratch-space"))
        raise Stop()

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(distributed, "LocalCluster", interrupted)
    with pytest.raises(Stop):
        with cluster.open_client("local:1"):
            pass
    assert os.listdir(tmp_path) == []


DAEMON_MAIN = r"""
import os, sys, time
sys.path[:0] = [{root!r}]
import proofs_checks.cli as cli

def _main(argv):  # what a plugin's import did in tverify's own process: a setsid'd double-forked daemon
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            open({pidfile!r}, "w").write(str(os.getpid()))
            time.sleep(60)
            open({marker!r}, "w").write("alive")
        os._exit(0)
    os.waitpid(pid, 0)
    while not os.path.exists({pidfile!r}):
        time.sleep(0.01)

cli._main = _main
sys.argv = ["tverify", "--version"]
cli.main()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_the_command_kills_the_orphans_of_what_it_started(tmp_path):
    """Hostile pass 11 (a, F1): a plugin whose import double-forked a setsid daemon left it alive after tverify
    exited. The console command adopts orphans (PR_SET_CHILD_SUBREAPER) and kills what is below it at its end."""
    import subprocess
    from pathlib import Path

    pidfile, marker = tmp_path / "pid", tmp_path / "marker"
    src = DAEMON_MAIN.format(root=str(Path(__file__).resolve().parents[1]), pidfile=str(pidfile), marker=str(marker))
    subprocess.run([sys.executable, "-c", src], timeout=120, check=False)
    pid = int(pidfile.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the daemon outlived the command")
    assert not marker.exists()


PASS11_SWAPS = {
    # hostile pass 11 (b, F1): a replaced torch.autograd.grad zeroed every gradient the backward check compares
    "autograd_grad": ('''
_g = torch.autograd.grad
torch.autograd.grad = lambda outputs, inputs, *a, **k: tuple(torch.zeros_like(r) for r in _g(outputs, inputs, *a, **k))
''', "torch.autograd.grad"),
    # hostile pass 11 (b, F2): a replaced json.dumps rewrote the child's result (every row "pass")
    "json_dumps": ('''
import json
_d = json.dumps
json.dumps = lambda obj, *a, **k: _d(obj, *a, **k).replace('"fail"', '"pass"')
''', "json.dumps"),
}


@pytest.mark.parametrize("case", sorted(PASS11_SWAPS))
def test_autograd_and_the_results_encoding_are_watched(tmp_path, case):
    from tests.test_hostile_round11 import check_sabotaged

    patch, named = PASS11_SWAPS[case]
    line = one_line_error(*check_sabotaged(tmp_path, patch, "pass"))
    assert f"the code replaced {named}" in line and "nothing was checked" in line, line


def test_a_module_that_imports_torch_dynamo_is_not_refused(tmp_path):
    """Hostile pass 11 (b, F5), a regression of the whole-namespace watch: importing torch._dynamo (torch.compile,
    use_deterministic_algorithms) wraps torch.manual_seed and instruments nn.Module.__init__ from torch's own files;
    a correct module doing so was refused as "the code replaced torch.manual_seed"."""
    from tests.test_hostile_round11 import assert_correct_module_ok

    assert_correct_module_ok(tmp_path, "import torch\nimport torch._dynamo")


def test_torchs_own_rewrites_are_told_from_a_users():
    import torch

    from proofs_checks.sanity._loader import _torchs_own_rewrite

    seed = torch.random.manual_seed
    wrapped = torch._disable_dynamo(seed)  # what importing torch._dynamo does to torch.manual_seed
    assert _torchs_own_rewrite(("torch", "manual_seed"), seed, wrapped)
    assert not _torchs_own_rewrite(("torch", "manual_seed"), seed, lambda s: None)
    assert not _torchs_own_rewrite(("torch.nn.functional", "softmax"), torch.nn.functional.softmax,
                                   torch.nn.functional.log_softmax)
    # a torch decorator around the very function, elsewhere, is a replacement (hostile pass 12 F4: autocast)
    mm = torch.Tensor.__matmul__
    assert not _torchs_own_rewrite(("torch.Tensor", "__matmul__"), mm, torch.autocast("cpu", dtype=torch.bfloat16)(mm))
    assert not _torchs_own_rewrite(("torch", "manual_seed"), seed, torch._disable_dynamo(lambda s: None))


@pytest.mark.parametrize("value", [np.array([1 + 5j, 2.0]), [1.0, 3j], np.complex128(3j)])
def test_complex_numbers_are_refused_not_cast_to_real(value):
    """Hostile pass 11 (b, F4): relative/close/worst cast complex to real, dropping the imaginary part (passed)."""
    import torch

    from proofs_checks.comparisons import close, relative
    from proofs_checks.registry import worst

    with pytest.raises(TypeError, match="complex"):
        worst([value])
    with pytest.raises(TypeError, match="complex"):
        relative(torch.tensor([1 + 5j, 2 + 0j]), np.array([1.0, 2.0]), 0.01, "j")
    with pytest.raises(TypeError, match="complex"):
        close(np.array([1 + 5j, 2.0]), np.array([1.0, 2.0]), 0.01, "j")


def test_outputs_equal_to_the_float64_reference_are_float64_whatever_they_round_to():
    """Hostile pass 11 (b, F3): a saturated Hopfield update returning patterns of ±0.5, ±1.5 (exact in float16) was
    said to compute in float16 and failed precision_as_declared; the float64 reference it equals decides."""
    import torch

    from numerics.precision import infer_work_dtype

    out = torch.tensor([0.5, -1.5, 1.5], dtype=torch.float64)
    # alone, representability is all there is: the format with the fewest significant bits that holds them all
    # (bfloat16 before float16, hostile pass 12b F5)
    assert infer_work_dtype(out) == torch.bfloat16
    assert infer_work_dtype(out, out.clone()) == torch.float64
    assert infer_work_dtype(out, out + 1e-3) == torch.bfloat16  # not the reference: the rounding tells


@pytest.mark.parametrize("argv", [("list", "--markdown", "--docs-dir", "@ENV@/tv-docs"),
                                  ("--store", "@ENV@/tv-store", "list"),
                                  ("run", "attn.softmax_simplex", "--quick", "--store", "@OWN@/tv-store")])
def test_options_that_write_never_write_inside_tverifys_own_installation(argv, tmp_path):
    """Hostile pass 11 (a, F7): new-claim --dir, list --docs-dir and --store wrote inside tverify's environment or
    code, which --out and --json refuse. A folder that merely holds the environment (a checkout) is fine for them."""
    from pathlib import Path

    import proofs_checks

    env, own = sys.prefix, str(Path(proofs_checks.__file__).resolve().parent)
    args = [a.replace("@ENV@", env).replace("@OWN@", own) for a in argv]
    code, out, err = invoke(*args)
    assert code == 2 and "which tverify runs from" in one_line_error(code, err)
    assert not os.path.exists(os.path.join(env, "tv-docs")) and not os.path.exists(os.path.join(env, "tv-store"))


def test_an_output_folder_made_during_the_run_keeps_the_new_report_beside_it(tmp_path, capsys):
    """Hostile pass 11 (a, F9): a folder of the user's appearing at --out while the claims ran: the finished report
    was dropped (exit 2, nothing anywhere). It is now built beside it under a new name, said in a warning (the run's
    exit code stands: hostile pass 12a F7)."""
    from proofs_checks.output.report import build_output

    out = tmp_path / "rep"
    out.mkdir()
    (out / "mine.txt").write_text("mine")  # made after the CLI checked --out, before the report is written

    def fill(folder):
        (folder / "report.md").write_text("# report\n")

    where = build_output(out, fill, {"command": "test"})
    warning = capsys.readouterr().err
    assert "(it changed during the run): it was left as it is and the new report is in" in warning
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("rep-")]
    assert kept == [where] and (where / "report.md").read_text() == "# report\n" and str(where) in warning
    assert (out / "mine.txt").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["mine.txt"]
