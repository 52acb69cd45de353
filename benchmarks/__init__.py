"""Benchmark suite: synthetic Debezium landing data at scale, a one-table dbt project built from
this repo's macros and decoder, reference implementations (DuckDB, a naive Spark rebuild, a
hand-written PySpark + Iceberg MERGE), and the scenarios of docs/benchmarks.md.

    python -m benchmarks.run --scale small      # a few minutes
    python -m benchmarks.run --scale 10m        # the full suite (under 30 minutes on 2 cores)
"""
