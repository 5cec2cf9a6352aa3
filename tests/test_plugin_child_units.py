"""A plugin claim's derivation in its own process (``proofs_checks.claims._plugins.run_derivation``),
without a ``tverify`` process around it (issue 46: the end-to-end tests of ``tests/test_plugin_isolation.py``
and ``tests/test_hostile_round5.py`` paid a fresh interpreter with torch for each; these pin the same
mechanism in the test's process): a derivation that ends its process is that derivation's error of one
line naming the exit status; a derivation budget that rings at once is a timeout (undecided), never an
error or a crash."""

from __future__ import annotations

import importlib
import sys
import textwrap

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
    from proofs_checks import claims, cli
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
