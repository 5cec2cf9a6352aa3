"""Hostile pass 11 (tester a, issue 44's acceptance pass): its findings, each a minimal reproducer. F2 (an inherited
TVERIFY_PLUGIN_CHILD mark in the API) is fixed; F7 (new-claim --dir / list --docs-dir / --store inside tverify's own code) and F6 (a plugin writing to
descriptor 1 at its in-process import broke `--json -`) too; F8 (a plugin
that passes the probe and exits on its second import: exit 0, nothing printed) too (proofs_checks/supervisor.py;
tests/test_supervisor.py). Plugins are installed as in
tests/test_plugin_isolation.py: a ``.dist-info`` with the ``tverify.claims`` entry point in a folder on
``PYTHONPATH``; everything runs in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: a plugin with one claim; what it does at import is prepended
CLAIM = '''
import numpy as np
from proofs_checks.plugin import Claim, Mutant, close, numeric, register

@numeric("2x against x+x")
def twice(form, ctx):
    x = ctx.rng().standard_normal(20)
    return close(form(x), x + x, 4e-16 * np.abs(x) + 1e-300, "one rounding of 2x")

register(Claim(id="zzh.twice", title="twice", statement="f(x)=2x", source="me", kind="identity",
               form=lambda x: 2.0 * x, derivation=None, no_symbolic="a definition", checks=(twice,),
               mutants=(Mutant("m3", "wrong constant", "3x", lambda x: 3.0 * x),)))
'''


def site_with(tmp_path: Path, at_import: str, name: str = "zzh") -> Path:
    """A folder for ``PYTHONPATH`` with the plugin ``name`` (its claim ``name.twice``) installed."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{name}.py").write_text(at_import + CLAIM.replace('id="zzh.', f'id="{name}.'))
    info = site / f"{name}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[tverify.claims]\n{name} = {name}\n")
    return site


def run(site: Path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), OMP_NUM_THREADS="1",
             TVERIFY_STORE=str(site.parent / "store"), **env)
    return subprocess.run(args, capture_output=True, text=True, env=e, cwd=str(site.parent), timeout=300)


def test_api_ignores_an_inherited_plugin_child_mark(tmp_path):
    site = site_with(tmp_path, "import os\nos._exit(0)\n")
    p = run(site, [sys.executable, "-c", "import proofs_checks as pc; r = pc.run_claims('attn.softmax_simplex', "
                   "mode='quick'); print('after', r.ok)"], TVERIFY_PLUGIN_CHILD="1")
    assert "after True" in p.stdout, (p.returncode, p.stdout[-500:], p.stderr[-500:])


def test_json_stdout_stays_json_when_a_plugin_writes_fd1_at_import(tmp_path):
    site = site_with(tmp_path, "import os\nos.write(1, b'GARBAGE\\n')\n")
    p = run(site, [sys.executable, "-m", "proofs_checks", "list", "zzh", "--json", "-"])
    assert p.returncode == 0, p.stderr[-500:]
    json.loads(p.stdout)


def test_new_claim_refuses_tverifys_own_code(tmp_path):
    target = ROOT / "proofs_checks" / "claims" / f"zz_hostile_{os.getpid()}"
    try:
        p = subprocess.run([sys.executable, "-m", "proofs_checks", "new-claim", "zzq.x", "--dir", str(target)],
                           capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
        written = target.exists()
    finally:
        import shutil

        shutil.rmtree(target, ignore_errors=True)
    assert p.returncode == 2 and not written, (p.returncode, p.stderr[-300:])


def test_second_import_exit_is_never_a_silent_zero(tmp_path):
    flag = tmp_path / "imported_once"
    site = site_with(tmp_path, f"import os\nif os.path.exists({str(flag)!r}):\n    os._exit(0)\n"
                               f"open({str(flag)!r}, 'w').write('1')\n")
    p = run(site, [sys.executable, "-m", "proofs_checks", "run", "attn.softmax_simplex", "zzh.twice", "--quick",
                   "--no-progress"])
    assert p.returncode == 1 and "before tverify finished" in p.stderr, (p.returncode, p.stdout[-300:], p.stderr[-300:])
