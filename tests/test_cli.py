"""The CLI (in-process, and through the real entry point in a subprocess for --help): exit codes, --json schema, usage errors as one line, the store,
the catalogue (docs/CATALOGUE.md and docs/catalogue.json up to date; list/show without torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    """Every subprocess gets its own results store (never the user's ~/.cache/tverify)."""
    s = tmp_path / "store"
    monkeypatch.setenv("TVERIFY_STORE", str(s))
    return s


def tverify(*args: str, cwd: Path | None = None, env: dict | None = None, real: bool = False
            ) -> subprocess.CompletedProcess:
    """``tverify ARGS`` with its exit code, stdout and stderr. In this process by default (each
    subprocess paid ≈ 5 s of imports: torch, SymPy, cvxpy; the worker has them already), in the
    folder ``cwd`` and with the environment ``env``; ``real=True`` runs the installed entry point
    (``python -m proofs_checks``) in a subprocess, as the help tests do."""
    if real:
        return subprocess.run([sys.executable, "-m", "proofs_checks", *args], capture_output=True, text=True,
                              cwd=cwd or ROOT, timeout=600, env=env)
    from tests.cli_helpers import invoke

    old_cwd, old_env = os.getcwd(), dict(os.environ)
    try:
        os.chdir(cwd or ROOT)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        code, out, err = invoke(*args)
    finally:
        os.chdir(old_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(old_env)
    return subprocess.CompletedProcess(["tverify", *args], code, out, err)


def _one_line_error(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("tverify: error:")


def test_help_everywhere(store):
    for args in ([], ["run"], ["list"], ["show"], ["report"], ["mutants"], ["check"]):
        p = tverify(*args, "--help", real=True)
        assert p.returncode == 0, (args, p.stderr)
        assert "Usage" in p.stdout


@pytest.mark.parametrize("args", [[], ["check"]])
def test_no_arguments_prints_the_help(args, store):
    """`tverify` alone prints the whole help as help (many lines on stdout), not a folded error."""
    p = tverify(*args)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage:") and len(p.stdout.splitlines()) > 8 and "Commands:" in p.stdout
    assert p.stderr == ""


def test_unknown_claim_is_usage_error(store):
    p = tverify("run", "no.such.claim")
    _one_line_error(p)
    assert "no.such.claim" in p.stderr


@pytest.mark.parametrize("args", [
    ["run", "--device", "tpu"], ["run", "--seed", "abc"], ["run", "--seed", "-1"], ["show", "no.such"], ["frobnicate"],
    ["run", "attn.softmax_simplex", "--quick", "--full"], ["mutants", "attn.softmax_simplex", "--quick", "--full"],
    ["report", "attn.softmax_simplex", "--quick", "--full"], ["show", "attn.*"], ["list", "--docs-dir", "x"],
    ["run", "attn.softmax_simplex", "--json"],
])
def test_bad_arguments_exit_2(args, store):
    _one_line_error(tverify(*args))


def test_device_cuda_without_cuda(tmp_path, store):
    """--device cuda without CUDA: a usage error before anything runs; with --allow-skip the claims
    with a device check are 'incomplete' (exit 1), never verified."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("machine has CUDA; the no-CUDA path is not reachable here")
    # opt.adam: a claim with trained checks that is cheap without them (issue 46: icl.gamma_n_global_min's
    # derivation and checks took ≈ 7 s; the device refusal is the same for every claim with a device check)
    p = tverify("run", "opt.adam", "--quick", "--device", "cuda", cwd=tmp_path)
    _one_line_error(p)
    assert "--allow-skip" in p.stderr
    p = tverify("run", "--quick", "--device", "cuda", "--allow-skip", "--json", "-", "--no-progress",
                "opt.adam", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-2000:]
    (r,) = json.loads(p.stdout)["results"]
    assert r["status"] == "incomplete"
    trained = [c for c in r["checks"] if c["layer"] == "trained"]
    assert trained and all(c["status"] == "skipped" and "CUDA" in c["skip_reason"] for c in trained)


def test_list_json(store):
    p = tverify("list", "--json")
    assert p.returncode == 0, p.stderr
    items = json.loads(p.stdout)
    assert {"id", "kind", "title", "source", "checks", "mutants"} <= set(items[0])
    assert {"name", "layer", "description"} <= set(items[0]["checks"][0])


def test_list_json_refuses_a_pattern_as_path(tmp_path, store):
    """`list --json attn.*` would write a file named attn.*: refused, nothing written."""
    p = tverify("list", "--json", "attn.*", cwd=tmp_path)
    _one_line_error(p)
    assert [q.name for q in tmp_path.iterdir()] == ["store"] or not (tmp_path / "attn.*").exists()
    p = tverify("list", "attn", "--json=" + str(tmp_path / "l.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(json.loads((tmp_path / "l.json").read_text())) >= 11


def test_run_json_schema_and_store(tmp_path, store):
    out = tmp_path / "out.json"
    p = tverify("run", "attn.softmax_simplex", "--quick", "--json", str(out), "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["mode"] == "quick" and doc["seed"] == 0
    (r,) = doc["results"]
    assert r["id"] == "attn.softmax_simplex" and r["status"] == "verified" and r["kind"] == "identity"
    c = r["checks"][0]
    assert {"name", "layer", "status", "error", "tolerance", "justification", "seeds", "sizes", "device", "seconds"} <= set(c)
    assert {"obligations", "provenance", "legend"} <= set(r)
    # the result went to the store, not to the current folder
    assert (store / "last" / "attn.softmax_simplex.json").is_file()
    assert not (tmp_path / ".tverify").exists()
    # show prints the last result recorded by that run and says where it looked
    s = tverify("show", "attn.softmax_simplex", cwd=tmp_path)
    assert s.returncode == 0 and "last result: verified" in s.stdout
    s = tverify("show", "attn.softmax_simplex", "--full", cwd=tmp_path)
    assert s.returncode == 0 and "looked in" in s.stdout
    j = json.loads(tverify("show", "attn.softmax_simplex", "--json", cwd=tmp_path).stdout)
    assert j["last_result"]["status"] == "verified"
    assert j["last_result_path"] == str(store / "last" / "attn.softmax_simplex.json")
    # --store elsewhere: nothing there yet, and show says where it looked
    other = tmp_path / "other-store"
    s = tverify("--store", str(other), "show", "attn.softmax_simplex", "--json", cwd=tmp_path)
    j = json.loads(s.stdout)
    assert j["last_result"] is None and j["last_result_path"] == str(other / "last" / "attn.softmax_simplex.json")


def test_show_lists_obligations_steps_and_assumptions(store):
    p = tverify("show", "attn.softmax_simplex", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["obligations"] and all({"name", "passed", "residual", "method"} <= set(o) for o in j["obligations"])
    assert {s["how"] for s in j["derivation"]} <= {"derived", "assumed", "argued"}
    own = [s["text"] for s in j["derivation"] if s["how"] == "assumed"]  # then the inherited ones, prefixed
    assert j["assumptions"][:len(own)] == own and all(a.startswith("(inherited from ") for a in j["assumptions"][len(own):])
    text = tverify("show", "attn.softmax_simplex", "--full").stdout
    for word in ("obligations", "assumptions", "[derived]", "[assumed]", "legend", "provenance", "[symbolic]", "looked in"):
        assert word in text, word


def test_unwritable_explicit_store_is_usage_error(tmp_path, store):
    f = tmp_path / "afile"
    f.write_text("x")
    p = tverify("run", "attn.softmax_simplex", "--quick", "--store", str(f / "sub"), cwd=tmp_path)
    _one_line_error(p)
    assert "store" in p.stderr


def test_unwritable_default_store_warns_and_runs(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    env = {k: v for k, v in os.environ.items() if k != "TVERIFY_STORE"}
    env["XDG_CACHE_HOME"] = str(f)
    p = tverify("run", "attn.softmax_simplex", "--quick", "--no-progress", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if ln.startswith("tverify: warning:")]
    assert len(warn) == 1 and "not writable" in warn[0]


@pytest.mark.integration(reason="the CLI over a whole group of claims at default sizes (minutes)")
def test_group_a_verifies_through_the_cli(tmp_path, store):
    """Acceptance of the spine issue: every group-A claim verified (errata: stated form refuted)."""
    p = tverify("run", "attn.*", "--quick", "--json", "-", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    ids = {r["id"]: r["status"] for r in doc["results"]}
    assert len(ids) == 11, sorted(ids)
    assert set(ids.values()) == {"verified"}, ids
    for r in doc["results"]:
        if r["kind"] == "erratum":
            assert any(c["status"] == "failed" for c in r["stated_checks"]), r["id"]


def test_mutants_kill_matrix_json(tmp_path, store):
    p = tverify("mutants", "attn.softmax_simplex", "--quick", "--json", "-", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["mode"] == "quick" and doc["total"] == doc["killed"] == len(doc["mutants"]) >= 3
    assert "overall" in doc["summary"] and "claims" in doc["summary"]
    for m in doc["mutants"]:
        assert m["mode"] == "quick" and m["killed"] and m["rejected_by_layer"]
        expected = {"counterexample"} if m["kind"] == "hypothesis dropped" else {"jacobian_vs_sympy", "simplex_and_jacobian"}
        assert {c["check"] for c in m["checks"]} == expected  # every check ran (a statement mutant: its counterexample)
    assert "symbolic" in p.stderr and "numeric" in p.stderr  # the table went to stderr (JSON on stdout)


# ------------------------------------------------------------------------------------------------
# the catalogue


def test_catalogue_markdown_is_up_to_date():
    """docs/CATALOGUE.md is what `tverify list --markdown` writes: the rendering of docs/catalogue.json
    (with the hypotheses' computed counterexamples), which test_catalogue_json_is_up_to_date holds to
    the registry as it is."""
    from proofs_checks.output import catalogue

    want = catalogue.render_markdown(json.loads((ROOT / "docs" / "catalogue.json").read_text(encoding="utf-8")))
    have = (ROOT / "docs" / "CATALOGUE.md").read_text(encoding="utf-8")
    assert have == want, "docs/CATALOGUE.md is out of date: run `tverify list --markdown`"


def test_catalogue_json_is_up_to_date():
    """docs/catalogue.json was generated from the sources as they are (fingerprint) and lists the
    registry's claims as they are; list/show read it instead of importing the claim modules."""
    from proofs_checks.output import catalogue
    from proofs_checks.registry import select

    doc = json.loads((ROOT / "docs" / "catalogue.json").read_text(encoding="utf-8"))
    assert doc["fingerprint"] == catalogue.source_fingerprint(), \
        "docs/catalogue.json is out of date: run `tverify list --markdown`"
    from proofs_checks.runner import _builtin

    live = [catalogue.entry(c) for c in select() if _builtin(c)]  # a claim another test registered is not built in
    assert [{k: v for k, v in e.items() if k != "derivation"} for e in doc["claims"]] == live
    assert all("derivation" in e for e in doc["claims"])


def test_catalogue_select_agrees_with_registry():
    from proofs_checks.output import catalogue
    from proofs_checks.registry import UnknownClaimError, select

    entries = [catalogue.entry(c) for c in select()]
    for pats in ([], ["attn.*"], ["icl"], ["*.adam", "svm"], ["attn.softmax_simplex"]):
        assert [e["id"] for e in catalogue.select_entries(entries, pats)] == [c.id for c in select(pats)]
    for bad in (["nope"], ["attn.*", "zzz.*"]):
        with pytest.raises(UnknownClaimError) as a:
            select(bad)
        with pytest.raises(catalogue.UnknownPatternError) as b:
            catalogue.select_entries(entries, bad)
        assert str(a.value) == str(b.value)


def test_list_and_show_do_not_import_the_claim_modules(store):
    """With the catalogue up to date, list and show answer without torch, SymPy or the claims."""
    from proofs_checks.output import catalogue

    if catalogue.load_fresh() is None:
        pytest.skip("docs/catalogue.json is out of date (test_catalogue_json_is_up_to_date says so)")
    code = ("import sys\nfrom proofs_checks.cli import main\n"
            "for argv in (['list'], ['show', 'icl.gamma_n_global_min'], ['list', '--json']):\n"
            "    try:\n        main(argv)\n    except SystemExit as e:\n        assert e.code == 0, e.code\n"
            "heavy = sorted(m for m in ('torch', 'sympy', 'cvxpy', 'scipy', 'numpy', 'proofs_checks.registry') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stderr, p.stderr.splitlines()[-1]


def test_stale_catalogue_falls_back_to_the_registry_and_caches(tmp_path, monkeypatch, capsys):
    """Sources changed since docs/catalogue.json: list and show load the registry, give the same
    answers, and keep what they computed in the store's cache (the next call reads it)."""
    from proofs_checks.output import catalogue
    from proofs_checks.cli import main

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(catalogue, "source_fingerprint", lambda **kw: "f" * 64)

    def run(*argv):
        with pytest.raises(SystemExit) as e:
            main(list(argv))
        out = capsys.readouterr().out
        assert e.value.code == 0, out
        return json.loads(out)

    listed = run("list", "attn", "--json")
    assert [e["id"] for e in listed][:1] == ["attn.softmax_simplex"]
    cache = tmp_path / "store" / "cache" / ("catalogue-" + "f" * 20 + ".json")
    assert cache.is_file()
    shown = run("show", "attn.softmax_simplex", "--json")
    # (built now, or read from docs/catalogue.json, fresh for the built-in sources, which this test leaves alone)
    assert (shown["derivation_from"] == "computed now" or "catalogue.json" in shown["derivation_from"]) and shown["obligations"]
    from proofs_checks.sealed import read_sealed

    cached = json.loads(read_sealed(cache, cache.parent))  # (sealed: only tverify's own cache is read back)
    assert next(e for e in cached["claims"] if e["id"] == "attn.softmax_simplex")["derivation"]["obligations"]
    again = run("show", "attn.softmax_simplex", "--json")
    assert str(cache) in again["derivation_from"]
    assert again["derivation"] == shown["derivation"] and again["obligations"] == shown["obligations"]


def test_lazy_package_names_are_not_submodules():
    """proofs_checks exports its names lazily (so list/show need no SymPy); a submodule with the
    same name as an export would replace it once imported (compare.py did: now comparisons.py)."""
    import pkgutil

    import proofs_checks

    subs = {m.name for m in pkgutil.iter_modules(proofs_checks.__path__)}
    assert not subs & set(proofs_checks._WHERE), subs & set(proofs_checks._WHERE)
    from proofs_checks import Check, compare, register  # noqa: F401

    assert callable(compare) and not isinstance(compare, type(proofs_checks))


def test_the_check_topics_are_the_sanity_modules_that_define_a_command():
    """``tverify check``'s subcommands (console.SANITY_TOPICS) are every module of proofs_checks.sanity defining a
    click ``command``, and only those (44b F3: the parts, attention_render and the like, were listed as checks)."""
    import ast
    import pkgutil

    import proofs_checks.sanity as pkg
    from proofs_checks.console import SANITY_TOPICS

    def defines_command(path: str) -> bool:
        tree = ast.parse(open(path, encoding="utf-8").read())
        return any(isinstance(n, ast.FunctionDef) and n.name == "command" or
                   isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "command" for t in n.targets)
                   for n in tree.body)

    found = {m.name.replace("_", "-") for m in pkgutil.iter_modules(pkg.__path__)
             if not m.name.startswith("_") and defines_command(f"{pkg.__path__[0]}/{m.name}.py")}
    assert found == set(SANITY_TOPICS)
