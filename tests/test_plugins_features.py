"""Issue 43, item 4: every documented plugin feature real. Continuous mutants run for plugin claims
(the count of scaled outputs comes back from the check's child), ``matches_derivation`` takes a
size-1 dimension, the CLI and the test kit agree on a counterexample of the symbolic layer, no
false "registered no claim" warning, ``show`` of a plugin claim answers from its cached derivation,
and a vector-valued claim written from docs/extending.md alone (causal linear attention equals its
RNN recurrence) verifies with every mutant killed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from proofs_checks.context import RunContext
from proofs_checks.plugin import DerivationBuilder, bind, matches_derivation, matrix, vector
from proofs_checks.registry import registry

DATA = Path(__file__).parent / "data"


def test_a_plugin_imported_before_loading_gets_no_registered_no_claim_warning(tmp_path, monkeypatch, capsys):
    """A test that imports the plugin's CLAIM before ``tverify.assert_claim("id")`` loads the plugins:
    the entry point's import registers nothing new, yet its claim is registered — no warning."""
    import importlib.metadata as md

    from proofs_checks import claims
    from proofs_checks.scaffold import write_scaffold

    write_scaffold("zzwarn.rope", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("tverify_zzwarn.claims")  # the test module's `from tverify_zzwarn.claims import CLAIM`

        class EP:
            name, value, module = "zzwarn", "tverify_zzwarn.claims", "tverify_zzwarn.claims"

            def load(self):
                return importlib.import_module(self.value)

        monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()])
        monkeypatch.setattr(claims, "PLUGIN_ERRORS", [])
        claims.load_plugins()
        assert not claims.PLUGIN_ERRORS and "registered no claim" not in capsys.readouterr().err
    finally:
        registry._claims.pop("zzwarn.rope", None)
        for name in [m for m in sys.modules if m.startswith("tverify_zzwarn")]:
            del sys.modules[name]


# ------------------------------------------------------------------------------------------------
# matches_derivation: a dimension of size 1 is valid

ARGS = (matrix("Q", "T", "d"), matrix("V", "T", "dv"))


def _causal(T, d, dv):  # row t: sum_{s < t} (q_t . q_s) v_s: row 0 is the constant 0 (numpy's ragged-array crash)
    b = DerivationBuilder("strictly causal sums")
    Q, V = b.fact("args", bind(ARGS, T=T, d=d, dv=dv))
    S = sp.Matrix(T, T, lambda t, s: (Q[t, :] * Q[s, :].T)[0, 0] if s < t else 0)
    return b.done(b.step("masked scores times V", S * V))


@pytest.mark.parametrize("sizes", [{"T": 3, "d": 1, "dv": 2}, {"T": 3, "d": 2, "dv": 1}, {"T": 1, "d": 1, "dv": 1}])
def test_matches_derivation_takes_a_dimension_of_size_one(sizes):
    chk = matches_derivation(_causal, ARGS, sizes=[sizes])
    good = lambda Q, V: np.tril(Q @ Q.T, -1) @ V  # noqa: E731
    r = chk.fn(good, RunContext(mode="quick"))
    assert r.passed, (sizes, r.error, r.tolerance, r.reason)
    if sizes["T"] > 1:
        assert not chk.fn(lambda Q, V: (Q @ Q.T) @ V, RunContext(mode="quick")).passed  # the mask dropped
