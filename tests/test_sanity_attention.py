"""``tverify check attention --module``: a correct causal attention passes; planted bugs (future
leak, missing 1/√d_k, softmax over the wrong axis, unstable exp, NaN) are caught and named; bad
objects are one-line usage errors (exit 2); --json and --report. In-process, small sizes (``--quick``)."""

from __future__ import annotations

import json

import pytest
import torch

from numerics.attention_mapping import find_mappings
from numerics.attention_reference import Structure, reference_attention
from tests.cli_helpers import invoke, one_line_error

MOD = "tests/data/own_attention.py"


def run(name: str, *args: str) -> tuple[int, str, str]:
    return invoke("check", "attention", "--module", f"{MOD}:{name}", "--no-progress", *args)


def failed(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if "  FAIL  " in line]


def test_correct_causal_attention_passes():
    code, out, _ = run("CausalSelfAttention", "--causal", "--quick")
    assert code == 0 and "verdict: ok" in out, out
    assert "causal_no_future_leak" in out and "matches_reference" in out and "declared" in out
    assert not failed(out)


@pytest.mark.parametrize("name, prop, words", [
    ("leaky", "causal_no_future_leak", "(= t+1) changes"),
    ("no_scale", "scale_1_over_sqrt_dk", "missing 1/√d_k"),
    ("wrong_axis", "matches_reference", "no logit scale makes the outputs match"),
])
def test_broken_causal_attention_is_named(name, prop, words):
    code, out, _ = run(name, "--causal", "--quick")
    assert code == 1 and prop in failed(out) and words in out, out
    assert f"violates: " in out and prop in out.split("violates:")[1]


def test_unstable_softmax_and_nan_are_findings():
    code, out, _ = run("Naive", "--quick")
    # NaN at the huge-logit probe also breaks the agreement with the reference there
    assert code == 1 and "stable_at_extreme_logits" in failed(out) and "exp overflow" in out
    code, out, _ = run("nan_out", "--dim", "4", "--quick")
    assert code == 1 and failed(out) == ["finite_output"] and "464 of 464" in out, out


def test_weights_returned_mha_and_fitted_mapping():
    code, out, _ = run("SingleHead", "--json", "-", "--quick")
    doc = json.loads(out)
    names = {p["name"]: p for p in doc["properties"]}
    assert code == 0 and names["weights_are_distributions"]["status"] == "pass"
    assert names["matches_reference"]["status"] == "pass" and names["matches_reference"]["central"]
    assert names["permutation_equivariance"]["status"] == "pass"
    assert all(p["tolerance"] is None or p["tolerance"] < 1e-3 for p in doc["properties"])
    code, out, _ = run("MHAWrapper", "--quick")
    assert code == 0 and "nn.MultiheadAttention weights" in out
    code, out, _ = run("Anonymous", "--dim", "6", "--quick")
    # the fit is identifiable, but it absorbs any logit scale: the scale cannot be decided
    assert code == 3 and "fitted: single-head softmax attention" in out and "verdict: inconclusive" in out, out
    assert "scale_1_over_sqrt_dk: no declared q/k projections" in out


@pytest.mark.parametrize("name, args, frag", [
    ("raises", ("--dim", "4"), "raised RuntimeError: boom at the probe"),
    ("wrong_shape", ("--dim", "4"), "returned shape (3, 0, 4) for a (3, 1, 4) input"),
    ("no_such_name", (), "has no name 'no_such_name'"),
    ("nan_out", (), "give --dim D"),
    ("MHAWrapper", ("--heads", "3", "--kv-heads", "2"), "heads must be a multiple of kv_heads"),
])
def test_bad_objects_one_line_exit_2(name, args, frag):
    line = one_line_error(*run(name, *args)[::2])
    assert frag in line, line


def test_a_module_that_loses_the_inputs_dtype_is_a_mismatch_naming_it():
    """A float64 input answered in float32 is the module's finding (dtype_and_device_preserved fails: a mismatch,
    exit 1), not the check's usage error (hostile pass 36b F3)."""
    code, out, _ = run("wrong_dtype", "--dim", "4", "--quick")
    assert code == 1 and "dtype_and_device_preserved" in failed(out) and "returned float32" in out, out[-1500:]


def test_missing_file_one_line():
    code, _, err = invoke("check", "attention", "--module", "no/such/file.py:X")
    assert "file not found" in one_line_error(code, err)


def test_report_written_and_foreign_folder_refused(tmp_path):
    out_dir = tmp_path / "rep"
    code, out, _ = run("SingleHead", "--report", str(out_dir), "--quick")
    assert code == 0 and "report written to" in out
    files = {p.name for p in out_dir.iterdir()}
    assert {"report.html", "report.md", "report.json", "figures", ".tverify-report"} <= files
    assert (out_dir / "figures" / "attention_weights.png").stat().st_size > 1000
    assert (out_dir / "figures" / "error_by_length.png").stat().st_size > 1000
    assert "matches_reference" in (out_dir / "report.md").read_text()
    assert json.loads((out_dir / "report.json").read_text())["ok"] is True
    code, out, _ = run("SingleHead", "--report", str(out_dir), "--quick")  # a previous report is replaced
    assert code == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    line = one_line_error(*run("SingleHead", "--report", str(mine), "--quick")[::2])
    assert "--report" in line and "notes.txt" in line and (mine / "notes.txt").read_text() == "keep me"


def test_mapping_candidates_and_reference_match_torch():
    """The declared mapping of an nn.MultiheadAttention reproduces it through SDPA (the mapping
    function is itself small and tested)."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    (m,) = find_mappings(mha, 8, None)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ref = mha(x, x, x, need_weights=False, attn_mask=mask)[0]
    assert torch.allclose(reference_attention(x, m, Structure(causal=True)), ref, atol=1e-14, rtol=0)


def test_json_inside_report_refused(tmp_path):
    line = one_line_error(*run("SingleHead", "--report", str(tmp_path / "r"), "--json", str(tmp_path / "r" / "x.json"))[::2])
    assert "inside --report" in line and not (tmp_path / "r").exists()


UNMAPPED = """
import torch
class Odd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(8, 24)
    def forward(self, x):
        q, k, v = self.a(x).chunk(3, -1)
        T = x.shape[1]
        s = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return s.softmax(-1) @ v
"""


@pytest.mark.parametrize("flags, header", [((), "1 head (assumed: no weights mapped and none declared; --heads H "
                                                 "declares it)"), (("--heads", "2"), "2 heads, float64")])
def test_the_header_says_when_the_number_of_heads_is_assumed(tmp_path, flags, header):
    from tests.cli_helpers import tv_here

    (tmp_path / "um.py").write_text(UNMAPPED)
    r = tv_here(tmp_path, "check", "attention", "--module", "um.py:Odd", "--causal", "--quick", "--no-progress", *flags)
    assert header in r.stdout.splitlines()[0], r.stdout[:400]
