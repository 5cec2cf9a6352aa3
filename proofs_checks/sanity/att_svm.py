"""``tverify check att-svm --data file.npz``: certify the Att-SVM of your data, train normalised GD
on it and say whether the direction converges to the certified solution.

The file holds arrays ``X`` (n,T,d), ``z`` (n,d), ``y`` (n,) with entries ±1 and ``v`` (d,).
Mistakes (missing arrays, wrong shapes, NaN, tied or infeasible instances) are one line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from numerics import att_svm as ns
from theory.validation import InputError, as_finite_array


def _load(path: str) -> ns.AttSVMInstance:
    p = Path(path)
    if not p.exists():
        raise InputError(f"no such file: {path}")
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as exc:  # a corrupt or non-npz file
        raise InputError(f"{path} is not a readable .npz file: {exc}") from None
    missing = [k for k in ("X", "z", "y", "v") if k not in data.files]
    if missing:
        raise InputError(f"{path} lacks array(s) {', '.join(missing)} (need X (n,T,d), z (n,d), y (n,), v (d,))")
    X = as_finite_array(data["X"], "X", ndim=3)
    n, T, d = X.shape
    z = as_finite_array(data["z"], "z", shape=(n, d))
    y = as_finite_array(data["y"], "y", shape=(n,))
    v = as_finite_array(data["v"], "v", shape=(d,))
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise InputError("y must contain labels ±1 only")
    opt = ns.optimal_tokens(X, y, v)
    return ns.AttSVMInstance(X, z, y, v, opt, ns.token_scores(X, y, v), "user")


@click.command("att-svm")
@click.option("--data", "data_path", required=True, help=".npz with X (n,T,d), z (n,d), y (n,), v (d,)")
@click.option("--iters", default=2000, show_default=True, type=click.IntRange(1, 10**6), help="normalised-GD iterations")
@click.option("--lr", default=0.1, show_default=True, type=click.FloatRange(min=0, min_open=True), help="NGD step size")
@click.option("--seeds", default=8, show_default=True, type=click.IntRange(1, 4096), help="initialisations, one batch")
@click.option("--device", default="cpu", show_default=True, help="cpu or cuda")
@click.option("--json", "as_json", is_flag=True, help="print a JSON document instead of text")
def command(data_path, iters, lr, seeds, device, as_json):
    """Certified Att-SVM solution, the NGD correlation curve, and the verdict."""
    inst = _load(data_path)
    fro = ns.solve_att_svm(inst.X, inst.z, inst.opt, "fro")
    nuc = ns.solve_att_svm(inst.X, inst.z, inst.opt, "nuc")
    r = ns.train(inst, method="ngd", lr=lr, iters=iters, B=seeds, init=0.01, opt=inst.opt,
                 targets={"fro": fro.W}, device=device)
    marks = sorted({k for k in (1, 10, 100, 1000, 10000, 100000, iters) if k <= iters})
    curve = {k: float(np.mean(r.corr["fro"][k - 1])) for k in marks}
    final = r.corr["fro"][-1]
    selected_opt = bool(np.all(r.selected == inst.opt))
    local = None
    if not selected_opt:  # converged elsewhere: compare with the Att-SVM of the selected set
        try:
            ids = r.selected[int(np.argmin(final))]
            local = float(ns.correlation(r.W[int(np.argmin(final))], ns.solve_att_svm(inst.X, inst.z, ids).W))
        except InputError:
            local = None
    verdict = ("converges to W^mm" if final.min() >= 0.99 else
               ("converges to a locally optimal token set" if local is not None and local >= 0.99 else
                "not converged within the iteration budget"))
    doc = {
        "n": int(inst.X.shape[0]), "T": int(inst.X.shape[1]), "d": int(inst.X.shape[2]),
        "opt": inst.opt.tolist(),
        "fro": {"norm": fro.value, "status": fro.status, "support": fro.support_tokens(),
                "max_kkt_residual": fro.max_residual(), "duality_gap": fro.duality_gap},
        "nuc": {"norm": nuc.value, "status": nuc.status, "max_kkt_residual": nuc.max_residual(),
                "corr_with_fro": float(ns.correlation(fro.W, nuc.W))},
        "training": {"method": "ngd", "lr": lr, "iters": iters, "seeds": seeds, "corr_curve": curve,
                     "final_corr_min": float(final.min()), "final_norm_mean": float(r.norm[-1].mean()),
                     "opt_mass_mean": float(r.opt_mass[-1].mean()), "selected_is_opt": selected_opt,
                     "iterations_to_0.99_max": int(r.iterations_to(0.99, "fro").max()),
                     "local_set_corr": local},
        "verdict": verdict,
    }
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"Att-SVM (Frobenius): ‖W^mm‖_F = {fro.value:.6g}, status {fro.status}, "
               f"max KKT residual {fro.max_residual():.2e}, duality gap {fro.duality_gap:.2e}")
    click.echo(f"  support constraints (sequence, token): {fro.support_tokens()}")
    click.echo(f"Att-SVM (nuclear): ‖W^mm_*‖_* = {nuc.value:.6g}, max KKT residual {nuc.max_residual():.2e}, "
               f"corr with Frobenius {doc['nuc']['corr_with_fro']:.4f}")
    click.echo(f"NGD (lr {lr}, {seeds} inits): mean corr(W_k, W^mm) by iteration:")
    for k, c in curve.items():
        click.echo(f"  k={k:>7d}  {c:.6f}")
    click.echo(f"  ‖W_k‖ at the end {doc['training']['final_norm_mean']:.4g}; softmax mass on opt "
               f"{doc['training']['opt_mass_mean']:.6f}; iterations to 0.99: {doc['training']['iterations_to_0.99_max']}")
    click.echo(f"verdict: {verdict}")
