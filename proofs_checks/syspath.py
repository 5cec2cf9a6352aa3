"""``sys.path`` for the processes tverify starts and for its own code running in a caller's process (the pytest
fixture): the standard library's, the installed packages' and tverify's own folders first. Imports nothing but the
standard library's modules every interpreter has loaded at start (os, sys), so that it can be
imported while a user's folder is first on ``sys.path`` (a ``click.py`` beside the user's tests ran when the fixture
imported this function's former module, hostile pass 15a F3); ``sysconfig`` and ``site`` are imported with ``sys.path``
reduced to the standard library's folders (:func:`_system_folders`).
"""

import os
import sys

__all__ = ["child_sys_path", "import_system_only", "system_only", "without_own", "OWN_PACKAGES", "LIBRARY_IMPORTS"]


_FOLDERS: tuple[list[str], str] | None = None


def _system_folders() -> tuple[list[str], str]:
    """The standard library's and the installed packages' folders (real paths; their subfolders
    count), and the folder that holds tverify's own packages (itself only); computed once, with
    ``sys.path`` reduced to the standard library's own folders meanwhile: ``sysconfig`` is not loaded at
    start in every environment, and a ``sysconfig.py`` (or ``_sysconfigdata_*.py``) of a caller's test
    folder, first on ``sys.path``, ran when the fixture first imported it (hostile pass 16a F1)."""
    global _FOLDERS
    if _FOLDERS is None:
        std = os.path.dirname(os.__file__)  # os is loaded at start, from the standard library's folder
        saved = sys.path[:]
        sys.path[:] = [std, os.path.join(std, "lib-dynload")]
        try:
            _FOLDERS = _compute_system_folders()
        finally:
            sys.path[:] = saved
    return list(_FOLDERS[0]), _FOLDERS[1]


def _compute_system_folders() -> tuple[list[str], str]:
    import site
    import sysconfig

    out = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            out.append(sysconfig.get_paths()[key])
        except (KeyError, OSError, ValueError, TypeError):
            pass
    for get in (lambda: list(site.getsitepackages()), lambda: [site.getusersitepackages()]):
        try:
            out += get()
        except Exception:  # noqa: BLE001 — a site module without these (virtualenv's old one): the others suffice
            pass
    out += [os.path.join(p, "lib") for p in {sys.prefix, sys.base_prefix}]
    own = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the folder holding proofs_checks/, numerics/, theory/
    return [os.path.realpath(p) for p in out if p], own


_system_folders()  # at import (the plugin's load, the CLI's start): the fixture's later calls import nothing


def child_sys_path(path: list[str] | None = None, cwd: str | None = None) -> list[str]:
    """``sys.path`` for a process tverify starts (the checks' server and children, a plugin's import
    probe): the standard library's and installed packages' folders first, then the folder holding
    tverify's own packages (an editable install finds them through an import hook that comes after
    every folder of the path: named here, a ``numerics/`` elsewhere cannot come first), then the other
    entries of ``path`` (this process's ``sys.path``: ``$PYTHONPATH``, a caller's script folder, the
    working folder for ``''``) in their order. A ``random.py``, ``json.py`` or ``numerics/`` in the
    working folder or beside a user's module is then never what ``import random`` finds in a process
    tverify started, while a module of the caller's own that is no standard one still imports.

    >>> import sysconfig
    >>> std = sysconfig.get_paths()["stdlib"]
    >>> p = child_sys_path(["", std], cwd="/tmp/work")
    >>> p[0] == std, p[-1], "" in p
    (True, '/tmp/work', False)
    """
    first, rest = split_sys_path(path, cwd)
    return first + rest


def split_sys_path(path: list[str] | None = None, cwd: str | None = None) -> tuple[list[str], list[str]]:
    """:func:`child_sys_path` in its two parts: the standard library's, the installed packages' and tverify's own
    folders; then the others (``$PYTHONPATH``, a caller's script folder, the working folder). The checks' fork server
    imports its preload list with the first part alone: SymPy's optional ``import gmpy2`` found a ``gmpy2.py`` beside
    an API caller's script and ran it (hostile pass 48a F1)."""
    path = list(sys.path if path is None else path)
    system, own = _system_folders()
    here = cwd if cwd is not None else os.getcwd()
    first, rest, seen = [], [], set()
    for p in path:
        if not isinstance(p, str):
            continue
        p = p or here
        real = os.path.realpath(p)
        if real in seen:
            continue
        seen.add(real)
        inside = any(real == s or real.startswith(s + os.sep) for s in system if s != os.sep)
        (first if inside and not _is_cwd(real, here) and real != own else rest).append(p)
    if os.path.isdir(os.path.join(own, "proofs_checks")):
        first.append(own)  # (where the caller's own path also holds it, that entry stays too: see without_own)
    return first, rest


def _is_cwd(real: str, cwd: str | None) -> bool:
    try:
        return real == os.path.realpath(cwd if cwd is not None else os.getcwd())
    except OSError:
        return False


class system_only:
    """``with system_only():`` ``sys.path`` holds only the standard library's, the installed packages' and tverify's
    own folders meanwhile (the others are put back after). For tverify's own imports after a user's module was loaded
    beside its folder: Python's path finder prefers a module in any later folder to a *namespace* package's portion,
    so an ``mpl_toolkits.py`` beside the module ran when ``--report`` imported matplotlib (hostile pass 16b F4)."""

    def __enter__(self) -> "system_only":
        self._saved = sys.path[:]
        system, own = _system_folders()
        keep = []
        for p in self._saved:
            if not isinstance(p, str) or not p:
                continue
            real = os.path.realpath(p)
            if real == own or any(real == s or real.startswith(s + os.sep) for s in system if s != os.sep):
                keep.append(p)
        sys.path[:] = keep
        return self

    def __exit__(self, *exc) -> None:
        sys.path[:] = self._saved


#: the packages tverify's own folder provides (the rest of a checkout's root — benchmarks/, examples/, tests/, docs/ —
#: is no part of tverify)
OWN_PACKAGES = ("proofs_checks", "numerics", "theory")


def without_own(path: list[str]) -> list[str]:
    """``path`` without the folder that holds tverify's own packages, once they are imported: for a process of
    tverify's about to load a user's module (the check's child). In an editable install that folder is the checkout's
    root, which also holds ``benchmarks/``, ``examples/``, ``tests/`` and ``docs/``: first on the path, they shadowed a
    user's packages of those names beside the module, and ran tverify's own examples instead (hostile pass 17b F1).
    The three packages stay bound (``sys.modules``; their submodules are found through their own ``__path__``). A
    folder among the system ones (an installed, not editable, tverify: site-packages) is kept, and so is the folder
    where the caller's own path holds it too (its place there, after the system folders: pytest's rootdir in a
    checkout, whose ``tests`` package the child imports a test's function from), only the first entry is dropped."""
    import importlib

    system, own = _system_folders()
    if any(own == s or own.startswith(s + os.sep) for s in system if s != os.sep):
        return list(path)
    for name in OWN_PACKAGES:
        importlib.import_module(name)  # bound now, from the folder still on the path
    out = list(path)
    for i, p in enumerate(out):  # the first entry only: the one child_sys_path put there; where the caller's own
        if isinstance(p, str) and p and os.path.realpath(p) == own:  # path also holds the folder (a test run from the
            del out[i]  # checkout, its tests imported by name), that later entry stays, as in the caller's process
            break
    return out


#: what tverify's computing code imports, in any process of tverify's, and what those libraries import at their own
#: import or cache on first use: tverify's own top-level packages (their submodules are then found through the
#: package, never through sys.path: a numerics/ beside a script ran, hostile pass 55a F5), SymPy with its optional gmpy2
#: and flint, mpmath with colorsys (55a F3, F7), torch with its lru-cached probe for dill (55a F7), cvxpy with its
#: solvers, and the standard modules the checks import later (a decimal.py first on the path is not Python's decimal)
LIBRARY_IMPORTS = ("numerics", "theory", "click", "cloudpickle", "threadpoolctl", "sympy", "mpmath", "decimal",
                   "fractions", "hmac", "secrets", "sysconfig", "unicodedata", "torch", "torch.utils._import_utils",
                   "scipy", "cvxpy", "clarabel", "scs", "ecos", "osqp")


def import_system_only(names) -> None:
    """Import ``names`` (those not imported yet) with ``sys.path`` holding only the standard library's, the installed
    packages' and tverify's own folders (:class:`system_only`): a library that is not installed stays not imported, and
    what it probes for at its import (an optional dependency that is absent) is then found absent — never a file of that
    name in a folder of the user's further on the path. torch's probe for dill is cached here too."""
    import importlib

    with system_only():
        for name in names:
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
        utils = sys.modules.get("torch.utils._import_utils")
        if utils is not None:
            for probe in ("dill_available", "import_dill"):
                try:
                    getattr(utils, probe)()
                except Exception:  # noqa: BLE001 - torch's own probe: what it finds is its business
                    pass
