"""The last module the checks' fork server imports (:data:`proofs_checks.sanity._isolate.PRELOAD`); in that server alone
(:data:`proofs_checks.sanity._procs.IN_SERVER`; imported anywhere else it does nothing):

- the guard's snapshot of tverify's functions taken once (:func:`proofs_checks.sanity._loader.function_snapshot`), so
  that what it loads on first use (torch's lazy decompositions) is loaded here, not in every check's child;
- every object imported so far moved into the garbage collector's permanent generation (:func:`gc.freeze`): a check's
  child, forked from this server, otherwise scanned the whole imported heap (torch, SymPy, NumPy: ≈ 200,000 objects) in
  its first full collection, 0.09 CPU s of a quick ``check attention``'s ≈ 0.5, and copied every page it touched.
  Objects the child makes are collected as before.
"""

from __future__ import annotations

import contextlib
import gc

from proofs_checks.sanity import _procs

if _procs.IN_SERVER:
    import sys

    # the caller's other folders ($PYTHONPATH, a script's folder): for the user's modules the children import, never
    # for the preload list (SymPy's optional gmpy2 ran from a script's folder: hostile pass 48a F1)
    sys.path.extend(p for p in _procs.REST_PATH if p not in sys.path)
    with contextlib.suppress(Exception):
        from proofs_checks.sanity import _loader

        _loader.function_snapshot()
    gc.collect()
    gc.freeze()
