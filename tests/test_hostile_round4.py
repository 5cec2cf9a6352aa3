"""Issue 36, the fourth round of hostile findings (the second pass's N2, N4, N11 and what the third
pass found): a head count the module declares that its weights cannot split is one line naming the
attribute; a verified hint that contradicts the module's configuration says so and gives the flags
that declare it (``--ignore-config`` and the whole declaration); numpy numbers are numbers in the
Python API, and its strings-for-objects are refused in its own words. Small sizes, in-process."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import proofs_checks
from proofs_checks.options import UsageError
from proofs_checks.sanity.attention import run_attention
from theory.validation import InputError

LENGTHS = "1,5,17"


class LyingGQA(nn.Module):
    """Correct causal GQA attention (4 heads of size 4, 2 key/value heads, HF grouping), optionally
    RoPE (rotated halves, base ``base``), whose ``config`` may say something else; no head-count
    attribute of its own (the count is only in the config, if there)."""

    def __init__(self, config, base=None, dim=16):
        super().__init__()
        self.config, self.is_causal, self._base = config, True, base
        self.q_proj, self.o_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.k_proj, self.v_proj = nn.Linear(dim, 8), nn.Linear(dim, 8)

    def _rope(self, x):
        T, d = x.shape[-2], x.shape[-1]
        inv = self._base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
        ang = torch.cat([ang, ang], -1).to(x.dtype)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * ang.cos() + torch.cat([-x2, x1], -1) * ang.sin()

    def forward(self, x):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, 4, 4).transpose(1, 2)
        k, v = (p(x).view(B, T, 2, 4).transpose(1, 2).repeat_interleave(2, 1) for p in (self.k_proj, self.v_proj))
        if self._base is not None:
            q, k = self._rope(q), self._rope(k)
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def run(obj, **kw):
    kw.setdefault("seq_len", LENGTHS)
    kw.setdefault("mode", "quick")
    torch.manual_seed(0)
    return run_attention(obj, **kw)


def test_a_config_kv_head_count_the_weights_cannot_split_is_evidence_said_and_not_used():
    # issue 42: a head count read from the module's config is evidence, not a fact (Whisper's
    # config.num_key_value_heads is the encoder's head count, read beside a decoder layer): one that the
    # weights cannot split is said in a note and not used, never a usage error; declared counts that
    # cannot split them still are one
    torch.manual_seed(0)
    m = LyingGQA(SimpleNamespace(num_key_value_heads=3))
    r = run(m)
    notes = [ln for ln in r.lines if "config.num_key_value_heads = 3" in ln]
    assert notes and "does not fit its weights" in notes[0] and "not used" in notes[0], r.lines
    assert "4 heads / 2 key/value heads" in notes[0] and "\n" not in notes[0]
    assert any("does not fit the weights: not used" in ln for ln in r.doc["config_read"]), r.doc["config_read"]
    assert r.outcome == "ok" and "2 key/value head(s)" in " ".join(r.lines), r.verdict.summary
    r = run(m, heads=4)
    assert r.outcome == "ok", r.verdict.summary
    with pytest.raises(UsageError) as e:
        run(m, heads=3)
    assert "counts that fit" in e.value.format_message()
    # --ignore-config: the config's count is not read, the weights decide
    r = run(m, heads=4, causal=True, ignore_config=True)
    assert r.outcome == "ok", r.verdict.summary


def test_a_config_kv_count_that_fits_but_lies_gets_a_verified_hint_with_ignore_config():
    torch.manual_seed(0)
    r = run(LyingGQA(SimpleNamespace(num_key_value_heads=1)))
    assert r.outcome == "mismatch"
    hint = " ".join(r.to_json()["hints"])
    assert "4 heads, 2 key/value heads" in hint and "(verified" in hint, hint
    assert "config.num_key_value_heads = 1 says otherwise" in hint
    flags = hint.split("wins over the configuration): ")[1]
    assert flags.startswith("--causal --heads 4 --kv-heads 2"), flags  # issue 42: no --ignore-config needed
    ok = run(LyingGQA(SimpleNamespace(num_key_value_heads=1)), ignore_config=True, causal=True, heads=4, kv_heads=2)
    assert ok.outcome == "ok", ok.verdict.summary


def test_a_hint_contradicting_the_config_rope_theta_says_so_and_its_flags_run():
    torch.manual_seed(0)
    mk = lambda: LyingGQA(SimpleNamespace(rope_theta=500000.0), base=10000.0)  # noqa: E731
    r = run(mk(), positional="rope")
    assert r.outcome == "mismatch"
    hint = " ".join(r.to_json()["hints"])
    assert "--rope-base 10000" in hint and "config.rope_theta = 500000 says otherwise" in hint, hint
    flags = hint.split("wins over the configuration): ")[1].split()
    assert "--ignore-config" not in flags and "--rope-base" in flags and "--causal" in flags
    ok = run(mk(), ignore_config=True, causal=True, positional="rope", rope_base=10000.0, rope_convention="half",
             heads=4, kv_heads=2)
    assert ok.outcome == "ok", ok.verdict.summary


class SmallAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_heads = 2
        self.q, self.k, self.v, self.o = (nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (m(x).view(B, T, 2, 4).transpose(1, 2) for m in (self.q, self.k, self.v))
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


@pytest.mark.parametrize("kw", [dict(heads=np.int64(2)), dict(seed=np.int32(0)), dict(window=np.int64(40)),
                                dict(seq_len=[np.int64(1), np.int64(5)]), dict(seq_len=np.int64(5))])
def test_numpy_integers_are_integers_in_the_api(kw):
    kw.setdefault("seq_len", [1, 5])
    r = proofs_checks.check_attention(SmallAttn(), causal=True, mode="quick", isolate=False, **kw)
    assert r.outcome in ("ok", "inconclusive"), r.verdict.summary


@pytest.mark.parametrize("kw, words", [
    (dict(mode=None), "check_attention: mode must be a string, got None"),
    (dict(device=0), "check_attention: device must be a string"),
    (dict(against="m1.py:correct"), "check_attention: against must be a module, class or function"),
    (dict(mapping="maps.py:hook"), "check_attention: mapping must be a function of the module"),
])
def test_api_strings_for_objects_and_objects_for_strings_are_refused_in_its_words(kw, words):
    with pytest.raises(InputError) as e:
        proofs_checks.check_attention(SmallAttn(), causal=True, **kw)
    assert str(e.value).startswith(words) and "\n" not in str(e.value), str(e.value)
    assert "--" not in str(e.value)


def test_numpy_numbers_in_the_other_api_functions():
    with pytest.raises(InputError) as e:
        proofs_checks.run_claims("attn.softmax_simplex", mode="fast")
    assert str(e.value).startswith("run_claims: mode must be")


class RetAttn(SmallAttn):
    """SmallAttn returning ``(y, weights)``; ``kind`` picks what the weights are."""

    def __init__(self, kind="per_head"):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (m(x).view(B, T, 2, 4).transpose(1, 2) for m in (self.q, self.k, self.v))
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        a = s.softmax(-1)
        y = self.o((a @ v).transpose(1, 2).reshape(B, T, D))
        w = {"per_head": a, "mean": a.mean(1), "half": a.half(), "uniform": torch.full_like(a, 1 / T),
             "wrong_shape": a[..., :1], "none": None}[self.kind]
        return y, w


@pytest.mark.parametrize("kind", ["per_head", "mean", "half"])
def test_returned_weights_that_are_the_attention_pass(kind):
    r = run(RetAttn(kind), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "ok", r.verdict.summary
    assert by["weights_match_reference"]["status"] == "pass" and by["weights_are_distributions"]["status"] == "pass"


def test_returned_weights_spread_over_the_future_fail_both_weight_properties():
    r = run(RetAttn("uniform"), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch"
    assert by["weights_are_distributions"]["status"] == "fail"
    assert "forbids" in by["weights_are_distributions"]["detail"]
    assert by["weights_match_reference"]["status"] == "fail"
    assert by["matches_reference"]["status"] == "pass"  # the output itself is right


def test_a_second_output_that_is_not_weights_is_said_not_ignored():
    r = run(RetAttn("wrong_shape"), causal=True)
    assert any("second output" in line and "not checked" in line for line in r.lines), r.lines
    r = run(RetAttn("none"), causal=True)  # None (Hugging Face without output_attentions): nothing to say
    assert not any("second output" in line for line in r.lines)


# -- third pass: the training path, leaves, the user's OSError, lazy modules ----------------------

class GradBranch(SmallAttn):
    """Right without autograd; with it (training) leaks the future by a detached term."""

    def forward(self, x):
        y = super().forward(x)
        return y + 1e-3 * x.flip(1).detach() if torch.is_grad_enabled() else y


class NewLeaf(SmallAttn):
    def forward(self, x):
        return super().forward(x).detach().requires_grad_()


def test_the_forward_computed_with_autograd_is_judged_too():
    r = run(GradBranch(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch" and by["matches_reference_with_grad"]["status"] == "fail"
    assert by["matches_reference"]["status"] == "pass"
    assert "is_grad_enabled" in by["matches_reference_with_grad"]["detail"]
    ok = run(SmallAttn(), causal=True)
    assert ok.outcome == "ok" and any(p["name"] == "matches_reference_with_grad" and p["status"] == "pass"
                                      for p in ok.to_json()["properties"])


def test_an_output_that_is_a_new_leaf_fails_gradients():
    r = run(NewLeaf(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch" and by["gradients_match_reference"]["status"] == "fail"
    assert "new leaf" in by["gradients_match_reference"]["detail"]


class LazyAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.LazyLinear(8) for _ in range(4))
        self.num_heads = 2

    def forward(self, x):
        return SmallAttn.forward(self, x)


def test_lazy_parameters_are_created_by_one_call_and_d_is_asked_for():
    with pytest.raises(UsageError) as e:
        run(LazyAttn(), causal=True)
    assert "lazy" in e.value.format_message() and "--dim" in e.value.format_message()
    r = run(LazyAttn(), causal=True, dim=8)
    assert r.outcome == "ok", r.verdict.summary


def test_the_users_oserror_on_a_later_call_is_one_line_exit_2(tmp_path):
    # (the 10th call: six are the copy's faithfulness check at two lengths, hostile passes 43a F14 and 48a F5; three
    # the first length's)
    from tests.cli_helpers import invoke, one_line_error

    (tmp_path / "later.py").write_text(
        "import sys\nsys.path.insert(0, %r)\nfrom tests.test_hostile_round4 import SmallAttn\n"
        "class Later(SmallAttn):\n    n = 0\n    def forward(self, x):\n        Later.n += 1\n"
        "        if Later.n >= 10:\n            raise OSError('disk went away')\n        return super().forward(x)\n"
        % str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    code, out, err = invoke("check", "attention", "--module", f"{tmp_path}/later.py:Later", "--causal", "--quick",
                            "--seq-len", "1,5,17")
    line = one_line_error(code, err)
    assert "OSError: disk went away" in line and "later.py:" in line, line


class NoDimArg(nn.Module):  # no parameters, no __init__ arguments: q = k = v = x
    def forward(self, x):
        T = x.shape[1]
        s = (x @ x.transpose(-1, -2)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return s.softmax(-1) @ x


def test_dim_for_a_class_that_takes_no_dim_is_only_d():
    with pytest.raises(UsageError) as e:
        run(NoDimArg, causal=True)
    assert "--dim" in e.value.format_message()
    r = run(NoDimArg, causal=True, dim=8)
    assert r.outcome in ("ok", "inconclusive"), r.verdict.summary


class HeadSizeAttr(SmallAttn):
    """``self.d`` is the head size (4), not D (8), as in many hand-written modules."""

    def __init__(self):
        super().__init__()
        self.d = 4


def test_an_attribute_d_no_projection_takes_is_not_the_model_dimension():
    r = run(HeadSizeAttr(), causal=True)
    assert r.outcome == "ok" and r.to_json()["inputs"]["D"] == 8, r.verdict.summary


def test_rope_dims_read_from_the_module_are_named_when_they_do_not_fit():
    m = LyingGQA(SimpleNamespace(num_key_value_heads=2), base=10000.0)
    m.rotary_ndims = 1000
    with pytest.raises(UsageError) as e:
        run(m, positional="rope")
    msg = e.value.format_message()
    assert msg.startswith("the module's rope_dims 1000 (rotary_ndims)") and "--ignore-config" in msg, msg
    m.rotary_ndims = 6
    with pytest.raises(UsageError) as e:
        run(m, positional="rope", heads=4)
    assert "the module's rope_dims 6" in e.value.format_message() and "d_k = 4" in e.value.format_message()


def test_a_partial_rotary_factor_without_a_head_size_is_said():
    m = LyingGQA(SimpleNamespace(num_key_value_heads=2, partial_rotary_factor=0.5), base=10000.0)
    r = run(m, positional="rope")
    assert any("partial_rotary_factor = 0.5" in line and "--rope-dims" in line for line in r.lines), r.lines


def test_a_class_that_needs_arguments_is_told_to_name_an_instance():
    with pytest.raises(UsageError) as e:
        run(nn.MultiheadAttention, dim=8)
    msg = e.value.format_message()
    assert "name an instance or a factory" in msg and "give --dim" not in msg, msg

    def broken():
        raise RuntimeError("factory broken")
    with pytest.raises(UsageError) as e:
        run(broken)
    assert "--dim" not in e.value.format_message()


@pytest.mark.parametrize("cfg_kw, idx, words", [
    (dict(sliding_window=4, use_sliding_window="false"), None, "use_sliding_window = 'false': expected True or False"),
    (dict(sliding_window=4, layer_types=["sliding_attention", "full_attention"]), 5, "layer_idx = 5, beyond"),
])
def test_config_values_that_cannot_be_read_are_one_line(cfg_kw, idx, words):
    """Issue 42: one line, and the check goes on with what the user declared (here: --causal)."""
    m = LyingGQA(SimpleNamespace(num_key_value_heads=2, **cfg_kw))
    if idx is not None:
        m.layer_idx = idx
    r = run(m, causal=True)
    said = [ln for ln in r.lines if words in ln]
    assert len(said) == 1 and "not read (the check uses what is declared)" in said[0], r.lines
    assert r.outcome == "ok", r.verdict.summary


def test_an_output_whose_record_cannot_be_kept_says_so(tmp_path, monkeypatch, capsys):
    from proofs_checks import owned

    monkeypatch.setenv("XDG_CACHE_HOME", "/dev/null")
    f = tmp_path / "out.json"
    owned.write_json_text(str(f), "{}", None)
    err = capsys.readouterr().err
    assert f.read_text() == "{}" and "record of written outputs could not be kept" in err and "--force" in err


def test_a_mapping_hook_that_changes_the_module_is_refused():
    def hook(m):
        m.num_heads = 2  # a careless hook: writes into the module it reads
        m.flag = True
        return {"q": m.q, "k": m.k, "v": m.v, "o": m.o, "heads": 2}

    with pytest.raises(UsageError) as e:
        run(SmallAttn(), causal=True, mapping=hook)
    assert "the hook changed the module" in e.value.format_message() and "flag" in e.value.format_message()


@pytest.mark.parametrize("what, value, ok", [
    ("heads", np.int64(2), True),
    ("q_int", None, False),
    ("q_complex", None, False),
])
def test_mapping_hook_values_are_typed(what, value, ok):
    def hook(m):
        d = {"q": m.q, "k": m.k, "v": m.v, "o": m.o, "heads": 2}
        if what == "heads":
            d["heads"] = value
        elif what == "q_int":
            d["q"] = m.q.weight.detach().long()
        else:
            d["q"] = m.q.weight.detach().to(torch.complex128)
        return d

    if ok:
        assert run(SmallAttn(), causal=True, mapping=hook).outcome == "ok"
    else:
        with pytest.raises(UsageError) as e:
            run(SmallAttn(), causal=True, mapping=hook)
        assert "weights must be real floating point" in e.value.format_message()


def test_a_subnormal_lambda_entry_is_one_line_without_numpy_warnings():
    from tests.cli_helpers import invoke, one_line_error

    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error")
        code, out, err = invoke("check", "icl", "--N", "10", "--quick", "--lambda", "1e-320,1")
    assert "condition number inf" in one_line_error(code, err)


class Ckpt(SmallAttn):
    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        return checkpoint(SmallAttn.forward, self, x, use_reentrant=True)


def test_reentrant_checkpointing_gives_no_torch_warning(recwarn):
    r = run(Ckpt(), causal=True)
    assert r.outcome == "ok", r.verdict.summary
    assert not [w for w in recwarn.list if "requires_grad" in str(w.message)]


def test_run_without_a_terminal_says_a_long_claim_is_still_running(monkeypatch, capsys):
    import time

    from proofs_checks import cli

    monkeypatch.setattr(cli._Progress, "HEARTBEAT_FIRST", 0.3)
    monkeypatch.setattr(cli._Progress, "HEARTBEAT_EVERY", 10.0)
    with cli._Progress(2, "verifying", True) as bar:
        bar.start("slow.claim")
        time.sleep(1.2)
        bar.advance("slow.claim", "verified", 1.2)
    err = capsys.readouterr().err
    assert "[1/2] slow.claim: still running" in err and "[1/2] slow.claim verified" in err, err


def _svm_instance():
    from numerics.att_svm import make_instance

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    return inst, (inst.X, inst.z, inst.y, inst.v)


@pytest.mark.parametrize("kw, words", [
    (dict(iters=0), "iters must be in 1"),
    (dict(level=2.0), "level must be strictly between 0 and 1"),
    (dict(lr=1e300), "lr=1e+300"),
    (dict(device="cuda"), "device"),
])
def test_att_svm_api_has_the_commands_ranges(kw, words):
    if kw.get("device") == "cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is there")
    _, data = _svm_instance()
    with pytest.raises(InputError) as e:
        proofs_checks.check_att_svm(data, mode="quick", **kw)
    assert words in str(e.value) and str(e.value).startswith("check_att_svm:"), str(e.value)


def test_att_svm_lr_whose_iterates_overflow_is_one_line():
    from tests.cli_helpers import invoke, one_line_error

    inst, _ = _svm_instance()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/svm.npz"
        np.savez(p, X=inst.X, z=inst.z, y=inst.y, v=inst.v)
        code, out, err = invoke("check", "att-svm", "--quick", "--data", p, "--lr", "1e300")
    assert "overflow float64" in one_line_error(code, err)


def test_att_svm_progress_covers_the_per_initialisation_targets(monkeypatch):
    from proofs_checks.sanity import att_svm as sa

    inst, _ = _svm_instance()
    ticks = []
    orig = sa._verdict

    def spy(*a, tick, **kw):
        return orig(*a, tick=lambda f: (ticks.append(f), tick(f)), **kw)
    monkeypatch.setattr(sa, "_verdict", spy)
    sa.run_att_svm(inst, iters=20, lr=0.1, seeds=4, level=0.99, progress=True)
    assert ticks == [0.0, 0.25, 0.5, 0.75]  # the slow per-initialisation step reports its progress


def test_other_api_functions_refuse_unknown_keywords_and_show_fitting_examples():
    with pytest.raises(InputError) as e:
        proofs_checks.check_hopfield(np.eye(4), beta=0.5, mode="quick")
    assert "unknown keyword argument 'mode'" in str(e.value)
    with pytest.raises(InputError) as e:
        proofs_checks.check_lyapunov("-x, -y", "x**2 + y**2", vars=["x", "y"])
    assert "vars='x,y'" in str(e.value)


def test_lyapunov_variables_in_natural_order_and_ascii():
    from theory.lyapunov import parse_system

    c = parse_system("-x1, -x2, -x10", "x1**2 + x2**2 + x10**2")
    assert [str(v) for v in c.vars] == ["x1", "x2", "x10"]
    with pytest.raises(InputError) as e:
        parse_system("-α, -y", "α**2 + y**2")
    assert "ASCII" in str(e.value)


class MaskIgnoring(SmallAttn):
    """Causal attention called as f(x, mask) that never reads the mask."""

    def forward(self, x, mask=None):
        return SmallAttn.forward(self, x)


def test_a_causal_module_that_ignores_its_padding_mask_is_caught_by_left_padding():
    r = run(MaskIgnoring(), causal=True, mask_convention="keep")
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert by["key_padding_respected"]["status"] == "fail", by["key_padding_respected"]
    assert "left padding" in by["key_padding_respected"]["detail"]


class GradAtFive(SmallAttn):
    def forward(self, x):
        y = SmallAttn.forward(self, x)
        return y + 1e-3 * x.flip(1).detach() if torch.is_grad_enabled() and x.shape[1] == 5 else y


def test_the_training_path_is_compared_at_every_probed_length():
    r = run(GradAtFive(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert by["matches_reference_with_grad"]["status"] == "fail"


class F32Minus30(SmallAttn):
    """Fills the causal mask with −30 in float32 only (the leak shows at large logits)."""

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (m(x).view(B, T, 2, 4).transpose(1, 2) for m in (self.q, self.k, self.v))
        fill = -30.0 if x.dtype == torch.float32 else -math.inf
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), fill)
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_the_other_dtype_is_compared_at_large_logits_too():
    r = run(F32Minus30(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch" and by["dtype_and_device_preserved"]["status"] == "fail"
    assert "large logits" in by["dtype_and_device_preserved"]["detail"]


class InferenceLeak(SmallAttn):
    def forward(self, x):
        y = SmallAttn.forward(self, x)
        return y + 1e-3 * x.flip(1) if torch.is_inference_mode_enabled() else y


def test_the_inference_mode_path_is_judged_when_it_computes_otherwise():
    r = run(InferenceLeak(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch" and by["matches_reference_in_inference_mode"]["status"] == "fail"
    ok = run(SmallAttn(), causal=True)  # the same outputs: no row at all
    assert "matches_reference_in_inference_mode" not in {p["name"] for p in ok.to_json()["properties"]}


def test_an_against_that_returns_nan_is_named():
    def nan_against(x):
        return torch.full_like(x, float("nan"))
    with pytest.raises(UsageError) as e:
        run(SmallAttn(), causal=True, against=nan_against)
    assert "--against: nan_against returned NaN or inf" in e.value.format_message()


class SelfMapRaises(SmallAttn):
    def tverify_mapping(self):
        raise RuntimeError("mapping broken")


def test_a_modules_own_mapping_method_is_named_as_such():
    with pytest.raises(UsageError) as e:
        run(SelfMapRaises(), causal=True)
    msg = e.value.format_message()
    assert msg.startswith("SelfMapRaises.tverify_mapping(): the hook raised RuntimeError") and "--mapping" not in msg


def test_a_tiny_icl_tol_is_no_traceback():
    from tests.cli_helpers import invoke

    code, out, err = invoke("check", "icl", "--quick", "--N", "10", "--lambda", "1,2", "--tol", "1e-300",
                            "--seeds", "2", "--no-progress")
    assert code in (1, 3) and "Traceback" not in out + err, (code, err[-2000:])


def test_json_inside_report_is_refused_for_that_reason_even_when_it_exists(tmp_path):
    from tests.cli_helpers import invoke, one_line_error

    rep = tmp_path / "rep"
    code, _, err = invoke("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--report", str(rep))
    assert code == 0, err
    code, _, err = invoke("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--report", str(rep),
                          "--json", str(rep / "report.json"))
    assert "inside --report" in one_line_error(code, err)


def test_a_config_head_dim_that_is_not_the_weights_head_size_is_named():
    m = LyingGQA(SimpleNamespace(num_key_value_heads=2, partial_rotary_factor=0.5, head_dim=64), base=10000.0)
    with pytest.raises(UsageError) as e:
        run(m, positional="rope")
    assert "config.head_dim 64, which is not the head size of the weights found" in e.value.format_message()


# -- third pass (other surfaces) --------------------------------------------------------------------

def test_list_markdown_into_a_users_folder_never_replaces_their_files(tmp_path):
    from tests.cli_helpers import invoke, one_line_error

    (tmp_path / "CATALOGUE.md").write_text("MY OWN CATALOGUE")
    code, out, err = invoke("list", "--markdown", "--docs-dir", str(tmp_path))
    assert "not a catalogue as tverify wrote it" in one_line_error(code, err)
    assert (tmp_path / "CATALOGUE.md").read_text() == "MY OWN CATALOGUE"


def test_report_out_never_replaces_a_device_node_even_with_force():
    from tests.cli_helpers import invoke, one_line_error

    code, out, err = invoke("report", "attn.softmax_simplex", "--quick", "--no-mutants", "--out", "/dev/full",
                            "--force")
    assert "a device, FIFO or socket" in one_line_error(code, err)
    assert __import__("os").path.exists("/dev/full")


@pytest.mark.parametrize("patterns, words", [
    (np.eye(8) * 1j, "is complex"),
    (np.array([[object()] * 4] * 3), "Python objects"),
    (np.eye(8) * 1e308, "β·M²"),
])
def test_check_hopfield_api_gets_the_command_lines_checks(patterns, words):
    with pytest.raises(InputError) as e:
        proofs_checks.check_hopfield(patterns)
    assert words in str(e.value), str(e.value)


def test_a_closed_pipe_under_a_rich_table_is_one_line_exit_2():
    import subprocess
    import sys

    p2 = subprocess.run(f"{sys.executable} -m proofs_checks list | head -0; echo ${{PIPESTATUS[0]}}", shell=True,
                        capture_output=True, text=True, executable="/bin/bash")
    assert p2.stdout.strip() == "2" and "broken pipe" in p2.stderr and "Traceback" not in p2.stderr, (p2.stdout, p2.stderr)


@pytest.mark.parametrize("error, tol, kills", [(0.0, 1e-12, False), (math.inf, math.inf, False), (1.0, 0.0, True),
                                               (math.nan, math.nan, True)])
def test_a_counterexample_that_says_violated_must_show_it(error, tol, kills):
    import dataclasses

    from proofs_checks.context import RunContext
    from proofs_checks.registry import Counterexample, select
    from proofs_checks.runner import run_counterexample

    claim = select(["attn.softmax_simplex"])[0]
    h = next(h for h in claim.hypotheses if h.counterexample is not None)
    clause = claim.statement_clauses()[0].name
    fake = dataclasses.replace(h, counterexample=lambda ctx: Counterexample({"n": 1}, clause, "says so",
                                                                            violated=True, error=error, tolerance=tol))
    c2 = dataclasses.replace(claim, hypotheses=tuple(fake if x is h else x for x in claim.hypotheses))
    o = run_counterexample(c2, h.name, RunContext(mode="quick"))
    assert (o.status == "failed") is kills, (o.status, o.error_message)
    if not kills:
        assert o.status == "error" and "nothing was shown" in o.error_message


class TrainLeak(SmallAttn):
    def forward(self, x):
        y = SmallAttn.forward(self, x)
        return y + 1e-3 * x.flip(1) if self.training else y


class NonContigLeak(SmallAttn):
    def forward(self, x):
        y = SmallAttn.forward(self, x)
        return y if x.is_contiguous() else y + 1e-3 * x.flip(1)


class LenScale(SmallAttn):
    def forward(self, x):
        return SmallAttn.forward(self, x) * (1 + 1e-3 * math.log(x.shape[1]))


@pytest.mark.parametrize("cls, words", [(TrainLeak, "training mode"), (NonContigLeak, "non-contiguous")])
def test_training_mode_and_non_contiguous_paths_are_judged(cls, words):
    r = run(cls(), causal=True)
    by = {p["name"]: p for p in r.to_json()["properties"]}
    assert r.outcome == "mismatch" and by["matches_reference_on_other_paths"]["status"] == "fail"
    assert words in by["matches_reference_on_other_paths"]["detail"]


def test_a_length_dependent_scale_gets_no_precision_hint():
    r = run(LenScale(), causal=True)
    assert r.outcome == "mismatch"
    assert not any("compute-dtype" in h for h in r.to_json()["hints"]), r.to_json()["hints"]


@pytest.mark.parametrize("kw, words", [(dict(device="tpu"), "device must be cpu or cuda"),
                                       (dict(seed=-1), "seed must be in 0"), (dict(seed=2**40), "seed must be in 0")])
def test_run_claims_has_the_commands_ranges(kw, words):
    with pytest.raises(InputError) as e:
        proofs_checks.run_claims("attn.softmax_simplex", mode="quick", **kw)
    assert words in str(e.value)


def test_a_csv_with_a_byte_order_mark_reads(tmp_path):
    from proofs_checks.parsing import parse_spd

    f = tmp_path / "lam.csv"
    f.write_bytes(b"\xef\xbb\xbf1,2\n")
    assert np.allclose(np.diag(parse_spd(str(f), "--lambda")[0]), [1, 2])


def test_a_store_that_is_a_file_is_one_line(tmp_path):
    from tests.cli_helpers import invoke, one_line_error

    f = tmp_path / "storefile"
    f.write_text("x")
    code, out, err = invoke("show", "attn.softmax_simplex", "--store", str(f))
    assert "is not a folder" in one_line_error(code, err)


def test_att_svm_weights_both_w_and_kq_and_api_data_types(tmp_path):
    from tests.cli_helpers import invoke, one_line_error

    inst, data = _svm_instance()
    p, w = tmp_path / "d.npz", tmp_path / "w.npz"
    np.savez(p, X=inst.X, z=inst.z, y=inst.y, v=inst.v)
    np.savez(w, W=np.eye(6), K=np.eye(6), Q=np.zeros((6, 6)))
    code, out, err = invoke("check", "att-svm", "--data", str(p), "--weights", str(w), "--quick")
    assert "ambiguous" in one_line_error(code, err)
    with pytest.raises(InputError) as e:
        proofs_checks.check_att_svm(None)
    assert "data must be a .npz path" in str(e.value)
    with pytest.raises(InputError) as e:
        proofs_checks.check_att_svm(data, weights=np.full((6, 6), np.nan))
    assert "non-finite value" in str(e.value) and "(0, 0)" in str(e.value)


class QKNormEps(SmallAttn):
    """QK-norm with torch's default RMS eps (not the reference's 1e-6), all in float64."""

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (m(x).view(B, T, 2, 4).transpose(1, 2) for m in (self.q, self.k, self.v))
        q, k = (torch.nn.functional.rms_norm(t, (4,)) for t in (q, k))  # eps: torch's default
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def test_a_small_systematic_difference_gets_no_precision_hint():
    r = run(QKNormEps(), causal=True, qk_norm="rms")
    assert r.outcome == "mismatch"
    assert not any("compute-dtype" in h for h in r.to_json()["hints"]), r.to_json()["hints"]
