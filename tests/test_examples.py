"""Every `tverify check` command that README.md and docs/*.md show runs as written from the
repository root on the shipped inputs in examples/ (issue 45), and exits as documented: 0 unless the
line says ``# exit N``. Usage synopses (``[--option ...]``) are not commands and are skipped.

Each command runs in a fresh scratch folder that holds links to the checkout's ``examples/`` and
``tests/`` (so outputs such as ``--report attn-report`` land there, never in the checkout), as its own
process: ``python -m proofs_checks`` stands for ``tverify``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^\s*```")


def documented_commands() -> list[tuple[str, str, int]]:
    """(file, command line, documented exit code) of every ``tverify check`` line in a code block."""
    out = []
    for doc in DOCS:
        inside = False
        for line in doc.read_text(encoding="utf-8").splitlines():
            if _FENCE.match(line):
                inside = not inside
                continue
            cmd = line.strip().removeprefix("$ ")
            if not inside or not cmd.startswith("tverify check ") or "[--" in cmd:
                continue
            m = re.search(r"#\s*exit (\d)", cmd)
            out.append((doc.name, cmd, int(m.group(1)) if m else 0))
    return out


def _unique(cmds):
    """One run per distinct command (README, cli.md and own-model.md share some), its documents named."""
    by: dict[tuple[str, int], tuple[str, list[str]]] = {}
    for doc, cmd, code in cmds:
        by.setdefault((shlex.join(shlex.split(cmd, comments=True)), code), (cmd, []))[1].append(doc)
    return [("+".join(dict.fromkeys(docs)), cmd, code) for (_, code), (cmd, docs) in by.items()]


COMMANDS = documented_commands()


def test_the_docs_show_check_commands_on_the_examples():
    assert len(COMMANDS) >= 15, COMMANDS
    named = " ".join(c for _, c, _ in COMMANDS)
    for f in ("my_attn.py", "llama_block.py", "mine.py", "fused.py", "icl_model.py", "hopfield_update.py", "P.npy",
              "data.npz", "W.pt", "W.npz"):
        assert f"examples/{f}" in named, f
        assert (ROOT / "examples" / f).is_file(), f


@pytest.mark.integration(reason="every command the docs show, run as written in a child process")
@pytest.mark.parametrize("doc, cmd, code", _unique(COMMANDS), ids=[c[14:70] for _, c, _ in _unique(COMMANDS)])
def test_documented_check_command_runs_as_written(tmp_path, doc, cmd, code):
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    argv = shlex.split(cmd, comments=True)
    assert argv[0] == "tverify"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TVERIFY_STORE": str(tmp_path / "store"), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "proofs_checks", *argv[1:]], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == code, f"{doc}: `{cmd}` exited {p.returncode}, documented {code}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr
