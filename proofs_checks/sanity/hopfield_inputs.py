"""The inputs of ``tverify check hopfield`` (:mod:`proofs_checks.sanity.hopfield`), validated once at the edge: the
patterns file or array (``(N, d)``, real, finite, ``N ≥ 2``), β, the user's update as an object to call (a class
instantiated, a module copied, cast to float64 and put in eval mode), the declared working precision of that update,
and the memory and time the check's sizes need."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import numpy as np

from proofs_checks.options import UsageError

#: Patterns per chunk of the batched Theorem-5 computation (memory ∝ chunk·N·d).
CHUNK = 64


def load_patterns(path: str, option: str = "--patterns", max_memory: float | None = None) -> np.ndarray:
    """The ``(N, d)`` float64 patterns in a ``.npy`` or ``.pt`` file; one-line errors (UsageError).
    The ``.npy`` header (shape, dtype) and the ``.pt`` archive's sizes are checked before loading,
    against ``max_memory`` GB (default: half the available memory)."""
    from proofs_checks import parsing
    from theory.validation import InputError

    p = Path(path)
    try:
        if not p.exists():
            raise UsageError(f"{option}: file not found: {path}")
        if p.is_dir():
            raise UsageError(f"{option}: {path} is a directory, not a file")
        if p.suffix == ".npy":
            shape, _ = parsing.npy_header(p, option, max_memory)
            if len(shape) != 2:
                raise UsageError(f"{option}: {path} must hold an (N, d) array (patterns as rows), got shape {shape}")
            a = parsing.load_npy(p, option, max_memory)
        elif p.suffix in (".pt", ".pth"):
            obj = parsing.load_torch_file(p, option, max_memory)
            if isinstance(obj, dict):
                tensors = {k: v for k, v in obj.items() if hasattr(v, "shape")}
                pick = obj.get("patterns", obj.get("X")) if ("patterns" in obj or "X" in obj) else (
                    next(iter(tensors.values())) if len(tensors) == 1 else None)
                if pick is None:
                    raise UsageError(f"{option}: {path} holds a dict; name the tensor 'patterns' (keys: "
                                     f"{', '.join(map(str, obj)) or 'none'})")
                obj = pick
            if not hasattr(obj, "shape"):
                raise UsageError(f"{option}: {path} holds a {type(obj).__name__}, not a tensor")
            if len(tuple(obj.shape)) != 2:
                raise UsageError(f"{option}: {path} must hold an (N, d) array (patterns as rows), got shape "
                                 f"{tuple(obj.shape)}")
            a = parsing.tensor_to_numpy(obj, option, f"the tensor in {path}")
        else:
            raise UsageError(f"{option}: must be a .npy or .pt file, got {path}")
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{option}: cannot read {path}: {exc.strerror or exc}") from None
    return patterns_array(a, option, path)


def patterns_array(a: Any, option: str = "patterns", where: str = "the array") -> np.ndarray:
    """``a`` as the ``(N, d)`` float64 patterns, with the checks of :func:`load_patterns` (the Python
    API's arrays get the command line's: real numbers, two dimensions, finite, at least 2 rows). A masked array is
    refused: its mask would be dropped silently, its hidden values judged (hostile pass 61a, a note)."""
    if isinstance(a, np.ma.MaskedArray):
        raise UsageError(f"{option}: a masked array: its mask would be dropped and the values under it judged; pass "
                         "the patterns you mean as a plain array (e.g. a.compressed() rows, or a.filled(...))")
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # a torch tensor (one that requires grad too): its values
        try:
            a = a.detach().cpu()
            if str(a.dtype) == "torch.bfloat16":  # no NumPy dtype: widened exactly (hostile pass 15b N3)
                a = a.float()
            a = a.numpy()
        except Exception as exc:
            raise UsageError(f"{option}: a tensor whose values cannot be read as numbers: {exc}") from None
    try:
        a = np.asarray(a)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UsageError(f"{option}: need an (N, d) array of real numbers: {' '.join(str(exc).split())[:200]}") from None
    if a.dtype == object:
        raise UsageError(f"{option}: {where} holds Python objects (dtype object), not numbers")
    if a.dtype.kind == "c":
        raise UsageError(f"{option}: {where} is complex (dtype {a.dtype}); a real array is required")
    if a.dtype.kind not in "biuf":
        raise UsageError(f"{option}: {where} holds {a.dtype} values; expected real numbers")
    if a.ndim != 2:
        raise UsageError(f"{option}: {where} must hold an (N, d) array (patterns as rows), got shape {a.shape}")
    if a.size == 0:
        raise UsageError(f"{option}: {where} is empty (shape {a.shape})")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        raise UsageError(f"{option}: {where} has non-finite entries (first at pattern {bad[0]}, coordinate {bad[1]})")
    if a.shape[0] < 2:
        raise UsageError(f"{option}: {where} holds {a.shape[0]} pattern; the separation needs at least 2")
    return a


def estimate_bytes(N: int, d: int) -> float:
    """Peak memory of :func:`run_hopfield` for ``N`` patterns in dimension ``d``: the ``(N, N)``
    Gram matrix, its masked copy, the pairwise distances and their mask (four ``N²`` float64
    arrays), the chunked Theorem-5 batch ``CHUNK·N·d`` (twice), and ``O((N+16)·d)`` states along
    the energy and fixed-point iterations (a dozen copies)."""
    f8 = 8.0
    return f8 * (4.0 * N * N + 3.0 * CHUNK * N * d + 12.0 * (2 * N + 16) * d + 32.0 * N)


def estimate_seconds(N: int, d: int, flops: float = 2e9) -> float:
    """An upper estimate of :func:`run_hopfield`'s time: up to 500 fixed-point and 20 energy updates
    of the ``2N + 16`` states, each ``O(states · N · d)``, at ``flops`` per second."""
    return 4.0 * 520 * (2 * N + 16) * N * d / flops + 4.0 * N * N / flops * 50


def check_sizes(P: np.ndarray, beta: float, max_memory: float | None) -> None:
    """Argument validation before :func:`run_hopfield`: the memory its sizes need, a β·M² of at most 1e300 (the
    check's logits, whose sums and differences need headroom below float64's largest), and a
    1/β that float64 can hold (the energy divides by β)."""
    from proofs_checks.guards import require_memory

    big = float(np.abs(P).max())
    M = big * float(np.linalg.norm(P / big, axis=1).max()) if big > 0 else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = float(beta) * M * M
    if not (math.isfinite(scaled) and scaled <= 1e300):
        raise UsageError(f"--beta {beta:g} with patterns of norm up to M = {M:.3g}: β·M² = {scaled:.3g} is above "
                         "1e300, the largest logit the check works with (its sums and differences of logits and "
                         "energies need headroom below float64's largest, 1.8e308); rescale the patterns or lower "
                         "--beta")  # (it said float64's range ended at 1e300 and the update would overflow: 57b F4)
    if float(beta) < 1e-300:  # the energy's 1/β·(lse − log N) terms: 1/β itself leaves float64's range
        raise UsageError(f"--beta {beta:g}: 1/β = {1 / float(beta) if beta > 0 else math.inf:.3g} leaves float64's "
                         "range (above 1e300), so the built-in energy E = −lse(β, Xᵀξ) + ½ξᵀξ + … would overflow "
                         "(no finding about your update); raise --beta to at least 1e-300")
    N, d = P.shape
    require_memory(estimate_bytes(N, d), max_memory,
                   f"check hopfield on {N} patterns in d = {d} (four {N}×{N} float64 matrices: Gram, distances)",
                   "use fewer patterns")


def beta_value(beta, option: str = "--beta") -> float:
    """The one rule for β, at the edge (the command's ``--beta``, the API's ``beta``, :func:`run_hopfield`):
    a positive finite real number (a bool is not one)."""
    import numbers

    real = isinstance(beta, numbers.Real) and not isinstance(beta, bool)
    if not real or not (math.isfinite(beta) and beta > 0):  # said as a float: the flag's 0 is the keyword's 0
        raise UsageError(f"{option}: must be a positive finite number, got {float(beta) if real else beta!r}")
    return float(beta)


def compute_dtype_value(compute_dtype, module_given: bool, option: str = "--compute-dtype"):
    """The declared working precision of the user's update (``None``: undeclared, judged at the inputs'
    float64); it goes with a module only (the built-in update computes in float64)."""
    from numerics import precision as npr

    try:
        declared = npr.parse_dtype(compute_dtype)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if compute_dtype is not None and not module_given:
        raise UsageError(f"{option} goes with --module (the built-in update computes in float64)")
    return declared


def _update_fn(obj: Any, label: str, P: Any = None, beta: float = 1.0):
    """``(call(xi) -> new, description)`` for the user's object (see the module docstring)."""
    import torch

    made = inspect.isclass(obj)
    if made:
        from proofs_checks.sanity._loader import user_code

        with user_code(label, f"{obj.__name__}()"):
            obj = obj()
    if not callable(obj):
        raise UsageError(f"{label}: {type(obj).__name__} is not callable")
    target = obj.forward if isinstance(obj, torch.nn.Module) else obj
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    three = len(params) >= 3
    if isinstance(obj, torch.nn.Module):
        import copy

        from proofs_checks.sanity._loader import user_code

        if not made:  # the caller's own module (the API in its process): a copy is cast and put in eval mode, the
            original = obj  # caller's is left as it was (44a F18)
            with user_code(label, f"copying {type(obj).__name__}"):
                obj = copy.deepcopy(obj)
            if P is not None:  # a copy that updates otherwise than the object is refused (48a F8)
                _faithful_copy(original, label, P, beta, three)
        with user_code(label, f"reading {type(obj).__name__}'s parameters"):  # said: the copy judged computes in
            low = sorted({str(t.dtype).replace("torch.", "") for t in (*obj.parameters(), *obj.buffers())  # float64
                          if t.is_floating_point() and t.dtype != torch.float64})  # (44a F19)
        # in eval mode, as check attention and check icl --model judge a module: a fresh module's dropout made a
        # correct update "not the modern Hopfield update" (hostile pass 44a F16)
        with user_code(label, f"{type(obj).__name__}.double()"):  # the module's own code (_apply, hooks)
            obj = obj.double()
        with user_code(label, f"{type(obj).__name__}.eval()"):
            obj.eval()
        return obj, three, low
    return obj, three, []


def _faithful_copy(original: Any, label: str, P: Any, beta: float, three: bool) -> None:
    """The object and a copy called alike on the first two patterns as states, in the module's own dtype:
    :func:`proofs_checks.sanity._copies.refuse_unfaithful_copy`."""
    import torch

    from proofs_checks.sanity._copies import refuse_unfaithful_copy

    p = next((t for t in original.parameters() if t.is_floating_point()), None)
    dt = p.dtype if p is not None else torch.float64
    pats = torch.as_tensor(P).to(dtype=dt)
    xi = pats[:2].clone()

    def call(m):
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                return m(xi.clone(), pats.clone(), beta) if three else m(xi.clone())
        except (Exception, SystemExit):  # noqa: BLE001 - the check's own calls say what it raises
            return None

    refuse_unfaithful_copy(original, [call], label, type(original).__name__)
