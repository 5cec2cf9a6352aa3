"""Hostile pass 5 (issue 44's acceptance): findings fixed here, each with a test that fails before.

H1: a plugin's or notebook's check that tells the form from the power rule's wrapper by something other
than its values (the object itself, an output's type, a call count) rejected every perturbed form and
passed on the form itself: the false claim ``3x = 2x`` was verified with "resolution (measured) … 0.0001 %".
The power rule now runs every check once more on an unchanged copy (outputs multiplied by 1 behind the
same wrapper): a check that does not pass on it is an error in the claim.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs_checks.comparisons import compare, relative
from proofs_checks.plugin import Check, Claim, Mutant, check_claim
from proofs_checks.scaling import unchanged_form

pytest_plugins = ["pytester"]


def three(x):  # the false claim 3x = 2x
    return 3 * np.asarray(x, dtype=float)


class F(float):
    pass


def _claim(form, fn, mutant):
    return Claim(id="zzh5.c", title="3x = 2x", statement="3x = 2x", source="a false claim", kind="identity", form=form,
                 checks=(Check("c0", "numeric", fn),), no_symbolic="a test of the power rule's control",
                 mutants=(Mutant("four", "wrong constant", "4x", mutant),))


def _is_original(form, ctx):
    form(ctx.rng().standard_normal(5))
    return compare(0.0 if form is three else 1.0, 1e-9, "the original object")


def _stateful():
    calls = [0]

    def check(form, ctx):
        calls[0] += 1
        form(ctx.rng().standard_normal(5))
        return compare(0.0 if calls[0] == 1 else 1.0, 1e-9, "its first call only")
    return check


def _by_type(form, ctx):
    y = form(ctx.rng().standard_normal(5))
    return compare(0.0 if type(y) is F else 1.0, 1e-9, "the output's own type")


CASES = {
    "identity": (three, _is_original, lambda x: 4 * np.asarray(x, dtype=float)),
    "call count": (three, None, lambda x: 4 * np.asarray(x, dtype=float)),
    "type": (lambda x: F(3.0 * float(x[0])), _by_type, lambda x: 4.0 * float(x[0])),
    "alternating form": (None, None, lambda x: 4 * np.asarray(x, dtype=float)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_h1_a_check_that_tells_the_wrapper_from_the_form_cannot_verify_3x_eq_2x(case):
    form, fn, mutant = CASES[case]
    if form is None:  # a form whose outputs alternate 2x / 3x between calls, read once by an honest check
        calls = [0]

        def form(x):
            calls[0] += 1
            return (2 if calls[0] % 2 else 3) * np.asarray(x, dtype=float)

        def fn(f, ctx):
            x = ctx.rng().standard_normal(5)
            return compare(float(np.max(np.abs(f(x) - 2 * x))), 1e-9, "against 2x")
    res = check_claim(_claim(form, fn or _stateful(), mutant))
    assert res.status == "error", (res.status, res.message)
    assert "unchanged copy" in res.message and "\n" not in res.message


def test_h1_a_true_claim_still_passes_the_control_and_states_its_resolution():
    def rel(form, ctx):
        x = ctx.rng().standard_normal(20)
        return relative(form(x), 2 * x, 0.05, "5 %")

    c = Claim(id="zzh5.t", title="2x = 2x", statement="2x = 2x", source="true", kind="identity",
              form=lambda x: 2 * np.asarray(x, dtype=float), checks=(Check("c0", "numeric", rel),),
              no_symbolic="a test of the power rule's control",
              mutants=(Mutant("three", "wrong constant", "3x", three),))
    res = check_claim(c)
    assert res.status == "verified", res.message
    assert "reject a relative perturbation of 10 %" in res.message


def test_h1_unchanged_form_keeps_the_values():
    f = unchanged_form(lambda: (3, 0.5, np.arange(3.0), {"a": F(2.0)}))
    out = f()
    assert out[0] == 3 and out[1] == 0.5 and np.array_equal(out[2], np.arange(3.0)) and out[3]["a"] == 2.0
    assert type(out[3]["a"]) is float


@pytest.mark.parametrize("command", [["list"], ["show", "attn.convex_combination"]])
def test_h3_a_bad_plugin_time_limit_is_refused_when_the_catalogue_is_cached(monkeypatch, tmp_path, capsys, command):
    """H3: with the catalogue cached (a second `tverify list`), TVERIFY_PLUGIN_IMPORT_TIMEOUT=abc was taken
    silently (exit 0): the limit was read only where the plugins are imported."""
    from proofs_checks.cli import _main

    monkeypatch.setenv("TVERIFY_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", raising=False)
    with pytest.raises(SystemExit) as e:
        _main(["list"])  # caches the catalogue
    assert e.value.code == 0
    capsys.readouterr()
    monkeypatch.setenv("TVERIFY_PLUGIN_IMPORT_TIMEOUT", "abc")
    with pytest.raises(SystemExit) as e:
        _main(command)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == ("tverify: error: TVERIFY_PLUGIN_IMPORT_TIMEOUT must be a number of seconds > 0 "
                                         "and at most 1e+07, got 'abc'\n"), err


@pytest.mark.parametrize("argv, named", [
    (["check", "lyapunov", "--f", "-x,-y", "--V", "x**2+y**2", "--region", "1e400"], "--region 1e400"),
    (["check", "lyapunov", "--f", "-x,-y", "--V", "x**2+y**2", "--region=1e400"], "--region=1e400"),
])
def test_m2_a_number_that_overflows_float64_is_named_with_its_option(capsys, argv, named):
    """M2: "tverify: error: 1e400: the number overflows a float64" did not say which option held it."""
    from proofs_checks.cli import _main

    with pytest.raises(SystemExit) as e:
        _main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"tverify: error: {named}: the number overflows a float64"), err


def test_m4_a_named_tuple_with_its_own_constructor_keeps_its_fields_when_perturbed():
    """M4: a named tuple subclass whose __new__ takes other arguments came back from the power rule's wrapper
    as a plain tuple; the check reading `.a` crashed on every perturbed form, and a TRUE claim 2x = 2x was an
    error ("its checks accept the form multiplied by 2 and by 1/2; c0 crashed on it")."""
    from collections import namedtuple

    class P(namedtuple("P", "a b")):
        def __new__(cls, pair):
            return super().__new__(cls, *pair)

    def rel(form, ctx):
        x = ctx.rng().standard_normal(20)
        return relative(form(x).a, 2 * x, 0.05, "5 %")

    c = Claim(id="zzh5.nt", title="2x = 2x", statement="2x = 2x", source="true", kind="identity",
              form=lambda x: P((2 * np.asarray(x, dtype=float), 1.0)), checks=(Check("c0", "numeric", rel),),
              no_symbolic="a test of the power rule on a named tuple",
              mutants=(Mutant("three", "wrong constant", "3x", lambda x: P((3 * np.asarray(x, dtype=float), 1.0))),))
    res = check_claim(c)
    assert res.status == "verified", res.message
    assert type(unchanged_form(lambda: P((1.0, 2.0)))()) is P


@pytest.mark.parametrize("kwargs, needle", [({"mode": "fastest"}, "mode must be one of quick, default, full"),
                                            ({"seed": -1}, "seed must be a whole number"),
                                            ({"seed": "7"}, "seed must be a whole number"),
                                            ({"device": None}, "device must be")])
def test_m5_check_claim_refuses_a_bad_mode_seed_or_device_with_one_input_error(kwargs, needle):
    """M5: check_claim(mode="fastest") (and the fixture's assert_claim) raised a ValueError from inside
    RunContext: a traceback into the package instead of one InputError line."""
    from theory.validation import InputError

    c = _claim(three, _is_original, lambda x: 4 * np.asarray(x, dtype=float))
    with pytest.raises(InputError) as e:
        check_claim(c, **kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_m5_the_fixture_fails_a_bad_mode_with_one_line(pytester):
    pytester.makepyfile('''
def test_bad_mode(tverify):
    tverify.assert_claim("attn.convex_combination", mode="fastest")
''')
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    text = res.stdout.str()
    assert "bad input: mode must be one of quick, default, full" in text and "ValueError" not in text, text
    assert "During handling" not in text, text


@pytest.mark.parametrize("signame", ["SIGHUP", "SIGTERM"])
def test_s1_a_signal_while_python_exits_after_the_command_is_one_line_not_a_traceback(signame):
    """S1: SIGHUP sent as `tverify sweep … --out` had just written its folder (Python running its atexit
    cleanups) → "Exception ignored in atexit callback … proofs_checks.console.Terminated: 1", a traceback."""
    import subprocess
    import sys

    code = ("import atexit, os, signal\n"
            "from proofs_checks.cli import main\n"
            "import proofs_checks.console  # its last exit callback ignores a signal after it (pass 10, F3)\n"
            f"atexit.register(lambda: os.kill(os.getpid(), signal.{signame}))  # runs as Python exits\n"
            "main(['--version'])\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    assert p.returncode == 0 and f"tverify: {signame} while exiting: the command had finished" in p.stderr, p


@pytest.mark.parametrize("field, text", [("title", "\x1b[31mRED\x1b[0m"), ("statement", "2x = 2x \x1b[2J"),
                                         ("source", "notes \u202eevil\u202c"), ("title", "bell\x07")])
def test_m6_control_characters_in_a_claims_text_are_refused_at_registration(field, text):
    """M6: a plugin claim's title with ANSI escapes (and a bidirectional override) was printed raw by
    `tverify list` and `show`: it recoloured, could clear or reorder the user's terminal."""
    from proofs_checks.plugin import RegistryError

    kw = {"title": "2x = 2x", "statement": "2x = 2x", "source": "true"}
    kw[field] = text
    c = Claim(id="zzh5.ctl", kind="identity", form=lambda x: 2 * np.asarray(x, dtype=float),
              checks=(Check("c0", "numeric", _is_original),), no_symbolic="a test of the text rule",
              mutants=(Mutant("three", "wrong constant", "3x", three),), **kw)
    with pytest.raises(RegistryError) as e:
        check_claim(c)
    assert f"{field} holds the character U+" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("size", [-1, 0, 2.5, True, "3"])
def test_m7_bind_and_sample_refuse_a_size_that_is_not_a_whole_number_at_least_one(size):
    """M7: bind((vector("q", "d"),), d=-1) (and d=0) returned an empty Matrix(0, 0), silently."""
    from proofs_checks.plugin import bind, vector
    from theory.shapes import sample
    from theory.validation import InputError

    with pytest.raises(InputError, match="a size must be a whole number ≥ 1"):
        bind((vector("q", "d"),), d=size)
    with pytest.raises(InputError, match="a size must be a whole number ≥ 1"):
        sample((vector("q", "d"),), np.random.default_rng(0), d=size)
    assert bind((vector("q", "d"),), d=np.int64(2))[0].shape == (2, 1)


def _cplx(form, check):
    return Claim(id="zzh5.cx", title="2x e^{ix}", statement="2x e^{ix}", source="h4", kind="identity", form=form,
                 checks=(Check("c0", "numeric", check),), no_symbolic="a test of complex outputs",
                 mutants=(Mutant("three", "wrong constant", "3x e^{ix}",
                                 lambda x: 3 * np.asarray(x) * np.exp(1j * np.asarray(x))),))


def test_h4_a_modulus_only_check_of_a_complex_form_is_not_credited_with_its_resolution():
    """H4: the power rule scaled complex entries by real factors only: a check of |f| alone was verified
    "0.0001 %", so a wrong phase passed with that resolution stated."""
    def modulus(form, ctx):
        x = ctx.rng().standard_normal(20)
        return compare(float(np.max(np.abs(np.abs(form(x)) - 2 * np.abs(x)))), 1e-9, "modulus only")

    res = check_claim(_cplx(lambda x: 2 * np.asarray(x) * np.exp(1j * np.asarray(x)), modulus))
    assert res.status == "error", res.message
    assert "complex entries turned by ±ln 2 radians" in res.message


def test_h4_a_check_of_the_complex_value_keeps_its_verdict_and_resolution():
    def value(form, ctx):
        x = ctx.rng().standard_normal(20)
        ref = 2 * x * np.exp(1j * x)
        return compare(float(np.max(np.abs(form(x) - ref) / np.abs(ref))), 0.05, "5 % of the value")

    res = check_claim(_cplx(lambda x: 2 * np.asarray(x) * np.exp(1j * np.asarray(x)), value))
    assert res.status == "verified", res.message
    assert "reject a relative perturbation of 10 %" in res.message
