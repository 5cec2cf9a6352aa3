"""tverify survey, attention as written today (issue 37, items 6 and 7): the modern entries of
``proofs_checks/survey/catalogue_modern.py`` (FlexAttention, attn-gym, Keras 3, timm, litgpt, further
Hugging Face families), what the page states per entry, the dependency resolution pinned to the running
torch. Fast catalogue-level checks; the FlexAttention entries (torch only) run under ``integration``."""

import inspect

import pytest

from proofs_checks.survey.catalogue import _PRE, CATALOGUE, HELPERS
from proofs_checks.survey.catalogue_modern import ENTRIES as MODERN


def test_names_are_unique_and_the_catalogue_reaches_41_entries_from_10_libraries():
    names = [e.name for e in CATALOGUE]
    assert len(names) == len(set(names))
    assert len(MODERN) >= 16 and len(CATALOGUE) >= 41
    assert len({e.package for e in CATALOGUE}) >= 10
    assert {"attn-gym", "keras", "timm", "litgpt"} <= {e.package for e in MODERN}


def test_modern_adapters_are_short_compile_and_say_what_they_are():
    for e in MODERN:
        assert e.adapter_lines <= 10, (e.name, e.adapter_lines)
        assert "def make" in e.adapter or "make = " in e.adapter, e.name
        compile(_PRE + HELPERS + e.adapter, e.name, "exec")
        assert e.what.strip(), e.name
        assert e.version is None or e.package != "torch", e.name


def test_declarations_are_run_attention_keywords_with_valid_values():
    from proofs_checks.sanity.attention import run_attention

    params = inspect.signature(run_attention).parameters
    for e in MODERN:
        unknown = set(e.declare) - set(params)
        assert not unknown, (e.name, unknown)
        d = e.declare
        assert d.get("positional", "none") in ("none", "learned", "sinusoidal", "rope", "alibi"), e.name
        assert d.get("qk_norm") in (None, "rms", "layer"), e.name
        assert d.get("kv_grouping") in (None, "hf", "tiled"), e.name
        assert d.get("compute_dtype") in (None, "float64", "float32", "bfloat16", "float16"), e.name
        if "rope_dims" in d or "rope_base" in d or "rope_convention" in d:
            assert d.get("positional") == "rope", e.name
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in e.env), e.name


def test_findings_in_current_releases_carry_a_note_and_an_upstream_reference():
    # entries recorded as library behaviour (Falcon's scaled ALiBi, Keras' float64 policy) say why
    for name in ("hf-falcon-alibi", "keras-mha", "keras-mha-causal", "keras-gqa"):
        e = next(x for x in MODERN if x.name == name)
        assert e.note and e.issue and e.issue["url"].startswith("https://github.com/"), name


def _row(**kw):
    row = {"name": "x", "library": "lib", "version": "1", "declaration": "--causal", "adapter_lines": 3,
           "verdict": "ok", "findings": [], "reference": None, "expected": None, "properties": [], "what": "w",
           "install": [], "note": "", "adapter": "def make(): pass", "known": None, "by_design_props": []}
    row.update(kw)
    return row


def test_the_page_states_what_was_declared_and_what_was_read_from_the_module():
    from proofs_checks.survey.page import render_markdown

    doc = {"created": "now", "command": "tverify survey", "mode": "quick", "seed": 0, "seconds": 1.0,
           "summary": {"ok": 2}, "rows": [_row(name="with", config_read=["rope_base 500000 (attn.config.rope_theta)"]),
                                          _row(name="without")]}
    md = render_markdown(doc)
    assert "| declared | read from the module |" in md
    assert "rope_base 500000 (attn.config.rope_theta)" in md
    assert "Declared: `--causal`; read from the module: rope_base 500000" in md
    assert "Declared: `--causal`; read from the module: –." in md  # no config_read key: said, not invented


def test_dependencies_are_resolved_against_the_running_torch_and_numpy():
    import importlib.metadata as md

    from proofs_checks.survey.runner import _env_pins

    pins = dict(_env_pins())
    assert pins["torch"] == md.version("torch").split("+")[0] and "+" not in pins["torch"]
    assert pins["numpy"] == md.version("numpy")


def test_an_entry_environment_reaches_its_process(monkeypatch, tmp_path):
    """Entry.env (KERAS_BACKEND=torch) is set in the worker's environment, before the library's import."""
    import subprocess

    from proofs_checks.survey import runner
    from proofs_checks.survey.entry import Entry

    seen = {}

    def fake_run(cmd, **kw):
        seen.update(kw["env"])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runner.subprocess, "run", fake_run)
    e = Entry("env-probe", "probe", "torch", None, "torch", "def make(): pass", {}, env=(("KERAS_BACKEND", "torch"),))
    row = runner.run_entry(e, cache=tmp_path, mode="quick", seed=0, timeout=10, install=False)
    assert seen.get("KERAS_BACKEND") == "torch" and row["status"] == "check-failed"  # no result file: said


@pytest.mark.integration(reason="the FlexAttention survey entries end to end")
def test_flex_attention_entries_are_ok_on_cpu_with_gradients_not_available(tmp_path):
    from proofs_checks.survey.runner import row_verdict, run_entry

    flex = [e for e in MODERN if e.package == "torch" and e.name.startswith("flex-")]
    assert len(flex) >= 3
    for e in flex:
        row = row_verdict(e, run_entry(e, cache=tmp_path, mode="quick", seed=0, timeout=300, install=False))
        assert row["status"] == "checked" and row["verdict"] == "ok", (e.name, row.get("why"), row.get("failed"))
        grad = next(p for p in row["properties"] if p["name"] == "gradients_match_reference")
        assert grad["status"] == "skip" and "not available" in grad["detail"], (e.name, grad)
        assert next(p for p in row["properties"] if p["name"] == "matches_reference")["status"] == "pass", e.name


def test_resolution_is_constrained_to_the_running_torch_with_a_fallback(monkeypatch):
    """The dry run carries ``-c constraints`` (torch/numpy of the running environment); a release whose
    requirements exclude them is resolved once more without, as before (torch/numpy pins still dropped)."""
    import json
    import subprocess

    from proofs_checks.survey import runner

    calls = []

    def fake_run(cmd, **kw):
        calls.append(list(cmd))
        if "-c" in cmd:
            assert "torch==" in open(cmd[cmd.index("-c") + 1]).read()
            return subprocess.CompletedProcess(cmd, 1, "", "ERROR: ResolutionImpossible: for help visit ...")
        report = cmd[cmd.index("--report") + 1]
        items = [{"metadata": {"name": n, "version": v}} for n, v in
                 (("oldlib", "1.0"), ("torch", "2.0.0"), ("einops", "0.8.2"), ("nvidia-cublas", "13"))]
        with open(report, "w") as f:
            json.dump({"install": items}, f)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runner.subprocess, "run", fake_run)
    assert runner._missing_dependencies("oldlib==1.0", 10) == (["einops==0.8.2"], None)
    assert len(calls) == 2 and "-c" in calls[0] and "-c" not in calls[1]


@pytest.mark.integration(reason="the FlexAttention survey entries end to end")
def test_a_wrong_flex_score_mod_is_a_mismatch_on_matches_reference(tmp_path):
    """ALiBi with one slope 1/2 for every head (not Press et al.'s 2^(−8(h+1)/H)) declared as ALiBi."""
    from proofs_checks.survey.catalogue_modern import _CAUSAL_BM, _flex
    from proofs_checks.survey.entry import Entry
    from proofs_checks.survey.runner import row_verdict, run_entry

    e = Entry("flex-wrong-alibi", "PyTorch FlexAttention", "torch", None, "torch",
              _flex(bm=_CAUSAL_BM, sm="lambda s, b, h, q, k: s + (k - q) * 0.5"), {"causal": True, "positional": "alibi"})
    row = row_verdict(e, run_entry(e, cache=tmp_path, mode="quick", seed=0, timeout=300, install=False))
    assert row["status"] == "checked" and row["verdict"] == "mismatch", row.get("why")
    assert "matches_reference" in row["findings"]
