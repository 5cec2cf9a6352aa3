"""What ``check attention`` says about a declaration, on the small corpus modules (``tests/data/attention_corpus.py``):
a module that is not causal, declared ``--causal``, is named with the verified hint; float32 internals declared
``--compute-dtype float32`` print the declared working precision; Hugging Face's Conv1D projections are read and
named. The real libraries' modules showing the same (tests/test_attention_ecosystem.py) run in the integration
tier; these keep each of those findings in ``make test`` (issue 46). In-process CLI, ``--quick``."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cli_helpers import invoke

DATA = Path(__file__).parent / "data"
MOD = "tests/data/attention_corpus.py"


def run(name, *args):
    code, out, err = invoke("check", "attention", "--module", f"{MOD}:{name}", "--quick", "--no-progress", *args)
    assert "Traceback" not in err, err
    return code, out + err


def test_a_module_not_causal_declared_causal_leaks_and_the_hint_says_not_causal():
    """GPT-2's eager attention without its mask, in miniature: the declaration is causal, the module is not."""
    if str(DATA) not in sys.path:
        sys.path.insert(0, str(DATA))
    import attention_corpus as C

    from proofs_checks.sanity.attention import run_attention

    class NotCausal(C.Plain):
        def mask(self, T, device):
            return None

    r = run_attention(NotCausal(causal=False), causal=True, mode="quick")
    assert r.outcome == "mismatch" and "causal_no_future_leak" in r.failed, str(r)
    assert "with not causal instead of the declaration" in (r.verdict.suggestion or ""), r.verdict.suggestion
    assert "(verified: with it, every probed length matches)" in r.verdict.suggestion


def test_float32_internals_declared_print_the_declared_working_precision():
    code, out = run("Float32Softmax", "--causal", "--compute-dtype", "float32")
    assert code == 0 and "working precision: float32 (declared: --compute-dtype float32)" in out, out


def test_hugging_face_conv1d_projections_are_read_and_named():
    code, out = run("GPT2Style", "--causal")
    assert code == 0 and ".c_attn (Conv1D, x @ W + b)[q]" in out and ".c_proj (Conv1D, x @ W + b)" in out, out
