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

import contextlib
import json
import os
import threading


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
        from proofs_checks.sealed import read_sealed

        try:  # only what tverify wrote (a kept derivation of another shape was a traceback: hostile pass 43b F2)
            text = read_sealed(self.path, self.path.parent.parent)
            doc = json.loads(text) if text is not None else None
        except (OSError, ValueError, RecursionError):
            return None
        ok = (isinstance(doc, dict) and doc.get("claim") == self.claim_id and isinstance(doc.get("info"), dict)
              and (doc.get("obligations") or not obligations) and _unchanged(doc.get("reads")))
        return doc["info"] if ok else None

    def write(self, info: dict, obligations: bool, reads=None) -> None:
        """Keep ``info`` with ``reads`` (:meth:`Reads.result`: what the derivation read while it ran, not known before
        it ran, so not in the key): a read whose file changed, or whose module name resolves elsewhere now, misses."""
        if self.path is None or info.get("error") or info.get("timeout") or not _well_formed(reads):
            return
        try:
            from proofs_checks.sealed import write_sealed

            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_sealed(self.path, json.dumps({"claim": self.claim_id, "obligations": bool(obligations),
                                                "info": info, "reads": reads}), self.path.parent.parent)
        except (OSError, TypeError, ValueError):
            pass


def _well_formed(reads) -> bool:
    return isinstance(reads, dict) and isinstance(reads.get("files"), dict) and isinstance(reads.get("names"), dict)


def _unchanged(reads) -> bool:
    """Whether every file a kept derivation read while it ran still has the bytes it had, and every module it imported
    by name still resolves, on the path it had, to the file it was loaded from (a module of that name put earlier on the
    path, or a link retargeted, misses: hostile pass 26a F1); a missing file, or an entry of another shape, misses."""
    from proofs_checks.fingerprint import file_hash, names_resolve

    if not _well_formed(reads):
        return False
    return (all(isinstance(h, str) and h != "<missing>" and file_hash(str(f)) == h for f, h in reads["files"].items())
            and names_resolve(reads["names"]))


#: while :class:`Reads` records in a derivation's child: "opened", the list the audit hook appends the files opened
#: to; "hooked", whether the hook is installed (mutated in place: the child's guard refuses a rebound module global)
_STATE: dict = {"opened": None, "hooked": False, "busy": set()}


#: the audit events of a process started (a fork, a subprocess, an exec, a spawn)
_PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                             "os.spawn", "os.startfile"})


def _on_audit(event: str, args: tuple) -> None:
    """Each file opened for reading outside the installation, with its hash taken then (the bytes the derivation
    read: a file edited while it still ran was kept with its new hash and the old result, hostile pass 26a F6); a
    bytecode file stands for its source."""
    opened = _STATE["opened"]
    me = threading.get_ident()  # (imported with this module: an import here is an audit event, which came back here)
    if opened is not None and event in _PROCESS_EVENTS:  # what another process reads is not seen here: nothing is kept
        opened["<unrecorded>"] = "<missing>"  # (a file read in a worker process the derivation started: 28a F2)
        return
    if opened is None or me in _STATE["busy"] or event != "open" or not args or isinstance(args[0], int):
        return  # (a descriptor: os.fdopen of one opened before, nothing named)
    if not isinstance(args[0], (str, bytes)):  # io.FileIO raises the event with the path-like object itself (29a F2)
        try:
            args = (os.fspath(args[0]),) + tuple(args[1:])
        except TypeError:  # something else named no file this hook can hash: nothing is kept
            opened["<unrecorded>"] = "<missing>"
            return
    mode, flags = (args[1], args[2]) if len(args) > 2 else (None, 0)
    # a mode that reads: "r", "rb", "r+" (np.memmap's), "a+"/"w+" (28a F1), and os.open's O_RDONLY or O_RDWR (27a F2)
    reading = ("r" in mode or "+" in mode or not any(c in mode for c in "wax")) if isinstance(mode, str) else (
        isinstance(flags, int) and flags & os.O_ACCMODE in (os.O_RDONLY, os.O_RDWR))
    if not reading:
        return
    _STATE["busy"].add(me)  # (hashing opens the file: not recorded again; in this thread only, another's reads are:
    # 27a F7)
    try:
        f = _source_of(os.fsdecode(args[0]))  # (a bytes path too: 27a F3)
        if os.path.isfile(f) and _outside_installation(f) and f not in opened:
            from proofs_checks.fingerprint import file_hash

            opened[f] = file_hash(f)  # as named: a relative name is read again from the folder a later run is in
            # (a data file read by a relative name from another project folder: 27a F1)
    except Exception:  # noqa: BLE001 - a record missed costs the cache, never the derivation
        opened["<unrecorded>"] = "<missing>"
    finally:
        _STATE["busy"].discard(me)


def _source_of(f: str) -> str:
    """The source file of a bytecode file in ``__pycache__`` where it exists, else ``f``."""
    if f.endswith(".pyc"):
        import importlib.util

        try:
            src = importlib.util.source_from_cache(f)
            return src if os.path.isfile(src) else f
        except (ValueError, NotImplementedError):
            return f
    return f


class _NotFound:
    """The last finder of ``sys.meta_path`` while :class:`Reads` records: asked only when every other finder found
    nothing, it notes the name of an import that fails (an optional helper, ``try: import x``, that appears later
    made the kept result stale: hostile pass 26a F1) and finds nothing either."""

    def __init__(self):
        self.names: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        self.names.add(name)
        return None


@contextlib.contextmanager
def failed_imports(into: dict):
    """While it is open: each import that fails, found nowhere on this process's path, is put into ``into`` as
    ``name: None`` (:class:`_NotFound`, the last finder of ``sys.meta_path``)."""
    import sys

    from proofs_checks.fingerprint import resolves_to

    nf = _NotFound()
    sys.meta_path.append(nf)
    try:
        yield nf
    finally:
        if nf in sys.meta_path:
            sys.meta_path.remove(nf)
        path = [p for p in sys.path if isinstance(p, str)]
        for n in nf.names:
            if n not in sys.modules and resolves_to(n, path) is None:
                into.setdefault(n, None)


def _watch_process_starts() -> None:
    """multiprocessing's "spawn" and "forkserver" contexts start their processes with no audit event (``fork_exec``,
    and the forkserver's own fork in another process): their ``start`` marks the reads unrecorded while a
    :class:`Reads` records (a file read in a spawned pool's worker was kept unseen: 29a F1). Installed once; it does
    nothing while no Reads is open."""
    import multiprocessing.process as mpp

    start = mpp.BaseProcess.start
    if getattr(start, "_tverify_watched", False):
        return

    def watched(self, *args, **kwargs):
        if _STATE["opened"] is not None:
            _STATE["opened"]["<unrecorded>"] = "<missing>"
        return start(self, *args, **kwargs)

    watched._tverify_watched = True
    mpp.BaseProcess.start = watched


class _Asked:
    """The first finder of ``sys.meta_path`` while :class:`Reads` records: notes every name the import system is asked
    for and finds nothing itself (the finders after it do)."""

    def __init__(self):
        self.names: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        self.names.add(name)
        return None


class Reads:
    """In a declared-pure derivation's child, around the derivation: the files it opened for reading (every import,
    by name or by path — ``spec_from_file_location``, ``runpy`` — opens its source or bytecode: hostile pass 26a F3),
    each with its hash when it was opened, and the modules it imported by name, outside the standard library and the
    installed packages (25a F3)."""

    def __enter__(self):
        import importlib.util  # noqa: F401 - (what the hook uses, imported before the snapshot of the modules)
        import sys

        import proofs_checks.fingerprint  # noqa: F401

        self.before = set(sys.modules)
        _STATE["opened"] = {}
        self.failed: dict = {}
        self._failing = failed_imports(self.failed)
        self._failing.__enter__()
        self._asked = _Asked()  # first: every name looked up, kept or not (runpy.run_module, find_spec: 28a F4)
        sys.meta_path.insert(0, self._asked)
        if not _STATE["hooked"]:  # (an audit hook cannot be removed: it does nothing while no Reads is open)
            sys.addaudithook(_on_audit)
            _watch_process_starts()
            _STATE["hooked"] = True
        return self

    def __exit__(self, *exc) -> None:
        import sys

        self.opened, _STATE["opened"] = dict(_STATE["opened"] or {}), None
        if self._asked in sys.meta_path:
            sys.meta_path.remove(self._asked)
        self.names = set(sys.modules) - self.before
        self.asked = self._asked.names - self.names
        self._failing.__exit__(None, None, None)

    def asked_origins(self) -> dict[str, str]:
        return _asked_origins(self)

    def result(self) -> dict:
        """``{"files": {path: sha256}, "names": {module: origin or None}}``; a file hashed when it was opened
        keeps that hash (also under its real path), a module file never opened here (an extension) is hashed now."""
        import sys

        from proofs_checks.fingerprint import file_hash, resolves_to

        mine: set[str] = set()
        record_sources(self.names, mine)
        files = dict(self.opened)
        by_real = {os.path.realpath(f): h for f, h in self.opened.items()}
        for f in mine:
            files.setdefault(f, by_real.get(os.path.realpath(f)) or file_hash(f))
        path = [p for p in sys.path if isinstance(p, str)]
        origins: dict[str, str | None] = {}
        for n in self.names:
            origin = found_on_path(n, path)
            if origin is not None and _recorded(origin, mine):
                origins[n] = origin
            elif _user_namespace(n):  # a namespace package of the user's (a data folder): the folders it spans
                origins[n] = resolves_to(n, path)
        origins.update(self.asked_origins())
        origins.update(self.failed)  # an import that failed: kept as not found (failed_imports)
        return {"files": dict(sorted(files.items())), "names": origins}


def _asked_origins(reads: "Reads") -> dict[str, str]:
    """Each name looked up while ``reads`` recorded and not kept in ``sys.modules`` (``runpy.run_module``, an
    ``exec_module`` of a spec found by name), with the file it resolves to on this process's path, where that file was
    read then: its name is kept as an import's is (a module of that name put earlier on the path misses: 28a F4)."""
    import sys

    from proofs_checks.fingerprint import resolves_to

    path = [p for p in sys.path if isinstance(p, str)]
    read = {os.path.realpath(f) for f in reads.opened if f != "<unrecorded>"}
    out = {}
    for n in sorted(getattr(reads, "asked", ())):
        origin = resolves_to(n, path)
        if isinstance(origin, str) and _recorded(origin, read):
            out[n] = origin
    return out


def _user_namespace(name: str) -> bool:
    """Whether ``name`` is a loaded namespace package (no file) spanning a folder outside the installation."""
    import sys

    mod = sys.modules.get(name)
    return (mod is not None and getattr(mod, "__file__", None) is None and hasattr(mod, "__path__")
            and any(_outside_installation(str(p)) for p in list(mod.__path__)))


def _recorded(origin: str, files: set[str]) -> bool:
    """Whether ``origin`` (a module's file, or a member of an archive on the path) is among ``files``: the file itself,
    or the archive it is in (a helper imported from a zip archive: 27a F4)."""
    real = os.path.realpath(origin)
    return real in files or any(p in files for p in _parents(real))


def _outside_installation(f: str) -> bool:
    """Whether ``f`` lies outside the standard library and the installed packages."""
    import sysconfig

    skip = [os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    return not any(os.path.realpath(f).startswith(d) for d in skip)


def record_sources(names, into: set[str], names_into: dict | None = None) -> None:
    """The files of the modules a plugin imported when it was loaded, outside the standard library and the installed
    packages: a source, a bytecode file or an extension (whatever ``__file__`` names), and for a module imported from a
    zip archive the archive itself (the key of a declared-pure derivation: a helper from a zip, a sourceless ``.pyc``
    or a folder whose name holds "site-packages" was left out, hostile pass 23a F1), into ``into``; with
    ``names_into``, each module's name with its origin where the path finder finds it again (:func:`found_on_path`)."""
    import os
    import sys
    import sysconfig

    skip = [os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(f, str) or not f:
            continue
        real = os.path.realpath(f)
        if any(real.startswith(d) for d in skip):
            continue
        if os.path.isfile(real):
            into.add(real)
            if names_into is not None:
                origin = found_on_path(name, [p for p in sys.path if isinstance(p, str)])
                if origin is not None:
                    names_into[name] = origin
            continue
        for parent in [os.path.dirname(real), *(p for p in _parents(real))]:  # a member of an archive on the path
            if os.path.isfile(parent):
                into.add(parent)
                if names_into is not None:  # (its name looked up again as well: 27a F4)
                    origin = found_on_path(name, [p for p in sys.path if isinstance(p, str)])
                    if origin is not None:
                        names_into[name] = origin
                break


def found_on_path(name: str, path: list[str]) -> str | None:
    """The origin of the loaded module ``name`` where the path finder finds it there on ``path`` (so that a later look
    can tell whether the name still resolves to it); None for a module another importer loaded (an editable
    install's finder, a zip importer hook): its file is recorded, its name cannot be looked up again."""
    import sys

    from proofs_checks.fingerprint import resolves_to

    origin = getattr(getattr(sys.modules.get(name), "__spec__", None), "origin", None)
    return origin if isinstance(origin, str) and resolves_to(name, path) == origin else None


def _parents(path: str):
    import os

    while True:
        up = os.path.dirname(path)
        if up == path:
            return
        yield up
        path = up


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
