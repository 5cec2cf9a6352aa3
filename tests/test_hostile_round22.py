"""Hostile pass 16 (issue 44): the lead's tests of the fixes of the testers' findings."""

from __future__ import annotations

import sys


def test_the_system_folders_are_found_without_a_callers_sysconfig(tmp_path, monkeypatch):
    """16a F1: ``sysconfig`` is not loaded at start in every environment, and the fixture's first use imported it with
    the test folder first on ``sys.path``: a ``sysconfig.py`` there ran. The folders are now computed with ``sys.path``
    reduced to the standard library's own folders."""
    from proofs_checks import syspath

    marker = tmp_path / "MARKER"
    for name in ("sysconfig", "site"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setattr(syspath, "_FOLDERS", None)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("sysconfig", "site"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    system, own = syspath._system_folders()
    assert not marker.exists()
    assert own and any(p.endswith("site-packages") for p in system), system


def test_a_fifo_or_link_where_a_record_entry_belongs_is_no_entry(tmp_path, monkeypatch):
    """16a F2: a FIFO put where the record keeps an output's entry hung every command writing that output (the entry
    was read with a plain open). It is now opened without blocking or following links: no entry, never a hang."""
    import os
    import threading

    from proofs_checks import owned

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TVERIFY_STORE", raising=False)
    out = tmp_path / "o.json"
    out.write_text("{}")
    assert owned.remember(out) and owned.is_ours(out)
    entry = owned.record_dir() / f"{owned._key(out)}.json"
    entry.unlink()
    os.mkfifo(entry)
    answer = []
    t = threading.Thread(target=lambda: answer.append(owned.is_ours(out)), daemon=True)
    t.start()
    t.join(20)
    assert answer == [False], "is_ours blocked on a FIFO entry"
    entry.unlink()
    (tmp_path / "elsewhere.json").write_text(entry.with_name("x").name)
    entry.symlink_to(tmp_path / "elsewhere.json")
    assert owned.is_ours(out) is False
    for n in range(owned.PRUNE_AT + 1):  # the prune skips it too
        (owned.record_dir() / f"{n:040x}.json").write_text("{}")
    os.unlink(entry)
    os.mkfifo(entry)
    done = threading.Event()
    threading.Thread(target=lambda: (owned._prune(owned.record_dir()), done.set()), daemon=True).start()
    assert done.wait(60), "the prune blocked on a FIFO entry"


def test_an_out_name_the_up_front_check_accepts_is_written_and_replaced(tmp_path, monkeypatch):
    """16a F3: an ``--out`` name of 234–235 bytes passed the up-front check (255 − 20), the run was done, and then the
    temporary folder's name (the name + 22 bytes) was too long: nothing written, exit 2. The siblings' names are now
    shortened to fit; the report is written, and replaced by a second run."""
    from tests.cli_helpers import invoke_in

    name = "b" * 235
    args = ("report", "--out", name, "attn.complexity", "--quick", "--no-progress", "--no-mutants", "--no-reproductions")
    for _ in range(2):
        r = invoke_in(tmp_path, monkeypatch, *args)
        assert r.returncode == 0, r.stderr[-500:]
        assert (tmp_path / name / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert invoke_in(tmp_path, monkeypatch, "report", "--out", "c" * 236, "attn.complexity", "--quick",
                     "--no-progress").returncode == 2
