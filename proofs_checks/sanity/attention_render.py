"""``check attention``, stages *verdict* and *render*: the verdict from the property rows, and the lines
and the JSON document of the result (what was declared and where each value came from, what was
read from the module, the window measured, the precision judged)."""

from __future__ import annotations

from proofs_checks.sanity._common import SanityResult
from proofs_checks.sanity.attention_evidence import window_note
from proofs_checks.sanity.attention_verdict import _decide, _decl, _grouping_line, attention_verdict

__all__ = ["render"]


def _flag_text(decl, k: str) -> str:
    """A given field as the flag that declares it (``--window 4``, ``--causal``, ``--quick``)."""
    from proofs_checks.sanity.attention_declaration import FLAGS
    from proofs_checks.sanity.attention_hints import _exact

    v = getattr(decl, k)
    if isinstance(v, bool):
        return FLAGS[k]
    if k == "mode":
        return f"--{v}"
    if k == "window" and isinstance(v, tuple):
        return f"--window {v[0] + 1}" if decl.causal and v[1] == 0 else f"--window {v[0]},{v[1]}"
    if isinstance(v, tuple):
        return f"{FLAGS[k]} {','.join(map(str, v))}"
    return f"{FLAGS[k]} {_exact(v) if isinstance(v, float) else v}"


def _heads(info: dict) -> str:
    """The number of heads the run used, and whether it was assumed (nothing mapped, declared or read)."""
    h = info["heads"]
    return (f"{h} head{'s' if h != 1 else ''}"
            + (" (assumed: no weights mapped and none declared; --heads H declares it)" if info.get("heads_assumed")
               else ""))


def _head_lines(pr, ld, decl, done, weights, ch, ev) -> list[str]:
    """The run's description: sizes, the declaration, the weights, what the module's configuration said."""
    probe, st, mp = pr.probe, ch.st, ch.mp
    found = (f"found by name ({weights.no_table}), not used: --positional learned and no position table beside them"
             if weights.no_table else f"none mapped: {weights.why}" if weights.why
             else "no projections found by name (fitted where possible)")
    lines = [f"attention {ld.name}: D = {ld.D}, lengths {', '.join(map(str, probe.outs))} (batch {probe.B}), "
             f"{_heads(ev.info)}, {decl.dtype} on {decl.device}, {_decl(st)}, seed {decl.seed}",
             f"weights: {ev.info.get('mapping') or found}"]
    given = [_flag_text(decl, k) for k, p in decl.provenance if p.kind == "given"]
    if given:
        lines.append(f"declared by you: {', '.join(given)} (they win over the module's configuration)")
    if decl.ignore_config:
        lines.append("the module's configuration was not read (--ignore-config)")
    elif done.lines:
        lines.append(f"read from the module: {', '.join(done.lines)}")
    lines.extend(f"note: {_scaling_outcome(n, ev.props)}" for n in done.notes)
    if mp is not None:
        lines.append(_grouping_line(mp, decl.kv_grouping is not None or bool(weights.hook and mp.kv_heads < mp.heads)))
    return lines


_CUSTOM_BACKWARD = "(if the forward pass matches: a custom backward?)"


def _norm_order_in_context(props, notes) -> None:
    """A module that normalises q and k after RoPE (a note says so: HunYuan, torchtune) has norm-weight
    gradients that differ from the reference's (norm before RoPE) even where the outputs agree: a failed
    ``gradients_match_reference`` whose worst entry is such a weight names that order, not a custom backward."""
    import dataclasses

    if not any("normalises q and k after" in n for n in notes):
        return
    for i, p in enumerate(props):
        d = p.detail or ""
        if p.name == "gradients_match_reference" and p.status == "fail" and _CUSTOM_BACKWARD in d and \
                any(w in d.split("worst: ", 1)[-1].split(" at ")[0] for w in ("norm", "layernorm")):
            props[i] = dataclasses.replace(p, detail=d.replace(_CUSTOM_BACKWARD, "(the q/k norm applied after RoPE, "
                                                                              "which the note names)"))


_WILL_NAME = "scale_1_over_sqrt_dk and matches_reference will name it"


def _scaling_outcome(note: str, props) -> str:
    """The module's ``scaling`` note said with what was measured: when ``scale_1_over_sqrt_dk`` holds, the
    module applies 1/√d_k all the same, elsewhere (ESM multiplies q by it before RoPE and keeps
    ``scaling = 1``), and nothing names it."""
    sc = next((p for p in props if p.name == "scale_1_over_sqrt_dk"), None)
    if _WILL_NAME not in note or sc is None or sc.status != "pass":
        return note
    return note.replace(_WILL_NAME, "yet the logit scale measured is 1/√d_k (scale_1_over_sqrt_dk holds): the module "
                                    "applies it elsewhere (ESM multiplies q by it before RoPE)")


def _eval_fails_too(props) -> None:
    """A path's row says "X fails there (the eval path keeps it; a branch on …?)" when it is written; where X failed on
    the eval path too (known only once every row exists), that is said instead (31b N3)."""
    import re

    failed = {p.name for p in props if p.status == "fail"}
    for p in props:
        for name in failed & set(re.findall(r"(\w+) fails there \(the eval path keeps it", p.detail or "")):
            p.detail = re.sub(rf"{name} fails there \(the eval path keeps it(; [^?]*\?)?\)",
                              f"{name} fails there (it fails on the eval path too)", p.detail)


def render(pr, ld, decl, done, weights, ch, ev, window_given: bool) -> SanityResult:
    """The verdict (central properties decided first) and the result: lines, rows, the JSON document."""
    from numerics import attention_probe as ap

    probe, info = pr.probe, ev.info
    _decide(ev.props, ch.st, list(probe.outs), weights.no_table, window_given=window_given)
    _norm_order_in_context(ev.props, done.notes)
    if probe.precision is not None:
        info["working_precision"] = {"dtype": probe.precision.name, "how": probe.precision.how}
    _eval_fails_too(ev.props)
    rows = [p.to_json() for p in ev.props]
    verdict = attention_verdict(rows, f"attention {ld.name}", ev.hints)
    lines = _head_lines(pr, ld, decl, done, weights, ch, ev)
    wnote = window_note(probe, done.read, window_given) if probe.outs else None
    left = getattr(pr.probe, "training_left_out", None)  # (said, not silent: 31b N9)
    lines.extend(ev.warnings + weights.notes + pr.notes + ([wnote] if wnote else []) + ([f"note: {left}"] if left else []))
    if wnote:
        info["window_measured"] = wnote.removeprefix("note: window: ")
    if left:
        info["training_mode_not_judged"] = left
    if probe.precision is not None:
        fits = getattr(probe, "fits_precision", None)
        lines.append(f"working precision: {probe.precision.name} ({probe.precision.how})" + (
            f"; the module computes in {ap.dtype_name(fits)} (precision_as_declared)" if fits is not None else ""))
        if fits is not None:
            info["working_precision"]["fits"] = ap.dtype_name(fits)
    doc = {"check": "attention", "object": ld.name, "inputs": info, "hints": ev.hints, "config_read": done.lines,
           "config_differs": [{"field": d.key, "flag": d.flag, "declared": list(d.declared) if isinstance(d.declared, tuple)
                               else d.declared, "read": d.read.text()} for d in done.differs]}
    return SanityResult("attention", doc, verdict, rows, lines, ev.figures)
