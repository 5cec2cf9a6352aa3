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


def _measured(fn, probe):
    """``fn(probe)`` (a measurement by redrawing tokens), or None when the user's code raised at a redraw
    (the leak properties report it)."""
    try:
        return fn(probe)
    except Exception:
        return None


def _said(cfg, st, window_given: bool) -> list[str]:
    """The window as the config says it (the value as written, with what its library release means by
    it) and as declared."""
    parts = []
    if cfg is not None:  # an Item
        what = ": ".join(x for x in (cfg.library, cfg.meaning or ("as read, not interpreted" if not cfg.interpreted
                                                                    else "")) if x)
        parts.append(f"config read {cfg.source}" + ("" if " = " in cfg.source else f" = {cfg.value}")
                     + (f" ({what})" if what else ""))
    if window_given:
        parts.append(f"declared {_keys_text(st.window)}")
    return parts


def window_note(probe, read: dict, window_given: bool) -> str | None:
    """One note line for a run whose window was read from the module's configuration or declared: the
    config's value as written with what its library release means by it (``read["window"]``, an
    :class:`~proofs_checks.sanity._modconfig.Item`), the declared value, and the window the module keeps
    as measured (a causal module: how many keys back; a bidirectional one: how far back and ahead)."""
    from numerics.attention_structural import kept_span, kept_window

    st = probe.st
    cfg = read.get("window")
    if cfg is None and not window_given:
        return None
    kw = _measured(kept_window if st.causal else kept_span, probe)
    if kw is None:
        return None
    if not st.causal:
        lo, hi = _side(kw.back, kw.probed, "−"), _side(kw.ahead, kw.probed, "+")
        measured = (f"the module reads keys {lo} … {hi} as measured: redrawing token t+k moves output t for "
                    f"−{kw.back} ≤ k ≤ {kw.ahead} and for no other k within ±{kw.probed} (T = {kw.T})")
    elif kw.keys <= kw.probed:
        measured = (f"the module keeps {kw.keys} keys (t−{kw.keys - 1} … t) as measured: redrawing token t−k moves "
                    f"output t for k < {kw.keys} and for no larger k up to {kw.probed} (T = {kw.T})")
    else:
        measured = f"the module reads every earlier key at T = {kw.T} as measured (no window up to {kw.probed} keys back)"
    return "note: window: " + ", ".join(_said(cfg, st, window_given)) + "; " + measured
