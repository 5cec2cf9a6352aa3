"""Claim modules, one per topic group; each registers its claims at import.

To add a group, add ``proofs_checks/claims/<group>.py`` that calls ``register(Claim(...))``;
:func:`load_all` imports every module in this package.
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False


def load_all() -> None:
    """Import every claim module in this package once (registration happens at import)."""
    global _loaded
    if _loaded:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True
