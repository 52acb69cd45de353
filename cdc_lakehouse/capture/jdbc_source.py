"""Query-based capture of one table, the way Kafka Connect's JDBC source connector does it in
`timestamp+incrementing` mode, landing rows as its JsonConverter (schemas off) would.

Each poll selects the rows whose (timestamp column, incrementing column) moved past the stored
offset, in that order, writes them as landing files (same layout and rotation as the Debezium
capture) and stores the new offset. Deletes are invisible to this kind of capture, and a row
changed twice between polls lands once: that is the shape's contract, not a bug. With
`columns=None` each poll selects every column the table has then, as the connector's table mode
does, so a column added at the source lands from the next poll on.

Query mode (`query`, the connector's `query` setting): each poll selects from a query instead of
a table, a join for instance, wrapped as `select * from (<query>)` so the offset condition applies
to its output columns (the timestamp column is then typically the `greatest` of the joined rows'
`last_update`, so a change to any of them lands the joined row again). Single message
transforms (`transforms`, see transforms.py) change each row as the connector's chain would,
after the offset is read from the row (Connect tracks source offsets before the transforms).

`extract` lands a complete extract of the table (what the connector's `bulk` mode reads, in one
REPEATABLE READ transaction) as an extract folder with its manifest (see
cdc_lakehouse/bronze/extracts.py): the bronze model compares it with the change log to find deletes.

Values as the connector's JsonConverter writes them with `schemas.enable=false`: `timestamp`
columns as epoch milliseconds (Connect `Timestamp`), numbers as JSON numbers, text as strings.
With `parquet_partition_field`, polls land as Confluent's S3 sink writes Parquet with a
FieldPartitioner on that field instead (parquet_sink.py); the next Kafka offset is then kept in
the state file beside the poll offset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from cdc_lakehouse.bronze.extracts import write_extract
from cdc_lakehouse.capture.parquet_sink import write_parquet_records
from cdc_lakehouse.capture.sink import LandingSink
from cdc_lakehouse.capture.transforms import Transform, apply_transforms

# PostgreSQL type oid of `timestamptz`: its `as_of` is an instant (with offset), a `timestamp`
# column's the session's wall clock.
_TIMESTAMPTZ_OID = 1184

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class JdbcSource:
    conninfo: str
    table: str
    columns: Sequence[str] | None  # None: every column the table has at each poll (`select *`)
    order_by: Sequence[str]  # (timestamp column, incrementing column)
    topic: str
    out: Path
    state_file: Path
    flush_size: int = 500
    query: str | None = None  # query mode: poll this SELECT (a join...) instead of `table`
    transforms: Sequence[Transform] = ()  # SMTs applied to every row, in order
    # Land Parquet (Confluent's ParquetFormat, gzip) in folders of this field's values
    # (FieldPartitioner, see parquet_sink.py) instead of JSON lines.
    parquet_partition_field: str | None = None

    def _select(self) -> str:
        if self.query is not None:
            return f"select * from ({self.query}) as polled"
        cols = "*" if self.columns is None else ", ".join(self.columns)
        return f"select {cols} from {self.table}"

    def _lines(self, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
        return _json_lines(names, rows, self.transforms, self.topic)

    def poll(self) -> int:
        """One poll: land every row past the offset; returns the number of rows landed."""
        offset = self._load_offset()
        ts_col, inc_col = self.order_by
        sql = self._select()
        params: tuple[Any, ...] = ()
        if offset is not None:
            sql += f" where {ts_col} > %s or ({ts_col} = %s and {inc_col} > %s)"
            params = (offset[0], offset[0], offset[1])
        sql += f" order by {ts_col}, {inc_col}"
        with psycopg.connect(self.conninfo) as conn:
            cursor = conn.execute(sql, params)
            description = list(cursor.description or ())
            names = [d.name for d in description]
            rows = cursor.fetchall()
        if not rows:
            return 0
        next_offset = None
        if self.parquet_partition_field is not None:
            # Parquet files do not say which offsets they hold (a file's records interleave
            # with other folders'): the next Kafka offset is kept with the poll offset.
            start = self._load_state().get("next_offset", 0)
            write_parquet_records(
                self.out,
                self.topic,
                description,
                rows,
                partition_field=self.parquet_partition_field,
                start_offset=start,
                transforms=self.transforms,
                flush_size=self.flush_size,
            )
            next_offset = start + len(rows)
        else:
            values = self._lines(names, rows)
            LandingSink(self.out, flush_size=self.flush_size).write_batch(
                [(self.topic, v) for v in values]
            )
        last = dict(zip(names, rows[-1], strict=True))
        self._store_offset(last[ts_col], last[inc_col], next_offset)
        return len(rows)

    def extract(self, folder: Path, as_of: datetime | None = None) -> Path:
        """Land every row of the table as one complete extract below `folder` (the table's
        extract folder); `as_of` is the extract's time in the timestamp column's clock, by
        default the source's own (`now()`, read in the extract's transaction). Returns the
        manifest's path."""
        ts_col, inc_col = self.order_by
        with psycopg.connect(self.conninfo) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                cursor = conn.execute(f"{self._select()} order by {ts_col}, {inc_col}")
                names = [d.name for d in cursor.description or ()]
                zoned = any(
                    d.name == ts_col and d.type_code == _TIMESTAMPTZ_OID
                    for d in cursor.description or ()
                )
                rows = cursor.fetchall()
                if as_of is None:
                    clock = "now()" if zoned else "localtimestamp"
                    as_of = conn.execute(f"select {clock}").fetchone()[0]
        lines = self._lines(names, rows)
        stamp = as_of.isoformat()
        name = stamp.replace(":", "").replace("+", "p")  # a folder name every object store takes
        return write_extract(
            Path(folder) / name, lines, topic=self.topic, as_of=stamp, rows_per_file=self.flush_size
        )

    def _load_state(self) -> dict[str, Any]:
        if not self.state_file.exists():
            return {}
        return json.loads(self.state_file.read_text())

    def _load_offset(self) -> tuple[datetime, Any] | None:
        state = self._load_state()
        if not state:
            return None
        return datetime.fromisoformat(state["timestamp"]), state["incrementing"]

    def _store_offset(
        self, timestamp: datetime, incrementing: Any, next_offset: int | None = None
    ) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f".{self.state_file.name}.tmp")
        state = {"timestamp": timestamp.isoformat(), "incrementing": incrementing}
        if next_offset is not None:
            state["next_offset"] = next_offset
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state_file)


def _json_lines(
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    transforms: Sequence[Transform] = (),
    topic: str = "",
) -> list[str]:
    """Rows as the connector's JsonConverter (schemas off) writes them after its transforms,
    one line each."""
    return [
        json.dumps(
            apply_transforms(
                transforms, {c: _connect_value(v) for c, v in zip(names, row, strict=True)}, topic
            ),
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for row in rows
    ]


def _connect_value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return (value - EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days
    if isinstance(value, Decimal):
        return float(value)
    return value
