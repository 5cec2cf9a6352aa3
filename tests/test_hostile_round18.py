"""Hostile pass 12 (issue 44's acceptance pass, on c436cac): findings fixed after it, each with its reproducer.
The supervisor's own findings (signals passed on, the command's temporary folder) are in tests/test_supervisor.py."""

from __future__ import annotations

import textwrap

from tests.cli_helpers import invoke_in
from tests.test_hostile_round16b import OWN

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


def _check_causal(tmp_path, monkeypatch, source: str, name: str):
    """``check attention --causal --quick`` of class ``name`` of a module ``source`` beside own_attention.py, in this
    process (the verdict is the subject; the module is imported and run in the check's isolated child, as from the
    console)."""
    (tmp_path / "own_attention.py").write_text(OWN.read_text())
    (tmp_path / "m.py").write_text(textwrap.dedent(source))
    return invoke_in(tmp_path, monkeypatch, "check", "attention", "--module", f"m.py:{name}", "--causal", "--quick", "--no-progress")


def test_the_result_channel_is_not_the_users_to_rewrite(tmp_path, monkeypatch):
    r = _check_causal(tmp_path, monkeypatch, _SEND_REWRITE, "Leak")
    assert r.returncode == 1 and "causal_no_future_leak" in r.stdout, (r.returncode, r.stdout[-400:], r.stderr[-400:])


# 12a F5: XDG_CACHE_HOME inside tverify's own code put the per-user store (and torch's cache) there
def test_the_per_user_store_is_never_inside_tverifys_code(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import proofs_checks

    inside = Path(proofs_checks.__file__).parent / f"zz_cache_{os.getpid()}"
    env = dict(os.environ, XDG_CACHE_HOME=str(inside))
    env.pop("TVERIFY_STORE", None)
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    try:
        r = subprocess.run([sys.executable, "-m", "proofs_checks", "run", "attn.softmax_simplex", "--quick", "--no-progress"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        made = inside.exists()
    finally:
        import shutil

        shutil.rmtree(inside, ignore_errors=True)
    assert r.returncode == 2 and "XDG_CACHE_HOME" in r.stderr and not made, (r.returncode, r.stderr[-300:])


# 12a F4: a plugin's exit callback or thread writing to the standard output broke `--json -` (after or before the JSON)
def test_json_on_stdout_is_only_the_json(tmp_path):
    import json
    import sys

    from tests.test_hostile_round16a import run, site_with

    site = site_with(tmp_path, "import atexit, os, threading, time\natexit.register(print, 'AFTER')\n"
                               "atexit.register(os.write, 1, b'RAW AFTER\\n')\n"
                               "threading.Thread(target=lambda: (time.sleep(0.2), print('THREAD')), daemon=True).start()\n")
    p = run(site, [sys.executable, "-m", "proofs_checks", "run", "zzh.twice", "--quick", "--no-progress", "--json", "-"])
    assert p.returncode == 0, p.stderr[-300:]
    json.loads(p.stdout)
    assert "AFTER" in p.stderr and "RAW AFTER" in p.stderr


# 12b F4: a torch-made wrapper (torch.autocast) replacing Tensor.__matmul__ was taken for torch's own rewrite: a
# bfloat16 module declared float32 was "ok"
_AUTOCAST = '''
import torch
from own_attention import CausalSelfAttention
torch.Tensor.__matmul__ = torch.autocast("cpu", dtype=torch.bfloat16)(torch.Tensor.__matmul__)
class Plain(CausalSelfAttention):
    pass
'''


def test_a_torch_made_wrapper_is_a_replacement(tmp_path, monkeypatch):
    r = _check_causal(tmp_path, monkeypatch, _AUTOCAST, "Plain")
    assert r.returncode == 2 and "__matmul__" in r.stderr, (r.returncode, r.stdout[-400:], r.stderr[-400:])


# 12a F5 (second part): new-claim --dir whose package folder is a link into tverify's code wrote through it
def test_new_claim_never_writes_through_a_link_into_tverifys_code(tmp_path):
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import proofs_checks

    inside = Path(proofs_checks.__file__).parent / "claims" / f"zz_link_{os.getpid()}"
    inside.mkdir()
    try:
        (tmp_path / "nc").mkdir()
        (tmp_path / "nc" / "tverify_zz").symlink_to(inside)
        r = subprocess.run([sys.executable, "-m", "proofs_checks", "new-claim", "zz.q", "--dir", str(tmp_path / "nc")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        written = list(inside.iterdir())
    finally:
        shutil.rmtree(inside, ignore_errors=True)
    assert r.returncode == 2 and written == [], (r.returncode, r.stderr[-300:], written)


# 12b F5: a correct Hopfield update computed in bfloat16 was said to compute in float16 and judged at its tolerance
def test_a_bfloat16_update_is_named_bfloat16_and_judged_there(tmp_path, monkeypatch):
    """What the check says is the subject: run in-process (the update runs in the check's isolated child)."""
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(tmp_path / "P.npy", np.where(rng.standard_normal((12, 16)) >= 0, 1.0, -1.0))
    (tmp_path / "hp.py").write_text("import torch\ndef bf16(xi, patterns, beta):\n"
                                    "    x, p = xi.bfloat16(), patterns.bfloat16()\n"
                                    "    return (torch.softmax(beta * x @ p.T, -1) @ p).double()\n")
    r = invoke_in(tmp_path, monkeypatch, "check", "hopfield", "--patterns", "P.npy", "--beta", "2", "--module",
                  "hp.py:bf16", "--quick", "--no-progress")
    assert "it computes in bfloat16, not float64" in r.stdout, (r.returncode, r.stdout[-600:])
    assert "update_matches_modern" in r.stdout and "not the modern Hopfield update" not in r.stdout, r.stdout[-600:]


# 12b F6 / 12a N4: check_claim, run_mutants, assert_claim with device="cuda" on a machine without CUDA ran on the CPU
# and said "verified"; "cudax", "meta", "CPU" were taken as given
def test_the_api_refuses_a_device_it_cannot_run_on():
    import pytest
    import torch

    import proofs_checks as p
    from theory.validation import InputError

    claim = p.get_claim("attn.softmax_simplex")
    bad = ["cudax", "meta", "CPU"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in bad:
        for call in (lambda: p.check_claim(claim, device=device), lambda: p.run_mutants(claim, device=device),
                     lambda: p.assert_claim("attn.softmax_simplex", device=device)):
            with pytest.raises(InputError):
                call()


# 12a F10: a plugin's cached derivation answered after a file or variable it read changed. Now only a claim that
# declares its derivation pure is kept (tests/test_hostile_round27.py has the end-to-end case); the cache itself
def test_a_cached_derivation_is_kept_only_for_a_declared_pure_claim(tmp_path, monkeypatch):
    from proofs_checks.claims._plugins import _DerivationCache

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "1")
    info = {"steps": [], "obligations": [{"name": "o", "holds": True}]}
    undeclared = _DerivationCache("zz.read_inputs", None)
    undeclared.write(info, True)
    assert undeclared.path is None and undeclared.read(True) is None
    pure = _DerivationCache("zz.read_inputs", ())
    assert pure.read(True) is None
    pure.write(info, True)  # no record of what it read (26a F1-F6): not kept
    assert pure.read(True) is None
    nothing = {"files": {}, "names": {}}  # a record: it read nothing outside the installation
    pure.write(info, True, nothing)
    assert pure.read(True) == info and pure.read(False) == info
    pure.write({**info, "error": "x"}, True, nothing)  # a derivation that failed is never kept
    assert pure.read(True) == info
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")
    assert _DerivationCache("zz.read_inputs", ()).read(True) is None


# 12a F8: --out on a mount point passed the start checks with --force and the finished report was lost (EBUSY)
def test_a_mount_point_is_refused_as_out_before_the_run(tmp_path, monkeypatch):
    import os

    import pytest

    from proofs_checks.output.report import ReportTargetError, check_report_target

    out = tmp_path / "mnt"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: os.fspath(p) == os.fspath(out) or real(p))
    with pytest.raises(ReportTargetError, match="mount point"):
        check_report_target(out, force=True)


def test_a_plugin_import_leaves_the_working_folder_as_it_was(tmp_path, monkeypatch):
    """12a F9, in-process: what a plugin's import does to the working folder is undone when it ends."""
    import os

    from proofs_checks.claims import _working_folder_kept

    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    with _working_folder_kept():
        os.chdir(tmp_path / "elsewhere")
    assert os.getcwd() == str(tmp_path)
