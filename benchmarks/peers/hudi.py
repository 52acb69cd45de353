"""Apache Hudi's own Debezium handling on the sample's change events: the Hudi Spark writer set
up as HoodieStreamer's `PostgresDebeziumSource` sets it up (the reference deployment on EMR):
rows flattened to the row image (`before` for deletes) plus `_change_operation_type` and
`_event_lsn`; record key = the primary key; precombine (ordering) field = `_event_lsn`;
payload `PostgresDebeziumAvroPayload` (keeps the stored record when its LSN is newer, drops the
record on `d`, and fills a column that holds `__debezium_unavailable_value` from the stored
record); copy-on-write upserts, one commit per batch of the delivery.

A TRUNCATE event has no row image, so its record key is null: the batch that holds one is
written once as HoodieStreamer would write it (the error is recorded), then without it (what a
user has to do: filter `op = 't'`). Writes `<out>/hudi/<delivery>/<table>.jsonl` (final rows)
and prints one JSON line (seconds per delivery and batch, the errors met).

    python -m benchmarks.peers.hudi --out artifacts/peers [--delivery one_batch ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers.plan import (
    CODEGEN_SETTINGS,
    DELIVERIES,
    DRIVER_JAVA_OPTIONS,
    REPO,
    batch_names,
    read_plan,
    write_state,
)

JAR_DIR = REPO / "jars" / "peers" / "hudi"
PAYLOAD = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"


def session() -> Any:
    from pyspark.sql import SparkSession

    jars = ",".join(str(p) for p in sorted(JAR_DIR.glob("hudi-spark*.jar")))
    if not jars:
        raise SystemExit(f"no Hudi bundle in {JAR_DIR}: run `make peers-install`")
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", jars)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
    )
    for setting, value in CODEGEN_SETTINGS.items():
        builder = builder.config(setting, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def options(table: str, key: list[str]) -> dict[str, str]:
    return {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": ",".join(key),
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        "hoodie.datasource.write.precombine.field": "_event_lsn",
        "hoodie.datasource.write.payload.class": PAYLOAD,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.upsert.shuffle.parallelism": "4",
        "hoodie.insert.shuffle.parallelism": "4",
    }


def debezium_rows(events: Any, columns: list[str], extra: Sequence[str] = ()) -> Any:
    """Change events (the row image, `_op`, `_lsn`) in the shape PostgresDebeziumSource hands the
    writer: the columns, `_change_operation_type`, `_event_lsn` (and `extra` columns as they are).
    Hudi 0.15's Avro conversion has no timestamp_ntz ("Unexpected type TimestampNTZType"): those
    columns go in as timestamps (the sessions run in UTC: the same wall-clock values)."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType.typeName() for f in events.schema.fields}
    image = [
        F.col(f"`{c}`").cast("timestamp").alias(c)
        if types[c] == "timestamp_ntz"
        else F.col(f"`{c}`")
        for c in columns
    ]
    return events.select(
        *image,
        F.col("_op").alias("_change_operation_type"),
        F.col("_lsn").alias("_event_lsn"),
        *[F.col(c) for c in extra],
    )


def first_line(error: BaseException) -> str:
    """The root cause of a Java error: its last `Caused by:` line, else its first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    return (causes[-1] if causes else lines[0] if lines else type(error).__name__)[:300]


def apply_delivery(
    spark: Any, out: Path, delivery: str, batches: list[Any], table: str, meta: dict[str, Any]
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    path = out / "hudi" / delivery / table
    shutil.rmtree(path, ignore_errors=True)
    events = spark.read.parquet(str(out / "events" / table))
    flattened = debezium_rows(events, meta["columns"], extra=["_file"])
    columns = [F.col(f"`{c}`") for c in meta["columns"]]
    opts = options(table, meta["key"])
    seconds, errors = [], []
    for batch in batches:
        started = time.monotonic()
        rows = flattened.where(F.col("_file").isin(batch_names(batch))).drop("_file")
        if rows.where("_change_operation_type = 't'").limit(1).count():
            try:
                rows.write.format("hudi").options(**opts).mode("append").save(str(path))
            except Exception as error:  # noqa: BLE001 - the error is the finding
                errors.append(f"truncate event: {first_line(error)}")
            rows = rows.where("_change_operation_type != 't'")
        rows.write.format("hudi").options(**opts).mode("append").save(str(path))
        seconds.append(round(time.monotonic() - started, 2))
    final = spark.read.format("hudi").load(str(path)).select(*columns)
    write_state(out / "hudi" / delivery / f"{table}.jsonl", [r.asDict() for r in final.collect()])
    return {"seconds": seconds, "errors": errors}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.hudi", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--delivery", action="append", choices=DELIVERIES)
    args = parser.parse_args(argv)
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = args.out.resolve()
    plan = read_plan(out)
    started = time.monotonic()
    spark = session()
    report: dict[str, Any] = {"session_seconds": round(time.monotonic() - started, 2)}
    import pyspark

    report["versions"] = {"hudi": JAR_DIR.glob("hudi-spark*.jar").__next__().stem.split("-")[-1],
                          "spark": pyspark.__version__}  # fmt: skip
    for delivery in args.delivery or DELIVERIES:
        at = time.monotonic()
        tables = {
            table: apply_delivery(spark, out, delivery, plan["deliveries"][delivery], table, meta)
            for table, meta in plan["tables"].items()
        }
        report[delivery] = {"seconds": round(time.monotonic() - at, 2), "tables": tables}
    print(json.dumps(report), flush=True)
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
