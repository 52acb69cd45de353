"""Shared pytest fixtures for the Python tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One small in-process Spark for the whole run: one core (the machine is shared), UTC so
    timestamps compare exactly, no UI, a private warehouse folder, and the Avro data source."""
    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[1]")
        .appName("cdc-lakehouse-tests")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        # Spark's Avro data source (jvm/pom.xml), for the Avro landing reader's tests.
        .config("spark.jars", str(Path(__file__).resolve().parents[2] / "jars" / "spark-avro.jar"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# The oracle's seeds: 2 in CI (1001: three Kafka partitions per topic, through real Kafka
# Connect; 1002: one partition, landed by the test), more with `--oracle-seeds N` or
# CDC_ORACLE_SEEDS=N (slow mode).
DEFAULT_ORACLE_SEEDS = 2
FIRST_ORACLE_SEED = 1001


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--oracle-seeds",
        type=int,
        default=None,
        help=f"PostgreSQL oracle seeds (default {DEFAULT_ORACLE_SEEDS}, env CDC_ORACLE_SEEDS)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    count = metafunc.config.getoption("--oracle-seeds") or int(
        os.environ.get("CDC_ORACLE_SEEDS", DEFAULT_ORACLE_SEEDS)
    )
    # The DDL oracle (test_oracle_ddl.py) runs a third as many: 1 in CI, 17 in the slow mode.
    for fixture, seeds_count in (("oracle_seed", count), ("ddl_oracle_seed", -(-count // 3))):
        if fixture in metafunc.fixturenames:
            seeds = [FIRST_ORACLE_SEED + i for i in range(seeds_count)]
            metafunc.parametrize(fixture, seeds, ids=[f"seed{s}" for s in seeds])


def pytest_sessionstart(session: pytest.Session) -> None:
    from oracle import REPORT

    # Under pytest-xdist (make test) the controller starts the report; its workers append to it.
    if not hasattr(session.config, "workerinput"):
        REPORT.unlink(missing_ok=True)


# The longest files first (seconds of each file in the last full `make test` run before the
# faster-tests branch, each beside another file on the 2 cores; that branch's changes take a few
# percent off the oracle files; test_hudi_format.py: 460 s alone, estimated beside another file):
# under `make test` pytest-xdist hands whole files to its 2
# processes in collection order, so a long file started last would leave one process idle at
# the end.
LONG_FILES = {
    "test_table_formats.py": 1577,
    "test_oracle_faults.py": 1243,
    "test_oracle.py": 1278,
    "test_cluster_targets.py": 879,
    "test_shared_metastore.py": 595,
    "test_pipeline_e2e.py": 785,
    "test_benchmarks.py": 543,
    "test_peers.py": 691,
    "test_hudi_format.py": 857,
    "test_oracle_ddl.py": 264,
    "test_schema_changes.py": 255,
    "test_debezium_samples_e2e.py": 294,
    "test_docs_site.py": 148,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -LONG_FILES.get(item.path.name, 0))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from lakehouse import stop_dbt_worker

    stop_dbt_worker()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The oracle's figures (also what the README quotes), when oracle tests ran."""
    from oracle import REPORT, summarize

    if REPORT.exists():
        terminalreporter.write_sep("=", "PostgreSQL oracle")
        terminalreporter.write_line(summarize(REPORT))


from object_store_stack import object_store_stack  # noqa: E402, F401
