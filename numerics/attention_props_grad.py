"""Gradient and execution-path properties of ``tverify check attention`` (a mixin of
:class:`numerics.attention_probe.AttentionProbe`): input and parameter gradients against the
reference's autograd, the forward pass with autograd enabled, in inference mode, in training mode
and on a non-contiguous input.

This module imports torch only, no ``proofs_checks``.
"""

from __future__ import annotations

import copy
import math

import torch

from numerics.attention_reference import reference_attention
from numerics.attention_props_single import _active_dropout
from numerics.attention_rules import (FACTOR_FORWARD, FACTOR_GRAD, OutputOffError, Property, _judge, _rel, _skip, call, exc_text,
                                      tolerance, unavailable, unsupported)


class GradientProps:
    """The gradient and execution-path properties (methods of the probe)."""

    def _leak_on(self, name: str, label: str, out_of, cause: str = "") -> Property | None:
        """The structural properties on another path (``out_of(x64)``: that path's output, a module ``g`` that may be a
        copy): ``causal_no_future_leak`` / ``window_respected`` (every forbidden key redrawn in turn, at every probe
        length, at unit, large and huge logits) and ``key_padding_respected`` where a key-padding mask is declared,
        each exactly as on the eval path (:func:`numerics.attention_structural.prop_mask`, :func:`prop_key_padding`), on
        a view of the probe whose calls go through that path. The paths are otherwise judged by the forward tolerance,
        under which a branch on autograd or training mode hid a leak of e^-34 (hostile passes 21b F5, 22b F1, F2).
        ``None`` when every one holds (or none is declared)."""
        from numerics.attention_props_single import WithMask, prop_key_padding
        from numerics.attention_structural import prop_mask

        masked = self.st.causal or self.st.window is not None or isinstance(self.f, WithMask)
        view = _OnPath(self, out_of)
        if masked:  # the lengths the path runs at (one raising length aborted the whole path's leak check: 33b F8)
            ran = [T for T in self.outs if _runs(out_of, self.xs[T])]
            view.outs, view.xs = {T: self.outs[T] for T in ran}, {T: self.xs[T] for T in ran}
        try:
            if not masked or not view.outs:
                return None
            # the eval path's own structural properties judged these very outputs where they are the same; a key-padding
            # mask is set only by its own property, so that one runs on every path
            differs = self._differs(out_of, view.outs)
            props = list(prop_mask(view)) if differs else []
            if isinstance(self.f, WithMask):
                props += prop_key_padding(view, self.f)[:1]
        except Exception:  # a path the module cannot run: the path's own property says so
            return None
        from numerics.attention_structural import (_batch_lengths, _big_batch, _other_sizes, call_shape_rows, is_noisy,
                                                   kept, noise_floor, structural_tolerance)

        Ts = _batch_lengths(view)
        big = _big_batch(view, Ts[len(Ts) // 2]) if differs and Ts else None  # the large batch on that path (30b F5)
        if big is not None and bad_first(props) is None:
            e, jit, T, what, _ = big
            tol, just = structural_tolerance(jit, "redrawing another sample of the batch", noise_floor(self, T),
                                             is_noisy(self) or is_noisy(view))
            if not e <= tol:
                return _judge(name, e, tol, just, f"on {label}: the first sample of a batch moves by {e:.3g} when "
                              f"{what} (T = {T}): batch_independence fails there (the eval path keeps it"
                              f"{'; ' + cause if cause else ''})", central=True)

        sizes = [r for r in _other_sizes(view, unit=True) if not r[0] <= 1.0]  # the path's own single-sequence and
        if not sizes:  # every batch size the checks use, through this path, at two of the lengths it was used at
            path_outs: dict = {}  # (31b F1, 32b F2)

            def base(T):
                if T not in path_outs:
                    path_outs[T] = kept(view.run(self.xs[T])[1])
                return path_outs[T]
            try:
                _, worst, _ = call_shape_rows(view, base, every=False)
            except Exception:  # noqa: BLE001 - a path the module cannot run: the path's own property says so
                worst = None
            if worst is not None and not worst[0] <= 1.0:
                r, e, tol, just, B, T, i = worst
                sizes = [(r, e, tol, just, T, f"{i} of a batch of {B}")]
        if sizes and bad_first(props) is None:  # stacked calls against its probe batch (30b F2)
            r, e, tol, just, T, b = max(sizes, key=lambda r_: r_[0])
            return _judge(name, e, tol, just, f"on {label}: a call of another batch size (sample {b} at T = {T}) "
                          f"differs from the probe batch's on that path beyond twice the forward tolerance (the eval "
                          f"path keeps it{'; ' + cause if cause else ''})", central=True)
        bad = bad_first(props)
        if bad is None:
            return None
        return _judge(name, bad.error, bad.tolerance, bad.justification,
                      f"on {label}: {bad.name} fails there (the eval path keeps it{'; ' + cause if cause else ''}): "
                      f"{bad.detail}", central=True)

    def _large_fail(self, name: str, label: str, out_of, cause: str = "") -> Property | None:
        """A path's outputs against the reference at the large-logit probe, every length where
        ``matches_reference`` judged that probe, under its rule (the paths were compared at unit logits only, where
        a softmax taken in float16 on the autograd path past logits of 30 passed: hostile pass 22b F9). ``None``
        when every one holds."""
        from numerics.attention_structural import kept

        worst = None
        for T, key in [(T, k) for T in self.outs for k in ("large", "huge") if (T, k) in self.L and T >= 2]:
            c = self.factor(self.xs[T], key)
            if c is None:
                continue
            x = self.xs[T] * c
            try:
                o = kept(out_of(x))
                o_eval = kept(self.run(x)[1])
            except Exception:  # a path the module cannot run: its own property says so
                return None
            tol, just = self.tol_at(T, key)
            if _rel(o, o_eval) <= tol:  # the eval path's outputs here: matches_reference judges them
                continue
            e = _rel(o, self.reference_out(x))
            r = e / tol if math.isfinite(e) and tol > 0 else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, tol, just, T, key)
        if worst is None or worst[1] <= worst[2]:
            return None
        _, e, tol, just, T, key = worst
        return _judge(name, e, tol, just, f"on {label} at {key} logits (T = {T}): the outputs differ from the "
                      f"reference by {e:.3g}{'; ' + cause if cause else ''}", central=True)

    # -- gradients -----------------------------------------------------------------------------
    def prop_gradients(self) -> Property:
        """Gradients with respect to the input and, where weights are mapped, the module's
        parameters, against the reference's autograd gradients (the precision rule with factor 3)."""
        name = "gradients_match_reference" if self.against is None else "gradients_match_against"
        if self.m is None and self.against is None:
            return _skip(name, "no mapped reference to differentiate (declare the projections: --mapping)")
        Ts = list(self.outs)  # a single token too: its input, value and output gradients are not zero (28b F6)
        if not Ts:
            return _skip(name, "no length ran")
        # every probed length up to 257 (two of them — the one nearest 17 and the longest — let a custom backward
        # wrong at 64 and 113, where tiled kernels change, pass: hostile pass 22b F8)
        Ts = sorted(t for t in Ts if t <= 257) or [min(Ts)]
        named = [(n, p) for n, p in self.f.named_parameters() if p.requires_grad] if isinstance(
            self.f, torch.nn.Module) else []
        params = [p for _, p in named]
        p_dt = self.precision.dtype if self.precision else self.pdt
        worst, raised = None, {}
        # and a single sequence (the probe's first sample alone) at the shortest lengths ≥ 2 and ≥ 3: a backward wrong
        # for a batch of one only was "ok" (32b F4)
        singles = sorted({min([t for t in Ts if t >= k] or [max(Ts)]) for k in (2, 3)}) if self.B > 1 else []
        singles_done: list[int] = []
        for T, rows in [(T, None) for T in Ts] + [(T, 1) for T in singles]:
            x64 = self.xs[T] if rows is None else self.xs[T][:rows]
            g = torch.Generator().manual_seed(self.seed * 31 + T)
            cot = torch.randn(self.B, T, self.D, generator=g, dtype=torch.float64)[:x64.shape[0]]
            forward_ran = False
            try:
                with torch.enable_grad():
                    xm, out, _ = self.run(x64, grad=True)
                    forward_ran = True
                    if not isinstance(out, torch.Tensor) or not out.requires_grad:
                        if params:  # parameters that train, an output no gradient can reach them through
                            return Property(name, "fail", float("inf"), 0.0, "gradients must reach the parameters",
                                            f"the output does not require grad although {len(params)} parameter(s) "
                                            "do (computed under no_grad, or detached): no gradient reaches the "
                                            "input or the parameters", {}, False)
                        return _skip(name, "the output does not require grad (computed without autograd): nothing "
                                           "to compare")
                    if rows is None:
                        self.grad_outs[T] = out.detach().to(device="cpu", dtype=torch.float64, copy=True)
                    gm = torch.autograd.grad(out, [xm] + params, cot.to(out.dtype).to(out.device), allow_unused=True)
                if params and all(a is None for a in gm):
                    return Property(name, "fail", float("inf"), 0.0, "gradients must reach the parameters",
                                    f"the output requires grad but no gradient reaches the input or any of the "
                                    f"{len(params)} parameter(s) (a new leaf: .detach().requires_grad_(), "
                                    "nn.Parameter(…)): training through it updates nothing", {}, False)
            except Exception as exc:
                # torch.autograd.grad refuses what .backward() runs (reentrant torch.utils.checkpoint): the
                # module's gradients through .backward(), from a fresh forward pass
                gm = self._grads_by_backward(x64, params, cot)
                if gm is None:
                    if not forward_ran:  # the forward itself raised with autograd on (the training path): said by
                        self.__dict__.setdefault("grad_forward_raised", (exc, T))  # matches_reference_with_grad
                    # a backward that raises (FlexAttention has none on CPU) is not a wrong gradient: that length is
                    # not judged, the others are (a raise at T ≥ 17 hid a backward 50 % wrong at T < 17: 24b F16);
                    # at no length, the property is skipped with the exception, and the verdict says so
                    if rows is None:  # (a module refusing a single sequence: batch_size_independence says so)
                        raised.setdefault("first", (exc, T))
                        raised.setdefault("lengths", []).append(T)
                        raised.setdefault("what", "the backward" if forward_ran else "the forward pass with autograd on")
                    continue
            labels = ["input"] + [f"parameter {n}" for n, _ in named]
            if rows is not None:
                labels = [f"{lab} (a single sequence)" for lab in labels]
                singles_done.append(T)
            if self.against is not None:
                try:
                    with torch.enable_grad():
                        xa = self.against_input(x64).requires_grad_(True)
                        oa, _ = call(self.against, xa, grad=True, watch=False)
                        if isinstance(oa, torch.Tensor) and not oa.requires_grad:  # (43a F9: "on this device")
                            return _skip(name, f"the --against object's output does not require grad at T = {T} "
                                               "(detached, or computed without autograd): its gradients cannot be "
                                               "compared")
                        ga = torch.autograd.grad(oa, [xa], cot.to(oa.dtype).to(oa.device), allow_unused=True)
                except Exception as exc:
                    return unavailable(name, self.device, exc_text(exc), T, device_limit=unsupported(exc),
                                       whose="the --against object's")
                pairs = [(labels[0], gm[0], ga[0], None)]
            else:
                gr, gp = self._reference_grads(x64, params, cot, p_dt)
                pairs = [(lab, a, b, c) for lab, a, b, c in zip(labels, gm, gr, gp)]
            worst = self._grad_worst(pairs, T, p_dt, worst)
        if worst is None and raised:
            exc, T = raised["first"]
            return unavailable(name, self.device, f"{exc_text(exc)}", T, unsupported(exc))
        if worst is None:
            return _skip(name, "no gradient reached both the module and the reference")
        _, e, tol, just, T, lab = worst
        detail = (f"{self._grads_compared(params)}"
                  f" at {_judged_lengths(Ts, raised)}"
                  f"{', and of a single sequence at T = ' + ', '.join(map(str, singles_done)) if singles_done else ''}; worst: {lab} "
                  f"at T = {T}"
                  + ("; the gradient differs from the reference's autograd gradient (if the forward pass matches: a "
                     "custom backward?)" if not e <= tol else ""))
        return _judge(name, e, tol, just + " (B64 doubled for the backward pass; errors relative to the largest "
                                           "gradient entry at that length)", detail)

    def _grads_compared(self, params: list) -> str:
        """What the gradient comparison compared: the input gradient and the parameter gradients the reference's
        autograd reached. One it does not reach (outside the mapped attention, or behind a copy the mapping returned)
        is not judged, and not counted as compared (hostile pass 47a F2)."""
        n_all = len(params)
        n_par = sum(1 for x in self.__dict__.get("grad_judged", ()) if x.startswith("parameter "))
        if self.against is not None:
            return "input gradient"
        copies = getattr(self.m, "detached", None)
        if copies:
            return (f"input gradient (parameter gradients not judged: the mapping returned {', '.join(copies)} as copies "
                    "with no graph to the module's parameters; return views or the projection modules)")
        unjudged = (f" ({n_all - n_par} of the module's {n_all} parameter(s) not reached by the reference's autograd: "
                    "not judged)") if n_all > n_par else ""
        return f"input gradient{' and ' + str(n_par) + ' parameter gradients' if n_par else ''}{unjudged}"

    def _grad_worst(self, pairs: list, T: int, p_dt: torch.dtype, worst: tuple | None) -> tuple | None:
        """``worst`` updated with each ``(label, module's, reference's float64, reference's working-precision)``
        gradient at length ``T``: ``(ratio, error, tolerance, why, T, label)``, errors relative to the largest entry."""
        L = self.L.get((T, "unit"), 1.0)
        # a gradient the module's autograd does not reach (None: the input or a projection detached on its way to the
        # output) is a gradient of zero where the reference's reaches it: compared as such, not skipped — a core
        # detached before the output projection read "ok, error 0" (hostile pass 44a F6). One the reference does not
        # reach (a parameter outside the mapped attention) is not judged.
        pairs = [(lab, torch.zeros_like(b) if a is None and b is not None else a, b, c) for lab, a, b, c in pairs]
        if getattr(self.m, "detached", None):  # copies in the mapping: the reference reaches parts of parameters at
            pairs = [pr for pr in pairs if not pr[0].startswith("parameter ")]  # most; only the input's is judged
        G = max([float(b.detach().abs().max()) for _, a, b, _ in pairs if a is not None and b is not None
                 and b.numel()] + [1e-300])  # gradients are compared relative to the largest entry
        for lab, a, b, c in pairs:
            if a is None or b is None:
                continue
            self.__dict__.setdefault("grad_judged", set()).add(lab.removesuffix(" (a single sequence)"))
            e = _rel(a, b, G)
            e_plain = _rel(c, b, G) if c is not None and p_dt != torch.float64 else 0.0
            tol, just = tolerance(e_plain, self.D, T, 2 * L, p_dt, FACTOR_GRAD)
            if self.against is not None:
                tol, just = 2 * tol, "2 × each implementation's bound: " + just
            r_ = e / tol if math.isfinite(e) else float("inf")
            if worst is None or r_ > worst[0]:
                worst = (r_, e, tol, just, T, lab)
        return worst

    def _reference_grads(self, x64: torch.Tensor, params: list, cot: torch.Tensor, p_dt: torch.dtype) -> tuple:
        """The reference's autograd gradients (input, then ``params``) in float64 and in the working precision."""
        gr, gp = [], []
        for dt, store in ((torch.float64, gr), (p_dt, gp)):
            if dt == torch.float64 and store is gp:
                gp.extend(gr)
                continue
            with torch.enable_grad():
                xr = x64.clone().to(self.device).requires_grad_(True)
                r = reference_attention(xr, self.m, self.st, dt)
                # retain_graph: a mapping may hold weights computed from the parameters once
                # (m.q.weight * 1.0, a reshaped fused weight), whose graph every backward shares
                store.extend(torch.autograd.grad(r, [xr] + params, cot.to(dt).to(self.device),
                                                 allow_unused=True, retain_graph=True))
        return gr, gp

    def prop_grad_mode_forward(self) -> Property:
        """The outputs the gradient pass computed (autograd enabled, the input requiring grad: the
        training path) against the reference, as ``matches_reference`` judges the no-grad outputs at
        unit logits: a module that branches on ``torch.is_grad_enabled()`` or ``x.requires_grad`` is
        judged on both paths."""
        name = "matches_reference_with_grad" if self.against is None else "matches_against_with_grad"
        if not self.grad_outs:
            return _skip(name, "no output was computed with autograd enabled (see the gradient property)")
        with torch.enable_grad():
            label, cause = ("the path with autograd enabled (the input requiring grad)",
                            "a branch on torch.is_grad_enabled() or x.requires_grad?")
            leak = (self._leak_on(name, label, lambda z: self.run(z, grad=True)[1], cause)
                    or self._large_fail(name, label, lambda z: self.run(z, grad=True)[1], cause))
        if leak is not None:
            return leak
        for T in self.outs:  # every probed length, not only those the gradients were compared at
            if T in self.grad_outs:
                continue
            try:
                with torch.enable_grad():
                    _, out, _ = self.run(self.xs[T], grad=True)
                if isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(self.outs[T].shape):
                    if rows is None:
                        self.grad_outs[T] = out.detach().to(device="cpu", dtype=torch.float64, copy=True)
            except Exception:  # a length the module cannot run with autograd: judged by the gradient property
                continue
        worst = None
        for T, o in self.grad_outs.items():
            ref = self.reference_out(self.xs[T])
            e = _rel(o, ref)
            tol, just = self.tol_at(T, "unit")
            r = e / tol if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, tol, just, T, _rel(o, self.outs[T]) if T in self.outs else float("nan"))
        _, e, tol, just, T, e_nograd = worst
        same = e_nograd <= tol  # (a NaN/inf difference is no agreement: 29b F1)
        if not e <= tol and same:  # the same outputs as without autograd: matches_reference judges them
            return _skip(name, f"the outputs computed with autograd enabled equal those without it (difference "
                               f"{e_nograd:.3g} ≤ {tol:.3g}): judged by "
                               f"{'matches_reference' if self.against is None else 'matches_against'}")
        detail = (f"the outputs computed with autograd enabled (the input requiring grad, as in training) at T = "
                  f"{', '.join(map(str, sorted(self.grad_outs)))}; worst at T = {T}")
        if not e <= tol:
            detail += (f"; they differ from the same module's outputs without autograd by {e_nograd:.3g}: the module "
                       "computes something else when gradients are on (a branch on torch.is_grad_enabled() or "
                       "x.requires_grad?)" if not same else "")
        return _judge(name, e, tol, just, detail, central=True)

    def prop_other_paths(self) -> Property | None:
        """Five more ways the module is called in practice: in training mode, on a copy (``.train()``, when it holds
        no active dropout, whose randomness would decide nothing), with autograd off and on (a training step); on a
        non-contiguous view of the same input (kernels
        that fall back on ``x.is_contiguous()``); with autograd enabled on an input that does not require grad (a plain
        ``model(x)`` outside ``no_grad``); and on a non-leaf input (a layer inside a network being trained). ``None`` when each gives the no-grad eval outputs; else the differing
        path's outputs against the reference, under ``matches_reference``'s rule."""
        name = "matches_reference_on_other_paths" if self.against is None else "matches_against_on_other_paths"
        paths = []  # (label, the module, the input's kind, autograd enabled)
        if isinstance(self.f, torch.nn.Module):  # judged unless two calls there differ: measured, never read from a
            try:  # dropout attribute (an nn.Dropout the forward never uses hid a training-mode leak: 41b F7)
                g = copy.deepcopy(self.f).train()
                if not self._random(g):  # (dropout whose rate no attribute names: a config's, a literal: 21b F2)
                    paths.append(("training mode (.train())", g, "copy", False))
                    paths.append((_TRAIN_STEP, g, "copy", True))  # the two together (32b F5)
                else:
                    self.training_left_out = (
                        "training mode was not judged: two calls there on the identical input differ ("
                        + ("dropout > 0, " if _active_dropout(self.f) else "dropout, or a parameter a call changes; ")
                        + "whose randomness decides nothing)")
            except Exception:
                pass
        paths.append(("a non-contiguous input (a transposed view)", self.f, "noncontig", False))
        paths.append((_PLAIN_GRAD, self.f, "copy", True))  # a plain model(x) outside no_grad (28b F2)
        paths.append((_IN_NETWORK, self.f, "nonleaf", True))  # a layer inside a network being trained (28b F2)
        causes = {_PLAIN_GRAD: "a branch on torch.is_grad_enabled() without x.requires_grad?",
                  _IN_NETWORK: "a branch on x.grad_fn or x.is_leaf?",
                  _TRAIN_STEP: "a branch on self.training and torch.is_grad_enabled() together?",
                  "a non-contiguous input (a transposed view)": "a branch on x.is_contiguous()?"}
        for label, g, kind, grad in paths:
            runner = (lambda z, g=g, k=kind, lb=label, gr=grad: self._call_synced(g, self._path_input(z, k, gr), lb, gr))
            cause = causes.get(label, "a branch on self.training?")
            leak = (self._leak_on(name, label, runner, cause) or self._large_fail(name, label, runner, cause)
                    or self._wrote_fail(name, label))
            if leak is not None:
                return leak
        worst, differs, raised = None, [], {}
        for label, g, kind, grad in paths:
            for T in self.outs:
                x = self._path_input(self.xs[T], kind, grad)
                try:
                    o, _ = call(g, x, grad=grad)
                    o = o.detach().to(device="cpu", dtype=torch.float64, copy=True)
                except OutputOffError:  # no numbers: dtype_and_device_preserved names it (28b F4)
                    continue
                except Exception as exc:  # a path the module does not support: said where it raised at every length
                    raised.setdefault(label, []).append((T, exc, "the module"))
                    continue
                if not isinstance(o, torch.Tensor) or tuple(o.shape) != tuple(self.outs[T].shape):
                    continue
                tol, just = self._path_tol(T)
                if _rel(o, self.outs[T]) <= tol:
                    continue
                if label not in differs:
                    differs.append(label)
                e = _rel(o, self.reference_out(self.xs[T]))
                r = e / tol if math.isfinite(e) else float("inf")
                if worst is None or r > worst[0]:
                    worst = (r, e, tol, just, T, label)
        if getattr(self, "grad_forward_raised", None) is not None:  # the autograd path's own property says so already
            raised.pop(_PLAIN_GRAD, None)
            raised.pop(_IN_NETWORK, None)
            raised.pop(_TRAIN_STEP, None)
        if worst is None:
            if not raised:
                return None
            some = [(lb, excs[0][1], len(excs)) for lb, excs in raised.items()]
            p = _skip(name, "not available: the module raised " + "; ".join(
                f"{exc_text(exc)} on {lb} ({n} of {len(self.outs)} lengths)" for lb, exc, n in some)
                + ": not judged there (the other lengths give the eval-mode, contiguous outputs)")
            p.numbers = {"unavailable": exc_text(some[0][1]), "why": f"raised on {some[0][0]}"}
            return p
        _, e, tol, just, T, label = worst
        return _judge(name, e, tol, just, f"the outputs on {' and on '.join(differs)} differ from the eval-mode, "
                      f"contiguous ones; against the reference: worst on {label} at T = {T}", central=True)

    def _path_tol(self, T: int) -> tuple[float, str]:
        """The forward tolerance for another path's outputs at length ``T``, or, where larger, twice the module's own
        error on its eval path there (which ``matches_reference`` accepted): a correct float32 module that computes
        each sequence alone rounds differently on a non-contiguous view (other kernels), by 1.02 × the forward
        tolerance at the default seed (hostile pass 38b F5); a path computing something else errs by far more."""
        tol, just = self.tol_at(T, "unit")
        try:
            own = FACTOR_FORWARD * _rel(self.outs[T], self.reference_out(self.xs[T]))
        except Exception:  # noqa: BLE001 - no reference here: the forward tolerance alone
            return tol, just
        if math.isfinite(own) and own > tol:
            return own, (f"{FACTOR_FORWARD:g} × the module's own error on its eval path at T = {T} ({own / FACTOR_FORWARD:.3g}"
                         f"; above the forward tolerance {tol:.3g}): the rounding of another memory layout")
        return tol, just

    def prop_inference_mode(self) -> Property | None:
        """The module under ``torch.inference_mode()`` (the path serving code takes) on a copy of it
        (inference tensors it caches must not reach the other properties' autograd), at every probed
        length: ``None`` when its outputs equal the no-grad ones (``matches_reference`` judged them);
        else those outputs against the reference, under ``matches_reference``'s rule."""
        name = "matches_reference_in_inference_mode" if self.against is None else "matches_against_in_inference_mode"
        g = self.f
        if isinstance(self.f, torch.nn.Module):
            try:
                g = copy.deepcopy(self.f)
            except Exception:
                return None
        label, cause = "the path under torch.inference_mode()", "a branch on torch.is_inference_mode_enabled()?"

        def inferred(z):
            with torch.inference_mode():
                return self._call_synced(g, self._as_input(z, False), label).clone()
        leak = (self._leak_on(name, label, inferred, cause) or self._large_fail(name, label, inferred, cause)
                or self._wrote_fail(name, label))
        if leak is not None:
            return leak
        outs, raised, raised_all = {}, None, []
        for T in self.outs:
            x = self.xs[T].to(dtype=self.pdt, device=self.device).clone(memory_format=torch.contiguous_format)
            try:
                with torch.inference_mode():
                    o, _ = call(g, x)
                    o = o.detach().to(device="cpu", dtype=torch.float64, copy=True)
            except OutputOffError:  # no numbers: dtype_and_device_preserved names it (28b F4)
                continue
            except Exception as exc:  # a path the module does not support: not this property's finding, but said
                raised = raised or (exc, T)  # (a module raising there was "ok, all 16 hold" with no word: 24b N9)
                raised_all.append((T, exc, "the module"))
                continue
            if isinstance(o, torch.Tensor) and tuple(o.shape) == tuple(self.outs[T].shape):
                outs[T] = o.clone()
        if not outs and raised is not None:
            p = _skip(name, f"not available: the module raised {exc_text(raised[0])} under torch.inference_mode() at "
                            f"T = {raised[1]} (and every other length): that path is not judged")
            p.numbers = {"unavailable": exc_text(raised[0]), "why": "raised under torch.inference_mode()"}
            return p
        worst, differs = None, False
        for T, o in outs.items():
            tol, just = self.tol_at(T, "unit")
            if not _rel(o, self.outs[T]) <= tol:
                differs = True
            e = _rel(o, self.reference_out(self.xs[T]))
            r = e / tol if math.isfinite(e) else float("inf")
            if worst is None or r > worst[0]:
                worst = (r, e, tol, just, T)
        if (not differs or worst is None) and raised is not None:  # it ran at the other lengths: said, not passed
            gone = sorted(T for T, _, _ in raised_all)  # over in silence (33b F5)
            p = _skip(name, f"not judged at T = {', '.join(map(str, gone))}: the module raised {exc_text(raised[0])} "
                            f"under torch.inference_mode() there (at the other lengths it gives the no_grad outputs)")
            p.numbers = {"unavailable": exc_text(raised[0]), "why": "raised under torch.inference_mode()"}
            return p
        if not differs or worst is None:
            return None
        _, e, tol, just, T = worst
        return _judge(name, e, tol, just, f"the outputs under torch.inference_mode() at T = "
                      f"{', '.join(map(str, sorted(outs)))} differ from those under no_grad; against the reference: "
                      f"worst at T = {T} (a branch on torch.is_inference_mode_enabled()?)", central=True)

    def _differs(self, out_of, outs: dict | None = None) -> bool:
        """Whether a path's outputs differ at all (bit for bit, NaN as NaN) from the eval path's at some probe: every
        length, at unit, large and huge logits. Where none does, the eval path's structural properties have judged the same
        outputs (the full redraw on every path tripled the check's time)."""
        from numerics.attention_structural import kept

        def same(a, b):
            return a.shape == b.shape and bool(torch.equal(torch.nan_to_num(a, nan=7.0), torch.nan_to_num(b, nan=7.0)))
        for T, o_eval in (self.outs if outs is None else outs).items():
            if not same(kept(out_of(self.xs[T])), o_eval):
                return True
            for key in ("large", "huge"):  # (every scale the structural properties probe)
                c = self.factor(self.xs[T], key)
                if c is not None and T >= 2 and not same(kept(out_of(self.xs[T] * c)),
                                                         kept(self.run(self.xs[T] * c)[1])):
                    return True
        return False

    def _call_synced(self, g, x: torch.Tensor, label: str | None = None, grad: bool = False) -> torch.Tensor:
        """``g(x)``'s output, ``g`` a copy of the module called with the key-padding mask the probe has set on its own
        wrapper (``valid``) meanwhile, and none after (a mask left on the copy changed its later outputs)."""
        sync = g is not self.f and hasattr(g, "valid") and hasattr(self.f, "valid")
        if sync:
            g.valid = self.f.valid
        before = x.detach().clone()
        try:
            return call(g, x, grad=grad)[0]
        finally:
            if sync:
                g.valid = None
            mask_written = getattr(g, "mask_written", 0) > 0 if g is not self.f else False  # (a copy's own count)
            if label is not None and (mask_written or x.shape != before.shape or not torch.equal(
                    torch.nan_to_num(x.detach(), nan=7.0), torch.nan_to_num(before, nan=7.0))):
                self.__dict__.setdefault("_path_wrote", set()).add(label)  # the input or the mask written (22b F7, 23b F7)

    def _wrote_fail(self, name: str, label: str) -> Property | None:
        """The module wrote into its input on ``label``'s path (``input_unchanged`` judges the eval path only)."""
        if label not in self.__dict__.get("_path_wrote", set()):
            return None
        return Property(name, "fail", float("inf"), 0.0, "the module must not write into its input (exact)",
                        f"on {label}, the module wrote into the input or the key-padding mask it was given (x.zero_(), "
                        "mask.fill_(...)): a caller on that path gets its tensor changed", {}, True)

    def _path_input(self, x64: torch.Tensor, kind: str, grad: bool = False) -> torch.Tensor:
        """A probe as a path gives it: a copy, a non-contiguous view, or (``nonleaf``) the output of an operation on a
        leaf that requires grad, as a layer inside a network being trained gets it (its ``grad_fn`` set)."""
        if kind != "nonleaf":
            return self._as_input(x64, kind == "noncontig")
        with torch.enable_grad():
            return self._as_input(x64, False).requires_grad_(True) * 1.0

    def _as_input(self, x64: torch.Tensor, noncontig: bool) -> torch.Tensor:
        """A probe as the module takes it (its dtype and device, a copy), or as a non-contiguous view."""
        x = x64.to(dtype=self.pdt, device=self.device)
        return x.transpose(1, 2).contiguous().transpose(1, 2) if noncontig else x.clone()

    def _random(self, g) -> bool:
        """Whether ``g`` gives two different outputs on the identical input (dropout in training mode): such a path
        decides nothing, and is not compared."""
        Ts = [t for t in self.outs if t >= 2]
        if not Ts:
            return False
        x = self.xs[min(Ts)]
        try:
            a = call(g, self._as_input(x, False))[0].detach().to("cpu", torch.float64, copy=True)
            b = call(g, self._as_input(x, False))[0].detach().to("cpu", torch.float64, copy=True)
        except Exception:
            return False
        return a.shape == b.shape and not bool(torch.equal(a, b))

    def _grads_by_backward(self, x64: torch.Tensor, params: list, cot: torch.Tensor) -> tuple | None:
        """The gradients of ``<out, cot>`` with respect to the input and ``params`` through
        ``.backward()`` (the parameters' own ``.grad`` restored afterwards), or None when that raises too."""
        saved = [p.grad for p in params]
        try:
            for p in params:
                p.grad = None
            with torch.enable_grad():
                xm, out, _ = self.run(x64, grad=True)
                if not isinstance(out, torch.Tensor) or not out.requires_grad:
                    return None
                out.backward(cot.to(out.dtype).to(out.device))
            return tuple([xm.grad] + [p.grad for p in params])
        except Exception:
            return None
        finally:
            for p, g in zip(params, saved):
                p.grad = g


_PLAIN_GRAD = "the path with autograd enabled and an input that does not require grad (a plain model(x))"
_IN_NETWORK = "a non-leaf input that requires grad, with autograd enabled (a layer inside a network being trained)"
_TRAIN_STEP = "training mode with autograd enabled (a training step)"


def bad_first(props: list):
    return next((p for p in props if p.status == "fail"), None)


def _runs(out_of, x: torch.Tensor) -> bool:
    try:
        out_of(x)
        return True
    except Exception:  # noqa: BLE001 - a length the path does not run at: its own property says so
        return False


class _OnPath:
    """The probe seen through another execution path: ``run`` calls ``out_of``; everything else (the probes, the
    declaration, the lengths, the factors) is the probe's own. Its own dependence cache (a path's outputs are not the
    eval path's)."""

    def __init__(self, probe, out_of):
        self._probe, self._out_of, self._dep_cache = probe, out_of, {}

    def __getattr__(self, name):
        return getattr(self._probe, name)

    def run(self, x64: torch.Tensor, grad: bool = False):
        return None, self._out_of(x64), None

    def _large_lengths(self) -> list[int]:
        """Of the lengths the path runs at (the view's own ``outs``), not the probe's: a path raising at the middle
        probe length was asked for its large batch there, a ``KeyError`` traceback (hostile pass 34b F1)."""
        return type(self._probe)._large_lengths(self)


def _judged_lengths(Ts: list[int], raised: dict) -> str:
    """``T = 2, 5`` and, where the backward raised at some lengths, which (not judged there: 24b F16)."""
    judged = [t for t in Ts if t not in raised.get("lengths", [])]
    gone = (f" ({raised.get('what', 'the backward')} raised {exc_text(raised['first'][0])} at T = "
            f"{', '.join(map(str, raised['lengths']))}: not judged there)") if raised else ""
    return f"T = {', '.join(map(str, judged))}{gone}"
