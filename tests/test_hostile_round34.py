"""Hostile pass 28: the lead's unit pins of the fixes (the testers' end-to-end reproducers are
tests/test_hostile_round34a.py and 34b.py)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_file_opened_a_plus_is_kept_and_its_edit_misses(tmp_path):
    """28a F1: a file a declared-pure derivation opens with mode "a+" (which reads) is kept with its hash; an edit
    misses the kept derivation."""
    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    data = tmp_path / "c.txt"
    data.write_text("2\n")
    with Reads() as reads:
        with open(data, "a+") as f:
            f.seek(0)
            assert f.read() == "2\n"
    kept = reads.result()
    assert str(data) in kept["files"], kept
    assert _unchanged(kept)
    data.write_text("3\n")
    assert not _unchanged(kept)


def test_a_derivation_that_starts_a_process_is_never_kept():
    """28a F2: what a process the derivation starts reads is not seen: a fork, a subprocess or os.system marks the
    reads unrecorded, and such a record is never fresh."""
    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    for start in (lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
                  lambda: os.system("true"),
                  lambda: os.waitpid(_forked(), 0)):
        with Reads() as reads:
            start()
        kept = reads.result()
        assert "<unrecorded>" in kept["files"] and not _unchanged(kept), kept


def _forked() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid


def test_local_cluster_workers_start_without_the_users_pythonpath_first(tmp_path, monkeypatch):
    """28a F3: while the local cluster's workers are spawned, $PYTHONPATH is unset (its folders came before the
    standard library's in each new interpreter: a signal.py there ran) and set again in the worker (Dask's
    nanny.environ); the path the workers are given holds tverify's own folder before the user's folders."""
    import dask

    from proofs_checks.distributed.cluster import _safe_path
    from proofs_checks.syspath import _system_folders

    user = str(tmp_path / "P")
    monkeypatch.setenv("PYTHONPATH", user)
    monkeypatch.syspath_prepend(user)
    own = _system_folders()[1]
    with _safe_path():
        assert "PYTHONPATH" not in os.environ and os.environ["PYTHONSAFEPATH"] == "1"
        assert dask.config.get("distributed.nanny.environ.PYTHONPATH") == user
        path = [os.path.realpath(p) for p in sys.path if isinstance(p, str) and p]
        assert path.index(own) < path.index(os.path.realpath(user)), path
    assert os.environ["PYTHONPATH"] == user and sys.path[0] == user


def test_a_helper_run_by_name_is_kept_by_name_and_a_shadow_misses(tmp_path, monkeypatch):
    """28a F4: a helper a declared-pure derivation runs by name without leaving it in sys.modules (runpy.run_module,
    or find_spec + exec_module) is kept by name with where it was found; one of that name put earlier on the path
    misses."""
    import importlib.util
    import runpy

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    from hz_plugin import shadow_folders

    a, s = shadow_folders(tmp_path, {"zzrun28.py": "C = 2\n", "zzspec28.py": "C = 2\n"}, monkeypatch)
    with Reads() as reads:
        assert runpy.run_module("zzrun28")["C"] == 2
        spec = importlib.util.find_spec("zzspec28")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    kept = reads.result()
    assert {"zzrun28", "zzspec28"} <= set(kept["names"]), kept
    assert _unchanged(kept)
    for name in ("zzrun28", "zzspec28"):
        (s / f"{name}.py").write_text("C = 3\n")
        importlib.invalidate_caches()
        assert not _unchanged(kept), name
        (s / f"{name}.py").unlink()
        importlib.invalidate_caches()


def test_a_spawned_process_or_a_path_object_read_is_never_missed(tmp_path):
    """29a F1: a process multiprocessing's spawn context starts (no audit event) marks the reads unrecorded; 29a F2: a
    file opened with io.FileIO of a path object is kept by its path."""
    import io
    import multiprocessing as mp
    import pathlib

    from proofs_checks.claims._plugin_cache import Reads, _unchanged

    data = tmp_path / "c.txt"
    data.write_text("2\n")
    with Reads() as reads:
        with io.FileIO(pathlib.Path(data)) as f:
            assert f.read() == b"2\n"
    kept = reads.result()
    assert str(data) in kept["files"] and _unchanged(kept), kept
    with Reads() as reads:
        p = mp.get_context("spawn").Process(target=print, args=("",))
        p.start()
        p.join()
    kept = reads.result()
    assert "<unrecorded>" in kept["files"] and not _unchanged(kept), kept


def test_the_catalogue_keeps_a_load_time_read_by_its_hash_when_read_and_never_an_unrecorded_one(tmp_path, monkeypatch):
    """29a F3: a plugin that starts a process while it loads leaves its reads unrecorded: such a catalogue is never
    fresh; 29a F4: a file a plugin read while it loaded is kept with the hash it had then (edited during the load, the
    catalogue is stale at once)."""
    from proofs_checks import claims
    from proofs_checks.fingerprint import file_hash
    from proofs_checks.output import catalogue

    title = tmp_path / "title.txt"
    title.write_text("two\n")
    then = file_hash(str(title))
    title.write_text("three\n")  # edited after the plugin read it, before the catalogue is kept
    monkeypatch.setattr(claims, "PLUGIN_SOURCES", {str(title)})
    monkeypatch.setattr(claims, "PLUGIN_READ_HASHES", {str(title): then})
    doc: dict = {}
    catalogue._set_deps(doc)
    assert doc["depends_on"] == {str(title): then} and not catalogue.deps_fresh(doc)
    assert not catalogue.deps_fresh({"depends_on": {"<unrecorded>": file_hash("<unrecorded>")}})


def test_memory_held_in_any_ram_backed_filesystem_counts(tmp_path):
    """30a F1: a file written to a tmpfs or devtmpfs other than /dev/shm (/dev, a /tmp held in memory) counts against
    --max-memory, as /dev/shm's growth does."""
    import pytest

    from proofs_checks.sanity._procs import shm_used

    with open("/proc/self/mounts", encoding="utf-8") as fh:
        where = [f[1] for f in (ln.split() for ln in fh) if len(f) > 2 and f[2] in ("tmpfs", "devtmpfs")
                 and f[1] != "/dev/shm" and os.access(f[1], os.W_OK)]
    if not where:
        pytest.skip("no writable tmpfs or devtmpfs other than /dev/shm on this machine")
    before = shm_used()
    path = os.path.join(where[0], f"tverify-pin-{os.getpid()}")
    try:
        with open(path, "wb") as f:
            f.write(b"\1" * (8 << 20))
            f.flush()
            os.fsync(f.fileno())
        assert shm_used() - before >= 7 << 20, (where[0], shm_used() - before)
    finally:
        os.unlink(path)


def test_the_childs_output_is_forwarded_without_ever_blocking_the_supervision():
    """30a F2: a standard error nobody reads blocked the supervising loop in its write (neither --max-memory nor
    --timeout held): the output goes through a writer thread and a bounded queue; what does not fit is dropped and
    said once the stream takes writes again."""
    import threading
    import time

    from proofs_checks.sanity._isolate import _forward, _Forwarder

    go = threading.Event()

    class Stuck:
        def __init__(self):
            self.text = []

        def write(self, t):
            go.wait(30)
            self.text.append(t)

        def flush(self):
            pass

    s = Stuck()
    t0 = time.monotonic()
    for _ in range(1000):
        _forward(b"x" * 1000 + b"\n", s)
    assert time.monotonic() - t0 < 5  # never waited on the stream
    go.set()
    _Forwarder.of(s).drain(10)
    out = "".join(s.text)
    assert "characters of the check's output were dropped" in out and out.count("x" * 1000) < 1000


def test_a_character_split_between_two_reads_of_the_childs_output_is_one_character():
    """31a note: the child's output is read in chunks of 64 kB; a multi-byte character across two of them came out
    as two replacement characters."""
    import io

    from proofs_checks.sanity import _isolate

    buf = io.StringIO()
    data = ("é€" * 5).encode()
    _isolate._forward(data[:5], buf)
    _isolate._forward(data[5:], buf)
    _isolate._Forwarder.of(buf).drain()
    assert buf.getvalue() == "é€" * 5


def test_a_folder_copy_that_failed_is_said_in_a_few_words():
    """31a note: `report --out` on a full disk said the raw list of every file's (source, target, error)."""
    import shutil

    from proofs_checks.cli_batch import _os_error_text

    errors = [(f"/tmp/src/f{i}.png", f"/out/f{i}.png", "[Errno 28] No space left on device") for i in range(40)]
    assert _os_error_text(shutil.Error(errors)) == "[Errno 28] No space left on device (and 39 more files)"
    assert _os_error_text(OSError(28, "No space left on device")) == "No space left on device"


def test_a_path_row_says_when_the_eval_path_fails_too():
    """31b N3: "the eval path keeps it" was said of a property the eval path failed too."""
    from numerics.attention_rules import Property
    from proofs_checks.sanity.attention_render import _eval_fails_too

    kp = Property("key_padding_respected", "fail", 2.0, 0.0, "", "moved")
    path = Property("matches_reference_with_grad", "fail", 2.0, 0.0, "", "on the path with autograd enabled: "
                    "key_padding_respected fails there (the eval path keeps it; a branch on torch.is_grad_enabled() "
                    "or x.requires_grad?): moved")
    other = Property("matches_reference_on_other_paths", "fail", 1.0, 0.0, "", "on training mode: "
                     "causal_no_future_leak fails there (the eval path keeps it; a branch on self.training?): leak")
    _eval_fails_too([kp, path, other])
    assert path.detail.endswith("key_padding_respected fails there (it fails on the eval path too): moved"), path.detail
    assert "(the eval path keeps it; a branch on self.training?)" in other.detail
