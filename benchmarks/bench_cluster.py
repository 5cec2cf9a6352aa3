"""In-process against ``--cluster local:W``: wall time of a sweep and of ``tverify run``.

Each workload runs twice through the real command line (a fresh ``tverify`` process each time, so
both pay their imports; the cluster run also pays starting W worker processes and their imports),
and the two JSON documents are compared with the wall times, dates and command lines left out: the
numbers must be identical (timings measured inside checks, keys ending in ``seconds``, aside). Reported: seconds in-process, seconds on the cluster, and the ratio
cluster / in-process (below 1: the cluster is faster).

Workloads (small by default; the machine may be shared):

* ``sweep``: ``tverify sweep icl.linear_task_risk --grid "N=5,10,20 M=5,20" --quick`` (3 trainings,
  6 rows, grouped into 3 tasks by N);
* ``run``: ``tverify run CLAIMS --quick`` (default: a subset of cheap and trained claims; pass
  ``--claims`` for others, ``--mode default`` for default sizes).

Run: ``python -m benchmarks.bench_cluster [--workers W] [--mode quick|default] [--claims ...]``; prints
a Markdown table. On a machine with many cores try ``--workers 8`` or ``--workers 16``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.cli_helpers import without_volatile

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = {"seconds", "created", "command", "cluster"}
DEFAULT_CLAIMS = ("attn.softmax_simplex", "attn.causal_mask", "attn.scaling_variance", "attn.forms_agree",
                  "icl.population_loss", "icl.loss_minimum", "icl.nonconvex", "icl.gamma_n_global_min",
                  "icl.linear_task_risk", "hop.modern_energy")


def _norm(d):
    return without_volatile(d, VOLATILE)


def _tverify() -> list[str]:
    exe = Path(sys.executable).with_name("tverify")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "proofs_checks"]


def timed(args: list[str], json_path: Path) -> tuple[float, int, dict]:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t0 = time.perf_counter()
    p = subprocess.run([*_tverify(), *args, "--json", str(json_path), "--no-progress"], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - t0
    if p.returncode not in (0, 1, 3):
        raise SystemExit(f"tverify {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return secs, p.returncode, json.loads(json_path.read_text())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="local cluster workers (local:W)")
    ap.add_argument("--mode", choices=("quick", "default"), default="quick")
    ap.add_argument("--claims", nargs="*", default=list(DEFAULT_CLAIMS))
    ap.add_argument("--grid", default="N=5,10,20 M=5,20")
    ap.add_argument("--skip", choices=("sweep", "run"), action="append", default=[])
    a = ap.parse_args(argv)
    mode = [] if a.mode == "default" else [f"--{a.mode}"]
    work = []
    if "sweep" not in a.skip:
        work.append(("sweep icl.linear_task_risk", ["sweep", "icl.linear_task_risk", "--grid", a.grid, *mode]))
    if "run" not in a.skip:
        work.append((f"run {len(a.claims)} claims", ["run", *a.claims, *mode]))
    print(f"cpu cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start, workers {a.workers}, "
          f"mode {a.mode}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1 (set by this script)')}\n")
    print("| workload | in-process s | local:%d s | ratio cluster/in-process | same numbers |" % a.workers)
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        for name, args in work:
            t_in, c_in, d_in = timed(args, Path(tmp) / "in.json")
            t_cl, c_cl, d_cl = timed([*args, "--cluster", f"local:{a.workers}"], Path(tmp) / "cl.json")
            same = _norm(d_in) == _norm(d_cl) and c_in == c_cl
            print(f"| {name} | {t_in:.1f} | {t_cl:.1f} | {t_cl / t_in:.2f} | {'yes' if same else 'NO'} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
