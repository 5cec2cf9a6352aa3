"""The documentation: the site builds in strict mode (a broken link or a missing API reference
fails), the README stays a front door (under 200 lines, the two commands first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 200
    block = text.split("```")[1]
    assert block.strip().splitlines()[0].startswith("make report") and "make test" in block


def test_docs_build_strict(tmp_path):
    exe = Path(sys.executable).parent / "mkdocs"
    if not exe.exists():
        pytest.skip("mkdocs not installed (pip install -e '.[dev]')")
    r = subprocess.run([str(exe), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
