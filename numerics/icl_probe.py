"""Which in-context algorithm does a trained in-context learner compute? The algorithm probe
(Akyürek et al. 2023, von Oswald et al. 2023), used by the claim ``icl.algorithm_probe`` and by
``tverify check icl --model``.

A *predictor* maps a batch of linear-regression prompts to its predictions at the queries:
``predict(X, y, x_q) -> ŷ`` with ``X (P, M, d)``, ``y (P, M)``, ``x_q (P, d)`` float64 torch tensors
(examples are ROWS) and ``ŷ (P,)`` (torch or NumPy, any real floating dtype). The probe samples
prompts as in :func:`numerics.icl.sample_prompts` (``w ~ N(0, I_d)``, ``x ~ N(0, Λ)``,
``y = ⟨w, x⟩ + σ ε``) at several prompt lengths ``M`` and measures, at each length, the distance of
the predictor's outputs to those of the candidate algorithms (:data:`ALGORITHMS`):

``gamma_n_preconditioned_gd``  ``x_qᵀ Γ_N^{-1} h``, ``h = (1/M) Σ y_i x_i``, ``Γ_N = (1 + 1/N)Λ + tr(Λ)/N I``
                               (:func:`theory.icl.gamma_n`): one GD step from ``w = 0`` on
                               ``(1/2M) Σ (⟨w, x_i⟩ − y_i)²`` preconditioned by ``Γ_N^{-1}``, the
                               predictor of the globally optimal linear self-attention (Zhang–Frei–Bartlett);
``least_squares``              ``x_qᵀ X⁺ y`` (min-norm least squares; the pseudo-inverse, so ``M < d`` is fine);
``ridge``                      ``x_qᵀ (XᵀX + λ I)^{-1} Xᵀ y`` at the Bayes-optimal ``λ = σ²/1`` (noise variance
                               over the prior variance of ``w ~ N(0, I)``): the posterior mean. At ``σ = 0``
                               it is the ``λ → 0⁺`` limit, which is least squares (reported as equivalent);
``gd_one_step``                ``η* x_qᵀ h``: one plain GD step from ``w = 0`` with the population-optimal
                               scalar step for prompts of length ``N``,
                               ``η* = tr(Λ²) / (tr(Λ² Γ_N) + σ² tr(Λ²)/N)`` (the best step a model trained at
                               length ``N`` could learn; ``η = 1`` would be ``averaging``);
``knn``                        mean label of the ``k`` nearest context inputs (Euclidean; ``min(k, M)``);
``averaging``                  ``x_qᵀ h`` (Garg et al.'s averaging baseline, one GD step with ``η = 1``).

Distances are mean squared differences of predictions, divided by the label variance
``E y_q² = tr(Λ) + σ²`` (a constant, so 1 = as far as predicting 0), with standard errors over
prompts: these are the curves. The decision uses the *logarithm* of each prompt's squared distance
(plus ``LOG_FLOOR``): the closest algorithm has the smallest mean log distance (the smallest geometric
mean distance), and it is *separable* from a rival when the paired per-prompt difference of log
distances, averaged over prompts and lengths, exceeds ``z_threshold`` standard errors. Logarithms
because least squares (and ridge at small λ) has heavy-tailed predictions near ``M = d`` (the inverse
of a nearly singular ``XᵀX``; with label noise its variance is infinite for ``M ≤ d + 1``): a z-score
on raw squared distances would then rest on a meaningless standard error, while the log of a
heavy-tailed distance has light tails. Algorithms whose predictions
coincide on every sampled prompt (to float64 rounding) are *equivalent* at this configuration (ridge
and least squares at ``σ = 0``; Γ_N-preconditioned and plain GD when ``Λ ∝ I``) and are reported
together, under the first name in :data:`ALGORITHMS` order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch

from numerics.icl import sample_prompts
from numerics.icl_probe_batch import ProbeOutputError, _as_predictions, _batch_alone, _batch_summary
from numerics.precision import plain
from numerics.torch_utils import defaults_kept, precision_for_a_check, resolve_device
from theory.icl import gamma_n
from theory.validation import InputError, as_spd_matrix

__all__ = ["ALGORITHMS", "EXTENDED_ALGORITHMS", "RIDGE_GRID", "IDENTIFY_RATIO", "algorithm_predictions",
           "optimal_gd_step", "prompt_lengths", "probe_algorithms", "ProbeOutputError"]

ALGORITHMS = ("gamma_n_preconditioned_gd", "least_squares", "ridge", "gd_one_step", "knn", "averaging")
#: The references of ``tverify check icl --model`` (``extended=True``): :data:`ALGORITHMS` plus ridge at
#: the λ of :data:`RIDGE_GRID` nearest the model (``ridge_lambda_grid``, the λ reported), k-NN at
#: k = 1 and 5 (``knn`` is k = 3), and the mean of the prompt's labels (``label_mean``: k-NN with
#: k = M; it coincides with every k-NN for M ≤ k, and is a reference of its own so that a
#: label-mean model is named as such, never as k-NN).
EXTENDED_ALGORITHMS = ALGORITHMS + ("ridge_lambda_grid", "knn_1", "knn_5", "label_mean")
#: The ``k`` of the extended k-NN references (``knn`` is k = 3): for M ≤ max k some of them coincide with
#: ``label_mean``, so a probe grid that is to tell them apart must reach beyond it.
EXTENDED_KNN_K = (1, 5)
#: The λ grid of ``ridge_lambda_grid`` (w ~ N(0, I), so λ is in units of the prior variance: λ = σ² is Bayes).
RIDGE_GRID = tuple(float(10.0 ** (k / 2)) for k in range(-8, 5))
#: Identification: at every prompt length the model's RMS distance to an algorithm must be at most
#: this fraction of the RMS distance from that algorithm to its nearest distinct reference (or to the
#: null prediction 0, whichever is nearer: an algorithm predicting near 0 cannot claim a zero model). Below
#: 1/2, the triangle inequality lets at most one algorithm (or a group that coincides) pass at a length;
#: 1/4 keeps a factor 2 from that ambiguity.
IDENTIFY_RATIO = 0.25
DTYPE = torch.float64
#: Two algorithms are *equivalent* when their predictions agree to this relative tolerance on every
#: prompt (float64 rounding of a d×d solve, with a wide margin; genuinely different algorithms differ
#: at O(1) on generic prompts).
EQUIVALENT_RTOL = 1e-9
#: Added to the normalised squared distances before the logarithm of the decision statistic: predictions
#: that agree to ~1e-6 of the label scale count as equal (float64 rounding of the algorithms is far below).
LOG_FLOOR = 1e-12


def optimal_gd_step(Lambda, N: int, noise: float = 0.0) -> float:
    """``η* = tr(Λ²) / (tr(Λ² Γ_N) + σ² tr(Λ²)/N)``: the scalar ``η`` minimising
    ``E(η x_qᵀ h − y_q)²`` for prompts of length ``N`` (``E[h hᵀ] = ΛΓ_N + σ²Λ/N``,
    ``E[x_qᵀ h y_q] = tr(Λ²)`` for ``w ~ N(0, I)``).

    >>> round(optimal_gd_step([1.0, 1.0], 4), 12)  # Λ = I: Γ_N = (1 + (d+1)/N) I, η* = 1/(1 + 3/4)
    0.571428571429
    """
    L = as_spd_matrix(Lambda, "Lambda")
    G = gamma_n(L, N)
    L2 = L @ L
    return float(np.trace(L2) / (np.trace(L2 @ G) + noise**2 * np.trace(L2) / N))


def prompt_lengths(M: int, d: int) -> list[int]:
    """Default prompt lengths of a probe curve around a test length ``M`` in dimension ``d``:
    ``{1, ⌈d/2⌉, d, d+1, 2d, ⌈M/2⌉, M, 2M}`` (sorted, distinct). ``M ≤ d`` is where least squares
    and ridge differ most, large ``M`` where the consistent algorithms meet.

    >>> prompt_lengths(10, 2)
    [1, 2, 3, 4, 5, 10, 20]
    """
    vals = {1, math.ceil(d / 2), d, d + 1, 2 * d, math.ceil(M / 2), M, 2 * M}
    return sorted(v for v in vals if v >= 1)


def algorithm_predictions(X: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor, *, Lambda, N: int, noise: float = 0.0,
                          knn_k: int = 3, gamma=None, ridge_lambda: float | None = None,
                          extended: bool = False) -> dict[str, torch.Tensor]:
    """Predictions ``(P,)`` of every algorithm in :data:`ALGORITHMS` on prompts ``X (P, M, d)``,
    ``y (P, M)``, ``x_q (P, d)`` (float64, any device). ``N`` is the training context length that
    sets ``Γ_N`` and ``η*``; ``noise`` the label noise σ (ridge's ``λ = σ²``). ``gamma`` (a ``(d, d)``
    matrix) and ``ridge_lambda`` override the preconditioner ``Γ_N`` and ridge's ``λ`` (to probe
    other variants; the defaults are the documented ones). ``extended`` adds ``knn_1``, ``knn_5`` and
    ``label_mean`` (see :data:`EXTENDED_ALGORITHMS`; ``ridge_lambda_grid`` is chosen by the probe)."""
    L = as_spd_matrix(Lambda, "Lambda")
    d = L.shape[0]
    P, M, dx = X.shape
    if dx != d:
        raise InputError(f"prompts have d = {dx}, Lambda has d = {d}")
    dev = X.device
    G = gamma_n(L, N) if gamma is None else np.asarray(gamma, dtype=np.float64)
    Gi = torch.as_tensor(np.linalg.inv(G), dtype=DTYPE, device=dev)
    h = torch.einsum("pm,pmd->pd", y, X) / M
    out: dict[str, torch.Tensor] = {}
    out["gamma_n_preconditioned_gd"] = torch.einsum("pd,de,pe->p", x_q, Gi, h)
    w_ls = (torch.linalg.pinv(X) @ y.unsqueeze(-1)).squeeze(-1)
    out["least_squares"] = (x_q * w_ls).sum(-1)
    lam = float(noise) ** 2 if ridge_lambda is None else float(ridge_lambda)
    if lam > 0:
        out["ridge"] = _ridge(X, y, x_q, lam)
    else:  # λ = 0: the λ → 0⁺ limit of the posterior mean is the min-norm least-squares solution
        out["ridge"] = out["least_squares"].clone()
    out["gd_one_step"] = optimal_gd_step(L, N, noise) * (x_q * h).sum(-1)
    k = min(int(knn_k), M)
    dist = ((X - x_q.unsqueeze(1)) ** 2).sum(-1)
    idx = torch.topk(dist, k, dim=1, largest=False).indices
    out["knn"] = torch.gather(y, 1, idx).mean(1)
    out["averaging"] = (x_q * h).sum(-1)
    if extended:
        for kk in EXTENDED_KNN_K:
            ik = torch.topk(dist, min(kk, M), dim=1, largest=False).indices
            out[f"knn_{kk}"] = torch.gather(y, 1, ik).mean(1)
        out["label_mean"] = y.mean(1)
    return out


def _ridge(X, y, x_q, lam: float) -> torch.Tensor:
    """Ridge's prediction at ``x_q`` (λ > 0) through the SVD of X: w = V diag(s / (s² + λ)) Uᵀ y. Solving
    (XᵀX + λI) w = Xᵀy failed as singular for a rank-deficient X whose entries are so large that λ vanishes beside
    XᵀX in float64 (inputs of size 1e7 at λ = 1e-4, one example in two dimensions); the SVD form is the same
    solution, stable at any λ > 0 (a zero singular value contributes 0)."""
    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    c = (S / (S * S + lam)) * torch.einsum("pmk,pm->pk", U, y)
    w = torch.einsum("pkd,pk->pd", Vh, c)
    return (x_q * w).sum(-1)


def _output_dtype(raw) -> torch.dtype:
    """The precision found in a prediction (:func:`numerics.precision.infer_work_dtype`: the dtype it came
    in when below float64, or float64 values all exactly representable in a lower precision; NumPy
    mapped to torch)."""
    from numerics.precision import infer_work_dtype  # float64 holding float32 values: computed in float32

    if isinstance(raw, torch.Tensor):
        return infer_work_dtype(raw) if raw.dtype.is_floating_point else DTYPE
    arr = np.asarray(raw)
    if arr.dtype in (np.float16, np.float32):
        return {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32}[arr.dtype]
    return infer_work_dtype(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64)))


def _quiet_floats(fn):
    """NumPy's floating-point warnings off inside ``fn``: a model's inf or NaN predictions are counted
    (``nonfinite``) and judged, and numpy's remarks on them would only add lines to the one verdict."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return wrapped


@_quiet_floats
@precision_for_a_check()  # (what the predictor left for its calls, this process's own float32 settings for the references)
def probe_algorithms(predict: Callable, *, lam, N: int, M_values: Iterable[int], noise: float = 0.0,
                     prompts: int = 2000, seed: int = 0, device="cpu", knn_k: int = 3,
                     z_threshold: float = 3.0, progress: Callable[[float], None] | None = None, gamma=None,
                     ridge_lambda: float | None = None, extended: bool = False, skip: tuple = (),
                     work_dtype: torch.dtype | None = None) -> dict:
    """Distances of ``predict``'s outputs to each algorithm of :data:`ALGORITHMS`, as curves over
    the prompt lengths ``M_values``, and which algorithm is closest.

    ``predict(X (P, M, d), y (P, M), x_q (P, d)) -> (P,)`` receives float64 tensors on ``device``
    (``P = prompts`` fresh prompts per length, seed ``seed + 7919·i`` at the ``i``-th length).
    ``lam`` is Λ, a ``(d,)`` diagonal or a ``(d, d)`` SPD matrix; ``N`` the training context length
    (``Γ_N``, ``η*``); ``noise`` the label noise σ; ``gamma`` / ``ridge_lambda`` override ``Γ_N`` /
    ridge's ``λ = σ²`` (see :func:`algorithm_predictions`). Exceptions raised by ``predict`` propagate;
    output of the wrong shape or dtype raises :class:`ProbeOutputError`; non-finite outputs are
    counted (``nonfinite``) and make the distances NaN (no decision).

    Returns a dict (JSON-serialisable; lists follow ``M_values``):

    ``algorithms``, ``M_values``, ``prompts``, ``seed``, ``N``, ``noise``, ``d``, ``lambda`` (d×d),
    ``normaliser`` (``tr Λ + σ²``), ``gd_step`` (η*), ``ridge_lambda`` (σ²), ``knn_k``,
    ``distance[a]`` / ``distance_se[a]``: mean normalised squared distance to algorithm ``a`` per
    length and its SE; ``geometric_distance[a]``: ``exp`` of the mean log distance over all prompts
    and lengths (the decision's score); ``risk[a]`` / ``risk_se[a]`` and ``risk_model`` / ``risk_model_se``:
    normalised squared error against the query label ``y_q``; ``score[a]`` / ``score_se[a]``: the
    distance averaged over lengths; ``pairwise_z[a][b]``: the paired difference of log distances
    ``(b − a)`` averaged over prompts and lengths, in standard errors (``pairwise_z_by_length[a][b]``: per length;
``pairwise_difference`` / ``pairwise_difference_se``: the averaged difference and its SE); ``equivalent``: groups of algorithms whose
    predictions coincide (relative ``EQUIVALENT_RTOL``); ``closest`` (name, or ``None`` when
    non-finite outputs), ``closest_group``, ``runner_up``, ``z_runner_up``, ``separable`` (every
    rival at least ``z_threshold`` SE farther), ``per_length_closest``, ``nonfinite`` (count per
    length), ``z_threshold``.

    ``extended``: the references of :data:`EXTENDED_ALGORITHMS` (``ridge_lambda_grid`` at the λ of
    :data:`RIDGE_GRID` with the smallest mean distance to ``predict`` over the lengths,
    ``ridge_grid_lambda``), and the identification (``identification``, see :func:`_identify`).
    ``skip``: exception types that, raised by ``predict`` at a length, drop that length (listed in
    ``skipped_lengths`` with the exception) instead of propagating; ``M_values`` then holds the
    lengths that ran (``M_requested`` all of them). ``work_dtype``: the precision the predictor is
    judged at, as declared (default: the inputs' float64); the coarsest precision found in its outputs
    (``found_dtype``, :func:`_output_dtype`) replaces it when coarser (its ``precision_as_declared``
    then fails: ``judged_dtype``, ``judged_given``), so the identification is still made; below float64
    the references are also computed from inputs rounded to the working precision (``precision_floor``).
    """
    setup = _Setup.of(lam, N, M_values, noise, prompts, seed, device, knn_k, gamma, ridge_lambda, extended)
    runs, skipped, dtypes, batch = _run_lengths(setup, predict, skip, progress)
    A, P = setup.A, setup.P
    if not runs:
        return {"algorithms": A, "M_values": [], "M_requested": setup.Ms, "skipped_lengths": skipped, "prompts": P,
                "closest": None, "identification": None}
    Ms = [r["M"] for r in runs]
    lowest = max(dtypes, key=lambda t: torch.finfo(t).eps, default=DTYPE)  # the coarsest found
    from numerics.precision import PrecisionFinding, dtype_name

    finding = PrecisionFinding.of(work_dtype, lowest)
    work = finding.work
    grid_lambda = _ridge_grid_choice(runs, A) if extended else None
    st = _Stats.of(setup, runs, work, grid_lambda)
    out = _summary(setup, st, Ms, z_threshold)
    if extended or skip:
        out.update(M_requested=setup.Ms, skipped_lengths=skipped)
    if extended:
        out.update(ridge_grid=list(RIDGE_GRID), ridge_grid_lambda=grid_lambda,
                   output_dtype=sorted({str(t).replace("torch.", "") for t in dtypes}),
                   work_dtype=str(work).replace("torch.", ""), found_dtype=dtype_name(finding.found),
                   judged_dtype=dtype_name(finding.judged), judged_given=finding.given)
        if batch:
            out.update(batch_independence=_batch_summary(batch, work))
    if sum(st.nonfinite):
        out.update(closest=None, closest_group=None, runner_up=None, z_runner_up=None, separable=False,
                   identification=None)
        return out
    _decide(out, st, A, z_threshold)
    if extended:
        out["identification"] = _identify(A, Ms, st.dist, st.dist_se, np.stack(st.ref_dist), np.stack(st.coincide_M),
                                          np.asarray(st.floor_M), P, z_threshold, work,
                                          null_dist=np.stack(st.null_M), per_prompt=st.D_M)
    return out


@dataclass(frozen=True)
class _Setup:
    """What one probe is run with, validated: Λ, the lengths asked for, the prompts, the references' settings."""

    L: np.ndarray
    N: int
    Ms: list
    noise: float
    P: int
    seed: int
    dev: torch.device
    knn_k: int
    gamma: object
    ridge_lambda: float | None
    extended: bool
    A: list
    norm: float

    @property
    def d(self) -> int:
        return self.L.shape[0]

    @classmethod
    def of(cls, lam, N, M_values, noise, prompts, seed, device, knn_k, gamma, ridge_lambda, extended) -> "_Setup":
        L = as_spd_matrix(lam, "Lambda")
        Ms_req = [int(m) for m in M_values]
        if not Ms_req or any(m < 1 for m in Ms_req):
            raise InputError(f"M_values must be a non-empty list of lengths ≥ 1, got {Ms_req}")
        if int(N) < 1:
            raise InputError(f"N must be ≥ 1, got {N}")
        if int(prompts) < 2:
            raise InputError(f"prompts must be ≥ 2 (standard errors), got {prompts}")
        if not (math.isfinite(noise) and noise >= 0):
            raise InputError(f"noise must be a finite number ≥ 0, got {noise}")
        return cls(L, N, Ms_req, noise, int(prompts), seed, resolve_device(device), knn_k, gamma, ridge_lambda,
                   extended, list(EXTENDED_ALGORITHMS if extended else ALGORITHMS), float(np.trace(L) + noise**2))

    def prompts_at(self, i: int, M: int, shift: int = 0):
        return sample_prompts(self.L, M, (self.P,), seed=self.seed + 7919 * i + shift, noise=self.noise,
                              device=self.dev)

    def references(self, X, y, x_q) -> dict:
        return algorithm_predictions(X, y, x_q, Lambda=self.L, N=self.N, noise=self.noise, knn_k=self.knn_k,
                                     gamma=self.gamma, ridge_lambda=self.ridge_lambda, extended=self.extended)


def _run_lengths(setup: _Setup, predict: Callable, skip: tuple, progress) -> tuple[list, list, list, list]:
    """Pass 1: the predictor and the references at every length (lengths where it raises a ``skip`` type dropped):
    ``(runs, skipped, output dtypes, batch comparisons)``."""
    runs, skipped, dtypes, batch = [], [], [], []
    for i, M in enumerate(setup.Ms):
        Pr = setup.prompts_at(i, M)
        try:
            with torch.no_grad(), defaults_kept():
                raw = predict(Pr.X.clone(), Pr.y.clone(), Pr.x_q.clone())  # the predictor may not alter the prompts
        except skip as exc:
            skipped.append({"M": M, "error": str(exc)})
            if progress is not None:
                progress((i + 1) / len(setup.Ms))
            continue
        raw = plain(raw)  # a tensor subclass's own operators never judge it
        f = _as_predictions(raw, setup.P, f"prompt length M = {M}")
        dtypes.append(_output_dtype(raw))
        if setup.extended:  # (the other prompts of a second full batch: a fresh draw, seeded beside this length's)
            batch.append(_batch_alone(predict, Pr, f, M, setup.d, i, setup.prompts_at(i, M, 104729)))
        algs = {a: v.detach().to("cpu", DTYPE) for a, v in setup.references(Pr.X, Pr.y, Pr.x_q).items()}
        grid = None
        if setup.extended:
            grid = torch.stack([_ridge(Pr.X, Pr.y, Pr.x_q, lam_).detach().to("cpu", DTYPE) for lam_ in RIDGE_GRID])
        runs.append({"M": M, "f": f, "algs": algs, "grid": grid, "yq": Pr.y_q.detach().to("cpu", DTYPE), "i": i})
        if progress is not None:
            progress((i + 1) / len(setup.Ms))
    return runs, skipped, dtypes, batch


def _ridge_grid_choice(runs: list, A: list) -> float:
    """The λ of :data:`RIDGE_GRID` closest to the predictor (the smallest mean distance over the lengths); each run's
    ``ridge_lambda_grid`` reference set to it, the references kept in :data:`EXTENDED_ALGORITHMS` order."""
    with torch.no_grad():
        gd = [float(np.mean([float(((r["f"] - r["grid"][k]) ** 2).mean()) for r in runs])) for k in
              range(len(RIDGE_GRID))]
    kbest = int(np.nanargmin(gd)) if np.any(np.isfinite(gd)) else 0
    for r in runs:
        r["algs"]["ridge_lambda_grid"] = r["grid"][kbest]
        r["algs"] = {a: r["algs"][a] for a in A}
    return RIDGE_GRID[kbest]


@dataclass
class _Stats:
    """The distances, risks and paired log-distance statistics of every length (see :func:`probe_algorithms`)."""

    dist: dict
    dist_se: dict
    risk: dict
    risk_se: dict
    pair_mean: np.ndarray
    pair_var: np.ndarray
    z_by_len: np.ndarray
    log_sum: np.ndarray
    coincide: np.ndarray
    risk_m: list = field(default_factory=list)
    risk_m_se: list = field(default_factory=list)
    nonfinite: list = field(default_factory=list)
    per_len: list = field(default_factory=list)
    ref_dist: list = field(default_factory=list)
    coincide_M: list = field(default_factory=list)
    floor_M: list = field(default_factory=list)
    null_M: list = field(default_factory=list)
    D_M: list = field(default_factory=list)

    @classmethod
    def of(cls, setup: _Setup, runs: list, work: torch.dtype, grid_lambda) -> "_Stats":
        A, nA = setup.A, len(setup.A)
        st = cls({a: [] for a in A}, {a: [] for a in A}, {a: [] for a in A}, {a: [] for a in A},
                 np.zeros((nA, nA)), np.zeros((nA, nA)), np.zeros((len(runs), nA, nA)), np.zeros(nA),
                 np.ones((nA, nA), dtype=bool))
        for i, r in enumerate(runs):
            st._add_length(setup, i, r, work, grid_lambda)
        return st

    def _add_length(self, setup: _Setup, i: int, r: dict, work: torch.dtype, grid_lambda) -> None:
        A, nA, P, norm = setup.A, len(setup.A), setup.P, setup.norm
        f, algs, yq = r["f"], r["algs"], r["yq"]
        bad = int((~torch.isfinite(f)).sum())
        self.nonfinite.append(bad)
        D = torch.stack([(f - algs[a]) ** 2 for a in A]).numpy() / norm  # (nA, P)
        for j, a in enumerate(A):
            self.dist[a].append(float(D[j].mean()))
            self.dist_se[a].append(float(D[j].std(ddof=1) / math.sqrt(P)))
            rr = ((algs[a] - yq) ** 2).numpy() / norm
            self.risk[a].append(float(rr.mean()))
            self.risk_se[a].append(float(rr.std(ddof=1) / math.sqrt(P)))
        rm = ((f - yq) ** 2).numpy() / norm
        self.risk_m.append(float(rm.mean()))
        self.risk_m_se.append(float(rm.std(ddof=1) / math.sqrt(P)))
        stack = torch.stack([algs[a] for a in A]).numpy()
        # two algorithms coincide on a prompt when they agree to rounding on the scale of those two (the largest of
        # all, averaging's ~Λ^1.5 at Λ = 1e14, made every pair coincide and 2 × least squares "least squares":
        # hostile pass 20b F3); an algorithm is 0 when it is 0 on the scale of the label
        absS = np.abs(stack)
        label_scale = np.maximum(math.sqrt(norm), np.abs(yq.numpy()))  # (not 1: at Λ = 1e-7 the labels are ~3e-4, and
        # ridge at λ = 100 was "0" next to 1, so a model returning zeros was identified as it: hostile pass 34b F4)
        logD = np.log(D + LOG_FLOOR)  # (nA, P) the decision statistic: log squared distances
        cM = np.ones((nA, nA), dtype=bool)
        for j in range(nA):
            self.log_sum[j] += logD[j].sum()
            diff = logD - logD[j]  # (nA, P): rival minus j
            m_, v_ = diff.mean(1), diff.var(1, ddof=1) / P
            self.pair_mean[j] += m_
            self.pair_var[j] += v_
            with np.errstate(divide="ignore", invalid="ignore"):
                self.z_by_len[i, j] = np.where(v_ > 0, m_ / np.sqrt(v_), np.where(m_ > 0, np.inf, 0.0))
            cM[j] = np.all(np.abs(stack - stack[j]) <= EQUIVALENT_RTOL * np.maximum(1.0, np.maximum(absS, absS[j])),
                           axis=1)
            self.coincide[j] &= cM[j]
        if setup.extended:
            self.ref_dist.append(((stack[:, None, :] - stack[None, :, :]) ** 2).mean(-1) / norm)  # (nA, nA)
            self.coincide_M.append(cM & cM.T)
            # the null prediction 0: every reference's rival too (an algorithm whose predictions are small
            # next to the labels, e.g. averaging at a small Λ, must not claim a model that returns zeros);
            # nan where the algorithm itself is 0 to float64 rounding (it cannot be told apart from 0)
            self.null_M.append(np.where(np.all(absS <= EQUIVALENT_RTOL * label_scale, axis=1), np.nan,
                                        (stack**2).mean(-1) / norm))
            self.floor_M.append(_precision_floor(setup, r, algs, work, grid_lambda) if work != DTYPE else [0.0] * nA)
            self.D_M.append(D)
        self.per_len.append(None if bad else A[int(np.argmin(D.mean(1)))])


def _precision_floor(setup: _Setup, r: dict, algs: dict, work: torch.dtype, grid_lambda) -> list[float]:
    """Each reference's distance from itself computed on inputs rounded to the working precision (the factor is
    applied later)."""
    Pr = setup.prompts_at(r["i"], r["M"])
    rd = lambda t: t.to(work).to(DTYPE)  # noqa: E731
    low = algorithm_predictions(rd(Pr.X), rd(Pr.y), rd(Pr.x_q), Lambda=setup.L, N=setup.N, noise=setup.noise,
                                knn_k=setup.knn_k, gamma=setup.gamma, ridge_lambda=setup.ridge_lambda, extended=True)
    try:
        low["ridge_lambda_grid"] = _ridge(rd(Pr.X), rd(Pr.y), rd(Pr.x_q), grid_lambda)
    except RuntimeError:  # singular on inputs rounded to the working precision (bfloat16 at Λ = 1e20:
        # the grid's λ lost next to XᵀX): no reference of it there, so its tolerance decides nothing (20b F2)
        low["ridge_lambda_grid"] = torch.full_like(algs["ridge_lambda_grid"], math.nan)
    return [float(((rd(low[a].detach().cpu()) - algs[a]) ** 2).mean() / setup.norm) for a in setup.A]


def _summary(setup: _Setup, st: _Stats, Ms: list, z_threshold: float) -> dict:
    """The curves, scores, paired z-scores and equivalence groups (the decision is :func:`_decide`'s)."""
    A, nA, P, nL = setup.A, len(setup.A), setup.P, len(Ms)
    st.pair_mean /= nL
    st.pair_se = np.sqrt(st.pair_var) / nL
    pm, pse = st.pair_mean, st.pair_se
    with np.errstate(divide="ignore", invalid="ignore"):
        st.z = np.where(pse > 0, pm / pse, np.where(pm > 0, np.inf, 0.0))
    st.geo = {a: float(math.exp(st.log_sum[j] / (nL * P))) for j, a in enumerate(A)}
    st.groups = _groups(st.coincide & st.coincide.T, A)  # (coincide is symmetric up to the scale; make it so)
    pairs = lambda m: {A[j]: {A[k]: float(m[j, k]) for k in range(nA) if k != j} for j in range(nA)}  # noqa: E731
    return {
        "algorithms": A, "M_values": Ms, "prompts": P, "seed": int(setup.seed), "N": int(setup.N),
        "noise": float(setup.noise), "d": setup.d, "lambda": setup.L.tolist(), "normaliser": setup.norm,
        "gd_step": optimal_gd_step(setup.L, setup.N, setup.noise),
        "ridge_lambda": float(setup.noise) ** 2 if setup.ridge_lambda is None else float(setup.ridge_lambda),
        "knn_k": int(setup.knn_k), "distance": st.dist, "distance_se": st.dist_se, "risk": st.risk,
        "risk_se": st.risk_se, "risk_model": st.risk_m, "risk_model_se": st.risk_m_se,
        "score": {a: float(np.mean(st.dist[a])) for a in A},
        "score_se": {a: float(math.sqrt(sum(s_**2 for s_ in st.dist_se[a])) / nL) for a in A},
        "geometric_distance": st.geo, "pairwise_z": pairs(st.z), "pairwise_difference": pairs(pm),
        "pairwise_difference_se": pairs(pse),
        "pairwise_z_by_length": {A[j]: {A[k]: [float(v) for v in st.z_by_len[:, j, k]] for k in range(nA) if k != j}
                                 for j in range(nA)},
        "equivalent": [g for g in st.groups if len(g) > 1], "nonfinite": st.nonfinite,
        "per_length_closest": st.per_len, "z_threshold": float(z_threshold),
    }


def _groups(coincide: np.ndarray, A: list) -> list[list[str]]:
    """The equivalence classes of the algorithms whose predictions coincide, in :data:`ALGORITHMS` order."""
    groups, seen = [], set()
    for j, a in enumerate(A):
        if a in seen:
            continue
        g = [A[k] for k in range(len(A)) if coincide[j, k]]
        seen.update(g)
        groups.append(g)
    return groups


def _decide(out: dict, st: _Stats, A: list, z_threshold: float) -> None:
    """The closest algorithm (the smallest geometric distance among the groups' first names), its runner-up and
    whether it is separable from every rival."""
    reps = [g[0] for g in st.groups]
    best = min(reps, key=lambda a: st.geo[a])
    j = A.index(best)
    rivals = [a for a in reps if a != best]
    if rivals:
        runner = min(rivals, key=lambda a: st.z[j, A.index(a)])
        zr = float(st.z[j, A.index(runner)])
    else:  # pragma: no cover - six algorithms never all coincide
        runner, zr = None, math.inf
    out.update(closest=best, closest_group=next(g for g in st.groups if g[0] == best), runner_up=runner,
               z_runner_up=zr, separable=bool(zr >= z_threshold))


#: The precision rule (FlashAttention's): a model in a lower working precision may differ from a
#: reference by this factor times the reference's own error when computed in that precision.
PRECISION_FACTOR = 2.0


#: The truncated lower bound of ``_identify``: squared distances are cut at this multiple of the tolerance.
TRUNCATE_AT = 4.0


def _identify(A, Ms, dist, dist_se, ref_dist, coincide_M, floor_M, P, k, work, null_dist=None,
              per_prompt=None) -> dict:
    """Which reference the model computes, length by length (see :data:`IDENTIFY_RATIO`).

    At length ``M`` the tolerance for algorithm ``a`` is ``IDENTIFY_RATIO² · r_a(M)`` (squared: the
    distances are mean squared), ``r_a(M)`` the normalised mean squared distance from ``a`` to the
    nearest reference that does not coincide with it at ``M`` (``ridge_lambda_grid``, fitted to the
    model, is nobody else's rival) or to the null prediction 0 (``null_dist[i, a]``, the algorithm's own
    normalised mean square; nan where the algorithm is 0 itself), raised to ``PRECISION_FACTOR ×`` the
    distance of ``a`` computed from inputs rounded to the model's working precision (0 in float64).
    ``pass``: distance + k·SE ≤ tol; ``fail``: distance − k·SE > tol, or the same lower bound for the
    mean of the per-prompt squared distances truncated at ``TRUNCATE_AT · tol`` (``per_prompt[i][a]``;
    truncation only lowers the mean, and the truncated values have a light tail, so a heavy-tailed
    distance — a model off by 1e4 on some prompts — cannot hide behind its own standard error); else
    ``undecided``. Identified: the algorithm passing at every length (the closest by its worst ratio
    when several do, the others listed)."""
    nA, nM = len(A), len(Ms)
    ratio2 = IDENTIFY_RATIO**2
    fitted = A.index("ridge_lambda_grid") if "ridge_lambda_grid" in A else -1
    table = {}
    for j, a in enumerate(A):
        rows = []
        for i in range(nM):
            cand = [b for b in range(nA) if b != j and not coincide_M[i, j, b] and (b != fitted or j == fitted)]
            if j == fitted:
                cand = [b for b in cand if b != fitted]
            r = float(min(ref_dist[i, j, b] for b in cand)) if cand else float("nan")
            nearest = A[min(cand, key=lambda b: ref_dist[i, j, b])] if cand else None
            z0 = float(null_dist[i, j]) if null_dist is not None else float("nan")
            if math.isfinite(z0) and not (z0 >= r):  # r nan (no rival) or the null prediction nearer
                r, nearest = z0, "zero prediction"
            fl = float(floor_M[i, j])  # nan: no reference in the working precision (its computation failed there)
            tol = max(ratio2 * r, PRECISION_FACTOR * fl) if math.isfinite(r) and math.isfinite(fl) else float("inf")
            dv, se = dist[a][i], dist_se[a][i]
            if not math.isfinite(dv):
                st = "fail"
            elif not math.isfinite(tol):  # no rival to measure against, or a reference that overflowed in the
                st = "undecided"  # working precision: an infinite tolerance would identify anything (19b F7)
            elif dv + k * se <= tol:
                st = "pass"
            elif dv - k * se > tol:
                st = "fail"
            else:
                st = "undecided"
            zero_like = st == "pass" and null_dist is not None and not math.isfinite(z0)
            if zero_like:  # the algorithm predicts 0 to rounding on the labels' scale (averaging at Λ = 1e-10): a model
                st = "undecided"  # within it may as well return zeros, never identified as an algorithm (34b F4)
            low_trunc = None
            if st == "undecided" and per_prompt is not None and 0 < tol < float("inf"):
                t = np.minimum(per_prompt[i][j], TRUNCATE_AT * tol)
                low_trunc = float(t.mean() - k * t.std(ddof=1) / math.sqrt(len(t)))
                if low_trunc > tol:
                    st = "fail"
            rows.append({"M": Ms[i], "distance": dv, "se": se, "tolerance": tol, "nearest_reference": nearest,
                         "truncated_lower_bound": low_trunc,
                         "nearest_reference_distance": r, "status": st, "zero_like": zero_like,
                         "ratio": float(dv / tol) if tol > 0 and math.isfinite(tol) else (0.0 if dv == 0 else float("inf"))})
        table[a] = rows
    passing = [a for a in A if all(r["status"] == "pass" for r in table[a])]
    ident = min(passing, key=lambda a: max(r["ratio"] for r in table[a])) if passing else None
    refuted = [a for a in A if any(r["status"] == "fail" for r in table[a])]
    undecided = [a for a in A if a not in passing and a not in refuted]
    need = {}
    for a in undecided:
        worst = 1.0 if not any(r["zero_like"] for r in table[a]) else float("inf")  # (no number of prompts decides)
        for r in table[a]:
            if r["status"] == "undecided" and r["se"] > 0:
                gap = abs(r["distance"] - r["tolerance"])
                worst = max(worst, (k * r["se"] / gap) ** 2 if gap > 0 else float("inf"))
        need[a] = worst * P if math.isfinite(worst) else None
    return {"identified": ident, "also_within_tolerance": [a for a in passing if a != ident],
            "refuted": refuted, "undecided": undecided, "prompts_needed": need, "table": table,
            "ratio": IDENTIFY_RATIO, "k": k, "precision_factor": PRECISION_FACTOR,
            "work_dtype": str(work).replace("torch.", "")}
