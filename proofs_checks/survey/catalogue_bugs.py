"""Survey entries pairing a release with a documented attention bug (found in the library's tracker) with the release that fixed it."""

from __future__ import annotations

from proofs_checks.survey.entry import Entry, _e  # noqa: F401

ENTRIES: list[Entry] = []
