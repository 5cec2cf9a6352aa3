"""What a run gives: the statuses of a claim and their exit code, a check's outcome, a claim's result, a mutant's row
of the kill matrix, and their summaries (best resolution per layer, the kill summary, the words of a continuous
mutant's outcomes). Split out of :mod:`proofs_checks.runner`, which runs claims and mutants and re-exports these."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from proofs_checks.registry import CheckResult

STATUSES = ("verified", "refuted", "error", "incomplete", "evidence", "undecided", "inconclusive")
#: statuses that make ``tverify run`` exit 1
FAILING = ("refuted", "error", "incomplete")
#: statuses that are neither verified nor refuted (``tverify run`` exits 3 when nothing failed)
INCONCLUSIVE = ("undecided", "inconclusive")


def exit_code(statuses) -> int:
    """``tverify run``'s exit code for these claim statuses: 1 when one failed (refuted, error,
    incomplete), else 3 when one is undecided, else 0.

    >>> exit_code(["verified", "undecided"]), exit_code(["undecided", "refuted"]), exit_code(["evidence"])
    (3, 1, 0)
    """
    statuses = list(statuses)
    if any(s in FAILING for s in statuses):
        return 1
    return 3 if any(s in INCONCLUSIVE for s in statuses) else 0


def obligation_status(o: dict[str, Any]) -> str:
    """``holds`` / ``fails`` / ``undecided`` of an obligation's JSON (older JSON: from ``passed``)."""
    return o.get("status") or ("holds" if o.get("passed") else "fails")


def _obl_text(o: dict[str, Any]) -> str:
    cx = o.get("counterexample")
    if not cx:
        return str(o.get("name"))
    return f"{o.get('name')} (counterexample: " + ", ".join(f"{k} = {v}" for k, v in cx.items()) + ")"


@dataclass
class CheckOutcome:
    """A check's result plus its identity and, when it crashed, the error."""

    name: str
    layer: str
    status: str  # passed | failed | error | skipped | inconclusive
    result: CheckResult | None
    error_message: str | None = None
    traceback: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "layer": self.layer, "status": self.status}
        if self.result is not None:
            r = asdict(self.result)
            r["seeds"] = list(r["seeds"])
            d.update({k: _jsonable(v) for k, v in r.items()})
        if self.error_message:
            d["error_message"] = self.error_message
        return d


@dataclass
class ClaimResult:
    id: str
    kind: str
    title: str
    status: str
    checks: list[CheckOutcome]
    stated_checks: list[CheckOutcome] = field(default_factory=list)
    derivation: list[dict[str, str]] = field(default_factory=list)
    derivation_error: str | None = None
    obligations: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)
    supports: bool | None = None
    seconds: float = 0.0
    mode: str = "default"
    seed: int = 0
    device: str = "cpu"
    message: str = ""
    statement: dict[str, Any] = field(default_factory=dict)
    #: a plugin's or notebook's claim: its checks' power measured on its form (proofs_checks.power)
    power: dict[str, Any] = field(default_factory=dict)

    @property
    def evidence(self) -> str:
        """The claim's weakest evidence in one line ("derived ∀ sizes", "derived at T = 3 (…)")."""
        return str(self.statement.get("evidence_summary") or "")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "status": self.status,
            "message": self.message,
            "evidence_summary": self.evidence or None,
            "hypotheses": self.statement.get("hypotheses") or [],
            "clauses": self.statement.get("clauses") or [],
            "no_hypotheses": self.statement.get("no_hypotheses"),
            "fixed_sizes": self.statement.get("fixed_sizes"),
            "assumptions": self.statement.get("assumptions") or [],
            "supports": self.supports,
            "seconds": round(self.seconds, 4),
            "mode": self.mode,
            "seed": self.seed,
            "device": self.device,
            "max_error_ratio": _jsonable(self.max_error_ratio),
            "best_resolution": best_resolution([c.to_json() for c in self.checks]),
            "checks": [c.to_json() for c in self.checks],
            "stated_checks": [c.to_json() for c in self.stated_checks],
            "derivation": self.derivation,
            "derivation_error": self.derivation_error,
            "obligations": self.obligations,
            "provenance": self.provenance,
            "legend": self.legend,
            "stated_refuted_by": self.stated_refuted_by,
            "power": self.power or None,
        }

    @property
    def stated_refuted_by(self) -> dict[str, list[str]]:
        """Erratum: the checks that refuted the stated form, by layer."""
        out: dict[str, list[str]] = {}
        for o in self.stated_checks:
            if o.status == "failed":
                out.setdefault(o.layer, []).append(o.name)
        return out

    @property
    def max_error_ratio(self) -> float:
        ratios = [c.result.ratio for c in self.checks if c.result is not None and not math.isnan(c.result.ratio)]
        return float(max(ratios)) if ratios else math.nan


@dataclass
class MutantResult:
    """One row of the kill matrix: a mutant run against every check of its claim.

    ``killed`` is true when at least one check rejected it; ``killed_by`` names the rejecting check
    with the largest margin (and ``error``/``tolerance`` are that check's); ``outcomes`` has one
    entry per check, in the claim's order."""

    claim: str
    mutant: str
    kind: str
    description: str
    killed: bool
    killed_by: str | None
    error: float
    tolerance: float
    outcomes: list[CheckOutcome]
    seconds: float
    mode: str = "quick"
    exempt: str = ""
    refused: str = ""

    def rejected_by_layer(self) -> dict[str, float]:
        """Best margin per layer among the checks that rejected the mutant (none when the kill was
        refused because the unmutated claim is not verified)."""
        best: dict[str, float] = {}
        if self.refused:
            return best
        for o in self.outcomes:
            if o.status == "failed" and o.result is not None:
                m = _margin(o.result)  # NaN: rejected, its margin not measured (a NaN output is no mismatch of a size)
                if o.layer not in best or m > best[o.layer] or math.isnan(best[o.layer]):
                    best[o.layer] = m
        return best

    def matrix_entries(self) -> list[dict[str, Any]]:
        rows = []
        for o in self.outcomes:
            r = o.result
            margin = _margin(r) if r is not None else math.nan
            rows.append({
                "check": o.name,
                "layer": o.layer,
                "status": o.status,
                "rejected": o.status == "failed",
                "error": _margin_json(r.error) if r is not None else None,
                "tolerance": _margin_json(r.tolerance) if r is not None else None,
                "margin": _margin_json(margin),
                "reason": (r.reason or r.skip_reason) if r is not None and (r.reason or r.skip_reason) else o.error_message,
                "seconds": round(r.seconds, 4) if r is not None else None,
            })
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "mutant": self.mutant,
            "kind": self.kind,
            "description": self.description,
            "mode": self.mode,
            "killed": self.killed,
            "killed_by": self.killed_by,
            "error": _margin_json(self.error),
            "tolerance": _margin_json(self.tolerance),
            "rejected_by_layer": {k: _margin_json(v) for k, v in self.rejected_by_layer().items()},
            "exempt": self.exempt or None,
            "refused": self.refused or None,
            "seconds": round(self.seconds, 4),
            "checks": self.matrix_entries(),
        }


def _margin(r) -> float:
    """A rejection's margin, error / tolerance: NaN (not measured) when the error itself is NaN — a mutant whose output
    is NaN fails every check, but by no measured distance: it was an infinite margin, counted among the kills with
    margin ≥ 3 (hostile pass 45b F1)."""
    return math.nan if math.isnan(r.error) else r.ratio


def _margin_json(v: Any) -> Any:
    """Numbers for JSON: ``inf`` is kept as the string "inf" (an exact mismatch), NaN as None."""
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _jsonable(v: Any) -> Any:
    """Make numbers JSON-safe (NaN/inf -> None; numpy scalars -> Python)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:
        v = v.item()
    if hasattr(v, "tolist"):
        return _jsonable(v.tolist())
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _res_rank(units: str) -> int:
    """Order of resolution units when picking a layer's best: exact, then relative, then others."""
    return 0 if units.startswith("exact") else (1 if units.startswith("relative") else 2)


def best_resolution(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per layer, the best (smallest) resolution among the checks that ran (JSON check dicts):
    ``{layer: {"resolution", "units", "check"}}``; exact and relative units are preferred over a
    check's own units (which are not comparable across checks)."""
    out: dict[str, dict[str, Any]] = {}
    for c in checks:
        r, u = c.get("resolution"), str(c.get("resolution_units") or "")
        if c.get("status") not in ("passed", "failed") or not isinstance(r, (int, float)) or not math.isfinite(r):
            continue
        cur = out.get(c["layer"])
        if cur is None or (_res_rank(u), r) < (_res_rank(cur["units"]), cur["resolution"]):
            out[c["layer"]] = {"resolution": float(r), "units": u, "check": c["name"]}
    return out


#: a rejection counts towards the target when its margin (error/tolerance) is at least this
TARGET_MARGIN = 3.0


def kill_summary(mutants: list[MutantResult], kinds: dict[str, str] | None = None) -> dict[str, Any]:
    """Summary of the kill matrix: overall and per claim, how many mutants each layer rejects,
    how many are rejected by a non-symbolic (numeric or trained) check, and how many of those with
    margin ≥ :data:`TARGET_MARGIN`. ``kinds`` maps claim id -> claim kind (for the target share,
    which counts theorem/identity/erratum claims only)."""
    def blank() -> dict[str, Any]:
        return {"total": 0, "killed": 0, "by_layer": {"symbolic": 0, "numeric": 0, "trained": 0},
                "non_symbolic": 0, "non_symbolic_margin_ge_3": 0, "exempt": 0}

    overall, per_claim = blank(), {}
    target = {"eligible": 0, "met": 0, "exempt": 0, "missed": []}
    for m in mutants:
        c = per_claim.setdefault(m.claim, blank())
        layers = m.rejected_by_layer()
        ns = [v for k, v in layers.items() if k != "symbolic"]
        for agg in (overall, c):
            agg["total"] += 1
            agg["killed"] += int(m.killed)
            for k in layers:
                agg["by_layer"][k] = agg["by_layer"].get(k, 0) + 1
            agg["non_symbolic"] += int(bool(ns))
            agg["non_symbolic_margin_ge_3"] += int(any(v >= TARGET_MARGIN for v in ns))
            agg["exempt"] += int(bool(m.exempt))
        if kinds is None or kinds.get(m.claim) in ("theorem", "identity", "erratum"):
            target["eligible"] += 1
            if m.exempt:
                target["exempt"] += 1
            elif any(v >= TARGET_MARGIN for v in ns):
                target["met"] += 1
            else:
                target["missed"].append(f"{m.claim}:{m.mutant}")
    n = target["eligible"] - target["exempt"]
    target["share_met"] = (target["met"] / n) if n else None
    return {"overall": overall, "claims": per_claim, "target": target, "target_margin": TARGET_MARGIN,
            "survived": [f"{m.claim}:{m.mutant}" for m in mutants if not m.killed]}


def resolution_text(c: dict[str, Any]) -> str:
    """A check's resolution for tables: ``1.2e-10 rel``, ``exact``, or the number in its own units."""
    r, u = c.get("resolution"), str(c.get("resolution_units") or "")
    if not isinstance(r, (int, float)) or not math.isfinite(r):
        return "–"
    if u.startswith("exact"):
        return "exact (0)"
    return f"{float(r):.2g}" + (" rel" if u.startswith("relative") else " (own units)")


def outcome_words(v: dict[str, Any], alarm: Callable[[str], str] = str) -> tuple[str, str]:
    """The two outcomes of a continuous-mutant row (proofs_checks.continuous) in words, for every rendering (console, Markdown, HTML): the form ×
    (1 ± 2ε) ``"rejected"`` / ``"NOT rejected"`` (marked by ``alarm``), the form × (1 ± ε/2) ``"accepted"`` / ``"rejected"``.

    >>> outcome_words({"rejected_at_2eps": True, "accepted_at_half_eps": False})
    ('rejected', 'rejected')
    >>> outcome_words({"rejected_at_2eps": False, "accepted_at_half_eps": True}, alarm=lambda w: f"**{w}**")
    ('**NOT rejected**', 'accepted')
    """
    return ("rejected" if v.get("rejected_at_2eps") else alarm("NOT rejected"),
            "accepted" if v.get("accepted_at_half_eps") else "rejected")
