"""The oracle: after every phase of a seeded workload on a real PostgreSQL, captured by real
Debezium, `dbt build` (incremental) must leave every silver table equal to PostgreSQL; and at
the end, each history model read "as of" every phase boundary must equal PostgreSQL's state
captured at that boundary.

Every build is compared with PostgreSQL; the data tests run in the last build of each seed.
Seeds: 1 by default (CI); `--oracle-seeds 50` or `CDC_ORACLE_SEEDS=50` for the slow mode
(see docs/testing.md, "The oracle"). Each seed covers all landing shapes: Debezium envelope with and
without JsonConverter schemas, ExtractNewRecordState rows, and query-based JDBC-style rows;
every other seed (1001, 1003, ...) lands the Debezium topics in three Kafka partitions. Every
third seed (1001, 1004, ...) also runs the real pieces: Debezium's PostgreSQL connector in a
Kafka Connect worker, a Kafka broker, and the project's landing sink connector; what they land
must equal, event for event, what the capture tool landed, and it is their landing that dbt
builds. CI's seed (1001) is a history through Kafka Connect in three partitions; the history of
one partition landed by the capture tool that the slow mode's even seeds run is, in CI, the fault
history's (test_oracle_faults.py, seed 2001).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from oracle import OracleRun

from devstack.pg import TemporaryPostgres

pytestmark = pytest.mark.system

PHASES = 3
TRANSACTIONS = 120
# Every other seed lands its Debezium topics in three Kafka partitions (a key stays in one, the
# partitions' files interleave): the order of each key's events must not depend on the layout.
PARTITIONS = {0: 1, 1: 3}


def through_kafka(seed: int) -> bool:
    """1001, 1004, ...: CI's seed, a third of the slow mode's."""
    return seed % 3 == 2


def test_lake_equals_database_after_every_phase(oracle_seed: int, tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(
            pg,
            tmp_path,
            oracle_seed,
            partitions=PARTITIONS[oracle_seed % 2],
            kafka=through_kafka(oracle_seed),
        )
        try:
            _history(run)
        finally:
            run.close()


def _history(run: OracleRun) -> None:
    run.start()
    boundaries = []
    for phase in range(1, PHASES + 1):
        run.phase(phase, TRANSACTIONS)
        boundaries.append(run.boundary())
        run.deliver()
        export = run.build(f"phase{phase}", data_tests=phase == PHASES)
        run.assert_lake_equals_database(export, f"phase {phase}")
    for phase, (at, state) in enumerate(boundaries, start=1):
        run.assert_history_as_of_equals(export, at, state, f"history as of phase {phase}")
    run.source.drop()
