"""Claim modules, one per topic group; each registers its claims at import.

To add a group, add ``proofs_checks/claims/<group>.py`` that calls ``register(Claim(...))``;
:func:`load_all` imports every module in this package.
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False

# Catalogue order (the claim catalogue groups A to E); modules not named here follow alphabetically.
ORDER = ("attention", "icl", "att_svm", "hopfield", "favor", "sparse", "scale", "lora", "rnn", "adam", "gnn")


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
