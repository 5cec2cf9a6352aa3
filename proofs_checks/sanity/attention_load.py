"""``check attention``, stage *load*: the user's object made callable (a class or factory
instantiated with the seed, lazy projections materialised), its model dimension, and calls into the
user's code wrapped so that what it raises is one line."""

from __future__ import annotations

import inspect
from typing import Any, Callable
from proofs_checks.options import UsageError


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


def _user_call(fn: Callable, label: str, region: bool = False):
    """Call the user's code: ``sys.exit`` or a ``KeyboardInterrupt`` raised inside it is a usage
    error (exit 2), never the tool's exit; other exceptions pass through to be reported. ``region``: ``fn`` is a stretch
    of the check calling the module through :func:`numerics.attention_rules.call` (see ``user_code``)."""
    from proofs_checks.sanity._loader import user_code

    with user_code(label, "the object (while being probed)", exceptions=False, region=region):
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
