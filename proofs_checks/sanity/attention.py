"""``tverify check attention --module FILE.py:NAME``: properties of your self-attention.

The object is used as a map ``obj(x)``: ``x`` of shape ``(batch, T, D)`` (float64 unless
``--dtype``) to ``(batch, T, D)``, or to ``(out, weights, ...)`` like ``nn.MultiheadAttention``.
A class or a factory (a function with no required arguments) is instantiated first, with
``dim=D`` when ``--dim`` is given, with torch's generator seeded by ``--seed`` (the weights it
draws are reproducible). Modules are deep-copied, cast to the probe dtype and put in eval mode
(every property, ``dtype_and_device_preserved``'s float32 copy included, runs on an eval-mode
copy); your object is not modified, and every call gets a fresh copy of its input.

The reference is softmax attention on **your own weights** (found in the layouts of torch, timm,
Hugging Face and x-transformers by :mod:`numerics.attention_mapping`, or declared by a mapping hook:
``--mapping FILE.py:fn`` or a ``tverify_mapping()`` method returning ``{"q", "k", "v", "o",
"heads", "kv_heads"}``) with the **declared structure**: ``--causal``, ``--window W`` or ``L,R``,
``--positional none|learned|sinusoidal|rope|alibi`` (``--rope-base``, ``--rope-dims``,
``--rope-convention``), ``--softcap C``, ``--qk-norm rms|layer`` (the module's ``q_norm``/``k_norm``
or the hook's), ``--kv-grouping hf|tiled`` (:mod:`numerics.attention_reference`). What the module's
configuration carries (a Hugging Face ``config``'s ``rope_theta``, ``sliding_window``, ...;
x-transformers attributes: :mod:`proofs_checks.sanity._modconfig`) fills in what the flags leave out
and is printed in one line; a flag given wins over it (the difference is reported and, for a window,
measured; ``--ignore-config`` reads nothing). Every flag is a field of one Declaration
(:mod:`proofs_checks.sanity.attention_declaration`), validated once before the module is imported.

Properties (each with its measured error, its tolerance and the rule behind it; *central* ones must
have run and held for ``ok``; :mod:`numerics.attention_probe` computes them), over several sequence
lengths (``1 … 257``, ``1025`` with ``--full``, or ``--seq-len``), at unit and at large logits:

* first, the causes that would otherwise pass for a leak or a mismatch (central; when one fails the
  other properties are not judged and the verdict names it, with a hint): ``input_unchanged`` (the
  module does not write into its input), ``weights_unchanged_by_calls`` (a call changing the
  module's parameters or buffers *and* its next output; a cache that leaves the output alone is
  fine), ``deterministic`` (two calls on the same input agree within rounding),
  ``declared_weights_finite`` (the mapping's weights, e.g. a hook returning NaN);
* central: ``finite_output``, ``matches_reference`` (declared weights, or a single-head fit),
  ``scale_1_over_sqrt_dk`` (declared weights), and the declared structure:
  ``causal_no_future_leak``, ``prefix_consistency`` (causal), ``window_respected`` (window),
  ``precision_as_declared``;
* ``gradients_match_reference`` (input and parameter gradients against the reference's autograd),
  ``batch_independence``, ``batch_size_independence``, ``permutation_equivariance`` (no mask, window
  or positions),
  ``convex_combination_of_values`` (one head), ``weights_are_distributions`` (weights exposed),
  ``stable_at_extreme_logits`` (±700, ±10⁴), ``dtype_and_device_preserved``,
  ``runs_at_every_length``.

Tolerance by precision (FlashAttention's rule): the error against the float64 reference may be 2×
(gradients 3×) the error of the plain reference computed in the module's working precision, plus
the float64 reference's rounding bound; the precision is ``--compute-dtype``, else the input's (never
found by probing: a module computing below it fails ``precision_as_declared``). The structural
properties (no future leak, window, key padding, batch independence) are exact: their tolerance is
the module's own run-to-run difference (:mod:`numerics.attention_structural`).

Verdicts and exit codes: ``ok`` (0) every central property ran and held and none failed;
``mismatch`` (1) a property failed (named, with a hint at the likely cause); ``inconclusive`` (3) a
central property could not run (the verdict names what would decide it: a flag or the mapping
hook); 2: bad input, one line. A property the module cannot run (its backward raises, as
FlexAttention's on CPU; an unsupported dtype) is skipped as *not available on this device* with the
exception, and the verdict line names it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import click

from proofs_checks.options import UsageError, require_device
from proofs_checks.sanity import attention_stages as S
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          report_option, sanity_payload, sanity_rebuild, timeout_option)
from proofs_checks.sanity.attention_declaration import (KV_GROUPINGS, POSITIONAL, QK_NORMS, Declaration,
                                                        build_declaration, parse_lengths, parse_window)
from proofs_checks.sanity.attention_load import _quiet_flex_warning, _short, instantiate, model_dim
from proofs_checks.sanity.attention_render import render
from proofs_checks.sanity.attention_verdict import attention_verdict
from proofs_checks.sanity.attention_weights import choose_mapping, find_weights

__all__ = ["command", "run_attention", "instantiate", "model_dim", "attention_verdict", "parse_window",
           "parse_lengths"]



#: --against with --mask-convention: the differential mode calls both implementations as obj(x), so the second one was
#: called without the mask the first takes and its TypeError blamed on it (hostile pass 55a F6): refused before the run
AGAINST_WITH_MASK = ("--against goes without --mask-convention: the differential mode calls both implementations on "
                     "the same unmasked probes, obj(x); check each implementation with --mask-convention on its own")

@_quiet_flex_warning
def run_attention(obj: Any, *, causal: bool = False, heads: int | None = None, dim: int | None = None,
                  dtype: str = "float64", device: str = "cpu", positional: str = "none", seed: int = 0,
                  mode: str = "default", label: str = "--module", name: str | None = None,
                  window: str | tuple | None = None, softcap: float | None = None, rope_base: float | None = None,
                  rope_dims: int | None = None, rope_convention: str | None = None, kv_heads: int | None = None,
                  compute_dtype: str | None = None, seq_len: str | list | None = None, mapping: Any = None,
                  against: Any = None, max_memory: float | None = None, progress: bool = False,
                  mask_convention: str | None = None, qk_norm: str | None = None,
                  kv_grouping: str | None = None, ignore_config: bool = False, scale: float | None = None,
                  declaration: Declaration | None = None) -> SanityResult:
    """The properties of ``obj`` (see the module docstring) as a :class:`SanityResult`. Raises
    :class:`~proofs_checks.options.UsageError` (one line) for input the check cannot use.
    ``mapping`` is a callable taking the (copied) module and returning the weights dict, or that
    dict; ``against`` a second implementation (differential mode). The keywords are the fields of
    the :class:`~proofs_checks.sanity.attention_declaration.Declaration` (or ``declaration``, one
    already built), validated by :func:`~proofs_checks.sanity.attention_declaration.build_declaration`
    before ``obj`` is touched. What the module's configuration carries
    (:mod:`proofs_checks.sanity._modconfig`) fills the values not given, unless ``ignore_config``; a
    given value wins over it.

    The pipeline: load → declaration completed by the configuration → module prepared → weights →
    probes → mapping chosen → properties → verdict, hints verified → render
    (:mod:`proofs_checks.sanity.attention_stages`)."""
    if not isinstance(progress, bool) and type(progress).__name__ != "bool_":
        raise UsageError(f"progress: must be True or False, got {progress!r}")
    decl = declaration if declaration is not None else build_declaration(dict(
        causal=causal, window=window, positional=positional, rope_base=rope_base, rope_dims=rope_dims,
        rope_convention=rope_convention, heads=heads, kv_heads=kv_heads, kv_grouping=kv_grouping, softcap=softcap,
        qk_norm=qk_norm, scale=scale, mask_convention=mask_convention, compute_dtype=compute_dtype, dtype=dtype,
        seq_len=seq_len, mode=mode, seed=seed, device=device, max_memory=max_memory, dim=dim,
        ignore_config=ignore_config))
    if against is not None and decl.mask_convention is not None:
        raise UsageError(AGAINST_WITH_MASK)
    window_text = None if window is None else (",".join(map(str, window)) if isinstance(window, (tuple, list))
                                               else str(window))  # as the user wrote it (for the lines)
    name = name or getattr(obj, "__name__", type(obj).__name__)
    from numerics.torch_utils import precision_for_a_check

    with precision_for_a_check():  # (what the module left for its calls, this process's own for the check's)
        return _pipeline(obj, decl, label, name, window_text, mapping, against, progress)


def _pipeline(obj: Any, decl: Declaration, label: str, name: str, window_text: str | None, mapping: Any,
              against: Any, progress: bool) -> SanityResult:
    """:func:`run_attention`'s stages, the declaration validated."""
    obj = S.load(obj, decl, label, name)
    done = S.complete(obj, decl, label, window_text)
    ld = S.prepare(obj, decl, done, label, name)
    weights = find_weights(ld.f, ld.D, done.decl, done, mapping, label, name)  # the q/k norms read too
    st = done.structure(decl)
    pr = S.probe_outputs(ld, decl, st, weights, done.read, label, progress)
    pr.probe.unmodelled = list(done.unmodelled)  # read features no declaration models: no precision is named for them
    pr.probe.read_scaling = done.scaling[:2] if done.scaling else None  # (value, source): names a scale it explains
    ch = choose_mapping(pr.probe, weights, st, done.decl, ld.f, ld.D)  # the RoPE convention read too
    if against is not None:
        S.attach_against(pr.probe, against, decl, ld.tdt, module=obj)
    from proofs_checks.sanity.attention_props import evaluate  # torch: the check's process only, not the CLI's

    ev = evaluate(pr, ld, decl, done, weights, ch, against, label)
    return render(pr, ld, decl, done, weights, ch, ev, window_text is not None)


@click.command("attention")
@click.option("--module", "module_spec", required=True, metavar="FILE.py:NAME",
              help="Your attention: FILE.py:NAME or package.module:NAME (a module, class, factory or function).")
@click.option("--causal", is_flag=True, help="It is causal: no output may see a later token (default: the module's "
                                               "is_causal / causal when it is True).")
@click.option("--window", default=None, metavar="W|L,R",
              help="Sliding window: W (with --causal: the W most recent keys, the query's own included, as Hugging "
                   "Face's sliding_window) or L,R (keys t−L … t+R, as FlashAttention's window_size); default: the "
                   "module's sliding_window for its layer, if any.")
@click.option("--positional", type=click.Choice(POSITIONAL), default="none", show_default=True,
              help="Positional scheme the reference includes (learned: the module's own table, found by name).")
@click.option("--rope-base", type=float, default=None,
              help="RoPE base (--positional rope; default: the base its configuration gives, e.g. config.rope_theta, "
                   "else 10000).")
@click.option("--rope-dims", type=int, default=None,
              help="Rotated dimensions per head (default: the module's partial_rotary_factor / rotary_pct × head_dim, "
                   "else all of d_k).")
@click.option("--rope-convention", type=click.Choice(["half", "interleaved"]), default=None,
              help="RoPE pairs: rotated halves (Hugging Face, x-transformers) or interleaved (RoFormer, "
                   "rotary-embedding-torch); default: the module's (GPT-J, CodeGen, Cohere: interleaved), else the one that fits.")
@click.option("--softcap", type=float, default=None, metavar="C",
              help="Logit softcapping C·tanh(s/C) before the mask (Gemma 2, x-transformers; default: the module's "
                   "attn_logit_softcapping / logit_softclamp_value).")
@click.option("--qk-norm", type=click.Choice(QK_NORMS), default=None,
              help="A norm on q and k per head before RoPE (Gemma 3, OLMo 2, Qwen3): rms (RMSNorm) or layer "
                   "(LayerNorm); the weights are the module's q_norm/k_norm (found by name) or the mapping hook's; default: "
                   "the kind measured on the module's q_norm/k_norm, if any.")
@click.option("--kv-grouping", type=click.Choice(KV_GROUPINGS), default=None,
              help="Grouped-query attention: query head h uses key/value head h // (H/K) (hf, as Hugging Face's "
                   "repeat_kv) or h % K (tiled); default: the one that fits (always printed).")
@click.option("--heads", type=int, default=None, help="Number of query heads (default: read from the object).")
@click.option("--kv-heads", type=int, default=None, help="Key/value heads (grouped-query attention; "
                                                                              "default: read from the object).")
@click.option("--ignore-config", is_flag=True,
              help="Do not read the module's configuration (Hugging Face config, x-transformers attributes): only the "
                   "flags declare the structure.")
@click.option("--scale", type=float, default=None, metavar="S",
              help="The factor the logits q·k are multiplied by, declared instead of 1/√d_k (GPT-2's "
                   "scale_attn_by_inverse_layer_idx, Granite's attention_multiplier, T5's unscaled logits: 1).")
@click.option("--dim", type=int, default=None,
              help="Model dimension D; a class or factory is then called with dim=D.")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
              help="Dtype of the probe inputs (and of the module's copy).")
@click.option("--compute-dtype", type=click.Choice(["float64", "float32", "bfloat16", "float16"]), default=None,
              help="The precision the module computes in (default: the input's, --dtype): a module computing below it "
                   "fails precision_as_declared.")
@click.option("--seq-len", default=None, metavar="T1,T2,...", help="Probe lengths (default: 1,2,5,17,64,113,257; "
                                                                    "--quick up to 33, --full up to 1025).")
@click.option("--mapping", "mapping_spec", default=None, metavar="FILE.py:fn",
              help="A function fn(module) returning {'q', 'k', 'v', 'o', 'heads', 'kv_heads'} (weights (out, in) as "
                   "nn.Linear, (weight, bias) pairs or projection modules): the reference's weights.")
@click.option("--mask-convention", type=click.Choice(["keep", "drop", "additive"]), default=None,
              help="The module takes (x, mask) with a key-padding mask (batch, T): keep (True attends), drop (True "
                   "is padding, as torch's key_padding_mask) or additive (0 / −inf); also checks padded keys and "
                   "fully masked rows.")
@click.option("--against", "against_spec", default=None, metavar="FILE.py:NAME",
              help="Differential mode: compare with a second implementation on the same probes, forward and backward.")
@report_option
@timeout_option
@check_options
def command(module_spec, causal, window, positional, rope_base, rope_dims, rope_convention, softcap, qk_norm,
            kv_grouping, heads, kv_heads, ignore_config, scale,
            dim, dtype, compute_dtype, seq_len, mapping_spec, mask_convention, against_spec, report_dir, timeout, seed,
            device, mode, json_path, max_memory, no_progress):
    """Properties of your self-attention against softmax attention on its own weights with the
    declared structure (causal, window, RoPE/ALiBi/positions, softcap), over several sequence
    lengths, forward and backward, with tolerances by precision: ok (exit 0), the violated
    properties named (exit 1), or inconclusive (exit 3) when a central property cannot run.

    \b
    Examples:
      tverify check attention --module examples/my_attn.py:MyAttention --causal
      tverify check attention --module examples/llama_block.py:make --causal --positional rope
        --kv-heads 2
      tverify check attention --module examples/mine.py:Attn --mapping examples/mine.py:weights
        --report attn-report
      tverify check attention --module examples/fused.py:Fast --against examples/fused.py:Reference
        --causal
    """
    check_report_dir(report_dir, json_path)  # first: a --json inside --report is refused for that reason
    check_json_target(json_path)
    try:
        require_device(device, False)
    except UsageError:
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use --device cpu)") from None
    # the declaration, validated once, before the module is imported (the function the API and the fixture use)
    decl_values = dict(causal=causal, window=window, positional=positional, rope_base=rope_base, rope_dims=rope_dims,
                       rope_convention=rope_convention, heads=heads, kv_heads=kv_heads, kv_grouping=kv_grouping,
                       softcap=softcap, qk_norm=qk_norm, scale=scale, mask_convention=mask_convention,
                       compute_dtype=compute_dtype, dtype=dtype, seq_len=seq_len, mode=mode, seed=seed, device=device,
                       max_memory=max_memory, dim=dim, ignore_config=ignore_config)
    decl = build_declaration(decl_values)
    lengths = list(decl.seq_len) if decl.seq_len else None
    from proofs_checks.sanity._loader import _split

    _split(module_spec, "--module")
    for spec, opt in ((mapping_spec, "--mapping"), (against_spec, "--against")):
        if spec:
            _split(spec, opt)
    if against_spec and mask_convention is not None:
        raise UsageError(AGAINST_WITH_MASK)
    if against_spec and _same_object(module_spec, against_spec):  # 0 by construction (hostile pass 7, F7)
        raise UsageError(f"--against {against_spec}: the module itself (same file and name as --module): the "
                         "differential comparison could not reject anything; give a second implementation")
    name = module_spec.rpartition(":")[2]
    kwargs = dict(causal=causal, heads=heads, dim=dim, dtype=dtype, device=device, positional=positional, seed=seed,
                  mode=mode, name=name, window=window, softcap=softcap,
                  rope_base=rope_base, ignore_config=ignore_config,
                  rope_dims=rope_dims, rope_convention=rope_convention, kv_heads=kv_heads, compute_dtype=compute_dtype,
                  seq_len=lengths, max_memory=max_memory, progress=not no_progress, mask_convention=mask_convention,
                  qk_norm=qk_norm, kv_grouping=kv_grouping, scale=scale)
    from proofs_checks.sanity import _isolate

    payload = _isolate.run_isolated(CHILD_TASK, {"kwargs": kwargs, "module_spec": module_spec,
                                                  "mapping_spec": mapping_spec, "against_spec": against_spec},
                                    label="/".join(["--module"] + (["--mapping"] if mapping_spec else [])
                                                   + (["--against"] if against_spec else [])),
                                    what=f"check attention {name}", timeout=timeout,
                                    max_memory=max_memory, progress=not no_progress, figures=bool(report_dir))
    _isolate.finish_rebuilt(payload, rebuild, finish, json_path, report_dir)


def _same_object(a: str, b: str) -> bool:
    """Whether two ``FILE.py:NAME`` / ``package.module:NAME`` specs name the same object (the same file,
    through any path or link, and the same name)."""
    import os

    from proofs_checks.sanity._loader import _split

    (wa, na), (wb, nb) = _split(a, "--module"), _split(b, "--against")
    if na != nb:
        return False
    if wa.endswith(".py") and wb.endswith(".py"):
        fa, fb = os.path.expanduser(wa), os.path.expanduser(wb)
        try:  # the same file: through a symbolic or a hard link too (hostile pass 8, F4)
            return os.path.samefile(fa, fb)
        except OSError:  # one is missing: the loader names it
            return os.path.realpath(fa) == os.path.realpath(fb)
    return wa == wb


def _not_itself(module_spec: str, against_spec: str, target: Any, against: Any) -> None:
    """In the child, both loaded: ``--against`` naming the module itself is refused where the specs' spelling did not
    show it — the same object under another name (``same = inst``), or the same name in the same file reached as an
    importable module (``base:good`` for ``m/base.py:good``, its folder on the path): compared, they were "ok" with an
    error of 0 (hostile pass 37b F2, F2b)."""
    import os
    import sys

    from proofs_checks.sanity._loader import _split

    def file_of(spec: str, option: str) -> str | None:
        where, _ = _split(spec, option)
        if where.endswith(".py") or "/" in where or "\\" in where:
            return os.path.realpath(os.path.expanduser(where))
        f = getattr(sys.modules.get(where), "__file__", None)
        return os.path.realpath(f) if f else None

    same = against is target or getattr(against, "__self__", None) is target  # (its bound forward too: 40b F2b)
    if not same and _split(module_spec, "--module")[1] == _split(against_spec, "--against")[1]:
        fa, fb = file_of(module_spec, "--module"), file_of(against_spec, "--against")
        same = fa is not None and fb is not None and (fa == fb or _samefile(fa, fb))
    if same:
        raise UsageError(f"--against {against_spec}: the module itself (the same object, or the same file and name as "
                         "--module): the differential comparison could not reject anything; give a second "
                         "implementation")


def _samefile(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------
# in the check's own process (proofs_checks.sanity._isolate)

CHILD_TASK = "proofs_checks.sanity.attention:child_task"


def _under(hook, store: dict):
    """``hook`` (a ``--mapping`` function, or the API's ``mapping=`` dict) called with its own torch settings
    (:func:`numerics.torch_utils.own_settings`), and so are the ``q_transform``/``k_transform`` it gives (41b F4)."""
    import functools

    from numerics.torch_utils import own_settings

    def own(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            with own_settings(store):
                return fn(*args, **kwargs)

        return call

    def transforms_own(out):
        if not isinstance(out, dict):
            return out
        return {k: own(v) if k in ("q_transform", "k_transform") and callable(v) else v for k, v in out.items()}

    if not callable(hook):
        return transforms_own(hook)

    @functools.wraps(hook)
    def call(*args, **kwargs):
        with own_settings(store):
            out = hook(*args, **kwargs)
        return transforms_own(out)

    return call


def child_task(req: dict, obj: Any, arrays: dict) -> dict:
    """In the child: load the ``--module``/``--mapping``/``--against`` specs (or take the API's
    objects), run :func:`run_attention`, return the payload."""
    from proofs_checks.sanity._loader import load_object as _load

    base = os.getcwd()  # (the folder the specs are relative to, before the module's import can change it: 46a F5)

    def load_object(spec, option):
        try:
            return _load(spec, option, base)
        except UsageError as exc:  # an import that raised: the user's exception text, cut to one short line
            msg = " ".join(exc.format_message().split())
            head, sep, text = msg.partition(" raised ")
            if len(text if sep else msg) <= 300:
                raise
            raise type(exc)(head + sep + _short(text) if sep else _short(msg, 600)) from None

    kw = dict(req.get("kwargs") or {})
    if isinstance(kw.get("window"), list):
        kw["window"] = tuple(kw["window"])
    if obj is not None:  # the Python API: the caller's objects
        target = obj["obj"]
        kw.update(obj.get("kwargs") or {})
        if kw.get("mapping") is not None:  # (its calls' settings its own, as a --mapping file's: 41b F6)
            kw["mapping"] = _under(kw["mapping"], {})
    else:
        target = load_object(req["module_spec"], "--module")
        if req.get("mapping_spec"):
            from numerics.torch_utils import own_settings

            with own_settings({}) as store:  # (what its import or call leaves is its own, not the module's: 40b F1c)
                hook = load_object(req["mapping_spec"], "--mapping")
            if not callable(hook):
                raise UsageError(f"--mapping: {req['mapping_spec']} is a {type(hook).__name__}, not a function")
            kw["mapping"] = _under(hook, store)
        if req.get("against_spec"):
            from numerics.torch_utils import SETTINGS_OF, own_settings

            with own_settings({}) as store:  # (what its import leaves is its own, not the checked module's: 40b F1)
                kw["against"] = load_object(req["against_spec"], "--against")
            with contextlib.suppress(TypeError):
                SETTINGS_OF[kw["against"]] = store
            _not_itself(req["module_spec"], req["against_spec"], target, kw["against"])
    from numerics.attention_transforms import TransformFailed

    try:
        result = run_attention(target, **kw)
    except TransformFailed as exc:  # the hook's own transform, on a later call: the user's code, one line
        raise UsageError(f"{'--mapping' if obj is None else 'mapping'}: {exc}") from None
    if req.get("module_spec"):
        result.doc["inputs"]["module"] = req["module_spec"]
    return sanity_payload(result, req, f"attention {result.doc.get('object')}")


def rebuild(payload: dict) -> SanityResult:
    """In the parent: the result of :func:`child_task`'s payload, its verdict recomputed here."""
    verdict = attention_verdict(payload["properties"], payload["subject"], list(payload["doc"].get("hints") or []))
    return sanity_rebuild(payload, verdict)
