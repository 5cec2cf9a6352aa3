"""The trained-check toolkit: train a torch model over seeds as one batched tensor, with a
convergence guard, and compare what it learned with the form across seeds.

:func:`train` runs ``S`` independent models at once: every parameter carries a leading seed axis
``S`` and ``loss(params)`` returns one loss per seed (shape ``(S,)``); one optimiser (``adam`` or
``sgd``) with a learning-rate schedule (``cosine`` or ``constant``) steps all of them. It runs on
``ctx.device`` (CPU by default, ``--device cuda``) and is cached as a reference (``ctx.reference``):
mutant runs reuse the trained models.

**Convergence guard.** Every seed's final loss must reach the stated ``criterion``. A run that did
not is *inconclusive*: :class:`Inconclusive` (a :class:`~proofs_checks.registry.SkipCheck`) is
raised with the criterion it missed and the loss curve (start, best, final per seed) — never a pass
and never a fail. With figures on (``--report``), the loss curves are drawn (``<claim>__<check>_loss.png``).

:meth:`TrainRun.compare` compares per-seed measurements with a reference by
:func:`~proofs_checks.comparisons.seed_spread`: the mean over seeds within ``k`` standard errors
(``std/√S``, at least ``floor``), with the false-failure probability (Student t, ``S − 1`` degrees of
freedom) and the resolution from the seed spread (the smallest relative change of the reference the
check rejects) in the result.

    >>> import torch
    >>> from proofs_checks.context import RunContext
    >>> def init(g, S): return {"w": torch.randn(S, 3, generator=g, dtype=torch.float64)}
    >>> target = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    >>> def loss(p): return ((p["w"] - target) ** 2).sum(-1)
    >>> run = train(init, loss, RunContext(mode="quick"), seeds=4, steps=200, lr=0.1, criterion=1e-10, optimiser="sgd")
    >>> run.converged, run.params["w"].shape
    (True, torch.Size([4, 3]))
    >>> run.compare(run.params["w"].numpy(), target.numpy(), floor=1e-5, what="the learned w").passed
    True
    >>> try:
    ...     train(init, loss, RunContext(mode="quick"), seeds=4, steps=50, lr=0.0, criterion=1e-10)
    ... except Inconclusive as exc:  # lr 0: nothing trains
    ...     print(exc)  # doctest: +ELLIPSIS
    inconclusive: the training did not reach its loss criterion (final loss ≤ 1e-10): 4 of 4 seeds missed it after 50 steps of adam (lr 0, cosine schedule); final loss 13.4 (worst seed), best ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from proofs_checks.comparisons import seed_spread
from proofs_checks.context import RunContext, identity_token
from proofs_checks.registry import CheckResult, Inconclusive, SkipCheck  # noqa: F401 (Inconclusive re-exported)
from proofs_checks.tolerances import K_SIGMA

__all__ = ["Inconclusive", "TrainRun", "train"]


# Inconclusive lives in the registry (the runner reports it); re-exported here for plugins.
@dataclass
class TrainRun:
    """The trained models: ``params`` (detached tensors, leading seed axis), ``curve`` (loss per
    step and seed, ``(steps + 1, S)``), ``seeds``, the ``criterion`` and whether every seed met it."""

    params: dict[str, Any]
    curve: np.ndarray
    seeds: int
    criterion: float
    steps: int
    optimiser: str
    lr: float
    schedule: str
    figure: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> np.ndarray:
        return self.curve[-1]

    @property
    def converged(self) -> bool:
        return bool(np.all(np.isfinite(self.final)) and np.all(self.final <= self.criterion))

    def summary(self) -> dict[str, Any]:
        """Loss-curve numbers for a result's details (start, best, final per seed; the criterion)."""
        return {"criterion": self.criterion, "steps": self.steps, "seeds": self.seeds, "optimiser": self.optimiser,
                "lr": self.lr, "schedule": self.schedule, "start": self.curve[0].tolist(),
                "best": np.nanmin(self.curve, axis=0).tolist(), "final": self.final.tolist(),
                "curve_every": max(1, self.steps // 20),
                "curve_median": np.median(self.curve[:: max(1, self.steps // 20)], axis=1).tolist()}

    def guard(self) -> "TrainRun":
        """Raise :class:`Inconclusive` unless every seed reached the criterion."""
        if self.converged:
            return self
        f = self.final
        missed = int(np.sum(~(f <= self.criterion)))
        raise Inconclusive(
            f"inconclusive: the training did not reach its loss criterion (final loss ≤ {self.criterion:g}): "
            f"{missed} of {self.seeds} seeds missed it after {self.steps} steps of {self.optimiser} (lr {self.lr:g}, "
            f"{self.schedule} schedule); final loss {float(np.nanmax(f)):.3g} (worst seed), best "
            f"{float(np.nanmin(self.curve)):.3g}, start {float(np.nanmax(self.curve[0])):.3g}"
            + (f"; loss curves: {self.figure}" if self.figure else ""),
            criterion=self.criterion, final=f, curve=self.curve)

    def compare(self, per_seed: Any, reference: Any, *, k: float = K_SIGMA, floor: float = 0.0, what: str = "",
                **kw) -> CheckResult:
        """Per-seed measurements (first axis: the seeds) against ``reference`` by
        :func:`~proofs_checks.comparisons.seed_spread` (mean within ``k`` standard errors ``std/√S``,
        at least ``floor``); the loss-curve summary is added to the details, the figure to the result."""
        details = dict(kw.pop("details", {}) or {})
        details["training"] = self.summary()
        r = seed_spread(np.asarray(per_seed, dtype=float), reference, k=k, floor=floor, what=what, details=details, **kw)
        ffp = (r.details.get("false_failure_probability") or {}).get("union_bound")
        r.justification += (f"; every seed's training reached loss ≤ {self.criterion:g} ({self.steps} steps of "
                            f"{self.optimiser}, lr {self.lr:g}, {self.schedule})"
                            + (f"; false-failure probability ≤ {ffp:.2g} (Student t, {self.seeds - 1} dof)" if ffp is not None else ""))
        if self.figure:
            r.figures = list(r.figures) + [self.figure]
        return r


def _schedule(name: Any, steps: int) -> Callable[[int], float]:
    if callable(name):
        return name
    if name == "cosine":
        return lambda t: 0.5 * (1 + math.cos(math.pi * t / max(1, steps)))
    if name in ("constant", None):
        return lambda t: 1.0
    raise ValueError(f"schedule must be 'cosine', 'constant' or a function of the step, not {name!r}")


def train(init: Callable[[Any, int], dict[str, Any]], loss: Callable[[dict[str, Any]], Any], ctx: RunContext, *,
          seeds: int = 8, steps: int = 500, lr: float = 1e-2, criterion: float, optimiser: str = "adam",
          schedule: Any = "cosine", guard: bool = True, name: str = "training") -> TrainRun:
    """Train ``seeds`` models as one batch and return the :class:`TrainRun` (after the convergence
    guard unless ``guard=False``).

    init       ``init(generator, S) -> {name: tensor}``: parameters with leading axis ``S`` (drawn
               on the CPU from a torch generator seeded by ``ctx.seed_for``, so every device gets
               the same start); they are moved to ``ctx.device`` and trained.
    loss       ``loss(params) -> tensor (S,)``: one loss per seed (the models are independent: the
               optimiser steps their sum).
    criterion  every seed's final loss must be ``≤ criterion`` (else :class:`Inconclusive`).
    optimiser  ``"adam"`` or ``"sgd"``; ``schedule`` ``"cosine"``, ``"constant"`` or ``f(step) -> factor``.

    The run is cached through ``ctx.reference`` (keyed on ``init``, ``loss`` and the settings), so a
    claim's mutants reuse it; the guard runs on every call. A criterion that is not a finite number
    (``inf``: every loss meets it) guards nothing: :class:`~proofs_checks.registry.VacuousCheck`, an
    error in the claim."""
    try:
        finite = math.isfinite(float(criterion))
    except (TypeError, ValueError):
        finite = False
    if not finite:
        from proofs_checks.registry import VacuousCheck

        raise VacuousCheck(f"train: criterion {criterion!r}: every loss meets it, so the convergence guard guards nothing")
    key = (identity_token(init), identity_token(loss), seeds, steps, lr, criterion, optimiser, str(schedule), ctx.device)
    run = ctx.reference(f"trained: {name}", lambda: _train(init, loss, ctx, seeds, steps, lr, criterion, optimiser,
                                                             schedule, name), *key)
    return run.guard() if guard else run


def _train(init, loss, ctx, S, steps, lr, criterion, optimiser, schedule, name) -> TrainRun:
    import torch

    g = torch.Generator().manual_seed(ctx.seed_for("init", name))
    params = {k: v.detach().to(ctx.device).requires_grad_(True) for k, v in init(g, S).items()}
    plist = list(params.values())
    if optimiser == "adam":
        opt = torch.optim.Adam(plist, lr=lr)
    elif optimiser == "sgd":
        opt = torch.optim.SGD(plist, lr=lr)
    else:
        raise ValueError(f"optimiser must be 'adam' or 'sgd', not {optimiser!r}")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(schedule, steps))
    curve = np.empty((steps + 1, S))
    for t in range(steps + 1):
        opt.zero_grad()
        per = loss(params)
        if tuple(per.shape) != (S,):
            raise ValueError(f"loss(params) must return one loss per seed, shape ({S},), not {tuple(per.shape)}")
        curve[t] = per.detach().double().cpu().numpy()
        if t == steps:
            break
        per.sum().backward()
        opt.step()
        sched.step()
    sname = schedule if isinstance(schedule, str) else getattr(schedule, "__name__", "custom")
    run = TrainRun({k: v.detach().cpu() for k, v in params.items()}, curve, S, float(criterion), steps, optimiser,
                   float(lr), sname)
    if ctx.want_figures:
        run.figure = _figure(run, ctx, name)
    return run


def _figure(run: TrainRun, ctx: RunContext, name: str) -> str | None:
    from proofs_checks.context import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    c = np.where(run.curve > 0, run.curve, np.nan)
    ax.semilogy(np.arange(run.steps + 1), c, lw=0.8, alpha=0.8)
    ax.axhline(run.criterion, color="k", ls="--", lw=1, label=f"criterion {run.criterion:g}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss per seed")
    ax.set_title(f"{name}: {run.seeds} seeds, {run.optimiser} lr {run.lr:g}")
    ax.legend(loc="upper right", fontsize=8)
    fname = ctx.save_figure(fig, f"{ctx.check_name or name}_loss")
    pending = getattr(ctx, "_figures", None)
    if fname and isinstance(pending, list) and fname in pending:
        pending.remove(fname)  # attached by TrainRun.compare (also on cached runs), once
    return fname
