"""Your ICL model as an object ``check icl --model`` can call (:mod:`proofs_checks.sanity.icl_model`): a class
instantiated, a module copied (a copy that predicts otherwise than the object is refused), cast and put in eval mode;
the prompt layout it is called with; and the LSA weights it exposes (``W_KQ``/``W_PV`` or the blocks), found by name
and checked finite."""

from __future__ import annotations

import numpy as np

from proofs_checks.options import UsageError
from proofs_checks.sanity.icl_inputs import _KQ_KEYS, _PV_KEYS

#: the mark of a name exposed twice (:func:`_find_lsa_weights`)
AMBIGUOUS = "ambiguous: "


class _ModelRaised(Exception):
    """The user's model raised on the probe input (carries the one-line description)."""


def _zero_argument(obj) -> bool:
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind is p.VAR_KEYWORD for p in sig.parameters.values()) and \
        not any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())


def _instantiate(obj, name: str, device: str, d: int = 2, N: int = 10):
    """A class (nn.Module or other) or a zero-argument factory is called once to get the model;
    an nn.Module is put in eval mode and moved to ``device``; the caller's own module is copied first, and a copy that
    predicts otherwise than the object on one prompt batch (d dimensions, N examples) is refused (48a F7)."""
    import torch

    from proofs_checks.sanity._loader import user_code

    made = isinstance(obj, type) or (callable(obj) and not isinstance(obj, torch.nn.Module) and _zero_argument(obj))
    if made:
        with user_code("--model", f"instantiating {name}"):
            obj = obj()
    if not callable(obj):
        if made:  # the factory (or class) was called: what it returned is the problem (45a F11)
            raise UsageError(f"--model: {name}() returned {type(obj).__name__}, not a model (a function, an "
                             "nn.Module or another callable)")
        raise UsageError(f"--model: {name} is not callable (give a function, an nn.Module, a class or a factory), "
                         f"got {type(obj).__name__}")
    if isinstance(obj, torch.nn.Module):
        if not made:  # the caller's own model (the API in its process): a copy is put in eval mode and moved, the
            import copy  # caller's is left as it was, mid-training included (44a F18)

            original = obj
            with user_code("--model", f"copying {name}"):
                obj = copy.deepcopy(obj)
            _faithful_copy(original, name, d, N)
        with user_code("--model", f"{name}.eval() / moving it to {device}"):
            obj.eval()
            obj.to(device)
    return obj


def _faithful_copy(original, name: str, d: int, N: int) -> None:
    """The object and a copy called alike on one prompt batch in each layout (whichever it takes):
    :func:`proofs_checks.sanity._copies.refuse_unfaithful_copy`."""
    import torch

    from numerics.icl import prompt_matrix
    from numerics.icl_classes import garg_tokens
    from proofs_checks.sanity._copies import refuse_unfaithful_copy

    p = next((t for t in original.parameters() if t.is_floating_point()), None)
    dt, dev = (p.dtype, p.device) if p is not None else (torch.float64, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    X, y, q = (torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype=dt, device=dev)
               for shape in ((3, N, d), (3, N), (3, d)))

    def seeded(args):
        def call(m):
            try:
                with torch.no_grad(), torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    return m(*args)
            except (Exception, SystemExit):  # noqa: BLE001 - a layout the model does not take: nothing to compare
                return None
        return call

    refuse_unfaithful_copy(original, [seeded((prompt_matrix(X, y, q),)), seeded((garg_tokens(X, y, q),)),
                                      seeded((X, y, q))], "--model", name)


def _layout_call(model, layout: str, name: str = "the model"):
    """``predict(X, y, x_q)`` for the probe, calling ``model`` in the given layout."""
    from numerics.icl import prompt_matrix
    from numerics.icl_classes import garg_tokens
    from proofs_checks.sanity._loader import describe_exception, user_code

    def predict(X, y, x_q):
        if layout == "zfb":
            args = (prompt_matrix(X, y, x_q),)
        elif layout == "garg":
            args = (garg_tokens(X, y, x_q),)
        else:
            args = (X, y, x_q)
        try:
            with user_code("--model", name, exceptions=False):  # sys.exit, KeyboardInterrupt: exit 2
                return model(*args)
        except UsageError:
            raise
        except Exception as exc:
            raise _ModelRaised(describe_exception(exc)) from None

    predict.raised = _ModelRaised  # (numerics.icl_probe: what "the model raised" is; its sys.exit is a usage error)
    return predict


#: why exposed LSA weights are not measured: some entry is NaN or infinite (ZFB's theorem then fails)
NONFINITE = "the model's LSA weights have non-finite entries"


def _exposed_lsa_weights(model, d: int, name: str = "the model"):
    """``(W_PV, W_KQ)`` as NumPy ``(d+1, d+1)`` (or a batch) when the model exposes them as attributes
    or in its ``state_dict`` under the names ``--weights`` reads (Wpv/W_PV…, Wkq/W_KQ…); else a string
    saying why not. Reading them runs the user's code (properties, ``state_dict``): inside the
    user-code boundary (its exceptions and ``sys.exit`` are one line, exit 2)."""
    from proofs_checks.sanity._loader import user_code

    with user_code("--model", f"reading {name}'s LSA weights (attributes / state_dict)"):
        found = _find_lsa_weights(model)
    twice = [v[len(AMBIGUOUS):] for v in found.values() if isinstance(v, str) and v.startswith(AMBIGUOUS)]
    if twice:
        return (f"the model exposes LSA weights under two names ({'; '.join(twice)}): which ones it computes with "
                "cannot be guessed, so they are not measured (keep one name)")
    if len(found) != 2:
        return ("the model exposes no LSA weights (attributes or state_dict entries Wpv/W_PV and Wkq/W_KQ "
                f"of shape ({d + 1}, {d + 1}))" if not found else
                f"the model exposes only {'W_PV' if 'pv' in found else 'W_KQ'} of the LSA weights")
    try:
        pv, kq = (np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
                  for v in (found["pv"], found["kq"]))
        if any(a.dtype.kind not in "iuf" for a in (pv, kq)):  # complex ones were cast to their real part (44a F11)
            kinds = ", ".join(sorted({str(a.dtype) for a in (pv, kq)}))
            return f"the model's LSA weights are not real numbers (dtype {kinds}): ZFB's LSA has real weights"
        pv, kq = pv.astype(np.float64), kq.astype(np.float64)
    except (TypeError, ValueError, RuntimeError) as exc:
        return f"the model's LSA weights are not numeric arrays ({exc})"
    if not (pv.shape == kq.shape and pv.shape[-2:] == (d + 1, d + 1) and pv.ndim in (2, 3)):
        return (f"the model exposes LSA weights of shapes W_PV {pv.shape}, W_KQ {kq.shape}, not ({d + 1}, {d + 1}) "
                f"for d = {d} (from --lambda)")
    if not (np.all(np.isfinite(pv)) and np.all(np.isfinite(kq))):
        return NONFINITE
    return pv, kq


def _find_lsa_weights(model) -> dict:
    """``{"pv": W_PV, "kq": W_KQ}`` as the model exposes them (attributes, else its state_dict); a value of
    ``AMBIGUOUS`` + the names where it exposes one of them under two names (Wpv and W_PV): which one it computes with
    cannot be guessed, and the first found was judged — a correct model refuted on stale buffers (hostile pass 45a
    F7)."""
    found = {}
    for keys, what in ((_PV_KEYS, "pv"), (_KQ_KEYS, "kq")):
        names = [k for k in keys if hasattr(getattr(model, k, None), "shape")]
        if not names and hasattr(model, "state_dict"):
            names = [k for k, v in model.state_dict().items() if k.split(".")[-1] in keys]
            values = model.state_dict()
        else:
            values = {k: getattr(model, k) for k in names}
        if len(names) > 1:
            found[what] = AMBIGUOUS + ", ".join(names)
        elif names:
            found[what] = values[names[0]]
    return found
