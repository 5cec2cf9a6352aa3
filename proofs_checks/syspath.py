"""``sys.path`` for the processes tverify starts and for its own code running in a caller's process (the pytest
fixture): the standard library's, the installed packages' and tverify's own folders first. Imports nothing but the
standard library's modules every interpreter has loaded at start (os, sys, sysconfig, site), so that it can be
imported while a user's folder is first on ``sys.path`` (a ``click.py`` beside the user's tests ran when the fixture
imported this function's former module, hostile pass 15a F3).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

__all__ = ["child_sys_path"]


def _system_folders() -> tuple[list[str], str]:
    """The standard library's and the installed packages' folders (real paths; their subfolders
    count), and the folder that holds tverify's own packages (itself only)."""
    import site
    import sysconfig

    out = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError, OSError, ValueError, TypeError):
            out.append(sysconfig.get_paths()[key])
    with contextlib.suppress(Exception):
        out += list(site.getsitepackages())
    with contextlib.suppress(Exception):
        out.append(site.getusersitepackages())
    out += [os.path.join(p, "lib") for p in {sys.prefix, sys.base_prefix}]
    own = str(Path(__file__).resolve().parents[1])  # the folder holding proofs_checks/, numerics/, theory/
    return [os.path.realpath(p) for p in out if p], own


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
        first.append(own)
        rest = [p for p in rest if os.path.realpath(p) != own]
    return first + rest


def _is_cwd(real: str, cwd: str | None) -> bool:
    try:
        return real == os.path.realpath(cwd if cwd is not None else os.getcwd())
    except OSError:
        return False
