"""Hostile pass 37, tester B: reproducers (each was a strict xfail on the code the pass ran against; all fixed)."""

import pytest

from cli_helpers import causal_attn

# --- 37B F1: the power rule's "every output 0 only where it is read" guard, escaped by inputs it cannot nudge -------


def _three_x_read_at_zero(points, form):
    from tests.test_hostile_round38b import _false_claim

    return _false_claim(points, False, form)


def test_37b_f1_false_identity_read_at_zero_lists_is_not_verified():
    import numpy as np
    from proofs_checks.plugin import check_claim

    r = check_claim(_three_x_read_at_zero([[0.0], [0.0, 0.0]], lambda x: 3.0 * np.asarray(x, float)))
    assert r.status != "verified", r.message


def test_37b_f1_false_identity_read_at_zero_int_tensors_is_not_verified():
    import numpy as np
    import torch
    from proofs_checks.plugin import check_claim

    r = check_claim(_three_x_read_at_zero([torch.tensor(0), torch.zeros(3, dtype=torch.long)],
                                          lambda x: 3.0 * np.asarray(x, float)))
    assert r.status != "verified", r.message


def _int_only(n):
    import numpy as np

    a = np.asarray(n)
    if a.dtype.kind not in "iu":
        raise TypeError("n must be an integer")  # a form of a count (a length, a size): defined at integers only
    return 3.0 * a


def test_37b_f1b_false_identity_of_a_count_read_at_zero_is_not_verified():
    import numpy as np
    from proofs_checks.plugin import check_claim

    r = check_claim(_three_x_read_at_zero([0, np.zeros(3, int)], _int_only))
    assert r.status != "verified", r.message


# --- 37B F2: --against naming the module itself through its module spelling (package.module:NAME) is "ok" ----------

def test_37b_f2_against_itself_through_its_module_spelling_is_refused(tmp_path):
    from cli_helpers import MHA_ATTN, tv_here

    sub = tmp_path / "m"
    sub.mkdir()
    (sub / "attn37b.py").write_text("import torch\n" + MHA_ATTN + "\ndef make():\n    torch.manual_seed(0)\n    return Attn()\n")
    r = tv_here(tmp_path, "check", "attention", "--module", "m/attn37b.py:make", "--against", "attn37b:make", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stdout[-800:])


def test_37b_f2b_against_an_alias_of_the_same_object_is_refused(tmp_path):
    from cli_helpers import MHA_ATTN, tv_here

    (tmp_path / "attn37b.py").write_text("import torch\n" + MHA_ATTN + "\ntorch.manual_seed(0)\ninst = Attn()\nsame = inst\n")
    r = tv_here(tmp_path, "check", "attention", "--module", "attn37b.py:inst", "--against", "attn37b.py:same", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stdout[-800:])


# --- 37B F3: a correct module with a static output buffer, called with a key-padding mask: dtype_and_device FAIL ------

BUF = causal_attn(8, 2, """
    BUFS = {}  # an inference server's static output buffers (docs: legitimate), one per module, shape and dtype

    def buffered(self, y):
        key = (id(self), tuple(y.shape), y.dtype)
        if key not in BUFS:
            BUFS[key] = torch.empty_like(y)
        return BUFS[key].copy_(y.detach())

    class Buf(Attn):
        def forward(self, x, mask=None):
            B, T, _ = x.shape
            s, v = self.scores(x)
            allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
            if mask is not None:
                allowed = allowed & mask[:, None, None, :].bool()
            y = self.finish(s.masked_fill(~allowed, float("-inf")), v, B, T)
            return y if torch.is_grad_enabled() else buffered(self, y)

    class WBuf(Attn):  # the attention weights returned in a static buffer
        def forward(self, x):
            B, T, _ = x.shape
            s, v = self.scores(x)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return self.finish(s, v, B, T), buffered(self, s.softmax(-1))
""")


def test_37b_f3_static_output_buffer_with_key_padding_is_ok(tmp_path):
    from cli_helpers import tv_here

    (tmp_path / "buf37b.py").write_text(BUF)
    r = tv_here(tmp_path, "check", "attention", "--module", "buf37b.py:Buf", "--causal", "--mask-convention", "keep",
                "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:])


# --- 37B F4: a correct Hopfield update returning a static output buffer is "not the modern Hopfield update" ---------

HOP_BUF = '''
import torch
_bufs = {}
def update(xi, X, beta):
    y = torch.softmax(beta * xi @ X.T, -1) @ X
    k = (tuple(y.shape), y.dtype)  # one output buffer per shape, overwritten by the next call (a static buffer)
    if k not in _bufs:
        _bufs[k] = torch.empty_like(y)
    return _bufs[k].copy_(y)
'''


def test_37b_f4_hopfield_update_with_a_static_output_buffer_is_ok(tmp_path):
    import numpy as np
    from cli_helpers import tv_here

    np.save(tmp_path / "P.npy", np.sign(np.random.default_rng(0).standard_normal((12, 16))))
    (tmp_path / "hop37b.py").write_text(HOP_BUF)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "2", "--module", "hop37b.py:update")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:])


def test_37b_f3b_weights_in_a_static_buffer_are_ok(tmp_path):
    from cli_helpers import tv_here

    (tmp_path / "wbuf37b.py").write_text(BUF)
    r = tv_here(tmp_path, "check", "attention", "--module", "wbuf37b.py:WBuf", "--causal", "--quick")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:])


# --- 37B F5: a correct float32 attention (logits times 1/√d_k, as Hugging Face's eager path) is a mismatch -------------

F32_ATTN = causal_attn(64, 2, """
    class Scaled(Attn):  # the logits times 1/√d_k, as Hugging Face's eager attention
        def scores(self, x):
            B, T, _ = x.shape
            sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            return (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D // H)), v

    class Sdpa(Attn):  # torch's own kernel
        def forward(self, x):
            B, T, _ = x.shape
            sp = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            q, k, v = sp(self.q_proj(x)), sp(self.k_proj(x)), sp(self.v_proj(x))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(o.transpose(1, 2).reshape(B, T, D))
""")


F32_ATTN += """
def mha():
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(64, 2, batch_first=True)
"""

#: correct float32 attentions: the logits times 1/√d_k, torch's SDPA kernel, torch's MultiheadAttention (at the seed and
#: the length, T = 17, where a redrawn input's outputs failed at the default lengths)
F5_CASES = {"scaled": ("Scaled", "--quick"), "sdpa": ("Sdpa", "--quick"),
            "multihead_attention": ("mha", "--seed 2 --seq-len 5,17")}


@pytest.mark.parametrize("case", list(F5_CASES))
def test_37b_f5_correct_float32_attention_is_ok(tmp_path, case):
    from cli_helpers import tv_here

    name, flags = F5_CASES[case]
    (tmp_path / "f32attn37b.py").write_text(F32_ATTN)
    r = tv_here(tmp_path, "check", "attention", "--module", f"f32attn37b.py:{name}", "--causal", "--dtype", "float32",
                *flags.split())
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:])


def test_nudged_inputs_keep_their_kind_and_move_every_number():
    """The unit of 37b F1: lists and tuples (ragged, nested, mixed with text) and integer or boolean tensors are nudged;
    what holds no number is not."""
    import numpy as np
    import torch

    from proofs_checks.scaling import _nudged

    assert _nudged([0.0, 0.0]) == [0.001, 0.001] and _nudged((0, 1)) == (0.001, 1.002)
    ragged = _nudged([[0.0], [0.0, 2.0], "name"])
    assert ragged[0] == [0.001] and ragged[1] == [0.001, 2.003] and ragged[2] == "name"
    assert _nudged(("a", "b")) is None and _nudged([]) is None and _nudged(True) is None
    t = _nudged(torch.zeros(3, dtype=torch.long))
    assert t.dtype == torch.float64 and bool((t == 0.001).all())
    assert bool((_nudged(torch.tensor([True, False])) == torch.tensor([1.002, 0.001], dtype=torch.float64)).all())
    assert np.allclose(_nudged(np.zeros(2, dtype=bool)), 0.001)
    deep: list = [0.0]
    for _ in range(10**4):
        deep = [deep]
    from proofs_checks.scaling import _nonzero_near
    assert _nonzero_near(lambda x: 0.0, (deep,), {}) is False  # nested past the interpreter's depth: no nudge, no error


def test_numbers_of_every_kind_are_nudged():
    import fractions

    import sympy as sp

    from proofs_checks.scaling import _nudged

    assert _nudged(0) == 0.001 and _nudged(0j) == 0.001 and _nudged(fractions.Fraction(0)) == 0.001
    assert _nudged(sp.Integer(0)) == 0.001 and _nudged(sp.Symbol("x")) is None and _nudged(False) is None
