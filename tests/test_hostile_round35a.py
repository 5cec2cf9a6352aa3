"""Hostile pass 29a reproducers (frozen29), all fixed; end-to-end, in the integration tier, each pinned by a unit test of
tests/test_hostile_round34.py. F1: a file a declared-pure derivation reads
in a process it starts through multiprocessing's "spawn" (or "forkserver") context: no audit event of a started process
is raised (multiprocessing.util.spawnv_passfds calls _posixsubprocess.fork_exec directly), so the derivation is kept and
answers after the file changed (its reproducer is the "spawn" case of
tests/test_hostile_round34a.py::test_file_read_in_a_worker_process_edit_not_stale)."""

from __future__ import annotations

from tests.test_hostile_round34a import _env, _listed_then, _tv, _verified_then_refuted
from tests.tiers import moved


@moved("two `tverify run` of a plugin in fresh processes (≈ 20 s)",
       "tests/test_hostile_round34.py::test_a_spawned_process_or_a_path_object_read_is_never_missed")
def test_file_read_with_fileio_of_a_path_object_edit_not_stale(tmp_path):
    data = tmp_path / "c.txt"
    read_c = ("def READ_C():\n    import io, pathlib\n"
              f"    with io.FileIO(pathlib.Path({str(data)!r})) as f:\n        return int(f.read())\n")
    _verified_then_refuted(tmp_path, read_c, data)


@moved("two `tverify list` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_a_spawned_process_or_a_path_object_read_is_never_missed")
def test_catalogue_title_read_with_fileio_of_a_path_object_not_stale(tmp_path):
    _title_read_at_load(tmp_path, "import io as _io, pathlib as _pl\n"
                                  "with _io.FileIO(_pl.Path({title!r})) as _f:\n    _T = _f.read().decode().strip()\n")


def _title_read_at_load(tmp_path, reader: str) -> None:
    """A plugin whose title is read at load time by ``reader`` (code setting ``_T``; ``{title}`` the file), listed,
    the file edited, listed again: the new title."""
    title = tmp_path / "title.txt"
    read_c = "def READ_C():\n    return 2\n\n\n" + reader.format(title=str(title))
    from hz_plugin import hz_plugin, install_hz

    text = hz_plugin(read_c, "hostile 29a").replace('title="doubling"', 'title="doubling " + _T')
    env = _env(tmp_path, PYTHONPATH=str(install_hz(tmp_path, text)))
    title.write_text("two\n")
    _listed_then(tmp_path, env, "doubling two", (title, "three\n"), "doubling three")


@moved("two `tverify list` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_the_catalogue_keeps_a_load_time_read_by_its_hash_when_read_and_never_an_unrecorded_one")
def test_catalogue_of_a_plugin_starting_a_process_at_load_not_stale(tmp_path):
    _title_read_at_load(tmp_path, "import subprocess as _sp, sys as _sys\n"
                                  "_T = _sp.run([_sys.executable, '-c', \"print(open({title!r}).read())\"],\n"
                                  "             capture_output=True, text=True).stdout.strip()\n")


@moved("two `tverify list` of a plugin in fresh processes (≈ 15 s)",
       "tests/test_hostile_round34.py::test_the_catalogue_keeps_a_load_time_read_by_its_hash_when_read_and_never_an_unrecorded_one")
def test_catalogue_title_edited_during_the_load_not_stale(tmp_path):
    title, loads = tmp_path / "title.txt", tmp_path / "loads"
    read_c = ("def READ_C():\n    return 2\n\n\nimport os as _os\n"
              f"with open({str(title)!r}) as _f:\n    _T = _f.read().strip()\n"
              f"with open({str(loads)!r}, 'a') as _f:\n    _f.write('%d\\n' % _os.getpid())\n"
              f"if sum(1 for _ in open({str(loads)!r})) == 2:  # the user's edit while tverify loads the plugin\n"
              f"    with open({str(title)!r}, 'w') as _f:\n        _f.write('three\\n')\n")
    from hz_plugin import hz_plugin, install_hz

    text = hz_plugin(read_c, "hostile 29a").replace('title="doubling"', 'title="doubling " + _T')
    env = _env(tmp_path, PYTHONPATH=str(install_hz(tmp_path, text)))
    title.write_text("two\n")
    r = _tv(["list", "hz"], tmp_path, env)  # the plugin's import probe is load 1, tverify's own load 2 (reads "two")
    assert r.returncode == 0 and "doubling two" in r.stdout and title.read_text() == "three\n", r.stdout[-800:]
    r = _tv(["list", "hz"], tmp_path, env)
    assert "doubling three" in r.stdout, r.stdout[-800:]
