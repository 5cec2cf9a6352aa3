"""Run claims and mutants; turn check results into statuses.

Statuses of a claim:
  verified   every check that ran passed (erratum: the corrected form passed every check *and*
             the stated form failed at least one)
  refuted    some check failed (erratum: or the stated form survived every check)
  error      a check or the derivation crashed (reported, never fatal to the run)
  skipped    every check was skipped (e.g. CUDA requested but absent)
  evidence   evidence / conjecture claims: numbers are reported, never a pass;
             ``supports`` says whether they bear the claim out
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from proofs_checks.context import RunContext
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, SkipCheck
from theory.validation import InputError

__all__ = ["CheckOutcome", "ClaimResult", "MutantResult", "run_claim", "run_mutant", "run_claims", "run_mutants"]

STATUSES = ("verified", "refuted", "error", "skipped", "evidence")


@dataclass
class CheckOutcome:
    """A check's result plus its identity and, when it crashed, the error."""

    name: str
    layer: str
    status: str  # passed | failed | error | skipped
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
    supports: bool | None = None
    seconds: float = 0.0
    mode: str = "default"
    seed: int = 0
    device: str = "cpu"
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "status": self.status,
            "message": self.message,
            "supports": self.supports,
            "seconds": round(self.seconds, 4),
            "mode": self.mode,
            "seed": self.seed,
            "device": self.device,
            "max_error_ratio": _jsonable(self.max_error_ratio),
            "checks": [c.to_json() for c in self.checks],
            "stated_checks": [c.to_json() for c in self.stated_checks],
            "derivation": self.derivation,
            "derivation_error": self.derivation_error,
        }

    @property
    def max_error_ratio(self) -> float:
        ratios = [c.result.ratio for c in self.checks if c.result is not None and not math.isnan(c.result.ratio)]
        return max(ratios) if ratios else math.nan


@dataclass
class MutantResult:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "mutant": self.mutant,
            "kind": self.kind,
            "description": self.description,
            "killed": self.killed,
            "killed_by": self.killed_by,
            "error": _jsonable(self.error),
            "tolerance": _jsonable(self.tolerance),
            "seconds": round(self.seconds, 4),
            "checks": [o.to_json() for o in self.outcomes],
        }


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


def _run_check(check: Check, form: Any, claim: Claim, ctx: RunContext) -> CheckOutcome:
    cctx = ctx.for_check(claim.id, check.name)
    if check.uses_device and ctx.device.startswith("cuda"):
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            reason = "CUDA requested (--device cuda) but torch sees no CUDA device"
            return CheckOutcome(check.name, check.layer, "skipped", CheckResult(None, skip_reason=reason, device=ctx.device))
    t0 = time.perf_counter()
    try:
        res = check.fn(form, cctx)
    except SkipCheck as exc:
        res = CheckResult(None, skip_reason=str(exc), device=ctx.device)
    except (InputError, Exception) as exc:  # a crash in one check is reported, not fatal
        return CheckOutcome(
            check.name,
            check.layer,
            "error",
            None,
            error_message=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
    if not isinstance(res, CheckResult):
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"check returned {type(res).__name__}, not CheckResult")
    res.seconds = time.perf_counter() - t0
    res.figures = list(res.figures) + cctx.take_figures()
    if not res.device or res.device == "cpu":
        res.device = ctx.device if check.uses_device else "cpu"
    status = "skipped" if res.passed is None else ("passed" if res.passed else "failed")
    return CheckOutcome(check.name, check.layer, status, res)


def _derivation_steps(claim: Claim) -> tuple[list[dict[str, str]], str | None]:
    """The claim's derivation as ``[{"text", "latex", "mathml"}]`` (and an error message if it crashed).

    ``mathml`` is presentation MathML of the step's expression ('' for a text-only step or when it
    cannot be printed): the step's LaTeX through latex2mathml, else SymPy's MathML printer. Printing
    never raises: a step whose expression cannot be printed keeps its text."""
    if claim.derivation is None:
        return [], None
    try:
        d = claim.derivation()
    except Exception as exc:
        return [], f"{type(exc).__name__}: {exc}"
    try:
        from proofs_checks.html_report import expr_mathml
    except Exception:  # pragma: no cover - latex2mathml missing: steps keep text and LaTeX
        expr_mathml = None
    steps = []
    for s in getattr(d, "steps", ()) or ():
        expr = getattr(s, "expr", None)
        try:
            latex = s.latex() if hasattr(s, "latex") else ("" if expr is None else str(expr))
            latex = latex if isinstance(latex, str) else str(latex)
        except Exception:
            try:
                latex = "" if expr is None else str(expr)
            except Exception:
                latex = ""
        mathml = ""
        if expr_mathml is not None and (latex or expr is not None):
            try:
                mathml = expr_mathml(expr, latex)
            except Exception:  # pragma: no cover - expr_mathml already never raises
                mathml = ""
        try:
            text = str(getattr(s, "text", s))
        except Exception:
            text = "(step text could not be printed)"
        steps.append({"text": text, "latex": latex, "mathml": mathml})
    return steps, None


def run_claim(claim: Claim, ctx: RunContext | None = None, *, with_derivation: bool = True) -> ClaimResult:
    """Run every check of ``claim`` (and for an erratum, every check on the stated form)."""
    ctx = ctx or RunContext()
    t0 = time.perf_counter()
    steps, derr = _derivation_steps(claim) if with_derivation else ([], None)
    outcomes = [_run_check(c, claim.form, claim, ctx) for c in claim.checks]
    stated: list[CheckOutcome] = []
    if claim.kind == "erratum":
        # the stated form runs cheapest-first and stops at its first refutation
        for c in sorted(claim.checks, key=lambda c: LAYER_ORDER[c.layer]):
            stated.append(_run_check(c, claim.stated, claim, ctx))
            if stated[-1].status == "failed":
                break
    status, message, supports = _status(claim, outcomes, stated, derr)
    return ClaimResult(
        id=claim.id,
        kind=claim.kind,
        title=claim.title,
        status=status,
        checks=outcomes,
        stated_checks=stated,
        derivation=steps,
        derivation_error=derr,
        supports=supports,
        seconds=time.perf_counter() - t0,
        mode=ctx.mode,
        seed=ctx.seed,
        device=ctx.device,
        message=message,
    )


def _status(claim: Claim, outcomes: list[CheckOutcome], stated: list[CheckOutcome], derr: str | None):
    states = [o.status for o in outcomes]
    if derr:
        return "error", f"derivation failed: {derr}", None
    if "error" in states:
        bad = next(o for o in outcomes if o.status == "error")
        return "error", f"check {bad.name} crashed: {bad.error_message}", None
    if claim.is_evidence:
        ran = [o for o in outcomes if o.status != "skipped"]
        if not ran:
            return "skipped", "every check skipped", None
        supports = all(o.status == "passed" for o in ran)
        return "evidence", ("the measured numbers support the claim" if supports else "the measured numbers do not support the claim"), supports
    if "failed" in states:
        bad = [o.name for o in outcomes if o.status == "failed"]
        return "refuted", f"failed: {', '.join(bad)}", None
    if all(s == "skipped" for s in states):
        return "skipped", "every check skipped: " + "; ".join(o.result.skip_reason or "" for o in outcomes if o.result), None
    if claim.kind == "erratum":
        sstates = [o.status for o in stated]
        if "failed" not in sstates:
            return "refuted", "erratum not shown: the seed's stated form passed every check", None
        killed = [o.name for o in stated if o.status == "failed"]
        return "verified", f"stated form refuted by {', '.join(killed)}; corrected form verified", None
    skipped = [o.name for o in outcomes if o.status == "skipped"]
    return "verified", ("skipped: " + ", ".join(skipped)) if skipped else "", None


def run_mutant(claim: Claim, mutant: Mutant, ctx: RunContext | None = None, *, fail_fast: bool = True) -> MutantResult:
    """Run the claim's checks on ``mutant.form``; the mutant is killed when a check fails.

    Symbolic and numeric checks run first (cheap); with ``fail_fast`` the first failure stops.
    A crash is not a kill: a check must *refute* the mutant, not trip over it."""
    ctx = ctx or RunContext(mode="quick")
    order = sorted(claim.checks, key=lambda c: LAYER_ORDER[c.layer])
    outcomes: list[CheckOutcome] = []
    t0 = time.perf_counter()
    killer: CheckOutcome | None = None
    for check in order:
        o = _run_check(check, mutant.form, claim, ctx)
        outcomes.append(o)
        if o.status == "failed":
            killer = o
            if fail_fast:
                break
    return MutantResult(
        claim=claim.id,
        mutant=mutant.name,
        kind=mutant.kind,
        description=mutant.description,
        killed=killer is not None,
        killed_by=killer.name if killer else None,
        error=killer.result.error if killer and killer.result else math.nan,
        tolerance=killer.result.tolerance if killer and killer.result else math.nan,
        outcomes=outcomes,
        seconds=time.perf_counter() - t0,
    )


LAYER_ORDER = {"symbolic": 0, "numeric": 1, "trained": 2}


def run_claims(claims: list[Claim], ctx: RunContext, progress: Callable[[Claim], Any] | None = None) -> list[ClaimResult]:
    out = []
    for c in claims:
        out.append(run_claim(c, ctx))
        if progress:
            progress(c)
    return out


def run_mutants(claims: list[Claim], ctx: RunContext, progress: Callable[[Claim, Mutant], Any] | None = None) -> list[MutantResult]:
    out = []
    for c in claims:
        for m in c.all_mutants():
            out.append(run_mutant(c, m, ctx))
            if progress:
                progress(c, m)
    return out
