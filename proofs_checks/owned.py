"""Outputs that are really ours: a file or folder that tverify replaces without ``--force`` must be
exactly what tverify wrote there.

* A report, survey or sweep folder carries the stamp ``.tverify-report``
  (:data:`proofs_checks.output.report.MARKER`) with the SHA-256 of every file it wrote
  (:func:`folder_hashes`); before replacing the folder each file's hash is checked again, and any
  file not listed or changed since is the user's.
* A single ``--json`` file is ours when this user's record of written outputs
  (``$XDG_CACHE_HOME/tverify/outputs`` or ``~/.cache/tverify/outputs``: one small entry per path,
  the path and the SHA-256 of what was written, :func:`remember`) names its path with its current
  content's hash (:func:`is_ours`). What the file *says* ("tool": "tverify") counts for nothing: a
  user's JSON file, a copy, or a tverify output edited by hand needs ``--force``. An empty file
  counts as replaceable (nothing is lost).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["sha256_file", "folder_hashes", "remember", "is_ours", "record_dir", "check_json_file"]

#: entries kept in the record before those of vanished files are pruned
PRUNE_AT = 4000


def sha256_file(path: str | os.PathLike, limit: int | None = None) -> str | None:
    """The SHA-256 of a regular file (not followed through a link); ``None`` for anything else or
    a file larger than ``limit`` bytes."""
    p = Path(path)
    try:
        if p.is_symlink() or not p.is_file():
            return None
        if limit is not None and p.stat().st_size > limit:
            return None
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def folder_hashes(folder: Path, files: list[str]) -> dict[str, str | None]:
    """``{relative path: SHA-256}`` of ``files`` under ``folder`` (``None`` for a link)."""
    return {f: sha256_file(folder / f) for f in files}


def record_dir() -> Path:
    from proofs_checks.store import default_store_dir

    return default_store_dir() / "outputs"


def _key(path: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:40]


def remember(path: str | os.PathLike) -> bool:
    """Record that tverify has just written ``path`` (its real path and content hash). Best effort:
    ``False`` when the record cannot be written (then a later run needs ``--force`` to replace it)."""
    p = Path(path)
    digest = sha256_file(p)
    if digest is None:
        return False
    where = record_dir()
    try:
        where.mkdir(parents=True, exist_ok=True)
        entry = json.dumps({"path": os.path.realpath(p), "sha256": digest})
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".entry.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(entry)
        os.replace(tmp, where / f"{_key(p)}.json")
    except OSError:
        return False
    _prune(where)
    return True


def _prune(where: Path) -> None:
    try:
        names = [n for n in os.listdir(where) if n.endswith(".json")]
    except OSError:
        return
    if len(names) <= PRUNE_AT:
        return
    for n in names:
        try:
            doc = json.loads((where / n).read_text(encoding="utf-8"))
            if not os.path.exists(doc["path"]):
                os.unlink(where / n)
        except (OSError, ValueError, KeyError, TypeError):
            try:
                os.unlink(where / n)
            except OSError:
                pass


def is_ours(path: str | os.PathLike) -> bool:
    """Is ``path`` exactly a file tverify wrote (recorded with this content)? An empty file counts."""
    p = Path(path)
    try:
        if p.is_file() and not p.is_symlink() and p.stat().st_size == 0:
            return True
    except OSError:
        return False
    try:
        doc = json.loads((record_dir() / f"{_key(p)}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("path") != os.path.realpath(p):
        return False
    digest = sha256_file(p)
    return digest is not None and digest == doc.get("sha256")


def check_json_file(json_path: str, force: bool | None) -> None:
    """A ``--json`` file that exists may be replaced only when it is exactly what tverify wrote
    there (:func:`is_ours`: a recorded content hash, not what the file says) or with ``force``
    (``None``: the command has no ``--force``); the other checks of
    :func:`proofs_checks.store.check_output_file`. One-line usage errors."""
    from proofs_checks.errors import UsageError
    from proofs_checks.store import OutputPathError, check_output_file

    p = Path(json_path).expanduser()
    try:
        if not force and os.path.isfile(p) and not os.path.islink(p) and not is_ours(p):
            how = "choose a new name, or add --force to replace it" if force is not None else "choose a new name"
            raise OutputPathError(f"--json {json_path}: the file exists and is not a previous tverify JSON output as "
                                  f"tverify wrote it (not written by tverify, or changed since); nothing was run or "
                                  f"written ({how})")
        check_output_file(json_path, "--json", force=True if os.path.isfile(p) and not force else force)
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
