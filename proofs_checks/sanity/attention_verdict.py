"""``check attention``, stage *verdict*: which properties decide (a window wider than every
probe, a missing position table), the verdict from the property rows, and the words for the
declared structure."""

from __future__ import annotations

from proofs_checks.sanity._verdict import Verdict
from proofs_checks.sanity.attention_declaration import MAX_LENGTH


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
                   + (f" ({p['numbers']['why']}: " if p["numbers"].get("why") else
                      f" on this device ({p['numbers'].get('device', '?')}: " if p["numbers"].get("device_limit", True)
                      else " (the module's backward raised ")
                   + f"{p['numbers']['unavailable'].split(':')[0]}), not central here" for p in unavail)
    crit = (f"{len(passed)} propert{'y' if len(passed) == 1 else 'ies'} within tolerance, {len(failed)} beyond"
            + (f"; central, not run: {', '.join(p['name'] for p in c_skip)}" if c_skip else "")
            + (f"; {na}" if na else "")
            + (f"; not applicable: {'; '.join(p['name'] + ' (' + (p.get('detail') or '') + ')' for p in n_skip)}"
               if n_skip else "")
            + "; each error is compared with its stated tolerance")
    if failed:
        from proofs_checks.sanity._common import precision_named as named

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
    if m.kv_heads == 1:  # every grouping is the same: nothing was chosen
        return f"key/value grouping: one key/value head shared by all {m.heads} query heads (multi-query attention)"
    g = m.heads // m.kv_heads
    how = f"h // {g}, as Hugging Face's repeat_kv" if m.kv_grouping == "interleave" else f"h % {m.kv_heads}, tiled"
    return (f"key/value grouping: {_grouping_name(m)} (query head h uses key/value head {how}; "
            f"{'declared by --kv-grouping' if declared else 'found: the grouping that fits the module best'})")
