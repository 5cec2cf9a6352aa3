"""``tverify sweep``'s adapters: what a row of a claim or a sanity check measures, its parameters with their
parsers and defaults (:class:`ClaimAdapter`, :data:`ADAPTERS`, :class:`SanityAdapter`, :data:`SANITY`). Split out of
:mod:`proofs_checks.distributed.sweep`, which re-exports them (the module's docstring says how to add one)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable




# ------------------------------------------------------------------------------------------------
# adapters


@dataclass(frozen=True)
class Param:
    """A sweep parameter: ``parse(text) -> value`` (raises ``ValueError`` with the reason),
    ``default`` (a value, or ``callable(ctx)`` for a mode-dependent size), ``help``."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str = ""


@dataclass(frozen=True)
class ClaimAdapter:
    """How to measure ``claim`` at one grid point: ``fn(params, ctx) -> {name: number or text}``.
    ``uses_device``: ``fn`` computes on ``ctx.device`` (its rows need a GPU worker under
    ``--device cuda``). ``curves``: pairs (measured, closed form) drawn together on the page.
    ``group_by``: the parameters an expensive, cached reference depends on (e.g. the training
    length N of a trained model): rows of one replicate that agree on them run as one task, in one
    process, so the reference is computed once per group wherever the task runs (``None``: one
    task per row)."""

    claim: str
    fn: Callable[[dict[str, Any], Any], dict[str, Any]]
    params: tuple[Param, ...]
    description: str
    uses_device: bool = False
    headline: tuple[str, ...] = ()
    curves: tuple[tuple[str, str], ...] = ()
    group_by: tuple[str, ...] | None = None
    #: ``estimate(params) -> (peak bytes, seconds)`` of one row, checked before the sweep runs
    estimate: Callable[[dict[str, Any]], tuple[float, float]] | None = None


@dataclass(frozen=True)
class SanityAdapter:
    """``tverify check TOPIC`` as a sweep target: ``defaults`` (option name → value) used when the
    grid does not name them, ``headline`` columns (dotted paths in its JSON) for the page."""

    topic: str
    defaults: dict[str, str] = field(default_factory=dict)
    headline: tuple[str, ...] = ()
    curves: tuple[tuple[str, str], ...] = ()


ADAPTERS: dict[str, ClaimAdapter] = {}


def register_adapter(adapter: ClaimAdapter) -> ClaimAdapter:
    """Add a claim's sweep adapter to :data:`ADAPTERS` (one per claim id)."""
    ADAPTERS[adapter.claim] = adapter
    return adapter


def _int(lo: int, hi: int | None = None, why: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            if "_" in text or not text.isascii():  # int() reads "1_6" and "١٦" as 16 (hostile passes 10 F6, 46a F3)
                raise ValueError(text)
            v = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
        if v < lo or (hi is not None and v > hi):
            raise ValueError(f"{v} is outside {lo} … {hi if hi is not None else '∞'}{why}")
        return v
    return parse


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"{text!r} is not one of {', '.join(options)}")
        return text
    return parse


def _size(quick, default, full=None):
    return lambda ctx: ctx.size(quick, default, full)


# --- icl.linear_task_risk and icl.gamma_n_global_min: a trained batch of LSAs at (d, N)


@lru_cache(maxsize=8)
def _trained_lsa(d: int, N: int, seeds: int, prompts: int, steps: int, lam_seed: int, seed: int, device: str):
    """Λ (eigenvalues in [1, 3], from ``lam_seed``: the same for every N and M of a replicate) and a
    batch of LSAs trained at N; cached per process so that the grid points sharing (d, N) train once
    per worker (the numbers do not depend on which worker, or on the cache)."""
    import numpy as np

    from numerics import icl as ni, icl_check

    L = ni.random_spd(np.random.default_rng(lam_seed), d, 1.0, 3.0)
    # (the monitored training: the same weights as train_lsa, with each seed's exact minimiser B* of its own loss)
    res = icl_check.train_lsa_monitored(L, N, n_seeds=seeds, n_prompts=prompts, steps=steps, seed=seed,
                                        device=device, lbfgs_steps=50)
    return L, res


def _unconverged(res, Gi) -> dict[str, Any] | None:
    """The row's verdict when the optimiser stopped short of its own training loss's minimum: *inconclusive*, as in
    ``check icl`` (the same measure, ‖B − B*‖/‖Γ_N^(−1)‖ per seed, and the same bound, a tenth of its default relative
    bound on w22·W11). Both closed forms are about the trained minimum: an untrained batch (``steps=0``) was a
    "pass" 80 % off the risk's closed form, within the SE of its scattered seeds (hostile pass 44b F5)."""
    import numpy as np

    from proofs_checks.sanity.icl import DEFAULT_TOL

    gap = np.linalg.norm(res.B - res.B_star, axis=(1, 2)) / np.linalg.norm(Gi)
    bound = DEFAULT_TOL["trained"] / 10
    if np.all(np.isfinite(gap)) and float(gap.max()) <= bound:
        return None
    return {"verdict": "inconclusive", "optimiser_gap_max": float(np.max(gap)), "optimiser_gap_tol": bound,
            "reason": (f"training not converged: the optimiser stopped ‖B − B*‖/‖Γ_N^(−1)‖ = {float(np.max(gap)):.3g} "
                       f"(worst seed) from the minimiser B* of its own training loss, above {bound:g}: more steps")}


#: the fewest LSAs of a row: the SE is estimated across them, with seeds − 1 degrees of freedom, so the 5-SE test's
#: false failures of a correct closed form follow Student's t: 2·P(T > 5) = 1.6e-4 a row at 16 seeds, 1.6e-3 at 8,
#: 0.13 at 2 (hostile pass 44b F2 saw rows fail at 2 and 3 seeds)
MIN_LSA_SEEDS = 16
#: the fewest test prompts per seed of a risk row: 2 failed a correct closed form in 2 replicates of 10 (46b F4)
MIN_RISK_PROMPTS = 1000
_FEW_SEEDS = (" (the SE is estimated across the seeds: with fewer, a correct closed form fails far more often than "
              "5 SE says)")


def _lsa_params() -> tuple[Param, ...]:
    return (Param("N", _int(1, 10_000), 4, "training prompt length N"),
            Param("d", _int(1, 12), 3, "dimension of x (Λ: random SPD, eigenvalues in [1, 3])"),
            Param("seeds", _int(MIN_LSA_SEEDS, 4096, why=_FEW_SEEDS), _size(16, 16, 32),
                  f"LSAs trained in one batch (the SE is across them; at least {MIN_LSA_SEEDS})"),
            Param("prompts", _int(16), _size(16384, 65536, 262144), "training prompts per LSA"),
            Param("steps", _int(0), _size(200, 300, 400), "Adam steps (then 50 L-BFGS iterations)"))


def _lsa_estimate(p: dict[str, Any]) -> tuple[float, float]:
    """Peak bytes and seconds of one LSA row: the training and measurement sizes of ``check icl``
    (:func:`proofs_checks.sanity.icl.estimate_resources`), with M and the test prompts of the row."""
    est, _ = _lsa_measure_plan(p)
    return est.bytes, est.seconds


def _lsa_measure_plan(p: dict[str, Any]):
    """``(estimate, test prompts per seed in one chunk)``: the row's ``seeds × test`` test prompts measured in chunks
    of the size ``check icl`` holds at once (all were drawn at once: 2.8 GB at M = 400 under an estimate of 0.5,
    hostile pass 44b F7)."""
    from proofs_checks.sanity.icl import estimate_resources

    est, chunk = estimate_resources(p["d"], p["N"], p.get("M", p["N"]), p["seeds"], p["prompts"], p["steps"],
                                    n_measure=p.get("test", 1) * p["seeds"])
    return est, max(1, chunk // p["seeds"])


def _train_for(p: dict[str, Any], ctx):
    s = ctx.seed_for("train", p["d"], p["N"])
    return s, _trained_lsa(p["d"], p["N"], p["seeds"], p["prompts"], p["steps"], ctx.seed_for("Lambda", p["d"]), s,
                           ctx.device)


def _icl_linear_task_risk(p: dict[str, Any], ctx) -> dict[str, Any]:
    """Test risk at prompt length M of LSAs trained at N, against ``theory.icl.linear_task_risk``:
    z-test over the trained seeds (each seed's risk on ``test`` fresh prompts), K_SIGMA SE."""
    import numpy as np
    import torch

    from numerics import icl as ni
    from proofs_checks.comparisons import z_test
    from theory import icl as ti

    tseed, (L, res) = _train_for(p, ctx)
    S, M = res.B.shape[0], p["M"]
    fseed = ctx.seed_for("test", p["d"], p["N"], M)
    _, per_chunk = _lsa_measure_plan(p)
    sums = np.zeros(S)
    for i, start in enumerate(range(0, p["test"], per_chunk)):  # (one chunk, seeded fseed, for the usual sizes)
        n = min(per_chunk, p["test"] - start)
        P = ni.sample_prompts(L, M, (S, n), seed=fseed if i == 0 else ctx.seed_for("test", p["d"], p["N"], M, i),
                              device=res.device)
        with torch.no_grad():
            yh = ni.lsa_forward(res.Wpv[:, None].to(P.E.device), res.Wkq[:, None].to(P.E.device), P.E, float(M))
        sums += ((yh - P.y_q) ** 2).sum(-1).cpu().numpy()
        del P, yh
    per_seed = sums / p["test"]
    m, se = ni.mc_mean(per_seed)
    closed = float(ti.linear_task_risk(L, p["N"], M))
    r = z_test({"risk": (m, se, closed)}, what=f"the risk across {S} trained seeds", dof=S - 1)
    Gi = np.linalg.inv(ti.gamma_n(L, p["N"]))
    return {"risk_measured": m, "risk_se": se, "risk_closed_form": closed, "z": r.error, "z_tolerance": r.tolerance,
            "verdict": "pass" if r.passed else "fail", "reason": r.reason,
            "rel_err_B": float(np.linalg.norm(res.B.mean(0) - Gi) / np.linalg.norm(Gi)),
            "train_seed": tseed, "test_seed": fseed, "train_loss": float(np.mean(res.final_loss)),
            **(_unconverged(res, Gi) or {})}


def _icl_gamma_n(p: dict[str, Any], ctx) -> dict[str, Any]:
    """Mean trained ``w22·W11`` against ``Γ_N^{-1}`` (``theory.icl.gamma_n``): seed_spread z-test,
    K_SIGMA SE of the mean over the batch."""
    import numpy as np

    from proofs_checks.comparisons import seed_spread
    from theory import icl as ti

    tseed, (L, res) = _train_for(p, ctx)
    Gi = np.linalg.inv(ti.gamma_n(L, p["N"]))
    r = seed_spread(res.B.reshape(res.B.shape[0], -1), Gi.ravel(), floor=1e-6 * float(np.abs(Gi).max()),
                    what="w22·W11 vs Γ_N^{-1}")
    return {"rel_err_B": float(np.linalg.norm(res.B.mean(0) - Gi) / np.linalg.norm(Gi)),
            "norm_gamma_inv": float(np.linalg.norm(Gi)), "z": r.error, "z_tolerance": r.tolerance,
            "verdict": "pass" if r.passed else "fail", "reason": r.reason, "train_seed": tseed,
            "train_loss": float(np.mean(res.final_loss)), **(_unconverged(res, Gi) or {})}


register_adapter(ClaimAdapter(
    "icl.linear_task_risk", _icl_linear_task_risk,
    _lsa_params()[:1] + (Param("M", _int(1, 100_000), 8, "test prompt length M"),) + _lsa_params()[1:]
    + (Param("test", _int(MIN_RISK_PROMPTS, why=" (each seed's risk is a mean of squared errors, heavy-tailed: with "
                                              "fewer, the 5-SE test across seeds fails a correct closed form far "
                                              "more often than it says)"),
             _size(4000, 20000, 50000), f"fresh test prompts per trained LSA (at least {MIN_RISK_PROMPTS})"),),
    "risk at M of LSAs trained at N vs the closed form tr(Γ_N^{-2}Λ²(Λ+trΛ I))/M + tr(Γ_N^{-2}Λ(Λ+trΛ I)²)/N²",
    uses_device=True, headline=("risk_measured", "risk_closed_form", "z", "rel_err_B"),
    curves=(("risk_measured", "risk_closed_form"),), group_by=("N", "d", "seeds", "prompts", "steps"),
    estimate=_lsa_estimate))

register_adapter(ClaimAdapter(
    "icl.gamma_n_global_min", _icl_gamma_n, _lsa_params(),
    "mean trained w22·W11 vs Γ_N^{-1} = ((1+1/N)Λ + tr(Λ)/N·I)^{-1}", uses_device=True,
    headline=("rel_err_B", "z"), group_by=("N", "d", "seeds", "prompts", "steps"), estimate=_lsa_estimate))


# --- attn.scaling_variance: Monte Carlo Var(q·k) against the derived d_k


#: the fewest Monte Carlo draws of ``attn.scaling_variance``'s row: its SE is estimated from the draws' own fourth
#: moment, and (q·k)² is heavy-tailed (normal entries at d_k = 1: E(q·k)⁸ = 225), so with few draws the SE is as
#: uncertain as the variance and the 5-SE test fails a correct closed form far more often than 5 SE says: a third of
#: the rows at n = 2 (hostile pass 44b F2). Measured with the heaviest tail, normal at d_k = 1 (session 23): 5 false
#: failures in 20,000 rows at n = 1000, 3 in 100,000 at 3000, none in 30,000 at 10,000 (uniform and Rademacher
#: entries, d_k = 1, 2, 16: none in 4000 from n = 300 on)
MIN_VARIANCE_SAMPLES = 10_000
#: the most: a row's time grows as n·d_k (:func:`_variance_estimate`)
MAX_VARIANCE_SAMPLES = 10**8


def _variance_estimate(p: dict[str, Any]) -> tuple[float, float]:
    """Peak bytes and seconds of one ``attn.scaling_variance`` row: :func:`numerics.attention.dot_product_moments`
    holds a chunk of 50,000 draws of q, k, their product and its prefix sums (four float64 arrays of chunk × d_k);
    its time, measured on a 2-core x86_64 machine (session 26): 0.52 s for n = 10^6 at d_k = 16, 24 s for n = 10^5
    at d_k = 4096, 3–6e-8 s an entry; the larger rate is taken."""
    n, d = int(p["n"]), int(p["d_k"])
    return 4 * 8.0 * min(n, 50_000) * d, 6e-8 * n * d


def _attn_scaling_variance(p: dict[str, Any], ctx) -> dict[str, Any]:
    """Sample variance of ``q·k`` (and of ``q·k/√d_k``) for iid entries of law ``dist``, against
    the variance derived by ``theory.attention.derive_score_variance``; K_SIGMA SE (SE from the
    sample fourth moment)."""
    import numpy as np
    import sympy as sp

    from numerics import attention as na
    from proofs_checks.comparisons import K_SIGMA, z_test
    from theory import attention as ta

    der = ta.derive_score_variance()
    d = der.facts["d"]
    closed = float(der.result["variance"].subs(d, p["d_k"]))
    scale = float(der.result["scale"].subs(d, p["d_k"]))
    mom = na.dot_product_moments((p["d_k"],), p["n"], ctx.rng("scores", p["dist"], p["d_k"]), dist=p["dist"])
    var, se = float(mom.var[0]), float(mom.se[0])
    out = {"var_measured": var, "var_se": se, "var_closed_form": closed, "scaled_var_measured": scale**2 * var,
           "fourth_moment": float(mom.fourth[0]), "sympy_variance": str(sp.sympify(der.result["variance"]))}
    if se == 0.0:
        # every (q·k)² drawn is the same number (Rademacher entries at d_k = 1: q·k = ±1), so the sample variance is
        # that number exactly and no z-score exists: compared up to the rounding of a mean of n equal terms (the
        # naive-summation bound n·ε, relative); a z-test "failed" exact agreement with "SE 0" (hostile pass 44b F1)
        tol = p["n"] * np.finfo(float).eps
        rel = abs(var - closed) / abs(closed)
        return {**out, "z": 0.0 if rel <= tol else math.inf, "z_tolerance": K_SIGMA,
                "verdict": "pass" if rel <= tol else "fail",
                "reason": (f"every drawn (q·k)² is {var:g}: the sample variance is exact; relative difference from the "
                           f"closed form {rel:.3g} against the rounding bound n·ε = {tol:.3g}")}
    # the SE is estimated from the same n draws (their fourth moment): n − 1 degrees of freedom for the stated
    # false-failure probability
    r = z_test({"variance": (var, se, closed), "scaled": (scale**2 * var, scale**2 * se, 1.0)},
               what="the sample variance", dof=p["n"] - 1)
    return {**out, "z": r.error, "z_tolerance": r.tolerance, "verdict": "pass" if r.passed else "fail",
            "reason": r.reason}


register_adapter(ClaimAdapter(
    "attn.scaling_variance", _attn_scaling_variance,
    (Param("d_k", _int(1, 4096), 16, "dimension of q and k"),
     Param("n", _int(MIN_VARIANCE_SAMPLES, MAX_VARIANCE_SAMPLES,
                     why=" (at least 10,000: the SE comes from the draws' own fourth moment, and with fewer a correct "
                         "closed form fails far more often than 5 SE says; at most 10^8: a row's time grows as n·d_k, "
                         "about 6e-8 s an entry here, 7 hours at 10^8 and d_k = 4096)"), _size(20_000, 100_000, 400_000),
           f"Monte Carlo samples (at least {MIN_VARIANCE_SAMPLES}: the SE comes from their own fourth moment)"),
     Param("dist", _choice("normal", "rademacher", "uniform"), "normal", "law of the entries (mean 0, variance 1)")),
    "Monte Carlo Var(q·k) vs the derived d_k (and Var(q·k/√d_k) vs 1)",
    headline=("var_measured", "var_closed_form", "z"), curves=(("var_measured", "var_closed_form"),),
    estimate=_variance_estimate))


#: sanity checks with defaults and headline columns; any other ``tverify check`` subcommand works too
SANITY: dict[str, SanityAdapter] = {
    "icl": SanityAdapter("icl", defaults={"lambda": "1,2"},
                         headline=("trained.risk_M_measured", "closed_forms.linear_task_risk_M",
                                   "trained.rel_err_mean_B"),
                         curves=(("trained.risk_M_measured", "closed_forms.linear_task_risk_M"),)),
    "att-svm": SanityAdapter("att-svm"),
    "hopfield": SanityAdapter("hopfield"),
}

#: options every ``tverify check`` has, which the sweep itself sets
#: (and where each row's outputs would go: every row wrote its --report into one folder, the last one left without a
#: word — an unfiled note of hostile pass 44b)
_SANITY_OWN = {"seed", "device", "quick", "full", "json_path", "json_force", "report_dir", "max_memory", "no_progress",
               "help"}
