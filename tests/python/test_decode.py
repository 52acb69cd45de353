"""The bronze decoder on real Debezium output: landing files -> raw lines -> typed change rows.

The fixtures are the captured samples in `tests/fixtures/debezium-samples` (see its README),
laid out the way a Kafka Connect storage sink writes them, plus small hand-built lines for the
cases the samples do not cover (rejects, wide decimals, JDBC rows, schema changes).
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from connect_events import (
    compact,
    connect_field,
    decimal_base64,
    envelope,
    unscaled_base64,
    wrapped,
)
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, NullType, StructType

from cdc_lakehouse.bronze.decode import (
    DeclaredTypeConflict,
    backfills,
    connect_encoding,
    declared_encoding,
    decode_changes,
    survey_aggregates,
    survey_lines,
    survey_values,
)
from cdc_lakehouse.bronze.landing import (
    list_landing_files,
    read_landing_lines,
    read_surveyed_lines,
)
from cdc_lakehouse.bronze.spec import BINARY_MODES, DECLARED_TYPES, SHAPES, TableSpec, spark_type
from cdc_lakehouse.tables.discover import declared_from_postgres

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium-samples"
TOPIC = "dbz.public.t_types"
PLACEHOLDER = "__debezium_unavailable_value"
T_TYPES = {
    "id": "int",
    "amount": "decimal(12,2)",
    "d": "date",
    "ts": "timestamp",
    "tstz": "timestamptz",
    "flag": "boolean",
    "note": "text",
    "doc": "jsonb",
    "uid": "uuid",
    "bin": "bytea",
    "tags": "text[]",
    "big": "text",
}
METADATA = [
    "_cdc_op",
    "_cdc_seq",
    "_cdc_source_ts",
    "_cdc_tx_id",
    "_cdc_unavailable_columns",
    "_cdc_file",
    "_cdc_line",
    "_cdc_offset",
    "_cdc_loaded_at",
    "_cdc_reject_reason",
    "_cdc_raw",
    "_cdc_undeclared",
]
LOADED_AT = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

# Connector settings of each captured variant (README table; strprec has millisecond
# timestamps, i.e. time.precision.mode=connect).
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "nosch": {},
    "noisy": {},
    "strprec": {"decimal_handling_mode": "string", "time_precision_mode": "connect"},
    "dbliso": {"decimal_handling_mode": "double", "time_precision_mode": "isostring"},
    "unwrap_rw": {"shape": "flattened"},
    "unwrap_rwt": {
        "shape": "flattened",
        "decimal_handling_mode": "string",
        "time_precision_mode": "isostring",
    },
}
# (op, id, note, unavailable columns) per t_types event, in commit order.
SCENARIO = [
    ("r", 1, "snap", None),
    ("c", 2, "ins", None),
    ("u", 2, "upd-default", "big"),
    ("u", 2, "upd-full", None),
    ("d", 2, None, None),  # primary-key change: delete of the old key...
    ("c", 3, "upd-full", "big"),  # ...and insert of the new one, same LSN
    ("d", 3, None, None),
    ("t", None, None, None),
]


# ---------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture(scope="module")
def samples() -> Path:
    if not (SAMPLES / "default.jsonl").is_file():
        pytest.fail(f"Debezium samples not found at {SAMPLES}")
    return SAMPLES


def write_landing(
    root: Path,
    topic: str,
    values: Sequence[str | None],
    *,
    files: int = 2,
    start: int = 0,
    partition: int = 0,
    ext: str = ".json",
) -> list[tuple[str, int, int]]:
    """Write values as a storage sink would, `files` files per topic partition; a None value is
    written as a `null` line (a tombstone). Returns (relative file, line, offset) per value."""
    folder = f"topics/{topic}/partition={partition}"
    (root / folder).mkdir(parents=True, exist_ok=True)
    per_file = -(-len(values) // files)
    where = []
    for first in range(0, len(values), per_file):
        offset = start + first
        relative = f"{folder}/{topic}+{partition}+{offset:010d}{ext}"
        chunk = values[first : first + per_file]
        lines = "".join(("null" if v is None else v) + "\n" for v in chunk)
        if ext.endswith(".gz"):
            (root / relative).write_bytes(gzip.compress(lines.encode()))
        else:
            (root / relative).write_text(lines)
        where += [(relative, i + 1, offset + i) for i in range(len(chunk))]
    return where


def sample_records(samples: Path, variant: str) -> list[dict]:
    return [json.loads(line) for line in (samples / f"{variant}.jsonl").read_text().splitlines()]


def payload(value: str) -> dict:
    parsed = json.loads(value)
    return parsed["payload"] if "schema" in parsed and "payload" in parsed else parsed


def decode(spark: SparkSession, root: Path, spec: TableSpec, **kwargs: Any) -> DataFrame:
    files = list_landing_files(spark, str(root), spec.topic)
    return decode_changes(read_landing_lines(spark, files), spec, loaded_at=LOADED_AT, **kwargs)


def collect(df: DataFrame, *extra: str) -> list[Row]:
    """Rows in landing order, with epoch microseconds of the instant-typed columns so that
    comparisons do not depend on the Python process's time zone."""
    micros = [F.unix_micros(c).alias(f"{c}_us") for c in ("_cdc_source_ts", "_cdc_loaded_at")]
    micros += [F.unix_micros(c).alias(f"{c}_us") for c in extra]
    return df.select("*", *micros).orderBy("_cdc_file", "_cdc_line").collect()


def micros(iso: str) -> int:
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


@contextmanager
def spark_conf(spark: SparkSession, **settings: str) -> Iterator[None]:
    previous = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# ---------------------------------------------------------------------------------------------
# The captured samples, every variant


def land_sample(samples: Path, variant: str, root: Path) -> list[tuple[dict, tuple]]:
    """Each topic of the sample in two landing files; (record, position) for t_types."""
    by_topic: dict[str, list[dict]] = {}
    landed = []
    for record in sample_records(samples, variant):
        by_topic.setdefault(record["topic"], []).append(record)
    for topic, records in by_topic.items():
        where = write_landing(root, topic, [r["value"] for r in records])
        if topic == TOPIC:
            landed = [(r, w) for r, w in zip(records, where, strict=True) if r["value"]]
    return landed


def expected_scenario(variant: str) -> list[tuple]:
    if variant == "noisy" or variant.startswith("unwrap"):
        return SCENARIO[:-1]  # truncate skipped by the connector, or dropped by the SMT
    return SCENARIO


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_sample_variant_decodes_exactly(
    spark: SparkSession, samples: Path, tmp_path: Path, variant: str
) -> None:
    landed = land_sample(samples, variant, tmp_path)
    spec = TableSpec(topic=TOPIC, key=("id",), columns=T_TYPES, **VARIANTS[variant])
    df = decode(spark, tmp_path, spec)
    rows = collect(df, "tstz")

    assert df.columns == list(T_TYPES) + METADATA
    types = dict(df.dtypes)
    assert [types[c] for c in ("amount", "d", "ts", "tstz", "bin", "tags")] == [
        "decimal(12,2)",
        "date",
        "timestamp_ntz",
        "timestamp",
        "binary",
        "array<string>",
    ]
    assert types["_cdc_seq"] == "decimal(38,0)"

    # One row per t_types event (tombstones skipped), in order, nothing rejected.
    scenario = expected_scenario(variant)
    assert [(r._cdc_op, r.id, r.note, r._cdc_unavailable_columns) for r in rows] == scenario
    assert [r._cdc_reject_reason for r in rows] == [None] * len(rows)
    assert [r._cdc_raw for r in rows] == [None] * len(rows)

    # Traceability: file, exact line (tombstone lines count) and Kafka offset.
    assert [(r._cdc_file, r._cdc_line, r._cdc_offset) for r in rows] == [w for _, w in landed]
    assert len({r._cdc_file for r in rows}) == 2

    # Ordering metadata comes from the source, to the digit.
    flat = variant.startswith("unwrap")
    for row, (record, _) in zip(rows, landed, strict=True):
        value = payload(record["value"])
        lsn = value["__lsn"] if flat else value["source"]["lsn"]
        commit_ms = value["__source_ts_ms"] if flat else value["source"]["ts_ms"]
        assert row._cdc_seq == Decimal(lsn)
        assert row._cdc_source_ts_us == commit_ms * 1000
        assert row._cdc_tx_id == (None if flat else value["source"]["txId"])
        assert row._cdc_loaded_at_us == micros("2030-01-02T03:04:05.678901Z")
    old_key, new_key = rows[4], rows[5]
    assert (old_key._cdc_op, new_key._cdc_op) == ("d", "c")
    assert old_key._cdc_seq == new_key._cdc_seq
    assert old_key._cdc_tx_id == new_key._cdc_tx_id
    assert [r._cdc_seq for r in rows] == sorted(r._cdc_seq for r in rows)

    snap, ins, upd_default, upd_full, delete = rows[:5]
    millis_only = VARIANTS[variant].get("time_precision_mode") == "connect"
    assert snap.amount == Decimal("12345.67")
    assert snap.d == date(2024, 2, 29)
    assert snap.ts == datetime(2024, 2, 29, 13, 14, 15, 123000 if millis_only else 123456)
    assert snap.tstz_us == micros("2024-02-29T11:14:15.123456Z")
    assert snap.flag is True
    assert snap.doc == '{"a": 1, "b": [1, 2]}'
    assert snap.uid == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert bytes(snap.bin) == b"\xde\xad\xbe\xef"
    assert snap.tags == ["x", "y"]
    assert len(snap.big) == 3200

    assert ins.amount == Decimal("-0.50")
    assert (ins.d, ins.ts, ins.tstz_us) == (date(1970, 1, 1), datetime(2000, 1, 1), 946684800000000)
    assert (ins.flag, ins.doc, bytes(ins.bin), ins.tags) == (False, "[]", b"\x00", [])

    # Unchanged TOAST value: reported, and NULL rather than the placeholder.
    assert upd_default.big is None
    assert upd_default.amount == Decimal("-0.50")
    assert upd_full.big == snap.big
    assert all(PLACEHOLDER not in (r.big or "") for r in rows)

    # REPLICA IDENTITY DEFAULT: deletes carry the key only.
    assert delete.id == 2
    assert [delete[c] for c in ("amount", "d", "ts", "note", "big")] == [None] * 5
    assert rows[6].id == 3
    if scenario[-1][0] == "t":
        assert rows[-1].id is None and rows[-1].amount is None


def test_columns_come_from_the_embedded_schema_when_not_declared(
    spark: SparkSession, samples: Path, tmp_path: Path
) -> None:
    land_sample(samples, "default", tmp_path)
    df = decode(spark, tmp_path, TableSpec(topic=TOPIC, key=("id",)))
    assert df.dtypes[:12] == [
        ("id", "int"),
        ("amount", "decimal(12,2)"),
        ("d", "date"),
        ("ts", "timestamp_ntz"),
        ("tstz", "timestamp"),
        ("flag", "boolean"),
        ("note", "string"),
        ("doc", "string"),
        ("uid", "string"),
        ("bin", "binary"),
        ("tags", "array<string>"),
        ("big", "string"),
    ]
    rows = collect(df, "tstz")
    assert [r._cdc_op for r in rows] == [op for op, *_ in SCENARIO]
    assert (rows[0].amount, rows[0].ts) == (
        Decimal("12345.67"),
        datetime(2024, 2, 29, 13, 14, 15, 123456),
    )
    assert rows[2]._cdc_unavailable_columns == "big"


def test_results_do_not_depend_on_the_session_time_zone(
    spark: SparkSession, samples: Path, tmp_path: Path
) -> None:
    land_sample(samples, "nosch", tmp_path)
    spec = TableSpec(topic=TOPIC, key=("id",), columns=T_TYPES)
    columns = ["id", "d", "ts", "tstz_us", "_cdc_source_ts_us"]
    in_utc = [[r[c] for c in columns] for r in collect(decode(spark, tmp_path, spec), "tstz")]
    with spark_conf(spark, **{"spark.sql.session.timeZone": "America/Los_Angeles"}):
        rows = collect(decode(spark, tmp_path, spec), "tstz")
        elsewhere = [[r[c] for c in columns] for r in rows]
    assert elsewhere == in_utc


# ---------------------------------------------------------------------------------------------
# Landing files


def test_list_landing_files_finds_nested_data_files_and_reports_unknown_names(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = "shop.public.orders"
    base = tmp_path / "land" / "topics" / topic
    data = {
        f"year=2024/month=02/day=29/{topic}+0+0000000000.json": "a",
        f"partition=1/a b+c%d/{topic}+1+0000000005.jsonl": "b",
        f"partition=0/{topic}+0+0000000010.json.gz": "c",
        f"partition=0/{topic}+0+0000000020.jsonl.gz": "d",
    }
    ignored = [
        f"partition=0/.{topic}+0+0000000030.json",  # hidden
        f"partition=0/_{topic}+0+0000000040.json",  # underscore
        f"partition=0/{topic}+0+0000000050.json.tmp",  # being written
        "partition=0/upload.tmp",
        f"_temporary/0/{topic}+0+0000000060.json",
        f".staging/{topic}+0+0000000070.json",
    ]
    unknown = "partition=0/notes.txt"  # not a name the sink writes: reported, not read
    for name in [*data, *ignored, unknown]:
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f'{{"v":"{data.get(name, "x")}"}}\n'
        path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    # a topic whose name extends ours must not leak in
    other = tmp_path / "land" / "topics" / f"{topic}_archive" / "x+0+0000000000.json"
    other.parent.mkdir(parents=True)
    other.write_text('{"v":"other"}\n')

    monkeypatch.chdir(tmp_path)
    files = list_landing_files(spark, "land", topic)  # relative root: resolved against cwd

    assert [f.relative for f in files] == sorted(f"topics/{topic}/{n}" for n in [*data, unknown])
    for f in files:
        assert f.path == f"file:{tmp_path / 'land' / f.relative}"
    [reported] = [f for f in files if f.problem]
    assert reported.relative == f"topics/{topic}/{unknown}"
    assert reported.problem.startswith("file name does not follow the confluent layout")
    assert list_landing_files(spark, "land", "no.such.topic") == []
    assert list_landing_files(spark, str(tmp_path / "nowhere"), topic) == []

    rows = read_landing_lines(spark, files).orderBy("_cdc_file").collect()
    assert [
        (r._cdc_file, r._cdc_line, r.value and json.loads(r.value)["v"]) for r in rows
    ] == sorted(
        [(f"topics/{topic}/{n}", 1, v) for n, v in data.items()] + [(reported.relative, 0, None)]
    )
    assert {r._cdc_file for r in rows if r._cdc_file_problem} == {reported.relative}
    by_file = {r._cdc_file.rsplit("/", 1)[-1]: r for r in rows}
    assert (
        by_file[f"{topic}+1+0000000005.jsonl"]._cdc_partition,
        by_file[f"{topic}+1+0000000005.jsonl"]._cdc_offset,
    ) == (1, 5)


def test_line_numbers_and_offsets_are_exact_across_files_and_blocks(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic = "t.lines"
    pad = "x" * 90
    values = [compact({"n": i, "pad": pad}) for i in range(600)]
    # Some lines with an embedded schema (two distinct ones), farther apart than a block holds
    # lines (~37 below), so no block has both: the survey found per block in the numbering pass
    # must merge to what one survey of all lines finds.
    schemas = [
        {"type": "struct", "fields": [{"field": "n", "type": "int32"}], "optional": flag}
        for flag in (False, True)
    ]
    for i in range(0, 600, 101):
        values[i] = compact({"schema": schemas[(i // 101) % 2], "payload": {"n": i, "extra": pad}})
    write_landing(tmp_path, topic, values[:400], files=2, start=1000)  # two plain files
    write_landing(
        tmp_path, topic, values[400:500], files=1, start=5000, partition=3, ext=".json.gz"
    )
    write_landing(tmp_path, topic, values[500:], files=1, start=7000, partition=1)
    files = list_landing_files(spark, str(tmp_path), topic)
    assert len(files) == 4

    # Small splits: each plain file spans several blocks, read by different tasks.
    with spark_conf(
        spark,
        **{"spark.sql.files.maxPartitionBytes": "4096", "spark.sql.files.openCostInBytes": "0"},
    ):
        partitions = spark.read.text([f.path for f in files]).rdd.getNumPartitions()
        rows = read_landing_lines(spark, files).collect()
        surveyed, found = read_surveyed_lines(
            spark, files, survey_aggregates(F.col("value"), "flattened")
        )
        surveyed_rows = surveyed.collect()
        # The same survey as a pass of its own over the lines (what decode_changes does).
        alone = survey_lines(read_landing_lines(spark, files), "flattened")
    assert partitions >= 10

    assert survey_values(found) == alone
    assert alone == (sorted('{"schema":' + compact(s) for s in schemas), ["n", "pad"])
    assert sorted(surveyed_rows) == sorted(rows)
    assert len(rows) == 600
    for row in rows:
        n = payload(row.value)["n"]
        if n >= 500:
            assert (row._cdc_line, row._cdc_offset, row._cdc_partition) == (n - 499, 6500 + n, 1)
        elif n < 200:
            assert (row._cdc_line, row._cdc_offset, row._cdc_partition) == (n + 1, 1000 + n, 0)
        elif n < 400:
            assert (row._cdc_line, row._cdc_offset) == (n - 199, 1000 + n)
        else:
            assert (row._cdc_line, row._cdc_offset, row._cdc_partition) == (n - 399, 4600 + n, 3)


def test_empty_inputs_keep_the_schema(spark: SparkSession) -> None:
    lines = read_landing_lines(spark, [])
    assert lines.dtypes == [
        ("_cdc_file", "string"),
        ("_cdc_line", "int"),
        ("_cdc_offset", "bigint"),
        ("_cdc_partition", "int"),
        ("value", "string"),
        ("_cdc_file_problem", "string"),
    ]
    assert lines.count() == 0
    decoded = decode_changes(lines, TableSpec(topic=TOPIC, key=("id",), columns=T_TYPES))
    assert decoded.columns == list(T_TYPES) + METADATA
    assert decoded.count() == 0


def untyped_columns(data_type: DataType, path: str = "") -> list[str]:
    """Where a schema holds Spark's void type (a bare NULL), which no table format can store."""
    if isinstance(data_type, NullType):
        return [path]
    if isinstance(data_type, StructType):
        inside = [(f.dataType, f"{path}.{f.name}" if path else f.name) for f in data_type.fields]
        return [p for field_type, name in inside for p in untyped_columns(field_type, name)]
    if isinstance(data_type, ArrayType):
        return untyped_columns(data_type.elementType, f"{path}[]")
    if isinstance(data_type, MapType):
        return untyped_columns(data_type.keyType, f"{path}{{k}}") + untyped_columns(
            data_type.valueType, f"{path}{{v}}"
        )
    return []


# Kafka Connect fields of an embedded schema, fixed-width and not, as Debezium writes them.
CONNECT_FIELDS = [
    connect_field("small", "int16"),
    connect_field("big", "int64"),
    connect_field("real", "float"),
    connect_field("dbl", "double"),
    connect_field("flag", "boolean"),
    connect_field("d", "int32", "io.debezium.time.Date"),
    connect_field("t", "int64", "io.debezium.time.MicroTime"),
    connect_field("ts", "int64", "io.debezium.time.MicroTimestamp"),
    connect_field("tstz", "string", "io.debezium.time.ZonedTimestamp"),
    connect_field("note", "string"),
    connect_field("bin", "bytes"),
    connect_field("amount", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2"),
    {"type": "array", "items": {"type": "int32"}, "optional": True, "field": "ints"},
]


def decoded_schema(spark: SparkSession, spec: TableSpec, fields: list[dict]) -> StructType:
    """The decoded frame's schema (what bronze creates its table with) for a table declared by
    `spec`, its lines carrying the embedded schema of `fields` (none: schemas off)."""
    schema_texts = []
    if fields:
        value = wrapped({}, fields)
        if spec.shape != "envelope":
            value = compact({"schema": {"type": "struct", "fields": fields}, "payload": {}})
        schema_texts = [value.split(',"payload":')[0]]  # as survey_lines finds it
    lines = read_landing_lines(spark, [])
    decoded = decode_changes(lines, spec, schema_texts=schema_texts, bare_fields=[])
    assert decoded.columns[-len(METADATA) :] == METADATA
    return decoded.schema


DECLARABLE = [*DECLARED_TYPES, "decimal(10,2)", "numeric", "text[]", "int[]"]


@pytest.mark.parametrize("shape", SHAPES)
def test_no_output_column_is_untyped_in_any_shape(spark: SparkSession, shape: str) -> None:
    """A key-only table (nothing TOASTable, like a link table of integer keys) and one of every
    type, schemas off (declared columns) and on (Connect fields): no column may be void."""
    jdbc = shape == "jdbc"
    ordering = {"order_by": ("updated_at",)} if jdbc else {}
    declared = {"id": "int", **({"updated_at": "timestamp"} if jdbc else {})}
    key_fields = [connect_field("id", "int32")]
    if jdbc:
        key_fields.append(
            connect_field("updated_at", "int64", "org.apache.kafka.connect.data.Timestamp")
        )
    cases = {
        "key only, declared": ({**declared}, []),
        "every type, declared": ({**declared, **{f"c_{t}": t for t in DECLARABLE}}, []),
        "key only, embedded": ({}, key_fields),
        "every type, embedded": ({}, key_fields + CONNECT_FIELDS),
    }
    untyped = {}
    for case, (columns, fields) in cases.items():
        spec = TableSpec(topic="t.types", shape=shape, key=("id",), columns=columns, **ordering)
        if found := untyped_columns(decoded_schema(spark, spec, fields)):
            untyped[case] = found
    assert untyped == {}


def test_no_output_column_is_untyped_whatever_the_one_column_type(spark: SparkSession) -> None:
    """Each declarable type, and each Connect field, alone beside an integer key: whether the
    table has a column that can hold the TOAST placeholder or not, every column is typed. (One
    type of each kind the decoder tells apart: aliases like varchar/text decode alike.)"""
    spec = TableSpec(topic="t.types", key=("id",))
    kinds = {(spark_type(t), declared_encoding(t, spec)): t for t in DECLARABLE}
    untyped = {}
    for declared in kinds.values():
        spec = TableSpec(topic="t.types", key=("id",), columns={"id": "int", "c": declared})
        if found := untyped_columns(decoded_schema(spark, spec, [])):
            untyped[declared] = found
    for field in CONNECT_FIELDS:
        spec = TableSpec(topic="t.types", key=("id",))
        schema = decoded_schema(spark, spec, [connect_field("id", "int32"), field])
        if found := untyped_columns(schema):
            untyped[f"{field['field']} {field.get('name', field['type'])}"] = found
    assert untyped == {}


def test_a_link_table_of_fixed_width_columns_is_stored(spark: SparkSession, tmp_path: Path) -> None:
    """A many-to-many link table (Pagila's film_actor): two integer keys and a timestamptz,
    none of which PostgreSQL TOASTs. Its change rows are written to a table and read back."""
    fields = [
        connect_field("actor_id", "int32"),
        connect_field("film_id", "int32"),
        connect_field("last_update", "string", "io.debezium.time.ZonedTimestamp"),
    ]
    row = {"actor_id": 1, "film_id": 23, "last_update": "2024-02-29T13:14:15.123456Z"}
    lines = [
        wrapped(envelope("c", row, lsn=1), fields),
        wrapped(envelope("d", None, lsn=2, before=row), fields),
    ]
    write_landing(tmp_path, "pagila.public.film_actor", lines, files=1)
    spec = TableSpec(
        topic="pagila.public.film_actor",
        key=("actor_id", "film_id"),
        columns={"actor_id": "integer", "film_id": "integer", "last_update": "timestamptz"},
    )
    decode(spark, tmp_path, spec).write.saveAsTable("film_actor_changes")
    try:
        stored = spark.table("film_actor_changes")
        assert dict(stored.dtypes)["_cdc_unavailable_columns"] == "string"
        rows = collect(stored, "last_update")
        assert [(r._cdc_op, r.actor_id, r.film_id, r.last_update_us) for r in rows] == [
            ("c", 1, 23, micros("2024-02-29T13:14:15.123456Z")),
            ("d", 1, 23, micros("2024-02-29T13:14:15.123456Z")),
        ]
        assert [(r._cdc_unavailable_columns, r._cdc_reject_reason) for r in rows] == [
            (None, None)
        ] * 2
    finally:
        spark.sql("drop table if exists film_actor_changes")


# ---------------------------------------------------------------------------------------------
# Rejects


def test_rejects_keep_reason_file_line_and_raw_while_good_rows_flow(
    spark: SparkSession, samples: Path, tmp_path: Path
) -> None:
    values = [r["value"] for r in sample_records(samples, "nosch") if r["topic"] == TOPIC]
    insert, update = json.loads(values[1]), json.loads(values[3])
    unknown_op = {**insert, "op": "x"}
    no_key = {**insert, "after": {**insert["after"], "id": None}}
    bad_amount = {**insert, "after": {**insert["after"], "amount": "***"}}
    bad_date = {**insert, "after": {**insert["after"], "d": "soon"}}
    lines = [
        compact(insert),
        '{"before": null, "after": {"id": 5,',
        "",
        compact(unknown_op),
        "   ",
        compact(no_key),
        "null",
        compact(bad_amount),
        '{"schema":{"type":"struct","optional":false},"payload":null}',
        compact(bad_date),
        compact(update),
    ]
    topic = TOPIC
    where = write_landing(tmp_path, topic, lines, files=1)
    rows = collect(decode(spark, tmp_path, TableSpec(topic=topic, key=("id",), columns=T_TYPES)))

    expected = {
        1: None,
        2: "invalid JSON",
        4: "unknown op 'x'",
        6: "missing key column id",
        8: "cannot decode amount as decimal(12,2)",
        10: "cannot decode d as date",
        11: None,
    }
    assert {r._cdc_line: r._cdc_reject_reason for r in rows} == expected
    relative = where[0][0]
    for row in rows:
        assert row._cdc_file == relative
        assert row._cdc_raw == (lines[row._cdc_line - 1] if row._cdc_reject_reason else None)
    good = {r._cdc_line: r for r in rows if r._cdc_reject_reason is None}
    assert (good[1]._cdc_op, good[1].id, good[1].amount) == ("c", 2, Decimal("-0.50"))
    assert (good[11]._cdc_op, good[11].note) == ("u", "upd-full")


# ---------------------------------------------------------------------------------------------
# Decimals, TOAST forms, JDBC rows, schema changes


BIG_NEGATIVE = Decimal("-1234567890123456789012345678.9012345678")  # 38 digits, 16 bytes


def test_wide_and_variable_scale_decimals_are_exact(spark: SparkSession, tmp_path: Path) -> None:
    fields = [
        connect_field("id", "int32"),
        connect_field(
            "small",
            "bytes",
            "org.apache.kafka.connect.data.Decimal",
            scale="2",
            **{"connect.decimal.precision": "12"},
        ),
        connect_field(
            "wide",
            "bytes",
            "org.apache.kafka.connect.data.Decimal",
            scale="10",
            **{"connect.decimal.precision": "38"},
        ),
        {
            "type": "struct",
            "fields": [
                {"type": "int32", "optional": False, "field": "scale"},
                {"type": "bytes", "optional": False, "field": "value"},
            ],
            "optional": True,
            "name": "io.debezium.data.VariableScaleDecimal",
            "field": "free",
        },
    ]
    cases = [
        (Decimal("-0.01"), BIG_NEGATIVE, Decimal("-1234.567")),
        (Decimal("12345.67"), Decimal("9999999999999999999999999999.9999999999"), Decimal("0")),
        (Decimal("-9999999999.99"), Decimal("-0.0000000001"), Decimal("3.14159265358979")),
    ]

    def row(i: int, small: Decimal, wide: Decimal, free: Decimal) -> dict:
        scale = -int(free.as_tuple().exponent)
        return {
            "id": i,
            "small": decimal_base64(small, 2),
            "wide": decimal_base64(wide, 10),
            "free": {"scale": scale, "value": decimal_base64(free, scale)},
        }

    with_schema = [
        wrapped(envelope("c", row(i, *case), lsn=i), fields) for i, case in enumerate(cases)
    ]
    without = [compact(envelope("c", row(10 + i, *c), lsn=10 + i)) for i, c in enumerate(cases)]
    write_landing(tmp_path, "t.dec", with_schema + without, files=1)
    declared = {"id": "int", "small": "decimal(12,2)", "wide": "decimal(38,10)", "free": "numeric"}

    # Schemas on: types from the embedded schema; schemas off: from the declared types.
    for columns in ({}, declared):
        spec = TableSpec(topic="t.dec", key=("id",), columns=columns)
        df = decode(spark, tmp_path, spec)
        assert df.dtypes[1:4] == [
            ("small", "decimal(12,2)"),
            ("wide", "decimal(38,10)"),
            ("free", "decimal(38,18)"),
        ]
        rows = collect(df)
        # bare lines use the declared types, else the encoding the embedded schemas agree on
        assert [(r.small, r.wide, r.free) for r in rows] == cases + cases
        assert [r._cdc_reject_reason for r in rows] == [None] * len(rows)


def beyond_spark_decimals(precision: int, scale: int, seed: int) -> list[str]:
    """Values of a numeric(precision,scale) as PostgreSQL prints them: the edges (zero, one
    unit, the largest, negative powers of ten, whose complemented digits end in nines) and
    seeded random ones of every length."""
    rng = random.Random(seed)
    unit = 10**scale
    unscaled = [0, 1, -1, 10**precision - 1, -(10**precision - 1), -unit, -(10 ** (precision - 1))]
    unscaled += [
        rng.choice((1, -1)) * rng.randrange(10 ** rng.randint(1, precision)) for _ in range(40)
    ]
    exact = Context(prec=precision + 2)
    return [f"{Decimal(u).scaleb(-scale, exact):f}" for u in unscaled]


@pytest.mark.parametrize(("precision", "scale"), [(78, 0), (50, 10), (39, 38)])
def test_numerics_wider_than_spark_keep_their_exact_digits(
    spark: SparkSession, tmp_path: Path, precision: int, scale: int
) -> None:
    """A numeric(p,s) with p > 38 (Spark's decimals stop there): precise mode's Connect
    Decimal bytes decode to PostgreSQL's own text, schemas on and off; string mode keeps it."""
    values = beyond_spark_decimals(precision, scale, seed=precision)
    field = connect_field(
        "v", "bytes", DECIMAL, scale=str(scale), **{"connect.decimal.precision": str(precision)}
    )
    assert connect_encoding(field)[1] == "string"
    rows = [{"id": i, "v": decimal_base64(Decimal(v), scale)} for i, v in enumerate(values)]
    lines = [
        wrapped(envelope("c", r, lsn=i), [connect_field("id", "int32"), field])
        for i, r in enumerate(rows)
    ]
    lines += [
        compact(envelope("c", {**r, "id": 1000 + r["id"]}, lsn=1000 + i))
        for i, r in enumerate(rows)
    ]
    write_landing(tmp_path / "precise", "t.wide", lines, files=1)
    write_landing(
        tmp_path / "string",
        "t.wide",
        [compact(envelope("c", {"id": i, "v": v}, lsn=i)) for i, v in enumerate(values)],
        files=1,
    )
    declared = {"id": "int", "v": f"numeric({precision},{scale})"}
    assert spark_type(declared["v"]) == "string"
    for folder, mode in (("precise", "precise"), ("string", "string")):
        spec = TableSpec(topic="t.wide", key=("id",), columns=declared, decimal_handling_mode=mode)
        decoded = collect(decode(spark, tmp_path / folder, spec))
        assert [r._cdc_reject_reason for r in decoded] == [None] * len(decoded)
        got = {r.id % 1000: r.v for r in decoded}
        assert [got[i] for i in range(len(values))] == values, mode
    # a column declared as a Spark decimal whose events come this wide: no decimal holds them
    narrow = TableSpec(topic="t.wide", key=("id",), columns={"id": "int", "v": "decimal(38,0)"})
    declare = f"Declare `numeric\\({precision},{scale}\\)`"
    with pytest.raises(DeclaredTypeConflict, match=f"column v is declared decimal.*{declare}"):
        decode(spark, tmp_path / "precise", narrow)


def test_a_numeric_nan_or_infinity_in_string_or_double_mode_is_null_not_a_reject(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`decimal.handling.mode` string and double write a numeric NaN or infinity as text
    (precise mode sends NULL; docs/types.md advises string mode for a NOT NULL column that may
    hold NaN): a declared decimal holds neither, so it is NULL, as in precise mode, and the
    line is not rejected (the type-map oracle found every such change rejected, its key left
    behind, and the build stopped by `cdc_no_undecodable_changes`). A value that is not a
    number is still rejected."""
    values = ["12.34", "NAN", "Infinity", "-Infinity", "oops"]  # string mode: `NAN`
    write_landing(
        tmp_path,
        "t.nan",
        [compact(envelope("c", {"id": i, "v": v}, lsn=i)) for i, v in enumerate(values)],
        files=1,
    )
    for mode in ("string", "double"):
        spec = TableSpec(
            topic="t.nan",
            key=("id",),
            columns={"id": "int", "v": "numeric(8,2)"},
            decimal_handling_mode=mode,
        )
        decoded = {r.id: r for r in collect(decode(spark, tmp_path, spec))}
        assert [decoded[i].v for i in range(4)] == [Decimal("12.34"), None, None, None], mode
        assert [decoded[i]._cdc_reject_reason for i in range(4)] == [None] * 4, mode
        assert decoded[4]._cdc_reject_reason == "cannot decode v as decimal(8,2)", mode


BINARY_WRITERS = {
    "bytes": lambda b: base64.b64encode(b).decode(),
    "base64": lambda b: base64.b64encode(b).decode(),
    "base64-url-safe": lambda b: base64.urlsafe_b64encode(b).decode(),
    "hex": lambda b: b.hex(),
}


@pytest.mark.parametrize("mode", BINARY_MODES)
def test_every_binary_handling_mode_decodes_bytes_and_placeholders(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    """A bytea and a bytea[] as each of Debezium's binary.handling.mode settings writes them
    (`bytes` is base64 in JSON, its schema type `bytes`; the others are text, schema `string`),
    schemas on and off: the same bytes, and the unchanged-TOAST placeholder as Debezium 3.6
    writes it (measured with the capture tool) is reported, not decoded: base64 of its bytes in
    `bytes` mode, the string itself in `hex` (DBZ-7599); the base64 modes send NULL, nothing to
    read (discover.toast_losses says so at onboarding). (In `hex`, base64 reading would have
    turned many values into other bytes without an error: hex digits are base64 letters.)"""
    rng = random.Random(7)
    values = [b"", b"\x00", b"\xff\xfe", bytes(range(256))]
    values += [rng.randbytes(rng.randint(1, 40)) for _ in range(20)]
    write = BINARY_WRITERS[mode]
    kind = "bytes" if mode == "bytes" else "string"
    fields = [
        connect_field("id", "int32"),
        connect_field("b", kind),
        {
            "type": "array",
            "items": {"type": kind, "optional": True},
            "optional": True,
            "field": "a",
        },
    ]
    events = [{"id": i, "b": write(v), "a": [write(v), None]} for i, v in enumerate(values)]
    placeholders = {  # the bytea[]: NULL in hex (debezium/dbz#2418)
        "bytes": {"b": write(PLACEHOLDER.encode()), "a": [write(PLACEHOLDER.encode())]},
        "hex": {"b": PLACEHOLDER, "a": None},
    }
    if mode in placeholders:
        events.append({"id": 99, **placeholders[mode]})
    lines = [wrapped(envelope("u", e, lsn=n), fields) for n, e in enumerate(events)]
    lines += [
        compact(envelope("u", {**e, "id": 1000 + e["id"]}, lsn=500 + n))
        for n, e in enumerate(events)
    ]
    write_landing(tmp_path, "t.bin", lines, files=1)
    spec = TableSpec(
        topic="t.bin",
        key=("id",),
        columns={"id": "int", "b": "bytea", "a": "bytea[]"},
        binary_handling_mode=mode,
    )
    rows = collect(decode(spark, tmp_path, spec))
    assert [r._cdc_reject_reason for r in rows] == [None] * len(rows)
    for row in rows:
        if row.id % 1000 == 99:
            unavailable = "b,a" if mode == "bytes" else "b"
            assert (row._cdc_unavailable_columns, row.b, row.a) == (unavailable, None, None), row
        else:
            value = values[row.id % 1000]
            assert (bytes(row.b), [None if e is None else bytes(e) for e in row.a]) == (
                value,
                [value, None],
            )


def test_every_placeholder_form_is_reported_and_nulled(spark: SparkSession, tmp_path: Path) -> None:
    as_base64 = base64.b64encode(PLACEHOLDER.encode()).decode()
    after = {
        "id": 7,
        "b": as_base64,
        "a": [PLACEHOLDER],
        "n": list(PLACEHOLDER.encode()),
        "m": as_base64,
        "j": PLACEHOLDER,
        "t": PLACEHOLDER,
        "ba": [as_base64],  # an unchanged TOASTed bytea[], as Debezium 3.6 sent it
        "keep": "kept",
    }
    custom = {"id": 8, "t": "<unchanged>", "j": PLACEHOLDER}
    write_landing(
        tmp_path,
        "t.toast",
        [compact(envelope("u", after, lsn=1)), compact(envelope("u", custom, lsn=2))],
        files=1,
    )
    columns = {
        "id": "int",
        "b": "bytea",
        "a": "text[]",
        "n": "int[]",
        "m": "decimal(10,2)",
        "j": "jsonb",
        "t": "text",
        "ba": "bytea[]",
        "keep": "text",
    }
    rows = collect(
        decode(spark, tmp_path, TableSpec(topic="t.toast", key=("id",), columns=columns))
    )
    assert rows[0]._cdc_unavailable_columns == "b,a,n,m,j,t,ba"
    assert [rows[0][c] for c in columns] == [7, None, None, None, None, None, None, None, "kept"]
    assert rows[0]._cdc_reject_reason is None

    spec = TableSpec(topic="t.toast", key=("id",), columns=columns, toast_placeholder="<unchanged>")
    custom_row = collect(decode(spark, tmp_path, spec))[1]
    assert (custom_row._cdc_unavailable_columns, custom_row.t, custom_row.j) == (
        "t",
        None,
        PLACEHOLDER,
    )


def test_jdbc_rows_are_upserts_ordered_by_timestamp_then_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    base_ms = 1709212455123
    rows_in = [
        {"id": 2, "name": "b", "updated_at": base_ms, "price": "12.50", "seen": base_ms + 2},
        {"id": 1, "name": "a2", "updated_at": base_ms + 877, "price": "1.00", "seen": base_ms + 3},
        {"id": 1, "name": "a", "updated_at": base_ms, "price": "0.99", "seen": base_ms + 1},
    ]
    schema = {
        "type": "struct",
        "optional": False,
        "name": "suppliers",
        "fields": [
            connect_field("id", "int32"),
            connect_field("name", "string"),
            connect_field("updated_at", "int64", "org.apache.kafka.connect.data.Timestamp"),
            connect_field("price", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2"),
        ],
    }
    late = {"id": 3, "name": "c", "updated_at": base_ms + 1000, "price": unscaled_base64(-5)}
    lines = [compact(r) for r in rows_in] + [compact({"schema": schema, "payload": late})]
    write_landing(tmp_path, "jdbc.suppliers", lines, files=1)
    spec = TableSpec(
        topic="jdbc.suppliers",
        shape="jdbc",
        key=("id",),
        # PostgreSQL's spellings, as a user copies them from psql `\d`
        columns={
            "id": "integer",
            "name": "character varying(40)",
            "updated_at": "timestamp without time zone",
            "price": "decimal(10,2)",
            "seen": "timestamp with time zone",
        },
        order_by=("updated_at", "id"),
        decimal_handling_mode="string",
        time_precision_mode="connect",
    )
    df = decode(spark, tmp_path, spec)
    rows = sorted(collect(df), key=lambda r: r._cdc_seq)

    assert [(r.id, r.name, r.price) for r in rows] == [
        (1, "a", Decimal("0.99")),
        (2, "b", Decimal("12.50")),
        (1, "a2", Decimal("1.00")),
        (3, "c", Decimal("-0.05")),
    ]
    assert {r._cdc_op for r in rows} == {"u"}
    assert rows[0]._cdc_seq == Decimal(base_ms * 1000 * 10**19 + 1)
    assert rows[1]._cdc_seq == Decimal(base_ms * 1000 * 10**19 + 2)
    assert [r._cdc_source_ts_us for r in rows] == [
        r["updated_at"] * 1000 for r in (rows_in[2], rows_in[0], rows_in[1], late)
    ]
    assert rows[0].updated_at == datetime(2024, 2, 29, 13, 14, 15, 123000)
    assert {r._cdc_tx_id for r in rows} == {None}
    assert all(r._cdc_reject_reason is None for r in rows)
    # timestamptz is a Connect Timestamp too (epoch milliseconds), not Debezium's ISO string
    seen = df.selectExpr("_cdc_seq", "unix_millis(seen) as ms").orderBy("_cdc_seq").collect()
    assert [r.ms for r in seen] == [base_ms + 1, base_ms + 2, base_ms + 3, None]


def test_a_column_added_at_the_source_flows_through(spark: SparkSession, tmp_path: Path) -> None:
    v1 = [connect_field("id", "int32"), connect_field("name", "string")]
    v2 = v1 + [
        connect_field("score", "bytes", "org.apache.kafka.connect.data.Decimal", scale="1"),
        connect_field("born", "int32", "io.debezium.time.Date"),
    ]
    score = unscaled_base64(153)
    lines = [
        wrapped(envelope("c", {"id": 1, "name": "a"}, lsn=1), v1),
        wrapped(envelope("u", {"id": 1, "name": "a1"}, lsn=2), v1),
        wrapped(envelope("c", {"id": 2, "name": "b", "score": score, "born": 19782}, lsn=3), v2),
        wrapped(envelope("u", {"id": 1, "name": "a2", "score": None, "born": 0}, lsn=4), v2),
    ]
    write_landing(tmp_path, "t.evolve", lines, files=2)
    spec = TableSpec(topic="t.evolve", key=("id",), columns={"id": "int", "name": "text"})
    df = decode(spark, tmp_path, spec)
    assert df.dtypes[:4] == [
        ("id", "int"),
        ("name", "string"),
        ("score", "decimal(38,1)"),
        ("born", "date"),
    ]
    rows = collect(df)
    assert [(r.id, r.name, r.score, r.born) for r in rows] == [
        (1, "a", None, None),
        (1, "a1", None, None),
        (2, "b", Decimal("15.3"), date(2024, 2, 29)),
        (1, "a2", None, date(1970, 1, 1)),
    ]
    assert all(r._cdc_reject_reason is None for r in rows)


def test_each_line_decodes_with_its_own_schema_or_the_declared_modes(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Schemas on and off in one batch, and disagreeing encodings: a CASE per schema."""
    micro = [
        connect_field("id", "int32"),
        connect_field("ts", "int64", "io.debezium.time.MicroTimestamp"),
        connect_field("amount", "string"),
    ]
    milli = [
        connect_field("id", "int32"),
        connect_field("ts", "int64", "io.debezium.time.Timestamp"),
        connect_field("amount", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2"),
    ]
    at_us = 1709212455123456
    lines = [
        wrapped(envelope("c", {"id": 1, "ts": at_us, "amount": "-7.25"}, lsn=1), micro),
        wrapped(
            envelope("c", {"id": 2, "ts": at_us // 1000, "amount": unscaled_base64(-725)}, lsn=2),
            milli,
        ),
        compact(
            envelope("c", {"id": 3, "ts": "2024-02-29T13:14:15.123456Z", "amount": "-7.25"}, lsn=3)
        ),
    ]
    write_landing(tmp_path, "t.mixed", lines, files=1)
    spec = TableSpec(
        topic="t.mixed",
        key=("id",),
        columns={"id": "int", "ts": "timestamp", "amount": "decimal(8,2)"},
        decimal_handling_mode="string",
        time_precision_mode="isostring",
    )
    rows = collect(decode(spark, tmp_path, spec))
    assert [(r.id, r.ts, r.amount, r._cdc_reject_reason) for r in rows] == [
        (1, datetime(2024, 2, 29, 13, 14, 15, 123456), Decimal("-7.25"), None),
        (2, datetime(2024, 2, 29, 13, 14, 15, 123000), Decimal("-7.25"), None),
        (3, datetime(2024, 2, 29, 13, 14, 15, 123456), Decimal("-7.25"), None),
    ]

    # Schemas handed in by the caller: a line whose schema is not among them is rejected.
    rows = collect(decode(spark, tmp_path, spec, schema_texts=[]))
    assert [(r.id, r._cdc_reject_reason) for r in rows] == [
        (1, "unknown embedded schema"),
        (2, "unknown embedded schema"),
        (3, None),
    ]


DECIMAL = "org.apache.kafka.connect.data.Decimal"


def decimal_field(name: str, precision: int, scale: int) -> dict:
    return connect_field(
        name, "bytes", DECIMAL, scale=str(scale), **{"connect.decimal.precision": str(precision)}
    )


# The in-place widenings of the DDL table of docs/concepts.md ("Schema changes at the source"): a
# column declared with its old type, events before the change (old field, a value, what it
# decodes to) and after it (new field, a value only the new type holds, what it decodes to), and
# the type the column takes.
WIDENINGS: dict[str, tuple[str, tuple[dict, Any, Any], tuple[dict, Any, Any], str]] = {
    "smallint to int": (
        "smallint",
        (connect_field("c", "int16"), -7, -7),
        (connect_field("c", "int32"), 70000, 70000),
        "int",
    ),
    "smallint to bigint": (
        "int2",
        (connect_field("c", "int16"), 7, 7),
        (connect_field("c", "int64"), -(2**40), -(2**40)),
        "bigint",
    ),
    "int to bigint": (
        "integer",
        (connect_field("c", "int32"), 2**31 - 1, 2**31 - 1),
        (connect_field("c", "int64"), 9007199254740993, 9007199254740993),
        "bigint",
    ),
    "real to double precision": (
        "real",
        (connect_field("c", "float"), 0.5, 0.5),
        (connect_field("c", "double"), 0.1, 0.1),
        "double",
    ),
    "numeric(5,2) to numeric(7,2)": (
        "numeric(5,2)",
        (decimal_field("c", 5, 2), decimal_base64(Decimal("-999.99"), 2), Decimal("-999.99")),
        (decimal_field("c", 7, 2), decimal_base64(Decimal("-12345.67"), 2), Decimal("-12345.67")),
        "decimal(7,2)",
    ),
    "numeric(10,2) to numeric(20,2)": (
        "numeric(10,2)",
        (decimal_field("c", 10, 2), decimal_base64(Decimal("1.25"), 2), Decimal("1.25")),
        (
            decimal_field("c", 20, 2),
            decimal_base64(Decimal("123456789012345678.90"), 2),
            Decimal("123456789012345678.90"),
        ),
        "decimal(20,2)",
    ),
    "varchar(5) to text": (
        "varchar(5)",
        (connect_field("c", "string"), "short", "short"),
        (connect_field("c", "string"), "longer than five", "longer than five"),
        "string",
    ),
}


def test_a_declared_type_widened_at_the_source_widens_the_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Schemas on, each widening docs/concepts.md lists (one column each): a column declared with
    its old type takes the new type from the events' own schema, and values only the new type holds
    decode exactly (before: `cannot decode c as smallint`, every later event of the table
    rejected). Both in a batch with events from before the change and in one of later events."""
    columns = {f"c{i}": case for i, case in enumerate(WIDENINGS.values())}
    names = {f"c{i}": name for i, name in enumerate(WIDENINGS)}

    def image(key: int, at: int) -> tuple[dict, list[dict]]:
        """Row values and fields of an event before (at=1) or after (at=2) the changes."""
        fields = [connect_field("id", "int32")]
        values: dict[str, Any] = {"id": key}
        for column, case in columns.items():
            field, value, _ = case[at]
            fields.append({**field, "field": column})
            values[column] = value
        return values, fields

    before, after = image(1, 1), image(1, 2)
    batches = {
        "both": [
            wrapped(envelope("c", before[0], lsn=1), before[1]),
            wrapped(envelope("u", after[0], lsn=2), after[1]),
        ],
        "later only": [wrapped(envelope("u", after[0], lsn=3), after[1])],
    }
    declared = {"id": "int", **{column: case[0] for column, case in columns.items()}}
    problems = {}
    for batch, lines in batches.items():
        topic = f"t.widen.{batch.replace(' ', '_')}"
        write_landing(tmp_path, topic, lines, files=1)
        df = decode(spark, tmp_path, TableSpec(topic=topic, key=("id",), columns=declared))
        rows = collect(df)
        types = dict(df.dtypes)
        for column, (_, old, new, widened) in columns.items():
            expected = [old[2], new[2]] if batch == "both" else [new[2]]
            got = (types[column], [r[column] for r in rows])
            if got != (widened, expected):
                problems[f"{names[column]}, {batch}"] = got
        rejected = {r._cdc_reject_reason for r in rows} - {None}
        if rejected:
            problems[f"rejects, {batch}"] = rejected
    assert problems == {}


# A declared type and an event type that the lake cannot reconcile in place (docs/concepts.md:
# "another type change"): the declared type, the events' field and how the message names their type.
CONFLICTS = {
    "a new scale": ("numeric(10,2)", decimal_field("c", 14, 4), "decimal(14,4)"),
    "a smaller scale": ("numeric(10,4)", decimal_field("c", 12, 2), "decimal(12,2)"),
    "int to text": ("int", connect_field("c", "string"), "string"),
    "int to real": ("int", connect_field("c", "float"), "float"),
    "int to numeric": ("integer", decimal_field("c", 12, 2), "decimal(12,2)"),
    "double to bigint": ("double", connect_field("c", "int64"), "bigint"),
    "bigint to boolean": ("bigint", connect_field("c", "boolean"), "boolean"),
    "date to timestamp": (
        "date",
        connect_field("c", "int64", "io.debezium.time.MicroTimestamp"),
        "timestamp_ntz",
    ),
    "timestamp to timestamptz": (
        "timestamp",
        connect_field("c", "string", "io.debezium.time.ZonedTimestamp"),
        "timestamp",
    ),
    "bytea to text": ("bytea", connect_field("c", "string"), "string"),
}
# Event types a declared type holds, or that are how a connector setting writes it: the
# declared type stays (a narrowing at the source, decimal.handling.mode string and double, the
# JDBC source's Connect Timestamp for a timestamptz, Debezium's time types).
KEPT = {
    "int to smallint": ("bigint", connect_field("c", "int16"), "bigint"),
    "numeric, string mode": ("numeric(12,2)", connect_field("c", "string"), "decimal(12,2)"),
    "numeric, double mode": ("numeric(12,2)", connect_field("c", "double"), "decimal(12,2)"),
    "numeric, fewer digits": ("numeric(12,2)", decimal_field("c", 8, 1), "decimal(12,2)"),
    "numeric without precision": ("numeric", decimal_field("c", 12, 2), "decimal(38,18)"),
    "numeric of an int": ("numeric(12,0)", connect_field("c", "int32"), "decimal(12,0)"),
    "timestamptz, JDBC": (
        "timestamptz",
        connect_field("c", "int64", "org.apache.kafka.connect.data.Timestamp"),
        "timestamp",
    ),
    "time": ("time", connect_field("c", "int64", "io.debezium.time.MicroTime"), "string"),
    "text of an int": ("text", connect_field("c", "int32"), "string"),
    "double of an int": ("double", connect_field("c", "int32"), "double"),
    "text array": (
        "text[]",
        {"type": "array", "items": {"type": "string"}, "optional": True, "field": "c"},
        "array<string>",
    ),
}


def test_a_declared_type_the_events_contradict_stops_the_build(spark: SparkSession) -> None:
    """Schemas on: an event type that neither fits the declared type nor widens it in place
    stops the decoder before anything is read or written, naming the table, the column, the
    declared type and the events' type; compatible event types keep the declared type."""
    problems = {}
    for case, (declared, field, event_type) in CONFLICTS.items():
        spec = TableSpec(topic="t.contract", key=("id",), columns={"id": "int", "c": declared})
        try:
            decoded_schema(spark, spec, [connect_field("id", "int32"), field])
        except ValueError as error:
            message = str(error)
            named = ("t.contract", "column c", f"declared {declared}", event_type)
            if not all(part in message for part in named):
                problems[case] = message
        else:
            problems[case] = "decoded"
    for case, (declared, field, kept) in KEPT.items():
        spec = TableSpec(topic="t.contract", key=("id",), columns={"id": "int", "c": declared})
        try:
            schema = decoded_schema(spark, spec, [connect_field("id", "int32"), field])
        except ValueError as error:
            problems[case] = str(error)
        else:
            if schema["c"].dataType.simpleString() != kept:
                problems[case] = schema["c"].dataType.simpleString()
    assert problems == {}


# PostgreSQL types `from-postgres` once declared as `text` (or `time`), as `format_type` spells
# them, with the field Debezium 3.6.3 wrote for each in a real capture (schemas on, default
# handling modes) and two rows' values there: what each decodes to, with schemas and without.
ODD_TYPES: dict[str, tuple[str, dict, list[Any], list[Any]]] = {
    "tz": (
        "time with time zone",
        connect_field("tz", "string", "io.debezium.time.ZonedTime"),
        ["11:14:15.123456Z", None],
        ["11:14:15.123456Z", None],
    ),
    "tz3": (
        "time(3) with time zone",
        connect_field("tz3", "string", "io.debezium.time.ZonedTime"),
        ["18:44:15.5Z", None],
        ["18:44:15.5Z", None],
    ),
    "m": (
        "money",
        connect_field("m", "bytes", DECIMAL, scale="2"),
        ["EtaH", "gAAAAAAAAAA="],
        [Decimal("12345.67"), Decimal("-92233720368547758.08")],
    ),
    "b1": ("bit(1)", connect_field("b1", "boolean"), [True, None], [True, None]),
    "b3": (
        "bit(3)",
        connect_field("b3", "bytes", "io.debezium.data.Bits", length="3"),
        ["BQ==", None],
        [b"\x05", None],
    ),
    "vb": (
        "bit varying(5)",
        connect_field("vb", "bytes", "io.debezium.data.Bits", length="5"),
        ["GQ==", None],
        [b"\x19", None],
    ),
    "iv": (
        "interval",
        connect_field("iv", "int64", "io.debezium.time.MicroDuration"),
        [37091106789000, -86400000000],
        [37091106789000, -86400000000],
    ),
    "o": ("oid", connect_field("o", "int64"), [4000000000, 1], [4000000000, 1]),
}


def test_types_from_postgres_decode_what_debezium_writes(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`from-postgres` declares each type as what Debezium writes for it: schemas off, the
    declared type decodes the values exactly, into the type the embedded schema gives schemas on
    (before: a timetz declared `time` rejected every row without schemas; money, bit strings and
    intervals kept Debezium's base64 text or microseconds as text)."""
    declared = {"id": "int"}
    declared.update({c: declared_from_postgres(case[0])[0] for c, case in ODD_TYPES.items()})
    fields = [connect_field("id", "int32")] + [case[1] for case in ODD_TYPES.values()]
    rows = [{"id": key} | {c: case[2][key - 1] for c, case in ODD_TYPES.items()} for key in (1, 2)]
    with_schema = [wrapped(envelope("c", row, lsn=row["id"]), fields) for row in rows]
    bare = [compact(envelope("c", row | {"id": row["id"] + 2}, lsn=row["id"] + 2)) for row in rows]
    write_landing(tmp_path, "t.odd", with_schema + bare, files=1)
    embedded = decoded_schema(spark, TableSpec(topic="t.odd", key=("id",)), fields)
    problems = {}
    # None of these is a bytea: binary.handling.mode leaves them as they are (a bit string
    # registered as `bytea` was read as hex when the mode was `hex`, the type-map oracle found)
    for mode in BINARY_MODES:
        spec = TableSpec(topic="t.odd", key=("id",), columns=declared, binary_handling_mode=mode)
        df = decode(spark, tmp_path, spec)
        decoded = collect(df)
        for column, (pg_type, _, _, expected) in ODD_TYPES.items():
            values = [r[column] for r in decoded]
            if values != expected + expected:
                problems[f"{pg_type} {mode}"] = (declared[column], values)
            natural = embedded[column].dataType.simpleString()
            if dict(df.dtypes)[column] != natural:
                problems[f"{pg_type} type"] = (declared[column], dict(df.dtypes)[column], natural)
        assert [r._cdc_reject_reason for r in decoded] == [None] * 4, mode
    assert problems == {}


def test_undeclared_fields_are_kept_and_decode_exactly_once_declared(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Schemas off, in every shape: fields that are not declared columns are kept as text in
    `_cdc_undeclared` (nothing lost), and the backfill decoders give, from that text, exactly
    what declaring the columns from the start gives (placeholders, decimals, arrays, nulls)."""
    amount = unscaled_base64(-1234)  # -12.34 as a precise decimal(8,2)
    gone = "__debezium_unavailable_value"
    rows_by_shape = {
        "envelope": [
            compact(envelope("c", {"id": 1, "name": "a"}, lsn=1)),
            compact(
                envelope(
                    "c",
                    {
                        "id": 2,
                        "name": "b",
                        "amount": amount,
                        "tags": ["x", "y"],
                        "extra": {"k": [1, 2]},
                    },
                    lsn=2,
                )
            ),
            compact(
                envelope(
                    "u",
                    {"id": 2, "name": "b", "amount": amount, "tags": [gone], "extra": None},
                    lsn=3,
                )
            ),
            compact(envelope("d", None, lsn=4, before={"id": 1, "name": None, "amount": None})),
            compact(envelope("u", {"id": 3, "name": "c", "amount": "not base64!"}, lsn=5)),
        ],
        "flattened": [
            compact({"id": 1, "name": "a", "__op": "c", "__lsn": 1, "__deleted": "false"}),
            compact(
                {
                    "id": 2,
                    "name": "b",
                    "amount": "-12.34",
                    "tags": ["x", "y"],
                    "extra": {"k": [1, 2]},
                    "__op": "c",
                    "__lsn": 2,
                    "__deleted": "false",
                    "__table": "t",
                }
            ),
            compact(
                {
                    "id": 2,
                    "name": "b",
                    "amount": "-12.34",
                    "tags": [gone],
                    "extra": None,
                    "__op": "u",
                    "__lsn": 3,
                    "__deleted": "false",
                }
            ),
            compact(
                {
                    "id": 1,
                    "name": None,
                    "amount": None,
                    "__op": "d",
                    "__lsn": 4,
                    "__deleted": "true",
                }
            ),
            compact(
                {
                    "id": 3,
                    "name": "c",
                    "amount": "abc",
                    "__op": "u",
                    "__lsn": 5,
                    "__deleted": "false",
                }
            ),
        ],
    }
    full = {
        "id": "int",
        "name": "text",
        "amount": "numeric(8,2)",
        "tags": "text[]",
        "extra": "jsonb",
    }
    for shape, lines in rows_by_shape.items():
        topic = f"t.undeclared.{shape}"
        write_landing(tmp_path, topic, lines, files=2)
        modes = {"decimal_handling_mode": "string"} if shape == "flattened" else {}
        bare = TableSpec(
            topic=topic, shape=shape, key=("id",), columns={"id": "int", "name": "text"}, **modes
        )
        declared = TableSpec(topic=topic, shape=shape, key=("id",), columns=full, **modes)
        kept = decode(spark, tmp_path, bare)
        assert "amount" not in kept.columns
        got = collect(kept)
        assert got[0]._cdc_undeclared is None, shape
        assert json.loads(got[1]._cdc_undeclared) == {
            "amount": "-12.34" if shape == "flattened" else amount,
            "tags": '["x","y"]',
            "extra": '{"k":[1,2]}',
        }, shape
        assert json.loads(got[2]._cdc_undeclared)["tags"] == f'["{gone}"]'
        assert "extra" not in json.loads(got[2]._cdc_undeclared), shape  # a JSON null: left out
        assert got[3]._cdc_undeclared is None, shape  # only nulls beyond the columns
        assert all(r._cdc_reject_reason is None for r in got), shape

        # What the declared decoder gives from the start, and what the backfill gives later.
        expected = collect(decode(spark, tmp_path, declared))
        fills = backfills(declared, ["amount", "tags", "extra"])
        filled = collect(
            kept.select(
                "*",
                *[F.expr(f.value).alias(f"fill_{f.name}") for f in fills],
                *[F.expr(f.unavailable).alias(f"ua_{f.name}") for f in fills],
                *[F.expr(f.failed).alias(f"failed_{f.name}") for f in fills],
            )
        )
        for want, row in zip(expected, filled, strict=True):
            unavailable = set((want._cdc_unavailable_columns or "").split(","))
            for f in fills:
                assert row[f"fill_{f.name}"] == want[f.name], (shape, f.name, want)
                assert row[f"ua_{f.name}"] == (f.name in unavailable), (shape, f.name)
            rejected = want._cdc_reject_reason == "cannot decode amount as decimal(8,2)"
            assert row["failed_amount"] == rejected, (shape, want)
        assert [r._cdc_reject_reason for r in expected][-1] is not None


def test_flattened_rows_from_another_table_are_kept(spark: SparkSession, tmp_path: Path) -> None:
    row = {"id": 1, "note": "x", "__op": "c", "__table": "other", "__lsn": 9, "__deleted": "false"}
    gone = {"id": 1, "note": None, "__op": "d", "__table": "t", "__lsn": 10, "__deleted": "true"}
    upsert = {"id": 2, "note": "y", "__deleted": "false"}  # add.fields without op
    write_landing(tmp_path, "t.flat", [compact(row), compact(gone), compact(upsert)], files=1)
    spec = TableSpec(
        topic="t.flat", shape="flattened", key=("id",), columns={"id": "int", "note": "text"}
    )
    rows = collect(decode(spark, tmp_path, spec))
    assert [(r.id, r.note, r._cdc_op, r._cdc_seq) for r in rows] == [
        (1, "x", "c", Decimal(9)),
        (1, None, "d", Decimal(10)),
        (2, "y", "u", None),
    ]
    assert "__table" not in rows[0].asDict()


def test_logical_types_from_the_embedded_schema(spark: SparkSession, tmp_path: Path) -> None:
    fields = [
        connect_field("id", "int32"),
        connect_field("t_us", "int64", "io.debezium.time.MicroTime"),
        connect_field("t_ms", "int32", "io.debezium.time.Time"),
        connect_field("t_ns", "int64", "io.debezium.time.NanoTime"),
        connect_field("t_iso", "string", "io.debezium.time.IsoTime"),
        connect_field("ts_ns", "int64", "io.debezium.time.NanoTimestamp"),
        connect_field("ts_ms", "int64", "io.debezium.time.Timestamp"),
        connect_field("small", "int16"),
        connect_field("ratio", "double"),
        {
            "type": "array",
            "items": {"type": "int32", "optional": True, "name": "io.debezium.time.Date"},
            "optional": True,
            "field": "days",
        },
        {"type": "array", "items": {"type": "int64"}, "optional": True, "field": "counts"},
    ]
    after = {
        "id": 1,
        "t_us": 47655123456,
        "t_ms": 47655123,
        "t_ns": 47655123456789,
        "t_iso": "13:14:15.5Z",
        "ts_ns": -1,  # one nanosecond before the epoch floors to the previous microsecond
        "ts_ms": 1709212455123,
        "small": -32768,
        "ratio": 0.1,
        "days": [19782, None, 0],
        "counts": [1, 9007199254740993],
    }
    write_landing(tmp_path, "t.logical", [wrapped(envelope("c", after, lsn=1), fields)], files=1)
    df = decode(spark, tmp_path, TableSpec(topic="t.logical", key=("id",)))
    types = dict(df.dtypes)
    assert [types[c] for c in ("t_us", "ts_ns", "small", "ratio", "days", "counts")] == [
        "string",
        "timestamp_ntz",
        "smallint",
        "double",
        "array<date>",
        "array<bigint>",
    ]
    (row,) = collect(df)
    assert (row.t_us, row.t_ms, row.t_ns, row.t_iso) == (
        "13:14:15.123456",
        "13:14:15.123000",
        "13:14:15.123456",
        "13:14:15.500000",
    )
    assert row.ts_ns == datetime(1969, 12, 31, 23, 59, 59, 999999)
    assert row.ts_ms == datetime(2024, 2, 29, 13, 14, 15, 123000)
    assert (row.small, row.ratio) == (-32768, 0.1)
    assert row.days == [date(2024, 2, 29), None, date(1970, 1, 1)]
    assert row.counts == [1, 9007199254740993]
    assert row._cdc_reject_reason is None


# Debezium's PostgreSQL connector documentation, "Temporal types": the logical type each
# `time.precision.mode` writes for a column of each precision (schemas on), by PostgreSQL type
# as `format_type` spells it. Without schemas the declared type is all the decoder has.
TEMPORAL_BY_MODE = {
    "adaptive": {
        "time(3) without time zone": "io.debezium.time.Time",
        "time without time zone": "io.debezium.time.MicroTime",
        "timestamp(0) without time zone": "io.debezium.time.Timestamp",
        "timestamp(3) without time zone": "io.debezium.time.Timestamp",
        "timestamp(4) without time zone": "io.debezium.time.MicroTimestamp",
        "timestamp without time zone": "io.debezium.time.MicroTimestamp",
    },
    "adaptive_time_microseconds": {
        "time(3) without time zone": "io.debezium.time.MicroTime",
        "time without time zone": "io.debezium.time.MicroTime",
        "timestamp(3) without time zone": "io.debezium.time.Timestamp",
        "timestamp without time zone": "io.debezium.time.MicroTimestamp",
    },
    "connect": {
        "time(3) without time zone": "org.apache.kafka.connect.data.Time",
        "time without time zone": "org.apache.kafka.connect.data.Time",
        "timestamp(3) without time zone": "org.apache.kafka.connect.data.Timestamp",
        "timestamp without time zone": "org.apache.kafka.connect.data.Timestamp",
    },
}


@pytest.mark.parametrize("mode", sorted(TEMPORAL_BY_MODE))
def test_a_declared_time_decodes_in_the_unit_its_precision_gets(mode: str) -> None:
    """Schemas off, a `time(3)` or `timestamp(3)` column as `from-postgres` declares it decodes
    in the unit Debezium writes for that precision and mode: milliseconds up to precision 3 in
    the adaptive modes (before: read as microseconds, a time(3) of 12:00:00.5 came out as
    00:00:43.2005 and a timestamp(3) in 4569 as one in 1972)."""
    spec = TableSpec(topic="t.t", key=("id",), time_precision_mode=mode)
    for pg_type, logical in TEMPORAL_BY_MODE[mode].items():
        declared, _ = declared_from_postgres(pg_type)
        millis_time = ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time")
        kind = "int32" if logical in millis_time else "int64"
        field = connect_field("c", kind, logical)
        assert declared_encoding(declared, spec) == connect_encoding(field)[0], (pg_type, mode)


def test_array_types_declare_arrays_of_their_element_type() -> None:
    """`numeric(12,3)[]` is an array of decimal(12,3): a precision in the element type made the
    declaration `decimal(12,3)[]`, which no Spark cast reads (the bronze model failed)."""
    assert spark_type("numeric(12,3)[]") == "array<decimal(12,3)>"
    assert spark_type("character varying(40)[]") == "array<string>"
    assert spark_type("timestamp(3) with time zone[]") == "array<timestamp>"
    assert declared_from_postgres("numeric(12,3)[]")[0] == "numeric(12,3)[]"


def test_interval_and_hstore_modes_declare_what_debezium_writes_and_bad_settings_are_refused() -> (
    None
):
    """interval.handling.mode=string writes ISO 8601 text (io.debezium.time.Interval), which a
    `bigint` cannot read: from-postgres declares `text` then. hstore.handling.mode=map writes a
    Connect map, read as its JSON text like `json` mode's string. A setting outside Debezium's
    choices is refused when the config is read, naming the setting."""
    assert declared_from_postgres("interval")[0] == "bigint"
    assert declared_from_postgres("interval", "string")[0] == "text"
    assert declared_from_postgres("interval[]", "string")[0] == "text[]"
    spec = TableSpec(topic="t.t", key=("id",), hstore_handling_mode="map")
    hstore_map = {"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}}
    assert connect_encoding(hstore_map) == (declared_encoding("text", spec), "string")
    interval = connect_field("c", "string", "io.debezium.time.Interval")
    assert connect_encoding(interval)[1] == "string"
    for mode, bad in (("interval_handling_mode", "iso"), ("hstore_handling_mode", "jsonb")):
        with pytest.raises(ValueError, match=f"{mode} must be one of"):
            TableSpec.from_config({"topic_prefix": "p", mode: bad}, {"name": "t", "key": "id"})
