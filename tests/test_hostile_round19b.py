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

#: F1: a module replacing ``proofs_checks.sanity._isolate.json`` (a module-valued attribute, not a function) rewrites
#: every failed row of the child's result into a pass
_JSON_REWRITE = '''
import json as _json, types
import proofs_checks.sanity._isolate as _iso
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
    "module_attribute": (_JSON_REWRITE, "hostile 13b F1: a replaced module-valued attribute (_isolate.json) of tverify's "
                                        "child code is not seen by the guard; the leak is 'ok', exit 0"),
    "profile_hook": (_PROFILE_REWRITE, "hostile 13b F4: a sys.setprofile hook left by the code rewrites the result dict "
                                       "as it is encoded; the leak is 'ok', exit 0"),
}


@pytest.mark.integration(reason="open findings (strict xfails), a check from a fresh process each (≈ 10 s)")
@pytest.mark.parametrize("source", [pytest.param(src, id=k, marks=pytest.mark.xfail(strict=True, reason=why))
                                    for k, (src, why) in _DECEIVERS.items()])
def test_code_written_to_deceive_the_result_channel_is_refused(tmp_path, source):
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(source)
    r = _tverify(tmp_path, "check", "attention", "--module", "m.py:Leak", "--causal", "--quick", "--no-progress")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "verdict: ok" not in r.stdout


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
