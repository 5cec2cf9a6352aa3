"""``tverify check hopfield --patterns FILE``: your stored patterns under the modern Hopfield update
(Ramsauer et al. 2021), or under your own update (``--module FILE.py:NAME``).

The patterns file is a ``.npy`` or a ``.pt`` (torch.save) holding one ``(N, d)`` array: the stored
patterns as rows (``N ≥ 2``), real and finite. The update ``f`` is ``ξ ↦ X softmax(β Xᵀξ)``
(:func:`numerics.hopfield.modern_update`; rows in, rows out) unless ``--module`` names yours: a
function or module called as ``f(xi, patterns, beta)`` when it takes three arguments, else as
``f(xi)``, with ``xi`` of shape ``(S, d)`` float64, returning ``(S, d)`` (a class is instantiated
with no arguments).

Reported per pattern: the separation ``Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j``, the one-step error
``‖f(ξ) − x_i‖`` from ``ξ = x_i`` and from a start at distance ``ε_i`` next to the Theorem-5 bound
``2(N−1) exp(−β(Δ_i − 2 max{ε_i, ‖x_i* − x_i‖} M)) M`` (:func:`numerics.hopfield.retrieval_bound`;
its derivation is :func:`theory.hopfield.derive_retrieval_bound`), the fixed point reached from
``x_i``, and a capacity estimate: the number of patterns at this separation, β and M for which the
theorem still guarantees one-step retrieval within half the distance to the nearest other pattern,
and the β that would guarantee it for every pattern.

Properties (pass/fail, each with its tolerance): ``precision_as_declared`` and ``update_matches_modern``
(``--module`` only; the update is judged at ``--compute-dtype``, else the inputs' float64, and one found
computing below it fails ``precision_as_declared``: :mod:`numerics.precision`),
``finite_updates``, ``one_step_within_theorem5_bound``, ``energy_non_increasing`` (the energy
:func:`numerics.hopfield.modern_energy` along 20 updates from the patterns, noisy starts and random
mixtures). Exit 0 all hold, 1 one fails, 3 inconclusive when the patterns decide nothing (duplicate
patterns, no pattern separated, or every Theorem-5 bound vacuous at this β: the verdict names which
and what would decide), 2 bad input (one line: an empty, non-finite or
wrongly-shaped pattern file, an update that raises or returns the wrong shape at any call, not only
the first). The update may return a torch tensor or a NumPy array, in any real floating dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import click
import numpy as np

from proofs_checks.options import UsageError
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          properties_verdict, report_option, compute_dtype_option, sanity_payload, sanity_rebuild,
                                          timeout_option)

from proofs_checks.sanity.hopfield_inputs import (CHUNK, _update_fn, beta_value, check_sizes,  # noqa: F401
                                                  compute_dtype_value, estimate_bytes, estimate_seconds, load_patterns,
                                                  patterns_array)

__all__ = ["command", "load_patterns", "run_hopfield", "capacity_estimate", "hopfield_verdict", "degenerate_reasons"]

#: Updates along which the energy is followed.
ENERGY_STEPS = 20


def capacity_estimate(Delta_min: float, M: float, beta: float, tau: float, N: int) -> dict:
    """From Theorem 5 (the bound derived in :func:`theory.hopfield.derive_retrieval_bound`, solved
    for ``N`` and for ``β`` by SymPy): the most patterns ``N_max`` at separation ``Delta_min``, norm
    ``M`` and ``beta`` whose one-step error from the pattern itself (``ε = 0``) stays ≤ ``tau``, and
    the smallest ``β`` guaranteeing that for the given ``N``. ``None`` entries where ``Δ ≤ 0``.

    >>> c = capacity_estimate(2.0, 1.0, 5.0, 0.5, 3)
    >>> round(c["N_max"], 3), round(c["beta_needed"], 4)
    (5507.616, 1.0397)
    """
    import sympy as sp

    from theory.hopfield import derive_retrieval_bound

    der = derive_retrieval_bound()
    Ns, b, Dl, eps, Ms = der.facts["args"]
    expr = der.result.subs(eps, 0)
    if not Delta_min > 0:
        return {"N_max": None, "beta_needed": None, "tau": tau}
    n_sol = sp.solve(sp.Eq(expr, sp.Symbol("tau", positive=True)), Ns)
    b_sol = sp.solve(sp.Eq(expr, sp.Symbol("tau", positive=True)), b)
    vals = {b: beta, Dl: Delta_min, Ms: M, sp.Symbol("tau", positive=True): tau, Ns: N}
    n_max = _number_or_text(n_sol[0].subs(vals)) if n_sol else None
    b_need = float(b_sol[0].subs(vals)) if (b_sol and N > 1) else None
    return {"N_max": n_max, "beta_needed": max(b_need, 0.0) if b_need is not None else None, "tau": tau}


def _number_or_text(value) -> float | str:
    """A SymPy number as a float, or, past float64's range (e^(βΔ) at β = 1e4), as its text to 3 digits ("1.23e+4342"):
    it was float("inf") and printed "up to inf patterns" (hostile pass 45a F6)."""
    import sympy as sp

    v = float(value)
    if math.isfinite(v):
        return v
    return str(sp.Float(value, 3)) if value.is_finite else str(value)


def degenerate_reasons(P, Delta, *, vacuous: int, known: int, beta_needed: float | None) -> list[str]:
    """Why these patterns make the Theorem-5 check say nothing (empty: they do not): identical
    patterns, no pattern separated (every Δ_i ≤ 0), or every bound vacuous (≥ 2M) at this β. Some
    unseparated patterns among separated ones are reported in the text, not here: the bound still
    decides for the others."""
    import torch

    out = []
    uniq, inverse, counts = torch.unique(P, dim=0, return_inverse=True, return_counts=True)
    if bool((counts > 1).any()):
        groups = [torch.nonzero(inverse == g).flatten().tolist() for g in torch.nonzero(counts > 1).flatten().tolist()]
        shown = "; ".join("patterns " + " = ".join(map(str, g[:4])) + (" = …" if len(g) > 4 else "") for g in groups[:3])
        out.append(f"{int((counts[counts > 1]).sum())} of {P.shape[0]} patterns are duplicates ({shown}"
                   f"{'; …' if len(groups) > 3 else ''}): their separation is 0 and no update can retrieve one of "
                   "two identical patterns as distinct; remove the duplicates")
    elif float(Delta.max()) <= 0:
        out.append(f"no pattern is separated (every Δ_i ≤ 0, max {float(Delta.max()):.3g}): Theorem 5 guarantees "
                   "nothing for any of them, whatever β")
    if not known:  # the Theorem-5 property did not run: a skip is no pass (hostile pass 26b F9)
        out.append("no Theorem-5 bound exists: the fixed point x_i* near no pattern converged, so the one-step bound "
                   "was checked for none of them")
    if known and vacuous == known:
        how = f"raise --beta to about {beta_needed:.3g}" if beta_needed else "separate the patterns more"
        out.append(f"every one of the {known} Theorem-5 bounds is vacuous (≥ 2M): at this β the bound allows any "
                   f"error, so meeting it shows nothing ({how})")
    return out


def hopfield_verdict(props: list[dict], subject: str, degenerate: list[str]):
    """``mismatch`` when a property failed; else ``inconclusive`` when the patterns are degenerate
    (:func:`degenerate_reasons`); else ``ok``."""
    from proofs_checks.sanity._verdict import Verdict

    v = properties_verdict(props, subject)
    undecided = [p["name"] for p in props if p.get("undecided")]
    if v.outcome == "ok" and undecided:  # a property that could not be judged is no pass (17b F4)
        return Verdict("inconclusive", f"{subject}: undecided: {', '.join(undecided)} (no finite tolerance in the "
                       "declared precision)", v.criterion, {**v.numbers, "undecided": undecided}, reasons=undecided,
                       suggestion="a smaller β, or a declared precision whose range holds β·max|ξᵀx_i|")
    if v.outcome != "ok" or not degenerate:
        return v
    return Verdict("inconclusive", f"{subject}: the input decides nothing: {degenerate[0].split(':')[0]}",
                   v.criterion + "; degenerate input: " + "; ".join(degenerate), {**v.numbers, "degenerate": degenerate},
                   reasons=list(degenerate),
                   suggestion="distinct, separated patterns (Δ_i > 0) and a β at which the bound is below 2M")


# ------------------------------------------------------------------------------------------------
# the pipeline: validated request -> geometry -> update -> starts -> properties -> render -> verdict


@dataclass(frozen=True)
class Geometry:
    """The patterns and what the theorem reads from them: ``M = max‖x_i‖``, the separations ``Δ_i``,
    the distance to the nearest other pattern."""
    P: Any  # torch (N, d) float64
    N: int
    d: int
    M: float
    Delta: Any
    nearest: Any


def geometry(patterns) -> Geometry:
    import torch

    P = torch.as_tensor(np.asarray(patterns, dtype=np.float64))
    if P.dim() != 2 or P.shape[0] < 2 or P.shape[1] < 1 or not bool(torch.isfinite(P).all()):
        raise UsageError("patterns: need a finite (N, d) array with N ≥ 2, got shape "
                         f"{tuple(P.shape)}" + ("" if bool(torch.isfinite(P).all()) else " with non-finite entries"))
    N, d = P.shape
    M = float(P.norm(dim=-1).max())
    if M == 0:
        if bool((P != 0).any()):  # entries of 1e-170: their squares underflow, the norms are 0 (hostile pass 10)
            raise UsageError(f"patterns: entries of at most {float(P.abs().max()):.3g}: their squares underflow "
                             "float64, so the norms and distances are 0; rescale the patterns")
        raise UsageError("patterns: every pattern is zero")
    G = P @ P.T
    off = G - torch.diag(torch.full((N,), float("inf"), dtype=G.dtype))
    dist = torch.cdist(P, P) + torch.diag(torch.full((N,), float("inf"), dtype=P.dtype))
    return Geometry(P, N, d, M, G.diagonal() - off.max(-1).values, dist.min(-1).values)


@dataclass
class Update:
    """The update under test: ``call(xi)`` (float64 out), its description, the working precision its
    properties are judged in, and (a user's module) the object, how it is called and its
    :class:`numerics.precision.PrecisionFinding` (judged precision against the one found in its outputs)."""
    call: Any
    what: str
    work: Any
    declared: Any = None
    fobj: Any = None
    three: bool = False
    precision: Any = None
    #: the shapes of the calls on finite states that returned NaN/inf, whichever property made them (the fixed-point
    #: iteration's calls were read as "does not converge": hostile pass 31b N1)
    nonfinite: list = field(default_factory=list)
    #: the largest entry error / M of the modern update itself computed at the working precision (measured with
    #: update_matches_modern; None until then, or for the built-in update)
    rounding: Any = None


def _user_update(module, geo: Geometry, beta: float, label: str, nm: str):
    """``(checked, fobj, three, low)``: the user's update called on copies, every call's output checked
    (``xi``'s shape, a real floating dtype; a torch tensor or a NumPy array); ``low``: the dtypes below float64 a
    module's parameters had before its float64 copy was made."""
    import torch

    from numerics import precision as npr
    from numerics.torch_utils import not_dense
    from proofs_checks.sanity._loader import user_code

    fobj, three, low = _update_fn(module, label, geo.P, beta)
    P = geo.P

    def raw_upd(xi):
        with torch.no_grad(), user_code(label, nm):
            # copies: an update that alters its arguments in place (normalising the patterns, reusing
            # the states' memory) must not alter the patterns and starts the check compares against
            return fobj(xi.clone(), P.clone(), beta) if three else fobj(xi.clone())

    def checked(xi):
        try:
            out = raw_upd(xi)
        except UsageError as exc:  # the user-code boundary's one line, with the states' shape
            raise UsageError(exc.message + (f" on states of shape {tuple(xi.shape)} float64"
                                            if " raised " in exc.message else "")) from None
        out = npr.plain(out)  # a tensor subclass's own operators never judge it
        if isinstance(out, np.ndarray):  # its dtype said as such, not as a shape (44a F12)
            if out.dtype.kind != "f":
                raise UsageError(f"{label}: {nm} returned a NumPy array of {out.dtype} for float64 states; expected "
                                 "real floating point")
            if out.dtype.itemsize > 8:  # longdouble, which torch has no dtype for: its values in float64, the states'
                out = out.astype(np.float64)  # precision (a traceback from torch.from_numpy, 44a F13)
            out = torch.from_numpy(np.ascontiguousarray(out))
        what = not_dense(out) if isinstance(out, torch.Tensor) else None
        if what:
            raise UsageError(f"{label}: {nm} returned {what} for states of shape {tuple(xi.shape)}; expected a dense "
                             "tensor of numbers")
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(xi.shape):
            got = tuple(out.shape) if isinstance(out, (torch.Tensor, np.ndarray)) else type(out).__name__
            raise UsageError(f"{label}: {nm} returned {got} for states of shape {tuple(xi.shape)}; expected the "
                             "same shape (one updated state per row; a torch tensor or NumPy array)")
        if not out.dtype.is_floating_point or out.is_complex():
            raise UsageError(f"{label}: {nm} returned {str(out.dtype).replace('torch.', '')} for float64 states; "
                             "expected real floating point")
        # a copy: an update returning one buffer its next call overwrites (a static output buffer) is judged on each
        # call's values as returned, as check attention judges such a module (hostile pass 37b F4)
        return out.clone()

    return checked, fobj, three, low


def make_update(module, geo: Geometry, beta: float, declared, label: str, name: str | None) -> Update:
    """The modern update (``module`` None) or the user's, with the precision it is judged in (declared,
    else the inputs' float64) against the one found in its output on a few patterns
    (:func:`numerics.precision.infer_work_dtype`): found below, ``precision_as_declared`` fails and the
    other properties are judged at the precision found."""
    import torch

    from numerics import hopfield as nh
    from numerics import precision as npr

    if module is None:
        return Update(lambda xi: nh.modern_update(xi, geo.P, beta),
                      f"modern Hopfield update X softmax(β Xᵀξ), β = {beta:g}", torch.float64, declared)
    nm = name or getattr(module, "__name__", type(module).__name__)
    checked, fobj, three, low = _user_update(module, geo, beta, label, nm)
    what = f"your update {nm}" + (" (called as f(xi, patterns, beta))" if three else " (called as f(xi))")
    if low:
        what += (f"; its {', '.join(low)} parameters cast to float64, the copy judged (as given it computes in "
                 f"{low[0]}: not judged)")
    out = checked(geo.P[: min(geo.N, 4)].clone())
    prec = npr.PrecisionFinding.of(declared, npr.infer_work_dtype(out, nh.modern_update(geo.P[: min(geo.N, 4)], geo.P, beta)))
    upd = Update(None, what, prec.work, declared, fobj, three, prec)

    def call(xi):
        out = checked(xi).detach().to(torch.float64)  # an output that requires grad: its values only
        if len(upd.nonfinite) < 8 and bool(torch.isfinite(xi).all()) and not bool(torch.isfinite(out).all()):
            upd.nonfinite.append(tuple(xi.shape))
        return out

    upd.call = call
    return upd


@dataclass(frozen=True)
class Starts:
    """Where the update is applied: the patterns, noisy copies at distance ``eps_i``, random convex mixtures."""
    eps_i: Any
    noisy: Any
    all: Any


def make_starts(geo: Geometry, seed: int) -> Starts:
    import torch

    from numerics.torch_utils import generator

    gen = generator(seed)
    P, N, d, M = geo.P, geo.N, geo.d, geo.M
    eps_i = torch.where(geo.Delta > 0, geo.Delta / (8 * M), 0.05 * geo.nearest.clamp_max(M))
    g = torch.randn(N, d, generator=gen, dtype=torch.float64)
    noisy = P + eps_i[:, None] * g / g.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    w = torch.rand(min(N, 16), N, generator=gen, dtype=torch.float64)
    return Starts(eps_i, noisy, torch.cat([P, noisy, (w / w.sum(-1, keepdim=True)) @ P]))


def _row(name: str, ok: bool, error, tolerance, justification: str, detail: str) -> dict:
    """One property's row; a tolerance that is not a finite number (the reference in the declared precision
    overflowed: float16 at a large β, hostile pass 17b F4) decides nothing: undecided, never a failure."""
    import math

    if isinstance(tolerance, float) and not math.isfinite(tolerance) and math.isfinite(float(error)):
        # (an infinite tolerance would pass any error: undecided too, hostile pass 18b's note)
        return {"name": name, "status": "skip", "error": error, "tolerance": tolerance, "justification": justification,
                "detail": f"undecided: the tolerance is not finite ({tolerance}): the reference could not be computed "
                          f"in the declared precision (its range is exceeded at this β); measured {float(error):.3g}",
                "undecided": True}
    return {"name": name, "status": "pass" if ok else "fail", "error": error, "tolerance": tolerance,
            "justification": justification, "detail": detail}


def _late_finite(props: list[dict], upd: Update) -> None:
    """``finite_updates`` once every property ran: NaN/inf from any call the check made on finite states fails it."""
    row = next((p for p in props if p["name"] == "finite_updates"), None)
    if row is None or row["status"] == "fail" or not upd.nonfinite:
        return
    shapes = ", ".join(dict.fromkeys(str(s) for s in upd.nonfinite))
    row.update(status="fail", error=float(len(upd.nonfinite)),
               detail=f"f(ξ) returned NaN/inf on finite states of shape {shapes} (a call the check made: the "
                      f"iterations, the energy, the fixed points); {row['detail']} at the starts")


def _finite_and_match(geo: Geometry, upd: Update, st: Starts, beta: float, modular: bool) -> list[dict]:
    """``finite_updates``, and (a user's module) ``precision_as_declared`` and ``update_matches_modern`` (at
    the declared precision, or at the precision found in its outputs when that is below)."""
    import torch

    from numerics import hopfield as nh
    from numerics import precision as npr

    f_starts = upd.call(st.all)
    bad = int((~torch.isfinite(f_starts)).sum())
    n = st.all.shape[0]
    props = [_row("finite_updates", not bad, float(bad), 0.0, "none may be NaN/inf (exact)",
                  f"{bad} non-finite entries in f(ξ) over {n} starts" if bad else f"f(ξ) finite on {n} starts")]
    if not modular:
        return props
    ref = nh.modern_update(st.all, geo.P, beta)
    found = npr.coarser(upd.precision.found, npr.infer_work_dtype(f_starts, ref))  # every start: saturated outputs
    upd.precision = npr.PrecisionFinding(upd.precision.judged, found, upd.precision.given)  # (exact ±1) reveal nothing
    upd.work = upd.precision.work
    props.append(upd.precision.row(f"updates of {min(geo.N, 4)} patterns and of {n} starts"))
    M, tol_rel = geo.M, 16 * npr.unit_roundoff(torch.float64) * (geo.N + geo.d)
    err, where = _worst_batching(upd, st.all, f_starts, ref, M) if not bad else (float("nan"), "")
    # the precision rule (numerics.precision): the reference in the module's precision, float64 included (16·u·(N+d)
    # alone does not grow with |βXᵀξ|: a correct exp(a − logsumexp a) in float64 failed at β = 1e4, hostile pass
    # 33b F3), written in each standard way (their rounding differs)
    errs_ref = {}
    for form, fn in nh.MODERN_UPDATE_FORMULATIONS.items():
        ref_low = npr.in_precision(lambda a, b, fn=fn: fn(a, b, beta), st.all, geo.P, dtype=upd.work)
        errs_ref[form] = float((ref_low - ref).abs().max() / max(M, 1e-300))
    worst_form = max(errs_ref, key=errs_ref.get)
    err_ref = errs_ref[worst_form]
    upd.rounding = err_ref  # (the other properties' rounding at the working precision: _rounding_tolerance)
    tol_m = npr.precision_tolerance(err_ref, tol_rel)
    wd = npr.dtype_name(upd.work)
    how = "found in its outputs (precision_as_declared)" if upd.precision.below else "declared"
    just = (f"max({npr.PRECISION_FACTOR:g} × {err_ref:.3g}, 16·u64·(N+d)) = {tol_m:.3g}: judged at {wd}, "
            f"{how}; {err_ref:.3g} is the largest error of X softmax(βXᵀξ) itself computed in {wd} by its "
            f"standard formulations ({', '.join(f'{k} {v:.2g}' for k, v in errs_ref.items())}; largest: "
            f"{worst_form}) (FlashAttention's rule, factor {npr.PRECISION_FACTOR:g}), relative to M")
    props.append(_row("update_matches_modern", err <= tol_m, err, tol_m, just, "max |f(ξ) − X softmax(βXᵀξ)| / M"
                      f" over the {n} starts in one batch, the first {min(n, _ALONE)} alone and the first "
                      f"{min(n, 2 * _ALONE)} in batches of 2, 3 and 4" + (f"; worst {where}" if where else "")
                      + ("" if err <= tol_m else ": your update is not the modern Hopfield update at this β")))
    return props


#: how many starts ``update_matches_modern`` also updates alone (a batch of one), and twice as many in batches of
#: each size of :data:`_BATCHES`
_ALONE = 16
_BATCHES = (2, 3, 4)


def _worst_batching(upd: "Update", starts, f_starts, ref, M: float) -> tuple[float, str]:
    """The largest error relative to ``M`` of the update over the starts in one batch, each of the first ``_ALONE``
    alone, and the first ``2·_ALONE`` in batches of 2, 3 and 4: a path taken for one state (the usual retrieval) or a few was
    never called (hostile pass 26b F4). A non-finite update there is an infinite error."""
    import torch

    k, m = min(starts.shape[0], _ALONE), min(starts.shape[0], 2 * _ALONE)
    alone = torch.cat([upd.call(starts[i:i + 1]) for i in range(k)])
    # batches of 2 and 3 too: a path for fewer than 4 states, wrong there, was "ok" (hostile pass 59b F3)
    batched = [(torch.cat([upd.call(starts[i:min(i + b, m)]) for i in range(0, m, b)]), ref[:m], f"in batches of {b}")
               for b in _BATCHES]
    worst, where = -1.0, ""
    for got, r, what in ((f_starts, ref, "in one batch"), (alone, ref[:k], "alone"), *batched):
        e = float((got - r).abs().max() / max(M, 1e-300)) if bool(torch.isfinite(got).all()) else float("inf")
        if not e <= worst:
            worst, where = e, what
    return worst, where


@dataclass(frozen=True)
class Retrieval:
    """Theorem 5 on every pattern: one-step errors and bounds from the pattern (``e0``, ``b0``) and from
    its noisy start (``en``, ``bn``); how many bounds are known and how many vacuous (≥ 2M)."""
    e0: Any
    en: Any
    b0: Any
    bn: Any
    known: int
    vacuous: int
    prop: dict


def _rounding_tolerance(upd: Update, geo: Geometry, worst_case: float, what: str) -> tuple[float, str]:
    """A property's tolerance for rounding, relative to its scale: at float64, ``worst_case`` (a bound of the form
    c·u·(N+d)); below, what the modern update itself loses in that precision on these starts, measured
    (:attr:`Update.rounding`, max entry error / M), over the d entries of a state (√d), times the precision rule's
    factor — the worst-case bound at bfloat16 was 1.75 M, admitting an update 0.87 past Theorem 5's bound that
    float64 refuted (hostile pass 45a F5)."""
    from numerics import precision as npr

    if upd.rounding is None or upd.work == torch_float64():
        return worst_case, what
    measured = math.sqrt(geo.d) * float(upd.rounding)
    tol = npr.precision_tolerance(measured, 16 * npr.unit_roundoff(torch_float64()) * (geo.N + geo.d))
    return tol, (f"max({npr.PRECISION_FACTOR:g} × √d × {float(upd.rounding):.3g}, 16·u64·(N+d)) = {tol:.3g}: the "
                 f"modern update's own largest entry error in {npr.dtype_name(upd.work)} on these starts "
                 f"(update_matches_modern), over the d entries of a state, relative to the property's scale")


def torch_float64():
    import torch

    return torch.float64


def theorem5(geo: Geometry, upd: Update, st: Starts, beta: float) -> Retrieval:
    """All patterns batched: pattern b moved to index 0 of its own copy of P."""
    import torch

    from numerics import hopfield as nh
    from numerics import precision as npr

    P, N, M = geo.P, geo.N, geo.M
    errs0, errsn, bounds0, boundsn = [], [], [], []
    for a in range(0, N, CHUNK):
        ids = torch.arange(a, min(N, a + CHUNK))
        order = torch.stack([torch.cat([i.view(1), torch.cat([torch.arange(i), torch.arange(i + 1, N)])]) for i in ids])
        Pb = P[order]  # (c, N, d), target at index 0
        for xi, errs, bounds in ((P[ids], errs0, bounds0), (st.noisy[ids], errsn, boundsn)):
            errs.append((upd.call(xi) - P[ids]).norm(dim=-1))
            bounds.append(nh.retrieval_bound(Pb, xi, 0, beta))
    e0, en, b0, bn = (torch.cat(v) for v in (errs0, errsn, bounds0, boundsn))
    err_all, bnd_all = torch.cat([e0, en]), torch.cat([b0, bn])
    # a bound exists where x_i* converged (NaN: it did not); +inf is an overflowed bound, vacuous (≥ 2M) as any bound
    # ≥ 2M is, not a missing one (hostile pass 58a F4); a non-finite error beside a bound fails below (NaN fails)
    known = ~torch.isnan(bnd_all)
    tol_b = 16 * npr.unit_roundoff(upd.work) * (N + geo.d)
    why_b = (f"16·u·(N+d) = {tol_b:.3g}: rounding of ‖f(ξ) − x_i‖ in the update's working precision "
             f"({str(upd.work).replace('torch.', '')}), relative to M")
    tol_b, why_b = _rounding_tolerance(upd, geo, tol_b, why_b)
    excess = ((err_all - bnd_all) / M).clamp_min(0)
    exc = float(excess[known].max()) if bool(known.any()) else float("nan")
    vacuous, n_unknown = int((bnd_all[known] >= 2 * M).sum()), int((~known).sum())
    if not bool(known.any()):
        prop = {"name": "one_step_within_theorem5_bound", "status": "skip", "error": None, "tolerance": None,
                "justification": "", "detail": "the fixed point x_i* near no pattern converged: no bound"}
    else:
        worst = int(excess.nan_to_num(0).argmax())
        prop = _row("one_step_within_theorem5_bound", exc <= tol_b, exc, tol_b, why_b,
                    f"max (error − bound)/M over {int(known.sum())} starts (patterns and noisy copies); "
                    f"{vacuous} bound(s) vacuous (≥ 2M)" + (f", {n_unknown} without a converged x_i*" if n_unknown else "")
                    + ("" if exc <= tol_b else f"; worst: pattern {worst % N}{' (noisy start)' if worst >= N else ''}, "
                       f"error {float(err_all[worst]):.3g} > bound {float(bnd_all[worst]):.3g}"))
    return Retrieval(e0, en, b0, bn, int(known.sum()), vacuous, prop)


def energy_along(geo: Geometry, upd: Update, st: Starts, beta: float) -> tuple[Any, dict]:
    """The energy along :data:`ENERGY_STEPS` updates from every start, and ``energy_non_increasing``."""
    import torch

    from numerics import hopfield as nh
    from numerics import precision as npr

    xi = st.all.clone()
    E = [nh.modern_energy(xi, geo.P, beta)]
    for _ in range(ENERGY_STEPS):
        xi = upd.call(xi)
        E.append(nh.modern_energy(xi, geo.P, beta))
    E = torch.stack(E)  # (K+1, S)
    scale = max(geo.M * geo.M, 1.0 / beta, 1e-300)
    rise = ((E[1:] - E[:-1]) / scale)
    e_rise = float(rise.max()) if bool(torch.isfinite(rise).all()) else float("nan")
    tol_e = 32 * npr.unit_roundoff(upd.work) * (geo.N + geo.d) * (1 + float(E[0].abs().max()) / scale)
    why_e = (f"32·u·(N+d)·(1 + max|E|/M²) = {tol_e:.3g}: rounding of the log-sum-exp and ½‖ξ‖² terms, "
             f"relative to max(M², 1/β), u of {npr.dtype_name(upd.work)}")
    if upd.rounding is not None and upd.work != torch.float64:  # a state moved by the update's rounding moves E by
        tol_e, why_e = _rounding_tolerance(upd, geo, tol_e, why_e)  # ≈ ‖∇E‖·δ ≤ M·√d·rounding·M: relative to M²
    prop = _row("energy_non_increasing", math.isfinite(e_rise) and 0 <= tol_e and e_rise <= tol_e,
                max(e_rise, 0.0) if math.isfinite(e_rise) else e_rise, tol_e, why_e,
                f"largest rise E(f(ξ)) − E(ξ) over {ENERGY_STEPS} updates from {st.all.shape[0]} starts, "
                "relative to max(M², 1/β)")
    return E, prop


@dataclass(frozen=True)
class FixedPoints:
    """Per pattern: whether iterating the update from it converged, how far it ended from it, and whether
    that end is within half the distance to the nearest other pattern (the pattern is stored)."""
    conv: Any
    moved: Any
    near: Any


def fixed_points(geo: Geometry, upd: Update) -> FixedPoints:
    """Iterate the update from each pattern (at most 500 steps) until every state stops moving."""
    import torch

    from numerics import precision as npr

    xs, conv = geo.P.clone(), torch.zeros(geo.N, dtype=torch.bool)
    for _ in range(500):
        nxt = upd.call(xs)
        conv = (nxt - xs).norm(dim=-1) <= max(1e-12, 64 * npr.unit_roundoff(upd.work)) * max(1.0, geo.M)
        xs = nxt
        if bool(conv.all()):
            break
    moved = (xs - geo.P).norm(dim=-1)
    return FixedPoints(conv, moved, conv & (moved < geo.nearest / 2))


def run_hopfield(patterns, *, beta: float = 1.0, module: Any = None, seed: int = 0, label: str = "--module",
                 name: str | None = None, compute_dtype: str | None = None) -> SanityResult:
    """:func:`_run_hopfield` with the torch settings the module left (at its import or a call) for its calls alone,
    none kept after the check (:func:`numerics.torch_utils.precision_for_a_check`)."""
    from numerics.torch_utils import precision_for_a_check

    with precision_for_a_check():
        return _run_hopfield(patterns, beta=beta, module=module, seed=seed, label=label, name=name,
                             compute_dtype=compute_dtype)


def _run_hopfield(patterns, *, beta: float, module: Any, seed: int, label: str, name: str | None,
                  compute_dtype: str | None) -> SanityResult:
    """The report of the module docstring for ``patterns`` ``(N, d)`` as a :class:`SanityResult`.
    ``compute_dtype`` declares the module's working precision (default: the inputs' float64; a module
    whose outputs are found coarser, :func:`numerics.precision.infer_work_dtype`, fails
    ``precision_as_declared`` and its other properties are judged at the precision found). Stages: the
    validated request (:func:`beta_value`,
    :func:`compute_dtype_value`, :func:`geometry`), the update (:func:`make_update`), the starts, the
    properties (:func:`theorem5`, :func:`energy_along`), the fixed points, the rendering and the verdict."""
    declared = compute_dtype_value(compute_dtype, module is not None)
    beta = beta_value(beta)
    geo = geometry(patterns)
    upd = make_update(module, geo, beta, declared, label, name)
    st = make_starts(geo, seed)
    props = _finite_and_match(geo, upd, st, beta, module is not None)
    ret = theorem5(geo, upd, st, beta)
    E, e_prop = energy_along(geo, upd, st, beta)
    props += [ret.prop, e_prop]
    fx = fixed_points(geo, upd)
    _late_finite(props, upd)
    cap = capacity_estimate(float(geo.Delta.min()), geo.M, beta, float(geo.nearest.min()) / 2, geo.N)
    from proofs_checks.sanity.hopfield_render import figures, render

    doc, lines = render(geo, upd, st, ret, E, fx, cap, beta=beta, seed=seed, compute_dtype=compute_dtype)
    degenerate = degenerate_reasons(geo.P, geo.Delta, vacuous=ret.vacuous, known=ret.known,
                                    beta_needed=cap["beta_needed"])
    doc["degenerate"] = degenerate
    if degenerate:
        lines.append("inconclusive input: " + "; ".join(degenerate))
    verdict = hopfield_verdict(props, "Hopfield patterns" + (f" under {name}" if module is not None and name else ""),
                               degenerate)
    return SanityResult("hopfield", doc, verdict, props, lines,
                        figures(geo, upd, st, ret, E, beta=beta, label=label, name=name))


@click.command("hopfield")
@click.option("--patterns", "patterns_path", required=True, metavar="FILE", help="(N, d) patterns as rows: .npy or .pt.")
@click.option("--beta", default=1.0, show_default=True, type=float, callback=lambda ctx, param, v: beta_value(v),
              help="Inverse temperature β of the modern Hopfield update (a positive finite number).")
@click.option("--module", "module_spec", default=None, metavar="FILE.py:NAME",
              help="Your update: f(xi, patterns, beta) or f(xi), xi (S, d) -> (S, d).")
@compute_dtype_option(
    "The precision your --module computes in (default float64, the inputs'; an update found computing "
    "below it fails precision_as_declared); its error is judged against 2 × the error of the modern "
    "update itself computed in that precision.")
@report_option
@timeout_option
@check_options(no_sizes="the patterns and --beta decide the check's size")
def command(patterns_path, beta, module_spec, compute_dtype, report_dir, timeout, seed, device, mode, json_path,
            max_memory, no_progress):
    """Separation, the Theorem-5 one-step retrieval bound next to the measured error, energy along
    the update, fixed points and a capacity estimate for your patterns: ok (exit 0), the
    violated properties named (exit 1), or inconclusive (exit 3: duplicate or unseparated patterns,
    every bound vacuous).

    \b
    Examples:
      tverify check hopfield --patterns examples/P.npy --beta 0.5
      tverify check hopfield --patterns examples/P.npy --beta 8
        --module examples/hopfield_update.py:update --report hop-report
    """
    check_report_dir(report_dir, json_path)  # first: a --json inside --report is refused for that reason
    check_json_target(json_path)
    compute_dtype_value(compute_dtype, bool(module_spec))  # the API's compute_dtype= is validated by the same rule
    from proofs_checks.options import require_cpu_only

    require_cpu_only(device, "check hopfield")
    P = load_patterns(patterns_path, max_memory=max_memory)
    check_sizes(P, beta, max_memory)
    est = estimate_seconds(*P.shape)
    if est > 10 and not no_progress:
        from proofs_checks import guards

        guards.Progress("check hopfield").note(
            f"estimated up to ≈ {guards.fmt_seconds(est)} for {P.shape[0]} patterns in d = {P.shape[1]} "
            f"(≈ {guards.fmt_bytes(estimate_bytes(*P.shape))} of memory)")
    if timeout is not None and not module_spec:
        raise UsageError("--timeout limits the process that runs your --module; without --module nothing of yours runs")
    if not module_spec:
        result = run_hopfield(P, beta=beta, module=None, seed=seed, compute_dtype=compute_dtype)
        result.doc["inputs"]["patterns"] = patterns_path
        finish(result, json_path, report_dir)
    from proofs_checks.sanity import _isolate
    from proofs_checks.sanity._loader import _split

    _split(module_spec, "--module")
    name = module_spec.rpartition(":")[2]
    payload = _isolate.run_isolated(
        CHILD_TASK, {"kwargs": dict(beta=beta, seed=seed, name=name, compute_dtype=compute_dtype),
                     "module_spec": module_spec, "patterns_path": patterns_path},
        label="--module", what=f"check hopfield {name}", arrays={"patterns": P}, timeout=timeout,
        max_memory=max_memory, progress=not no_progress, figures=bool(report_dir))
    _isolate.finish_rebuilt(payload, rebuild, finish, json_path, report_dir)


# ------------------------------------------------------------------------------------------------
# in the check's own process (proofs_checks.sanity._isolate)

CHILD_TASK = "proofs_checks.sanity.hopfield:child_task"


def child_task(req: dict, obj: Any, arrays: dict) -> dict:
    """In the child: load ``--module`` (or take the API's), run :func:`run_hopfield` on the patterns
    the parent read, return the payload."""
    from proofs_checks.sanity._loader import load_object

    kw = dict(req.get("kwargs") or {})
    if obj is not None:
        kw.update(obj.get("kwargs") or {})
    module = obj["module"] if obj is not None else load_object(req["module_spec"], "--module")
    result = run_hopfield(arrays["patterns"], module=module, **kw)
    if req.get("patterns_path"):
        result.doc["inputs"]["patterns"] = req["patterns_path"]
    name = kw.get("name")
    return sanity_payload(result, req, "Hopfield patterns" + (f" under {name}" if name else ""))


def rebuild(payload: dict) -> SanityResult:
    """In the parent: the result of :func:`child_task`'s payload, its verdict recomputed here."""
    verdict = hopfield_verdict(payload["properties"], payload["subject"], list(payload["doc"].get("degenerate") or []))
    return sanity_rebuild(payload, verdict)
