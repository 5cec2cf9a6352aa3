"""The results store (the last result of each claim, for ``tverify show``) and safe output files.

Where the store is, first match wins:

1. ``--store DIR`` (on ``tverify`` itself or on ``run`` / ``report`` / ``show``);
2. the ``TVERIFY_STORE`` environment variable;
3. the per-user cache: ``$XDG_CACHE_HOME/tverify``, else ``~/.cache/tverify``.

It holds ``last/<claim id>.json`` (one result per claim, replaced by each run) and ``cache/``
(catalogue caches, see :mod:`proofs_checks.output.catalogue`). Nothing is written to the current folder.

Output paths are checked *before* a run starts (:func:`check_output_file`,
:func:`check_store_writable`), so a long run is never lost at its end to an unwritable path.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OutputPathError", "writable_dir_problem", "Store", "resolve_store", "default_store_dir", "atomic_write_text", "save_last",
           "load_last", "check_output_file", "check_store_writable", "nearest_existing", "default_file_mode",
           "name_problem", "is_tverify_json", "atomic_write_bytes", "StoreEntryError", "validate_entry", "read_entry", "own_installation",
           "refuse_own_installation"]


class OutputPathError(ValueError):
    """An output path cannot be written (or must not be): one line for the user, exit code 2."""


def default_store_dir() -> Path:
    """The per-user default: ``$XDG_CACHE_HOME/tverify`` or ``~/.cache/tverify``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "tverify"


@dataclass(frozen=True)
class Store:
    """A resolved store: its folder and where that choice came from (``--store``,
    ``TVERIFY_STORE`` or ``default``)."""

    root: Path
    source: str

    @property
    def explicit(self) -> bool:
        return self.source != "default"

    @property
    def last_dir(self) -> Path:
        return self.root / "last"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    def last_path(self, claim_id: str) -> Path:
        return self.last_dir / f"{claim_id}.json"

    def describe(self) -> str:
        how = {"--store": "from --store", "TVERIFY_STORE": "from TVERIFY_STORE"}.get(self.source, "the per-user default")
        return f"{self.root} ({how})"


def resolve_store(option: str | os.PathLike | None = None) -> Store:
    """The store chosen by ``--store`` (``option``), ``TVERIFY_STORE`` or the per-user default."""
    if option:
        return Store(Path(option).expanduser().absolute(), "--store")
    env = os.environ.get("TVERIFY_STORE")
    if env:
        return Store(Path(env).expanduser().absolute(), "TVERIFY_STORE")
    return Store(default_store_dir().absolute(), "default")


def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists (a link counts), else its nearest existing ancestor."""
    p = Path(path).absolute()
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # not thread-safe; only reached off Linux
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file (0666 less the umask)."""
    return 0o666 & ~_umask()


def writable_dir_problem(d: Path) -> str | None:
    """Why new entries cannot be created in the existing path ``d`` (``None`` when they can)."""
    if not d.is_dir():
        return f"{d} is not a folder"
    if not os.access(d, os.W_OK | os.X_OK):
        return f"{d} is not writable"
    try:  # access() says yes to root on a read-only mount, /proc, ...: try it
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tverify-probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"{d} is not writable ({exc.strerror or exc})"
    return None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:40] + "…" + text[-15:]


def name_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be created on its file system (a name longer than the file system's
    limit, usually 255 bytes, or a whole path longer than its limit), or ``None``. Checked before a
    run, so a long run is not lost at the end to ``File name too long``. Also refuses NUL bytes."""
    raw = str(path)
    if "\x00" in raw:
        return "the name holds a NUL character"
    p = Path(raw).expanduser().absolute()
    base = nearest_existing(p.parent)
    if not base.is_dir():
        base = base.parent
    try:
        name_max = os.pathconf(base, "PC_NAME_MAX")
        path_max = os.pathconf(base, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        name_max, path_max = 255, 4096
    name_max = min(name_max or 255, 255)
    path_max = path_max or 4096
    for part in p.parts:
        # the temporary sibling of an atomic write adds about 20 bytes to the name
        if len(os.fsencode(part)) + 20 > name_max:
            return (f"the name {_short(part)!r} is {len(os.fsencode(part))} bytes long; this file system allows "
                    f"{name_max} per name (less 20 for the temporary file of an atomic write)")
    if len(os.fsencode(str(p))) + 20 >= path_max:
        return f"the path is {len(os.fsencode(str(p)))} bytes long; this file system allows {path_max}"
    missing = len(p.parts) - len(nearest_existing(p.parent).parts)
    if missing > MAX_NEW_FOLDERS:  # each folder made is a level of Python's recursion (pathlib, os.makedirs)
        return (f"{missing - 1} folders would have to be made on the way; tverify makes at most {MAX_NEW_FOLDERS - 1} "
                "(make the folders first)")
    return None


#: folders an output path may need made on its way, plus one (hostile pass 21a F11: 1100 ended in a RecursionError
#: after the run)
MAX_NEW_FOLDERS = 201


def is_tverify_json(path: Path, limit: int = 256 * 1024**2) -> bool:
    """Was ``path`` written by tverify's ``--json`` (a previous output, which a new run may replace)?
    A JSON object stamped ``"tool": "tverify"``, a ``check`` result (``check`` and ``outcome``), a
    claim result (``id`` and ``status``) or a list of claim entries; an empty file counts (nothing
    is lost)."""
    try:
        if path.stat().st_size == 0:
            return True
        if path.stat().st_size > limit:
            return False
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deeply
        return False
    if isinstance(doc, dict):
        return doc.get("tool") == "tverify" or {"check", "outcome"} <= doc.keys() or {"id", "status"} <= doc.keys() \
            or {"id", "statement"} <= doc.keys() or {"id", "kind", "checks"} <= doc.keys()
    if isinstance(doc, list):
        return all(isinstance(e, dict) and "id" in e for e in doc)
    return False


def own_installation(real: Path, holding: bool = True) -> str | None:
    """What of the running tverify ``real`` holds (``holding``: a folder that would be replaced) or lies inside: its
    Python environment (``sys.prefix``, the interpreter's ``sys.base_prefix``) or the folder of its own code
    (``proofs_checks/``), else ``None``."""
    import sys

    own = Path(__file__).resolve().parent  # proofs_checks/, and its sibling packages theory/ and numerics/ (an
    places = (("the Python environment", sys.prefix), ("the Python installation", sys.base_prefix),  # editable install
              ("tverify's own code", str(own)), ("tverify's own code", str(own.parent / "theory")),  # keeps them
              ("tverify's own code", str(own.parent / "numerics")))  # outside the environment; hostile pass 13a F1)
    for what, where in places:
        place = Path(os.path.realpath(where)) if where else None
        if place is not None and ((holding and _inside(real, place)) or _inside(place, real)):
            return f"{what} ({where})"
    return None


def refuse_own_installation(path: str | os.PathLike, option: str) -> None:
    """:class:`OutputPathError` (one line) when ``path`` lies inside the running tverify's environment or
    code (:func:`own_installation`): every option that names where tverify writes (``--out``, ``--json``,
    ``--store``, ``new-claim --dir``, ``list --docs-dir``; hostile passes 10 and 11)."""
    real = Path(os.path.realpath(Path(path).expanduser().absolute()))
    own = own_installation(real, holding=False)  # these add files to a folder: one holding the environment is fine
    if own:
        raise OutputPathError(f"{option} {path}: inside {own}, which tverify runs from; nothing was written "
                              "(choose a folder of your own)")


def _inside(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def record_root() -> Path:
    """This user's record of written outputs (:mod:`proofs_checks.owned`): ``outputs`` in the per-user folder, whatever
    store a run names."""
    return default_store_dir() / "outputs"


def refuse_inside_record(p: Path, what: str, shown: str) -> None:
    """An output inside the record of written outputs is refused, ``--force`` or not, as ``--out`` there is: an entry
    replaced by a check's JSON made tverify forget that an output was its own (hostile pass 58b F5)."""
    try:
        real, rec = Path(os.path.realpath(p)), Path(os.path.realpath(record_root()))
    except OSError:
        return
    if _inside(rec, real):
        raise OutputPathError(f"{what} {_short(shown)}: inside tverify's record of written outputs ({rec}), whose files "
                              "tverify writes and keeps, --force or not; write it elsewhere")


def refuse_inside_store(p: Path, what: str, shown: str, store: "Store | None" = None) -> None:
    """An output file inside the results store (``store``, else the one ``TVERIFY_STORE`` or the default chooses) is
    refused: the run writes its results there, and ``run --json <store>/last/<id>.json`` was taken over by the run's
    own result, the JSON moved aside (hostile pass 48b F8); inside the record of written outputs too
    (:func:`refuse_inside_record`)."""
    refuse_inside_record(p, what, shown)
    root = (store or resolve_store()).root
    try:
        real, rroot = Path(os.path.realpath(p)), Path(os.path.realpath(root))
    except OSError:
        return
    if _inside(rroot, real):
        raise OutputPathError(f"{what} {_short(shown)}: inside the results store {root}, whose files tverify writes "
                              "and keeps; write it elsewhere")


def check_output_file(path: str | os.PathLike, what: str = "--json", force: bool | None = True) -> Path:
    """Check, before any work, that ``path`` can be written as a file (its parent folders are
    created at write time): a name the file system accepts, a writable parent, and, when ``force``
    is false, no existing file that is not a previous tverify JSON output (``False``: the command
    offers ``--force``; ``None``: it has none; the default ``True`` replaces any file, for outputs
    the tool regenerates such as ``list --markdown``). Raises :class:`OutputPathError`, one line."""
    p = Path(path).expanduser().absolute()
    if str(path).strip() == "":
        raise OutputPathError(f"{what}: empty path")
    problem = name_problem(path)
    if problem:
        raise OutputPathError(f"{what} {_short(str(path))}: {problem}; nothing was run")
    refuse_inside_store(p, what, str(path))
    if os.path.lexists(p):
        if p.is_dir():
            raise OutputPathError(f"{what} {path}: is a folder, not a file")
        if not p.is_file():
            raise OutputPathError(f"{what} {path}: exists and is not a regular file")
        if not os.access(p, os.W_OK):
            raise OutputPathError(f"{what} {path}: the file is read-only")
        if not force and not is_tverify_json(p):
            how = "choose a new name, or add --force to replace it" if force is not None else "choose a new name"
            raise OutputPathError(f"{what} {path}: the file exists and is not a previous tverify JSON output; nothing "
                                  f"was run or written ({how})")
        problem = writable_dir_problem(p.parent)
    else:
        base = nearest_existing(p.parent)
        if base != p.parent.absolute() and not base.is_dir():
            raise OutputPathError(f"{what} {path}: {base} is a file, not a folder")
        problem = writable_dir_problem(base)
    if problem:
        raise OutputPathError(f"{what} {path}: {problem}")
    return p


def check_store_writable(store: Store) -> str | None:
    """Create the store's ``last/`` folder if needed and try a write there. Returns ``None`` when
    it works, else one line saying why not (the caller decides: error or warning)."""
    problem = name_problem(store.last_dir / "probe")
    if problem:
        return f"results store {_short(store.describe())}: {problem}"
    try:
        store.last_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.last_dir, prefix=".probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        if isinstance(exc, FileExistsError) and os.path.islink(store.root) and not store.root.exists():
            # mkdir on a link to nothing says "File exists": say what is there
            return (f"results store {store.describe()} is a symbolic link to {os.readlink(store.root)}, "
                    "which does not exist (create that folder, or name another store)")
        return f"results store {store.describe()} is not writable: {exc.strerror or exc}"
    return None


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    The file gets ``mode`` if given, else the mode of the file it replaces, else the mode a plain
    ``open`` would give (0666 less the umask; ``mkstemp`` alone would leave it 0600)."""
    atomic_write_bytes(path, text, mode)


def atomic_write_bytes(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """:func:`atomic_write_text` of bytes (a sealed cache: :mod:`proofs_checks.sealed`), or of text."""
    path = Path(path)
    tmp = _staged(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _staged(path: Path, text: str | bytes, mode: int | None = None) -> str:
    """``text`` written to a new temporary file beside ``path`` (with ``mode``, else the mode of the file it will
    replace, else a plain ``open``'s): its name, to be put in place by ``os.replace``. Never inside tverify's own code
    or environment, whichever folder on the way is a link (a store whose `last/` linked into theory/ was written there,
    hostile pass 14a F2)."""
    real = Path(os.path.realpath(path.absolute()))
    own = own_installation(real, holding=False)
    if own:
        raise OutputPathError(f"{path}: lands inside {own} (through a link), which tverify runs from; not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            mode = default_file_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(text)
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def atomic_write_pair(items: list[tuple[Path, str]]) -> None:
    """Files that belong together (a catalogue's Markdown and JSON) written each to a temporary file first, then put
    in place one after the other with the terminating signals held: a signal is acted on once every file is replaced,
    so they are replaced together or, where writing one fails, none is."""
    import signal

    staged: list[tuple[str, Path]] = []
    try:
        for path, text in items:
            staged.append((_staged(Path(path), text), Path(path)))
        import threading

        got: list[int] = []
        old = {}
        if threading.current_thread() is threading.main_thread():  # Python's handlers run here, whichever thread the
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):  # signal reached: held by
                try:  # handlers of this block's own, acted on once the files are in place
                    old[sig] = signal.signal(sig, lambda signum, frame: got.append(signum))
                except (ValueError, OSError):
                    pass
        try:
            for tmp, path in staged:
                os.replace(tmp, path)
            staged = []
        finally:
            for sig, handler in old.items():
                with contextlib.suppress(TypeError, ValueError, OSError):  # (None: a handler not set from Python)
                    signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            for sig in dict.fromkeys(got):
                os.kill(os.getpid(), sig)
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def save_last(result_json: dict[str, Any], store: Store | Path | None = None) -> str | None:
    """Record a claim's result as its last one (the caller adds ``sources``, the fingerprint of what it came from, for
    `show` to say when they changed since). Returns ``None``, or one line saying why it could
    not be saved (a run goes on; the store was checked before the run started)."""
    st = store if isinstance(store, Store) else (Store(Path(store), "--store") if store else resolve_store())
    path = st.last_path(result_json["id"])
    if os.path.lexists(path) and not _replaceable(path):
        # never replace what tverify did not write (a store named at a folder of the user's, hostile pass 9)
        return (f"did not save the result of {result_json['id']} in {st.describe()}: {path.name} there is not a "
                "previous tverify result; it was left as it is")
    try:
        atomic_write_text(path, json.dumps(result_json, indent=1))
    except OSError as exc:
        return f"could not save the result of {result_json['id']} in {st.describe()}: {exc.strerror or exc}"
    except OutputPathError as exc:
        return f"did not save the result of {result_json['id']} in {st.describe()}: {exc}"
    return None


def _replaceable(path: Path) -> bool:
    """Whether :func:`save_last` replaces the entry at ``path``: a regular file tverify wrote (a link, a FIFO or a file
    of someone else's is left as it is)."""
    return not path.is_symlink() and path.is_file() and is_tverify_json(path)


class StoreEntryError(ValueError):
    """A store entry that cannot be used (unreadable, not JSON, wrong schema, another claim's id)."""


#: the statuses a claim result may have (see :mod:`proofs_checks.runner`: ``STATUSES``, which a test
#: holds this equal to; "undecided" is what `run` stores for a derivation out of time)
RESULT_STATUSES = ("verified", "evidence", "incomplete", "refuted", "error", "undecided", "inconclusive")
_OPTIONAL_TEXT = ("message", "mode", "device", "kind", "title", "sources", "sources_tverify")


def _num_or_none(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def validate_entry(doc: Any, claim_id: str) -> dict[str, Any]:
    """``doc`` if it is a claim result of ``claim_id`` with the types ``show`` relies on; else
    :class:`StoreEntryError` saying what is wrong (one line)."""
    if not isinstance(doc, dict):
        raise StoreEntryError(f"holds a JSON {type(doc).__name__}, not a claim result")
    if doc.get("id") != claim_id:
        raise StoreEntryError(f"holds the result of {str(doc.get('id'))[:80]!r}, not of {claim_id!r}")
    if doc.get("status") not in RESULT_STATUSES:
        raise StoreEntryError(f"has status {str(doc.get('status'))[:40]!r}, not one of {', '.join(RESULT_STATUSES)}")
    for k in _OPTIONAL_TEXT:
        if doc.get(k) is not None and not isinstance(doc[k], str):
            raise StoreEntryError(f"has a {type(doc[k]).__name__} for {k!r}, not text")
    if doc.get("seed") is not None and not (isinstance(doc["seed"], int) and not isinstance(doc["seed"], bool)):
        raise StoreEntryError(f"has a {type(doc['seed']).__name__} for 'seed', not an integer")
    checks = doc.get("checks")
    if checks is not None:
        if not isinstance(checks, list):
            raise StoreEntryError(f"has a {type(checks).__name__} for 'checks', not a list")
        for i, ch in enumerate(checks):
            if not isinstance(ch, dict):
                raise StoreEntryError(f"check {i + 1} is a {type(ch).__name__}, not an object")
            for k in ("name", "status", "justification", "skip_reason", "error_message", "layer"):
                if ch.get(k) is not None and not isinstance(ch[k], str):
                    raise StoreEntryError(f"check {i + 1} has a {type(ch[k]).__name__} for {k!r}, not text")
            for k in ("error", "tolerance"):
                if not _num_or_none(ch.get(k)):
                    raise StoreEntryError(f"check {i + 1} has a {type(ch[k]).__name__} for {k!r}, not a number")
    return doc


def _warn_entry(message: str) -> None:
    import sys

    print(f"tverify: warning: {message}", file=sys.stderr, flush=True)


#: where :func:`load_last` reports an entry it skips (one line; tests may replace it)
on_bad_entry = _warn_entry


def read_entry(claim_id: str, store: Store | Path | None = None) -> dict[str, Any] | None:
    """The last recorded result of ``claim_id``: ``None`` when there is none; a bad entry raises
    :class:`StoreEntryError` whose message names the file and what is wrong."""
    st = store if isinstance(store, Store) else (Store(Path(store), "--store") if store else resolve_store())
    p = st.last_path(claim_id)
    if not os.path.lexists(p):
        return None
    try:
        if p.is_symlink():  # tverify writes files; a link there is someone else's, never followed
            raise StoreEntryError("is a symbolic link, not an entry tverify wrote")
        if not p.is_file():
            raise StoreEntryError("is not a regular file")
        if p.stat().st_size > 64 * 1024**2:
            raise StoreEntryError(f"is {p.stat().st_size} bytes, too large for a claim result")
        text = p.read_text(encoding="utf-8")
        try:
            doc = json.loads(text)
        except ValueError as exc:
            why = ("truncated" if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip())
                   else " ".join(str(exc).split())[:120])
            raise StoreEntryError(f"is not valid JSON ({why})") from None
        except RecursionError:  # e.g. [[[[…]]]] 100 000 deep: json recurses once per level
            raise StoreEntryError("is not a claim result (JSON nested too deeply to read)") from None
        return validate_entry(doc, claim_id)
    except StoreEntryError as exc:
        raise StoreEntryError(f"store entry {p} {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreEntryError(f"store entry {p} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def load_last(claim_id: str, store: Store | Path | None = None) -> dict[str, Any] | None:
    """The last recorded result of ``claim_id``, or ``None`` (none, or an unusable entry: that one
    is named in one warning line on stderr, see :data:`on_bad_entry`, and skipped)."""
    try:
        return read_entry(claim_id, store)
    except StoreEntryError as exc:  # what the next run does with it, as save_last decides (44b F9: a link was
        st = store if isinstance(store, Store) else (Store(Path(store), "--store") if store else resolve_store())
        p = st.last_path(claim_id)  # "replaced" by a run that left it)
        nxt = ("the next `tverify run` of this claim replaces it" if _replaceable(p) else
               "the next `tverify run` of this claim leaves it as it is, not being an entry tverify wrote: remove it "
               "to record results again")
        on_bad_entry(f"{exc}; skipped ({nxt})")
        return None
