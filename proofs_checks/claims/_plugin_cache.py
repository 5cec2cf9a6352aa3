"""A plugin claim's derivation kept in the store's cache, and the record of what it read (issue 44).

A plugin's derivation is user code: its result may depend on files, folders and environment variables beyond its
sources. The derivation's child records what it read (:func:`_record_reads`) and the cached entry answers only while
each is as it was (:func:`_inputs_unchanged`); a derivation whose inputs cannot be listed (a process started, the
network, C code loaded) is never kept. docs/extending.md, "A plugin's derivation is cached", says what is seen.
"""

from __future__ import annotations

import json
import os
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
    """From now on in this process, record what the plugin's import and its derivation read beyond their sources; return
    a function giving the record (``files``: path -> sha256; ``names``: each name opened, looked up (``os.stat``,
    ``os.path.exists``, ``os.access``) or listed -> the file it led to, or None where nothing was there; ``listings``:
    folder -> hash of its entries; ``env``: variable -> value, the whole environment with ``env_all`` where it was
    enumerated; ``uncacheable``: why nothing can be listed). A plugin's derivation reading a data file or a variable
    was answered from the cache after that input changed: a false obligation read as holding (hostile passes 12a F10,
    19a F3, 20a F2, 21a F1-F3, F5: a link retargeted, a file created where the derivation had found none, a helper
    module edited while its bytecode stayed, a new variable of an enumerated prefix)."""
    import os
    import sys

    from proofs_checks.fingerprint import file_hash

    installed = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    files: set[str] = set()
    names: dict[str, str | None] = {}
    listings: set[str] = set()
    env_names: set[str] = {"PYTHONPATH"}  # which file an import finds: a module the derivation imports late (19a F3)
    state = {"env_all": False, "uncacheable": None, "on": True}
    before = set(sys.modules)

    def note(name, listed=False) -> None:
        if not state["on"] or not isinstance(name, (str, bytes, os.PathLike)):
            return  # (a descriptor: opened by name before)
        state["on"] = False  # (what this looks up itself is not the derivation's)
        try:
            name = os.fsdecode(name)
            path = _leads_to(name)
            if path is None or not path.startswith(installed):
                names.setdefault(name, path)
                if path is not None and os.path.isfile(path):
                    files.add(path)
                elif listed and path is not None:
                    listings.add(path)
        finally:
            state["on"] = True

    def reading(args) -> bool:  # open(name, mode, flags): a read, not a file the derivation writes
        mode = args[1] if len(args) > 1 else None
        if isinstance(mode, str):
            return "r" in mode or "+" in mode
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        return flags & os.O_ACCMODE != os.O_WRONLY

    def hook(event, args):
        if event == "sqlite3.connect" and args:  # (sqlite opens its file in C, past "open": 20a F2b)
            name = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else None
            if name is not None and name.startswith("file:"):  # a URI (uri=True): the file it names (21a F14)
                from urllib.parse import unquote, urlsplit

                name = unquote(urlsplit(name).path) or None
            if name not in (None, "", ":memory:"):
                note(name)
        elif event == "open" and args and reading(args):
            note(args[0])
        elif event in ("os.listdir", "os.scandir") and args:
            caller = sys._getframe(1).f_code.co_filename  # the import system's scan of sys.path: not the derivation's
            if not caller.startswith("<frozen importlib"):
                note(args[0] if args[0] is not None else ".", listed=True)
        elif event.split(".")[0] in ("subprocess", "os", "pty", "socket", "urllib", "ctypes"):
            for prefix, why in _UNCACHEABLE.items():
                if why and event.startswith(prefix) and state["on"]:
                    state["uncacheable"] = state["uncacheable"] or f"the derivation {why} ({event})"

    sys.addaudithook(hook)

    def looked_up(fn):
        def wrapper(path, *a, **k):
            note(path)
            return fn(path, *a, **k)
        return wrapper

    originals = {fname: getattr(os, fname) for fname in ("stat", "lstat", "access")}
    for fname, fn in originals.items():  # os.path.exists/isfile/isdir, pathlib's exists(): no audit event
        setattr(os, fname, looked_up(fn))  # (put back by reads(), before the guard compares them)

    environ = os.environ

    class Recorded(type(environ)):
        def __getitem__(self, key):
            if isinstance(key, (str, bytes)):  # (os.get_exec_path asks for b"PATH" too)
                env_names.add(os.fsdecode(key))
            return super().__getitem__(key)

        def __iter__(self):  # keys(), items(), copy(), a prefix scan: every variable counts (21a F5)
            state["env_all"] = True
            return super().__iter__()

        def __len__(self):
            state["env_all"] = True
            return super().__len__()

    environ.__class__ = Recorded
    environb = getattr(os, "environb", None)  # os.environb and os.getenvb read their own mapping (20a F2)
    if environb is not None:
        class RecordedB(type(environb)):
            def __getitem__(self, key):
                if isinstance(key, (str, bytes)):
                    env_names.add(os.fsdecode(key))
                return super().__getitem__(key)

            def __iter__(self):
                state["env_all"] = True
                return super().__iter__()

            def __len__(self):
                state["env_all"] = True
                return super().__len__()

        environb.__class__ = RecordedB

    def reads() -> dict:
        state["on"] = False
        for fname, fn in originals.items():
            setattr(os, fname, fn)
        for mod in [m for k, m in list(sys.modules.items()) if k not in before]:
            # a module imported from its bytecode: its source was only looked at, never opened (21a F3)
            src = getattr(getattr(mod, "__spec__", None), "origin", None) or getattr(mod, "__file__", None)
            if isinstance(src, str) and os.path.isfile(src) and not os.path.realpath(src).startswith(installed):
                files.add(os.path.realpath(src))
        seen = set(os.environ) if state["env_all"] else env_names
        return {"files": {f: file_hash(f) for f in sorted(files)}, "names": dict(sorted(names.items())),
                "listings": {d: _listing(d) for d in sorted(listings)}, "env_all": state["env_all"],
                "env": {k: os.environ.get(k) for k in sorted(seen | env_names)}, "uncacheable": state["uncacheable"]}

    return reads
