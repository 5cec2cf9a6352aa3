"""Hostile pass 16a: findings pinned as strict xfails during the pass (which fixes nothing); fixed after it, plain
tests (each a pytest session of its own: the integration tier, pinned by the lead's in-process tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.integration(reason="a pytest session of its own (≈ 5 s); the tester's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_the_system_folders_are_found_without_a_"
                                    "callers_sysconfig",))
def test_fixture_does_not_import_sysconfig_beside_tests(tmp_path):
    """16a F1: a ``sysconfig.py`` beside the tests ran when the fixture first reordered sys.path."""
    marker = tmp_path / "marker"
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "sysconfig.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise ImportError('shadow')\n")
    (tests / "test_fx.py").write_text(textwrap.dedent("""
        def test_lyap(tverify):
            tverify.check_lyapunov("-x", "x**2")
    """))
    pytest_bin = Path(sys.executable).with_name("pytest")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([str(pytest_bin), "-q", "-p", "no:cacheprovider", "test_fx.py"], cwd=tests, env=env,
                   capture_output=True, timeout=600)
    assert not marker.exists()


@pytest.mark.integration(reason="a pytest session of its own (≈ 5 s); the tester's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_the_system_folders_are_found_without_a_"
                                    "callers_sysconfig",))
def test_fixture_does_not_import_sysconfigdata_beside_tests(tmp_path):
    """16a F1: a ``_sysconfigdata_<abi>_<platform>_<multiarch>.py`` beside the tests ran (and the test passed)."""
    import sysconfig

    marker = tmp_path / "marker"
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / f"{sysconfig._get_sysconfigdata_name()}.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nbuild_time_vars = {{}}\n")
    (tests / "test_fx.py").write_text(textwrap.dedent("""
        def test_lyap(tverify):
            tverify.check_lyapunov("-x", "x**2")
    """))
    pytest_bin = Path(sys.executable).with_name("pytest")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([str(pytest_bin), "-q", "-p", "no:cacheprovider", "test_fx.py"], cwd=tests, env=env,
                   capture_output=True, timeout=600)
    assert not marker.exists()
