"""Store caches are read back only if tverify wrote them (proofs_checks.sealed; hostile pass 43b F1, F2)."""

import os
import stat

from proofs_checks.sealed import KEY_NAME, read_sealed, write_sealed


def test_a_sealed_cache_reads_back_and_an_edit_does_not(tmp_path):
    p = tmp_path / "c.json"
    assert write_sealed(p, '{"a": 1}', tmp_path)
    assert read_sealed(p, tmp_path) == '{"a": 1}'
    assert stat.S_IMODE(os.stat(tmp_path / KEY_NAME).st_mode) == 0o600
    head, body = p.read_text().split("\n", 1)
    p.write_text(head + "\n" + body.replace("1", "2"))  # the JSON edited, the seal kept
    assert read_sealed(p, tmp_path) is None
    p.write_text(body)  # plain JSON (an older tverify's cache, or a hand-written one)
    assert read_sealed(p, tmp_path) is None


def test_another_stores_cache_and_a_missing_key_do_not_match(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_sealed(a / "c.json", "x", a)
    write_sealed(b / "c.json", "y", b)
    (b / "c.json").write_bytes((a / "c.json").read_bytes())  # copied from another store
    assert read_sealed(b / "c.json", b) is None
    (a / KEY_NAME).unlink()
    assert read_sealed(a / "c.json", a) is None


def test_a_key_or_cache_behind_a_link_is_never_followed(tmp_path):
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    write_sealed(elsewhere / "c.json", "x", elsewhere)
    (store / KEY_NAME).symlink_to(elsewhere / KEY_NAME)
    (store / "c.json").symlink_to(elsewhere / "c.json")
    assert read_sealed(store / "c.json", store) is None  # the key is a link: no key
    assert not write_sealed(store / "d.json", "y", store)  # and none is made over it: nothing kept
    assert not (store / "d.json").exists()
    (store / KEY_NAME).unlink()
    write_sealed(store / "e.json", "z", store)
    assert read_sealed(store / "c.json", store) is None  # the cache itself a link


def _edited(path, change) -> None:
    """The cache's JSON changed in place, its seal line kept (as tests/test_hostile_round48b.py edits it)."""
    import json

    head, body = path.read_text().split("\n", 1)
    doc = json.loads(body)
    change(doc)
    path.write_text(head + "\n" + json.dumps(doc))


def test_a_kept_plugin_derivation_of_another_shape_is_a_miss(tmp_path, monkeypatch):
    """In-process pin of 43b F2 (the end-to-end case runs in the integration tier): steps and obligations of another
    shape in a kept derivation are never read back."""
    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("TVERIFY_DERIVATION_CACHE", raising=False)
    from proofs_checks.claims._plugin_cache import _DerivationCache

    cache = _DerivationCache("zz.dbl", set())
    info = {"steps": [], "obligations": [], "error": None, "timeout": None}
    cache.write(info, True, {"files": {}, "names": {}})
    assert cache.read(True) == info
    _edited(cache.path, lambda doc: doc["info"].update(steps=[1], obligations=[None]))
    assert cache.read(True) is None


def test_a_catalogue_cache_entry_of_another_shape_is_not_read(tmp_path):
    """In-process pin of 43b F1 (the end-to-end case runs in the integration tier): the store's catalogue cache is
    read only as tverify wrote it."""
    import json

    from proofs_checks.output.catalogue import SCHEMA, _read

    path = tmp_path / "catalogue-x.json"
    write_sealed(path, json.dumps({"schema": SCHEMA, "claims": [{"id": "attn.softmax_simplex"}]}), tmp_path)
    assert _read(path, tmp_path) is not None
    for entry in ({"id": 5}, {"id": "attn.softmax_simplex", "group": "attn"}):
        _edited(path, lambda doc, e=entry: doc["claims"].__setitem__(0, e))
        assert _read(path, tmp_path) is None


def test_a_fifo_as_a_cache_or_as_the_key_is_no_hang(tmp_path):
    """In-process pin of 44b F12 (the end-to-end cases run `tverify list`): a FIFO where the cache or its key should be
    is read as no cache, at once."""
    import threading

    p = tmp_path / "c.json"
    assert write_sealed(p, "x", tmp_path)
    results = []
    for victim in (p, tmp_path / KEY_NAME):
        victim.unlink()
        os.mkfifo(victim)
        t = threading.Thread(target=lambda: results.append(read_sealed(p, tmp_path)), daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), f"read_sealed blocked on a FIFO at {victim.name}"
    assert results == [None, None]
