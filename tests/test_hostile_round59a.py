"""Hostile pass 59, tester A: reproducers, each failing on d55fc85 (run there as xfail, strict)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.test_hostile_round53a import _here, _write  # the same in-process command and writer
from tests.test_hostile_round54a import BASE  # pass 54a's causal attention Base, its softmax in probs(s, T)

# a correct causal attention (4 heads, d_k = 4, D = 16) taking a key-padding mask (keep: True attends), whose
# ``pad`` applies the mask AFTER the softmax and renormalises: equal to a masked softmax until the allowed keys'
# probabilities all underflow at huge logits, where 0/0 gives NaN at real positions (a real defect of the module)
PADDED = BASE + """

class Attn(Base):
    def forward(self, x, mask):
        self.keep = mask
        return self.attend(x)

    def probs(self, s, T):  # the mask AFTER the softmax, renormalised
        p = s.softmax(-1) * self.keep[:, None, None, :]
        return p / p.sum(-1, keepdim=True)
"""


def _padded(tmp_path: Path, convention: str) -> subprocess.CompletedProcess:
    """``check attention --module pad.py:Attn --causal --quick --mask-convention CONVENTION`` from ``tmp_path``."""
    _write(tmp_path, "pad.py", PADDED)
    r = _here(tmp_path, "check", "attention", "--module", "pad.py:Attn", "--causal", "--quick", "--no-progress",
              "--mask-convention", convention)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def _row(r: subprocess.CompletedProcess, prop: str) -> str:
    return next((ln for ln in r.stdout.splitlines() if ln.startswith(prop + " ")), "")


def test_1_a_nan_padding_move_is_not_called_an_inverted_convention_nor_said_twice(tmp_path):
    r = _padded(tmp_path, "keep")
    assert r.returncode == 1, r.stdout[-1500:]  # the mismatch itself is right: NaN at real positions
    row = _row(r, "matches_reference_with_grad")
    assert row, r.stdout[-3000:]
    assert row.count("the error is not finite (NaN/inf)") <= 1, row
    kp = _row(r, "key_padding_respected")
    assert "may be inverted" not in kp, kp  # the keep convention given is the module's own
