"""Hostile pass 28a reproducers (frozen28), all fixed; end-to-end, in the integration tier, each pinned by a unit test of
tests/test_hostile_round34.py. F1: a file opened "a+" not recorded by the plugin caches (a declared-pure derivation; the
catalogue); F2: a file a declared-pure derivation reads in a process it starts; F3: a standard-library-named module (and
a theory/ package) on PYTHONPATH ran in the Dask workers of --cluster local:W; F4: a helper found by name but not left in
sys.modules (runpy.run_module, find_spec + exec_module) was kept by file only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_hostile_round32a import _env, _listed_then
from tests.tiers import moved


ARGS = ["run", "hz.dbl", "--quick", "--no-progress"]


def _tv(args, cwd, env, timeout=240):
    """tverify as the console script starts it (``python -m proofs_checks``: the path put in order first)."""
    return subprocess.run([sys.executable, "-P", "-m", "proofs_checks", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _pure_hz(tmp_path, read_c):
    from hz_plugin import hz_plugin, install_hz

    text = hz_plugin(read_c, "hostile 28a").replace('kind="identity",', 'kind="identity", derivation_pure=True,')
    return install_hz(tmp_path, text)


def _verified_then_refuted(tmp_path, read_c, data) -> None:
    """``data`` holds 2: verified; once it holds 3 the obligation C - 2 is false: refuted (not the kept answer)."""
    data.write_text("2\n")
    env = _env(tmp_path, PYTHONPATH=str(_pure_hz(tmp_path, read_c)))
    r = _tv(ARGS, tmp_path, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    data.write_text("3\n")
    r = _tv(ARGS, tmp_path, env)
    assert r.returncode == 1 and "refuted" in r.stdout, r.stdout[-800:]


@moved("two `tverify run` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round34.py::test_a_file_opened_a_plus_is_kept_and_its_edit_misses")
def test_file_opened_a_plus_edit_not_stale(tmp_path):
    data = tmp_path / "c.txt"
    read_c = f"def READ_C():\n    with open({str(data)!r}, 'a+') as f:\n        f.seek(0)\n        return int(f.read())\n"
    _verified_then_refuted(tmp_path, read_c, data)


@moved("two `tverify run` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_a_derivation_that_starts_a_process_is_never_kept",
       "tests/test_hostile_round34.py::test_a_spawned_process_or_a_path_object_read_is_never_missed")
@pytest.mark.parametrize("start", ["fork", "spawn"])  # 28a, and 29a's spawned worker
def test_file_read_in_a_worker_process_edit_not_stale(tmp_path, start):
    data = tmp_path / "c.txt"
    read_c = ("def _read(p):\n    with open(p) as f:\n        return int(f.read())\n\n\n"
              "def READ_C():\n    import multiprocessing as mp\n"
              f"    with mp.get_context({start!r}).Pool(1) as pool:\n"
              f"        return pool.apply(_read, ({str(data)!r},))\n")
    _verified_then_refuted(tmp_path, read_c, data)


_SIGNAL_TRAP = '''open({hit!r} + str(__import__("os").getpid()), "w").close()
import sys, importlib.util, sysconfig, os
_spec = importlib.util.spec_from_file_location("signal", os.path.join(sysconfig.get_paths()["stdlib"], "signal.py"))
_m = importlib.util.module_from_spec(_spec); sys.modules["signal"] = _m; _spec.loader.exec_module(_m)
globals().update(_m.__dict__)
'''


@moved("a `tverify run` on a local Dask cluster of two workers (≈ 20 s)",
       "tests/test_hostile_round34.py::test_local_cluster_workers_start_without_the_users_pythonpath_first")
def test_pythonpath_signal_py_not_run_by_local_cluster_workers(tmp_path):
    p = tmp_path / "P"
    p.mkdir()
    (p / "signal.py").write_text(_SIGNAL_TRAP.format(hit=str(tmp_path / "HIT_")))
    (p / "theory").mkdir()  # a project's own theory/ package: tverify's registry imported it in the workers
    (p / "theory" / "__init__.py").write_text(f"open({str(tmp_path / 'HIT_theory')!r}, 'w').close()\n")
    env = _env(tmp_path, PYTHONPATH=str(p))
    r = _tv(["run", "icl.gamma_n_global_min", "--quick", "--cluster", "local:2", "--no-progress"], tmp_path, env)
    hits = sorted(x.name for x in tmp_path.glob("HIT_*"))
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert not hits, f"the user's signal.py ran in {len(hits)} process(es) tverify started"


@moved("two `tverify list` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_a_file_opened_a_plus_is_kept_and_its_edit_misses")
def test_catalogue_title_read_a_plus_not_stale(tmp_path):
    from hz_plugin import hz_plugin, install_hz

    title = tmp_path / "title.txt"
    title.write_text("two\n")
    text = hz_plugin("def READ_C():\n    return 2\n", "hostile 28a")
    text = text.replace("ARGS = (scalar", f"def _title():\n    with open({str(title)!r}, 'a+') as f:\n        f.seek(0)\n"
                                           "        return f.read().strip()\n\n\nARGS = (scalar", 1)
    text = text.replace('title="doubling"', 'title="doubling " + _title()')
    env = _env(tmp_path, PYTHONPATH=str(install_hz(tmp_path, text)))
    _listed_then(tmp_path, env, "doubling two", (title, "three\n"), "doubling three")


@moved("two `tverify run` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round34.py::test_a_helper_run_by_name_is_kept_by_name_and_a_shadow_misses")
def test_helper_run_by_name_with_runpy_shadowed_not_stale(tmp_path):
    from hz_plugin import shadow_folders

    a, s = shadow_folders(tmp_path, {"hzconf.py": "C = 2\n"})
    pz = _pure_hz(tmp_path, "def READ_C():\n    import runpy\n    return runpy.run_module('hzconf')['C']\n")
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join(map(str, (pz, s, a))))
    r = _tv(ARGS, tmp_path, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    (s / "hzconf.py").write_text("C = 3\n")  # `runpy.run_module("hzconf")` now runs this one: C - 2 = 1, refuted
    r = _tv(ARGS, tmp_path, env)
    assert r.returncode == 1 and "refuted" in r.stdout, r.stdout[-800:]


@moved("two `tverify list` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_a_helper_run_by_name_is_kept_by_name_and_a_shadow_misses")
def test_catalogue_helper_found_by_name_not_in_sys_modules_shadowed_not_stale(tmp_path):
    from hz_plugin import hz_plugin, install_hz, shadow_folders

    a, s = shadow_folders(tmp_path, {"hzconst.py": 'NAME = "two"\n'})
    text = hz_plugin("def READ_C():\n    return 2\n", "hostile 28a")
    text = text.replace("ARGS = (scalar", "import importlib.util as _iu\n_spec = _iu.find_spec('hzconst')\n"
                                           "_conf = _iu.module_from_spec(_spec)\n_spec.loader.exec_module(_conf)\n\n"
                                           "ARGS = (scalar", 1)
    text = text.replace('title="doubling"', 'title="doubling " + _conf.NAME')
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join(map(str, (install_hz(tmp_path, text), s, a))))
    r = _tv(["list", "hz"], tmp_path, env)
    assert r.returncode == 0 and "doubling two" in r.stdout, r.stdout[-800:] + r.stderr[-800:]
    (s / "hzconst.py").write_text('NAME = "three"\n')  # `find_spec("hzconst")` now finds this one
    r = _tv(["list", "hz"], tmp_path, env)
    assert "doubling three" in r.stdout, r.stdout[-800:]
