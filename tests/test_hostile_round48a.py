"""Hostile pass 43 (tester a): the mapping hook, --against, the own-model checks on user objects, the API and the
fixture. One reproducer per finding; each failed on da26414 and passes since its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cli_helpers import one_line_error, tv_here

#: an attention whose weights the checker cannot find by name (one stacked parameter), and a mapping hook base
_STACKED = textwrap.dedent('''
    import math, torch
    from torch import nn
    class Attn(nn.Module):
        def __init__(self, dim=16, heads=2):
            super().__init__()
            g = torch.Generator().manual_seed(1)
            self.stack = nn.Parameter(torch.randn(4, dim, dim, generator=g) / math.sqrt(dim))
            self.dim, self.h = dim, heads
        def forward(self, x):
            B, T, D = x.shape; h = self.h
            q, k, v = (x @ self.stack[i].T for i in range(3))
            q, k, v = (t.view(B, T, h, D // h).transpose(1, 2) for t in (q, k, v))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // h), dim=-1)
            return (a @ v).transpose(1, 2).reshape(B, T, D) @ self.stack[3].T
    def base(m):
        return {"q": m.stack[0], "k": m.stack[1], "v": m.stack[2], "o": m.stack[3], "heads": m.h, "kv_heads": m.h}
    ''')


def _hooked(tmp_path, hook: str):
    """``check attention`` of the stacked module with the mapping hook ``hook`` (its source, after ``base``)."""
    (tmp_path / "mp.py").write_text(_STACKED + hook)
    return tv_here(tmp_path, "check", "attention", "--module", "mp.py:Attn", "--mapping", "mp.py:hook", "--quick",
                   "--no-progress")


@pytest.mark.parametrize("change, said", [
    ("d[1] = 2", "unknown keys"),  # F1: a key that is not a string (a traceback: ', '.join)
    ("d['kv_grouping'] = ['hf']", "kv_grouping"),  # F2: unhashable (a traceback)
    ("d['kv_heads'] = 0", "kv_heads"),  # F7: read as "not given" (value.get('kv_heads') or heads), heads 0 refused
], ids=["F1-key-not-a-string", "F2-unhashable-kv-grouping", "F7-kv-heads-zero"])
def test_a_bad_mapping_value_is_one_line(tmp_path, change, said):
    r = _hooked(tmp_path, f"def hook(m):\n    d = base(m); {change}; return d\n")
    assert said in one_line_error(r.returncode, r.stderr)


#: two seeded implementations of one causal attention, and "others" that cannot serve as the second implementation
_FUSED = (Path(__file__).resolve().parents[1] / "examples" / "fused.py").read_text() + textwrap.dedent('''
    class RefInt(Fast):
        def forward(self, x):
            return super().forward(x).long()
    class RefNumpy(Fast):
        def forward(self, x):
            return super().forward(x).detach().numpy()
    ''')


def test_an_against_with_an_integer_output_cannot_serve_as_the_other_implementation(tmp_path):
    (tmp_path / "fu.py").write_text(_FUSED)
    r = tv_here(tmp_path, "check", "attention", "--module", "fu.py:Fast", "--against", "fu.py:RefInt", "--causal",
                "--quick", "--no-progress")
    line = one_line_error(r.returncode, r.stderr)
    assert "--against" in line and "int64" in line


def test_an_against_returning_an_ndarray_is_named_as_such(tmp_path):
    (tmp_path / "fu.py").write_text(_FUSED)
    r = tv_here(tmp_path, "check", "attention", "--module", "fu.py:Fast", "--against", "fu.py:RefNumpy", "--causal",
                "--quick", "--no-progress")
    line = one_line_error(r.returncode, r.stderr)
    assert "ndarray" in line, line


def test_a_checked_module_that_runs_the_against_object_is_refused(tmp_path):
    # docs/check-attention.md, "Differential mode": a second object whose call runs the checked module is refused,
    # exit 2, since "that comparison is 0 by construction and could reject nothing"; a checked module whose call runs
    # the second object is the same comparison (here the second implementation has the wrong logit scale: without
    # --against the wrapper is a mismatch, with it ok)
    (tmp_path / "fu.py").write_text(_FUSED + textwrap.dedent('''
        class WrongScale(Fast):
            def forward(self, x):
                q, k, v = self._heads(x)
                return self._out(F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0), x)
        ref = WrongScale()
        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__(); self.inner = ref
            def forward(self, x):
                return self.inner(x)
        '''))
    r = tv_here(tmp_path, "check", "attention", "--module", "fu.py:Wrapper", "--against", "fu.py:ref", "--causal",
                "--quick", "--no-progress")
    assert r.returncode == 2, (r.returncode, r.stdout[-600:], r.stderr[-600:])
    one_line_error(r.returncode, r.stderr)


def test_a_transform_writing_into_its_input_at_a_later_length_is_one_line(tmp_path):
    # docs/check-attention.md: a transform that "writes into its input is a one-line usage error (exit 2). The same
    # checks (and the device) are repeated on every later call, so a transform that fails only at a longer length is
    # the same one line, naming the length"
    r = _hooked(tmp_path, textwrap.dedent('''
        def hook(m):
            def f(q):
                r = q.clone()
                if q.shape[2] > 10:
                    q.mul_(2.0)
                return r
            d = base(m); d["q_transform"] = f; return d
        '''))
    line = one_line_error(r.returncode, r.stderr)
    assert "writes into its input" in line and "T = 17" in line, line


def test_a_detaching_transform_is_not_a_gradient_mismatch_of_the_module(tmp_path):
    # the transform is part of the declared reference (docs/check-attention.md: "closing over the module's parameters
    # lets their gradients be checked"); one whose output carries no gradient to q makes the reference's autograd
    # gradient wrong, and the module (identical to the reference with the identity transform) is blamed for it
    r = _hooked(tmp_path, "def hook(m):\n    d = base(m); d['q_transform'] = lambda q: q.detach()\n    return d\n")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 1 and "gradients_match_reference" not in r.stdout.split("verdict:")[-1], r.stdout[-1500:]


def test_an_against_without_gradient_is_not_said_to_be_a_device_limit(tmp_path):
    (tmp_path / "fu.py").write_text(_FUSED + textwrap.dedent('''
        class RefDetached(Fast):
            def forward(self, x):
                return super().forward(x).detach()
        '''))
    r = tv_here(tmp_path, "check", "attention", "--module", "fu.py:Fast", "--against", "fu.py:RefDetached",
                "--causal", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr
    row = next(l for l in r.stdout.splitlines() if l.startswith("gradients_match_against"))
    assert "on this device" not in row and "the module's backward" not in row, row


def test_a_stop_of_the_command_stops_the_code_it_runs(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from cli_helpers import causal_attn

    log = tmp_path / "ticks.log"
    (tmp_path / "tick.py").write_text(causal_attn(8, 2, f'''
        import time
        class Tick(Attn):
            def forward(self, x):
                for _ in range(150):
                    with open({str(log)!r}, "a") as f:
                        f.write("t\\n")
                    time.sleep(0.2)
                return super().forward(x)
        '''))
    tv = os.path.join(os.path.dirname(sys.executable), "tverify")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    # a job of its own in this session, as a shell's job control starts a foreground command (not orphaned: a stop
    # signal to it is not discarded)
    p = subprocess.Popen([tv, "check", "attention", "--module", "tick.py:Tick", "--causal", "--quick", "--no-progress",
                          "--timeout", "60"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, process_group=0)
    try:
        deadline = time.monotonic() + 60
        while (not log.exists() or log.read_text().count("t") < 3) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert log.exists(), "the code never ran"
        os.killpg(p.pid, signal.SIGTSTP)  # Ctrl-Z
        time.sleep(1.0)
        at_stop = log.read_text().count("t")
        time.sleep(3.0)
        during = log.read_text().count("t") - at_stop
        os.killpg(p.pid, signal.SIGCONT)
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
    assert during <= 1, f"the code ran {during} ticks (0.2 s each) while the command was stopped"


def test_the_api_hopfield_check_takes_max_memory():
    # docs/own-model.md: "The Python API (check_attention, check_icl_model, check_hopfield with a module) does the same
    # ...: an exit, a signal, a time-out (timeout=SECONDS) or the memory limit (max_memory=GB) raise InputError"
    import numpy as np
    import torch

    import proofs_checks as pc

    P = np.sign(np.random.default_rng(0).standard_normal((6, 8)))
    r = pc.check_hopfield(P, beta=4.0, module=lambda xi, p, b: torch.softmax(b * xi @ p.T, -1) @ p, max_memory=4)
    assert r.verdict.outcome in ("ok", "mismatch", "inconclusive")


def test_a_declared_head_count_is_not_dropped_for_the_mappings(tmp_path):
    # the 2-head module declared --heads 4: a mismatch without the hook ("matches the reference with 2 heads
    # instead"); with a hook that says 2 heads the declaration must still be judged, or refused as a conflict
    (tmp_path / "fu.py").write_text(_FUSED + textwrap.dedent('''
        def hook(m):
            return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 2}
        '''))
    r = tv_here(tmp_path, "check", "attention", "--module", "fu.py:Fast", "--mapping", "fu.py:hook", "--heads", "4",
                "--causal", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (1, 2), (r.returncode, r.stdout[:400])


def test_the_object_judged_is_the_one_given_not_a_copy_that_computes_otherwise(tmp_path):
    from cli_helpers import causal_attn

    (tmp_path / "dc.py").write_text(causal_attn(8, 2, '''
        class Cfg(Attn):
            def __init__(self):
                super().__init__(); self.leak = False
            def forward(self, x):
                B, T, _ = x.shape
                s, v = self.scores(x)
                if not self.leak:
                    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
                return self.finish(s, v, B, T)
            def __getstate__(self):          # a runtime flag is not pickled (a common pattern)
                d = dict(super().__getstate__()); d.pop("leak", None); return d
            def __setstate__(self, d):
                super().__setstate__(d); self.leak = False
        def made():
            m = Cfg(); m.leak = True         # the object given attends to the future
            return m
        inst = made()
        '''))
    r = tv_here(tmp_path, "check", "attention", "--module", "dc.py:inst", "--causal", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, r.stdout[-800:]


def test_descriptors_replaced_by_the_code_are_not_reported_as_an_outside_sigkill(tmp_path):
    # docs/own-model.md: code that closes the child's descriptors (os.closerange) is "exit 2, one line saying so";
    # replacing them (dup2 of /dev/null) is the same loss of the result channel, not the OOM killer
    from cli_helpers import causal_attn

    (tmp_path / "fds.py").write_text(causal_attn(8, 2, '''
        import os, stat
        _dn = os.open("/dev/null", os.O_RDWR)
        class Dup(Attn):
            def forward(self, x):
                for fd in range(3, 256):
                    if fd == _dn:
                        continue
                    try:
                        m = os.fstat(fd).st_mode
                    except OSError:
                        continue
                    if stat.S_ISSOCK(m) or stat.S_ISFIFO(m):
                        os.dup2(_dn, fd)
                return super().forward(x)
        '''))
    r = tv_here(tmp_path, "check", "attention", "--module", "fds.py:Dup", "--causal", "--quick", "--no-progress")
    line = one_line_error(r.returncode, r.stderr)
    assert "out-of-memory" not in line and "not sent by tverify" not in line, line
    # said once the result channel reads closed, not after the child's own 30-second wait to be ended (exit 72): the
    # supervisor spun a core on the closed channels meanwhile (session 23, 24 CPU s for this test)
    assert "can no longer send its result" in line and "os.dup2" in line, line


_F8_ICL = '''
import torch
def model(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1).to(torch.float8_e4m3fn)
'''


@pytest.mark.parametrize("argv", [
    ("check", "icl", "--model", "f8.py:model", "--lambda", "1,2", "--N", "10", "--M", "10", "--prompts", "64"),
    ("check", "attention", "--module", "fu.py:FastF8", "--causal", "--quick"),
    ("check", "attention", "--module", "fu.py:Fast", "--against", "fu.py:RefF8", "--causal", "--quick"),
    ("check", "attention", "--module", "fu.py:FastQ", "--causal", "--quick"),
], ids=["icl", "attention-module", "attention-against", "attention-module-qint8"])
def test_a_float8_output_is_judged_or_refused_in_one_line(tmp_path, argv):
    (tmp_path / "f8.py").write_text(_F8_ICL)
    (tmp_path / "fu.py").write_text(_FUSED + textwrap.dedent('''
        class FastF8(Fast):
            def forward(self, x):
                return super().forward(x).to(torch.float8_e4m3fn)
        RefF8 = FastF8
        class FastQ(Fast):
            def forward(self, x):
                return torch.quantize_per_tensor(super().forward(x).float(), 0.01, 0, torch.qint8)
        '''))
    r = tv_here(tmp_path, *argv, "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-600:]
    assert r.returncode in (1, 2), (r.returncode, r.stdout[-600:], r.stderr[-600:])
    if r.returncode == 2:  # (torch's own deprecation warning for quantized tensors may precede the one line)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("tverify:")]
        assert len(lines) == 1 and lines[0].startswith("tverify: error:"), r.stderr[-600:]


def test_a_float8_mapping_weight_is_one_line(tmp_path):
    r = _hooked(tmp_path, "def hook(m):\n    d = base(m); d['q'] = m.stack[0].detach().to(torch.float8_e4m3fn)"
                          "; return d\n")
    one_line_error(r.returncode, r.stderr)
