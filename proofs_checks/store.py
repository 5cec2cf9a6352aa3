"""Last results per claim, kept under ``.tverify/last/`` so ``tverify show`` can print them."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_text", "save_last", "load_last", "STORE_DIR"]

STORE_DIR = Path(os.environ.get("TVERIFY_STORE", ".tverify")) / "last"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_last(result_json: dict[str, Any], store: Path | None = None) -> None:
    store = store or STORE_DIR
    try:
        atomic_write_text(store / f"{result_json['id']}.json", json.dumps(result_json, indent=1))
    except OSError:
        pass  # a read-only working directory must not break a run


def load_last(claim_id: str, store: Path | None = None) -> dict[str, Any] | None:
    p = (store or STORE_DIR) / f"{claim_id}.json"
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None
