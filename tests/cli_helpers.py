"""Running ``tverify`` in-process from tests: exit code, stdout and stderr, and the one-line
usage-error contract."""

from __future__ import annotations

import contextlib
import io
import subprocess
import textwrap
from pathlib import Path

from proofs_checks.cli import main

__all__ = ["MEMORY_CGROUP", "MHA_ATTN", "SEEDED_INIT", "causal_attn", "invoke", "invoke_in", "mismatch_here", "one_line_error", "tv_here", "without_volatile"]

def _memory_cgroup() -> bool:
    import sys

    from proofs_checks.sanity._cgroup import MemoryCgroup

    g = MemoryCgroup.make() if sys.platform.startswith("linux") else None
    if g is not None:
        g.close()
    return g is not None


#: whether the checks' children get a memory cgroup here (docs/own-model.md, "The memory cgroup"): what only the
#: kernel's count of the group sees is a documented limit elsewhere
MEMORY_CGROUP = _memory_cgroup()

#: source text of the plain attention layer that the hostile user modules the tests write subclass
MHA_ATTN = """
class Attn(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(dim, 2, batch_first=True)
    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]
"""

#: the ``__init__`` of the attention modules hostile tests write (``D``, ``H`` defined before it; q/k/v/o projections
#: seeded), as it stands inside a class of a dedented module text: replace a line ``    @SEEDED_INIT@`` by it
SEEDED_INIT = """def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.q_proj = nn.Linear(D, D, bias=False); self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False); self.o_proj = nn.Linear(D, D, bias=False)
        for l in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            with torch.no_grad(): l.weight.copy_(torch.randn(D, D, generator=g) / 4)
        self.num_heads = H; self.embed_dim = D"""


def causal_attn(D: int, H: int, rest: str = "", *, causal_unless: str = "") -> str:
    """The text of a user module: ``D``, ``H``, a seeded causal attention ``Attn`` (``scores(x) -> (s, v)``, the
    scaled logits per head; ``finish(s, v, B, T)``, softmax, values and output projection), then ``rest`` (dedented
    text: the subclasses a test checks). ``causal_unless``: a condition on ``x``/``T`` under which ``Attn`` itself
    leaves out the causal mask (a wrong base)."""
    fill = 's = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))'
    if causal_unless:
        fill = f"if not ({causal_unless}):\n            {fill}"
    return f"""import math, torch, torch.nn as nn
D, H = {D}, {H}
class Attn(nn.Module):
    {SEEDED_INIT}
    def scores(self, x):
        B, T, _ = x.shape; dk = D // H
        sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
        q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
        return q @ k.transpose(-1, -2) / math.sqrt(dk), v
    def finish(self, s, v, B, T):
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    def forward(self, x):
        B, T, _ = x.shape
        s, v = self.scores(x)
        {fill}
        return self.finish(s, v, B, T)
""" + textwrap.dedent(rest)


def invoke(*argv: str) -> tuple[int, str, str]:
    """``tverify ARGV...`` in this process: ``(exit code, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def invoke_in(folder: Path, monkeypatch, *argv: str) -> subprocess.CompletedProcess:
    """``tverify ARGV...`` in this process with ``folder`` as the working folder (``monkeypatch.chdir``), as a
    ``CompletedProcess`` (``returncode``, ``stdout``, ``stderr``): for a test whose subject is what a command says or
    writes, not the console process itself. The user's code still runs in the check's own isolated child."""
    monkeypatch.chdir(folder)
    code, out, err = invoke(*argv)
    return subprocess.CompletedProcess(["tverify", *argv], code, out, err)


def tv_here(folder: Path, *argv: str, env: dict[str, str] | None = None, **_ignored) -> subprocess.CompletedProcess:
    """``tverify ARGV...`` in this process, in ``folder``, with a store, home and cache of the test's own
    (``folder/store``, ``folder/home``, ``folder/cache``) and ``env`` besides: for a test whose subject is a command's
    verdict or message, not the console process (issue 46: a fresh interpreter per test cost ≈ 2 CPU s). The user's
    code still runs in the check's own isolated child, started by the fork server this process keeps."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TVERIFY_STORE", str(folder / "store"))
        mp.setenv("HOME", str(folder / "home"))
        mp.setenv("XDG_CACHE_HOME", str(folder / "cache"))
        for k, v in (env or {}).items():
            mp.setenv(k, v)
        return invoke_in(folder, mp, *argv)


def mismatch_here(folder: Path, text: str, cls: str, *flags: str, file: str = "att.py") -> subprocess.CompletedProcess:
    """``check attention --module FILE:CLS --causal --quick FLAGS`` on ``text`` written to ``folder/FILE``, in this
    process: asserted a mismatch (exit 1) without a traceback; the result, for what a test asserts beyond."""
    (folder / file).write_text(text)
    r = tv_here(folder, "check", "attention", "--module", f"{file}:{cls}", "--causal", "--quick", *flags)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])
    return r

def one_line_error(code: int, err: str) -> str:
    """Assert a usage error: exit 2, no traceback, one ``tverify: error:`` line; return it."""
    assert code == 2 and "Traceback" not in err, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tverify: error:"), err
    return lines[0]


def without_volatile(d, volatile: set[str]):
    """The JSON document ``d`` without the keys in ``volatile`` and the wall times (keys ending in
    ``seconds``), at every depth: what two runs of the same claims must agree on."""
    if isinstance(d, dict):
        return {k: without_volatile(v, volatile) for k, v in d.items() if k not in volatile and not k.endswith("seconds")}
    if isinstance(d, list):
        return [without_volatile(x, volatile) for x in d]
    return d


def during_the_run(monkeypatch, action) -> None:
    """``action()`` runs once the command's claims have run and before it writes its outputs (the user making or
    editing something at an output path meanwhile); the store and caches are the test's own."""
    from proofs_checks import cli_select

    real = cli_select._run_selected

    def run_then(*a, **k):
        res = real(*a, **k)
        action()
        return res

    monkeypatch.setattr("proofs_checks.cli_select._run_selected", run_then)


def icl_mismatch_here(folder: Path, text: str, name: str) -> subprocess.CompletedProcess:
    """``check icl --model icl.py:NAME --lambda 1,2 --N 10 --M 10`` on ``text`` written to ``folder/icl.py``, in this
    process: asserted a mismatch (exit 1) without a traceback; the result, for what a test asserts beyond."""
    (folder / "icl.py").write_text(text)
    r = tv_here(folder, "check", "icl", "--model", f"icl.py:{name}", "--lambda", "1,2", "--N", "10", "--M", "10")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:])
    return r
