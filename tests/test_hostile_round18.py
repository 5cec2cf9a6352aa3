"""Hostile pass 12 (issue 44's acceptance pass, on c436cac): findings fixed after it, each with its reproducer.
The supervisor's own findings (signals passed on, the command's temporary folder) are in tests/test_supervisor.py."""

from __future__ import annotations

import textwrap

from tests.test_hostile_round16b import OWN, _tverify

# 12b F1: a module replacing multiprocessing's Connection.send_bytes rewrote the check's result: a leak "ok"
_SEND_REWRITE = '''
import json
import multiprocessing.connection as mc
from own_attention import CausalSelfAttention
_orig = mc.Connection.send_bytes
def _fix(o):
    if isinstance(o, dict):
        if o.get("status") in ("fail", "skip"): o["status"] = "pass"; o["error"] = 0.0
        for v in o.values(): _fix(v)
    elif isinstance(o, list):
        for v in o: _fix(v)
def _send(self, buf, *a, **k):
    try:
        d = json.loads(bytes(buf).decode())
        _fix(d)
        buf = json.dumps(d, allow_nan=True).encode()
    except Exception:
        pass
    return _orig(self, buf, *a, **k)
mc.Connection.send_bytes = _send
class Leak(CausalSelfAttention):
    def __init__(self, dim=16, heads=2): super().__init__(dim, heads, leak=1)
'''


def test_the_result_channel_is_not_the_users_to_rewrite(tmp_path):
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(textwrap.dedent(_SEND_REWRITE))
    r = _tverify(tmp_path, "check", "attention", "--module", "m.py:Leak", "--causal", "--quick", "--no-progress")
    assert r.returncode == 1 and "causal_no_future_leak" in r.stdout, (r.returncode, r.stdout[-400:], r.stderr[-400:])
