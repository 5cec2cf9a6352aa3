"""Hostile pass 16 (issue 44): the lead's tests of the fixes of the testers' findings."""

from __future__ import annotations

import sys


def test_the_system_folders_are_found_without_a_callers_sysconfig(tmp_path, monkeypatch):
    """16a F1: ``sysconfig`` is not loaded at start in every environment, and the fixture's first use imported it with
    the test folder first on ``sys.path``: a ``sysconfig.py`` there ran. The folders are now computed with ``sys.path``
    reduced to the standard library's own folders."""
    from proofs_checks import syspath

    marker = tmp_path / "MARKER"
    import sysconfig

    data = sysconfig._get_sysconfigdata_name()  # imported lazily by get_paths() (16a F1, second vector)
    for name in ("sysconfig", "site", data):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setattr(syspath, "_FOLDERS", None)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("sysconfig", "site", data):
        monkeypatch.delitem(sys.modules, name, raising=False)
    system, own = syspath._system_folders()
    assert not marker.exists()
    assert own and any(p.endswith("site-packages") for p in system), system


def test_a_fifo_or_link_where_a_record_entry_belongs_is_no_entry(tmp_path, monkeypatch):
    """16a F2: a FIFO put where the record keeps an output's entry hung every command writing that output (the entry
    was read with a plain open). It is now opened without blocking or following links: no entry, never a hang."""
    import os
    import threading

    from proofs_checks import owned

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TVERIFY_STORE", raising=False)
    out = tmp_path / "o.json"
    out.write_text("{}")
    assert owned.remember(out) and owned.is_ours(out)
    entry = owned.record_dir() / f"{owned._key(out)}.json"
    entry.unlink()
    os.mkfifo(entry)
    answer = []
    t = threading.Thread(target=lambda: answer.append(owned.is_ours(out)), daemon=True)
    t.start()
    t.join(20)
    assert answer == [False], "is_ours blocked on a FIFO entry"
    entry.unlink()
    (tmp_path / "elsewhere.json").write_text(entry.with_name("x").name)
    entry.symlink_to(tmp_path / "elsewhere.json")
    assert owned.is_ours(out) is False
    for n in range(owned.PRUNE_AT + 1):  # the prune skips it too
        (owned.record_dir() / f"{n:040x}.json").write_text("{}")
    os.unlink(entry)
    os.mkfifo(entry)
    done = threading.Event()
    threading.Thread(target=lambda: (owned._prune(owned.record_dir()), done.set()), daemon=True).start()
    assert done.wait(60), "the prune blocked on a FIFO entry"


def test_an_out_name_the_up_front_check_accepts_is_written_and_replaced(tmp_path, monkeypatch):
    """16a F3: an ``--out`` name of 234–235 bytes passed the up-front check (255 − 20), the run was done, and then the
    temporary folder's name (the name + 22 bytes) was too long: nothing written, exit 2. The siblings' names are now
    shortened to fit; the report is written, and replaced by a second run."""
    from tests.cli_helpers import invoke_in

    name = "b" * 235
    args = ("report", "--out", name, "attn.complexity", "--quick", "--no-progress", "--no-mutants", "--no-reproductions")
    for _ in range(2):
        r = invoke_in(tmp_path, monkeypatch, *args)
        assert r.returncode == 0, r.stderr[-500:]
        assert (tmp_path / name / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert invoke_in(tmp_path, monkeypatch, "report", "--out", "c" * 236, "attn.complexity", "--quick",
                     "--no-progress").returncode == 2


def test_a_namespace_package_named_file_beside_the_module_is_not_run_by_report_figures(tmp_path, monkeypatch):
    """16b F4: ``--report`` imports matplotlib in the check's child after the user's module was loaded beside its
    folder; ``mpl_toolkits`` is a namespace package, and Python's path finder prefers a module in any later folder to
    a namespace portion, so an ``mpl_toolkits.py`` beside the module ran. matplotlib is now imported with only the
    system folders on ``sys.path``."""
    import numpy as np

    from tests.cli_helpers import invoke_in

    mod = tmp_path / "mods"
    mod.mkdir()
    marker = tmp_path / "MARKER"
    (mod / "mpl_toolkits.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (mod / "hmod.py").write_text("import torch\n\ndef update(xi, patterns, beta):\n"
                                 "    p = torch.as_tensor(patterns); xi = torch.as_tensor(xi)\n"
                                 "    return torch.softmax(beta * xi @ p.T, -1) @ p\n")
    np.save(tmp_path / "P.npy", np.random.default_rng(0).choice([-1.0, 1.0], size=(4, 16)))
    work = tmp_path / "work"
    work.mkdir()
    r = invoke_in(work, monkeypatch, "check", "hopfield", "--patterns", str(tmp_path / "P.npy"), "--beta", "0.5",
                  "--module", f"{mod / 'hmod.py'}:update", "--no-progress", "--report", "rep")
    assert r.returncode == 0, r.stderr[-800:]
    assert (work / "rep").is_dir() and not marker.exists()


def test_every_helper_refuses_sympy_mpmath_and_array_likes_a_float64_cannot_hold():
    """16b F1–F3: SymPy and mpmath numbers, array-likes without ``dtype`` (``__array__``, ``array.array``,
    ``memoryview``, any sequence), datetime/timedelta arrays and unsigned torch integers were rounded into a pass (or
    crashed in the refusal); each is now refused in the helper's words, and exact values still compare."""
    import array
    import decimal

    import mpmath
    import numpy as np
    import pytest
    import sympy as S
    import torch

    from proofs_checks.comparisons import close, exact, relative, z_test
    from proofs_checks.registry import compare

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            a = np.array([np.longdouble(1) + np.longdouble(2) ** -60])
            return a if dtype is None else a.astype(dtype)

    class Seq:
        def __init__(self, xs):
            self.xs = xs

        def __len__(self):
            return len(self.xs)

        def __getitem__(self, i):
            return self.xs[i]

    refused = [lambda: compare(S.Rational(1, 10**400), 0.0, "x"), lambda: compare(S.Integer(2**60 + 1), float(2**60), "x"),
               lambda: compare(S.Float("1e-400", 50), 0.0, "x"), lambda: compare(mpmath.mpf("1e-400"), 0.0, "x"),
               lambda: compare(1e-300, S.Rational(1, 10**300) - S.Rational(1, 10**330), "x"),
               lambda: exact({"a": S.Rational(1, 10**400)}, "x"), lambda: exact(S.Rational(1, 10**400), "x"),
               lambda: close([S.Integer(2**60 + 1)], [2**60], 0.5, "x"),
               lambda: relative([S.Rational(1, 3) + S.Rational(1, 10**30)], [S.Rational(1, 3)], 1e-31, "x"),
               lambda: z_test({"a": (S.Integer(2**60 + 2), 0.3, 2**60)}), lambda: compare(S.pi, 3.141592653589793, "x"),
               lambda: close(torch.tensor([2**63 + 1], dtype=torch.uint64), torch.tensor([2**63], dtype=torch.uint64), 0.5, "x"),
               lambda: close(ArrayLike(), [1.0], 2.0**-70, "x"), lambda: close([ArrayLike()], [[1.0]], 2.0**-70, "x"),
               lambda: close(array.array("q", [2**60 + 1]), [2**60], 0.5, "x"),
               lambda: close(memoryview(np.array([2**62 + 1], dtype=np.int64)), [float(2**62)], 0.5, "x"),
               lambda: close(Seq([decimal.Decimal("1e-400")]), [0.0], 0.0, "x"),
               lambda: close(np.array([2**60 + 1], dtype="m8[ns]"), np.array([2**60], dtype="m8[ns]"), 0.5, "x"),
               lambda: close(np.array([2**60 + 1], dtype="M8[ns]"), [float(2**60)], 0.5, "x")]
    for i, case in enumerate(refused):
        with pytest.raises(TypeError, match="float64|real numbers"):
            case()
    assert compare(S.Rational(1, 2), 0.5, "x").passed and compare(mpmath.mpf(0.25), 0.25, "x").passed
    assert close(torch.tensor([2**32 - 1], dtype=torch.uint32), [2.0**32 - 1], 0.0, "x").passed
    assert close(Seq([1.0, 2.0]), [1.0, 2.0], 0.0, "x").passed and close([1, 2.0, True], [1.0, 2.0, 1.0], 0.0, "x").passed


def test_a_bfloat16_tensor_is_read_by_its_values_where_a_matrix_is_expected():
    """16b F5: ``check_icl_model(lambdas=<a bfloat16 tensor>)`` gave an internal error with a traceback
    (``np.asarray`` of a bfloat16 tensor); the common reader of numbers now reads tensors by their values."""
    import numpy as np
    import torch

    from proofs_checks.parsing import as_numeric_array, spd_from_array

    lam, _ = spd_from_array(torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "lambdas")
    assert np.array_equal(lam, np.diag([1.0, 2.0]))
    lam, _ = spd_from_array(torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True), "lambdas")
    assert np.array_equal(lam, np.diag([1.0, 3.0]))
    a = as_numeric_array(torch.tensor([[0.5, 1.5]], dtype=torch.bfloat16), "x")
    assert a.dtype == np.float64 and a.tolist() == [[0.5, 1.5]]


def test_worst_checks_the_items_of_any_iterable():
    """16b N1: ``worst`` checked a generator as one object (a generator of Decimal('1e-400') gave 0.0): its items are
    now checked like a list's."""
    import decimal

    import pytest

    from proofs_checks.registry import worst

    with pytest.raises(TypeError, match="not exactly a float64"):
        worst(decimal.Decimal(x) for x in ["1e-400"])
    assert worst(x for x in [1.0, 3.0]) == 3.0


def test_an_output_whose_folder_became_a_file_is_one_refusal_not_a_recursion(tmp_path):
    """17a F1: ``--out ro2/rep`` whose ``ro2`` became a file during the run: the kept-aside sibling failed for the same
    reason and ``build_output`` recursed on its own siblings until RecursionError (≈ 9,900 lines of traceback). The
    aside is tried once; then the first refusal is raised (the CLI's one line)."""
    import pytest

    from proofs_checks.output.report import ReportTargetError, build_output

    (tmp_path / "ro2").write_text("userdata\n")
    calls = []
    with pytest.raises(ReportTargetError) as info:
        build_output(tmp_path / "ro2" / "rep", lambda tmp: calls.append(tmp), {"tool": "tverify"})
    # the refusal names the --out given, not a kept-aside sibling of it ("rep-20…"); the folder's own name is compared,
    # since the test's temporary path may hold "-20" itself (pytest-202 did)
    named = str(info.value).split(":")[0].removeprefix("--out ")
    assert "ro2" in str(info.value) and named == str(tmp_path / "ro2" / "rep"), str(info.value)
    assert not calls and (tmp_path / "ro2").read_text() == "userdata\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro2"]


def test_a_checkouts_benchmarks_or_examples_never_shadow_the_users(tmp_path, monkeypatch):
    """17b F1: in an editable install the folder put first on the check's child path is the checkout's root, which also
    holds ``benchmarks/`` and ``examples/``: a user's packages of those names beside the module were shadowed (tverify's
    own ``examples/my_attn.py`` ran instead). The child drops that folder once tverify's three packages are bound."""
    from tests.cli_helpers import MHA_ATTN, invoke_in

    mods = tmp_path / "mods"
    (mods / "benchmarks").mkdir(parents=True)
    (mods / "benchmarks" / "__init__.py").write_text("")
    (mods / "benchmarks" / "consts.py").write_text("SCALE = 1.0\n")
    (mods / "examples").mkdir()
    (mods / "examples" / "my_attn.py").write_text("VALUE = 7\n")  # a namespace portion, as in the checkout
    (mods / "mod.py").write_text("import torch\nfrom benchmarks.consts import SCALE\nfrom examples.my_attn import VALUE\n"
                                 "assert SCALE == 1.0 and VALUE == 7\n" + MHA_ATTN)
    import os

    from proofs_checks.syspath import _system_folders

    own = _system_folders()[1]  # the `tverify` script's path does not hold the checkout (pytest's rootdir here does)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (p and os.path.realpath(p) == own)])
    r = invoke_in(tmp_path, monkeypatch, "check", "attention", "--module", f"{mods / 'mod.py'}:Attn", "--quick",
                  "--no-progress")
    assert r.returncode == 0, r.stderr[-800:]


def test_a_tolerance_that_is_not_finite_decides_nothing():
    """17b F3, F4: a reference computed in the declared precision overflowed (a softcap beyond float32's range; float16
    at a large β), so the tolerance was NaN and the property FAILED with an error of 0 or 2.5e-7: a mismatch without
    evidence. A tolerance that is not finite now leaves the property undecided (attention: skipped, undecidable;
    Hopfield: the verdict inconclusive), never failed."""
    from numerics.attention_rules import _judge
    from proofs_checks.sanity.hopfield import _row, hopfield_verdict

    for tol in (float("nan"), float("inf")):
        p = _judge("dtype_and_device_preserved", 2.46e-7, tol, "rule")
        assert p.status == "skip" and p.numbers.get("undecidable"), p
    assert _judge("matches_reference", float("nan"), 1e-6, "rule").status == "fail"  # a NaN error still fails
    row = _row("update_matches_modern", 0.0 <= float("nan"), 0.0, float("nan"), "rule", "detail")
    assert row["status"] == "skip" and row["undecided"]
    inf_row = _row("update_matches_modern", 5.0 <= float("inf"), 5.0, float("inf"), "rule", "detail")
    assert inf_row["status"] == "skip" and inf_row["undecided"]  # an infinite tolerance passes nothing either
    v = hopfield_verdict([{"name": "finite_updates", "status": "pass"}, row], "hop", [])
    assert v.outcome == "inconclusive" and "update_matches_modern" in v.summary


def test_a_huge_declared_scale_is_a_verdict_not_an_overflow():
    """17b F2: ``--scale 1e308``: the scale fit's grid reached exp(log 1e308 + log 100): OverflowError with a
    traceback. The grid now stays within float64's range; the module, whose scale is not the declared one, is a
    mismatch on its outputs."""
    import torch

    import proofs_checks as pc

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            return self.mha(x, x, x, need_weights=False, attn_mask=mask)[0]

    r = pc.check_attention(Attn(), causal=True, scale=1e308, mode="quick", isolate=False, progress=False)
    assert r.outcome == "mismatch", r.outcome


def test_the_plugin_probe_imports_the_users_examples_not_the_checkouts(tmp_path):
    """18a F1: the plugin import probe put the folder of tverify's packages (an editable checkout's root) before the
    user's ``PYTHONPATH``: a plugin importing its project's ``examples``/``tests``/``benchmarks`` got tverify's (and ran
    tverify's examples/my_attn.py). The probe now drops that folder once tverify's packages are bound."""
    import os
    import subprocess

    from tests.test_hostile_round16a import site_with

    proj = tmp_path / "proj"
    (proj / "examples").mkdir(parents=True)
    (proj / "examples" / "my_attn.py").write_text("WHO = 'user'\n")
    (proj / "benchmarks").mkdir()
    (proj / "benchmarks" / "__init__.py").write_text("WHO = 'user'\n")
    site = site_with(tmp_path, "import examples.my_attn as _E, benchmarks as _B\nassert _E.WHO == _B.WHO == 'user'\n")
    tverify = os.path.join(os.path.dirname(sys.executable), "tverify")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(proj)]), OMP_NUM_THREADS="1",
               TVERIFY_STORE=str(tmp_path / "store"))
    r = subprocess.run([tverify, "list", "zzh.*"], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=300)
    assert r.returncode == 0 and "zzh.twice" in r.stdout, (r.returncode, r.stdout[-300:], r.stderr[-500:])


def test_seed_spread_never_passes_on_a_non_finite_spread_or_measurement():
    """18b F1: ``seed_spread([[1e308], [-1e308]], [5])`` and seeds of inf passed with error 0 (the standard error
    overflowed to inf, and |mean − ref| / inf = 0). The spread is computed in units of each entry's largest value, and a
    non-finite measurement, reference or accepted band (k·SE beyond float64) fails."""
    from proofs_checks.comparisons import seed_spread

    assert not seed_spread([[1e308], [-1e308]], [5.0]).passed
    assert not seed_spread([[float("inf")], [float("inf")]], [float("inf")]).passed
    r = seed_spread([[1e200], [-1e200]], [5.0])  # SE 1e200, finite: a pass with a resolution that says how weak it is
    assert r.passed and r.details["standard_error"][0] == 1e200
    assert seed_spread([[1e200], [1.01e200], [0.99e200]], [1e200]).passed
    assert not seed_spread([[1e200], [1.01e200], [0.99e200]], [1.2e200]).passed


def test_the_jitter_of_outputs_that_are_all_nan_is_measured_not_raised():
    """18b F3: ``--scale 1e-308``: at the large-logit probes the module's outputs were all NaN, and the run-to-run
    difference took ``max()`` of no finite entries: tverify's own RuntimeError, reported as the module raising, failed
    causal_no_future_leak. The difference is now measured over the finite entries (none: 0)."""
    import torch

    from numerics.attention_structural import jitter

    class Probe:
        def run(self, x):
            return None, torch.full((1, 2, 4), float("nan"), dtype=torch.float64)

    assert jitter(Probe(), torch.zeros(1, 2, 4), torch.full((1, 2, 4), float("nan"), dtype=torch.float64)) == 0.0
