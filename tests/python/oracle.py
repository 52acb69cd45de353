"""The correctness oracle: a real PostgreSQL is the truth, the lake must equal it cell by cell.

`OracleRun` ties one source (PostgreSQL + seeded workload + capture tool, see
`sample.generator.harness`) to one private lakehouse, builds it with `dbt build` and
compares every silver table with PostgreSQL. Figures of every comparison (events landed, rows
compared, mismatches, faults injected) are appended to `artifacts/oracle-report.jsonl`, which
pytest prints at the end of the session (conftest.py).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from lakehouse import (
    REPO,
    SAMPLE_SOURCES,
    SOURCE_EQUIVALENT_GOLD,
    canonical_lake_row,
    diff_states,
    lake_state,
    landing_files,
    read_export,
    record_lines,
    run_dbt,
)

from devstack.pg import TemporaryPostgres
from sample.generator import northwind
from sample.generator.harness import SourceHarness
from sample.generator.kafka import KafkaPipeline, landing_differences

REPORT = REPO / "artifacts" / "oracle-report.jsonl"

# The oracle's source is Northwind alone: nothing of the sample's other sources lands (`build`
# checks it). A history's first build still builds their models, from no rows (a registered
# source with nothing landed yet must build); its later builds leave out their staging models
# and what is built from them (Pagila's `address` and `address_history`, and their 18 data
# tests, on empty tables: about 7% of a build's statements). Their bronze models stay in every
# build: `staging.cdc_rejects` reads every bronze table.
OTHER_SOURCES = [
    arg
    for source in SAMPLE_SOURCES
    if source != "northwind"
    for arg in ("--exclude", f"stg_{source}__*+")
]

# History models checked "as of" a phase boundary, with the columns they ignore (a version keeps
# their value from when it opened). Suppliers land as JDBC rows: no commit time, no history
# to compare with wall-clock boundaries.
HISTORY_AS_OF = {
    "customers": {"updated_at"},
    "orders": set(),
    "order_details": set(),
    "products": set(),
}


class OracleRun:
    """One seeded history: `source` (the harness), `landing` (what dbt reads), `lakehouse`."""

    def __init__(
        self,
        pg: TemporaryPostgres,
        root: Path,
        seed: int,
        *,
        scale: float = 0.5,
        partitions: int = 1,
        kafka: bool = False,
        scope: tuple[str, ...] = (),
    ):
        self.root = root
        # scope: the Northwind tables built and compared (their bronze, staging, silver and
        # history models; every bronze model, which `staging.cdc_rejects` reads), for a history
        # whose subject is not the tables (the fault history: a fault in capture, delivery or a
        # build is the same for every table); empty: the whole project, gold included.
        self.scope = scope
        self.seed = seed
        self.partitions = partitions
        self.captured = root / "captured"  # where the capture tool writes
        self.landing = root / "landing"  # what dbt reads (a copy, so faults can reorder it)
        self.lakehouse = root / "lakehouse"
        self.source = SourceHarness(
            pg,
            landing=self.captured,
            state_dir=root / "capture-state",
            seed=seed,
            scale=scale,
            partitions=partitions,
        )
        # kafka: the same changes also go through the real pieces (Debezium's connector in
        # Kafka Connect, Kafka, the landing sink connector); their landing zone is the one
        # delivered to dbt, and after every capture it must hold the capture tool's events.
        self.kafka = (
            KafkaPipeline(self.source, work=root / "kafka", landing=root / "kafka-landing")
            if kafka
            else None
        )
        self.builds = 0
        # Wall-clock seconds by step, in the report: where a history's time goes.
        self.seconds = {"workload": 0.0, "capture": 0.0, "build": 0.0, "compare": 0.0}
        self.faults: list[str] = []
        self.compared = {"rows": 0, "cells": 0, "mismatches": 0}

    # -- source side ------------------------------------------------------------------------
    def start(self) -> None:
        """Schema, initial rows, and the initial snapshot captured."""
        self.source.setup()
        if self.kafka:
            self.kafka.start()
        self.capture()

    def phase(self, phase: int, transactions: int) -> list[Path]:
        """Run one workload phase and capture it; returns the new landing files."""
        before = set(self.captured_files())
        started = time.monotonic()
        self.source.run_phase(phase, transactions)
        self.seconds["workload"] += time.monotonic() - started
        self.capture()
        return sorted(set(self.captured_files()) - before)

    def capture(self) -> None:
        started = time.monotonic()
        self.source.capture()
        if self.kafka:
            self.kafka.capture()
            differences = landing_differences(self.captured, self.kafka.landing, northwind.TABLES)
            assert not differences, (
                f"seed {self.seed}: Kafka Connect landed other events than the capture tool:\n"
                + "\n".join(differences[:10])
            )
        self.seconds["capture"] += time.monotonic() - started

    def captured_files(self) -> list[Path]:
        """The files to deliver: the Kafka pipeline's when it runs, else the capture tool's."""
        return landing_files(self.kafka.landing if self.kafka else self.captured)

    def close(self) -> None:
        if self.kafka:
            self.kafka.stop()

    def deliver(self, files: list[Path] | None = None) -> None:
        """Copy captured files (default: all not delivered yet) into the landing zone dbt reads."""
        origin = self.kafka.landing if self.kafka else self.captured
        for path in files if files is not None else self.captured_files():
            target = self.landing / path.relative_to(origin)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)

    # -- lake side --------------------------------------------------------------------------
    def build_command(
        self, export: str, data_tests: bool = True
    ) -> tuple[list[str], dict[str, Any]]:
        args = ["build", "--exclude-resource-type", "unit_test"]
        if self.builds:  # not the first build of this lakehouse: see OTHER_SOURCES
            args += OTHER_SOURCES
        if not data_tests:
            args += ["--exclude-resource-type", "test"]
        if self.scope:
            models = [m for name in self.scope for m in (f"+{name}", f"+{name}_history")]
            # cautious: no data test of a model left out (a gold test reading a silver table)
            args += ["--select", *models, "+cdc_rejects", "--indirect-selection", "cautious"]
        variables = {
            "cdc_landing_root": str(self.landing),
            "cdc_export_dir": str(self.export_dir(export)),
        }
        return args, variables

    def export_dir(self, export: str) -> Path:
        return self.lakehouse / "exports" / export

    def build(self, export: str, *, data_tests: bool = True) -> Path:
        """`dbt build` (incremental) of everything but unit tests. The lake is compared with
        PostgreSQL after every build; a history's intermediate builds may leave out the data
        tests (`data_tests=False`, about a fifth of a small build's work), its last one runs
        them on the final state."""
        args, variables = self.build_command(export, data_tests)
        landed = {topic.name for topic in (self.landing / "topics").iterdir()}
        assert all(topic.startswith("northwind") for topic in landed), landed  # OTHER_SOURCES
        started = time.monotonic()
        run_dbt(args, lakehouse=self.lakehouse, variables=variables)
        self.builds += 1
        self.last_build_seconds = time.monotonic() - started
        self.seconds["build"] += self.last_build_seconds
        return self.export_dir(export)

    def assert_lake_equals_database(self, export_dir: Path, label: str) -> None:
        """Every silver table equals its PostgreSQL table; fail listing the differing rows."""
        started = time.monotonic()
        expected_rows = self.source.expected_state()
        problems: list[str] = []
        for table in self.tables():
            expected = {tuple(row[k] for k in table.key): row for row in expected_rows[table.name]}
            actual = lake_state(export_dir, table)
            diff = diff_states(expected, actual)
            self.compared["rows"] += len(expected)
            self.compared["cells"] += len(expected) * len(table.columns)
            self.compared["mismatches"] += len(diff)
            problems += [f"{table.name}: {line}" for line in diff[:25]]
        for relation, name in SOURCE_EQUIVALENT_GOLD.items() if not self.scope else ():
            table = northwind.TABLES_BY_NAME[name]
            expected = {tuple(row[k] for k in table.key): row for row in expected_rows[name]}
            diff = diff_states(expected, lake_state(export_dir, table, relation))
            self.compared["rows"] += len(expected)
            self.compared["cells"] += len(expected) * len(table.columns)
            self.compared["mismatches"] += len(diff)
            problems += [f"{relation} (vs {name}): {line}" for line in diff[:25]]
        self.seconds["compare"] += time.monotonic() - started
        self.report(label)
        assert not problems, (
            f"seed {self.seed}, {label}: the lake differs from PostgreSQL "
            f"({len(problems)} differences shown):\n" + "\n".join(problems)
        )

    def tables(self) -> list[northwind.Table]:
        """The Northwind tables this history builds and compares."""
        return [t for t in northwind.TABLES if not self.scope or t.name in self.scope]

    def boundary(self) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        """PostgreSQL's clock now (UTC, in the export's timestamp format) and its state: every
        commit so far is at or before it, every later one after it."""
        with self.source.pg.connect() as conn:
            now = conn.execute("select clock_timestamp() at time zone 'UTC'").fetchone()[0]
        return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), self.source.expected_state()

    def assert_history_as_of_equals(
        self, export_dir: Path, at: str, expected_rows: dict[str, list[dict[str, Any]]], label: str
    ) -> None:
        """The versions of each history live at `at` equal PostgreSQL's state captured then."""
        problems: list[str] = []
        for table in self.tables():
            if table.name not in HISTORY_AS_OF:
                continue
            ignored = HISTORY_AS_OF[table.name]
            expected = {
                tuple(row[k] for k in table.key): {c: v for c, v in row.items() if c not in ignored}
                for row in expected_rows[table.name]
            }
            actual = {}
            for row in read_export(export_dir, f"silver.{table.name}_history"):
                live = row["valid_from"] <= at and (row["valid_to"] is None or row["valid_to"] > at)
                if live and not row["_cdc_is_deleted"]:
                    canonical = canonical_lake_row(table, row)
                    actual[tuple(canonical[k] for k in table.key)] = canonical
            diff = diff_states(expected, actual)
            self.compared["rows"] += len(expected)
            self.compared["mismatches"] += len(diff)
            problems += [f"{table.name}_history as of {at}: {line}" for line in diff[:25]]
        self.report(label)
        assert not problems, (
            f"seed {self.seed}, {label}: the history differs from PostgreSQL "
            f"({len(problems)} differences shown):\n" + "\n".join(problems)
        )

    def events_landed(self) -> int:
        return sum(len(record_lines(p)) for p in landing_files(self.landing))

    def report(self, label: str) -> None:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "seed": self.seed,
            "label": label,
            "events_landed": self.events_landed(),
            "files_landed": len(landing_files(self.landing)),
            "partitions": self.partitions,
            "kafka": self.kafka is not None,
            "builds": self.builds,
            "faults": self.faults,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            **self.compared,
        }
        with REPORT.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def summarize(report: Path) -> str:
    """One paragraph of figures from the report lines of a test session."""
    entries = [json.loads(line) for line in report.read_text().splitlines() if line]
    catalogs = [e for e in entries if "catalog" in e]  # catalog_oracle.record
    entries = [e for e in entries if "catalog" not in e]
    histories: dict[int, dict[str, Any]] = {}
    for entry in entries:
        histories[entry["seed"]] = entry  # the last comparison of each seed holds its totals
    ddl = [e for e in histories.values() if "ddl" in e]
    plain = [e for e in histories.values() if not e["faults"] and "ddl" not in e]
    faulted = [e for e in histories.values() if e["faults"]]
    comparisons = len(entries)
    partitioned = [e.get("partitions", 1) > 1 for e in histories.values()]
    through_kafka = [e.get("kafka", False) for e in histories.values()]
    return (
        f"seeds: {len(plain)} oracle + {len(ddl)} DDL + {len(faulted)} fault histories; "
        f"DDL statements applied: {sum(e['ddl'] for e in ddl)}; "
        f"comparisons (builds): {comparisons}; "
        f"events landed: {sum(e['events_landed'] for e in histories.values())}; "
        f"faults injected: {sum(len(e['faults']) for e in faulted)}; "
        f"histories with 3 Kafka partitions per topic: {sum(partitioned)}; "
        f"histories through real Kafka Connect: {sum(through_kafka)}; "
        f"rows compared: {sum(e['rows'] for e in histories.values())} "
        f"({sum(e['cells'] for e in histories.values())} cells); "
        f"mismatches: {sum(e['mismatches'] for e in histories.values())}"
        + "".join(f"\ncatalog-driven, {_catalog_line(e)}" for e in catalogs)
    )


def _catalog_line(e: dict) -> str:
    changes = f"schema changes: {'; '.join(e['schema_changes'])}; " * bool(e.get("schema_changes"))
    return (
        f"{e['catalog']}: {e['tables']} tables, {e['columns']} columns of "
        f"{e['types']} types, {e['sources']} captures "
        f"({e.get('captures', 'schemas on, off')}), {e['builds']} builds; {changes}"
        f"events landed: {e['events_landed']}; rows compared: {e['rows']} "
        f"({e['cells']} cells); mismatches: {e['mismatches']}"
    )
