"""Python API: the ``tverify check`` commands and ``tverify run`` as functions returning result
objects (the same ones the CLI prints), for notebooks, scripts and tests.

Every function returns an object with ``ok`` / ``outcome`` / ``exit_code``, ``to_json()`` (what
``--json`` writes), ``str()`` (a text table) and ``_repr_html_`` (a table in a notebook). Bad input
raises :class:`theory.validation.InputError` (a ``ValueError``) with the one-line message the CLI
prints, in the function's words: its keyword arguments where the command names flags (``heads=3``
for ``--heads 3``, ``seq_len`` for ``--seq-len``); a number given as a string (``heads="2"``,
``timeout="10"``) is the wrong type, never converted. A property violation is a result with
``ok == False``, never an exception.

Heavy libraries (torch, cvxpy, SymPy) are imported on first call.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from proofs_checks.api_args import (_array, _as_value_errors, _attention_lengths, _attention_window, _flag,  # noqa: F401
                                    _isolation, _keywords, _memory, _mode, _numbers, _own_imports, _refuse_unknown,
                                    inspect_params)

__all__ = ["check_attention", "check_icl_model", "check_hopfield", "check_att_svm", "check_lyapunov", "run_claims",
           "ClaimsRun"]


#: The command-line spelling of the flags without a keyword of their own (``check_attention(obj,
#: quick=True)`` is ``mode="quick"``).
_ATTENTION_ALIASES = {"quick": 'mode="quick"', "full": 'mode="full"', "module": "obj (the first argument)",
                      "module_spec": "obj (the first argument)", "mapping_spec": "mapping", "against_spec": "against",
                      "no_progress": "progress=False", "json_path": "result.to_json()", "report_dir": "the command's "
                      "--report", "rope_theta": "rope_base", "sliding_window": "window", "num_heads": "heads",
                      "num_key_value_heads": "kv_heads", "n_kv_heads": "kv_heads"}


def check_attention(obj: Any, *, causal: bool = False, window: str | int | tuple | None = None,
                    positional: str = "none", rope_base: float | None = None, rope_dims: int | None = None,
                    rope_convention: str | None = None, softcap: float | None = None, qk_norm: str | None = None,
                    kv_grouping: str | None = None, heads: int | None = None, kv_heads: int | None = None,
                    dim: int | None = None, dtype: str = "float64", compute_dtype: str | None = None,
                    device: str = "cpu", seq_len: str | list | None = None, mode: str = "default", seed: int = 0,
                    mapping: Any = None, against: Any = None, mask_convention: str | None = None,
                    name: str | None = None, max_memory: float | None = None, progress: bool = False,
                    ignore_config: bool = False, scale: float | None = None, isolate: bool = True,
                    timeout: float | None = None, **unknown):
    """``tverify check attention`` on ``obj`` (a module, class, factory or function mapping
    ``(batch, T, D)`` to ``(batch, T, D)``; see :mod:`proofs_checks.sanity.attention` and
    ``docs/check-attention.md``). Returns a :class:`~proofs_checks.sanity._common.SanityResult` whose
    ``properties`` name each check. The keyword arguments are the command's options, typed as
    them: ``causal``; ``window`` ("W" or "L,R", an int W or a pair); ``positional`` (none, learned,
    sinusoidal, rope, alibi); ``rope_base``, ``rope_dims``, ``rope_convention`` (half,
    interleaved); ``softcap``; ``qk_norm`` (rms, layer); ``kv_grouping`` (hf, tiled); ``heads``,
    ``kv_heads``, ``dim``; ``dtype`` (float64, float32), ``compute_dtype``; ``device``;
    ``seq_len`` ("1,5,300" or a list of ints); ``mode`` (quick, default, full); ``seed``; ``scale`` (the
    factor the logits q·k are multiplied by, declared instead of 1/√d_k: GPT-2's layer-index scaling,
    Granite's attention_multiplier, T5's 1);
    ``mapping`` (a function of the module returning its weights, or that dict); ``against`` (a
    second implementation); ``mask_convention`` (keep, drop, additive); ``name`` (the label in the
    output); ``max_memory`` (GB); ``progress``; ``ignore_config`` (do not read the module's configuration:
    by default its ``rope_theta``, ``sliding_window``, softcap and ``is_causal`` fill what is not given,
    ``rope_base=None`` meaning the module's else 10000, and a given value wins over them: the difference
    is reported; docs/check-attention.md). Any other keyword, or a value of the wrong type,
    raises :class:`~theory.validation.InputError` with one line naming the valid ones
    (``quick=True`` is ``mode="quick"``); a declared value the check cannot use (``rope_base=0.5``)
    raises the line the command and the pytest fixture give, naming flag and keyword
    (``--rope-base (rope_base=): …``). Numbers are typed: ``heads="2"``, ``timeout="10"`` or
    ``max_memory="1"`` (a string) is the wrong type, not converted, as ``causal="no"`` is not
    ``True`` and ``positional=True`` is no scheme. Error messages name these keywords where the
    command's name its flags (``heads=3: the projections found …`` for ``--heads 3: …``).

    ``obj`` (and ``mapping``, ``against``) run in a child process (copied there with cloudpickle;
    :mod:`proofs_checks.sanity._isolate`): if it ends that process (``os._exit``, a signal, a crash),
    passes ``timeout`` seconds or the memory limit (``max_memory`` GB), this raises
    :class:`~theory.validation.InputError` (one line) — never a result. ``isolate=False`` runs it in
    this process instead (for a debugger), without that protection. Figures are drawn only by the
    command's ``--report``.

        >>> import torch
        >>> class Attn(torch.nn.Module):
        ...     def __init__(self, dim=8):
        ...         super().__init__()
        ...         self.mha = torch.nn.MultiheadAttention(dim, 2, batch_first=True)
        ...     def forward(self, x):
        ...         return self.mha(x, x, x, need_weights=False)[0]
        >>> r = check_attention(Attn(), mode="quick")
        >>> r.ok, r.failed
        (True, [])
        >>> r.to_json()["properties"][0]["name"]
        'finite_output'
        >>> check_attention(Attn(), quick=True)
        Traceback (most recent call last):
        ...
        theory.validation.InputError: check_attention: unknown keyword argument 'quick' (use mode="quick"); valid: causal, window, positional, rope_base, rope_dims, rope_convention, softcap, qk_norm, kv_grouping, heads, kv_heads, dim, dtype, compute_dtype, device, seq_len, mode, seed, mapping, against, mask_convention, name, max_memory, progress, ignore_config, scale, isolate, timeout
    """
    _own_imports("check_attention")
    given = {k: v for k, v in locals().items() if k not in ("obj", "unknown")}
    from proofs_checks.sanity.attention import run_attention

    alias = "; ".join(f"use {_ATTENTION_ALIASES[b]}" for b in sorted(unknown) if b in _ATTENTION_ALIASES)
    _refuse_unknown(check_attention, unknown, ("obj",), f" ({alias})" if alias else "")
    with _as_value_errors(check_attention):
        args, timeout = _attention_args(obj, given)
        missing = set(args) - set(inspect_params(run_attention))
        assert not missing, missing  # the API and the check agree on their keywords
        if not isolate:
            return run_attention(obj, **args)
        from proofs_checks.sanity import _isolate

        from proofs_checks.sanity import attention

        payload = _isolate.run_isolated(attention.CHILD_TASK, {}, label="obj", what="check_attention",
                                        obj={"obj": obj, "kwargs": args}, timeout=timeout,
                                        max_memory=max_memory, progress=bool(progress))
        return attention.rebuild(payload)


def _attention_args(obj: Any, given: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """:func:`check_attention`'s keywords validated (types, choices, the device, ``against`` and ``mapping``), and the
    declaration built once from them by the function the command uses: ``(run_attention's keywords, timeout)``."""
    from theory.validation import InputError

    names = ("causal window positional rope_base rope_dims rope_convention softcap qk_norm kv_grouping heads kv_heads dim "
             "dtype compute_dtype device seq_len mode seed mapping against mask_convention name max_memory progress "
             "ignore_config scale isolate timeout").split()
    (causal, window, positional, rope_base, rope_dims, rope_convention, softcap, qk_norm, kv_grouping, heads, kv_heads,
     dim, dtype, compute_dtype, device, seq_len, mode, seed, mapping, against, mask_convention, name, max_memory,
     progress, ignore_config, scale, isolate, timeout) = (given[k] for k in names)
    _flag("check_attention", "causal", causal)
    _flag("check_attention", "progress", progress)
    _flag("check_attention", "ignore_config", ignore_config)
    timeout = _isolation("check_attention", isolate, timeout)
    _numbers("check_attention", ints=dict(heads=heads, kv_heads=kv_heads, dim=dim, rope_dims=rope_dims, seed=seed),
             reals=dict(softcap=softcap, rope_base=rope_base, scale=scale))
    # numpy integers and floats are numbers: taken as Python's (np.int64(2) is heads=2)
    heads, kv_heads, dim, rope_dims, seed = (None if v is None else int(v)
                                             for v in (heads, kv_heads, dim, rope_dims, seed))
    softcap, rope_base, scale = (None if v is None else float(v) for v in (softcap, rope_base, scale))
    _memory("check_attention", max_memory)
    for nm, v in (("mode", mode), ("dtype", dtype), ("device", device)):
        if not isinstance(v, str):
            raise InputError(f"check_attention: {nm} must be a string, got {v!r}")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):  # "meta", "mps", "cuda:x": a child traceback before
        raise InputError(f"check_attention: device={device!r}: the checks compute on \"cpu\" or \"cuda\" "
                         "(\"cuda:N\"), on numbers they can compare")
    if device.split(":")[0] == "cuda":
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            raise InputError(f"check_attention: device={device!r}: torch sees no CUDA device on this machine "
                             "(use device=\"cpu\")")
    if isinstance(against, (str, bytes, os.PathLike)):
        raise InputError(f"check_attention: against must be a module, class or function (the second "
                         f"implementation itself), got the string {str(against)!r:.80}: FILE.py:NAME is the "
                         f"command's --against; import it and pass the object")
    if against is not None and against is obj:  # 0 by construction (hostile pass 7, F7)
        raise InputError("check_attention: against is obj itself: the differential comparison could not reject "
                         "anything; pass a second implementation")
    if isinstance(mapping, (str, bytes, os.PathLike)):
        raise InputError(f"check_attention: mapping must be a function of the module or a dict of its weights, "
                         f"got the string {str(mapping)!r:.80}: a 'FILE.py:NAME' string is the command line's "
                         f"form; import the object and pass it")
    if isinstance(positional, bool) or (positional is not None and not isinstance(positional, str)):
        raise InputError(f"check_attention: positional must be a scheme's name (none, learned, sinusoidal, rope, "
                         f"alibi), got {positional!r} (of type {type(positional).__name__})")
    window = _attention_window(window)
    seq_len = _attention_lengths(seq_len)
    for nm, v, choices in (("positional", positional, None), ("qk_norm", qk_norm, ("rms", "layer")),
                           ("kv_grouping", kv_grouping, ("hf", "tiled")),
                           ("rope_convention", rope_convention, ("half", "interleaved")),
                           ("mask_convention", mask_convention, ("keep", "drop", "additive")),
                           ("compute_dtype", compute_dtype, ("float64", "float32", "bfloat16", "float16")),
                           ("dtype", dtype, ("float64", "float32")), ("mode", mode, ("quick", "default", "full"))):
        if choices is not None and v is not None and v not in choices:
            raise InputError(f"check_attention: {nm} must be one of {', '.join(choices)}"
                             f"{' or None' if nm not in ('dtype', 'mode') else ''}, got {v!r}")
    if name is not None and not isinstance(name, str):
        raise InputError(f"check_attention: name must be a string, got {name!r}")
    args = dict(causal=bool(causal), heads=heads, dim=dim, dtype=dtype, device=device, positional=positional,
                seed=seed, label="obj", mode=mode, name=name, window=window, softcap=softcap, rope_base=rope_base,
                rope_dims=rope_dims, rope_convention=rope_convention, kv_heads=kv_heads,
                compute_dtype=compute_dtype, seq_len=seq_len, mapping=mapping, against=against,
                max_memory=max_memory, progress=progress, mask_convention=mask_convention, qk_norm=qk_norm,
                kv_grouping=kv_grouping, ignore_config=bool(ignore_config), scale=scale)
    # the declaration, validated once here (before obj runs anywhere), by the function the command uses
    from proofs_checks.sanity.attention_declaration import build_declaration

    build_declaration({k: v for k, v in args.items() if k not in ("label", "name", "mapping", "against",
                                                                   "progress")})
    return args, timeout


def check_icl_model(obj: Any, *, lambdas, N: int, M: int | None = None, layout: str = "default", noise: float = 0.0,
                    seed: int = 0, device: str = "cpu", isolate: bool = True, timeout: float | None = None,
                    compute_dtype: str | None = None, **kwargs):
    """``tverify check icl --model``: which in-context algorithm ``obj`` computes (delegates to
    :func:`proofs_checks.sanity.icl_model.check_icl_model`; see there for ``layout`` and the extra keyword
    arguments such as ``mode``). ``obj`` runs in a child process, as in :func:`check_attention`
    (``isolate``, ``timeout``); ``compute_dtype`` declares the precision it computes in
    (``--compute-dtype``; default: the inputs' float64, a model found coarser fails ``precision_as_declared``).

        >>> import torch
        >>> def least_squares(xs, ys, xq):
        ...     w = torch.linalg.lstsq(xs, ys[..., None]).solution[..., 0]
        ...     return (w * xq).sum(-1)
        >>> r = check_icl_model(least_squares, lambdas="1,1", N=10, mode="quick")
        >>> r.closest_algorithm
        'least_squares'
    """
    _own_imports("check_icl_model")
    from proofs_checks.sanity.icl_model import check_icl_model as _check

    with _as_value_errors(check_icl_model):
        _keywords("check_icl_model", kwargs, _check)
        timeout = _isolation("check_icl_model", isolate, timeout)
        _numbers("check_icl_model", ints=dict(N=N, M=M, seed=seed, prompts=kwargs.get("prompts")),
                 reals=dict(noise=noise, tol=kwargs.get("tol")))
        _memory("check_icl_model", kwargs.get("max_memory"))
        N, M, seed = (None if v is None else int(v) for v in (N, M, seed))  # numpy integers are integers
        noise = float(noise)
        if kwargs.get("prompts") is not None:
            kwargs["prompts"] = int(kwargs["prompts"])
        args = dict(N=N, M=M, layout=layout, noise=noise, seed=seed, device=device, compute_dtype=compute_dtype,
                    **kwargs)
        if not isolate:
            return _check(obj, lambdas=lambdas, **args)
        from proofs_checks.sanity import _isolate

        from proofs_checks.sanity import icl_model as icl

        payload = _isolate.run_isolated(icl.CHILD_TASK, {}, label="obj", what="check_icl_model",
                                        obj={"obj": obj, "lambdas": lambdas, "kwargs": args}, timeout=timeout,
                                        max_memory=kwargs.get("max_memory"), progress=bool(kwargs.get("progress")))
        return icl.rebuild(payload)


def check_hopfield(patterns, *, beta: float = 1.0, module: Any = None, seed: int = 0, isolate: bool = True,
                   timeout: float | None = None, compute_dtype: str | None = None, max_memory: float | None = None,
                   **unknown):
    """``tverify check hopfield``: ``patterns`` an ``(N, d)`` array (or a ``.npy``/``.pt`` path), the
    modern Hopfield update at ``beta`` or your ``module`` (``f(xi, patterns, beta)`` or ``f(xi)``),
    which runs in a child process as in :func:`check_attention` (``isolate``, ``timeout``, ``max_memory`` GB,
    as ``--max-memory``: the patterns' size estimate and the child's memory alike);
    ``compute_dtype`` declares the precision ``module`` computes in (``--compute-dtype``). Each
    keyword is validated by the same function as its flag (one line, the same words).

        >>> import numpy as np
        >>> P = np.sign(np.random.default_rng(0).normal(size=(6, 16)))
        >>> r = check_hopfield(P, beta=0.5)
        >>> r.ok, [p["name"] for p in r.properties]
        (True, ['finite_updates', 'one_step_within_theorem5_bound', 'energy_non_increasing'])
        >>> r.to_json()["capacity"]["N"]
        6
    """
    _own_imports("check_hopfield")
    from proofs_checks.sanity.hopfield import load_patterns, run_hopfield

    why = {"mode": " (the check has no quick/full sizes: patterns and beta decide its size)",
           "device": " (the check runs on the CPU only: float64 reference computations)"}  # (one reason each: 46a F8)
    _refuse_unknown(check_hopfield, unknown, ("patterns",),
                    "".join(w for k, w in why.items() if k in unknown or (k == "mode" and "quick" in unknown)))
    from proofs_checks.sanity.hopfield import beta_value, compute_dtype_value

    with _as_value_errors(check_hopfield):
        given, timeout = timeout, _isolation("check_hopfield", isolate, timeout)  # (its type first: a string is said so)
        if given is not None and module is None:  # the command's rule and line (a keyword silently ignored: 58a F7)
            from proofs_checks.errors import UsageError

            raise UsageError("check_hopfield: timeout= limits the process that runs your module; without module= "
                             "nothing of yours runs")
        _memory("check_hopfield", max_memory)
        _numbers("check_hopfield", ints=dict(seed=seed), reals=dict(beta=beta))
        seed, beta = int(seed), beta_value(beta)  # the flag's rule and words (--beta → beta)
        compute_dtype_value(compute_dtype, module is not None)
        if isinstance(patterns, (str, bytes)) or hasattr(patterns, "__fspath__"):
            patterns = load_patterns(str(patterns), "patterns", max_memory)
        else:  # the command line's checks on an array: real, (N, d), finite, β·M² within float64
            from proofs_checks.sanity.hopfield import patterns_array

            patterns = patterns_array(patterns, "patterns")
        from proofs_checks.sanity.hopfield import check_sizes

        check_sizes(patterns, beta, max_memory)
        name = getattr(module, "__name__", type(module).__name__) if module is not None else None
        if module is None or not isolate:
            return run_hopfield(patterns, beta=beta, module=module, seed=seed, label="module", name=name,
                                compute_dtype=compute_dtype)
        import numpy as np

        from proofs_checks.sanity import _isolate
        from theory.validation import InputError

        try:
            P = _array(patterns, np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"patterns: need a finite (N, d) array of numbers: {exc}") from None
        from proofs_checks.sanity import hopfield

        payload = _isolate.run_isolated(hopfield.CHILD_TASK, {}, label="module", what="check_hopfield",
                                        arrays={"patterns": P},
                                        obj={"module": module, "kwargs": dict(beta=beta, seed=seed, label="module",
                                                                               name=name, compute_dtype=compute_dtype)},
                                        timeout=timeout, max_memory=max_memory)
        return hopfield.rebuild(payload)


def _instance(data):
    from proofs_checks.sanity.att_svm import _load

    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        return _load(str(data))
    if not isinstance(data, (dict, tuple, list)):
        from theory.validation import InputError

        raise InputError(f"check_att_svm: data must be a .npz path, a dict or a tuple (X, z, y, v), got "
                         f"{type(data).__name__}")
    import tempfile
    from pathlib import Path

    import numpy as np

    from theory.validation import InputError

    arrays = dict(data) if isinstance(data, dict) else dict(zip(("X", "z", "y", "v"), data))
    with tempfile.TemporaryDirectory() as tmp:  # one validation path: the CLI's loader
        p = Path(tmp) / "data.npz"
        try:
            np.savez(p, **{k: _array(arrays[k]) for k in ("X", "z", "y", "v") if k in arrays})
        except (TypeError, ValueError) as exc:
            raise InputError(f"data: X, z, y, v must be arrays of numbers: {exc}") from None
        try:
            return _load(str(p))
        except InputError as exc:  # the message names the data, not a temporary file the caller never made
            raise InputError(str(exc).replace(f"--data: {p}: ", "data: ").replace(f"--data: {p} ", "data ")
                             .replace(str(p), "data")) from None


def check_att_svm(data, *, weights=None, iters: int | None = None, lr: float | None = None, seeds: int | None = None,
                  level: float = 0.99, seed: int = 0, device: str = "cpu", mode: str = "default", **unknown):
    """``tverify check att-svm``: ``data`` a ``.npz`` path or a dict/tuple of ``X (n,T,d), z (n,d),
    y (n,), v (d,)``. With ``weights`` (a path, an array ``W (d,d)``, or a dict with ``W`` or ``K``
    and ``Q``) your trained attention is compared with the Att-SVM (``iters``, ``lr`` and ``seeds``, which train, are
    refused with it, as the flags are); without, normalised GD is trained (``lr`` default 0.1).

        >>> from numerics.att_svm import make_instance, solve_att_svm
        >>> inst = make_instance(3, 4, 6, seed=5, setting="global")
        >>> W = 50 * solve_att_svm(inst.X, inst.z, inst.opt).W
        >>> r = check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=W)
        >>> r.ok, r.to_json()["weights"]["selected_is_optimal"]
        (True, True)
    """
    _own_imports("check_att_svm")
    import numpy as np

    from proofs_checks.sanity import att_svm as sa
    from theory.validation import InputError

    _refuse_unknown(check_att_svm, unknown, ("data",))
    with _as_value_errors(check_att_svm):
        _numbers("check_att_svm", ints=dict(iters=iters, seeds=seeds, seed=seed), reals=dict(lr=lr, level=level))
        iters, seeds, seed = (None if v is None else int(v) for v in (iters, seeds, seed))  # numpy integers too
        lr, level = (None if v is None else float(v) for v in (lr, level))
        inst = _instance(data)
        n, T, d = inst.X.shape
        if mode not in sa.SIZES:  # with weights too: a keyword the command would refuse is never ignored (58a F7)
            raise InputError(f"check_att_svm: mode must be one of {', '.join(sa.SIZES)}, got {mode!r}")
        if device not in ("cpu", "cuda"):
            raise InputError(f"check_att_svm: device must be cpu or cuda, got {device!r:.60}")
        from proofs_checks.options import require_device

        require_device(device, False, skip_option=False)  # the command's rule and line, in the keyword's words
        if weights is not None:
            trains = [k for k, v in (("iters", iters), ("lr", lr), ("seeds", seeds)) if v is not None]
            if trains:
                raise InputError(f"check_att_svm: {trains[0]}= trains, and weights= compares your W as it is (no "
                                 "training): give one or the other")
            level = sa.level_value(level)  # the flag's rule with weights too (44a F2: level=-1 passed every W)
            if isinstance(weights, (str, bytes)) or hasattr(weights, "__fspath__"):
                W, form = sa.load_weights(str(weights), d)
            else:  # the file's rules and lines (att_svm_weights.weights_from), in the keyword's words (44a F3-F5)
                data = {str(k): v for k, v in weights.items()} if isinstance(weights, dict) else {"W": weights}
                W, form = sa.weights_from(data, d, "weights", "the dict has" if isinstance(weights, dict) else
                                          "weights has")
            return sa.weights_result(inst, W, form=form, level=level)
        i0, s0 = sa.SIZES[mode]
        # the flags' rules (sanity.att_svm): the same line, in the keywords' words
        iters = None if iters is None else sa.iters_value(iters)
        seeds = None if seeds is None else sa.seeds_value(seeds)
        lr, level = sa.lr_value(0.1 if lr is None else lr), sa.level_value(level)
        sa.check_step(inst, lr, iters or i0)
        return sa.run_att_svm(inst, iters=iters or i0, lr=lr, seeds=seeds or s0, level=level, seed=seed,
                              device=device, mode=mode)


class ClaimsRun:
    """The claims ``run_claims`` verified: ``results`` (:class:`proofs_checks.runner.ClaimResult`),
    ``ok`` (none refuted, errored, incomplete or undecided), ``exit_code`` (as ``tverify run``), ``to_json()``
    (the document ``tverify run --json`` writes), a text table and an HTML table."""

    def __init__(self, results: list, claims: list, *, mode: str, seed: int, device: str, command: str):
        from proofs_checks.output.report import results_document

        self.results = results
        self.doc = results_document(results, claims={c.id: c for c in claims}, command=command, mode=mode, seed=seed,
                                    device=device)

    @property
    def ok(self) -> bool:
        """Every claim verified (or evidence): none refuted, errored, incomplete or undecided."""
        return self.exit_code == 0

    @property
    def exit_code(self) -> int:
        from proofs_checks.runner import exit_code

        return exit_code(r.status for r in self.results)

    def to_json(self) -> dict:
        return self.doc

    def _rows(self):
        for r in self.doc["results"]:
            ratio = r.get("max_error_ratio")
            yield (r["id"], r["kind"], r["status"], "—" if ratio is None else f"{ratio:.3g}", f"{r['seconds']:.2f}")

    def __str__(self) -> str:
        rows = [("claim", "kind", "status", "max error/tol", "seconds"), *self._rows()]
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)

    def __repr__(self) -> str:
        return f"<ClaimsRun {len(self.results)} claims ok={self.ok}>"

    def _repr_html_(self) -> str:
        import html

        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self._rows())
        return ("<table><tr><th>claim</th><th>kind</th><th>status</th><th>max error/tol</th><th>seconds</th></tr>"
                + body + "</table>")


def check_lyapunov(f: str, V: str, vars: str | None = None, *, eps: str = "0.001", region: str | None = None,
                   seed: int = 0, mode: str = "default", max_memory: float | None = None, **unknown):
    """``tverify check lyapunov``: certify by sums of squares (cvxpy), re-checked exactly in SymPy,
    that ``V`` is a Lyapunov function of ``x' = f(x)`` (expressions as text, variables ``x, y`` by
    default); ``region`` gives a local certificate on a ball. ``outcome`` is ``ok`` (certified),
    ``mismatch`` (an exact counterexample in ``doc["counterexample"]``) or ``inconclusive``; bad input
    (``V(0) ≠ 0``, a non-polynomial system) raises :class:`~theory.validation.InputError`.

        >>> r = check_lyapunov("-x**3 - y, x - y**3", "x**2 + y**2")
        >>> r.outcome, "certificate" in r.doc
        ('ok', True)
    """
    _own_imports("check_lyapunov")
    from proofs_checks.sanity.lyapunov import run_lyapunov

    from theory.validation import InputError

    _refuse_unknown(check_lyapunov, unknown)
    for nm, v in (("f", f), ("V", V), ("eps", eps)) + ((("vars", vars),) if vars is not None else ()) + (
            (("region", region),) if region is not None else ()):
        if not isinstance(v, str):
            example = {"eps": "0.001", "vars": "x,y", "region": "1"}.get(nm, "x**2 + y**2")
            raise InputError(f"check_lyapunov: {nm} must be text (e.g. {nm}={example!r}), "
                             f"got {v!r:.60} ({type(v).__name__})")
    with _as_value_errors(check_lyapunov):
        _numbers("check_lyapunov", ints=dict(seed=seed))
        _mode("check_lyapunov", mode)
        seed = int(seed)
        _memory("check_lyapunov", max_memory)
        return run_lyapunov(f, V, vars, eps_text=eps, region_text=region, seed=seed, mode=mode,
                            max_memory=max_memory)


def run_claims(patterns: str | Iterable[str] = (), *, mode: str = "default", seed: int = 0,
               device: str = "cpu", **unknown) -> ClaimsRun:
    """``tverify run PATTERNS``: verify the matching claims through the runner (ids, globs such as
    ``"attn.*"``, group names; a string is one pattern, nothing selects every claim).

        >>> run = run_claims("attn.softmax_simplex", mode="quick")
        >>> run.ok, run.results[0].status
        (True, 'verified')
        >>> run.to_json()["results"][0]["id"]
        'attn.softmax_simplex'
    """
    from proofs_checks.context import RunContext
    from proofs_checks.registry import UnknownClaimError, select
    from proofs_checks.runner import run_claim
    from theory.validation import InputError

    _refuse_unknown(run_claims, unknown, ("patterns",))
    _mode("run_claims", mode)
    _numbers("run_claims", ints=dict(seed=seed))
    seed = int(seed)
    if device not in ("cpu", "cuda"):
        raise InputError(f"run_claims: device must be cpu or cuda, got {device!r}")
    if device == "cuda":
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            raise InputError("run_claims: device='cuda': torch sees no CUDA device on this machine (use device=\"cpu\")")
    if isinstance(patterns, str):
        pats = [patterns]
    else:
        try:
            pats = list(patterns)
        except TypeError:
            pats = None
        if pats is None or not all(isinstance(p, str) for p in pats):
            raise InputError(f"run_claims: patterns must be a string or an iterable of strings, got {patterns!r:.80}")
    try:
        claims = select(pats)
    except UnknownClaimError as exc:
        raise InputError(str(exc).strip("'\"")) from None
    with _as_value_errors(run_claims):  # pins the threads (proofs_checks.threads), as every API function
        ctx = RunContext(mode=mode, seed=seed, device=device)
    results = [run_claim(c, ctx) for c in claims]
    return ClaimsRun(results, claims, mode=mode, seed=seed, device=device,
                     command="run_claims(" + ", ".join(map(repr, pats)) + f", mode={mode!r}, seed={seed})")
