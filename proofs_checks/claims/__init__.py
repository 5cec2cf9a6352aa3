"""Claim modules, one per topic group; each registers its claims at import.

To add a group, add ``proofs_checks/claims/<group>.py`` that calls ``register(Claim(...))``;
:func:`load_all` imports every module in this package, then the modules other installed packages
declare in the entry-point group ``tverify.claims`` (:func:`load_plugins`).
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False

# Catalogue order (the claim catalogue groups A to E); modules not named here follow alphabetically.
ORDER = ("attention", "attention_blocks", "icl", "icl_further", "icl_classes", "att_svm", "att_svm_dynamics", "hopfield", "hopfield_modern", "favor", "sparse", "scale", "lora", "rnn", "adam", "gnn", "approx", "lyapunov")


def load_all() -> None:
    """Import every claim module in this package once (registration happens at import)."""
    global _loaded
    if _loaded:
        return
    rank = {name: i for i, name in enumerate(ORDER)}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: (rank.get(m.name, len(ORDER)), m.name)):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True
    load_plugins()


#: ``(entry point, "Type: message")`` for every ``tverify.claims`` plugin that failed to load.
PLUGIN_ERRORS: list[tuple[str, str]] = []

#: source files of the modules the plugins imported that no installed distribution's version
#: covers (editable installs, helper modules on the path): the catalogue cache depends on them.
PLUGIN_SOURCES: set[str] = set()


def _record_sources(names) -> None:
    import sys
    import sysconfig

    skip = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f and f.endswith(".py") and not any(f.startswith(d) for d in skip) and "site-packages" not in f:
            PLUGIN_SOURCES.add(f)


def load_plugins() -> None:
    """Import the claim modules other installed packages declare in the entry-point group
    ``tverify.claims`` (``name = "package.module"``, registering at import like the modules here; a
    value naming a callable, ``"package.module:register_all"``, is also called). A plugin that fails
    is skipped with one warning line on stderr (kept in :data:`PLUGIN_ERRORS`), never a crash."""
    import sys
    from importlib.metadata import entry_points

    for ep in entry_points(group="tverify.claims"):
        if ep.value.startswith("proofs_checks."):  # this project's own claims (already loaded)
            continue
        before = set(sys.modules)
        try:
            with _own_interrupts():
                obj = ep.load()
                if callable(obj):
                    obj()
            _record_sources(set(sys.modules) - before)
        except (Exception, SystemExit, _RaisedInterrupt) as exc:  # another package's code: report it and go on
            # (sys.exit(0) at import ended `tverify run` with exit 0 and nothing run)
            if isinstance(exc, _RaisedInterrupt):
                text = "KeyboardInterrupt raised by the plugin itself (not a Ctrl-C from the terminal)"
            elif isinstance(exc, SystemExit):
                text = f"SystemExit: called sys.exit({exc.code!r})"
            else:
                msg = " ".join(str(exc).split())
                text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
            PLUGIN_ERRORS.append((f"{ep.name} = {ep.value}", _short(text, 300)))
            sys.stderr.write(f"tverify: warning: claims plugin {_short(repr(ep.name), 60)} ({_short(ep.value, 80)}) "
                             f"failed to load and was skipped: {_short(text, 200)}\n")


class _RaisedInterrupt(Exception):
    """A ``KeyboardInterrupt`` the plugin raised itself (no SIGINT arrived): its failure."""


class _own_interrupts:
    """Inside: a ``KeyboardInterrupt`` raised by the code (``raise KeyboardInterrupt``) becomes
    :class:`_RaisedInterrupt`; a real Ctrl-C (a SIGINT received inside, main thread) still stops
    the run."""

    def __enter__(self):
        import signal
        import threading

        self.real, self.previous = False, None
        if threading.current_thread() is threading.main_thread():
            def on_sigint(signum, frame):
                self.real = True
                raise KeyboardInterrupt

            try:
                self.previous = signal.signal(signal.SIGINT, on_sigint)
            except (ValueError, OSError, TypeError):  # pragma: no cover - not the main interpreter
                self.previous = None
        return self

    def __exit__(self, typ, exc, tb):
        import signal

        if self.previous is not None:
            try:
                signal.signal(signal.SIGINT, self.previous)
            except (ValueError, OSError, TypeError):  # pragma: no cover
                pass
        if typ is not None and issubclass(typ, KeyboardInterrupt) and not self.real:
            raise _RaisedInterrupt() from None
        return False


def _short(text: str, n: int) -> str:
    """``text`` on one line, at most ``n`` characters (a plugin's error can be 50 kB)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"
