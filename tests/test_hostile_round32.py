"""Hostile pass 26: the lead's unit pins of the fixes (the testers' end-to-end reproducers are tests/test_hostile_round32a.py
and 32b.py)."""

from __future__ import annotations

import os
import subprocess
import sys

_FINALIZER = """
import os, signal, sys, weakref
from proofs_checks.console import Terminated, terminate_cleanly
terminate_cleanly()
class O:
    pass
def callback():
    os.kill(os.getpid(), signal.SIGTERM)
    x = 0
    for i in range(100000):  # the handler runs here, inside the finalizer
        x += i
o = O()
weakref.finalize(o, callback)
try:
    del o
    for i in range(10 ** 7):
        pass
    print("not raised")
except Terminated as exc:
    print("raised outside the finalizer", exc.signum)
"""


def test_a_signal_swallowed_in_a_finalizer_is_raised_again_outside_it():
    """26a F4: a SIGTERM landing in a weakref finalizer (torch's, as a command ends) was printed as "Exception ignored
    in" with a traceback and dropped; it is now sent again and raised outside the finalizer."""
    r = subprocess.run([sys.executable, "-c", _FINALIZER], capture_output=True, text=True, timeout=120)
    assert "raised outside the finalizer 15" in r.stdout and "Traceback" not in r.stderr, (r.stdout, r.stderr)


def test_what_a_pure_derivation_read_is_kept_and_a_change_or_a_shadow_misses(tmp_path, monkeypatch):
    """25a F3, 26a F1/F3: the files a declared-pure derivation opened while it ran (a module imported lazily by name, a
    helper loaded by path) are kept with their hashes, and each module imported by name with where it was found; an
    edit, or a module of that name put earlier on the path, misses the kept derivation."""
    import importlib.util

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    from hz_plugin import shadow_folders

    a, s = shadow_folders(tmp_path, {"zzlazy26.py": "C = 2\n", "zzconf26.py": "C = 2\n"}, monkeypatch)
    try:
        with Reads() as reads:
            importlib.import_module("zzlazy26")
            spec = importlib.util.spec_from_file_location("zzconf26_by_path", a / "zzconf26.py")
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        kept = reads.result()
    finally:
        sys.modules.pop("zzlazy26", None)
    assert str(a / "zzconf26.py") in kept["files"] and kept["names"] == {"zzlazy26": str(a / "zzlazy26.py")}
    assert _unchanged(kept)
    (s / "zzlazy26.py").write_text("C = 3\n")  # earlier on the path: the name is found elsewhere now
    assert not _unchanged(kept)
    (s / "zzlazy26.py").unlink()
    assert _unchanged(kept)
    (a / "zzconf26.py").write_text("C = 3\n")  # the helper loaded by path edited
    assert not _unchanged(kept)


def test_an_import_that_failed_misses_once_the_module_appears(tmp_path, monkeypatch):
    """26a F1 (an optional helper): ``try: import x`` failing during the derivation recorded nothing, and the kept
    result outlived the helper's appearance."""
    import importlib

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    monkeypatch.syspath_prepend(str(tmp_path))
    with Reads() as reads:
        try:
            importlib.import_module("zzoptional26")
        except ImportError:
            pass
    kept = reads.result()
    assert kept["names"].get("zzoptional26", "absent") is None and _unchanged(kept)
    (tmp_path / "zzoptional26.py").write_text("C = 3\n")
    assert not _unchanged(kept)


def test_a_lambda_grid_value_is_shipped_as_a_path_only_when_its_suffix_names_a_file(tmp_path, monkeypatch):
    """26a F2: a file named "1,2" in the working folder turned the grid value --lambda 1,2 into a path on a cluster;
    check icl reads --lambda as a file only by its suffix, and the sweep ships it by the same rule."""
    from proofs_checks.distributed.sweep import RowSpec, _shipped

    monkeypatch.chdir(tmp_path)
    for name in ("1,2", "L.txt", "m.py"):
        (tmp_path / name).write_text("x\n")
    row = RowSpec("check icl", "check", "k", (("lambda", "1,2"), ("N", "5")), 0, 0, "quick", "cpu")
    assert dict(_shipped(row).point) == {"lambda": "1,2", "N": "5"}
    row = RowSpec("check icl", "check", "k", (("lambda", "L.txt"), ("model", "m.py:f")), 0, 0, "quick", "cpu")
    assert dict(_shipped(row).point) == {"lambda": str(tmp_path / "L.txt"), "model": f"{tmp_path / 'm.py'}:f"}


def test_a_file_edited_while_the_derivation_runs_keeps_the_hash_it_was_read_with(tmp_path, monkeypatch):
    """26a F6: the kept hash was taken after the derivation, so a helper edited while it still ran was kept with its new
    hash beside the result of its old bytes; the hash is now the one of the bytes opened."""
    import hashlib
    import importlib

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    (tmp_path / "zzedit26.py").write_text("C = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with Reads() as reads:
            importlib.import_module("zzedit26")
            (tmp_path / "zzedit26.py").write_text("C = 3\n")  # edited while the derivation still runs
        kept = reads.result()
    finally:
        sys.modules.pop("zzedit26", None)
    assert kept["files"][str(tmp_path / "zzedit26.py")] == hashlib.sha256(b"C = 2\n").hexdigest()
    assert not _unchanged(kept)


def test_a_cached_catalogue_misses_when_a_plugin_helper_resolves_elsewhere(tmp_path, monkeypatch):
    """26a F5: a cached catalogue was fresh while the helper files it recorded were unchanged, though a module of the
    same name put earlier on the path is what the plugin imports now."""
    from proofs_checks.output.catalogue import deps_fresh

    from hz_plugin import shadow_folders

    a, s = shadow_folders(tmp_path, {"zzconst26.py": "C = 2\n"}, monkeypatch)
    doc = {"resolves": {"names": {"zzconst26": str(a / "zzconst26.py")}}}
    assert deps_fresh(doc)
    (s / "zzconst26.py").write_text("C = 3\n")
    assert not deps_fresh(doc)
    assert not deps_fresh({"resolves": {"names": {"zzconst26": 1}}})  # another shape: never fresh


def test_only_names_the_path_finder_finds_again_are_kept(tmp_path, monkeypatch):
    """A module another importer loaded (tverify's own, through an editable install's finder) cannot be looked up on
    the path again: keeping its name made every cached catalogue with a plugin stale at once. Its file still counts."""
    import importlib

    from proofs_checks.claims._plugin_cache import found_on_path

    (tmp_path / "zzfound26.py").write_text("C = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("zzfound26")
        path = [p for p in sys.path if isinstance(p, str)]
        assert found_on_path("zzfound26", path) == str(tmp_path / "zzfound26.py")
        assert found_on_path("zzfound26", [str(tmp_path / "elsewhere")]) is None
    finally:
        sys.modules.pop("zzfound26", None)
    import proofs_checks.registry as reg

    origin = reg.__spec__.origin
    assert found_on_path("proofs_checks.registry", path) in (origin, None)


def test_a_plugins_failed_import_at_load_makes_the_cached_catalogue_stale_once_it_resolves(tmp_path, monkeypatch):
    """26a F5 with an optional helper: an import a plugin tried when loaded, and that failed, is kept as not found; the
    cached catalogue is stale once a module of that name is found."""
    from proofs_checks.claims._plugin_cache import failed_imports
    from proofs_checks.output.catalogue import deps_fresh

    monkeypatch.syspath_prepend(str(tmp_path))
    names: dict = {}
    with failed_imports(names):
        try:
            import zzoptload26  # noqa: F401
        except ImportError:
            pass
    assert names == {"zzoptload26": None}
    doc = {"resolves": {"names": names}}
    assert deps_fresh(doc)
    (tmp_path / "zzoptload26.py").write_text("NAME = 'three'\n")
    assert not deps_fresh(doc)


def test_a_ctrl_c_swallowed_in_a_finalizer_is_raised_again_outside_it():
    """As 26a F4 for SIGINT: a KeyboardInterrupt raised inside a finalizer was printed and dropped, and the command
    went on to exit 0 (seen once under load in the integration tier's Ctrl-C test). (Python's own SIGINT handler set
    again in the child: a test worker may pass SIGINT on ignored.)"""
    code = _FINALIZER.replace("signal.SIGTERM", "signal.SIGINT").replace(
        "terminate_cleanly()\n", "terminate_cleanly()\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n").replace(
        "except Terminated as exc:\n    print(\"raised outside the finalizer\", exc.signum)",
        "except KeyboardInterrupt:\n    print(\"raised outside the finalizer 2\")")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "raised outside the finalizer 2" in r.stdout and "Traceback" not in r.stderr, (r.stdout, r.stderr)


def test_reads_kept_by_mode_path_kind_name_and_thread(tmp_path, monkeypatch):
    """27a F1-F3, F7: a read in "r+" mode (np.memmap's), by a bytes path, by a relative name (kept as named, read again
    from the folder a later run is in), and a read in another thread while the hook hashes a file, are all kept."""
    import threading

    from proofs_checks.claims._plugin_cache import Reads

    monkeypatch.chdir(tmp_path)
    for name in ("rplus.dat", "bytes.txt", "rel.txt", "thread.txt"):
        (tmp_path / name).write_text(name)
    with Reads() as reads:
        open(tmp_path / "rplus.dat", "r+").close()
        open(os.fsencode(tmp_path / "bytes.txt"), "rb").close()
        open("rel.txt").close()
        t = threading.Thread(target=lambda: open(tmp_path / "thread.txt").close())
        t.start()
        t.join()
    files = reads.result()["files"]
    assert {str(tmp_path / "rplus.dat"), str(tmp_path / "bytes.txt"), "rel.txt", str(tmp_path / "thread.txt")} <= set(files)


def test_a_zipped_helper_and_a_namespace_package_keep_their_names(tmp_path, monkeypatch):
    """27a F4, F6: a helper imported from a zip archive, and a namespace package read through importlib.resources, keep
    how their names resolve, so a module or folder of that name put earlier on the path misses."""
    import importlib
    import zipfile

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    s, data = tmp_path / "S", tmp_path / "D" / "zzns27"
    s.mkdir()
    data.mkdir(parents=True)
    (data / "c.txt").write_text("2\n")
    with zipfile.ZipFile(tmp_path / "A.zip", "w") as z:
        z.writestr("zzzip27.py", "C = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "D"))
    monkeypatch.syspath_prepend(str(tmp_path / "A.zip"))
    monkeypatch.syspath_prepend(str(s))
    try:
        with Reads() as reads:
            importlib.import_module("zzzip27")
            importlib.import_module("zzns27")
        kept = reads.result()
    finally:
        for n in ("zzzip27", "zzns27"):
            sys.modules.pop(n, None)
    assert {"zzzip27", "zzns27"} <= set(kept["names"]) and _unchanged(kept)
    (s / "zzns27").mkdir()  # a folder of that name earlier on the path: the namespace spans it first
    assert not _unchanged(kept)
    (s / "zzns27").rmdir()
    (s / "zzzip27.py").write_text("C = 3\n")
    assert not _unchanged(kept)
