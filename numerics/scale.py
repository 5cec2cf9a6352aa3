"""Parameter counts: the closed form, the lecture notes 004 table, and torch models on the ``meta`` device
(claim ``scale.param_counts``).

A block is a standard transformer encoder/decoder block: multi-head self-attention (Q, K, V, O
with biases), an MLP ``d → r·d → d`` with biases, two LayerNorms. Models on the ``meta`` device
have shapes but no storage, so GPT-3 (175B parameters) is built in a fraction of a second.

Model settings used for the table (published configurations):

=============  ======  =====  =====  ======  =======  ===========================================
model          layers  d      heads  vocab   context  extras
=============  ======  =====  =====  ======  =======  ===========================================
BERT-Base      12      768    12     30522   512      2 token types, embedding LN, pooler
BERT-Large     24      1024   16     30522   512      2 token types, embedding LN, pooler
GPT-2 (XL)     48      1600   25     50257   1024     final LN, tied unembedding
Megatron-LM    72      3072   32     51200   1024     final LN (GPT-2 BPE padded to 51200)
Turing-NLG     78      4256   28     50257   1024     final LN
GPT-3          96      12288  96     50257   2048     final LN
RoBERTa        24      1024   16     50265   514      1 token type, embedding LN, pooler
=============  ======  =====  =====  ======  =======  ===========================================

Not reproduced (``ENCODER_DECODER_ROWS``): Transformer-Base and -Large, encoder–decoder models whose
decoder blocks also have cross-attention; XLNet-Large (two-stream relative attention) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Callable

import torch
from torch import nn

from theory.validation import InputError, require

__all__ = [
    "ModelConfig",
    "TABLE",
    "per_layer_params",
    "total_params",
    "GPTBlock",
    "build_meta_model",
    "count_params",
    "published_interval",
    "to_significant",
    "ENCODER_DECODER_ROWS",
    "encoder_decoder_params",
]


@dataclass(frozen=True)
class ModelConfig:
    """One model: ``layers`` blocks of width ``d`` with ``heads`` heads, token vocabulary ``vocab``,
    learned positions for ``context`` tokens. ``style`` "bert" adds ``type_vocab`` token-type
    embeddings, an embedding LayerNorm and a d×d pooler; "gpt" adds a final LayerNorm.
    ``published``: the count as printed in lecture notes 004 (e.g. ``"110M"``), ``""`` if none.
    ``convention``: how the print was made from the count, stated per row: ``("round", k)`` or
    ``("truncate", k)`` to ``k`` significant figures (see :func:`to_significant`)."""

    name: str
    layers: int
    d: int
    heads: int
    vocab: int
    context: int
    style: str = "gpt"
    type_vocab: int = 2
    published: str = ""
    convention: tuple[str, int] = ("round", 2)

    def __post_init__(self):
        for f in ("layers", "d", "heads", "vocab", "context"):
            require(int(getattr(self, f)) >= 1, f"{self.name}: {f} must be a positive integer")
        require(self.d % self.heads == 0, f"{self.name}: heads ({self.heads}) must divide d ({self.d})")
        require(self.style in ("gpt", "bert"), f"{self.name}: style must be 'gpt' or 'bert'")
        require(self.convention[0] in ("round", "truncate") and int(self.convention[1]) >= 1,
                f"{self.name}: convention must be ('round'|'truncate', significant figures ≥ 1)")


TABLE: tuple[ModelConfig, ...] = (
    ModelConfig("BERT-Base", 12, 768, 12, 30522, 512, "bert", published="110M"),
    ModelConfig("BERT-Large", 24, 1024, 16, 30522, 512, "bert", published="340M"),
    ModelConfig("GPT-2", 48, 1600, 25, 50257, 1024, published="1.5B", convention=("truncate", 2)),
    ModelConfig("Megatron-LM", 72, 3072, 32, 51200, 1024, published="8.3B"),
    ModelConfig("Turing-NLG", 78, 4256, 28, 50257, 1024, published="17B"),
    ModelConfig("GPT-3", 96, 12288, 96, 50257, 2048, published="175B", convention=("round", 3)),
    ModelConfig("RoBERTa", 24, 1024, 16, 50265, 514, "bert", type_vocab=1, published="355M", convention=("round", 3)),
)

#: rows of lecture notes 004's table that the formula does not reproduce (encoder–decoder models of
#: Vaswani et al. 2017: 6 + 6 layers, FFN 4d, shared BPE vocabulary of 37000, sinusoidal positions):
#: (name, layers printed, d, heads, vocabulary, printed count)
ENCODER_DECODER_ROWS: tuple[tuple[str, int, int, int, int, str], ...] = (
    ("Transformer-Base", 12, 512, 8, 37000, "65M"),
    ("Transformer-Large", 12, 1024, 16, 37000, "213M"),
)


def per_layer_params(d: int, mlp_ratio: int = 4) -> int:
    """Parameters of one block: ``(4 + 2r) d² + (9 + r) d``, i.e. ``12d² + 13d`` for ``r = 4``.

    >>> per_layer_params(768)
    7087872
    """
    d, r = int(d), int(mlp_ratio)
    return (4 + 2 * r) * d * d + (9 + r) * d


def total_params(cfg: ModelConfig, per_layer: Callable[[int], int] = per_layer_params) -> int:
    """Whole-model count: ``L · per_layer(d)`` plus embeddings (token, position; BERT: token
    type, embedding LN, pooler; GPT: final LN). The unembedding is tied (not counted).

    >>> total_params(TABLE[0])
    109482240
    """
    d = cfg.d
    emb = (cfg.vocab + cfg.context) * d
    extra = (cfg.type_vocab * d + 2 * d + d * d + d) if cfg.style == "bert" else 2 * d
    return cfg.layers * int(per_layer(d)) + emb + extra


class GPTBlock(nn.Module):
    """A hand-written pre-LN GPT block (nanoGPT layout): fused QKV ``Linear(d, 3d)``, output
    ``Linear(d, d)``, MLP ``Linear(d, r·d)`` → GELU → ``Linear(r·d, d)``, two LayerNorms.
    Input ``(batch, T, d)``, causal attention."""

    def __init__(self, d: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        split = lambda z: z.view(B, T, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        y = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
        return x + self.mlp(self.ln2(x))


class _Model(nn.Module):
    def __init__(self, cfg: ModelConfig, block: str):
        super().__init__()
        d = cfg.d
        self.tok = nn.Embedding(cfg.vocab, d)
        self.pos = nn.Embedding(cfg.context, d)
        if block == "torch":
            layer = nn.TransformerEncoderLayer(d, cfg.heads, 4 * d, dropout=0.0, batch_first=True,
                                               norm_first=cfg.style == "gpt")
            self.blocks = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        else:
            self.blocks = nn.ModuleList(GPTBlock(d, cfg.heads) for _ in range(cfg.layers))
        if cfg.style == "bert":
            self.typ = nn.Embedding(cfg.type_vocab, d)
            self.emb_ln = nn.LayerNorm(d)
            self.pooler = nn.Linear(d, d)
        else:
            self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied unembedding


def build_meta_model(cfg: ModelConfig, block: str = "torch") -> nn.Module:
    """The model of ``cfg`` on the ``meta`` device. ``block="torch"`` stacks
    ``torch.nn.TransformerEncoderLayer`` (post-LN for BERT, pre-LN for GPT); ``"gpt"`` stacks
    :class:`GPTBlock`. The output layer shares the token embedding's weight."""
    require(block in ("torch", "gpt"), f"block must be 'torch' or 'gpt', got {block!r}")
    with torch.device("meta"):
        return _Model(cfg, block)


def count_params(module: nn.Module) -> int:
    """Σ numel over distinct parameters (tied weights counted once, as ``parameters()`` does)."""
    return int(sum(p.numel() for p in module.parameters()))


_UNITS = {"K": 3, "M": 6, "B": 9, "T": 12}


def to_significant(n: int, figures: int, mode: str = "round") -> int:
    """``n`` rounded (half up) or truncated to ``figures`` significant figures, exactly (integers).

    >>> to_significant(335_141_888, 2), to_significant(1_557_611_200, 2, "truncate"), to_significant(174_604_259_328, 3)
    (340000000, 1500000000, 175000000000)
    """
    require(n >= 0 and figures >= 1 and mode in ("round", "truncate"), "to_significant: n ≥ 0, figures ≥ 1, mode round|truncate")
    unit = 10 ** max(len(str(int(n))) - figures, 0)
    q, r = divmod(int(n), unit)
    if mode == "round" and 2 * r >= unit:
        q += 1
    return q * unit


def published_interval(text: str) -> tuple[float, float, float]:
    """``(value, lo, hi)`` for a count printed as ``text`` (``"110M"``, ``"1.5B"``).

    The unit ``u`` is one in the last printed digit (``"110M"``: 10M, trailing zeros of an
    integer are not significant; ``"1.5B"``: 0.1B). A count is consistent with the print when it
    rounds to it (``[v − u/2, v + u/2)``) or truncates to it (``[v, v + u)``): ``lo = v − u/2``,
    ``hi = v + u``.

    >>> published_interval("1.5B")
    (1500000000.0, 1450000000.0, 1600000000.0)
    >>> published_interval("110M")[1:]
    (105000000.0, 120000000.0)
    """
    t = str(text).strip().lstrip("~")
    if not t or t[-1] not in _UNITS:
        raise InputError(f"published count {text!r} must end in one of {sorted(_UNITS)}")
    num, exp = t[:-1], _UNITS[t[-1]]
    try:
        value = Decimal(num).scaleb(exp)
    except InvalidOperation:
        raise InputError(f"published count {text!r} is not a number") from None
    if "." in num:
        unit = Decimal(1).scaleb(exp - len(num.split(".")[1]))
    else:
        stripped = num.rstrip("0")
        unit = Decimal(1).scaleb(exp + (len(num) - len(stripped) if stripped else 0))
    return float(value), float(value - unit / 2), float(value + unit)


def encoder_decoder_params(d: int, heads: int, enc_layers: int, dec_layers: int, vocab: int, mlp_ratio: int = 4) -> int:
    """``numel`` of ``torch.nn.Transformer`` (encoder and decoder stacks with final LayerNorms; decoder
    blocks with self- and cross-attention) built on the ``meta`` device, plus ONE ``vocab × d``
    embedding shared by source, target and output (Vaswani et al. 2017; sinusoidal positions have no
    parameters)."""
    with torch.device("meta"):
        t = nn.Transformer(d, heads, enc_layers, dec_layers, mlp_ratio * d, dropout=0.0, batch_first=True)
    return count_params(t) + int(vocab) * int(d)
