"""Per-test CPU profile of the test suite (issue 46 item 1): what each test spends, in CPU seconds.

Wall-clock durations on a shared machine measure the other jobs as much as the test; CPU time does
not. This pytest plugin records, for every test (set-up + call + tear-down): wall seconds, CPU
seconds of the pytest process (``RUSAGE_SELF``) and CPU seconds of the child processes it waited for
(``RUSAGE_CHILDREN``: subprocess CLI runs, isolated plugin and module children, Dask workers), one
JSON line per test in ``$TVERIFY_PROFILE_OUT`` (each xdist worker appends its own lines).

Run the suite with it, then summarise::

    TVERIFY_PROFILE_OUT=/tmp/prof.jsonl OMP_NUM_THREADS=1 python -m pytest -p benchmarks.profile_tests \
        -m "not integration" -n 2 --dist loadgroup -q
    python -m benchmarks.profile_tests /tmp/prof.jsonl [--top 40]

The summary sorts by CPU (self + children) and puts each test in a class: ``child processes``
(children's CPU above half of the total), ``claim checks`` (tests/test_registry.py and the
derivations), ``CLI in-process`` (the CLI test modules), else ``unit/property``; the time per class,
and the fixed cost of a child (``python -c "import torch"``, the claim registry), measured the same way.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

_OUT = os.environ.get("TVERIFY_PROFILE_OUT")


def _cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _now() -> tuple[float, float, float]:
    return time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)


# RUSAGE_CHILDREN counts only the children this process waited for: the grandchildren of a forkserver (the
# isolated own-model checks' children) are missed. Where the machine offers a writable cgroup v1 ``cpuacct``
# hierarchy (a root container), each process running tests moves into a cgroup of its own, whose usage counts
# every descendant, waited for or not: the "tree" column.
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_CG: Path | None = None


def _own_cgroup() -> Path | None:
    global _CG
    if _CG is not None or not _OUT:
        return _CG
    try:
        cg = _CPUACCT / f"tverify-profile-{os.getpid()}"
        cg.mkdir(exist_ok=True)
        (cg / "cgroup.procs").write_text(str(os.getpid()))
        _CG = cg
    except OSError:
        _CG = None
    return _CG


def _tree_cpu() -> float | None:
    cg = _own_cgroup()
    try:
        return int((cg / "cpuacct.usage").read_text()) / 1e9 if cg is not None else None
    except OSError:
        return None


import pytest  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs where the test runs (an xdist worker, or the only process), around set-up, call and tear-down."""
    w0, s0, c0 = _now()
    t0 = _tree_cpu()
    yield
    if not _OUT:
        return
    w1, s1, c1 = _now()
    t1 = _tree_cpu()
    rec = {"id": item.nodeid, "wall": round(w1 - w0, 3), "self": round(s1 - s0, 3), "children": round(c1 - c0, 3),
           "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    if t0 is not None and t1 is not None:
        rec["tree"] = round(t1 - t0, 3)  # every descendant's CPU too (cgroup), the self and children included
    with open(_OUT, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_unconfigure(config):
    """The pytest process that started the workers removes their cgroups once they are empty (a cgroup
    cannot be removed by a process inside it, nor while one is)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not _OUT:
        return
    for cg in _CPUACCT.glob("tverify-profile-*"):
        try:
            cg.rmdir()
        except OSError:
            pass


def classify(rec: dict) -> str:
    mod = rec["id"].split("::")[0]
    children = max(rec["children"], rec.get("tree", 0.0) - rec["self"])
    total = rec["self"] + children
    if children > 0.5 * total and children > 0.5:
        return "child processes"
    if mod.endswith(("test_registry.py", "test_derivations.py", "test_statements.py", "test_statements_misc.py",
                     "test_statements_icl_further.py")):
        return "claim checks / derivations"
    if "cli" in mod or "hostile" in mod or "report" in mod:
        return "CLI in-process"
    return "unit/property"


def _child_cost(code: str) -> float:
    before = _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return _cpu(resource.RUSAGE_CHILDREN) - before


def summarise(path: str, top: int = 40) -> None:
    recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for r in recs:  # the cgroup's count where there is one: it includes what RUSAGE_CHILDREN misses
        r["cpu"] = max(r.get("tree", 0.0), r["self"] + r["children"])
        r["class"] = classify(r)
    recs.sort(key=lambda r: -r["cpu"])
    total = sum(r["cpu"] for r in recs)
    print(f"{len(recs)} tests, {total:.0f} CPU s in all (self {sum(r['self'] for r in recs):.0f}, children "
          f"{sum(r['children'] for r in recs):.0f}); wall summed over workers {sum(r['wall'] for r in recs):.0f} s\n")
    by: dict[str, list] = {}
    for r in recs:
        by.setdefault(r["class"], []).append(r)
    print("| class | tests | CPU s | share |")
    print("|---|---:|---:|---:|")
    for k, rs in sorted(by.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1])):
        c = sum(r["cpu"] for r in rs)
        print(f"| {k} | {len(rs)} | {c:.0f} | {c / total:.0%} |")
    mods: dict[str, float] = {}
    for r in recs:
        m = r["id"].split("::")[0]
        mods[m] = mods.get(m, 0.0) + r["cpu"]
    print("\n| module | CPU s |\n|---|---:|")
    for m, c in sorted(mods.items(), key=lambda kv: -kv[1])[:25]:
        print(f"| {m} | {c:.1f} |")
    print(f"\n| test (top {top} by CPU) | class | CPU s (self + children) | whole tree | wall s |\n|---|---|---:|---:|---:|")
    for r in recs[:top]:
        tree = f"{r['tree']:.1f}" if "tree" in r else "–"
        print(f"| `{r['id'][:110]}` | {r['class']} | {r['self']:.1f} + {r['children']:.1f} | {tree} | {r['wall']:.1f} |")
    print("\nfixed cost of one child process (CPU s): "
          f"`import torch` {_child_cost('import torch'):.2f}; "
          f"the claim registry loaded {_child_cost('from proofs_checks.registry import select; select([])'):.2f}; "
          f"`python -c pass` {_child_cost('pass'):.2f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    top = 40
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    summarise(args[0], top)
