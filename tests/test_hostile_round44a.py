"""Hostile pass 38 (tester a): one test per finding (/work/wt/_notes/HOSTILE38A_FINDINGS.md), each a strict xfail
against frozen38 (f9409b3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import tv_here
from tests.tiers import moved

_TVERIFY = str(Path(sys.executable).with_name("tverify"))


def test_stacked_redraw_chunks_count_every_head():
    """The unit of 38a F1: a stacked redraw call's sequences are counted with their logits per head, so that a chunk
    holds ≤ 256 MB (the up-front estimate's figure) whatever the head count."""
    from types import SimpleNamespace

    from numerics.attention_structural import _per_sequence_bytes

    one = _per_sequence_bytes(SimpleNamespace(m=SimpleNamespace(heads=1), D=32), 257)
    four = _per_sequence_bytes(SimpleNamespace(m=SimpleNamespace(heads=4), D=32), 257)
    assert four - one == 3 * 257 * 257 * 8 * 4 and one == 257 * 32 * 8 * 6 + 257 * 257 * 8 * 4
    assert _per_sequence_bytes(SimpleNamespace(m=None, D=32), 257) == four  # (four heads where none is mapped)


@moved("a default-size check in a fresh process under --max-memory 0.5 (≈ 16 s)",
       "tests/test_hostile_round44a.py::test_stacked_redraw_chunks_count_every_head")
def test_small_correct_attention_fits_under_half_a_gb(tmp_path: Path):
    (tmp_path / "att.py").write_text((Path(__file__).parents[1] / "examples" / "my_attn.py").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVERIFY_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), TVERIFY_STORE=str(tmp_path / "store"))
    r = subprocess.run([_TVERIFY, "check", "attention", "--module", "att.py:MyAttention", "--causal", "--max-memory",
                        "0.5", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])


_NETLINK_HOG = '''
import math, socket, struct, sys
import torch
from torch import nn

_KEEP = []


def hog(total):
    """``total`` bytes queued on a NETLINK_USERSOCK socket and never read (root: SO_RCVBUFFORCE/SO_SNDBUFFORCE)."""
    r = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    r.bind((0, 0))
    r.setsockopt(socket.SOL_SOCKET, 33, 2**31 - 1)
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
    s.bind((0, 0))
    s.setsockopt(socket.SOL_SOCKET, 32, 2**31 - 1)
    s.setblocking(False)
    msg = struct.pack("=IHHII", 16 + 60000, 0x10, 0, 0, 0) + b"\\xab" * 60000
    sent = 0
    while sent < total:
        try:
            s.sendto(msg, (r.getsockname()[0], 0))
        except OSError:
            break
        sent += len(msg)
    return r, s, sent


class MyAttention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        if not _KEEP:
            _KEEP.append(hog(1200 << 20))
            print("queued MB", _KEEP[0][2] >> 20, file=sys.stderr)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, t, -1))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="SO_RCVBUFFORCE needs root (CAP_NET_ADMIN)")
def test_netlink_socket_buffers_counted(tmp_path: Path):
    (tmp_path / "nl.py").write_text(_NETLINK_HOG)
    r = tv_here(tmp_path, "check", "attention", "--module", "nl.py:MyAttention", "--quick", "--max-memory", "0.5")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2 and "--max-memory 0.5" in r.stderr, (r.returncode, r.stderr[-800:])
