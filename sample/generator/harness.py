"""The real source harness: PostgreSQL + the seeded workload + the capture tool -> a landing zone.

Used by `make sample` (`sample.generator.build`) and by the oracle tests. One harness is one
source database and its captures:

- one Debezium capture per landing shape, each its own subprocess (one JVM each), its own
  replication slot, publication and offsets file: `customers` as the envelope with JsonConverter
  schemas, `orders` + `order_details` as the bare envelope, `products` through
  ExtractNewRecordState (shapes come from `northwind.TABLES`);
- `suppliers` polled by the query-based JDBC-style source (no deletes visible), with a complete
  extract after each poll (extract-diff deletes).

    harness = SourceHarness(pg, landing=Path("landing"), state_dir=Path("state"), seed=7)
    harness.setup()                 # schema and initial rows (captured as snapshot reads)
    harness.run_phase(1, 150)       # seeded transactions
    harness.capture()               # every capture until it has seen everything committed
    harness.expected_state()        # PostgreSQL now, canonical rows by table
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.pg import TemporaryPostgres
from sample.generator.northwind import LAYOUTS, TABLES, Table
from sample.generator.workload import NorthwindWorkload, dump_state

TOPIC_PREFIX = "northwind"
# KCQL PROPERTIES('flush.count'=50) of the reference outbox pipeline.
OUTBOX_FLUSH_COUNT = 50
JDBC_TOPIC_PREFIX = "northwind_jdbc."


@dataclass(frozen=True)
class CaptureGroup:
    """Tables captured by one Debezium engine (one landing shape, one sink layout)."""

    name: str
    shape: str
    schemas_enable: bool
    tables: tuple[str, ...]
    layout: str = "confluent"  # a key of northwind.LAYOUTS
    partitions: int = 1


def capture_groups(tables: tuple[Table, ...] = TABLES) -> list[CaptureGroup]:
    """One capture per (shape, schemas, layout, partitions) combination of the Debezium tables,
    in table order."""
    groups: dict[tuple[str, bool, str, int], list[str]] = {}
    for table in tables:
        if table.shape != "jdbc":
            group = (table.shape, table.schemas_enable, table.layout, table.partitions)
            groups.setdefault(group, []).append(table.name)
    return [
        CaptureGroup(
            name=f"nw_{shape}{'_schemas' if schemas else ''}"
            + ("" if layout == "confluent" else f"_{layout}"),
            shape=shape,
            schemas_enable=schemas,
            tables=tuple(names),
            layout=layout,
            partitions=partitions,
        )
        for (shape, schemas, layout, partitions), names in groups.items()
    ]


class CaptureFailed(RuntimeError):
    pass


class SourceHarness:
    def __init__(
        self,
        pg: TemporaryPostgres,
        *,
        landing: Path,
        state_dir: Path,
        seed: int,
        scale: float = 1.0,
        flush_size: int = 500,
        partitions: int = 1,
        timeout: float = 300,
    ) -> None:
        self.pg = pg
        self.landing = Path(landing)
        self.state_dir = Path(state_dir)
        self.workload = NorthwindWorkload(seed, scale=scale)
        self.flush_size = flush_size
        self.partitions = partitions  # Kafka partitions per Debezium topic
        self.timeout = timeout
        self.groups = capture_groups()
        self.jdbc_tables = tuple(t for t in TABLES if t.shape == "jdbc")
        self.captured: Counter[str] = Counter()

    # -- source -----------------------------------------------------------------------------
    def setup(self) -> None:
        with self.pg.connect() as conn:
            self.workload.create_schema(conn)
            self.workload.load_initial(conn)

    def run_phase(self, phase: int, transactions: int) -> Counter[str]:
        with self.pg.connect() as conn:
            return self.workload.run_phase(conn, phase, transactions)

    def expected_state(self) -> dict[str, list[dict[str, Any]]]:
        with self.pg.connect() as conn:
            return dump_state(conn)

    # -- capture ----------------------------------------------------------------------------
    def config(self, group: CaptureGroup, landing: Path | None = None) -> dict[str, Any]:
        return {
            "name": group.name,
            "host": self.pg.host,
            "port": self.pg.port,
            "database": self.pg.database,
            "user": self.pg.user,
            "tables": [f"public.{t}" for t in group.tables],
            "out": str(landing or self.landing),
            "state_dir": str(self.state_dir / group.name),
            "shape": group.shape,
            "schemas_enable": group.schemas_enable,
            "decimal_handling_mode": "precise",
            "time_precision_mode": "adaptive",
            "flush_size": OUTBOX_FLUSH_COUNT if group.layout != "confluent" else self.flush_size,
            # A table's own partitions (the outbox's topic), else the harness's.
            "partitions": group.partitions if group.partitions > 1 else self.partitions,
            "layout": LAYOUTS[group.layout],
            "topic_prefix": TOPIC_PREFIX,
        }

    def config_file(self, group: CaptureGroup, landing: Path | None = None) -> Path:
        path = self.state_dir / f"{group.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.config(group, landing), indent=2) + "\n")
        return path

    def capture_command(self, group: CaptureGroup, landing: Path | None = None) -> list[str]:
        config = self.config_file(group, landing)
        return [
            sys.executable, "-m", "cdc_lakehouse.capture", "run", "--config", str(config),
            "--until-marker", "--timeout", str(int(self.timeout)),
        ]  # fmt: skip

    def start_capture(self, group: CaptureGroup, landing: Path | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            self.capture_command(group, landing),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "CDC_PG_PASSWORD": ""},
        )

    def capture(self, landing: Path | None = None, *, parallel: bool = True) -> float:
        """Run every capture until it has delivered all committed changes; seconds taken."""
        started = time.monotonic()
        if parallel:
            running = [(g, self.start_capture(g, landing)) for g in self.groups]
            for group, proc in running:
                self._finish(group, proc)
        else:
            for group in self.groups:
                self._finish(group, self.start_capture(group, landing))
        self.poll_jdbc(landing)
        return time.monotonic() - started

    def _finish(self, group: CaptureGroup, proc: subprocess.Popen) -> None:
        try:
            out, err = proc.communicate(timeout=self.timeout + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if proc.returncode != 0:
            raise CaptureFailed(
                f"capture {group.name} exited {proc.returncode}:\n{out[-3000:]}\n{err[-3000:]}"
            )

    def poll_jdbc(self, landing: Path | None = None, *, state_dir: Path | None = None) -> None:
        """Poll the query-based tables into `landing` (default the harness's), keeping the
        poller's offsets in `state_dir` (default the harness's): a second landing zone polls
        with its own."""
        from cdc_lakehouse.capture.jdbc_source import JdbcSource

        for table in self.jdbc_tables:
            source = JdbcSource(
                conninfo=self.pg.conninfo(),
                table=table.name,
                columns=table.column_names,
                order_by=table.order_by,
                topic=table.topic,
                out=Path(landing or self.landing),
                state_file=(state_dir or self.state_dir) / f"jdbc_{table.name}.json",
                flush_size=self.flush_size,
            )
            self.captured[table.topic] += source.poll()
            if table.extracts:
                # A complete extract after every poll, as of the workload's clock (the one
                # `last_update` is set from): deletes are found by its diff.
                folder = Path(landing or self.landing) / "extracts" / table.topic
                source.extract(folder, as_of=self.workload.clock.replace(tzinfo=None))

    def drop(self) -> None:
        """Drop every capture's replication slot and publication."""
        for group in self.groups:
            config = self.config_file(group)
            subprocess.run(
                [sys.executable, "-m", "cdc_lakehouse.capture", "drop", "--config", str(config)],
                capture_output=True,
                text=True,
                check=False,
            )
