"""Shared pytest fixtures for the Python tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

# Every Spark driver the tests start (dbt's, through profiles/profiles.yml; the peers'; the
# `spark` fixture's) runs the JIT's first tier only, unless the caller chose JVM options: the
# suite is hundreds of small builds on 2 cores, where the top tier's compilations cost more CPU
# than they save (an oracle history of 3 builds: 368 -> 275 CPU seconds, 200 -> 166 s). It
# changes no result. Benchmarks publish figures from their own runs, without it.
# The same for the other JVMs the tests start: the metastore service and the local cluster's
# daemons read CDC_SPARK_JAVA_OPTIONS, Trino CDC_TRINO_JAVA_OPTIONS.
FIRST_TIER_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"
os.environ.setdefault("CDC_SPARK_JAVA_OPTIONS", FIRST_TIER_ONLY)
os.environ.setdefault("CDC_TRINO_JAVA_OPTIONS", FIRST_TIER_ONLY)
# For the same reason Spark evaluates the tests' queries interpreted, without generating and
# compiling Java for each (CDC_SPARK_CODEGEN, profiles/profiles.yml): the sample built from
# empty and twice more in one process took 10% less CPU. Spark's expression factories give
# the same results either way (its own suites run both); the compiled path, production's, is
# what the benchmark suite runs (test_benchmarks.py), and the peers' sessions (test_peers.py).
INTERPRETED = os.environ.setdefault("CDC_SPARK_CODEGEN", "false").lower() == "false"


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
        .config("spark.driver.extraJavaOptions", os.environ["CDC_SPARK_JAVA_OPTIONS"])
        .config("spark.sql.codegen.wholeStage", str(not INTERPRETED).lower())
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN" if INTERPRETED else "FALLBACK")
        # Spark's Avro data source (jvm/pom.xml), for the Avro landing reader's tests.
        .config("spark.jars", str(Path(__file__).resolve().parents[2] / "jars" / "spark-avro.jar"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# The oracle's seeds: 1 in CI (1001: three Kafka partitions per topic, through real Kafka
# Connect; the history of one partition landed by the capture tool is the fault history's,
# test_oracle_faults.py), more with `--oracle-seeds N` or CDC_ORACLE_SEEDS=N (slow mode: 1002
# and every other seed is that kind). A second CI seed cost 6-7 minutes of a suite that must
# fit CI's 90 (docs/testing.md, "The budget").
DEFAULT_ORACLE_SEEDS = 1
FIRST_ORACLE_SEED = 1001
PUBLIC_DATABASES = ("pgexercises", "chinook")


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
    # The DDL oracle (test_oracle_ddl.py) runs a third as many: 1 in CI, 17 in the slow mode;
    # the type-map oracle (test_type_map_oracle.py) half as many: 1 in CI, 25 in the slow mode.
    for fixture, seeds_count in (
        ("oracle_seed", count),
        ("ddl_oracle_seed", -(-count // 3)),
        ("type_map_seed", -(-count // 2)),
    ):
        if fixture in metafunc.fixturenames:
            seeds = [FIRST_ORACLE_SEED + i for i in range(seeds_count)]
            metafunc.parametrize(fixture, seeds, ids=[f"seed{s}" for s in seeds])
    # The public sample databases (tests/fixtures/databases), a seed each in turn: CI runs the
    # first with seed 1001, the slow mode half as many seeds as the oracle, over both.
    if "public_database" in metafunc.fixturenames:
        cases = [
            (PUBLIC_DATABASES[i % len(PUBLIC_DATABASES)], FIRST_ORACLE_SEED + i)
            for i in range(max(1, count // 2))
        ]
        metafunc.parametrize("public_database", cases, ids=[f"{d}-seed{s}" for d, s in cases])


# The machine's speed at the start and the end of the run (benchmarks/gauge.py: work none of the
# project's code takes part in, about 10 s each), printed beside the oracle's figures when
# CDC_MACHINE_GAUGE=1 (`make test` sets it): the shared 2-core machine's speed moves from day
# to day, and a suite's minutes compare only beside it.
GAUGE: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    from oracle import REPORT

    # Under pytest-xdist (make test) the controller starts the report; its workers append to it.
    if not hasattr(session.config, "workerinput"):
        if os.environ.get("CDC_MACHINE_GAUGE") == "1":
            from benchmarks.gauge import machine_gauge

            GAUGE["start"] = machine_gauge()
        REPORT.unlink(missing_ok=True)
        # The example project's dbt package (packages.yml), as `make install` links it: pytest
        # run on its own finds it too.
        from lakehouse import DBT, REPO

        if not (REPO / "dbt_packages" / "cdc_lakehouse" / "dbt_project.yml").exists():
            subprocess.run([str(DBT), "deps", "--quiet"], cwd=REPO, check=True)


# Tiers (markers declared in pyproject.toml), so a developer runs what fits the loop at hand:
# - unit: no JVM, no service (decoder helpers, registry, layouts, parsers, the capture tool's sink);
# - dbt: a Spark session or a dbt build of one small lakehouse (the dbt unit tests, the Debezium
#   samples, freshness), nothing else installed but the project's own packages and jars;
# - system: PostgreSQL, Kafka, a cluster, Trino, Chromium, the other table formats, the peers,
#   the oracle and the whole-sample scenarios.
# A test's tier is its closest tier marker; without one it is `dbt` when it takes the session
# Spark (a JVM) and `unit` otherwise. `make test-fast` runs `-m "unit or dbt"`, `make test` all.
TIERS = ("unit", "dbt", "system")


def tier_of(item: pytest.Item) -> str:
    marked = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
    if len(marked) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one tier marker: {sorted(marked)}")
    if marked:
        return marked.pop()
    return "dbt" if "spark" in getattr(item, "fixturenames", ()) else "unit"


# Under `make test` pytest-xdist (`--dist loadgroup`) hands each group of tests to one of its 2
# processes: a test file is a group unless its tests name another (`xdist_group`), so module
# fixtures are built once and files that share a scenario (a session fixture below) run in the
# process that built it. The groups start longest first, seconds from the last full `make test`
# run (docs/testing.md, "Tests"), each beside another on the 2 cores: xdist hands groups out in
# collection order, so a long group started last would leave one process idle at the end.
LONG_GROUPS = {
    # the acf9e9c clean-clone run's seconds (artifacts/junit.xml, summed by group; the run
    # docs/testing.md gives): the benchmark suite had grown to the third longest group while
    # it still started tenth, on figures from afce29b
    "sample-stepwise": 621,
    "object-store": 425,
    "test_benchmarks.py": 350,
    "test_oracle_faults.py": 298,
    "test_type_map_oracle.py": 291,
    "test_table_formats.py:delta": 278,
    "test_oracle.py": 244,
    "test_table_formats.py:hudi": 206,
    "test_schema_changes.py": 158,
    "test_oracle_ddl.py": 152,
    "test_debezium_samples_e2e.py": 143,
    "empty-lakehouse": 132,
    "test_decode.py": 121,
    "test_public_databases.py": 94,
}


def group_of(item: pytest.Item) -> str:
    marks = list(item.iter_markers("xdist_group"))  # a name must not end in "]" (xdist)
    if marks:
        return str(marks[0].args[0] if marks[0].args else marks[0].kwargs["name"])
    return item.path.name


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects and xdist names the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item)))
        if not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    # longest group first; a group's tests stay together (a shared lakehouse is held by one
    # test process until its tests are done, see lakehouse.py)
    items.sort(key=lambda item: (-LONG_GROUPS.get(group_of(item), 0), group_of(item)))


@pytest.fixture(scope="session")
def empty_lakehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every model, seed and snapshot of the project built on an empty landing zone (no data
    tests), then `dbt docs generate`: the relations the dbt unit tests take their columns from
    and the docs site's catalog, built once for both (group `empty-lakehouse`). Returns the
    lakehouse, its landing root and a copy of the generated site (later dbt commands rewrite
    target/)."""
    from lakehouse import run_dbt

    lakehouse = tmp_path_factory.mktemp("empty-lakehouse")
    landing = lakehouse / "landing"
    (landing / "topics").mkdir(parents=True)
    variables = {"cdc_landing_root": str(landing)}
    no_tests = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
    run_dbt(["build", *no_tests], lakehouse=lakehouse, variables=variables)
    run_dbt(["docs", "generate"], lakehouse=lakehouse, variables=variables)
    site = lakehouse / "site"
    shutil.copytree(lakehouse / "target", site)
    return {"lakehouse": lakehouse, "landing": landing, "site": site}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from lakehouse import stop_dbt_worker

    stop_dbt_worker()
    if "start" in GAUGE:
        from benchmarks.gauge import machine_gauge

        GAUGE["end"] = machine_gauge()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The machine's speed, and the oracle's figures (also what docs/testing.md quotes) when
    oracle tests ran."""
    from oracle import REPORT, summarize

    if GAUGE:
        terminalreporter.write_sep("=", "machine speed")
        terminalreporter.write_line(
            "DuckDB over the benchmark suite's 1M-event landing (benchmarks/gauge.py), best of 2: "
            + ", ".join(f"{seconds:.2f} s at the {when}" for when, seconds in GAUGE.items())
        )
    if REPORT.exists():
        terminalreporter.write_sep("=", "PostgreSQL oracle")
        terminalreporter.write_line(summarize(REPORT))


# The object-store stack (PostgreSQL catalog, SeaweedFS, metastore service) the `object-store`
# group shares: imported here, once, so both of its files get the same session fixture.
from object_store_stack import object_store_stack  # noqa: E402, F401

# The sample built step by step, which test_pipeline_e2e.py checks and test_peers.py compares with
# the peers (group `sample-stepwise`).
from sample_stepwise import stepwise  # noqa: E402, F401
