"""A plugin claim's derivation kept in the store's cache, and the record of what it read (issue 44).

A plugin's derivation is user code: its result may depend on files, folders and environment variables beyond its
sources. The derivation's child records what it read (:func:`_record_reads`) and the cached entry answers only while
each is as it was (:func:`_inputs_unchanged`); a derivation whose inputs cannot be listed (a process started, the
network, C code loaded) is never kept. docs/extending.md, "A plugin's derivation is cached", says what is seen.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

class _DerivationCache:
    """A plugin claim's derivation info (steps, obligations and their verdicts), kept in the store's
    cache under the fingerprint of every source it is computed from — tverify's own (theory/, the
    registry, the runner), the installed plugins' (entry points, versions, RECORD, package files:
    :func:`proofs_checks.fingerprint.source_fingerprint`) and the helper modules the plugins imported
    from outside site-packages — as the built-in claims' derivations are kept in docs/catalogue.json.
    So ``tverify show`` (and ``run``) builds a plugin's derivation once per source version, not on
    every call (33–73 s for the scaffold's). A derivation that failed or ran out of time is not kept;
    ``TVERIFY_DERIVATION_CACHE=0`` turns the cache off; an unwritable store only costs time."""

    def __init__(self, claim_id: str, sources=()):
        self.claim_id, self.path = claim_id, None
        from proofs_checks.fingerprint import derivation_cache_on

        if not derivation_cache_on():
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
              and (doc.get("obligations") or not obligations) and _inputs_unchanged(doc.get("inputs")))
        return doc["info"] if ok else None

    def write(self, info: dict, obligations: bool, inputs: dict | None) -> None:
        if (self.path is None or info.get("error") or info.get("timeout") or not isinstance(inputs, dict)
                or inputs.get("uncacheable")):
            return
        try:
            from proofs_checks.store import atomic_write_text

            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"claim": self.claim_id, "obligations": bool(obligations),
                                                     "info": info, "inputs": inputs}))
        except (OSError, TypeError, ValueError):
            pass


def _inputs_unchanged(inputs: Any) -> bool:
    """Whether what a cached derivation read (:func:`_record_reads`) is as it was: each file's bytes, each name it
    opened, looked up or listed still leading to the same file (or still absent), each folder listing, each
    environment variable's value (the whole environment where the derivation enumerated it). An entry recorded
    with a reason it cannot be cached (a process started, a socket, C code loaded) never answers."""
    if not isinstance(inputs, dict) or inputs.get("uncacheable") or not all(
            isinstance(inputs.get(k), dict) for k in ("files", "env", "names", "listings")):
        return False
    from proofs_checks.fingerprint import file_hash

    try:  # (the child's environment is this one; a COLUMNS it adds for a terminal only costs a rebuild; the child
        # works in this working folder, where a relative name must still be the same file)
        env = inputs["env"]
        return (all(file_hash(f) == h for f, h in inputs["files"].items())
                and all(os.environ.get(k) == v for k, v in env.items())
                and (not inputs.get("env_all") or set(os.environ) == {k for k, v in env.items() if v is not None})
                and all(_leads_to(n) == p for n, p in inputs["names"].items())
                and all(_listing(d) == h for d, h in inputs["listings"].items()))
    except (OSError, TypeError, ValueError):
        return False


def _leads_to(name: str) -> str | None:
    """The file a name leads to now (links followed), or None where nothing is there."""
    return os.path.realpath(name) if os.path.lexists(name) else None


def _listing(folder: str) -> str | None:
    """A hash of a folder's entry names (None where it cannot be listed)."""
    import hashlib

    try:
        return hashlib.sha256("\0".join(sorted(os.listdir(folder))).encode("utf-8", "surrogateescape")).hexdigest()
    except OSError:
        return None


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


# audit events after which nothing this process reads can be listed: another process, the network, C code loaded
_UNCACHEABLE = {"subprocess.Popen": "started a process", "os.system": "started a process", "os.exec": "started a "
                "process", "os.posix_spawn": "started a process", "os.spawn": "started a process", "os.fork": "forked",
                "pty.spawn": "started a process", "socket.connect": "used the network", "socket.getaddrinfo": "used the "
                "network", "urllib.Request": "used the network", "ctypes.dlopen": "loaded C code",
                "ctypes.dlsym": "loaded C code"}


def _record_reads():  # pragma: no cover - runs in the derivation's child
    """From now on in this process, record what the plugin's import and its derivation read beyond their sources
    (:class:`_Reads`); return the function that ends the recording and gives the record. A plugin's derivation reading a
    data file or a variable was answered from the cache after that input changed: a false obligation read as holding
    (hostile passes 12a F10, 19a F3, 20a F2, 21a F1-F3, F5, F14: a link retargeted, a file created where the derivation
    had found none, a helper module edited while its bytecode stayed, a new variable of an enumerated prefix, a SQLite
    URI)."""
    rec = _Reads()
    rec.start()
    return rec.finish


def _reading(args) -> bool:
    """``open``'s audit arguments (name, mode, flags): a read, not a file the derivation writes."""
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return flags & os.O_ACCMODE != os.O_WRONLY


def _sqlite_file(db) -> str | None:
    """The file ``sqlite3.connect`` opens for ``db`` (a path, or a ``file:`` URI with ``uri=True``), or None."""
    name = os.fsdecode(db) if isinstance(db, (str, bytes, os.PathLike)) else None
    if name is not None and name.startswith("file:"):
        from urllib.parse import unquote, urlsplit

        name = unquote(urlsplit(name).path) or None
    return None if name in (None, "", ":memory:") else name


class _Reads:  # pragma: no cover - runs in the derivation's child
    """The record: ``files`` (path -> sha256), ``names`` (each name opened, looked up with ``os.stat``/``lstat``/
    ``access`` — ``os.path.exists``, ``pathlib``'s ``exists()`` — or listed -> the file it led to, or None where nothing
    was there), ``listings`` (folder -> hash of its entries), ``env`` (variable -> value; the whole environment, with
    ``env_all``, where it was enumerated), ``uncacheable`` (why nothing can be listed: a process started, the network,
    C code loaded)."""

    LOOKUPS = ("stat", "lstat", "access")  # no audit event: wrapped while recording, put back by finish()

    def __init__(self):
        self.installed = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
        self.files: set[str] = set()
        self.names: dict[str, str | None] = {}
        self.listings: set[str] = set()
        self.env_names: set[str] = {"PYTHONPATH"}  # which file an import finds: a module imported late (19a F3)
        self.env_all, self.uncacheable, self.on = False, None, True
        self.before = set(sys.modules)
        self.originals = {f: getattr(os, f) for f in self.LOOKUPS}

    def start(self) -> None:
        sys.addaudithook(self.hook)
        for fname, fn in self.originals.items():
            setattr(os, fname, self._looked_up(fn))
        self._watch_environ()

    def note(self, name, listed: bool = False) -> None:
        if not self.on or not isinstance(name, (str, bytes, os.PathLike)):
            return  # (a descriptor: opened by name before)
        self.on = False  # (what this looks up itself is not the derivation's)
        try:
            name = os.fsdecode(name)
            path = _leads_to(name)
            if path is None or not path.startswith(self.installed):
                self.names.setdefault(name, path)
                if path is not None and os.path.isfile(path):
                    self.files.add(path)
                elif listed and path is not None:
                    self.listings.add(path)
        finally:
            self.on = True

    def hook(self, event, args) -> None:
        if event == "sqlite3.connect" and args:  # (sqlite opens its file in C, past "open": 20a F2b)
            self.note(_sqlite_file(args[0]))
        elif event == "open" and args and _reading(args):
            self.note(args[0])
        elif event in ("os.listdir", "os.scandir") and args:
            caller = sys._getframe(1).f_code.co_filename  # the import system's scan of sys.path: not the derivation's
            if not caller.startswith("<frozen importlib"):
                self.note(args[0] if args[0] is not None else ".", listed=True)
        elif self.on and event.split(".")[0] in ("subprocess", "os", "pty", "socket", "urllib", "ctypes"):
            why = next((w for prefix, w in _UNCACHEABLE.items() if event.startswith(prefix)), None)
            if why:
                self.uncacheable = self.uncacheable or f"the derivation {why} ({event})"

    def _looked_up(self, fn):
        def wrapper(path, *a, **k):
            self.note(path)
            return fn(path, *a, **k)
        return wrapper

    def _watch_environ(self) -> None:
        """``os.environ`` and ``os.environb`` (which ``os.getenvb`` reads: 20a F2) record the names read, and an
        enumeration (keys(), items(), copy(), a prefix scan) makes every variable count (21a F5)."""
        rec = self

        def recorded(base):
            class Recorded(base):
                def __getitem__(self, key):
                    if isinstance(key, (str, bytes)):  # (os.get_exec_path asks for b"PATH" too)
                        rec.env_names.add(os.fsdecode(key))
                    return super().__getitem__(key)

                def __iter__(self):
                    rec.env_all = True
                    return super().__iter__()

                def __len__(self):
                    rec.env_all = True
                    return super().__len__()
            return Recorded

        for mapping in (os.environ, getattr(os, "environb", None)):
            if mapping is not None:
                mapping.__class__ = recorded(type(mapping))

    def finish(self) -> dict:
        self.on = False  # (before this function's own imports)
        from proofs_checks.fingerprint import file_hash

        for fname, fn in self.originals.items():
            setattr(os, fname, fn)
        for mod in [m for k, m in list(sys.modules.items()) if k not in self.before]:
            # a module imported from its bytecode: its source was only looked at, never opened (21a F3)
            src = getattr(getattr(mod, "__spec__", None), "origin", None) or getattr(mod, "__file__", None)
            if isinstance(src, str) and os.path.isfile(src) and not os.path.realpath(src).startswith(self.installed):
                self.files.add(os.path.realpath(src))
        seen = set(os.environ) if self.env_all else self.env_names
        return {"files": {f: file_hash(f) for f in sorted(self.files)}, "names": dict(sorted(self.names.items())),
                "listings": {d: _listing(d) for d in sorted(self.listings)}, "env_all": self.env_all,
                "env": {k: os.environ.get(k) for k in sorted(seen | self.env_names)}, "uncacheable": self.uncacheable}
