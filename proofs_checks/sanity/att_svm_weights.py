"""``tverify check att-svm --weights FILE``: your trained attention ``W`` (or ``K``, ``Q``) against the
Att-SVM (see :mod:`proofs_checks.sanity.att_svm`). Stages: the weights read (:func:`load_weights`), the
evidence (:func:`weights_evidence`: selected tokens, their softmax mass and saturation, the correlations
with the Att-SVM solutions), the verdict (:func:`weights_verdict`), the rendering (:func:`weights_result`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from proofs_checks.parsing import load_npz
from proofs_checks.sanity._common import SanityResult
from proofs_checks.sanity._verdict import Verdict
from theory.validation import InputError

__all__ = ["load_weights", "saturation", "SATURATION_ADVICE", "weights_evidence", "weights_verdict", "weights_result",
           "WeightsEvidence"]


def load_weights(path: str, d: int, max_memory: float | None = None) -> tuple[np.ndarray, str]:
    """``W`` ``(d, d)`` from a ``.npz`` or ``.pt`` file holding ``W``, or ``K`` and ``Q`` (``(d, m)`` each;
    ``W = K Qᵀ``, logits ``x_tᵀ W z``). Returns ``(W, "W" | "KQ")``; one-line errors naming ``--weights``.
    Shapes are checked from the headers before anything is decompressed (a ``.npz`` member's
    ``.npy`` header, a ``.pt`` tensor's memory-mapped metadata); two keys with the same last name
    (``a.W``, ``b.W``) are refused, never resolved; an all-zero ``W`` (no direction) is refused."""
    from proofs_checks import parsing

    p = path
    pp = parsing.input_file(p, "--weights")

    def short_names(names):
        by: dict[str, list[str]] = {}
        for k in names:
            by.setdefault(str(k).split(".")[-1], []).append(str(k))
        for short, full in by.items():
            if short in ("W", "K", "Q") and len(full) > 1:
                raise InputError(f"--weights: {p} holds {short} under {len(full)} keys ({', '.join(full)}); keep one "
                                 "(which one you meant cannot be guessed)")
        return {short: full[0] for short, full in by.items()}

    def check_shapes(shapes: dict[str, tuple]):
        if "W" in shapes and ("K" in shapes or "Q" in shapes):
            raise InputError("--weights: the file holds W and K/Q: which one is your attention is ambiguous; keep "
                             "either W or K and Q")
        if "W" in shapes:
            if tuple(shapes["W"]) != (d, d):
                raise InputError(f"--weights: W must be ({d}, {d}) for the data's d = {d}, got {tuple(shapes['W'])}")
        elif "K" in shapes and "Q" in shapes:
            K, Q = tuple(shapes["K"]), tuple(shapes["Q"])
            if len(K) != 2 or len(Q) != 2 or K[0] != d or Q[0] != d or K[1] != Q[1]:
                raise InputError(f"--weights: K and Q must be (d, m) with d = {d} from the data and the same m, got K "
                                 f"{K}, Q {Q}")

    if pp.suffix == ".npz":
        def expect(headers):
            names = short_names(headers)
            check_shapes({s_: headers[f][0] for s_, f in names.items()})

        data = load_npz(pp, "--weights", max_memory=max_memory, expect=expect)
        data = {str(k).split(".")[-1]: v for k, v in data.items()}
        found = list(data)
    elif pp.suffix in (".pt", ".pth"):
        obj = parsing.load_torch_file(pp, "--weights", max_memory)
        if hasattr(obj, "shape") and not isinstance(obj, dict):
            obj = {"W": obj}
        if not (isinstance(obj, dict) or hasattr(obj, "state_dict")):
            raise InputError(f"--weights: {p} must hold W, or K and Q (a dict of tensors)")
        flat = parsing.named_arrays(obj, "--weights", p)
        names = short_names(flat)
        check_shapes({s_: tuple(flat[f].shape) for s_, f in names.items() if hasattr(flat[f], "shape")})
        found = list(flat)
        data = {s_: parsing.tensor_to_numpy(flat[f], "--weights", f"{f!r} in {p}") if hasattr(flat[f], "detach")
                else np.asarray(flat[f]) for s_, f in names.items() if s_ in ("W", "K", "Q")}
    else:
        raise InputError(f"--weights: must be a .npz or .pt file, got {p}")
    return weights_from(data, d, "--weights", f"{p} has", found)


def weights_from(data: dict, d: int, option: str = "--weights", holder: str = "the weights have",
                 found: list | None = None) -> tuple[np.ndarray, str]:
    """``(W, "W" | "KQ")`` from ``data`` (names → arrays or tensors: ``W``, or ``K`` and ``Q``), with the rules and one
    line of the command's ``--weights`` (``option`` names the flag or the keyword): both ``W`` and ``K``/``Q`` are
    ambiguous; each array a finite real one (complex, text, meta and sparse tensors refused); the shapes ``(d, d)``
    and ``(d, m)``; no all-zero ``W``. The file (:func:`load_weights`) and the API's ``weights=`` share it."""
    from proofs_checks.parsing import as_numeric_array

    if "W" in data and ("K" in data or "Q" in data):
        raise InputError(f"{option}: {holder} W and K/Q: which one is your attention is ambiguous; keep either W or K "
                         "and Q")
    if "W" in data:
        W = as_numeric_array(data["W"], option, "W")
        if W.shape != (d, d):
            raise InputError(f"{option}: W must be ({d}, {d}) for the data's d = {d}, got {W.shape}")
        if not np.any(W):
            raise InputError(f"{option}: W is all zeros, which has no direction to compare with the Att-SVM")
        return W, "W"
    if "K" in data and "Q" in data:
        K = as_numeric_array(data["K"], option, "K")
        Q = as_numeric_array(data["Q"], option, "Q")
        if K.ndim != 2 or Q.ndim != 2 or K.shape[0] != d or Q.shape[0] != d or K.shape[1] != Q.shape[1]:
            raise InputError(f"{option}: K and Q must be (d, m) with d = {d} from the data and the same m, got K "
                             f"{K.shape}, Q {Q.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            W = K @ Q.T
        if not np.all(np.isfinite(W)):
            raise InputError(f"{option}: K Qᵀ overflows float64; rescale K and Q")
        if not np.any(W):
            raise InputError(f"{option}: K Qᵀ is all zeros, which has no direction to compare with the Att-SVM")
        return W, "KQ"
    names = ", ".join(map(str, data if found is None else found)) or "none"
    raise InputError(f"{option}: {holder} no W and no K, Q (found {names})")


#: What to do when the softmax of a trained W is saturated (issue 24): more steps cannot help.
SATURATION_ADVICE = ("train with normalised GD using the stable direction (numerics.att_svm.loss_and_scaled_grad: "
                     "log-softmax with the gradient rescaled by its largest tail term, exact however saturated), or "
                     "stop at a smaller logit scale (the direction W/‖W‖ is what converges; a smaller ‖W‖ or step keeps "
                     "the softmax tail above rounding), and compute in float64")


def saturation(logits: np.ndarray, sel: np.ndarray) -> dict:
    """How close the softmax of ``logits (n, T)`` is to one-hot on ``sel``: the log of the largest
    tail mass ``1 − S_sel`` (log-sum-exp of the other logits minus that of all, no underflow), and
    whether it is below the unit roundoff of float64 (``S_sel`` rounds to 1: within rounding of
    one-hot) and of float32, and below float64's smallest normal number (the tail terms, and with
    them a standard gradient, underflow).

    >>> saturation(np.array([[0.0, 50.0]]), np.array([1]))["saturated_float64"]
    True
    >>> saturation(np.array([[0.0, 5.0]]), np.array([1]))["saturated_float64"]
    False
    """
    import torch

    L = torch.as_tensor(np.asarray(logits, dtype=np.float64))
    n = L.shape[0]
    other = L.clone()
    other[torch.arange(n), torch.as_tensor(sel)] = -float("inf")
    log_tail = (torch.logsumexp(other, -1) - torch.logsumexp(L, -1)).numpy()  # log(1 − S_sel) per sequence
    worst = float(log_tail.max())
    u64, u32 = float(np.finfo(np.float64).eps) / 2, float(np.finfo(np.float32).eps) / 2
    tiny = float(np.finfo(np.float64).tiny)
    s64 = bool(worst < math.log(u64))
    s32 = bool(worst < math.log(u32))
    under = bool(worst < math.log(tiny))
    n64 = int((log_tail < math.log(u64)).sum())
    text = (f"softmax saturation: largest tail mass 1 − S_selected = e^{worst:.4g} = {math.exp(worst):.3g} "
            f"(float64 unit roundoff {u64:.3g}, float32 {u32:.3g}); "
            + (f"within float64 rounding of one-hot in {n64}/{n} sequences" if s64 else
               "saturated in float32 only" if s32 else "not saturated")
            + ("; the tail terms underflow float64 (< 2.2e-308): a standard gradient is exactly zero" if under else ""))
    return {"log_tail_max": worst, "log_tail": log_tail.tolist(), "saturated_float64": s64, "saturated_float32": s32,
            "gradient_underflows": under, "sequences_saturated_float64": n64, "text": text}


@dataclass
class WeightsEvidence:
    """What your ``W`` is compared with: the tokens it selects and their softmax mass, the saturation of its
    softmax, the Att-SVM solutions, the property rows and the numbers (``info``)."""
    sel: np.ndarray
    mass: np.ndarray
    sat: dict
    is_opt: bool
    fro: object
    nuc: object
    local_ok: bool | None
    props: list
    info: dict


def _weights_logits(inst, W: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """``(W, max|W|, logits x_tᵀ W z)``; a non-finite, all-zero or overflowing ``W`` is one line."""
    W = np.asarray(W, dtype=np.float64)
    top = float(np.abs(W).max()) if W.size else 0.0
    if not (np.all(np.isfinite(W)) and top > 0):
        raise InputError("--weights: W must be finite and not all zero (its direction is compared with the Att-SVM)")
    with np.errstate(over="ignore", invalid="ignore"):
        logits = np.einsum("ntd,de,ne->nt", inst.X, W, inst.z)
    if not np.all(np.isfinite(logits)):
        raise InputError(f"--weights: the logits x_tᵀ W z overflow float64 (max |W| = {top:.3g}); only W's direction is "
                         "compared with the Att-SVM: rescale W (e.g. W / max|W|)")
    return W, top, logits


def weights_evidence(inst, W: np.ndarray, *, form: str, level: float) -> WeightsEvidence:
    """The correlations of ``W``'s direction with the Att-SVM solutions (the rows; the one the theory
    predicts for this parameterisation and selection is judged, the others reported)."""
    import torch

    from numerics import att_svm as ns

    X, z = inst.X, inst.z
    W, top, logits = _weights_logits(inst, W)
    # the correlations are taken on W / max|W| (the direction, free of under/overflow: a W of subnormal entries
    # had ‖W‖ = 0 and correlation inf, "aligned"); the logits and the saturation on W itself
    Wd = W / top
    sel = logits.argmax(1)
    mass = torch.softmax(torch.as_tensor(logits), -1).numpy()[np.arange(len(sel)), sel]
    sat = saturation(logits, sel)
    is_opt = bool(np.all(sel == inst.opt))
    props, info = [], {"selected_tokens": sel.tolist(), "optimal_tokens": inst.opt.tolist(), "selected_is_optimal": is_opt,
                       "softmax_mass_on_selected": mass.tolist(), "norm_W": top * float(np.linalg.norm(Wd)), "form": form}
    tol = 1 - level
    just = f"1 − --level = {tol:.3g}: correlation that counts as converged in direction"

    def row(name, target, relevant):
        c = float(ns.correlation(Wd, target))
        info[name] = c
        props.append({"name": name, "status": ("pass" if 1 - c <= tol else "fail") if relevant else "info",
                      "error": 1 - c, "tolerance": tol if relevant else None, "justification": just if relevant else "",
                      "detail": f"corr = {c:.6f}" + ("" if relevant else " (reported; not the limit the theory predicts "
                                                                         "for this parameterisation/selection)")})

    fro = ns.solve_att_svm(X, z, inst.opt, "fro")
    try:
        nuc = ns.solve_att_svm(X, z, inst.opt, "nuc")
    except ns.SolverFailure:
        nuc = None
    row("corr_with_W_mm_fro", fro.W, is_opt and form == "W")
    if nuc is not None:
        row("corr_with_W_mm_nuc", nuc.W, is_opt and form == "KQ")
    local_ok = None
    if not is_opt:
        try:
            loc = ns.solve_att_svm(X, z, sel, "fro" if form == "W" else "nuc")
            row("corr_with_local_att_svm", loc.W, True)
            local_ok = bool(ns.is_locally_optimal(inst, sel))
            info["selected_locally_optimal"] = local_ok
        except (InputError, ns.SolverFailure) as exc:
            props.append({"name": "corr_with_local_att_svm", "status": "skip", "error": None, "tolerance": None,
                          "justification": "", "detail": f"no Att-SVM for the selected tokens: {exc}"})
    return WeightsEvidence(sel, mass, sat, is_opt, fro, nuc, local_ok, props, info)


def weights_verdict(ev: WeightsEvidence, *, form: str, level: float) -> Verdict:
    """``ok`` when the judged correlation reaches ``level``; below, ``inconclusive`` (train longer), or,
    with a saturated softmax, ``inconclusive`` with :data:`SATURATION_ADVICE`."""
    props, info, sat, mass = ev.props, ev.info, ev.sat, ev.mass
    failed = [p["name"] for p in props if p["status"] == "fail"]
    rel = [p for p in props if p["status"] in ("pass", "fail")]
    crit = "; ".join(f"{p['name']} = {1 - p['error']:.6f}" for p in rel) + f" against level {level:g}"
    if not rel:
        return Verdict("inconclusive", "no Att-SVM direction to compare with", crit or "none computable", info,
                       ["the selected tokens' Att-SVM could not be solved"], "check the data for duplicated tokens")
    if failed and sat["saturated_float64"]:
        return Verdict("inconclusive", f"your W is not aligned with the Att-SVM direction ({', '.join(failed)}), and its "
                                       "softmax is saturated: training longer cannot fix it", crit, info,
                       [sat["text"], f"correlation below {level:g} with a float64 softmax within rounding of one-hot: the "
                                     "gradient a standard implementation computes is "
                                     + ("exactly zero (underflow)" if sat["gradient_underflows"] else
                                        "below rounding, so its direction is noise")
                                     + "; further steps move W along rounding error, and the correlation can only drift"],
                       SATURATION_ADVICE)
    if failed:
        return Verdict("inconclusive", f"your W is not (yet) aligned with the Att-SVM direction ({', '.join(failed)})",
                       crit, info, [f"correlation below {level:g}: the direction converges only as ‖W‖ → ∞ (‖W‖ = "
                                    f"{info['norm_W']:.3g}, softmax mass on the selected tokens ≥ {mass.min():.3g})"]
                       + ([sat["text"]] if sat["saturated_float32"] else []),
                       "train longer (larger ‖W‖), or compare with the other Att-SVM if your parameterisation differs"
                       + ("; if you train in float32, its softmax is already saturated: train in float64 or with the "
                          "stable direction (numerics.att_svm.loss_and_scaled_grad)" if sat["saturated_float32"] else ""))
    if not ev.is_opt and not ev.local_ok:
        return Verdict("inconclusive", "aligned with the Att-SVM of tokens that are not locally optimal", crit, info,
                       ["the selected set is not locally optimal: the selection may still change"], "train longer")
    return Verdict("ok", "your W is aligned with " + ("W^mm" if ev.is_opt and form == "W" else "W^mm_*" if ev.is_opt else
                                                        "the Att-SVM of its (locally optimal) selected tokens"), crit, info)


def weights_result(inst, W: np.ndarray, *, form: str, level: float) -> SanityResult:
    """Your trained ``W`` against the Att-SVM: the tokens it selects (argmax of ``X W z`` per
    sequence), their softmax mass, ``corr(W, W^mm)`` (Frobenius) and ``corr(W, W^mm_*)`` (nuclear),
    whether the selected tokens are the globally optimal ones, and, when not, the Att-SVM of the
    selected tokens (and whether they are locally optimal). The correlation the theory predicts
    → 1 is with ``W^mm`` for a ``W`` trained directly, with ``W^mm_*`` for a ``(K, Q)``
    factorisation (Tarzanagh et al. 2023), with the selected tokens' Att-SVM when they are a locally
    optimal set other than the optimal one. ``ok`` when it is ≥ ``level``; below, ``inconclusive``
    (the direction converges only as ‖W‖ → ∞: train longer), unless the softmax is saturated (its
    tail below float64 rounding, :func:`saturation`): then more training cannot turn the direction,
    and the advice is :data:`SATURATION_ADVICE`. Stages: :func:`weights_evidence`,
    :func:`weights_verdict`, the rendering."""
    import numerics.att_svm as ns

    try:
        ev = weights_evidence(inst, W, form=form, level=level)
    except ns.SolverFailure as exc:  # as the training path says it (a traceback before: hostile pass 21b F6)
        v = Verdict("inconclusive", "the Att-SVM could not be solved and certified", f"solver: {exc}", {},
                    [f"Att-SVM not certified: {exc}"], "rescale the data or remove nearly duplicated tokens")
        return SanityResult("att-svm", {"check": "att-svm", "weights": {"error": str(exc)}}, v,
                            lines=[f"Att-SVM (Frobenius): solver failed: {exc}"])
    v = weights_verdict(ev, form=form, level=level)
    info, sel, mass, sat = ev.info, ev.sel, ev.mass, ev.sat
    lines = [f"your weights ({'W' if form == 'W' else 'W = K Qᵀ'}, ‖W‖_F = {info['norm_W']:.4g}) select tokens "
             f"{sel.tolist()} ({'the optimal ones' if ev.is_opt else 'optimal: ' + str(inst.opt.tolist())}); softmax "
             f"mass on them: min {mass.min():.4f}",
             f"Att-SVM: ‖W^mm‖_F = {ev.fro.value:.6g}" + (f", ‖W^mm_*‖_* = {ev.nuc.value:.6g}" if ev.nuc is not None else
                                                           ", nuclear-norm Att-SVM not certified")]
    if ev.local_ok is not None:
        lines.append(f"selected tokens locally optimal: {ev.local_ok}")
    lines.append(sat["text"])
    info["saturation"] = {k: v_ for k, v_ in sat.items() if k != "text"}
    doc = {"check": "att-svm", "weights": info}
    corrs = {p["name"]: 1 - p["error"] for p in ev.props if p.get("error") is not None}
    return SanityResult("att-svm", doc, v, ev.props, lines,
                        {"weights_saturation": lambda: _weights_figure(corrs, np.asarray(sat["log_tail"], dtype=float),
                                                                       level)})


def _weights_figure(corrs: dict, log_tail: np.ndarray, level: float):
    """No iterations to plot for given weights: the correlations against --level, and the softmax
    tail mass per sequence against float64's and float32's unit roundoff (saturation)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    names = list(corrs)
    ax[0].bar(range(len(names)), [corrs[k] for k in names], color="#7aa6c2")
    ax[0].axhline(level, color="k", ls="--", lw=0.8, label=f"--level {level:g}")
    ax[0].set_xticks(range(len(names)), [k.replace("corr_with_", "") for k in names], fontsize=7)
    ax[0].set_ylim(min(0.0, min(corrs.values(), default=0.0)), 1.02)
    ax[0].set_title("correlation of your W with the Att-SVM direction", fontsize=8)
    ax[0].legend(fontsize=7)
    ax[1].bar(range(len(log_tail)), log_tail / math.log(10), color="#c9a0a0")
    for dt, ls_ in ((np.float64, "--"), (np.float32, ":")):
        ax[1].axhline(math.log10(float(np.finfo(dt).eps) / 2), color="k", ls=ls_, lw=0.8,
                      label=f"{np.dtype(dt).name} unit roundoff")
    ax[1].set_xlabel("sequence")
    ax[1].set_ylabel("log10 (1 − S_selected)")
    ax[1].set_title("softmax tail mass (below the dashed line: saturated in float64)", fontsize=8)
    ax[1].legend(fontsize=7)
    return fig
