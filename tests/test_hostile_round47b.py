"""Hostile pass 41, tester B: one test per finding; each failed on the code the pass ran against (e84d51c) and passes since
its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tiers import moved

from cli_helpers import causal_attn
from tests.test_hostile_round45b import _PROBE as _PROBE_39B

_TVERIFY = str(Path(sys.executable).with_name("tverify"))


def _env(tmp_path: Path, **extra: str) -> dict:
    return {**os.environ, "HOME": str(tmp_path / "home"), "TVERIFY_STORE": str(tmp_path / "store"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra}


def _install(site: Path, name: str, source: str) -> None:
    """An installed distribution ``name`` (a ``.dist-info`` on ``PYTHONPATH``) whose module is its entry point."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{name}.py").write_text(textwrap.dedent(source))
    info = site / f"{name}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[tverify.claims]\n{name} = {name}\n")


def _tv(tmp_path: Path, *argv: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
    """A plugin claim's run in a fresh interpreter (its distribution on PYTHONPATH); a check in this process, its verdict
    being the subject and the user's code running in the check's isolated child either way (issue 46)."""
    if argv[0] == "check" and not env:
        from tests.cli_helpers import tv_here

        return tv_here(tmp_path, *argv)
    return subprocess.run([_TVERIFY, *argv], cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True, text=True,
                          timeout=timeout)


# --- 41B F1: matches_derivation's rounding tolerance is taken at the largest magnitude met over ALL points, so a form
# wrong by a factor 2 at every point whose value is not the largest (here: every x < 0, half the draws) is verified,
# with a measured resolution of "0.0001 %" ------------------------------------------------------------------------

_EXP_PLUGIN = '''
    import numpy as np
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, matches_derivation, register


    def derive():
        b = DerivationBuilder("derivative of exp(40x)/40")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        return b.done(b.step("Differentiate", sp.diff(sp.exp(40 * x) / 40, x)))


    def form(x):  # wrong by a factor 2 wherever x < 0
        return float(np.exp(40 * x)) * (1.0 if x > 0.0 else 2.0)


    def sample(rng):
        return (rng.normal(),)


    register(Claim(id="h41bexp.deriv", title="d/dx exp(40x)/40 = exp(40x)", statement=r"\\frac{d}{dx}\\frac{e^{40x}}{40}=e^{40x}",
                   source="an exercise", kind="identity", form=form, derivation=derive,
                   checks=(matches_derivation(derive, sample),), no_numeric="SymPy differentiates exactly",
                   mutants=(Mutant("half", "wrong constant", "exp(40x)/2", lambda x: float(np.exp(40 * x)) / 2),
                            Mutant("neg", "sign flip", "-exp(40x)", lambda x: -float(np.exp(40 * x))))))
'''


@moved("a plugin claim run in a fresh process, its checks and power rule in children (≈ 7.5 CPU s); the per-point "
       "tolerance is pinned in-process", "tests/test_pins_hostile.py::test_matches_derivation_judges_each_point_by_its_own_scale")
def test_41b_f1_matches_derivation_tolerance_is_per_point(tmp_path):
    _install(tmp_path / "site", "h41bexp", _EXP_PLUGIN)
    r = _tv(tmp_path, "run", "h41bexp.deriv", "--quick", "--no-progress", PYTHONPATH=str(tmp_path / "site"))
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-2000:]
    assert "1 verified" not in out and r.returncode != 0, (r.returncode, out[-2000:])


# --- 41B F2: TVERIFY_DERIVATION_BUDGET no longer stops a derivation blocked in a system call (a sleep, a wait on a
# subprocess or a lock): the timer thread's asynchronous exception is delivered only when the call returns, so a
# budget of 1 s ends the derivation after the call's 15 s (the SIGALRM it replaced interrupted the call) ------------

_SLOW_PLUGIN = '''
    import time
    import numpy as np
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, numeric, register


    def derive():
        b = DerivationBuilder("square")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        time.sleep(90)  # a step blocked in a system call (an external CAS it waits on, a lock, I/O)
        return b.done(b.step("Expand", sp.expand((x + 1) ** 2)))


    @numeric("against the expansion")
    def expansion(form, ctx):
        xs = ctx.rng().normal(size=50)
        ref = xs ** 2 + 2 * xs + 1
        return close(np.array([form(x) for x in xs]), ref, 1e-12 * np.maximum(1, np.abs(ref)), "rounding")


    register(Claim(id="h41bslow.sq", title="(x+1)^2", statement=r"(x+1)^2=x^2+2x+1", source="an exercise",
                   kind="identity", form=lambda x: x * x + 2 * x + 1, derivation=derive, checks=(expansion,),
                   no_symbolic="the derivation is checked by its obligations",
                   mutants=(Mutant("m", "wrong constant", "x^2+2x", lambda x: x * x + 2 * x),)))
'''


def test_41b_f2_derivation_budget_stops_a_blocked_derivation(tmp_path):
    import time

    _install(tmp_path / "site", "h41bslow", _SLOW_PLUGIN)
    t0 = time.monotonic()
    r = _tv(tmp_path, "run", "h41bslow.sq", "--quick", "--no-progress", PYTHONPATH=str(tmp_path / "site"),
            TVERIFY_DERIVATION_BUDGET="1", TVERIFY_DERIVATION_CACHE="0")
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert "did not finish in 1 s" in out, out[-2000:]
    # (the bound leaves room for the start of a loaded machine: the run's own start took 10 s under two other jobs)
    assert took < 60, f"a budget of 1 s; the run took {took:.1f} s (the derivation's 90 s sleep ran to its end)"


# --- 41B F3: an --against reference that takes no weak reference (a callable object of a class with __slots__) has
# what its calls leave (CPU autocast turned on) recorded as the CHECKED module's settings (numerics/torch_utils.py
# _store_of falls back to the module's own record on TypeError): a correct float32 module is "mismatch: violates
# deterministic, …, prefix_consistency, batch_size_independence, dtype_and_device_preserved"; the same reference as a
# plain function gives "ok" (40b F1's family) ------------------------------------------------------------------------

_BASE = causal_attn(16, 4, "class Ok(Attn):\n    pass\n")  # a correct causal attention, seeded

_SLOTTED_REF = '''
    import torch
    from base import Attn
    _m = Attn().double()
    class Slotted:
        """an exact reference (float64 inside) whose call leaves CPU autocast on; no __weakref__ (__slots__)"""
        __slots__ = ()
        def __call__(self, x):
            torch.set_autocast_enabled("cpu", True)
            return _m(x.double()).to(x.dtype)
    ref = Slotted()
    def fn(x):
        torch.set_autocast_enabled("cpu", True)
        return _m(x.double()).to(x.dtype)
'''


def test_41b_f3_against_object_without_weakref_keeps_its_own_settings(tmp_path):
    (tmp_path / "base.py").write_text(textwrap.dedent(_BASE))
    (tmp_path / "acref.py").write_text(textwrap.dedent(_SLOTTED_REF))
    argv = ("check", "attention", "--module", "base.py:Ok", "--causal", "--quick", "--dtype", "float32", "--against")
    r = _tv(tmp_path, *argv, "acref.py:fn")  # the control: the same reference as a function
    assert r.returncode == 0, r.stdout[-2000:]
    r = _tv(tmp_path, *argv, "acref.py:ref")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stdout[-2500:]


# --- 41B F4: a --mapping hook's q_transform that leaves CPU autocast on (a transform written for a mixed-precision
# pipeline) has the rest of the check's OWN float32 reference computed in bfloat16: the tolerances grow to bfloat16's
# (matches_reference 0.00946 instead of 2.48e-07, scale_1_over_sqrt_dk 0.0809) and a module whose logits are 0.2 %
# too large (computing in float64 inside, so autocast does not touch it) is "ok: all 16 checked properties hold" with
# "scale is 1/√d_k"; the same mapping without the transform: mismatch (matches_reference, scale_1_over_sqrt_dk) -------

_BUG64 = '''
    import math, torch
    from base import Attn
    class Bug64(Attn):
        """computes in float64 inside (whatever the input's dtype); logits 0.2 % too large"""
        def forward(self, x):
            dt = x.dtype
            x = x.double()
            B, T, D = x.shape; H = self.num_heads; dk = D // H
            W = lambda l: l.weight.double()
            sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
            q, k, v = sp(x @ W(self.q_proj).T), sp(x @ W(self.k_proj).T), sp(x @ W(self.v_proj).T)
            s = q @ k.transpose(-1, -2) / math.sqrt(dk) * 1.002
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return ((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D) @ W(self.o_proj).T).to(dt)
'''

_TRANSFORM_MAP = '''
    import torch
    def _ident(q):
        torch.set_autocast_enabled("cpu", True)  # left on: a transform written for a mixed-precision pipeline
        return q
    def plain(m):
        return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 4}
    def weights(m):
        return {**plain(m), "q_transform": _ident}
'''


def test_41b_f4_mapping_transform_settings_do_not_reach_the_checks_reference(tmp_path):
    (tmp_path / "base.py").write_text(textwrap.dedent(_BASE))
    (tmp_path / "bug.py").write_text(textwrap.dedent(_BUG64))
    (tmp_path / "tmap.py").write_text(textwrap.dedent(_TRANSFORM_MAP))
    argv = ("check", "attention", "--module", "bug.py:Bug64", "--causal", "--quick", "--dtype", "float32", "--mapping")
    r = _tv(tmp_path, *argv, "tmap.py:plain")  # the control: the same weights without the transform
    assert r.returncode == 1 and "scale_1_over_sqrt_dk" in r.stdout, r.stdout[-2000:]
    r = _tv(tmp_path, *argv, "tmap.py:weights")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, r.stdout[-2500:]


# --- 41B F4b, F4c (F4's cause, other symptoms): a q_transform that leaves torch's default device "meta" set makes a
# correct module refused, exit 2, with an untrue line blaming it: "--module: Ok raised NotImplementedError: Cannot
# copy out of meta tensor; no data! … (and at every other probe length …)" (F4b); one that leaves autograd disabled
# (torch.set_grad_enabled(False)) ends the check with a 79-line traceback (ChildInternalError: "element 0 of tensors
# does not require grad and does not have a grad_fn": the check's own reference gradients ran under it), exit 1 (F4c)

_LEAVING_MAP = '''
import torch
def _leaves(q):
    torch.{setting}
    return q
def weights(m):
    return {{"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 4, "q_transform": _leaves}}
'''


@pytest.mark.parametrize("setting", ['set_default_device("meta")', "set_grad_enabled(False)"], ids=["f4b", "f4c"])
def test_41b_f4b_f4c_mapping_transform_settings_are_not_the_modules(tmp_path, setting):
    (tmp_path / "base.py").write_text(textwrap.dedent(_BASE))
    (tmp_path / "lmap.py").write_text(_LEAVING_MAP.format(setting=setting))
    r = _tv(tmp_path, "check", "attention", "--module", "base.py:Ok", "--mapping", "lmap.py:weights", "--causal",
            "--quick")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "Ok raised" not in r.stderr and r.returncode == 0, (r.returncode, r.stderr[-2000:], r.stdout[-1500:])


# --- 41B F5: an --against object that holds the checked module and runs it through its class's function
# (`type(self.inner).forward(self.inner, x)`: neither the forward pre-hook nor the instance's forward wrapper of
# attention_stages._never_runs_the_module sees it) is not refused: a module with its outputs doubled is "ok: all 13
# checked properties hold" (40b F2's family: there `self.inner.forward(x)`) --------------------------------------

_CLASS_FORWARD = _PROBE_39B.replace("return self.inner(x)", "return type(self.inner).forward(self.inner, x)")


def test_41b_f5_against_running_the_module_through_its_class_is_refused(tmp_path):
    (tmp_path / "probe.py").write_text(_CLASS_FORWARD)
    r = _tv(tmp_path, "check", "attention", "--module", "probe.py:winst", "--against", "probe.py:Holder", "--causal",
            "--quick")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode != 0, r.stdout[-2000:]


# --- 41B F6: a --mapping hook whose CALL leaves CPU autocast on (its import doing so is handled) has the setting
# recorded as the checked module's: a correct float32 module is "mismatch: attention Ok violates: precision_as_declared
# (it computes in bfloat16, not float32), matches_reference, gradients_match_reference, dtype_and_device_preserved",
# with the hint to declare --compute-dtype bfloat16; docs/check-attention.md: "--against and --mapping keep their own:
# what their import or calls leave applies to their calls, never to the checked module's" (40b F1c's family; that
# test is skipped where "medium" leaves CPU matmuls alone). The Python API's mapping= does the same ----------------

_CALL_AUTOCAST_MAP = '''
    import torch
    def mp(m):
        torch.set_autocast_enabled("cpu", True)  # left on by the hook's call
        return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 4}
'''


def test_41b_f6_mapping_call_settings_are_not_the_modules(tmp_path):
    (tmp_path / "base.py").write_text(textwrap.dedent(_BASE))
    (tmp_path / "acmap.py").write_text(textwrap.dedent(_CALL_AUTOCAST_MAP))
    r = _tv(tmp_path, "check", "attention", "--module", "base.py:Ok", "--mapping", "acmap.py:mp", "--causal", "--quick",
            "--dtype", "float32")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stdout[-2500:]


# --- 41B F7: a module that holds an nn.Dropout(0.1) it never applies (or a `dropout = 0.1` attribute) is taken to drop
# in training mode without a look: training mode is left out ("note: training mode was not judged: the module drops in
# training mode (dropout > 0), whose randomness decides nothing" — untrue: two training-mode calls on one input are
# equal), so a causal leak of 1e-3 in training mode is "ok: all 16 checked properties hold". The config is taken as a
# fact, not as evidence; numerics/attention_props_grad.py prop_other_paths never runs its own _random test then ------

_LYING_DROPOUT = '''
    import torch.nn as nn
    from base import Attn
    class LyingDrop(Attn):
        """holds an nn.Dropout(0.1) it never applies; in training mode every output sees the last token"""
        def __init__(self):
            super().__init__()
            self.attn_drop = nn.Dropout(0.1)
        def forward(self, x):
            y = super().forward(x)
            return y + 1e-3 * x[:, -1:, :] if self.training else y
'''


def test_41b_f7_an_unused_dropout_does_not_hide_training_mode(tmp_path):
    (tmp_path / "base.py").write_text(textwrap.dedent(_BASE))
    (tmp_path / "lying.py").write_text(textwrap.dedent(_LYING_DROPOUT))
    r = _tv(tmp_path, "check", "attention", "--module", "lying.py:LyingDrop", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, r.stdout[-2500:]
