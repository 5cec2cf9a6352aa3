"""Run every ``benchmarks/bench_*.py`` module and print their Markdown tables.

Usage: ``python -m benchmarks.run [NAME ...]`` (names without the ``bench_`` prefix).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import benchmarks


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if n.removeprefix("bench_") in argv]
    for name in names:
        mod = importlib.import_module(f"benchmarks.{name}")
        print(f"\n## {name}\n", flush=True)
        t0 = time.perf_counter()
        mod.main()
        print(f"\n({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
