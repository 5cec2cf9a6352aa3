"""Resolution of every check (issue 29): the smallest deviation from the truth each check still
rejects, at quick and default sizes, beside the target of its kind.

Targets at default CPU sizes: exact and rounding comparisons ≤ 1e-9 relative; quadrature and ODE
checks ≤ 1e-6; Monte Carlo checks (a ``z_test`` with a sampled estimate) ≤ 0.5 %; trained checks
≤ 1 %. Checks whose resolution is stated in named units of their own (a leak, a slope, a margin)
have no relative target; their units are printed. A check that misses its target says why in its
justification.

Run: ``python -m benchmarks.bench_resolution [--modes quick,default] [PATTERN ...]``; prints a
Markdown table (and ``--json PATH`` writes the rows).
"""

from __future__ import annotations

import argparse
import json
import re
import time

from proofs_checks import RunContext
from proofs_checks.comparisons import REL_UNITS
from proofs_checks.registry import select
from proofs_checks.runner import run_claim

#: checks whose reference is a quadrature or an ODE solve (target 1e-6), by claim:check
QUADRATURE_ODE = {"perf.favor_unbiased:quadrature_moments", "icl.gamma_n_global_min:gradient_flow_limit",
                  "lyap.backward_construction:energy_balance", "icl.general_target_risk:risk_vs_sympy"}


def target(cid: str, check: dict) -> tuple[str, float | None]:
    """The kind of a check and the target of its kind (None: resolution in units of its own, no target)."""
    units = str(check.get("resolution_units") or "")
    just = str(check.get("justification") or "")
    if units.startswith("exact"):
        return "exact", 0.0
    statistical = "false_failure_probability" in (check.get("details") or {}) or bool(
        re.search(r"standard error|\bSE\b|z-score", just))
    if check.get("layer") == "trained":
        return "trained", 1e-2
    if statistical:
        return "Monte Carlo", 5e-3
    if f"{cid}:{check['name']}" in QUADRATURE_ODE:
        return "quadrature/ODE", 1e-6
    if units.startswith(REL_UNITS):
        return "exact/rounding", 1e-9
    return "own units (bound, rate or solver certificate)", None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("patterns", nargs="*")
    ap.add_argument("--modes", default="quick,default", help="comma-separated sizes")
    ap.add_argument("--json", dest="json_path")
    a = ap.parse_args(argv if argv is not None else [])
    a.modes = a.modes.split(",")
    claims = select(a.patterns) if a.patterns else select()
    table: dict[tuple[str, str], dict] = {}
    for mode in a.modes:
        t0 = time.perf_counter()
        for c in claims:
            r = run_claim(c, RunContext(mode=mode, seed=0), with_derivation=False).to_json()
            for ch in r["checks"]:
                row = table.setdefault((c.id, ch["name"]), {"claim": c.id, "check": ch["name"], "layer": ch["layer"]})
                row[mode] = ch.get("resolution")
                row[f"{mode}_status"] = ch.get("status")
                row["units"] = ch.get("resolution_units")
                row["kind"], row["target"] = target(c.id, ch)
        print(f"<!-- {mode}: {time.perf_counter() - t0:.0f} s -->", flush=True)
    last = a.modes[-1]
    print("| claim | check | layer | kind | " + " | ".join(f"resolution ({m})" for m in a.modes) + " | target | met at "
          f"{last} | units |")
    print("|---|---|---|---|" + "---:|" * len(a.modes) + "---:|---|---|")
    for row in table.values():
        res = row.get(last)
        met = "–" if row["target"] is None else ("yes" if res is not None and res <= row["target"] else "**no**")
        units = "relative" if row["units"] == REL_UNITS else row["units"][:90]
        cells = " | ".join("–" if row.get(m) is None else f"{row[m]:.2g}" for m in a.modes)
        tgt = "–" if row["target"] is None else f"{row['target']:g}"
        print(f"| {row['claim']} | {row['check']} | {row['layer']} | {row['kind']} | {cells} | {tgt} | {met} | {units} |")
    if a.json_path:
        with open(a.json_path, "w") as f:
            json.dump(list(table.values()), f, indent=1)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
