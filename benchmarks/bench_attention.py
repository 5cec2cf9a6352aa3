"""``tverify check attention`` at default sizes on a D = 64, 4-head causal module (plain torch ops,
``tests/data/attention_corpus.py:Plain``): the whole check (forward and gradients over the lengths
1 … 257, unit/large/huge logits) as a ratio to one forward pass of the module at the largest probe
length, both measured in this run, plus the absolute times (the issue's target: under 10 s of CPU
including the import of torch; the import is timed in a fresh interpreter).

Run: ``python -m benchmarks.bench_attention``; prints a Markdown table.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "data"))
from attention_corpus import Plain  # noqa: E402

from proofs_checks.sanity.attention import run_attention  # noqa: E402


def main() -> None:
    m = Plain(64, 4).double()
    x = torch.randn(3, 257, 64, dtype=torch.float64)
    with torch.no_grad():
        m(x)
        t0 = time.perf_counter()
        for _ in range(20):
            m(x)
        fwd = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    r = run_attention(Plain(64, 4), causal=True)
    check = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    imp = time.perf_counter() - t0
    print("| quantity | value |\n|---|---|")
    print(f"| verdict | {r.outcome} ({len(r.properties)} properties) |")
    print(f"| one forward pass, batch 3 × T = 257 × D = 64 | {fwd * 1e3:.2f} ms |")
    print(f"| whole check (in process) | {check:.2f} s |")
    print(f"| ratio check / forward | {check / fwd:.0f} |")
    print(f"| import torch (fresh interpreter) | {imp:.2f} s |")
    print(f"| check + import | {check + imp:.2f} s |")


if __name__ == "__main__":
    main()
