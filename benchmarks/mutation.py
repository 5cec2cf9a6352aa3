"""Code-level mutation testing of ``theory/`` and ``numerics/`` with mutmut (``make mutation``).

Usage::

    python benchmarks/mutation.py [MODULE ...] [--workdir DIR] [--max-children N] [--json PATH]
    make mutation                                   # the default (fast) scope below
    make mutation MUTATE="numerics/icl.py theory/icl.py"   # another scope

What it does:

1. copies the tracked files of the working tree (their current contents, so uncommitted edits
   count; ``git add`` a new test file first) into a scratch directory (default
   ``/tmp/tverify-mutation``), so that mutmut's ``mutants/`` copy and caches never land in the repo;
2. narrows ``[tool.mutmut]`` in the scratch ``pyproject.toml`` to the requested modules
   (``only_mutate``; ``source_paths`` stays ``theory/`` + ``numerics/`` so every import resolves);
3. runs ``mutmut run`` with one BLAS/torch thread per worker (mutmut's timeout is a CPU-time
   limit, so multi-threaded BLAS turns slow-but-correct mutants into false "timeout"s) and the
   derandomized ``ci`` hypothesis profile (the same examples for the clean run and every mutant);
4. prints the score and every surviving mutant with its diff.

The score is ``killed / tested`` where *tested* excludes mutants that no selected test executes
("no tests"; reported separately). Timeouts are counted as detected (a mutant that makes a
test run 30x past its measured time is caught) but listed, since load can cause false ones.

Limitations of mutmut 3 that shape the result (see benchmarks/RESULTS.md): decorated functions
(``@lru_cache`` derivations in ``theory/``, ``@property``, ``@dataclass`` bodies) are not mutated;
module-level code (constants, tables) is not mutated; a function called only at import time (e.g.
to build a constant) has no test mapped to it and is reported as "no tests".

The default scope (the shared input validation and the LoRA layer, 230 mutants) runs in about
30 minutes on the 2-core CI-sized machine; the full ``theory/`` + ``numerics/`` scope has about
12,000 mutants (numerics/attention.py alone 1,495) and takes many hours there: widen it with MUTATE.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_SCOPE = [  # measured 2026-11-22 on 2 loaded cores: 23.7 + 8.5 min (benchmarks/RESULTS.md)
    "theory/validation.py",
    "numerics/lora.py",
]

# mutmut's statuses that count as "detected".
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}


def _venv_bin(name: str) -> str:
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else name


def copy_worktree(dest: Path) -> None:
    """Copy the tracked files of the repository (their working-tree contents) into ``dest``.

    Untracked files are left out: on a shared working tree they may be someone's unfinished work
    (a failing new test makes mutmut's clean run, and so the whole run, fail). Add a new test file
    with ``git add`` before running.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-c", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.is_file():  # deleted but still tracked
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)


def narrow_scope(pyproject: Path, modules: list[str]) -> None:
    """Add ``only_mutate = [...]`` to the ``[tool.mutmut]`` table of the scratch pyproject."""
    text = pyproject.read_text()
    if "[tool.mutmut]" not in text:
        raise SystemExit("pyproject.toml has no [tool.mutmut] section")
    text = re.sub(r"(?m)^only_mutate\s*=.*\n", "", text)
    line = "only_mutate = [" + ", ".join(json.dumps(m) for m in modules) + "]\n"
    pyproject.write_text(text.replace("[tool.mutmut]\n", "[tool.mutmut]\n" + line, 1))


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true`` lines ``    name: status`` -> {name: status}."""
    out = {}
    for raw in text.splitlines():
        m = re.match(r"^\s+(\S+): (.+)$", raw)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _results(mutmut: str, work: Path, env: dict) -> dict[str, str]:
    res = subprocess.run([mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True,
                         check=True)
    return parse_results(res.stdout)


def _mutmut_config(work: Path) -> dict:
    import tomllib

    return tomllib.loads((work / "pyproject.toml").read_text())["tool"]["mutmut"]


def refresh_tests(work: Path) -> None:
    """Copy the repository's tracked ``tests/`` files over the workdir's (mutmut re-copies them into
    ``mutants/`` and collects stats for new tests only). Files the test selection ignores are skipped."""
    ignored = {a.split("=", 1)[1] for a in _mutmut_config(ROOT).get("pytest_add_cli_args_test_selection", [])
               if a.startswith("--ignore=")}
    files = subprocess.run(["git", "ls-files", "-c", "-z", "tests"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file() and rel not in ignored:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, work / rel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="files to mutate (default: " + " ".join(DEFAULT_SCOPE) + ")")
    ap.add_argument("--workdir", default="/tmp/tverify-mutation", help="scratch copy (default: %(default)s)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the existing workdir and mutmut's results; refresh only tests/ (new tests get "
                         "their stats collected incrementally) and test the mutants not yet checked")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="with --reuse: re-test the previous run's survivors (after strengthening the tests)")
    ap.add_argument("--json", dest="json_path", help="write the summary and survivors as JSON here")
    args = ap.parse_args(argv)
    modules = args.modules or DEFAULT_SCOPE
    # `make mutation MUTATE="a.py b.py"` arrives as one argument
    modules = [m for arg in modules for m in arg.split()]
    for m in modules:
        if not (ROOT / m).is_file() or not m.startswith(("theory/", "numerics/")):
            raise SystemExit(f"not a module under theory/ or numerics/: {m}")

    work = Path(args.workdir)
    mutmut = _venv_bin("mutmut")
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               HYPOTHESIS_PROFILE="ci", PYTHONHASHSEED="0", MPLBACKEND="Agg")
    rerun: list[str] = []
    if args.reuse and (work / "mutants").is_dir():
        refresh_tests(work)
        if args.rerun_survivors:
            before = _results(mutmut, work, env)
            rerun = sorted(k for k, v in before.items() if v not in DETECTED | {"no tests", "skipped", "not checked"})
            print(f"re-testing {len(rerun)} previous survivor(s)")
            if not rerun:
                return 0
    else:
        copy_worktree(work)
    narrow_scope(work / "pyproject.toml", modules)

    print(f"mutmut over {len(modules)} module(s) in {work}: {' '.join(modules)}", flush=True)
    t0 = time.perf_counter()
    run = subprocess.run([mutmut, "run", "--max-children", str(args.max_children), *rerun], cwd=work, env=env)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        print(f"mutmut run exited with {run.returncode}", file=sys.stderr)
        return run.returncode

    statuses = _results(mutmut, work, env)
    counts = Counter(statuses.values())
    total = len(statuses)
    no_tests = counts.get("no tests", 0)
    skipped = counts.get("skipped", 0)
    tested = total - no_tests - skipped
    detected = sum(counts.get(s, 0) for s in DETECTED)
    survivors = sorted(k for k, v in statuses.items() if v not in DETECTED | {"no tests", "skipped"})
    version = subprocess.run([mutmut, "--version"], capture_output=True, text=True).stdout.strip()

    print(f"\n{version}; scope: {' '.join(modules)}")
    print(f"wall time {wall / 60:.1f} min with {args.max_children} worker(s)")
    print("counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    score = detected / tested if tested else float("nan")
    print(f"score: {detected}/{tested} detected = {100 * score:.1f}% "
          f"(timeouts {counts.get('timeout', 0)} counted as detected; {no_tests} 'no tests' excluded)")
    diffs = {}
    for name in survivors + sorted(k for k, v in statuses.items() if v == "no tests"):
        show = subprocess.run([mutmut, "show", name], cwd=work, env=env, capture_output=True, text=True)
        diffs[name] = show.stdout
    if survivors:
        print(f"\n{len(survivors)} surviving mutant(s):")
        for name in survivors:
            print(f"\n--- {name} ({statuses[name]})")
            print("\n".join(ln for ln in diffs[name].splitlines()
                            if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(dict(
            version=version, scope=modules, wall_s=wall, counts=counts, tested=tested, detected=detected,
            score=score, statuses=statuses, diffs=diffs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
