"""Hostile pass 22 (tester a): one test per finding (HOSTILE22A_FINDINGS.md), each a strict xfail against frozen22
(1f46a84), passing now; the documented limits stay strict xfails with their reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import MEMORY_CGROUP

from tests.hz_plugin import hz_plugin, install_hz

from tests.tiers import moved

_PLUGIN = hz_plugin('''
def READ_C():
    how = os.environ["HZHOW"]
    if how == "shadow":  # a helper module imported late; an override later placed earlier on PYTHONPATH
        import hzhelper
        return hzhelper.C
    if how == "readlink":  # the version a "current" link names
        return int(os.path.basename(os.readlink(os.environ["HZLINK"])))
    if how == "fwalk":  # the *.extra files of a data folder, walked with os.fwalk
        return 2 + sum(len([f for f in fs if f.endswith(".extra")]) for _, _, fs, _ in os.fwalk(os.environ["HZDIR"]))
    if how == "posixenv":  # variables HZX_* read from posix.environ
        import posix
        return 2 + len([k for k in posix.environ if k.startswith(b"HZX_")])
    return 2
''', 'hostile 22a')

_TVERIFY = str(Path(sys.executable).with_name("tverify"))


def _plugin(tmp_path: Path) -> Path:
    return install_hz(tmp_path, _PLUGIN)


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HZX_", "TVERIFY_", "PYTHON"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), TVERIFY_STORE=str(tmp_path / "store"), **extra)
    return env


def _run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_TVERIFY, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@moved("two tverify runs of a throwaway plugin in subprocesses (≈ 10 s each case): a plugin's derivation answered "
       "after its input changed, end to end through run",
       "tests/test_hostile_round27.py::test_a_plugin_derivation_is_kept_only_where_the_claim_declares_it_pure",
       "tests/test_hostile_round18.py::test_a_cached_derivation_is_kept_only_for_a_declared_pure_claim")
@pytest.mark.parametrize("how", ["shadow", "package", "readlink", "fwalk", "posixenv"])
def test_plugin_derivation_cache_not_stale(tmp_path, how):
    pz = _plugin(tmp_path)
    libA, lib, data = tmp_path / "libA", tmp_path / "lib", tmp_path / "data"
    for d in (libA, lib, data):
        d.mkdir()
    (lib / "hzhelper.py").write_text("C = 2\n")
    import py_compile

    py_compile.compile(str(lib / "hzhelper.py"), doraise=True)  # as any earlier import of it leaves it
    (tmp_path / "version").symlink_to("2")  # a dangling link whose target names the version
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join(map(str, (pz, libA, lib))),
               HZHOW="shadow" if how == "package" else how,
               HZLINK=str(tmp_path / "version"), HZDIR=str(data))
    first = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    if how == "shadow":
        (libA / "hzhelper.py").write_text("C = 3\n")
    elif how == "package":  # a package beside the module wins the import
        (lib / "hzhelper").mkdir()
        (lib / "hzhelper" / "__init__.py").write_text("C = 3\n")
    elif how == "readlink":
        (tmp_path / "version").unlink()
        (tmp_path / "version").symlink_to("3")
    elif how == "fwalk":
        (data / "more.extra").write_text("1\n")
    else:
        env["HZX_EXTRA"] = "1"
    second = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    # the obligation "constant is two" is now false (TVERIFY_DERIVATION_CACHE=0: refuted, exit 1)
    assert second.returncode == 1 and "constant is two" in second.stdout, second.stdout[-2000:]


@pytest.mark.xfail(strict=True, reason=("22a F5/F6, a documented limit (docs/own-model.md): what $PYTHONPATH holds is imported by Python's rules, the "
                   "script's own package and libraries' optional dependencies included"))
def test_a_proofs_checks_package_on_pythonpath_never_runs(tmp_path):
    pp, work = tmp_path / "pp", tmp_path / "work"
    (pp / "proofs_checks").mkdir(parents=True)
    work.mkdir()
    (pp / "proofs_checks" / "__init__.py").write_text("import sys\nsys.stderr.write('PWNED\\n')\n")
    r = _run(_env(tmp_path, PYTHONPATH=str(pp)), work, "list", "attn.complexity")
    assert "PWNED" not in r.stderr + r.stdout and r.returncode == 0, r.stderr[-2000:]


# (22a F5/F6 kept these as a documented limit until hostile pass 55a F7: the command now imports its libraries with the
# system folders alone first, so their optional imports at import time find gmpy2 or nt absent)
@pytest.mark.parametrize("name", [
    pytest.param("nt", marks=pytest.mark.xfail(strict=True, reason=(
        "22a F5/F6, a documented limit (docs/own-model.md): a platform's own module (nt) is probed later, on first use, "
        "by what the command runs, and $PYTHONPATH's nt.py is then imported by Python's rules"))),
    "gmpy2", "cwd-gmpy2"])
def test_modules_named_like_absent_standard_or_optional_modules_never_run(tmp_path, name):
    pp, work = tmp_path / "pp", tmp_path / "work"
    pp.mkdir()
    work.mkdir()
    # cwd-gmpy2: the file in the working folder, PYTHONPATH=":pp" (what `export PYTHONPATH=$PYTHONPATH:pp` gives when
    # PYTHONPATH was empty: Python puts the working folder on the path for the empty entry)
    where, path = (work, f"{os.pathsep}{pp}") if name.startswith("cwd-") else (pp, str(pp))
    (where / f"{name.removeprefix('cwd-')}.py").write_text("import sys\nsys.stderr.write('PWNED\\n')\n")
    r = _run(_env(tmp_path, PYTHONPATH=path), work, "check", "lyapunov", "--f", "-x", "--V", "x**2")
    assert "PWNED" not in r.stderr + r.stdout and "Traceback" not in r.stderr and r.returncode == 0, r.stderr[-3000:]


@moved("a throwaway plugin run and shown again in subprocesses (≈ 10 s), a documented limit",
       "tests/test_hostile_round27.py::test_show_says_a_last_result_predates_a_change_of_its_sources")
@pytest.mark.xfail(strict=True, reason=("22a F7, a documented limit (docs/cli.md): a module a plugin imports from outside its package is not "
                   "part of the fingerprint show compares"))
def test_show_says_a_last_result_predates_a_helper_module_change(tmp_path):
    pz = _plugin(tmp_path)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "hzhelper.py").write_text("C = 2\n")
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join(map(str, (pz, lib))), HZHOW="shadow", PYTHONDONTWRITEBYTECODE="1")
    first = _run(env, tmp_path, "run", "hz.dbl", "--quick", "--no-progress")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    (lib / "hzhelper.py").write_text("C = 3\n")  # the derivation now fails its obligation "constant is two"
    shown = _run(env, tmp_path, "show", "hz.dbl")
    assert shown.returncode == 0, shown.stderr[-2000:]
    last = [line for line in shown.stdout.splitlines() if "last result" in line.lower()]
    words = ("changed", "before", "since", "stale", "predates", "outdated", "out of date")
    assert last and any(w in shown.stdout.lower() for w in words), shown.stdout[-3000:]


def test_list_after_a_single_module_plugins_data_file_changes_is_not_stale(tmp_path):
    """22a F8, a documented limit until the twelfth session: what a plugin opens while it loads is now recorded (27a F5)."""
    pz, work = tmp_path / "pz", tmp_path / "work"
    pz.mkdir()
    work.mkdir()
    src = _PLUGIN.replace('CLAIM = register(Claim(id="hz.dbl", title="doubling"',
                          '_T = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hs_title.txt")).read()'
                          '.strip()\nCLAIM = register(Claim(id="hs.dbl", title=_T')
    assert "_T = open" in src
    (pz / "tverify_hs.py").write_text(src)
    dist = pz / "tverify_hs-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tverify-hs\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tverify.claims]\nhs = tverify_hs\n")
    (pz / "hs_title.txt").write_text("single-title-ONE\n")
    env = _env(tmp_path, PYTHONPATH=str(pz), HZHOW="x")
    first = _run(env, work, "list", "hs.dbl")
    assert first.returncode == 0 and "single-title-ONE" in first.stdout, first.stdout[-2000:] + first.stderr[-2000:]
    (pz / "hs_title.txt").write_text("single-title-TWO\n")
    second = _run(env, work, "list", "hs.dbl")
    assert "single-title-TWO" in second.stdout, second.stdout[-2000:]


def test_fixture_never_imports_an_optional_dependency_from_the_test_folder(tmp_path):
    """22a F6, a documented limit until each check imported what it uses with the system folders alone on the path
    first (hostile pass 54a F7, F8): SymPy's optional gmpy2 is no longer found in the fixture's test folder."""
    (tmp_path / "gmpy2.py").write_text("import sys\nsys.stderr.write('PWNED\\n')\nversion = lambda: '2.1.5'\n")
    (tmp_path / "test_l.py").write_text("def test_lyap(tverify):\n"
                                        "    tverify.check_lyapunov('-x**3 - y, x - y**3', 'x**2 + y**2')\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_l.py"],
                       cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert "PWNED" not in r.stdout + r.stderr and r.returncode == 0, (r.stdout + r.stderr)[-3000:]


_PIPES = '''
import fcntl
import os

import torch
from torch import nn

_keep = []


class Leaky(nn.Module):
    """Plain attention; its first call fills 700 pipes of 1 MB each (kernel memory this process holds)."""

    def __init__(self, dim: int = 32):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.num_heads = 1

    def forward(self, x):
        if not _keep:
            blob = b"\\1" * (1 << 20)
            for _ in range(700):
                r, w = os.pipe()
                fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
                os.set_blocking(w, False)
                try:
                    os.write(w, blob)
                except BlockingIOError:
                    pass
                _keep.append((r, w))
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)
        return self.proj(a @ v)
'''


@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason=("22a F9, a documented limit (docs/own-model.md): data held in pipe buffers is not counted"))
def test_pipe_buffers_count_against_max_memory(tmp_path):
    (tmp_path / "pipes.py").write_text(_PIPES)
    r = _run(_env(tmp_path), tmp_path, "check", "attention", "--module", f"{tmp_path / 'pipes.py'}:Leaky", "--quick",
             "--max-memory", "0.3", "--no-progress")
    assert r.returncode == 2 and "max-memory" in r.stderr, (r.stdout + r.stderr)[-3000:]


def test_a_huge_lambda_file_is_one_line_never_a_traceback(tmp_path):
    try:
        overcommit = Path("/proc/sys/vm/overcommit_memory").read_text().strip()
    except OSError:
        overcommit = "?"
    if overcommit == "1":
        pytest.skip("the kernel overcommits every allocation: the whole read would be attempted")
    big = tmp_path / "lam.csv"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # 1 TB, sparse: a huge file given by mistake
    r = _run(_env(tmp_path), tmp_path, "check", "icl", "--lambda", str(big), "--N", "10", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr and r.returncode == 2, r.stderr[-3000:]
