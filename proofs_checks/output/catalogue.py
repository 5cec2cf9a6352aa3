"""The claim catalogue, generated from the registry: ``docs/CATALOGUE.md`` (for people) and
``docs/catalogue.json`` (for ``tverify list`` / ``show``).

``tverify list --markdown`` regenerates both. Loading the registry imports every claim module and
with them torch, cvxpy and SciPy (seconds); the JSON lets ``list`` and ``show`` answer without
that. It records a *fingerprint* of the sources its content comes from (the claim modules,
``theory/``, ``registry.py``, ``runner.py`` and this module); it is used only while the
fingerprint matches, otherwise the CLI loads the registry and keeps what it computed in the
store's ``cache/`` folder (keyed by fingerprint), so the next call is fast again. For plugins
(entry points ``tverify.claims``) the fingerprint covers each distribution's name, version and
installed-files record (RECORD) and every source file of the plugin's top-level package; a cached
document also records the hashes of the helper modules the plugins imported from outside any
installed distribution (``depends_on``) and is stale when one changed. What no file records (a
claim registered on a condition such as an environment variable) is picked up by
``tverify list --refresh`` / ``show --refresh``.
``tests/test_cli.py`` fails when the committed files are out of date.

This module imports nothing heavy (no SymPy, NumPy, torch).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

__all__ = ["SCHEMA", "LAYERS", "source_fingerprint", "entry", "build", "render_markdown", "repo_docs_dir",
           "load_fresh", "save_cache", "cache_derivation", "derivation_and_origin", "select_entries", "UnknownPatternError", "write_docs"]

SCHEMA = 1
LAYERS = ("symbolic", "numeric", "trained")
_PKG = Path(__file__).resolve().parent.parent  # proofs_checks/
_ROOT = _PKG.parent


from proofs_checks.fingerprint import (  # noqa: E402 (the fingerprint lives below the runner, which reuses it)
    _plugin_fingerprint, file_hash as _file_hash, source_fingerprint)


class UnknownPatternError(LookupError):
    """A pattern matches no claim of the catalogue (same message as the registry's)."""


def entry(claim: Any) -> dict[str, Any]:
    """The catalogue entry of a registered claim (no derivation; the hypotheses without their
    computed counterexamples, which :func:`derivation` adds)."""
    from proofs_checks.runner import statement_json

    from proofs_checks.runner import ISOLATED

    st = statement_json(claim, counterexamples=False)
    return {
        "id": claim.id,
        "group": claim.id.split(".", 1)[0],
        "kind": claim.kind,
        "title": claim.title,
        "statement": claim.statement,
        "stated_statement": claim.stated_statement or None,
        "source": claim.source,
        "notes": claim.notes or None,
        "hypotheses": st["hypotheses"],
        "no_hypotheses": st["no_hypotheses"],
        "clauses": st["clauses"],
        "evidence_summary": st["evidence_summary"],
        "fixed_sizes": st["fixed_sizes"],
        "declared": st["declared"],
        "no_symbolic": getattr(claim, "no_symbolic", "") or None,
        "no_numeric": getattr(claim, "no_numeric", "") or None,
        "checks": [{"name": ch.name, "layer": ch.layer, "description": ch.description,
                    "uses_device": bool(ch.uses_device)} for ch in claim.checks],
        "mutants": [{"name": m.name, "kind": m.kind, "description": m.description,
                     "exempt": getattr(m, "exempt", "") or None} for m in claim.all_mutants()],
        # a plugin's claim: its derivation is cached with the inputs it read (claims/_plugins.py), never in a catalogue
        **({"plugin": True} if claim.id in ISOLATED else {}),
    }


def _clean_derivation(info: dict[str, Any]) -> dict[str, Any]:
    """``derivation_info`` without what varies between runs or only the HTML pages need."""
    info = dict(info)
    info["steps"] = [{k: v for k, v in s.items() if k != "mathml"} for s in info.get("steps") or []]
    info["obligations"] = [{k: v for k, v in o.items() if k != "seconds"} for o in info.get("obligations") or []]
    return info


def derivation(claim: Any) -> dict[str, Any]:
    """The claim's derivation (steps, obligations evaluated, provenance, legend, assumptions) and its
    hypotheses with their counterexamples computed (``hypotheses``)."""
    return derivation_and_origin(claim)[0]


def derivation_and_origin(claim: Any) -> tuple[dict[str, Any], bool]:
    """:func:`derivation`, and whether its derivation came from a cache (a plugin's derivation cache, which checks
    the inputs it read; the built-in catalogue) rather than being built now."""
    from proofs_checks.runner import counterexample_json, derivation_info

    info = _clean_derivation(derivation_info(claim))
    cached = bool(info.pop("cached", None))
    info["hypotheses"] = counterexample_json(claim)
    return info, cached


def build(claims: Iterable[Any], *, with_derivations: bool = True, fingerprint: str | None = None,
          progress=None) -> dict[str, Any]:
    """The catalogue document for ``claims`` (registry order). ``fingerprint`` should be taken
    *before* the claim modules were imported: a source edited meanwhile then leaves the document
    stale (ignored), never fresh-looking with old content. ``progress(k, n, claim_id)`` is called
    before each claim."""
    fingerprint = fingerprint or source_fingerprint()
    items = []
    claims = list(claims)
    for k, c in enumerate(claims, 1):
        if progress is not None:
            progress(k, len(claims), c.id)
        e = entry(c)
        if with_derivations:
            e["derivation"] = derivation(c)
        items.append(e)
    doc = {"schema": SCHEMA, "tool": "tverify", "fingerprint": fingerprint,
           "generated_by": "tverify list --markdown", "claims": items}
    _set_deps(doc)
    return doc


def _plugin_sources() -> dict[str, str]:
    """Hashes of the source files the plugins imported from outside any installed distribution
    (helper modules on the path): a cached catalogue is fresh only while they are unchanged."""
    try:
        from proofs_checks.claims import PLUGIN_READ_HASHES, PLUGIN_SOURCES
    except Exception:  # pragma: no cover
        return {}
    return {f: PLUGIN_READ_HASHES.get(f) or _file_hash(f) for f in sorted(PLUGIN_SOURCES)}  # (read when opened: 29a F4)


def _set_deps(doc: dict[str, Any]) -> None:
    """``doc["depends_on"]`` (:func:`_plugin_sources`) and ``doc["resolves"]``: the plugins' helper modules by name,
    with where the import system found them."""
    deps = _plugin_sources()
    if deps:
        doc["depends_on"] = deps
    try:
        from proofs_checks.claims import PLUGIN_NAMES
    except Exception:  # pragma: no cover
        return
    if PLUGIN_NAMES:
        doc["resolves"] = {"names": dict(PLUGIN_NAMES)}


def deps_fresh(doc: dict[str, Any]) -> bool:
    """Whether the helper files a cached catalogue depends on are unchanged and each helper module it imported by name
    still resolves to the same file (one of that name put earlier on the path: hostile pass 26a F5)."""
    from proofs_checks.fingerprint import names_resolve

    res = doc.get("resolves")
    return (all(h != "<missing>" and _file_hash(f) == h for f, h in (doc.get("depends_on") or {}).items())  # (a read
            # that was not recorded, or a file gone when it was kept, is never unchanged: 29a F3)
            and (res is None or (isinstance(res, dict) and names_resolve(res.get("names")))))


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    """``docs/CATALOGUE.md``: every claim with its id, kind, title, statement, source, checks by
    layer and mutants. Deterministic (no date), so a test can compare it with the registry."""
    claims = doc["claims"]
    kinds: dict[str, int] = {}
    for e in claims:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    n_mut = sum(len(e["mutants"]) for e in claims)
    lines = [
        "# Claim catalogue",
        "",
        "<!-- Generated by `tverify list --markdown` from the claim registry; do not edit by hand. -->",
        "",
        f"{len(claims)} claims (" + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) + f"), {n_mut} mutants. "
        "Each claim is checked by a symbolic (SymPy derivation), a numeric (NumPy / SciPy / cvxpy reference) "
        "and/or a trained (torch) layer; each mutant is a planted wrong variant its checks must reject. "
        "`tverify show ID` prints a claim with its derivation and last result.",
        "",
        "| id | kind | title | checks (sym/num/trn) | mutants |",
        "|---|---|---|---|---|",
    ]
    for e in claims:
        counts = "/".join(str(sum(ch["layer"] == L for ch in e["checks"])) for L in LAYERS)
        anchor = e["id"].replace(".", "")  # GitHub drops the dot from the heading's anchor
        lines.append(f"| [`{e['id']}`](#{anchor}) | {e['kind']} | {_md_escape(e['title'])} | {counts} | {len(e['mutants'])} |")
    group = None
    for e in claims:
        if e["group"] != group:
            group = e["group"]
            lines += ["", f"## Group `{group}`"]
        lines += ["", f"### {e['id']}", "", f"**{_md_escape(e['title'])}** — {e['kind']}", ""]
        lines += [f"- Statement: ${e['statement']}$"]
        from proofs_checks.runner import necessity_text

        hyps = (e.get("derivation") or {}).get("hypotheses") or e.get("hypotheses") or []
        if hyps:
            lines += ["- Hypotheses:"]
            for h in hyps:
                lines += [f"  - `{h['name']}`: ${h['latex']}$ — {necessity_text(h)}"]
        elif e.get("no_hypotheses"):
            lines += [f"- Hypotheses: none ({e['no_hypotheses']})"]
        if e.get("clauses"):
            lines += ["- Clauses:"]
            for c in e["clauses"]:
                ev = c.get("evidence_text") or f"{c['evidence']} {c['scope']}"
                lines += [f"  - `{c['name']}`: ${c['latex']}$ — {ev}"]
        lines += [f"- {label}: {e[key]}" for key, label in (("evidence_summary", "Evidence"),
                                                             ("fixed_sizes", "Derivation at fixed sizes")) if e.get(key)]
        if e.get("stated_statement"):
            lines += [f"- As stated in the lecture notes (refuted): ${e['stated_statement']}$"]
        lines += [f"- Source: {e['source']}"]
        lines += [f"- {label}: {e[key]}" for key, label in (("notes", "Notes"), ("no_symbolic", "No symbolic layer"),
                                                             ("no_numeric", "No numeric layer")) if e.get(key)]
        lines += ["- Checks:"]
        for L in LAYERS:
            chs = [ch for ch in e["checks"] if ch["layer"] == L]
            if chs:
                lines += [f"  - {L}: " + "; ".join(f"`{ch['name']}`" + (f" ({ch['description']})" if ch["description"] else "")
                                                   for ch in chs)]
        lines += ["- Mutants:"]
        for m in e["mutants"]:
            ex = f" — exempt: {m['exempt']}" if m.get("exempt") else ""
            lines += [f"  - `{m['name']}` ({m['kind']}): {m['description']}{ex}"]
    lines.append("")
    return "\n".join(lines)


def repo_docs_dir() -> Path:
    """``docs/`` of the checkout the package runs from."""
    return _ROOT / "docs"


def _read(path: Path, cache_dir: Path | None = None) -> dict[str, Any] | None:
    """The catalogue document at ``path`` (``docs/catalogue.json``), or, with ``cache_dir``, the store's cache there
    if tverify wrote it (:mod:`proofs_checks.sealed`: an entry of another shape ended `list`/`show` in a traceback,
    hostile pass 43b F1); ``None`` when it cannot be used."""
    from proofs_checks.sealed import read_sealed

    try:
        st = os.stat(path)
        text = path.read_text(encoding="utf-8") if cache_dir is None else read_sealed(path, cache_dir)
        if text is None:
            return None
        doc = json.loads(text)
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deeply
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("claims"), list):
        return None
    # the scan of every text (18 ms for the 1.2 MB catalogue, twice per `show`) once per version of the file: the same
    # file (device, inode), size and change times as when it was scanned (issue 46: 800 in-process CLI tests)
    key = (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _SCANNED:
        _SCANNED[key] = _has_control(doc)
    if _SCANNED[key]:  # never written by tverify (hand-edited): rebuilt, not shown (hostile pass 7, F8)
        return None
    return doc


#: whether a catalogue file, by its version (:func:`_read`), holds a control character
_SCANNED: dict[tuple, bool] = {}


def _has_control(obj: Any) -> bool:
    """Does any text in ``obj`` (keys included) hold a control character a terminal would obey?"""
    from proofs_checks.errors import CONTROL

    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            if CONTROL.search(o):
                return True
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return False


def _cache_path(cache_dir: Path, fingerprint: str) -> Path:
    return Path(cache_dir) / f"catalogue-{fingerprint[:20]}.json"


def load_fresh(cache_dir: Path | None = None) -> tuple[dict[str, Any], Path] | None:
    """A catalogue whose fingerprint matches the sources: ``docs/catalogue.json``, else the store's
    cache; ``None`` when neither is fresh (the caller then loads the registry)."""
    fp = source_fingerprint()
    candidates = [repo_docs_dir() / "catalogue.json"]
    if cache_dir is not None:
        candidates.append(_cache_path(cache_dir, fp))
    for p in candidates:
        doc = _read(p, None if p == candidates[0] else cache_dir)
        if doc is not None and doc.get("fingerprint") == fp and deps_fresh(doc):
            return doc, p
    return None


def save_cache(doc: dict[str, Any], cache_dir: Path) -> Path | None:
    """Keep ``doc`` in the store's cache (best effort: a read-only store only costs speed)."""
    return _replace_cached(doc, _cache_path(cache_dir, doc["fingerprint"]), cache_dir, "catalogue-*.json")


def _replace_cached(doc: dict[str, Any], p: Path, cache_dir: Path, older: str) -> Path | None:
    """Write ``doc`` to ``p`` and remove the other caches of its kind in ``cache_dir`` (``older``: ``catalogue-*.json``
    or ``plugins-*.json``) that tverify wrote (:func:`_own_cache`); ``None`` where the store is read-only."""
    from proofs_checks.sealed import write_sealed

    try:
        if not write_sealed(p, json.dumps(doc, indent=0), Path(cache_dir)):
            return None
        if Path(cache_dir).is_symlink():  # a folder of the user's reached through a link: nothing removed there
            return p
        for old in Path(cache_dir).glob(older):
            if old != p and _own_cache(old, older.split("-")[0]):
                old.unlink(missing_ok=True)
    except OSError:
        return None
    return p


def _own_cache(path: Path, kind: str) -> bool:
    """Is ``path`` a cache tverify wrote: a regular file (not a link) named ``<kind>-<20 hex digits>.json`` holding
    tverify's catalogue document of that fingerprint? Anything else of a matching name is the user's and stays (a
    ``catalogue-2025.json`` of theirs in a store's ``cache/`` was deleted: hostile pass 19a F4)."""
    import re
    import stat

    m = re.fullmatch(rf"{kind}-([0-9a-f]{{20}})\.json", path.name)
    try:
        if m is None or not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    doc = _read(path, path.parent) or _read(path)  # (plain JSON: a cache of a tverify from before the seal)
    return (doc is not None and doc.get("tool") == "tverify"
            and str(doc.get("fingerprint", "")).startswith(m.group(1)))


def cache_derivation(doc: dict[str, Any], claim_id: str, info: dict[str, Any], cache_dir: Path) -> None:
    """Add one claim's derivation to a cached catalogue (``tverify show`` after the sources changed)."""
    for e in doc["claims"]:
        if e["id"] == claim_id:
            e["derivation"] = _clean_derivation(info)
    save_cache(doc, cache_dir)


def select_entries(entries: list[dict[str, Any]], patterns: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Entries matching any pattern, in catalogue order: the same rule as
    :func:`proofs_checks.registry.select` (exact id, glob, group name; no pattern = all)."""
    patterns = list(patterns)
    if not patterns:
        return list(entries)
    chosen: set[str] = set()
    for pat in patterns:
        hits = [e["id"] for e in entries if fnmatch.fnmatchcase(e["id"], pat) or e["group"] == pat]
        if not hits:
            raise UnknownPatternError(f"no claim matches {pat!r} (see `tverify list`)")
        chosen.update(hits)
    return [e for e in entries if e["id"] in chosen]


def write_docs(doc: dict[str, Any], out_dir: Path, names: dict[str, str] | None = None) -> list[Path]:
    """Write ``CATALOGUE.md`` and ``catalogue.json`` into ``out_dir`` (atomically, each; ``names`` maps either to
    another name there)."""
    from proofs_checks.store import atomic_write_pair

    out_dir, names = Path(out_dir), names or {}
    md, js = (out_dir / names.get(n, n) for n in ("CATALOGUE.md", "catalogue.json"))
    # the pair replaced together: a SIGTERM between the two left a new CATALOGUE.md beside the old JSON (24a F2b)
    atomic_write_pair([(md, render_markdown(doc)), (js, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")])
    return [md, js]


def load_with_plugins(cache_dir: Path | None) -> tuple[dict[str, Any], Path] | None:
    """With plugins installed, the catalogue from two parts, each cached by its own fingerprint, so
    installing or editing a plugin never reloads the built-in claim modules (issue 35):

    * the built-in entries: ``docs/catalogue.json`` or the store's cache, fresh while the built-in
      sources match (the fingerprint of :func:`source_fingerprint` without the plugins);
    * the plugins' entries: the store's ``plugins-<fingerprint>.json``, keyed by the plugins'
      fingerprint (entry points, versions, RECORD, every source file of each plugin package) and
      stale when a helper module they imported changed (``depends_on``); on a miss the plugins are
      imported alone (``proofs_checks.claims.load_plugins``: SymPy/NumPy and the plugin, not torch,
      cvxpy and the built-in claim modules) and their entries computed and kept.

    The merged document carries the full :func:`source_fingerprint` and is saved as the store's
    catalogue cache (so the next call is a plain :func:`load_fresh` hit, and ``show`` completes it
    with the derivations it computes). ``None`` when no plugin is installed, no store is given, or
    the built-in part is not fresh (the caller then loads the registry)."""
    import hashlib as _h

    if cache_dir is None:
        return None
    builtin_fp = source_fingerprint(plugins=False)
    ph = _h.sha256(b"tverify plugins\0")
    _plugin_fingerprint(ph)
    plugins_fp = ph.hexdigest()
    if plugins_fp == _h.sha256(b"tverify plugins\0").hexdigest():
        return None  # no plugin installed: load_fresh is the whole story
    base = None
    for p, sealed_in in ((repo_docs_dir() / "catalogue.json", None), (_cache_path(cache_dir, builtin_fp), cache_dir)):
        doc = _read(p, sealed_in)
        if doc is not None and doc.get("fingerprint") == builtin_fp:
            base = doc
            break
    if base is None:
        return None
    ppath = Path(cache_dir) / f"plugins-{plugins_fp[:20]}.json"
    pdoc = _read(ppath, cache_dir)
    if pdoc is None or pdoc.get("fingerprint") != plugins_fp or not deps_fresh(pdoc):
        from proofs_checks import claims as claim_pkg
        from proofs_checks.registry import registry

        before = set(registry.ids())
        claim_pkg.load_plugins()
        new = [registry.get(i) for i in registry.ids() if i not in before]
        pdoc = {"schema": SCHEMA, "tool": "tverify", "fingerprint": plugins_fp, "claims": [entry(c) for c in new]}
        if claim_pkg.PLUGIN_ERRORS:  # kept, so that a later cache hit says again which plugin was skipped
            pdoc["plugin_errors"] = [list(e) for e in claim_pkg.PLUGIN_ERRORS]
        _set_deps(pdoc)
        _replace_cached(pdoc, ppath, cache_dir, "plugins-*.json")
    ids = {e["id"] for e in base["claims"]}
    merged = {**{k: v for k, v in base.items() if k not in ("depends_on", "resolves", "claims")},
              "fingerprint": source_fingerprint(),
              "claims": list(base["claims"]) + [e for e in pdoc["claims"] if e["id"] not in ids]}
    if pdoc.get("depends_on"):
        merged["depends_on"] = dict(pdoc["depends_on"])
    if pdoc.get("resolves"):
        merged["resolves"] = pdoc["resolves"]
    if pdoc.get("plugin_errors"):
        merged["plugin_errors"] = list(pdoc["plugin_errors"])
    return merged, (save_cache(merged, Path(cache_dir)) or ppath)
