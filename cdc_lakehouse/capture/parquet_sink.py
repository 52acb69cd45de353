"""Landing files written the way Confluent's S3 sink writes Parquet with a FieldPartitioner
(`format.class=io.confluent.connect.s3.format.parquet.ParquetFormat`, `parquet.codec=gzip`,
`partitioner.class=io.confluent.connect.storage.partitioner.FieldPartitioner`,
`partition.field.name=<field>`):

    <out>/topics/<topic>/<field>=<value>/<topic>+<p>+<start offset, 10 digits>.gz.parquet

Records keep their Kafka offsets (one partition, continuing across polls: the caller keeps the
next offset); each folder's file is named after the offset of its first record, so a file's
records are not contiguous when the field's values interleave, as with the real sink. Column
types are the Connect schema's, as Confluent's AvroData and parquet-avro write them: INT32 for
`int`, INT64 for `bigint`, UTF8 strings, DECIMAL for `numeric(p,s)`, DATE, and Connect
Timestamps as INT64 TIMESTAMP(MILLIS) in UTC. A file is written under a hidden temporary name,
then renamed, as sink.py does. Needs pyarrow (requirements-dev.txt): only this writer uses it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdc_lakehouse.capture.sink import PARTITION, temp_name
from cdc_lakehouse.capture.transforms import Transform, apply_transforms

SUFFIX = ".gz.parquet"

# PostgreSQL type oids and the Connect type the JDBC source connector gives them.
_PG_TYPES = {
    16: "bool",
    20: "int64",
    21: "int16",
    23: "int32",
    25: "string",
    700: "float32",
    701: "float64",
    1043: "string",
    1082: "date",
    1114: "timestamp",
    1184: "timestamp",
    1700: "decimal",
}


def arrow_type(pg_oid: int, precision: int | None, scale: int | None, column: str):
    """The Parquet (arrow) type of a PostgreSQL column as the connector's Connect schema maps
    it; a type this writer does not map is an error naming the column."""
    import pyarrow as pa

    kind = _PG_TYPES.get(pg_oid)
    if kind == "decimal":
        if precision is None:
            raise ValueError(f"column {column}: numeric without a precision is not mapped")
        return pa.decimal128(precision, scale or 0)
    simple = {
        "bool": pa.bool_(),
        "int16": pa.int32(),  # Connect INT16 is an Avro int
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "string": pa.string(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("ms", tz="UTC"),
    }
    if kind not in simple:
        raise ValueError(f"column {column}: PostgreSQL type oid {pg_oid} is not mapped")
    return simple[kind]


def connect_value(value: Any) -> Any:
    """A value as the connector hands it on: timestamps as UTC instants to the millisecond."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(microsecond=value.microsecond // 1000 * 1000)
    return value


def write_parquet_records(
    out: Path,
    topic: str,
    description: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    *,
    partition_field: str,
    start_offset: int,
    transforms: Sequence[Transform] = (),
    flush_size: int = 500,
) -> list[Path]:
    """Land `rows` (a cursor's rows, `description` its psycopg description) from offset
    `start_offset` on; returns the files written, in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [d.name for d in description]
    types = {d.name: arrow_type(d.type_code, d.precision, d.scale, d.name) for d in description}
    # The transforms rename and add fields: run them over the types too (a static field the
    # transforms add is a string, as Connect's InsertField makes it).
    typed = apply_transforms(transforms, dict(types), topic)
    schema = pa.schema(
        [(name, t if isinstance(t, pa.DataType) else pa.string()) for name, t in typed.items()]
    )
    if partition_field not in schema.names:
        raise ValueError(f"partition field {partition_field!r} is not a field of {topic}")
    by_folder: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for offset, row in enumerate(rows, start=start_offset):
        record = apply_transforms(
            transforms,
            {c: connect_value(v) for c, v in zip(names, row, strict=True)},
            topic,
        )
        folder = f"{partition_field}={record[partition_field]}"
        by_folder.setdefault(folder, []).append((offset, record))
    written = []
    for folder, records in sorted(by_folder.items(), key=lambda item: item[1][0][0]):
        for chunk_start in range(0, len(records), flush_size):
            chunk = records[chunk_start : chunk_start + flush_size]
            path = (
                out / "topics" / topic / folder / f"{topic}+{PARTITION}+{chunk[0][0]:010d}{SUFFIX}"
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(temp_name(path.name))
            table = pa.Table.from_pylist([r for _, r in chunk], schema=schema)
            pq.write_table(table, tmp, compression="gzip")
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            tmp.replace(path)
            written.append(path)
    return written
