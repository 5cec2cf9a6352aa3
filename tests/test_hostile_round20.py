"""Notes of hostile passes 12 and 13 fixed by the lead in session 7: the Python API takes torch tensors by their
values (a tensor requiring grad raised torch's RuntimeError from tverify's code)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_att_svm_data_and_weights_requiring_grad_are_their_values():
    """12b N6: check_att_svm of data or weights that require grad raised torch's "Can't call numpy() on Tensor that
    requires grad"; they are taken by their values, as numpy arrays of the same numbers are."""
    import proofs_checks as P
    from numerics.att_svm import make_instance, solve_att_svm

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    W = 50 * solve_att_svm(inst.X, inst.z, inst.opt).W
    plain = P.check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=W).to_json()
    grad = P.check_att_svm((torch.tensor(inst.X, requires_grad=True), inst.z, inst.y, inst.v),
                           weights=torch.tensor(W, requires_grad=True)).to_json()
    assert grad["weights"] == plain["weights"]


def test_api_array_takes_tensors_by_their_values():
    from proofs_checks.api_args import _array

    t = torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16, requires_grad=True)
    a = _array(t, np.float64)
    assert a.dtype == np.float64 and a.tolist() == [[1.5, -2.0]]
    assert _array(torch.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]


def _deep_tree(top, depth=24, width=206):
    """Folders nested below ``top`` to a path longer than PATH_MAX (made through directory descriptors), with a file
    at the bottom."""
    import os

    fd = os.open(top, os.O_RDONLY)
    try:
        for i in range(depth):
            name = f"deep{i:02d}" + "d" * (width - 6)
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        w = os.open("thesis.tex", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(w, b"years of work")
        os.close(w)
    finally:
        os.close(fd)


def test_a_report_folder_holding_a_path_beyond_path_max_is_the_users(tmp_path, monkeypatch):
    """14b F3: a previous report folder into which the user put folders nested beyond PATH_MAX gave a 40-line
    OSError traceback (ENAMETOOLONG from ``is_symlink``); the folder is the user's: one line, exit 2, nothing lost."""
    from cli_helpers import invoke_in, one_line_error

    args = ("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--report", "rep", "--no-progress")
    r = invoke_in(tmp_path, monkeypatch, *args)
    assert r.returncode == 0, r.stderr
    _deep_tree(tmp_path / "rep")
    r = invoke_in(tmp_path, monkeypatch, *args)
    line = one_line_error(r.returncode, r.stderr)
    assert "not a tverify report" in line and "nothing was written" in line
    assert any(n.name.startswith("deep00") for n in (tmp_path / "rep").iterdir())


#: 14b F1: a thread the module starts at import waits until the check's task (and its guard) has returned, then
#: replaces ``_isolate_child.json`` (the child's encoder's module) with an encoder that turns every failed row into a pass
_RACE = '''
import json as _json, sys, threading, time, types
import proofs_checks.sanity._isolate_child as _iso
def _fix(o):
    if isinstance(o, dict):
        if o.get("status") in ("fail", "skip", "error", "not run", "inconclusive") and "tolerance" in o:
            o["status"] = "pass"; o["error"] = 0.0
        for v in o.values():
            _fix(v)
    elif isinstance(o, list):
        for v in o:
            _fix(v)
    return o
_fake = types.SimpleNamespace(loads=_json.loads,
                              dumps=lambda d, **kw: _json.dumps(_fix(_json.loads(_json.dumps(d, **kw))), **kw))
_main = threading.main_thread().ident
def _watch():
    ran = False
    while True:
        f = sys._current_frames().get(_main)
        names = []
        while f is not None:
            names.append(f.f_code.co_name)
            f = f.f_back
        if "_task_payload" in names or "_run_task" in names:
            ran = True
        elif ran and "_child_main" in names:
            _iso.json = _fake
            return
        time.sleep(0)
sys.setswitchinterval(1e-6)
threading.Thread(target=_watch, daemon=True).start()
from own_attention import CausalSelfAttention
class Leak(CausalSelfAttention):
    def forward(self, x):
        return super().forward(x) + 1e-3 * x[:, -1:, :].sum(-1, keepdim=True)
'''


def test_a_thread_replacing_the_encoder_after_the_guard_is_refused(tmp_path, monkeypatch):
    """14b F1: the leak read "ok", exit 0. The child's encoder is bound before the user's code runs, and the guard
    compares once more after the result is encoded: the replacement is named, exit 2, never "ok"."""
    from pathlib import Path

    from cli_helpers import invoke_in

    own = Path(__file__).resolve().parent / "data" / "own_attention.py"
    (tmp_path / "own_attention.py").write_text(own.read_text())
    (tmp_path / "race.py").write_text(_RACE)
    r = invoke_in(tmp_path, monkeypatch, "check", "attention", "--module", "race.py:Leak", "--causal", "--quick",
                  "--no-progress")
    assert r.returncode in (1, 2) and "verdict: ok" not in r.stdout, r.stdout[-1500:]
    assert "Traceback" not in r.stderr


def test_values_finer_than_float64_are_refused_not_rounded():
    """14b F2: a long double 1 + 2⁻⁶⁰ passed ``close(…, 1, 2⁻⁷⁰)`` with error 0, and a Decimal 1e-400 an exact
    comparison with 0: the float64 cast decided them. Values not exactly float64 are refused; exact ones compare."""
    import decimal
    import fractions

    from proofs_checks.comparisons import close, relative

    one = np.array([1], dtype=np.longdouble)
    if np.finfo(np.longdouble).nmant > 52:  # a platform whose long double is float64 has nothing finer to lose
        for helper in (close, relative):
            with pytest.raises(TypeError, match="not exactly a float64"):
                helper(one + np.longdouble(2) ** -60, one, 2.0**-70, "ld")
    with pytest.raises(TypeError, match="not exactly a float64"):
        close([decimal.Decimal("1e-400")], [0.0], 0.0, "x")
    with pytest.raises(TypeError, match="not exactly a float64"):
        close([fractions.Fraction(1, 3)], [1 / 3], 1e-20, "x")
    assert close(np.array([1.5], dtype=np.longdouble), [1.5], 0.0, "x").passed
    assert close([decimal.Decimal("0.5"), fractions.Fraction(1, 4)], [0.5, 0.25], 0.0, "x").passed


def test_a_store_whose_last_folder_links_into_tverifys_code_is_not_written(tmp_path, monkeypatch):
    """14a F2: ``--store s`` with ``s/last -> theory/`` wrote ``theory/<id>.json``; the store's root was checked, not
    where its ``last/`` leads. Every atomic write now refuses a file landing (links followed) in tverify's own code:
    the run says the result was not saved, and nothing lands in theory/."""
    from pathlib import Path

    from cli_helpers import invoke_in, one_line_error

    import theory

    own = Path(theory.__file__).resolve().parent
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "last").symlink_to(own)
    r = invoke_in(tmp_path, monkeypatch, "--store", "s", "run", "attn.complexity", "--quick", "--no-progress")
    assert not (own / "attn.complexity.json").exists()
    assert "its folder" in one_line_error(r.returncode, r.stderr)
    # and below the command line, every atomic write refuses such a landing itself
    from proofs_checks.store import Store, save_last

    why = save_last({"id": "attn.complexity", "status": "verified"}, Store(tmp_path / "s", "--store"))
    assert "tverify runs from" in why and not (own / "attn.complexity.json").exists()


def test_the_survey_pointer_is_never_the_users_file_nor_inside_tverifys_code(tmp_path, monkeypatch):
    """14a F5, F6: ``.tverify/survey-latest.json`` of the user's was replaced silently, and a ``.tverify`` linked into
    numerics/ had the pointer written there. A pointer tverify did not record writing is left (one line says so), and
    none is written inside tverify's own code; a pointer tverify wrote is replaced."""
    from pathlib import Path

    import numerics
    from proofs_checks.survey.page import remember_latest

    monkeypatch.chdir(tmp_path)
    doc = {"created": "now", "summary": {"ok": 1}}
    (tmp_path / ".tverify").mkdir()
    mine = tmp_path / ".tverify" / "survey-latest.json"
    mine.write_text("mine")
    assert "left as it is" in remember_latest(tmp_path / "page", doc) and mine.read_text() == "mine"
    mine.unlink()
    assert remember_latest(tmp_path / "page", doc) is None and "page" in mine.read_text()
    assert remember_latest(tmp_path / "page2", doc) is None and "page2" in mine.read_text()  # tverify's own: replaced
    own = Path(numerics.__file__).resolve().parent
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / ".tverify").symlink_to(own)
    monkeypatch.chdir(other)
    assert "tverify runs from" in remember_latest(other / "page", doc)
    assert not (own / "survey-latest.json").exists()


def test_a_survey_pointer_tverify_did_not_write_is_not_copied_into_a_report(tmp_path, monkeypatch):
    """14a F7: a ``.tverify/survey-latest.json`` found in the working folder (a cloned repository's) made ``report``
    copy the folder it names, links followed (a secret behind a link), and its raw HTML into the report."""
    from proofs_checks.output.report import copy_survey, latest_survey_link

    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "id_rsa").write_text("SECRET")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "index.md").write_text("# S\n\n<script>alert(3)</script>\n")
    (fake / "repro").symlink_to(tmp_path / "secret")
    (tmp_path / ".tverify").mkdir()
    (tmp_path / ".tverify" / "survey-latest.json").write_text(
        '{"page": "%s", "created": "x", "summary": {}}' % (fake / "index.html"))
    out = tmp_path / "r"
    out.mkdir()
    copy_survey(out, {})
    assert not (out / "survey").exists() and latest_survey_link() == []


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["--no-such-option"], ["run", "--seed", "1e400"]], ids=["click", "overflow"])
def test_a_usage_error_with_stderr_on_a_full_device_is_exit_2(argv):
    """14a F1: the one line failed with ENOSPC and the usage error ended with exit 1; it is exit 2 whatever becomes
    of its line (the console command: the real descriptor 2 is the subject)."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "proofs_checks", *argv], stdout=subprocess.PIPE, stderr=full,
                           timeout=120)
    assert r.returncode == 2


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_a_non_utf8_standard_output_gets_the_verdict_with_escapes(encoding, tmp_path):
    """14b F6: under ``PYTHONIOENCODING=latin-1`` (or cp1252) the check ran, then died printing ``∇`` with a
    traceback, exit 1, the verdict lost; what the encoding cannot write is escaped (``\\u2207``), exit 0."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONIOENCODING=encoding)
    r = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "lyapunov", "--f", "-x, -y", "--V",
                        "x**2 + y**2", "--no-progress"], capture_output=True, env=env, cwd=tmp_path, timeout=300)
    out = r.stdout.decode(encoding)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr[-1500:]
    assert "verdict: ok" in out and "\\u2207" in out


@pytest.mark.parametrize("argv", [
    ["check", "attention", "--module", "{J}.py:A", "--quick"],
    ["check", "icl", "--lambda", "1,2", "--N", "5", "--weights", "{J}.pt"],
    ["check", "icl", "--lambda", "1,2", "--N", "5", "--model", "{J}.py:f", "--quick"],
    ["check", "att-svm", "--data", "{J}.npz"],
], ids=["module", "icl-weights", "icl-model", "att-svm-data"])
def test_a_file_name_over_255_bytes_is_one_line(argv, tmp_path, monkeypatch):
    """14b F5: ``OSError: File name too long`` from ``Path.exists`` was a traceback (exit 1, "a bug" for --module);
    it is one line naming the option, exit 2, as for --lambda and --patterns."""
    from cli_helpers import invoke_in, one_line_error

    name = "j" * 300
    r = invoke_in(tmp_path, monkeypatch, *[a.replace("{J}", name) for a in argv], "--no-progress")
    assert "File name too long" in one_line_error(r.returncode, r.stderr)


@pytest.mark.parametrize("argv", [
    ["--store", "{L}", "run", "attn.complexity", "--quick", "--no-progress"],
    ["new-claim", "my.x", "--dir", "{L}/pkg"],
    ["survey", "torch-mha", "--quick", "--no-install", "--cache-dir", "{L}/c", "--no-progress"],
], ids=["store", "new-claim", "survey-cache"])
def test_a_folder_name_over_255_bytes_is_one_line(argv, tmp_path, monkeypatch):
    """14a F8: a store, ``new-claim --dir`` or ``survey --cache-dir`` with a component over 255 bytes gave
    ``OSError: File name too long`` tracebacks; one line, exit 2, as for --json, --out and --report."""
    from cli_helpers import invoke_in, one_line_error

    long = str(tmp_path / ("b" * 256))
    r = invoke_in(tmp_path, monkeypatch, *[a.replace("{L}", long) for a in argv])
    assert "bytes long" in one_line_error(r.returncode, r.stderr)


def test_the_fixture_runs_tverify_with_the_system_folders_first(tmp_path, monkeypatch):
    """14a F3 (pin): while a fixture method runs, a folder the test put first on ``sys.path`` comes after the standard
    library's, the installed packages' and tverify's own; ``sys.path`` is put back after."""
    import sys
    import sysconfig

    from proofs_checks.pytest_plugin import _system_first

    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(sys.path)
    with _system_first():
        assert sys.path.index(sysconfig.get_paths()["stdlib"]) < sys.path.index(str(tmp_path))
    assert sys.path == before


_FIXTURE_TEST = '''
import numpy as np
from proofs_checks.plugin import Claim, Clause, Hypothesis, Mutant, close, numeric

def form(x):
    return 2 * np.asarray(x, float)

@numeric("2x against x + x")
def honest(form, ctx):
    x = ctx.rng().standard_normal((ctx.size(20, 200), 4))
    return close(form(x), x + x, np.full(x.shape, 1e-12), "exact doubling")

def test_honest(tverify):
    tverify.assert_claim(Claim(id="pt.honest", title="Doubling", statement="", source="a test", kind="identity",
        form=form, derivation=None, no_symbolic="numeric only",
        hypotheses=(Hypothesis("real", r"x", necessary_note="setting"),),
        clauses=(Clause("double", r"f(x) = 2x", "checked", "d = 4", ("honest",)),), checks=(honest,),
        mutants=(Mutant("triple", "wrong constant", "3x", lambda x: 3 * np.asarray(x, float)),)))
'''


@pytest.mark.integration(reason="a pytest session of its own (≈ 10 s)",
                         pinned_by=("tests/test_hostile_round20.py::test_the_fixture_runs_tverify_with_the_system_"
                                    "folders_first",))
@pytest.mark.parametrize("name,test", [("multiprocessing", _FIXTURE_TEST),
                                       ("click", "def test_runclaims(tverify):\n"
                                                 "    tverify.run_claims(['attn.complexity'], mode='quick')\n"),
                                       ("sysconfig", _FIXTURE_TEST), ("_sysconfigdata", _FIXTURE_TEST)],
                         ids=["multiprocessing", "click", "sysconfig", "sysconfigdata"])
def test_a_stdlib_named_module_beside_the_users_tests_is_not_run_by_the_fixture(tmp_path, name, test):
    """14a F3, 15a F3, 16a F1: a ``multiprocessing.py`` (``click.py``, ``sysconfig.py``, ``_sysconfigdata_*.py``) in the
    test folder was imported by the fixture's first use of it (pytest puts the test folder first on ``sys.path``)."""
    import os
    import subprocess
    import sys

    import sysconfig

    if name == "_sysconfigdata":  # 16a F1's second vector: sysconfig.get_paths() imports it lazily
        name = sysconfig._get_sysconfigdata_name()
    marker = tmp_path / "MARKER"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                         "raise ImportError('not the library')\n")
    (tmp_path / "test_fx.py").write_text(test)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "test_fx.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert not marker.exists(), r.stdout[-2000:]
    assert r.returncode == 0, r.stdout[-2000:]


def test_a_plugins_import_leaves_tverifys_variables_as_they_were(monkeypatch):
    """14a F4: a plugin setting ``TVERIFY_STORE`` at import moved where the run saved its results; the in-process
    import is wrapped so that tverify's own TVERIFY_* variables are as before it (the plugin's others stay)."""
    import os

    from proofs_checks.claims import _working_folder_kept

    monkeypatch.setenv("TVERIFY_STORE", "/the/users/store")
    monkeypatch.setenv("XDG_CACHE_HOME", "/the/users/cache")
    monkeypatch.delenv("TVERIFY_THREADS", raising=False)
    with _working_folder_kept():
        os.environ["TVERIFY_STORE"] = "/elsewhere"
        os.environ["XDG_CACHE_HOME"] = "/elsewhere"  # 15a F4: the record of written outputs moved
        os.environ["TVERIFY_THREADS"] = "7"
        os.environ["PLUGINS_OWN_SETTING"] = "1"
    assert os.environ["TVERIFY_STORE"] == "/the/users/store" and "TVERIFY_THREADS" not in os.environ
    assert os.environ["XDG_CACHE_HOME"] == "/the/users/cache"
    assert os.environ.pop("PLUGINS_OWN_SETTING") == "1"


def test_every_helper_refuses_a_number_a_float64_cannot_hold_exactly():
    """15b F1–F3: ``compare`` rounded a scalar Decimal, Fraction or long double; an object array of long doubles and
    integers beyond 2⁵³ (Python, NumPy, torch) were rounded by close, relative and seed_spread: 2⁶⁰ + 1 "equal" to
    2⁶⁰ within 0.5. Each is refused; integers a float64 holds exactly still compare."""
    import decimal

    from proofs_checks.comparisons import close, relative, seed_spread
    from proofs_checks.registry import compare

    LD = np.longdouble
    refused = [lambda: compare(decimal.Decimal("1e-400"), 0.0, "x"),
               lambda: compare(1e-300, decimal.Decimal("1e-300") - decimal.Decimal("1e-330"), "x"),
               lambda: close([2**60 + 1], [2**60], 0.5, "x"),
               lambda: close(np.array([2**62 + 1]), np.array([2**62]), 0.5, "x"),
               lambda: close(torch.tensor([2**62 + 1]), torch.tensor([2**62]), 0.5, "x"),
               lambda: close(np.array([2**63 + 1], dtype=np.uint64), np.array([2**63], dtype=np.uint64), 0.5, "x"),
               lambda: relative([2**60 + 1], [2**60], 1e-19, "x"),
               lambda: seed_spread([[2**60 + 1], [2**60 + 1]], [2**60]),
               lambda: compare(np.int64(2**62 + 1), float(2**62), "x")]
    if np.finfo(LD).nmant > 52:
        refused += [lambda: compare(LD(1) + LD(2) ** -60, 1.0, "x"),
                    lambda: close(np.array([LD(1) + LD(2) ** -60], dtype=object), [1.0], 2.0**-70, "x")]
    for call in refused:
        with pytest.raises(TypeError, match="not exactly a float64"):
            call()
    assert close(np.arange(5), np.arange(5.0), 0.0, "x").passed and compare(3, 5, "x").passed
    assert close(torch.arange(4), torch.arange(4.0), 0.0, "x").passed and compare(decimal.Decimal("0.5"), 1, "x").passed


def test_the_record_of_written_outputs_is_never_a_link_nor_inside_tverifys_code(tmp_path, monkeypatch):
    """15a F1, F2: the record folder (``$XDG_CACHE_HOME/tverify/outputs``) linked into theory/ had entries written
    there, and one linked to a folder of the user's had every ``.json`` of it deleted by the prune. A record folder that
    is a link, or lies inside tverify's own code, is not used (the output is written, with a note); the prune removes
    only entry files holding entries."""
    from pathlib import Path

    import theory
    from proofs_checks import owned

    own = Path(theory.__file__).resolve().parent
    before = set(own.iterdir())
    xdg = tmp_path / "xdg"
    (xdg / "tverify").mkdir(parents=True)
    (xdg / "tverify" / "outputs").symlink_to(own)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    out = tmp_path / "o.json"
    out.write_text("{}")
    assert owned.remember(out) is False and set(own.iterdir()) == before
    users = tmp_path / "userjs"
    users.mkdir()
    (users / "d1.json").write_text('{"a": 1}')
    (xdg / "tverify" / "outputs").unlink()
    (xdg / "tverify" / "outputs").symlink_to(users)
    monkeypatch.setattr(owned, "PRUNE_AT", 0)
    assert owned.remember(out) is False and [p.name for p in users.iterdir()] == ["d1.json"]
    (xdg / "tverify" / "outputs").unlink()
    (xdg / "tverify" / "outputs").mkdir()
    (xdg / "tverify" / "outputs" / "notes.json").write_text('{"a": 1}')
    assert owned.remember(out) and (xdg / "tverify" / "outputs" / "notes.json").exists()


def test_hopfield_patterns_in_bfloat16_are_their_values():
    """15b N3: ``check_hopfield`` refused a bfloat16 pattern tensor (no NumPy dtype); its values are widened exactly."""
    import proofs_checks as P

    P16 = torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]], dtype=torch.bfloat16)
    assert P.check_hopfield(P16, beta=2.0).to_json() == P.check_hopfield(P16.double().numpy(), beta=2.0).to_json()
