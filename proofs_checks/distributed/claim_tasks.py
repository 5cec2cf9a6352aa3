"""Claims and their mutants as tasks on a Dask cluster (``--cluster``): a claim's derivation, its checks and its
mutants as tasks, planned longest first from the store's last seconds, cut per claim or per module of claims, and
assembled into the same results as a run in the command's process. The cluster itself (starting, connecting,
running tasks) is :mod:`proofs_checks.distributed.cluster`."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofs_checks.distributed.cluster import (ProgressFn, Task, TaskFailure, _takes_n_workers, run_tasks,
                                              worker_scratch)

__all__ = ["run_claims_on", "plan_claims", "granularity", "ClaimPlan", "ClusterRun", "claim_task", "module_task"]


# ------------------------------------------------------------------------------------------------
# claims and mutants as tasks


def _claim(module: str, claim_id: str):
    """The registered claim ``claim_id``, the catalogue loaded as in the caller's process (every claim module
    through ``claims.load_all``, then the plugins: about 3 CPU s once per worker process). Importing only the
    claim's own module left this project's claims unknown as such (``registry.is_builtin``): the power rule
    for plugins' claims then ran on built-in ones and their derivations were not taken from the catalogue."""
    from proofs_checks.registry import get_claim

    return get_claim(claim_id)


def _claim_module(claim) -> str:
    return getattr(claim.checks[0].fn, "__module__", "") or "proofs_checks.claims"


def derivation_task(module: str, claim_id: str) -> tuple[dict[str, Any], float]:
    """Worker side: the claim's :func:`~proofs_checks.runner.derivation_info` and its seconds."""
    from proofs_checks.runner import derivation_info

    t0 = time.perf_counter()
    info = derivation_info(_claim(module, claim_id))
    return info, time.perf_counter() - t0


def check_task(module: str, claim_id: str, check_name: str, mode: str, seed: int, device: str,
               forms: tuple[str, ...], figures: bool) -> dict[str, Any]:
    """Worker side: one check of one claim on each of ``forms`` (``"claim"``, ``"stated"``,
    ``"mutant:NAME"``), in that order, in one process, so the check's reference is computed once.
    The claim's and stated forms run with figures on (when ``figures``) in a folder of the worker,
    whose files come back as bytes; mutants run without figures, as in-process."""
    from proofs_checks.context import RunContext
    from proofs_checks.runner import run_check

    claim = _claim(module, claim_id)
    check = next(c for c in claim.checks if c.name == check_name)
    mutants = {m.name: m for m in claim.all_mutants()}
    fig_dir = Path(tempfile.mkdtemp(prefix="tverify-task-fig-", dir=worker_scratch())) if figures else None
    try:
        ctx = RunContext(mode=mode, seed=seed, device=device, figure_dir=fig_dir)
        plain = RunContext(mode=mode, seed=seed, device=device)
        out: dict[str, Any] = {"outcomes": {}, "figures": {}}
        for which in forms:
            if which == "claim":
                o = run_check(claim, check, claim.form, ctx)
            elif which == "stated":
                o = run_check(claim, check, claim.stated, ctx)
            else:
                o = run_check(claim, check, mutants[which.split(":", 1)[1]].form, plain)
            out["outcomes"][which] = o
        if fig_dir is not None:
            out["figures"] = {p.name: p.read_bytes() for p in sorted(fig_dir.iterdir()) if p.is_file()}
        return out
    finally:
        if fig_dir is not None:
            shutil.rmtree(fig_dir, ignore_errors=True)


def _failed_outcome(check, message: str):
    from proofs_checks.runner import CheckOutcome

    return CheckOutcome(check.name, check.layer, "error", None, error_message=f"task failed on the cluster: {message}")


#: a run whose claims come from at least this many claim modules per worker is cut into one task per
#: module (see :func:`plan_claims`, :func:`granularity`)
MODULES_PER_WORKER = 4


def _forms(claim, claims_run: bool, mutants: bool) -> tuple[str, ...]:
    forms: list[str] = []
    if claims_run:
        forms += ["claim"] + (["stated"] if claim.kind == "erratum" else [])
    if mutants:
        forms += [f"mutant:{m.name}" for m in claim.all_mutants()]
    return tuple(forms)


def claim_task(module: str, claim_id: str, mode: str, seed: int, device: str, claims_run: bool, mutants: bool,
               figures: bool, continuous: bool) -> dict[str, Any]:
    """Worker side: a whole claim in one process: its derivation (when ``claims_run``), every check on
    the claim's form (and stated form) and, with ``mutants``, on every mutant's form, and, with
    ``continuous``, the claim's continuous-mutant row (:func:`~proofs_checks.continuous.continuous_probe`,
    its best check only, as `tverify report` in-process). The checks of one claim share references
    the claim caches in-process (trained models, Monte Carlo samples): here they are computed once."""
    claim = _claim(module, claim_id)
    forms = _forms(claim, claims_run, mutants)
    out: dict[str, Any] = {"derivation": derivation_task(module, claim_id) if claims_run else None,
                           "checks": {ch.name: check_task(module, claim_id, ch.name, mode, seed, device, forms, figures)
                                      for ch in claim.checks},
                           "continuous": None, "statement": None}
    if not claims_run:
        return out
    from proofs_checks.context import RunContext

    ctx = RunContext(mode=mode, seed=seed, device=device)
    # the statement (its hypotheses' counterexamples) computed here, on the worker, once: the command's process
    # reuses it (it ran them again, one after the other, after every task had ended)
    if continuous:
        from proofs_checks.continuous import continuous_probe

        result = _assemble_claim(claim, mode, seed, device, out["derivation"],
                                 lambda ch, which: out["checks"][ch.name]["outcomes"][which])
        out["statement"] = result.statement
        out["continuous"] = continuous_probe(claim, result, ctx, only_best=True)
    else:
        from proofs_checks.runner import statement_json

        out["statement"] = statement_json(claim, ctx, out["derivation"][0])
    return out


def module_task(module: str, claim_ids: tuple[str, ...], mode: str, seed: int, device: str, claims_run: bool,
                mutants: bool, figures: bool, continuous: bool) -> dict[str, dict[str, Any]]:
    """Worker side: the claims of one claim module, one after the other in one process (each as
    :func:`claim_task`): references that claims of a module share (``icl.algorithm_probe`` reads the
    models ``icl.function_classes`` trained) are computed once, as in-process."""
    return {cid: claim_task(module, cid, mode, seed, device, claims_run, mutants, figures, continuous) for cid in claim_ids}


def _secs(outcomes) -> float:
    """Worker seconds of a list of check outcomes."""
    return sum(o.result.seconds for o in outcomes if o.result is not None)


def _assemble_claim(c, mode, seed, device, derivation, outcome, statement=None):
    from proofs_checks.context import RunContext
    from proofs_checks.runner import claim_result, own_power

    outs = [outcome(ch, "claim") for ch in c.checks]
    stated = [outcome(ch, "stated") for ch in c.checks] if c.kind == "erratum" else []
    d_info, d_secs = derivation
    ctx = RunContext(mode=mode, seed=seed, device=device)
    result = claim_result(c, ctx, d_info, outs, stated, d_secs + _secs(outs) + _secs(stated), statement)
    own_power(c, result, ctx)  # a plugin's or notebook's claim: its power measured here, as run_claim does
    return result


@dataclass
class ClusterRun:
    """What :meth:`ClaimPlan.assemble` gives: the claims' results (``None`` when only mutants ran),
    the mutants' results (``None`` without the kill matrix), the continuous-mutant rows by claim id
    (``None`` unless the run was cut per module with ``continuous``), and the extra tasks' results."""

    claims: list | None
    mutants: list | None
    continuous: dict[str, Any] | None
    extra: list[Any]


@dataclass
class ClaimPlan:
    """The tasks of a run of claims (:func:`plan_claims`) and how their results become a :class:`ClusterRun`."""

    tasks: list[Task]
    per: str
    claims: list
    mode: str
    seed: int
    device: str
    claims_run: bool
    mutants: bool
    continuous: bool
    figure_dir: Path | None
    n_extra: int
    where: list = field(default_factory=list)

    def assemble(self, results: list[Any]) -> ClusterRun:
        extra, results = results[:self.n_extra], results[self.n_extra:]
        info: dict[str, tuple[dict[str, Any], float]] = {}
        statements: dict[str, dict[str, Any]] = {}  # computed on the workers with the claim's derivation
        per_check: dict[tuple[str, str], dict[str, Any]] = {}
        cont: dict[str, Any] | None = {} if (self.per == "module" and self.continuous and self.claims_run) else None

        def failed_derivation(msg):
            return ({"steps": [], "obligations": [], "provenance": {}, "legend": {}, "assumptions": [],
                     "error": f"task failed on the cluster: {msg}"}, 0.0)

        def keep_check(c, ch, value):
            if isinstance(value, TaskFailure):
                value = {"failure": value.message, "outcomes": {}, "figures": {}}
            per_check[(c.id, ch.name)] = value
            if self.figure_dir is not None and value["figures"]:
                self.figure_dir.mkdir(parents=True, exist_ok=True)
                for name, data in value["figures"].items():
                    (self.figure_dir / Path(name).name).write_bytes(data)

        for (what, c, ch), value in zip(self.where, results):
            if what == "module":
                for claim in c:
                    if isinstance(value, TaskFailure):
                        if self.claims_run:
                            info[claim.id] = failed_derivation(value.message)
                        for chk in claim.checks:
                            keep_check(claim, chk, value)
                        if cont is not None:
                            cont[claim.id] = {"skipped": f"task failed on the cluster: {value.message}"}
                        continue
                    got = value[claim.id]
                    if self.claims_run:
                        info[claim.id] = got["derivation"]
                        if got.get("statement") is not None:
                            statements[claim.id] = got["statement"]
                    for chk in claim.checks:
                        keep_check(claim, chk, got["checks"][chk.name])
                    if cont is not None:
                        cont[claim.id] = got["continuous"]
            elif what == "derivation":
                info[c.id] = failed_derivation(value.message) if isinstance(value, TaskFailure) else value
            else:
                keep_check(c, ch, value)

        def outcome(c, ch, which):
            v = per_check[(c.id, ch.name)]
            if "failure" in v:
                return _failed_outcome(ch, v["failure"])
            return v["outcomes"][which]

        from proofs_checks.runner import mutant_result

        claim_results = None
        if self.claims_run:
            claim_results = [_assemble_claim(c, self.mode, self.seed, self.device, info[c.id],
                                             lambda ch, which, c=c: outcome(c, ch, which), statements.get(c.id))
                             for c in self.claims]
        mutant_results = None
        if self.mutants:
            mutant_results = []
            for c in self.claims:
                for m in c.all_mutants():
                    outs = [outcome(c, ch, f"mutant:{m.name}") for ch in c.checks]
                    mutant_results.append(mutant_result(c, m, outs, _secs(outs), self.mode))
        return ClusterRun(claim_results, mutant_results, cont, extra)


def _workers(client) -> int:
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else client.scheduler_info()
    return max(1, len(info.get("workers", {})))


#: seconds assumed for a check of each layer, and for a derivation, when no earlier run of it is on
#: record (rough: a trained check trains a model, a numeric one samples or solves, a symbolic one and a
#: derivation run SymPy); only their order matters (:func:`run_tasks` starts the longest first)
LAYER_SECONDS = {"trained": 10.0, "numeric": 2.0, "symbolic": 1.0}
DERIVATION_SECONDS = 2.0
#: a task given by the caller (a reproduction of a report): among the longest pieces of a report
EXTRA_SECONDS = 60.0


def estimate_seconds(claim, store=None, mode: str = "default") -> dict[str, float]:
    """Estimated seconds of each check of ``claim`` (by name; ``"derivation"`` for its derivation): the
    seconds of its last run at the same size mode when the results store ``store`` has one, else
    :data:`LAYER_SECONDS` by the check's layer.

    >>> from proofs_checks.registry import get_claim
    >>> est = estimate_seconds(get_claim("attn.softmax_simplex"))
    >>> est["derivation"], min(est.values()) > 0
    (2.0, True)
    """
    est = {ch.name: LAYER_SECONDS.get(ch.layer, 2.0) for ch in claim.checks}
    est["derivation"] = DERIVATION_SECONDS
    if store is None:
        return est
    from proofs_checks.store import load_last

    try:
        last = load_last(claim.id, store)
    except Exception:  # an unreadable entry: the defaults (the store says so when it is read for `show`)
        last = None
    if last and last.get("mode") == mode:
        for c in last.get("checks") or []:
            secs = c.get("seconds") if isinstance(c, dict) else None
            if c.get("name") in est and isinstance(secs, (int, float)) and secs >= 0:
                est[c["name"]] = float(secs)
    return est


def plan_claims(claims: list, *, mode: str, seed: int, device: str, claims_run: bool = True, mutants: bool = False,
                figure_dir: Path | None = None, continuous: bool = False, per: str = "check",
                extra: list[Task] | tuple = (), store=None) -> ClaimPlan:
    """Cut a run of claims into tasks. ``per="check"``: one task for each claim's derivation and one
    per check (each running the check on the claim's form and every mutant's: the check's reference
    is computed once); the work spreads over many workers, but checks of one claim that share a
    cached reference (a trained model) each compute it. ``per="module"``: one task per claim module
    (:func:`module_task`): its claims in one process, each with its continuous-mutant row. ``extra`` tasks (e.g. the
    reproductions of a report) come first. Every task carries its estimated seconds
    (:func:`estimate_seconds`, from ``store``'s last results where it has them; a task with mutants
    runs each check once per form), and :func:`run_tasks` starts the longest first."""
    cuda = str(device).startswith("cuda")
    plan = ClaimPlan([t if t.cost else dataclasses.replace(t, cost=EXTRA_SECONDS) for t in extra], per, list(claims),
                     mode, seed, device, claims_run, mutants, continuous, figure_dir, len(extra))
    est = {c.id: estimate_seconds(c, store, mode) for c in claims}

    def check_cost(c, ch) -> float:
        return est[c.id][ch.name] * len(_forms(c, claims_run, mutants))
    if per == "module":
        groups: dict[str, list] = {}
        for c in claims:
            groups.setdefault(_claim_module(c), []).append(c)
        for module, cs in groups.items():
            cost = sum(check_cost(c, ch) for c in cs for ch in c.checks) + claims_run * sum(est[c.id]["derivation"] for c in cs)
            plan.tasks.append(Task(module.rpartition(".")[2] + ": " + ", ".join(c.id for c in cs), module_task,
                                   (module, tuple(c.id for c in cs), mode, seed, device, claims_run, mutants,
                                    figure_dir is not None, continuous),
                                   gpu=bool(cuda and any(ch.uses_device for c in cs for ch in c.checks)), cost=cost))
            plan.where.append(("module", cs, None))
        return plan
    for c in claims:
        module = _claim_module(c)
        if claims_run:
            plan.tasks.append(Task(f"{c.id}:derivation", derivation_task, (module, c.id), cost=est[c.id]["derivation"]))
            plan.where.append(("derivation", c, None))
        forms = _forms(c, claims_run, mutants)
        for ch in c.checks:
            plan.tasks.append(Task(f"{c.id}:{ch.name}", check_task,
                                   (module, c.id, ch.name, mode, seed, device, forms, figure_dir is not None),
                                   gpu=bool(ch.uses_device and cuda), cost=check_cost(c, ch)))
            plan.where.append(("check", c, ch))
    return plan


def granularity(client, claims: list) -> str:
    """``"module"`` when the claims come from at least :data:`MODULES_PER_WORKER` claim modules per
    worker (then whole modules balance the workers, and what a module's claims and checks share is
    computed once), else ``"check"`` (a few claims spread over many workers)."""
    modules = {_claim_module(c) for c in claims}
    return "module" if len(modules) >= MODULES_PER_WORKER * _workers(client) else "check"


def run_claims_on(client, claims: list, *, mode: str, seed: int, device: str, claims_run: bool = True,
                  mutants: bool = False, figure_dir: Path | None = None, allow_skip: bool = False,
                  progress: ProgressFn | None = None, per: str | None = None) -> tuple[list | None, list | None]:
    """Run ``claims`` (and, with ``mutants``, their kill matrix) as tasks on ``client``; returns
    ``(claim results or None, mutant results or None)``, assembled by the runner's own
    :func:`~proofs_checks.runner.claim_result` / :func:`~proofs_checks.runner.mutant_result` in the
    order an in-process run gives. Figures of the claims' checks are written into ``figure_dir``.
    A claim's ``seconds`` is the sum of its derivation's and its checks' seconds (worker time).
    ``per``: the task granularity (default: :func:`granularity`)."""
    plan = plan_claims(claims, mode=mode, seed=seed, device=device, claims_run=claims_run, mutants=mutants,
                       figure_dir=figure_dir, per=per or granularity(client, claims))
    run = plan.assemble(run_tasks(client, plan.tasks, progress, allow_no_gpu=allow_skip))
    return run.claims, run.mutants
