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
