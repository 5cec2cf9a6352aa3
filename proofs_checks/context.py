"""The context a check runs in: mode (sizes), seed, device, where figures go."""

from __future__ import annotations

import hashlib
import itertools
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RunContext", "MODES", "pyplot", "clear_reference_cache", "reference_cache_info"]

MODES = ("quick", "default", "full")

# Form-independent references (a derived expression lambdified, a Monte Carlo sample, a trained
# model, a solver's output), shared by a claim's run and every mutant run in the same process.
_REF_CACHE: "OrderedDict[tuple, Any]" = OrderedDict()
_REF_LOCK = threading.Lock()
_REF_MAX = 512
_REF_STATS = {"hits": 0, "misses": 0}
_TOKENS: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
_TOKENS_STRONG: dict[int, tuple[Any, str]] = {}
_TOKEN_COUNT = itertools.count(1)


def identity_token(obj: Any) -> str:
    """A process-unique name for the object ``obj`` (never reused, unlike ``id``/``repr`` addresses
    after garbage collection): reference-cache keys use it so that a check or derivation redefined
    under the same claim id (a notebook cell run again) never reads the previous one's reference.

        >>> f = lambda x: x
        >>> identity_token(f) == identity_token(f), identity_token(f) == identity_token(lambda x: x)
        (True, False)
    """
    with _REF_LOCK:
        try:
            tok = _TOKENS.get(obj)
            if tok is None:
                tok = _TOKENS[obj] = f"obj#{next(_TOKEN_COUNT)}"
            return tok
        except TypeError:  # not weak-referenceable: keep it alive so its id is never reused
            hit = _TOKENS_STRONG.get(id(obj))
            if hit is None or hit[0] is not obj:
                hit = _TOKENS_STRONG[id(obj)] = (obj, f"obj#{next(_TOKEN_COUNT)}")
            return hit[1]


def clear_reference_cache() -> None:
    """Forget every cached reference (tests that time a cold run call this)."""
    with _REF_LOCK:
        _REF_CACHE.clear()
        _REF_STATS.update(hits=0, misses=0)


def reference_cache_info() -> dict[str, int]:
    """Hits, misses and size of the reference cache (benchmarks report them)."""
    with _REF_LOCK:
        return {**_REF_STATS, "size": len(_REF_CACHE)}


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (reports are written headless).

    Checks that draw call this, build a figure, and hand it to :meth:`RunContext.save_figure`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass
class RunContext:
    """Settings shared by every check of one run.

    mode     "quick" (tests), "default" (``make report``) or "full" (larger sizes, more seeds).
    seed     base seed; every check derives its own seeds from it with :meth:`seed_for`, so a
             result is reproduced by re-running with the seed recorded in its report.
    device   "cpu" or "cuda"; only checks declared ``uses_device`` look at it.
    figure_dir  where :meth:`save_figure` writes; ``None`` disables figures (tests, plain runs).

        >>> ctx = RunContext(mode="quick", seed=0)
        >>> ctx.quick, ctx.size(200, 2000, 20000), ctx.device
        (True, 200, 'cpu')
        >>> ctx.seed_for("claim", "check") == RunContext(mode="quick", seed=0).seed_for("claim", "check")
        True
    """

    mode: str = "default"
    seed: int = 0
    device: str = "cpu"
    figure_dir: Path | None = None
    claim_id: str = ""
    check_name: str = ""
    _figures: list[str] = field(default_factory=list, repr=False)
    #: what else the reference cache is keyed on (the check function's :func:`identity_token`)
    scope: str = field(default="", repr=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")

    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def full(self) -> bool:
        return self.mode == "full"

    def size(self, quick: Any, default: Any, full: Any | None = None) -> Any:
        """Pick a size by mode: ``ctx.size(quick=200, default=2000, full=20000)``."""
        if self.mode == "quick":
            return quick
        if self.mode == "full" and full is not None:
            return full
        return default

    def seed_for(self, *keys: Any) -> int:
        """A stable 32-bit seed from the base seed, the claim, the check and ``keys``.

        Stable across processes and Python versions (SHA-256, not ``hash``)."""
        text = "|".join(map(str, (self.seed, self.claim_id, self.check_name, *keys)))
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")

    def rng(self, *keys: Any) -> np.random.Generator:
        """A NumPy generator seeded by :meth:`seed_for` with the same keys."""
        return np.random.default_rng(self.seed_for(*keys))

    def reference(self, name: str, compute, *keys: Any) -> Any:
        """The form-independent reference ``compute()``, computed once per (claim, check, mode, seed,
        device, ``name``, ``keys``) and cached for the rest of the process.

        A check is a reference plus a comparison: everything that does not read the form (the
        derivation lambdified, Monte Carlo samples, a trained model, a solver's output) goes in
        ``compute``, so that each mutant run costs only the comparison. ``compute`` must not read
        the form, and callers must not modify what it returns.
        """
        key = (self.claim_id, self.check_name, self.scope, self.mode, self.seed, self.device, name, *map(repr, keys))
        with _REF_LOCK:
            if key in _REF_CACHE:
                _REF_CACHE.move_to_end(key)
                _REF_STATS["hits"] += 1
                return _REF_CACHE[key]
        value = compute()
        with _REF_LOCK:
            _REF_STATS["misses"] += 1
            _REF_CACHE[key] = value
            while len(_REF_CACHE) > _REF_MAX:
                _REF_CACHE.popitem(last=False)
        return value

    def for_check(self, claim_id: str, check_name: str, scope: str = "") -> "RunContext":
        """A copy bound to one claim's check (so ``seed_for`` differs per check); ``scope`` also keys
        :meth:`reference` (not the seeds)."""
        return RunContext(self.mode, self.seed, self.device, self.figure_dir, claim_id, check_name, scope=scope)

    def save_figure(self, fig, name: str) -> str | None:
        """Save a matplotlib figure as ``<figure_dir>/<claim>__<name>.png`` and close it.

        Returns the file name relative to ``figure_dir`` (recorded in the check's result), or
        ``None`` when figures are off. Checks should test :attr:`want_figures` before plotting."""
        plt = pyplot()
        try:
            if self.figure_dir is None:
                return None
            self.figure_dir.mkdir(parents=True, exist_ok=True)
            fname = f"{self.claim_id}__{name}.png".replace("/", "_")
            fig.savefig(self.figure_dir / fname, dpi=110, bbox_inches="tight")
            self._figures.append(fname)
            return fname
        finally:
            plt.close(fig)

    @property
    def want_figures(self) -> bool:
        return self.figure_dir is not None

    def take_figures(self) -> list[str]:
        out, self._figures = self._figures, []
        return out
