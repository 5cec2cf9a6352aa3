"""Runs survey entries: a pinned install per release into ``<cache>/<package>-<version>`` (reused when
the running environment already has that exact version), then the worker in its own subprocess with a
time limit. Every failure is a row, never a crash.

The install resolves the release's dependencies against the running environment first
(``pip install --dry-run --report``): what the environment lacks (einops, loguru, regex, ...) is
installed beside the release, each pinned to the version pip resolved, all ``--no-deps`` into the
release's folder; torch, numpy and CUDA wheels always come from the running environment."""

from __future__ import annotations

import contextlib
import errno
import importlib.metadata as md
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from proofs_checks.lifetime import dies_with_this_process
from proofs_checks.survey.catalogue import Entry

__all__ = ["default_cache", "run_entry", "row_verdict"]

ROOT = Path(__file__).resolve().parents[2]


def default_cache() -> Path:
    """``$TVERIFY_SURVEY_CACHE``, else ``.tverify/survey-cache``; a blank value is refused, as a blank ``TVERIFY_STORE``
    is (it was read as unset: hostile pass 60b, a note)."""
    value = os.environ.get("TVERIFY_SURVEY_CACHE")
    if value is not None and not value.strip():
        from proofs_checks.options import UsageError

        raise UsageError("TVERIFY_SURVEY_CACHE is blank: name a folder, or unset it for .tverify/survey-cache")
    return Path(value or ".tverify/survey-cache")


def _in_env(spec: str) -> bool:
    pkg, _, ver = spec.partition("==")
    try:
        return md.version(pkg) == ver
    except md.PackageNotFoundError:
        return False


#: written into a release's folder once its install (with its dependencies) is complete
MARKER = ".tverify-installed-deps"
#: never installed beside a release: the running environment's (a second torch or numpy would shadow it)
_FROM_ENV = ("torch", "numpy", "triton")


def _env_pins() -> list[tuple[str, str]]:
    """(name, version) of the :data:`_FROM_ENV` packages installed here, without a local label (2.13.0+cpu →
    2.13.0, which pip's ``==`` matches against the installed build)."""
    out = []
    for n in _FROM_ENV:
        try:
            out.append((n, md.version(n).split("+")[0]))
        except md.PackageNotFoundError:
            continue
    return out


def _missing_dependencies(spec: str, timeout: float) -> tuple[list[str] | None, str | None]:
    """The pins (``name==version``) that installing ``spec`` into the running environment would add,
    besides ``spec`` itself and the packages of :data:`_FROM_ENV` (and ``nvidia-*``, ``cuda-*``), or (None, why)."""
    with tempfile.TemporaryDirectory(prefix="tverify-resolve-") as d:
        report = Path(d) / "report.json"
        # resolved against the running torch and numpy (without this, timm's torchvision is resolved for the
        # newest torch: a torchvision built for another torch, and CUDA wheels, would be pinned beside it)
        (Path(d) / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in _env_pins()), encoding="utf-8")
        # (-I: isolated from $PYTHONPATH and the user's site folder, as tverify's other children are: a traceback.py on
        # $PYTHONPATH ran in pip and failed the install: hostile pass 36a F2)
        cmd = [sys.executable, "-I", "-m", "pip", "install", "--dry-run", "--no-input", "--disable-pip-version-check", "-q",
               "--report", str(report), "-c", str(Path(d) / "constraints.txt"), spec]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if p.returncode != 0 and "ResolutionImpossible" in (p.stderr or ""):  # a release that excludes the
                del cmd[-3:-1]  # running torch/numpy: resolved as before (its torch/numpy pins still dropped)
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"resolving the dependencies of {spec} ran past {timeout:g} s"
        if p.returncode != 0:
            lines = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.startswith("ERROR")]
            return None, f"resolving the dependencies of {spec} failed: {(lines[-1] if lines else 'pip failed')[:300]}"
        try:
            items = json.loads(report.read_text(encoding="utf-8")).get("install") or []
        except (OSError, ValueError) as exc:
            return None, f"resolving the dependencies of {spec}: unreadable pip report ({exc})"
    own = spec.partition("==")[0].lower().replace("_", "-")
    pins = []
    for it in items:
        meta = it.get("metadata") or {}
        name, ver = str(meta.get("name") or ""), str(meta.get("version") or "")
        key = name.lower().replace("_", "-")
        if not name or key == own or key in _FROM_ENV or key.startswith(("nvidia-", "cuda-")):
            continue
        pins.append(f"{name}=={ver}")
    return sorted(pins), None


def _install(spec: str, cache: Path, timeout: float) -> tuple[Path | None, str | None]:
    """The folder holding ``spec`` and the dependencies the running environment lacks (installed now
    if absent), or (None, why)."""
    folder = cache / spec.replace("==", "-")
    if os.path.lexists(folder):
        if _made_here(folder):
            _drop_bytecode(folder)
            return folder, None
        # anything else there is the user's (tverify's own install appears whole, its marker in it, by one rename):
        # never run, never removed (hostile pass 43b F8: an unpacked release of the same name was deleted)
        return None, (f"the install cache {folder} is not one tverify made here, or it changed since (a folder "
                      "copied, shipped with a repository or edited is never run, nor removed); remove it or choose "
                      "another --cache-dir")
    deps, why = _missing_dependencies(spec, timeout)
    if deps is None:
        return None, why
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=cache))
    except OSError as exc:
        why = ("it, or a folder above it, exists and is not a folder"
               if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror or exc)
        return None, f"cannot create the install cache {cache}: {why}"
    # (-I: isolated from $PYTHONPATH, as above: 36a F2)
    cmd = [sys.executable, "-I", "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check", "-q",
           "--no-compile", "--target", str(tmp), spec, *deps]  # (no bytecode: _drop_bytecode)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        _rm(tmp)
        return None, f"pip install {spec} ran past {timeout:g} s"
    except BaseException:  # Ctrl-C, SIGTERM: pip's half-written folder goes too (hostile pass 43b F10)
        _rm(tmp)
        raise
    if p.returncode != 0:
        _rm(tmp)
        lines = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.startswith("ERROR") or "No space" in ln]
        why = (lines[-1] if lines else (p.stderr.strip().splitlines() or ["pip failed"])[-1]).strip()
        return None, f"pip install {spec} failed: {why[:300]}"
    try:
        (tmp / MARKER).write_text(" ".join(cmd) + "\n", encoding="utf-8")
        if os.path.lexists(folder):  # made by someone else while pip ran: theirs, left as it is
            raise FileExistsError(errno.EEXIST, f"{folder} appeared while pip ran")
        os.rename(tmp, folder)  # (a non-empty folder made in between is refused by the kernel: ENOTEMPTY)
    except OSError as exc:
        _rm(tmp)
        return None, f"cannot write the install cache {cache}: {exc.strerror or exc}"
    from proofs_checks.owned import remember_folder

    remember_folder(folder, _tree(folder), "survey install cache")  # its files' hashes, in tverify's record outside the folder
    return folder, None


def _tree(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (links as their target's text): relative path -> SHA-256."""
    import hashlib

    from proofs_checks.owned import sha256_file

    out = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            f = os.path.join(root, name)
            rel = os.path.relpath(f, folder)
            if "__pycache__" in Path(rel).parts:
                continue  # (bytecode Python writes on import: not what was installed)
            out[rel] = (hashlib.sha256(os.readlink(f).encode("utf-8", "surrogateescape")).hexdigest()
                        if os.path.islink(f) else sha256_file(Path(f)) or "<unreadable>")
    return out


def _drop_bytecode(folder: Path) -> None:
    """Remove every ``__pycache__`` folder of an install cache tverify made, before its worker imports from it: the
    record of the cache's files leaves bytecode out (Python writes it), and a ``.pyc`` planted there with the source's
    time and size in its header ran instead of the recorded source (hostile pass 37a F3). pip installs without
    compiling and the worker writes no bytecode (``PYTHONDONTWRITEBYTECODE``), so the release's recorded sources are
    what runs; a planted file anywhere else is a change to the record, and the cache is refused."""
    import shutil

    for root, dirs, _ in os.walk(folder, followlinks=False):
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            where = os.path.join(root, "__pycache__")
            with contextlib.suppress(OSError):
                if os.path.islink(where):
                    os.unlink(where)
                else:
                    shutil.rmtree(where)


def _made_here(folder: Path) -> bool:
    """Whether ``folder`` is an install cache tverify made (its marker written last) and holds exactly the files it
    recorded: a marker alone was trusted, and a repository shipping ``.tverify/survey-cache/<release>/`` with a
    planted package ran it as that release (hostile pass 21a F13)."""
    from proofs_checks.owned import folder_problems

    if not (folder / MARKER).is_file() or folder.is_symlink():
        return False
    return not folder_problems(folder, sorted(_tree(folder)), "survey install cache")[1]


def _rm(p: Path) -> None:
    import shutil

    shutil.rmtree(p, ignore_errors=True)


def prepare(entry: Entry, cache: Path, *, install: bool, timeout: float) -> tuple[list[str], list[str], str | None]:
    """(sys.path folders, notes, why-not). Pins met by the running environment are not installed."""
    if entry.version is None:
        return [], ["the running torch"], None
    paths, notes = [], []
    for spec in (entry.spec, *entry.extra):
        if _in_env(spec):
            notes.append(f"{spec} (running environment)")
            continue
        folder = cache / spec.replace("==", "-")
        if not install and not _made_here(folder):
            return paths, notes, f"{spec} is not in the running environment nor the cache (--no-install)"
        got, why = _install(spec, cache, timeout)
        if got is None:
            return paths, notes, why
        paths.append(str(got.resolve()))
        notes.append(f"{spec} ({got})")
    return paths, notes, None


def _worker_command(spec: Path, result: Path) -> list[str]:
    """The survey worker's command line: ``-P`` and ``sys.path`` set first thing — the system folders and tverify's
    before ``$PYTHONPATH``'s — as the plugin probe and the checks' fork server start (a ``json.py`` in a folder of
    ``$PYTHONPATH`` ran in the worker: hostile pass 24a F7)."""
    from proofs_checks.guards import child_sys_path

    boot = (f"import sys; sys.path[:] = {child_sys_path()!r}; import runpy; "
            "runpy.run_module('proofs_checks.survey.worker', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-P", "-c", boot, str(spec), str(result)]


def run_entry(entry: Entry, *, cache: Path, mode: str, seed: int, timeout: float, install: bool = True) -> dict[str, Any]:
    """One row: install, run the worker in its own process (killed at ``timeout`` s), read its result."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"name": entry.name, "library": entry.library, "package": entry.package,
                           "version": entry.version, "spec": entry.spec, "declaration": entry.declaration(),
                           "adapter_lines": entry.adapter_lines, "what": entry.what}
    paths, notes, why = prepare(entry, cache, install=install, timeout=max(timeout, 120.0))
    row["install"] = notes
    if why is not None:
        row.update(status="not-installed" if "--no-install" in why else "install-failed", why=why)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        return row
    try:
        with tempfile.TemporaryDirectory(prefix="tverify-survey-") as d:
            spec = {"name": entry.name, "paths": paths, "package": entry.package, "version": entry.version,
                    "module": entry.module, "adapter": entry.adapter, "declare": entry.declare, "mode": mode, "seed": seed}
            sp, rp = Path(d) / "spec.json", Path(d) / "result.json"
            sp.write_text(json.dumps(spec), encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *([os.environ["PYTHONPATH"]]
                                                                            if os.environ.get("PYTHONPATH") else [])]),
                   "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONWARNINGS": "ignore",
                   "PYTHONDONTWRITEBYTECODE": "1",  # (none in the install cache: _drop_bytecode)
                   **dict(entry.env)}  # e.g. KERAS_BACKEND=torch: read when the library is imported
            w0 = time.perf_counter()
            try:
                p = subprocess.run(_worker_command(sp, rp), capture_output=True, text=True, timeout=timeout, env=env,
                                   cwd=d, preexec_fn=dies_with_this_process())
            except subprocess.TimeoutExpired:
                row.update(status="timeout", why=f"no result within the per-entry limit of {timeout:g} s (killed)")
                return row
            row["worker_seconds"] = round(time.perf_counter() - w0, 2)
            if not rp.exists():
                tail = (p.stderr or "").strip().splitlines()[-1:] or [f"exit status {p.returncode}"]
                row.update(status="check-failed", why=f"the worker died: {tail[0][:300]}")
                return row
            res = json.loads(rp.read_text(encoding="utf-8"))
    except OSError as exc:
        row.update(status="check-failed" if exc.errno != errno.ENOSPC else "disk-full",
                   why=f"cannot run the entry: {exc.strerror or exc}")
        return row
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 2)
    row.update({k: v for k, v in res.items() if k != "name"})
    return row


def row_verdict(entry: Entry, row: dict[str, Any]) -> dict[str, Any]:
    """Findings (failed properties that are not by design) and the comparison with ``entry.known``:
    ``expected`` is 'as documented', 'contradicts the record' or None (nothing recorded / not run)."""
    props = row.get("properties") or []
    failed = [p["name"] for p in props if p["status"] == "fail"]
    findings = [n for n in failed if n not in entry.by_design]
    row["failed"], row["findings"] = failed, findings
    row["by_design"] = [n for n in failed if n in entry.by_design]
    k = entry.known or {}
    exp = None
    if row.get("status") == "checked" and k:
        if "bug" in k:
            exp = "as documented" if set(k["bug"]) <= set(failed) else "contradicts the record"
        elif "fix_of" in k:
            bug = k.get("bug_props") or []
            exp = "as documented" if not findings and not (set(bug) & set(failed)) else "contradicts the record"
    row["expected"] = exp
    if row.get("status") == "checked":
        row["verdict"] = row.get("outcome") if findings or row.get("outcome") != "mismatch" else "approximation"
    else:
        row["verdict"] = row.get("status")
    return row


ProgressFn = Callable[[str, dict | None], None]
