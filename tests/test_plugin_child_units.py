"""Claims plugins behind a process boundary, without a ``tverify`` process around them (issue 46: the
end-to-end tests of ``tests/test_plugin_isolation.py`` and ``tests/test_hostile_round5.py`` paid a fresh
interpreter with torch, the registry and the checks' forkserver for each; these pin the same mechanisms in
the test's process, each with a real entry point and the real child): the import probe
(``load_plugins``: a plugin that dies, hangs or raises at import is one warning line and registers nothing;
the probe never imports the working folder's ``json.py``), a plugin check's child (``run_check``: an exit, a
hang, a ``KeyboardInterrupt`` or a long exception is that check's error of one line; a check that behaves
passes as here; a long one is never silent), a plugin derivation's child (``run_derivation``: an exit is its
error, a budget that rings at once a timeout), and the usage error naming a plugin that was skipped."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from proofs_checks.registry import registry


def _plugin(tmp_path, monkeypatch, name: str, body: str):
    """The module ``name`` (registering the claim ``<name>.c``, whose derivation runs ``body``) on the path,
    imported here as the child imports it; the claim object."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f'''
        import os
        import time
        from proofs_checks.plugin import Check, Claim, Mutant, exact, register

        def derive():
            {body}

        def ok(form, ctx):
            return exact(float(form - 3), "the count")

        register(Claim(id="{name}.c", title="t", statement="3", source="-", kind="identity", form=3.0,
                       no_symbolic="a count", derivation=derive, checks=(Check("count", "numeric", ok),),
                       mutants=(Mutant("four", "wrong constant", "4", 4.0),)))
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")
    registry._claims.pop(f"{name}.c", None)
    sys.modules.pop(name, None)
    importlib.import_module(name)
    return registry.get(f"{name}.c")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    made = []

    def make(name, body):
        made.append(name)
        return _plugin(tmp_path, monkeypatch, name, body)

    yield make
    for name in made:
        registry._claims.pop(f"{name}.c", None)
        sys.modules.pop(name, None)


def test_a_plugin_derivation_that_exits_is_its_error_of_one_line(plugin):
    from proofs_checks.claims import _plugins

    claim = plugin("zzderunit", "os._exit(0)")
    info = _plugins.run_derivation(("zzderunit", "zzderunit", "tverify.claims"), claim, True)
    msg = info["error"]
    assert msg and "\n" not in msg and len(msg) <= 300, msg
    assert "the derivation" in msg and "exit status 0" in msg and "Traceback" not in msg, msg
    assert not info["obligations"] and not info["steps"]


def test_a_plugin_derivation_under_a_budget_that_rings_at_once_is_a_timeout(plugin, monkeypatch):
    from proofs_checks.claims import _plugins

    claim = plugin("zzslowunit", "time.sleep(5)")
    monkeypatch.setenv("TVERIFY_DERIVATION_BUDGET", "0.000001")
    info = _plugins.run_derivation(("zzslowunit", "zzslowunit", "tverify.claims"), claim, True)
    assert info["timeout"] and not info["error"], info


def test_the_import_probe_never_imports_the_working_folders_json(tmp_path, monkeypatch):
    """The import probe's process (``_plugins.probe``) in a working folder holding a ``json.py``, ``os.py``,
    ``importlib.py`` and ``random.py``, with the working folder on this process's path: none of them runs, the
    plugin (which imports ``json`` and ``random`` itself) loads."""
    from importlib.metadata import EntryPoint

    from proofs_checks.claims import _plugins

    site, work, marks = tmp_path / "site", tmp_path / "work", tmp_path / "marks"
    for d in (site, work, marks):
        d.mkdir()
    (site / "zzprobejson.py").write_text("import json\nimport random\nX = json.dumps(random.random())\n")
    for n in ("json", "os", "importlib", "random"):
        (work / f"{n}.py").write_text(f"open({str(marks / n)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend("")  # the working folder, as `python -m proofs_checks` has it
    assert 0 < _plugins.probe(EntryPoint("zzprobejson", "zzprobejson", "tverify.claims")) < 60
    assert sorted(p.name for p in marks.iterdir()) == [], "executed in the probe"


def test_a_claim_asked_for_while_a_plugin_was_skipped_names_that_plugin(monkeypatch):
    """A pattern that selects nothing while a claims plugin failed to load: the usage error (one line, exit 2)
    says which plugin was skipped, as ``tverify run zzexit`` does with that plugin installed."""
    from proofs_checks import claims, cli_select as cli
    from proofs_checks.errors import UsageError

    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [("zzexit = zzexit", "ended the process with exit status 0")])
    with pytest.raises(UsageError) as e:
        cli._select(["zzexit"])
    msg = e.value.format_message()
    assert "\n" not in msg and "no claim matches 'zzexit'" in msg, msg
    assert "claims plugin 'zzexit' failed to load and was skipped" in msg, msg
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    with pytest.raises(UsageError) as e:
        cli._select(["zzexit"])
    assert "claims plugin" not in e.value.format_message()


# ------------------------------------------------------------------------------------------------
# plugins that die, hang or raise at import or in a check: the same behaviours as
# tests/test_plugin_isolation.py's broken_run, through load_plugins (the import probe) and run_check (the
# check's child) in this process, each with one real entry point


def _entry_points(monkeypatch, tmp_path, sources: dict):
    """Modules ``name`` (source ``sources[name]``) on the path, and ``importlib.metadata.entry_points`` naming
    exactly them as ``tverify.claims`` entry points (real ``EntryPoint`` objects: probed in a child)."""
    import importlib.metadata as md

    site = tmp_path / "site"
    site.mkdir()
    for name, src in sources.items():
        (site / f"{name}.py").write_text(src)
    monkeypatch.syspath_prepend(str(site))
    eps = [md.EntryPoint(name, name, "tverify.claims") for name in sources]
    monkeypatch.setattr(md, "entry_points", lambda group=None: eps if group in (None, "tverify.claims") else [])


def test_plugins_that_die_hang_or_raise_at_import_are_one_warning_line_each(tmp_path, monkeypatch, capsys):
    from proofs_checks import claims
    from tests.test_plugin_isolation import AT_IMPORT

    _entry_points(monkeypatch, tmp_path, AT_IMPORT)
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "2")  # as the end-to-end run: the others end well within it
    before = set(registry.ids())
    claims.load_plugins()
    err = capsys.readouterr().err
    assert "Traceback" not in err and 'File "' not in err, err[-2000:]
    for name, needle in (("zzexit", "ended the process with exit status 0"), ("zzhang", "did not finish within 2 s"),
                         ("zzkbd", "KeyboardInterrupt raised by the plugin itself"), ("zzbig", "RuntimeError: xxxx"),
                         ("zzsegv", "SIGSEGV")):
        lines = [ln for ln in err.splitlines() if f"claims plugin '{name}'" in ln]
        assert len(lines) == 1, err[-3000:]
        assert "failed to load and was skipped" in lines[0] and needle in lines[0], lines[0]
        assert len(lines[0]) <= 300, len(lines[0])
    assert sorted(n.split(" = ")[0] for n, _ in claims.PLUGIN_ERRORS) == sorted(AT_IMPORT)
    assert set(registry.ids()) == before and not any(n in sys.modules for n in AT_IMPORT)


@pytest.fixture
def zzchk(tmp_path, monkeypatch):
    """tests/test_plugin_isolation.py's plugin whose claims' checks misbehave, imported here (nothing runs at
    import) and found by the check's child through its entry point; its claims by id."""
    from tests.test_plugin_isolation import CHECKS

    (tmp_path / "zzchkunit.py").write_text(CHECKS.replace('"zzchk.', '"zzchkunit.'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    sys.modules.pop("zzchkunit", None)
    importlib.import_module("zzchkunit")
    ids = [i for i in registry.ids() if i.startswith("zzchkunit.")]
    yield {i.split(".")[1]: registry.get(i) for i in ids}
    for i in ids:
        registry._claims.pop(i, None)
    sys.modules.pop("zzchkunit", None)


def _check_in_child(claim):
    from proofs_checks.claims import _plugins
    from proofs_checks.context import RunContext

    return _plugins.run_check(("zzchkunit", "zzchkunit", "tverify.claims"), claim.checks[0], claim.form, claim,
                              RunContext(mode="quick"))


@pytest.mark.parametrize("which, needle", [
    ("exits", "its process ended with exit status 0"),
    ("loops", "not finished within $TVERIFY_PLUGIN_CHECK_TIMEOUT 1 s"),
    ("interrupts", "raised KeyboardInterrupt (not a Ctrl-C"),
    ("shouts", "ValueError: yyy"),
])
def test_a_plugin_check_that_dies_hangs_or_raises_is_an_error_of_one_line(zzchk, monkeypatch, which, needle):
    # the endless check stopped after 1 s (a busy loop); the others get time enough to end as they do, under load
    monkeypatch.setenv("TVERIFY_PLUGIN_CHECK_TIMEOUT", "1" if which == "loops" else "120")
    out = _check_in_child(zzchk[which])
    assert out.status == "error", out
    msg = out.error_message
    assert "\n" not in msg and len(msg) <= 300 and needle in msg, msg
    assert "Traceback" not in msg and 'File "' not in msg, msg


def test_a_plugin_check_that_behaves_is_verified_from_its_child_and_a_long_one_is_never_silent(zzchk, monkeypatch,
                                                                                              capfd):
    from proofs_checks.runner import run_check_here
    from proofs_checks.context import RunContext

    ok = zzchk["ok"]
    here = run_check_here(ok.checks[0], ok.form, ok, RunContext(mode="quick"))
    there = _check_in_child(ok)
    assert there.status == here.status == "passed", (there, here)
    # a check past the 2 s of silence says it is still running (a sleeping check: the lines are this process's)
    (Path(sys.modules["zzchkunit"].__file__)).write_text(
        Path(sys.modules["zzchkunit"].__file__).read_text().replace("    while True:\n        pass", "    time.sleep(60)")
        .replace("import os\n", "import os\nimport time\n", 1))
    monkeypatch.setenv("TVERIFY_PLUGIN_CHECK_TIMEOUT", "3")
    from proofs_checks import runner

    monkeypatch.setattr(runner, "PROGRESS_LINES", True)  # a command's default (an earlier --no-progress here set it)
    capfd.readouterr()
    out = _check_in_child(zzchk["loops"])
    err = capfd.readouterr().err
    assert out.status == "error" and "within $TVERIFY_PLUGIN_CHECK_TIMEOUT 3 s" in out.error_message, out
    assert [ln for ln in err.splitlines() if "zzchkunit.loops:count: still running" in ln], err[-2000:]


def test_a_claim_whose_check_crashed_is_error_one_line_and_exit_1():
    """What the run makes of a check's error outcome (as a plugin check's child returns it): the claim is
    ``error`` with "check NAME crashed: ..." in one line, and ``tverify run`` exits 1 (never 0) for it."""
    from proofs_checks.plugin import Check, Claim, Mutant, check_claim
    from proofs_checks.runner import exit_code

    def shouts(form, ctx):
        raise ValueError("y" * 50)  # a plugin check's child cuts it to one line of ≤ 300 (the test above)

    c = Claim(id="zzcrash.c", title="t", statement="3", source="-", kind="identity", form=3.0, no_symbolic="a count",
              checks=(Check("count", "numeric", shouts),), mutants=(Mutant("four", "wrong constant", "4", 4.0),))
    r = check_claim(c)
    assert r.status == "error" and "check count crashed" in r.message and "ValueError: yyy" in r.message, r.message
    assert exit_code(["verified", "error"]) == 1 and exit_code(["verified"]) == 0


def test_a_cached_catalogue_with_a_skipped_plugin_says_so_and_names_refresh(tmp_path, monkeypatch, capsys):
    """A catalogue cached while a plugin failed to load (a time limit, say): the cache hit still warns, one line
    naming the plugin and ``--refresh``; a failure of this process is said by the probe instead (no repeat)."""
    from proofs_checks import claims, cli_select
    from proofs_checks.output import catalogue

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    doc = {"claims": [{"id": "attn.convex_combination", "group": "attn"}],
           "plugin_errors": [["zzslowimport = zzslowimport", "did not finish within 1 s"]]}
    monkeypatch.setattr(catalogue, "load_fresh", lambda cache_dir: (doc, tmp_path / "cache" / "plugins-x.json"))
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
    entries, _, _, _ = cli_select._catalogue(cli_select._store(None))
    assert [e["id"] for e in entries] == ["attn.convex_combination"]
    warn = [ln for ln in capsys.readouterr().err.splitlines() if "zzslowimport" in ln]
    assert len(warn) == 1 and "--refresh" in warn[0] and "skipped" in warn[0] and len(warn[0]) <= 320, warn
    monkeypatch.setattr(claims, "PLUGIN_ERRORS", [("zzslowimport = zzslowimport", "did not finish within 1 s")])
    cli_select._catalogue(cli_select._store(None))
    assert "zzslowimport" not in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forkserver child, as on Linux")
def test_the_checks_child_never_imports_standard_names_from_the_working_or_the_modules_folder(tmp_path, monkeypatch):
    """``check attention --module mod/attn.py:model --report`` from a working folder holding a ``random.py``,
    ``json.py``, ``html.py``, ``shlex.py``, ``xml.py``, ``packaging.py`` and ``numerics/`` (and the same beside
    the module), the working folder first on this process's path as ``python -m proofs_checks`` has it: the
    check's child (its path from :func:`proofs_checks.guards.child_sys_path`) runs none of them. What this
    process imports is imported before (the real command's own process: test_hostile_round5's end-to-end test)."""
    import html  # noqa: F401 - imported here first: only the child's imports are under test
    import json  # noqa: F401
    import random  # noqa: F401
    import shlex  # noqa: F401
    import xml  # noqa: F401

    import numerics  # noqa: F401
    import packaging  # noqa: F401
    from tests.cli_helpers import invoke
    from tests.test_hostile_round5 import ATTN, _plant

    marks, work = tmp_path / "marks", tmp_path / "work"
    marks.mkdir()
    _plant(work, marks)
    _plant(work / "mod", marks)
    (work / "mod" / "attn.py").write_text(ATTN + "\nmodel = Attn()\n")
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend("")
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    code, out, err = invoke("check", "attention", "--module", "mod/attn.py:model", "--quick", "--no-progress",
                            "--report", str(tmp_path / "report"))
    assert code == 0 and "Traceback" not in out + err, (code, out[-2000:], err[-2000:])
    assert sorted(p.name for p in marks.iterdir()) == [], "executed in the child"
