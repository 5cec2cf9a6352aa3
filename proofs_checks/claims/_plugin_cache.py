"""A plugin claim's derivation kept in the store's cache, where the claim declares it may be (issue 44).

A plugin's derivation is the author's code: its result may depend on files, links, folders, environment variables and
whatever else it reads, and no record of what it read can be complete (passes 12 to 22 found a read missed each time:
a link retargeted, a file created where none was, a helper's bytecode, an enumerated environment, ``os.readlink``, a
listing through a descriptor, a module appearing earlier on the path). So a plugin's derivation is computed every
time, in its child, unless the claim declares ``derivation_pure=True`` — its result depends on nothing but the code:
its package and tverify's — and then it is kept under the fingerprint of those sources, as the built-in claims'
derivations are kept in docs/catalogue.json. The author's declaration decides; docs/extending.md says so.
"""

from __future__ import annotations

import json
import os

class _DerivationCache:
    """A plugin claim's derivation info (steps, obligations and their verdicts), kept in the store's
    cache under the fingerprint of every source it is computed from — tverify's own (theory/, the
    registry, the runner), the installed plugins' (entry points, versions, RECORD, package files:
    :func:`proofs_checks.fingerprint.source_fingerprint`) and the helper modules the plugins imported
    from outside site-packages — as the built-in claims' derivations are kept in docs/catalogue.json.
    So ``tverify show`` (and ``run``) builds a declared-pure plugin derivation once per source version, not on
    every call (33–73 s for the scaffold's). A derivation that failed or ran out of time is not kept;
    ``TVERIFY_DERIVATION_CACHE=0`` turns the cache off; an unwritable store only costs time."""

    def __init__(self, claim_id: str, sources=()):
        """``sources``: the plugins' helper modules (``proofs_checks.claims.PLUGIN_SOURCES``); ``None``: the claim does
        not declare ``derivation_pure``, and nothing is kept or read."""
        self.claim_id, self.path = claim_id, None
        from proofs_checks.fingerprint import derivation_cache_on

        if sources is None or not derivation_cache_on():
            return
        try:
            import hashlib

            from proofs_checks.fingerprint import file_hash, source_fingerprint

            h = hashlib.sha256(f"plugin derivation\0{claim_id}\0{source_fingerprint()}".encode())
            for f in sorted(sources):  # (proofs_checks.claims.PLUGIN_SOURCES)
                h.update(f"\0{f}\0{file_hash(f)}".encode())
            self.path = _store_cache_dir() / "derivations" / f"{h.hexdigest()[:32]}.json"
        except Exception:  # noqa: BLE001 - no fingerprint, no cache: the derivation is computed
            self.path = None

    def read(self, obligations: bool) -> dict | None:
        if self.path is None:
            return None
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        ok = (isinstance(doc, dict) and doc.get("claim") == self.claim_id and isinstance(doc.get("info"), dict)
              and (doc.get("obligations") or not obligations) and _unchanged(doc.get("lazy")))
        return doc["info"] if ok else None

    def write(self, info: dict, obligations: bool, lazy=None) -> None:
        """Keep ``info``; ``lazy``: the source files of the modules the derivation imported while it ran (not known
        before it ran, so not in the key): kept beside it with their hashes, and a read whose file changed misses."""
        if self.path is None or info.get("error") or info.get("timeout") or not isinstance(lazy, (list, type(None))):
            return
        try:
            from proofs_checks.fingerprint import file_hash
            from proofs_checks.store import atomic_write_text

            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"claim": self.claim_id, "obligations": bool(obligations),
                                                     "info": info,
                                                     "lazy": {str(f): file_hash(str(f)) for f in lazy or ()}}))
        except (OSError, TypeError, ValueError):
            pass


def _unchanged(lazy) -> bool:
    """Whether every file a kept derivation imported while it ran still has the bytes it had (a missing file, or an
    entry of another shape, misses)."""
    from proofs_checks.fingerprint import file_hash

    return isinstance(lazy, dict) and all(isinstance(h, str) and h != "<missing>" and file_hash(str(f)) == h
                                          for f, h in lazy.items())


def _store_cache_dir():
    """The cache folder of this command's store: ``--store`` (the command's, else tverify's), else
    ``$TVERIFY_STORE`` or the per-user default."""
    from proofs_checks.store import resolve_store

    option = None
    try:
        import click

        ctx = click.get_current_context(silent=True)
        for c in (ctx, ctx.find_root() if ctx is not None else None):
            option = option or (c.params.get("store_dir") if c is not None else None)
    except Exception:  # noqa: BLE001 - not under the CLI
        option = None
    return resolve_store(option).cache_dir
