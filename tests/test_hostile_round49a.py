"""Hostile pass 44 (tester a): the own-model checks, processes, the Python API and the pytest fixture.
One reproducer per finding; each failed on 5d9aa44 and passes since its fix (F19: the documented limit, and the line
that now says it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import proofs_checks
from cli_helpers import one_line_error, tv_here
from theory.validation import InputError


def test_the_icl_api_names_its_own_argument_not_the_commands_flag():
    """docs/api.md: bad input raises InputError "in the function's own words: the keyword arguments where the
    command's message names its flags"; check_attention says ``obj:`` and check_hopfield ``module:``, but
    check_icl_model says ``--model: …`` for an object that returns the wrong shape, raises or exits."""
    with pytest.raises(InputError) as ei:
        proofs_checks.check_icl_model(lambda xs, ys, xq: xq, lambdas="1,2", N=10, mode="quick")
    msg = str(ei.value)
    assert "\n" not in msg
    assert "--model" not in msg, msg


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_att_svm_api_refuses_a_level_outside_0_1_with_weights_too():
    """``tverify check att-svm --level -1`` is refused ("--level must be strictly between 0 and 1") and so is
    ``check_att_svm(data, level=-1)`` without weights; with ``weights=`` the level is not validated, and a random W is
    reported ``ok: your W is aligned with the Att-SVM …``: a criterion that accepts every correlation."""
    import numpy as np

    W = np.random.default_rng(5).standard_normal((6, 6))
    try:
        r = proofs_checks.check_att_svm(str(EXAMPLES / "data.npz"), weights=W, level=-1.0, mode="quick")
    except InputError as exc:
        assert "level" in str(exc)
        return
    assert r.outcome != "ok", str(r.verdict.summary)


def _example_W():
    import torch

    W = torch.load(EXAMPLES / "W.pt", weights_only=True)
    return (W["W"] if isinstance(W, dict) else W).numpy()


def _weights_cases():
    import numpy as np
    import torch

    return {
        "dict without W": lambda W: {"w": W},
        "dict with K only": lambda W: {"K": W[:, :2]},
        "text array": lambda W: np.full((6, 6), "a"),
        "meta tensor": lambda W: torch.empty(6, 6, device="meta"),
        "sparse tensor": lambda W: torch.tensor(W).to_sparse(),
    }


@pytest.mark.parametrize("case", list(_weights_cases()))
def test_bad_att_svm_weights_through_the_api_raise_input_error(case):
    """docs/api.md: bad input raises InputError with the command's one line. ``check_att_svm(data, weights=…)`` lets
    a dict without ``W`` (KeyError 'W'), a text array (ValueError), a meta or sparse tensor (NotImplementedError,
    TypeError) through as raw exceptions, where ``check_hopfield``/``check_icl_model`` refuse the same objects in one
    line (``parsing.tensor_to_numpy``)."""
    W = _example_W()
    with pytest.raises(InputError):
        proofs_checks.check_att_svm(str(EXAMPLES / "data.npz"), weights=_weights_cases()[case](W), mode="quick")


def test_a_complex_att_svm_weight_matrix_is_refused_not_cast_to_real():
    """The command refuses a complex ``W`` ("is complex …; a real array is required", as the API does for complex data,
    patterns or Λ); ``check_att_svm(data, weights=W + 1j·R)`` casts it to its real part (a ComplexWarning) and reports
    ``ok: your W is aligned with W^mm``: the matrix judged is not the one given."""
    import numpy as np

    W = _example_W()
    Wc = W + 1j * np.random.default_rng(0).standard_normal(W.shape)
    try:
        r = proofs_checks.check_att_svm(str(EXAMPLES / "data.npz"), weights=Wc, mode="quick")
    except InputError as exc:
        assert "complex" in str(exc)
        return
    assert r.outcome != "ok", str(r.verdict.summary)


def test_att_svm_weights_with_both_w_and_kq_are_ambiguous_in_the_api_too():
    """``--weights`` holding ``W`` and ``K``/``Q`` is refused ("which one is your attention is ambiguous"); the API's
    dict ``{"W": W, "K": K, "Q": Q}`` is judged on ``K Qᵀ`` alone, the ``W`` the user trained ignored without a word."""
    import numpy as np

    W = _example_W()
    rng = np.random.default_rng(1)
    with pytest.raises(InputError, match="ambiguous"):
        proofs_checks.check_att_svm(str(EXAMPLES / "data.npz"), weights={"W": W, "K": rng.standard_normal((6, 2)),
                                                                         "Q": rng.standard_normal((6, 2))}, mode="quick")


def test_a_detached_attention_core_fails_gradients_match_reference(tmp_path):
    """The attention output detached before the output projection: the input and q/k/v projections get no gradient
    (training would never update them), only ``o_proj`` does. ``torch.autograd.grad(..., allow_unused=True)`` gives
    None for them and ``_grad_worst`` skips every None pair, so the row reads "input gradient and 4 parameter
    gradients … ok, error 0" beside a reference whose input gradient is far from zero."""
    from cli_helpers import causal_attn

    text = causal_attn(8, 2, """
        class Detached(Attn):
            def finish(self, s, v, B, T):
                return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D).detach())
        """)
    (tmp_path / "att.py").write_text(text)
    r = tv_here(tmp_path, "check", "attention", "--module", "att.py:Detached", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("gradients_match_reference"))
    assert r.returncode == 1 and " FAIL " in row, row


_SLOW_MODEL = '''
import os, time, torch
CALLS = os.environ["H44A_CALLS"]
def ls(xs, ys, xq):
    with open(CALLS, "a") as f:
        f.write("call\\n")
    if sum(1 for _ in open(CALLS)) == 1:
        time.sleep(2)
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1)
'''


def test_a_sigtstp_sent_to_the_command_stops_the_code_it_runs(tmp_path):
    """docs/cli.md: the parent "passes every signal sent to it on to the child"; docs/own-model.md: on SIGTSTP "the
    child and every process below it are stopped with tverify … the time stopped does not count against
    --timeout". ``kill -TSTP <tverify's pid>`` (not the process group) stops the supervisor by the default action
    (``_forwarded`` lists only signals whose default ends a process): the model is called on while tverify is stopped,
    and with ``--timeout`` the stopped time counts (a run stopped longer than the limit ends "not finished within
    --timeout", exit 2)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "m.py").write_text(_SLOW_MODEL)
    calls = tmp_path / "calls"
    env = {**os.environ, "H44A_CALLS": str(calls), "TVERIFY_STORE": str(tmp_path / "store"),
           "HOME": str(tmp_path / "home")}
    exe = Path(sys.executable).with_name("tverify")
    p = subprocess.Popen([str(exe), "check", "icl", "--model", "m.py:ls", "--lambda", "1,2", "--N", "10", "--M", "10",
                          "--quick", "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not calls.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert calls.exists(), "the model was never called"
        os.kill(p.pid, signal.SIGTSTP)
        time.sleep(6)  # the first call sleeps 2 s: stopped, it makes no second call meanwhile (running: dozens)
        n_stopped = len(calls.read_text().splitlines())
        os.kill(p.pid, signal.SIGCONT)
        assert p.wait(timeout=120) == 0
        assert n_stopped == 1, f"the model was called {n_stopped} times while tverify was stopped"
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


@pytest.mark.parametrize("argv", [
    ("--f", "-x*0.5, -Rational", "--V", "x**2 + Rational**2", "--vars", "x,Rational"),
    ("--f", "-Integer*2, -y", "--V", "Integer**2 + y**2", "--vars", "Integer,y"),
    ("--f", "-Float, -y", "--V", "Float**2 + y**2"),
])
def test_lyapunov_variables_named_like_sympys_number_classes(tmp_path, argv):
    """``parse_system`` evaluates with ``global_dict={"Integer", "Float", "Rational", "Symbol"}`` (what auto_number and
    rationalize emit): a state variable of one of those names (an ASCII identifier, not in RESERVED_NAMES) is either
    called (``-x*0.5`` becomes ``Rational('0.5')`` → "'Symbol' object is not callable", reported against the
    component ``-x*0.5``, which is fine) or read as SymPy's class ("bad operand type for unary -: 'type'"). Either
    the system is checked (it is a valid one: certified) or the name is refused as a name, in one line that says so."""
    r = tv_here(tmp_path, "check", "lyapunov", *argv)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0 or (r.returncode == 2 and "variable name" in r.stderr), (r.returncode, r.stderr)


def _seed_cases():
    import numpy as np

    def ls(xs, ys, xq):
        import torch

        w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
        return (xq.unsqueeze(-2) @ w).reshape(-1)

    P = np.sign(np.random.default_rng(0).standard_normal((6, 8)))
    data = str(EXAMPLES / "data.npz")
    return {
        "icl seed 2**64": lambda: proofs_checks.check_icl_model(ls, lambdas="1,2", N=10, mode="quick", seed=2**64),
        "hopfield seed 2**64": lambda: proofs_checks.check_hopfield(P, beta=0.5, seed=2**64, isolate=False),
        "att_svm seed 2**64": lambda: proofs_checks.check_att_svm(data, seed=2**64, mode="quick", iters=5),
        "lyapunov seed -1": lambda: proofs_checks.check_lyapunov("-x, -y", "x**2", seed=-1, mode="quick"),
        "lyapunov mode bogus": lambda: proofs_checks.check_lyapunov("-x, -y", "x**2", mode="bogus"),
    }


@pytest.mark.parametrize("case", list(_seed_cases()))
def test_api_seed_and_mode_are_validated_as_the_flags_are(case):
    """``check_attention(seed=-1)`` is refused ("--seed (seed=): must be an integer in [0, 2**32)"), as the command's
    ``--seed`` range is. The other check functions take any integer: ``seed=2**64`` raises torch's "Overflow when
    unpacking long long" (through ``check_icl_model``'s child a ChildInternalError whose message holds the child's
    traceback), ``check_lyapunov(seed=-1)`` numpy's "expected non-negative integer" and ``mode="bogus"`` a KeyError —
    the last two only when the system is not certified (a certifiable one returns "ok" with the same arguments)."""
    with pytest.raises(InputError) as ei:
        _seed_cases()[case]()
    assert "Traceback" not in str(ei.value)


def test_a_lyapunov_candidate_of_too_high_a_degree_is_refused_before_expansion(tmp_path):
    """``_check_ast`` bounds the degree on the syntax tree but lets bounds up to 4 × MAX_DEGREE = 48 through to
    ``sp.expand(sp.cancel(e))``; ``((x1+…+x6)**12)**4`` has C(53, 5) ≈ 2.9 million monomials: the command ran past 300 s
    and 2.8 GB of memory with ``--max-memory 1`` (measured on 5d9aa44), only to end with "degree 48 exceeds the
    largest supported degree 12". Either refused quickly or stopped at the memory limit, it is one line, exit 2."""
    import os
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("tverify")
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "HOME": str(tmp_path / "home")}
    try:
        r = subprocess.run([str(exe), "check", "lyapunov", "--f", "-x1,-x2,-x3,-x4,-x5,-x6",
                            "--V", "((x1+x2+x3+x4+x5+x6)**12)**4", "--max-memory", "1"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("still expanding after 15 s")
    one_line_error(r.returncode, r.stderr)


_COMPLEX_LSA = '''
import numpy as np, torch
from theory.icl import gamma_n
L = np.diag([1.0, 2.0]); N = 10; d = 2
Gi = np.linalg.inv(gamma_n(L, N))
Wkq = np.zeros((d + 1, d + 1)); Wkq[:d, :d] = Gi
Wpv = np.zeros((d + 1, d + 1)); Wpv[d, d] = 1.0
def gamma(xs, ys, xq):
    h = (ys.unsqueeze(-1) * xs).mean(dim=-2)
    return ((xq @ torch.as_tensor(Gi)) * h).sum(-1)
gamma.Wkq = Wkq + 1j * np.random.default_rng(0).standard_normal((d + 1, d + 1))
gamma.Wpv = Wpv + 1j * np.random.default_rng(1).standard_normal((d + 1, d + 1))
'''


def test_complex_lsa_weights_exposed_by_a_model_are_not_judged_by_their_real_part(tmp_path):
    """``--weights`` refuses a complex W_PV ("is complex …; a real tensor is required"); the same weights exposed as
    attributes of a ``--model`` go through ``np.asarray(..., dtype=np.float64)`` in ``_exposed_lsa_weights``: the
    imaginary parts (of order 1 here) are dropped with a ComplexWarning printed from tverify's own source line, and the
    report says "ZFB theorem on the exposed LSA weights: ok: your weights match Γ_N^(−1)"."""
    (tmp_path / "lsa.py").write_text(_COMPLEX_LSA)
    r = tv_here(tmp_path, "check", "icl", "--model", "lsa.py:gamma", "--lambda", "1,2", "--N", "10", "--M", "10",
                "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    zfb = [line for line in r.stdout.splitlines() if line.startswith("ZFB theorem")]
    assert r.returncode == 2 or not any("ok: your weights match" in line for line in zfb), zfb


_NUMPY_UPDATES = '''
import numpy as np, torch
def upd(xi, patterns, beta):
    return (torch.softmax(beta * xi @ patterns.T, dim=-1) @ patterns).numpy()
def complex_(xi, patterns, beta):
    return upd(xi, patterns, beta) + 0j
def integer(xi, patterns, beta):
    return np.sign(upd(xi, patterns, beta)).astype(np.int64)
'''


@pytest.mark.parametrize("fn", ["complex_", "integer"])
def test_a_numpy_update_of_the_wrong_dtype_is_named_by_its_dtype(tmp_path, fn):
    """``_user_update.checked`` converts only a float ndarray to a tensor; any other ndarray then fails the
    ``isinstance(out, torch.Tensor)`` test of the shape check, whose line says the shapes differ while printing two
    equal shapes. A torch complex output gets the true line ("returned complex128 for float64 states; expected real
    floating point")."""
    (tmp_path / "u.py").write_text(_NUMPY_UPDATES)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "0.5",
                "--module", f"u.py:{fn}")
    line = one_line_error(r.returncode, r.stderr)
    assert "expected the same shape" not in line, line


def test_a_longdouble_numpy_update_is_judged_or_refused_in_one_line(tmp_path):
    """docs/own-model.md: the update "may return (S, d) (a torch tensor or a NumPy array) in any real floating dtype".
    ``np.longdouble`` is one (``check icl --model`` judges such predictions: ok); ``_user_update.checked`` passes every
    ``kind == "f"`` array to ``torch.from_numpy``, which raises TypeError for float128: the child's traceback and the
    command's are printed, exit 1."""
    (tmp_path / "u.py").write_text(_NUMPY_UPDATES + '''
def longdouble(xi, patterns, beta):
    return upd(xi, patterns, beta).astype(np.longdouble)
''')
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "0.5",
                "--module", "u.py:longdouble")
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr[-2000:]
    assert r.returncode in (0, 2), r.returncode


def _ls_model(xs, ys, xq):
    import torch

    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1)


@pytest.mark.parametrize("M_values, asked", [("12", [12]), (b"12", [12]), ([2.5], None), ([True, 3], None),
                                             ("3,5", [3, 5])])
def test_icl_model_prompt_lengths_are_taken_as_given_or_refused(M_values, asked):
    """``check_icl_model``'s ``M_values`` (passed on to the sanity check, "see there … the extra keyword arguments")
    goes through ``int(m) for m in M_values``: a string is split into its characters, bytes into their codes, floats
    truncated, booleans read as 1 — and the verdict ("ok … within tolerance at every M probed") is about lengths the
    caller never asked for. ``check_attention``'s ``seq_len`` refuses the same values ("seq_len must be "T1,T2,..." or
    a list of ints, got [1.5]")."""
    try:
        r = proofs_checks.check_icl_model(_ls_model, lambdas="1,2", N=10, mode="quick", M_values=M_values)
    except InputError as exc:
        assert "M_values" in str(exc) or "length" in str(exc), str(exc)
        return
    assert asked is not None and r.probe.get("M_values") == asked, r.probe.get("M_values")


@pytest.mark.parametrize("call", [
    lambda: proofs_checks.check_att_svm(str(EXAMPLES / "data.npz"), weight=str(EXAMPLES / "W.pt")),
    lambda: proofs_checks.check_lyapunov("-x, -y", "x**2 + y**2", region_text="1"),
    lambda: proofs_checks.run_claims("attn.softmax_simplex", moed="quick"),
], ids=["check_att_svm", "check_lyapunov", "run_claims"])
def test_a_misspelled_keyword_is_an_input_error_in_every_api_function(call):
    """``check_attention(causl=True)``, ``check_icl_model(lamdbas=…)`` and ``check_hopfield(bata=…)`` raise InputError
    "unknown keyword argument 'causl'; valid: …" (docs/api.md: bad input raises InputError; the fixture turns it into
    one line); these three raise Python's TypeError, which the ``tverify`` fixture shows as a traceback."""
    with pytest.raises(InputError, match="unknown keyword argument"):
        call()


_DROPOUT_HOPFIELD = '''
import torch
class Drop(torch.nn.Module):
    """The modern update with dropout on the association weights (as Hopfield layers have): exact in eval mode."""
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)
    def forward(self, xi, patterns, beta):
        return self.drop(torch.softmax(beta * xi @ patterns.T, dim=-1)) @ patterns
'''


def test_a_hopfield_module_update_is_judged_in_eval_mode(tmp_path):
    """``_update_fn`` instantiates a class and calls ``.double()`` but never ``.eval()``, where ``check attention``
    ("called once each … in eval mode") and ``check icl --model`` (``_instantiate``: ``obj.eval()``) judge a module in
    eval mode. The dropout of a freshly built module is active: update_matches_modern, one_step_within_theorem5_bound
    and energy_non_increasing fail, and the verdict says the update "is not the modern Hopfield update" without naming
    the training mode."""
    (tmp_path / "h.py").write_text(_DROPOUT_HOPFIELD)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "0.5",
                "--module", "h.py:Drop")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, [line for line in r.stdout.splitlines() if line.startswith("verdict")]


_MHA_SUBCLASS = '''
import torch
class SelfAttn(torch.nn.MultiheadAttention):
    """Self-attention as a subclass of nn.MultiheadAttention with its own forward(x): the documented obj(x) call."""
    def __init__(self):
        super().__init__(8, 2, batch_first=True)
    def forward(self, x):
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        return super().forward(x, x, x, attn_mask=mask, need_weights=False)[0]
'''


def test_a_multihead_attention_subclass_with_its_own_forward_is_called_as_obj_x(tmp_path):
    """docs/check-attention.md: the object "is called as obj(x)"; only "a bare nn.MultiheadAttention is called as
    self-attention, m(x, x, x, attn_mask=…)". ``attention_stages`` tests ``isinstance(f, nn.MultiheadAttention)``, so a
    subclass whose ``forward(self, x)`` is the self-attention is wrapped in SelfMHA and called with (x, x, x,
    attn_mask=…): "--module: SelfAttn raised TypeError: SelfAttn.forward() got an unexpected keyword argument
    'attn_mask'", exit 2 — a correct causal module, blamed for the check's own call."""
    (tmp_path / "m.py").write_text(_MHA_SUBCLASS)
    r = tv_here(tmp_path, "check", "attention", "--module", "m.py:SelfAttn", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr.strip().splitlines()[-1:]


def _hopfield_module_case():
    import numpy as np
    import torch

    class Upd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones((), dtype=torch.float32))

        def forward(self, xi, patterns, beta):
            return torch.softmax(self.scale * beta * xi @ patterns.T, dim=-1) @ patterns

    u = Upd().train()
    P = np.sign(np.random.default_rng(0).standard_normal((6, 8)))
    proofs_checks.check_hopfield(P, beta=0.5, module=u, isolate=False)
    return (u.scale.dtype, u.training), (torch.float32, True)


def _icl_module_case():
    import torch

    class IM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.0)

        def forward(self, xs, ys, xq):
            return _ls_model(xs, ys, xq)

    m = IM().train()
    proofs_checks.check_icl_model(m, lambdas="1,2", N=10, mode="quick", isolate=False)
    return (m.training,), (True,)


@pytest.mark.parametrize("case", [_hopfield_module_case, _icl_module_case], ids=["check_hopfield", "check_icl_model"])
def test_in_process_checks_leave_the_callers_module_as_it_was(case):
    """``check_attention(m, isolate=False)`` judges a deep copy and puts the train/eval flags back ("your object is not
    modified"). ``check_hopfield(..., module=m, isolate=False)`` calls ``m.double()`` (in place: the caller's float32
    parameters are float64 afterwards) and ``check_icl_model(m, isolate=False)`` calls ``m.eval()`` and ``m.to(device)``
    on the caller's object: a model checked in the middle of training keeps training with its dropout off, or in
    float64 against an optimizer built for float32."""
    after, before = case()
    assert after == before, (after, before)


_FLOAT32_HOPFIELD = '''
import torch, torch.nn as nn
class H32(nn.Module):
    """A float32 module (its parameter's dtype sets its computation, as x.to(self.weight.dtype) does), with a naive
    exp (no max subtraction): as given it returns NaN once β·xᵀξ > 88 (float32's exp overflows)."""
    def __init__(self):
        super().__init__()
        self.s = nn.Parameter(torch.ones((), dtype=torch.float32))
    def forward(self, xi, patterns, beta):
        xi, P = xi.to(self.s.dtype), patterns.to(self.s.dtype)
        e = torch.exp(beta * self.s * xi @ P.T)
        return (e / e.sum(-1, keepdim=True)) @ P
'''


def test_a_hopfield_module_is_judged_in_the_precision_it_computes_in(tmp_path):
    """``_update_fn`` casts an nn.Module update with ``.double()`` before any call (undocumented for hopfield; docs:
    "a float64 update that silently computes in float32 is a finding, never ok"). ``H32`` as given computes in
    float32 and overflows at β = 8 (``H32()(P[:4], P, 8.0)`` is NaN); the check sees only the float64 copy: exit 0,
    finite_updates ok, "precision_as_declared ok … computes in float64, the inputs' precision"."""
    (tmp_path / "h32.py").write_text(_FLOAT32_HOPFIELD)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "8",
                "--module", "h32.py:H32")
    assert "Traceback" not in r.stderr, r.stderr
    # F19, resolved as a documented limit (docs/own-model.md, "Hopfield patterns"): the float64 copy is judged, and
    # the first line says that the module's float32 parameters were cast (it said "computes in float64" alone)
    assert "its float32 parameters cast to float64, the copy judged" in r.stdout.splitlines()[0], r.stdout[:400]


def test_the_api_rewording_does_not_read_a_word_as_a_flags_value():
    """The command's line is "--compute-dtype goes with --module (the built-in update computes in float64)";
    ``_keyword_words`` turns a choice flag followed by a lowercase word into ``kw="word"``, so the API raises
    ``check_hopfield: compute_dtype="goes" with module …``, a value the caller never passed."""
    import numpy as np

    P = np.sign(np.random.default_rng(0).standard_normal((6, 8)))
    with pytest.raises(InputError) as ei:
        proofs_checks.check_hopfield(P, beta=0.5, compute_dtype="float32")
    assert '"goes"' not in str(ei.value), str(ei.value)
