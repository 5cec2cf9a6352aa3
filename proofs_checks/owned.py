"""Outputs that are really ours: a file or folder that tverify replaces without ``--force`` must be
exactly what tverify wrote there, as this user's **record of written outputs** says
(``$XDG_CACHE_HOME/tverify/outputs`` or ``~/.cache/tverify/outputs``: one small entry per path,
written by tverify at write time, outside the output itself).

* A single ``--json`` file is ours when the record names its path with its current content's hash
  (:func:`remember`, :func:`is_ours`). What the file *says* ("tool": "tverify") counts for nothing:
  a user's JSON file, a copy, or a tverify output edited by hand needs ``--force``. An empty file
  counts as replaceable (nothing is lost). A symbolic link at the path is the user's: refused
  without ``--force``; with it the link itself is replaced (never written through).
* A report, survey, sweep or ``check --report`` folder is ours when the record names the folder with
  the SHA-256 of every file in it (:func:`remember_folder`, :func:`folder_problems`): a file the
  record does not list, one changed since, or a link is the user's. The folder also carries the
  stamp ``.tverify-report`` (:data:`proofs_checks.output.report.MARKER`: what wrote it, its files and
  their hashes) for people to read; a stamp proves nothing on its own — it travels with a copied
  folder and can be written by hand — so a folder the record does not list needs ``--force``
  (also a tverify folder copied or moved elsewhere, or written before the record kept folders).
* The check runs before any work and again just before the output is replaced; an output that
  stopped being ours during the run is not replaced (the new output is written beside it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["sha256_file", "folder_hashes", "remember", "is_ours", "record_dir", "check_json_file", "remember_folder",
           "note_seen", "unchanged_since_seen", "what_is_at",
           "folder_problems", "write_json_text"]

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
    from proofs_checks.store import record_root

    return record_root()


def _key(path: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:40]


def remember(path: str | os.PathLike, made_by: str | None = None) -> bool:
    """Record that tverify has just written ``path`` (its real path and content hash; ``made_by``: the command whose
    ``--json`` it is, when a command wrote it). Best effort: ``False`` when the record cannot be written (then a later
    run needs ``--force`` to replace it)."""
    p = Path(path)
    digest = sha256_file(p)
    if digest is None:
        return False
    return _write_entry(p, {"path": os.path.realpath(p), "sha256": digest, **({"made_by": made_by} if made_by else {})})


def _record_problem(where: Path) -> str | None:
    """Why the record folder cannot be tverify's (``None``: it can): a link (an ``outputs/`` linked to a folder of the
    user's, whose files the prune deleted; one linked into ``theory/``), or a place inside tverify's own code or
    environment, links followed ($XDG_CACHE_HOME or $HOME there; hostile pass 15a F1, F2)."""
    from proofs_checks.store import own_installation

    if os.path.islink(where):  # (a link above it, ~/.cache on another disk, is fine: this folder is tverify's)
        return "it is a symbolic link, so it may be a folder of yours"
    own = own_installation(Path(os.path.realpath(where)), holding=False)
    return f"it lies inside {own}, which tverify runs from" if own else None


def _write_entry(p: Path, entry: dict) -> bool:
    where = record_dir()
    try:
        problem = _record_problem(where)
        if problem:
            raise OSError(0, problem)
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".entry.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(entry))
        os.replace(tmp, where / f"{_key(p)}.json")
    except OSError as exc:
        import sys

        try:  # said once, on stderr: the output is written, but a later run will not know it is ours
            print(f"tverify: note: {p} was written, but the record of written outputs could not be kept in "
                  f"{where} ({exc.strerror or exc}): replacing it later needs --force", file=sys.stderr)
        except (OSError, ValueError):
            pass
        return False
    _prune(where)
    return True


#: the largest record entry read (a folder's entry lists its files' hashes: ~100 bytes a file)
ENTRY_LIMIT = 64 << 20


def _read_regular(path: Path, limit: int = ENTRY_LIMIT) -> str:
    """The text of the regular file ``path``, opened without following a link and without blocking: a FIFO,
    device or link put where an entry belongs raises ``OSError`` instead of hanging the command (hostile pass
    16a F2), as does a file over ``limit`` bytes."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise OSError(f"{path}: not a regular file of at most {limit} bytes")
        return f.read(limit + 1).decode("utf-8")


def _entry(p: Path) -> dict | None:
    try:
        doc = json.loads(_read_regular(record_dir() / f"{_key(p)}.json"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("path") != os.path.realpath(p):
        return None
    return doc


def remember_folder(folder: str | os.PathLike, hashes: dict[str, str | None], made_by: str = "report") -> bool:
    """Record that tverify has just written the folder ``folder`` holding exactly ``hashes``
    (relative path -> SHA-256, the stamp included), as the output of the command ``made_by`` (``report``, ``check``,
    ``sweep``, ``reproduce``, ``survey``). Best effort, as :func:`remember`."""
    p = Path(folder)
    if p.is_symlink() or not p.is_dir() or not all(isinstance(h, str) for h in hashes.values()):
        return False
    return _write_entry(p, {"path": os.path.realpath(p), "kind": "folder", "files": dict(hashes), "dirs": _folders(p),
                            "made_by": made_by})


#: the most subfolders :func:`_folders` lists (a report holds a handful)
_FOLDER_LIMIT = 10_000


#: what each command's output folder is called in a refusal
_OUTPUT_OF = {"report": "report of `tverify report`", "check": "report of a check's --report",
              "sweep": "sweep's results", "reproduce": "reproduction", "survey": "survey"}


def _folders(folder: Path) -> list[str]:
    """The relative paths of the folders inside ``folder`` (links not followed, nor listed: they are entries of their
    own); ``["…"]`` past :data:`_FOLDER_LIMIT`."""
    def plain(q: Path) -> bool:  # (a path beyond PATH_MAX raised from is_symlink: listed, and so the user's)
        try:
            return not q.is_symlink()
        except OSError:
            return True

    out: list[str] = []
    for root, dirs, _ in os.walk(folder, onerror=lambda e: None):
        rel = Path(root).relative_to(folder)
        out += [str(rel / d) if str(rel) != "." else d for d in dirs if plain(Path(root) / d)]
        if len(out) > _FOLDER_LIMIT:
            return ["…"]
    return sorted(out)


def folder_problems(folder: str | os.PathLike, files: list[str], made_by: str | None = None) -> tuple[str, list[str]]:
    """Why the existing folder ``folder`` (holding ``files``, relative paths, links included) is not
    exactly what tverify wrote there: ``("", [])`` when it is (the record lists the folder with these
    very files and hashes); else a phrase and the files that are the user's (not listed, changed, or
    all of them when the record does not list the folder). ``made_by``: the command that would replace it; a folder
    another command wrote (a sweep's results under a check's --report: hostile pass 55b F11) is not its to replace."""
    p = Path(folder)
    doc = _entry(p)
    listed = doc.get("files") if doc is not None and doc.get("kind") == "folder" else None
    if not isinstance(listed, dict):
        return ("that tverify's record of written outputs does not list (a copied, moved or hand-made "
                "folder: a .tverify-report stamp inside it proves nothing on its own)", sorted(files))
    other = doc.get("made_by")
    if made_by and isinstance(other, str) and other != made_by:
        return (f"that `tverify {other[:20]}` wrote (its output, not a previous {_OUTPUT_OF.get(made_by, made_by)})",
                sorted(files))
    out = []
    for f in sorted(files):
        want = listed.get(f)
        if not isinstance(want, str):
            out.append(f)
        elif sha256_file(p / f) != want:
            out.append(f"{f} (changed since tverify wrote it)")
    # a folder made in it since (empty, or holding only other folders) is the user's too (hostile pass 54b F3); a record
    # written before folders were listed knows those holding its files
    made = doc.get("dirs")
    known = set(made) if isinstance(made, list) else {str(q) for f in listed for q in Path(f).parents if str(q) != "."}
    out += [f"{d}/ (a folder tverify did not write)" for d in _folders(p) if d not in known]
    return ("with files that are not a tverify report", out)


#: the name of a record entry (:func:`_key`): the prune removes nothing else
_ENTRY_NAME = __import__("re").compile(r"[0-9a-f]{40}\.json")


def _prune(where: Path) -> None:
    """Entries of outputs that no longer exist, once there are more than :data:`PRUNE_AT`: only files named as
    entries, holding an entry (a path and its hash or folder listing) — never another file found there."""
    if _record_problem(where):
        return
    try:
        names = [n for n in os.listdir(where) if _ENTRY_NAME.fullmatch(n)]
    except OSError:
        return
    if len(names) <= PRUNE_AT:
        return
    for n in names:
        try:
            doc = json.loads(_read_regular(where / n))
            if isinstance(doc, dict) and isinstance(doc.get("path"), str) and ("sha256" in doc or "files" in doc) \
                    and not os.path.exists(doc["path"]):
                os.unlink(where / n)
        except (OSError, ValueError, RecursionError):
            pass


#: what was at each output path when the command checked it before its run (:func:`note_seen`): ``--force`` consents
#: to replacing that, not what appears or changes there during the run (hostile passes 19a F5, 20a F1, F3)
_SEEN: dict[str, tuple | None] = {}


def what_is_at(path: str | os.PathLike) -> tuple | None:
    """What is at ``path``, as far as replacing it goes: ``None`` (nothing), else its device, inode, type, size and
    modification time (a file added to or removed from a folder changes the folder's)."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return None
    here = (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    if not stat.S_ISDIR(st.st_mode):
        return here
    # a folder: everything in it, at any depth (a file edited in it, or one added in a subfolder, leaves the folder's
    # own times as they were: --force then replaced a file edited during the run, hostile pass 21a F8); links are
    # not followed; past MAX_SEEN_ENTRIES entries the folder counts as changed whenever it is looked at again
    import hashlib

    h, n = hashlib.sha256(), 0
    for root, dirs, files in os.walk(path, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            n += 1
            if n > MAX_SEEN_ENTRIES:
                return here + (os.urandom(8).hex(),)
            try:
                e = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            h.update(f"{os.path.relpath(os.path.join(root, name), path)}\0{e.st_ino}\0{e.st_mode}\0{e.st_size}\0"
                     f"{e.st_mtime_ns}\0{e.st_ctime_ns}\0".encode("utf-8", "surrogateescape"))
    return here + (h.hexdigest(),)


#: entries of a folder :func:`what_is_at` looks at, at most (a report folder holds a few hundred)
MAX_SEEN_ENTRIES = 100_000


def _seen_key(path: str | os.PathLike) -> str:
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def note_seen(path: str | os.PathLike, *, keep: bool = False, at_start: bool = False) -> None:
    """Remember what is at the output ``path`` now (the check before the run; ``keep``: not over an earlier note).
    ``at_start``: the note the ``tverify`` command takes first thing, before its imports (``proofs_checks._console``),
    which the command's own check then uses in place of what is there by then (a file put at ``--out`` during the
    seconds of start-up was replaced under ``--force``: hostile pass 23a F3)."""
    k = _seen_key(path)
    if at_start:
        _AT_START[k] = what_is_at(path)
    elif k in _AT_START:
        _SEEN[k] = _AT_START.pop(k)
    elif not (keep and k in _SEEN):
        _SEEN[k] = what_is_at(path)


#: each command's default ``--out`` folder (the option's default in the CLI; noted at the command's start too)
DEFAULT_OUT = {"report": "reports", "reproduce": "reproductions", "survey": "survey", "sweep": "sweep"}
#: the files ``list --markdown --docs-dir DIR`` writes into DIR
CATALOGUE_FILES = ("CATALOGUE.md", "catalogue.json")

#: what was at each output path when the `tverify` command started (:func:`note_seen` ``at_start``)
_AT_START: dict[str, tuple | None] = {}


def unchanged_since_seen(path: str | os.PathLike, *, forget: bool = True) -> bool:
    """Is what is at ``path`` what :func:`note_seen` saw (True where nothing was noted)? ``forget``: the note is used
    up (the output is being written)."""
    k = _seen_key(path)
    if k not in _SEEN:
        return True
    seen = _SEEN.pop(k) if forget else _SEEN[k]
    return what_is_at(path) == seen


def is_ours(path: str | os.PathLike) -> bool:
    """Is ``path`` exactly a file tverify wrote (recorded with this content)? An empty file counts;
    a symbolic link never does."""
    p = Path(path)
    try:
        if p.is_symlink() or not p.is_file():
            return False
        if p.stat().st_size == 0:
            return True
    except OSError:
        return False
    doc = _entry(p)
    if doc is None or doc.get("kind", "file") != "file":
        return False
    digest = sha256_file(p)
    return digest is not None and digest == doc.get("sha256")


def _json_refusal(json_path: str, force: bool | None, made_by: str | None = None) -> str | None:
    """Why ``--json json_path`` may not be replaced now (``None``: it may). Only the ownership rules:
    a link, an existing file that is not exactly what tverify wrote there, or the JSON another command wrote (a
    sweep's rows replaced by a check's JSON: hostile pass 58b F4; each command replaces only its own kind of output)."""
    p = Path(json_path).expanduser()
    how = "choose a new name, or add --force to replace it" if force is not None else "choose a new name"
    if os.path.lexists(p) and not os.path.islink(p) and not os.path.isfile(p):  # a folder made there: never replaced
        return f"--json {json_path}: is a folder or another thing that is not a file; nothing was written there"
    if force:
        return None
    if os.path.islink(p):
        try:
            to = os.readlink(p)
        except OSError:
            to = "?"
        how = how.replace("to replace it", "to replace the link itself, its target left as it is")
        return (f"--json {json_path}: is a symbolic link (to {to[:80]}), which is yours; nothing was run or "
                f"written ({how})")
    if os.path.isfile(p) and not is_ours(p):
        return (f"--json {json_path}: the file exists and is not a previous tverify JSON output as tverify wrote "
                f"it (not written by tverify, or changed since); nothing was run or written ({how})")
    other = (_entry(p) or {}).get("made_by") if made_by and os.path.isfile(p) else None
    if isinstance(other, str) and other != made_by:
        return (f"--json {json_path}: the file is the JSON output of `tverify {other[:20]}`, not a previous "
                f"`tverify {made_by}` one; nothing was run or written ({how})")
    return None


def check_json_file(json_path: str, force: bool | None, made_by: str | None = None) -> None:
    """A ``--json`` file that exists may be replaced only when it is exactly what tverify wrote
    there (:func:`is_ours`: a recorded content hash, not what the file says) or with ``force``
    (``None``: the command has no ``--force``); a symbolic link there is the user's (with ``force``
    the link itself is replaced); the other checks of :func:`proofs_checks.store.check_output_file`.
    One-line usage errors; a name ending in '/' (a folder meant) is refused, never written as a file of its name, by
    every command (hostile passes 31a, 33b F1), as is one ending in '.' or '..' (34a F3)."""
    from proofs_checks.errors import UsageError
    from proofs_checks.store import (OutputPathError, check_output_file, name_problem, nearest_existing,
                                     own_installation, writable_dir_problem)

    if not json_path.strip():  # was "is a folder or another thing that is not a file" (Path('') is '.': 58b F3)
        raise UsageError("--json: empty path; give a file, e.g. result.json, or - for the standard output")
    last = os.path.basename(json_path)
    if json_path != "-" and (json_path.endswith(("/", os.sep)) or last in (".", "..")):
        # `new/.` and `new/..` too: they can only be folders (a file `new` was written, or a folder made: 34a F3)
        end = "'/'" if not last else f"'{last}'"
        raise UsageError(f"--json {json_path}: names a folder (it ends with {end}); give a file, e.g. "
                         f"{os.path.join(json_path, 'result.json')}")

    p = Path(json_path).expanduser()
    try:
        own = own_installation(Path(os.path.realpath(p.absolute().parent)) / p.name) if json_path != "-" else None
        if own:  # `--json .venv/bin/tverify --force` replaced tverify's own script (hostile pass 10, F4)
            raise OutputPathError(f"--json {json_path}: refusing to write into {own}: tverify is running from there; "
                                  "nothing was run or written (choose a file elsewhere)")
        why = _json_refusal(json_path, force, made_by)
        if why:
            raise OutputPathError(why)
        if json_path != "-":
            note_seen(p)  # --force covers what is there now, not what a run's minutes later bring
        if os.path.islink(p):  # --force: the link itself is replaced; only the name and the folder matter
            problem = name_problem(json_path) or writable_dir_problem(nearest_existing(p.absolute().parent))
            if problem:
                raise OutputPathError(f"--json {json_path}: {problem}")
            return
        check_output_file(json_path, "--json", force=True if os.path.isfile(p) and not force else force)
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None


def write_json_text(json_path: str, text: str, force: bool | None, made_by: str | None = None) -> None:
    """Write ``text`` to the ``--json`` file ``json_path`` (checked by :func:`check_json_file` before
    the run) and record it (:func:`remember`). Checked once more just before: a file or link that
    appeared there during the run, or one changed since the check, is not replaced — the JSON goes
    to a new file beside it, named in a warning line (:func:`moved_aside`). A link (with ``force``) is replaced
    itself, never written through. An ``OSError`` of the write itself is the caller's to word."""
    import time

    from proofs_checks.errors import UsageError
    from proofs_checks.store import atomic_write_text

    p = Path(json_path).expanduser()
    why = _json_refusal(json_path, force and unchanged_since_seen(p), made_by)  # a file written there during the run:
    # kept
    if why:
        aside = p.with_name(f"{p.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{p.suffix or '.json'}")
        try:
            atomic_write_text(aside, text)
        except OSError as exc:
            raise UsageError(f"{why.split(';')[0]} (it changed during the run); the JSON could not be written "
                             f"beside it either: {exc.strerror or exc}") from None
        remember(aside, made_by)
        moved_aside(f"{why.split(';')[0]} (it changed during the run); it was left as it is and the JSON "
                    f"was written to {aside}")
        return
    from proofs_checks.committing import outputs_committing

    with outputs_committing():  # (the file and its record together: a signal between them left it refused, 41a F5)
        atomic_write_text(p, text)
        remember(p, made_by)


def moved_aside(message: str) -> None:
    """An output written complete under another name than asked, because what was there changed during the run: one
    warning line on stderr; the command's own exit code stands (it was 2, a usage error's, after a full run;
    hostile pass 12a F7)."""
    import sys

    try:
        sys.stderr.write(f"tverify: warning: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
