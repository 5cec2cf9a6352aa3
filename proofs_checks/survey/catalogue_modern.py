"""Survey entries for attention as written today: FlexAttention, Keras 3, timm, open_clip, further Hugging Face families, torchtune/litgpt."""

from __future__ import annotations

from proofs_checks.survey.entry import Entry, _e  # noqa: F401

ENTRIES: list[Entry] = []
