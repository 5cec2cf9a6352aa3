"""Numeric references and trained models (NumPy / SciPy / cvxpy / torch).

One module per topic. Data generators, models, trainers and solvers live here; this package never
imports ``proofs_checks``. Verification runs in float64; torch code takes a ``device`` argument
("cpu" by default, "cuda" when asked).
"""
