"""Run claims and mutants; turn check results into statuses.

Statuses of a claim:
  verified    every check of every layer ran and passed, and every obligation of the derivation
              holds (erratum: and the stated form was refuted by at least one check)
  refuted     a check failed, or an obligation is false and its counterexample is shown (erratum:
              or no check refuted the stated form)
  undecided   nothing failed, but SymPy could not decide an obligation and a numeric search found
              no counterexample: not verified, not refuted (``tverify run`` exits 3)
  error       a check or the derivation crashed (reported, never fatal to the run)
  incomplete  nothing failed, but some check did not run (e.g. --device cuda --allow-skip without
              CUDA): never counted as verified
  evidence    evidence / conjecture claims: numbers are reported, never a pass; ``supports`` says
              whether they bear the claim out

Mutants (the kill matrix): every mutant runs against every check of its claim, at the same size
mode as the claim; a mutant is rejected by a check that *fails* on it (a crash is not a rejection),
and each rejection has a margin error/tolerance (``inf`` for an exact mismatch).
"""

from __future__ import annotations

import math
import time
import traceback
from typing import Any, Callable

from proofs_checks.context import RunContext, identity_token
from proofs_checks.registry import (VACUOUS, Check, CheckResult, Claim, Counterexample, DroppedHypothesis, Inconclusive, Mutant,
                                    SkipCheck, VacuousCheck, default_resolution, vacuity)
from proofs_checks.check_result import CONTRADICTS, contradiction
from proofs_checks.fingerprint import derivation_budget  # noqa: F401 (re-exported: the budget a run reads)
from proofs_checks.resolution import ROUNDING_FLOOR, finite_rejection  # noqa: F401 (re-exported)
from proofs_checks.run_derivation import (ISOLATED_DERIVATION, _OutOfTime, _budget, _builtin, _derivation_steps,  # noqa: F401
                                          _step_dicts, _unnamed_premises, derivation_info, derivation_info_here)
from proofs_checks.run_results import (FAILING, INCONCLUSIVE, STATUSES, TARGET_MARGIN, CheckOutcome,  # noqa: F401
                                       ClaimResult, MutantResult, _jsonable, _margin, _margin_json, _obl_text,
                                       best_resolution, exit_code, kill_summary, obligation_status,
                                       outcome_words, resolution_text)
from theory.validation import InputError, printable

__all__ = ["CheckOutcome", "ClaimResult", "MutantResult", "run_claim", "own_power", "run_mutant", "run_claims", "run_mutants", "run_check",
           "claim_result", "mutant_result", "exit_code", "obligation_status", "refuse_mutants",
           "refused_mutant", "refusal_reason", "claim_counts_kills", "STATUSES", "FAILING",
           "INCONCLUSIVE", "run_counterexample", "counterexample_json", "necessity_text", "statement_json"]

#: the name of the outcome of a statement mutant's counterexample in the kill matrix
COUNTEREXAMPLE = "counterexample"


def _unmeasured(cx: Counterexample) -> str:
    """Why ``cx`` states no computed violation, or "": ``violated`` not a bool (the string 'False' is true), an error or
    tolerance that is no number, a tolerance below 0 (no threshold: 0 > −1 is no violation), or a measured error
    without the tolerance it must exceed."""
    import numpy as np

    if not isinstance(cx.violated, (bool, np.bool_)):
        return f"gives violated={printable(cx.violated, repr)}, not True or False (the computation's own answer)"
    try:
        e_, t_ = float(cx.error), float(cx.tolerance)
    except (TypeError, ValueError):
        return f"gives error={printable(cx.error, repr)}, tolerance={printable(cx.tolerance, repr)}: not numbers"
    if t_ < 0:
        return f"gives a tolerance below 0 ({t_:g}): no threshold a violation exceeds"
    if cx.violated and math.isnan(t_) and not math.isnan(e_):
        return f"measures an error of {e_:g} without the tolerance it must exceed"
    return ""


def run_counterexample(claim: Claim, name: str, ctx: RunContext) -> CheckOutcome:
    """Run the counterexample of hypothesis ``name``: the statement mutant "``claim`` without
    ``name``" is *rejected* (outcome ``failed``) when the computation finds the named clause false
    on the instance, and survives (``passed``) when it does not. A crash is an ``error`` outcome
    (never a rejection); a clause name that the claim does not have is an error too."""
    h = claim.hypothesis(name)
    cctx = ctx.for_check(claim.id, f"{COUNTEREXAMPLE}:{name}", scope=identity_token(h.counterexample))
    cctx.device = "cpu"
    t0 = time.perf_counter()
    try:
        cx = h.counterexample(cctx)
    except SkipCheck as exc:
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "skipped", CheckResult(None, skip_reason=str(exc)))
    except (Exception, SystemExit, GeneratorExit) as exc:
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "error", None, error_message=f"{type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc())
    if not isinstance(cx, Counterexample):
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "error", None,
                            error_message=f"counterexample returned {type(cx).__name__}, not Counterexample")
    clause_names = {c.name for c in claim.statement_clauses()}
    if cx.clause not in clause_names:
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "error", None,
                            error_message=f"counterexample names clause {cx.clause!r}, not one of {sorted(clause_names)}")
    bad = _unmeasured(cx)
    if bad:  # (each was a kill, the hypothesis "shown necessary": hostile pass 46b F2)
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "error", None, error_message=f"the counterexample {bad}: nothing was shown")
    e_, t_ = float(cx.error), float(cx.tolerance)
    # error and tolerance left NaN (their defaults): a violation shown otherwise (exactly, by construction),
    # which ``violated`` states; a NaN error is an undefined value where the clause asks for a defined one
    # (a 0/0 softmax row). A numeric error must exceed its tolerance (``error > tolerance`` is the
    # violation): one within it — 0 ≤ 1e-12, inf against inf — shows nothing
    if cx.violated and not math.isnan(t_) and not math.isnan(e_) and not e_ > t_:
        return CheckOutcome(COUNTEREXAMPLE, h.layer, "error", None,
                            error_message=f"the counterexample says the clause is violated, but its measured error "
                                          f"{cx.error} is not beyond its tolerance {cx.tolerance}: nothing was shown")
    err = float(cx.error) if math.isfinite(float(cx.error)) else (math.inf if cx.violated else 0.0)
    tol = float(cx.tolerance) if math.isfinite(float(cx.tolerance)) else 0.0
    from proofs_checks.errors import visible, visible_all

    res = CheckResult(not cx.violated, error=err, tolerance=tol,
                      justification=visible(str(cx.justification or cx.shows)),  # (its texts shown, never obeyed: 46b F13)
                      details=visible_all({"counterexample": cx.to_json(), **_jsonable(dict(cx.details))}),
                      seeds=(cctx.seed_for(),), reason="" if cx.violated else "the instance does not violate the clause")
    res.seconds = time.perf_counter() - t0
    res.resolution, res.resolution_units = default_resolution(res.error, res.tolerance)
    return CheckOutcome(COUNTEREXAMPLE, h.layer, "failed" if cx.violated else "passed", res)


def necessity_text(h: dict[str, Any]) -> str:
    """How a hypothesis (JSON) earns its place, in words: its counterexample, or "not shown necessary"."""
    cx = h.get("counterexample")
    if h.get("necessary") and cx:
        inst = ", ".join(f"{k} = {v}" for k, v in (cx.get("instance") or {}).items())
        return f"dropping it breaks `{cx.get('clause')}`: {inst}: {cx.get('shows')}"
    if h.get("necessary") is None:
        return "counterexample computed by `tverify show`/`mutants`"
    why = h.get("why_not_shown") or ""
    return "not shown necessary" + (f" ({why})" if why else "")


def _counterexample(claim: Claim, name: str, ctx: RunContext) -> CheckOutcome:
    """:func:`run_counterexample`, in a child process for a plugin's claim (as its statement mutant
    runs in ``tverify mutants``): a plugin's counterexample is someone else's code."""
    iso = ISOLATED.get(claim.id)
    if iso is not None and iso[0] is claim and claim.checks:
        from proofs_checks.registry import DroppedHypothesis

        m = next((m for m in claim.all_mutants() if isinstance(m.form, DroppedHypothesis) and m.form.name == name),
                 None)
        if m is not None:
            return iso[1](claim.checks[0], m.form, claim, ctx)
    return run_counterexample(claim, name, ctx)


def counterexample_json(claim: Claim, ctx: RunContext | None = None) -> list[dict[str, Any]]:
    """The hypotheses of ``claim`` as JSON, each with its computed counterexample (``counterexample``:
    the instance and the violated clause, ``necessary: true``) or ``necessary: false`` and the
    reason none is shown."""
    ctx = ctx or RunContext(mode="quick")
    out = []
    for h in claim.hypotheses:
        item: dict[str, Any] = {"name": h.name, "latex": h.latex, "text": h.text or None}
        if h.counterexample is None:
            item.update(necessary=False, counterexample=None, why_not_shown=h.necessary_note)
        else:
            o = _counterexample(claim, h.name, ctx)
            cx = (o.result.details.get("counterexample") if o.result is not None else None)
            item.update(necessary=o.status == "failed", counterexample=cx,
                        why_not_shown=None if o.status == "failed" else
                        (o.error_message or (o.result.reason if o.result else "") or o.status))
        out.append(item)
    return out


#: claim id -> (the registered claim, how its checks run): the claims of a ``tverify.claims`` plugin run
#: each check in a child process (``proofs_checks.claims._plugins``, which fills this when it loads a
#: plugin); a claim object other than the registered one (a notebook's redefinition) runs here
ISOLATED: dict[str, tuple[Claim, Callable[..., "CheckOutcome"]]] = {}
#: whether a plugin check's child may print "still running" lines (``--no-progress`` sets it False)
PROGRESS_LINES = True


def _run_check(check: Check, form: Any, claim: Claim, ctx: RunContext) -> CheckOutcome:
    iso = ISOLATED.get(claim.id)
    if iso is not None and iso[0] is claim:
        return iso[1](check, form, claim, ctx)
    return run_check_here(check, form, claim, ctx)


def run_check_here(check: Check, form: Any, claim: Claim, ctx: RunContext) -> CheckOutcome:
    """One check of ``claim`` on ``form`` in this process (what :func:`_run_check` does for every claim
    that is not a plugin's, and what a plugin claim's child process does)."""
    if isinstance(form, DroppedHypothesis):  # a statement mutant: its counterexample, once, in place of the checks
        if check is claim.checks[0]:
            return run_counterexample(claim, form.name, ctx)
        return CheckOutcome(check.name, check.layer, "skipped",
                            CheckResult(None, skip_reason="a statement mutant is refuted by its counterexample"))
    # the check function's identity keys its cached references: a claim redefined under the same id (a
    # notebook cell run again) read the old derivation's reference and was verified or refuted by it
    cctx = ctx.for_check(claim.id, check.name, scope=identity_token(check.fn))
    if not check.uses_device:
        cctx.device = "cpu"  # CPU reference checks never depend on the device flag
    if check.uses_device and ctx.device.startswith("cuda"):
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            reason = "CUDA requested (--device cuda) but torch sees no CUDA device"
            return CheckOutcome(check.name, check.layer, "skipped", CheckResult(None, skip_reason=reason, device=ctx.device))
    t0 = time.perf_counter()
    undecided = False
    try:
        res = check.fn(form, cctx)
    except Inconclusive as exc:  # ran, could not decide (a training that missed its criterion): not a skip
        res = CheckResult(None, skip_reason=str(exc), device=ctx.device, details={"inconclusive": True})
        undecided = True
    except SkipCheck as exc:
        res = CheckResult(None, skip_reason=str(exc), device=ctx.device)
    except VacuousCheck as exc:  # an error in the claim (no draws, an infinite tolerance, ...): never a pass
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"{VACUOUS}: {exc}")
    except (InputError, Exception) as exc:  # a crash in one check is reported, not fatal
        return CheckOutcome(
            check.name,
            check.layer,
            "error",
            None,
            error_message=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
    except SystemExit as exc:  # sys.exit(0) in a check ended `tverify run` with exit 0 and no output: a false ok
        return CheckOutcome(check.name, check.layer, "error", None,
                            error_message=f"the check called sys.exit({printable(exc.code, repr)}); nothing was measured")
    except GeneratorExit as exc:  # any other non-Exception except Ctrl-C (KeyboardInterrupt passes: exit 130)
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"{type(exc).__name__}: {exc}")
    if not isinstance(res, CheckResult):
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"check returned {type(res).__name__}, not CheckResult")
    res.seconds = time.perf_counter() - t0
    if vacuity(res):  # a hand-built result that cannot fail
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"{VACUOUS}: {vacuity(res)}")
    if contradiction(res):  # its flag and its numbers disagree (5 against 1 "passed"; a tolerance of -1): 60b F3
        return CheckOutcome(check.name, check.layer, "error", None, error_message=f"{CONTRADICTS}: {contradiction(res)}")
    if res.passed and (math.isinf(res.error) or (math.isnan(res.error) and not math.isnan(res.tolerance))):
        res.passed = False  # a non-finite measurement never passes, whoever built the result
        res.reason = res.reason or f"non-finite error: {res.error}"
    if res.passed is not None and not res.resolution_units:  # built without compare(): the generic rule
        res.resolution, res.resolution_units = default_resolution(res.error, res.tolerance)
    res.figures = list(res.figures) + cctx.take_figures()
    if not res.device or res.device == "cpu":
        res.device = cctx.device
    status = ("inconclusive" if undecided else "skipped") if res.passed is None else ("passed" if res.passed else "failed")
    return CheckOutcome(check.name, check.layer, status, res)


def run_claim(claim: Claim, ctx: RunContext | None = None, *, with_derivation: bool = True) -> ClaimResult:
    """Run the derivation's obligations and every check of ``claim``; for an erratum, every check
    on the stated form too (so its page can say which layers refute it)."""
    ctx = ctx or RunContext()
    t0 = time.perf_counter()
    info = derivation_info(claim) if with_derivation else {
        "steps": [], "obligations": [], "provenance": {}, "legend": {}, "error": None}
    outcomes = [_run_check(c, claim.form, claim, ctx) for c in claim.checks]
    stated: list[CheckOutcome] = []
    if claim.kind == "erratum":
        stated = [_run_check(c, claim.stated, claim, ctx) for c in claim.checks]
    result = claim_result(claim, ctx, info, outcomes, stated, time.perf_counter() - t0)
    if own_power(claim, result, ctx):
        result.seconds = time.perf_counter() - t0
    return result


def own_power(claim: Claim, result: ClaimResult, ctx: RunContext) -> bool:
    """The power and own-mutant rules (:func:`_own_power`) on a verified theorem or identity from outside
    this project's catalogue; whether they ran. :func:`run_claim` ends with it, and so does a claim
    assembled from a cluster's outcomes (:mod:`proofs_checks.distributed.cluster`): the rules run here."""
    if result.status == "verified" and claim.kind in ("theorem", "identity", "erratum") and not _builtin(claim):
        _own_power(claim, result, ctx)
        return True
    return False


def _own_power(claim: Claim, result: ClaimResult, ctx: RunContext) -> None:
    """A verified claim from outside this project's catalogue (a plugin's, a notebook's) must show its
    checks' power on its own form (:mod:`proofs_checks.power`): the form with its outputs doubled and
    halved (entry by entry too) must be rejected, else the verdict is ``error`` (an error in the claim);
    outputs with nothing to perturb make it ``inconclusive``; the measured resolution is stated beside
    the verdict (``result.power``); an identity's checks must reject both sides, a theorem's (it may be
    an inequality) one side of the uniform perturbation. Then its checks must reject at least one of its
    own planted mutants (numeric checks first, then symbolic — a plugin's derivation is rebuilt in each
    check's process — then trained; stopping at the first rejection), else nothing they accept is shown
    to be told apart from a wrong form: ``error`` too. (The built-in claims' mutants are all required killed by the
    test suite.) A check whose reference is 0 on every draw tests one point: it is left out of both."""
    from proofs_checks.power import measure_power

    planted = [m for m in claim.mutants if not m.hypothesis and not m.exempt]
    cost = {"numeric": 0, "symbolic": 1, "trained": 2}
    blind = {o.name for o in result.checks if o.result is not None and o.result.details.get("reference_all_zero")}
    order = sorted((c for c in claim.checks if c.name not in blind), key=lambda c: cost.get(c.layer, 3))
    power = None
    if order:  # else no check can reject anything: the own-mutant rule says so
        power = measure_power(claim.form, order, lambda check, form: _run_check(check, form, claim, ctx),
                              seed=ctx.seed, one_sided=claim.kind != "identity")  # (an erratum's may be a bound)
        result.power = power.to_json()
    if power is not None and power.problem():
        result.status = "inconclusive" if not power.blind else "error"
        result.message = power.problem()
        return
    if power is not None and _control_fails(claim, order, result, ctx):
        return
    res = power.words() if power is not None else "resolution not measured (no check compares a nonzero reference)"
    for m in planted:
        for check in order:
            if finite_rejection(_run_check(check, m.form, claim, ctx)):
                result.message = f"{res}; its checks reject mutant {m.name} ({check.name})"
                return
    left = [m for m in claim.mutants if m not in planted]  # hypotheses' and exempt ones: not the form's mutants
    others = ", ".join(m.name for m in left)
    names = ", ".join(m.name for m in planted) or (
        (f"none to run: the one planted ({others}) is exempt or a hypothesis's" if len(left) == 1 else
         f"none to run: the {len(left)} planted ({others}) are exempt or hypotheses'") if left else "none planted")
    result.status = "error"
    result.message = (f"its checks reject none of its own mutants ({names}): a check that cannot tell the claim from a "
                      f"wrong form verifies nothing (an error in the claim; {res})")


def _control_fails(claim: Claim, order: list, result: ClaimResult, ctx: RunContext) -> bool:
    """The power rule's control: every check run again on the form behind the perturbations' wrapper with
    its outputs multiplied by 1 (:func:`proofs_checks.scaling.unchanged_form`; after the perturbed runs).
    A check that passed on the form and does not pass on this unchanged copy tells them apart by something
    other than the form's values (the object, its type, a call count, the time): its rejections of the
    perturbed forms are no measure of its power, so the claim is an ``error`` (hostile pass 5, H1)."""
    from proofs_checks.scaling import unchanged_form

    for check in order:
        o = _run_check(check, unchanged_form(claim.form), claim, ctx)
        if o.status != "passed":
            result.status = "error"
            result.message = (f"its check {check.name} passed on the form and is {o.status} on an unchanged copy of "
                              "it (the same outputs behind the wrapper that perturbs them): it tells the two apart by "
                              "something other than the form's values (the object, a type, a call count), or the form's "
                              "outputs change from call to call, so its rejections of the perturbed forms measure "
                              "nothing (an error in the claim)")
            return True
    return False


def run_check(claim: Claim, check: Check, form: Any, ctx: RunContext) -> CheckOutcome:
    """One check of ``claim`` on ``form``, exactly as :func:`run_claim` and :func:`run_mutant` run it
    (a crash is an ``error`` outcome, a :class:`SkipCheck` a ``skipped`` one). The unit of work that
    :mod:`proofs_checks.distributed.cluster` sends to a worker."""
    return _run_check(check, form, claim, ctx)


def _ran_on(asked: str, outcomes: list[CheckOutcome]) -> str:
    """The device the claim's checks ran on: ``asked`` where one of them ran there, else ``cpu`` (``--device cuda
    --allow-skip`` on a machine without CUDA skips every device check: nothing ran on a GPU)."""
    if asked == "cpu":
        return asked
    ran = any(o.status != "skipped" and o.result is not None and str(o.result.device or "").startswith(asked)
              for o in outcomes)
    return asked if ran else "cpu"


def claim_result(claim: Claim, ctx: RunContext, info: dict[str, Any], outcomes: list[CheckOutcome],
                 stated: list[CheckOutcome], seconds: float, statement: dict[str, Any] | None = None) -> ClaimResult:
    """The :class:`ClaimResult` of ``claim`` from its :func:`derivation_info` and its checks'
    outcomes (claim order; ``stated``: the erratum's stated form, else empty). :func:`run_claim`
    ends with it; :mod:`proofs_checks.distributed.cluster` calls it with outcomes computed on workers,
    and with the ``statement`` (:func:`statement_json`) a worker computed for the same claim, context and
    ``info`` (its counterexamples then run once, on the worker, not again here)."""
    status, message, supports = _status(claim, outcomes, stated, info["error"], info["obligations"])
    if info.get("timeout") and status not in ("error", "refuted"):  # never verified on a derivation that did not end
        status, message, supports = "undecided", f"derivation {info['timeout']}: undecided (no fixed-size result stands in)", None
    return ClaimResult(
        id=claim.id,
        kind=claim.kind,
        title=claim.title,
        status=status,
        checks=outcomes,
        stated_checks=stated,
        derivation=info["steps"],
        derivation_error=info["error"],
        obligations=info["obligations"],
        provenance=info["provenance"],
        legend=info["legend"],
        supports=supports,
        seconds=seconds,
        mode=ctx.mode,
        seed=ctx.seed,
        device=_ran_on(ctx.device, outcomes + stated),
        message=message,
        statement=statement if statement is not None else statement_json(claim, ctx, info),
    )


def statement_json(claim: Claim, ctx: RunContext | None = None, info: dict[str, Any] | None = None,
                   *, counterexamples: bool = True) -> dict[str, Any]:
    """The claim's statement as data: ``hypotheses`` (each with its counterexample, computed, or
    ``necessary: false``), ``clauses`` (each with ``evidence`` and ``scope``), ``evidence_summary``,
    ``declared`` (false for a claim that declares no clauses) and ``assumptions`` (every assumed step
    of the derivation, inherited ones included, when ``info`` is given)."""
    if counterexamples:
        hyps = counterexample_json(claim, ctx)
    else:
        hyps = [{"name": h.name, "latex": h.latex, "text": h.text or None,
                 "necessary": None if h.counterexample is not None else False,
                 "why_not_shown": None if h.counterexample is not None else h.necessary_note} for h in claim.hypotheses]
    out = {"hypotheses": hyps, "clauses": [c.to_json() for c in claim.statement_clauses()],
           "evidence_summary": claim.evidence_summary(), "declared": claim.declared,
           "no_hypotheses": claim.no_hypotheses or None, "fixed_sizes": getattr(claim, "fixed_sizes", "") or None}
    if info is not None:
        out["assumptions"] = list(info.get("assumptions") or [])
    return out


def _status(claim: Claim, outcomes: list[CheckOutcome], stated: list[CheckOutcome], derr: str | None,
            obligations: list[dict[str, Any]] | None = None):
    states = [o.status for o in outcomes]
    if derr:
        return "error", f"derivation failed: {derr}", None
    if "error" in states:
        bad = next(o for o in outcomes if o.status == "error")
        verb = "" if str(bad.error_message).startswith((VACUOUS, CONTRADICTS)) else "crashed: "  # an error in the claim
        return "error", f"check {bad.name} {verb}{bad.error_message}", None
    failed_obl = [_obl_text(o) for o in obligations or [] if obligation_status(o) == "fails"]
    undecided_obl = [o["name"] for o in obligations or [] if obligation_status(o) == "undecided"]
    skipped = [o for o in outcomes if o.status == "skipped"]
    skip_note = "; ".join(f"{o.name}: {(o.result.skip_reason if o.result else '') or 'skipped'}" for o in skipped)
    if claim.is_evidence:
        undecided_checks = [o for o in outcomes if o.status == "inconclusive"]
        ran = [o for o in outcomes if o.status not in ("skipped", "inconclusive")]
        if skipped:
            return "incomplete", f"not every check ran ({skip_note}); evidence is reported only from a complete run", None
        if undecided_checks:  # ran without deciding (a training that missed its criterion): as for any claim, exit 3,
            # with the check's own reason (it was "incomplete", exit 1, with "()": hostile pass 61b F4)
            return "inconclusive", "; ".join(f"{o.name}: {(o.result.skip_reason if o.result else '') or 'inconclusive'}"
                                             for o in undecided_checks) + " — evidence is reported only from checks that " \
                "decided", None
        blind = [o.name for o in ran if o.status == "failed" and _nonfinite_failure(o)]
        if blind:  # a NaN measures nothing: neither support nor its absence (hostile pass 60b, a note)
            return "error", (f"check {', '.join(blind)} measured nothing (a NaN or infinite error): evidence is reported "
                             "only from what was measured (an error in the claim)"), None
        supports = all(o.status == "passed" for o in ran) and not failed_obl and not undecided_obl
        if supports:
            return "evidence", f"every stated criterion is met at the sizes that ran ({_sizes_text(outcomes)}): the measured numbers support the claim", True
        unmet = [f"{o.name} ({_unmet_reason(o)})" for o in ran if o.status != "passed"]
        unmet += [f"obligation {n}" for n in failed_obl + undecided_obl]
        return "evidence", "the measured numbers do not support the claim: not met: " + "; ".join(unmet), False
    undefined_obl = [_obl_text(o) for o in obligations or [] if obligation_status(o) == "fails" and o.get("undefined")]
    if failed_obl and len(undefined_obl) == len(failed_obl):  # nan or zoo (0/0, 1/0): no evidence either way (60b F1)
        return "error", (f"obligation undefined: {'; '.join(undefined_obl)}: a value that is not a number establishes "
                         "nothing either way (a division by zero or a substitution at a singular point in the "
                         "derivation): an error in the claim, not a refutation"), None
    if failed_obl:
        return "refuted", f"obligation false: {'; '.join(failed_obl)}", None
    if "failed" in states:
        bad = [o.name for o in outcomes if o.status == "failed"]
        if all(_nonfinite_failure(o) for o in outcomes if o.status == "failed"):  # a NaN measures nothing (60b F1)
            errs = ", ".join(f"{o.name}: {o.result.error}" for o in outcomes if o.status == "failed")
            return "error", (f"check {', '.join(bad)} failed only with a non-finite error ({errs}): a NaN or infinite "
                             "error is no measured difference (a reference or form that overflowed or is undefined at "
                             "the points drawn): an error in the claim, not a refutation"), None
        return "refuted", f"failed: {', '.join(bad)}", None
    inconclusive = [o for o in outcomes if o.status == "inconclusive"]
    if inconclusive and not skipped:
        return "inconclusive", "; ".join(f"{o.name}: {(o.result.skip_reason if o.result else '') or 'inconclusive'}"
                                         for o in inconclusive) + " — neither verified nor refuted", None
    if skipped:
        return "incomplete", f"not every check ran ({skip_note}): a skipped check is not a pass", None
    if undecided_obl:
        return "undecided", (f"obligation undecided: {', '.join(undecided_obl)} (SymPy could not decide it and a numeric "
                             "search found no counterexample): neither verified nor refuted"), None
    if claim.kind == "erratum":
        # a failure with a NaN or infinite error (a stated form whose outputs are NaN) fails any check whatever its
        # tolerance: it refutes nothing (hostile pass 21b F3)
        killed = [o for o in stated if finite_rejection(o)]
        if not killed:
            crashed = [o.name for o in stated if o.status == "error"]
            if crashed and len(crashed) == len(stated):
                return "error", "erratum not shown: every check crashed on the stated form (a crash is not a refutation)", None
            if any(o.status == "failed" for o in stated):
                return "error", ("erratum not shown: the stated form failed its checks only with a NaN or infinite "
                                 "error, which refutes nothing (an error in the claim)"), None
            if any(o.status == "skipped" for o in stated):
                return "incomplete", "erratum not shown: the stated form was not refuted by the checks that ran", None
            return "refuted", "erratum not shown: no check refuted the stated form", None
        layers = sorted({o.layer for o in killed}, key=lambda x: LAYER_ORDER[x])
        return "verified", (f"stated form refuted by {', '.join(o.name for o in killed)} (layers: {', '.join(layers)}); "
                            "corrected form verified"), None
    return "verified", "", None


def _nonfinite_failure(o: CheckOutcome) -> bool:
    """A failed check whose error is NaN or infinite: it fails whatever its tolerance, and measures no difference."""
    return o.result is not None and isinstance(o.result.error, (int, float)) and not math.isfinite(o.result.error)


def _sizes_text(outcomes: list[CheckOutcome]) -> str:
    """The sizes of the checks that ran, in a few words (for evidence messages)."""
    sizes = [o.result.sizes for o in outcomes if o.result is not None and o.result.sizes]
    if not sizes:
        return "sizes as recorded per check"
    keys = ", ".join(f"{k} = {v}" for k, v in list(sizes[0].items())[:4])
    return keys + (" …" if len(sizes) > 1 or len(sizes[0]) > 4 else "")


def _unmet_reason(o: CheckOutcome) -> str:
    r = o.result
    if r is None:
        return o.error_message or o.status
    if r.reason:
        return r.reason
    if math.isfinite(r.error) and math.isfinite(r.tolerance):
        return f"{r.error:.3g} against {r.tolerance:.3g}"
    return o.status


def run_mutant(claim: Claim, mutant: Mutant, ctx: RunContext | None = None, *, fail_fast: bool = False) -> MutantResult:
    """Run ``mutant.form`` against every check of the claim (the kill matrix row).

    A check rejects the mutant when it *fails* on it; a crash is not a rejection (a check must
    refute the mutant, not trip over it). ``fail_fast`` (only for benchmarks comparing with the
    old behaviour) stops at the first rejection, cheapest layer first."""
    ctx = ctx or RunContext(mode="quick")
    order = sorted(claim.checks, key=lambda c: LAYER_ORDER[c.layer]) if fail_fast else list(claim.checks)
    outcomes: list[CheckOutcome] = []
    t0 = time.perf_counter()
    for check in order:
        o = _run_check(check, mutant.form, claim, ctx)
        outcomes.append(o)
        if fail_fast and o.status == "failed":
            break
    return mutant_result(claim, mutant, outcomes, time.perf_counter() - t0, ctx.mode)


def mutant_result(claim: Claim, mutant: Mutant, outcomes: list[CheckOutcome], seconds: float, mode: str) -> MutantResult:
    """The kill-matrix row of ``mutant`` from its outcomes on the claim's checks (the check with
    the largest rejection margin is the killer). :func:`run_mutant` ends with it;
    :mod:`proofs_checks.distributed.cluster` calls it with outcomes computed on workers."""
    if mutant.hypothesis:  # a statement mutant: only its counterexample's outcome is a row of the matrix
        outcomes = [o for o in outcomes if o.name == COUNTEREXAMPLE]
    rejecting = [o for o in outcomes if o.status == "failed" and o.result is not None]
    best = None
    for o in rejecting:
        m = o.result.ratio
        m = math.inf if math.isnan(m) else m
        if best is None or m > best[0]:
            best = (m, o)
    killer = best[1] if best else None
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
        seconds=seconds,
        mode=mode,
        exempt=getattr(mutant, "exempt", "") or "",
    )


LAYER_ORDER = {"symbolic": 0, "numeric": 1, "trained": 2}


def claim_counts_kills(result: "ClaimResult") -> bool:
    """Whether a mutant of this claim result may be called killed: the unmutated claim is
    verified (or is evidence its numbers support). A check that fails on the true claim fails on
    anything, so its rejection of a mutant means nothing."""
    return result.status == "verified" or (result.status == "evidence" and bool(result.supports))


def refused_mutant(claim: Claim, mutant: Mutant, why: str, mode: str) -> MutantResult:
    """A kill-matrix row for a mutant that was not run because its claim is not verified."""
    return MutantResult(claim=claim.id, mutant=mutant.name, kind=mutant.kind, description=mutant.description,
                        killed=False, killed_by=None, error=math.nan, tolerance=math.nan, outcomes=[], seconds=0.0,
                        mode=mode, exempt=getattr(mutant, "exempt", "") or "", refused=why)


def refusal_reason(result: "ClaimResult") -> str:
    """Why no mutant of this claim result may be called killed ('' when they may)."""
    if claim_counts_kills(result):
        return ""
    return (f"claim {result.id} is {result.status}" + (f" ({result.message})" if result.message else "")
            + ": no mutant is called killed when the unmutated claim is not verified")


def refuse_mutants(results: list["ClaimResult"], mutants: list[MutantResult]) -> list[str]:
    """Mark every mutant of a claim that is not verified as *not killed* (``refused`` says why) and
    return one line per such claim. :func:`run_mutants` and ``tverify mutants`` call it."""
    by_id = {r.id: r for r in results}
    lines: dict[str, str] = {}
    for m in mutants:
        r = by_id.get(m.claim)
        if r is None or claim_counts_kills(r):
            continue
        why = refusal_reason(r)
        lines[r.id] = why
        m.refused, m.killed, m.killed_by, m.error, m.tolerance = why, False, None, math.nan, math.nan
    return list(lines.values())


def run_claims(claims: list[Claim], ctx: RunContext, progress: Callable[[Claim], Any] | None = None) -> list[ClaimResult]:
    out = []
    for c in claims:
        out.append(run_claim(c, ctx))
        if progress:
            progress(c)
    return out


def run_mutants(claims: list[Claim], ctx: RunContext, progress: Callable[[Claim, Mutant], Any] | None = None,
                *, gate: bool = False) -> list[MutantResult]:
    """The kill matrix of ``claims``. With ``gate``, each claim is run first and the mutants of a
    claim that is not verified are not counted as killed (see :func:`refuse_mutants`)."""
    out = []
    results = []
    for c in claims:
        if gate:
            results.append(run_claim(c, ctx))
        for m in c.all_mutants():
            out.append(run_mutant(c, m, ctx))
            if progress:
                progress(c, m)
    if gate:
        refuse_mutants(results, out)
    return out
