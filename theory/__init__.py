"""Symbolic derivations (SymPy only; NumPy for lambdify).

One module per topic (``attention``, ``icl``, ``att_svm``, ``hopfield``, ...). Each derivation
function starts from definitions and returns a :class:`theory.derivation.Derivation`: the steps as
``(text, SymPy expression)`` pairs plus the closed form it arrived at. Nothing here imports torch
or cvxpy.
"""
