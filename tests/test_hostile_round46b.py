"""Hostile pass 40, tester B: reproducers (each failed on the code the pass ran against, 411e448, and passes since its fix, but for the documented limit F3b)."""

import pytest

from cli_helpers import causal_attn, tv_here
from tests.test_hostile_round45b import _PROBE as _PROBE_39B, _medium_lowers_cpu_matmuls




# --- 40B F1: the --against file's import-time torch settings (float32 matmul precision "medium", autocast) are
# applied to the CHECKED module's calls: a correct float32 module with no setting of its own is a mismatch naming its
# own properties (prefix_consistency, batch_size_independence, dtype_and_device_preserved) -------------------------

@pytest.mark.skipif(not _medium_lowers_cpu_matmuls(), reason="'medium' leaves float32 CPU matmuls alone here")
def test_40b_f1_against_import_precision_not_blamed_on_module(tmp_path):
    (tmp_path / "base.py").write_text(causal_attn(16, 2))
    (tmp_path / "ok.py").write_text("from base import Attn\nclass Ok(Attn): pass\n")
    (tmp_path / "medref.py").write_text("import torch\ntorch.set_float32_matmul_precision('medium')\n"
                                        "from base import Attn\nclass Ref(Attn): pass\n")
    r = tv_here(tmp_path, "check", "attention", "--module", "ok.py:Ok", "--causal", "--quick", "--dtype", "float32")
    assert r.returncode == 0, r.stdout[-1500:]
    r = tv_here(tmp_path, "check", "attention", "--module", "ok.py:Ok", "--against", "medref.py:Ref", "--causal",
                "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    # the properties of Ok's own (not the comparison with the reference) must not fail because of the reference's import
    for prop in ("prefix_consistency", "batch_size_independence", "dtype_and_device_preserved"):
        assert prop not in r.stdout.split("verdict:")[-1].splitlines()[0], r.stdout[-2500:]


def test_40b_f1b_against_import_autocast_not_blamed_on_module(tmp_path):
    (tmp_path / "base.py").write_text(causal_attn(16, 2))
    (tmp_path / "ok.py").write_text("from base import Attn\nclass Ok(Attn): pass\n")
    (tmp_path / "acref.py").write_text("import torch\ntorch.set_autocast_enabled('cpu', True)\n"
                                       "from base import Attn\nclass Ref(Attn): pass\n")
    r = tv_here(tmp_path, "check", "attention", "--module", "ok.py:Ok", "--against", "acref.py:Ref", "--causal",
                "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert "dtype_and_device_preserved" not in r.stdout.split("verdict:")[-1].splitlines()[0], r.stdout[-2500:]


# --- 40B F2: an --against module whose forward calls the checked module's .forward() directly (no __call__, so no
# forward pre-hook fires) is not refused: a module with outputs doubled is "ok: all 13 checked properties hold" -------

_PROBE = _PROBE_39B.replace("return self.inner(x)", "return self.inner.forward(x)")  # (the doubled module, held)


def test_40b_f2_against_calling_module_forward_directly_refused(tmp_path):
    (tmp_path / "probe.py").write_text(_PROBE)
    r = tv_here(tmp_path, "check", "attention", "--module", "probe.py:winst", "--against", "probe.py:Holder",
                "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, r.stdout[-1500:]


# --- 40B F1c: the same through --mapping: a mapping file whose import (or whose call) sets "medium" makes the checked
# module "compute in float16" (precision_as_declared FAIL, mismatch) though the module itself sets nothing ------------

@pytest.mark.skipif(not _medium_lowers_cpu_matmuls(), reason="'medium' leaves float32 CPU matmuls alone here")
def test_40b_f1c_mapping_import_precision_not_blamed_on_module(tmp_path):
    (tmp_path / "base.py").write_text(causal_attn(16, 2))
    (tmp_path / "ok.py").write_text("from base import Attn\nclass Ok(Attn): pass\n")
    (tmp_path / "medmap.py").write_text(
        "import torch\ntorch.set_float32_matmul_precision('medium')\n"
        "def mp(m):\n    return {'q': m.q_proj.weight, 'k': m.k_proj.weight, 'v': m.v_proj.weight,"
        " 'o': m.o_proj.weight, 'heads': 2}\n")
    r = tv_here(tmp_path, "check", "attention", "--module", "ok.py:Ok", "--mapping", "medmap.py:mp", "--causal",
                "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout[-1500:]


# --- 40B F3: a setting made by a thread the module's import started (one-shot, after a delay) reaches the check's OWN
# float32 reference: the float32 rule's tolerance becomes 2 x a bfloat16 error (0.00568 instead of ~2e-7) and
# precision_as_declared says "computes in float32 or finer" for a module computing in bfloat16 ---------------------

def _late_medium(delay: float) -> str:
    return ("import threading, time, torch\nfrom base import Attn\n"
            f"def _late():\n    time.sleep({delay})\n    torch.set_float32_matmul_precision('medium')\n"
            "threading.Thread(target=_late, daemon=True).start()\nclass T(Attn): pass\n")


def _row(out: str, prop: str) -> str:
    return next((line for line in out.splitlines() if line.startswith(prop + " ")), "")


@pytest.mark.skipif(not _medium_lowers_cpu_matmuls(), reason="'medium' leaves float32 CPU matmuls alone here")
def test_40b_f3_thread_setting_not_in_checks_own_reference(tmp_path):
    (tmp_path / "base.py").write_text(causal_attn(16, 2))
    (tmp_path / "thd.py").write_text(_late_medium(0.05))
    r = tv_here(tmp_path, "check", "attention", "--module", "thd.py:T", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    row = _row(r.stdout, "precision_as_declared")
    assert row, r.stdout[-2500:]
    # the float32 rule's tolerance is ~2e-7 (2 x float32's own error); a bfloat16 module must not meet it
    tol = float(row.split()[3])
    assert tol < 1e-5, row


@pytest.mark.skipif(not _medium_lowers_cpu_matmuls(), reason="'medium' leaves float32 CPU matmuls alone here")
@pytest.mark.xfail(strict=False, reason="40b F3b (timing: seen when the calls outlast the thread's 0.5 s), a documented limit (docs/check-attention.md, the exit-2 list: torch's "
                   "settings): a setting a thread of the module's makes while the check runs applies from the module's "
                   "next call on; a quick check whose calls that judge precision are done by then does not see it")
def test_40b_f3b_thread_setting_after_half_a_second_not_ok(tmp_path):
    (tmp_path / "base.py").write_text(causal_attn(16, 2))
    (tmp_path / "thd.py").write_text(_late_medium(0.5))
    r = tv_here(tmp_path, "check", "attention", "--module", "thd.py:T", "--causal", "--quick", "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, r.stdout[-1500:]


# --- lead additions ---
def test_40b_f2b_against_naming_the_modules_bound_forward_is_refused(tmp_path):
    """40b F2b: `bound = winst.forward` as --against ran the module itself (a bound method: no hook sees it called)."""
    (tmp_path / "probe.py").write_text(causal_attn(16, 2, """
        class Twice(Attn):
            def forward(self, x):
                return 2 * super().forward(x)
        winst = Twice()
        bound = winst.forward
    """))
    r = tv_here(tmp_path, "check", "attention", "--module", "probe.py:winst", "--against", "probe.py:bound", "--causal",
                "--quick")
    assert r.returncode == 2 and "the module itself" in r.stderr, (r.returncode, r.stderr[-600:])


def test_40b_f3c_a_threads_default_dtype_is_not_a_replaced_torch_storage(tmp_path):
    """40b F3c: torch.set_default_dtype(float64) made by a thread of the model's rebinds torch.Storage (torch's own
    alias of the default dtype's storage class): an exact least-squares model was refused, "the code replaced
    torch.Storage … nothing was checked", exit 2."""
    (tmp_path / "ithr.py").write_text(
        "import threading, time, torch\n"
        "def _late():\n    time.sleep(0.05)\n    torch.set_default_dtype(torch.float64)\n"
        "threading.Thread(target=_late, daemon=True).start()\n"
        "def ls(xs, ys, xq):\n    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)\n"
        "    return (xq.unsqueeze(-2) @ w).reshape(-1)\n")
    r = tv_here(tmp_path, "check", "icl", "--model", "ithr.py:ls", "--lambda", "1,2", "--N", "10", "--M", "10",
                "--quick")
    assert "torch.Storage" not in r.stderr and r.returncode == 0, (r.returncode, r.stderr[-600:], r.stdout[-600:])


# --- 40B (left open then): an --against module that runs the checked module on every call but its first (the first
# computes the same numbers with a copy of its own) was watched at its first call only: not refused, "ok" for the
# module with doubled outputs. Every call of the second object is watched now, over the whole check --------------

_LATER = _PROBE_39B.replace(
    "        self.inner = winst\n",
    "        self.inner = winst\n        import copy as _c\n        self.own = [_c.deepcopy(winst)]\n"
    "        self.calls = 0\n").replace(
    "return self.inner(x)",
    "self.calls += 1\n        return self.own[0](x) if self.calls == 1 else self.inner(x)")


def test_40b_against_running_the_module_after_its_first_call_refused(tmp_path):
    (tmp_path / "probe.py").write_text(_LATER)
    r = tv_here(tmp_path, "check", "attention", "--module", "probe.py:winst", "--against", "probe.py:Holder",
                "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2 and "runs the checked module itself" in r.stdout + r.stderr, r.stdout[-1500:]
