"""Generate the bundled sample landing zone and the expected final state of its source tables.

    python -m cdc_lakehouse.sample.generate --out sample --seed 7

A seeded simulation of a Northwind-shaped order system on PostgreSQL, captured the way the real
tools would capture it: Debezium (pgoutput, REPLICA IDENTITY DEFAULT) for customers, products,
orders and order_details; a JDBC source connector polling suppliers. Records land as a Kafka
Connect S3 sink writes them (the record value, one per line). The Debezium shapes copy the real
Debezium 3.6.3 events in shared/debezium-samples byte for byte; tests/python checks that.
Nothing reads the wall clock: every time is the fixed start below plus seeded steps.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import shutil
import string
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from cdc_lakehouse.sample.northwind import (
    CUSTOMERS,
    DDL,
    MID_STREAM_DDL,
    ORDER_DETAILS,
    ORDERS,
    PRODUCTS,
    SUPPLIERS,
    TABLES,
    TOAST_PLACEHOLDER,
    Column,
    Table,
    canonical_row,
)

EPOCH = datetime(1970, 1, 1)
EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_DATE = date(1970, 1, 1)
SNAPSHOT_START = datetime(2024, 6, 3, 6, 0, tzinfo=UTC)

# PostgreSQL moves a value of a STORAGE EXTERNAL column out of line once the row passes this.
TOAST_TUPLE_THRESHOLD = 2032
# Kafka Connect S3 sink: flush.size, and rotate.interval.ms on the record timestamp.
FLUSH_SIZE = 500
ROTATE_INTERVAL_MS = 3_600_000
STREAM_STEPS = 270
REPLAY_EVENTS = 30
DEBEZIUM_TABLES = (CUSTOMERS, PRODUCTS, ORDERS, ORDER_DETAILS)


# --- time --------------------------------------------------------------------------------------


def utc_at(us: int) -> datetime:
    return EPOCH_UTC + timedelta(microseconds=us)


def naive_at(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def micros(dt: datetime) -> int:
    return (dt - (EPOCH_UTC if dt.tzinfo else EPOCH)) // timedelta(microseconds=1)


# --- Debezium encoding (decimal.handling.mode=precise, time.precision.mode=adaptive) ----------


@dataclass(frozen=True)
class Connector:
    """What the Debezium PostgreSQL connector writes into every `source` block."""

    name: str = "northwind"  # topic.prefix
    db: str = "northwind"
    version: str = "3.6.3.Final"


NORTHWIND = Connector()


@dataclass(frozen=True)
class Change:
    """One row change as Debezium emits it, REPLICA IDENTITY DEFAULT rules already applied.

    `columns` are the table's columns at that point of the stream (ALTER TABLE adds some);
    `unchanged_toast` lists out-of-line columns an UPDATE left alone (sent as the placeholder).
    """

    table: Table
    op: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    columns: tuple[str, ...]
    lsn: int
    txid: int
    source_us: int  # commit time; read time during the snapshot
    prev_commit_lsn: int | None
    snapshot: str = "false"
    unchanged_toast: tuple[str, ...] = ()


def dumps(value: Any) -> str:
    """JSON the way Kafka Connect's JsonConverter writes it: compact, UTF-8 left as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def numeric_precision_scale(pg_type: str) -> tuple[int, int]:
    precision, scale = pg_type[pg_type.index("(") + 1 : -1].split(",")
    return int(precision), int(scale)


def decimal_base64(value: Decimal, scale: int) -> str:
    """Unscaled value as big-endian two's complement, minimal length (Java BigInteger)."""
    unscaled = value.scaleb(scale)
    if unscaled != unscaled.to_integral_value():
        raise ValueError(f"{value} has more than {scale} decimals")
    number = int(unscaled)
    bits = number.bit_length() if number >= 0 else (~number).bit_length()
    return base64.b64encode(number.to_bytes(bits // 8 + 1, "big", signed=True)).decode()


def jsonb_text(value: Any) -> str:
    """PostgreSQL's jsonb output: keys by length then bytes, `", "` and `": "` separators."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        inner = ", ".join(
            f"{json.dumps(k, ensure_ascii=False)}: {jsonb_text(value[k])}" for k in keys
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def to_debezium(pg_type: str, value: Any) -> Any:
    """One column value as Debezium's PostgreSQL connector emits it."""
    if value is None:
        return None
    if pg_type.endswith("[]"):
        return [to_debezium(pg_type[:-2], v) for v in value]
    if pg_type.startswith("numeric"):
        return decimal_base64(value, numeric_precision_scale(pg_type)[1])
    if pg_type == "date":
        return (value - EPOCH_DATE).days
    if pg_type == "timestamp":
        return micros(value)
    if pg_type == "timestamptz":
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if pg_type in ("json", "jsonb"):
        return jsonb_text(value)
    if pg_type == "bytea":
        return base64.b64encode(value).decode()
    return value


_LOGICAL_TYPES = {
    "date": ("int32", "io.debezium.time.Date"),
    "timestamp": ("int64", "io.debezium.time.MicroTimestamp"),
    "timestamptz": ("string", "io.debezium.time.ZonedTimestamp"),
    "json": ("string", "io.debezium.data.Json"),
    "jsonb": ("string", "io.debezium.data.Json"),
    "uuid": ("string", "io.debezium.data.Uuid"),
}
_PLAIN_TYPES = {
    "smallint": "int16",
    "int": "int32",
    "integer": "int32",
    "bigint": "int64",
    "boolean": "boolean",
    "text": "string",
    "bytea": "bytes",
}


def plain_field(kind: str, name: str, optional: bool) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": name}


def type_schema(pg_type: str, optional: bool) -> dict[str, Any]:
    """Kafka Connect schema of one PostgreSQL type (without the field name)."""
    if pg_type.endswith("[]"):
        return {"type": "array", "items": type_schema(pg_type[:-2], True), "optional": optional}
    if pg_type.startswith("numeric"):
        precision, scale = numeric_precision_scale(pg_type)
        return {
            "type": "bytes",
            "optional": optional,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
        }
    if pg_type in _LOGICAL_TYPES:
        kind, name = _LOGICAL_TYPES[pg_type]
        return {"type": kind, "optional": optional, "name": name, "version": 1}
    return {"type": _PLAIN_TYPES[pg_type], "optional": optional}


SNAPSHOT_VALUES = (
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
)
SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        plain_field("string", "version", False),
        plain_field("string", "connector", False),
        plain_field("string", "name", False),
        plain_field("int64", "ts_ms", False),
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": SNAPSHOT_VALUES},
            "default": "false",
            "field": "snapshot",
        },
        plain_field("string", "db", False),
        plain_field("string", "sequence", True),
        plain_field("int64", "ts_us", True),
        plain_field("int64", "ts_ns", True),
        plain_field("string", "schema", False),
        plain_field("string", "table", False),
        plain_field("int64", "txId", True),
        plain_field("int64", "lsn", True),
        plain_field("int64", "xmin", True),
        plain_field("string", "origin", True),
        plain_field("int64", "origin_lsn", True),
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "version": 1,
    "field": "source",
}
TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        plain_field("string", "id", False),
        plain_field("int64", "total_order", False),
        plain_field("int64", "data_collection_order", False),
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


def row_struct_schema(table: Table, columns: tuple[str, ...], name: str) -> dict[str, Any]:
    fields = []
    for col in columns:
        column = table.column(col)
        fields.append({**type_schema(column.pg_type, column.nullable), "field": column.name})
    return {
        "type": "struct",
        "fields": fields,
        "optional": True,
        "name": f"{table.topic}.Value",
        "field": name,
    }


@cache
def envelope_schema_json(table: Table, columns: tuple[str, ...]) -> str:
    """The JsonConverter schema of a Debezium change event (schemas.enable=true)."""
    schema = {
        "type": "struct",
        "fields": [
            row_struct_schema(table, columns, "before"),
            row_struct_schema(table, columns, "after"),
            SOURCE_SCHEMA,
            TRANSACTION_SCHEMA,
            plain_field("string", "op", False),
            plain_field("int64", "ts_ms", True),
            plain_field("int64", "ts_us", True),
            plain_field("int64", "ts_ns", True),
        ],
        "optional": False,
        "name": f"{table.topic}.Envelope",
        "version": 2,
    }
    return dumps(schema)


def encode_row(
    table: Table, columns: tuple[str, ...], row: Mapping[str, Any], unchanged: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        c: TOAST_PLACEHOLDER if c in unchanged else to_debezium(table.column(c).pg_type, row.get(c))
        for c in columns
    }


def source_block(change: Change, connector: Connector) -> dict[str, Any]:
    previous = None if change.prev_commit_lsn is None else str(change.prev_commit_lsn)
    return {
        "version": connector.version,
        "connector": "postgresql",
        "name": connector.name,
        "ts_ms": change.source_us // 1000,
        "snapshot": change.snapshot,
        "db": connector.db,
        "sequence": dumps([previous, str(change.lsn)]),
        "ts_us": change.source_us,
        "ts_ns": change.source_us * 1000,
        "schema": "public",
        "table": change.table.name,
        "txId": change.txid,
        "lsn": change.lsn,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }


def envelope_value(change: Change, proc_ns: int, connector: Connector = NORTHWIND) -> str:
    """The record value of a change event; `proc_ns` is when Debezium processed it."""
    table, columns = change.table, change.columns
    payload = {
        "before": None if change.before is None else encode_row(table, columns, change.before),
        "after": None
        if change.after is None
        else encode_row(table, columns, change.after, change.unchanged_toast),
        "source": source_block(change, connector),
        "transaction": None,
        "op": change.op,
        "ts_ms": proc_ns // 1_000_000,
        "ts_us": proc_ns // 1000,
        "ts_ns": proc_ns,
    }
    if not table.schemas_enable:
        return dumps(payload)
    return (
        '{"schema":' + envelope_schema_json(table, columns) + ',"payload":' + dumps(payload) + "}"
    )


def flattened_value(change: Change) -> str:
    """ExtractNewRecordState, delete.tombstone.handling.mode=rewrite, add.fields=op,table,lsn,
    source.ts_ms."""
    deleted = change.op == "d"
    row = change.before if deleted else change.after
    unchanged = () if deleted else change.unchanged_toast
    value = encode_row(change.table, change.columns, row or {}, unchanged)
    value["__deleted"] = "true" if deleted else "false"
    value["__op"] = change.op
    value["__table"] = change.table.name
    value["__lsn"] = change.lsn
    value["__source_ts_ms"] = change.source_us // 1000
    return dumps(value)


def jdbc_value(table: Table, row: Mapping[str, Any]) -> str:
    """A JDBC source connector row, JsonConverter schemas.enable=false (Timestamp as millis)."""
    value = {}
    for column in table.columns:
        raw = row[column.name]
        if raw is not None and column.pg_type == "timestamp":
            raw = micros(raw) // 1000
        value[column.name] = raw
    return dumps(value)


def snapshot_marker(first_table: bool, last_table: bool, first_row: bool, last_row: bool) -> str:
    """`source.snapshot` as RelationalSnapshotChangeEventSource sets it."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"


# --- the simulated server and connectors ------------------------------------------------------


@dataclass(frozen=True)
class Emitted:
    """A change handed to Kafka by Debezium at `proc_ns` (a replay hands the same change again)."""

    change: Change
    proc_ns: int


@dataclass(frozen=True)
class ForeignKey:
    table: Table
    column: str
    parent: Table


def foreign_keys() -> list[ForeignKey]:
    pattern = re.compile(r"FOREIGN KEY \((\w+)\) REFERENCES (\w+) \((\w+)\)")
    by_name = {t.name: t for t in TABLES}
    found = []
    for table in TABLES:
        for text in table.foreign_keys:
            column, parent, _ = pattern.match(text).groups()  # type: ignore[union-attr]
            found.append(ForeignKey(table, column, by_name[parent]))
    return found


def stored_out_of_line(column: Column, value: Any) -> bool:
    return (
        column.external and isinstance(value, str) and len(value.encode()) > TOAST_TUPLE_THRESHOLD
    )


def wal_bytes(table: Table, row: Mapping[str, Any], skip: tuple[str, ...] = ()) -> int:
    """Rough size of the WAL written for a row image (TOAST chunks are records of their own)."""
    size = 48
    for name, value in row.items():
        if value is None or name in skip:
            size += 1
            continue
        text = jsonb_text(value) if isinstance(value, (dict, list)) else str(value)
        n = len(text.encode())
        size += n + 4
        if stored_out_of_line(table.column(name), value):
            size += (n // 1996 + 1) * 64
    return size


class Wal:
    """Write-ahead log position and transaction ids of the simulated PostgreSQL server."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lsn = 0x2A00000 + rng.randrange(1 << 16) * 8
        self.txid = 7_000 + rng.randrange(500)

    def append(self, nbytes: int) -> int:
        """Write one record; returns its LSN."""
        lsn = self.lsn
        self.lsn += (24 + nbytes + 7) // 8 * 8
        return lsn

    def other_activity(self) -> None:
        """WAL and transaction ids used by sessions touching tables nobody captures."""
        self.lsn += self.rng.randrange(0, 4000) * 8
        self.txid += self.rng.choice((0, 0, 0, 1, 2))

    def next_txid(self) -> int:
        self.txid += 1
        return self.txid


class Simulation:
    """PostgreSQL tables plus what Debezium and the JDBC connector hand to Kafka."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.wal = Wal(self.rng)
        self.clock_us = micros(SNAPSHOT_START)
        self.rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {t.name: {} for t in TABLES}
        self.columns = {t.name: tuple(c.name for c in t.initial_columns) for t in TABLES}
        self.emitted: dict[str, list[Emitted]] = {t.topic: [] for t in DEBEZIUM_TABLES}
        self.polls: list[tuple[int, list[dict[str, Any]]]] = []
        self.last_commit_lsn: int | None = None
        self.proc_ns = 0
        self.jdbc_offset: tuple[Any, ...] | None = None
        self.fks = foreign_keys()

    def load(self, table: Table, row: dict[str, Any]) -> None:
        """A row that exists before capture starts."""
        full = {c: row.get(c) for c in self.columns[table.name]}
        self.rows[table.name][table.key_of(full)] = full

    def advance(self, seconds_low: float, seconds_high: float) -> None:
        self.clock_us += int(self.rng.uniform(seconds_low, seconds_high) * 1_000_000)
        self.wal.other_activity()

    def transaction(self) -> Transaction:
        return Transaction(self)

    def dispatch(self, changes: list[Change], earliest_ns: int) -> None:
        """Debezium processes committed changes one by one, in commit and LSN order."""
        t = max(self.proc_ns, earliest_ns)
        for change in changes:
            t += self.rng.randrange(20_000, 900_000)
            self.emitted[change.table.topic].append(Emitted(change, t))
        self.proc_ns = t

    def snapshot(self, tables: tuple[Table, ...]) -> None:
        """Initial snapshot: every row as op `r`, all at the snapshot LSN and transaction."""
        txid, lsn = self.wal.next_txid(), self.wal.lsn
        read_us = self.clock_us
        for ti, table in enumerate(tables):
            rows = list(self.rows[table.name].values())
            for i, row in enumerate(rows):
                read_us += self.rng.randrange(50, 1500)
                marker = snapshot_marker(ti == 0, ti == len(tables) - 1, i == 0, i == len(rows) - 1)
                change = Change(
                    table=table,
                    op="r",
                    before=None,
                    after=dict(row),
                    columns=self.columns[table.name],
                    lsn=lsn,
                    txid=txid,
                    source_us=read_us,
                    prev_commit_lsn=None,
                    snapshot=marker,
                )
                self.dispatch([change], read_us * 1000 + self.rng.randrange(1, 5) * 1_000_000)
        self.clock_us = read_us + 400_000

    def add_column(self, table: Table, name: str) -> None:
        """ALTER TABLE ... ADD COLUMN: existing rows read NULL; later events carry the column."""
        self.wal.next_txid()
        self.wal.append(2400)
        self.columns[table.name] = (*self.columns[table.name], name)
        for row in self.rows[table.name].values():
            row[name] = None

    def restart_debezium(self, flushed_lsn: int, downtime_s: float) -> int:
        """Debezium died after handing over changes whose offsets it had not flushed yet; on
        restart it streams again every change after `flushed_lsn` (at-least-once)."""
        self.clock_us += int(downtime_s * 1_000_000)
        again = sorted(
            (e for records in self.emitted.values() for e in records),
            key=lambda e: e.proc_ns,
        )
        redo = [
            e.change for e in again if e.change.snapshot == "false" and e.change.lsn > flushed_lsn
        ]
        self.dispatch(redo, self.clock_us * 1000)
        return len(redo)

    def poll_jdbc(self, table: Table, poll_us: int) -> None:
        """JDBC source connector, mode timestamp+incrementing: rows past the stored offset."""
        order = sorted(self.rows[table.name].values(), key=lambda r: _order_key(table, r))
        fresh = [
            dict(r)
            for r in order
            if self.jdbc_offset is None or _order_key(table, r) > self.jdbc_offset
        ]
        if fresh:
            self.jdbc_offset = _order_key(table, fresh[-1])
        self.polls.append((poll_us // 1000, fresh))

    def check_foreign_keys(self) -> None:
        for fk in self.fks:
            parents = self.rows[fk.parent.name]
            for row in self.rows[fk.table.name].values():
                if row[fk.column] is not None and (row[fk.column],) not in parents:
                    raise AssertionError(f"{fk.table.name}.{fk.column}={row[fk.column]} dangles")


def _order_key(table: Table, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in table.order_by)


@dataclass
class Transaction:
    """One PostgreSQL transaction. `now_us` is now(), the transaction's start time."""

    sim: Simulation
    txid: int = 0
    now_us: int = 0
    pending: list[tuple[Table, str, Any, Any, tuple[str, ...], int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.txid = self.sim.wal.next_txid()
        self.now_us = self.sim.clock_us

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.commit()

    @property
    def now_utc(self) -> datetime:
        return utc_at(self.now_us)

    @property
    def now_naive(self) -> datetime:
        return naive_at(self.now_us)

    def insert(self, table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
        columns = self.sim.columns[table.name]
        unknown = [c for c in row if c not in columns]
        if unknown:
            raise KeyError(f"{table.name} has no columns {unknown}")
        full = {c: row.get(c) for c in columns}
        rows, key = self.sim.rows[table.name], table.key_of(full)
        if key in rows:
            raise KeyError(f"duplicate key {key} in {table.name}")
        rows[key] = full
        lsn = self.sim.wal.append(wal_bytes(table, full))
        self._record(table, "c", None, full, (), lsn)
        return full

    def update(
        self, table: Table, key: tuple[Any, ...], changes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """UPDATE one row. Columns not SET keep their TOAST pointer; a key change is sent as a
        delete of the old key and a create of the new one, both at the update's LSN."""
        rows = self.sim.rows[table.name]
        old = rows[key]
        unknown = [c for c in changes if c not in old]
        if unknown:
            raise KeyError(f"{table.name} has no columns {unknown}")
        new = {**old, **changes}
        unchanged = tuple(
            c.name
            for c in table.columns
            if c.name in new and c.name not in changes and stored_out_of_line(c, new[c.name])
        )
        new_key = table.key_of(new)
        lsn = self.sim.wal.append(wal_bytes(table, new, unchanged))
        if new_key == key:
            rows[key] = new
            self._record(table, "u", None, new, unchanged, lsn)
            return new
        if new_key in rows:
            raise KeyError(f"duplicate key {new_key} in {table.name}")
        del rows[key]
        rows[new_key] = new
        self._record(table, "d", self._key_only(table, old), None, (), lsn)
        self._record(table, "c", None, new, unchanged, lsn)
        return new

    def delete(self, table: Table, key: tuple[Any, ...]) -> dict[str, Any]:
        old = self.sim.rows[table.name].pop(key)
        lsn = self.sim.wal.append(64)
        self._record(table, "d", self._key_only(table, old), None, (), lsn)
        return old

    def commit(self) -> None:
        sim = self.sim
        commit_us = self.now_us + sim.rng.randrange(300, 40_000)
        sim.clock_us = max(sim.clock_us, commit_us)
        commit_lsn = sim.wal.append(16)
        sim.check_foreign_keys()
        if not self.pending:  # nothing in the publication: pgoutput skips the transaction
            return
        changes = [
            Change(
                table=table,
                op=op,
                before=before,
                after=after,
                columns=sim.columns[table.name],
                lsn=lsn,
                txid=self.txid,
                source_us=commit_us,
                prev_commit_lsn=sim.last_commit_lsn,
                unchanged_toast=unchanged,
            )
            for table, op, before, after, unchanged, lsn in self.pending
        ]
        sim.last_commit_lsn = commit_lsn
        sim.dispatch(changes, commit_us * 1000 + sim.rng.randrange(40, 400) * 1_000_000)

    def _key_only(self, table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
        """The old row of REPLICA IDENTITY DEFAULT: key columns only, the rest null."""
        return {c: (row[c] if c in table.key else None) for c in self.sim.columns[table.name]}

    def _record(
        self,
        table: Table,
        op: str,
        before: Any,
        after: Any,
        unchanged: tuple[str, ...],
        lsn: int,
    ) -> None:
        if table.shape == "jdbc":  # not in the Debezium publication
            return
        self.pending.append((table, op, before, after, unchanged, lsn))


# --- made-up Northwind data -------------------------------------------------------------------

CITIES = {
    "Argentina": ("Buenos Aires",),
    "Austria": ("Graz", "Salzburg", "Wien"),
    "Belgium": ("Bruxelles", "Charleroi"),
    "Brazil": ("Campinas", "Resende", "São Paulo"),
    "Canada": ("Montréal", "Tsawassen", "Vancouver"),
    "Denmark": ("Århus", "København"),
    "Finland": ("Helsinki", "Oulu"),
    "France": ("Besançon", "Lyon", "Nantes", "Paris"),
    "Germany": ("Berlin", "Frankfurt a.M.", "Köln", "München"),
    "Ireland": ("Cork",),
    "Italy": ("Bergamo", "Reggio Emilia", "Torino"),
    "Japan": ("大阪", "東京"),
    "Mexico": ("México D.F.",),
    "Norway": ("Stavern",),
    "Poland": ("Kraków", "Warszawa"),
    "Portugal": ("Lisboa",),
    "Spain": ("Barcelona", "Madrid", "Sevilla"),
    "Sweden": ("Bräcke", "Luleå"),
    "Switzerland": ("Bern", "Genève", "Zürich"),
    "UK": ("Cowes", "London"),
    "USA": ("Boise", "Eugene", "Portland", "Seattle"),
    "Venezuela": ("Caracas", "San Cristóbal"),
}
COUNTRIES = tuple(CITIES)
COMPANY_FIRST = (
    "Alfreds", "Ana Trujillo", "Antonio Moreno", "Around the Horn", "Berglunds", "Blauer See",
    "Blondel", "Bólido", "Bottom-Dollar", "Cactus", "Centro", "Chop-suey", "Comércio Mineiro",
    "Consolidated", "Drachenblut", "Du monde entier", "Eastern", "Ernst", "Familia", "Folies",
    "Frankenversand", "Furia", "Galería del gastrónomo", "Godos", "Gourmet Lanchonetes",
    "Great Lakes", "Hanari", "Hungry Coyote", "Island", "Königlich", "La maison",
    "Laughing Bacchus", "Lazy K", "Lehmanns", "Let's Stop N Shop", "Lonesome Pine", "Magazzini",
    "Maison Dewey",
    "Mère Paillarde", "Morgenstern", "North/South", "Océano Atlántico", "Old World", "Ottilies",
    "Paris", "Pericles", "Piccolo", "Princesa Isabel", "Que Delícia", "Queen", "Rancho grande",
    "Rattlesnake Canyon", "Reggiani", "Ricardo", "Richter", "Romero y tomillo", "Santé",
    "Save-a-lot", "Seven Seas", "Simons", "Spécialités du monde", "Split Rail", "Suprêmes",
    "The Big Cheese", "Toms", "Tortuga", "Tradição", "Trail's Head", "Vaffeljernet",
    "Victuailles en stock", "Vins et alcools", "Wartian", "Wellington", "White Clover", "Wilman",
    "Wolski",
)  # fmt: skip
COMPANY_LAST = (
    "Futterkiste", "Delikatessen", "Markets", "Importadora", "Comidas preparadas", "Handel",
    "Spezialitäten", "Traders", "Supermercado", "Herkku", "& Co.", "Bistro", "snabbköp",
    "Épicerie", "Kala", "Gruppe", "Imports", "Feinkost",
)  # fmt: skip
FIRST_NAMES = (
    "Maria", "Ana", "Antonio", "Thomas", "Christina", "Hanna", "Frédérique", "Martín", "Laurence",
    "Elizabeth", "Victoria", "Patricio", "Francisco", "Yang", "Pedro", "Aria", "Diego", "Renée",
    "Zoë", "Jürgen", "Björn", "José", "Sven", "Yoshi", "Helvetius", "Karl", "Giovanni", "Rita",
    "Søren", "Paula",
)  # fmt: skip
LAST_NAMES = (
    "Anders", "Trujillo", "Moreno", "Hardy", "Berglund", "Moos", "Citeaux", "Sommer", "Lebihan",
    "Lincoln", "Ashworth", "Simpson", "Chang", "Afonso", "Cruz", "Roel", "Pérez", "Müller",
    "Lefèvre", "Sørensen", "Tanaka", "Nagy", "Öztürk", "Ibáñez", "Kowalski", "Wong", "Rovelli",
    "Larsson",
)  # fmt: skip
TAGS = ("vip", "wholesale", "retail", "export", "net30", "prepaid", "b2b", "gourmet", "horeca")
SEGMENTS = ("retail", "wholesale", "horeca", "online")
LANGUAGES = ("de", "en", "es", "fr", "ja", "pt", "sv")
TIERS = ("bronze", "silver", "gold", "platinum")
SPECIAL_CUSTOMERS: tuple[dict[str, Any], ...] = (
    {"company_name": "Café Lumière SARL", "contact_name": "Renée Lefèvre", "country": "France"},
    {"company_name": "Müller Feinkost GmbH", "contact_name": "Jürgen Müller", "country": "Germany"},
    {
        "company_name": "日本食品商事株式会社",
        "contact_name": "山田 太郎",
        "country": "Japan",
        "tags": ["日本", "export"],
    },
    {"credit_limit": None},
    {"credit_limit": Decimal("0.00")},
    {"credit_limit": Decimal("1234567.89")},
    {"tags": []},
    {"tags": None},
)
NOTE_SENTENCES = (
    "Prefers deliveries before 10:00 on weekdays; the loading dock is behind the building.",
    "Invoices go to the accounts payable mailbox, never to the contact person directly.",
    "Asked for a review of the discount schedule, last one on {day}.",
    "Called about order {order}: {n} cases arrived damaged, credit note {ref} issued.",
    "Seasonal peak from {month} to {month2}; plan stock accordingly.",
    "Pays by bank transfer within {n} days; reminders are rarely needed.",
    "Wants bilingual labels (English/{lang}) on every pallet.",
    "Buyer changed in {year}; the previous one moved to the Zürich office.",
    "Samples of the Gumbär range were well received, follow up in {month}.",
    "Credit review {year}: limit confirmed by finance, reference {ref}.",
    "Warehouse closed on public holidays in {country}; avoid Friday deliveries.",
    "Note from the owner: « livraison par l'entrée de service, merci ».",
    "Quality complaint {ref} resolved, replacement shipped with order {order}.",
    "Visited on {day}: new cold room, capacity about {n} pallets.",
)
PRODUCT_NAMES = (
    "Sample pack", "Chai", "Chang", "Côte de Blaye", "Chef Anton's Gumbo Mix", "Aniseed Syrup",
    "Grandma's Boysenberry Spread", "Uncle Bob's Organic Dried Pears", "Mishi Kobe Niku",
    "Northwoods Cranberry Sauce", "Ikura", "Queso Cabrales", "Konbu", "Tofu", "Genen Shouyu",
    "Pavlova", "Alice Mutton", "Carnarvon Tigers", "Teatime Chocolate Biscuits",
    "Sir Rodney's Marmalade", "Sir Rodney's Scones", "Gustaf's Knäckebröd", "Tunnbröd",
    "Guaraná Fantástica", "NuNuCa Nuß-Nougat-Creme", "Gumbär Gummibärchen", "Schoggi Schokolade",
    "Rössle Sauerkraut", "Thüringer Rostbratwurst", "Nord-Ost Matjeshering", "Gorgonzola Telino",
    "Mascarpone Fabioli", "Geitost", "Sasquatch Ale", "Steeleye Stout", "Inlagd Sill",
    "Gravad lax", "Chartreuse verte", "Boston Crab Meat", "Jack's New England Clam Chowder",
    "Singaporean Hokkien Fried Mee", "Ipoh Coffee", "Gula Malacca", "Rogede sild", "Spegesild",
    "Zaanse koeken", "Chocolade", "Maxilaku", "Valkoinen suklaa", "Manjimup Dried Apples",
    "Filo Mix", "Perth Pasties", "Tourtière", "Pâté chinois", "Gnocchi di nonna Alice",
    "Ravioli Angelo", "Escargots de Bourgogne", "Raclette Courdavault", "Camembert Pierrot",
    "Sirop d'érable", "Tarte au sucre", "抹茶 Matcha Uji", "Rhönbräu Klosterbier", "Lakkalikööri",
)  # fmt: skip
CATEGORIES = (
    "Beverages", "Condiments", "Confections", "Dairy Products", "Grains/Cereals", "Meat/Poultry",
    "Produce", "Seafood",
)  # fmt: skip
UNITS = (
    "10 boxes x 20 bags", "24 - 12 oz bottles", "12 - 550 ml bottles", "48 - 6 oz jars",
    "36 boxes", "12 - 1 lb pkgs.", "2 kg box", "40 - 100 g pkgs.", "24 - 250 g jars",
)  # fmt: skip
ALLERGENS = ("gluten", "milk", "nuts", "soy", "fish", "eggs")
PRODUCT_SENTENCES = (
    "{name} comes from a family producer in {country} that we have worked with since {year}.",
    "Store dry and cool, below {n} °C; once opened, use within {days} days.",
    "Packed as {unit}; pallets hold {n} cartons, mixed pallets on request.",
    "Tasting notes: balanced, slightly sweet, with a long finish — pairs with Gudbrandsdalsost.",
    "Lead time from the supplier is {days} days; order before the 15th for next-month delivery.",
    "Certified by the {country} food safety authority, batch records kept for {n} months.",
    "Popular with horeca customers; retail shelves sell out around public holidays.",
    "Label texts in English, Deutsch, Français and 日本語 are printed on every unit.",
    "The recipe changed in {year}: less sugar, same price, customers were informed by letter.",
)
DISCONTINUED_PRODUCTS = (5, 9, 17, 24, 28, 29, 42, 53)
SPECIAL_PRODUCTS: dict[int, dict[str, Any]] = {
    1: {"unit_price": Decimal("0.00"), "description": "Free tasting kit, one per customer."},
    2: {"unit_price": Decimal("1.28")},  # unscaled 128: two bytes, 0x0080
    3: {"unit_price": Decimal("327.68")},  # unscaled 32768: three bytes, 0x008000
    4: {"unit_price": Decimal("263.50")},
}
SUPPLIER_NAMES = (
    "Exotic Liquids", "New Orleans Cajun Delights", "Grandma Kelly's Homestead", "Tokyo Traders",
    "Cooperativa de Quesos 'Las Cabras'", "Mayumi's", "Pavlova, Ltd.", "Specialty Biscuits, Ltd.",
    "PB Knäckebröd AB", "Refrescos Americanas LTDA", "Heli Süßwaren GmbH & Co. KG",
    "Plutzer Lebensmittelgroßmärkte AG", "Nord-Ost-Fisch Handelsgesellschaft mbH",
    "Formaggi Fortini s.r.l.", "Norske Meierier", "Bigfoot Breweries", "Svensk Sjöföda AB",
    "Aux joyeux ecclésiastiques", "New England Seafood Cannery", "Leka Trading", "Lyngbysild",
    "Zaanse Snoepfabriek", "Karkki Oy", "G'day, Mate", "Ma Maison", "Pasta Buttini s.r.l.",
    "Escargots Nouveaux", "Gai pâturage", "Forêts d'érables", "京都茶舗",
)  # fmt: skip


def money(rng: random.Random, low: int, high: int) -> Decimal:
    """A random amount between `low` and `high` whole units, with cents."""
    return Decimal(rng.randrange(low * 100, high * 100)).scaleb(-2)


def long_text(
    rng: random.Random, sentences: tuple[str, ...], low: int, high: int, **fill: Any
) -> str:
    """Sentences until the text is `low`..`high` bytes long (plus at most one sentence)."""
    target = rng.randint(low, high)
    parts: list[str] = []
    while len(" ".join(parts).encode()) < target:
        values = {
            "day": (date(2023, 1, 1) + timedelta(days=rng.randrange(500))).isoformat(),
            "order": 10248 + rng.randrange(400),
            "n": rng.randint(2, 60),
            "days": rng.randint(3, 45),
            "ref": f"R-{rng.randrange(10_000, 99_999)}",
            "month": rng.choice(("March", "May", "September", "November")),
            "month2": rng.choice(("April", "June", "October", "December")),
            "lang": rng.choice(("Deutsch", "Français", "Español", "日本語")),
            "year": rng.randint(2015, 2023),
            "country": rng.choice(COUNTRIES),
            **fill,
        }
        parts.append(rng.choice(sentences).format(**values))
    return " ".join(parts)


def customer_notes(rng: random.Random) -> str:
    return long_text(rng, NOTE_SENTENCES, 2500, 2850)


def product_description(rng: random.Random, name: str, unit: str) -> str:
    return long_text(rng, PRODUCT_SENTENCES, 2100, 2250, name=name, unit=unit)


def new_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def customer_profile(rng: random.Random, country: str) -> dict[str, Any]:
    return {
        "segment": rng.choice(SEGMENTS),
        "newsletter": rng.random() < 0.5,
        "languages": rng.sample(LANGUAGES, rng.randint(1, 2)),
        "rating": rng.randint(1, 5),
        "address": {
            "city": rng.choice(CITIES[country]),
            "postal_code": f"{rng.randrange(1000, 99999):05d}",
        },
    }


def customer_row(rng: random.Random, customer_id: str, created_us: int, updated_us: int) -> dict:
    country = rng.choice(COUNTRIES)
    return {
        "customer_id": customer_id,
        "company_name": f"{rng.choice(COMPANY_FIRST)} {rng.choice(COMPANY_LAST)}",
        "contact_name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
        "country": country,
        "credit_limit": money(rng, 500, 250_000),
        "external_id": new_uuid(rng),
        "tags": rng.sample(TAGS, rng.randint(1, 3)),
        "profile": customer_profile(rng, country),
        "notes": customer_notes(rng),
        "created_at": utc_at(created_us),
        "updated_at": naive_at(updated_us),
    }


def product_row(rng: random.Random, product_id: int, name: str, updated_us: int) -> dict:
    unit = rng.choice(UNITS)
    country = rng.choice(COUNTRIES)
    row = {
        "product_id": product_id,
        "product_name": name,
        "category": rng.choice(CATEGORIES),
        "unit_price": money(rng, 2, 120),
        "units_in_stock": rng.randint(0, 150),
        "discontinued": product_id in DISCONTINUED_PRODUCTS,
        "description": product_description(rng, name, unit),
        "attributes": {
            "unit": unit,
            "supplier_id": rng.randint(1, 40),
            "origin": country,
            "organic": rng.random() < 0.3,
            "allergens": rng.sample(ALLERGENS, rng.randint(0, 2)),
        },
        "updated_at": utc_at(updated_us),
    }
    row.update(SPECIAL_PRODUCTS.get(product_id, {}))
    return row


def phone(rng: random.Random) -> str:
    parts = (
        rng.randint(1, 89),
        rng.randint(10, 99),
        rng.randint(100, 999),
        rng.randint(1000, 9999),
    )
    return "+{} {} {} {}".format(*parts)


def millis_floor(us: int) -> int:
    return us - us % 1000


# --- the story: what the order application does -----------------------------------------------


class Northwind:
    """The order application. Every method is one transaction (or a few) against the server."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.rng = sim.rng
        self.used_ids: set[str] = set()
        self.special_ids: list[str] = []
        self.next_order_id = 10248
        self.next_product_id = 1
        self.deleted_customer: dict[str, Any] | None = None
        self.removed_line: dict[str, Any] | None = None
        self.protected_orders: list[int] = []

    # helpers ------------------------------------------------------------------

    def rows(self, table: Table) -> dict[tuple[Any, ...], dict[str, Any]]:
        return self.sim.rows[table.name]

    def new_customer_id(self) -> str:
        while True:
            candidate = "".join(self.rng.choice(string.ascii_uppercase) for _ in range(5))
            if candidate not in self.used_ids:
                self.used_ids.add(candidate)
                return candidate

    def ordinary_customers(self) -> list[dict[str, Any]]:
        return [
            r for r in self.rows(CUSTOMERS).values() if r["customer_id"] not in self.special_ids
        ]

    def orderable_products(self) -> list[dict[str, Any]]:
        return [r for r in self.rows(PRODUCTS).values() if not r["discontinued"]]

    def orders_with(self, status: str) -> list[dict[str, Any]]:
        return [r for r in self.rows(ORDERS).values() if r["status"] == status]

    def lines_of(self, order_id: int) -> list[dict[str, Any]]:
        return [r for r in self.rows(ORDER_DETAILS).values() if r["order_id"] == order_id]

    def orders_of(self, customer_id: str) -> list[dict[str, Any]]:
        return [r for r in self.rows(ORDERS).values() if r["customer_id"] == customer_id]

    def set_stock(self, tx: Transaction, product_id: int, delta: int) -> None:
        product = self.rows(PRODUCTS)[(product_id,)]
        changes = {"units_in_stock": product["units_in_stock"] + delta, "updated_at": tx.now_utc}
        tx.update(PRODUCTS, (product_id,), changes)

    # the database before capture starts ---------------------------------------

    def populate(self) -> None:
        start_us = self.sim.clock_us
        self.populate_customers(start_us)
        self.populate_products(start_us)
        self.populate_orders(start_us)
        self.populate_suppliers(start_us)

    def populate_customers(self, start_us: int, count: int = 150) -> None:
        rng = self.rng
        first_us = micros(datetime(2016, 1, 1, tzinfo=UTC))
        for i in range(count):
            created = rng.randrange(first_us, start_us - 30 * 86_400_000_000)
            updated = rng.randrange(created, start_us - 3_600_000_000)
            row = customer_row(rng, self.new_customer_id(), created, updated)
            if i < len(SPECIAL_CUSTOMERS):
                row.update(SPECIAL_CUSTOMERS[i])
                self.special_ids.append(row["customer_id"])
            self.sim.load(CUSTOMERS, row)

    def populate_products(self, start_us: int, count: int = 60) -> None:
        for _ in range(count):
            self.sim.load(
                PRODUCTS, self.make_product(start_us - self.rng.randrange(86_400_000_000 * 300))
            )

    def make_product(self, updated_us: int) -> dict[str, Any]:
        product_id = self.next_product_id
        self.next_product_id += 1
        name = PRODUCT_NAMES[(product_id - 1) % len(PRODUCT_NAMES)]
        return product_row(self.rng, product_id, name, updated_us)

    def populate_orders(self, start_us: int, count: int = 400) -> None:
        rng = self.rng
        customers = list(self.rows(CUSTOMERS).values())[:-15]  # the last ones have no orders yet
        products = self.orderable_products()
        today = utc_at(start_us).date()
        days_back = sorted(rng.randrange(1, 120) for _ in range(count))[::-1]
        for back in days_back:
            customer = rng.choice(customers)
            order = self.make_order(customer, today - timedelta(days=back), start_us)
            self.sim.load(ORDERS, order)
            for product in rng.sample(products, rng.randint(1, 5)):
                self.sim.load(ORDER_DETAILS, self.make_line(order["order_id"], product))

    def make_order(self, customer: Mapping[str, Any], day: date, start_us: int) -> dict[str, Any]:
        rng = self.rng
        order_id = self.next_order_id
        self.next_order_id += 1
        placed_us = micros(datetime.combine(day, datetime.min.time(), UTC)) + rng.randrange(
            6 * 3_600_000_000, 18 * 3_600_000_000
        )
        age_days = (utc_at(start_us).date() - day).days
        shipped_us = placed_us + rng.randrange(86_400_000_000, 3 * 86_400_000_000)
        status = "delivered" if age_days > 10 else "shipped" if age_days > 3 else "new"
        freight = Decimal("0.00") if rng.random() < 0.04 else money(rng, 1, 900)
        return {
            "order_id": order_id,
            "customer_id": customer["customer_id"],
            "order_date": day,
            "required_date": day + timedelta(days=28),
            "shipped_at": None if status == "new" else utc_at(shipped_us),
            "ship_country": customer["country"],
            "freight": freight,
            "status": status,
            "updated_at": naive_at(placed_us if status == "new" else shipped_us),
        }

    def make_line(self, order_id: int, product: Mapping[str, Any], quantity: int = 0) -> dict:
        rng = self.rng
        return {
            "order_id": order_id,
            "product_id": product["product_id"],
            "unit_price": product["unit_price"],
            "quantity": quantity or rng.randint(1, 60),
            "discount": Decimal(rng.choice(("0.00", "0.00", "0.05", "0.10", "0.15", "0.25"))),
        }

    def populate_suppliers(self, start_us: int, count: int = 40) -> None:
        rng = self.rng
        first_us = micros(datetime(2023, 1, 1))
        for supplier_id in range(1, count + 1):
            name = SUPPLIER_NAMES[(supplier_id - 1) % len(SUPPLIER_NAMES)]
            if supplier_id > len(SUPPLIER_NAMES):
                name = f"{name} ({rng.choice(COUNTRIES)})"
            row = {
                "supplier_id": supplier_id,
                "company_name": name,
                "country": rng.choice(COUNTRIES),
                "phone": phone(rng),
                "last_update": naive_at(
                    millis_floor(rng.randrange(first_us, start_us - 86_400_000_000))
                ),
            }
            self.sim.load(SUPPLIERS, row)

    # everyday activity ---------------------------------------------------------

    def place_order(self) -> None:
        """New order: the order, its lines, and the stock of each product, in one transaction."""
        rng = self.rng
        customer = rng.choice(list(self.rows(CUSTOMERS).values()))
        products = rng.sample(self.orderable_products(), rng.randint(1, 4))
        with self.sim.transaction() as tx:
            day = tx.now_utc.date()
            order = self.make_order(customer, day, tx.now_us)
            order["updated_at"] = tx.now_naive
            order["freight"] = money(rng, 1, 900)
            tx.insert(ORDERS, order)
            for product in products:
                quantity = rng.randint(1, 40)
                if product["units_in_stock"] < quantity:  # restock first: two updates, one key
                    self.set_stock(tx, product["product_id"], 200)
                line = self.make_line(
                    order["order_id"], self.rows(PRODUCTS)[(product["product_id"],)], quantity
                )
                tx.insert(ORDER_DETAILS, line)
                self.set_stock(tx, product["product_id"], -quantity)

    def advance_status(self, tx: Transaction, order: Mapping[str, Any]) -> None:
        """new -> shipped (shipped_at set) -> delivered."""
        changes: dict[str, Any] = {"updated_at": tx.now_naive}
        if order["status"] == "new":
            changes.update(status="shipped", shipped_at=tx.now_utc)
        else:
            changes["status"] = "delivered"
        tx.update(ORDERS, (order["order_id"],), changes)

    def ship_order(self) -> None:
        candidates = self.orders_with("new")
        if not candidates:
            return self.place_order()
        with self.sim.transaction() as tx:
            self.advance_status(tx, self.rng.choice(candidates))

    def deliver_order(self) -> None:
        candidates = self.orders_with("shipped")
        if not candidates:
            return self.ship_order()
        with self.sim.transaction() as tx:
            self.advance_status(tx, self.rng.choice(candidates))

    def update_customer(self) -> None:
        """Some attributes change; `notes` (TOASTed) mostly stays as it is."""
        rng = self.rng
        customer = rng.choice(self.ordinary_customers())
        with self.sim.transaction() as tx:
            changes: dict[str, Any] = {"updated_at": tx.now_naive}
            choice = rng.randrange(4)
            if choice == 0:
                changes["contact_name"] = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            elif choice == 1:
                changes["credit_limit"] = money(rng, 500, 250_000)
            elif choice == 2:
                changes["tags"] = rng.sample(TAGS, rng.randint(0, 3))
            else:
                changes["profile"] = {
                    **customer["profile"],
                    "newsletter": not customer["profile"]["newsletter"],
                }
            if rng.random() < 0.15:
                changes["notes"] = customer_notes(rng)
            if "loyalty_tier" in customer and rng.random() < 0.35:
                changes["loyalty_tier"] = rng.choice(TIERS)
            tx.update(CUSTOMERS, (customer["customer_id"],), changes)

    def new_customer(self) -> None:
        with self.sim.transaction() as tx:
            row = customer_row(self.rng, self.new_customer_id(), tx.now_us, tx.now_us)
            if "loyalty_tier" in self.sim.columns[CUSTOMERS.name]:
                row["loyalty_tier"] = "bronze"
            tx.insert(CUSTOMERS, row)

    def update_product(self) -> None:
        """A price change; `description` (TOASTed) changes now and then."""
        rng = self.rng
        product = rng.choice(
            [p for p in self.orderable_products() if p["product_id"] not in SPECIAL_PRODUCTS]
        )
        with self.sim.transaction() as tx:
            factor = Decimal(rng.choice(("0.90", "0.95", "1.05", "1.10", "1.20")))
            price = (product["unit_price"] * factor).quantize(Decimal("0.01"))
            changes: dict[str, Any] = {"unit_price": price, "updated_at": tx.now_utc}
            if rng.random() < 0.2:
                changes["description"] = product_description(
                    rng, product["product_name"], product["attributes"]["unit"]
                )
            tx.update(PRODUCTS, (product["product_id"],), changes)

    def restock_product(self) -> None:
        product = self.rng.choice(self.orderable_products())
        with self.sim.transaction() as tx:
            self.set_stock(tx, product["product_id"], self.rng.randint(50, 300))

    def edit_order_line(self) -> None:
        rng = self.rng
        open_orders = {o["order_id"] for o in self.orders_with("new")}
        lines = [r for r in self.rows(ORDER_DETAILS).values() if r["order_id"] in open_orders]
        if not lines:
            return self.place_order()
        line = rng.choice(lines)
        quantity = max(1, line["quantity"] + rng.choice((-5, -2, 3, 10)))
        with self.sim.transaction() as tx:
            key = (line["order_id"], line["product_id"])
            discount = Decimal(rng.choice(("0.05", "0.10")))
            tx.update(ORDER_DETAILS, key, {"quantity": quantity, "discount": discount})
            self.set_stock(tx, line["product_id"], line["quantity"] - quantity)

    def cancel_order(self) -> None:
        """The order goes away with its lines (deleted first), and the stock comes back."""
        candidates = [
            o for o in self.orders_with("new") if o["order_id"] not in self.protected_orders
        ]
        if not candidates:
            return self.place_order()
        order = self.rng.choice(candidates)
        lines = self.lines_of(order["order_id"])
        with self.sim.transaction() as tx:
            for line in lines:
                tx.delete(ORDER_DETAILS, (line["order_id"], line["product_id"]))
            for line in lines:
                self.set_stock(tx, line["product_id"], line["quantity"])
            tx.delete(ORDERS, (order["order_id"],))

    def update_supplier(self) -> None:
        """Not captured by Debezium: the JDBC connector sees it at its next poll."""
        rng = self.rng
        supplier = rng.choice(list(self.rows(SUPPLIERS).values())[:12])
        with self.sim.transaction() as tx:
            changes = {"phone": phone(rng), "last_update": naive_at(millis_floor(tx.now_us))}
            tx.update(SUPPLIERS, (supplier["supplier_id"],), changes)

    # scripted moments ------------------------------------------------------------

    def rewrite_customer_notes(self) -> None:
        """An update that does SET the TOASTed column: the new value travels in full."""
        customer = self.rng.choice(self.ordinary_customers())
        with self.sim.transaction() as tx:
            changes = {"notes": customer_notes(self.rng), "updated_at": tx.now_naive}
            tx.update(CUSTOMERS, (customer["customer_id"],), changes)

    def touch_supplier_again(self) -> None:
        """Supplier 23 changes once more, so the third poll lists it a third time."""
        with self.sim.transaction() as tx:
            changes = {"phone": phone(self.rng), "last_update": naive_at(millis_floor(tx.now_us))}
            tx.update(SUPPLIERS, (23,), changes)

    def add_product(self) -> None:
        with self.sim.transaction() as tx:
            tx.insert(PRODUCTS, self.make_product(tx.now_us))

    def delete_customer(self) -> None:
        """A customer without orders is deleted; the same key comes back later."""
        candidates = [c for c in self.ordinary_customers() if not self.orders_of(c["customer_id"])]
        customer = self.rng.choice(candidates)
        with self.sim.transaction() as tx:
            self.deleted_customer = tx.delete(CUSTOMERS, (customer["customer_id"],))

    def reinsert_customer(self) -> None:
        assert self.deleted_customer is not None
        old = self.deleted_customer
        with self.sim.transaction() as tx:
            row = customer_row(self.rng, old["customer_id"], tx.now_us, tx.now_us)
            row.update(
                company_name=old["company_name"], country=old["country"], loyalty_tier="bronze"
            )
            tx.insert(CUSTOMERS, row)

    def remove_order_line(self) -> None:
        """One line of an open order is deleted; the same key is inserted again later."""
        orders = [o for o in self.orders_with("new") if len(self.lines_of(o["order_id"])) >= 2]
        order = self.rng.choice(orders)
        line = self.rng.choice(self.lines_of(order["order_id"]))
        self.protected_orders.append(order["order_id"])
        with self.sim.transaction() as tx:
            self.removed_line = tx.delete(ORDER_DETAILS, (line["order_id"], line["product_id"]))
            self.set_stock(tx, line["product_id"], line["quantity"])

    def restore_order_line(self) -> None:
        assert self.removed_line is not None
        line = dict(self.removed_line, quantity=self.removed_line["quantity"] + 7)
        with self.sim.transaction() as tx:
            tx.insert(ORDER_DETAILS, line)
            self.set_stock(tx, line["product_id"], -line["quantity"])

    def change_customer_key(self) -> None:
        """UPDATE customers SET customer_id = ...: ON UPDATE CASCADE rewrites the orders."""
        candidates = [
            c for c in self.ordinary_customers() if len(self.orders_of(c["customer_id"])) >= 2
        ]
        customer = self.rng.choice(candidates)
        old_id, new_id = customer["customer_id"], self.new_customer_id()
        with self.sim.transaction() as tx:
            tx.update(CUSTOMERS, (old_id,), {"customer_id": new_id, "updated_at": tx.now_naive})
            for order in self.orders_of(old_id):
                tx.update(ORDERS, (order["order_id"],), {"customer_id": new_id})

    def delete_product(self) -> None:
        """A discontinued product nobody ever ordered is deleted."""
        ordered = {line["product_id"] for line in self.rows(ORDER_DETAILS).values()}
        candidates = [
            p
            for p in self.rows(PRODUCTS).values()
            if p["discontinued"] and p["product_id"] not in ordered
        ]
        product = self.rng.choice(candidates)
        with self.sim.transaction() as tx:
            tx.delete(PRODUCTS, (product["product_id"],))

    def add_loyalty_tier(self) -> None:
        for name in CUSTOMERS.added_later:
            self.sim.add_column(CUSTOMERS, name)

    def assign_tiers(self) -> None:
        """One UPDATE touching a dozen customers: one event each, one transaction."""
        chosen = self.rng.sample(self.ordinary_customers(), 12)
        with self.sim.transaction() as tx:
            for customer in chosen:
                tier = self.rng.choice(TIERS)
                tx.update(
                    CUSTOMERS,
                    (customer["customer_id"],),
                    {"loyalty_tier": tier, "updated_at": tx.now_naive},
                )

    def suppliers_same_millisecond(self) -> None:
        """One UPDATE of two suppliers: both rows get the same last_update."""
        with self.sim.transaction() as tx:
            stamp = naive_at(millis_floor(tx.now_us))
            for supplier_id in (23, 31):
                tx.update(SUPPLIERS, (supplier_id,), {"country": "Japan", "last_update": stamp})

    def shipping_burst_and_crash(self) -> int:
        """Orders-only transactions right after Debezium flushed its offsets; then it dies and,
        on restart, streams them all again."""
        flushed_lsn = self.sim.wal.lsn
        topic = self.sim.emitted[ORDERS.topic]
        start = len(topic)
        while len(topic) - start < REPLAY_EVENTS:
            self.sim.advance(1, 4)
            candidates = self.orders_with("new") + self.orders_with("shipped")
            with self.sim.transaction() as tx:
                for order in self.rng.sample(candidates, self.rng.randint(1, 3)):
                    self.advance_status(tx, order)
        return self.sim.restart_debezium(flushed_lsn, self.rng.uniform(40, 90))


ACTIVITIES: tuple[tuple[Callable[[Northwind], None], int], ...] = (
    (Northwind.place_order, 30),
    (Northwind.ship_order, 16),
    (Northwind.deliver_order, 10),
    (Northwind.update_customer, 9),
    (Northwind.edit_order_line, 8),
    (Northwind.update_product, 7),
    (Northwind.update_supplier, 7),
    (Northwind.cancel_order, 5),
    (Northwind.new_customer, 4),
    (Northwind.restock_product, 4),
)
SCRIPT: dict[int, Callable[[Northwind], Any]] = {
    20: Northwind.add_product,
    30: Northwind.rewrite_customer_notes,
    40: Northwind.delete_customer,
    55: Northwind.suppliers_same_millisecond,
    60: Northwind.remove_order_line,
    85: Northwind.change_customer_key,
    110: Northwind.delete_product,
    140: Northwind.add_loyalty_tier,
    141: Northwind.assign_tiers,
    170: Northwind.reinsert_customer,
    190: Northwind.restore_order_line,
    200: Northwind.touch_supplier_again,
    230: Northwind.shipping_burst_and_crash,
}
# JDBC polls after the snapshot start; the last poll comes after the last step.
POLL_OFFSETS_S = (5 * 60, 150 * 60)


def simulate(seed: int) -> Simulation:
    """The whole history: existing data, snapshot, about six hours of streaming."""
    sim = Simulation(seed)
    app = Northwind(sim)
    app.populate()
    sim.snapshot(DEBEZIUM_TABLES)
    polls = [micros(SNAPSHOT_START) + s * 1_000_000 for s in POLL_OFFSETS_S]
    activities, weights = zip(*ACTIVITIES, strict=True)
    for step in range(STREAM_STEPS):
        idle_since = sim.clock_us
        sim.advance(15, 125)
        while polls and polls[0] <= sim.clock_us:
            sim.poll_jdbc(SUPPLIERS, max(polls.pop(0), idle_since))
        action = SCRIPT.get(step) or sim.rng.choices(activities, weights)[0]
        action(app)
    for poll_us in polls:
        sim.poll_jdbc(SUPPLIERS, max(poll_us, sim.clock_us))
    sim.advance(30, 90)
    sim.poll_jdbc(SUPPLIERS, sim.clock_us)
    return sim


# --- output ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicOutput:
    """What was written for one table."""

    table: Table
    ops: dict[str, int]
    files: list[Path]
    final_rows: int

    @property
    def records(self) -> int:
        return sum(self.ops.values())


def topic_records(sim: Simulation, table: Table) -> list[tuple[str, int]]:
    """(record value, Kafka record timestamp in ms) in offset order."""
    if table.shape == "jdbc":
        return [(jdbc_value(table, row), poll_ms) for poll_ms, rows in sim.polls for row in rows]
    emitted = sim.emitted[table.topic]
    if table.shape == "flattened":
        return [(flattened_value(e.change), e.proc_ns // 1_000_000) for e in emitted]
    return [(envelope_value(e.change, e.proc_ns), e.proc_ns // 1_000_000) for e in emitted]


def topic_ops(sim: Simulation, table: Table) -> dict[str, int]:
    if table.shape == "jdbc":
        return {f"poll {i + 1}": len(rows) for i, (_, rows) in enumerate(sim.polls)}
    ops: dict[str, int] = {}
    for e in sim.emitted[table.topic]:
        ops[e.change.op] = ops.get(e.change.op, 0) + 1
    return dict(sorted(ops.items()))


def sink_files(records: list[tuple[str, int]]) -> Iterator[tuple[int, list[str]]]:
    """Kafka Connect S3 sink rotation: flush.size records, or rotate.interval.ms of record time
    since the first record of the open file. Yields (start offset, values)."""
    current: list[str] = []
    start = first_ts = 0
    for offset, (value, ts) in enumerate(records):
        if current and (len(current) >= FLUSH_SIZE or ts - first_ts >= ROTATE_INTERVAL_MS):
            yield start, current
            current = []
        if not current:
            start, first_ts = offset, ts
        current.append(value)
    if current:
        yield start, current


def write_topic(landing: Path, topic: str, records: list[tuple[str, int]]) -> list[Path]:
    folder = landing / "topics" / topic / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for start, values in sink_files(records):
        path = folder / f"{topic}+0+{start:010d}.json"
        path.write_text("".join(v + "\n" for v in values), encoding="utf-8")
        paths.append(path)
    return paths


def expected_rows(sim: Simulation, table: Table) -> list[dict[str, Any]]:
    rows = sim.rows[table.name]
    return [canonical_row(table, rows[key]) for key in sorted(rows)]


def write_expected(folder: Path, table: Table, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{table.name}.jsonl"
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def generate(out: Path, seed: int) -> list[TopicOutput]:
    """Write landing/ and expected/ (replacing earlier ones) and README.md under `out`."""
    sim = simulate(seed)
    for sub in ("landing", "expected"):
        shutil.rmtree(out / sub, ignore_errors=True)
    outputs = []
    for table in TABLES:
        files = write_topic(out / "landing", table.topic, topic_records(sim, table))
        rows = expected_rows(sim, table)
        write_expected(out / "expected", table, rows)
        outputs.append(TopicOutput(table, topic_ops(sim, table), files, len(rows)))
    (out / "README.md").write_text(readme(outputs, seed), encoding="utf-8")
    return outputs


SHAPE_TEXT = {
    "customers": "Debezium envelope, JsonConverter `schemas.enable=true` "
    '(`{"schema":…,"payload":…}`)',
    "products": "Debezium envelope, schemas off",
    "orders": "Debezium envelope, schemas off",
    "order_details": "ExtractNewRecordState rows (`__deleted`, `__op`, `__table`, `__lsn`, "
    "`__source_ts_ms`), schemas off",
    "suppliers": "JDBC source connector rows, schemas off, `last_update` in epoch milliseconds",
}


def readme(outputs: list[TopicOutput], seed: int) -> str:
    table_lines = "\n".join(
        f"| {o.table.name} | `{o.table.topic}` | {SHAPE_TEXT[o.table.name]} | {o.records} "
        f"({', '.join(f'{k}: {v}' for k, v in o.ops.items())}) | {len(o.files)} | {o.final_rows} |"
        for o in outputs
    )
    return README_TEMPLATE.format(
        seed=seed,
        tables=table_lines,
        flush=FLUSH_SIZE,
        rotate=ROTATE_INTERVAL_MS,
        start=SNAPSHOT_START.strftime("%Y-%m-%d %H:%M UTC"),
        replay=REPLAY_EVENTS,
        ddl=DDL.rstrip(),
        mid_ddl=MID_STREAM_DDL.strip().rstrip(";"),
        placeholder=TOAST_PLACEHOLDER,
    )


README_TEMPLATE = """\
# Sample landing zone: a simulated Northwind order system

Generated, not captured: `python -m cdc_lakehouse.sample.generate --out sample --seed {seed}`
(`cdc_lakehouse/sample/generate.py`; the same seed gives the same bytes, no wall clock is read).
It stands in for a real PostgreSQL + Debezium capture until the project's capture tool exists.
The record shapes copy real Debezium 3.6.3 output (shared `debezium-samples`) byte for byte.

- `landing/topics/<topic>/partition=0/<topic>+0+<start offset, 10 digits>.json`: what a Kafka
  Connect S3 sink writes (JsonFormat): one record value per line, tombstones dropped. Files
  rotate at `flush.size={flush}` records or `rotate.interval.ms={rotate}` of record time,
  so offsets run on from one file to the next.
- `expected/<table>.jsonl`: each PostgreSQL table after the whole history, one row per line,
  sorted by primary key, values in canonical form (below).

## Tables

| table | topic | shape | records (by op) | files | final rows |
|---|---|---|---|---|---|
{tables}

Debezium: PostgreSQL connector, `plugin.name=pgoutput`, `topic.prefix=northwind`,
`decimal.handling.mode=precise` (numeric as base64 of the unscaled two's-complement integer),
`time.precision.mode=adaptive` (date: days since epoch; timestamp: microseconds since epoch;
timestamptz: UTC ISO string with 6 decimals and `Z`), jsonb as a JSON string, uuid as a string,
text[] as a JSON array. Every table has REPLICA IDENTITY DEFAULT. order_details goes through
ExtractNewRecordState with `delete.tombstone.handling.mode=rewrite`,
`add.fields=op,table,lsn,source.ts_ms`. suppliers is polled by a JDBC source connector,
`mode=timestamp+incrementing` on (`last_update`, `supplier_id`).

## History

1. Existing data (customers, products, orders, order_details, suppliers) as of {start}.
2. Debezium's initial snapshot: op `r`, one snapshot LSN and `txId`, `sequence` `[null,"<lsn>"]`,
   `source.snapshot` `first` / `first_in_data_collection` / `true` /
   `last_in_data_collection` / `last` as Debezium sets them.
3. About six hours of streaming. Each transaction commits at one `source.ts_ms`/`txId`; each of
   its events has its own, increasing `lsn`; `sequence` is `["<previous commit lsn>","<lsn>"]`
   (`null` first in the first streamed transaction). It includes:
   - new orders: the order, its lines and one stock update per product in one transaction
     (a product running out is restocked first: two updates of one key in one transaction);
   - shipping, delivery, price changes, order line edits, new customers;
   - updates leaving `customers.notes` / `products.description` (stored out of line,
     `STORAGE EXTERNAL`) alone: `after` carries `{placeholder}` for it;
   - deletes: `before` holds only the key columns (RI DEFAULT), no tombstones in the files;
     cancelled orders are deleted with their lines in one transaction;
   - a customer key change (`UPDATE customers SET customer_id = ...`): op `d` for the old key
     and op `c` for the new one at the same `lsn` and `txId`, the `c` carrying the placeholder
     for `notes`; `ON UPDATE CASCADE` then rewrites that customer's orders in the same
     transaction;
   - a customer deleted and later inserted again with the same key; an order line likewise;
   - mid-stream `{mid_ddl}`:
     later customers events, and their embedded schema, carry the column; rows not updated
     since keep NULL;
   - an at-least-once replay on `northwind.public.orders`: Debezium dies right after a burst of
     {replay} order updates whose offsets it had not flushed, and on restart sends them again
     (same `before`/`after`/`source`, new envelope `ts_ms`, new Kafka offsets);
   - suppliers: three polls (all rows, then rows whose (`last_update`, `supplier_id`) moved past
     the connector's offset, the last poll after the last change); two rows updated by one
     statement share a `last_update`; deletes would not be visible, so there are none. The
     application writes `last_update` with millisecond precision, as the connector reads it.
   - No truncate.

## Canonical values in expected/

One JSON object per row, all columns of the table (null when NULL):
numeric as a string with exactly the column's scale (`"12.50"`, `"0.00"`), date `"YYYY-MM-DD"`,
timestamp `"YYYY-MM-DDTHH:MM:SS.ffffff"`, timestamptz `"YYYY-MM-DDTHH:MM:SS.ffffffZ"` (UTC),
jsonb as the parsed JSON value (object keys sorted), uuid as a lower-case string, arrays as JSON
lists, int and boolean as JSON numbers and booleans, text as is.
`cdc_lakehouse.sample.northwind.canonical_value(pg_type, value)` produces this form.

## DDL (for a real source)

```sql
{ddl}

-- mid-stream
{mid_ddl};
```
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sample"), help="output folder")
    parser.add_argument("--seed", type=int, default=7, help="random seed")
    args = parser.parse_args(argv)
    for o in generate(args.out, args.seed):
        size = sum(p.stat().st_size for p in o.files)
        print(
            f"{o.table.name:14} {o.records:5} records in {len(o.files)} files "
            f"({size / 1024:.0f} KiB), {o.final_rows} final rows"
        )


if __name__ == "__main__":
    main()
