"""``check attention``: the stages of the pipeline and the small objects passed between them.

load (:func:`load`) → the declaration completed by the module's configuration (:func:`complete`) →
the module prepared for the probes (:func:`prepare`) → the weights found or mapped
(:func:`attention_weights.find_weights`) → the probes run (:func:`probe_outputs`) → the mapping chosen
(:func:`attention_weights.choose_mapping`) → the other implementation (:func:`attach_against`) →
properties (:func:`evaluate`) → verdict and rendering (:func:`render`). Each stage takes and returns
the dataclasses below; the Declaration (:mod:`proofs_checks.sanity.attention_declaration`) was built
and validated before the first stage.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import types
from dataclasses import dataclass, field
from typing import Any

from proofs_checks.options import UsageError
from proofs_checks.sanity.attention_declaration import Declaration
from proofs_checks.sanity.attention_load import _describe, _materialize_lazy, _user_call, instantiate, model_dim
from proofs_checks.sanity.attention_verdict import _structure
from proofs_checks.sanity.attention_weights import _read_config

__all__ = ["Completed", "Loaded", "Probed", "load", "complete", "prepare", "probe_outputs", "attach_against"]


@dataclass
class Completed:
    """The declaration completed by what the module's configuration says (the user's values win):
    the values used, the ``read from the module`` lines and notes, and what was read (``read``:
    field → :class:`~proofs_checks.sanity._modconfig.Item`, with its source, library release, meaning and
    window span) and the declared values the module's configuration differs from (``differs``)."""

    causal: bool
    window: tuple | None
    rope_base: float
    rope_dims: int | None
    softcap: float | None
    lines: list[str]
    notes: list[str]
    read: dict
    given: dict
    decl: Declaration | None = None  # the declaration with the values read from the module (provenance "read")
    differs: list = field(default_factory=list)  # _modconfig.Difference: declared values the module's config differs from
    unmodelled: list = field(default_factory=list)  # _modconfig.ConfigRead.unmodelled: no coarser precision is named
    scaling: tuple | None = None  # _modconfig.ConfigRead.scaling: the module's own logit scale, when not 1/√d_k

    def structure(self, decl: Declaration, qk_norm: str | None = None):
        """The reference's structure: the declaration completed by the values read (the RoPE convention
        and the QK-norm kind too); ``qk_norm`` given overrides it (the hints try one)."""
        d = self.decl or decl
        return _structure(self.causal, self.window, d.positional, self.rope_base, self.rope_dims,
                          d.rope_convention, self.softcap, qk_norm or d.qk_norm, d.scale)


@dataclass
class Loaded:
    """The object as the probes call it: ``obj`` (instantiated), ``f`` (an eval-mode copy in the probe
    dtype, wrapped as self-attention or with a mask where needed), ``wm`` (the mask wrapper or None),
    the model dimension ``D``, the probe dtype and the other dtype, and the hints found on the way."""

    obj: Any
    f: Any
    wm: Any
    name: str
    D: int
    tdt: Any
    other: Any
    hints: list[str] = field(default_factory=list)


@dataclass
class Probed:
    """The probes run: the probe object, every length's output (``all_outs``, the non-finite ones
    included), the progress ticker and the notes about the outputs."""

    probe: Any
    all_outs: dict
    tick: Any
    notes: list[str]


def load(obj: Any, decl: Declaration, label: str, name: str) -> Any:
    """The user's object instantiated (a class or factory, with torch's generator seeded) and callable."""
    import torch

    with torch.random.fork_rng(devices=[]):  # a class or factory draws its weights from the seed
        torch.manual_seed(int(decl.seed))
        obj = instantiate(obj, decl.dim, label)
    if not callable(obj):
        raise UsageError(f"{label}: {name} is a {type(obj).__name__}, not a callable attention")
    return obj


def complete(obj: Any, decl: Declaration, label: str, window_text: str | None) -> Completed:
    """The declaration completed by the module's configuration (unless ``ignore_config``)."""
    given = dict(causal=decl.causal, rope_base=decl.rope_base, rope_dims=decl.rope_dims,
                 rope_convention=decl.rope_convention, window=decl.window, kv_heads=decl.kv_heads, softcap=decl.softcap,
                 qk_norm=decl.qk_norm, scale=decl.scale)
    vals, lines, notes = _read_config(obj, label, decl.ignore_config, decl.positional, given, window_text)
    rope_dims = vals["rope_dims"]
    if rope_dims is not None and rope_dims % 2:
        raise UsageError(f"--rope-dims {rope_dims}: RoPE rotates pairs of dimensions, so it must be even")
    rope_base = 10000.0 if vals["rope_base"] is None else vals["rope_base"]
    read = vals.get("_read", {})
    filled = decl
    for key in ("causal", "window", "rope_base", "rope_dims", "rope_convention", "softcap", "qk_norm"):
        if key in read and not decl.given(key) and vals[key] != getattr(decl, key):
            it = read[key]
            filled = filled.read(key, vals[key], it.source + (f", {it.library}" if it.library else ""))
    return Completed(vals["causal"], vals["window"], rope_base, rope_dims, vals["softcap"], lines, notes, read, given,
                     filled, vals["_differs"], vals.get("_unmodelled", []), vals.get("_scaling"))


def _dimension(obj: Any, decl: Declaration, label: str, name: str) -> int:
    import torch

    D = decl.dim or model_dim(obj)
    if D is None:
        lazy = isinstance(obj, torch.nn.Module) and any(isinstance(m, torch.nn.modules.lazy.LazyModuleMixin)
                                                        for m in obj.modules())
        raise UsageError(f"{label}: cannot tell the model dimension D of {name} (no embed_dim/dim/d_model attribute, "
                         + ("its projections are lazy (nn.LazyLinear): their input width is known only after a call"
                            if lazy else "no nn.Linear") + "): give --dim D")
    _materialize_lazy(obj, D, label, name)
    return D


def prepare(obj: Any, decl: Declaration, done: Completed, label: str, name: str) -> Loaded:
    """An eval-mode copy in the probe dtype; a bare ``nn.MultiheadAttention`` called as self-attention with
    the declared mask; a ``(x, mask)`` module wrapped to take ``x``."""
    import torch

    from numerics import attention_probe as ap

    D = _dimension(obj, decl, label, name)
    tdt = ap._DT[decl.dtype]
    other = torch.float32 if tdt == torch.float64 else torch.float64
    f = obj
    if isinstance(obj, torch.nn.Module):
        try:
            f = copy.deepcopy(obj).to(dtype=tdt, device=decl.device).eval()
        except Exception as exc:
            raise UsageError(f"{label}: cannot copy {name} to {decl.dtype} on {decl.device}: {_describe(exc)}") from None
        if decl.mask_convention is None and not _bare_mha(obj):
            _copy_faithful(obj, D, label, name, _longest(decl))
    st0 = done.structure(decl)
    if _bare_mha(f):
        # a bare nn.MultiheadAttention takes (query, key, value): call it as self-attention with the
        # declared mask, in its documented layout
        from numerics.attention_reference import allowed_mask

        needs = st0.causal or st0.window is not None
        f = ap.SelfMHA(f, (lambda T: allowed_mask(T, st0)) if needs else None)
        obj = f
    wm = None
    if decl.mask_convention is not None:  # the module takes (x, mask): every call passes a mask
        f = wm = ap.WithMask(f, decl.mask_convention)
    mha = [m for m in f.modules() if isinstance(m, torch.nn.MultiheadAttention)] if isinstance(f, torch.nn.Module) else []
    hints: list[str] = []
    if decl.mask_convention == "keep" and isinstance(obj, ap.SelfMHA):  # torch's documented meaning (48a F6 left)
        hints.append("nn.MultiheadAttention reads a boolean key_padding_mask as True = padding (--mask-convention "
                     "drop; a float mask is additive): the declared keep marks every real token as padding")
    called_as_self = isinstance(f, ap.SelfMHA) or isinstance(getattr(f, "inner", None), ap.SelfMHA)  # (48a F6: with a
    if mha and not mha[0].batch_first and not called_as_self:  # mask convention, the bare MHA inside a WithMask)
        hints.append("the module holds nn.MultiheadAttention(batch_first=False), which reads (T, batch, D): the probe "
                     "is (batch, T, D), so batch and time axes are mixed; build it with batch_first=True or transpose "
                     "in a wrapper")
    return Loaded(obj, f, wm, name, D, tdt, other, hints)


def _longest(decl: Declaration) -> int:
    """The longest length the check probes (the declared ones, else the mode's), at most 1024: the copy's comparison
    runs before the memory estimate, so it stays within what a probe of 1024 tokens costs."""
    from numerics import attention_probe as ap

    return min(1024, max(decl.seq_len or ap.probe_lengths(decl.mode)))


def _bare_mha(obj: Any) -> bool:
    """An ``nn.MultiheadAttention`` called by its own ``forward(query, key, value, …)``: a subclass with a forward of
    its own (``forward(self, x)``) is called as obj(x), as every other object (hostile pass 44a F17)."""
    import torch

    return isinstance(obj, torch.nn.MultiheadAttention) and type(obj).forward is torch.nn.MultiheadAttention.forward


def _first_tensor(out: Any) -> Any:
    return out[0] if isinstance(out, (tuple, list)) and out else out


def _seeded_call(g: Any, x: Any) -> Any:
    """``g(x)``'s output tensor under ``no_grad``, torch's CPU generator seeded alike for each call (a module that draws
    random numbers at every call is compared with itself, not refused: tests/test_hostile_round30b.py NoisyEvery)."""
    import torch

    from numerics import attention_probe as ap

    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return _first_tensor(ap.call(g, x, watch=False)[0])


def _copy_faithful(obj: Any, D: int, label: str, name: str, T_max: int = 5) -> None:
    """The check judges a copy of the module (converted to the probe's dtype and device, in eval mode), so the object
    given is never changed: a copy that computes otherwise (a ``__getstate__`` that leaves out a runtime flag, a
    ``__deepcopy__`` that rebuilds from the constructor's arguments) was judged in its place, and a module leaking the
    future was "ok" (hostile pass 43a F14). The object and a plain copy are called on one input of length 5 and one
    of the longest probe length ``T_max`` (a flag read only on a long-sequence path passed the short input alone: 48a
    F5): :func:`proofs_checks.sanity._copies.refuse_unfaithful_copy`."""
    import torch

    from proofs_checks.sanity._copies import refuse_unfaithful_copy

    p = next((t for t in obj.parameters() if t.is_floating_point()), None)
    dt, dev = (p.dtype, p.device) if p is not None else (torch.float32, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(2, T, D, generator=gen, dtype=torch.float64).to(dtype=dt, device=dev)
          for T in sorted({5, max(5, T_max)})]
    refuse_unfaithful_copy(obj, [lambda g, x=x: _seeded_call(g, x) for x in xs], label, name)


def _lengths(decl: Declaration, weights) -> list[int]:
    """The probe lengths: the declared ones, else the mode's; with a learned position table of ``n`` positions the
    mode's lengths beyond ``n`` become ``n`` (said in a note), and a declared length beyond ``n`` is refused: the
    module cannot run there, and a declared value is the one checked (hostile pass 47a F7: 33 became 20 unsaid)."""
    from numerics import attention_probe as ap

    cands = weights.cands
    Ls = list(decl.seq_len) if decl.seq_len else ap.probe_lengths(decl.mode)
    if decl.positional == "learned" and cands and cands[0].pos_table is not None:
        tmax = int(cands[0].pos_table.shape[0])
        over = [t for t in Ls if t > tmax]
        if over and decl.seq_len:
            raise UsageError(f"--seq-len {','.join(map(str, decl.seq_len))}: the module's learned position table has "
                             f"{tmax} positions, so it cannot run at T = "
                             f"{', '.join(map(str, over))}; give lengths up to {tmax}")
        if over:
            weights.notes.append(f"the learned position table has {tmax} positions: probe length(s) "
                                 f"{', '.join(map(str, over))} checked at T = {tmax} instead")
        Ls = sorted({min(t, tmax) for t in Ls})
    return Ls


def _require_memory(decl: Declaration, D: int, Ls: list[int], cands: list, H_hint, label: str) -> None:
    """The largest single call (module internals ~ H·T² logits and weights) and the chunked perturbation
    batches (≤ 256 MB each by construction) must fit ``--max-memory``."""
    from numerics import attention_probe as ap
    from proofs_checks import guards

    from numerics.attention_structural import logit_copies

    B = ap.BATCH[decl.mode]
    Hm = max([c.heads for c in cands] + [H_hint or 1])
    T_hi = max(Ls)
    k = logit_copies(decl.mask_convention is not None)  # (with a mask, twice the T×T tensors: 46a F9)
    per_call = B * (Hm * T_hi * T_hi * 8 * k + T_hi * D * 8 * 12)
    pert = min(256e6, 64 * B * (T_hi * D * 8 * 6 + Hm * T_hi * T_hi * 8 * k))  # chunks of ≤ 256 MB (attention_structural)
    guards.require_memory(per_call + pert + 2 * D * D * 8 * 8, decl.max_memory,
                          f"{label}: check attention at T = {T_hi} (one call with batch {B}: {H_hint or Hm} head(s) of "
                          f"T×T logits, and the perturbation batches of ≤ 256 MB)",
                          hint="lower the lengths with --seq-len")


def probe_outputs(ld: Loaded, decl: Declaration, st, weights, read: dict, label: str, progress: bool) -> Probed:
    """Every probe length run once; a length that raises or gives NaN/inf is set aside (the other lengths
    are still judged); shape, dtype or device problems are one line."""
    import torch

    from numerics import attention_probe as ap
    from proofs_checks import guards

    Ls = _lengths(decl, weights)
    _require_memory(decl, ld.D, Ls, weights.cands, weights.H_hint, label)
    tick = guards.Progress(f"check attention {ld.name}", enabled=progress)
    probe = ap.AttentionProbe(ld.f, D=ld.D, structure=st, mapping=None, probe_dtype=ld.tdt, device=decl.device,
                              lengths=Ls, batch=ap.BATCH[decl.mode], seed=decl.seed,
                              compute_dtype=ap._DT[decl.compute_dtype] if decl.compute_dtype else None)
    probe.config_items = read  # for hints that differ from the module's configuration
    probe.no_mapping = weights.why  # why the weights found cannot be mapped without a declared mapping
    from numerics import attention_rules

    attention_rules.LAST_UNREAD = None  # set by attention_rules.call when a second output is not weights
    problems = _user_call(lambda: probe.forward_all(_describe, tick.sub), label, region=True)
    notes = []
    if attention_rules.LAST_UNREAD is not None:
        notes.append(f"note: {ld.name} returned a second output, {attention_rules.LAST_UNREAD}, which is not attention weights "
                     "of shape (batch, [H,] T, T): it is not checked there")
    if problems:
        raise UsageError(f"{label}: {ld.name} {problems[0]}")
    if not probe.outs:
        T0 = min(probe.raised)
        raise UsageError(f"{label}: {ld.name} raised {probe.raised[T0]} on a ({probe.B}, {T0}, {ld.D}) {decl.dtype} "
                         f"input on {decl.device} (and at every other probe length: "
                         f"{', '.join(map(str, sorted(probe.raised)))})")
    all_outs = dict(probe.outs)
    bad_T = [T for T, o in all_outs.items() if not torch.isfinite(o).all()]
    if bad_T and len(bad_T) < len(all_outs):  # finite_output fails; the other lengths are still judged
        probe.nonfinite_lengths = set(bad_T)
        for T in bad_T:
            probe.outs.pop(T)
            probe.xs.pop(T)
            getattr(probe, "weights", {}).pop(T, None)
    return Probed(probe, all_outs, tick, notes)


class AgainstWatch:
    """``--against`` whose call runs the checked module itself (a wrapper holding it, ``nn.Sequential(module)``, a
    function calling it) is refused: its outputs are the module's own, so the comparison could not reject anything
    (hostile pass 39b F3). Every call of the second object is watched, for the whole check (a wrapper that calls the
    module on its second call only, or at some length, was seen once and let through: hostile pass 40b): while it
    runs, a forward pre-hook on the module and on its copy inside the second object (deepcopy's memo finds it) and
    their ``forward`` attribute (``inner.forward(x)`` takes no hook: 40b F2) note a call. A second implementation
    that only reads the module's weights is not refused."""

    def __init__(self, watched: list):
        self.watched, self.ran, self._depth, self._undo = watched, False, 0, []

    def enter(self, *_) -> None:
        self._depth += 1
        if self._depth > 1 or not self.watched:
            return
        for m in self.watched:  # (a scripted module takes no Python hook: not watched)
            with contextlib.suppress(Exception):
                h = m.register_forward_pre_hook(self._seen)
                self._undo.append(h.remove)
            with contextlib.suppress(Exception):
                own = "forward" in vars(m)
                bound = m.forward

                def seen(*args, _bound=bound, **kwargs):
                    self.ran = True
                    return _bound(*args, **kwargs)

                object.__setattr__(m, "forward", seen)
                self._undo.append(lambda m=m, own=own, bound=bound: object.__setattr__(m, "forward", bound) if own
                                  else object.__delattr__(m, "forward"))
        self._watch_classes()

    def _watch_classes(self) -> None:
        """The ``forward`` of every class of the watched modules' MRO, noting a call whose ``self`` is one of them:
        ``type(inner).forward(inner, x)`` takes neither the hook nor the instance's attribute (hostile pass 41b F5)."""
        import torch

        ids = {id(m) for m in self.watched}
        classes = {c for m in self.watched for c in type(m).__mro__
                   if c is not torch.nn.Module and isinstance(vars(c).get("forward"), types.FunctionType)}
        for c in classes:
            fn = vars(c)["forward"]

            def seen(this, *args, _fn=fn, **kwargs):
                if id(this) in ids:
                    self.ran = True
                return _fn(this, *args, **kwargs)

            with contextlib.suppress(Exception):
                setattr(c, "forward", functools.wraps(fn)(seen))
                self._undo.append(lambda c=c, fn=fn: setattr(c, "forward", fn))

    def exit(self, *_) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth:
            return
        undo, self._undo = self._undo, []
        for u in reversed(undo):
            with contextlib.suppress(Exception):
                u()

    def _seen(self, *_) -> None:
        self.ran = True

    def attach(self, g: Any) -> Any:
        """``g`` watched at every call: hooks on a module (entering and leaving, an exception included), a wrapper
        around a function; a module that takes no hooks (scripted) is returned as it is, watched only where
        :meth:`once` calls it."""
        import torch

        if isinstance(g, torch.nn.Module):
            try:
                g.register_forward_pre_hook(self.enter)
                g.register_forward_hook(self.exit, always_call=True)
            except Exception:  # noqa: BLE001 (a scripted module)
                pass
            return g
        if not callable(g):
            return g

        @functools.wraps(g)
        def watched(*args, **kwargs):
            self.enter()
            try:
                return g(*args, **kwargs)
            finally:
                self.exit()

        return watched

    def once(self, call, x) -> None:
        """One call of the second object on ``x``, watched (also where :meth:`attach` could not hook it), then
        :meth:`refuse`."""
        if not self.watched or x is None:
            return
        self.enter()
        try:
            with contextlib.suppress(Exception):  # (an exception is reported by the comparison's own calls)
                _user_call(lambda: call(x), "--against")
        finally:
            self.exit()
        self.refuse()

    def refuse(self) -> None:
        """A UsageError when any call of the second object ran the checked module."""
        if self.ran:
            raise UsageError("--against: its call runs the checked module itself (it holds the module, or calls it): "
                             "its outputs are the module's own, so the differential comparison could not reject "
                             "anything; give a second implementation")


def _refuse_module_running(module: Any, g: Any, probe) -> None:
    """The reverse of :class:`AgainstWatch`: a checked module whose call runs the second object itself (a wrapper
    holding it) is the same comparison, 0 by construction (hostile pass 43a F5); the module is called once at each probe
    length with the second object, as instantiated, watched. A second object that is a plain function cannot be
    watched this way (docs/check-attention.md says so)."""
    import torch

    from numerics import attention_probe as ap

    if module is None or not isinstance(g, torch.nn.Module) or g is module:
        return
    reverse = AgainstWatch([g])
    for x in probe.xs.values():
        reverse.enter()
        try:
            with contextlib.suppress(Exception):  # (what the module raises is reported by the checks' own calls)
                _user_call(lambda: ap.call(module, x, watch=False), "--module")
        finally:
            reverse.exit()
        if reverse.ran:
            raise UsageError("--against: the checked module's call runs it (the module holds the second "
                             "implementation, or calls it): its outputs are the second implementation's own, so the "
                             "differential comparison could not reject anything; give two separate implementations")


def attach_against(probe, against: Any, decl: Declaration, tdt, module: Any = None) -> None:
    """Differential mode: the second implementation (instantiated with the same seed) replaces the
    mapped reference; it must run, in shape, and give finite outputs at every probe length. ``module``: the checked
    object as instantiated; the second one being that very object is refused (a factory returning it: 38b F2)."""
    import torch

    from numerics import attention_probe as ap
    from numerics.torch_utils import not_dense

    from numerics.torch_utils import SETTINGS_OF, own_settings

    try:
        store = SETTINGS_OF.get(against, {})
    except TypeError:
        store = {}
    with torch.random.fork_rng(devices=[]), own_settings(store):  # the same seed: factories seeded alike get equal
        torch.manual_seed(int(decl.seed))  # weights; what building it leaves is its own (40b F1)
        g = instantiate(against, decl.dim, "--against")
    if module is not None and g is module:
        raise UsageError("--against: it gives the checked module itself (the same object, once its factory is called): "
                         "the differential comparison could not reject anything; give a second implementation")
    _refuse_module_running(module, g, probe)
    watched = [module] if isinstance(module, torch.nn.Module) else []
    if isinstance(g, torch.nn.Module) and decl.mask_convention is None and not _bare_mha(g):
        _copy_faithful(g, probe.D, "--against", getattr(against, "__name__", type(g).__name__), _longest(decl))  # (48a F9)
    if isinstance(g, torch.nn.Module):
        memo: dict = {}
        try:
            g = copy.deepcopy(g, memo).to(dtype=tdt, device=decl.device).eval()
        except Exception as exc:
            raise UsageError(f"--against: cannot copy it to {decl.dtype} on {decl.device}: {_describe(exc)}") from None
        if module is not None and id(module) in memo:  # the checked module held inside it, copied with it
            watched.append(memo[id(module)])
    if _bare_mha(g):  # called as self-attention with the declared mask, as a bare one given to --module is (47a F10)
        from numerics.attention_reference import allowed_mask

        st = probe.st
        g = ap.SelfMHA(g, (lambda T: allowed_mask(T, st)) if (st.causal or st.window is not None) else None)
    watch = AgainstWatch(watched)
    g = watch.attach(g)
    with contextlib.suppress(TypeError):
        SETTINGS_OF[g] = store
    probe.against, probe.against_watch = g, watch
    watch.once(lambda x: ap.call(g, probe.against_input(x), watch=False), next(iter(probe.xs.values()), None))
    for T, x in probe.xs.items():
        try:
            o = _user_call(lambda: ap.call(g, probe.against_input(x), watch=False)[0], "--against")  # a copy (24b F7)
        except UsageError:
            raise
        except ap.OutputOffError as exc:  # no numbers, or another shape: named below as what it is
            o = exc.out
        except Exception as exc:
            raise UsageError(f"--against: it raised {_describe(exc)} at T = {T}") from None
        if isinstance(o, torch.Tensor) and not_dense(o):
            raise UsageError(f"--against: it returned {not_dense(o)} at T = {T}, expected a dense tensor of shape "
                             f"{tuple(probe.outs[T].shape)}")
        want = tuple(probe.outs[T].shape)
        if not isinstance(o, torch.Tensor):  # (a NumPy array of the right shape was "(2, 1, 16), expected (2, 1, 16)")
            shape = f" of shape {tuple(o.shape)}" if isinstance(getattr(o, "shape", None), tuple) else ""
            raise UsageError(f"--against: it returned a {type(o).__module__.split('.')[0]}.{type(o).__name__}{shape} "
                             f"at T = {T}, expected a torch tensor of shape {want}")
        if tuple(o.shape) != want:
            raise UsageError(f"--against: it returned {tuple(o.shape)} at T = {T}, expected {want}")
        if o.is_quantized or o.dtype not in ap.JUDGED_DTYPES:  # (an integer output taken as the reference: 43a F3)
            raise UsageError(f"--against: it returned a {str(o.dtype).removeprefix('torch.')} tensor at T = {T}: it "
                             "cannot serve as the other implementation (attention's output is floating point)")
        if not bool(torch.isfinite(o).all()):  # the reference side is broken: nothing to compare with
            raise UsageError(f"--against: {getattr(g, '__name__', type(g).__name__)} returned NaN or inf at T = {T} "
                             "on a finite probe: it cannot serve as the other implementation")
    watch.refuse()
