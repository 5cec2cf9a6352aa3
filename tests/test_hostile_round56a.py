"""Hostile pass 56, tester A: reproducers, each failing on ebb8a8b (run there as xfail, strict)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.test_hostile_round53a import _tv, _write  # the same environment, command and writer
from tests.test_hostile_round54a import BASE  # exact causal multi-head attention, class Base, `attend(x, keep=None)`

# BASE with the logits of every head multiplied by 1.5 (another implementation, a mismatch on its own)
SCALED_BASE = BASE.replace("/ math.sqrt(self.head_dim)", "/ math.sqrt(self.head_dim) * 1.5")
assert SCALED_BASE != BASE


def _attention(tmp_path: Path, spec: str, *flags: str) -> subprocess.CompletedProcess:
    """``check attention --module SPEC --causal --quick --no-progress FLAGS`` from ``tmp_path``, in a fresh process."""
    r = _tv(tmp_path, "check", "attention", "--module", spec, "--causal", "--quick", "--no-progress", *flags)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    return r


def _with_base(tmp_path: Path, name: str, source: str) -> None:
    """``tmp_path/att.py`` holding BASE and ``source``."""
    _write(tmp_path, name, BASE + textwrap.dedent(source))


def _two_folders(tmp_path: Path, b_file: str, b_source: str) -> None:
    """``A/base.py`` = BASE and ``A/m.py`` importing its Base as M; ``B/base.py`` = SCALED_BASE and ``B/<b_file>``."""
    _write(tmp_path / "A", "base.py", BASE)
    _write(tmp_path / "A", "m.py", "from base import Base as M\n")
    _write(tmp_path / "B", "base.py", SCALED_BASE)
    _write(tmp_path / "B", b_file, b_source)


def test_1_a_refused_head_count_names_the_counts_that_split_the_projections(tmp_path):
    _with_base(tmp_path, "att.py", "")
    r = _attention(tmp_path, "att.py:Base", "--heads", "3")
    assert r.returncode == 2, r.stderr
    # check-attention.md, Verdicts: "--heads/--kv-heads that cannot split the projections found (the counts that can
    # are named)"; widths 16 are split by 1, 2, 4, 8 and 16 heads (--heads 2 runs)
    assert "2 heads" in r.stderr and "8 heads" in r.stderr, r.stderr


def test_2_stored_attention_weights_are_judged(tmp_path):
    _with_base(tmp_path, "att.py", """
        class StoredBad(Base):
            def forward(self, x):
                b, T, _ = x.shape
                self.attn_weights = torch.full((b, self.num_heads, T, T), 0.7, dtype=x.dtype)
                return self.attend(x)
    """)
    r = _attention(tmp_path, "att.py:StoredBad")
    # check-attention.md, Properties: "weights_are_distributions | returned or stored weights are rows of probabilities
    # ... with a weight of exactly 0 on every key the declared mask forbids" (the same weights returned: exit 1)
    assert r.returncode == 1 and "weights_are_distributions" in r.stdout, r.stdout[-1500:]


def test_3_against_in_another_folder_imports_its_own_sibling_modules(tmp_path):
    _two_folders(tmp_path, "n.py", "from base import Base\n\nclass N(Base):\n    pass\n")
    r = _attention(tmp_path, "A/m.py:M", "--against", "B/n.py:N")
    # check-attention.md: "The folder of FILE.py is on sys.path for the whole run, so a factory may import sibling
    # modules"; B's Base multiplies the logits by 1.5, so the two implementations differ
    assert r.returncode == 1, (r.returncode, r.stdout[-800:], r.stderr[-800:])


def test_4_against_another_file_is_not_called_the_module_itself(tmp_path):
    _two_folders(tmp_path, "m.py", "from base import Base as M\n")
    r = _attention(tmp_path, "A/m.py:M", "--against", "B/m.py:M")
    assert "the module itself" not in r.stderr, r.stderr


def test_5_a_transform_failing_at_a_longer_length_is_the_mappings_one_line(tmp_path):
    _with_base(tmp_path, "att.py", "")
    _write(tmp_path, "mp.py", """
        def weights(m):
            def f(q):
                if q.shape[-2] > 20:
                    raise ValueError("too long")
                return q
            return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj, "heads": 4, "q_transform": f}
    """)
    r = _attention(tmp_path, "att.py:Base", "--mapping", "mp.py:weights")
    assert r.returncode == 2, r.stderr
    # check-attention.md, mapping hook: "a transform that fails only at a longer length is the same one line, naming
    # the length" (at every length: "tverify: error: --mapping: q_transform raised ValueError: ...")
    assert r.stderr.startswith("tverify: error: --mapping:") and "TransformFailed" not in r.stderr, r.stderr


_DECLARED = {  # queries from k_proj, keys from q_proj: declared through the module's own mapping, three ways
    "attribute": """
            def __init__(self):
                super().__init__()
                self.tverify_mapping = {"q": self.k_proj, "k": self.q_proj, "v": self.v_proj, "o": self.o_proj,
                                        "heads": 4}
    """,
    "property": """
            @property
            def tverify_mapping(self):
                return {"q": self.k_proj, "k": self.q_proj, "v": self.v_proj, "o": self.o_proj, "heads": 4}
    """,
    "cached_property": """
            @functools.cached_property
            def tverify_mapping(self):
                return {"q": self.k_proj, "k": self.q_proj, "v": self.v_proj, "o": self.o_proj, "heads": 4}
    """,
}


@pytest.mark.parametrize("how", sorted(_DECLARED))
def test_6_a_mapping_dict_on_the_module_is_used(tmp_path, how):
    _with_base(tmp_path, "att.py", """
        import functools
        class Swapped(Base):
            def forward(self, x):
                b, T, _ = x.shape
                sp = lambda t: t.view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
                q, k, v = sp(self.k_proj(x)), sp(self.q_proj(x)), sp(self.v_proj(x))
                s = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
                s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
                return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, T, -1))
        class Declared(Swapped):
    """ + _DECLARED[how])
    r = _attention(tmp_path, "att.py:Declared")
    # check-attention.md, mapping hook: the module's own tverify_mapping (a method, or the dict held by a property or
    # an attribute) declares the weights; it was silently replaced by the by-name guess (a mismatch)
    assert r.returncode == 0 and "found by name" not in r.stdout, (r.returncode, r.stdout[:600], r.stderr[-600:])


def test_7_an_inverted_mask_convention_is_named(tmp_path):
    _with_base(tmp_path, "att.py", """
        class Drop(Base):
            def forward(self, x, key_padding_mask):
                return self.attend(x, ~key_padding_mask.bool())
    """)
    r = _attention(tmp_path, "att.py:Drop", "--mask-convention", "keep")
    # check-attention.md, Properties: "key_padding_respected ... an inverted convention shows here"
    assert r.returncode == 1 and "mask-convention drop" in r.stdout, r.stdout[-1500:]
