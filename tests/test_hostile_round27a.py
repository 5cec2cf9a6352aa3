"""Hostile pass 21 (tester a): one test per finding (HOSTILE21A_FINDINGS.md), each a strict xfail against the tree
under test (frozen21, e9ea2db), now passing with the fixes; F10 stays an xfail: a documented limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import MEMORY_CGROUP

from tests.hz_plugin import hz_plugin, install_hz, run_hz

from tests.tiers import moved

_PLUGIN = hz_plugin('''
def READ_C():
    how = os.environ["HZHOW"]
    if how == "link":  # a constant read through an absolute path that is a link ("latest" -> a version)
        return int(open(os.environ["HZFILE"]).read())
    if how == "absent":  # an override file read when present, else the default
        try:
            return int(open("override.txt").read())
        except FileNotFoundError:
            return 2
    if how == "pyc":  # a helper module on PYTHONPATH imported late, its .pyc already compiled
        import hzhelper
        return hzhelper.C
    if how == "glob":  # every *.extra file of a folder, each read (the files of a data folder)
        import glob
        return 2 + sum(int(open(f).read()) for f in sorted(glob.glob(os.path.join(os.environ["HZDIR"], "*.extra"))))
    if how == "sqliteuri":  # a read-only SQLite database, opened the documented way for that (a URI)
        import sqlite3
        db = sqlite3.connect(f"file:{os.environ['HZDB']}?mode=ro", uri=True)
        return db.execute("select c from k").fetchone()[0]
    if how == "envprefix":  # settings taken from every variable named HZX_* (read by iterating os.environ)
        return 2 + len([k for k in os.environ if k.startswith("HZX_")])
''', 'hostile 21a')


def _plugin(tmp_path: Path) -> Path:
    return install_hz(tmp_path, _PLUGIN)


def _tverify(env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return run_hz(env, cwd)


@moved("two tverify runs of a throwaway plugin in subprocesses (≈ 10 s each case): a plugin's derivation answered "
       "after its input changed, end to end through run",
       "tests/test_hostile_round27.py::test_a_plugin_derivation_is_kept_only_where_the_claim_declares_it_pure",
       "tests/test_hostile_round18.py::test_a_cached_derivation_is_kept_only_for_a_declared_pure_claim")
@pytest.mark.parametrize("how", ["link", "absent", "pyc", "envprefix", "pylink", "glob", "sqliteuri"])
def test_plugin_derivation_cache_not_stale(tmp_path, how):
    pz = _plugin(tmp_path)
    data, lib = tmp_path / "data", tmp_path / "lib"
    data.mkdir()
    lib.mkdir()
    (data / "two.txt").write_text("2\n")
    (data / "three.txt").write_text("3\n")
    (data / "current.txt").symlink_to("two.txt")
    (lib / "hzhelper.py").write_text("C = 2\n")
    import py_compile

    py_compile.compile(str(lib / "hzhelper.py"), doraise=True)  # as any earlier import of it leaves it
    (tmp_path / "libv1").mkdir()
    (tmp_path / "libv2").mkdir()
    (tmp_path / "libv1" / "hzhelper.py").write_text("C = 2\n")
    (tmp_path / "libv2" / "hzhelper.py").write_text("C = 3\n")
    (tmp_path / "cur").symlink_to("libv1")  # PYTHONPATH names "cur", a link to the version deployed
    env = {**os.environ, "PYTHONPATH": f"{pz}{os.pathsep}{tmp_path / 'cur' if how == 'pylink' else lib}",
           "TVERIFY_STORE": str(tmp_path / "store"), "HZHOW": "pyc" if how == "pylink" else how,
           "HZFILE": str(data / "current.txt"), "HZDIR": str(data), "HZDB": str(tmp_path / "hz.sqlite")}
    import sqlite3

    con = sqlite3.connect(tmp_path / "hz.sqlite")
    con.execute("create table k(c int)")
    con.execute("insert into k values (2)")
    con.commit()
    con.close()
    for k in [k for k in env if k.startswith("HZX_")] + ["TVERIFY_DERIVATION_CACHE"]:
        env.pop(k, None)
    first = _tverify(env, tmp_path)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    # the input changes: the obligation "constant is two" is now false
    if how == "link":
        (data / "current.txt").unlink()
        (data / "current.txt").symlink_to("three.txt")
    elif how == "absent":
        (tmp_path / "override.txt").write_text("3\n")
    elif how == "pyc":
        (lib / "hzhelper.py").write_text("C = 3\n")
    elif how == "glob":
        (data / "more.extra").write_text("1\n")
    elif how == "sqliteuri":
        con = sqlite3.connect(tmp_path / "hz.sqlite")
        con.execute("update k set c = 3")
        con.commit()
        con.close()  # a new file in the folder the derivation reads
    elif how == "pylink":
        (tmp_path / "cur").unlink()
        (tmp_path / "cur").symlink_to("libv2")
    else:
        env["HZX_EXTRA"] = "1"
    second = _tverify(env, tmp_path)
    assert second.returncode == 1 and "constant is two" in second.stdout, second.stdout[-2000:]


@pytest.mark.parametrize("what", ["json", "theory"])
def test_pythonpath_modules_named_like_stdlib_or_tverify_never_run_in_tverify(tmp_path, what):
    pp, work = tmp_path / "pp", tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "ran.txt"
    body = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    if what == "json":
        pp.mkdir()
        (pp / "json.py").write_text(body)
        args = ["list", "attn.complexity"]
    else:
        (pp / "theory").mkdir(parents=True)  # a user's project with a package named theory, on PYTHONPATH
        (pp / "theory" / "__init__.py").write_text(body)
        args = ["check", "lyapunov", "--f", "-x", "--V", "x**2"]
    env = {**os.environ, "PYTHONPATH": str(pp), "TVERIFY_STORE": str(tmp_path / "store")}
    tv = Path(sys.executable).with_name("tverify")
    p = subprocess.run([str(tv), *args], env=env, cwd=work, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert not marker.exists(), f"the {what} on PYTHONPATH ran in tverify's process"
    assert p.returncode == 0, p.stdout[-1000:] + p.stderr[-1000:]


_C_LOCALE_MOVED = moved("show and list in a subprocess under each odd locale (≈ 4 CPU s each): the same stream set-up as "
                        "the run case, which stays in make test",
                        "tests/test_hostile_round27a.py::test_show_and_list_in_the_c_locale_never_trace_back")


@pytest.mark.parametrize("env_extra", [{"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
                                       {"PYTHONIOENCODING": "ascii:surrogateescape"}])
@pytest.mark.parametrize("args", [pytest.param(["show", "icl.gamma_n_global_min"], marks=_C_LOCALE_MOVED, id="show"),
                                  pytest.param(["list", "icl.gamma_n_global_min"], marks=_C_LOCALE_MOVED, id="list"),
                                  pytest.param(["run", "attn.complexity", "--quick", "--no-progress"], id="run")])
def test_show_and_list_in_the_c_locale_never_trace_back(tmp_path, env_extra, args):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}
    env.update(env_extra, TVERIFY_STORE=str(tmp_path / "store"))
    tv = Path(sys.executable).with_name("tverify")
    p = subprocess.run([str(tv), *args], env=env, cwd=tmp_path, capture_output=True, timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err[-1500:]
    assert p.returncode == 0, err[-1500:]


def test_json_path_made_a_folder_during_the_run_is_left_and_the_json_written_beside(tmp_path, monkeypatch):
    import proofs_checks.cli as cli

    from tests.cli_helpers import during_the_run

    js = tmp_path / "out.json"
    during_the_run(monkeypatch, lambda: (js.mkdir(), (js / "mine.txt").write_text("user data")))
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    code = 0
    try:
        cli._main(["run", "attn.complexity", "--quick", "--no-progress", "--json", str(js)])
    except SystemExit as ex:
        code = ex.code or 0
    assert (js / "mine.txt").read_text() == "user data"
    beside = [p for p in tmp_path.glob("out*.json") if p.is_file()]
    assert code == 0 and beside, f"exit {code}; JSON files beside: {beside}"


@pytest.mark.parametrize("where", ["mine.txt", "sub/deeper.txt"])
def test_force_never_deletes_a_file_edited_in_the_out_folder_during_the_run(tmp_path, monkeypatch, where):
    import proofs_checks.cli as cli

    out = tmp_path / "r"
    (out / "sub").mkdir(parents=True)
    (out / "mine.txt").write_text("user")
    (out / "sub" / "deeper.txt").write_text("user")
    from tests.cli_helpers import during_the_run

    # the claims run; meanwhile the user edits a file of theirs in the folder
    during_the_run(monkeypatch, lambda: (out / where).write_text("edited during the run: keep me"))
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    try:
        cli._main(["report", "attn.complexity", "--quick", "--no-mutants", "--out", str(out), "--force", "--no-progress"])
    except SystemExit as ex:
        assert ex.code in (0, None)
    assert (out / where).is_file() and (out / where).read_text() == "edited during the run: keep me"


_HIDE = '''
import ctypes, math, os, time
import torch
from torch import nn

KEY, SIZE, CHUNK = int(os.environ["HIDE_KEY"]), int(float(os.environ["HIDE_GB"]) * 2**30), 32 * 2**20
_done = False


def hide():
    global _done
    if _done:
        return
    _done = True
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    pid = os.fork()
    if pid == 0:  # a helper that only creates the segment, gone before the next poll
        libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(SIZE), ctypes.c_int(0o1000 | 0o600))
        os._exit(0)
    os.waitpid(pid, 0)
    sid = libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(SIZE), ctypes.c_int(0o600))
    for off in range(0, SIZE, CHUNK):  # filled a window at a time: never more than 32 MB mapped
        addr = libc.shmat(sid, None, 0)
        ctypes.memset(addr + off, 1, min(CHUNK, SIZE - off))
        libc.shmdt(ctypes.c_void_p(addr))
    time.sleep(0.5)


'''
# the README's example attention (examples/my_attn.py), hiding its memory when it is built
_HIDE += ((Path(__file__).resolve().parents[1] / "examples" / "my_attn.py").read_text().split('"""', 2)[2]
          .replace("        super().__init__()\n", "        super().__init__()\n        hide()\n", 1))


def _segment_ids(key: int) -> list[int]:
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()
    head = rows[0].split()
    return [int(r["shmid"]) for r in (dict(zip(head, line.split())) for line in rows[1:]) if int(r["key"]) == key]


@pytest.mark.skipif(not Path("/proc/sysvipc/shm").exists(), reason="Linux SysV shared memory")
def test_sysv_segment_made_by_a_short_lived_fork_is_counted_and_removed(tmp_path):
    import ctypes
    import random

    (tmp_path / "hide.py").write_text(_HIDE)
    key = random.randrange(0x21A00000, 0x21AFFFFF)
    env = {**os.environ, "HIDE_KEY": str(key), "HIDE_GB": "0.8", "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    tv = Path(sys.executable).with_name("tverify")
    try:
        p = subprocess.run([str(tv), "check", "attention", "--module", "hide.py:MyAttention", "--causal", "--quick",
                            "--max-memory", "0.5", "--no-progress"], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
        left = _segment_ids(key)
    finally:
        libc = ctypes.CDLL(None, use_errno=True)
        for sid in _segment_ids(key):
            libc.shmctl(ctypes.c_int(sid), ctypes.c_int(0), None)  # IPC_RMID: never leave 0.8 GB behind
    assert not left, "0.8 GB of SysV shared memory outlived the check"
    assert p.returncode == 2 and "memory" in p.stderr, (p.returncode, p.stderr[-1000:])


_HIDE_FD = '''
import array, math, os, socket, time
import torch
from torch import nn

SIZE = int(float(os.environ["HIDE_GB"]) * 2**30)
_keep = []


def hide():
    if _keep:
        return
    block = b"x" * (32 * 2**20)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for off in range(0, SIZE, len(block)):  # many small memory files, each open for a moment only
        fd = os.memfd_create("hidden")
        os.write(fd, block)
        a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        os.close(fd)  # held only by the message in flight: no descriptor, no mapping
    _keep.extend([a, b])
    time.sleep(1.0)
'''


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="Linux memfd")
@pytest.mark.xfail(not MEMORY_CGROUP, strict=True, reason="21a F10, a documented limit (docs/own-model.md): a memory file held only by a "
                   "message in flight on a socket is in no process's descriptors or mappings; freed when the check ends")
def test_memfds_in_flight_on_a_socket_count_against_max_memory(tmp_path):
    body = _HIDE_FD + "\n\nclass MyAttention" + _HIDE.split("class MyAttention", 1)[1]  # the same attention
    (tmp_path / "hide2.py").write_text(body)
    env = {**os.environ, "HIDE_GB": "0.8", "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    tv = Path(sys.executable).with_name("tverify")
    p = subprocess.run([str(tv), "check", "attention", "--module", "hide2.py:MyAttention", "--causal", "--quick",
                        "--max-memory", "0.5", "--no-progress"], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "memory" in p.stderr, (p.returncode, p.stderr[-1000:])


@pytest.mark.parametrize("args", [
    ["run", "attn.complexity", "--quick", "--no-progress", "--json", "d/" * 1100 + "x.json"],
    ["report", "attn.complexity", "--quick", "--no-mutants", "--no-progress", "--out", "d/" * 1100 + "r"],
    ["check", "lyapunov", "--f", "-x", "--V", "x**2", "--json", "d/" * 1100 + "x.json"],
    ["--store", "d/" * 1100 + "st", "run", "attn.complexity", "--quick", "--no-progress"],
], ids=["run-json", "report-out", "check-json", "store"])
def test_deep_output_paths_never_trace_back(tmp_path, monkeypatch, args):
    # the command in this process: what it says and its exit code are the subject, not the console process (issue 46)
    from tests.cli_helpers import invoke_in

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    try:
        p = invoke_in(tmp_path, monkeypatch, *args)
    except Exception as exc:  # noqa: BLE001 - an internal error escaping the command is the finding
        pytest.fail(f"the command raised {type(exc).__name__}: {str(exc)[:300]}")
    assert "Traceback" not in p.stderr, p.stderr[-600:]
    assert p.returncode in (0, 2), p.returncode


def _zip_plugin(tmp_path: Path, title: str) -> Path:
    import zipfile

    z = tmp_path / "plugins.zip"
    tmp = tmp_path / "plugins.zip.new"
    with zipfile.ZipFile(tmp, "w") as zf:
        zf.writestr("tverify_zp/__init__.py", "")
        zf.writestr("tverify_zp/claims.py", _PLUGIN.replace('"hz.dbl"', '"zp.dbl"').replace('title="doubling"',
                                                                                          f'title="{title}"'))
        zf.writestr("tverify_zp-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tverify-zp\nVersion: 0.1\n")
        zf.writestr("tverify_zp-0.1.dist-info/entry_points.txt", "[tverify.claims]\nzp = tverify_zp.claims\n")
    os.replace(tmp, z)
    return z

def _list_twice(tmp_path, path_entry, pattern: str, change) -> None:
    """``tverify list PATTERN`` shows TITLE_ONE; after ``change()`` it shows TITLE_TWO (never the cached title)."""
    env = {**os.environ, "PYTHONPATH": str(path_entry), "TVERIFY_STORE": str(tmp_path / "store"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HZHOW": "absent", "COLUMNS": "200"}
    env.pop("TVERIFY_DERIVATION_CACHE", None)
    tv = Path(sys.executable).with_name("tverify")
    first = subprocess.run([str(tv), "list", pattern], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and "TITLE_ONE" in first.stdout, first.stdout[-1000:] + first.stderr[-1000:]
    change()
    second = subprocess.run([str(tv), "list", pattern], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "TITLE_TWO" in second.stdout, second.stdout[-1000:]



def test_list_after_a_zipped_plugin_changes_is_not_stale(tmp_path):
    z = _zip_plugin(tmp_path, "TITLE_ONE")
    _list_twice(tmp_path, z, "zp", lambda: _zip_plugin(tmp_path, "TITLE_TWO"))  # the plugin is updated (a new zip)


def test_list_after_a_plugin_data_file_changes_is_not_stale(tmp_path):
    pz = _plugin(tmp_path)
    claims = pz / "tverify_hz" / "claims.py"
    claims.write_text(claims.read_text().replace(
        'title="doubling"', 'title=open(os.path.join(os.path.dirname(__file__), "title.txt")).read().strip()'))
    (pz / "tverify_hz" / "title.txt").write_text("TITLE_ONE\n")
    _list_twice(tmp_path, pz, "hz", lambda: (pz / "tverify_hz" / "title.txt").write_text("TITLE_TWO\n"))


def test_survey_never_runs_a_planted_install_cache(tmp_path):
    pkg = tmp_path / ".tverify" / "survey-cache" / "x-transformers-1.16.11"
    (pkg / "x_transformers").mkdir(parents=True)
    (pkg / ".tverify-installed-deps").write_text("")  # the marker tverify writes after a pip install
    marker = tmp_path / "ran.txt"
    (pkg / "x_transformers" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'a').write('planted x_transformers ran\\n')\nraise ImportError('planted')\n")
    env = {**os.environ, "TVERIFY_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("TVERIFY_SURVEY_CACHE", None)
    tv = Path(sys.executable).with_name("tverify")
    p = subprocess.run([str(tv), "survey", "xt-1.16.11-flash-mask", "--quick", "--no-install", "--out", "s"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "the planted package in ./.tverify/survey-cache ran: " + p.stderr[-500:]
