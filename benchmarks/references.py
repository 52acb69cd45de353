"""Reference implementations of "latest state per key, deletes applied", on the same landing files.

- `duckdb`: DuckDB reads the JSON lines and keeps the newest event of each key (by LSN).
- `spark-naive`: a full rebuild in Spark SQL: decode every landing file, `row_number()` over all
  history, `create or replace` an Iceberg table.
- `spark-merge`: a hand-written PySpark job without dbt: decode only the files not seen before,
  keep the newest event per key, `MERGE INTO` an Iceberg table.
- `hudi`: Apache Hudi's Spark writer as HoodieStreamer's PostgresDebeziumSource sets it up
  (benchmarks.peers.hudi): decode only the files not seen before, flatten, upsert into a
  copy-on-write Hudi table with `PostgresDebeziumAvroPayload` ordered by LSN (its own session:
  the Hudi bundle, not the profile's Iceberg catalog).

They are deliberately simpler than the pipeline (no unchanged-TOAST carry-over, no tombstones
for late events, no rejects, no line numbers), which is right for the benchmark's data: each
result is checked against the pipeline's silver table (row count and checksums) before its
time is reported. Each command runs in its own process and prints one JSON line:

    python -m benchmarks.references duckdb --landing L --db D.duckdb
    python -m benchmarks.references spark-naive --landing L --lakehouse H
    python -m benchmarks.references spark-merge --landing L --lakehouse H [--init-from-silver]
    python -m benchmarks.references hudi --landing L --lakehouse H
    python -m benchmarks.references checksum --lakehouse H          # the pipeline's silver
    python -m benchmarks.references read --lakehouse H              # silver read + file counts
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.generate import KEY, TOPIC, Dataset

SILVER = "silver.items"
NAIVE = "reference.items_naive"
MERGED = "reference.items_merge"
# The pipeline's silver table properties (dbt_project.yml): the hand-written job gets the same.
TABLE_PROPERTIES = {
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}


def checksum_sql(table: str, lsn: str, columns: Sequence[str]) -> str:
    """Row count and sums that tell which version of each key a table holds; the same SQL
    runs on Spark and DuckDB (no engine-specific hash)."""
    sums = [
        "count(*) as row_count",
        f"sum({KEY}) as key_sum",
        f"sum(({KEY} * 1000003 + {lsn}) % 1000000007) as version_sum",
    ]
    if "quantity" in columns:
        sums.append("sum(coalesce(quantity, -1)) as quantity_sum")
    if "name" in columns:
        sums.append("sum(coalesce(length(name), -1)) as name_length_sum")
    return f"select {', '.join(sums)} from {table}"


def _checksum_row(row: Any, names: Sequence[str]) -> dict[str, int]:
    return {name: int(value or 0) for name, value in zip(names, row, strict=True)}


def landing_files(landing: Path, topic: str = TOPIC) -> list[str]:
    folder = Path(landing) / "topics" / topic
    return sorted(str(p) for p in folder.rglob("*.json") if not p.name.startswith((".", "_")))


# -- DuckDB -------------------------------------------------------------------------------------
_DUCKDB_JSON = {
    "bigint": "BIGINT",
    "int": "INTEGER",
    "text": "VARCHAR",
    "status": "VARCHAR",
    "boolean": "BOOLEAN",
    "double": "DOUBLE",
    "numeric(12,2)": "VARCHAR",
    "date": "INTEGER",
    "timestamp": "BIGINT",
    "timestamptz": "VARCHAR",
}


def _duckdb_decode(name: str, kind: str) -> str:
    if kind.startswith("numeric"):
        h = f"hex(from_base64({name}))"
        unscaled = (
            f"(('0x' || {h})::HUGEINT - "
            f"CASE WHEN {h} >= '8' THEN (1::HUGEINT << (4 * length({h}))) ELSE 0 END)"
        )
        return f"CAST(CAST({unscaled} AS DECIMAL(18,0)) / 100 AS DECIMAL(12,2))"
    if kind == "date":
        return f"DATE '1970-01-01' + {name}"
    if kind == "timestamp":
        return f"make_timestamp({name})"
    if kind == "timestamptz":
        return f"CAST({name} AS TIMESTAMPTZ)"
    return name


def run_duckdb(landing: Path, db: Path) -> dict[str, Any]:
    import duckdb

    data = Dataset.load(landing)
    files = landing_files(landing, data.topic)
    started = time.monotonic()
    con = duckdb.connect(str(db))
    row = ", ".join(f"{name} {_DUCKDB_JSON[kind]}" for name, kind in data.columns)
    envelope = {
        "before": f"STRUCT({row})",
        "after": f"STRUCT({row})",
        "op": "VARCHAR",
        "source": 'STRUCT(lsn BIGINT, ts_ms BIGINT, "txId" BIGINT)',
    }
    if data.schemas:
        inner = ", ".join(f'"{k}" {v}' for k, v in envelope.items())
        columns = {"payload": f"STRUCT({inner})"}
        events = "select payload.* from raw"
    else:
        columns = envelope
        events = "select * from raw"
    decoded = ",\n".join(
        f"{_duckdb_decode('image.' + name, kind)} as {name}" for name, kind in data.columns
    )
    con.execute(
        f"""
        create or replace table items as
        with
        raw as (
            select * from read_json({files!r}, format = 'newline_delimited', columns = {columns})
        ),
        events as ({events}),
        latest as (
            select
                case when op = 'd' then before else after end as image,
                op,
                source.lsn as _lsn
            from events
            where op in ('r', 'c', 'u', 'd')
            qualify row_number() over (
                partition by coalesce(after.{KEY}, before.{KEY}) order by source.lsn desc
            ) = 1
        )
        select {decoded}, _lsn
        from latest
        where op != 'd'
        """
    )
    seconds = time.monotonic() - started
    names = [name for name, _ in data.columns]
    checksum_query = checksum_sql("items", "_lsn", names)
    cursor = con.execute(checksum_query)
    result = cursor.fetchone()
    labels = [d[0] for d in cursor.description]
    con.close()
    return {
        "engine": "duckdb",
        "version": duckdb.__version__,
        "threads": os.cpu_count(),
        "seconds": round(seconds, 2),
        "checksum": _checksum_row(result, labels),
    }


# -- Spark --------------------------------------------------------------------------------------
def _spark_json_type(kind: str) -> str:
    return {
        "bigint": "bigint",
        "int": "int",
        "boolean": "boolean",
        "double": "double",
        "date": "int",
        "timestamp": "bigint",
    }.get(kind, "string")


def _spark_decode(name: str, kind: str) -> str:
    if kind.startswith("numeric"):
        h = f"hex(unbase64({name}))"
        signed = f"conv(lpad({h}, 16, if({h} >= '8', 'F', '0')), 16, -10)"
        return f"cast(cast({signed} as decimal(18,0)) / 100 as decimal(12,2))"
    if kind == "date":
        return f"date_from_unix_date({name})"
    if kind == "timestamp":
        return f"cast(timestamp_micros({name}) as timestamp_ntz)"
    if kind == "timestamptz":
        return f"cast({name} as timestamp)"
    return name


def decoded_events(spark: Any, files: Sequence[str], data: Dataset) -> Any:
    """Typed change events (the table's columns, `op`, `_lsn`) of the given landing files,
    read with an explicit schema (no inference)."""
    row = ", ".join(f"`{name}`: {_spark_json_type(kind)}" for name, kind in data.columns)
    fields = [f"before: struct<{row}>", f"after: struct<{row}>", "op: string"]
    fields.append("source: struct<lsn: bigint>")
    envelope = ", ".join(f.replace(": ", " ", 1) for f in fields)
    wrapped = f"payload struct<{', '.join(fields)}>"
    raw = spark.read.schema(wrapped if data.schemas else envelope).json(list(files))
    events = raw.select("payload.*") if data.schemas else raw
    events.createOrReplaceTempView("raw_events")
    decoded = ", ".join(
        f"{_spark_decode('image.`' + name + '`', kind)} as `{name}`" for name, kind in data.columns
    )
    return spark.sql(
        f"""
        select {decoded}, op, _lsn
        from (
            select if(op = 'd', before, after) as image, op, source.lsn as _lsn
            from raw_events
            where op in ('r', 'c', 'u', 'd')
        ) as events
        """
    )


def _latest_sql(events: str, data: Dataset, keep_deletes: bool) -> str:
    names = ", ".join(f"`{name}`" for name, _ in data.columns)
    where = "" if keep_deletes else "and op != 'd'"
    return f"""
        select {names}, op, _lsn
        from (
            select *, row_number() over (partition by `{KEY}` order by _lsn desc) as _rank
            from {events}
        ) as ranked
        where _rank = 1 {where}
    """


def _properties() -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())


def _spark_checksum(spark: Any, table: str, lsn: str, data: Dataset) -> dict[str, int]:
    df = spark.sql(checksum_sql(table, lsn, [name for name, _ in data.columns]))
    return _checksum_row(df.first(), df.columns)


def _silver_checksum(spark: Any, data: Dataset) -> dict[str, int] | None:
    if not spark.catalog.tableExists(SILVER):
        return None
    return _spark_checksum(spark, SILVER, "cast(_cdc_seq as bigint)", data)


def run_spark_naive(landing: Path) -> dict[str, Any]:
    from benchmarks.spark import session

    data = Dataset.load(landing)
    files = landing_files(landing, data.topic)
    started = time.monotonic()
    spark = session("reference-naive")
    ready = time.monotonic()
    spark.sql("create database if not exists reference")
    decoded_events(spark, files, data).createOrReplaceTempView("events")
    latest = _latest_sql("events", data, keep_deletes=False)
    names = ", ".join(f"`{name}`" for name, _ in data.columns)
    spark.sql(
        f"create or replace table {NAIVE} using iceberg as "
        f"select {names}, _lsn from ({latest}) as latest"
    )
    seconds = time.monotonic() - ready
    return {
        "engine": "spark-naive",
        "session_seconds": round(ready - started, 2),
        "seconds": round(seconds, 2),
        "checksum": _spark_checksum(spark, NAIVE, "_lsn", data),
        "silver_checksum": _silver_checksum(spark, data),
    }


def run_spark_merge(landing: Path, lakehouse: Path, init_from_silver: bool) -> dict[str, Any]:
    from benchmarks.spark import session

    data = Dataset.load(landing)
    state = Path(lakehouse) / "reference_merge_files.json"
    started = time.monotonic()
    spark = session("reference-merge")
    ready = time.monotonic()
    spark.sql("create database if not exists reference")
    names = ", ".join(f"`{name}`" for name, _ in data.columns)
    if init_from_silver:  # start from the pipeline's table (not timed): same state, same files
        spark.sql(
            f"create or replace table {MERGED} using iceberg tblproperties ({_properties()}) "
            f"as select {names}, cast(_cdc_seq as bigint) as _lsn from {SILVER}"
        )
        done = {
            row[0].rsplit("/", 1)[-1]
            for row in spark.sql(
                "select distinct _cdc_file from bronze.bronze_bench__items"
            ).collect()
        }
        state.write_text(json.dumps(sorted(done)))
        ready = time.monotonic()
    done = set(json.loads(state.read_text())) if state.exists() else set()
    files = [f for f in landing_files(landing, data.topic) if f.rsplit("/", 1)[-1] not in done]
    if files:
        decoded_events(spark, files, data).createOrReplaceTempView("batch_events")
        spark.sql(_latest_sql("batch_events", data, keep_deletes=True)).createOrReplaceTempView(
            "batch_latest"
        )
        if not spark.catalog.tableExists(MERGED):
            spark.sql(
                f"create table {MERGED} using iceberg tblproperties ({_properties()}) "
                f"as select {names}, _lsn from batch_latest where op != 'd'"
            )
        else:
            assignments = ", ".join(f"target.`{name}` = batch.`{name}`" for name, _ in data.columns)
            values = ", ".join(f"batch.`{name}`" for name, _ in data.columns)
            spark.sql(
                f"""
                merge into {MERGED} as target
                using batch_latest as batch
                    on target.`{KEY}` = batch.`{KEY}`
                when matched and batch._lsn > target._lsn and batch.op = 'd' then delete
                when matched and batch._lsn > target._lsn then
                    update set {assignments}, target._lsn = batch._lsn
                when not matched and batch.op != 'd' then
                    insert ({names}, _lsn) values ({values}, batch._lsn)
                """
            )
    seconds = time.monotonic() - ready
    state.write_text(json.dumps(sorted(done | {f.rsplit("/", 1)[-1] for f in files})))
    return {
        "engine": "spark-merge",
        "files": len(files),
        "session_seconds": round(ready - started, 2),
        "seconds": round(seconds, 2),
        "checksum": _spark_checksum(spark, MERGED, "_lsn", data),
        "silver_checksum": _silver_checksum(spark, data),
    }


def run_hudi(landing: Path, lakehouse: Path) -> dict[str, Any]:
    """Apply the landing files not applied before to a Hudi table (`<lakehouse>/hudi_items`)."""
    from benchmarks.peers import hudi

    data = Dataset.load(landing)
    path = Path(lakehouse) / "hudi_items"
    state = Path(lakehouse) / "reference_hudi_files.json"
    started = time.monotonic()
    spark = hudi.session()
    ready = time.monotonic()
    done = set(json.loads(state.read_text())) if state.exists() else set()
    files = [f for f in landing_files(landing, data.topic) if f.rsplit("/", 1)[-1] not in done]
    if files:
        events = decoded_events(spark, files, data).withColumnRenamed("op", "_op")
        rows = hudi.debezium_rows(events, [name for name, _ in data.columns])
        options = hudi.options("items", [KEY])
        rows.write.format("hudi").options(**options).mode("append").save(str(path))
    seconds = time.monotonic() - ready
    state.write_text(json.dumps(sorted(done | {f.rsplit("/", 1)[-1] for f in files})))
    spark.read.format("hudi").load(str(path)).createOrReplaceTempView("hudi_items")
    return {
        "engine": "hudi",
        "files": len(files),
        "session_seconds": round(ready - started, 2),
        "seconds": round(seconds, 2),
        "checksum": _spark_checksum(spark, "hudi_items", "_event_lsn", data),
    }


def run_checksum(landing: Path) -> dict[str, Any]:
    from benchmarks.spark import session

    spark = session("checksum")
    return {"silver_checksum": _silver_checksum(spark, Dataset.load(landing))}


def table_files(spark: Any, table: str) -> dict[str, int]:
    """Data files, delete files and snapshots of an Iceberg table."""
    files = spark.sql(
        f"select content, count(*) as n, sum(record_count) as records from {table}.files "
        "group by content"
    ).collect()
    by_content = {row["content"]: (row["n"], row["records"]) for row in files}
    snapshots = spark.sql(f"select count(*) from {table}.snapshots").first()[0]
    return {
        "data_files": int(by_content.get(0, (0, 0))[0]),
        "position_delete_files": int(by_content.get(1, (0, 0))[0]),
        "position_deletes": int(by_content.get(1, (0, 0))[1] or 0),
        "equality_delete_files": int(by_content.get(2, (0, 0))[0]),
        "snapshots": int(snapshots),
    }


def run_read(landing: Path, repeat: int) -> dict[str, Any]:
    """Read the whole silver table (the checksum query) `repeat` times; the best time."""
    from benchmarks.spark import session

    data = Dataset.load(landing)
    spark = session("silver-read")
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        checksum = _silver_checksum(spark, data)
        times.append(time.monotonic() - started)
    return {
        "seconds": round(min(times), 2),
        "all_seconds": [round(t, 2) for t in times],
        "silver_checksum": checksum,
        "files": table_files(spark, SILVER),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.references", description=__doc__)
    parser.add_argument(
        "engine", choices=["duckdb", "spark-naive", "spark-merge", "hudi", "checksum", "read"]
    )
    parser.add_argument("--landing", type=Path, required=True, help="a generated dataset")
    parser.add_argument("--lakehouse", type=Path, help="CDC_LAKEHOUSE_DIR of the pipeline")
    parser.add_argument("--db", type=Path, help="DuckDB database file")
    parser.add_argument("--init-from-silver", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.lakehouse:
        os.environ["CDC_LAKEHOUSE_DIR"] = str(args.lakehouse.resolve())
    landing = args.landing.resolve()
    if args.engine == "duckdb":
        result = run_duckdb(landing, args.db)
    elif args.engine == "spark-naive":
        result = run_spark_naive(landing)
    elif args.engine == "spark-merge":
        result = run_spark_merge(landing, args.lakehouse, args.init_from_silver)
    elif args.engine == "hudi":
        result = run_hudi(landing, args.lakehouse)
    elif args.engine == "checksum":
        result = run_checksum(landing)
    else:
        result = run_read(landing, args.repeat)
    print(json.dumps(result), flush=True)
    # A started JVM keeps non-daemon threads: leave without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
