"""The tests here drive a `trellis serve` subprocess (process.py, shared with benchmarks/serve_bench.py)."""
