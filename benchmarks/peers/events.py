"""The sample's change events as the peers get them, and the cases they are judged on.

The events are the sample's landing files decoded to typed columns by this project's decoder,
with each table's registry entry: the rows its bronze model holds after loading every file
(cdc_lakehouse.bronze), without a lakehouse. They are what a Debezium Avro converter and a
schema registry hand HoodieStreamer, so that the comparison is about applying changes, not about
parsing JSON. Where the decoder marked a column as
unchanged TOAST (`_cdc_unavailable_columns`), the column gets back what Debezium writes there,
the placeholder `__debezium_unavailable_value` (text; its bytes for bytea; a one-element array
for text[]). Written to `<out>/events/<table>/` (Parquet): the table's columns, `_op`, `_lsn`
(bigint), `_tx`, `_file` (the sample file name), `_line`.

The cases (`<out>/cases.json`: table -> case -> keys, each key a JSON list) are read off the
events, not declared by hand:
- `toast`: keys with an event that carries the placeholder;
- `truncate`: keys with an event before a TRUNCATE of their table;
- `pk_change`: keys deleted or created by a transaction that deletes exactly one key and creates
  exactly one other (an UPDATE of the primary key: Debezium emits a delete and a create);
- `delete_reinsert`: keys deleted, then created again (the sample's re-inserts come in a later
  transaction than the delete);
- `deleted`: other keys with a delete;
- `other`: every remaining key.

    python -m benchmarks.peers.events --out artifacts/peers
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers.plan import LANDING, REPO, TOAST_PLACEHOLDER, read_plan

CASES = ("toast", "truncate", "pk_change", "delete_reinsert", "deleted", "other")


def _restored(name: str, data_type: Any) -> str:
    """SQL: the column, or Debezium's placeholder where bronze flagged it unavailable."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StringType):
        placeholder = f"'{TOAST_PLACEHOLDER}'"
    elif isinstance(data_type, T.BinaryType):
        placeholder = f"cast('{TOAST_PLACEHOLDER}' as binary)"
    elif isinstance(data_type, T.ArrayType) and isinstance(data_type.elementType, T.StringType):
        placeholder = f"array('{TOAST_PLACEHOLDER}')"
    else:
        return f"`{name}`"
    flagged = f"array_contains(split(coalesce(_cdc_unavailable_columns, ''), ','), '{name}')"
    return f"if({flagged}, {placeholder}, `{name}`) as `{name}`"


def decoded_changes(spark: Any, table: str) -> Any:
    """Every landing file of the table's topic in the sample, decoded as its bronze model
    decodes them (flatten_model: the registry's `cdc_table`, the landing reader, the decoder)."""
    from cdc_lakehouse.bronze.decode import decode_changes
    from cdc_lakehouse.bronze.landing import list_landing_files, read_landing_lines
    from cdc_lakehouse.tables import registry

    spec = registry.table(REPO, table, source="northwind").spec
    files = list_landing_files(spark, str(LANDING), spec.topic, spec.layout)
    return decode_changes(read_landing_lines(spark, files), spec)


def export_events(spark: Any, table: str, meta: dict[str, Any], out: Path) -> Any:
    bronze = decoded_changes(spark, table)
    bronze.createOrReplaceTempView(f"bronze_northwind__{table}")
    types = {f.name: f.dataType for f in bronze.schema.fields}
    columns = ", ".join(_restored(c, types[c]) for c in meta["columns"])
    events = spark.sql(
        f"""
        select {columns}, _cdc_op as _op, cast(_cdc_seq as bigint) as _lsn, _cdc_tx_id as _tx,
            -- nullable, as a bronze table's column (the decoder knows it is never null): the
            -- peers get the schema they got when the events were read from bronze
            nullif(regexp_extract(_cdc_file, '[^/]+$', 0), '') as _file, _cdc_line as _line
        from bronze_northwind__{table}
        where _cdc_reject_reason is null
        """
    )
    events.write.mode("overwrite").parquet(str(out / "events" / table))
    return spark.read.parquet(str(out / "events" / table))


def cases_of(spark: Any, table: str, meta: dict[str, Any], events: Any) -> dict[str, list[str]]:
    events.createOrReplaceTempView("e")
    key = "to_json(array(" + ", ".join(f"`{k}`" for k in meta["key"]) + "))"

    def keys(sql: str) -> set[str]:
        return {row[0] for row in spark.sql(sql).collect()}

    every = keys(f"select distinct {key} from e where _op != 't'")
    toast = keys(
        f"select distinct {key} from e where _op != 't' and ("
        + " or ".join(
            f"cast(`{c}` as string) like '%{TOAST_PLACEHOLDER}%'" for c in meta["columns"]
        )
        + ")"
    )
    truncate = keys(
        f"select distinct {key} from e "
        f"where _op != 't' and _lsn < (select max(_lsn) from e where _op = 't')"
    )
    spark.sql(
        f"""
        select _tx, collect_set(if(_op = 'd', {key}, null)) as deleted,
            collect_set(if(_op = 'c', {key}, null)) as created
        from e where _op in ('c', 'd') and _tx is not null group by _tx
        """
    ).createOrReplaceTempView("tx")
    reinsert = keys(
        f"select {key} from e group by {key} "
        "having max(if(_op = 'c', _lsn, null)) > min(if(_op = 'd', _lsn, null))"
    )
    pk_change = keys(
        "select explode(array_union(deleted, created)) from tx "
        "where size(deleted) = 1 and size(created) = 1 and deleted[0] != created[0]"
    )
    deleted = keys(f"select distinct {key} from e where _op = 'd'")
    cases = {
        "toast": toast,
        "truncate": truncate,
        "pk_change": pk_change,
        "delete_reinsert": reinsert,
    }
    special = set().union(*cases.values())
    cases["deleted"] = deleted - special
    cases["other"] = every - special - cases["deleted"]
    return {case: sorted(cases[case]) for case in CASES}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.events", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    # the session's own metastore and warehouse (the profile's), empty: nothing is stored
    os.environ["CDC_LAKEHOUSE_DIR"] = str(out / "events-session")
    os.environ["CDC_TABLE_FORMAT"] = "iceberg"
    from benchmarks.spark import session

    spark = session("peers-events")
    # INT64 microseconds with the UTC flag for timestamps (Spark 3.5 writes INT96 by default,
    # which other readers take as a timestamp without time zone)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    plan = read_plan(out)
    cases = {}
    for table, meta in plan["tables"].items():
        events = export_events(spark, table, meta, out)
        cases[table] = cases_of(spark, table, meta, events)
    (out / "cases.json").write_text(json.dumps(cases, indent=1))
    counts = {t: {c: len(k) for c, k in v.items()} for t, v in cases.items()}
    print(json.dumps({"cases": counts}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
