"""Hostile pass 55, tester B: reproducers, each failing on 4f60651 (run there as xfail, strict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_hostile_round53a import _env, _tv  # the private environment and `python -m proofs_checks` of 53a

# a plugin claim `GROUP.double` (2x = x + x, one numeric check, one mutant) titled TITLE
DOUBLE = """
import numpy as np
from proofs_checks.plugin import Claim, Mutant, close, numeric, register

def form(x):
    return 2 * x

@numeric("2x against x + x")
def vs_sum(form, ctx):
    x = ctx.rng().standard_normal(ctx.size(50, 100, 200))
    return close(form(x), x + x, 1e-12 * (1 + abs(x)), "rounding")

register(Claim(id="{group}.double", title="{title}", statement="2x = x + x", source="arithmetic", kind="identity",
               form=form, checks=(vs_sum,), no_symbolic="arithmetic",
               mutants=(Mutant("triple", "wrong constant", "3x", lambda x: 3 * x),)))
"""


def _site(tmp_path: Path, plugins: dict[str, str]) -> Path:
    """Claims plugins installed the way the tests install them: per name a module NAME_mod and a .dist-info whose
    entry point NAME names it, all in one folder for PYTHONPATH."""
    from tests.test_hostile_round54b import _plugin

    for name, source in plugins.items():
        site = _plugin(tmp_path, name, source, f"{name}_mod")
    return site


def _tv_with(tmp_path: Path, site: Path, *argv: str) -> subprocess.CompletedProcess:
    """``_tv`` with the plugins of ``site`` installed."""
    env = _env(tmp_path)
    env["PYTHONPATH"] += f"{os.pathsep}{site}"
    return subprocess.run([sys.executable, "-m", "proofs_checks", *argv], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=280)


def _squatted(tmp_path: Path) -> Path:
    """Plugin zzgood registers zzgood.double; plugin zzdup (loaded first) registers a claim of that id too."""
    return _site(tmp_path, {"zzgood": DOUBLE.format(group="zzgood", title="2x = x + x"),
                            "zzdup": DOUBLE.format(group="zzgood", title="IMPOSTOR 2x = x + x")})


def _att_svm_data(folder: Path, n: int = 200, T: int = 20, d: int = 20) -> Path:
    """A separable Att-SVM instance (token 0 optimal in every sequence) whose Att-SVM programme has n·(T−1)
    constraints over d² unknowns: about 250 MB by tverify's own estimate at the default sizes, nothing of it
    from --iters or --seeds."""
    rng = np.random.default_rng(0)
    X = np.zeros((n, T, d))
    X[:, 0, 0] = 1.0
    X[:, 1:, 0] = rng.uniform(-1, 0, (n, T - 1))
    X[:, :, 1:] = 0.01 * rng.standard_normal((n, T, d - 1))
    z = np.zeros((n, d))
    z[:, 0] = 1.0
    v = np.zeros(d)
    v[0] = 1.0
    path = folder / "data.npz"
    np.savez(path, X=X, z=z, y=np.ones(n), v=v)
    return path


# 55b-1: `sweep` describes each parameter by the first sentence of its option's help, cut at ". ": the help of
# `check lyapunov --f`/`--V` says "e.g. ..." and the sweep's JSON (and page) say "The candidate Lyapunov function, e.g".
def test_f1_sweep_parameter_descriptions_are_not_cut_mid_sentence(tmp_path):
    r = _tv(tmp_path, "sweep", "check", "lyapunov", "--grid", "f=-x,-y|-x**3,-y V=x**2+y**2", "--quick",
            "--no-progress", "--json", "-")
    assert r.returncode == 0, r.stderr[-2000:]
    described = json.loads(r.stdout)["parameters"]
    assert not [k for k, text in described.items() if text.rstrip().endswith("e.g")], described


# 55b-2: a memory refusal of `check att-svm` driven by the data (the Att-SVM programme's n·(T−1) × d² constraints)
# advises "lower --iters or --seeds" — also with --iters 1 --seeds 1, where lowering them changes nothing.
def test_f2_att_svm_memory_refusal_names_what_drives_it(tmp_path):
    data = _att_svm_data(tmp_path)
    r = _tv(tmp_path, "check", "att-svm", "--data", str(data), "--iters", "1", "--seeds", "1", "--max-memory", "0.05",
            "--no-progress")
    assert r.returncode == 2 and "Att-SVM constraints" in r.stderr, r.stderr[-2000:]
    assert "lower --iters or --seeds" not in r.stderr, r.stderr


# 55b-3: with --weights the same data's Att-SVM programme is solved with no memory check at all: --max-memory 0.05
# (51 MB) against the 247 MB that the run without --weights estimates and refuses; docs/cli.md: "Sizes whose
# estimated memory exceeds half the available memory are refused before anything is allocated (--max-memory changes
# the limit)".
def test_f3_att_svm_weights_keeps_the_memory_limit(tmp_path):
    data = _att_svm_data(tmp_path)
    np.savez(tmp_path / "W.npz", W=np.eye(20))
    r = _tv(tmp_path, "check", "att-svm", "--data", str(data), "--weights", str(tmp_path / "W.npz"),
            "--max-memory", "0.05", "--no-progress")
    assert r.returncode == 2 and "memory" in r.stderr, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])


# 55b-4: a tensor saved by torch.save in its legacy (non-zip) format, which torch.load(weights_only=True) reads, is
# refused with "is not a file written by torch.save (no zip header)": it is one.
def test_f4_a_legacy_torch_save_file_is_not_called_foreign(tmp_path):
    import torch

    torch.save(torch.tensor(np.random.default_rng(0).standard_normal((5, 8))), tmp_path / "P.pt",
               _use_new_zipfile_serialization=False)
    r = _tv(tmp_path, "check", "hopfield", "--patterns", str(tmp_path / "P.pt"), "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "not a file written by torch.save" not in r.stderr, r.stderr


# 55b-5: `sweep --grid` has no way to give one value that holds commas (a 2-dimensional Λ, a Lyapunov field in two
# variables): "f=-x,-y" is split into two values, and "f=-x,-y|" (the `|` the help offers for such values) is refused
# as "an empty value"; `sweep check icl --grid "N=5 lambda=1,2"` silently runs two 1-dimensional Λ.
def test_f5_sweep_grid_takes_one_value_holding_commas(tmp_path):
    r = _tv(tmp_path, "sweep", "check", "lyapunov", "--grid", "f=-x,-y|", "--grid", "V=x**2+y**2", "--quick",
            "--no-progress", "--json", "-")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["grid"]["f"] == ["-x,-y"]


# 55b-6: when plugin zzdup registers `zzgood.double` before plugin zzgood does, the warning says "claims plugin
# 'zzgood' (zzgood_mod) failed to load and was skipped: RegistryError: claim 'zzgood.double' registered twice" and
# names no other plugin (the reader looks for a double registration inside zzgood); `run zzgood` then verifies the
# impostor's claim, exit 0.
def test_f6_the_plugin_that_took_a_claim_id_first_is_named(tmp_path):
    r = _tv_with(tmp_path, _squatted(tmp_path), "list", "zz*")
    assert "registered twice" in r.stderr, r.stderr[-2000:]
    assert "zzdup" in r.stderr, r.stderr


# 55b-7: `show` in a fresh store prints that skipped plugin's warning twice (`list` and `run` once); docs/extending.md:
# "skips the plugin with **one warning line** on stderr".
def test_f7_show_warns_once_of_a_skipped_plugin(tmp_path):
    r = _tv_with(tmp_path, _squatted(tmp_path), "show", "zzgood.double")
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln and "'zzgood'" in ln]
    assert len(warnings) == 1, r.stderr


# 55b-8: the same squat: `run zzgood.double` runs and verifies zzdup's claim (its check vs_sum of zzdup), exit 0, below
# the warning that plugin zzgood was skipped; docs/extending.md: "A command that names a claim of a skipped plugin
# (`tverify run mine.rope`) then exits 2 with one line ("no claim matches 'mine.rope'")".
def test_f8_a_skipped_plugins_claim_is_not_verified_from_another_plugin(tmp_path):
    r = _tv_with(tmp_path, _squatted(tmp_path), "run", "zzgood.double", "--quick", "--no-progress")
    assert "skipped" in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2, (r.returncode, r.stdout[-1500:])


# 55b-9: `tverify --store DIR show ID` with no result there says "last result: none yet (run `tverify run ID`)": not
# where it looked (docs/cli.md: "`show` says where it looked"; only --full names the store), and the run it advises
# writes to another store (no --store), after which the same `show` still answers "none yet".
def test_f9_show_without_a_result_names_the_store_it_looked_in(tmp_path):
    other = tmp_path / "other-store"
    r = _tv(tmp_path, "--store", str(other), "show", "attn.layernorm")
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("last result:"))
    assert "none yet" in line, line
    assert str(other) in line or "--store" in line, line


# 55b-10: `list --markdown --docs-dir D` run twice, CATALOGUE.md edited by hand in between: refused (right), saying
# "CATALOGUE.md exists and is not a catalogue tverify wrote there (its record of written outputs does not list it)" —
# the record does list it (tverify wrote it there); it was changed since (cli.py says the same for every file that
# `owned.is_ours` rejects).
def test_f10_an_edited_catalogue_is_not_said_to_be_unlisted(tmp_path):
    docs = tmp_path / "docs-out"
    first = _tv(tmp_path, "list", "--markdown", "--docs-dir", str(docs))
    assert first.returncode == 0, first.stderr[-2000:]
    with open(docs / "CATALOGUE.md", "a") as f:
        f.write("\nmy note\n")
    r = _tv(tmp_path, "list", "--markdown", "--docs-dir", str(docs))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "does not list it" not in r.stderr, r.stderr


# 55b-11: `check lyapunov --report DIR` on the folder of an earlier `tverify sweep --out DIR` (its results.json, .csv
# and page: hours of work at real sizes) replaces it with a Lyapunov report, exit 0, no --force, no word; the help
# promises "a new folder or a previous tverify report (replaced atomically); any other non-empty folder is refused"
# (the same for `report --out` on a `reproduce --out` folder).
def test_f11_check_report_does_not_replace_a_sweeps_results(tmp_path):
    sweep = _tv(tmp_path, "sweep", "attn.scaling_variance", "--grid", "d_k=2", "--quick", "--no-progress", "--out", "sw")
    assert sweep.returncode == 0 and (tmp_path / "sw" / "results.csv").is_file(), sweep.stderr[-2000:]
    r = _tv(tmp_path, "check", "lyapunov", "--f", "-x,-y", "--V", "x**2+y**2", "--quick", "--no-progress",
            "--report", "sw")
    assert (tmp_path / "sw" / "results.csv").is_file(), (r.returncode, sorted(p.name for p in (tmp_path / "sw").iterdir()))
    assert r.returncode == 2, r.stderr[-2000:]
