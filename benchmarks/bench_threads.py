"""Threads under load: a small trained check with tverify's thread setting against one thread.

Each configuration runs the same workload in a fresh Python process while ``--load`` busy processes
(``while 1: pass``) hold the cores, as a new user's machine shared with other work would:

* ``torch default``: torch's own thread count (one per core), nothing pinned (what ``tverify`` did
  before ``proofs_checks.threads``);
* ``tverify default``: :func:`proofs_checks.threads.pin` with nothing set (the cores this process may
  use; OpenMP told to sleep when idle);
* ``OMP_NUM_THREADS=1``: the variable exported, as ``make test`` does.

Workloads: ``train`` (600 Adam steps of an 8-wide two-layer network in float64 on 256 points, the
size of the suite's small trained checks) and, with ``--cli``, ``tverify run CLAIM --quick`` through the
real command line. Reported: wall seconds (median of ``--repeat``), CPU seconds of the child, and the
ratio to ``OMP_NUM_THREADS=1`` of the same run, with the unloaded time of a fixed reference
workload (``ref``: the ``train`` workload, one thread, no load) as the machine's speed.

Run: ``python -m benchmarks.bench_threads [--load 2] [--repeat 3] [--cli svm.gd_direction]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TRAIN = """
import time, torch
torch.manual_seed(0)
t0 = time.perf_counter()
g = torch.Generator().manual_seed(0)
x = torch.randn(256, 8, generator=g, dtype=torch.float64)
y = torch.sin(x.sum(1, keepdim=True))
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for _ in range(600):
    opt.zero_grad()
    loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(f"{time.perf_counter() - t0:.4f} {torch.get_num_threads()} {float(loss):.6e}")
"""


def _child(mode: str, workload: str, cli: str | None) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                             "OPENBLAS_NUM_THREADS", "TVERIFY_THREADS",
                                                             "OMP_WAIT_POLICY")}
    env["PYTHONPATH"] = str(ROOT)
    if mode == "omp1":
        env["OMP_NUM_THREADS"] = "1"
    if workload == "train":
        pre = "from proofs_checks.threads import pin; pin()\n" if mode == "tverify" else ""
        cmd = [sys.executable, "-c", pre + _TRAIN]
    else:
        cmd = [str(Path(sys.executable).with_name("tverify")), "run", cli, "--quick", "--no-progress"]
        if mode == "torch":  # the command before it pinned: threads from torch's default
            cmd = [sys.executable, "-c", "import sys, torch; torch.set_num_threads(torch.get_num_threads());"
                   "from proofs_checks import threads; threads.pin = lambda *a, **k: None;"
                   "from proofs_checks.cli import main; main(sys.argv[1:])", "run", cli, "--quick", "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode not in (0, 3):
        raise SystemExit(f"{cmd}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return wall, cpu, out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", default=None, metavar="CLAIM", help="also time `tverify run CLAIM --quick`")
    a = ap.parse_args(argv if argv is not None else [])
    ref = statistics.median(_child("omp1", "train", None)[0] for _ in range(a.repeat))
    print(f"machine speed: reference workload (train, 1 thread, no load) {ref:.2f} s wall; "
          f"{os.cpu_count()} cores, affinity {len(os.sched_getaffinity(0))}, load {a.load} busy processes\n")
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(a.load)]
    try:
        workloads = [("train", None)] + ([("cli", a.cli)] if a.cli else [])
        print("| workload | setting | wall s (median) | CPU s | ratio to OMP_NUM_THREADS=1 | child says |")
        print("|---|---|---:|---:|---:|---|")
        for wl, cli in workloads:
            rows = {}
            for mode in ("omp1", "tverify", "torch"):
                runs = [_child(mode, wl, cli) for _ in range(a.repeat)]
                rows[mode] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[-1][2])
            base = rows["omp1"][0]
            names = {"omp1": "OMP_NUM_THREADS=1", "tverify": "tverify default", "torch": "torch default"}
            label = "train 600×8" if wl == "train" else f"tverify run {cli} --quick"
            for mode, (wall, cpu, said) in rows.items():
                print(f"| {label} | {names[mode]} | {wall:.2f} | {cpu:.2f} | {wall / base:.2f} | {said[:40]} |")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    ref2 = statistics.median(_child("omp1", "train", None)[0] for _ in range(a.repeat))
    print(f"\nmachine speed after: reference workload {ref2:.2f} s wall")


if __name__ == "__main__":
    main(sys.argv[1:])
