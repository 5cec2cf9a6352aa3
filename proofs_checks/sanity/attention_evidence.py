"""A module's configuration is evidence, not a fact: what was read, what was declared, and, where it is
observable, what the module measurably does (:func:`numerics.attention_structural.kept_window`). The
declared value always wins; a difference is reported and measured, never refused."""

from __future__ import annotations

__all__ = ["window_note"]


def _keys_text(window) -> str:
    if window is None:
        return "no window"
    if window[1] == 0:
        return f"{window[0] + 1} keys (t−{window[0]} … t)"
    return f"keys t−{window[0]} … " + ("every later key" if window[1] is None else f"t+{window[1]}")


def _side(n: int, probed: int, sign: str) -> str:
    return f"every {'earlier' if sign == '−' else 'later'} key" if n >= probed else (f"t{sign}{n}" if n else "t")


def _span_note(probe, cfg, window_given: bool) -> str | None:
    """The note of a bidirectional run with a window (declared ``--window L,R``, or read): the look-back
    and look-ahead the module keeps, as measured."""
    from numerics.attention_structural import kept_span

    try:
        ks = kept_span(probe)
    except Exception:  # the user's code at a redraw: the leak properties report it
        return None
    if ks is None:
        return None
    parts = [f"config read {cfg.source}" + ("" if " = " in cfg.source else f" = {cfg.value}")] if cfg is not None else []
    if window_given:
        parts.append(f"declared {_keys_text(probe.st.window)}")
    lo, hi = _side(ks.back, ks.probed, "−"), _side(ks.ahead, ks.probed, "+")
    return ("note: window: " + ", ".join(parts) + f"; the module reads keys {lo} … {hi} as measured: redrawing token "
            f"t+k moves output t for −{ks.back} ≤ k ≤ {ks.ahead} and for no other k within ±{ks.probed} (T = {ks.T})")


def window_note(probe, read: dict, window_given: bool) -> str | None:
    """One note line for a causal run whose window was read from the module's configuration or declared:
    the config's value as written with what its library release means by it (``read["window"]``, an
    :class:`~proofs_checks.sanity._modconfig.Item`), the declared value, and the window the module keeps
    as measured."""
    from numerics.attention_structural import kept_window

    st = probe.st
    cfg = read.get("window")
    if cfg is None and not window_given:
        return None
    if not st.causal:
        return _span_note(probe, cfg, window_given)
    try:
        kw = kept_window(probe)
    except Exception:  # the user's code at a redraw: the leak properties report it
        return None
    if kw is None:
        return None
    parts = []
    if cfg is not None:  # an Item: the value as written, and what its library release means by it
        what = ": ".join(x for x in (cfg.library, cfg.meaning or ("as read, not interpreted" if not cfg.interpreted
                                                                    else "")) if x)
        parts.append(f"config read {cfg.source}" + ("" if " = " in cfg.source else f" = {cfg.value}")
                     + (f" ({what})" if what else ""))
    if window_given:
        parts.append(f"declared {_keys_text(st.window)}")
    measured = (f"the module keeps {kw.keys} keys (t−{kw.keys - 1} … t) as measured: redrawing token t−k moves output "
                f"t for k < {kw.keys} and for no larger k up to {kw.probed} (T = {kw.T})" if kw.keys <= kw.probed else
                f"the module reads every earlier key at T = {kw.T} as measured (no window up to {kw.probed} keys back)")
    return "note: window: " + ", ".join(parts) + "; " + measured
