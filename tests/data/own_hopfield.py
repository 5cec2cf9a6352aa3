"""Hopfield updates for ``tests/test_sanity_hopfield.py``: the modern update, and a wrong one."""

import torch


def modern(xi, patterns, beta):
    """ξ ↦ X softmax(β Xᵀξ) in rows."""
    return torch.softmax(beta * xi @ patterns.T, -1) @ patterns


def too_hot(xi, patterns, beta):
    """Uses β/4 instead of β: not the modern update at this β; its one-step error exceeds the bound."""
    return torch.softmax(beta / 4 * xi @ patterns.T, -1) @ patterns


def uphill(xi, patterns, beta):
    """Moves away from the retrieved pattern: the energy rises."""
    return 2 * xi - torch.softmax(beta * xi @ patterns.T, -1) @ patterns
