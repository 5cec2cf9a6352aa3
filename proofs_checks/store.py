"""The results store (the last result of each claim, for ``tverify show``) and safe output files.

Where the store is, first match wins:

1. ``--store DIR`` (on ``tverify`` itself or on ``run`` / ``report`` / ``show``);
2. the ``TVERIFY_STORE`` environment variable;
3. the per-user cache: ``$XDG_CACHE_HOME/tverify``, else ``~/.cache/tverify``.

It holds ``last/<claim id>.json`` (one result per claim, replaced by each run) and ``cache/``
(catalogue caches, see :mod:`proofs_checks.catalogue`). Nothing is written to the current folder.

Output paths are checked *before* a run starts (:func:`check_output_file`,
:func:`check_store_writable`), so a long run is never lost at its end to an unwritable path.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OutputPathError", "writable_dir_problem", "Store", "resolve_store", "default_store_dir", "atomic_write_text", "save_last",
           "load_last", "check_output_file", "check_store_writable", "nearest_existing", "default_file_mode"]


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


def check_output_file(path: str | os.PathLike, what: str = "--json") -> Path:
    """Check, before any work, that ``path`` can be written as a file (its parent folders are
    created at write time). Raises :class:`OutputPathError` with one line naming the problem."""
    p = Path(path).expanduser().absolute()
    if str(path).strip() == "":
        raise OutputPathError(f"{what}: empty path")
    if os.path.lexists(p):
        if p.is_dir():
            raise OutputPathError(f"{what} {path}: is a folder, not a file")
        if not p.is_file():
            raise OutputPathError(f"{what} {path}: exists and is not a regular file")
        if not os.access(p, os.W_OK):
            raise OutputPathError(f"{what} {path}: the file is read-only")
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
    try:
        store.last_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.last_dir, prefix=".probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"results store {store.describe()} is not writable: {exc.strerror or exc}"
    return None


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    The file gets ``mode`` if given, else the mode of the file it replaces, else the mode a plain
    ``open`` would give (0666 less the umask; ``mkstemp`` alone would leave it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            mode = default_file_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_last(result_json: dict[str, Any], store: Store | Path | None = None) -> str | None:
    """Record a claim's result as its last one. Returns ``None``, or one line saying why it could
    not be saved (a run goes on; the store was checked before the run started)."""
    st = store if isinstance(store, Store) else (Store(Path(store), "--store") if store else resolve_store())
    try:
        atomic_write_text(st.last_path(result_json["id"]), json.dumps(result_json, indent=1))
    except OSError as exc:
        return f"could not save the result of {result_json['id']} in {st.describe()}: {exc.strerror or exc}"
    return None


def load_last(claim_id: str, store: Store | Path | None = None) -> dict[str, Any] | None:
    """The last recorded result of ``claim_id``, or ``None`` (none, or unreadable)."""
    st = store if isinstance(store, Store) else (Store(Path(store), "--store") if store else resolve_store())
    p = st.last_path(claim_id)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
