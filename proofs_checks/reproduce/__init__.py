"""``tverify reproduce``: anchor papers' headline experiments run with this project's numerics, our
numbers next to the published (or reference-code) ones, one page per reproduction.

A :class:`Reproduction` names a paper, the figure/table it reproduces and the module (in this
package) whose ``run(ctx) -> ReproResult`` does the work. Each compared quantity is a :class:`Row`:
ours with its standard error, the reference with its own (0 for a closed form), where the reference
comes from, the tolerance and why, and the verdict. The tolerance rule, stated once
(:func:`compare_row`): agreement when ``|ours − reference| ≤ k·sqrt(se_ours² + se_ref²)`` (+ a stated
floor where a known bias or rounding applies), ``k = K_SIGMA = 5`` (the suite's rule; a false alarm
has probability < 6e-7 per normal statistic). Each row also records ``z = (ours − reference) /
sqrt(se_ours² + se_ref²)``, signed (the side of the reference ours is on; ±inf for a difference with no standard
error, 0 for none), so that a stricter reading (e.g. two standard errors) can be made; a one-sided row's is
``(ours − bound) / se_ours``.

The records below are metadata only (``tverify reproduce --list`` imports no torch); ``run`` imports
the module on first use.
"""

from __future__ import annotations

import importlib
import math
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from proofs_checks.tolerances import K_SIGMA

__all__ = ["Reproduction", "Row", "ReproContext", "ReproResult", "REPRODUCTIONS", "get", "compare_row", "bound_row",
           "run_reproduction", "run_all", "document", "UnknownReproduction", "FAILING"]

#: statuses that make ``tverify reproduce`` exit 1
FAILING = ("disagrees", "error", "not run")


class UnknownReproduction(KeyError):
    """A name that is not a reproduction (one line for the user, exit 2)."""


@dataclass(frozen=True)
class Reproduction:
    """One paper's headline experiment: ``name`` (CLI), ``paper``, ``figure`` (figure/table or
    theorem reproduced), ``summary`` (one line), ``module`` (in this package, exposing ``run``)."""

    name: str
    paper: str
    figure: str
    summary: str
    module: str

    def run(self, ctx: "ReproContext") -> "ReproResult":
        mod = importlib.import_module(f"{__name__}.{self.module}")
        return mod.run(ctx)


REPRODUCTIONS: tuple[Reproduction, ...] = (
    Reproduction("tf-as-svm", "Tarzanagh, Li, Thrampoulidis, Oymak, Transformers as Support Vector Machines (2023); "
                 "reference code umich-sota/TF-as-SVM",
                 "local convergence (local_converge.ipynb: softmax probability and correlation with W^mm / W^mm_* "
                 "against iterations), regularisation path",
                 "normalised GD on W and (K,Q), with and without the reference's ridge, against the Att-SVM directions",
                 "tf_as_svm"),
    Reproduction("zfb-2024", "Zhang, Frei, Bartlett, Trained Transformers Learn Linear Models In-Context (JMLR 2024)",
                 "Theorem 4.1 (prediction error of the trained LSA against prompt length M), covariate and task shift",
                 "trained LSA test error against M for several training N, next to the closed-form risk",
                 "zfb"),
    Reproduction("von-oswald-2023", "von Oswald et al., Transformers Learn In-Context by Gradient Descent (ICML 2023)",
                 "the one-layer comparison (trained linear self-attention vs one GD step: prediction difference, "
                 "cosine of sensitivities, loss curves)",
                 "trained one-layer LSA against one step of GD on the in-context least-squares loss",
                 "von_oswald"),
    Reproduction("garg-2022", "Garg, Tsipras, Liang, Valiant, What Can Transformers Learn In-Context? (NeurIPS 2022)",
                 "linear-regression figure (error against the number of in-context examples: transformer, least "
                 "squares, 3-nearest neighbours, averaging)",
                 "a small transformer against least squares, 3-NN and averaging",
                 "garg"),
    Reproduction("ramsauer-2021", "Ramsauer et al., Hopfield Networks is All You Need (ICLR 2021)",
                 "Theorem 5 (one-step retrieval error bound against β and separation Δ), Theorem 3 (storage)",
                 "one-step retrieval error of the modern Hopfield update against β·Δ; exponential storage",
                 "ramsauer"),
    Reproduction("choromanski-2021", "Choromanski et al., Rethinking Attention with Performers (ICLR 2021)",
                 "Lemma 2 / Theorem 2 (MSE of the softmax-kernel estimators against the number of features)",
                 "FAVOR+ MSE against m: positive vs trigonometric features, iid vs orthogonal, next to the closed forms",
                 "choromanski"),
)


def get(name: str) -> Reproduction:
    for r in REPRODUCTIONS:
        if r.name == name:
            return r
    raise UnknownReproduction(f"unknown reproduction {name!r} (known: {', '.join(r.name for r in REPRODUCTIONS)}; "
                              "`tverify reproduce --list`)")


# ------------------------------------------------------------------------------------------------
# rows and the agreement rule


@dataclass
class Row:
    """One compared quantity. ``reference`` is a number (or ``None`` when not run); its standard
    error ``reference_se`` is 0 for a closed form; ``tolerance`` with its ``justification``;
    ``verdict`` "agrees" / "disagrees" / "not run"; ``z`` = difference over the combined SE."""

    quantity: str
    ours: float | None
    ours_se: float | None
    reference: float | None
    reference_source: str
    verdict: str
    reference_se: float | None = 0.0
    tolerance: float | None = None
    justification: str = ""
    z: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def _finite(*xs) -> bool:
    return all(x is not None and isinstance(x, (int, float)) and math.isfinite(float(x)) for x in xs)


def _signed_z(diff: float, se: float) -> float:
    """``diff / se``, signed; with no standard error ±inf for a difference and 0 for none."""
    if se > 0:
        return diff / se
    return 0.0 if diff == 0 else math.copysign(math.inf, diff)


def compare_row(quantity: str, ours: float, ours_se: float, reference: float, reference_se: float, source: str, *,
                k: float = K_SIGMA, floor: float = 0.0, floor_why: str = "", note: str = "") -> Row:
    """Agreement within ``k·sqrt(se_ours² + se_ref²) + floor`` (the module rule); NaN/inf → disagrees."""
    if not _finite(ours, ours_se, reference, reference_se):
        return Row(quantity, ours, ours_se, reference, source, "disagrees", reference_se, None,
                   "not finite: a NaN/inf in ours or the reference fails the comparison", None, note)
    se = math.hypot(float(ours_se), float(reference_se))
    tol = k * se + floor
    diff = abs(float(ours) - float(reference))
    just = f"{k:g} combined standard errors (ours {ours_se:.2g}, reference {reference_se:.2g})"
    if floor:
        just += f" + {floor:.2g} ({floor_why})"
    z = _signed_z(float(ours) - float(reference), se)
    return Row(quantity, float(ours), float(ours_se), float(reference), source, "agrees" if diff <= tol else "disagrees",
               float(reference_se), tol, just, z, note)


def bound_row(quantity: str, ours: float, ours_se: float, bound: float, source: str, *, below: bool = True,
              k: float = K_SIGMA, note: str = "") -> Row:
    """A one-sided reference (a bound, or a statement 'X is below Y'): agreement when ``ours ≤
    bound + k·se`` (``below``) or ``ours ≥ bound − k·se``; the reference column holds the bound."""
    if not _finite(ours, ours_se, bound):
        return Row(quantity, ours, ours_se, bound, source, "disagrees", 0.0, None, "not finite", None, note)
    tol = k * float(ours_se)
    ok = (ours <= bound + tol) if below else (ours >= bound - tol)
    side = "≤" if below else "≥"
    z = _signed_z(float(ours) - float(bound), float(ours_se))  # (it read 0.00 for a row far inside an exact bound,
    # and with the sign flipped on "ours ≥ reference" rows: hostile pass 45b F4)
    return Row(quantity, float(ours), float(ours_se), float(bound), source, "agrees" if ok else "disagrees", 0.0, tol,
               f"one-sided: ours {side} reference within {k:g} standard errors of ours", z, note)


def not_run_row(quantity: str, source: str, why: str, reference: float | None = None) -> Row:
    return Row(quantity, None, None, reference, source, "not run", None, None, why)


# ------------------------------------------------------------------------------------------------
# context and result


@dataclass
class ReproContext:
    """Sizes (mode), seed, device, figure folder, and ``sizes`` overrides (tests: tiny runs)."""

    mode: str = "default"
    seed: int = 0
    device: str = "cpu"
    figure_dir: Path | None = None
    sizes: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    used: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)

    def pick(self, key: str, quick: Any, default: Any, full: Any | None = None) -> Any:
        """The size ``key`` for this mode (``sizes`` overrides win); recorded on the page."""
        if key in self.sizes:
            v = self.sizes[key]
        elif self.mode == "quick":
            v = quick
        elif self.mode == "full" and full is not None:
            v = full
        else:
            v = default
        self.used[key] = v
        return v

    @property
    def want_figures(self) -> bool:
        return self.figure_dir is not None

    def save_figure(self, fig, name: str) -> None:
        from proofs_checks.context import pyplot

        plt = pyplot()
        try:
            if self.figure_dir is None:
                return
            self.figure_dir.mkdir(parents=True, exist_ok=True)
            fname = f"{self.name}__{name}.png"
            fig.savefig(self.figure_dir / fname, dpi=100, bbox_inches="tight")
            self.figures.append(fname)
        finally:
            plt.close(fig)


@dataclass
class ReproResult:
    """What a reproduction's ``run`` returns: the rows, ``stated`` (what the paper / reference code
    states, as (label, text) pairs), ``facts`` (our measurements that are shown, not compared:
    timings, counts, the meaning of each number), ``seeds``; the runner fills in name, paper,
    figure, status, sizes, figures, seconds."""

    rows: list[Row]
    stated: list[tuple[str, str]] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)
    name: str = ""
    paper: str = ""
    figure: str = ""
    status: str = ""
    why: str = ""
    mode: str = ""
    device: str = ""
    base_seed: int = 0
    sizes: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "paper": self.paper, "figure": self.figure, "status": self.status, "why": self.why,
                "mode": self.mode, "device": self.device, "seed": self.base_seed, "seeds": self.seeds,
                "sizes": self.sizes, "seconds": round(self.seconds, 3), "figures": self.figures,
                "stated": [list(p) for p in self.stated], "facts": [list(p) for p in self.facts],
                "rows": [r.to_json() for r in self.rows]}


def _status(rows: list[Row]) -> tuple[str, str]:
    bad = [r for r in rows if r.verdict == "disagrees"]
    if bad:
        return "disagrees", "; ".join(f"{r.quantity}: ours {_g(r.ours)} vs {_g(r.reference)} "
                                      f"(|diff| > tolerance {_g(r.tolerance)}{'; ' + r.note if r.note else ''})" for r in bad)
    missing = [r for r in rows if r.verdict == "not run"]
    if missing or not rows:
        return "not run", "; ".join(f"{r.quantity}: {r.justification}" for r in missing) or "no rows"
    return "agrees", f"all {len(rows)} compared quantities agree"


def _g(x: Any) -> str:
    return "–" if x is None else (f"{x:.4g}" if isinstance(x, float) else str(x))


def run_reproduction(rep: Reproduction, *, mode: str = "default", seed: int = 0, device: str = "cpu",
                     figure_dir: Path | None = None, sizes: dict[str, Any] | None = None) -> ReproResult:
    """Run one reproduction; a crash becomes status "error" with the exception (never raised)."""
    ctx = ReproContext(mode=mode, seed=seed, device=device, figure_dir=figure_dir, sizes=dict(sizes or {}), name=rep.name)
    t0 = time.perf_counter()
    try:
        res = rep.run(ctx)
        res.status, res.why = _status(res.rows)
    except Exception as exc:  # a reproduction that crashes is reported, not raised
        res = ReproResult(rows=[], status="error", why=f"{type(exc).__name__}: {exc}",
                          facts=[("traceback", traceback.format_exc(limit=8))])
    res.seconds = time.perf_counter() - t0
    res.name, res.paper, res.figure = rep.name, rep.paper, rep.figure
    res.mode, res.device, res.base_seed = mode, device, seed
    res.sizes, res.figures = dict(ctx.used), list(ctx.figures)
    return res


def run_all(reps: list[Reproduction], progress: Callable[[str, ReproResult | None], None] | None = None, **kw) -> list[ReproResult]:
    out = []
    for rep in reps:
        if progress:
            progress(rep.name, None)
        r = run_reproduction(rep, **kw)
        out.append(r)
        if progress:
            progress(rep.name, r)
    return out


def document(results: list[ReproResult], *, command: str = "", mode: str = "default", seed: int = 0,
             device: str = "cpu") -> dict[str, Any]:
    """The JSON document (``--json``, ``results.json`` of the pages): per reproduction its record,
    and ``rows`` flattened (each with its ``reproduction``)."""
    from proofs_checks.output.report import SCHEMA_VERSION

    summary: dict[str, int] = {}
    for r in results:
        summary[r.status] = summary.get(r.status, 0) + 1
    return {"schema": SCHEMA_VERSION, "tool": "tverify", "kind": "reproductions", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": command, "mode": mode, "seed": seed, "device": device, "summary": summary,
            "reproductions": [r.to_json() for r in results],
            "rows": [{"reproduction": r.name, **row.to_json()} for r in results for row in r.rows]}
