"""Parquet landing files (Confluent's S3 sink with ParquetFormat, gzip): read as the lines the
JsonConverter with schemas on would have landed for the same records, so the one decoder gives
exact values, line numbers and offsets.

The fixtures (tests/fixtures/parquet/, written by parquet-avro's AvroParquetWriter from the Avro
schema Confluent's AvroData makes of the Connect records; see generate.py there) hold what a JDBC
source connector in query mode lands for a Pagila-shaped payment query after two SMTs (a renamed
field, a static field), partitioned by `country`: Decimals as BINARY-backed DECIMAL (precision 5
and 25, negative values included), Timestamps as INT64 millis, Dates as INT32, bytes, nulls, and
a field the second file adds. The same records as Avro container files (Confluent's AvroFormat,
tests/fixtures/avro/) decode to the same rows.
"""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_lakehouse.bronze.decode import decode_changes
from cdc_lakehouse.bronze.flatten import decode_landing_files
from cdc_lakehouse.bronze.landing import LandingFile, list_landing_files, read_landing_lines
from cdc_lakehouse.bronze.spec import TableSpec

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "parquet" / "landing"
AVRO_ROOT = ROOT.parents[1] / "avro" / "landing"
TOPIC = "pagila.payment"
SPEC = TableSpec.from_config(
    None,
    {
        "topic": TOPIC,
        "shape": "jdbc",
        "key": ["payment_id"],
        "order_by": ["last_update", "payment_id"],
        # declared: the output type; the rest comes from the embedded (Parquet) schema
        "columns": {"payment_id": "int", "amount": "numeric(5,2)", "payment_date": "timestamptz"},
    },
)
FOLDER = f"topics/{TOPIC}/country=Portugal"


def ms(value: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(milliseconds=value)


def test_parquet_files_decode_to_exact_values_lines_and_offsets(spark: SparkSession) -> None:
    files = list_landing_files(spark, str(ROOT), TOPIC)
    assert [(f.relative, f.partition, f.offset, f.problem) for f in files] == [
        (f"{FOLDER}/{TOPIC}+0+0000000000.gz.parquet", 0, 0, None),
        (f"{FOLDER}/{TOPIC}+0+0000000003.gz.parquet", 0, 3, None),
    ]
    decoded = decode_changes(read_landing_lines(spark, files), SPEC)
    types = dict(decoded.dtypes)
    assert (types["amount"], types["balance"]) == ("decimal(5,2)", "decimal(25,4)")
    assert (types["payment_date"], types["last_update"]) == ("timestamp", "timestamp_ntz")
    assert (types["due_date"], types["receipt"], types["note"]) == ("date", "binary", "string")
    rows = sorted(decoded.collect(), key=lambda r: r["_cdc_offset"])
    assert [r["_cdc_reject_reason"] for r in rows] == [None] * 5
    assert [(r["_cdc_file"].rsplit("+", 1)[1], r["_cdc_line"], r["_cdc_offset"]) for r in rows] == [
        ("0000000000.gz.parquet", 1, 0),
        ("0000000000.gz.parquet", 2, 1),
        ("0000000000.gz.parquet", 3, 2),
        ("0000000003.gz.parquet", 1, 3),
        ("0000000003.gz.parquet", 2, 4),
    ]
    values = [
        (
            r["payment_id"], r["clerk_id"], r["amount"], r["balance"], r["due_date"],
            r["refunded"], r["rate"], r["receipt"], r["source"], r["note"],
        )
        for r in rows
    ]  # fmt: skip
    assert values == [
        (16050, 2, Decimal("1.99"), Decimal("123456789012345678901.2345"), date(2020, 2, 8),
         False, 0.5, bytearray(b"\x00\xff"), "pagila", None),
        (16051, None, Decimal("-0.99"), Decimal("-98765432109876543210.0001"), None,
         True, None, None, "pagila", None),
        (16052, 1, Decimal("999.99"), None, date(1969, 12, 31),
         None, -1.25, bytearray(b""), "pagila", None),
        (16050, 2, Decimal("0.00"), Decimal("-1.0000"), date(2020, 2, 9),
         True, 0.5, bytearray(b"\x01"), "pagila", "refunded"),
        (16053, 2, Decimal("-999.99"), Decimal("0.0001"), date(1970, 1, 1),
         False, 0.0, bytearray(b"\x80"), "pagila", None),
    ]  # fmt: skip
    # Connect Timestamps: an instant where `timestamptz` is declared, else UTC wall clock
    assert rows[0]["payment_date"] == datetime(2020, 1, 26, 0, 53, 20, 123000)  # UTC session
    assert rows[0]["last_update"] == ms(1_580_000_001_000)
    # the query-based order: the later poll of payment 16050 orders after the first
    first, again = rows[0]["_cdc_seq"], rows[3]["_cdc_seq"]
    assert first < again


def test_a_parquet_file_spark_cannot_read_is_a_reject(spark: SparkSession, tmp_path: Path) -> None:
    """A Connect Time column (Parquet TIME) stops Spark's read of the whole batch; the reader
    reports its file instead, and the other files of the batch still load."""
    store = TableSpec.from_config(
        None,
        {
            "topic": "pagila.store",
            "shape": "jdbc",
            "key": ["store_id"],
            "order_by": ["store_id"],
            "columns": {"store_id": "int"},
        },
    )
    files = list_landing_files(spark, str(ROOT), "pagila.store")
    assert len(files) == 1 and files[0].problem is None
    good = tmp_path / "good.json"
    good.write_text('{"store_id": 2}\n')
    lines = read_landing_lines(spark, [*files, LandingFile(f"file:{good}", "good.json", 0, 0)])
    rows = decode_changes(lines, store).collect()
    assert [(r["store_id"], r["_cdc_reject_reason"]) for r in rows if r["_cdc_line"] == 1] == [
        (2, None)
    ]
    [reject] = [r for r in rows if r["_cdc_reject_reason"]]
    assert (reject["_cdc_file"], reject["_cdc_line"]) == (files[0].relative, 0)
    assert reject["_cdc_reject_reason"].startswith(
        "Parquet column opens is TIME(MILLIS,true), which Spark cannot read"
    ), reject["_cdc_reject_reason"]


def test_avro_files_decode_to_the_same_rows_as_the_parquet_files(spark: SparkSession) -> None:
    files = list_landing_files(spark, str(AVRO_ROOT), TOPIC)
    assert [(f.relative, f.partition, f.offset, f.problem) for f in files] == [
        (f"{FOLDER}/{TOPIC}+0+0000000000.avro", 0, 0, None),
        (f"{FOLDER}/{TOPIC}+0+0000000003.avro", 0, 3, None),
    ]

    def rows(root: Path, surveyed: bool = False) -> list[dict]:
        files = list_landing_files(spark, str(root), TOPIC)
        if surveyed:  # as the bronze model reads: the survey in the pass that numbers lines
            decoded = decode_landing_files(spark, files, SPEC)
        else:
            decoded = decode_changes(read_landing_lines(spark, files), SPEC)
        out = [r.asDict() for r in decoded.collect()]
        for row in out:
            row["_cdc_file"] = row["_cdc_file"].rsplit("+", 1)[1].split(".")[0]
            row.pop("_cdc_loaded_at", None)
        return sorted(out, key=lambda r: r["_cdc_offset"])

    avro = rows(AVRO_ROOT)
    assert len(avro) == 5 and all(r["_cdc_reject_reason"] is None for r in avro)
    assert avro == rows(ROOT)
    assert rows(AVRO_ROOT, surveyed=True) == avro
    assert rows(ROOT, surveyed=True) == avro


def test_a_file_that_is_not_avro_is_a_reject(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    shutil.copytree(AVRO_ROOT, landing)
    folder = landing / "topics" / TOPIC / "country=Portugal"
    (folder / f"{TOPIC}+0+0000000005.avro").write_bytes(b'{"payment_id": 1}\n')
    files = list_landing_files(spark, str(landing), TOPIC)
    rows = decode_changes(read_landing_lines(spark, files), SPEC).collect()
    assert len([r for r in rows if r["_cdc_reject_reason"] is None]) == 5
    [reject] = [r for r in rows if r["_cdc_reject_reason"]]
    assert (reject["_cdc_file"], reject["_cdc_line"]) == (f"{FOLDER}/{TOPIC}+0+0000000005.avro", 0)
    assert reject["_cdc_reject_reason"].startswith("not a readable Avro file"), reject
