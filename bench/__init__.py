"""Benchmarks of the gateway (issue 3, item 10); run with ``python -m bench.run``.

Nothing here is a test: the figures are recorded in ``bench/README.md``.
"""
