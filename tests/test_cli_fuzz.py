"""The CLI fuzzed: hypothesis builds argument lists for every command (list, show, run, mutants,
report, check icl, check att-svm) from claim ids, globs, junk, numbers, malformed matrices, paths
to empty / truncated / wrong-type / directory / read-only targets, and option combinations.

Properties, per argument list (in-process through ``proofs_checks.cli.main``):

* no traceback, and the exit code is 0, 1, 2 or 3;
* a usage error (exit 2) is exactly one line on stderr, starting ``tverify: error:``;
* no file in the sandbox changes, appears or disappears except under the requested outputs
  (``--json PATH``, ``--out DIR``, report's default ``reports``).

Kept cheap: the only claim patterns that select anything select ``attn.softmax_simplex``, runs are
``--quick`` or fail on a usage error first, and ``check`` runs get the smallest sizes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs_checks.cli import main

# ------------------------------------------------------------------------------------------------
# the sandbox: a folder of awkward targets, rebuilt for every example

CHEAP = ["attn.softmax_simplex", "attn.softmax_sim*", "attn.softmax_simplex"]
JUNK_PATTERNS = ["no.such", "attn.zzz*", "ATTN.SOFTMAX_SIMPLEX", "../etc", "", " ", "attn..x", "é.ü", "[", "--", "-"]
PATHS = ["out.json", "new/nested/out.json", "empty.txt", "trunc.npz", "trunc.npy", "wrong.pt", "adir", "userdir",
         "ro.txt", "notes.txt", "notes.txt/sub.json", ".", "..", "-", "", "prevrep", "rep", "a file with spaces.json",
         "/dev/null", "/proc/nope/x.json"]


def build_sandbox(root: Path) -> None:
    (root / "empty.txt").write_text("")
    (root / "notes.txt").write_text("the user's notes")
    (root / "trunc.npz").write_bytes(b"PK\x03\x04\x14\x00\x00")  # a zip header and nothing else
    buf = io.BytesIO()
    np.save(buf, np.eye(3))
    (root / "trunc.npy").write_bytes(buf.getvalue()[:40])
    (root / "wrong.pt").write_text("not a torch file")
    (root / "adir").mkdir()
    (root / "adir" / "inside.txt").write_text("inside")
    (root / "userdir").mkdir()
    (root / "userdir" / "thesis.tex").write_text("years of work")
    ro = root / "ro.txt"
    ro.write_text("read-only")
    ro.chmod(0o444)
    prev = root / "prevrep"
    prev.mkdir()
    (prev / "results.json").write_text(json.dumps({"tool": "tverify", "results": []}))
    (prev / "report.md").write_text("# old report")
    np.savez(root / "badkeys.npz", A=np.zeros((2, 2)))


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            try:
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
            except OSError:
                out[str(p.relative_to(root))] = "unreadable"
    return out


def requested_outputs(argv: list[str]) -> list[str]:
    """The outputs the arguments ask for (paths relative to the sandbox, or absolute)."""
    outs, cmd = [], argv[0] if argv else ""
    for i, a in enumerate(argv):
        for opt in ("--json", "--out", "--store"):
            if a == opt and i + 1 < len(argv):
                outs.append(argv[i + 1])
            elif a.startswith(opt + "="):
                outs.append(a.split("=", 1)[1])
    if cmd == "report" and not any(a == "--out" or a.startswith("--out=") for a in argv):
        outs.append("reports")
    return [o for o in outs if o not in ("-", "")]


def touched_outside(before: dict[str, str], after: dict[str, str], root: Path, outs: list[str]) -> list[str]:
    allowed = []
    for o in outs:
        p = Path(o) if os.path.isabs(o) else root / o
        allowed.append(Path(os.path.normpath(p.absolute())))

    def ok(rel: str) -> bool:
        p = Path(os.path.normpath(root / rel))
        return any(p == a or a in p.parents for a in allowed)

    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    return sorted(k for k in changed if not ok(k))


def run_cli(argv: list[str], root: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    code: object = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code
            except BaseException:
                err.write(traceback.format_exc())
                code = "exception"
    finally:
        os.chdir(cwd)
    if code is None:
        code = 0
    return code, out.getvalue(), err.getvalue()  # type: ignore[return-value]


@pytest.fixture(scope="module")
def store_dir():
    with tempfile.TemporaryDirectory(prefix="tverify-fuzz-store-") as d:
        old = os.environ.get("TVERIFY_STORE")
        os.environ["TVERIFY_STORE"] = d
        try:
            yield d
        finally:
            if old is None:
                os.environ.pop("TVERIFY_STORE", None)
            else:
                os.environ["TVERIFY_STORE"] = old


def check_properties(argv: list[str]) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="tverify-fuzz-") as d:
        root = Path(d)
        build_sandbox(root)
        before = snapshot(root)
        code, out, err = run_cli(argv, root)
        after = snapshot(root)
        (root / "ro.txt").chmod(0o644)
        where = f"argv={argv!r}\nstdout={out[-1500:]}\nstderr={err[-3000:]}"
        assert "Traceback" not in err and code != "exception", where
        assert code in (0, 1, 2, 3), f"exit {code!r}; {where}"
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("tverify: error:"), where
        bad = touched_outside(before, after, root, requested_outputs(argv))
        assert not bad, f"touched outside the requested outputs: {bad}; {where}"
    return code, out, err


# ------------------------------------------------------------------------------------------------
# strategies

patterns = st.lists(st.sampled_from(CHEAP + JUNK_PATTERNS), max_size=2)
paths = st.sampled_from(PATHS)
numbers = st.sampled_from(["0", "1", "3", "-1", "2.5", "1e3", "abc", "", "99999999999999999999999", "nan", "0x10"])
matrices = st.sampled_from(["1,2,3", "2,0.5;0.5,1", "1,-2", "nan,1", "inf", "1;2", "1,2;3", "", "abc", "1,,2",
                            "0,0", "1e300,1e-300", "trunc.npy", "empty.txt", "adir", "notes.txt", "missing.npy"])


@st.composite
def json_opts(draw):
    return draw(st.sampled_from([[], [], ["--json", "-"], ["--json"], ["--json", draw(paths)], [f"--json={draw(paths)}"]]))


@st.composite
def run_like(draw, cmd: str):
    """run / mutants / report: at least one pattern (none would select every claim), --quick on the
    cheap claim, or a combination that must stop at a usage error before running anything. Options
    are drawn as groups (option with its value) and shuffled; a bare --json (which takes the next
    word as its path) only comes last."""
    if draw(st.integers(0, 9)) < 6:
        groups = [[draw(st.sampled_from(CHEAP))]]
    else:
        groups = [[p] for p in draw(st.lists(st.sampled_from(CHEAP + [j for j in JUNK_PATTERNS if j != "--"]),
                                             min_size=1, max_size=2))]
    groups.append(draw(st.sampled_from([["--quick"]] * 4 + [["--quick", "--full"], ["--full", "--quick"]])))
    if draw(st.booleans()):
        groups.append(["--seed", draw(numbers)])
    groups.append(draw(st.sampled_from([[], [], ["--device", "cpu"], ["--device", "cuda"], ["--device", "tpu"],
                                        ["--device", "cuda", "--allow-skip"], ["--allow-skip"]])))
    if cmd == "report":
        groups.append(draw(st.sampled_from([[], ["--out", draw(paths)], ["--out", draw(paths), "--force"],
                                            ["--out", "newrep"], ["--no-mutants"], ["--out", "prevrep", "--no-mutants"]])))
    if cmd in ("run", "report") and draw(st.booleans()):
        groups.append(["--store", draw(st.sampled_from(["notes.txt", "adir", "store-here"]))])
    if draw(st.booleans()):
        groups.append(["--no-progress"])
    json = draw(st.sampled_from([[], [], ["--json", "-"], ["--json", draw(paths)], [f"--json={draw(paths)}"], ["--json"]]))
    groups = draw(st.permutations(groups))
    return [cmd, *(a for g in groups for a in g), *json]


@st.composite
def list_show(draw):
    if draw(st.booleans()):
        args = ["list", *draw(patterns)]
        args += draw(st.sampled_from([[], [], ["--markdown", "attn.softmax_simplex"], ["--docs-dir", "adir"]]))
    else:
        args = ["show", *draw(st.lists(st.sampled_from(CHEAP + JUNK_PATTERNS + ["icl.gamma_n_global_min", "attn.*"]),
                                       max_size=2))]
        if draw(st.booleans()):
            args += ["--store", draw(paths)]
    args += draw(json_opts())
    return args


@st.composite
def check_icl(draw):
    args = ["check", "icl"]
    if draw(st.integers(0, 5)):
        args += ["--lambda", draw(st.sampled_from(["1,2,3", "2,0.5;0.5,1", "1"]) if draw(st.booleans()) else matrices)]
    if draw(st.integers(0, 5)):
        args += ["--N", draw(st.sampled_from(["2", "5", "5", "20"]) if draw(st.booleans()) else numbers)]
    for opt in ("--M", "--tol"):
        if not draw(st.integers(0, 3)):
            args += [opt, draw(numbers)]
    if not draw(st.integers(0, 3)):
        args += ["--weights", draw(st.sampled_from(["trunc.npz", "wrong.pt", "empty.txt", "adir", "missing.pt",
                                                    "badkeys.npz", "notes.txt"]))]
    args += draw(st.sampled_from([[], [], [], ["--device", "cuda"], ["--quick", "--full"], ["--max-memory", "0.000001"]]))
    args += draw(json_opts())
    # the smallest sizes last (the last value of an option wins), so a valid draw stays cheap
    return args + ["--quick", "--seeds", "1", "--prompts", "16", "--steps", "0", "--no-progress"]


@st.composite
def check_att_svm(draw):
    args = ["check", "att-svm"]
    if draw(st.integers(0, 4)):
        args += ["--data", draw(st.sampled_from(["trunc.npz", "badkeys.npz", "empty.txt", "adir", "missing.npz",
                                                 "wrong.pt", "notes.txt", ""]))]
    for opt in ("--lr", "--iters", "--seeds"):
        if draw(st.booleans()):
            args += [opt, draw(numbers)]
    args += draw(st.sampled_from([[], ["--device", "cuda"], ["--device", "tpu"]]))
    args += draw(st.sampled_from([[], ["--json"], ["--json", "-"]]))
    return args


# ------------------------------------------------------------------------------------------------
# the properties


@settings(max_examples=60, deadline=None)
@given(argv=list_show())
def test_fuzz_list_show(store_dir, argv):
    check_properties(argv)


@settings(max_examples=60, deadline=None)
@given(argv=st.sampled_from(["run", "mutants"]).flatmap(run_like))
def test_fuzz_run_mutants(store_dir, argv):
    check_properties(argv)


@settings(max_examples=40, deadline=None)
@given(argv=run_like("report"))
def test_fuzz_report(store_dir, argv):
    check_properties(argv)


@settings(max_examples=60, deadline=None)
@given(argv=st.one_of(check_icl(), check_att_svm()))
def test_fuzz_check(store_dir, argv):
    check_properties(argv)


@settings(max_examples=40, deadline=None)
@given(argv=st.lists(st.sampled_from(["list", "show", "run", "mutants", "report", "check", "icl", "att-svm", "--help",
                                      "-h", "--version", "--quick", "--full", "--json", "--out", "--store", "-", "x",
                                      "--seed", "--device", "cuda", "attn.zzz", "=", "--json=", "--frob", "--force"]),
                     max_size=5))
def test_fuzz_token_soup(store_dir, argv):
    """Any order of the CLI's own words: never a traceback, never a stray file. A list naming run,
    mutants or report anywhere (``--store --store run`` is ``run`` with no pattern) gets a final
    unknown pattern after ``--``, so that it never runs every claim."""
    if set(argv) & {"run", "mutants", "report"}:
        argv = [*argv, "--", "attn.zzz"]
    check_properties(argv)
