"""Benchmarks: timings as ratios against a baseline measured in the same run (never timed tests).

Each ``bench_<topic>.py`` is runnable as ``python -m benchmarks.bench_<topic>`` and prints a
Markdown table; ``python -m benchmarks.run`` runs them all. Measured numbers go into RESULTS.md.
"""
