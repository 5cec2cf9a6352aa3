"""Helpers shared by the attention claim modules (``attention``, ``attention_forms``, ``attention_blocks``,
``attention_pe``, and others): torch seeding, conversions, NaN-aware magnitudes. A module whose name starts
with ``_`` registers nothing."""


from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

from proofs_checks.comparisons import REL_UNITS, confirm_resolution, largest, smallest
from proofs_checks.registry import compare, worst



def _quiet(f, *args):
    with np.errstate(all="ignore"):
        return f(*args)


@contextlib.contextmanager
def _torch_seed(seed: int):
    """Seed torch's global generator (module initialisers use it) without disturbing the caller."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def _T(a, device="cpu") -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _maxabs(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(np.abs(a))) if a.size and np.all(np.isfinite(a)) else (0.0 if a.size == 0 else math.inf)


# --------------------------------------------------------------------------------------------
# resolving power (issue 29) of the attention-group checks that compare several named arrays


def _arr(a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


class Resolved:
    """The named errors of one check, kept with the arrays they came from, so that the check's
    resolution is derived and confirmed rather than the placeholder ``tolerance + |error|``.

    * :meth:`pair` records a comparison of a value with a reference (``max|value − ref|``,
      optionally divided by a constant ``div``, by ``max|ref|`` (``div="ref"``) or by
      ``max(1, max|ref|)`` (``div="ref1"``, as in :func:`proofs_checks.tolerances.max_rel_error`); ``ratio=True``: ``max|value/ref − 1|``).
      Scaling the reference by ``1 + δ`` moves that error by at least ``|δ|·s − error`` (triangle
      inequality; ``s`` = ``max|ref|`` over the divisor, 1 for a ratio), so the entry rejects
      every ``|δ| > (tol + error) / (s·(1 − tol))``; the check's resolution (relative change of the
      reference) is the smallest of these over the entries with ``s > 0``.
    * :meth:`prop` records a property that is not a comparison with a scalable reference (a leak
      of weight onto masked tokens, a count, a zero gradient); it stays in the verdict and its own
      resolution, ``tol + |error|`` in its named units, is listed in the details.

    :meth:`result` builds the :class:`CheckResult` (``error = worst`` of all entries, pass iff
    ``≤ tol``: the verdict is the one of a bare ``compare``) and confirms the resolution by
    re-running every comparison against its reference scaled by ``1 ± 2ε`` and ``1 ± ε/2``
    (:func:`proofs_checks.comparisons.confirm_resolution`).

    >>> r = Resolved(); _ = r.pair("a", [1.0, 2.0 + 1e-15], [1.0, 2.0]); _ = r.prop("leak", 0.0, "absolute weight")
    >>> res = r.result(1e-12, "rounding"); res.passed, res.resolution < 1e-12, res.details["resolution_confirmed"]["rejects_2eps"]
    (True, True, True)
    """

    def __init__(self) -> None:
        self.errs: dict[str, float] = {}
        self._pairs: dict[str, list] = {}
        self._units: dict[str, str] = {}

    def _put(self, label: str, e: float) -> float:
        self.errs[label] = e if label not in self.errs else float(worst([self.errs[label], e]))
        return e

    @staticmethod
    def _err(item, delta: float) -> float:
        v, r, div, ratio = item
        rr = r * (1.0 + delta)
        with np.errstate(all="ignore"):
            d = np.abs(v / rr - 1.0) if ratio else np.abs(v - rr)
            if d.size == 0:
                return 0.0
            m = float(np.max(d))
            if div == "ref1":
                m /= largest(1.0, float(np.max(np.abs(rr))))
            elif div == "ref":
                m /= float(np.max(np.abs(rr)))
            elif div is not None:
                m /= float(div)
        return m

    @staticmethod
    def _scale(item) -> float:
        v, r, div, ratio = item
        if ratio:
            return 1.0
        s = float(np.max(np.abs(r))) if r.size else 0.0
        if div == "ref1":
            return s / largest(1.0, s)
        if div == "ref":
            return 1.0 if s > 0 else 0.0
        return s / float(div) if div is not None else s

    def pair(self, label: str, value, ref, *, div=None, ratio: bool = False) -> float:
        """Record ``value`` against ``ref`` under ``label`` (several calls with one label: the
        largest error); returns this pair's error."""
        item = (_arr(value), _arr(ref), div, ratio)
        self._pairs.setdefault(label, []).append(item)
        return self._put(label, self._err(item, 0.0))

    def prop(self, label: str, err: float, units: str) -> float:
        """Record a property's error (no reference to scale) in its named ``units``."""
        self._units[label] = units
        return self._put(label, float(err))

    def error_at(self, delta: float) -> float:
        """The check's error with every reference scaled by ``1 + delta``."""
        errs = {lab: e for lab, e in self.errs.items() if lab not in self._pairs}
        for lab, items in self._pairs.items():
            errs[lab] = worst([self._err(it, delta) for it in items])
        return worst(errs)

    def entry_resolutions(self, tol: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for lab, items in self._pairs.items():
            for it in items:
                s, e = self._scale(it), self._err(it, 0.0)
                if s > 0 and math.isfinite(s) and math.isfinite(e) and tol < 1:
                    eps = (tol + e) / (s * (1.0 - tol))
                    out[lab] = eps if lab not in out else smallest(out[lab], eps)
        return out

    def result(self, tol: float, justification: str, *, details: dict | None = None, resolution: float | None = None,
               resolution_units: str | None = None, **kw):
        per = self.entry_resolutions(tol)
        props = {lab: {"resolution": tol + abs(self.errs[lab]), "units": u} for lab, u in self._units.items()}
        det = dict(details or {})
        if resolution is None and per:
            resolution, resolution_units = smallest(list(per.values())), REL_UNITS
        elif resolution is None and props and len({p["units"] for p in props.values()}) == 1:
            resolution = smallest([p["resolution"] for p in props.values()])
            resolution_units = next(iter(props.values()))["units"]
        if per and resolution_units == REL_UNITS:
            det["resolution_confirmed"] = confirm_resolution(self.error_at, tol, float(resolution))
        det["resolution_by_entry"] = {lab: float(f"{v:.3g}") for lab, v in per.items()}
        if props:
            det["property_resolutions"] = props
        extra = {} if resolution is None else {"resolution": resolution, "resolution_units": resolution_units or ""}
        return compare(dict(self.errs), tol, justification, details=det, **extra, **kw)
