"""The throwaway claims plugin ``hz`` of the hostile passes' derivation-cache reproducers (tests/test_hostile_round26a,
27a, 28a): ``hz.dbl`` states f(x) = 2x; its derivation's obligation ``C - 2`` reads ``C`` through ``READ_C()``, which
each reproducer defines (a file, a link, a variable, ...), so a derivation answered after its input changed reads as
holding."""

from __future__ import annotations

_HEAD = '''
import os
import numpy as np
import sympy as sp
from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, close, matches_derivation, numeric, register, scalar

ARGS = (scalar("x"),)


def form(x):
    return 2.0 * np.asarray(x, float)
'''

_TAIL = '''

def derive():
    C = READ_C()
    b = DerivationBuilder("doubling")
    (x,) = b.fact("args", (sp.Symbol("x", real=True),))
    d = b.define("Definition", 2 * x)
    b.obligation("constant is two", C - 2)
    return b.done(b.step("expand", sp.expand(d)))


@numeric("2x against x + x, float64")
def plain(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(50, 200, 400))
    return close(form(x), x + x, 4 * np.finfo(float).eps * np.abs(x) + 1e-300, "one rounding per draw")


CLAIM = register(Claim(id="hz.dbl", title="doubling", statement="f(x) = 2x", source=SOURCE, kind="identity",
                       form=form, derivation=derive, no_hypotheses="none",
                       checks=(matches_derivation(derive, ARGS), plain),
                       mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3.0 * np.asarray(x, float)),)))
'''


def hz_plugin(read_c: str, source: str) -> str:
    """The plugin's module source with ``read_c`` (the code defining ``READ_C``) and its ``source`` line."""
    return _HEAD + "\n" + read_c.strip("\n") + "\n" + _TAIL.replace("source=SOURCE", f"source={source!r}")


def install_hz(tmp_path, text: str):
    """``tmp_path/pz`` holding the package ``tverify_hz`` (its ``claims.py`` is ``text``) and its dist-info with the
    entry point ``hz``: a folder to put on ``PYTHONPATH``."""
    pz = tmp_path / "pz"
    (pz / "tverify_hz").mkdir(parents=True)
    (pz / "tverify_hz" / "__init__.py").write_text("")
    (pz / "tverify_hz" / "claims.py").write_text(text)
    dist = pz / "tverify_hz-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tverify-hz\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nhz = tverify_hz.claims\n")
    return pz


def run_hz(env: dict, cwd):
    """``tverify run hz.dbl --quick`` in a fresh process (the console script of this interpreter)."""
    import subprocess
    import sys
    from pathlib import Path

    tv = Path(sys.executable).with_name("tverify")
    return subprocess.run([str(tv), "run", "hz.dbl", "--quick", "--no-progress"], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def shadow_folders(tmp_path, files: dict, monkeypatch=None):
    """``(A, S)``: two new folders under ``tmp_path``, each of ``files`` (name: text) written in A, S empty (a module
    shadowing one of A's is written there later); with ``monkeypatch``, both put first on ``sys.path``, S before A."""
    a, s = tmp_path / "A", tmp_path / "S"
    a.mkdir()
    s.mkdir()
    for name, text in files.items():
        (a / name).write_text(text)
    if monkeypatch is not None:
        monkeypatch.syspath_prepend(str(a))
        monkeypatch.syspath_prepend(str(s))
    return a, s
