"""``tverify check hopfield``, the last stage: the JSON document, the text lines and the ``--report``
figures of a run (:func:`proofs_checks.sanity.hopfield.run_hopfield`), from the stages' results."""

from __future__ import annotations

from typing import Any

import numpy as np

# the annotations name the stages' results of proofs_checks.sanity.hopfield (Geometry, Update, Starts,
# Retrieval, FixedPoints); they are not imported: that module imports this one

__all__ = ["render", "figures"]


def render(geo: Geometry, upd: Update, st: Starts, ret: Retrieval, E, fx: FixedPoints, cap: dict, *, beta: float,
            seed: int, compute_dtype) -> tuple[dict, list[str]]:
    """The JSON document and the text lines."""
    import torch

    from numerics import precision as npr

    N, d, M, Delta, e0, en, b0, bn = geo.N, geo.d, geo.M, geo.Delta, ret.e0, ret.en, ret.b0, ret.bn
    tau = float(geo.nearest.min()) / 2
    # (a duplicate pattern, nearest 0, is never retrieved as distinct: counted, it read "3/3" beside "no update can
    # retrieve one of two identical patterns", 41b N5)
    retrieved = int(((en <= geo.nearest / 2) & (geo.nearest > 0) & torch.isfinite(en)).sum())
    per = [{"pattern": i, "Delta": float(Delta[i]), "error_from_pattern": float(e0[i]), "bound_from_pattern": float(b0[i]),
            "eps_noisy": float(st.eps_i[i]), "error_from_noisy": float(en[i]), "bound_from_noisy": float(bn[i]),
            "fixed_point_converged": bool(fx.conv[i]), "fixed_point_distance": float(fx.moved[i]),
            "nearest_other": float(geo.nearest[i])} for i in range(N)]
    wd = str(upd.work).replace("torch.", "")
    doc = {"check": "hopfield", "inputs": {"N": N, "d": d, "beta": beta, "seed": seed, "update": upd.what,
                                           "compute_dtype": compute_dtype},
           "precision": {"work_dtype": wd, "declared": upd.declared is not None,
                         "judged_dtype": npr.dtype_name(upd.precision.judged) if upd.precision else wd,
                         "found_dtype": npr.dtype_name(upd.precision.found) if upd.precision else wd,
                         "unit_roundoff": npr.unit_roundoff(upd.work), "factor": npr.PRECISION_FACTOR},
           "M": M, "Delta": Delta.tolist(), "per_pattern": per,
           "fixed_points": {"converged": int(fx.conv.sum()), "near_their_pattern": int(fx.near.sum()), "N": N},
           "capacity": {**cap, "retrieved_from_noisy_one_step": retrieved, "N": N},
           "energy": {"start_mean": float(E[0].mean()), "end_mean": float(E[-1].mean()), "steps": int(E.shape[0]) - 1}}
    nm = (cap["N_max"] if isinstance(cap["N_max"], str) else f"{cap['N_max']:.3g}") if cap["N_max"] is not None \
        else "none (Δ_min ≤ 0: no guarantee)"
    bn_txt = f"{cap['beta_needed']:.3g}" if cap["beta_needed"] is not None else "none (Δ_min ≤ 0)"
    order = torch.argsort(Delta)[:min(N, 8)].tolist()
    lines = [f"{N} patterns in d = {d}, M = max‖x_i‖ = {M:.4g}, β = {beta:g}; update: {upd.what}"
             + ("" if upd.precision is None else f"; judged at {wd}"
                + (f", found in its outputs below {npr.dtype_name(upd.precision.judged)} (precision_as_declared)"
                   if upd.precision.below else " (declared)" if upd.declared is not None
                   else " (the inputs' precision)")),
             f"separation Δ_i: min {float(Delta.min()):.4g}, median {float(Delta.median()):.4g}, max {float(Delta.max()):.4g}"
             + (f"; {int((Delta <= 0).sum())} pattern(s) with Δ_i ≤ 0 (not separated)" if bool((Delta <= 0).any()) else ""),
             "least separated patterns (one-step error from x_i | Theorem-5 bound; from a start at distance ε_i):"]
    lines += [f"  pattern {i:>4d}: Δ = {float(Delta[i]):.4g}; ‖f(x_i) − x_i‖ = {float(e0[i]):.3g} | bound {float(b0[i]):.3g}; "
              f"ε = {float(st.eps_i[i]):.3g}: {float(en[i]):.3g} | {float(bn[i]):.3g}" for i in order]
    lines += [f"fixed points from x_i: {int(fx.conv.sum())}/{N} converged, {int(fx.near.sum())}/{N} within half the "
              "distance to the nearest other pattern (stored)" + ("" if int(fx.near.sum()) == N else
                                                                "; the others end at metastable mixtures or do not converge"),
              f"capacity (Theorem 5 at ε = 0, error ≤ τ = half the smallest pattern distance = {tau:.3g}): up to {nm} "
              f"patterns at Δ = Δ_min; β needed for all {N}: {bn_txt}; retrieved in one step from noisy starts: "
              f"{retrieved}/{N}"]
    return doc, lines


def figures(geo: Geometry, upd: Update, st: Starts, ret: Retrieval, E, *, beta: float, label: str,
             name: str | None) -> dict:
    """``--report``'s figures: the one-step error against its bound and the energy; the error against β."""
    import torch

    from numerics import hopfield as nh
    from numerics import precision as npr

    ee, bb, dd, P, noisy = ret.e0.clone(), ret.b0.clone(), geo.Delta.clone(), geo.P, st.noisy

    def _fig():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
        o = torch.argsort(dd)
        ax[0].semilogy(dd[o].numpy(), bb[o].clamp_min(1e-300).numpy(), "o-", ms=3, label="Theorem-5 bound")
        ax[0].semilogy(dd[o].numpy(), ee[o].clamp_min(1e-300).numpy(), "x", label="measured ‖f(x_i) − x_i‖")
        ax[0].set_xlabel("separation Δ_i")
        ax[0].legend()
        ax[0].set_title("one-step retrieval error")
        ax[1].plot(E.numpy()[:, : min(E.shape[1], 30)], lw=0.8)
        ax[1].set_xlabel("update")
        ax[1].set_title("energy along the update")
        return fig

    def _fig_beta():
        import matplotlib.pyplot as plt

        betas = beta * np.logspace(-1, 1, 13)
        curves = {"modern update X softmax(βXᵀξ)": lambda b: nh.modern_update(noisy, P, float(b))}
        if upd.fobj is not None and upd.three:
            def yours(b, who=name or "the update"):  # the user's code at other β: its sys.exit / exceptions leave
                from proofs_checks.sanity._loader import user_code  # this figure undrawn, no more

                with user_code(label, f"{who} at β = {b:.3g}"):
                    return torch.as_tensor(upd.fobj(noisy.clone(), P.clone(), float(b))).to(torch.float64)

            curves[f"your update {name or ''}"] = yours
        fig, ax = plt.subplots(figsize=(5, 3.5))
        floor = npr.unit_roundoff(torch.float64) * geo.M  # float64 rounding of the retrieved pattern: an exact 0
        for lab, fn in curves.items():                    # would squash the axis to 1e-300
            with torch.no_grad():
                me = [float((fn(b) - P).norm(dim=-1).max()) for b in betas]
            ax.loglog(betas, np.maximum(me, floor), "o-", ms=3, label=lab)
        ax.axvline(beta, color="k", lw=0.6, ls=":")
        ax.axhline(floor, color="0.6", lw=0.6, ls="--", label=f"u64·M = {floor:.2g} (errors below drawn here)")
        ax.set_ylim(bottom=floor / 3)
        ax.set_xlabel("β")
        ax.set_ylabel("max one-step error from the noisy starts")
        ax.set_title("retrieval error against β", fontsize=9)
        ax.legend(fontsize=7)
        return fig

    return {"retrieval_and_energy": _fig, "retrieval_error_vs_beta": _fig_beta}
