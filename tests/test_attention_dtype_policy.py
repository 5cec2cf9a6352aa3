"""``dtype_and_device_preserved`` on modules torch's ``.to()`` cannot convert (issue 42): a layer that
keeps its computation dtype in a policy of its own (Keras 3 on the torch backend) cannot run the
property as built and is skipped with that reason, never failed; a module that really loses its
dtype or device, or that keeps a tensor ``.to()`` does not convert and then raises, is still a
mismatch. Small hand-written modules reproduce Keras' behaviour; the real Keras layer is an
integration test, skipped where keras is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap

import pytest

from tests.cli_helpers import invoke

MODULES = textwrap.dedent('''
    import torch
    from torch import nn


    class Policy:
        """A dtype policy as Keras 3 keeps one: the layer casts its inputs to ``compute_dtype``."""
        def __init__(self, name):
            self.compute_dtype = name


    class PolicyAttention(nn.Module):
        """A correct causal attention that computes in its policy's dtype (float64), as a Keras 3
        layer does: its inputs are cast to the policy, its weights are torch parameters, so after
        torch's .to(float32) the float64 inputs meet float32 weights and the layer raises."""

        def __init__(self, dim=8):
            super().__init__()
            self._policy = Policy("float64")
            self.mha = nn.MultiheadAttention(dim, 2, batch_first=True, dtype=torch.float64)

        @property
        def dtype_policy(self):
            return self._policy

        def forward(self, x):
            x = x.to(getattr(torch, self._policy.compute_dtype))
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            o = self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]
            if o.dtype != self.mha.in_proj_weight.dtype:  # pragma: no cover - torch raises first
                raise RuntimeError("expected scalar type Float but found Double")
            return o


    class Unconverted(nn.Module):
        """A correct causal attention with a float64 gain held as a plain attribute: torch's .to()
        leaves it, and in float32 the module raises (a real defect, not a policy)."""

        def __init__(self, dim=8):
            super().__init__()
            self.mha = nn.MultiheadAttention(dim, 2, batch_first=True)
            self.gain = torch.eye(dim, dtype=torch.float64)

        def forward(self, x):
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0] @ self.gain


    class WrongDevice(nn.Module):
        """A correct causal attention whose float32 output lands on another device (meta)."""

        def __init__(self, dim=8):
            super().__init__()
            self.mha = nn.MultiheadAttention(dim, 2, batch_first=True)

        def forward(self, x):
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            o = self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]
            return o.to("meta") if x.dtype == torch.float32 else o


    class PolicyLosesDtype(PolicyAttention):
        """A policy layer that does convert with .to() but returns float64 for a float32 input."""

        def forward(self, x):
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0].double()


    def policy():
        return PolicyAttention()


    def unconverted():
        return Unconverted()


    def wrong_device():
        return WrongDevice()


    def policy_loses_dtype():
        return PolicyLosesDtype()
''')


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    p = tmp_path_factory.mktemp("dtpol") / "dtype_policy_attn.py"
    p.write_text(MODULES)
    return str(p)


def run(target, *args):
    code, out, err = invoke("check", "attention", "--module", target, "--quick", "--no-progress", "--json", "-",
                            "--seq-len", "1,3,6", *args)
    assert "Traceback" not in err, err
    doc = json.loads(out)
    return code, doc, {p["name"]: p for p in doc["properties"]}


def test_a_layer_keeping_its_dtype_in_its_own_policy_cannot_run_the_property_as_built(mods):
    code, doc, by = run(f"{mods}:policy", "--causal")
    p = by["dtype_and_device_preserved"]
    assert code == 0 and doc["outcome"] == "ok", doc["verdict"]
    assert p["status"] == "skip" and p["detail"].startswith("not available as built"), p
    assert "dtype_policy (PolicyAttention) = float64, which torch's .to(float32) does not convert" in p["detail"]
    assert "dtype_and_device_preserved not available (the module keeps its computation dtype" in doc["verdict"]


@pytest.mark.parametrize("name, words", [
    ("unconverted", "tensors .to() does not convert (plain attributes): gain (float64)"),
    ("wrong_device", "input on cpu gave output on meta"),
    ("policy_loses_dtype", "float32 input gave float64 output"),
])
def test_a_module_that_really_loses_its_dtype_or_device_is_still_a_mismatch(mods, name, words):
    code, doc, by = run(f"{mods}:{name}", "--causal")
    p = by["dtype_and_device_preserved"]
    assert code == 1 and p["status"] == "fail" and words in p["detail"], p
    assert "dtype_and_device_preserved" in doc["verdict"]


KERAS_MODULE = textwrap.dedent('''
    import os
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    from torch import nn
    D = 32

    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, dtype="float64")
            self.attn.build((1, 1, D), (1, 1, D))
            self.dim = D

        def forward(self, x):
            return self.attn(x, x, use_causal_mask=True)

        def tverify_mapping(self):
            a, w = self.attn, lambda d: (d.kernel.value.reshape(D, -1).T, d.bias.value.reshape(-1))
            o = (a._output_dense.kernel.value.reshape(-1, D).T, a._output_dense.bias.value)
            return {"q": w(a._query_dense), "k": w(a._key_dense), "v": w(a._value_dense), "o": o, "heads": 4}

    def make():
        return A()
''')


@pytest.mark.integration(reason="a real Keras 3 layer (an optional library, installed by .ci/run only)")
@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
def test_real_keras_float64_causal_mha(tmp_path, monkeypatch):
    # keras 3 reads its backend when it is imported: the torch backend, in this process's environment
    if "keras" not in sys.modules:
        monkeypatch.setenv("KERAS_BACKEND", "torch")
    elif os.environ.get("KERAS_BACKEND", "torch") != "torch":  # pragma: no cover
        pytest.skip("keras was imported with another backend")
    p = tmp_path / "keras_mha.py"
    p.write_text(KERAS_MODULE)
    code, doc, by = run(f"{p}:make", "--causal")
    assert code == 1 and by["precision_as_declared"]["status"] == "fail", doc["verdict"]
    assert "precision_as_declared (it computes in float32, not float64)" in doc["verdict"]
    code, doc, by = run(f"{p}:make", "--causal", "--compute-dtype", "float32")
    assert code == 0 and doc["outcome"] == "ok", doc["verdict"]
    p = by["dtype_and_device_preserved"]
    assert p["status"] == "skip" and "attn.dtype_policy (keras MultiHeadAttention) = float64" in p["detail"], p
