"""Hostile pass 60, tester A: reproducers, each failing on 379edce (run there as xfail, strict). A module that reads a
key-padding mask as a count of real keys, assumed to come first (right padding) or, causal, last (left padding), was
"ok": the probes padded only where it assumed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.test_hostile_round53a import _here, _write  # the same in-process command and writer
from tests.test_hostile_round54a import BASE  # pass 54a's causal attention Base (q/k/v/o projections)

COUNTED = BASE + """

class LeftPadOnly(Base):  # causal: the real keys are taken to be the last n (left padding)
    def forward(self, x, mask):
        T = x.shape[1]
        return self.attend(x, torch.arange(T, device=x.device)[None, :] >= T - mask.bool().sum(-1, keepdim=True))


class RightPadOnly(nn.Module):  # not causal: the real keys are taken to be the first n (right padding)
    def __init__(self, dim=16, heads=4):
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, T, D = x.shape
        q, k, v = self.qkv(x).view(b, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        first = torch.arange(T, device=x.device)[None, :] < mask.bool().sum(-1, keepdim=True)
        s = (q @ k.transpose(-1, -2) / math.sqrt(D // self.heads)).masked_fill(~first[:, None, None, :], -math.inf)
        return self.out((s.softmax(-1) @ v).transpose(1, 2).reshape(b, T, D))
"""


@pytest.mark.parametrize("cls, flags", [("RightPadOnly", ()), ("LeftPadOnly", ("--causal",))])
def test_1_a_mask_read_as_a_count_of_keys_is_not_ok(tmp_path: Path, cls, flags):
    _write(tmp_path, "pad.py", COUNTED)
    r: subprocess.CompletedProcess = _here(tmp_path, "check", "attention", "--module", f"pad.py:{cls}", *flags,
                                           "--quick", "--no-progress", "--mask-convention", "keep")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, (r.returncode, r.stdout[-2500:], r.stderr[-1000:])
    row = next((ln for ln in r.stdout.splitlines() if ln.startswith("key_padding_respected ")), "")
    assert row and " ok " not in row, (row, r.stdout[-2500:])
