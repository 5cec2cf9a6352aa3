"""Helpers shared by the Hopfield claim modules (``hopfield``, ``hopfield_dense``, ``hopfield_modern``,
``hopfield_retrieval``, ``hopfield_attention``): the z-score of a Monte Carlo threshold check, and the
relative resolution of absolute comparisons (:func:`abs_resolution`, also used by the Att-SVM modules).
A module whose name starts with ``_`` registers nothing."""

from __future__ import annotations

import math

import numpy as np

from proofs_checks.comparisons import confirm_resolution, largest, smallest

Z_TOL = 3.0
Z_JUST = ("no measured point more than 3 standard errors (spread of per-trial fractions over the trials) on the "
          "wrong side of its threshold")


def _z(value: float, se: float, thr: float, side: str, n: int) -> float:
    """Signed z-score of a violation: ``side="ge"`` wants ``value ≥ thr``, ``"le"`` wants ``value ≤ thr``."""
    se = largest(se, 1.0 / n) if not math.isnan(se) else 1.0 / n
    viol = (thr - value) if side == "ge" else (value - thr)
    return viol / se


def _half_crossing(grid, frac):
    """N where the fixed fraction crosses 1/2 (log-linear interpolation on the grid); NaN if not bracketed."""
    for (n0, f0), (n1, f1) in zip(zip(grid, frac), zip(grid[1:], frac[1:])):
        if f0 >= 0.5 > f1:
            t = (f0 - 0.5) / (f0 - f1)
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return math.nan


def abs_resolution(pairs, tol: float, rest: float = 0.0) -> tuple[float, dict]:
    """Relative resolution of an absolute comparison ``max|value − reference| / norm ≤ tol`` over
    several ``(value, reference[, norm])`` pairs (``norm`` defaults to 1): scaling every reference by
    ``1 + δ`` moves pair ``p`` by ``|δ|·S_p`` (``S_p = max|reference_p|``), so the comparison rejects
    every ``|δ| > (tol·norm_p + e_p)/S_p`` (``e_p`` its absolute error; triangle inequality) and ``ε`` is
    the smallest of these. Confirmed by re-running the comparison at ``1 ± 2ε, 1 ± ε/2``; ``rest`` is
    the part of the check's error that does not involve the references (one-sided violations, exact
    counts), kept in the re-run. Returns ``(ε, confirmation)``; shared by the Att-SVM and Hopfield
    modules.

    >>> eps, conf = abs_resolution([(np.array([1.0, 2.0 + 1e-15]), np.array([1.0, 2.0]))], 1e-12)
    >>> round(eps * 2, 14), conf["rejects_2eps"]
    (1e-12, True)
    """
    ps = [(np.asarray(p[0], dtype=float), np.asarray(p[1], dtype=float), float(p[2]) if len(p) > 2 else 1.0)
          for p in pairs]
    cand = []
    for v, r, nrm in ps:
        S = float(np.max(np.abs(r))) if r.size else 0.0
        if S > 0 and v.shape == r.shape:
            cand.append((tol * nrm + float(np.max(np.abs(v - r)))) / S)
    eps = float(smallest(cand)) if cand else float("nan")

    def err(delta: float) -> float:
        out = [rest]
        for v, r, nrm in ps:
            out.append(float(np.max(np.abs(v - r * (1 + delta)))) / nrm if v.shape == r.shape else float("inf"))
        return float(largest(out))

    return eps, confirm_resolution(err, tol, eps)


def threshold_load_resolution(loads) -> tuple[float, dict]:
    """Resolution of threshold checks on a Monte Carlo fraction measured at two loads ``N0 < N1`` of
    the same ``d``, as a relative change of the capacity that set the loads.

    ``loads``: ``(points, i, thr, side, direction)`` with ``points = [(N0, f0, se0, n0), (N1, f1, se1,
    n1)]``, the tested point ``i``, its threshold ``thr`` and ``side`` ("ge": ``f ≥ thr``, "le": ``f ≤
    thr``) and ``direction`` ("up" when a larger capacity pushes the point over its threshold, "down"
    when a smaller one does). A capacity scaled by ``1 + δ`` tests the load ``N_i(1 + δ)``; the fraction
    there is interpolated log-linearly in N between the two measured loads (extrapolated beyond them,
    flagged), and the point is rejected once it lies ``Z_TOL`` standard errors past ``thr`` (the SE of
    the tested point, floored at 1/n as in :func:`_z`). Per direction the smallest ``|δ|`` over the
    points; ``ε`` is the larger of the two directions present (both must be rejected at ``±2ε``).
    Returns ``(ε, details)``.

    >>> eps, det = threshold_load_resolution([([(10, 0.9, 0.01, 100), (20, 0.1, 0.01, 100)], 0, 0.75, "ge", "up")])
    >>> round(eps, 3), det["up"]["extrapolated"]
    (0.169, False)
    """
    best: dict[str, dict] = {}
    for pts, i, thr, side, direction in loads:
        (N0, f0, s0, n0), (N1, f1, s1, n1) = pts
        se = largest(pts[i][2], 1.0 / pts[i][3]) if not math.isnan(pts[i][2]) else 1.0 / pts[i][3]
        target = thr - Z_TOL * se if side == "ge" else thr + Z_TOL * se
        if not 0.0 <= target <= 1.0:  # 3 SE past the threshold lies outside [0, 1]: no load can be rejected
            delta, extra = math.inf, False
        elif f1 == f0 or not all(math.isfinite(v) for v in (f0, f1, N0, N1)) or N1 <= N0:
            delta, extra = math.inf, True
        else:
            t = (target - f0) / (f1 - f0)  # position of the crossing in log N, 0 at N0, 1 at N1
            Nx = math.exp(math.log(N0) + t * (math.log(N1) - math.log(N0)))
            delta = abs(Nx / pts[i][0] - 1.0)
            wrong_way = (Nx < pts[i][0]) if direction == "up" else (Nx > pts[i][0])
            if wrong_way:  # already past the threshold, or a non-monotone pair: no margin
                delta = 0.0
            extra = not (0.0 <= t <= 1.0)
        if direction not in best or delta < best[direction]["delta"]:
            best[direction] = {"delta": delta, "extrapolated": bool(extra), "load": pts[i][0], "threshold": thr,
                               "target_fraction": target}
    fin = [b["delta"] for b in best.values() if math.isfinite(b["delta"])]
    eps = float(largest(fin)) if fin else math.nan
    return eps, best


def capacity_units(res: dict) -> str:
    """Units of :func:`threshold_load_resolution`'s ε, naming a direction that no load can reject."""
    dead = [k for k, b in res.items() if not math.isfinite(b["delta"])]
    if not dead:
        return ("relative change of the form's capacity C(d) that is rejected (both directions: the larger of the "
                "smallest rejected increase and decrease, over d and criteria)")
    return (f"relative {'increase' if 'up' in res and 'up' not in dead else 'decrease'} of the form's capacity C(d) that "
            f"is rejected (one-sided: a capacity {'smaller' if 'down' in dead else 'larger'} than the truth is rejected "
            "by no tested load at these trials, 3 SE past its threshold lies outside [0, 1])")
