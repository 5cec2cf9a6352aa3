"""Cache files of the store that only tverify wrote: sealed with a key kept in the store's ``cache/`` folder.

A cache in the store (the catalogue with its derivations, the plugins' entries, a plugin's kept derivation) is read
back by ``list``, ``show`` and ``run`` as tverify's own output, deeply nested (a derivation's steps, obligations and
hypotheses). Checking every field's shape on every read would be a second copy of everything that writes them, and
passes 7 to 43 found a shape it missed each time (43b F1, F2: an entry of another shape in a catalogue cache or in a
kept derivation ended ``list``/``show``/``run`` in a traceback). So a cache is used only if tverify wrote it: its first
line is an HMAC-SHA256 of the rest under a random key made once per store (``cache/seal.key``, mode 0600, never
followed through a link). A file edited, copied from another store, or written by an older tverify does not match and
is rebuilt, as a missing one is; a store where the key cannot be made only costs time (nothing is kept).

This is integrity against edits and accidents, not a defence against someone who reads the key: the store is the
user's own folder.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

__all__ = ["read_sealed", "write_sealed", "KEY_NAME"]

KEY_NAME = "seal.key"
_PREFIX = b"tverify-seal "
_KEY_BYTES = 32
#: the largest cache read (the built-in catalogue with its derivations is ≈ 1.2 MB)
_MAX_BYTES = 256 * 1024**2


#: how a cache file is opened to be read: never through a link, and without blocking (a FIFO put there held `tverify
#: list` for ever at the open itself, hostile pass 44b F12; the fstat after it refuses what is not a regular file)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _read_key(cache_dir: Path) -> bytes | None:
    try:
        fd = os.open(Path(cache_dir) / KEY_NAME, _READ_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        key = os.read(fd, _KEY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return key if len(key) == _KEY_BYTES else None


def _key(cache_dir: Path, create: bool) -> bytes | None:
    """The store's key; made (whole, by a link from a private temporary file: two processes agree on one) when
    ``create`` and there is none. ``None`` where there is none and it cannot be made, or it is not one tverify made."""
    key = _read_key(cache_dir)
    if key is not None or not create:
        return key
    target = Path(cache_dir) / KEY_NAME
    if os.path.lexists(target):  # something else of that name (a link, a folder, a short file): not replaced
        return None
    tmp = Path(cache_dir) / f".{KEY_NAME}.{secrets.token_hex(8)}.tmp"
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, secrets.token_bytes(_KEY_BYTES))
        finally:
            os.close(fd)
        try:
            os.link(tmp, target)
        except FileExistsError:  # another process made it first: theirs is the key
            pass
    except OSError:
        return None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return _read_key(cache_dir)


def _seal(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).hexdigest().encode()


def write_sealed(path: Path, text: str, cache_dir: Path) -> bool:
    """Write ``text`` to ``path`` (atomically) under the seal of ``cache_dir``'s key; False where nothing was
    written (no key can be made there; the caller's cache then only costs time). ``OSError`` passes through."""
    from proofs_checks.store import atomic_write_bytes

    key = _key(cache_dir, create=True)
    if key is None:
        return False
    body = text.encode("utf-8")
    atomic_write_bytes(Path(path), _PREFIX + _seal(key, body) + b"\n" + body)
    return True


def read_sealed(path: Path, cache_dir: Path) -> str | None:
    """The text :func:`write_sealed` wrote to ``path``, or ``None``: no such file, a link or not a regular file,
    unreadable, too large, no key, or a seal that does not match (edited, another store's, an older tverify's)."""
    key = _key(cache_dir, create=False)
    if key is None:
        return None
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    head, sep, body = data.partition(b"\n")
    if not sep or not head.startswith(_PREFIX) or not hmac.compare_digest(head[len(_PREFIX):], _seal(key, body)):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None
