"""Hostile pass 15a: findings pinned as strict xfails during the pass (which fixes nothing); fixed after it, plain
tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.integration(reason="a pytest session of its own (≈ 5 s); the tester's reproducer",
                         pinned_by=("tests/test_hostile_round20.py::test_the_fixture_runs_tverify_with_the_system_"
                                    "folders_first",))
def test_fixture_does_not_import_click_beside_tests(tmp_path):
    """15a F3 (fixed): ``proofs_checks.syspath`` is imported with the plugin and imports nothing a test folder holds."""
    marker = tmp_path / "marker"
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "click.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (tests / "test_fx.py").write_text(textwrap.dedent("""
        def test_lyap(tverify):
            tverify.check_lyapunov("-x", "x**2")
    """))
    pytest_bin = Path(sys.executable).with_name("pytest")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([str(pytest_bin), "-q", "-p", "no:cacheprovider", "test_fx.py"], cwd=tests, env=env,
                   capture_output=True, timeout=600)
    assert not marker.exists()

