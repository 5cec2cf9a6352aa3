"""Load a user's object named on the command line: ``FILE.py:NAME`` or ``package.module:NAME``.

Used by ``tverify check attention --module``, ``check icl --model`` and ``check hopfield --module``.
The user's file is imported in-process under a private module name (it is never written to, and
nothing is added to ``sys.path`` beyond the file's own folder, appended last, which stays there for the rest
of the run, so a sibling helper module imports as it would from a script, also when the object is called,
while a ``random.py`` or ``html.py`` beside it never hides the standard library's). Every failure is a
:class:`~proofs_checks.options.UsageError` with one line: a malformed spec, a missing file, an
import that raises (its exception type and message shown, never the traceback), a missing name.

>>> load_object("math:sqrt")(9.0)
3.0
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import itertools
import os
import signal
import sys
import threading
import types
from pathlib import Path
from typing import Any

from proofs_checks.options import UsageError
from theory.validation import printable

__all__ = ["load_object", "describe_exception", "user_code", "UserCodeError", "wrap_user_callable"]

_counter = itertools.count()


def describe_exception(exc: BaseException, limit: int = 300) -> str:
    """``TypeName: message`` on one line of at most ``limit`` characters (a user's exception, shown
    without its traceback; a 100 kB message is cut and says how long it was).

        >>> describe_exception(ValueError("E" * 100000))[-21:]
        '… (100012 characters)'
    """
    from theory.validation import exception_text

    text = exception_text(exc)
    if len(text) <= limit:
        return text
    tail = f"… ({len(text)} characters)"
    return text[:max(limit - len(tail), 0)] + tail


class UserCodeError(UsageError):
    """The user's code exited, was interrupted from inside, or raised: one line, exit 2 (the
    module cannot be probed). Never the tool's own exit status."""


_state = threading.local()  # depth of nested user_code blocks, and whether a real SIGINT arrived


@contextlib.contextmanager
def _defaults_kept(apply: bool = True):
    """:func:`numerics.torch_utils.defaults_kept` where torch is loaded; where the user's code loads it (a module's
    import), torch's own defaults (float32, the CPU) are put back after it (hostile pass 24b F15: a float64 default set
    at import was refused as a replaced ``torch.Storage``)."""
    if "torch" in sys.modules:
        from numerics.torch_utils import defaults_kept

        with defaults_kept(apply):
            yield
        return
    try:
        yield
    finally:
        torch = sys.modules.get("torch")
        if torch is not None:
            with contextlib.suppress(Exception):
                torch.set_default_dtype(torch.float32)
                if getattr(torch, "get_default_device", None) is not None and str(torch.get_default_device()) != "cpu":
                    torch.set_default_device(None)


@contextlib.contextmanager
def user_code(label: str, what: str, exceptions: bool = True, region: bool = False):
    """Run the user's code inside: ``with user_code("--module", "update"): out = f(x)``.

    * ``sys.exit(n)`` (``SystemExit``) becomes a :class:`UserCodeError` "``LABEL: WHAT called
      sys.exit(n)``" (exit 2) — never exit ``n`` as if the check had run;
    * ``KeyboardInterrupt`` *raised by the code* (``raise KeyboardInterrupt``) becomes a
      :class:`UserCodeError` too; a real Ctrl-C from the terminal (a SIGINT received while inside,
      main thread) passes through as ``KeyboardInterrupt`` (exit 130);
    * any other exception (``GeneratorExit``, ``Exception`` subclasses) becomes "``LABEL: WHAT raised
      TypeName: message``" (exit 2), without a traceback;
    * a :class:`~proofs_checks.options.UsageError` (e.g. from a nested boundary) passes through,
      and so does every ``Exception`` when ``exceptions=False`` (for a caller that reports those
      itself, with more context).

    ``region``: the block is a stretch of the check that calls the code through blocks of its own (a module's
    calls), so torch's defaults and float32 settings that the code left are applied in those, not across the
    check's own computations in between (:func:`numerics.torch_utils.defaults_kept`).
    """
    depth = getattr(_state, "depth", 0)
    previous = None
    if depth == 0:
        _state.real = False
        if threading.current_thread() is threading.main_thread():
            def on_sigint(signum, frame):
                _state.real = True
                raise KeyboardInterrupt

            try:
                previous = signal.signal(signal.SIGINT, on_sigint)
            except (ValueError, OSError, TypeError):  # pragma: no cover - not the main interpreter
                previous = None
    _state.depth = depth + 1
    kept = _defaults_kept(apply=not region) if depth == 0 else contextlib.nullcontext()
    try:
        with kept:
            yield
    except UsageError:
        raise
    except KeyboardInterrupt:
        if getattr(_state, "real", False):
            raise
        raise UserCodeError(f"{label}: {what} raised KeyboardInterrupt itself (not a Ctrl-C from the terminal); "
                            "nothing was checked") from None
    except SystemExit as exc:
        raise UserCodeError(f"{label}: {what} called sys.exit({printable(exc.code, repr)}); nothing was checked (the check "
                            "cannot run code that exits)") from None
    except BaseException as exc:  # the user's code: report it, never a traceback
        if not exceptions and isinstance(exc, Exception) or getattr(exc, "tverify_reported_by_caller", False):
            raise  # (a --mapping transform's failure inside the module's probe is the hook's, not the module's: 56a F5)
        raise UserCodeError(f"{label}: {what} raised {describe_exception(exc)}") from None
    finally:
        _state.depth = depth
        if previous is not None:
            try:
                signal.signal(signal.SIGINT, previous)
            except (ValueError, OSError, TypeError):  # pragma: no cover
                pass


def wrap_user_callable(fn, label: str, what: str):
    """``fn`` with every call inside :func:`user_code` (same signature)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with user_code(label, what):
            return fn(*args, **kwargs)

    return call


def _split(spec: str, option: str) -> tuple[str, str]:
    text = (spec or "").strip()
    where, sep, name = text.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"{option}: expected FILE.py:NAME or package.module:NAME, got {spec!r}")
    if len(where) == 1 and where.isalpha():  # "C:thing" is a drive letter, not a spec
        raise UsageError(f"{option}: expected FILE.py:NAME or package.module:NAME, got {spec!r}")
    if not all(part.isidentifier() for part in name.split(".")):
        raise UsageError(f"{option}: {name!r} is not a Python name (in {spec!r})")
    return where, name


#: files imported in this process, by (resolved path, inode, size, modification time): a changed file is
#: imported anew
_IMPORTED: dict[tuple, Any] = {}


class _NoMissingStdlib:
    """A standard module this Python lacks (``winreg`` on Linux, imported in a ``try`` by
    ``mimetypes``) is not looked for in the folders appended for the user's code: the import fails
    as it would without them."""

    missing: frozenset = frozenset()

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is None and name in cls.missing:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _guard_stdlib_names() -> None:
    """Before a user folder joins ``sys.path``: the standard names the standard library here lacks."""
    from importlib.machinery import PathFinder

    if _NoMissingStdlib in sys.meta_path:
        return
    from proofs_checks.guards import _system_folders

    system = _system_folders()[0]
    trusted = [p for p in sys.path if isinstance(p, str) and p and any(
        os.path.realpath(p) == d or os.path.realpath(p).startswith(d + os.sep) for d in system if d != os.sep)]
    _NoMissingStdlib.missing = frozenset(
        n for n in sys.stdlib_module_names
        if n not in sys.builtin_module_names and n not in sys.modules and PathFinder.find_spec(n, trusted) is None)
    at = sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else len(sys.meta_path)
    sys.meta_path.insert(at, _NoMissingStdlib)


#: the functions tverify's comparisons call in the check's process (the user's module runs there too): a module
#: that replaces one (``torch.abs = lambda t: 0 * t``) decides every comparison. Named, not every callable of
#: these namespaces: torch itself rebinds some when a submodule loads (torch._dynamo wraps ``torch.manual_seed``).
_ARITH = ("abs", "max", "amax", "min", "amin", "maximum", "minimum", "sub", "subtract", "add", "mul", "div", "isfinite",
          "isnan", "isinf", "allclose", "isclose", "equal", "eq", "ne", "lt", "le", "gt", "ge", "where", "sum", "mean",
          "any", "all", "nan_to_num", "sqrt", "exp", "log", "matmul", "einsum", "softmax", "norm")
#: the functions the references and the probes' draws are computed with (check icl --model's least squares by
#: ``torch.linalg.pinv``, its k-NN by ``topk``/``gather``/``argsort``): a module replacing ``torch.linalg.pinv`` had an
#: averaging model named least squares, "ok" (hostile pass 8, F6)
_REFERENCES = ("eye", "zeros", "ones", "full", "arange", "linspace", "diag", "outer", "trace", "sign", "argsort",
               "argmin", "take_along_axis", "concatenate", "stack", "tile", "broadcast_to")
#: the torch.Tensor methods the references, probes and comparisons call besides :data:`_ARITH` (found by reading
#: numerics/attention*.py, hopfield, icl, precision and proofs_checks/sanity): a module replacing ``Tensor.transpose``
#: only where attention_reference called it gave the reference its own wrong logit scale, "ok" (hostile pass 10, F3)
_TENSOR_METHODS = ("absolute", "acos", "argmax", "argmin", "argsort", "argwhere", "as_subclass", "bmm", "ceil",
                   "cholesky", "clamp_max", "clamp_min", "clip", "contiguous", "copy_", "cos", "cumprod", "cumsum",
                   "diag", "diag_embed", "diagonal", "expand", "expand_as", "flatten", "flip", "floor", "gather",
                   "inner", "int", "is_complex", "is_contiguous", "is_floating_point", "log10", "log2", "logsumexp",
                   "masked_fill", "median", "moveaxis", "nonzero", "outer", "pow", "qr", "ravel", "repeat",
                   "repeat_interleave", "requires_grad_", "reshape", "round", "rsqrt", "scatter_add_", "sign", "sin",
                   "sort", "split", "square", "squeeze", "std", "swapaxes", "tanh", "tile", "topk", "trace",
                   "transpose", "tril", "triu", "unique", "unsqueeze", "var", "vdot", "view", "permute", "zero_",
                   "new_zeros", "new_ones", "new_full", "new_tensor", "masked_fill_", "softmax", "log_softmax",
                   # the operators the references write (RoPE's ``base ** (-arange / r)``, the masks' ``~`` and ``&=``)
                   "__neg__", "__pos__", "__pow__", "__rpow__", "__radd__", "__rmul__", "__rtruediv__", "__rmatmul__",
                   "__invert__", "__and__", "__or__", "__xor__", "__iand__", "__ior__", "__setitem__", "__iadd__",
                   "__isub__", "__imul__", "__itruediv__", "__floordiv__", "__mod__", "__len__", "__iter__", "__bool__",
                   "__index__", "__int__")
_COMPARED = {
    "torch": _ARITH + ("bmm", "stack", "cat", "tensor", "as_tensor", "from_numpy", "zeros_like", "ones_like", "eye",
                       "zeros", "ones", "full", "full_like", "arange", "diag", "diagonal", "diag_embed", "baddbmm",
                       "logsumexp", "cdist", "relu", "topk", "gather", "sort", "argsort", "nonzero", "unique", "randn",
                       "rand", "randint", "Generator", "randperm", "sin", "cos", "rsqrt", "tril", "triu", "tanh",
                       "argmax", "linspace", "outer", "pow", "square", "clamp", "masked_fill",
                       # the tolerances' unit roundoff and what the probes build (hostile pass 10, F4: a module
                       # replacing torch.finfo by one with eps × 1e9 made a 1e-8 relative error "ok" in float64)
                       "finfo", "iinfo", "empty", "empty_like", "get_default_dtype", "logspace", "no_grad",
                       "enable_grad", "inference_mode", "is_grad_enabled", "is_inference_mode_enabled"),
    "torch.Tensor": _ARITH + ("__abs__", "__sub__", "__rsub__", "__add__", "__mul__", "__truediv__", "__matmul__",
                              "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__float__", "__getitem__",
                              "item", "tolist", "numpy", "double", "float", "to", "cpu", "detach", "clone", "numel",
                              "__getattribute__", "__torch_function__") + _TENSOR_METHODS,  # every method read goes through these
    "torch.linalg": ("norm", "vector_norm", "matrix_norm", "lstsq", "solve", "svd", "eigh", "pinv", "inv", "cholesky",
                     "qr", "eigvalsh", "svdvals"),
    # the one mode let through (torch.set_default_device's): its method replaced decided every comparison while
    # the mode stack held torch's own class (hostile pass 8, F1)
    "torch.utils._device.DeviceContext": ("__torch_function__",),
    "numpy": _ARITH + ("absolute", "asarray", "array", "divide", "multiply") + _REFERENCES + (
        "finfo", "iinfo", "clip", "cos", "sin", "cumsum", "cumprod", "median", "sort", "square", "tril", "triu", "round",
        "repeat", "flip", "moveaxis", "swapaxes", "diagonal", "zeros_like", "ones_like", "vstack", "argwhere",
        "flatnonzero", "nanargmin", "isin", "meshgrid", "logspace", "delete", "ascontiguousarray", "empty", "errstate"),
    "numpy.linalg": ("norm", "lstsq", "solve", "svd", "eigh", "pinv", "inv", "cholesky", "qr", "eigvalsh", "cond"),
    "numpy.random": ("default_rng", "Generator"),
    "math": ("isfinite", "isnan", "isinf", "sqrt", "fabs", "fsum", "exp", "log"),
    # the built-ins the comparisons call (``float(err)``, ``max(...)``): looked up at each call, so a module that
    # rebinds ``builtins.float`` decided them (a leaking module was "ok"; hostile pass 7, F1)
    "builtins": ("float", "int", "abs", "max", "min", "sum", "len", "isinstance", "round", "all", "any", "sorted",
                 "bool", "range", "zip", "enumerate", "getattr"),
}
#: namespaces watched whole, every attribute (not a list of names: a list of the functions the comparisons call
#: missed ``Tensor.transpose`` and ``torch.finfo``, hostile pass 10, F3 and F4)
#: (``torch.autograd``: a replaced ``autograd.grad`` passed a wrong backward; ``json``/``pickle``/``os``: the child
#: sends its results through them, and a replaced ``json.dumps`` rewrote a leak into "ok"; hostile pass 11)
_WHOLE = ("torch", "torch.Tensor", "torch._C.TensorBase", "torch.nn", "torch.nn.functional", "torch.nn.Module",
          "torch.nn.init", "torch.autograd", "torch.func", "torch.linalg", "torch.fft", "torch.special",
          "torch.utils._device.DeviceContext", "numpy", "numpy.linalg", "numpy.random", "numpy.fft", "math", "cmath",
          "builtins", "operator", "json", "json.encoder", "json.encoder.JSONEncoder", "pickle", "os")
#: tverify's own packages: the functions, classes and constants of every module of theirs already loaded (a module
#: replacing ``proofs_checks.sanity.attention.run_attention`` had an honest copy checked in its place, "ok", hostile
#: pass 10 F2), but the module globals tverify's own code rebinds (lazy caches, the last call's record)
_OWN = ("proofs_checks", "numerics", "theory")
_OWN_REBOUND = frozenset({"LAST_UNREAD", "_loaded", "_ARGV", "_L2T", "_LOADER"})
#: the snapshot's key for the torch function/dispatch modes active (a mode sees every torch call on plain tensors)
_MODES = ("torch", "modes")
#: the snapshot's key for the kernels of torch's operators registered from Python (:func:`_aten_kernels`)
_KERNELS = ("torch", "kernels")
#: the snapshot's key for the trace and profile hooks set (:func:`hooks`)
_HOOKS = ("sys", "hooks")


def hooks() -> tuple:
    """The trace and profile hooks of this thread and of threads started from now on, and the tools registered with
    ``sys.monitoring`` (Python 3.12+): a hook sees every call of tverify's own code, with its frame's locals (a
    ``sys.setprofile`` hook rewrote the result dict as it was encoded, hostile pass 13b F4)."""
    out = [sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile()]
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        out += [monitoring.get_tool(i) for i in range(6)]
    return tuple(out)


def clear_hooks(before: tuple) -> None:
    """Put back the hooks of :func:`hooks` as they were in ``before`` (this thread's, threads' to come, the tools
    ``sys.monitoring`` holds)."""
    sys.settrace(before[0])
    sys.setprofile(before[1])
    threading.settrace(before[2])
    threading.setprofile(before[3])
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for i, name in enumerate(before[4:]):
            if name is None and monitoring.get_tool(i) is not None:
                with contextlib.suppress(Exception):
                    monitoring.set_events(i, 0)
                    monitoring.free_tool_id(i)


def _namespace(name: str):
    top = sys.modules.get(name.split(".")[0])
    if top is None:
        return None
    ns = top
    for part in name.split(".")[1:]:
        ns = getattr(ns, part, None)
    return ns


def _modes() -> tuple[str, ...]:
    """The torch function and dispatch modes active in this process (their class names), outside
    ``torch.set_default_device``'s own ``DeviceContext``: a ``TorchFunctionMode`` or ``TorchDispatchMode``
    entered by the user's code and left active sees (and can change) every torch operation the
    comparisons make on plain tensors, with no function of :data:`_COMPARED` replaced."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    out = []
    for length, at in (("_len_torch_function_stack", "_get_function_stack_at"),
                       ("_len_torch_dispatch_stack", "_get_dispatch_stack_at")):
        try:
            n = getattr(torch._C, length)()
            out += [type(getattr(torch._C, at)(i)) for i in range(n)]
        except Exception:  # another torch's internals: nothing to compare
            continue
    own = getattr(sys.modules.get("torch.utils._device"), "DeviceContext", None)
    # the class itself, not its name: a mode of the user's named DeviceContext zeroed subtractions (hostile pass 8)
    return tuple(f"{t.__module__}.{t.__qualname__}" for t in out if own is None or t is not own)


def _aten_kernels() -> frozenset[str]:
    """The kernels registered from Python for torch's own operators (``torch.library``'s record,
    ``aten/OP/KEY``): a ``torch.library.Library("aten", "IMPL")`` kernel for ``sub.Tensor`` changes every
    subtraction the comparisons make, with no function of :data:`_COMPARED` replaced and no mode active."""
    lib = sys.modules.get("torch.library")
    try:
        return frozenset(k for k in getattr(lib, "_impls", ()) if isinstance(k, str) and k.startswith("aten/"))
    except Exception:  # another torch's internals: nothing to compare
        return frozenset()


def function_snapshot() -> dict[tuple[str, str], Any]:
    """The identity of each function of :data:`_COMPARED` (in the namespaces already imported) and the torch
    modes active (:func:`_modes`), taken before the user's code runs in the check's process
    (:func:`replaced_functions`)."""
    if "torch" in sys.modules:  # set_default_device's mode class, loaded on its first use: its method seen as torch's
        with contextlib.suppress(Exception):
            importlib.import_module("torch.utils._device")
        # torch's own vmap decompositions (aten/addr, mse_loss_backward, … /FuncTorchBatched), registered through
        # torch.library on first use (importing flex_attention does it): registered here, they are torch's, not the
        # user's (a correct FlexAttention module was refused as "the code replaced torch's kernel addr")
        for name in ("torch._functorch.predispatch", "torch._functorch.vmap"):
            with contextlib.suppress(Exception):
                getattr(importlib.import_module(name), "lazy_load_decompositions")()
                break
    out: dict[tuple[str, str], Any] = {_MODES: _modes(), _KERNELS: _aten_kernels(), _HOOKS: hooks()}
    for name, attrs in _COMPARED.items():
        ns = _namespace(name)
        if ns is None:
            continue
        for attr in attrs:  # getattr_static: Tensor.abs lives on the C base class; no __getattr__ runs
            v = inspect.getattr_static(ns, attr, None)
            if v is not None:
                out[(name, attr)] = _identity(v)
    for name, ns in _watched_namespaces():
        for attr, v in _attributes(ns):
            if _watched_value(name, attr, v):
                out[(name, attr)] = _identity(v)
    return out


def _attributes(ns: Any) -> list[tuple[str, Any]]:
    """A module's own attributes (its dunders aside: ``__annotations__`` is made on first read); a class's every
    attribute, inherited ones included (``Tensor.transpose`` lives on the C base class: assigning it on
    ``torch.Tensor`` hides that one)."""
    if isinstance(ns, types.ModuleType):
        return [(k, v) for k, v in list(vars(ns).items()) if not (k.startswith("__") and k.endswith("__"))]
    seen: dict[str, Any] = {}
    for klass in getattr(ns, "__mro__", (ns,)):  # the static lookup getattr_static makes, for every name at once
        for k, v in list(vars(klass).items()):
            seen.setdefault(k, v)
    seen.pop("__annotations__", None)
    return list(seen.items())


def _watched_namespaces() -> list[tuple[str, Any]]:
    """:data:`_WHOLE` (those imported) and every module of tverify's own packages loaded in this process, with
    the classes those modules define."""
    out = [(name, ns) for name in _WHOLE if (ns := _namespace(name)) is not None]
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] not in _OWN or not isinstance(mod, types.ModuleType):
            continue
        out.append((name, mod))
        out += [(f"{name}.{k}", v) for k, v in list(vars(mod).items())
                if isinstance(v, type) and getattr(v, "__module__", None) == name]
    return out


def _watched_value(namespace: str, attr: str, v: Any) -> bool:
    if namespace.split(".")[0] not in _OWN:
        return True
    if attr in _OWN_REBOUND or (attr.startswith("__") and attr.endswith("__")):
        return False
    if isinstance(v, (classmethod, staticmethod, property, types.FunctionType, types.BuiltinFunctionType, type,
                      functools.partial)) or (callable(v) and hasattr(v, "__wrapped__")):
        return True  # (a class's other attributes are its state: tverify's own code sets them)
    # a module's numbers, the modules it imported (the ``json`` the result encoder uses: replaced, it rewrote a leak's
    # result into "ok", hostile pass 13b F1) and its immutable constants (names, tables of tuples)
    return isinstance(sys.modules.get(namespace), types.ModuleType) and \
        isinstance(v, (int, float, complex, types.ModuleType, str, bytes, tuple, frozenset))


def _identity(v) -> tuple:
    """The objects that decide what ``v`` does: itself and, for a Python function (a method's, a
    classmethod's), its code, defaults and closure cells' contents — a module that assigns
    ``DeviceContext.__torch_function__.__code__`` changes the function without replacing it (hostile
    pass 9). Kept as objects (compared by identity), so an id is never reused by another."""
    f = getattr(v, "__func__", v) if isinstance(v, (classmethod, staticmethod, types.MethodType)) else v
    if not isinstance(f, types.FunctionType):
        return (v,)
    cells = []
    for cell in f.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(None)
    return (v, f.__code__, f.__defaults__, f.__kwdefaults__, *cells)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


#: the rewrites torch makes of its own attributes on first use, each with the file of torch's that makes it:
#: importing ``torch._dynamo`` (torch.compile, ``use_deterministic_algorithms``) wraps ``torch.manual_seed``;
#: torch.compile instruments ``nn.Module.__init__``/``__setstate__`` (a correct module that compiled itself was
#: refused as "the code replaced torch.manual_seed", hostile pass 11 F5)
_TORCHS_REWRITES = {("torch", "manual_seed"): ("_compile.py",),
                    ("torch.nn.Module", "__init__"): ("_dynamo", "mutation_guard.py"),
                    ("torch.nn.Module", "__setstate__"): ("_dynamo", "mutation_guard.py")}


def _torchs_own_rewrite(where: tuple[str, str], before: Any, now: Any) -> bool:
    """Whether ``now`` is torch's own rewrite of ``where`` (:data:`_TORCHS_REWRITES`): made by the file of torch's
    that makes it, around the very function seen before (its ``__wrapped__`` or a cell of its closure). Any other
    replacement counts, a wrapper torch's decorators make included (``torch.autocast(...)(Tensor.__matmul__)`` was
    taken for torch's own and a bfloat16 module declared float32 passed, hostile pass 12 F4)."""
    if where == ("torch", "Storage"):  # torch.set_default_dtype rebinds it to that dtype's storage class, torch's own
        torch = sys.modules.get("torch")  # (a thread of the code's setting float64 was refused: hostile pass 40b F3c)
        return (torch is not None and isinstance(now, type) and now.__name__.endswith("Storage")
                and getattr(torch, now.__name__, None) is now)
    made_by = _TORCHS_REWRITES.get(where)
    f = getattr(now, "__func__", now)
    code = getattr(f, "__code__", None)
    torch = sys.modules.get("torch")
    if made_by is None or code is None or torch is None:
        return False
    if os.path.abspath(code.co_filename) != os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), *made_by):
        return False
    cells = [c.cell_contents for c in (getattr(f, "__closure__", None) or ()) if _filled(c)]
    return getattr(f, "__wrapped__", None) is before or any(c is before for c in cells)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def replaced_functions(snapshot: dict[tuple[str, str], Any]) -> list[str]:
    """What :func:`function_snapshot` saw that is no longer the same object (:data:`_COMPARED`, :data:`_WHOLE`,
    tverify's own modules), and
    the torch modes the code left active."""
    modes = [f"torch operations (through the torch mode {m} it left active)"  # once per class, entered how often
             for m in dict.fromkeys(_modes()) if m not in snapshot.get(_MODES, ())]
    kernels = [f"torch's kernel {k.split('/', 1)[1]} (registered through torch.library)"
               for k in sorted(_aten_kernels() - snapshot.get(_KERNELS, frozenset()))]
    left = hooks()
    if _HOOKS in snapshot and not _same(left, snapshot[_HOOKS]):
        kernels.append("the trace or profile hook (sys.settrace, sys.setprofile, threading's or sys.monitoring's), "
                       "which it left set")
    now = {name: dict(_attributes(ns)) for name, ns in _watched_namespaces()}
    changed = []
    for (name, attr), ident in snapshot.items():
        if (name, attr) in (_MODES, _KERNELS, _HOOKS):
            continue
        attrs = now.get(name)
        v = attrs.get(attr) if attrs is not None and attr in attrs else \
            inspect.getattr_static(_namespace(name), attr, None)
        if not _same(_identity(v), ident) and not _torchs_own_rewrite((name, attr), ident[0], v):
            changed.append(f"tverify's own {name}.{attr}" if name.split(".")[0] in _OWN else f"{name}.{attr}")
    return modes + kernels + list(dict.fromkeys(changed))


def _import_file(path: Path, option: str, shown: str | None = None):
    """``path`` imported as a module of its own; messages name it as the user wrote it (``shown``)."""
    shown = str(path) if shown is None else shown
    try:
        exists, is_file = path.exists(), path.is_file()
    except (OSError, ValueError) as exc:  # a name over 255 bytes: File name too long, a traceback (hostile pass 14b F5)
        raise UsageError(f"{option}: cannot use {shown[:80]!r} as a file: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    if not exists:
        raise UsageError(f"{option}: file not found: {shown}")
    if not is_file:
        raise UsageError(f"{option}: not a file: {shown}")
    if path.suffix != ".py":
        raise UsageError(f"{option}: {shown} is not a Python file (.py)")
    try:
        st = path.resolve().stat()
        key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _IMPORTED:
        # one file named by several options (--module F.py:A --against F.py:B) is one namespace: objects
        # it builds at import time (shared weights) are the same for both, as in a Python session
        return _IMPORTED[key]
    mod_name = f"_tverify_user_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - .py files always have a loader
        raise UsageError(f"{option}: cannot import {shown}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:  # last: the standard library and installed packages first (an html.py there is not `import html`)
        _guard_stdlib_names()
        sys.path.append(folder)
    if folder not in _USER_FOLDERS:
        _USER_FOLDERS.append(folder)
    sys.modules[mod_name] = module
    try:
        with user_code(option, f"importing {shown}"), _own_siblings(folder):
            spec.loader.exec_module(module)
    except UsageError:
        sys.modules.pop(mod_name, None)
        raise
    # the folder stays on sys.path for the rest of the run: a factory or forward() that imports a
    # sibling module when it is called (not only at import time) must find it
    if key is not None:
        _IMPORTED[key] = module
    return module


#: the folders of the files loaded so far (each appended to ``sys.path``), in the order they were loaded
_USER_FOLDERS: list[str] = []


def _origin(module: Any) -> str | None:
    """The file ``module`` was loaded from, read from its own namespace: never through a module's ``__getattr__`` (a
    lazy module registered by the user's code raised there, and the other file was blamed: hostile pass 57a F4)."""
    try:
        ns = object.__getattribute__(module, "__dict__")
    except Exception:  # noqa: BLE001 - not a module object at all
        return None
    f = ns.get("__file__") if isinstance(ns, dict) else None
    return f if isinstance(f, str) else None


class _FolderFirst:
    """A meta path finder, in place while a file of ``folder`` is imported: a top-level name that ``folder`` itself
    holds (``name.py`` or a package ``name/``) and the standard library and installed packages do not, is found in
    ``folder`` first, as a script's own folder is first on its path."""

    def __init__(self, folder: str):
        from importlib.machinery import PathFinder

        from proofs_checks.guards import _system_folders

        system = _system_folders()[0]
        self.folder, self._finder = folder, PathFinder
        self._trusted = [p for p in sys.path if isinstance(p, str) and p and any(
            os.path.realpath(p) == d or os.path.realpath(p).startswith(d + os.sep) for d in system if d != os.sep)]

    def holds(self, name: str) -> bool:
        if "." in name or not name.isidentifier():
            return False
        here = os.path.isfile(os.path.join(self.folder, name + ".py")) or \
            os.path.isfile(os.path.join(self.folder, name, "__init__.py"))
        return here and self._finder.find_spec(name, self._trusted) is None

    def find_spec(self, name, path=None, target=None):
        if path is None and self.holds(name):
            return self._finder.find_spec(name, [self.folder], target)
        return None


@contextlib.contextmanager
def _own_siblings(folder: str):
    """While a file of ``folder`` is imported: a sibling module it imports is its own folder's, never the module of the
    same name that a file of another folder loaded before it (``--module v1/m.py:M --against v2/n.py:N``, each folder
    with its own ``base.py``: v2's ``from base import Base`` got v1's, and the two implementations compared were one,
    "ok"; or the same class, refused as "the same file and name": hostile pass 56a F3, F4). Only the names the folder
    itself holds are concerned: every other import (the module under test by its name, a library, a folder the file
    puts on ``sys.path``) is Python's as before, and ``sys.path`` is left as the file leaves it (57a F1–F3). Afterwards
    the other folder's modules are put back in ``sys.modules``; the new file keeps the ones it bound."""
    if not any(f != folder for f in _USER_FOLDERS):
        yield
        return
    first = _FolderFirst(folder)
    taken = {}
    for n, m in list(sys.modules.items()):
        origin = _origin(m)
        if first.holds(n.split(".")[0]) and not (origin and os.path.realpath(origin).startswith(folder + os.sep)):
            taken[n] = sys.modules.pop(n)
    sys.meta_path.insert(0, first)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(first)
        for n, m in taken.items():
            sys.modules[n] = m  # (the new file's module of the same name stays bound in the new file)


def _import_module(name: str, option: str):
    with user_code(option, f"importing {name}"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                raise UsageError(f"{option}: no module named {name!r}{_as_file_hint(name)}") from None
            raise


def _as_file_hint(name: str, attr: str = "NAME") -> str:
    """``; give the file: NAME.py:…`` where the command's folder holds ``NAME.py`` (a module name is looked up on
    Python's path, which holds no working folder: 47a F8)."""
    f = name.replace(".", os.sep) + ".py"
    return f" (the folder holds {f}: name the file, {f}:{attr})" if os.path.isfile(f) else ""


def load_object(spec: str, option: str = "--module", base: str | None = None) -> Any:
    """The object ``NAME`` (dotted attribute paths allowed) from ``FILE.py`` or from an importable
    module. ``option`` names the command-line option in error messages; a relative ``FILE.py`` is found from
    ``base`` when given (the folder the command ran in: a module that changes folder at its import made a relative
    ``--mapping``/``--against`` file another one, hostile pass 46a F5), else from the current folder."""
    where, name = _split(spec, option)
    is_file = where.endswith(".py") or "/" in where or "\\" in where
    path = Path(base) / where if base is not None and is_file and not os.path.isabs(where) else Path(where)
    module = _import_file(path, option, where) if is_file else _import_module(where, option)
    obj: Any = module
    for part in name.split("."):
        try:
            with user_code(option, f"looking up {name!r} in {where}"):
                obj = getattr(obj, part)
        except UserCodeError as exc:
            if "AttributeError" in str(exc):
                origin = getattr(module, "__file__", None)  # which file that name imported (a standard module's?)
                shown = f" (imported from {origin})" if origin and not is_file else ""
                raise UsageError(f"{option}: {where}{shown} has no name {name!r}"
                                 f"{_as_file_hint(where, name) if not is_file else ''}") from None
            raise
    return obj
