"""Issue 35: a claim of one's own in mathematics, not plumbing — vector/matrix arguments with
shapes, one resolution rule for plugin checks, the trained-check toolkit with its convergence
guard, hypotheses in the scaffold, the RoPE worked example (lines, plumbing share, verified,
mutants killed)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.tiers import moved
import sympy as sp

from proofs_checks.context import RunContext
from proofs_checks.plugin import (Check, Claim, DerivationBuilder, Inconclusive, Mutant, bind, check_claim, close,
                                  matches_derivation, matrix, numeric, run_mutants, scalar, train, trained, vector)
from theory import shapes

ROOT = Path(__file__).resolve().parent.parent
Q = RunContext(mode="quick")


# ------------------------------------------------------------------------------------------------
# 1. arguments with shapes


def test_bind_sample_and_explicit():
    args = (vector("q", "d"), matrix("W", "d", 2), scalar("t", positive=True))
    q, W, t = bind(args, d=3)
    assert q.shape == (3, 1) and W.shape == (3, 2) and t.is_positive
    Qs, Ws, _ = bind(args)
    assert isinstance(Qs, sp.MatrixSymbol) and Qs.shape == (shapes.size_symbol("d"), 1)
    vals = shapes.sample(args, np.random.default_rng(0), d=4)
    assert [np.shape(v) for v in vals] == [(4,), (4, 2), ()]
    e, (q2, W2, _) = shapes.explicit((Qs.T * Ws * sp.Matrix([1, 1]))[0, 0], (Qs, Ws, t), d=2)
    f = sp.lambdify(shapes.lambdify_args((q2, W2)), e)
    qv, Wv = np.array([1.0, 2.0]), np.array([[1.0, 0.5], [3.0, -1.0]])
    assert f(qv, Wv) == pytest.approx(qv @ Wv @ np.ones(2))
    with pytest.raises(ValueError, match="size"):
        vector("q", "d").value(np.random.default_rng(0), {})
    assert shapes.size_names(args) == ["d"]


def test_matches_derivation_matrix_symbol_at_symbolic_size():
    args = (matrix("W", "d", "d"), vector("x", "d"))

    def derive():  # W x at symbolic d: a vector result
        b = DerivationBuilder("W x")
        W, x = b.fact("args", bind(args))
        return b.done(b.step("product", W * x))

    chk = matches_derivation(derive, args, sizes={"d": (1, 3, 4)})
    r = chk.fn(lambda W, x: W @ x, Q)
    assert r.passed and r.sizes["sizes"] == [{"d": 1}, {"d": 3}, {"d": 4}]
    assert not chk.fn(lambda W, x: W.T @ x, Q).passed
    bad = chk.fn(lambda W, x: float(x.sum()), Q)  # wrong number of entries: fails, never broadcasts
    assert not bad.passed and "shape mismatch" in bad.reason


def test_matches_derivation_per_size_derive_key_and_custom_sample():
    args = (vector("q", "d"),)

    def derive(d=2):  # a derivation built at each fixed size, dict result
        b = DerivationBuilder("norm")
        (q,) = b.fact("args", bind(args, d=d))
        return b.done({"sq": b.step("|q|^2", (q.T * q)[0, 0]), "sum": b.step("sum", sum(q))})

    sq = matches_derivation(derive, args, key="sq", sizes={"d": (2, 5)}, name="sq")
    assert sq.fn(lambda q: q @ q, Q).passed and not sq.fn(lambda q: q @ q + 1e-6, Q).passed
    s = matches_derivation(derive, lambda rng, d: (rng.uniform(0, 1, d),), key="sum", sizes=[{"d": 3}], name="s")
    assert s.fn(lambda q: q.sum(), Q).passed and not s.fn(lambda q: q.sum() * (1 + 1e-9), Q).passed


# ------------------------------------------------------------------------------------------------
# 2. resolution: one rule, per-draw tolerances included, confirmed by --continuous


def test_close_per_draw_resolution_is_relative_and_confirmed():
    rng = np.random.default_rng(1)
    ref = rng.uniform(1, 10, 50)
    tol = 1e-6 * np.abs(ref) * rng.uniform(1, 3, 50)
    r = close(ref + 0.1 * tol, ref, tol, "per-draw")
    eps = float(np.min((tol + 0.1 * tol) / ref))
    assert r.passed and r.resolution == pytest.approx(eps) and r.resolution_units.startswith("relative change")
    assert r.details["resolution_confirmed"]["rejects_2eps"] is True
    assert not close(ref * (1 + 2 * eps), ref, tol, "x").passed  # the rule: 2ε is rejected
    assert close(ref, ref, 0.0, "exact").passed and close(ref, ref, 0.0, "exact").resolution == 0.0
    assert not close(ref + 1e-9, ref, 0.0, "exact").passed
    assert not close([1.0, 2.0], [1.0], 1.0, "x").passed  # shapes that disagree fail


def _per_draw_claim():
    def derive():
        b = DerivationBuilder("dot")
        q, k = b.fact("args", bind((vector("q", 3), vector("k", 3))))
        return b.done(b.step("dot", (q.T * k)[0, 0]))

    @numeric("float32 dot with a per-draw tolerance")
    def f32(form, ctx):
        q, k = ctx.rng().standard_normal((2, 200, 3))
        ref = np.sum(q.astype(np.float32) * k.astype(np.float32), -1).astype(float)
        tol = 8 * 3 * np.finfo(np.float32).eps * np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)
        return close(form(q, k), ref, tol, "float32 rounding of 3 products per draw")

    return Claim(id="zz.perdraw", title="dot", statement="q·k", source="-", kind="identity",
                 form=lambda q, k: np.sum(q * k, -1), derivation=derive,
                 checks=(matches_derivation(derive, (vector("q", 3), vector("k", 3))), f32),
                 mutants=(Mutant("twice", "wrong constant", "2 q·k", lambda q, k: 2 * np.sum(q * k, -1)),))


def test_plugin_resolution_meaningful_and_continuous_confirms():
    from proofs_checks.continuous import continuous_probe
    from proofs_checks.runner import run_claim

    c = _per_draw_claim()
    res = run_claim(c, RunContext(mode="quick"))
    assert res.status == "verified"
    f32 = next(o for o in res.checks if o.name == "f32").result
    assert 1e-9 < f32.resolution < 1e-4 and f32.resolution_units.startswith("relative change")
    probe = continuous_probe(c, res, RunContext(mode="quick"))
    assert probe["check"] == "f32" and probe["rejected_at_2eps"] is True and probe["epsilon"] == f32.resolution


# ------------------------------------------------------------------------------------------------
# 3. the trained-check toolkit


def _quadratic(lr, criterion=1e-16, claim_id="zz.trained"):
    import torch

    target = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)

    @trained("SGD on |w - a|^2 reaches a, over 6 seeds")
    def learn(form, ctx):
        run = train(lambda g, S: {"w": torch.randn(S, 3, generator=g, dtype=torch.float64)},
                    lambda p: ((p["w"] - target) ** 2).sum(-1), ctx, seeds=6, steps=300, lr=lr, criterion=criterion,
                    optimiser="sgd", schedule="constant")
        return run.compare(run.params["w"].numpy(), form(), floor=1e-8, what="the learned minimiser")

    @numeric("direct")
    def direct(form, ctx):
        return close(form(), target.numpy(), 1e-15, "float64 constants")

    def derive():
        b = DerivationBuilder("argmin")
        return b.done(b.step("a", sp.Matrix([1, -2, sp.Rational(1, 2)])))

    sym = Check("sym", "symbolic", lambda form, ctx: close(form(), np.array([1.0, -2.0, 0.5]), 1e-15, "exact values"))
    return Claim(id=claim_id, title="argmin", statement="argmin |w-a|^2 = a", source="-", kind="identity",
                 form=lambda: target.numpy().copy(), derivation=derive, checks=(sym, direct, learn),
                 mutants=(Mutant("shift", "wrong constant", "a + 0.01", lambda: target.numpy() + 0.01),))


def test_train_batched_converges_with_spread_ffp_and_resolution():
    r = check_claim(_quadratic(0.1))
    assert r.status == "verified", str(r)
    learn = next(o for o in r.result.checks if o.name == "learn").result
    d = learn.details
    assert d["seeds"] == 6 and d["training"]["criterion"] == 1e-16 and len(d["training"]["final"]) == 6
    assert d["false_failure_probability"]["model"].startswith("Student t with 5 degrees")
    assert learn.resolution > 0 and learn.resolution_units.startswith("relative change")
    assert "reached loss ≤ 1e-16" in learn.justification
    assert "false-failure probability ≤" in learn.justification
    assert run_mutants(_quadratic(0.1)).all_killed


def test_lr_zero_is_inconclusive_with_the_missed_criterion_never_pass_or_fail():
    r = check_claim(_quadratic(0.0))
    learn = next(o for o in r.result.checks if o.name == "learn")
    assert learn.status == "inconclusive" and learn.result.passed is None  # neither pass nor fail
    assert r.status == "inconclusive"
    msg = learn.result.skip_reason
    assert msg.startswith("inconclusive: the training did not reach its loss criterion (final loss ≤ 1e-16)")
    assert "6 of 6 seeds missed it after 300 steps of sgd (lr 0" in msg and "start" in msg
    assert r.status != "verified" and "loss criterion" in r.message
    m = run_mutants(_quadratic(0.0))
    assert m.refused and not any(row.killed for row in m.rows)  # a mutant is never "killed" by a failed training


@pytest.mark.integration(reason="the CLI run of a trained plugin claim end to end")
def test_cli_run_reports_the_untrained_check_not_verified(tmp_path):
    from proofs_checks import runner
    from proofs_checks.registry import registry, select
    from tests.cli_helpers import invoke

    select([])
    c = _quadratic(0.0, claim_id="zzlr.zero")
    registry.add(c)
    try:
        code, out, _ = invoke("--store", str(tmp_path / "s"), "run", "zzlr.zero", "--quick", "--no-progress", "--json", "-")
    finally:
        registry._claims.pop("zzlr.zero", None)
    res = json.loads(out)["results"][0]
    assert res["status"] != "verified" and "loss criterion (final loss ≤ 1e-16)" in res["message"]
    assert res["status"] == "inconclusive" and code == 3 and "inconclusive" in runner.INCONCLUSIVE


def test_train_guard_figure_and_device(tmp_path):
    import torch

    ctx = RunContext(mode="quick", figure_dir=tmp_path).for_check("zz.fig", "learn")
    run = train(lambda g, S: {"w": torch.zeros(S, 2, dtype=torch.float64)}, lambda p: ((p["w"] - 1) ** 2).sum(-1), ctx,
                seeds=3, steps=20, lr=0.0, criterion=1e-3, guard=False)
    assert not run.converged and run.curve.shape == (21, 3) and (tmp_path / run.figure).exists()
    assert ctx.take_figures() == []  # attached once, by run.compare
    assert run.compare(np.ones((3, 2)), np.ones(2), floor=1e-3).figures == [run.figure]
    with pytest.raises(Inconclusive, match=r"final loss ≤ 0.001\): 3 of 3 seeds") as e:
        run.guard()
    assert e.value.criterion == 1e-3 and e.value.curve.shape == (21, 3) and "loss curves: zz.fig__learn_loss.png" in str(e.value)
    with pytest.raises(ValueError, match="one loss per seed"):
        train(lambda g, S: {"w": torch.zeros(S, 2)}, lambda p: p["w"].sum(), RunContext(mode="quick"), seeds=2, steps=1,
              criterion=1.0)


# ------------------------------------------------------------------------------------------------
# 4./5. the scaffold: RoPE, vector-valued, hypotheses with a counterexample; the worked example


def _worked_example() -> str:
    text = (ROOT / "docs" / "extending.md").read_text()
    sec = text.split("## Worked example", 1)[1]
    return sec.split("```python\n", 1)[1].split("```", 1)[0]


#: the plumbing rule for the worked example: lines that are not mathematics, tolerances or statement — imports
#: (with their continuation lines), decorators, check signatures, the Claim header and its checks= line, the
#: return of a comparison, empty accumulators, conversions to and from torch and to the device, a docstring
_PLUMBING = re.compile(r"^(import |from |\s+import |\s+(\w+, )*\w+\)$|@|def \w+\(form, ctx\)|CLAIM = |"
                       r"\s+(id|statement|checks)=|\s+return (close|run\.compare)\(|\s+\w+(, \w+)* = \[\](, \[\])*$|"
                       r"\s+t = lambda a: torch\.tensor|\s+kw = dict\(dtype=|\s+q, k(, \w+)? = run\.params|\"\"\")")


def test_worked_example_is_the_scaffold_short_and_mostly_mathematics():
    from proofs_checks.scaffold import files_for

    ex = _worked_example()
    assert ex == files_for("mine.rope")["tverify_mine/claims.py"]
    lines = [ln for ln in ex.splitlines() if ln.strip()]
    plumbing = [ln for ln in lines if _PLUMBING.match(ln)]
    assert len(lines) <= 80, len(lines)
    assert len(plumbing) <= len(lines) / 3, (len(plumbing), plumbing)
    assert f"80 non-blank lines; {len(plumbing)} of them plumbing" in (ROOT / "docs" / "extending.md").read_text()
    for needle in ("vector(\"q\", \"d\")", "matches_derivation(derive, ARGS, sizes=", "import torch", "train(",
                   "counterexample=", "Clause(", "close("):
        assert needle in ex


def _load_scaffold(tmp_path, claim_id):
    import importlib

    from proofs_checks.scaffold import write_scaffold

    write_scaffold(claim_id, tmp_path)
    pkg = "tverify_" + claim_id.split(".")[0]
    sys.path.insert(0, str(tmp_path))
    try:
        for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[name]
        return importlib.import_module(pkg + ".claims")
    finally:
        sys.path.remove(str(tmp_path))


def test_scaffold_claim_verified_mutants_killed_resolution_confirmed(tmp_path):
    from proofs_checks.continuous import continuous_probe
    from proofs_checks.registry import registry
    from proofs_checks.runner import run_claim

    try:
        mod = _load_scaffold(tmp_path, "zzrope.relative")
        c = mod.CLAIM
        res = run_claim(c, RunContext(mode="quick"))
        assert res.status == "verified", res.message
        by = {o.name: o for o in res.checks}
        assert by["trained_offsets"].layer == "trained" and by["trained_offsets"].result.details["seeds"] == 8
        assert by["torch_complex"].result.resolution_units.startswith("relative change")
        m = run_mutants(c)
        assert m.all_killed and len(m.rows) == 4
        assert any(r.kind == "hypothesis dropped" and r.killed for r in m.rows)
        probe = continuous_probe(c, res, RunContext(mode="quick"), only_best=True)
        assert probe["rejected_at_2eps"] is True and probe["epsilon"] > 1e-10
    finally:
        registry._claims.pop("zzrope.relative", None)


@moved("the scaffold's whole claim run again with its learning rate edited to 0 (the derivation, the numeric "
       "checks and 8 seeds of training): the training guard through a scaffolded package, end to end",
       "tests/test_own_claim_toolkit.py::test_lr_zero_is_inconclusive_with_the_missed_criterion_never_pass_or_fail",
       "tests/test_own_claim_toolkit.py::test_scaffold_claim_verified_mutants_killed_resolution_confirmed")
def test_scaffold_trained_check_guard_when_lr_is_zero(tmp_path):
    from proofs_checks.registry import registry

    try:
        from proofs_checks.scaffold import write_scaffold

        write_scaffold("zzlr.rope", tmp_path)
        src = tmp_path / "tverify_zzlr" / "claims.py"
        text = src.read_text()
        assert "lr=0.05" in text
        src.write_text(text.replace("lr=0.05", "lr=0.0"))
        import importlib

        sys.path.insert(0, str(tmp_path))
        try:
            sys.modules.pop("tverify_zzlr.claims", None)
            sys.modules.pop("tverify_zzlr", None)
            mod = importlib.import_module("tverify_zzlr.claims")
        finally:
            sys.path.remove(str(tmp_path))
        r = check_claim(mod.CLAIM)
        assert r.status != "verified"
        tr = next(o for o in r.result.checks if o.name == "trained_offsets")
        assert r.status == "inconclusive" and tr.status == "inconclusive" and "did not reach its loss criterion (final loss ≤ 1e-12)" in tr.result.skip_reason
    finally:
        registry._claims.pop("zzlr.rope", None)


# ------------------------------------------------------------------------------------------------
# 6. discovery: the plugins' catalogue entries cached by their own fingerprint


def _dist(site, group: str) -> None:
    """A scaffolded plugin ``group.rope`` installed (metadata and entry point) in the folder ``site``."""
    from proofs_checks.scaffold import write_scaffold

    write_scaffold(f"{group}.rope", site)
    info = site / f"tverify_{group}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tverify-{group}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[tverify.claims]\n{group} = tverify_{group}.claims\n")


@pytest.mark.parametrize("installed", [False, True], ids=["alone", "beside_another_plugin"])
def test_plugin_catalogue_cached_by_plugin_fingerprint_without_builtin_modules(tmp_path, monkeypatch, installed):
    """``installed``: another third-party plugin is already installed in the environment (it failed
    with ``TypeError: cannot unpack non-iterable NoneType`` while one was)."""
    from proofs_checks import claims as claim_pkg
    from proofs_checks.output import catalogue
    from proofs_checks.registry import registry

    if installed:
        _dist(tmp_path / "pre", "zzpre")
        monkeypatch.syspath_prepend(str(tmp_path / "pre"))
    # the built-in part's fingerprint (a plugin already installed in the environment left out)
    builtin_fp = catalogue.source_fingerprint(plugins=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "catalogue.json").write_text(json.dumps({"schema": catalogue.SCHEMA, "fingerprint": builtin_fp,
                                                     "claims": [{"id": "attn.fake", "group": "attn"}]}))
    monkeypatch.setattr(catalogue, "repo_docs_dir", lambda: docs)
    monkeypatch.setattr(claim_pkg, "PLUGIN_SOURCES", set())
    monkeypatch.setattr(claim_pkg, "PLUGIN_NAMES", {})  # (the names other tests' plugins left in this process)
    site = tmp_path / "site"
    _dist(site, "zzcat")
    monkeypatch.syspath_prepend(str(site))
    cache = tmp_path / "cache"
    assert catalogue.load_with_plugins(None) is None
    try:
        doc, _ = catalogue.load_with_plugins(cache)
        ids = [e["id"] for e in doc["claims"]]
        assert ids[0] == "attn.fake" and "zzcat.rope" in ids and "attn.convex_combination" not in ids, ids
        assert ("zzpre.rope" in ids) == installed, ids
        assert doc["fingerprint"] == catalogue.source_fingerprint() != builtin_fp
        assert len(list(cache.glob("plugins-*.json"))) == 1
        assert catalogue.load_fresh(cache)[0]["claims"] == doc["claims"]  # next call: a plain cache hit
        registry._claims.pop("zzcat.rope", None)
        monkeypatch.setattr(claim_pkg, "load_plugins", lambda: pytest.fail("a fresh plugin cache imports nothing"))
        assert [e["id"] for e in catalogue.load_with_plugins(cache)[0]["claims"]] == ids
        monkeypatch.undo()  # an edited plugin: its part is recomputed, the built-in part is not
        monkeypatch.setattr(catalogue, "repo_docs_dir", lambda: docs)
        monkeypatch.syspath_prepend(str(site))
        if installed:
            monkeypatch.syspath_prepend(str(tmp_path / "pre"))
        src = site / "tverify_zzcat" / "claims.py"
        src.write_text(src.read_text().replace('title="RoPE attention scores', 'title="Edited: RoPE attention scores'))
        for name in [m for m in sys.modules if m.startswith("tverify_zzcat")]:
            del sys.modules[name]
        doc2, _ = catalogue.load_with_plugins(cache)
        by_id = {e["id"]: e for e in doc2["claims"]}
        assert by_id["zzcat.rope"]["title"].startswith("Edited") and doc2["claims"][0]["id"] == "attn.fake"
    finally:
        for group in ("zzcat", "zzpre"):
            registry._claims.pop(f"{group}.rope", None)
            for name in [m for m in sys.modules if m.startswith(f"tverify_{group}")]:
                del sys.modules[name]
