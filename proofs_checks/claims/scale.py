"""Group E: parameter counts of the models in lecture notes 004's "Scaling up Transformers" table.
Binds theory/scale.py and numerics/scale.py to checks and mutants."""

from __future__ import annotations

from functools import partial

import sympy as sp

from numerics import scale as ns
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, compare, register, worst
from proofs_checks.comparisons import largest
from theory import scale as ts

# --------------------------------------------------------------------------------------------
# scale.param_counts
# form: {"per_layer": d -> int, "total": ModelConfig -> int}

_EXACT = "exact integer arithmetic: a parameter count has no rounding, so any difference is a wrong count"


def _per_layer_symbolic(form, ctx) -> CheckResult:
    """form["per_layer"](d) equals the per-block polynomial SymPy summed from the shapes, and the
    form's totals equal the derived GPT/BERT totals, for d = 1..64 and the table's widths."""
    der = ts.derive_param_counts()
    s = der.facts["symbols"]
    poly = sp.lambdify(s["d"], der.result, "math")
    widths = list(range(1, 65)) + [c.d for c in ns.TABLE]
    errs = {"per_layer": largest(abs(int(form["per_layer"](d)) - int(poly(d))) for d in widths)}
    tot = {"gpt": der.facts["total_gpt"], "bert": der.facts["total_bert"]}
    diff = 0
    rng = ctx.rng()
    cfgs = list(ns.TABLE) + [ns.ModelConfig(f"r{i}", int(rng.integers(1, 9)), 8 * int(rng.integers(1, 9)), 8,
                                            int(rng.integers(1, 500)), int(rng.integers(1, 64)),
                                            "bert" if i % 2 else "gpt") for i in range(16)]
    for c in cfgs:
        ref = tot[c.style].subs({s["L"]: c.layers, s["d"]: c.d, s["V"]: c.vocab, s["T"]: c.context, s["t"]: c.type_vocab})
        diff = largest(diff, abs(int(form["total"](c)) - int(ref)))
    errs["total"] = diff
    return compare(worst(errs), 0, _EXACT, seeds=[ctx.seed_for()], sizes={"widths": len(widths), "configs": len(cfgs)},
                   details={"per_layer_polynomial": str(der.result), "general_ratio_r": str(der.facts["per_layer_r"]),
                            **{k: int(v) for k, v in errs.items()}})


def _numel_meta(form, ctx) -> CheckResult:
    """Against numel() of real torch modules on the meta device: one nn.TransformerEncoderLayer
    and one hand-written GPT block for small d (every d ≤ 48 divisible by the heads), then whole
    models (random small configs, BERT- and GPT-style, and every row of the table) built from
    nn.TransformerEncoderLayer stacks and from GPT blocks."""
    import torch

    errs: dict[str, float] = {}
    layer_diff = 0
    for d in range(1, 49):
        for h in {1, 2, 4, d} & {k for k in (1, 2, 4, d) if d % k == 0}:
            with torch.device("meta"):
                enc = torch.nn.TransformerEncoderLayer(d, h, 4 * d, batch_first=True)
                blk = ns.GPTBlock(d, h)
            ref = ns.count_params(enc)
            layer_diff = largest(layer_diff, abs(int(form["per_layer"](d)) - ref), abs(ns.count_params(blk) - ref))
    errs["per_layer_vs_TransformerEncoderLayer"] = layer_diff
    rng = ctx.rng()
    n_random = ctx.size(12, 40, 100)
    cfgs = [ns.ModelConfig(f"random{i}", int(rng.integers(1, 7)), 4 * int(rng.integers(1, 17)), 4,
                           int(rng.integers(2, 300)), int(rng.integers(1, 100)), "bert" if i % 2 else "gpt")
            for i in range(n_random)]
    model_diff = 0
    table = {}
    for c in cfgs + list(ns.TABLE):
        n_torch = ns.count_params(ns.build_meta_model(c, "torch"))
        n_gpt = ns.count_params(ns.build_meta_model(c, "gpt"))
        claimed = int(form["total"](c))
        model_diff = largest(model_diff, abs(claimed - n_torch), abs(claimed - n_gpt))
        if c in ns.TABLE:
            table[c.name] = {"formula": claimed, "numel_TransformerEncoder": n_torch, "numel_GPTBlocks": n_gpt}
    errs["total_vs_numel"] = model_diff
    return compare(worst(errs), 0, _EXACT, seeds=[ctx.seed_for()],
                   sizes={"layer_widths": "1..48", "random_models": n_random, "table_rows": len(ns.TABLE)},
                   details={**{k: int(v) for k, v in errs.items()}, "table": table})


def _published_table(form, ctx) -> CheckResult:
    """Each row of lecture notes 004's table under the convention stated for that row (rounded, or
    truncated, to the printed number of significant figures; GPT-2's "1.5B" is a truncation of
    1.558B, GPT-3's "175B" three significant figures): the form's count, so converted, must equal
    the printed number exactly. Error: the difference in units of the last printed figure."""
    rows, err = [], {}
    for c in ns.TABLE:
        n = int(form["total"](c))
        value = int(ns.published_interval(c.published)[0])
        mode, k = c.convention
        unit = 10 ** largest(len(str(value)) - k, 0)
        shown = ns.to_significant(n, k, mode)
        err[c.name] = abs(shown - value) / unit
        rows.append({"model": c.name, "layers": c.layers, "d": c.d, "heads": c.heads, "vocab": c.vocab,
                     "context": c.context, "style": c.style, "count": n, "published": c.published,
                     "convention": f"{mode} to {k} significant figures", "count_so_printed": shown})
    return compare(worst(err), 0,
                   "exact: each row's count, rounded or truncated to the printed significant figures as that row's "
                   "convention states, equals the printed number", sizes={"rows": len(rows)},
                   details={"table": rows, "difference_in_last_figures": err})


def _total_with(per_layer):
    return {"per_layer": per_layer, "total": partial(ns.total_params, per_layer=per_layer)}


def _no_embeddings(cfg):
    return cfg.layers * ns.per_layer_params(cfg.d)


def _untied_head(cfg):
    return ns.total_params(cfg) + cfg.vocab * cfg.d


register(Claim(
    id="scale.param_counts",
    title="Transformer parameter counts: 12d² + 13d per block plus embeddings reproduce the lecture notes 004 table",
    statement=r"P_{\text{block}}=4(d^2+d)+(d\cdot4d+4d)+(4d\cdot d+d)+2\cdot2d=12d^2+13d,\quad "
              r"P=L(12d^2+13d)+(V+T)d+\text{(LayerNorms, token types, pooler)}",
    source="lecture notes 004 (Scaling up Transformers table); Devlin et al. 2018; Radford et al. 2019; Shoeybi et al. 2019; "
           "Microsoft Turing-NLG 2020; Brown et al. 2020",
    kind="identity",
    form=_total_with(ns.per_layer_params),
    derivation=ts.derive_param_counts,
    checks=(
        Check("per_layer_vs_sympy", "symbolic", _per_layer_symbolic, "per-block and total counts vs the SymPy sum of shapes"),
        Check("numel_meta_models", "numeric", _numel_meta, "vs numel() of nn.TransformerEncoderLayer stacks and GPT blocks on the meta device"),
        Check("published_table", "numeric", _published_table, "every row of lecture notes 004's table within its published precision"),
    ),
    mutants=(
        Mutant("no_13d_term", "dropped term", "12d² per block (biases and LayerNorms dropped)", _total_with(lambda d: 12 * d * d)),
        Mutant("attention_only_4d2", "wrong formula", "4d² per block (attention projections only)", _total_with(lambda d: 4 * d * d)),
        Mutant("mlp_ratio_2", "wrong constant", "MLP ratio 2: 8d² + 11d per block", _total_with(lambda d: ns.per_layer_params(d, 2))),
        Mutant("no_embeddings", "dropped term", "L(12d² + 13d) only, embeddings dropped",
               {"per_layer": ns.per_layer_params, "total": _no_embeddings}),
        Mutant("untied_unembedding", "extra term", "an untied V×d output matrix counted on top",
               {"per_layer": ns.per_layer_params, "total": _untied_head}),
    ),
    notes="Vocabularies/contexts used: BERT 30522/512 (+2 token types, pooler), GPT-2 XL 50257/1024 (25 heads; the lecture notes "
          "prints '?'), Megatron-LM 51200 (GPT-2 BPE padded)/1024, Turing-NLG 50257/1024, GPT-3 50257/2048. "
          "GPT-2's '1.5B' is a truncation of 1.558B.",
))
