"""The source fingerprint of the claim catalogue, and the derivations it caches.

:func:`source_fingerprint` hashes the files the catalogue (``docs/catalogue.json``) is computed from
(see :mod:`proofs_checks.output.catalogue`). :func:`cached_derivation` hands the runner a claim's
derivation — steps, obligations decided, assumptions, hypotheses' counterexamples — from that file
while its fingerprint matches the sources, so symbolic-size derivations are computed once per source
version, not on every run (``TVERIFY_DERIVATION_CACHE=0`` recomputes). Imports nothing of the project.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["source_fingerprint", "file_hash", "cached_derivation", "catalogue_path", "derivation_cache_on"]

_PKG = Path(__file__).resolve().parent  # proofs_checks/
_ROOT = _PKG.parent
#: the catalogue schema this cache reads (the catalogue module's ``SCHEMA``)
_SCHEMA = 1


def _sources() -> list[Path]:
    """The files the catalogue's content is computed from: the claim modules, ``theory/`` (the
    derivations), ``numerics/`` (the hypotheses' counterexamples compute with it), the registry and the claim model,
    the runner and its results and derivation report, the catalogue module and this one."""
    files = (sorted((_PKG / "claims").rglob("*.py")) + sorted((_ROOT / "theory").rglob("*.py"))
             + sorted((_ROOT / "numerics").rglob("*.py")))
    files += [_PKG / n for n in ("registry.py", "claim_model.py", "check_result.py", "runner.py", "run_results.py",
                                 "run_derivation.py")]  # (the registry and the runner as split in session 29)
    files += [_PKG / "output" / "catalogue.py", _PKG / "fingerprint.py"]
    return [f for f in files if "__pycache__" not in f.parts]


def source_fingerprint(*, plugins: bool = True) -> str:
    """SHA-256 over the relative paths and contents of the files the catalogue is computed from, and
    (``plugins``) the installed claim plugins (:func:`_plugin_fingerprint`)."""
    h = hashlib.sha256()
    for f in _sources():
        h.update(str(f.relative_to(_ROOT)).encode() + b"\0" + _digest(f))
    if plugins:
        _plugin_fingerprint(h)
    return h.hexdigest()


#: a source file's SHA-256 by its version: (path, device, inode, size, modification and change times)
_DIGESTS: dict[tuple, bytes] = {}


def _digest(f: Path) -> bytes:
    """SHA-256 of ``f``'s bytes, computed once per version of the file in this process (each in-process command
    hashed the ~60,000 lines of sources again: 12 ms a `show`; issue 46)."""
    try:
        st = os.stat(f)
    except OSError:
        return hashlib.sha256(b"<missing>").digest()
    key = (str(f), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _DIGESTS:
        try:
            _DIGESTS[key] = hashlib.sha256(f.read_bytes()).digest()
        except OSError:
            return hashlib.sha256(b"<missing>").digest()
    return _DIGESTS[key]


def code_fingerprint() -> str:
    """SHA-256 of the code a process runs claims with: :func:`source_fingerprint`'s files (by their names relative to
    the project) and each installed plugin's files by their names relative to its package (no absolute path, no
    ``RECORD``), so a Dask worker on another machine with the same code has the same one. A long-lived worker keeps the
    code it imported: a task carries its command's fingerprint and a worker that loaded other code refuses it
    (:mod:`proofs_checks.distributed.cluster`; hostile pass 24a F4)."""
    h = hashlib.sha256()
    for f in _sources():
        h.update(str(f.relative_to(_ROOT)).encode() + b"\0" + _digest(f))
    _plugin_fingerprint(h, relative=True)
    return h.hexdigest()


def _plugin_fingerprint(h, relative: bool = False) -> None:
    """Mix in the ``tverify.claims`` entry points (names, targets, distribution versions and the
    plugin modules' sources) when any is installed; with none, the fingerprint is unchanged."""
    try:
        from importlib.metadata import entry_points
        from importlib.util import find_spec

        eps = sorted((e for e in entry_points(group="tverify.claims") if not e.value.startswith("proofs_checks.")),
                     key=lambda e: (e.name, e.value))  # this project's own entry point: its sources are hashed
    except Exception:  # pragma: no cover - broken metadata: no plugins
        return
    if eps and not relative:  # where a plugin's load-time helpers are found: another $PYTHONPATH finds other files
        h.update(f"PYTHONPATH\0{os.environ.get('PYTHONPATH', '')}".encode("utf-8", "surrogateescape"))  # (24a F8)
    for ep in eps:
        dist = getattr(ep, "dist", None)
        h.update(f"plugin\0{ep.name}\0{ep.value}\0{getattr(dist, 'version', '')}".encode())
        try:  # the installed files as pip recorded them (a reinstall or upgrade changes RECORD)
            if not relative:
                h.update(hashlib.sha256((dist.read_text("RECORD") or "").encode() if dist is not None else b"").digest())
        except Exception:
            h.update(b"<no RECORD>")
        try:  # every file of the plugin's top-level package (editable installs), its data files too (a title read
            # from a text file beside the module: 21a F12b); a package imported from a zip, the archive (21a F12)
            spec = find_spec(ep.value.split(":")[0].strip().split(".")[0])
            if spec is None:
                files = []
            elif spec.submodule_search_locations:
                files = _package_files(spec.submodule_search_locations)
                if files is None:  # no bounded list of its files: never the same fingerprint, so nothing cached
                    h.update(b"<unbounded>" + (b"" if relative else os.urandom(16)))
                    continue
            else:
                files = [Path(spec.origin)] if spec.origin else []
            files += sorted({_archive(str(f)) for f in [*files, Path(spec.origin or "")] if spec is not None
                             and _archive(str(f))})
            base = Path(spec.origin or "").parent if spec is not None else Path()
            for f in files:
                name = os.path.relpath(f, base) if relative else str(f)
                h.update(name.encode() + b"\0" + hashlib.sha256(Path(f).read_bytes()).digest())
        except Exception:  # a plugin that cannot be found: load_all warns about it
            h.update(b"<unavailable>")


#: the most files a plugin package's fingerprint reads (a link to a folder far above it would hash a whole tree)
MAX_PLUGIN_FILES = 20_000


def _package_files(folders) -> list[Path] | None:
    """Every file below a plugin package's folders, linked folders followed (23a F4), each folder once by its device
    and inode: two links to ``.`` made 2^40 paths and hung every command (hostile pass 24a F3). ``None`` past
    :data:`MAX_PLUGIN_FILES` files (a link to a folder high above the package)."""
    seen, files = set(), []
    for d in folders:
        for root, dirs, names in os.walk(d, followlinks=True):
            try:
                st = os.stat(root)
            except OSError:
                dirs[:] = []
                continue
            if (st.st_dev, st.st_ino) in seen or "__pycache__" in root:
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            files.extend(Path(root, n) for n in names if os.path.isfile(os.path.join(root, n)))
            if len(files) > MAX_PLUGIN_FILES:
                return None
    return sorted(files)


def _archive(path: str) -> Path | None:
    """The zip archive a module path lies in (``…/plugins.zip/pkg/claims.py`` → ``…/plugins.zip``), or None."""
    p = Path(path)
    for parent in [p, *p.parents]:
        if parent.suffix.lower() in (".zip", ".whl", ".egg", ".pyz") and parent.is_file():
            return parent
    return None



def file_hash(path: str) -> str:
    """SHA-256 of a file's bytes (``<missing>`` when it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "<missing>"


def resolves_to(name: str, path: list[str]) -> str | None:
    """Where the import system finds the module ``name`` on ``path`` (its origin; for a namespace package
    ``"namespace:"`` and the folders it spans), found as the import system does but without running any package's code;
    None where it finds none."""
    from importlib.machinery import PathFinder

    parts, search, spec = name.split("."), path, None
    for i in range(len(parts)):
        if search is None:
            return None
        try:
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), list(search))
        except (ImportError, OSError, ValueError):
            return None
        if spec is None:
            return None
        search = spec.submodule_search_locations
    origin = getattr(spec, "origin", None)
    if not isinstance(origin, str) or origin == "namespace":  # a namespace package: the folders it spans, in order
        # (a folder of that name put earlier on the path changes what importlib.resources reads: 27a F6)
        return "namespace:" + os.pathsep.join(map(str, search or ()))
    return origin


def names_resolve(names) -> bool:
    """Whether every module name of ``names`` (``{name: origin}``; an origin of None: an import that failed) resolves
    on this process's path as it did (a module of that name put earlier on the path, one that appeared where an
    import failed, a relative path entry read from another folder: hostile pass 26a F1/F5); another shape is False."""
    import sys

    path = [p for p in sys.path if isinstance(p, str)]
    return isinstance(names, dict) and all((o is None or isinstance(o, str)) and resolves_to(str(n), path) == o
                                           for n, o in names.items())


def catalogue_path() -> Path:
    """``docs/catalogue.json`` of the checkout the package runs from."""
    return _ROOT / "docs" / "catalogue.json"


_FRESH: dict[str, Any] = {}


def _fresh_derivations() -> dict[str, dict[str, Any]]:
    """``{claim id: derivation info}`` from ``docs/catalogue.json`` when its fingerprint matches the
    sources now (read once per process and fingerprint), else ``{}``."""
    fp = source_fingerprint()
    if _FRESH.get("fingerprint") == fp:
        return _FRESH["derivations"]
    out: dict[str, dict[str, Any]] = {}
    try:
        doc = json.loads(catalogue_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        doc = None
    if (isinstance(doc, dict) and doc.get("schema") == _SCHEMA and doc.get("fingerprint") == fp
            and not doc.get("depends_on") and isinstance(doc.get("claims"), list)):
        out = {e["id"]: e["derivation"] for e in doc["claims"]
               if isinstance(e, dict) and isinstance(e.get("derivation"), dict) and "id" in e}
    _FRESH.update(fingerprint=fp, derivations=out)
    return out


_OFF, _ON = ("0", "no", "false", "off"), ("1", "yes", "true", "on", "")


def derivation_cache_on() -> bool:
    """``$TVERIFY_DERIVATION_CACHE``, the one reader of it: ``0``/``no``/``false``/``off`` (any case) turn the
    derivation caches off, ``1``/``yes``/``true``/``on``, empty or unset keep them on; anything else is a
    :class:`~proofs_checks.errors.UsageError` (one line, exit 2), never read as on (hostile pass 4, N3).

    >>> os.environ["TVERIFY_DERIVATION_CACHE"] = "OFF"; derivation_cache_on()
    False
    >>> os.environ["TVERIFY_DERIVATION_CACHE"] = "maybe"; derivation_cache_on()
    Traceback (most recent call last):
    ...
    proofs_checks.errors.UsageError: TVERIFY_DERIVATION_CACHE must be 0/no/false/off or 1/yes/true/on, got 'maybe'
    >>> del os.environ["TVERIFY_DERIVATION_CACHE"]
    """
    value = os.environ.get("TVERIFY_DERIVATION_CACHE", "1").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    from proofs_checks.errors import UsageError  # the lowest layer; this module imports nothing else of the project

    raise UsageError(f"TVERIFY_DERIVATION_CACHE must be 0/no/false/off or 1/yes/true/on, "
                     f"got {os.environ['TVERIFY_DERIVATION_CACHE'][:40]!r}")


def cached_derivation(claim_id: str) -> dict[str, Any] | None:
    """The claim's derivation info as the fresh catalogue holds it (a copy), or ``None`` (no fresh
    catalogue, the claim is not in it, or ``TVERIFY_DERIVATION_CACHE=0``)."""
    if not derivation_cache_on():
        return None
    info = _fresh_derivations().get(claim_id)
    return copy.deepcopy(info) if info is not None else None


def derivation_budget() -> float:
    """Seconds a claim's derivation (building it and deciding its obligations) may take before the
    claim is ``undecided``: ``$TVERIFY_DERIVATION_BUDGET`` (a positive number of seconds; ``inf``: no
    limit), else 300 (unset). Anything else (empty, ``abc``, ``0``, ``-1``, ``nan``, ``1e400``) is a
    :class:`~proofs_checks.errors.UsageError` (one line, exit 2), checked before a run starts."""
    import math

    from proofs_checks.errors import UsageError

    text = os.environ.get("TVERIFY_DERIVATION_BUDGET")
    if text is None:
        return 300.0
    try:
        v = float(text) if "_" not in text and text.isascii() else math.nan  # float() reads "1_0" and "١٠" as 10
    except ValueError:
        v = math.nan
    if text.strip().lower() in ("inf", "infinity", "+inf"):
        return math.inf
    if not (math.isfinite(v) and 0 < v <= MAX_BUDGET):
        raise UsageError(f"TVERIFY_DERIVATION_BUDGET must be a number of seconds > 0 and at most {MAX_BUDGET:g} "
                         f"(or inf: no limit), got {text!r}")
    return v


#: the largest finite derivation budget (setitimer's range); ``inf`` means no limit
MAX_BUDGET = 1e8
