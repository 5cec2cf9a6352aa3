"""The checks' fork server with and without its frozen heap (``proofs_checks/sanity/_server_ready.py``).

Each arm is a fresh Python process that makes ``--checks`` quick ``check attention`` runs through the API (isolated:
each in a child forked from the fork server) on the README's causal attention, after one warm-up check that starts
the server:

* ``frozen``: the fork server as shipped (its last preloaded module takes the guard's first snapshot and calls
  ``gc.freeze()``);
* ``unfrozen``: the same with that module left out of ``PRELOAD`` (what the server did before).

The arms alternate ``--rounds`` times, so that a change in the machine's load meets both. Reported: the median wall
seconds of one check in each arm, and their ratio (frozen / unfrozen) per round and over all.

Run: ``python -m benchmarks.bench_fork_server [--checks 8] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ARM = """
import json, os, sys, time
sys.path.insert(0, {examples!r})
import torch
torch.set_num_threads(1)
from proofs_checks.api import check_attention
from proofs_checks.sanity import _isolate
if os.environ.get("BENCH_UNFROZEN"):
    _isolate.PRELOAD.remove("proofs_checks.sanity._server_ready")
from my_attn import MyAttention
m = MyAttention()
check_attention(m, mode="quick", causal=True)  # starts the fork server
walls = []
for _ in range({checks}):
    t0 = time.perf_counter()
    r = check_attention(m, mode="quick", causal=True)
    walls.append(time.perf_counter() - t0)
    assert r.ok, r
print(json.dumps(walls))
"""


def _arm(frozen: bool, checks: int) -> list[float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("BENCH_UNFROZEN", None)
    if not frozen:
        env["BENCH_UNFROZEN"] = "1"
    code = _ARM.format(examples=str(ROOT / "examples"), checks=checks)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    every = {True: [], False: []}
    for i in range(a.rounds):
        got = {}
        for frozen in (False, True) if i % 2 else (True, False):
            got[frozen] = statistics.median(_arm(frozen, a.checks))
            every[frozen].append(got[frozen])
        print(f"round {i + 1}: frozen {got[True]:.3f} s, unfrozen {got[False]:.3f} s per check, "
              f"ratio {got[True] / got[False]:.3f}")
    f, u = statistics.median(every[True]), statistics.median(every[False])
    print(f"median of rounds: frozen {f:.3f} s, unfrozen {u:.3f} s per quick check attention; ratio {f / u:.3f}")


if __name__ == "__main__":
    main()
