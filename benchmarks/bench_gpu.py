"""The trained layer at larger sizes, CPU against CUDA in one run (issue "Independent layers that
discriminate", GPU part).

Run on a machine with CUDA: ``python -m benchmarks.bench_gpu --part icl --out FILE.json`` and
``--part claims``; without CUDA only the CPU rows run (``--device cpu``). Prints Markdown tables and
writes every number to ``--out`` (JSON).

``icl``      Full-parameter LSAs trained on sampled prompts (``numerics.icl.train_lsa``: Adam + L-BFGS
             through the exact sufficient statistics) at d = 10 and d = 20, many seeds as one batched
             tensor, on CPU and on CUDA. The check is that of ``icl.gamma_n_global_min``'s trained
             layer: the seed mean of ``w22·W11`` against Γ_N^{-1} entrywise in units of its standard
             error across seeds, normalised by the check's allowance of 6 SE. The same number for each
             planted mutant of the claim (its Γ_N replaced) is the mutant's margin: > 1 rejects it.
``claims``   ``tverify run`` of every claim with a trained check at default and ``--full`` sizes with
             ``--device cpu`` and ``--device cuda`` (wall time, statuses), and ``tverify mutants`` of
             the same claims with ``--device cuda --full`` (each mutant's best margin among the
             trained checks).
``flex``     ``tverify check attention`` of FlexAttention modules (the correct ALiBi score_mod, tanh
             softcap and sliding-window mask_mod of tests/test_attention_modern.py, and two wrong
             score_mods) on CPU, where flex_attention has no backward (gradients reported not
             available), and on CUDA, where the gradient comparison runs.
``dense``    Dense associative memory (hop.dense_capacity): the fixed fraction of stored patterns
             at larger d than the claim's CPU sizes, on the device, for the finite-size analysis.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch

from numerics import icl as ni
from theory import icl as ti


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _anisotropic(d: int, seed: int) -> np.ndarray:
    """Λ with eigenvalues spread over [1, 5] in a random basis (the claim's configurations are of this kind)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (q * np.linspace(1.0, 5.0, d)) @ q.T


def _margins(B: np.ndarray, L: np.ndarray, N: int) -> dict:
    """Seed-mean of B against Γ_N^{-1} (form) and against each mutant's, in units of 6 SE (max over entries)."""
    from proofs_checks.claims import load_all
    from proofs_checks.registry import get_claim

    load_all()
    claim = get_claim("icl.gamma_n_global_min")
    S = B.shape[0]
    mean, se = B.mean(0), B.std(0, ddof=1) / math.sqrt(S)
    out = {}
    for name, form in [("form", claim.form)] + [(m.name, m.form) for m in claim.mutants]:
        Gi = np.linalg.inv(form(L, N))
        out[name] = float(np.max(np.abs(mean - Gi) / se) / 6.0)
    out["rel_err_of_mean"] = float(np.linalg.norm(mean - np.linalg.inv(ti.gamma_n(L, N))) / np.linalg.norm(np.linalg.inv(ti.gamma_n(L, N))))
    return out


def icl_rows(devices: list[str]) -> list[dict]:
    configs = [  # (d, N, seeds, prompts per seed, Adam steps, devices)
        (10, 5, 16, 2**16, 300, ("cpu", "cuda")),  # CPU: the suite trains single-threaded
        (10, 5, 128, 2**20, 300, ("cuda",)),
        (20, 5, 32, 2**20, 300, ("cuda",)),
    ]
    rows = []
    for d, N, S, P, steps, devs in configs:
        L = _anisotropic(d, 7 + d)
        for dev in devs:
            if dev not in devices:
                continue
            ni.train_lsa(L, N, n_seeds=2, n_prompts=64, steps=2, seed=9, device=dev, lbfgs_steps=2)  # warm-up
            _sync(dev)
            t0 = time.perf_counter()
            res = ni.train_lsa(L, N, n_seeds=S, n_prompts=P, steps=steps, seed=1000 + d, device=dev)
            _sync(dev)
            secs = time.perf_counter() - t0
            row = {"d": d, "N": N, "seeds": S, "prompts_per_seed": P, "steps": steps, "device": dev, "seconds": secs,
                   "margins": _margins(res.B, L, N), "final_loss_mean": float(res.final_loss.mean())}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _trained_claims() -> list[str]:
    from proofs_checks.claims import load_all
    from proofs_checks.registry import registry

    load_all()
    return [c.id for c in registry if any(ch.layer == "trained" for ch in c.checks)]


def _tverify(args: list[str], json_path: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "proofs_checks", *args, "--json", json_path, "--no-progress"],
                          capture_output=True, text=True)
    secs = time.perf_counter() - t0
    try:
        with open(json_path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        doc = {"error": proc.stderr[-2000:]}
    return secs, doc


def claim_rows(devices: list[str], tmp: str, modes: tuple[str, ...] = ("default", "full"),
               mutants: bool = True, each: bool = False) -> dict:
    ids = _trained_claims()
    out = {"claims": ids, "runs": [], "mutants": None}
    groups = [[i] for i in ids] if each else [ids]  # each: one `tverify run` per claim, a row as each ends
    for mode in modes:
        for dev in devices:
            flag = ["--full"] if mode == "full" else []
            for group in groups:
                tag = group[0] if each else "all"
                secs, doc = _tverify(["run", *group, *flag, "--device", dev],
                                     os.path.join(tmp, f"run-{mode}-{dev}-{tag}.json"))
                statuses = {r["id"]: r["status"] for r in doc.get("results", [])}
                row = {"mode": mode, "device": dev, "seconds": secs, "statuses": statuses,
                       "claim_seconds": {r["id"]: r.get("seconds") for r in doc.get("results", [])},
                       "error": doc.get("error")}
                out["runs"].append(row)
                print(json.dumps(row), flush=True)
    if "cuda" in devices and mutants:
        secs, doc = _tverify(["mutants", *ids, "--full", "--device", "cuda"], os.path.join(tmp, "mutants.json"))
        out["mutants"] = {"seconds": secs, "doc": doc}
        print(json.dumps({"mutants_seconds": secs}), flush=True)
    return out


FLEX_CASES = [("alibi", ["--positional", "alibi"]), ("softcap", ["--softcap", "20"]),
              ("sliding", ["--causal", "--window", "4"]), ("alibi_wrong", ["--positional", "alibi"]),
              ("softcap_wrong", ["--softcap", "20"])]


def flex_rows(devices: list[str], tmp: str) -> list[dict]:
    """Each FlexAttention module of tests/test_attention_modern.py checked on each device: the outcome,
    each property's status, and the gradient comparison's error against its tolerance where it ran."""
    from tests.test_attention_modern import MODULES

    path = os.path.join(tmp, "flex_modules.py")
    with open(path, "w") as fh:
        fh.write(MODULES)
    rows = []
    for name, flags in FLEX_CASES:
        for dev in devices:
            secs, doc = _tverify(["check", "attention", "--module", f"{path}:{name}", "--quick", *flags,
                                  "--device", dev], os.path.join(tmp, f"flex-{name}-{dev}.json"))
            props = {p["name"]: p for p in doc.get("properties", [])}
            g = props.get("gradients_match_reference", {})
            row = {"module": name, "flags": flags, "device": dev, "seconds": secs, "outcome": doc.get("outcome"),
                   "statuses": {k: p.get("status") for k, p in props.items()},
                   "gradients": {"status": g.get("status"), "detail": str(g.get("detail", ""))[:300],
                                 "numbers": {k: v for k, v in (g.get("numbers") or {}).items()
                                             if isinstance(v, (int, float, str))}},
                   "verdict": str(doc.get("verdict", doc.get("error", "")))[:400]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def survey_rows(devices: list[str], tmp: str) -> list[dict]:
    """The survey's FlexAttention entries (torch only: flex-plain, flex-causal, flex-causal-scoremod), each
    run by the survey's own worker process with its declaration plus ``device``: the outcome and each
    property's status per device (the survey itself runs on the CPU)."""
    from proofs_checks.survey.catalogue import CATALOGUE

    rows = []
    for e in [e for e in CATALOGUE if e.package == "torch" and e.name.startswith("flex-")]:
        for dev in devices:
            spec = {"name": e.name, "paths": [], "package": e.package, "version": e.version, "module": e.module,
                    "adapter": e.adapter, "declare": {**e.declare, "device": dev}, "mode": "quick", "seed": 0}
            sp, rp = (os.path.join(tmp, f"survey-{e.name}-{dev}.{k}.json") for k in ("spec", "result"))
            with open(sp, "w") as fh:
                json.dump(spec, fh)
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "proofs_checks.survey.worker", sp, rp],
                                  capture_output=True, text=True)
            try:
                with open(rp) as fh:
                    res = json.load(fh)
            except (OSError, ValueError):
                res = {"status": "no-result", "why": proc.stderr[-1500:]}
            props = {p["name"]: p for p in res.get("properties") or []}
            g = props.get("gradients_match_reference", {})
            row = {"entry": e.name, "device": dev, "seconds": round(time.perf_counter() - t0, 1),
                   "status": res.get("status"), "outcome": res.get("outcome"), "why": res.get("why"),
                   "statuses": {k: p.get("status") for k, p in props.items()},
                   "gradients": {k: g.get(k) for k in ("status", "error", "tolerance", "detail")}}
            rows.append(row)
            print(json.dumps(row, default=str)[:1500], flush=True)
    return rows


def dense_rows(device: str) -> list[dict]:
    """Fixed fractions of the dense memory F(z) = z^a at larger d, N on a grid around C_most(d)."""
    from numerics import hopfield as nh

    plan = {2: [32, 64, 128, 256, 512, 1024], 3: [16, 24, 32, 48, 64, 96, 128], 4: [12, 16, 20, 24, 32, 40, 48]}
    trials = 64
    rows = []
    for a, ds in plan.items():
        dfact = math.prod(range(2 * a - 3, 0, -2))
        for d in ds:
            C = d ** (a - 1) / (2 * dfact * math.log(d))
            grid = sorted({max(2, round(C * m)) for m in (0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5)})
            fr, se = [], []
            t0 = time.perf_counter()
            for N in grid:
                P = nh.random_patterns((trials, N, d), 10_000 * a + 17 * d + N, device=device)
                chunk = max(1, int(4e8 // (trials * N * d)))
                f = nh.dense_fixed_fraction(P, "poly", a, chunk=chunk).cpu().numpy()
                fr.append(float(f.mean()))
                se.append(float(f.std(ddof=1) / math.sqrt(trials)))
            _sync(device)
            row = {"a": a, "d": d, "C_most": C, "grid": grid, "frac": fr, "se": se, "trials": trials,
                   "seconds": time.perf_counter() - t0, "device": device}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("a", "d", "seconds")}), flush=True)
    for d in (10, 12, 14, 16, 18, 20):  # F = exp: N on a grid of multiples of 2^{d/2}
        base = 2 ** (d / 2)
        grid = sorted({max(2, round(base * m)) for m in (1, 2, 4, 8, 16, 32, 64)})
        fr, se = [], []
        t0 = time.perf_counter()
        for N in grid:
            P = nh.random_patterns((trials // 4, N, d), 77_000 + 17 * d + N, device=device)
            chunk = max(1, int(4e8 // (trials // 4 * N * d)))
            f = nh.dense_fixed_fraction(P, "exp", None, chunk=chunk).cpu().numpy()
            fr.append(float(f.mean()))
            se.append(float(f.std(ddof=1) / math.sqrt(trials // 4)))
        _sync(device)
        row = {"a": "exp", "d": d, "base": base, "grid": grid, "frac": fr, "se": se, "trials": trials // 4,
               "seconds": time.perf_counter() - t0, "device": device}
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("a", "d", "seconds")}), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["icl", "claims", "dense", "flex", "survey"], required=True)
    ap.add_argument("--modes", default="default,full", help="claims: which of default,full to run")
    ap.add_argument("--no-mutants", action="store_true", help="claims: skip the tverify mutants run")
    ap.add_argument("--each", action="store_true", help="claims: one `tverify run` per claim (a row as each ends)")
    ap.add_argument("--device", choices=["cpu", "cuda", "both"], default="both")
    ap.add_argument("--out", required=True, metavar="FILE.json")
    a = ap.parse_args()
    devices = ["cpu", "cuda"] if a.device == "both" else [a.device]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if "cuda" in devices and not torch.cuda.is_available():
        sys.exit("bench_gpu: CUDA requested but not available")
    info = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    t0 = time.perf_counter()
    if a.part == "icl":
        body = icl_rows(devices)
    elif a.part == "claims":
        body = claim_rows(devices, os.path.dirname(os.path.abspath(a.out)), tuple(a.modes.split(",")),
                          not a.no_mutants, a.each)
    elif a.part == "flex":
        body = flex_rows(devices, os.path.dirname(os.path.abspath(a.out)))
    elif a.part == "survey":
        body = survey_rows(devices, os.path.dirname(os.path.abspath(a.out)))
    else:
        body = dense_rows("cuda" if "cuda" in devices else "cpu")
    info["seconds"] = time.perf_counter() - t0
    with open(a.out, "w") as fh:
        json.dump({"info": info, "rows": body}, fh, indent=1)


if __name__ == "__main__":
    main()
