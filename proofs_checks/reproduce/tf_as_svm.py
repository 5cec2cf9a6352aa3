"""tf-as-svm: Tarzanagh, Li, Thrampoulidis, Oymak, "Transformers as Support Vector Machines" (2023),
the reference notebook ``local_converge.ipynb`` of umich-sota/TF-as-SVM, and the regularisation path.

Set-up (the notebook's): ``data_generator(seed)`` instances (n = 6, T = 8, d = 10, unit tokens and
queries, ``f = vᵀXᵀS(XWz)``, logistic loss), its initial weights (``nn.Linear`` draws from torch's
global generator seeded with ``--seed``), normalised GD at lr 0.1 for 2000 iterations, each of
K, Q normalised separately as ``g/(‖g‖ + eps)``; the Att-SVM is solved for the tokens each run
selects at the end. Four variants train as ONE batched tensor (seeds × variants):

* ``W``: the W-parameterisation (no ridge, as the notebook);
* ``KQ+ridge``: (K,Q) with the notebook's ridge ε(‖K‖²+‖Q‖²), ε = 2.2e-16 (its README: "a minor
  regularisation penalty ... the smallest representable number");
* ``KQ plain``: (K,Q) without it, same ε-guarded steps: the step ``g/(‖g‖+eps)`` shrinks to 0 once
  the softmax saturates in float64 (the run stalls);
* ``KQ exact``: (K,Q) without ridge, steps normalised exactly (this project's scaled gradient;
  plain normalised GD that never stalls).

The regularisation path: ``W_λ = argmin L + λ‖W‖²`` (and the (K,Q) analogue with ``λ(‖K‖²+‖Q‖²)``,
whose ``KQᵀ`` minimises the nuclear-norm-regularised loss) for λ from 1e-2 down to ε, by normalised
GD with decaying steps from the same initial weights; its direction should approach W^mm (W^mm_*).
"""

from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np

from proofs_checks.reproduce import ReproContext, ReproResult, bound_row, compare_row
from proofs_checks.reproduce import _tf_as_svm_reference as REF

EPS = float(np.finfo(np.float64).eps)
N, T, D = 6, 8, 10
#: published/reference numbers measured earlier on this machine with the reference code (100 seeds)
REF_RIDGE_MEAN, REF_RIDGE_STD = 0.9963, 0.0029
REF_PLAIN_MEAN = 0.818
REF_SECONDS = {"total": 250.8, "train": 230.5, "svm": 18.2, "rss_mb": 423}
SRC_BRIEF = "reference code umich-sota/TF-as-SVM run on this machine (100 seeds)"
SRC_RUN = ("reference code umich-sota/TF-as-SVM run on this machine, torch.manual_seed(0), the same seeds "
           "(per-seed output in proofs_checks/reproduce/_tf_as_svm_reference.py)")
VARIANTS = (  # name, w_param, ridge, eps_guard, autograd_like (the reference's gradient arithmetic)
    ("W", True, 0.0, True, True),
    ("KQ+ridge", False, EPS, True, True),
    ("KQ plain", False, 0.0, True, True),
    ("KQ exact", False, 0.0, False, False),
)


def _mse(x) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else math.inf


def _frac(flags) -> tuple[float, float]:
    a = np.asarray(flags, dtype=float)
    p = float(a.mean())
    return p, math.sqrt(max(p * (1 - p), 0.25 / len(a)) / len(a))  # floor: ≥ one count's worth


def _solve_chunk(args):
    from numerics.att_svm_direct import DirectAttSVM

    insts, keys = args
    solvers = {nm: DirectAttSVM(N, T, D, nm) for nm in {k[2] for k in keys}}
    out = {k: solvers[k[2]].solve(insts[k[0]].X, insts[k[0]].z, np.array(k[1])) for k in keys}
    return out, sum(s.fallbacks for s in solvers.values())


def solve_many(insts, keys, *, workers: int = 1) -> tuple[dict, int]:
    """Att-SVM solutions for ``keys`` = (instance index, selected tokens, norm), each certified
    (:class:`numerics.att_svm_direct.DirectAttSVM`: SciPy's NNLS for the Frobenius norm, Clarabel on
    the dual SDP for the nuclear norm), split over ``workers`` threads (each with its own solvers).
    Returns ({key: W}, number of fallbacks to the full solver chain)."""
    if workers <= 1 or len(keys) < 8:
        return _solve_chunk((insts, keys))
    from concurrent.futures import ThreadPoolExecutor

    chunks = [keys[i::workers] for i in range(workers)]  # keys sorted by norm: every worker gets both kinds
    with ThreadPoolExecutor(workers) as ex:
        parts = list(ex.map(_solve_chunk, [(insts, c) for c in chunks]))
    out: dict = {}
    for d_, _ in parts:
        out.update(d_)
    return out, sum(f for _, f in parts)


def _workers() -> int:
    import os

    try:
        return max(1, min(2, len(os.sched_getaffinity(0))))
    except AttributeError:  # pragma: no cover - not Linux
        return 1


def local_converge(seeds: int, iters: int, *, variants=VARIANTS[:2], base_seed: int = 0, device: str = "cpu",
                   lr: float = 0.1, snapshots: int = 50, workers: int | None = None) -> dict:
    """Train ``variants`` (default: the notebook's own two, W and (K,Q)+ridge) for ``seeds`` reference
    instances in ONE batch, solve the Att-SVMs (Frobenius and nuclear) for every run's selected
    tokens (each distinct (seed, tokens, norm) once, by :class:`numerics.att_svm_direct.DirectAttSVM`),
    and return per-variant arrays and timings."""
    from numerics import att_svm as ns

    workers = _workers() if workers is None else workers
    t0 = time.perf_counter()
    insts = [ns.reference_instance(s) for s in range(seeds)]
    ini = ns.reference_notebook_inits(seeds, D, seed=base_seed)
    V = len(variants)
    eye = np.broadcast_to(np.eye(D), (seeds, D, D))
    K0 = np.concatenate([ini["W"] if w else ini["K"] for _, w, *_r in variants])
    Q0 = np.concatenate([eye if w else ini["Q"] for _, w, *_r in variants])
    rep = lambda i: np.repeat([v[i] for v in variants], seeds)  # noqa: E731
    t_setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = ns.train_ngd_batch(insts * V, K0, Q0, iters=iters, lr=lr, ridge=rep(2).astype(float), w_param=rep(1).astype(bool),
                             eps_guard=rep(3).astype(bool), autograd_like=rep(4).astype(bool), snapshots=snapshots,
                             device=device)
    t_train = time.perf_counter() - t1
    t2 = time.perf_counter()
    keys = sorted({(s, tuple(int(t) for t in res.selected[j * seeds + s]), nm)
                   for j in range(V) for s in range(seeds) for nm in ("fro", "nuc")}, key=lambda k: (k[2], k[0], k[1]))
    cache, fallbacks = solve_many(insts, keys, workers=workers)
    out: dict = {"variants": {}}
    for j, (name, *_r) in enumerate(variants):
        sl = slice(j * seeds, (j + 1) * seeds)
        sel = res.selected[sl]
        tg = {nm: np.array([cache[(s, tuple(int(t) for t in sel[s]), nm)] for s in range(seeds)]) for nm in ("fro", "nuc")}
        W = res.W[sl]
        snaps = res.W_snap[:, sl]
        out["variants"][name] = {
            "W": W, "selected": sel, "local": np.array([bool(np.any(sel[s] != insts[s].opt)) for s in range(seeds)]),
            "corr_fro": ns.correlation(W, tg["fro"]), "corr_nuc": ns.correlation(W, tg["nuc"]),
            "curve_fro": ns.correlation(snaps, tg["fro"][None]), "curve_nuc": ns.correlation(snaps, tg["nuc"][None]),
            "max_mass": res.max_mass[:, sl], "step": res.step[:, sl],
            "kq_norm2": (res.K[sl] ** 2).sum((-1, -2)) + (res.Q[sl] ** 2).sum((-1, -2)),
        }
    t_svm = time.perf_counter() - t2
    out.update(snap_iters=res.snap_iters, insts=insts, ini=ini, solves=len(cache),
               solve_requests=2 * V * seeds, fallbacks=fallbacks, workers=workers,
               seconds={"setup": t_setup, "train": t_train, "svm": t_svm, "total": time.perf_counter() - t0})
    return out


def ridge_path(insts, ini, lams, iters: int, *, device: str = "cpu", decay_after: int = 500) -> dict:
    """The ridge path for W and (K,Q): for every λ and instance, normalised GD on ``L + λ(…)`` with
    steps ``0.1·min(1, k0/k)`` from the notebook's initial weights (all λ, seeds and both
    parameterisations in one batch); then the Att-SVM of the tokens selected at each λ."""
    from numerics import att_svm as ns

    S, Lm = len(insts), len(lams)
    eye = np.broadcast_to(np.eye(D), (S, D, D))
    K0 = np.concatenate([np.tile(ini["W"][:S], (Lm, 1, 1)), np.tile(ini["K"][:S], (Lm, 1, 1))])
    Q0 = np.concatenate([np.tile(eye, (Lm, 1, 1)), np.tile(ini["Q"][:S], (Lm, 1, 1))])
    lam = np.tile(np.repeat(np.asarray(lams, float), S), 2)
    wp = np.repeat([True, False], Lm * S)
    res = ns.train_ngd_batch(list(insts) * (2 * Lm), K0, Q0, iters=iters, lr=0.1, ridge=lam, w_param=wp, eps_guard=False,
                             decay_after=decay_after, snapshots=2, device=device)
    corr = np.empty((2, Lm, S))
    glob = np.empty((2, Lm, S), dtype=bool)

    def key(b):  # (instance, selected tokens, norm): at most one solve each (the λ often select the same tokens)
        p, rest = divmod(b, Lm * S)
        return rest % S, tuple(int(t) for t in res.selected[b]), "fro" if p == 0 else "nuc"

    keys = [key(b) for b in range(2 * Lm * S)]
    cache, _ = solve_many(list(insts), sorted(set(keys), key=lambda k: (k[2], k[0], k[1])), workers=_workers())
    for b, k in enumerate(keys):
        p, rest = divmod(b, Lm * S)
        li, s = divmod(rest, S)
        corr[p, li, s] = float(ns.correlation(res.W[b], cache[k]))
        glob[p, li, s] = bool(np.all(res.selected[b] == insts[s].opt))
    return {"lams": np.asarray(lams, float), "corr": corr, "global": glob,
            "norm": np.linalg.norm(res.W, axis=(-2, -1)).reshape(2, Lm, S)}


#: what the paper and its reference code state, beside what this reproduction measures
STATED = [
    ("paper", "Normalised GD on W converges in direction to the Att-SVM solution W^mm (Frobenius norm) of the tokens it "
              "selects (locally optimal ones included); on (K,Q) to the nuclear-norm solution W^mm_*; the "
              "regularisation path converges to W^mm (W^mm_*) in direction. The figure shows the correlation "
              "coefficient rising to ≈ 1 for both parameterisations."),
    ("reference code", "local_converge.ipynb: n=6, T=8, d=10, 100 seeds, 2000 NGD iterations at lr 0.1; its (K,Q) loss "
                       "adds ε(‖K‖²+‖Q‖²), ε ≈ 2.2e-16 (README: a minor regularisation so that the norms stay bounded "
                       "when the gradient is treated as zero)."),
    ("measured earlier on this machine", "(K,Q)+ridge ↔ W^mm_*: 0.9963 ± 0.0029; the same code without the ridge: 0.818; "
                                         "250.8 s, 423 MB."),
]


def _path_rows(rp: dict, ref, seeds: int, path_seeds: int) -> list:
    """The rows of the ridge (regularisation) path: 1 − corr falls as λ → 0 for W and for (K,Q), and (K,Q)'s
    minimiser at λ = ε against the reference's ridge run."""
    rows = []
    corr, lam_arr = rp["corr"], rp["lams"]
    one_minus = 1 - corr
    iw = len(lam_arr) - 1
    d_w = one_minus[0, iw] - one_minus[0, 0]
    rows.append(bound_row(f"ridge path, W: change of 1 − corr(W_λ, W^mm) from λ = {lam_arr[0]:.0e} to λ = ε "
                          "(mean over seeds)", *_mse(d_w), 0.0,
                          "Tarzanagh et al. (regularisation path): W_λ/‖W_λ‖ → W^mm/‖W^mm‖ as λ → 0, so 1 − corr decreases",
                          note=f"mean 1 − corr {one_minus[0, 0].mean():.3g} → {one_minus[0, iw].mean():.3g}"))
    d_kq = one_minus[1, iw] - one_minus[1, 0]
    rows.append(bound_row(f"ridge path, (K,Q): change of 1 − corr(K Qᵀ, W^mm_*) from λ = {lam_arr[0]:.0e} to λ = ε",
                          *_mse(d_kq), 0.0,
                          "Tarzanagh et al.: the (K,Q) path converges in direction to the nuclear-norm SVM W^mm_*",
                          note=f"mean 1 − corr {one_minus[1, 0].mean():.3g} → {one_minus[1, iw].mean():.3g}"))
    m_eps, se_eps = _mse(corr[1, iw])
    rows.append(compare_row("ridge path, (K,Q): corr(K Qᵀ, W^mm_*) of the minimiser at λ = ε", m_eps, se_eps,
                            *ref(REF.KQ_CORR_NUC[:path_seeds]) if path_seeds <= seeds else ref(REF.KQ_CORR_NUC),
                            SRC_RUN.split(" (per-seed")[0] + " — its ridge run, first seeds",
                            note="the reference's ridge run sits near this point of the path"))
    return rows


def run(ctx: ReproContext) -> ReproResult:
    seeds = int(ctx.pick("seeds", 20, 100, 100))
    iters = int(ctx.pick("iters", 2000, 2000, 2000))
    path_seeds = int(ctx.pick("path_seeds", 6, 20, 50))
    path_iters = int(ctx.pick("path_iters", 2000, 6000, 12000))
    lams = list(ctx.pick("path_lambdas", [1e-2, 1e-6, EPS], [1e-2, 1e-3, 1e-5, 1e-7, 1e-9, 1e-11, 1e-13, EPS],
                         [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, EPS]))
    if seeds > 100:
        seeds = 100  # the reference output covers the notebook's 100 seeds
    tracemalloc.start()
    lc = local_converge(seeds, iters, base_seed=ctx.seed, device=ctx.device)  # the notebook's workload, timed
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    extra = local_converge(seeds, iters, variants=VARIANTS[2:], base_seed=ctx.seed, device=ctx.device)
    lc["variants"].update(extra["variants"])
    tp = time.perf_counter()
    rp = ridge_path(lc["insts"][:path_seeds], lc["ini"], lams, path_iters, device=ctx.device)
    t_path = time.perf_counter() - tp
    v = lc["variants"]
    sub = slice(0, seeds)
    ref = lambda a: _mse(np.asarray(a)[sub])  # noqa: E731
    same_init = ctx.seed == 0
    src_run = SRC_RUN if same_init else SRC_RUN.replace("the same seeds", "the same data seeds (its initial weights "
                                                          "come from seed 0, ours from --seed)")
    rows = []
    m, se = _mse(v["KQ+ridge"]["corr_nuc"])
    rows.append(compare_row("(K,Q) with the reference's ridge ε(‖K‖²+‖Q‖²): mean corr(W, W^mm_*)", m, se,
                            REF_RIDGE_MEAN, REF_RIDGE_STD / math.sqrt(100), SRC_BRIEF + ": 0.9963 ± 0.0029 (mean ± std)",
                            note="a point on the ridge path at λ = ε (not plain GD)"))
    rows.append(compare_row("(K,Q) with the ridge: mean corr(W, W^mm_*), same seeds", m, se, *ref(REF.KQ_CORR_NUC), src_run))
    rows.append(compare_row("(K,Q) with the ridge: mean corr(W, W^mm) (Frobenius)", *_mse(v["KQ+ridge"]["corr_fro"]),
                            *ref(REF.KQ_CORR_FRO), src_run, note="(K,Q) runs align with the nuclear-norm SVM, not the Frobenius one"))
    mp, sep = _mse(v["KQ plain"]["corr_nuc"])
    rows.append(compare_row("(K,Q) without the ridge, ε-guarded steps (stalls): mean corr(W, W^mm_*)", mp, sep,
                            *ref(REF.KQ_PLAIN_CORR_NUC), src_run + "; earlier run on this machine: 0.818",
                            note="after the stall (~iteration 160) the steps are rounding noise of the softmax backward; the "
                                 "number is where that noise leaves the direction, reproduced in distribution, not per seed"))
    rows.append(compare_row("W-parameterisation: mean corr(W, W^mm) (Frobenius)", *_mse(v["W"]["corr_fro"]),
                            *ref(REF.W_CORR_FRO), src_run))
    rows.append(compare_row("W-parameterisation: mean corr(W, W^mm_*) (nuclear)", *_mse(v["W"]["corr_nuc"]),
                            *ref(REF.W_CORR_NUC), src_run, note="W runs align with the Frobenius SVM, not the nuclear one"))
    best = [np.array(b) for b in REF.BEST_IDS[:seeds]]
    for name, ids in (("W", REF.W_IDS), ("KQ+ridge", REF.KQ_IDS)):
        rf = [bool(np.any(np.array(i) != b)) for i, b in zip(ids[:seeds], best)]
        rows.append(compare_row(f"{name}: fraction of runs ending at a locally optimal (not top-score) token set",
                                *_frac(v[name]["local"]), *_frac(rf), src_run,
                                note="binomial standard errors"))
    rows += _path_rows(rp, ref, seeds, path_seeds)
    corr, lam_arr = rp["corr"], rp["lams"]
    # facts
    sec = lc["seconds"]
    st = v["KQ plain"]["step"]
    full = st >= 0.5
    stall = np.where(~full.all(0), np.argmin(full, 0) + 1, iters + 1)  # first step shorter than half of lr
    wn = np.linalg.norm(lc["variants"]["KQ plain"]["W"], axis=(-2, -1))
    fw = v["W"]["step"] >= 0.5
    stall_w = np.where(~fw.all(0), np.argmin(fw, 0) + 1, iters + 1)
    st_r = v["KQ+ridge"]["step"]
    facts = [
        ("time (ours, this run)", f"the notebook's workload (W and (K,Q)+ridge, {seeds} seeds × {iters} iterations, Att-SVMs "
                                  f"in both norms for every run): {sec['total']:.2f} s (training {sec['train']:.2f} s in one "
                                  f"batch of {2 * seeds}; {lc['solves']} distinct Att-SVM solves for {lc['solve_requests']} "
                                  f"requests {sec['svm']:.2f} s, {lc['fallbacks']} fell back to the full solver chain); "
                                  f"peak traced memory {peak_mb:.0f} MB; device {ctx.device}. The two extra (K,Q) variants "
                                  f"{extra['seconds']['total']:.2f} s; ridge path {t_path:.2f} s"),
        ("time (reference code)", f"{REF_SECONDS['total']} s on this machine (training {REF_SECONDS['train']} s, 400 cvxpy solves "
                                  f"{REF_SECONDS['svm']} s), {REF_SECONDS['rss_mb']} MB; rerun for the per-seed numbers: "
                                  f"{REF.RIDGE_SECONDS['total']} s (training {REF.RIDGE_SECONDS['train']} s, solves "
                                  f"{REF.RIDGE_SECONDS['svm']} s), the W and (K,Q)+ridge runs only"),
        ("speed-up", f"{REF_SECONDS['total'] / sec['total']:.0f}× against 250.8 s, {REF.RIDGE_SECONDS['total'] / sec['total']:.0f}× "
                     f"against the rerun" + ("" if seeds == 100 else f" (ours at {seeds} seeds; the reference ran 100)")
                     + "; the machine is shared with other jobs, so both timings carry load noise"),
        ("stall without the ridge", f"(K,Q) plain runs: the ε-guarded step g/(‖g‖+ε) first falls below half of lr at "
                                    f"iteration {int(np.median(stall))} (median; quartiles {int(np.percentile(stall, 25))}–"
                                    f"{int(np.percentile(stall, 75))}): the loss gradient has reached ~ε (softmax saturated in "
                                    "float64); from there the steps are rounding noise of the softmax backward (median "
                                    f"{np.median(st[-200:]):.2f}·lr over the last 200), ‖W‖ stops growing (final median "
                                    f"{np.median(wn):.0f}); the reference code: stalls after 150–200 steps. The W runs "
                                    f"(also ε-guarded, no ridge) reach that point later: median iteration "
                                    f"{int(np.median(stall_w))} ({int((stall_w <= iters).sum())}/{seeds} before {iters})"),
        ("what the ridge does", f"with ε(‖K‖²+‖Q‖²) the gradient never vanishes: once the loss gradient drops to ~ε‖K‖, "
                                f"the ridge term balances it and the normalised steps hover around the minimiser of the "
                                f"regularised loss at λ = ε (median step {np.median(st_r[-1]):.2f}·lr at the end; final "
                                f"‖K‖²+‖Q‖² median {np.median(v['KQ+ridge']['kq_norm2']):.0f}). Its correlation is that of a point "
                                "on the regularisation path, which approaches W^mm_* as λ → 0: not the plain-GD limit"),
        ("(K,Q) exact normalised GD (no ridge, never stalls)",
         "mean corr(W, W^mm_*) {:.4f} ± {:.4f}; fraction at a local set {:.2f}".format(*_mse(v["KQ exact"]["corr_nuc"]),
                                                                                       v["KQ exact"]["local"].mean())),
    ]
    if same_init:
        for name, ids in (("W", REF.W_IDS), ("KQ+ridge", REF.KQ_IDS), ("KQ plain", REF.KQ_PLAIN_IDS)):
            same = sum(bool(np.array_equal(v[name]["selected"][s], np.array(ids[s]))) for s in range(seeds))
            facts.append((f"same selected tokens as the reference run ({name})", f"{same}/{seeds} seeds"))
    facts.append(("ridge path (mean over seeds)", "; ".join(
        f"λ={lam:.0e}: W {corr[0, li].mean():.4f} (top set {int(rp['global'][0, li].sum())}/{path_seeds}), "
        f"(K,Q) {corr[1, li].mean():.4f}" for li, lam in enumerate(lam_arr))))
    if ctx.want_figures:
        _figures(ctx, lc, rp, iters)
    return ReproResult(rows=rows, stated=STATED, facts=facts, seeds=list(range(seeds)))


def _figures(ctx: ReproContext, lc: dict, rp: dict, iters: int) -> None:
    from proofs_checks.context import pyplot

    plt = pyplot()
    v, it = lc["variants"], lc["snap_iters"]
    colors = {"W": "tab:blue", "KQ+ridge": "tab:red", "KQ plain": "tab:orange", "KQ exact": "tab:green"}
    fig, axs = plt.subplots(1, 3, figsize=(15, 3.8))
    for name, c in colors.items():
        mm = v[name]["max_mass"]
        axs[0].plot(np.arange(1, iters + 1), mm.mean(1), color=c, label=name)
        key = "curve_fro" if name == "W" else "curve_nuc"
        cv = v[name][key]
        axs[1].plot(it, cv.mean(1), color=c, label=f"{name} ↔ {'W^mm' if name == 'W' else 'W^mm_*'}")
        axs[1].fill_between(it, cv.mean(1) - cv.std(1), cv.mean(1) + cv.std(1), color=c, alpha=0.12, linewidth=0)
        axs[2].semilogy(np.arange(1, iters + 1), np.maximum(np.median(v[name]["step"], 1), 1e-18), color=c, label=name)
    axs[0].set(xlabel="iteration", ylabel="mean max softmax probability", title="softmax saturation (notebook's 1st plot)")
    axs[1].set(xlabel="iteration", ylabel="correlation coefficient", ylim=(0, 1.05), title="correlation with the Att-SVM")
    axs[2].set(xlabel="iteration", ylabel="step taken / lr (median)", title="ε-guarded steps: the stall")
    for a in axs:
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    ctx.save_figure(fig, "local_converge")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for p, (lab, c) in enumerate((("W ↔ W^mm", "tab:blue"), ("KQᵀ ↔ W^mm_*", "tab:red"))):
        y = 1 - rp["corr"][p]
        ax.loglog(rp["lams"], np.maximum(y.mean(1), 1e-12), "o-", color=c, label=lab)
    ax.invert_xaxis()
    ax.set(xlabel="ridge λ (→ 0)", ylabel="1 − correlation (mean)", title="regularisation path")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ctx.save_figure(fig, "ridge_path")
