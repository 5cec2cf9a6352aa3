"""A survey entry: a pinned release, its adapter and its declaration (see :mod:`proofs_checks.survey.catalogue`).
The entries live in ``catalogue.py`` (the first 25) and in ``catalogue_modern.py`` / ``catalogue_bugs.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "HELPERS", "_PRE", "_e"]

_PRE = "import torch, torch.nn.functional as F\nfrom torch import nn\nD = 32\n"

# Helpers every adapter may use (not counted in its lines): Wrap keeps the first output of a module
# called as attn(x) or call(attn, x); cfg makes tiny Hugging Face configs; QKV gives to_q/to_k/to_v/to_out projections and the head split.
HELPERS = '''
class Wrap(nn.Module):
    def __init__(self, attn, call=None):
        super().__init__()
        self.attn, self.dim, self.call = attn, D, call
    def forward(self, x):
        o = self.call(self.attn, x) if self.call else self.attn(x)
        return o[0] if isinstance(o, tuple) else o

class QKV(nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.dim, self.num_heads, self.dh = D, heads, D // heads
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(D, D, bias=False) for _ in range(4))
    def split(self, x):
        B, T, _ = x.shape
        return [m(x).view(B, T, self.num_heads, self.dh).transpose(1, 2) for m in (self.to_q, self.to_k, self.to_v)]
    def merge(self, o):
        return self.to_out(o.transpose(1, 2).reshape(o.shape[0], o.shape[2], D))

def cfg(cls, **kw):  # a tiny Hugging Face config, eager attention, no dropout
    c = cls(hidden_size=D, num_attention_heads=4, attention_dropout=0.0, **kw)
    c._attn_implementation = "eager"
    return c
'''


@dataclass(frozen=True)
class Entry:
    name: str
    library: str                 # display name
    package: str                 # pip distribution ("torch": the running torch, never installed)
    version: str | None          # pinned release (None: the running torch)
    module: str                  # import name
    adapter: str                 # source defining make()
    declare: dict[str, Any]      # run_attention keyword arguments (causal, window, positional, ...)
    what: str = ""
    extra: tuple[str, ...] = ()  # further pins installed beside it (--no-deps each)
    known: dict[str, Any] | None = None   # {"bug": [...properties], "fixed_in": name, "ref": url, "title": ...} or {"fix_of": name, ...}
    by_design: tuple[str, ...] = ()
    issue: dict[str, str] | None = None   # upstream issue of a finding in a current release
    note: str = ""
    on_pypi: bool = True         # False: the release is not on the package index (its failed install is expected)
    env: tuple[tuple[str, str], ...] = ()  # environment of the entry's process, set before the import (KERAS_BACKEND)

    @property
    def spec(self) -> str:
        return self.package if self.version is None else f"{self.package}=={self.version}"

    @property
    def adapter_lines(self) -> int:
        return sum(1 for ln in self.adapter.strip().splitlines() if ln.strip())

    def declaration(self) -> str:
        parts = []
        for k, v in self.declare.items():
            if v is True:
                parts.append(f"--{k.replace('_', '-')}")
            elif v not in (None, False):
                v = ",".join(map(str, v)) if isinstance(v, tuple) else v
                parts.append(f"--{k.replace('_', '-')} {v}")
        return " ".join(parts) or "(none)"


def _e(*a, **k) -> Entry:
    return Entry(*a, **k)


