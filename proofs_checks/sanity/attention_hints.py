"""``check attention``, stage *hint verification*: each hint at a cause (a change of the
declaration, a coarser precision, mixed axes, a scale) is printed only when a rerun under it holds at
every probed length."""

from __future__ import annotations

import math

from proofs_checks.sanity.attention_declaration import QK_NORMS
from proofs_checks.sanity.attention_verdict import _covers, _decl  # noqa: F401


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
                # --rope-dims d_k (read from a table of d_k/2 frequencies) is every dimension: the same declaration
                if s2 != st and s2 != st.variant(rope_dims=None if st.rope_dims == dk else st.rope_dims):
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
    if 1 < m.kv_heads < m.heads:  # one key/value head: every grouping is the same (h // H = h % 1 = 0)
        import dataclasses

        other = "tile" if m.kv_grouping == "interleave" else "interleave"
        out.append((f"--kv-grouping {'tiled' if other == 'tile' else 'hf'}", st,
                    dataclasses.replace(m, kv_grouping=other)))
    for a in alts:
        out.append((_heads(a.heads) + (f", {a.kv_heads} key/value head{'s' * (a.kv_heads != 1)}"
                                       if a.kv_heads != a.heads or a.kv_heads != m.kv_heads else "")
                    + (" (--kv-grouping tiled)" if 1 < a.kv_heads < a.heads and a.kv_grouping == "tile" else ""), st, a))
    return out


def _heads(n: int) -> str:
    """``"4 heads"``, ``"1 head"``."""
    return f"{n} head{'s' * (n != 1)}"


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
            if m.kv_grouping == "tile" and m.kv_heads > 1:
                flags.append("--kv-grouping tiled")
    return " ".join(flags)


def _read_differs(read: dict, st, m) -> str:
    """When a verified hint's declaration (``st``, ``m``) differs from a value read from the module
    (``read``: field → :class:`~proofs_checks.sanity._modconfig.Item`, interpreted in its library's
    semantics; a window by the keys it means, never by arithmetic on the raw number), the words that
    say so and the flags that declare it (a declared value wins over the configuration: nothing needs
    switching off); else ""."""
    bad = []
    for key, it in (read or {}).items():
        if not it.interpreted:
            continue  # reported as read: what it means is not known, so no difference can be said
        value = it.value
        if key == "causal":
            differs = bool(value) and not st.causal
        elif key == "window":
            differs = it.span is not None and st.window != tuple(it.span)
        elif key in ("rope_base", "rope_dims"):
            differs = st.positional == "rope" and getattr(st, key) is not None and float(getattr(st, key)) != float(value)
        elif key == "softcap":
            differs = st.softcap is None or float(st.softcap) != float(value)
        elif key == "kv_heads":
            differs = m is not None and m.kv_heads != int(value)
        else:
            differs = False
        if differs:
            bad.append(it.source if key == "window" else f"{it.source} = {_fmt_value(value)}")
    if not bad:
        return ""
    # no flag declares "not causal", "no window" or "no softcap": only --ignore-config keeps the module's claim out
    causal_read = bool((read.get("causal").value if read.get("causal") is not None else False)) and not st.causal
    none = [w for w, k, v in (("a module not causal", "causal", causal_read), ("no window", "window", st.window is None),
                              ("no softcap", "softcap", st.softcap is None))
            if v and read.get(k) is not None and read[k].interpreted and (k != "causal" or causal_read)]
    if none:
        how = (f"(no flag declares {' or '.join(none)}: its configuration is then not read): {_as_flags(st, m)} "
               "--ignore-config")
    else:
        how = f"(a declared value wins over the configuration): {_as_flags(st, m)}"
    return (f"; but the module's {' and '.join(bad)} says otherwise: it does not compute what its configuration "
            f"says (a bug in the module or in its configuration); to check it against this declaration {how}")


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


def _scale_variant(sc, st, full: bool = False) -> list:
    """The fitted logit scale as a declaration (``--scale S``, S to six digits, and to every digit of the fit where
    six do not hold it: the value printed is the value rerun), when ``scale_1_over_sqrt_dk`` failed: a non-standard scale by design (Granite's
    ``attention_multiplier``, T5's unscaled logits) is then named with the flag that declares it."""
    # (also where the scale row passed: at float16 its tolerance admits a 1 % error, which then failed
    # matches_reference and was read as bfloat16 internals: hostile pass 21b F1b)
    s_fit = (sc.numbers or {}).get("s_fit") if sc is not None and sc.status in ("fail", "pass") else None
    if not isinstance(s_fit, float) or not s_fit > 0:
        return []
    s6 = float(f"{s_fit:.6g}")
    dk = (sc.numbers or {}).get("d_k")
    # the scale the check ran with: the declared one, else 1/√d_k — a hint of "--scale 0.5" at d_k = 4 named no change
    # of declaration (hostile pass 58a F1)
    ran = st.scale if st.scale is not None else (1 / math.sqrt(dk) if isinstance(dk, int) and dk > 0 else None)
    if ran is not None and (s_fit == ran if full else s6 == float(f"{ran:.6g}")):
        return []
    if full:  # every digit of the fit: six digits err by up to 5e-7, which a float64 module's rule rejects, and that
        # rounding was read as float32 internals ("--compute-dtype float32") of a float64 module (hostile pass 21b F1);
        # tried at the declared precision only (a coarser one's rounding is what moved the fit off six digits)
        return [] if st.scale == s_fit or s_fit == s6 else [(f"--scale {_exact(s_fit)}", st.variant(scale=s_fit), None)]
    return [] if st.scale == s6 else [(f"--scale {_exact(s6)}", st.variant(scale=s6), None)]


def _axes_swapped(probe, props, st, mp) -> bool:
    """The module matches with batch and time swapped, where the declaration as given does not: outputs that depend on
    no token (every value row equal) matched either way, and "verified" named a cause that was none (47a F9)."""
    res = probe.variant_errors([("swap", st.variant(swap_axes=True), None), ("as declared", st, None)])
    plain = next((r for r in res if r[2] == "as declared"), None)
    swap = next((r for r in res if r[2] == "swap"), None)
    return bool(swap and plain and swap[0] <= 1.0 < plain[0]
                and _verified(probe, [p for p in props if p.name == "matches_reference"], st.variant(swap_axes=True), mp))


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
        variants += _scale_variant(by.get("scale_1_over_sqrt_dk"), st)
        full = _scale_variant(by.get("scale_1_over_sqrt_dk"), st, full=True)
        decls: dict = {}
        for label, s2, m2 in variants + full:  # the first of equal labels: the one the errors were measured for
            decls.setdefault(label, (s2, m2))
        fits = [(r[0], r[1], r[2], "same") for r in probe.variant_errors(variants + full) if r[0] <= 1.0]
        if (not fits and probe.pdt == torch.float64 and probe.compute_dtype is None and probe.precision is not None
                and probe.precision.dtype == torch.float64):
            # float32 internals (Hugging Face's float32 softmax and RoPE angles) cannot be found by
            # probing when the declaration itself is wrong: judge the variants by the float32 rule too
            fits = [(r[0], r[1], r[2], torch.float32) for r in probe.variant_errors(variants, torch.float32)
                    if r[0] <= 1.0]
        decl = (_heads(mp.heads) + (f", {mp.kv_heads} key/value heads" if mp.kv_heads != mp.heads else "")
                + f"; {_decl(st)}")
        explained = by.get("scale_1_over_sqrt_dk") is not None and by["scale_1_over_sqrt_dk"].status == "fail"
        for _, err, label, cd in fits[:3]:  # the best few, each rerun at every length
            s2, m2 = decls[label]
            if _verified(probe, props, s2, m2, cd):
                explained = True
                # the declared precision's rule missed under this declaration too, by an error like cd's rounding
                # (≥ 0.1·u: a float32 plain reference errs ≥ 1.6·u32; a float32-rounded RoPE table alone 0.01·u32)
                if cd != "same" and err >= 0.1 * ap.unit_roundoff(cd) and not getattr(probe, "unmodelled", ()):
                    probe.fits_precision, probe.fits_precision_with, probe.fits_precision_err = cd, label, err
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
                                _read_differs(getattr(probe, "config_items", {}), s2, m2 or mp)))
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
        # nor when a read note names what no declaration models (scaled RoPE, XPOS, a sub-norm): a coarser rule may admit it
        leak = leak or bool(getattr(probe, "unmodelled", ()))
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
    if c is not None and c.status == "fail" and mp is not None and not any("axes" in h for h in hints) \
            and _axes_swapped(probe, props, st, mp):
        hints.append("batch and time axes are mixed: the module reads axis 0 as time (the probe is (batch, T, D)) "
                     "(verified: with the axes swapped, every probed length matches)")
    s = by.get("scale_1_over_sqrt_dk")
    if s is not None and s.status == "fail":
        hints.append((s.numbers or {}).get("what") or s.detail.split("; ")[-1])
