"""Hostile pass 36, tester A: reproducers of the findings (the memory cgroup of docs/own-model.md, the processes, files
and caches of a check). Each was a strict xfail until fixed; each builds its own files in tmp_path. (36a F1, a process frozen by the code,
is tests/test_hostile_round43a.py's, beside 37a F1.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_survey_pip_does_not_run_a_stdlib_named_module_from_pythonpath(tmp_path):
    pp = tmp_path / "pp"
    pp.mkdir()
    marker = tmp_path / "ran.txt"
    (pp / "traceback.py").write_text(f"import sys; open({str(marker)!r}, 'a').write(' '.join(sys.orig_argv) + '\\n')\n"
                                     "raise ImportError('not the standard library')\n")
    env = {**os.environ, "PYTHONPATH": str(pp), "TVERIFY_STORE": str(tmp_path / "st"),
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    script = Path(sys.executable).parent / "tverify"  # (python -m imports the package before tverify orders the path)
    if not script.is_file():
        pytest.skip("no tverify script beside this Python")
    r = subprocess.run([str(script), "survey", "local-attention-1.2.1", "--quick",
                        "--out", str(tmp_path / "sv"), "--cache-dir", str(tmp_path / "cache"), "--timeout", "60"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=150, env=env)
    assert not marker.exists(), (marker.read_text(), r.returncode, r.stderr[-400:])
