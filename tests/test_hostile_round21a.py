"""Hostile pass 15a: findings pinned as strict xfails (the pass measures the tree; nothing is fixed here)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.xfail(strict=True, reason="hostile 15a F3: the fixture imports proofs_checks.guards (import click) "
                                       "before putting the system folders first; a click.py beside the tests runs")
def test_fixture_does_not_import_click_beside_tests(tmp_path):
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

