"""What a configuration value means in the library release it came from (``check attention`` reads a
module's configuration as evidence, never as a fact in one release's semantics).

Only what was read in each release's own source is encoded; anything else is reported as read,
without interpretation (:func:`hf_window` returns ``None``).

Hugging Face's ``config.sliding_window = W`` on a causal model: the keys query ``t`` attends to, as the
mask the model builds (eager / SDPA paths, no cache) gives them, by release:

================  ======================================================================  =================
release           mask construction                                                       keys
================  ======================================================================  =================
4.34              ``_make_sliding_window_causal_mask``: ``triu(diagonal=-W)``             t−W … t
4.35 – 4.38       ``_make_causal_mask``: ``1 − triu(diagonal=past − W + 1)``; SDPA        t−W+1 … t
                  (4.36 – 4.38) ignores the window
4.39              eager: ``tril(diagonal=past − W − 1)`` masked; SDPA ignores the window   t−W … t (eager)
4.40 – 4.41       eager and SDPA: ``tril(diagonal=past − W − 1)`` masked                   t−W … t
4.42 – 4.52       ``arange ≤ cache_position − W`` masked                                   t−W+1 … t
≥ 4.53, 5.x       ``masking_utils.sliding_window_overlay``: ``kv_idx > q_idx − W``         t−W+1 … t
================  ======================================================================  =================

Mistral follows the table. Starcoder2 (from 4.39) differs in 4.42 – 4.45, whose ``_update_causal_mask``
(copied from Llama) builds no window at all: the window is ignored on the eager and SDPA paths, as it
is by 4.39's SDPA path. FlashAttention's ``window_size=(W, W)`` keeps t−W … t in every release (not
modelled: it needs a GPU build). Other model types are interpreted from 4.53 on (one mask function
for all), and reported as read before that. GPT-Neo's local layers keep ``t−W+1 … t`` in every
release (``bias ^ tril(bias, −window_size)``, the layer's own buffer). x-transformers'
``max_attend_past = M`` masks the keys with ``q − k > M`` (2.31.10: ``dist > max_attend_past``): a
look-back of ``M`` on top of whatever causality the module has, no bound to the right.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Library", "WindowMeaning", "library_of", "hf_window", "hf_attn_path", "xt_window", "window_text"]


@dataclass(frozen=True)
class Library:
    name: str                   # the distribution ("transformers")
    version: str | None         # the running release, None when it cannot be told

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else f"{self.name} (version unknown)"

    def at_least(self, *v: int) -> bool | None:
        t = _vtuple(self.version)
        return None if t is None else t[:len(v)] >= v

    def below(self, *v: int) -> bool | None:
        t = _vtuple(self.version)
        return None if t is None else t[:len(v)] < v


@dataclass(frozen=True)
class WindowMeaning:
    """``span = (L, R)``: keys ``t − L … t + R`` (``R`` None: unbounded), ``None``: the window is ignored."""
    span: tuple[int, int | None] | None
    why: str                    # the release and the code that decide it

    @property
    def keys(self) -> int | None:
        """The number of keys of a causal window (``L + 1``), else None."""
        return None if self.span is None or self.span[1] != 0 else self.span[0] + 1


_DIST = {"transformers": "transformers", "x_transformers": "x-transformers", "diffusers": "diffusers",
         "litgpt": "litgpt", "timm": "timm", "torchtune": "torchtune", "local_attention": "local-attention",
         "torchscale": "torchscale"}


def _vtuple(v: str | None) -> tuple[int, ...] | None:
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", v or "")
    return None if m is None else tuple(int(g or 0) for g in m.groups())


def library_of(obj: Any) -> Library | None:
    """The library a module's class comes from and the release running (its ``__version__``, else the
    installed distribution's), or None for a class of no library this knows."""
    top = (type(obj).__module__ or "").split(".")[0]
    dist = _DIST.get(top)
    if dist is None:
        return None
    ver = getattr(sys.modules.get(top), "__version__", None)
    if not isinstance(ver, str):
        try:
            ver = md.version(dist)
        except md.PackageNotFoundError:
            ver = None
    return Library(dist, ver)


def hf_attn_path(m: Any, cfg: Any) -> str:
    """``"sdpa"``, ``"flash"`` or ``"eager"``: the attention class's name where it says (4.36 – 4.47:
    ``MistralSdpaAttention``), else the config's ``_attn_implementation`` (the model's mask builder
    follows it), else eager."""
    name = type(m).__name__.lower()
    if "sdpa" in name:
        return "sdpa"
    if "flash" in name:
        return "flash"
    try:
        impl = getattr(cfg, "_attn_implementation", None)
    except Exception:
        impl = None
    if isinstance(impl, str) and "sdpa" in impl:
        return "sdpa"
    if isinstance(impl, str) and "flash" in impl:
        return "flash"
    return "eager"


def window_text(span: tuple[int, int | None]) -> str:
    L, R = span
    right = "t" if R == 0 else ("every later key" if R is None else f"t+{R}")
    keys = f" ({L + 1} keys)" if R == 0 else ""
    return f"keys t−{L} … {right}{keys}" if L else f"keys t … {right}{keys}"


def hf_window(model_type: str | None, W: int, lib: Library | None, path: str, *, causal: bool | None = None,
              own: bool = False) -> WindowMeaning | None:
    """What ``config.sliding_window = W`` means for a causal ``model_type`` model of release ``lib`` on
    ``path`` (see the module docstring), or None where not known (reported as read). ``causal=False``: a
    module that says it is bidirectional (its ``is_causal`` is False: ModernBERT's local layers). Since
    transformers 5 its model's mask keeps ``|q − k| ≤ config.sliding_window`` on both sides
    (``sliding_window_bidirectional_overlay``), and the layer's own ``sliding_window`` (``own``) is that
    plus one; before 5, not known.

        >>> lib = Library("transformers", "5.23.0")
        >>> hf_window("modernbert", 5, lib, "eager", causal=False, own=True).span
        (4, 4)
        >>> hf_window("modernbert", 4, lib, "eager", causal=False).span
        (4, 4)
    """
    if lib is None or lib.version is None:
        return None
    at = f"{path} path"
    if causal is False:
        if not lib.at_least(5):
            return None
        half = W - 1 if own else W
        return WindowMeaning((half, half), f"{at}: a bidirectional layer: its model's mask keeps |q − k| ≤ "
                                           f"config.sliding_window = {half} (sliding_window_bidirectional_overlay)"
                                           + ("; the layer's own sliding_window is that + 1" if own else ""))
    if path == "flash":
        return WindowMeaning((W, 0), f"{at}: FlashAttention window_size=(W, W)")
    wide = WindowMeaning((W, 0), f"{at}: the causal mask is banded with tril(diagonal = past − W − 1)")
    narrow = WindowMeaning((W - 1, 0), f"{at}: keys at or before t − W are masked")
    ignored = WindowMeaning(None, f"{at}: the mask the model builds has no window (full causal attention)")
    if lib.at_least(4, 53):
        return narrow
    if model_type not in ("mistral", "starcoder2"):
        return None
    sc2 = model_type == "starcoder2"
    if lib.below(4, 35):
        return WindowMeaning((W, 0), f"{at}: _make_sliding_window_causal_mask's triu(diagonal = −W)")
    if lib.below(4, 39):
        return ignored if path == "sdpa" else narrow
    if lib.below(4, 40):
        return ignored if path == "sdpa" else wide
    if lib.below(4, 42):
        return wide
    if sc2 and lib.below(4, 46):
        return ignored
    return narrow


def xt_window(M: int, causal: bool | None, lib: Library | None) -> WindowMeaning:
    """x-transformers' ``max_attend_past = M``: keys with ``q − k > M`` masked, nothing else."""
    span = (M, 0) if causal else (M, None)
    return WindowMeaning(span, f"keys with q − k > {M} masked: a look-back; "
                               + ("causal by the module's causal" if causal else "no bound to the right: the module "
                                  "is not causal"))
