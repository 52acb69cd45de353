"""Spark settings for a run whose input is small: the runners choose them when few bytes landed.

Spark's defaults are made for data that fills a cluster. A scheduled CDC run reads a few
megabytes, and there they cost more than the work: adaptive query execution runs every shuffle
stage as a job of its own and plans again after each (a silver resolution of 1,000 events: 15
jobs with it, 7 without), a shuffle is cut into `spark.sql.shuffle.partitions` tasks of a few
rows each, and whole-stage code generation compiles Java (Janino) for each new query before it
reads a row. For such a run the runners (`cdc_lakehouse.runner.changed`, `continuous
--changed-only`) turn the three off through the profile's variables: one shuffle partition, no
adaptive execution, expressions evaluated interpreted (Spark's NO_CODEGEN factory mode, which
its own test suites run beside the compiled path). The results are the same; only the physical
plans differ. A variable the user has set is left as it is.

"Small" is the bytes of the new landing files of the tables the run builds, at most
`--small-run-bytes` (DEFAULT_LIMIT; 0 turns it off). A run of everything (the first, or after a
change to the project) is never small: its size is not known, and an initial load wants the
defaults (1M events: 46.0 s with these settings, 35.8 s without). Measured on 2 cores in
docs/benchmarks.md ("Small runs").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# Bytes of new landing files: about 33,000 Debezium JSON events with their schemas, 100,000
# without (the benchmarks' events).
DEFAULT_LIMIT = 64_000_000

# The settings of a small run, as the profile's environment variables that give them to the
# session (profiles/profiles.yml): spark.sql.adaptive.enabled, spark.sql.shuffle.partitions,
# and spark.sql.codegen.wholeStage with spark.sql.codegen.factoryMode.
ENVIRONMENT = {
    "CDC_SPARK_ADAPTIVE": "false",
    "CDC_SHUFFLE_PARTITIONS": "1",
    "CDC_SPARK_CODEGEN": "false",
}


def is_small(new_bytes: int | None, limit: int = DEFAULT_LIMIT) -> bool:
    """Whether a run that builds tables for `new_bytes` of new landing files (None: not known)
    is small."""
    return limit > 0 and new_bytes is not None and new_bytes <= limit


def set_environment() -> dict[str, str]:
    """The profile's variables for a small run, set in this process's environment where the
    user has not set them. Returns the ones set."""
    chosen = {name: value for name, value in ENVIRONMENT.items() if name not in os.environ}
    os.environ.update(chosen)
    return chosen


@contextmanager
def in_environment(small: bool) -> Iterator[bool]:
    """While the block runs (a long-lived driver's dbt command), the profile's variables for a
    small run, where the user has not set them; afterwards the environment as it was. The
    profile is rendered for each dbt command, and the adapter sets its settings on the live
    session when the command lists the relations it will build (relations.py: `getOrCreate()`
    with the profile's settings), before any model runs: a small run gets them, the next run
    the profile's own again. A run that starts the session creates it with them. Yields
    whether the block runs with them."""
    if not small:
        yield False
        return
    chosen = set_environment()
    try:
        yield True
    finally:
        for name in chosen:
            os.environ.pop(name, None)
