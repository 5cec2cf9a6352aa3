"""``tverify survey --quick`` over the whole catalogue with the installs cached (target: under 5
minutes on the 2-core development machine). Run: ``python -m benchmarks.bench_survey [CACHE_DIR]``;
the first run fills the cache (its time is printed too, but it is not the measured number).

Recorded (2-core shared machine, one torch thread, cache warm): see docs/survey.md, "Speed".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def survey(cache: str, out: Path) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "proofs_checks", "survey", "--quick", "--no-progress", "--cache-dir", cache,
                        "--out", str(out), "--json", "-", "--force"], capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(p.stderr)
    return dt, json.loads(p.stdout)


def main() -> None:
    cache = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".tverify" / "survey-cache")
    with tempfile.TemporaryDirectory() as d:
        first, _ = survey(cache, Path(d) / "a")
        warm, doc = survey(cache, Path(d) / "b")
    rows = doc["rows"]
    print(f"| what | seconds |\n|---|---:|\n| first run (fills the cache when empty) | {first:.1f} |\n"
          f"| `tverify survey --quick`, {len(rows)} entries, installs cached | {warm:.1f} |")
    print("| slowest entries | " + ", ".join(f"{r['name']} {r.get('seconds', 0):.1f}"
                                           for r in sorted(rows, key=lambda r: -r.get("seconds", 0))[:4]) + " |")
    print("summary:", doc["summary"])


if __name__ == "__main__":
    main()
