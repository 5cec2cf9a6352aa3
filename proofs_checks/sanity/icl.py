"""``tverify check icl``: closed forms of the trained LSA for your Λ, N, M; a freshly trained batch of
full-parameter LSAs compared with them; or your own LSA weights tested against Γ_N.

Exit codes: 0 verdict ok, 1 the trained model / your weights do not match, 2 bad input (one line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np

from theory import icl as ti
from theory.validation import InputError, as_spd_matrix

__all__ = ["command", "parse_lambda", "load_weights"]


def parse_lambda(text: str) -> np.ndarray:
    """``"1,2,3"`` → diag(1, 2, 3); otherwise a path to a ``.npy`` or text matrix file."""
    p = Path(text)
    if p.suffix in (".npy", ".txt", ".csv") or p.exists():
        if not p.exists():
            raise InputError(f"Lambda file not found: {text}")
        try:
            arr = np.load(p) if p.suffix == ".npy" else np.loadtxt(p, delimiter="," if p.suffix == ".csv" else None)
        except (ValueError, OSError) as exc:
            raise InputError(f"cannot read Lambda from {text}: {exc}") from None
        return as_spd_matrix(np.atleast_1d(arr), "Lambda")
    try:
        vals = [float(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise InputError(f"--lambda must be comma-separated numbers (a diagonal) or a matrix file, got {text!r}") from None
    if not vals:
        raise InputError("--lambda is empty")
    return as_spd_matrix(np.asarray(vals), "Lambda")


_PV_KEYS = ("Wpv", "W_PV", "WPV", "W_pv", "pv")
_KQ_KEYS = ("Wkq", "W_KQ", "WKQ", "W_kq", "kq")


def load_weights(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Read ``W^{PV}, W^{KQ}`` from a ``.npz`` (keys Wpv/W_PV and Wkq/W_KQ) or a torch ``.pt`` file
    (a dict / state_dict with such keys, possibly prefixed like ``attn.Wpv``)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"weights file not found: {path}")
    if p.suffix == ".npz":
        try:
            data = dict(np.load(p))
        except (ValueError, OSError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from None
    elif p.suffix in (".pt", ".pth"):
        import torch

        try:
            obj = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for a bad file
            raise InputError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
        if hasattr(obj, "state_dict"):
            obj = obj.state_dict()
        if not isinstance(obj, dict):
            raise InputError(f"{path} must hold a dict or state_dict with W_PV and W_KQ")
        data = {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)) for k, v in obj.items()}
    else:
        raise InputError(f"weights must be a .npz or .pt file, got {path}")

    def pick(keys, what):
        for k, v in data.items():
            if k.split(".")[-1] in keys:
                return np.asarray(v, dtype=np.float64)
        raise InputError(f"{path} has no {what} (looked for keys {', '.join(keys)}; found {', '.join(data) or 'none'})")

    return pick(_PV_KEYS, "W_PV"), pick(_KQ_KEYS, "W_KQ")


def _fmt(a) -> str:
    return np.array2string(np.asarray(a, dtype=float), precision=5, suppress_small=True)


@click.command("icl")
@click.option("--lambda", "lam", required=True, metavar="DIAG|FILE",
              help='Covariance Λ: a diagonal "1,2,3" or a .npy/.txt/.csv matrix file.')
@click.option("--N", "N", type=int, required=True, help="Training context length N.")
@click.option("--M", "M", type=int, default=None, help="Test context length M (default N).")
@click.option("--weights", type=click.Path(dir_okay=False), default=None,
              help="Your trained LSA weights (.pt or .npz with W_PV and W_KQ) to test against Γ_N.")
@click.option("--tol", type=float, default=1e-2, show_default=True,
              help="Relative tolerance for --weights (w22·W11 vs Γ_N^{-1} and predictions).")
@click.option("--seeds", type=int, default=8, show_default=True, help="Seeds trained in one batch.")
@click.option("--prompts", type=int, default=32768, show_default=True, help="Sampled training prompts per seed.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def command(lam, N, M, weights, tol, seeds, prompts, seed, device, as_json):
    """Closed forms of the trained LSA (Zhang–Frei–Bartlett) for your Λ, N, M; a trained batch of
    full-parameter LSAs (or your --weights) measured against them, and a verdict.

    \b
    Examples:
      tverify check icl --lambda "1,2,3" --N 20 --M 10
      tverify check icl --lambda cov.npy --N 20 --weights my_lsa.pt --json
    """
    from numerics import icl as ni
    from numerics.torch_utils import resolve_device

    L = parse_lambda(lam)
    if N < 1:
        raise InputError(f"--N must be ≥ 1, got {N}")
    M = N if M is None else M
    if M < 1:
        raise InputError(f"--M must be ≥ 1, got {M}")
    if seeds < 2 or prompts < 16:
        raise InputError("--seeds must be ≥ 2 and --prompts ≥ 16")
    if not (tol > 0 and math.isfinite(tol)):
        raise InputError(f"--tol must be positive, got {tol}")
    resolve_device(device)
    G = ti.gamma_n(L, N)
    Gi = np.linalg.inv(G)
    closed = {
        "d": int(L.shape[0]), "N": N, "M": M,
        "Gamma_N": G.tolist(), "Gamma_N_inv": Gi.tolist(),
        "w22_limit": math.sqrt(float(np.linalg.norm(Gi))),
        "loss_minimum": float(ti.loss_minimum(L, N)),
        "linear_task_risk_M": float(ti.linear_task_risk(L, N, M)),
        "risk_M_to_infinity": float(ti.linear_task_risk(L, N, 10**12)),
    }
    out: dict = {"closed_forms": closed}
    if weights:
        Wpv, Wkq = load_weights(weights)
        meas = ni.measure_weights(L, N, Gi, Wpv, Wkq, M=M, seed=seed, device=device)
        ok = max(meas["rel_err_B"]) <= tol and max(meas["rel_rms_prediction"]) <= tol
        out["weights"] = {"file": weights, **meas, "tol": tol}
        verdict = ("ok: your weights match Γ_N^{-1} within tol" if ok else
                   "mismatch: your weights are not the Γ_N^{-1} predictor within tol")
    else:
        res = ni.train_lsa(L, N, n_seeds=seeds, n_prompts=prompts, steps=300, seed=seed, device=device)
        S = res.B.shape[0]
        mean = res.B.mean(0)
        se = res.B.std(0, ddof=1) / math.sqrt(S)
        z = float(np.max(np.abs(mean - Gi) / se))
        meas = ni.measure_weights(L, N, Gi, res.Wpv, res.Wkq, M=M, seed=seed + 1, device=device)
        ok = z <= 6.0
        out["trained"] = {"seeds": S, "prompts_per_seed": prompts, "seconds": res.seconds, "device": res.device,
                          "mean_B": mean.tolist(), "max_z_vs_Gamma_inv": z,
                          "rel_err_mean_B": float(np.linalg.norm(mean - Gi) / np.linalg.norm(Gi)),
                          "rel_err_B_per_seed": meas["rel_err_B"], "rel_rms_prediction_per_seed": meas["rel_rms_prediction"],
                          "risk_M_measured": meas["risk_M"]}
        verdict = ("ok: trained w22·W11 agrees with Γ_N^{-1} within 6 standard errors across seeds" if ok else
                   "mismatch: trained w22·W11 differs from Γ_N^{-1} by more than 6 standard errors")
    out["verdict"] = verdict
    out["ok"] = bool(ok)
    if as_json:
        click.echo(json.dumps(out, indent=1))
    else:
        click.echo(f"Λ (d = {closed['d']}), N = {N}, M = {M}")
        click.echo(f"Γ_N = (1+1/N)Λ + tr(Λ)/N·I =\n{_fmt(G)}")
        click.echo(f"Γ_N^{{-1}} (= w22·W11 at the global minimum) =\n{_fmt(Gi)}")
        click.echo(f"gradient-flow limit w22 = ‖Γ_N^{{-1}}‖_F^{{1/2}} = {closed['w22_limit']:.6g}")
        click.echo(f"min population loss ½[trΛ − tr(Γ_N^{{-1}}Λ²)] = {closed['loss_minimum']:.6g}")
        click.echo(f"linear-task risk at M = {M}: {closed['linear_task_risk_M']:.6g} (M → ∞: {closed['risk_M_to_infinity']:.6g})")
        if weights:
            w = out["weights"]
            click.echo(f"your weights: ‖w22·W11 − Γ_N^{{-1}}‖/‖Γ_N^{{-1}}‖ = {max(w['rel_err_B']):.3g}, "
                       f"prediction rel. RMS diff = {max(w['rel_rms_prediction']):.3g}, other blocks max |.| = {w['max_other_block']:.3g}, "
                       f"measured risk at M = {w['risk_M']:.6g} (tol {tol:g})")
        else:
            t = out["trained"]
            click.echo(f"trained: {t['seeds']} seeds × {prompts} prompts on {t['device']} in {t['seconds']:.1f} s; "
                       f"mean w22·W11 rel. error {t['rel_err_mean_B']:.3g}, max z {t['max_z_vs_Gamma_inv']:.2f}; "
                       f"measured risk at M = {t['risk_M_measured']:.6g}")
            click.echo(f"mean w22·W11 =\n{_fmt(t['mean_B'])}")
        click.echo(f"verdict: {verdict}")
    raise SystemExit(0 if ok else 1)
