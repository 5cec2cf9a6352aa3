"""Property tests of numerics/lora.py and theory/lora.py (claim ``lora.low_rank``)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from numerics import lora as nl
from numerics.torch_utils import generator
from theory import lora as tl
from theory.validation import InputError

from strategies import seeds

EPS = np.finfo(np.float64).eps


@st.composite
def lora_configs(draw):
    d = draw(st.integers(1, 12))
    k = draw(st.integers(1, 12))
    r = draw(st.integers(1, min(d, k)))
    alpha = draw(st.floats(0.25, 32.0))
    n = draw(st.integers(1, 10))
    return d, k, r, alpha, n, draw(seeds)


def _setup(d, k, r, alpha, n, seed):
    g = generator(seed)
    base = nn.Linear(k, d, dtype=torch.float64)
    with torch.no_grad():
        base.weight.copy_(torch.randn(d, k, generator=g, dtype=torch.float64))
        base.bias.copy_(torch.randn(d, generator=g, dtype=torch.float64))
    lora = nl.make_lora(base, r, alpha, g)
    X = torch.randn(n, k, generator=g, dtype=torch.float64)
    return base, lora, X, g


@settings(max_examples=20)
@given(lora_configs())
def test_init_equals_base_and_step0_gradients(cfg):
    d, k, r, alpha, n, seed = cfg
    base, lora, X, g = _setup(*cfg)
    y = lora(X)
    assert torch.equal(y.detach(), base(X).detach())  # B = 0: the update adds exact zeros
    G = torch.randn(n, d, generator=g, dtype=torch.float64)
    (G * y).sum().backward()
    assert torch.count_nonzero(lora.A.grad) == 0
    gA, gB = nl.lora_grads(X.numpy(), G.numpy(), lora.A.detach().numpy(), lora.B.detach().numpy(), alpha / r)
    tol = 16 * (n + k) * EPS * (alpha / r) * max(1.0, float(np.abs(lora.B.grad.numpy()).max()))
    np.testing.assert_allclose(gB, lora.B.grad.numpy(), rtol=0, atol=tol)
    assert np.all(gA == 0)
    assert base.weight.grad is None and base.bias.grad is None


@settings(max_examples=20)
@given(lora_configs())
def test_merge_rank_and_count(cfg):
    d, k, r, alpha, n, seed = cfg
    base, lora, X, g = _setup(*cfg)
    with torch.no_grad():
        lora.B.copy_(torch.randn(d, r, generator=g, dtype=torch.float64))
        merged = lora.merged()
        yu, ym = lora(X), merged(X)
    scale = float(yu.abs().max()) + 1.0
    assert float((yu - ym).abs().max()) <= 32 * (k + r) * EPS * scale * max(1.0, alpha / r)
    delta = (merged.weight - base.weight).detach().numpy()
    sv = np.linalg.svd(delta, compute_uv=False)
    assert np.all(sv[r:] <= 32 * max(d, k) * EPS * max(1.0, sv[0]))
    assert nl.count_trainable(lora) == nl.trainable_count(d, k, r) == r * (d + k)


@pytest.mark.parametrize("kw,msg", [
    (dict(r=0), "rank r"),
    (dict(r=5), "rank r"),
    (dict(alpha=0.0), "alpha"),
    (dict(alpha=float("nan")), "alpha"),
])
def test_bad_hyperparameters_raise_input_error(kw, msg):
    args = dict(r=2, alpha=4.0)
    args.update(kw)
    with pytest.raises(InputError, match=msg):
        nl.make_lora(nn.Linear(4, 3, dtype=torch.float64), args["r"], args["alpha"])


def test_base_must_be_linear():
    with pytest.raises(InputError, match="torch.nn.Linear"):
        nl.LoRALinear(nn.Conv1d(2, 2, 1), 1, 1.0)


def test_derivations():
    d = tl.derive_lora_gradients(2, 3, 2, 2)
    assert all(e == 0 for e in d.facts["residual_A"]) and all(e == 0 for e in d.facts["residual_B"])
    assert all(e == 0 for e in d.facts["grad_A_at_B0"])
    assert any(e != 0 for e in d.facts["grad_B_at_B0"])
    assert tl.derive_lora_rank(3, 4, 2).result == 0
    assert tl.derive_lora_rank(3, 3, 2).facts["leading_r_minor"] != 0
    dd, kk, rr = tl.derive_lora_count().facts["symbols"]
    assert sp.expand(tl.derive_lora_count().result - rr * (dd + kk)) == 0


# ---- written against the survivors of code-level mutation testing (make mutation, numerics/lora.py) ----

def test_initialisation_is_reproducible_and_scaled():
    """A ~ N(0, 1/k) drawn from the given generator (B too with init_B="normal"): same seed, same weights."""
    base = nn.Linear(400, 8, dtype=torch.float64)
    a1, a2 = (nl.make_lora(base, 8, 2.0, generator=generator(7)) for _ in range(2))
    assert torch.equal(a1.A, a2.A)
    assert abs(float(a1.A.detach().std()) * np.sqrt(400) - 1.0) < 0.1  # 3200 draws: the std is within ~2.5%
    b1, b2 = (nl.LoRALinear(base, 4, 1.0, generator=generator(3), init_B="normal") for _ in range(2))
    assert torch.equal(b1.B, b2.B) and torch.equal(b1.A, b2.A)


def test_delta_weight_and_merged_bias():
    base = nn.Linear(5, 3, bias=False, dtype=torch.float64)
    lora = nl.LoRALinear(base, 2, 3.0, generator=generator(0), init_B="normal")
    with torch.no_grad():
        np.testing.assert_allclose(lora.delta_weight().numpy(), 1.5 * (lora.B @ lora.A).numpy(), rtol=1e-15)
        merged = lora.merged()
        assert merged.bias is None
        np.testing.assert_allclose(merged.weight.numpy(), (base.weight + lora.delta_weight()).numpy(), rtol=1e-14)


def test_adapter_follows_the_base_device():
    """A, B and the merged layer live on the base layer's device ("meta" stands in for CUDA on a CPU box)."""
    base = nn.Linear(4, 3, dtype=torch.float64, device="meta")
    for init_B in ("zeros", "normal"):
        lora = nl.LoRALinear(base, 2, 1.0, generator=generator(0), init_B=init_B)
        assert lora.A.device.type == lora.B.device.type == "meta"
    assert lora.merged().weight.device.type == "meta"


def test_base_must_be_linear_message():
    with pytest.raises(InputError, match=r"^base must be a torch\.nn\.Linear$"):
        nl.make_lora(nn.Conv1d(2, 2, 1), 1, 1.0)
