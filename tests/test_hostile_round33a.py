"""Hostile pass 27a reproducers: all fixed. The plugin caches keep reads by any mode, path kind, name and thread (F1:
a data file read by a relative name, from another folder; F2: a file opened "r+", as np.memmap's default does; F3: a
file opened by a bytes path; F7: a read in another thread), helpers from a zip archive (F4), namespace packages (F6), and
what a plugin reads while it loads (F5)."""

from __future__ import annotations

import os

from tests.test_hostile_round32a import _env, _listed_then, _tv
from tests.tiers import moved


def _pure_hz(tmp_path, read_c, title=None):
    """The hz plugin, declared pure, with ``read_c`` (and its title ``"doubling " + title`` where given)."""
    from hz_plugin import hz_plugin, install_hz

    text = hz_plugin(read_c, "hostile 27a").replace('kind="identity",', 'kind="identity", derivation_pure=True,')
    if title is not None:
        text = text.replace('title="doubling"', f'title="doubling " + {title}')
    return install_hz(tmp_path, text)


ARGS = ["run", "hz.dbl", "--quick", "--no-progress"]


def _verified_then_refuted(env, cwd, edit, cwd_after=None) -> None:
    """``tverify run hz.dbl`` in ``cwd`` is verified; after ``edit()`` (in ``cwd_after``, if given) it is refuted: the kept
    derivation is not read once what it read changed."""
    r = _tv(ARGS, cwd, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    edit()
    r = _tv(ARGS, cwd_after or cwd, env)
    assert r.returncode == 1 and "refuted" in r.stdout, r.stdout[-800:]


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_relative_data_file_read_from_another_folder_not_stale(tmp_path):
    pz = _pure_hz(tmp_path, 'def READ_C():\n    with open("hzc.txt") as f:\n        return int(f.read())\n')
    x, y = tmp_path / "X", tmp_path / "Y"
    x.mkdir()
    y.mkdir()
    (x / "hzc.txt").write_text("2\n")
    (y / "hzc.txt").write_text("3\n")  # what `open("hzc.txt")` reads in Y: the obligation C - 2 = 1 is false
    env = _env(tmp_path, PYTHONPATH=str(pz))
    _verified_then_refuted(env, x, lambda: None, y)  # the same command from Y


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_memmap_r_plus_read_edit_not_stale(tmp_path):
    import numpy as np

    dat = tmp_path / "c.dat"
    np.array([2.0]).tofile(dat)
    pz = _pure_hz(tmp_path, f'def READ_C():\n    import numpy as np\n'
                            f'    return int(np.memmap({str(dat)!r}, dtype="float64", shape=(1,))[0])\n')
    env = _env(tmp_path, PYTHONPATH=str(pz))
    def edit():
        np.array([3.0]).tofile(dat)
    _verified_then_refuted(env, tmp_path, edit)


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_bytes_path_read_edit_not_stale(tmp_path):
    c = tmp_path / "c.txt"
    c.write_text("2\n")
    pz = _pure_hz(tmp_path, f'def READ_C():\n    with open({os.fsencode(c)!r}) as f:\n        return int(f.read())\n')
    env = _env(tmp_path, PYTHONPATH=str(pz))
    def edit():
        c.write_text("3\n")
    _verified_then_refuted(env, tmp_path, edit)


def _zip(folder, name, text):
    import zipfile

    z = folder / "A.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(name, text)
    return z


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_a_zipped_helper_and_a_namespace_package_keep_their_names")
def test_zip_lazy_helper_shadowed_not_stale(tmp_path):
    pz = _pure_hz(tmp_path, 'def READ_C():\n    import importlib\n    return importlib.import_module("hzlazy").C\n')
    s = tmp_path / "S"
    s.mkdir()
    z = _zip(tmp_path, "hzlazy.py", "C = 2\n")
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{s}:{z}")
    def edit():
        (s / "hzlazy.py").write_text("C = 3\n")  # found before the archive now
    _verified_then_refuted(env, tmp_path, edit)


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_a_zipped_helper_and_a_namespace_package_keep_their_names")
def test_catalogue_zip_helper_shadowed_not_stale(tmp_path):
    pz = _pure_hz(tmp_path, "import hzconst\n\n\ndef READ_C():\n    return hzconst.C\n", "hzconst.NAME")
    s = tmp_path / "S"
    s.mkdir()
    z = _zip(tmp_path, "hzconst.py", 'C = 2\nNAME = "two"\n')
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{s}:{z}")
    _listed_then(tmp_path, env, "doubling two", (s / "hzconst.py", 'C = 3\nNAME = "three"\n'), "doubling three")


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_catalogue_helper_loaded_by_path_edit_not_stale(tmp_path):
    conf = tmp_path / "A" / "hzconf.py"
    conf.parent.mkdir()
    conf.write_text('C = 2\nNAME = "two"\n')
    rc = ("import importlib.util as _ilu\n"
          f"_spec = _ilu.spec_from_file_location('hzconf', {str(conf)!r})\n"
          "_conf = _ilu.module_from_spec(_spec)\n_spec.loader.exec_module(_conf)\n\n\n"
          "def READ_C():\n    return _conf.C\n")
    pz = _pure_hz(tmp_path, rc, "_conf.NAME")
    env = _env(tmp_path, PYTHONPATH=str(pz))
    _listed_then(tmp_path, env, "doubling two", (conf, 'C = 3\nNAME = "three"\n'), "doubling three")


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_a_zipped_helper_and_a_namespace_package_keep_their_names")
def test_namespace_package_resource_shadowed_not_stale(tmp_path):
    pz = _pure_hz(tmp_path, 'def READ_C():\n    import importlib.resources\n'
                            '    return int(importlib.resources.files("hzdata").joinpath("c.txt").read_text())\n')
    a, s = tmp_path / "A" / "hzdata", tmp_path / "S"
    a.mkdir(parents=True)
    s.mkdir()
    (a / "c.txt").write_text("2\n")
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{s}:{a.parent}")
    def edit():
        (s / "hzdata").mkdir()
        (s / "hzdata" / "c.txt").write_text("3\n")  # importlib.resources.files("hzdata") now finds this c.txt first
    _verified_then_refuted(env, tmp_path, edit)


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_catalogue_helper_that_raised_importerror_fixed_not_stale(tmp_path):
    pz = _pure_hz(tmp_path, 'try:\n    import hzconst\n    NAME = hzconst.NAME\nexcept ImportError:\n'
                            '    NAME = "fallback"\n\n\ndef READ_C():\n    return 2\n', "NAME")
    a = tmp_path / "A"
    a.mkdir()
    (a / "hzconst.py").write_text('raise ImportError("needs a newer scipy")\n')
    env = _env(tmp_path, PYTHONPATH=f"{pz}:{a}")
    _listed_then(tmp_path, env, "doubling fallback", (a / "hzconst.py", 'NAME = "three"\n'), "doubling three")


@moved("two `tverify run` or `list` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round32.py::test_reads_kept_by_mode_path_kind_name_and_thread")
def test_file_read_in_a_thread_while_another_is_hashed_not_stale(tmp_path):
    big, c = tmp_path / "big.bin", tmp_path / "c.txt"
    with open(big, "wb") as f:
        f.truncate(400_000_000)  # sparse: no disk, but hashing it takes a while
    c.write_text("2\n")
    rc = ("def READ_C():\n    import time\n    from concurrent.futures import ThreadPoolExecutor\n\n"
          "    def read(p):\n        with open(p, 'rb') as f:\n            return f.read(16)\n\n"
          "    with ThreadPoolExecutor(2) as ex:\n"
          f"        b = ex.submit(read, {str(big)!r})\n        time.sleep(0.05)\n"
          f"        v = ex.submit(read, {str(c)!r}).result()\n        b.result()\n    return int(v)\n")
    pz = _pure_hz(tmp_path, rc)
    env = _env(tmp_path, PYTHONPATH=str(pz))
    def edit():
        c.write_text("3\n")
    _verified_then_refuted(env, tmp_path, edit)
