"""Hostile pass 18a's findings as strict xfails during the pass; fixed after it, plain tests."""

import sys
from importlib.metadata import EntryPoint

import pytest


def test_plugin_probe_imports_the_users_examples_package_not_tverifys(tmp_path, monkeypatch):
    from proofs_checks.claims._plugins import probe

    proj = tmp_path / "proj"
    (proj / "examples").mkdir(parents=True)
    (proj / "examples" / "my_attn.py").write_text("WHO = 'user'\n")
    (proj / "tverify_hx18").mkdir()
    (proj / "tverify_hx18" / "__init__.py").write_text("")
    seen = tmp_path / "seen.txt"
    (proj / "tverify_hx18" / "claims.py").write_text(
        f"import examples.my_attn as e\nopen({str(seen)!r}, 'w').write(e.__file__)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "240")  # the wrong module imports torch: slow on a loaded machine
    monkeypatch.setattr(sys, "path", [str(proj), *sys.path])
    probe(EntryPoint(name="hx18", value="tverify_hx18.claims", group="tverify.claims"))
    assert seen.read_text() == str(proj / "examples" / "my_attn.py")
