"""Issue 36, "nothing passes by accident, round two": user code in its own process, outputs that are
really ours, flags checked against each other, degenerate inputs inconclusive, causes named, and the
messages. Each case asserts one line, the documented exit code and that no data is lost."""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

import proofs_checks
from tests.cli_helpers import MHA_ATTN, invoke, one_line_error
from tests.tiers import moved
from theory.validation import InputError

pytest_plugins = ["pytester"]

MODULES = textwrap.dedent("""
    import os, signal, sys, time
    import torch

""") + MHA_ATTN + textwrap.dedent("""

    class Exit0(Attn):
        def forward(self, x):
            os._exit(0)

    class Killed(Attn):
        def forward(self, x):
            os.kill(os.getpid(), signal.SIGKILL)

    class Segv(Attn):
        def forward(self, x):
            import ctypes
            ctypes.string_at(0)

    class Sleepy(Attn):
        def forward(self, x):
            time.sleep(60)

    class Hog(Attn):
        def forward(self, x):
            import numpy as np
            keep = [np.ones(2**24) for _ in range(64)]  # 8 GB, 128 MB at a time
            return super().forward(x)

    class KbInt(Attn):
        def forward(self, x):
            raise KeyboardInterrupt

    class Chatty(Attn):
        def forward(self, x):
            print("a print from forward")
            os.write(1, b"a raw write to fd 1\\n")
            return super().forward(x)

    def exit_hook(module):
        os._exit(0)

    def icl_exit(xs, ys, xq):
        os._exit(0)

    def icl_ls(xs, ys, xq):
        w = torch.linalg.lstsq(xs, ys[..., None]).solution[..., 0]
        return (w * xq).sum(-1)

    def hop_exit(xi):
        os._exit(0)
""")


@pytest.fixture()
def box(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the record of written outputs
    (tmp_path / "m.py").write_text(MODULES)
    np.save("p.npy", np.sign(np.random.default_rng(0).normal(size=(6, 16))))
    return tmp_path


def attention(*args):
    return invoke("check", "attention", "--module", *args, "--quick", "--no-progress")


# ------------------------------------------------------------------------------------------------
# 1. user code in its own process


@pytest.mark.parametrize("name, needle", [("Exit0", "exit status 0"), ("Killed", "SIGKILL"),
                                          ("Segv", "segmentation fault")])
def test_module_that_ends_its_process_is_exit_2_never_0(box, name, needle):
    code, out, err = attention(f"m.py:{name}", "--json", "out.json")
    line = one_line_error(code, err)
    assert needle in line and "nothing was checked" in line
    assert out == "" and not (box / "out.json").exists()


def test_os_exit_with_json_on_stdout(box):
    code, out, err = attention("m.py:Exit0", "--json", "-")
    one_line_error(code, err)
    assert out == ""


def test_mapping_hook_that_exits(box):
    code, out, err = attention("m.py:Attn", "--mapping", "m.py:exit_hook")
    assert "exit status 0" in one_line_error(code, err)


def test_icl_model_and_hopfield_module_that_exit(box):
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "5", "--model", "m.py:icl_exit", "--quick",
                            "--no-progress")
    assert "exit status 0" in one_line_error(code, err)
    code, out, err = invoke("check", "hopfield", "--patterns", "p.npy", "--module", "m.py:hop_exit", "--no-progress")
    assert "exit status 0" in one_line_error(code, err)


def test_timeout_stops_a_hanging_module_with_progress_lines(box):
    code, out, err = invoke("check", "attention", "--module", "m.py:Sleepy", "--quick", "--timeout", "3")
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err
    assert lines[-1].startswith("tverify: error:") and "--timeout 3 s" in lines[-1]
    assert any("still running" in ln for ln in lines[:-1]), err  # progress while it hangs


def test_memory_limit_stops_the_child(box):
    code, out, err = attention("m.py:Hog", "--max-memory", "0.3")
    line = one_line_error(code, err)
    assert "memory" in line and "--max-memory 0.3" in line


def test_keyboard_interrupt_raised_by_the_module_is_its_own(box):
    code, out, err = attention("m.py:KbInt")
    assert "KeyboardInterrupt" in one_line_error(code, err)


def test_prints_of_the_module_do_not_corrupt_json_on_stdout(box):
    code, out, err = attention("m.py:Chatty", "--json", "-")
    assert code == 0
    assert json.loads(out)["outcome"] == "ok"  # stdout is the JSON alone
    assert "a print from forward" in err and "a raw write to fd 1" in err


@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "0", "-1", "x"])
def test_timeout_values_refused(box, value):
    code, out, err = attention("m.py:Attn", "--timeout", value)
    assert "--timeout" in one_line_error(code, err)


def test_api_raises_for_a_module_that_exits_and_for_a_timeout():
    import torch

    class Exit0(torch.nn.Module):  # a local class: copied into the child by value
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            os._exit(0)

    with pytest.raises(InputError, match="exit status 0"):
        proofs_checks.check_attention(Exit0(), mode="quick")

    def slow(x):
        import time

        time.sleep(60)

    with pytest.raises(InputError, match="timeout=2 s"):  # the API's keyword, not the flag
        proofs_checks.check_attention(slow, dim=4, mode="quick", timeout=2)

    def icl_exit(xs, ys, xq):
        os._exit(3)

    with pytest.raises(InputError, match="exit status 3"):
        proofs_checks.check_icl_model(icl_exit, lambdas="1,1", N=5, mode="quick")

    def hop_exit(xi):
        os._exit(0)

    with pytest.raises(InputError, match="exit status 0"):
        proofs_checks.check_hopfield(np.sign(np.random.default_rng(0).normal(size=(6, 16))), module=hop_exit)


def test_api_keyword_arguments_typed_and_known():
    def ident(x):
        return x

    with pytest.raises(InputError, match="causal must be True or False"):
        proofs_checks.check_attention(ident, dim=4, causal="no")
    with pytest.raises(InputError, match="unknown keyword argument 'windw'"):
        proofs_checks.check_attention(ident, dim=4, windw="3")
    with pytest.raises(InputError, match="timeout"):
        proofs_checks.check_attention(ident, dim=4, timeout=float("inf"))


def test_pytest_fixture_fails_the_test_when_the_module_exits(pytester):
    pytester.makepyfile(test_user=textwrap.dedent("""
        import os
        import torch

        class Exit0(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)
            def forward(self, x):
                os._exit(0)

        def test_exits(tverify):
            tverify.check_attention(Exit0(), mode="quick")
    """))
    # in this process (issue 46: a subprocess paid a fresh interpreter, torch and pytest, 18 s under
    # load): the module runs in tverify's isolated child, so its os._exit ends that child, not pytest
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    res.assert_outcomes(failed=1)
    assert "exit status 0" in res.stdout.str()


# ------------------------------------------------------------------------------------------------
# 2. outputs that are really ours


def hopfield(*args):
    return invoke("check", "hopfield", "--patterns", "p.npy", "--no-progress", *args)


def test_hand_edited_stamp_naming_a_users_file_does_not_delete_it(box):
    rep = box / "rep"
    rep.mkdir()
    (rep / "thesis.tex").write_text("years of work")
    (rep / ".tverify-report").write_text(json.dumps({"tool": "tverify", "files": ["thesis.tex"]}))
    line = one_line_error(*hopfield("--report", "rep")[::2])
    assert "thesis.tex" in line and "nothing was written" in line
    assert (rep / "thesis.tex").read_text() == "years of work"
    # even with a hash map: a stamp proves nothing unless tverify's record of written outputs lists the folder
    (rep / ".tverify-report").write_text(json.dumps({"tool": "tverify", "files": ["thesis.tex"],
                                                     "sha256": {"thesis.tex": "0" * 64}}))
    line = one_line_error(*hopfield("--report", "rep")[::2])
    assert "thesis.tex" in line and "record of written outputs does not list" in line
    assert (rep / "thesis.tex").read_text() == "years of work"


def test_a_report_is_replaced_only_while_unchanged(box):
    code, out, err = hopfield("--report", "rep")
    assert code == 0, err
    stamp = json.loads((box / "rep" / ".tverify-report").read_text())
    assert set(stamp["sha256"]) == set(stamp["files"]) and all(len(h) == 64 for h in stamp["sha256"].values())
    code, out, err = hopfield("--report", "rep")  # unchanged: ours, replaced
    assert code == 0, err
    (box / "rep" / "report.md").write_text("my annotations")
    line = one_line_error(*hopfield("--report", "rep")[::2])
    assert "report.md (changed since tverify wrote it)" in line
    assert (box / "rep" / "report.md").read_text() == "my annotations"


def test_a_users_json_saying_tool_tverify_is_not_ours(box):
    (box / "mine.json").write_text(json.dumps({"tool": "tverify", "notes": "mine"}))
    line = one_line_error(*hopfield("--json", "mine.json")[::2])
    assert "--force" in line and "changed since" in line
    assert json.loads((box / "mine.json").read_text())["notes"] == "mine"
    assert hopfield("--json", "mine.json", "--force")[0] == 0
    assert hopfield("--json", "mine.json")[0] == 0  # now exactly what tverify wrote: replaced
    doc = json.loads((box / "mine.json").read_text())
    doc["outcome"] = "edited by hand"
    (box / "mine.json").write_text(json.dumps(doc))
    one_line_error(*hopfield("--json", "mine.json")[::2])  # edited since: the user's again
    assert json.loads((box / "mine.json").read_text())["outcome"] == "edited by hand"


def test_a_users_list_of_ids_is_not_a_catalogue(box):
    (box / "ids.json").write_text(json.dumps([{"id": 1, "mine": True}]))
    code, out, err = invoke("list", "--json", "ids.json")
    one_line_error(code, err)
    assert json.loads((box / "ids.json").read_text()) == [{"id": 1, "mine": True}]


# ------------------------------------------------------------------------------------------------
# 3. flags checked against each other and the module

ROPE = textwrap.dedent("""
    import math, torch

    class Attn(torch.nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.num_heads = 2
            self.q_proj, self.k_proj, self.v_proj, self.o_proj = (torch.nn.Linear(dim, dim, bias=False)
                                                                  for _ in range(4))
        def forward(self, x):
            B, T, D = x.shape
            H, dk = self.num_heads, D // self.num_heads
            q, k, v = (p(x).view(B, T, H, dk).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk), -1)
            return self.o_proj((a @ v).transpose(1, 2).reshape(B, T, D))
""")


@pytest.mark.parametrize("args, needle", [
    (["--rope-base", "5"], "need --positional rope"),
    (["--rope-dims", "2"], "need --positional rope"),
    (["--rope-convention", "half"], "need --positional rope"),
    (["--positional", "rope", "--rope-dims", "3"], "must be even"),
    (["--positional", "rope", "--rope-dims", "1000"], "larger than the model dimension D = 8"),
    (["--positional", "rope", "--rope-dims", "6"], "larger than the head size d_k = 4"),
])
def test_rope_flags_checked(box, args, needle):
    (box / "rope.py").write_text(ROPE)
    code, out, err = attention("rope.py:Attn", *args)
    assert needle in one_line_error(code, err)


def test_timeout_without_user_code_is_refused(box):
    assert "--timeout" in one_line_error(*hopfield("--timeout", "5")[::2])
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "5", "--timeout", "5")
    assert "--timeout" in one_line_error(code, err)


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "-1"])
def test_survey_timeout_refused_in_one_line(box, value):
    code, out, err = invoke("survey", "--list", "--timeout", value)
    assert "--timeout" in one_line_error(code, err)


@pytest.mark.parametrize("kw, needle", [
    ({"causal": "no"}, "causal must be True or False"), ({"causal": 1}, "causal must be True or False"),
    ({"seed": 1.5}, "seed must be an integer"), ({"softcap": "3"}, "softcap must be a number"),
    ({"rope_base": float("nan")}, r"rope_base=\): must be a finite"), ({"progress": "yes"}, "progress"),
    ({"positional": 3}, "positional must be"), ({"isolate": "no"}, "isolate"),
])
def test_api_keywords_typed(kw, needle):
    with pytest.raises(InputError, match=needle):
        proofs_checks.check_attention(lambda x: x, dim=4, mode="quick", **kw)


def _run_cli(args, stdout):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=300)


def _full_disk_on_stdout_is_one_line(args) -> None:
    with open("/dev/full", "w") as full:
        p = _run_cli(args, full)
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("tverify:") or "Traceback" in ln]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert lines == ["tverify: error: cannot write: No space left on device; the output is incomplete"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_on_stdout_is_one_line(box):
    _full_disk_on_stdout_is_one_line(["list"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@moved("a fresh tverify process running a check (torch, its child) whose JSON goes to a full standard output: "
       "the same one-line handler in main as for list, end to end through a check command",
       "tests/test_hostile_round2.py::test_full_disk_on_stdout_is_one_line")
def test_full_disk_on_stdout_of_a_check_is_one_line(box):
    _full_disk_on_stdout_is_one_line(["check", "hopfield", "--patterns", "p.npy", "--json", "-", "--no-progress"])


def test_closed_pipe_is_one_line(box):
    r, w = os.pipe()
    os.close(r)
    try:
        p = _run_cli(["list", "--json", "-"], w)
    finally:
        os.close(w)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == ["tverify: error: the output was closed before everything was written "
                                             "(broken pipe); the output is incomplete"]


# ------------------------------------------------------------------------------------------------
# 4. degenerate inputs are inconclusive, not ok


@pytest.mark.parametrize("P, needle", [
    (np.ones((12, 4)), "12 of 12 patterns are duplicates"),
    (np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), "patterns 0 = 2"),
    (0.1 * np.sign(np.random.default_rng(0).normal(size=(6, 16))), "bounds is vacuous"),
])
def test_degenerate_hopfield_patterns_are_inconclusive(box, P, needle):
    np.save("deg.npy", P)
    code, out, err = invoke("check", "hopfield", "--patterns", "deg.npy", "--no-progress", "--json", "-")
    doc = json.loads(out)
    assert code == 3 and doc["outcome"] == "inconclusive", doc["verdict"]
    assert any(needle in r for r in doc["decision"]["reasons"]), doc["decision"]["reasons"]
    r = proofs_checks.check_hopfield(P)
    assert r.outcome == "inconclusive" and r.exit_code == 3


def test_separated_patterns_with_a_few_unseparated_stay_decisive(box):
    P = np.random.default_rng(0).normal(size=(6, 4))  # 3 of 6 with Δ_i ≤ 0: the bound decides for the others
    assert proofs_checks.check_hopfield(P).outcome == "ok"


# ------------------------------------------------------------------------------------------------
# 5. causes named before any leak is claimed; every property on an eval-mode copy

CAUSES = textwrap.dedent("""
    import torch
    from m import Attn

    class ZeroesInput(Attn):
        def forward(self, x):
            out = super().forward(x)
            x.zero_()
            return out

    class Noisy(Attn):
        def forward(self, x):
            return super().forward(x) + 1e-3 * torch.randn_like(x)

    class Drifts(Attn):
        def forward(self, x):
            with torch.no_grad():
                self.mha.out_proj.weight.mul_(1.01)
            return super().forward(x)

    class Caches(Attn):  # a buffer that changes without changing the output: not a finding
        def __init__(self, dim=8):
            super().__init__(dim)
            self.register_buffer("calls", torch.zeros(()))
        def forward(self, x):
            self.calls += 1
            return super().forward(x)

    class Dropout(torch.nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(dim, 2, batch_first=True, dropout=0.5)
        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    def nan_hook(m):
        W, D = m.mha.in_proj_weight.detach(), m.mha.embed_dim
        return {"q": W[:D] * float("nan"), "k": W[D:2 * D], "v": W[2 * D:], "o": m.mha.out_proj.weight.detach(),
                "heads": 2}
""")


@pytest.mark.parametrize("args, cause", [
    (["c.py:ZeroesInput", "--causal"], "input_unchanged"),
    (["c.py:Noisy", "--causal"], "deterministic"),
    (["c.py:Drifts", "--causal"], "weights_unchanged_by_calls"),
    (["m.py:Attn", "--mapping", "c.py:nan_hook"], "declared_weights_finite"),
])
def test_the_cause_is_named_never_a_leak(box, args, cause):
    (box / "c.py").write_text(CAUSES)
    code, out, err = attention(*args, "--json", "-")
    doc = json.loads(out)
    failed = [p["name"] for p in doc["properties"] if p["status"] == "fail"]
    assert code == 1 and failed == [cause], (failed, doc["verdict"])
    assert doc["verdict"].endswith(f"violates: {cause}")
    assert not any("leak" in p["name"] for p in doc["properties"])
    assert doc["hints"], doc  # the cause explained


def test_a_cache_buffer_and_train_mode_dropout_are_fine(box):
    (box / "c.py").write_text(CAUSES)
    for name in ("Caches", "Dropout"):
        code, out, err = attention(f"c.py:{name}", "--json", "-")
        doc = json.loads(out)
        assert code == 0 and doc["outcome"] == "ok", doc["verdict"]
    import torch

    class Drop(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.5)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    r = proofs_checks.check_attention(Drop().train(), mode="quick")
    assert r.ok and "dtype_and_device_preserved" not in r.failed, str(r)


# ------------------------------------------------------------------------------------------------
# 6. messages


def test_icl_trained_names_the_m_of_the_measured_risk():
    code, out, err = invoke("check", "icl", "--lambda", "1,2,3", "--N", "10", "--M", "20", "--quick", "--no-progress")
    assert code in (0, 1, 3) and "measured risk at M = 20: " in out, out


@pytest.mark.parametrize("exc", ["RuntimeError('x' * 50000)", "KeyboardInterrupt()", "SystemExit(0)"])
def test_plugin_import_error_is_one_short_line(monkeypatch, capsys, exc):
    import importlib.metadata as md

    from proofs_checks import claims

    class EP:
        name, value = "noisy", "zz_noisy.claims"

        def load(self):
            raise eval(exc)

    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()])
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    claims.load_plugins()  # a KeyboardInterrupt the plugin raises itself is its failure, not a Ctrl-C
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and len(err[0]) < 400 and "failed to load and was skipped" in err[0], err


def test_api_errors_name_no_temporary_file():
    with pytest.raises(InputError) as info:
        proofs_checks.check_att_svm((np.zeros((3, 2, 4)), np.zeros((3, 4)), np.ones(3), np.zeros(5)))
    assert "tmp" not in str(info.value) and str(info.value).startswith("data: v must have shape")
    with pytest.raises(InputError, match="check_icl_model: unknown keyword argument 'foo'"):
        proofs_checks.check_icl_model(lambda xs, ys, xq: xq[:, 0], lambdas="1,2", N=5, foo=1)


@pytest.mark.parametrize("claim_id, needle", [("attn.convex_combination", "is a built-in claim"),
                                              ("attn.foo", "is a built-in group")])
def test_new_claim_refuses_built_in_ids_and_groups(tmp_path, claim_id, needle):
    code, out, err = invoke("new-claim", claim_id, "--dir", str(tmp_path / "pkg"))
    assert needle in one_line_error(code, err)
    assert not (tmp_path / "pkg").exists()


def test_icl_model_answer_is_graded(box):
    (box / "near.py").write_text(textwrap.dedent("""
        import torch

        def near_ridge(xs, ys, xq):
            A = xs.transpose(-1, -2) @ xs + 1.3 * torch.eye(xs.shape[-1], dtype=xs.dtype)
            w = torch.linalg.solve(A, xs.transpose(-1, -2) @ ys[..., None])[..., 0]
            return (w * xq).sum(-1)
    """))
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "10", "--model", "near.py:near_ridge", "--quick",
                            "--no-progress", "--json", "-")
    doc = json.loads(out)
    graded = doc["decision"]["numbers"]["closest_graded"]
    assert code in (1, 3) and "% of the distance to" in graded and "(λ = " in graded, graded
    assert graded in doc["verdict"]


def test_plugin_that_hangs_at_import_is_skipped_after_its_time_limit(monkeypatch, capsys):
    import importlib.metadata as md
    import threading

    from proofs_checks import claims

    release = threading.Event()

    class EP:
        name, value = "hangs", "zz_hangs.claims"

        def load(self):
            release.wait(60)  # an import that does not finish (released after the test)

    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "1")
    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()])
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    try:
        claims.load_plugins()
    finally:
        release.set()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not finish within 1 s" in err[0] and "skipped" in err[0], err
