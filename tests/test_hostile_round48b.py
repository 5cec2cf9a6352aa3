"""Hostile pass 43, tester B (file round 48b): one test per finding; each failed on the code the pass ran against
(da26414) and passes since its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_hostile_round47b import _env, _install
from tests.tiers import moved

_TVERIFY = str(Path(sys.executable).with_name("tverify"))


def _edit_cache(path: Path, change) -> None:
    """Edit a store cache as a user might: its JSON changed in place, its seal line (if any) kept as it was."""
    text = path.read_text()
    head, _, body = text.partition("\n") if text.startswith("tverify-seal ") else ("", "", text)
    doc = json.loads(body)
    change(doc)
    path.write_text((head + "\n" if head else "") + json.dumps(doc))


def _tv(tmp_path: Path, *argv: str, timeout: int = 240, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([_TVERIFY, *argv], cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True, text=True,
                          timeout=timeout)


_COUNT_PLUGIN = '''
    from proofs_checks.plugin import Check, Claim, Mutant, exact, register


    def ok(form, ctx):
        return exact(float(form - 3), "the count")


    register(Claim(id="{cid}", title="t", statement="3", source="-", kind="identity", form=3.0,
                   no_symbolic="a count", checks=(Check("count", "numeric", ok),),
                   mutants=(Mutant("four", "wrong constant", "4", 4.0),)))
'''


# --- 43B F1: a catalogue cache in the store (cache/catalogue-<fp>.json) that is valid JSON of schema 1 but holds a
# claim entry of another shape is read as it is: `tverify list` / `show` end in a Python traceback (TypeError,
# KeyError) instead of rebuilding the cache (as for a truncated file or one holding control characters) --------------

@moved("three fresh processes, each loading the registry and probing a plugin (≈ 23 CPU s for both entries); the "
       "cache reader's refusal is pinned in-process", "tests/test_sealed.py::test_a_catalogue_cache_entry_of_another_shape_is_not_read",
       "tests/test_sealed.py::test_a_sealed_cache_reads_back_and_an_edit_does_not")
@pytest.mark.parametrize("entry", [{"id": 5}, {"id": "attn.softmax_simplex", "group": "attn"}])
def test_43b_f1_malformed_catalogue_cache_entry_is_no_traceback(tmp_path, entry):
    _install(tmp_path / "site", "h43bcnt", _COUNT_PLUGIN.format(cid="h43bcnt.three"))
    site = str(tmp_path / "site")
    r = _tv(tmp_path, "list", "attn.softmax_simplex", PYTHONPATH=site)
    assert r.returncode == 0, r.stderr[-2000:]
    caches = list((tmp_path / "store" / "cache").glob("catalogue-*.json"))
    assert caches
    for c in caches:
        _edit_cache(c, lambda doc: doc["claims"].__setitem__(0, entry))
    for argv in (("list", "attn.softmax_simplex"), ("show", "attn.softmax_simplex")):
        r = _tv(tmp_path, *argv, PYTHONPATH=site)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        assert r.returncode in (0, 2), (r.returncode, r.stderr[-2000:])


# --- 43B F3: the registry's id rule `^[a-z][a-z0-9]*\\.[a-z0-9_]+$` uses `$`, which also matches before a trailing
# newline: a plugin's claim "zzid.x\\n" is registered; `show zzid.x` then says "no claim matches 'zzid.x' (did you
# mean zzid.x ?)" and the store holds a file whose name holds a newline -------------------------------------------

def test_43b_f3_claim_id_with_a_trailing_newline_is_refused():
    from proofs_checks.plugin import Check, Claim, Mutant, exact
    from proofs_checks.registry import RegistryError

    def ok(form, ctx):
        return exact(float(form - 3), "the count")

    with pytest.raises(RegistryError):
        Claim(id="h43bid.x\n", title="t", statement="3", source="-", kind="identity", form=3.0,
              no_symbolic="a count", checks=(Check("count", "numeric", ok),),
              mutants=(Mutant("four", "wrong constant", "4", 4.0),)).validate()


# --- 43B F4: `tverify new-claim` writes its files one by one after a check that misses a path it cannot write (a
# file `tests` where the folder goes, a dangling link): exit 2 "cannot write the package there", but pyproject.toml
# and the package's modules are left behind (write_scaffold: "refuse (writing nothing)"), and a second try is then
# refused for the files the first left ---------------------------------------------------------------------------

@pytest.mark.parametrize("blocker", ["file", "dangling_link"])
def test_43b_f4_new_claim_refused_writes_nothing(tmp_path, blocker):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    if blocker == "file":
        (pkg / "tests").write_text("my notes\n")
    else:
        (pkg / "README.md").symlink_to(tmp_path / "nowhere.txt")
    before = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*"))
    r = _tv(tmp_path, "new-claim", "h43bnc.a", "--dir", str(pkg))
    after = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*"))
    if r.returncode != 0:
        assert after == before, (r.returncode, r.stderr, after)
    assert not (tmp_path / "nowhere.txt").exists()


# --- 43B F2: a plugin's pure derivation kept in the store (cache/derivations/<h>.json) is checked for its claim id,
# `info` being a dict and the files it read, not for the shape of what `info` holds: steps or obligations of another
# shape end `tverify run` / `show --full` in a Python traceback instead of the derivation being built again ---------

_PURE_PLUGIN = '''
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, matches_derivation, register


    def derive():
        b = DerivationBuilder("double")
        x = b.fact("args", (sp.Symbol("x", real=True),))[0]
        return b.done(b.step("Double", sp.expand(2 * x)))


    def sample(rng):
        return (rng.normal(),)


    register(Claim(id="h43bpure.dbl", title="2x", statement=r"f(x)=2x", source="-", kind="identity",
                   form=lambda x: 2 * x, derivation=derive, derivation_pure=True,
                   checks=(matches_derivation(derive, sample),), no_numeric="SymPy exactly",
                   mutants=(Mutant("three", "wrong constant", "3x", lambda x: 3 * x),)))
'''


@moved("three runs of a plugin claim in fresh processes, each with its checks and power rule in children (≈ 23 CPU "
       "s, 40 s wall); the kept derivation's refusal is pinned in-process",
       "tests/test_sealed.py::test_a_kept_plugin_derivation_of_another_shape_is_a_miss",
       "tests/test_sealed.py::test_a_sealed_cache_reads_back_and_an_edit_does_not")
def test_43b_f2_malformed_kept_derivation_is_no_traceback(tmp_path):
    _install(tmp_path / "site", "h43bpure", _PURE_PLUGIN)
    site = str(tmp_path / "site")
    r = _tv(tmp_path, "run", "h43bpure.dbl", "--quick", "--no-progress", PYTHONPATH=site)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    kept = list((tmp_path / "store" / "cache" / "derivations").glob("*.json"))
    assert kept
    for k in kept:
        _edit_cache(k, lambda doc: doc["info"].update(steps=[1], obligations=[None]))
    for argv in (("show", "h43bpure.dbl", "--full"), ("run", "h43bpure.dbl", "--quick", "--no-progress")):
        r = _tv(tmp_path, *argv, PYTHONPATH=site)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        assert r.returncode == 0, (argv, r.returncode, (r.stdout + r.stderr)[-2000:])


# --- 43B F5: a standard error on a full device (`2>/dev/full`, a log on a full disk) ends `run --json FILE` and
# `report --out DIR` with exit 2 AFTER the claims ran: the first progress line's failed write is taken for a failed
# write of the output, so the --json file, the report folder and the table on stdout are never written. A closed
# standard error (`2>&-`) and `--json -` with a full standard error both keep the outputs and the run's exit code
# (docs/cli.md: such a standard error "loses those human lines only") --------------------------------------------

@pytest.mark.parametrize("what", ["json", "report"])
def test_43b_f5_full_stderr_loses_only_the_human_lines(tmp_path, what):
    argv = (["run", "attn.convex_combination", "--quick", "--json", "o.json"] if what == "json" else
            ["report", "attn.convex_combination", "--quick", "--no-mutants", "--no-reproductions", "--out", "rep"])
    with open("/dev/full", "w") as full:
        r = subprocess.run([_TVERIFY, *argv], cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                           stderr=full, text=True, timeout=240)
    made = (tmp_path / "o.json") if what == "json" else (tmp_path / "rep" / "index.html")
    assert r.returncode == 0 and made.exists(), (r.returncode, r.stdout[-500:], made.exists())


# --- 43B F6: the registry sets no length on a claim id, and `report` names each claim's page after its id: a plugin's
# claim of a 260-character id runs (and every other claim with it), then the report ends "cannot write report to
# rep: File name too long", exit 2 (a usage error, after the run), the whole report lost at its end ----------------

def test_43b_f6_long_claim_id_is_refused_before_the_run_or_reported(tmp_path):
    _install(tmp_path / "site", "h43blong", _COUNT_PLUGIN.format(cid="h43blong." + "a" * 260))
    r = _tv(tmp_path, "report", "h43blong", "--quick", "--no-reproductions", "--no-progress", "--out", "rep",
            PYTHONPATH=str(tmp_path / "site"))
    assert "Traceback" not in r.stderr
    # either the id is refused where the plugin loads (nothing runs: the plugin's one warning line), or the report is
    # written
    refused = "failed to load and was skipped" in r.stderr and r.returncode == 2
    assert (tmp_path / "rep" / "index.html").exists() or refused, (r.returncode, r.stderr[-800:])


# --- 43B F7: a plugin check whose result's `details` hold an object whose __str__/__repr__ raise: the check passed,
# but its child dies sending the result and the claim is `error` "its process was ended by SIGKILL, not sent by
# tverify (the system's out-of-memory killer, a kill -9, or the code itself)": a cause that did not happen (an
# unprintable value is `<unprintable X>` everywhere else since pass 42a) -------------------------------------------

_UNPRINTABLE_DETAIL = '''
    from proofs_checks.plugin import Check, Claim, Mutant, exact, register


    class Bad:
        def __repr__(self):
            raise RuntimeError("repr")

        def __str__(self):
            raise RuntimeError("str")


    def ok(form, ctx):
        r = exact(float(form - 3), "the count")
        r.details["bad"] = Bad()
        return r


    register(Claim(id="h43bdet.bad", title="t", statement="3", source="-", kind="identity", form=3.0,
                   no_symbolic="a count", checks=(Check("count", "numeric", ok),),
                   mutants=(Mutant("four", "wrong constant", "4", 4.0),)))
'''


def test_43b_f7_unprintable_detail_is_not_blamed_on_a_sigkill(tmp_path):
    _install(tmp_path / "site", "h43bdet", _UNPRINTABLE_DETAIL)
    r = _tv(tmp_path, "run", "h43bdet.bad", "--quick", "--no-progress", PYTHONPATH=str(tmp_path / "site"))
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    assert "SIGKILL" not in out and "out-of-memory" not in out, out[-1500:]


# --- 43B F8: `tverify survey` deletes a folder of the user's. A folder at `<cache>/<package>-<version>` that tverify
# did not make and that holds no install marker is taken for "an unfinished install of tverify's" and removed with
# everything in it once pip has installed the release (survey/runner.py `_install`: `if folder.exists(): _rm(folder)`).
# Seen: `--cache-dir /tmp/h43b/sc` holding `x-transformers-2.31.10/keep.txt` (an unpacked sdist in a downloads folder,
# a `.tverify/survey-cache/` shipped with a cloned repository): after `tverify survey xt-plain` the row is "ok" and
# keep.txt is gone. docs/survey.md: such a folder "is never run, and the row says so" — it is not to be destroyed.
# (pip is replaced by a stand-in here, so the test runs offline.) -------------------------------------------------

def test_43b_f8_survey_never_removes_a_folder_it_did_not_make(tmp_path, monkeypatch):
    from proofs_checks.survey import runner

    cache = tmp_path / "downloads"
    mine = cache / "x-transformers-2.31.10"
    mine.mkdir(parents=True)
    (mine / "keep.txt").write_text("my notes\n")

    def fake_pip(cmd, **kw):
        target = Path(cmd[cmd.index("--target") + 1])
        (target / "x_transformers").mkdir()
        (target / "x_transformers" / "__init__.py").write_text("")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(runner, "_missing_dependencies", lambda spec, timeout: ([], None))
    monkeypatch.setattr(runner.subprocess, "run", fake_pip)
    runner._install("x-transformers==2.31.10", cache, 60.0)
    assert (mine / "keep.txt").exists(), sorted(p.name for p in mine.iterdir())


# --- 43B F9: a plugin whose import succeeds in the probe and raises in tverify's process after it registered a claim
# (an import that fails the second time: a lock, a port, a flaky dependency) is reported "failed to load and was
# skipped", yet the claim it registered before raising stays in the registry and runs — in tverify's own process, not
# in a check's child: TVERIFY_PLUGIN_CHECK_TIMEOUT is not applied (a looping check ran until `timeout` killed the
# command) and an os._exit there ends the command. docs/extending.md: a skipped plugin's claims match nothing (exit 2),
# and every check of a claim a plugin registered runs in a child under the time limit. ------------------------------

_HALF_PLUGIN = '''
    import os
    from pathlib import Path
    from proofs_checks.plugin import Check, Claim, Mutant, exact, register


    def loops(form, ctx):
        while True:
            pass


    register(Claim(id="h43bhalf.a", title="t", statement="3", source="-", kind="identity", form=3.0,
                   no_symbolic="a count", checks=(Check("count", "numeric", loops),),
                   mutants=(Mutant("four", "wrong constant", "4", 4.0),)))
    FLAG = Path(__file__).with_name("imported-once")
    if FLAG.exists():
        raise RuntimeError("the second import fails")
    FLAG.write_text("x")
'''


def test_43b_f9_claim_of_a_plugin_skipped_at_its_import_is_not_run_unisolated(tmp_path):
    _install(tmp_path / "site", "h43bhalf", _HALF_PLUGIN)
    try:
        r = _tv(tmp_path, "run", "h43bhalf.a", "--quick", "--no-progress", timeout=60,
                PYTHONPATH=str(tmp_path / "site"), TVERIFY_PLUGIN_CHECK_TIMEOUT="3")
    except subprocess.TimeoutExpired:
        pytest.fail("the looping check of a skipped plugin ran in tverify's own process, past the 3 s check limit")
    assert r.returncode in (1, 2), (r.returncode, r.stderr[-1000:])


# --- 43B F3b: the same `$` in the scaffold's id rule: `tverify new-claim $'zq.d\n'` exits 0 and writes a claims.py
# that is not Python (`id="zq.d` then a new line: an unterminated string), in a package said to verify as written ----

def test_43b_f3b_new_claim_id_with_a_trailing_newline_is_refused(tmp_path):
    import ast

    r = _tv(tmp_path, "new-claim", "h43bnl.d\n", "--dir", str(tmp_path / "pkg"))
    if r.returncode == 0:
        ast.parse((tmp_path / "pkg" / "tverify_h43bnl" / "claims.py").read_text())
    else:
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "pkg").exists() or not any((tmp_path / "pkg").iterdir())


# --- 43B F10: Ctrl-C or SIGTERM while the survey's pip installs a release leaves pip's half-written target folder
# (`<cache>/.<package>-<version>-XXXXXXXX`) in the install cache: `_install` removes it on a pip failure or time-out
# only. Seen: `tverify survey local-attention --quick --cache-dir sc2`, SIGTERM after 4 s: exit 143, "nothing was
# written after it", and sc2/.local-attention-1.11.2-dip7zd0n (640 KB) stayed. docs/cli.md: on a signal, what was
# being written (... temporary folders) is removed. (The signal is the interrupt pip's run raises here.) -------------

def test_43b_f10_interrupted_survey_install_leaves_no_temporary_folder(tmp_path, monkeypatch):
    from proofs_checks.survey import runner

    cache = tmp_path / "sc"

    def interrupted_pip(cmd, **kw):
        target = Path(cmd[cmd.index("--target") + 1])
        (target / "half_written").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(runner, "_missing_dependencies", lambda spec, timeout: ([], None))
    monkeypatch.setattr(runner.subprocess, "run", interrupted_pip)
    with pytest.raises(KeyboardInterrupt):
        runner._install("local-attention==1.11.2", cache, 60.0)
    assert sorted(p.name for p in cache.iterdir()) == []
