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
and is printed in one line; a flag contradicting it is a usage error (``--ignore-config`` reads nothing).

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
  ``causal_no_future_leak``, ``prefix_consistency`` (causal), ``window_respected`` (window);
* ``gradients_match_reference`` (input and parameter gradients against the reference's autograd),
  ``batch_independence``, ``permutation_equivariance`` (no mask, window or positions),
  ``convex_combination_of_values`` (one head), ``weights_are_distributions`` (weights exposed),
  ``stable_at_extreme_logits`` (±700, ±10⁴), ``dtype_and_device_preserved``,
  ``runs_at_every_length``.

Tolerance by precision (FlashAttention's rule): the error against the float64 reference may be 2×
(gradients 3×) the error of the plain reference computed in the module's working precision, plus
the float64 reference's rounding bound; the working precision is the probe dtype, float32 when a
float64 probe meets only the float32 rule (found by probing), or ``--compute-dtype``.

Verdicts and exit codes: ``ok`` (0) every central property ran and held and none failed;
``mismatch`` (1) a property failed (named, with a hint at the likely cause); ``inconclusive`` (3) a
central property could not run (the verdict names what would decide it: a flag or the mapping
hook); 2: bad input, one line. A property the module cannot run (its backward raises, as
FlexAttention's on CPU; an unsupported dtype) is skipped as *not available on this device* with the
exception, and the verdict line names it.
"""

from __future__ import annotations

import copy
import inspect
import math
from typing import Any, Callable

import click

from proofs_checks.options import UsageError, require_device
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          report_option, sanity_payload, sanity_rebuild, timeout_option)
from proofs_checks.sanity.attention_declaration import (KV_GROUPINGS, MAX_LENGTH, POSITIONAL, QK_NORMS,  # noqa: F401
                                                        Declaration, build_declaration, parse_lengths, parse_window)
from proofs_checks.sanity.attention_evidence import window_note
from proofs_checks.sanity.attention_precision import precision_property
from proofs_checks.sanity._verdict import Verdict

__all__ = ["command", "run_attention", "instantiate", "model_dim", "attention_verdict", "parse_window",
           "parse_lengths"]

_DIM_ATTRS = ("embed_dim", "dim", "d_model", "hidden_size", "n_embd", "model_dim", "emb_dim", "d", "embedding_dim",
              "channels", "in_channels")


def _describe(exc: BaseException) -> str:
    """``TypeName: message`` of the user's exception: one line of at most 300 characters (a 100 kB
    message is cut and says how long it was)."""
    from numerics.attention_probe import short_text
    from proofs_checks.sanity._loader import describe_exception

    return short_text(describe_exception(exc))


def _short(text: Any, limit: int = 300) -> str:
    """A message that may quote the user's text (a configuration value, an exception): one line, cut
    at ``limit`` characters."""
    from numerics.attention_probe import short_text

    return short_text(text, limit)


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
        ps = inspect.signature(obj).parameters.values()
        takes_dim = any(p.name == "dim" for p in ps)
        if takes_dim is False and any(p.kind is p.VAR_KEYWORD for p in ps):
            takes_dim = not (inspect.isclass(obj) and getattr(obj, "__init__", None) is getattr(
                __import__("torch").nn.Module, "__init__", None))  # nn.Module's own **kwargs take nothing
    except (TypeError, ValueError):
        takes_dim = True
    if dim is not None and not takes_dim:  # --dim is then only the model dimension D, not an argument
        dim = None
    try:
        inst = _user_call(lambda: obj(dim=dim) if dim is not None else obj(), label)
    except UsageError:
        raise
    except Exception as exc:
        how = f"{name}(dim={dim})" if dim is not None else f"{name}()"
        missing = isinstance(exc, TypeError) and "required" in str(exc) and "argument" in str(exc)
        hint = ""
        if dim is not None and isinstance(exc, TypeError) and "unexpected keyword argument 'dim'" in str(exc):
            hint = " (it does not take dim=: leave out --dim)"
        elif missing and takes_dim and dim is None:
            hint = " (give --dim D to pass dim=D)"
        elif missing:
            hint = (f" (it needs arguments the check cannot guess: name an instance or a factory instead, e.g. "
                    f"m = {name}(...) in a file, then --module FILE.py:m)")
        raise UsageError(f"{label}: {how} raised {_describe(exc)}{hint}") from None
    if not callable(inst):
        raise UsageError(f"{label}: {name}() returned a {type(inst).__name__}, which is not callable")
    return inst


def _user_call(fn: Callable, label: str):
    """Call the user's code: ``sys.exit`` or a ``KeyboardInterrupt`` raised inside it is a usage
    error (exit 2), never the tool's exit; other exceptions pass through to be reported."""
    from proofs_checks.sanity._loader import user_code

    with user_code(label, "the object (while being probed)", exceptions=False):
        return fn()


_SIMPLE = (bool, int, float, str, type(None))


def _module_state(f: Any) -> dict:
    """What a mapping hook must not change: every submodule's plain attributes (numbers, strings,
    flags), its parameters' and buffers' identity, shape and in-place version, and its submodules."""
    import torch

    if not isinstance(f, torch.nn.Module):
        return {}
    out = {}
    try:
        for name, m in f.named_modules():
            pre = f".{name}" if name else ""
            for k, v in vars(m).items():
                if isinstance(v, _SIMPLE) and not k.startswith("_"):
                    out[f"{pre}.{k}"] = v
            for k, t in list(m._parameters.items()) + list(m._buffers.items()):
                out[f"{pre}.{k}"] = None if t is None else ("tensor", id(t), tuple(t.shape), t.dtype, t._version,
                                                            bool(t.requires_grad))
            out[f"{pre or 'the module'}: its submodules"] = ("submodules",) + tuple(m._modules)
    except Exception:
        return {}
    return out


def _state_changes(a: dict, b: dict) -> str:
    diff = [k for k in dict.fromkeys(list(a) + list(b)) if a.get(k, "<absent>") != b.get(k, "<absent>")]
    if not diff:
        return ""

    def word(k):
        va, vb = a.get(k, "<absent>"), b.get(k, "<absent>")
        name = k.lstrip(".")
        if isinstance(va, tuple) and va[:1] == ("submodules",):
            added = [n for n in (vb[1:] if isinstance(vb, tuple) else ()) if n not in va[1:]]
            gone = [n for n in va[1:] if not isinstance(vb, tuple) or n not in vb[1:]]
            return f"{name}: " + ", ".join([f"{n} added" for n in added] + [f"{n} removed" for n in gone] or ["changed"])
        if isinstance(va, tuple) and va[:1] == ("tensor",):
            if isinstance(vb, tuple) and vb[:5] == va[:5] and vb[5] != va[5]:
                return f"{name}.requires_grad: {va[5]} → {vb[5]}"
            return f"{name} replaced or written in place"
        return f"{name}: {repr(va)[:40]} → {repr(vb)[:40]}"

    words = [word(k) for k in diff[:3]]
    return "; ".join(words) + (f"; {len(diff) - 3} more" if len(diff) > 3 else "")


def _materialize_lazy(obj: Any, D: int, label: str, name: str) -> None:
    """A module with lazy parameters (``nn.LazyLinear``: shapes known only after a first call) is
    called once on a zero ``(1, 2, D)`` input in its own dtype, which creates them, before the
    check copies it; a call that raises is the user's one-line error."""
    import torch
    from torch.nn.parameter import is_lazy

    if not isinstance(obj, torch.nn.Module):
        return
    try:
        tensors = list(obj.parameters()) + list(obj.buffers())
    except Exception:
        return
    lazy = [t for t in tensors if is_lazy(t)]
    if not lazy:
        return
    dt = next((t.dtype for t in tensors if not is_lazy(t) and t.is_floating_point()), torch.get_default_dtype())
    try:
        with torch.no_grad():
            _user_call(lambda: obj(torch.zeros(1, 2, D, dtype=dt)), label)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{label}: {name} has {len(lazy)} uninitialized (lazy) parameter(s); the call on a (1, 2, {D}) "
                         f"input that would create them raised {_describe(exc)} (give --dim D if {D} is not its "
                         "width)") from None
    if any(is_lazy(t) for t in list(obj.parameters()) + list(obj.buffers())):
        raise UsageError(f"{label}: {name} still has uninitialized (lazy) parameters after a call on a (1, 2, {D}) "
                         "input: initialize them before checking")


def _input_widths(obj: Any) -> list[int]:
    """The input widths of the module's linear maps (``nn.Linear``, ``nn.MultiheadAttention``)."""
    import torch

    out = []
    try:
        for m in obj.modules():
            if isinstance(m, torch.nn.MultiheadAttention):
                out.append(int(m.embed_dim))
            elif isinstance(m, torch.nn.Linear) and int(m.in_features) >= 1:
                out.append(int(m.in_features))
    except Exception:
        return []
    return out


def model_dim(obj: Any) -> int | None:
    """``D`` as the object declares it (``embed_dim``, ``dim``, ``d_model``, ... or the input width
    of its first ``nn.Linear``, Hugging Face ``Conv1D`` or 1×1 convolution); ``None`` when it does
    not say."""
    import torch

    def attr(o, a):  # an attribute whose access runs the user's code and raises is not a declared D
        try:
            return getattr(o, a, None)
        except Exception:
            return None

    declared = None
    for a in _DIM_ATTRS:
        for holder in (obj, attr(obj, "config")):
            v = attr(holder, a) if holder is not None else None
            if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                declared = v
                break
        if declared is not None:
            break
    widths = _input_widths(obj) if isinstance(obj, torch.nn.Module) else []
    if declared is not None and (not widths or declared in widths):
        return declared
    # an attribute no projection takes as its input width (self.d = the head size, in many modules) is
    # not D: the first projection's input width is
    if isinstance(obj, torch.nn.Module):
        for m in obj.modules():
            if isinstance(m, torch.nn.MultiheadAttention):
                return int(m.embed_dim)
            if isinstance(m, torch.nn.Linear) and int(m.in_features) >= 1:  # a LazyLinear's is 0 until called
                return int(m.in_features)
            w = getattr(m, "weight", None)
            if type(m).__name__ == "Conv1D" and isinstance(w, torch.Tensor) and w.dim() == 2:
                return int(w.shape[0])  # Hugging Face's transposed Conv1D: weight (in, out)
            if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)) and all(k == 1 for k in m.kernel_size):
                return int(m.in_channels)  # 1×1 convolutions as projections (attention on feature maps)
    return None


def _window_words(window, causal: bool) -> str:
    """A window as the user writes it: ``3 (keys t−2 … t)`` for a causal ``--window 3``, ``2,1 (keys
    t−2 … t+1)`` for ``--window 2,1``.

    >>> _window_words((0, 0), True), _window_words((2, 0), True), _window_words((2, 1), False)
    ('1 (key t only)', '3 (keys t−2 … t)', '2,1 (keys t−2 … t+1)')
    """
    L, R = window
    left = "−∞" if L is None else ("t" if L == 0 else f"t−{L}")
    right = "∞" if R is None else ("t" if R == 0 else f"t+{R}")
    keys = "key t only" if left == right == "t" else f"keys {left} … {right}"
    if causal and R == 0 and L is not None:
        return f"{L + 1} ({keys})"
    return f"{'∞' if L is None else L},{'∞' if R is None else R} ({keys})"


def _decl(st) -> str:
    """The declaration in the user's notation (``causal, window 3 (keys t−2 … t)``), not the internal
    ``window (2, 0)``."""
    text = st.describe()
    if st.window is None:
        return text
    L, R = st.window
    internal = f"window ({'∞' if L is None else L}, {'∞' if R is None else R})"
    return text.replace(internal, "window " + _window_words(st.window, st.causal), 1)


def _window_start(st) -> int | None:
    """The shortest length at which the declared window forbids a key (``None``: never)."""
    if st.window is None:
        return None
    L, R = st.window
    sides = [v + 2 for v in (L, None if st.causal else R) if v is not None]
    return min(sides) if sides else None


def _covers(st, T: int) -> bool:
    """The window of ``st`` forbids no key at lengths ≤ ``T``: the same as no window there."""
    n = _window_start(st)
    return st.window is not None and (n is None or n > T)


def _decide(props, st, lengths: list[int], no_table: str | None, *, window_given: bool) -> None:
    """What decides a central property that could not run, when it is not the weights, as
    ``numbers["to_decide"]`` (the verdict's "to decide" line; without one the verdict asks for the
    weights): a longer probe length, a window wider than any length the check probes, or the
    position table ``--positional learned`` needs (the weights found are named, not called missing)."""
    import re

    skipped = [p for p in props if p.status == "skip" and p.central]
    if no_table:
        todo = ("--positional learned needs the module's position table: name it pos_emb, wpe or "
                "position_embeddings (…), or declare the scheme the module uses (--positional none, sinusoidal, rope "
                "or alibi)")
        for p in skipped:
            if p.name == "matches_reference":
                p.detail = (f"not run: --positional learned, but no position table found by name (pos_emb, wpe, "
                            f"position_embeddings, …) beside the weights found ({no_table}): nothing to build the "
                            "reference from")
            elif p.name == "scale_1_over_sqrt_dk":
                p.detail = "not run: no reference to compare with (see matches_reference: no position table)"
            else:
                continue
            p.numbers = {**p.numbers, "to_decide": todo}
    short = {p.name: int(m.group(1)) for p in skipped if (m := re.match(r"no (?:probe )?length ≥ (\d+)", p.detail or ""))}
    if short:
        todo = f"add a length ≥ {max(short.values())} to --seq-len (probed: {', '.join(map(str, lengths))})"
        for p in skipped:
            if p.name in short:
                p.numbers = {**p.numbers, "to_decide": todo}
    n = _window_start(st)
    for p in skipped:
        if p.name != "window_respected" or not (p.detail or "").startswith("no forbidden pair") or n is None:
            continue
        words = f"--window {_window_words(st.window, st.causal)}"
        p.detail += f": {words} forbids a key only from T = {n} on; the longest probe is T = {max(lengths)}"
        if n <= MAX_LENGTH:
            todo = f"add a length ≥ {n} to --seq-len (the window forbids a key only from T = {n} on)"
        else:
            todo = (f"the window forbids a key only from T = {n} on, beyond the longest length the check probes "
                    f"(--seq-len ≤ {MAX_LENGTH}): there it is the same as no window; "
                    + ("drop --window to check the module as not windowed" if window_given else
                       "it comes from the module's configuration: --ignore-config checks the module as not windowed"))
        p.numbers = {**p.numbers, "to_decide": todo}


def attention_verdict(properties: list[dict], subject: str, hints: list[str]) -> Verdict:
    """``mismatch`` when a property failed; else ``inconclusive`` when a central property did not
    run; else ``ok``. The criterion lists what ran, what was not applicable and why.

    >>> attention_verdict([{"name": "a", "status": "pass", "central": True},
    ...                    {"name": "b", "status": "skip", "central": True, "detail": "no mapping"}], "x", []).outcome
    'inconclusive'
    """
    failed = [p for p in properties if p["status"] == "fail"]
    passed = [p["name"] for p in properties if p["status"] == "pass"]
    c_skip = [p for p in properties if p["status"] == "skip" and p.get("central")]
    unavail = [p for p in properties if p["status"] == "skip" and not p.get("central")
               and (p.get("numbers") or {}).get("unavailable")]
    n_skip = [p for p in properties if p["status"] == "skip" and not p.get("central") and p not in unavail]
    numbers = {"passed": passed, "failed": [p["name"] for p in failed], "central_not_run": [p["name"] for p in c_skip],
               "not_applicable": [p["name"] for p in n_skip], "not_available": [p["name"] for p in unavail]}
    na = "; ".join(f"{p['name']} not available"
                   + (f" on this device ({p['numbers'].get('device', '?')}: " if p["numbers"].get("device_limit", True)
                      else " (the module's backward raised ")
                   + f"{p['numbers']['unavailable'].split(':')[0]}), not central here" for p in unavail)
    crit = (f"{len(passed)} propert{'y' if len(passed) == 1 else 'ies'} within tolerance, {len(failed)} beyond"
            + (f"; central, not run: {', '.join(p['name'] for p in c_skip)}" if c_skip else "")
            + (f"; {na}" if na else "")
            + (f"; not applicable: {'; '.join(p['name'] + ' (' + (p.get('detail') or '') + ')' for p in n_skip)}"
               if n_skip else "")
            + "; each error is compared with its stated tolerance")
    if failed:
        def named(p):
            fits = (p.get("numbers") or {}).get("fits")
            return p["name"] + (f" (it computes in {fits}, not {p['numbers'].get('declared')})" if fits else "")

        failed = sorted(failed, key=lambda p: p["name"] != "precision_as_declared")
        return Verdict("mismatch", f"{subject} violates: {', '.join(named(p) for p in failed)}", crit, numbers,
                       suggestion="; ".join(hints) or None)
    if c_skip:
        reasons = [f"{p['name']}: {p.get('detail') or 'did not run'}" for p in c_skip]
        # what decides each: its own to_decide (lengths, a window wider than the probes, a position table),
        # else the weights (no projections found: nothing to map or fit)
        own = [(p.get("numbers") or {}).get("to_decide") for p in c_skip]
        sugg = [] if all(own) else [
            "declare the weights: a mapping hook (--mapping FILE.py:fn, or a tverify_mapping() method returning q, "
            "k, v, o, heads) or projections under common names (q_proj/k_proj/v_proj, qkv, ...)"]
        return Verdict("inconclusive", f"{subject}: {', '.join(p['name'] for p in c_skip)} could not run", crit,
                       numbers, reasons=reasons,
                       suggestion="; ".join(dict.fromkeys(hints + [t for t in own if t] + sugg)))
    return Verdict("ok", f"{subject}: all {len(passed)} checked properties hold" + (f" ({na})" if na else ""), crit,
                   numbers)


def _structure(causal, window, positional, rope_base, rope_dims, rope_convention, softcap, qk_norm=None, scale=None):
    from numerics.attention_reference import Structure

    return Structure(causal=causal, window=window, positional=positional, rope_convention=rope_convention or "half",
                     rope_base=rope_base, rope_dims=rope_dims, softcap=softcap, qk_norm=qk_norm, scale=scale)




def _grouping_name(m) -> str:
    return "hf" if m.kv_grouping == "interleave" else "tiled"


def _grouping_line(m, declared: bool) -> str:
    """The key/value grouping of the mapping kept (printed whenever weights are mapped)."""
    if m.kv_heads == m.heads:
        return f"key/value grouping: none ({m.heads} key/value head(s), one per query head)"
    g = m.heads // m.kv_heads
    how = f"h // {g}, as Hugging Face's repeat_kv" if m.kv_grouping == "interleave" else f"h % {m.kv_heads}, tiled"
    return (f"key/value grouping: {_grouping_name(m)} (query head h uses key/value head {how}; "
            f"{'declared by --kv-grouping' if declared else 'found: the grouping that fits the module best'})")


def _hf_like(obj) -> bool:
    """A Hugging Face attention object (or one written like it): its checkpoints group key/value
    heads as ``repeat_kv`` does."""
    mods = [obj] + ([m for m in obj.modules()] if hasattr(obj, "modules") and callable(obj.modules) else [])
    for m in mods[:50]:
        if type(m).__module__.startswith("transformers") or hasattr(m, "num_key_value_groups"):
            return True
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "num_key_value_heads"):
            return True
    return False


def _offset_label(d: int) -> str:
    """The hint's words for RoPE applied to queries ``d`` positions after the keys.

    >>> _offset_label(-2)[:53]
    'RoPE at query positions 0…T−1 and key positions 2…T+1'
    """
    def pos(a):
        return "0…T−1" if a == 0 else ("1…T" if a == 1 else f"{a}…T+{a - 1}")

    return (f"RoPE at query positions {pos(max(d, 0))} and key positions {pos(max(-d, 0))} (queries rotated "
            f"{abs(d)} position{'s' if abs(d) > 1 else ''} {'ahead of' if d > 0 else 'behind'} the keys; only this "
            "difference is observable: a common offset of both leaves RoPE attention unchanged)")


def _variants(st, m, alts):
    """Variants of the declaration for hints: (label, structure, mapping)."""
    out = [("not causal" if st.causal else "causal", st.variant(causal=not st.causal, window=None), None)]
    if st.causal:
        # off by one or two from the declared window (any W), then the usual sizes
        near = ([st.window[0] + 1 + d for d in (1, -1, 2, -2)]
                if st.window is not None and st.window[0] is not None and st.window[1] == 0 else [])
        for W in dict.fromkeys(near + [1, 2, 3, 4, 5, 8, 16, 32, 64, 128, 256]):
            if W >= 1 and st.window != (W - 1, 0):
                out.append((f"--window {W}", st.variant(window=(W - 1, 0)), None))
    if st.window is not None:
        out.append(("no window", st.variant(window=None), None))
        if not st.causal and None not in st.window:  # two-sided: swapped, off by one, symmetric
            L, R = st.window
            pairs = [(R, L), (L + 1, R), (L, R + 1), (L - 1, R), (L, R - 1), (L + 1, R + 1), (L - 1, R - 1)] + [
                (w, w) for w in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
            for L2, R2 in dict.fromkeys(pairs):
                if min(L2, R2) >= 0 and (L2, R2) != (L, R):
                    out.append((f"--window {L2},{R2}", st.variant(window=(L2, R2)), None))
    dk = m.d_k
    rdims = [None] + [r for r in dict.fromkeys((dk // 2, dk // 4, 32, 64)) if 2 <= r < dk and r % 2 == 0]
    for conv in ("half", "interleaved"):
        for base in (10000.0, 500000.0, 1000000.0, 100.0):
            for dims in rdims:
                s2 = st.variant(positional="rope", rope_convention=conv, rope_base=base, rope_dims=dims)
                if s2 != st:
                    out.append((f"--positional rope --rope-convention {conv} --rope-base {base:g}"
                                + (f" --rope-dims {dims}" if dims else ""), s2, None))
    if st.positional == "rope":  # queries and keys rotated at different positions (only q − k is observable)
        for d in (1, -1, 2, -2):
            out.append((_offset_label(d), st.variant(rope_offset=(d, 0)), None))
    for pos in ("none", "alibi", "sinusoidal") + (("learned",) if m.pos_table is not None else ()):
        if pos != st.positional:
            out.append((f"--positional {pos}", st.variant(positional=pos), None))
    if st.softcap is not None:
        out.append(("no softcap", st.variant(softcap=None), None))
    for c in (5.0, 10.0, 15.0, 20.0, 30.0, 50.0):
        if st.softcap != c:
            out.append((f"--softcap {c:g}", st.variant(softcap=c), None))
    out.append(("batch and time axes swapped (the module reads axis 0 as time)", st.variant(swap_axes=True), None))
    for kind in QK_NORMS:
        if st.qk_norm != kind:
            out.append((f"--qk-norm {kind}", st.variant(qk_norm=kind), None))
    if st.qk_norm is not None:
        out.append(("no QK-norm", st.variant(qk_norm=None), None))
    if m.kv_heads < m.heads:
        import dataclasses

        other = "tile" if m.kv_grouping == "interleave" else "interleave"
        out.append((f"--kv-grouping {'tiled' if other == 'tile' else 'hf'}", st,
                    dataclasses.replace(m, kv_grouping=other)))
    for a in alts:
        out.append((f"{a.heads} heads" + (f", {a.kv_heads} key/value heads" if a.kv_heads != a.heads else "")
                    + (" (--kv-grouping tiled)" if a.kv_heads < a.heads and a.kv_grouping == "tile" else ""), st, a))
    return out


def _read_config(obj, label, ignore_config, positional, given, window_text=None) -> tuple[dict, list[str], list[str]]:
    """The declaration completed by what the module carries (:mod:`proofs_checks.sanity._modconfig`):
    ``(values, config_read lines, notes)``. ``given["window"]`` may still be the text ``"W"`` (parsed
    here, once the module's ``is_causal`` is known). A configuration attribute of the wrong type, or a
    declaration contradicting it: one-line usage errors naming both and ``--ignore-config``."""
    from proofs_checks.sanity import _modconfig as mc

    read = mc.ConfigRead()
    if not ignore_config:
        try:
            read = _user_call(lambda: mc.read_module_config(obj), label)
        except mc.ConfigError as exc:
            raise UsageError(f"{label}: the module's configuration has {_short(exc, 600)}; fix it, or pass --ignore-config to not "
                             "read it") from None
    given = dict(given)
    if isinstance(given.get("window"), str):
        given["window"] = parse_window(given["window"], bool(given["causal"] or read.get("causal")))
    try:
        vals, lines = mc.merge(read, given, positional, {"window": window_text} if window_text else None)
    except mc.ConfigError as exc:
        raise UsageError(_short(exc, 600)) from None
    vals["_read"] = {k: (it.value, it.source) for k, it in read.items.items()}
    return vals, lines, list(read.notes)


def _as_flags(st, m) -> str:
    """The declaration ``st`` (and the head counts of ``m``) as command-line flags."""
    flags = ["--causal"] if st.causal else []
    if st.window is not None:
        L, R = st.window
        if st.causal and R == 0 and L is not None:
            flags.append(f"--window {L + 1}")
        elif L is not None and R is not None:
            flags.append(f"--window {L},{R}")
    if st.positional != "none":
        flags.append(f"--positional {st.positional}")
    if st.positional == "rope":
        flags += [f"--rope-base {_exact(st.rope_base)}", f"--rope-convention {st.rope_convention}"]
        if st.rope_dims:
            flags.append(f"--rope-dims {st.rope_dims}")
    if st.softcap is not None:
        flags.append(f"--softcap {_exact(st.softcap)}")
    if st.qk_norm is not None:
        flags.append(f"--qk-norm {st.qk_norm}")
    if m is not None:
        flags.append(f"--heads {m.heads}")
        if m.kv_heads != m.heads:
            flags.append(f"--kv-heads {m.kv_heads}")
            if m.kv_grouping == "tile":
                flags.append("--kv-grouping tiled")
    return " ".join(flags)


def _config_contradiction(read: dict, st, m) -> str:
    """When a verified hint's declaration (``st``, ``m``) differs from a value read from the module's
    configuration, the words that say so and the flags that declare it (a declared value wins over the
    configuration: nothing needs switching off); else ""."""
    if not read:
        return ""
    bad = []
    for key, (value, src) in read.items():
        if key == "causal":
            differs = bool(value) and not st.causal
        elif key == "window":
            differs = st.window != (int(value) - 1, 0)
        elif key in ("rope_base", "rope_dims"):
            differs = st.positional == "rope" and getattr(st, key) is not None and float(getattr(st, key)) != float(value)
        elif key == "softcap":
            differs = st.softcap is None or float(st.softcap) != float(value)
        elif key == "kv_heads":
            differs = m is not None and m.kv_heads != int(value)
        else:
            differs = False
        if differs:
            bad.append(f"{src} = {_fmt_value(value)}")
    if not bad:
        return ""
    return (f"; but the module's {' and '.join(bad)} says otherwise: it does not compute what its configuration "
            f"says (a bug in the module or in its configuration); to check it against this declaration (a declared "
            f"value wins over the configuration): {_as_flags(st, m)}")


def _exact(v) -> str:
    """A flag's number printed so that it reads back as the same value (``repr``; a whole float without
    its ``.0``): ``1234567.0`` → ``1234567``, never the six digits of ``:g`` (``1.23457e+06``).

        >>> _exact(1234567.0), _exact(10000.0), _exact(0.1), _exact(1e300)
        ('1234567', '10000', '0.1', '1e+300')
    """
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def _fmt_value(v) -> str:
    return _exact(v) if isinstance(v, float) else str(v)


_FLEX_WARNING = r"flex_attention called without torch\.compile\(\)"


def _quiet_flex_warning(fn: Callable) -> Callable:
    """``fn`` with torch's 10-line ``UserWarning`` "flex_attention called without torch.compile()"
    filtered while it runs (that warning is about speed, not correctness; the check calls
    FlexAttention modules eagerly on purpose). Only that warning: every other one still shows. torch's
    once-per-process record of it is restored, so the caller's own later calls still warn."""
    import functools

    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        import sys
        import warnings

        def record():
            return getattr(sys.modules.get("torch.nn.attention.flex_attention"), "_WARNINGS_SHOWN", None)

        before = record()
        shown = "flex_attention_performance" in before if isinstance(before, set) else False
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_FLEX_WARNING, category=UserWarning)
            # reentrant torch.utils.checkpoint on the check's own no-grad probes: its warning is about them
            # (gradients are checked by the gradient pass, with an input that requires grad)
            warnings.filterwarnings("ignore", message=r"None of the inputs have requires_grad=True",
                                    category=UserWarning)
            # torch.compile's tracer explaining why it cannot trace the user's score_mod: the check's one
            # line names the exception it ends in
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._dynamo")
            try:
                return fn(*args, **kwargs)
            finally:
                after = record()
                if isinstance(after, set) and not shown:
                    after.discard("flex_attention_performance")

    return quiet


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
    dict; ``against`` a second implementation (differential mode). What the module's configuration
    carries (:mod:`proofs_checks.sanity._modconfig`) fills the values not given (``rope_base=None``:
    the module's, else 10000; ``causal=False``: the module's ``is_causal``/``causal`` when True), unless
    ``ignore_config``; a given value that contradicts it is a usage error."""
    import torch

    from numerics import attention_probe as ap
    from numerics.attention_mapping import HOOK_METHOD, count_hints, find_mappings, head_count_hint, mapping_from_hook
    from proofs_checks import guards

    if not isinstance(progress, bool) and type(progress).__name__ != "bool_":
        raise UsageError(f"progress: must be True or False, got {progress!r}")
    decl = declaration if declaration is not None else build_declaration(dict(
        causal=causal, window=window, positional=positional, rope_base=rope_base, rope_dims=rope_dims,
        rope_convention=rope_convention, heads=heads, kv_heads=kv_heads, kv_grouping=kv_grouping, softcap=softcap,
        qk_norm=qk_norm, scale=scale, mask_convention=mask_convention, compute_dtype=compute_dtype, dtype=dtype,
        seq_len=seq_len, mode=mode, seed=seed, device=device, max_memory=max_memory, dim=dim,
        ignore_config=ignore_config))
    (causal, positional, rope_base, rope_dims, rope_convention, heads, kv_heads, kv_grouping, softcap, qk_norm,
     mask_convention, compute_dtype, dtype, mode, seed, device, max_memory, dim, ignore_config) = (
        getattr(decl, k) for k in ("causal", "positional", "rope_base", "rope_dims", "rope_convention", "heads",
                                   "kv_heads", "kv_grouping", "softcap", "qk_norm", "mask_convention", "compute_dtype",
                                   "dtype", "mode", "seed", "device", "max_memory", "dim", "ignore_config"))
    defer_win = isinstance(decl.window, str)  # --window W without --causal: parsed once the module's is_causal is read
    window = None if window is None else (",".join(map(str, window)) if isinstance(window, (tuple, list))
                                          else str(window))  # as the user wrote it (for the lines)
    win = decl.window
    lengths = list(decl.seq_len) if decl.seq_len else None

    name = name or getattr(obj, "__name__", type(obj).__name__)
    with torch.random.fork_rng(devices=[]):  # a class or factory draws its weights from the seed
        torch.manual_seed(int(seed))
        obj = instantiate(obj, dim, label)
    if not callable(obj):
        raise UsageError(f"{label}: {name} is a {type(obj).__name__}, not a callable attention")
    given = dict(causal=causal, rope_base=rope_base, rope_dims=rope_dims, window=decl.window if defer_win else win,
                 kv_heads=kv_heads, softcap=softcap, qk_norm=qk_norm)
    vals, config_read, config_notes = _read_config(obj, label, ignore_config, positional, given,
                                                   window if isinstance(window, str) else None)
    causal, win, rope_base, rope_dims, softcap = (vals[k] for k in ("causal", "window", "rope_base", "rope_dims",
                                                                    "softcap"))
    rope_base = 10000.0 if rope_base is None else rope_base
    if rope_dims is not None and rope_dims % 2:
        raise UsageError(f"--rope-dims {rope_dims}: RoPE rotates pairs of dimensions, so it must be even")
    D = dim or model_dim(obj)
    if D is None:
        lazy = isinstance(obj, torch.nn.Module) and any(isinstance(m, torch.nn.modules.lazy.LazyModuleMixin)
                                                        for m in obj.modules())
        raise UsageError(f"{label}: cannot tell the model dimension D of {name} (no embed_dim/dim/d_model attribute, "
                         + ("its projections are lazy (nn.LazyLinear): their input width is known only after a call"
                            if lazy else "no nn.Linear") + "): give --dim D")
    _materialize_lazy(obj, D, label, name)
    tdt = ap._DT[dtype]
    other = torch.float32 if tdt == torch.float64 else torch.float64
    f = obj
    if isinstance(obj, torch.nn.Module):
        try:
            f = copy.deepcopy(obj).to(dtype=tdt, device=device).eval()
        except Exception as exc:
            raise UsageError(f"{label}: cannot copy {name} to {dtype} on {device}: {_describe(exc)}") from None
    st0 = _structure(causal, win, positional, rope_base, rope_dims, rope_convention, softcap, None, decl.scale)
    if isinstance(f, torch.nn.MultiheadAttention):
        # a bare nn.MultiheadAttention takes (query, key, value): call it as self-attention with the
        # declared mask, in its documented layout
        from numerics.attention_reference import allowed_mask

        needs = st0.causal or st0.window is not None
        f = ap.SelfMHA(f, (lambda T: allowed_mask(T, st0)) if needs else None)
        obj = f
    wm = None
    if mask_convention is not None:  # the module takes (x, mask): every call passes a mask
        f = wm = ap.WithMask(f, mask_convention)
    mha = [m for m in f.modules() if isinstance(m, torch.nn.MultiheadAttention)] if isinstance(f, torch.nn.Module) else []
    hints: list[str] = []
    if mha and not mha[0].batch_first and not isinstance(f, ap.SelfMHA):
        hints.append("the module holds nn.MultiheadAttention(batch_first=False), which reads (T, batch, D): the probe "
                     "is (batch, T, D), so batch and time axes are mixed; build it with batch_first=True or transpose "
                     "in a wrapper")

    # the reference's weights
    mp, value, note = None, None, ""
    read_counts: dict = {}
    if mapping is not None:
        note = "declared: the --mapping hook"
        get = (lambda: mapping(f)) if callable(mapping) else (lambda: mapping)
    elif callable(getattr(f, HOOK_METHOD, None)):
        note = f"declared: the module's {HOOK_METHOD}()"
        get = getattr(f, HOOK_METHOD)
    if note:
        hl = "--mapping" if mapping is not None else f"{name}.{HOOK_METHOD}()"  # who to name in a message
        before = _module_state(f)
        try:
            value = _user_call(get, hl)
        except UsageError:
            raise
        except Exception as exc:
            raise UsageError(f"{hl}: the hook raised {_describe(exc)}") from None
        changed = _state_changes(before, _module_state(f))
        if changed:
            raise UsageError(f"{hl}: the hook changed the module it was given ({changed}): a mapping hook must "
                             "only read the weights, or the module checked is not the one you wrote")
        try:
            mp = mapping_from_hook(value, D, note)
        except ValueError as exc:
            raise UsageError(f"{hl}: {_short(exc, 600)}") from None
        if kv_grouping is not None:  # the flag declares the grouping of the hook's weights too
            from numerics.attention_mapping import GROUPING_NAMES

            mp.kv_grouping = GROUPING_NAMES[kv_grouping]
        cands = [mp]
    else:
        use_cfg = not ignore_config
        cands = find_mappings(f, D, heads, kv_heads, config=use_cfg)
        declared_counts = {"heads": heads, "kv_heads": kv_heads}
        read_counts = {k: v for k, v in count_hints(f, use_cfg).items() if declared_counts[k] is None}
        unhinted = find_mappings(f, D, heads, kv_heads, hints=False) if not cands and read_counts else []
        if unhinted:  # the weights split, but not by the head counts the module itself declares
            c0 = unhinted[0]
            said = " and ".join(f"{src.lstrip('.')} = {v}" for v, src in read_counts.values())
            fits = sorted({(c.heads, c.kv_heads) for c in unhinted})
            via_cfg = any(".config." in src or src.startswith(".config") for _, src in read_counts.values())
            decl = " ".join(f"{n} {v}" for n, v in (("--heads", heads), ("--kv-heads", kv_heads)) if v is not None)
            raise UsageError(
                f"{label}: {name}'s {said} (read from the module) does not fit its weights "
                f"({c0.source.split(';')[0].removeprefix('declared: ')}: widths q {c0.wq.shape[0]}, k {c0.wk.shape[0]}, "
                f"v {c0.wv.shape[0]}{', with ' + decl if decl else ''}); counts that fit: "
                + ", ".join(f"{h} heads" + (f" / {k} key/value heads" if k != h else "") for h, k in fits[:8])
                + ": fix the module's value, or declare --heads and --kv-heads"
                + (" with --ignore-config (its configuration is then not read)" if via_cfg else ""))
        if not cands and (heads is not None or kv_heads is not None):
            free = find_mappings(f, D, config=use_cfg)
            if free:  # the weights are there, but the declared head counts cannot split them
                c0 = free[0]
                fits = sorted({(c.heads, c.kv_heads) for c in free})
                decl = " ".join(f"{n} {v}" for n, v in (("--heads", heads), ("--kv-heads", kv_heads)) if v is not None)
                raise UsageError(
                    f"{decl}: the projections found ({c0.source.split(';')[0].removeprefix('declared: ')}) have "
                    f"widths q {c0.wq.shape[0]}, k {c0.wk.shape[0]}, v {c0.wv.shape[0]}, which that head count cannot "
                    "split; counts that fit: " + ", ".join(f"{h} heads" + (f" / {k} key/value heads" if k != h else "")
                                                           for h, k in fits[:8]))
    early_notes: list[str] = []
    if positional == "rope" and rope_dims is not None:
        rd_read = vals.get("_read", {}).get("rope_dims")
        if given.get("rope_dims") is None and rd_read is not None:  # read from the module, not a flag
            who = f"the module's rope_dims {rope_dims} ({rd_read[1]})"
            fix = ": fix the module's value, or pass --ignore-config and declare --rope-dims"
        else:
            who, fix = f"--rope-dims {rope_dims}", ""
        hd_read = vals.get("_read", {}).get("head_dim")
        if who.startswith("the module's") and hd_read is not None and cands and all(c.d_k != hd_read[0] for c in cands):
            raise UsageError(f"{who} come from {hd_read[1].strip(' =')} {hd_read[0]}, which is not the head size of the "
                             f"weights found (d_k {', '.join(sorted({f'{c.d_k} at {c.heads} heads' for c in cands}))})"
                             f"{fix}")
        if rope_dims > D:
            raise UsageError(f"{who}: larger than the model dimension D = {D} (the rotated dimensions are counted per "
                             f"head, at most its size d_k){fix}")
        fit = [c for c in cands if rope_dims <= c.d_k]
        if cands and not fit:
            raise UsageError(f"{who}: larger than the head size d_k = "
                             f"{', '.join(sorted({str(c.d_k) for c in cands}))} of the weights found "
                             f"({cands[0].source.split(';')[0].removeprefix('declared: ')}): at most d_k{fix}")
        if fit != cands and who.startswith("the module's"):
            early_notes.append(f"note: {who} leaves out the head counts whose head size is smaller "
                         f"({', '.join(sorted({f'{c.heads} heads (d_k {c.d_k})' for c in cands if c not in fit}))}); "
                         "declare --heads, or --ignore-config to not read it")
        cands = fit
    hook = note or None
    if kv_grouping is not None and not hook:
        from numerics.attention_mapping import GROUPING_NAMES

        cands = [c for c in cands if c.kv_heads == c.heads or c.kv_grouping == GROUPING_NAMES[kv_grouping]]
    norm_note = _attach_qk_norms(f, cands, qk_norm, hook)
    if norm_note:
        hints_pre = [norm_note]
    else:
        hints_pre = []
    H_hint = heads or head_count_hint(f, not ignore_config)
    st = _structure(causal, win, positional, rope_base, rope_dims, rope_convention, softcap, qk_norm, decl.scale)
    hints.extend(hints_pre)
    notes = [f"note: {n}" for n in hints_pre] + early_notes
    no_table = None  # --positional learned, the weights found, but no position table beside them
    if positional == "learned" and cands and all(c.pos_table is None for c in cands):
        no_table = cands[0].source.split(";")[0].removeprefix("declared: ")
        cands = []

    Ls = lengths or ap.probe_lengths(mode)
    tmax = None
    if positional == "learned" and cands and cands[0].pos_table is not None:
        tmax = int(cands[0].pos_table.shape[0])
        Ls = sorted({min(t, tmax) for t in Ls})
    B = ap.BATCH[mode]
    # memory: the largest single call (module internals ~ H·T² logits and weights) and the chunked
    # perturbation batches (≤ 256 MB each by construction)
    Hm = max([c.heads for c in cands] + [H_hint or 1])
    T_hi = max(Ls)
    per_call = B * (Hm * T_hi * T_hi * 8 * 4 + T_hi * D * 8 * 12)
    pert = min(256e6, 64 * B * (T_hi * D * 8 * 6 + T_hi * T_hi * 8 * 4))  # chunks of ≤ 256 MB (attention_probe)
    guards.require_memory(per_call + pert + 2 * D * D * 8 * 8, max_memory,
                          f"{label}: check attention at T = {T_hi} (one call with batch {B}: {H_hint or Hm} head(s) of "
                          f"T×T logits, and the perturbation batches of ≤ 256 MB)",
                          hint="lower the lengths with --seq-len")

    tick = guards.Progress(f"check attention {name}", enabled=progress)
    probe = ap.AttentionProbe(f, D=D, structure=st, mapping=None, probe_dtype=tdt, device=device, lengths=Ls, batch=B,
                              seed=seed, compute_dtype=ap._DT[compute_dtype] if compute_dtype else None)
    probe.config_items = vals.get("_read", {})  # for hints that contradict the module's configuration

    ap.LAST_UNREAD = None
    problems = _user_call(lambda: probe.forward_all(_describe, tick.sub), label)
    unread = ap.LAST_UNREAD
    if unread is not None:
        notes.append(f"note: {name} returned a second output, {unread}, which is not attention weights (their last "
                     "two axes are (T, T)): it is not checked there")
    if problems:
        raise UsageError(f"{label}: {name} {problems[0]}")
    if not probe.outs:
        T0 = min(probe.raised)
        raise UsageError(f"{label}: {name} raised {probe.raised[T0]} on a ({B}, {T0}, {D}) {dtype} input on {device} "
                         f"(and at every other probe length: {', '.join(map(str, sorted(probe.raised)))})")
    # lengths with NaN/inf outputs fail finite_output; the other lengths are still judged
    all_outs = dict(probe.outs)
    bad_T = [T for T, o in all_outs.items() if not torch.isfinite(o).all()]
    if bad_T and len(bad_T) < len(all_outs):
        probe.nonfinite_lengths = set(bad_T)
        for T in bad_T:
            probe.outs.pop(T)
            probe.xs.pop(T)
            getattr(probe, "weights", {}).pop(T, None)

    # choose the mapping candidate that agrees best with the object, at a middle length
    alts = []
    if cands:
        Tm = min(probe.outs, key=lambda t: abs(t - 17))
        sts = [st] if not (positional == "rope" and rope_convention is None) else [
            st.variant(rope_convention="half"), st.variant(rope_convention="interleaved")]
        scored = []
        for c in cands:
            for s2 in sts:
                try:
                    with torch.no_grad():
                        e = ap._rel(probe.outs[Tm], probe.reference(probe.xs[Tm], st=s2, m=c))
                except Exception:  # a candidate of inconsistent shapes
                    continue
                scored.append((e if math.isfinite(e) else float("inf"), len(scored), c, s2))
        if scored:
            scored.sort(key=lambda t: (t[0], t[1]))
            if scored[0][0] > 1e-6 and len(scored) > 1:
                # nothing fits the declaration: the declared mask, window or positions may be what is
                # wrong, not the layout, so rank the layouts by their best fit over simple changes of
                # the declaration (the reference keeps the declaration; the hints name the change)
                loose = [st.variant(causal=not st.causal, window=None), st.variant(window=None),
                         st.variant(positional="none"), st.variant(softcap=None)]

                def best(t):
                    errs = [t[0]]
                    # the simple changes, then every change of the declaration the hints try (a window,
                    # RoPE base or dims, ALiBi, a cap): the layout must not be picked under the wrong one
                    for v in loose + [v for _, v, mm in _variants(t[3], t[2], []) if mm is None]:
                        try:
                            with torch.no_grad():
                                errs.append(ap._rel(probe.outs[Tm], probe.reference(probe.xs[Tm], st=v, m=t[2])))
                        except Exception:
                            continue
                    return min(e for e in errs if math.isfinite(e)) if any(math.isfinite(e) for e in errs) else 1e300

                bests = {t[1]: best(t) for t in scored}
                scored = sorted(scored, key=lambda t: (bests[t[1]], t[1]))
            else:
                bests = {t[1]: t[0] for t in scored}
            if bests[scored[0][1]] > 1e-6 and len({(c.heads, c.kv_heads, c.kv_grouping) for _, _, c, _ in scored}) > 1 \
                    and heads is None and min(_free_scale_residual(probe, t[2], t[3], Tm) for t in scored[:1]) > 1e-6:
                # nothing fits at 1/√d_k, under the declaration or a change of it, and the head count is not
                # declared: a wrong scale must not pick the head count, so rank the candidates by their
                # residual at their best scale
                scored = sorted(scored, key=lambda t: (min(bests[t[1]], _free_scale_residual(probe, t[2], t[3], Tm)),
                                                       t[1]))
            _, _, mp, st = scored[0]
            probe.st = st
            probe.m = mp
            alts = [c for _, _, c, _ in scored[1:] if c.heads != mp.heads or c.kv_heads != mp.kv_heads][:6]
            if heads is not None and hook is None:
                free = [c for c in find_mappings(f, D, None, kv_heads, config=not ignore_config) if c.heads != heads]
                alts += free[:6]
            elif hook is None and kv_heads is None and read_counts:
                # the head counts came from the module's own attributes: other splits are hints too
                free = [c for c in find_mappings(f, D, None, None, hints=False)
                        if (c.heads, c.kv_heads) != (mp.heads, mp.kv_heads)]
                alts += free[:6]
    if against is not None:
        with torch.random.fork_rng(devices=[]):  # the same seed: factories seeded alike get equal weights
            torch.manual_seed(int(seed))
            g = instantiate(against, dim, "--against")
        if isinstance(g, torch.nn.Module):
            try:
                g = copy.deepcopy(g).to(dtype=tdt, device=device).eval()
            except Exception as exc:
                raise UsageError(f"--against: cannot copy it to {dtype} on {device}: {_describe(exc)}") from None
        probe.against = g
        for T, x in probe.xs.items():
            try:
                o = _user_call(lambda: ap.call(g, x.to(dtype=tdt, device=device))[0], "--against")
            except UsageError:
                raise
            except Exception as exc:
                raise UsageError(f"--against: it raised {_describe(exc)} at T = {T}") from None
            if not isinstance(o, torch.Tensor) or tuple(o.shape) != tuple(probe.outs[T].shape):
                raise UsageError(f"--against: it returned {getattr(o, 'shape', type(o).__name__)} at T = {T}, expected "
                                 f"{tuple(probe.outs[T].shape)}")
            if not bool(torch.isfinite(o).all()):  # the reference side is broken: nothing to compare with
                raise UsageError(f"--against: {getattr(g, '__name__', type(g).__name__)} returned NaN or inf at T = {T} "
                                 "on a finite probe: it cannot serve as the other implementation")

    props: list = []
    info = {"D": D, "lengths": list(probe.outs), "batch": B, "dtype": dtype, "device": device, "causal": causal,
            "window": list(st.window) if st.window else None, "positional": st.positional, "softcap": softcap,
            "seed": seed, "structure": _decl(st), "qk_norm": qk_norm}
    warnings: list[str] = []
    if mp is not None:
        info["kv_grouping"] = {"found": _grouping_name(mp) if mp.kv_heads < mp.heads else None,
                               "declared": kv_grouping}
        if (mp.kv_heads < mp.heads and mp.kv_grouping == "tile" and kv_grouping is None and not hook
                and _hf_like(obj)):
            warnings.append(f"warning: this Hugging Face-like module groups key/value heads by tiling (query head h "
                            f"uses key/value head h % {mp.kv_heads}), not as Hugging Face's repeat_kv (h // "
                            f"{mp.heads // mp.kv_heads}): a Hugging Face checkpoint loaded into it attends with the "
                            "wrong key/value heads; --kv-grouping hf checks it against Hugging Face's grouping")
        info["warnings"] = warnings
    if st.positional == "rope":
        info["rope"] = {"base": st.rope_base, "dims": st.rope_dims, "convention": st.rope_convention}
    figures = {}
    if probe.raised:
        Tb = sorted(probe.raised)
        props.append(ap.Property("runs_at_every_length", "fail", float(len(Tb)), 0.0, "every probe length must run",
                                 f"raised at T = {', '.join(map(str, Tb))}: {probe.raised[Tb[0]]} (the other lengths "
                                 "are still judged; --seq-len chooses the lengths)"))
    pf = ap.prop_finite(all_outs)
    if pf.status == "fail" and probe.outs and len(probe.outs) < len(all_outs):
        pf.detail += f"; the other properties are judged at the finite lengths {', '.join(map(str, probe.outs))}"
    props.append(pf)
    H = mp.heads if mp is not None else (H_hint or 1)
    info.update({"heads": H, "kv_heads": mp.kv_heads if mp is not None else None,
                 "mapping": mp.source if mp is not None else None})
    all_bad = pf.status == "fail" and len(probe.outs) == len(all_outs)
    pre = [] if (not probe.outs or all_bad) else _user_call(lambda: _preconditions(probe, f, mp, hook, against), label)
    props.extend(pre)
    causes = [p for p in pre if p.status == "fail"]
    if pf.status == "fail" and len(probe.outs) == len(all_outs):
        props.append(ap.Property("remaining_properties", "skip", None, None, "",
                                 "not measured: the outputs on the probe are not finite", central=True))
    elif causes:
        hints.extend(_CAUSE_HINTS[p.name] for p in causes)
        props.append(ap.Property("remaining_properties", "skip", None, None, "",
                                 f"not judged: {causes[0].name} failed, so a leak or mismatch measured now would be "
                                 "that cause, not a finding about the attention", central=True))
    else:
        _user_call(lambda: _properties(probe, props, figures, f, obj if wm is None else f, st, mp, H, H_hint, hints,
                                       alts, other, device, against, gen_seed=seed, tick=tick), label)
        if wm is not None:
            props.extend(_user_call(lambda: ap.prop_key_padding(probe, wm), label))
    tick.done()
    _decide(props, st, list(probe.outs), no_table, window_given=window is not None)
    if probe.precision is not None:
        info["working_precision"] = {"dtype": probe.precision.name, "how": probe.precision.how}
    rows = [p.to_json() for p in props]
    verdict = attention_verdict(rows, f"attention {name}", hints)
    found = (f"found by name ({no_table}), not used: --positional learned and no position table beside them"
             if no_table else "no projections found by name (fitted where possible)")
    lines = [f"attention {name}: D = {D}, lengths {', '.join(map(str, probe.outs))} (batch {B}), {H} head(s), {dtype} "
             f"on {device}, {_decl(st)}, seed {seed}",
             f"weights: {info.get('mapping') or found}"]
    if ignore_config:
        lines.append("the module's configuration was not read (--ignore-config)")
    elif config_read:
        lines.append(f"read from the module: {', '.join(config_read)}")
    lines.extend(f"note: {n}" for n in config_notes)
    if mp is not None:
        lines.append(_grouping_line(mp, kv_grouping is not None or bool(hook and mp.kv_heads < mp.heads)))
    wnote = window_note(probe, vals.get("_read", {}), window is not None) if probe.outs else None
    lines.extend(warnings + notes + ([wnote] if wnote else []))
    if wnote:
        info["window_measured"] = wnote.removeprefix("note: window: ")
    if probe.precision is not None:
        fits = getattr(probe, "fits_precision", None)
        lines.append(f"working precision: {probe.precision.name} ({probe.precision.how})" + (
            f"; the module computes in {ap.dtype_name(fits)} (precision_as_declared)" if fits is not None else ""))
        if fits is not None:
            info["working_precision"]["fits"] = ap.dtype_name(fits)
    doc = {"check": "attention", "object": name, "inputs": info, "hints": hints, "config_read": config_read}
    return SanityResult("attention", doc, verdict, rows, lines, figures)


def _attach_qk_norms(f, cands, qk_norm, hook) -> str:
    """The module's q/k norms (by attribute name) on every candidate that has none from the hook:
    used by ``--qk-norm`` and by the hints that try it. Returns a note when ``--qk-norm`` is declared
    and no norm weights were found (unit weights, eps 1e-6)."""
    from numerics.attention_mapping import find_qk_norms

    try:
        found = find_qk_norms(f)
    except ValueError as exc:
        if qk_norm is None:
            return ""
        raise UsageError(f"--qk-norm {qk_norm}: {_short(exc, 600)}") from None
    for c in cands:
        if c.q_norm is None and c.k_norm is None and found is not None:
            c.q_norm, c.k_norm = found[0], found[1]
            if qk_norm is not None:
                c.source += f"; QK-norm weights {found[2]}"
        elif qk_norm is not None and (c.q_norm is not None or c.k_norm is not None):
            c.source += "; QK-norm weights from the mapping hook"
    if qk_norm is not None and found is None and not any(c.q_norm is not None or c.k_norm is not None for c in cands):
        for c in cands:
            c.source += "; QK-norm without weights (no q_norm/k_norm found: unit weights, eps 1e-6)"
        return (f"--qk-norm {qk_norm}: no norm modules found by name (q_norm/k_norm, query_norm/key_norm, "
                "q_layernorm/k_layernorm): the reference uses unit weights and eps 1e-6; return them from the mapping "
                "hook as \"q_norm\"/\"k_norm\" if the module has others")
    return ""


_CAUSE_HINTS = {
    "input_unchanged": "the module writes into its input (x.zero_(), x *= c, x[...] = ...): work on a copy "
                       "(x = x.clone()) or out of place",
    "weights_unchanged_by_calls": "a call changes the module's own parameters or buffers (an update, a cache or a "
                                  "counter in forward): the same input then gives another output each time",
    "deterministic": "two calls on the same input differ: randomness in forward (dropout called with training=True, "
                     "torch.rand, sampling) or a nondeterministic kernel; seed or remove it for the check",
    "declared_weights_finite": "the weights the reference is built from are NaN or inf: fix the --mapping hook "
                               "(or tverify_mapping()) to return the module's finite weights",
}


def _preconditions(probe, f, mp, hook, against) -> list:
    """Causes that would otherwise pass for a leak or a mismatch, each checked before any structure
    property: the input left as it was (``input_unchanged``), the module's parameters and buffers
    unchanged by a call (``weights_unchanged_by_calls``), two identical calls giving the same output
    (``deterministic``), and finite declared weights (``declared_weights_finite``)."""
    import torch

    from numerics import attention_probe as ap

    out = []
    T = max([t for t in probe.outs if 2 <= t <= 17] or [min(probe.outs)])
    x64 = probe.xs[T]
    is_mod = isinstance(f, torch.nn.Module)

    def state():
        return {k: v.detach().clone() for k, v in f.state_dict().items()} if is_mod else {}

    def changed_entries(a, b):
        return [k for k in a if k in b and (a[k].shape != b[k].shape or not torch.equal(
            torch.nan_to_num(a[k].double(), nan=1e300), torch.nan_to_num(b[k].double(), nan=1e300)))] + \
            [k for k in set(a) ^ set(b)]

    x = x64.to(dtype=probe.pdt, device=probe.device).clone()
    x_before = x.clone()
    s0 = state()
    o1, _ = ap.call(f, x)
    o1 = o1.detach().clone() if isinstance(o1, torch.Tensor) else o1  # a reused output buffer: the next call writes it
    s1 = state()
    x2 = x_before.clone()
    o2, _ = ap.call(f, x2)
    # the input
    if x.shape != x_before.shape or not torch.equal(torch.nan_to_num(x, nan=1e300), torch.nan_to_num(x_before, nan=1e300)):
        n = int((x != x_before).sum()) if x.shape == x_before.shape else x.numel()
        err = ap._rel(x.double(), x_before.double()) if x.shape == x_before.shape else float("inf")
        out.append(ap.Property("input_unchanged", "fail", err if math.isfinite(err) else float("inf"), 0.0,
                               "the module must not write into its input (exact)",
                               f"after one call, {n} of {x.numel()} input entries at T = {T} differ from what was "
                               "passed in", central=True))
    else:
        out.append(ap.Property("input_unchanged", "pass", 0.0, 0.0, "the module must not write into its input (exact)",
                               f"input at T = {T} unchanged by a call", central=True))
    # two identical calls, and the module's own weights between them
    e, tol, just = None, None, ""
    if isinstance(o1, torch.Tensor) and isinstance(o2, torch.Tensor) and o1.shape == o2.shape:
        a, b = o2.detach().to(device="cpu", dtype=torch.float64, copy=True), o1.detach().to(device="cpu", dtype=torch.float64, copy=True)
        same_nan = torch.isnan(a) & torch.isnan(b)  # NaN where the first call had NaN is the same output
        e = ap._rel(torch.where(same_nan, 0.0, a), torch.where(same_nan, 0.0, b))
        e = e if math.isfinite(e) else float("inf")
        tol = 16 * ap.unit_roundoff(probe.pdt) * (3 * probe.D + T)
        just = f"16·u·(3D+T) = {tol:.3g}: a deterministic computation repeats itself (a reordered GPU sum within rounding)"
    differs = e is not None and not e <= tol
    rule = "a call must leave the parameters and buffers as they were, or at least the output (exact)"
    if is_mod:
        moved = changed_entries(s0, s1)
        what = f"{', '.join(sorted(moved)[:4])}{' …' if len(moved) > 4 else ''}"
        if moved and differs:
            out.append(ap.Property("weights_unchanged_by_calls", "fail", float(len(moved)), 0.0, rule,
                                   f"one call changed {len(moved)} of {len(s0)} state entries ({what}) and the next "
                                   f"call on the same input gave another output (relative difference {e:.3g})",
                                   central=True))
        else:
            out.append(ap.Property("weights_unchanged_by_calls", "pass", 0.0, 0.0, rule,
                                   f"{len(moved)} state entries changed by a call ({what}: a cache?) without changing "
                                   "the output" if moved else f"{len(s0)} parameter/buffer entries unchanged by a call",
                                   central=True))
    if e is not None:
        if out[-1].name == "weights_unchanged_by_calls" and out[-1].status == "fail":
            out.append(ap._skip("deterministic", f"not judged: the module changed its own weights between the two "
                                                 f"calls (relative difference {e:.3g})"))
        else:
            out.append(ap._judge("deterministic", e, tol, just,
                                 f"two calls on the same input at T = {T}: relative difference {e:.3g}", central=True))
    # the declared weights
    if mp is not None and against is None:
        bad = [(nm, int((~torch.isfinite(t)).sum())) for nm, t in (("q", mp.wq), ("q bias", mp.bq), ("k", mp.wk),
                                                                  ("k bias", mp.bk), ("v", mp.wv), ("v bias", mp.bv),
                                                                  ("o", mp.wo), ("o bias", mp.bo))
               if t is not None and not bool(torch.isfinite(t).all())]
        src = "the --mapping hook" if hook else "the weights found by name"
        if bad:
            out.append(ap.Property("declared_weights_finite", "fail", float(sum(n for _, n in bad)), 0.0,
                                   "the reference's weights must be finite",
                                   f"{src} returned non-finite entries: " + ", ".join(f"{nm} {n}" for nm, n in bad),
                                   central=True))
        else:
            out.append(ap.Property("declared_weights_finite", "pass", 0.0, 0.0, "the reference's weights must be finite",
                                   f"{src}: all finite", central=True))
    return out


def _free_scale_residual(probe, m, st, T) -> float:
    """The smallest relative error of candidate ``m`` over logit scales on a log grid (10⁻² … 10² ×
    1/√d_k)."""
    import torch

    from numerics import attention_probe as ap

    s0 = 1 / math.sqrt(m.d_k)
    best = float("inf")
    for g in torch.logspace(-2, 2, 33).tolist():
        with torch.no_grad():
            e = ap._rel(probe.outs[T], probe.reference(probe.xs[T], st=st.variant(scale=s0 * g), m=m))
        best = min(best, e) if math.isfinite(e) else best
    return best


def _properties(probe, props, figures, f, obj, st, mp, H, H_hint, hints, alts, other, device, against, *, gen_seed,
                tick):
    import torch

    from numerics import attention_probe as ap

    Ts = list(probe.outs)
    T_small = max([t for t in Ts if 2 <= t <= 17] or [Ts[0]])
    w = getattr(probe, "weights", {}).get(T_small)
    wn = None
    if w is not None:
        wn, where = ap.exposed_weights(f, probe.xs[T_small], w)
    tick.phase("reference", 0.1, 0.5)
    if mp is not None or against is not None:
        how = (mp.source if mp is not None else "") + (f"; reference: {_decl(st)}" if mp is not None else "")
        if against is not None:
            how = "differential: against the other implementation on the same probes"
        props.append(probe.prop_matches("matches_reference" if against is None else "matches_against", how))
        if mp is not None and against is None:
            props.append(probe.prop_scale())
        elif against is not None:
            props.append(ap._skip("scale_1_over_sqrt_dk", "differential mode: the two implementations are compared "
                                                          "with each other"))
        tick.sub(0.6)
        props.append(probe.prop_gradients())
        if probe.grad_outs:
            props.append(probe.prop_grad_mode_forward())
        if mp is not None and against is None and mp.heads == 1:
            props.append(_convex_mapped(probe, f, st))
        _figures(probe, props, figures, st, mp, T_small, w)
    else:
        _fitted(probe, props, figures, f, st, H, H_hint, hints, gen_seed)
    if wn is not None:  # judged once the working precision is known (a float32 softmax returned as float64)
        import torch

        from numerics.attention_reference import allowed_mask, logits

        work = probe.compute_dtype or (probe.precision.dtype if probe.precision is not None else None)
        T_w = wn.shape[-1]
        props.insert(0, ap.prop_weights_distribution(wn, where, work, allowed_mask(T_w, probe.st)))
        if mp is not None and against is None and probe.m is not None:
            def soft(dt):
                with torch.no_grad():
                    s_, _ = logits(probe.xs[T_small].to(probe.device), probe.m, probe.st, dt)
                    s_ = s_.masked_fill(~allowed_mask(T_w, probe.st, s_.device), float("-inf"))
                    return torch.softmax(s_, -1).double().cpu()
            try:
                ref_w = soft(torch.float64)
                wd = work or probe.pdt
                ref_work = soft(wd) if wd != torch.float64 else None
            except Exception:  # a mapping the logits cannot be formed from: not compared
                ref_w = None
            if ref_w is not None:
                props.insert(1, ap.prop_weights_match(wn, where, ref_w, ref_work, probe.tol_at(T_small, "unit")[0],
                                                      ap.dtype_name(work or probe.pdt)))
    tick.phase("structure", 0.5, 0.9)
    props.extend(probe.prop_mask())
    if st.causal:
        props.append(probe.prop_prefix())
    props.append(probe.prop_batch())
    props.append(probe.prop_batch_size())
    if st.causal or st.window is not None or st.positional != "none":
        why = "causal mask" if st.causal else ("window" if st.window is not None else f"--positional {st.positional}")
        props.append(ap._skip("permutation_equivariance", f"not applicable: {why}"))
    else:
        props.append(probe.prop_permutation())
    props.append(ap.prop_extreme_logits(f, probe.xs[T_small].to(dtype=probe.pdt, device=device), mp, st))
    tol, just = probe.tol_at(T_small, "unit")
    u2 = max(ap.unit_roundoff(other), ap.unit_roundoff(probe.pdt))
    x = probe.xs[T_small].to(dtype=probe.pdt, device=device)

    def other_tol(key: str, xr, L: float) -> tuple[float, str]:
        """The float32 copy against the float64 run: the float32 precision rule on the plain reference
        (the rule matches_reference applies to a float32 module) plus the main run's own tolerance;
        else the analytic bound 16·u·(3D+T)·max(1, |logit|max) in the coarser dtype."""
        main_tol = probe.tol_at(T_small, key)[0]
        if probe.m is not None and against is None and other == torch.float32 and probe.pdt == torch.float64:
            with torch.no_grad():
                e_p = ap._rel(probe.reference(xr, other), probe.reference(xr))
            # twice FlashAttention's factor: correct float32 copies (nn.MultiheadAttention, SDPA; D = 16, 64;
            # 25 draws each) reached 0.78 of the factor-2 rule here, too close to decide by
            rule, rj = ap.tolerance(e_p, probe.D, T_small, L, other, 2 * ap.FACTOR_FORWARD)
            return rule + main_tol, f"{rj}, + the main run's own tolerance {main_tol:.3g}"
        b = 16 * u2 * (3 * probe.D + T_small) * max(1.0, L)
        return max(main_tol, b), f"16·u·(3D+T)·max(1, |logit|max) in the coarser of the two dtypes ({b:.3g})"

    tol2, just2 = other_tol("unit", probe.xs[T_small], probe.L.get((T_small, "unit"), 1.0))
    more = []
    if T_small >= 2 and probe.m is not None:  # the other dtype at large logits too (their size known from the
        # mapped weights): a −30 mask fill only in float32 leaks there
        try:
            c = probe.factor(probe.xs[T_small], "huge")
            L = float(probe.L.get((T_small, "huge")) or probe.logit_max(probe.xs[T_small] * c))
            xh = (probe.xs[T_small] * c).to(dtype=probe.pdt, device=device)
            oh = probe.run(probe.xs[T_small] * c)[1].detach().to(device="cpu", dtype=torch.float64, copy=True)
            th, jh = other_tol("huge", probe.xs[T_small] * c, L)
            if torch.isfinite(oh).all() and th < ap.UNDECIDABLE_TOL:
                more.append((xh, oh, th, f"at the large-logit probe (|logit|max {L:.3g}): {jh}"))
        except Exception:  # the large-logit probe of the main dtype is judged elsewhere
            more = []
    props.append(ap.prop_dtype_device(f, obj, x, probe.outs[T_small], other=other, device=device, tol=tol2, more=more,
                                      just=just2))
    main_ok = all(p.status != "fail" for p in props if p.name in ("matches_reference", "matches_against"))
    if (mp is not None or against is not None) and main_ok:  # else that mismatch is the finding to fix first
        pim = probe.prop_inference_mode()  # last: on a copy, and only a row when that path computes otherwise
        if pim is not None:
            props.append(pim)
        pop = probe.prop_other_paths()  # training mode (no active dropout), a non-contiguous input
        if pop is not None:
            props.append(pop)
    tick.sub(1.0)
    _hints(probe, props, st, mp, alts, hints)
    prec = precision_property(probe, props)
    if prec is not None:
        at = next(i for i, p in enumerate(props) if p.name == "matches_reference")
        props.insert(at + 1, prec)
    _causes_in_context(props)


#: a property's guess at a cause, and what replaces it when another failed property explains it:
#: (property, its guess, the property that explains it, the text instead)
_EXPLAINED = (("prefix_consistency", "(chunk padding, or positions counted from the end?)", "causal_no_future_leak",
               "(the future-token leak that causal_no_future_leak names)"),
              ("gradients_match_reference", "(if the forward pass matches: a custom backward?)", "matches_reference",
               "(the forward pass differs too: see matches_reference)"))


def _causes_in_context(props) -> None:
    """Replace a failed property's guess at its cause when another failed property explains it (a
    leak also breaks the prefix outputs; a wrong forward pass also gives wrong gradients)."""
    import dataclasses

    failed = {p.name for p in props if p.status == "fail"}
    for i, p in enumerate(props):
        for name, guess, by, instead in _EXPLAINED:
            if p.name == name and p.status == "fail" and by in failed and guess in (p.detail or ""):
                props[i] = dataclasses.replace(p, detail=p.detail.replace(guess, instead))


def _convex_mapped(probe, f, st):
    """One head with its projections found: every output row is still a convex combination of the
    value rows (an approximation with positive features, FAVOR+ or linear attention, must keep it;
    a missing normaliser breaks it), checked as without weights."""
    from numerics import attention_probe as ap

    name = "convex_combination_of_values"
    if st.positional in ("learned", "sinusoidal"):
        return ap._skip(name, f"not applicable: --positional {st.positional} adds positions to the values")
    cand = [t for t in probe.outs if 2 <= t <= probe.D]
    if not cand:
        return ap._skip(name, f"no probe length with 2 ≤ T ≤ D = {probe.D}")
    T = max(t for t in cand if t <= 17) if any(t <= 17 for t in cand) else cand[0]
    pc, _ = ap.prop_convex_combination(f, probe.xs[T].to(dtype=probe.pdt, device=probe.device), probe.outs[T])
    return pc


def _figures(probe, props, figures, st, mp, T_small, w):
    """The attention weights (exposed, or the reference's on the module's weights) and the error
    over tolerance of the agreement with the reference at every length and logit scale."""
    import torch

    from numerics.attention_reference import allowed_mask, logits

    if w is not None:
        A = w.detach().to(device="cpu", dtype=torch.float64, copy=True)
        A = (A if A.dim() == 3 else A[:, 0])[0]
        title = "attention weights (exposed, first probe)"
    elif mp is not None:
        with torch.no_grad():
            s_, _ = logits(probe.xs[T_small], mp, st)
            s_ = s_.masked_fill(~allowed_mask(s_.shape[-1], st), float("-inf"))
            A = torch.softmax(s_, -1)[0, 0].double().cpu()
        title = "attention weights (reference on your weights, head 0)"
    else:
        A = None
    if A is not None:
        def _heat(A=A, title=title):
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(4, 3.5))
            im = ax.imshow(A.numpy(), cmap="viridis", vmin=0)
            ax.set_xlabel("key s")
            ax.set_ylabel("query t")
            ax.set_title(title, fontsize=9)
            fig.colorbar(im, ax=ax)
            return fig

        figures["attention_weights"] = _heat
    m = next((p for p in props if p.name in ("matches_reference", "matches_against")), None)
    rows = (m.numbers.get("per_length") if m is not None else None) or []
    if rows:
        def _errs(rows=rows):
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(5, 3.5))
            for key, mk in (("unit", "o"), ("large", "s"), ("huge", "^")):
                pts = [(r["T"], r["error"] / r["tolerance"]) for r in rows
                       if r["probe"] == key and r.get("tolerance") and r["error"] == r["error"]]
                if pts:
                    ax.plot(*zip(*pts), mk + "-", label=f"{key} logits")
            ax.axhline(1.0, color="k", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("sequence length T")
            ax.set_ylabel("error / tolerance")
            ax.set_title("agreement with the reference (≤ 1 passes)", fontsize=9)
            ax.legend(fontsize=8)
            return fig

        figures["error_by_length"] = _errs


def _fitted(probe, props, figures, f, st, H, H_hint, hints, gen_seed):
    """No weights found: the single-head fit (identifiable only for one head without positions)."""
    import torch

    from numerics import attention_probe as ap

    Ts = list(probe.outs)
    scale_why = ("no declared q/k projections: any logit scale is absorbed by the fitted logits; declare the weights "
                 "(--mapping FILE.py:fn or a tverify_mapping() method) to decide it")
    if H != 1 or st.positional != "none" or st.window is not None:
        why = (f"{H} heads" if H != 1 else (f"--positional {st.positional}" if st.positional != "none" else "--window"))
        props.append(ap._skip("convex_combination_of_values", f"not applicable: {why}"))
        props.append(ap._skip("matches_reference", f"{why} and no q/k/v projections found by name: nothing to map "
                                                   "or fit", central=True))
        props.append(ap._skip("scale_1_over_sqrt_dk", scale_why, central=True))
        return
    cand = [t for t in Ts if 2 <= t <= probe.D]
    if not cand:
        props.append(ap._skip("convex_combination_of_values", f"no probe length with 2 ≤ T ≤ D = {probe.D}"))
        props.append(ap._skip("matches_reference", "no probe length at which the weights are identifiable",
                              central=True))
        props.append(ap._skip("scale_1_over_sqrt_dk", scale_why, central=True))
        return
    T = max(t for t in cand if t <= 17) if any(t <= 17 for t in cand) else cand[0]
    x = probe.xs[T].to(dtype=probe.pdt, device=probe.device)
    pc, P = ap.prop_convex_combination(f, x, probe.outs[T])
    if H_hint is None and pc.status == "fail":
        # one head was only assumed: a multi-head module is not a convex combination of its value
        # rows, so the failure says nothing about the module
        props.append(ap._skip("convex_combination_of_values",
                              f"not a single-head convex combination ({pc.detail}); the head count is unknown (a "
                              "multi-head module is not one): give --heads H, or declare the weights"))
        props.append(ap._skip("matches_reference", "no q/k/v projections found by name and the head count is unknown: "
                                                   "nothing to map or fit", central=True))
        props.append(ap._skip("scale_1_over_sqrt_dk", scale_why, central=True))
        return
    if H_hint is None and pc.status != "skip":
        pc.detail += " (assumed single-head: give --heads H for a multi-head module)"
    props.append(pc)
    if P is not None:
        A = P[0].double().cpu()

        def _heat(A=A):
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(4, 3.5))
            im = ax.imshow(A.numpy(), cmap="viridis", vmin=0)
            ax.set_xlabel("key s")
            ax.set_ylabel("query t")
            ax.set_title("attention weights (first probe, recovered)")
            fig.colorbar(im, ax=ax)
            return fig

        figures["attention_weights"] = _heat
    ref, why = None, "single-head weights not recoverable (see convex_combination_of_values)"
    gen = torch.Generator().manual_seed(gen_seed * 7 + 1)
    if P is not None and pc.status == "pass":
        D = probe.D
        n_pairs = T * (T - 1) // 2 if st.causal else T * (T - 1)
        nfit = max(probe.B, math.ceil(2 * (D * D + D) / max(n_pairs, 1)))
        xf = torch.randn(nfit, T, D, generator=gen, dtype=torch.float64).to(dtype=probe.pdt, device=probe.device)
        of, _ = ap.call(f, xf)
        pcf, Pf = ap.prop_convex_combination(f, xf, of)
        if Pf is None:
            why = "weights not recoverable on the fitting probes"
        else:
            ref, why, cond = ap.fit_single_head(f, xf, Pf, causal=st.causal, gen=gen)
    if ref is not None:
        errs = []
        for TT in [t for t in Ts if t <= probe.D]:
            with torch.no_grad():
                r = ref(probe.xs[TT])
            e = ap._rel(probe.outs[TT], r)
            tol, just = probe.tol_at(TT, "unit")
            extra = max(1.0, cond) * math.sqrt(probe.D * probe.D + probe.D)
            errs.append((e / (tol * extra) if math.isfinite(e) else float("inf"), e, tol * extra, just, TT))
        _, e, tol, just, TT = max(errs)
        props.append(ap._judge("matches_reference", e, tol, just + f", × {extra:.3g} (cond of the weighted least-squares "
                               "logit fit × √(#parameters): its forward-error bound)",
                               f"fitted: single-head softmax attention fitted by weighted least squares on {nfit} probe "
                               f"sequences of length {T}, compared on fresh probes (worst at T = {TT})", central=True))
    else:
        fail = "not a softmax" in (why or "") or pc.status == "fail"
        props.append(ap.Property("matches_reference", "fail" if fail else "skip", float("inf") if fail else None, None,
                                 "", why if not pc.status == "fail" else "the outputs are not convex combinations of "
                                                                          "the value rows", central=True))
    props.append(ap._skip("scale_1_over_sqrt_dk", scale_why, central=True))


def _verified(probe, props, st, m, compute_dtype="same") -> bool:
    """A hint's declaration rerun: ``matches_reference`` at every probed length and logit scale, and
    each failed property a declaration can change (``AttentionProbe.rerun``), all hold with it."""
    failed = [p.name for p in props if p.status == "fail"]
    try:
        rerun = probe.rerun(failed, st=st, m=m, compute_dtype=compute_dtype)
    except Exception:  # the module at the rerun's inputs: then the hint is not verified
        return False
    return rerun[0].status == "pass" and all(p.status != "fail" for p in rerun)


VERIFIED = "(verified: with it, every probed length matches)"


def _length_dependence(probe, prefix) -> bool:
    """``prefix_consistency`` failed and, at the longest length, the outputs on a prefix differ from
    the full run's first outputs by an affine map ``α·o + β`` that explains > 90 % of the difference:
    a systematic dependence on the total length (rounding differences are not such a map)."""
    import torch

    if prefix is None or prefix.status != "fail":
        return False
    Ts = [T for T in probe.outs if T >= 4]
    if not Ts:
        return False
    T = max(Ts)
    t = T // 2
    try:
        o = probe.run(probe.xs[T][:, :t])[1].detach().to(device="cpu", dtype=torch.float64, copy=True).reshape(-1)
    except Exception:
        return False
    full = probe.outs[T][:, :t].reshape(-1)
    diff = float((full - o).norm())
    if not diff > 0:
        return False
    A = torch.stack([o, torch.ones_like(o)], 1)
    coef = torch.linalg.lstsq(A, full[:, None]).solution[:, 0]
    resid = float((full - A @ coef).norm())
    return resid < 0.1 * diff


def _hints(probe, props, st, mp, alts, hints):
    """Hints at the likely cause of a failure, each printed only when a rerun with the hinted
    declaration passes (:func:`_verified`); the verdict still judges the declaration given."""
    import torch

    from numerics import attention_probe as ap

    by = {p.name: p for p in props}
    m = by.get("matches_reference")
    if m is not None and m.status == "fail" and mp is not None:
        T_hi = max(probe.outs)
        # a window covering every probed length forbids nothing there: it is "no window" (tried too), and
        # naming one (--window 128 at T ≤ 33) would be an artefact of the probe lengths
        variants = [v for v in _variants(st, mp, alts) if not _covers(v[1], T_hi) or v[1].window == st.window]
        decls: dict = {}
        for label, s2, m2 in variants:  # the first of equal labels: the one the errors were measured for
            decls.setdefault(label, (s2, m2))
        fits = [(r[0], r[1], r[2], "same") for r in probe.variant_errors(variants) if r[0] <= 1.0]
        if (not fits and probe.pdt == torch.float64 and probe.compute_dtype is None and probe.precision is not None
                and probe.precision.dtype == torch.float64):
            # float32 internals (Hugging Face's float32 softmax and RoPE angles) cannot be found by
            # probing when the declaration itself is wrong: judge the variants by the float32 rule too
            fits = [(r[0], r[1], r[2], torch.float32) for r in probe.variant_errors(variants, torch.float32)
                    if r[0] <= 1.0]
        decl = (f"{mp.heads} heads" + (f", {mp.kv_heads} key/value heads" if mp.kv_heads != mp.heads else "")
                + f"; {_decl(st)}")
        explained = by.get("scale_1_over_sqrt_dk") is not None and by["scale_1_over_sqrt_dk"].status == "fail"
        for _, err, label, cd in fits[:3]:  # the best few, each rerun at every length
            s2, m2 = decls[label]
            if _verified(probe, props, s2, m2, cd):
                explained = True
                how = label + (" (and --compute-dtype float32: its internals are float32)" if cd != "same" else "")
                if label == "no window":
                    same = (f"--window {T_hi} or wider" if st.causal else
                            f"a window reaching {T_hi - 1} keys to each side")
                    how = (f"no window (drop --window: the module attends to every key at the lengths probed, T ≤ "
                           f"{T_hi}, where {same} is the same)" + how[len(label):])
                hints.append(f"the module matches the reference with {how} instead of the declaration ({decl}): "
                             f"relative error {err:.3g} {VERIFIED}"
                             + ("; no flag declares it: rotate queries and keys at the same positions"
                                if s2.rope_offset != (0, 0) else
                                _config_contradiction(getattr(probe, "config_items", {}), s2, m2 or mp)))
                break
        work = probe.precision.dtype if probe.precision is not None else probe.pdt
        # a coarser precision, the finest first (a coarser rule admits more), unless a change of declaration
        # or the scale already explains the mismatch (a 1% scale error also fits bfloat16's looser rule)
        # nor when a structural property failed: a computation in lower precision leaks nothing (future and
        # out-of-window keys stay exactly without influence), so it cannot explain a leak
        leak = any(by.get(n) is not None and by[n].status == "fail"
                   for n in ("causal_no_future_leak", "window_respected", "key_padding_respected"))
        # nor when the outputs depend on the total length systematically (the first t outputs on x are a
        # fixed affine map of those on x[:, :t]: a length-dependent scale, not rounding, which a coarser
        # declared precision would only hide)
        leak = leak or _length_dependence(probe, by.get("prefix_consistency"))
        for dt in () if explained or leak else (torch.float32, torch.float16, torch.bfloat16):
            if ap.unit_roundoff(dt) <= ap.unit_roundoff(work):
                continue
            dn = ap.dtype_name(dt)
            pe = m.numbers.get("per_length", [])
            # a cheap screen on the rows measured (the plain reference in dt), then the full rerun
            screen = bool(pe)
            ratios = []
            for r in pe:
                with torch.no_grad():
                    x = probe.xs[r["T"]] * probe.factor(probe.xs[r["T"]], r["probe"])
                    e_h = ap._rel(probe.reference(x, dt), probe.reference(x))
                tol, _ = ap.tolerance(e_h, probe.D, r["T"], r.get("max_logit", 1.0), dt, ap.FACTOR_FORWARD)
                if not r["error"] <= tol:
                    screen = False
                    break
                if e_h > 0:
                    ratios.append(r["error"] / e_h)
            # and the error must look like that precision's rounding somewhere: at least a tenth of the plain
            # reference's own error in it (a QK-norm eps of 1e-5 for 1e-6 errs 0.02× float16's rounding: no
            # hint, or declaring float16 would pass a real difference)
            screen = screen and bool(ratios) and max(ratios) >= 0.1
            if screen and _verified(probe, props, st, mp, dt):
                probe.fits_precision = dt
                hints.append(f"the error fits a {dn} computation (the plain reference in {dn}) {VERIFIED}: if "
                             f"intended, declare --compute-dtype {dn}")
                break
    c = by.get("causal_no_future_leak")
    if c is not None and c.status == "fail" and mp is not None and not any("axes" in h for h in hints):
        res = probe.variant_errors([("swap", st.variant(swap_axes=True), None)])
        if res and res[0][0] <= 1.0 and _verified(probe, [p for p in props if p.name == "matches_reference"],
                                                  st.variant(swap_axes=True), mp):
            hints.append("batch and time axes are mixed: the module reads axis 0 as time (the probe is (batch, T, D)) "
                         "(verified: with the axes swapped, every probed length matches)")
    s = by.get("scale_1_over_sqrt_dk")
    if s is not None and s.status == "fail":
        hints.append(s.detail.split("; ")[-1])


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
              help="RoPE base (--positional rope; default: the module's rope_theta, else 10000).")
@click.option("--rope-dims", type=int, default=None,
              help="Rotated dimensions per head (default: the module's partial_rotary_factor / rotary_pct × head_dim, "
                   "else all of d_k).")
@click.option("--rope-convention", type=click.Choice(["half", "interleaved"]), default=None,
              help="RoPE pairs: rotated halves (Hugging Face, x-transformers) or interleaved (RoFormer, "
                   "rotary-embedding-torch); default: the one that fits.")
@click.option("--softcap", type=float, default=None, metavar="C",
              help="Logit softcapping C·tanh(s/C) before the mask (Gemma 2, x-transformers; default: the module's "
                   "attn_logit_softcapping / logit_softclamp_value).")
@click.option("--qk-norm", type=click.Choice(QK_NORMS), default=None,
              help="A norm on q and k per head before RoPE (Gemma 3, OLMo 2, Qwen3): rms (RMSNorm) or layer "
                   "(LayerNorm); the weights are the module's q_norm/k_norm (found by name) or the mapping hook's.")
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
      tverify check attention --module my_attn.py:CausalSelfAttention --causal --dim 16
      tverify check attention --module llama_block.py:make --causal --positional rope --kv-heads 2
      tverify check attention --module mine.py:Attn --mapping mine.py:weights --json out.json --report attn-report
      tverify check attention --module fused.py:Fast --against fused.py:Reference --causal
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


# ------------------------------------------------------------------------------------------------
# in the check's own process (proofs_checks.sanity._isolate)

CHILD_TASK = "proofs_checks.sanity.attention:child_task"


def child_task(req: dict, obj: Any, arrays: dict) -> dict:
    """In the child: load the ``--module``/``--mapping``/``--against`` specs (or take the API's
    objects), run :func:`run_attention`, return the payload."""
    from proofs_checks.sanity._loader import load_object as _load

    def load_object(spec, option):
        try:
            return _load(spec, option)
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
    else:
        target = load_object(req["module_spec"], "--module")
        if req.get("mapping_spec"):
            hook = load_object(req["mapping_spec"], "--mapping")
            if not callable(hook):
                raise UsageError(f"--mapping: {req['mapping_spec']} is a {type(hook).__name__}, not a function")
            kw["mapping"] = hook
        if req.get("against_spec"):
            kw["against"] = load_object(req["against_spec"], "--against")
    from numerics.attention_mapping import TransformFailed

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
