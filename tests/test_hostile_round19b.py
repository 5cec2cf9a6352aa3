"""Hostile pass 13 (tester b, the acceptance pass of issue 44): its findings' reproducers, written as strict xfails
during the pass (which fixes nothing); fixed after it, each becomes a plain test. Each test states the documented
behaviour (write-ups: the pass's HOSTILE13B_FINDINGS.md)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "own_attention.py"

#: F1: a module replacing ``proofs_checks.sanity._isolate_child.json`` (``_isolate.json`` before the child's side had a module of its own) (a module-valued attribute, not a function) rewrites
#: every failed row of the child's result into a pass
_JSON_REWRITE = '''
import json as _json, types
import proofs_checks.sanity._isolate_child as _iso
def _fix(o):
    if isinstance(o, dict):
        if o.get("status") in ("fail", "skip", "error") and "tolerance" in o:
            o["status"] = "pass"
            o["tolerance"] = max(float(o.get("tolerance") or 0.0), 1e-12)
        for k, v in list(o.items()):
            if k == "error" and isinstance(v, (int, float)):
                o[k] = 0.0
            else:
                _fix(v)
    elif isinstance(o, list):
        for v in o:
            _fix(v)
    return o
_iso.json = types.SimpleNamespace(loads=_json.loads,
                                  dumps=lambda d, **kw: _json.dumps(_fix(_json.loads(_json.dumps(d, **kw))), **kw))
from own_attention import CausalSelfAttention
class Leak(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x) + 1e-3 * x[:, -1:, :].sum(-1, keepdim=True)
'''


def _tverify(tmp_path, *args):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)




def test_icl_lambdas_requiring_grad_are_their_values():
    """13b F3 (fixed): Λ as a tensor requiring grad reached torch's __array__ inside the child, an internal error with
    tverify's traceback; its values are taken (detached), as the finding allowed."""
    import torch

    import proofs_checks as P
    from proofs_checks.parsing import spd_from_array

    L, _ = spd_from_array(torch.ones(2, requires_grad=True), "--lambda")
    assert L.tolist() == [[1.0, 0.0], [0.0, 1.0]]


#: F4: a profile hook set at import rewrites the result dict in place when tverify's encoder is called
_PROFILE_REWRITE = _JSON_REWRITE.split("_iso.json = ")[0] + '''
import sys, threading
def _prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "_dumps":
        _fix(frame.f_locals.get("doc"))
sys.setprofile(_prof)
threading.setprofile(_prof)
from own_attention import CausalSelfAttention
class Leak(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x) + 1e-3 * x[:, -1:, :].sum(-1, keepdim=True)
'''


_DECEIVERS = {
    "module_attribute": _JSON_REWRITE,  # 13b F1: a replaced module-valued attribute (_isolate_child.json) of tverify's code
    "profile_hook": _PROFILE_REWRITE,  # 13b F4: a sys.setprofile hook left set, rewriting the result as it is encoded
}


@pytest.mark.integration(reason="a check from a fresh process each (≈ 10 s); the guard's parts are pinned in-process "
                                "by test_guard_watches_module_attributes_and_hooks")
@pytest.mark.parametrize("source", list(_DECEIVERS.values()), ids=list(_DECEIVERS))
def test_code_written_to_deceive_the_result_channel_is_refused(tmp_path, source):
    """13b F1, F4 (fixed): the leak was "ok", exit 0; the guard now compares tverify's modules' module-valued
    attributes and the trace/profile hooks left set, and the child clears the hooks before it encodes the result."""
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(source)
    r = _tverify(tmp_path, "check", "attention", "--module", "m.py:Leak", "--causal", "--quick", "--no-progress")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "verdict: ok" not in r.stdout
    assert "nothing was checked" in r.stderr and "Traceback" not in r.stderr


def test_guard_watches_module_attributes_and_hooks(monkeypatch):
    """The guard's snapshot (13b F1, F4), in this process: a module-valued attribute of tverify's own code replaced,
    and a profile hook left set, are each named; put back, nothing is."""
    import json
    import types

    from proofs_checks.sanity import _isolate_child, _loader

    snap = _loader.function_snapshot()
    assert _loader.replaced_functions(snap) == []
    monkeypatch.setattr(_isolate_child, "json", types.SimpleNamespace(dumps=json.dumps, loads=json.loads))
    assert any("_isolate_child.json" in r for r in _loader.replaced_functions(snap))
    monkeypatch.setattr(_isolate_child, "json", json)
    before = _loader.hooks()
    sys.setprofile(lambda *a: None)
    try:
        assert any("profile hook" in r for r in _loader.replaced_functions(snap))
    finally:
        _loader.clear_hooks(before)
    assert sys.getprofile() is None and _loader.replaced_functions(snap) == []


#: 13b F2: the code writes an honest run's result message itself into every pipe it can write to (the result pipe
#: among them), before the check's own result is sent
_FORGER = """
import os, stat, fcntl
from own_attention import CausalSelfAttention
_sent = []
def _forge():
    data = open({payload!r}, "rb").read()
    msg = len(data).to_bytes(4, "big", signed=True) + data
    for fd in range(3, 256):
        try:
            st = os.fstat(fd)
            if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
                continue
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                continue
            os.write(fd, msg)
        except OSError:
            pass
class Leak(CausalSelfAttention):
    def forward(self, x):
        if not _sent:
            _sent.append(1)
            _forge()
        return super().forward(x) + 1e-3 * x[:, -1:, :].sum(-1, keepdim=True)
"""


def test_a_result_message_written_by_the_code_is_not_taken(tmp_path, monkeypatch):
    """13b F2 (fixed): an honest run's result, replayed by the code into the result pipe, read "ok", exit 0. The
    parent gives each task a token the result must carry: the replayed message (an earlier task's) is refused."""
    from cli_helpers import invoke

    from proofs_checks.sanity import _isolate

    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "honest.py").write_text("from own_attention import CausalSelfAttention as Leak\n")
    seen = []
    real = _isolate.run_isolated

    def capture(*a, **kw):
        payload = real(*a, **kw)
        seen.append(json.dumps({k: v for k, v in payload.items() if k != "figures_dir"}))
        return payload

    import json

    monkeypatch.setattr(_isolate, "run_isolated", capture)
    monkeypatch.chdir(tmp_path)
    code, out, _ = invoke("check", "attention", "--module", "honest.py:Leak", "--causal", "--quick", "--no-progress")
    assert code == 0 and seen, out[-1500:]
    (tmp_path / "payload.json").write_text(seen[0])
    (tmp_path / "m.py").write_text(_FORGER.format(payload=str(tmp_path / "payload.json")))
    monkeypatch.setattr(_isolate, "run_isolated", real)
    code, out, err = invoke("check", "attention", "--module", "m.py:Leak", "--causal", "--quick", "--no-progress")
    assert code == 2 and "verdict: ok" not in out, out[-1500:]
    assert "not sent by the check" in err and "Traceback" not in err, err[-1500:]


def test_overlong_tmpdir_is_one_line_exit_2(tmp_path):
    long = Path("/tmp") / ("t19b-" + "d" * 95)
    long.mkdir(exist_ok=True)
    try:
        (tmp_path / "own_attention.py").write_text(OWN.read_text())
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1", "TMPDIR": str(long)}
        r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "attention", "--module",
                            "own_attention.py:CausalSelfAttention", "--causal", "--quick", "--no-progress"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert "Traceback" not in r.stderr, r.stderr[-1500:]
        assert r.returncode == 2
        assert not os.listdir(long)
    finally:
        import shutil

        shutil.rmtree(long, ignore_errors=True)
