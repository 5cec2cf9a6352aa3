"""Issue 44, the eighth (independent) hostile pass: each finding fixed here reproduced as a test.

* N2: SIGTERM (``kill PID``, a CI job cancelled) ended ``tverify`` at once, without running any
  ``finally``: a report being written stayed as a hidden partial folder ``.DIR.tverify-new-*`` beside
  ``--out``, and ``check … --report`` left ``pymp-*``/``tverify-figures-*`` folders in ``$TMPDIR``. Now
  SIGTERM raises :class:`proofs_checks.console.Terminated` in tverify's own process: the same cleanup
  as Ctrl-C, one line, exit 143.
* N5/N6: ``check lyapunov`` with thousands of unary signs (under the 4000-character limit) ended in a
  ``RecursionError`` traceback from Python's own parser; 1900 nested parentheses said "cannot parse …
  (allowed: numbers, the variables, …)" while echoing the 3800 characters: neither said the cause.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

# --- N2: SIGTERM cleans up as Ctrl-C does -------------------------------------------------------

_TERM_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    import proofs_checks.cli as cli
    from proofs_checks.output.report import build_output

    out = Path(sys.argv[1])

    def fill(tmp):
        (tmp / "index.html").write_text("half a report")
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))   # as `kill PID` while the folder is being filled
        time.sleep(30)                           # never reached: the signal ends the fill

    def fake_main(argv):
        build_output(out, fill, {"command": "test"})

    cli._main = fake_main
    cli.main([])
""")


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_sigterm_while_a_report_is_written_leaves_no_partial_folder(tmp_path, name):
    out = tmp_path / "rep"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", _TERM_SCRIPT, str(out), name], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 128 + getattr(signal, name), r.stderr
    assert r.stderr.strip().splitlines() == [
        f"tverify: terminated ({name}); nothing was written after it (earlier outputs are as they were)"]
    left = [p.name for p in tmp_path.iterdir() if p.name != "cache"]
    assert left == [], left  # neither `rep` nor a `.rep.tverify-new-*` sibling


def test_sigterm_handler_is_only_this_process_and_only_once():
    script = textwrap.dedent("""
        import os, signal, sys
        from proofs_checks.console import Terminated, terminate_cleanly
        terminate_cleanly()
        pid = os.fork()
        if pid == 0:                      # a forked process gets the default action back: it dies of it
            os.kill(os.getpid(), signal.SIGTERM)
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except Terminated:
            pass
        else:
            sys.exit("no Terminated raised")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # a second SIGTERM ends it at once
        try:
            os.kill(os.getpid(), signal.SIGHUP)                         # a closed terminal: the same
        except Terminated as exc:
            assert exc.name == "SIGHUP", exc.name
        else:
            sys.exit("no Terminated raised for SIGHUP")
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_a_caller_s_own_sigterm_handler_is_kept():
    script = textwrap.dedent("""
        import signal
        from proofs_checks.console import terminate_cleanly
        mine = lambda s, f: None
        signal.signal(signal.SIGTERM, mine)
        terminate_cleanly()
        print(signal.getsignal(signal.SIGTERM) is mine)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stderr


# --- N5/N6: deep expressions in check lyapunov -------------------------------------------------

@pytest.mark.parametrize("f, v, words", [
    ("-" * 3000 + "x, -y", "x**2 + y**2", "nested deeper than Python's parser allows"),
    ("-x, -y", "+" * 3500 + "x**2 + y**2", "nested deeper than Python's parser allows"),
    ("-" + "(" * 1900 + "x" + ")" * 1900 + ", -y", "x**2 + y**2", "too many nested parentheses"),
], ids=["3000-minuses-in-f", "3500-pluses-in-V", "1900-parentheses"])
def test_lyapunov_deep_nesting_is_one_line_saying_so(f, v, words):
    from theory.lyapunov import parse_system
    from theory.validation import InputError

    with pytest.raises(InputError) as e:
        parse_system(f, v)
    msg = str(e.value)
    assert words in msg and len(msg) < 300 and "\n" not in msg, msg


# --- N4: the claim API given something that is not a Claim -------------------------------------

@pytest.mark.parametrize("bad", [None, "attn.softmax_simplex", 3])
@pytest.mark.parametrize("fn", ["check_claim", "run_mutants"])
def test_claim_api_refuses_a_non_claim_with_one_line(fn, bad):
    import proofs_checks.plugin as plugin
    from theory.validation import InputError

    with pytest.raises(InputError) as e:
        getattr(plugin, fn)(bad)
    msg = str(e.value)
    assert msg.startswith(f"{fn}: claim must be a Claim object, got ") and "\n" not in msg
    assert ("get_claim" in msg) == isinstance(bad, str)


# --- N4/N8: the pytest fixture -------------------------------------------------------------------

def _fixture():
    from proofs_checks.pytest_plugin import TverifyFixture

    return TverifyFixture()


@pytest.mark.parametrize("bad, words", [(None, "claim must be a Claim object"), ("nosuch.claim", "no claim 'nosuch.claim'")])
def test_fixture_assert_claim_bad_input_fails_with_one_line(bad, words):
    with pytest.raises(pytest.fail.Exception) as e:
        _fixture().assert_claim(bad)
    assert str(e.value).startswith("tverify.assert_claim: bad input: ") and words in str(e.value)


@pytest.mark.parametrize("code, outcome", [(0, "ok"), (3, "inconclusive"), (1, "mismatch")])
def test_fixture_reads_a_claims_run_by_its_exit_code(code, outcome):
    from proofs_checks.pytest_plugin import _run_outcome

    class Run:
        exit_code = code
        ok = code == 0

    assert _run_outcome(Run()) == outcome


def test_fixture_an_undecided_run_is_inconclusive_not_mismatch(monkeypatch):
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")  # derive now (not from docs/catalogue.json) ...
    monkeypatch.setenv("TVERIFY_DERIVATION_BUDGET", "0.000001")  # ... and stop SymPy at once: undecided, exit 3
    with pytest.raises(pytest.fail.Exception) as e:
        _fixture().run_claims("attn.softmax_simplex", mode="quick")
    assert str(e.value).startswith("tverify.run_claims: expected ok, got inconclusive")


# --- N10: an allocation that fails is not a damaged file ---------------------------------------

def test_npy_too_large_to_allocate_is_not_called_damaged(tmp_path, monkeypatch):
    import numpy as np

    from proofs_checks.parsing import load_npy
    from theory.validation import InputError

    p = tmp_path / "P.npy"
    np.save(p, np.eye(3))

    def no_memory(*a, **k):
        raise MemoryError("Unable to allocate 149. GiB for an array with shape (20000000000,) and data type float64")

    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(InputError) as e:
        load_npy(p, "--patterns", max_memory=1000)
    msg = str(e.value)
    assert "damaged" not in msg.replace("not damaged", "") and "could not allocate" in msg and "(3, 3)" in msg, msg


# --- N11/N12: what counts as this project's own claim ---------------------------------------------

def _notebook_claim(module: str | None = None):
    import numpy as np

    from proofs_checks.plugin import Check, Claim, Mutant, compare

    def vacuous(form, ctx):
        x = ctx.rng().standard_normal(50)
        return compare(float(np.max(np.abs(form(x) - 2 * x))), 1e300, "huge tolerance")

    if module:
        vacuous.__module__ = module  # a function saying it is one of the built-in claim modules'
    return Claim(id="attn.softmax_simplex", title="3x = 2x", statement="3x = 2x", source="-", kind="identity",
                 form=lambda x: 3 * x, no_symbolic="none", checks=(Check("vacuous", "numeric", vacuous),),
                 mutants=(Mutant("huge", "wrong constant", "1e305 x", lambda x: 1e305 * x),))


def test_is_builtin_is_the_registered_object_not_an_id_or_a_module_name():
    from proofs_checks.claims import is_builtin
    from proofs_checks.registry import get_claim

    real = get_claim("attn.softmax_simplex")  # loads the built-in claims
    assert is_builtin(real)
    assert not is_builtin(_notebook_claim("proofs_checks.claims.attention"))  # same id, disguised function
    assert not is_builtin(None) and not is_builtin("attn.softmax_simplex")


def test_markdown_into_the_checkout_writes_only_this_project_s_claims(tmp_path, monkeypatch, capsys):
    from proofs_checks import cli
    from proofs_checks.output import catalogue
    from proofs_checks.registry import select

    from proofs_checks.claims import is_builtin

    builtin = [c for c in select([]) if is_builtin(c)]  # whatever plugins this machine has installed
    import dataclasses

    plugin = dataclasses.replace(_notebook_claim(), id="zz9plugin.three")  # unregistered: an installed plugin's
    seen = {}

    def fake_build(claims, *, with_derivations, fingerprint, progress):
        seen.update(ids=[c.id for c in claims], fp=fingerprint)
        return {"schema": catalogue.SCHEMA, "claims": [], "fingerprint": fingerprint,
                "depends_on": {"/elsewhere/plugin_helper.py": "0" * 64}}

    def fake_write(doc, out, names=None):
        seen["doc"] = doc
        return []

    monkeypatch.setattr(catalogue, "repo_docs_dir", lambda: tmp_path)
    monkeypatch.setattr(catalogue, "build", fake_build)
    monkeypatch.setattr(catalogue, "write_docs", fake_write)
    monkeypatch.setattr(catalogue, "save_cache", lambda doc, d: None)
    monkeypatch.setattr("proofs_checks.cli_select._select", lambda patterns: [*builtin, plugin])

    class Store:
        cache_dir = tmp_path / "cache"

    cli._write_catalogue(None, Store())
    assert "zz9plugin.three" not in seen["ids"] and len(seen["ids"]) == len(builtin)
    assert seen["fp"] == catalogue.source_fingerprint(plugins=False)
    assert "depends_on" not in seen["doc"]
    assert "zz9plugin.three" in capsys.readouterr().err
    cli._write_catalogue(str(tmp_path / "mine"), Store())  # a folder of the user's: every claim
    assert "zz9plugin.three" in seen["ids"]


# --- N13: a store that is a link to nothing ---------------------------------------------------

def test_store_link_to_nothing_says_so(tmp_path):
    from proofs_checks.store import Store, check_store_writable

    link = tmp_path / "store"
    link.symlink_to(tmp_path / "missing" / "x")
    msg = check_store_writable(Store(link, "TVERIFY_STORE"))
    assert "is a symbolic link to" in msg and "does not exist" in msg and "File exists" not in msg, msg
    assert not (tmp_path / "missing").exists()


# --- N3 (part): the derivation cache switch reads as the plugins' reader does -----------------

@pytest.mark.parametrize("value", ["OFF", "False", "No", " 0 "])
def test_derivation_cache_switch_is_case_insensitive(value, monkeypatch):
    from proofs_checks import fingerprint

    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", value)
    assert fingerprint.cached_derivation("attn.softmax_simplex") is None


# --- N14: a results store inside the report folder ----------------------------------------------

@pytest.mark.parametrize("where", ["store", "."])
def test_report_refuses_a_store_inside_out_before_the_run(tmp_path, where):
    from click.testing import CliRunner

    from proofs_checks.cli import cli

    out = tmp_path / "rep"
    r = CliRunner().invoke(cli, ["report", "attn.softmax_simplex", "--quick", "--no-mutants", "--no-progress",
                                 "--out", str(out), "--store", str(out / where)])
    assert r.exit_code == 2, r.output
    assert "inside --out" in r.output and "keep the store elsewhere" in r.output
    assert not out.exists()  # nothing ran, nothing was written


def test_survey_refuses_an_install_cache_inside_out(tmp_path):
    from click.testing import CliRunner

    from proofs_checks.cli import cli

    out = tmp_path / "sv"
    r = CliRunner().invoke(cli, ["survey", "--no-install", "--quick", "--no-progress", "--out", str(out),
                                 "--cache-dir", str(out / "cache"), "torch-mha"])
    assert r.exit_code == 2, r.output
    assert "inside --out" in r.output and not out.exists()


# --- N1: a standard module this Python lacks (winreg on Linux), beside the user's module ----------

def test_a_missing_standard_module_beside_the_users_module_never_runs(tmp_path):
    """matplotlib → mimetypes tries ``import winreg`` (absent on Linux): with the module's folder appended to
    ``sys.path`` a ``winreg.py`` there ran (and the check ended in a traceback) under ``--report``."""
    import shutil

    from tests.cli_helpers import invoke

    if "winreg" in sys.builtin_module_names or sys.platform == "win32":
        pytest.skip("winreg is a real module here")
    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    marker = tmp_path / "marker"
    (tmp_path / "winreg.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path / 'own_attention.py'}:CausalSelfAttention",
                            "--causal", "--quick", "--no-progress", "--report", str(tmp_path / "rep"))
    assert not marker.exists()
    assert code == 0 and "Traceback" not in out + err, out + err
    assert (tmp_path / "rep").is_dir()


# --- N12: a plugin's check saying it is a built-in claim module's function -------------------------

def test_a_check_disguised_as_a_builtin_modules_function_gets_the_power_rule():
    """A plugin check function with ``__module__ = "proofs_checks.claims.attention"`` made the runner treat
    its claim as built-in, so the power rule was skipped and ``3x = 2x`` (compared within 1e300) was verified."""
    import dataclasses

    from proofs_checks.context import RunContext
    from proofs_checks.runner import run_claim

    claim = dataclasses.replace(_notebook_claim("proofs_checks.claims.attention"), id="zz8disguised.three")
    res = run_claim(claim, RunContext(mode="quick"))
    assert res.status == "error", (res.status, res.message)
    assert "multiplied by" in res.message or "cannot tell" in res.message, res.message


@pytest.mark.parametrize("value", ["maybe", "2", "of"])
def test_a_bad_derivation_cache_switch_is_one_line_exit_2(value, monkeypatch):
    """``TVERIFY_DERIVATION_CACHE=maybe`` was read as on, silently (N3): now one line, exit 2, before anything runs."""
    from tests.cli_helpers import invoke, one_line_error

    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", value)
    line = one_line_error(*invoke("run", "attn.softmax_simplex", "--quick", "--no-progress")[::2])
    assert "TVERIFY_DERIVATION_CACHE must be" in line and repr(value) in line, line


# --- N9: a 5000-character title -------------------------------------------------------------------

@pytest.mark.parametrize("title", ["t" * 5000, "two\nlines"])
def test_a_title_longer_than_a_line_is_refused_at_registration(title):
    import dataclasses

    from proofs_checks.registry import RegistryError

    claim = dataclasses.replace(_notebook_claim(), id="zz8title.long", title=title)
    with pytest.raises(RegistryError, match="title must be one line of at most 300 characters"):
        claim.validate()


# --- N7: a module replacing torch functions decides the comparisons computed beside it ------------

SABOTEUR = '''
import torch
from own_attention import CausalSelfAttention


class Leak(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x) + 1e-2 * torch.roll(x, -1, dims=1)  # x_{t+1} leaks into position t


_abs, _tabs = torch.Tensor.abs, torch.abs
torch.Tensor.abs = lambda t, *a, **k: _abs(t) * 0
torch.abs = lambda t, *a, **k: _tabs(t, *a, **k) * 0
'''


@pytest.mark.parametrize("when", ["import", "call"])
def test_a_module_replacing_torch_functions_is_refused_not_judged(tmp_path, when):
    import shutil

    from tests.cli_helpers import invoke, one_line_error

    shutil.copy("tests/data/own_attention.py", tmp_path / "own_attention.py")
    src = SABOTEUR
    if when == "call":  # the replacement made in the first forward, after the module was imported
        src = src.replace("_abs, _tabs = torch.Tensor.abs, torch.abs\ntorch.Tensor.abs", "def _patch():\n"
                          "    _abs, _tabs = torch.Tensor.abs, torch.abs\n    torch.Tensor.abs").replace(
            "\ntorch.abs = lambda", "\n    torch.abs = lambda").replace(
            "        return super().forward(x) +", "        _patch()\n        return super().forward(x) +")
    (tmp_path / "sabot.py").write_text(src)
    line = one_line_error(*invoke("check", "attention", "--module", f"{tmp_path / 'sabot.py'}:Leak", "--causal",
                                  "--quick", "--no-progress")[::2])
    assert "the code replaced torch.abs" in line and "nothing was checked" in line, line


@pytest.mark.parametrize("command", [["list"], ["show", "attn.convex_combination"]])
def test_a_bad_derivation_cache_switch_is_refused_by_list_and_show_from_the_cached_catalogue(command, monkeypatch):
    """``list``/``show`` answer from the cached catalogue and load no claim module: the switch is read there too."""
    from tests.cli_helpers import invoke, one_line_error

    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "maybe")
    assert "TVERIFY_DERIVATION_CACHE must be" in one_line_error(*invoke(*command)[::2])


def test_an_epsilon_below_float64s_range_is_printed_as_itself_not_zero():
    """``--eps 1e-400`` printed "ε = 0 (exactly 1/1000000000…, 403 characters)": float() of it underflows
    (hostile pass 5, M1)."""
    import sympy as sp

    from proofs_checks.sanity.lyapunov import _short_number

    assert _short_number(sp.Rational("1e-400")).startswith("1e-400 (exactly 1/1000000000…, 403 characters)")
    assert _short_number(sp.Rational("1e-300")).startswith("1e-300 (")
    assert _short_number(sp.Rational(1, 1000)) == "1/1000"


def test_report_markdown_never_carries_a_plugins_tag():
    """A plugin's ``<script>`` title went raw into report.md (a Markdown viewer renders tags); HTML escaped it."""
    from proofs_checks.output.report import render_markdown

    doc = {"created": "now", "command": "tverify report", "mode": "quick", "seed": 0, "device": "cpu",
           "summary": {"verified": 1}, "results": [{"id": "zz.x", "kind": "identity", "status": "verified",
                                                     "title": "<script>alert(1)</script>", "source": "<b>s</b>",
                                                     "message": "<img src=x>", "seconds": 0.1}]}
    md = render_markdown(doc)
    assert "<script>" not in md and "<b>" not in md and "<img" not in md
    assert "&lt;script>alert(1)&lt;/script>" in md


def test_a_cluster_workers_claim_is_this_projects_own():
    """A Dask worker imported only the claim's module: the claims it registered were not known as built-in
    (``registry.is_builtin``), so the plugins' power rule ran on built-in claims (an hour on lyap.* in
    `make report`'s cluster) and their derivations were not read from the catalogue."""
    code = ("from proofs_checks.distributed.claim_tasks import _claim; from proofs_checks.registry import is_builtin; "
            "print(is_builtin(_claim('proofs_checks.claims.lyapunov', 'lyap.backward_construction')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})  # a fresh process, as a worker is
    assert out.stdout.strip() == "True", out.stderr[-2000:]
