"""Spark's own AUTO CDC on the sample's change events: a Spark Declarative Pipelines project
(pyspark 4.2, `spark-pipelines run`) with one streaming table per source table, fed by
`create_auto_cdc_flow(keys=<primary key>, sequence_by="_lsn", apply_as_deletes="_op = 'd'",
stored_as_scd_type=1)` from a streaming Parquet source. TRUNCATE events are left out (the
open-source API has no `apply_as_truncates`).

With `--scd 2`, the same flows with `stored_as_scd_type=2` and
`track_history_except_column_list` = the columns the project's history model ignores (a change
of only those opens no version), in pyspark 4.3.0 (.venv-peers-spark43; 4.2 has SCD type 1
only) on the same target (the 4.2.0 test jar: Maven Central has none of 4.3.0); each version is
read with its `__START_AT` / `__END_AT` (the `_lsn` that opened and closed it) into
`<out>/auto_cdc_scd2/<delivery>/<table>.jsonl`, compared by benchmarks.peers.history.

The target. AUTO CDC writes through DataSource V2 MERGE and refuses a table that does not
implement `SupportsRowLevelOperations`: Delta 4.4 (`--target delta`) is refused, and Iceberg has
no runtime for Spark 4.2. So the default target (`memory`) is Spark's own reference
implementation of that interface, `InMemoryRowLevelOperationTable` (spark-catalyst's test jar),
and the state lives as long as one run: a delivery's batches land as one Parquet file each and
one run applies them, one micro-batch per file (`maxFilesPerTrigger=1`, oldest first); a
materialized view copies each final table to Parquet for the comparison. The merge semantics
are AUTO CDC's; its time here is not a storage format's.

Runs in its own virtual environment (`make peers-install`: .venv-peers, jars/peers/spark4/):

    .venv-peers/bin/python -m benchmarks.peers.auto_cdc --out artifacts/peers [--target delta]
    .venv-peers-spark43/bin/python -m benchmarks.peers.auto_cdc --out artifacts/peers --scd 2

Writes `<out>/auto_cdc/<delivery>/<table>.jsonl`; prints one JSON line (seconds, errors). A
refused target is recorded with its error and the other deliveries are not attempted (the
refusal does not depend on the data).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
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

JAR_DIR = REPO / "jars" / "peers" / "spark4"
EXCLUDED = ["_op", "_lsn", "_tx", "_file", "_line"]
# SCD type 2: the interval of each version, in `sequence_by`'s type (the `_lsn`)
INTERVAL_COLUMNS = ["__START_AT", "__END_AT"]
TARGETS = {
    "memory": {
        "jars": "spark-catalyst_*-tests.jar",
        "settings": {
            # shared: the flow's foreachBatch sessions must see the tables the pipeline created
            "spark.sql.catalog.cdc": "org.apache.spark.sql.connector.catalog."
            "SharedTablesInMemoryRowLevelOperationTableCatalog",
        },
        "prefix": "cdc.default.",
        "format": None,
    },
    "delta": {
        "jars": "delta-*.jar",
        "settings": {
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        },
        "static": "--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
        "prefix": "spark_catalog.default.",
        "format": "delta",
    },
}

FLOWS = """\
from pyspark import pipelines as dp

TABLES = {tables!r}


def _flows(table, meta):
    target = {prefix!r} + table

    @dp.temporary_view(name=table + "_events")
    def events():
        return (
            spark.readStream.option("maxFilesPerTrigger", 1)
            .schema(meta["schema"])
            .parquet(meta["folder"])
            .where("_op != 't'")
        )

    dp.create_streaming_table(target, format={format!r})
    dp.create_auto_cdc_flow(
        target=target,
        source=table + "_events",
        keys=meta["key"],
        sequence_by="_lsn",
        apply_as_deletes="_op = 'd'",
        except_column_list={excluded!r},
        **meta["scd"],
    )

    @dp.materialized_view(name="spark_catalog.default." + table + "_final", format="parquet")
    def final():
        return spark.read.table(target).select(*meta["columns"], *meta["interval_columns"])


for table, meta in TABLES.items():
    _flows(table, meta)
"""


def _jars(pattern: str) -> str:
    jars = sorted(JAR_DIR.glob(pattern))
    if not jars:
        raise SystemExit(f"no {pattern} in {JAR_DIR}: run `make peers-install`")
    return ",".join(str(j) for j in jars)


def _spec(name: str, project: Path, settings: dict[str, str]) -> str:
    """The pipeline spec; only SQL settings go there (each flow sets them again)."""
    lines = [f"name: {name}", f"storage: file://{project}/storage", "configuration:"]
    settings = {
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        **CODEGEN_SETTINGS,
        **settings,
    }
    lines += [f"  {k}: {json.dumps(v)}" for k, v in settings.items()]
    lines += ["libraries:", "  - glob:", "      include: transformations/**"]
    return "\n".join(lines) + "\n"


def _error(output: str) -> str:
    for line in output.splitlines():
        if line.startswith("Error:") or "Exception:" in line:
            return line.removeprefix("Error: ").strip()[:400]
    return output.strip().splitlines()[-1][:400] if output.strip() else "no output"


def _spark_type(arrow_type: Any) -> str:
    import pyarrow as pa

    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_list(arrow_type):
        return f"array<{_spark_type(arrow_type.value_type)}>"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz else "timestamp_ntz"
    return {
        "string": "string", "large_string": "string", "int32": "int", "int64": "bigint",
        "bool": "boolean", "binary": "binary", "date32[day]": "date", "double": "double",
    }[str(arrow_type)]  # fmt: skip


def _scd_options(scd: int, meta: dict[str, Any]) -> dict[str, Any]:
    """create_auto_cdc_flow's SCD arguments: type 2 tracks history except in the columns the
    project's history model ignores (the same question asked of both)."""
    if scd == 1:
        return {"stored_as_scd_type": 1}
    options: dict[str, Any] = {"stored_as_scd_type": 2}
    if meta["history_ignore"]:
        options["track_history_except_column_list"] = meta["history_ignore"]
    return options


def results_folder(out: Path, scd: int) -> Path:
    return out / ("auto_cdc" if scd == 1 else "auto_cdc_scd2")


def apply_delivery(
    out: Path, delivery: str, plan: dict[str, Any], target: str, scd: int = 1
) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    spec = TARGETS[target]
    root = results_folder(out, scd) / delivery
    shutil.rmtree(root, ignore_errors=True)
    project, warehouse = root / "project", root / "warehouse"
    (project / "transformations").mkdir(parents=True)
    tables = {}
    stamp = time.time() - 10_000
    for table, meta in plan["tables"].items():
        events = pq.read_table(out / "events" / table)
        folder = root / "source" / table
        folder.mkdir(parents=True)
        for number, batch in enumerate(plan["deliveries"][delivery]):
            names = pa.array(batch_names(batch), type=pa.string())
            path = folder / f"batch-{number:03d}.parquet"
            pq.write_table(events.filter(pc.is_in(events["_file"], value_set=names)), path)
            os.utime(path, (stamp + 10 * number, stamp + 10 * number))  # the source's order
        ddl = ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in events.schema)
        tables[table] = {
            "key": meta["key"], "schema": ddl, "folder": str(folder), "columns": meta["columns"],
            "scd": _scd_options(scd, meta),
            "interval_columns": INTERVAL_COLUMNS if scd == 2 else [],
        }  # fmt: skip
    (project / "transformations" / "flows.py").write_text(
        FLOWS.format(tables=tables, excluded=EXCLUDED, prefix=spec["prefix"], format=spec["format"])
    )
    (project / "spark-pipeline.yml").write_text(
        _spec(f"peers_{delivery}", project, spec["settings"])
    )
    submit = (
        f"--jars {_jars(spec['jars'])} --conf spark.sql.warehouse.dir={warehouse} "
        f"--driver-java-options {shlex.quote(DRIVER_JAVA_OPTIONS)} "
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        # static settings: the local Spark Connect server's JVM starts with them
        "PYSPARK_SUBMIT_ARGS": submit + spec.get("static", "") + " pyspark-shell",
        "TZ": "UTC",
    }
    started = time.monotonic()
    done = subprocess.run(
        ["spark-pipelines", "run", "--spec", str(project / "spark-pipeline.yml")],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    seconds = round(time.monotonic() - started, 2)
    (root / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        return {"seconds": seconds, "errors": [_error(done.stdout + "\n" + done.stderr)]}
    for table in plan["tables"]:
        rows = pq.read_table(warehouse / f"{table}_final").to_pylist()
        write_state(root / f"{table}.jsonl", rows)
    return {"seconds": seconds, "errors": []}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.auto_cdc", description=__doc__
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--delivery", action="append", choices=DELIVERIES)
    parser.add_argument("--target", choices=sorted(TARGETS), default="memory")
    parser.add_argument("--scd", type=int, choices=(1, 2), default=1)
    args = parser.parse_args(argv)
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = args.out.resolve()
    plan = read_plan(out)
    import pyspark

    report: dict[str, Any] = {
        "versions": {"spark": pyspark.__version__, "target": args.target, "scd": args.scd},
    }
    refused = None
    for delivery in args.delivery or DELIVERIES:
        if refused:
            report[delivery] = {"seconds": None, "errors": [f"not run: {refused}"]}
            continue
        report[delivery] = apply_delivery(out, delivery, plan, args.target, args.scd)
        if report[delivery]["errors"]:
            refused = report[delivery]["errors"][-1]
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
