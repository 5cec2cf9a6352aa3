"""Hostile pass 21 and the notes of pass 20, fixed: the lead's tests (the testers' reproducers are in
test_hostile_round27a/b.py)."""

from __future__ import annotations

import sys

import pytest


@pytest.mark.parametrize("argv, named", [
    (["check", "attention", "--module", "m.py:A", "--scale", "1e-400"], "--scale 1e-400"),
    (["check", "hopfield", "--patterns", "P.npy", "--beta=2.5e-999"], "--beta=2.5e-999"),
])
def test_a_non_zero_number_below_float64s_range_is_named_not_read_as_zero(capsys, argv, named):
    """Pass 20 note: ``--scale 1e-400`` was refused as "got 0.0", a number the user never wrote."""
    from proofs_checks.cli import _main

    with pytest.raises(SystemExit) as e:
        _main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"tverify: error: {named}: the number is below a float64's range"), err
    assert "got 0.0" not in err


def test_a_written_zero_is_still_read_as_zero():
    from proofs_checks.entry import _unrepresentable_number

    assert _unrepresentable_number(["--scale", "0.0e-400", "--seed", "0", "--tol", "0e5"]) is None


def test_a_plugin_derivation_is_kept_only_where_the_claim_declares_it_pure(tmp_path, monkeypatch):
    """21a F1-F5, F14, 22a F1-F4: every record of what a plugin's derivation read missed something (a link retargeted, a
    file created where none was, a helper's bytecode, an enumerated environment, a SQLite URI, ``os.readlink``, a
    listing through a descriptor, a module appearing earlier on the path), and the kept answer outlived its input. A
    plugin's derivation is now built every time unless its claim declares ``derivation_pure=True``."""
    from proofs_checks.claims import _plugins
    from proofs_checks.registry import registry
    from tests.test_plugin_child_units import _plugin

    const = tmp_path / "const.txt"
    const.write_text("2")
    body = ("from proofs_checks.plugin import DerivationBuilder\n"
            "            b = DerivationBuilder('c')\n"
            f"            return b.done(b.step('c', int(open({str(const)!r}).read())))")
    spec = lambda n: (n, n, "tverify.claims")  # noqa: E731
    try:
        claim = _plugin(tmp_path, monkeypatch, "zzimpure", body)
        monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "1")
        first = _plugins.run_derivation(spec("zzimpure"), claim, True)
        const.write_text("3")
        second = _plugins.run_derivation(spec("zzimpure"), claim, True)
        assert not first.get("cached") and not second.get("cached"), (first, second)
        assert "2" in str(first["steps"]) and "3" in str(second["steps"]), (first.get("error"), second.get("error"))
        kept = tmp_path / "store" / "cache" / "derivations"
        assert not kept.exists() or not any(kept.iterdir())
        pure = _plugin(tmp_path, monkeypatch, "zzpure", body)
        object.__setattr__(pure, "derivation_pure", True)  # (as the claim would declare it)
        monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "1")
        built = _plugins.run_derivation(spec("zzpure"), pure, True)
        again = _plugins.run_derivation(spec("zzpure"), pure, True)
        assert not built.get("cached") and again.get("cached") and again["steps"] == built["steps"]
    finally:
        for n in ("zzimpure", "zzpure"):
            registry._claims.pop(f"{n}.c", None)
            sys.modules.pop(n, None)


def test_derivation_pure_is_a_declaration_of_true_or_false():
    from proofs_checks.registry import Check, Claim, Mutant, RegistryError, compare

    ok = lambda form, ctx: compare(0.0, 0.0, "exact")  # noqa: E731
    c = Claim("demo.p", "P", "1=1", "-", "identity", 1, (Check("num", "numeric", ok),),
              (Mutant("two", "wrong constant", "2", 2),), no_symbolic="a count", derivation_pure="yes")
    with pytest.raises(RegistryError, match="derivation_pure must be True or False"):
        c.validate()


def test_pythonpath_modules_named_like_standard_or_tverify_ones_never_run_in_the_command(tmp_path):
    """21a F4: ``$PYTHONPATH``'s folders come before the standard library's: a ``json.py`` there ran inside tverify's
    own process (then a traceback), and a project's ``theory/`` package there was imported in place of tverify's."""
    import os
    import subprocess
    import sys

    pp = tmp_path / "pp"
    (pp / "theory").mkdir(parents=True)
    for f in (pp / "json.py", pp / "typing.py", pp / "theory" / "__init__.py"):
        f.write_text("import sys\nsys.stderr.write('PWNED\\n')\n")
    env = {**os.environ, "PYTHONPATH": str(pp)}
    for argv in (["list", "attn.complexity"], ["check", "lyapunov", "--f", "-x", "--V", "x**2"]):
        p = subprocess.run([sys.executable, "-P", "-m", "proofs_checks", *argv], capture_output=True, text=True,
                           timeout=300, env=env, cwd=tmp_path)
        assert p.returncode == 0 and "PWNED" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_show_says_a_last_result_predates_a_change_of_its_sources(tmp_path, monkeypatch):
    """21b F8: ``show`` presented a claim's last result as current after its source changed. Each result kept now holds
    the sources' fingerprint, and ``show`` says when it differs from the current one (and says nothing when equal)."""
    import json

    from proofs_checks.cli import _with_sources
    from proofs_checks.store import Store, save_last
    from tests.cli_helpers import invoke

    store = Store(tmp_path / "store", "--store")
    doc = {"id": "attn.complexity", "status": "verified", "mode": "quick", "seed": 0, "device": "cpu", "checks": []}
    assert save_last(_with_sources(doc), store) is None
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity")
    assert code == 0 and "last result: verified" in out and "from before a source changed" not in out, out
    # (a built-in claim's result is stale when tverify's own sources changed: 47b F7)
    stale = {**json.loads(store.last_path("attn.complexity").read_text()), "sources": "0" * 64,
             "sources_tverify": "0" * 64}
    store.last_path("attn.complexity").write_text(json.dumps(stale))
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity")
    assert code == 0 and "from before a source changed" in " ".join(out.split()), out
    code, out, _ = invoke("--store", str(store.root), "show", "attn.complexity", "--json", "-")
    assert json.loads(out)["last_result"]["sources_changed_since"] is True


def test_a_plugins_load_time_helpers_are_keyed_by_their_bytes_zip_bytecode_or_linked_folder(tmp_path, monkeypatch):
    """23a F1, F4: a declared-pure derivation's key left out a helper imported from a zip, a sourceless ``.pyc``, a folder
    whose name holds "site-packages", and the files of a linked folder in the plugin's package."""
    import importlib
    import py_compile
    import zipfile

    from proofs_checks import claims
    from proofs_checks.fingerprint import _archive

    (tmp_path / "zz_h1.py").write_text("C = 2\n")
    with zipfile.ZipFile(tmp_path / "lib.zip", "w") as zf:
        zf.write(tmp_path / "zz_h1.py", "zz_h2.py")
    (tmp_path / "old-site-packages").mkdir()
    (tmp_path / "old-site-packages" / "zz_h3.py").write_text("C = 2\n")
    (tmp_path / "pyc").mkdir()
    py_compile.compile(str(tmp_path / "zz_h1.py"), cfile=str(tmp_path / "pyc" / "zz_h4.pyc"))
    for entry in (tmp_path / "lib.zip", tmp_path / "old-site-packages", tmp_path / "pyc"):
        monkeypatch.syspath_prepend(str(entry))
    before = set(claims.PLUGIN_SOURCES)
    try:
        for m in ("zz_h2", "zz_h3", "zz_h4"):
            importlib.import_module(m)
        claims._record_sources(["zz_h2", "zz_h3", "zz_h4"])
        added = set(claims.PLUGIN_SOURCES) - before
        assert str((tmp_path / "lib.zip").resolve()) in added, added
        assert str((tmp_path / "old-site-packages" / "zz_h3.py").resolve()) in added, added
        assert str((tmp_path / "pyc" / "zz_h4.pyc").resolve()) in added, added
        assert _archive(str(tmp_path / "lib.zip" / "zz_h2.py")) == tmp_path / "lib.zip"
    finally:
        claims.PLUGIN_SOURCES.clear()
        claims.PLUGIN_SOURCES.update(before)
        for m in ("zz_h2", "zz_h3", "zz_h4"):
            sys.modules.pop(m, None)


def test_ctrl_c_while_the_command_loads_is_one_line(monkeypatch, capsys):
    """23a F2: a Ctrl-C while the command's modules load (before its own handler is set) was a traceback of tverify's
    code: it is one line, exit 130."""
    import proofs_checks._console as console

    monkeypatch.setattr(sys, "path", list(sys.path))  # (main() puts the path in order: this process's is restored)

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(console, "_note_outputs", interrupted)
    _one_line_exit_130(console.main, capsys)


def _one_line_exit_130(start, capsys) -> None:
    """``start()`` ends with exit 130 and the one line of an interrupted start."""
    with pytest.raises(SystemExit) as e:
        start()
    err = capsys.readouterr().err
    assert e.value.code == 130 and err.strip().splitlines() == [
        "tverify: interrupted while starting; nothing was run or written"], err


@pytest.mark.parametrize("how", ["raised", "turned_into_another_error", "swallowed"])
def test_ctrl_c_while_the_libraries_load_is_one_line(monkeypatch, capsys, how):
    """CI of ec250a1: a Ctrl-C while the console command bound the libraries' optional imports (after the script's own
    imports, before the command's handler) was a traceback of ``import_system_only``; an extension's initialisation
    turns the KeyboardInterrupt into another error (NumPy: AttributeError) or an ImportError that is swallowed as an
    absent optional import. Each is one line, exit 130."""
    import os
    import signal

    import proofs_checks.options as options
    import proofs_checks.supervisor as supervisor
    import proofs_checks.syspath as syspath
    from proofs_checks import entry

    def loading(names):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # (the handler runs here, in the main thread)
        except KeyboardInterrupt:
            if how == "turned_into_another_error":
                raise AttributeError("module 'numpy._core' has no attribute '_multiarray_umath'") from None
            if how == "swallowed":
                return
            raise

    monkeypatch.setattr(supervisor, "supervise", lambda: False)
    monkeypatch.setattr(options, "own_standard_output", lambda: None)
    monkeypatch.setattr(options, "HumanLines", lambda stream: stream)
    monkeypatch.setattr(entry, "_preload", lambda argv: ["numpy"])
    monkeypatch.setattr(syspath, "import_system_only", loading)
    _one_line_exit_130(entry._console_start, capsys)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_commands_help_imports_no_computing_library():
    """`tverify check attention --help` computes nothing: the libraries are not preloaded (2.3 CPU s), unless the
    help word may be an option's value (then the command may compute, and the preload's guard stays)."""
    from proofs_checks.entry import _preload

    assert _preload(["check", "attention", "--help"]) == () and _preload(["run", "-h"]) == ()
    assert _preload(["check", "attention", "--out", "--help"]) and _preload(["check", "attention", "--module", "m.py:A"])
