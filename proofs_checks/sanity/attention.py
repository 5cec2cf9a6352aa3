"""``tverify check attention --module FILE.py:NAME``: black-box properties of your self-attention.

The object is used as a map ``obj(x)``: ``x`` of shape ``(batch, T, D)`` (float64 unless ``--dtype``)
to ``(batch, T, D)``, or to ``(out, weights)`` like ``nn.MultiheadAttention``. A class or a factory
(a function with no required arguments) is instantiated first, with ``dim=D`` when ``--dim`` is
given. Modules are deep-copied and cast to the probe dtype; your object is not modified.

Properties (each with its measured error and a tolerance: float64 rounding scaled by the sizes,
written next to it; the property computations live in :mod:`numerics.attention_probe`):

* ``finite_output``; ``weights_are_distributions`` (when it returns or stores its weights);
* ``convex_combination_of_values``: output rows are convex combinations of the value rows (single
  head; the value rows are the outputs on one-token inputs, the weights recovered by least squares);
* ``matches_sdpa``: agreement with ``torch.nn.functional.scaled_dot_product_attention`` on your
  own weights (q/k/v/out projections or an ``nn.MultiheadAttention`` found by name: "declared"),
  or on a single-head attention fitted by least squares from probes ("fitted");
* ``scale_1_over_sqrt_dk`` (declared weights only: the best-fitting logit scale times √d_k is 1);
* ``causal_no_future_leak`` (``--causal``): perturbing token ``j`` moves no output ``t < j``;
* ``permutation_equivariance`` (not causal, no ``--positional``);
* ``stable_at_extreme_logits``: finite outputs at logits of ±700 and ±10⁴;
* ``dtype_and_device_preserved``: the other float dtype (and the device) in, the same out.

Exit codes: 0 every applicable property holds; 1 one fails (named in the verdict; NaN outputs are
such a finding); 2 bad input, one line: a missing file or name, an object that raises on the probe
input (its exception type and message), an output of the wrong shape, dtype or device.
"""

from __future__ import annotations

import copy
import inspect
import math
from typing import Any

import click

from proofs_checks.options import UsageError, require_device
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          properties_verdict, report_option)

__all__ = ["command", "run_attention", "instantiate", "model_dim"]

#: Probe sequences per size mode.
BATCH = {"quick": 2, "default": 4, "full": 8}
_DIM_ATTRS = ("embed_dim", "dim", "d_model", "hidden_size", "n_embd", "model_dim", "emb_dim", "d", "embedding_dim")


def _describe(exc: BaseException) -> str:
    from proofs_checks.sanity._loader import describe_exception

    return describe_exception(exc)


def instantiate(obj: Any, dim: int | None, label: str = "--module") -> Any:
    """A class, or a function taking no required arguments (a factory), is called with ``dim=D``
    when ``dim`` is given (else with no arguments); anything else is returned as it is."""
    is_factory = inspect.isclass(obj)
    if not is_factory and inspect.isfunction(obj):
        try:
            params = inspect.signature(obj).parameters.values()
        except (TypeError, ValueError):  # pragma: no cover - builtins
            params = []
        required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        is_factory = not required
    if not is_factory:
        return obj
    name = getattr(obj, "__name__", repr(obj))
    try:
        inst = obj(dim=dim) if dim is not None else obj()
    except Exception as exc:
        how = f"{name}(dim={dim})" if dim is not None else f"{name}()"
        raise UsageError(f"{label}: {how} raised {_describe(exc)}"
                         + ("" if dim is not None else " (give --dim D to pass dim=D)")) from None
    if not callable(inst):
        raise UsageError(f"{label}: {name}() returned a {type(inst).__name__}, which is not callable")
    return inst


def model_dim(obj: Any) -> int | None:
    """``D`` as the object declares it (``embed_dim``, ``dim``, ``d_model``, ... or the input width
    of its first ``nn.Linear``); ``None`` when it does not say."""
    import torch

    for a in _DIM_ATTRS:
        v = getattr(obj, a, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            return v
    if isinstance(obj, torch.nn.Module):
        for m in obj.modules():
            if isinstance(m, torch.nn.Linear):
                return int(m.in_features)
            if isinstance(m, torch.nn.MultiheadAttention):
                return int(m.embed_dim)
    return None


def run_attention(obj: Any, *, causal: bool = False, heads: int | None = None, dim: int | None = None,
                  dtype: str = "float64", device: str = "cpu", positional: bool = False, seed: int = 0,
                  mode: str = "default", label: str = "--module", name: str | None = None) -> SanityResult:
    """The properties of ``obj`` (see the module docstring) as a :class:`SanityResult`. Raises
    :class:`~proofs_checks.options.UsageError` (one line) for input the check cannot use."""
    import torch

    from numerics import attention_probe as ap
    from numerics.torch_utils import generator

    if dtype not in ("float64", "float32"):
        raise UsageError(f"--dtype: must be float64 or float32, got {dtype!r}")
    if heads is not None and heads < 1:
        raise UsageError(f"--heads: must be ≥ 1, got {heads}")
    if dim is not None and dim < 1:
        raise UsageError(f"--dim: must be ≥ 1, got {dim}")
    name = name or getattr(obj, "__name__", type(obj).__name__)
    obj = instantiate(obj, dim, label)
    if not callable(obj):
        raise UsageError(f"{label}: {name} is a {type(obj).__name__}, not a callable attention")
    D = dim or model_dim(obj)
    if D is None:
        raise UsageError(f"{label}: cannot tell the model dimension D of {name} (no embed_dim/dim/d_model attribute, "
                         "no nn.Linear): give --dim D")
    tdt = torch.float64 if dtype == "float64" else torch.float32
    other = torch.float32 if tdt == torch.float64 else torch.float64
    f = obj
    if isinstance(obj, torch.nn.Module):
        try:
            f = copy.deepcopy(obj).to(dtype=tdt, device=device).eval()
        except Exception as exc:
            raise UsageError(f"{label}: cannot copy {name} to {dtype} on {device}: {_describe(exc)}") from None
    H_hint = heads or ap.head_count_hint(obj)
    T = max(2, min(8, D // (H_hint or 1)))
    B = BATCH.get(mode, 4)
    gen = generator(seed)
    x64 = torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    x = x64.to(dtype=tdt, device=device)
    shape = f"({B}, {T}, {D}) {dtype} input on {device}"
    try:
        out, returned_w = ap.call(f, x)
    except Exception as exc:
        raise UsageError(f"{label}: {name} raised {_describe(exc)} on a {shape}") from None
    if not isinstance(out, torch.Tensor):
        raise UsageError(f"{label}: {name} returned {type(out).__name__}, expected a tensor of shape ({B}, {T}, {D})")
    if tuple(out.shape) != (B, T, D):
        raise UsageError(f"{label}: {name} returned shape {tuple(out.shape)} for a {shape}; expected ({B}, {T}, {D}) "
                         "(batch, T, D)")
    if out.dtype != tdt:
        raise UsageError(f"{label}: {name} returned {str(out.dtype).replace('torch.', '')} for a {shape}; expected "
                         f"{dtype} (cast inside the module?)")
    if out.device != x.device:
        raise UsageError(f"{label}: {name} returned a tensor on {out.device} for a {shape}")

    props: list = [ap.prop_finite(out)]
    info = {"D": D, "T": T, "batch": B, "dtype": dtype, "device": device, "causal": causal, "positional": positional,
            "seed": seed}
    figures = {}
    if props[0].status == "fail":
        props.append(ap.Property("remaining_properties", "skip", None, None, "",
                                 "not measured: the outputs on the probe are not finite"))
    else:
        w, where = ap.exposed_weights(f, x, returned_w)
        if w is not None:
            props.append(ap.prop_weights_distribution(w, where, causal=causal))
        # declared mapping: the candidate (orientation, heads) that agrees best with the object
        mapping, m_err = None, float("inf")
        for m in ap.find_mapping(f, D, heads or H_hint):
            try:
                with torch.no_grad():
                    e = ap._rel(out, ap.reference_attention(x, m, causal=causal).to(out.dtype))
            except Exception:  # a candidate of inconsistent shapes
                continue
            if e < m_err or mapping is None:
                mapping, m_err = m, e
        H = mapping.heads if mapping is not None else (H_hint or 1)
        info.update({"heads": H, "mapping": mapping.source if mapping is not None else None})
        L = ap.max_logit(x64.to(device), mapping) if mapping is not None else 1.0
        P = None
        if positional:
            props.append(ap.Property("convex_combination_of_values", "skip", None, None, "",
                                     "--positional: a one-token input is not a value row when positions are added"))
        elif H == 1:
            pc, P = ap.prop_convex_combination(f, x, out, causal=causal)
            if H_hint is None and mapping is None and pc.status != "skip":
                pc.detail += " (assumed single-head: give --heads H for a multi-head module)"
            props.append(pc)
        else:
            props.append(ap.Property("convex_combination_of_values", "skip", None, None, "",
                                     f"{H} heads: each head's combination is not separable from the outside"
                                     + ("" if w is None else " (the exposed weights are checked above)")))
        if P is not None and mapping is None:
            L = max(1.0, float(-torch.log(P.double().clamp_min(1e-300)).max())) if bool((P > 0).all()) else 1.0
        if w is not None or P is not None:
            A = (w[0].mean(0) if w is not None else P[0]).double().cpu()

            def _heat(A=A):
                import matplotlib.pyplot as plt

                fig, ax = plt.subplots(figsize=(4, 3.5))
                im = ax.imshow(A.numpy(), cmap="viridis", vmin=0)
                ax.set_xlabel("key s")
                ax.set_ylabel("query t")
                ax.set_title("attention weights (first probe)" + (" exposed" if w is not None else " recovered"))
                fig.colorbar(im, ax=ax)
                return fig

            figures["attention_weights"] = _heat
        # agreement with SDPA
        if mapping is not None:
            props.append(ap.prop_reference_agreement(
                f, x, out, lambda z: ap.reference_attention(z, mapping, causal=causal), L=L,
                how=f"{mapping.source}; SDPA{' is_causal' if causal else ''} on the same weights"))
            props.append(ap.prop_scale(f, x, out, mapping, causal=causal))
        else:
            why = None
            if H != 1:
                why = f"{H} heads and no q/k/v projections found by name: nothing to map or fit"
            elif positional:
                why = "--positional: the fitted model has no positions"
            elif P is None:
                why = "single-head weights not recoverable (see convex_combination_of_values)"
            ref = None
            if why is None:
                n_pairs = T * (T - 1) // 2 if causal else T * (T - 1)
                nfit = max(B, math.ceil(2 * (D * D + D) / max(n_pairs, 1)))
                xf = torch.randn(nfit, T, D, generator=gen, dtype=torch.float64).to(dtype=tdt, device=device)
                of, _ = ap.call(f, xf)
                pcf, Pf = ap.prop_convex_combination(f, xf, of, causal=causal)
                if Pf is None:
                    why = "weights not recoverable on the fitting probes"
                else:
                    ref, why, cond = ap.fit_single_head(f, xf, Pf, causal=causal, gen=gen)
            if ref is not None:
                props.append(ap.prop_reference_agreement(
                    f, x, out, ref, L=L, extra_tol=max(1.0, cond) * math.sqrt(D * D + D),
                    how=f"fitted: single-head SDPA{' is_causal' if causal else ''} fitted by least squares on {nfit} "
                        f"probe sequences, compared on fresh ones"))
            else:
                props.append(ap.Property("matches_sdpa", "fail" if "not a softmax" in (why or "") else "skip",
                                         float("inf") if "not a softmax" in (why or "") else None,
                                         None, "", why or ""))
            props.append(ap.Property("scale_1_over_sqrt_dk", "skip", None, None, "",
                                     "no declared q/k projections: the scale is absorbed in the fitted logits"))
        if causal:
            props.append(ap.prop_causal(f, x, out, gen, L=L))
        if causal or positional:
            props.append(ap.Property("permutation_equivariance", "skip", None, None, "",
                                     "causal mask" if causal else "--positional"))
        else:
            props.append(ap.prop_permutation(f, x, out, gen, L=L))
        props.append(ap.prop_extreme_logits(f, x, mapping))
        props.append(ap.prop_dtype_device(f, obj, x, out, other=other, device=device, L=L))

    rows = [p.to_json() for p in props]
    verdict = properties_verdict(rows, f"attention {name}")
    lines = [f"attention {name}: D = {D}, probe {B} × T = {T}, {info.get('heads', H_hint or 1)} head(s), {dtype} on "
             f"{device}, {'causal' if causal else 'not causal'}, seed {seed}",
             f"weights: {info.get('mapping') or 'no projections found by name (fitted where possible)'}"]
    doc = {"check": "attention", "object": name, "inputs": info}
    return SanityResult("attention", doc, verdict, rows, lines, figures)


@click.command("attention")
@click.option("--module", "module_spec", required=True, metavar="FILE.py:NAME",
              help="Your attention: FILE.py:NAME or package.module:NAME (a module, class, factory or function).")
@click.option("--causal", is_flag=True, help="It is causal: also check that no output sees a later token.")
@click.option("--heads", type=click.IntRange(min=1), default=None, help="Number of heads (default: read from the object).")
@click.option("--dim", type=click.IntRange(min=1), default=None,
              help="Model dimension D; a class or factory is then called with dim=D.")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
              help="Dtype of the probe inputs.")
@click.option("--positional", is_flag=True, help="It adds positional information on purpose: skip permutation "
                                                 "equivariance and the one-token value rows.")
@report_option
@check_options
def command(module_spec, causal, heads, dim, dtype, positional, report_dir, seed, device, mode, json_path, max_memory,
            no_progress):
    """Black-box properties of your self-attention (convex combinations of values, agreement with
    torch's scaled_dot_product_attention, the 1/√d_k scale, causal leakage, permutation
    equivariance, stability at logits ±700, dtype/device): ok (exit 0) or the violated properties
    named (exit 1).

    \b
    Examples:
      tverify check attention --module my_attn.py:CausalSelfAttention --causal --dim 16
      tverify check attention --module my_attn.py:make_attention --heads 4 --json out.json --report attn-report
    """
    check_json_target(json_path)
    check_report_dir(report_dir, json_path)
    try:
        require_device(device, False)
    except UsageError:
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use --device cpu)") from None
    from proofs_checks.sanity._loader import load_object

    obj = load_object(module_spec, "--module")
    name = module_spec.rpartition(":")[2]
    result = run_attention(obj, causal=causal, heads=heads, dim=dim, dtype=dtype, device=device, positional=positional,
                           seed=seed, mode=mode, name=name)
    result.doc["inputs"]["module"] = module_spec
    finish(result, json_path, report_dir)
