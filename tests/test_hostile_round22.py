"""Hostile pass 16 (issue 44): the lead's tests of the fixes of the testers' findings."""

from __future__ import annotations

import sys


def test_the_system_folders_are_found_without_a_callers_sysconfig(tmp_path, monkeypatch):
    """16a F1: ``sysconfig`` is not loaded at start in every environment, and the fixture's first use imported it with
    the test folder first on ``sys.path``: a ``sysconfig.py`` there ran. The folders are now computed with ``sys.path``
    reduced to the standard library's own folders."""
    from proofs_checks import syspath

    marker = tmp_path / "MARKER"
    for name in ("sysconfig", "site"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setattr(syspath, "_FOLDERS", None)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("sysconfig", "site"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    system, own = syspath._system_folders()
    assert not marker.exists()
    assert own and any(p.endswith("site-packages") for p in system), system
