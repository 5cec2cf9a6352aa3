"""Hostile pass 10 (tester a): what it found, each test failing before its fix.

* F1) ``tverify --store A --store B run ...``: the top-level group's own value option given twice was taken
  silently (B kept, A dropped); pass 9's refusal checked every subcommand but skipped groups.
"""

from __future__ import annotations

import pytest

from tests.cli_helpers import invoke, one_line_error


@pytest.mark.parametrize("argv", [
    ("--store", "sA", "--store", "sB", "list"),
    ("--store=sA", "--store=sB", "show", "icl.gamma_n_global_min"),
])
def test_the_top_level_store_given_twice_is_refused(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(*argv)
    line = one_line_error(code, err)
    assert code == 2 and "option --store is given more than once" in line
    assert not (tmp_path / "sA").exists() and not (tmp_path / "sB").exists()


def test_the_top_level_store_once_still_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("--store", "sA", "list", "icl.gamma_n_global_min")
    assert code == 0, err
