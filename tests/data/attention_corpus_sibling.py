"""Imported by ``attention_corpus.sibling_factory`` when the factory is called (not at import)."""

from attention_corpus import Plain


def make():
    return Plain(16, 2)
