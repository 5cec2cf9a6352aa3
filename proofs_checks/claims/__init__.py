"""Claim modules, one per topic group; each registers its claims at import.

To add a group, add ``proofs_checks/claims/<group>.py`` that calls ``declare(...)`` (:mod:`._common`:
``register(Claim(statement="", ...))``, the statement rendered from hypotheses and clauses);
:func:`load_all` imports every module in this package, then the modules other installed packages
declare in the entry-point group ``tverify.claims`` (:func:`load_plugins`).
"""

from __future__ import annotations

import contextlib

import builtins  # max/min of times and lengths (no NaN here); claim modules use worst()/largest()

import importlib
import pkgutil

from theory.validation import exception_text, printable

_loaded = False

# Catalogue order (the claim catalogue groups A to E); modules not named here follow alphabetically.
ORDER = ("attention", "attention_forms", "attention_blocks", "attention_cost", "attention_pe",
         "icl", "icl_minimum", "icl_risk", "icl_further", "icl_gd", "icl_baselines", "icl_classes",
         "att_svm", "att_svm_separator", "att_svm_dynamics", "att_svm_rates",
         "hopfield", "hopfield_dense", "hopfield_modern", "hopfield_retrieval", "hopfield_attention",
         "favor", "sparse", "scale", "lora", "rnn", "adam", "gnn", "approx", "approx_sparse", "lyapunov", "lyapunov_sos")


def is_builtin(claim) -> bool:
    """``claim`` is the very object one of this project's claim modules registered (a plugin's or a
    notebook's claim never is, whatever its id or its functions' ``__module__`` say):
    :func:`proofs_checks.registry.is_builtin` (imported here when called: this package imports no SymPy)."""
    from proofs_checks.registry import is_builtin as builtin

    return builtin(claim)


def check_environment() -> None:
    """The environment variables of loading claims, read once each at the edge of every command that lists,
    shows or runs them (:func:`load_all`, and the CLI's cached catalogue, which loads nothing): the plugins'
    time limits (:func:`plugin_timeouts`) and ``TVERIFY_DERIVATION_CACHE``
    (:func:`proofs_checks.fingerprint.derivation_cache_on`) and ``TVERIFY_DERIVATION_BUDGET``
    (:func:`proofs_checks.fingerprint.derivation_budget`: ``show`` from the cached catalogue refused -5 as ``run``
    did). A bad value is a one-line
    :class:`~proofs_checks.errors.UsageError` (exit 2), never the default in its place."""
    from proofs_checks.fingerprint import derivation_budget, derivation_cache_on

    plugin_timeouts()
    derivation_cache_on()
    derivation_budget()


def load_all() -> None:
    """Import every claim module in this package once (registration happens at import). Every call
    first reads the plugins' time limits (:func:`plugin_timeouts`): a bad one is refused with one
    line before anything loads."""
    global _loaded
    check_environment()
    if _loaded:
        return
    from proofs_checks.registry import BUILTIN, loading_builtin, registry

    before = set(registry.ids())
    rank = {name: i for i, name in enumerate(ORDER)}
    with loading_builtin():
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: (rank.get(m.name, len(ORDER)), m.name)):
            if not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
    BUILTIN.update({i: registry.get(i) for i in registry.ids() if i not in before})
    _loaded = True
    load_plugins()


#: ``(entry point, "Type: message")`` for every ``tverify.claims`` plugin that failed to load.
PLUGIN_ERRORS: list[tuple[str, str]] = []

#: source files of the modules the plugins imported that no installed distribution's version
#: covers (editable installs, helper modules on the path): the catalogue cache depends on them.
PLUGIN_SOURCES: set[str] = set()

#: the claims each plugin entry point ``(name, value)`` registered when it was loaded: loaded again (``show`` loads
#: the plugins twice), a plugin whose forms and checks live in a helper module registered "no claim" (46b F1)
PLUGIN_CLAIMS: dict[tuple[str, str], tuple[str, ...]] = {}
#: the hash each file a plugin opened while it loaded had when it was opened (an edit during the load is then a change:
#: hostile pass 29a F4); ``<missing>`` for reads that could not be recorded (a process started at load: 29a F3)
PLUGIN_READ_HASHES: dict[str, str] = {}

#: ``{module name: origin}`` of the modules whose files are in :data:`PLUGIN_SOURCES` (imported by name), and ``None`` for
#: an import a plugin tried that failed: a cache answering for them is fresh only while each name still resolves as it
#: did (hostile pass 26a F5)
PLUGIN_NAMES: dict[str, str | None] = {}


def _record_sources(names, into: set[str] | None = None) -> None:
    """The files of the modules a plugin imported when it was loaded into :data:`PLUGIN_SOURCES`, and their names into
    :data:`PLUGIN_NAMES` (:func:`proofs_checks.claims._plugin_cache.record_sources`); ``into``: another set, files
    only."""
    from proofs_checks.claims._plugin_cache import record_sources

    record_sources(names, PLUGIN_SOURCES if into is None else into, PLUGIN_NAMES if into is None else None)


def load_plugins() -> None:
    """Import the claim modules other installed packages declare in the entry-point group
    ``tverify.claims`` (``name = "package.module"``, registering at import like the modules here; a
    value naming a callable, ``"package.module:register_all"``, is also called). A plugin that fails
    is skipped with one warning line on stderr (kept in :data:`PLUGIN_ERRORS`), never a crash: an
    exception, ``sys.exit``, a ``KeyboardInterrupt`` it raises itself, an import that does not finish
    within :data:`PLUGIN_IMPORT_TIMEOUT` seconds (:func:`_load_one`). An installed entry point is first
    imported in a fresh process (:func:`proofs_checks.claims._plugins.probe`: an ``os._exit``, a signal or a
    hang there only skips it), and the checks of the claims it registers run in a child process
    (:func:`proofs_checks.claims._plugins.isolate`). The message is cut to one line of at most 300
    characters."""
    import sys
    from importlib.metadata import entry_points

    from proofs_checks.registry import registry

    plugin_timeouts()  # a bad time limit: one line before any plugin is tried (never a plugin's failure)
    for ep in entry_points(group="tverify.claims"):
        if ep.value.startswith("proofs_checks."):  # this project's own claims (already loaded)
            continue
        from proofs_checks.claims import _plugins  # only with a plugin installed

        before, ids = set(sys.modules), set(registry.ids())
        try:
            if not _well_formed(ep):  # (importlib's own failure to parse it read "AttributeError: 'NoneType' …": 47b F8)
                raise _plugins.PluginImportFailed(f"its entry-point value {printable(ep.value, repr)[:80]} is not "
                                                  "`package.module` or `package.module:function`")
            if _plugins.probed(ep):  # first in a child: os._exit, a signal or a hang there only skips it
                _plugins.probe(ep)
            import contextlib

            from proofs_checks.claims._plugin_cache import Reads

            with contextlib.redirect_stdout(sys.stderr), _descriptor1_to_stderr(), _working_folder_kept(), \
                    Reads() as reads:  # what it read: a helper loaded by path, an optional import (26a F5, 27a F5)
                _load_one(ep)  # a plugin's prints (and its writes to descriptor 1, hostile pass 11a F6) never reach
                # --json - on stdout; its os.chdir never moves the command's relative output paths (12a F9)
            PLUGIN_SOURCES.update(reads.opened)
            PLUGIN_READ_HASHES.update(reads.opened)
            for name, origin in {**reads.asked_origins(), **reads.failed}.items():  # (found by name, not kept: 28a F4)
                PLUGIN_NAMES.setdefault(name, origin)
            mod = str(getattr(ep, "module", "") or ep.value.split(":")[0]).strip()
            # a plugin imported before this (a test importing its CLAIM, a notebook): what it imported is not new here,
            # so every module loaded outside the installation is recorded (more than its helpers: a cache may miss,
            # never answer after a helper changed; hostile pass 24a F5)
            pre = mod in before or mod.split(".")[0] in before
            _record_sources(set(sys.modules) if pre else set(sys.modules) - before)
            new = ([i for i in registry.ids() if i not in ids] or _registered_by(ep)  # imported before (a test did)
                   or [i for i in PLUGIN_CLAIMS.get((ep.name, ep.value), ())  # loaded before here
                       if i in registry or i in registry.contested])
            PLUGIN_CLAIMS[(ep.name, ep.value)] = tuple(new)
            if _plugins.probed(ep):  # its claims' checks run in a child too
                _plugins.isolate(ep, [i for i in new if i in registry])
            if not new:  # imported cleanly, registered nothing: said, as a failure is
                text = "it imported cleanly but registered no claim (does it call register(Claim(...)) when imported?)"
                _warn(ep, text, f"tverify: warning: claims plugin {_short(repr(ep.name), 60)} ({_short(ep.value, 80)}): ")
        except (Exception, SystemExit, _RaisedInterrupt) as exc:  # another package's code: report it and go on
            # (sys.exit(0) at import ended `tverify run` with exit 0 and nothing run)
            if isinstance(exc, (_PluginTimeout, _plugins.PluginImportFailed)):
                text = str(exc)
            elif isinstance(exc, _RaisedInterrupt):
                text = "KeyboardInterrupt raised by the plugin itself (not a Ctrl-C from the terminal)"
            elif isinstance(exc, SystemExit):
                text = f"SystemExit: called sys.exit({printable(exc.code, repr)})"
            else:
                text = exception_text(exc)
            registry.withdraw([i for i in registry.ids() if i not in ids])  # skipped: its claims with it (43b F9)
            text = _contested(exc, ep) or text
            _warn(ep, text, f"tverify: warning: claims plugin {_short(repr(ep.name), 60)} ({_short(ep.value, 80)}) "
                            "failed to load and was skipped: ")


def _warn(ep, text: str, head: str) -> None:
    """One warning line (≤ 300 characters) for a plugin, kept in :data:`PLUGIN_ERRORS`; said once in a command
    (``show`` loads the plugins twice: the same line twice, hostile pass 55b F7)."""
    import sys

    entry = (f"{ep.name} = {ep.value}", _short(text, 300))
    if entry in PLUGIN_ERRORS:
        return
    PLUGIN_ERRORS.append(entry)
    sys.stderr.write(head + _short(text, builtins.max(60, 300 - len(head))) + "\n")


def _contested(exc, ep) -> str | None:
    """For a claim id that another plugin registered first: the message naming that plugin, and that id taken back
    from it too — neither plugin's claim of that id is run (one plugin's claim answered for the skipped one's, hostile
    pass 55b F6/F8)."""
    from proofs_checks.registry import DuplicateClaim, registry

    if not isinstance(exc, DuplicateClaim):
        return None
    first = next((name for (name, value), ids in PLUGIN_CLAIMS.items() if exc.claim_id in ids and name != ep.name),
                 None)
    if first is None:
        return None
    registry.withdraw([exc.claim_id])
    registry.contested.add(exc.claim_id)
    return (f"claim {printable(exc.claim_id, repr)[:80]} registered twice: claims plugin {printable(first, repr)[:60]} "
            "(loaded first) registers it too; neither plugin's claim of that id is run")


def _well_formed(ep) -> bool:
    """The entry point's value is ``module`` or ``module:attr`` as the entry-point specification writes them."""
    import re

    value = str(getattr(ep, "value", "") or "")
    return re.fullmatch(r"\s*[\w.]+\s*(:\s*[\w.]+\s*)?(\[.*\])?\s*", value) is not None


def _registered_by(ep) -> list[str]:
    """Ids of registered claims defined in the entry point's module (or below it): a plugin imported
    before ``load_plugins`` runs (a test importing its ``CLAIM``, a catalogue reload) registers
    nothing new but did register its claims — no "registered no claim" warning for it."""
    from proofs_checks.registry import registry

    mod = str(getattr(ep, "module", "") or str(ep.value).split(":")[0]).strip()

    def mine(obj) -> bool:
        m = str(getattr(obj, "__module__", "") or "")
        return bool(mod) and (m == mod or m.startswith(mod + "."))

    return [c.id for c in registry if mine(c.form) or any(mine(ch.fn) for ch in c.checks)]


#: seconds a plugin's import may take before it is skipped ($TVERIFY_PLUGIN_IMPORT_TIMEOUT); a note
#: on stderr after PLUGIN_IMPORT_NOTE seconds says which plugin is being waited for
PLUGIN_IMPORT_TIMEOUT = 20.0
PLUGIN_IMPORT_NOTE = 2.0
#: seconds one check of a plugin claim may take in its child process ($TVERIFY_PLUGIN_CHECK_TIMEOUT)
PLUGIN_CHECK_TIMEOUT = 600.0
#: the largest time limit a plugin variable may set (about 116 days)
MAX_PLUGIN_SECONDS = 1e7


def plugin_seconds(env: str, default: float) -> float:
    """The seconds ``$env`` sets (``default`` when unset): a number > 0 and at most
    :data:`MAX_PLUGIN_SECONDS`. Anything else (empty, ``abc``, ``0``, ``-3``, ``nan``, ``inf``, ``1e999``)
    is a :class:`~proofs_checks.errors.UsageError` (one line, exit 2), as ``TVERIFY_THREADS`` and
    ``TVERIFY_DERIVATION_BUDGET`` are: never the default in its place.

    >>> import os; os.environ["TVERIFY_X"] = "2.5"; plugin_seconds("TVERIFY_X", 20.0)
    2.5
    >>> os.environ["TVERIFY_X"] = "-3"; plugin_seconds("TVERIFY_X", 20.0)
    Traceback (most recent call last):
    ...
    proofs_checks.errors.UsageError: TVERIFY_X must be a number of seconds > 0 and at most 1e+07, got '-3'
    """
    import math
    import os

    from proofs_checks.errors import UsageError

    text = os.environ.get(env)
    if text is None:
        return float(default)
    try:
        v = float(text) if "_" not in text and text.isascii() else math.nan  # float() reads "1_0" and "١٠" as 10 (10 F6, 46a F3)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 < v <= MAX_PLUGIN_SECONDS):
        raise UsageError(f"{env} must be a number of seconds > 0 and at most {MAX_PLUGIN_SECONDS:g}, got {text[:40]!r}")
    return v


def plugin_timeouts() -> tuple[float, float]:
    """``($TVERIFY_PLUGIN_IMPORT_TIMEOUT, $TVERIFY_PLUGIN_CHECK_TIMEOUT)`` in seconds, each checked by
    :func:`plugin_seconds` (the edge of every command that loads claims, and ``check_claim``)."""
    return (plugin_seconds("TVERIFY_PLUGIN_IMPORT_TIMEOUT", PLUGIN_IMPORT_TIMEOUT),
            plugin_seconds("TVERIFY_PLUGIN_CHECK_TIMEOUT", PLUGIN_CHECK_TIMEOUT))


class _PluginTimeout(Exception):
    """A plugin's import did not finish within the time limit."""


@contextlib.contextmanager
def _descriptor1_to_stderr():
    """Descriptor 1 pointed at standard error while a plugin is imported in this process (an ``os.write(1, …)`` there
    put its text before the JSON of ``--json -``), then back."""
    import os
    import sys

    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):  # no descriptor 1 or 2 (closed): nothing to protect
        yield
        return
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def _working_folder_kept():
    """The working folder (and tverify's TVERIFY_* variables) as they were before a plugin's in-process import, after
    it: a plugin changing to its data
    folder at import moved ``--out``/``--json``/``--store`` given as relative paths into that folder, where a
    previous report there was replaced (hostile pass 12a F9)."""
    import os

    # tverify's own settings as they were too, and the variables its own places are found by: a plugin setting
    # TVERIFY_STORE (or XDG_CACHE_HOME) at import moved where the run's results (the record of written outputs) were
    # kept (hostile passes 14a F4, 15a F4); its other variables are its own business
    ours = {k: v for k, v in os.environ.items() if _tverifys_variable(k)}
    try:
        here = os.getcwd()
    except OSError:  # the working folder is gone: nothing to keep
        here = None
    try:
        yield
    finally:
        for k in [k for k in os.environ if _tverifys_variable(k) and k not in ours]:
            del os.environ[k]
        os.environ.update(ours)
        with contextlib.suppress(OSError):  # (the folder it left is gone: getcwd fails, chdir puts it back)
            if here is not None and _cwd_or_none() != here:
                os.chdir(here)


def _tverifys_variable(name: str) -> bool:
    return name.startswith("TVERIFY_") or name in ("XDG_CACHE_HOME", "HOME")


def _cwd_or_none() -> str | None:
    import os

    try:
        return os.getcwd()
    except OSError:
        return None


def _load_one(ep) -> None:
    """``ep.load()`` (and the callable it names) in a daemon thread, waited for at most
    :data:`PLUGIN_IMPORT_TIMEOUT` seconds: a plugin that loops at import is skipped (its thread is
    left behind, never joined) instead of blocking every claim command without a word. What the
    plugin raises is raised here; a ``KeyboardInterrupt`` it raises itself is
    :class:`_RaisedInterrupt` (a real Ctrl-C reaches this, the main, thread)."""
    import sys
    import threading

    limit = plugin_timeouts()[0]
    box: dict = {}

    def target():
        try:
            obj = ep.load()
            if callable(obj):
                obj()
        except BaseException as exc:  # noqa: BLE001 - the plugin's, re-raised in the caller's thread
            box["exc"] = exc

    t = threading.Thread(target=target, daemon=True, name=f"tverify claims plugin {ep.name}")
    t.start()
    t.join(PLUGIN_IMPORT_NOTE if PLUGIN_IMPORT_NOTE < limit else limit)
    waited = PLUGIN_IMPORT_NOTE
    while t.is_alive() and limit > waited:  # a note every 5 s: never a silent stretch
        sys.stderr.write(f"tverify: waiting for claims plugin {_short(repr(ep.name), 60)} to import "
                         f"({waited:g} s so far; skipped after {limit:g} s)\n")
        step = builtins.min(5.0, limit - waited)
        t.join(step)
        waited += step
    if t.is_alive():
        from proofs_checks.registry import registry

        registry.withdraw((), thread=t.ident)  # what it registers from now on is refused
        raise _PluginTimeout(f"its import did not finish within {limit:g} s ($TVERIFY_PLUGIN_IMPORT_TIMEOUT)")
    exc = box.get("exc")
    if isinstance(exc, KeyboardInterrupt):
        raise _RaisedInterrupt() from None
    if exc is not None:
        raise exc


class _RaisedInterrupt(Exception):
    """A ``KeyboardInterrupt`` the plugin raised itself (no SIGINT arrived): its failure."""


def _short(text: str, n: int) -> str:
    """``text`` on one line, at most ``n`` characters (a plugin's error can be 50 kB)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"
