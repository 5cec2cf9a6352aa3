"""Parameter counts of transformer stacks derived in SymPy (claim ``scale.param_counts``).

Conventions: model width ``d``, ``h`` heads of width ``d/h``, MLP hidden width ``r·d`` (``r = 4``
in every model of lecture notes 004's table), every linear map with a bias, two LayerNorms per block
(a scale and a shift each). Embedding matrices are counted once (the unembedding is tied).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_param_counts"]


def _linear(fan_in, fan_out):
    """Parameters of an affine map R^fan_in -> R^fan_out: weight matrix plus bias."""
    return fan_in * fan_out + fan_out


@lru_cache(maxsize=None)
def derive_param_counts() -> Derivation:
    """Sum the shapes of one transformer block and of the embeddings.

    ``result`` is the per-block count as a polynomial in ``d`` (MLP ratio 4):
    ``12 d² + 13 d``. ``facts`` holds the general per-block count ``(4 + 2r) d² + (9 + r) d``
    (``"per_layer_r"``), the model totals (``"total_gpt"``: token and position embeddings plus a
    final LayerNorm; ``"total_bert"``: plus token-type embeddings, an embedding LayerNorm and the
    pooler) and the symbols.

    >>> d = derive_param_counts()
    >>> d.result
    12*d**2 + 13*d
    >>> d.facts["heads_dependence"]
    0
    >>> d.result.subs(d.facts["d"], 768)
    7087872
    """
    b = DerivationBuilder("Parameters of a transformer block and of a whole model")
    b.symbols(d="model width", h="number of heads (each of width d/h)", r="MLP ratio (hidden width r·d)",
              L="number of blocks", V="vocabulary size", T="context length (position embeddings)",
              t="number of token types (BERT)")
    d, h, r, L, V, T, t = sp.symbols("d h r L V T t", positive=True, integer=True)
    fi, fo = sp.symbols("n_in n_out", positive=True, integer=True)
    b.define("An affine map R^n_in → R^n_out has n_in·n_out weights and n_out biases", _linear(fi, fo))
    # attention: h heads, each with query/key/value maps d -> d/h (weights + biases), then the
    # output map d -> d. Summing the heads shows the count does not depend on h.
    b.define("Attention: per head, Q, K, V maps d → d/h; then the output map d → d", 3 * _linear(d, d / h))
    per_head = 3 * _linear(d, d / h)
    attn = sp.expand(h * per_head + _linear(d, d))
    b.step("Summed over the h heads, plus the output map: P_attn =", attn)
    heads_dep = sp.simplify(sp.diff(attn, h))
    b.fact("heads_dependence", heads_dep)
    b.step("∂P_attn/∂h (the count does not depend on the number of heads)", heads_dep)
    b.obligation("independent_of_heads", sp.diff(attn, h))
    mlp = sp.expand(_linear(d, r * d) + _linear(r * d, d))
    b.step("MLP d → r·d → d with biases: P_mlp =", mlp)
    ln = b.define("Two LayerNorms, each a scale γ ∈ R^d and a shift β ∈ R^d: P_LN =", 2 * (d + d))
    per_layer_r = sp.collect(sp.expand(attn + mlp + ln), d)
    b.fact("per_layer_r", per_layer_r)
    b.step("Per block, general MLP ratio r: P_block =", per_layer_r)
    per_layer = sp.expand(per_layer_r.subs(r, 4))
    b.step("MLP ratio r = 4: P_block =", per_layer)
    total_gpt = sp.expand(L * per_layer + V * d + T * d + 2 * d)
    b.fact("total_gpt", total_gpt)
    b.step("GPT-style model: L blocks, token (V×d) and position (T×d) embeddings, final LayerNorm; "
           "the output layer is tied to the token embedding: P_GPT =", total_gpt)
    total_bert = sp.expand(L * per_layer + V * d + T * d + t * d + 2 * d + _linear(d, d))
    b.fact("total_bert", total_bert)
    b.step("BERT-style model: L blocks, token, position and t token-type embeddings, an embedding "
           "LayerNorm and the d×d pooler with bias: P_BERT =", total_bert)
    b.fact("d", d)
    b.fact("symbols", {"d": d, "h": h, "r": r, "L": L, "V": V, "T": T, "t": t})
    return b.done(per_layer)
