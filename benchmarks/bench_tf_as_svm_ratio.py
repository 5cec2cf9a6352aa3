"""TF-as-SVM: this project's ``local_converge`` against the reference code, timed in ONE run.

The reference (umich-sota/TF-as-SVM: ``base.py`` and the code cells of ``local_converge.ipynb``) is
read from a checkout you name and executed as published, nothing of it copied here: its set-up cells,
then its training loop with ``RUN`` set to ``--ref-seeds`` (each seed is independent work of the same
size, so the 100-seed time is the per-seed time × 100; the plotting cells are not run). Ours:
:func:`proofs_checks.reproduce.tf_as_svm.local_converge` at the notebook's full size (100 seeds × 2000
iterations, W and (K,Q)+ridge, Att-SVMs in both norms). The two alternate (ours, reference, ours,
...) so that a change of the machine's load hits both; CPU seconds are reported beside wall seconds
(the machine may be shared: the CPU ratio is the load-independent one). Imports are not timed on
either side: the reference's set-up cells import its libraries (torch, cvxpy) before its loop, and
ours imports its solvers' (``numerics.att_svm_direct``: SciPy's optimize, Clarabel) before the rounds.

Run: ``python -m benchmarks.bench_tf_as_svm_ratio --reference PATH/TF-as-SVM [--ref-seeds 4] [--rounds 2]``
(``make bench`` runs it when ``$TF_AS_SVM_REFERENCE`` names a checkout, else says it skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), _cpu()
    fn()
    return time.perf_counter() - w0, _cpu() - c0


def reference_runner(ref_dir: Path, seeds: int):
    """The notebook's set-up cells executed once; returns a callable running its training loop for
    ``seeds`` seeds (as published: per seed W and (K,Q), 2000 SGD steps, two cvxpy solves each)."""
    import matplotlib

    matplotlib.use("Agg")
    nb = json.loads((ref_dir / "local_converge.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    loop = next(i for i, c in enumerate(cells) if c.lstrip().startswith("for run in range(RUN)"))
    sys.path.insert(0, str(ref_dir))
    env: dict = {"__name__": "tf_as_svm_reference"}
    for c in cells[:loop]:
        exec(compile(c, "local_converge.ipynb", "exec"), env)  # noqa: S102 (the named reference checkout)
    env["RUN"] = seeds
    import numpy as np

    for k in ("sfx_probs", "W_fro_corrs", "W_nuc_corrs"):
        env[k] = np.zeros((2, seeds, env["ITN"]))
    code = compile(cells[loop], "local_converge.ipynb", "exec")

    def run():
        import torch

        torch.manual_seed(0)
        exec(code, env)  # noqa: S102

    return run


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=os.environ.get("TF_AS_SVM_REFERENCE"),
                    help="a checkout of umich-sota/TF-as-SVM (default: $TF_AS_SVM_REFERENCE)")
    ap.add_argument("--ref-seeds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv if argv is not None else [])
    if a.reference is None or not (Path(a.reference) / "local_converge.ipynb").is_file():
        print("skipped: no checkout of umich-sota/TF-as-SVM (--reference PATH or $TF_AS_SVM_REFERENCE)")
        return
    a.reference = Path(a.reference)
    import torch

    import numerics.att_svm_direct  # noqa: F401 - its solvers' libraries, imported untimed as the reference's are
    from proofs_checks.reproduce.tf_as_svm import local_converge

    torch.set_num_threads(1)
    ref = reference_runner(a.reference, a.ref_seeds)
    ours_w, ours_c, ref_w, ref_c, parts = [], [], [], [], []
    for _ in range(a.rounds):
        holder = {}
        w, c = _timed(lambda: holder.setdefault("lc", local_converge(100, 2000)))
        ours_w.append(w)
        ours_c.append(c)
        parts.append(holder["lc"]["seconds"])
        w, c = _timed(ref)
        ref_w.append(w * 100 / a.ref_seeds)
        ref_c.append(c * 100 / a.ref_seeds)
    ow, oc, rw, rc = (statistics.median(x) for x in (ours_w, ours_c, ref_w, ref_c))
    print(f"rounds {a.rounds}; reference: {a.ref_seeds} seeds per round, scaled to 100; torch threads 1 "
          f"(ours solves its Att-SVMs on {holder['lc']['workers']} threads)\n")
    print("| what | ours (s) | reference code, 100 seeds (s) | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| local_converge, wall (median of {a.rounds}) | {ow:.2f} | {rw:.1f} | {rw / ow:.0f}× |")
    print(f"| local_converge, CPU (median of {a.rounds}) | {oc:.2f} | {rc:.1f} | {rc / oc:.0f}× |")
    print(f"| ours: training / Att-SVMs (last round, wall) | {parts[-1]['train']:.2f} / {parts[-1]['svm']:.2f} | | |")
    print(f"\nper round, wall: ours {', '.join(f'{x:.2f}' for x in ours_w)} s; reference (scaled) "
          f"{', '.join(f'{x:.1f}' for x in ref_w)} s")
    print(f"per round, CPU: ours {', '.join(f'{x:.2f}' for x in ours_c)} s; reference (scaled) "
          f"{', '.join(f'{x:.1f}' for x in ref_c)} s")


if __name__ == "__main__":
    main(sys.argv[1:])
