"""Glue between a dbt Python bronze model and the landing reader / decoder.

A bronze model is three lines (see python_models/bronze/): it hands its dbt config to
`flatten_model`, which lists the topic's landing files, skips those already loaded (incremental
runs), and returns the decoded change rows, rejects included.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampNTZType, TimestampType

from cdc_lakehouse.bronze.decode import (
    backfills,
    decode_changes,
    quote_identifier,
    survey_aggregates,
    survey_values,
)
from cdc_lakehouse.bronze.extracts import list_extracts, with_extract_deletes
from cdc_lakehouse.bronze.landing import LandingFile, list_landing_files, read_surveyed_lines
from cdc_lakehouse.bronze.spec import TableSpec

# The names of the landing files a bronze table holds, kept beside it in a small table
# (`<table>__cdc_loaded_files`: one row per file, and the version of the bronze table they
# describe: Iceberg's snapshot id, Delta's log version, Hudi's instant), so that an incremental
# run does not scan the file column of the whole change log. The model hands the names to the
# bronze post-hook (cdc_record_loaded_files) in a session view of the same name; the post-hook
# writes the table after the batch is committed. The table is trusted only while the bronze
# table is still at that version: the pre-hook (cdc_forget_stale_loaded_files, where the
# version is read) drops it after any other commit (a failed post-hook, a compaction, a write
# from elsewhere), which sends the run back to the scan.
LEDGER_SUFFIX = "__cdc_loaded_files"


def session_table_format(session: SparkSession) -> str:
    """The format of the tables the session's catalog holds: the profile sets Delta's catalog
    when CDC_TABLE_FORMAT=delta, Hudi's when hudi, Iceberg's otherwise. (A Python model's
    `dbt.config.get` sees only the keys its own file names, so the model's `file_format` is
    not readable here.)"""
    catalog = session.conf.get("spark.sql.catalog.spark_catalog", "").lower()
    return next((f for f in ("delta", "hudi") if f in catalog), "iceberg")


def loaded_files(session: SparkSession, relation: str) -> tuple[set[str], bool]:
    """Landing files (relative paths) already present in a bronze table, and whether its
    ledger (`<relation>__cdc_loaded_files`, checked by the model's pre-hook) said so (False:
    they were read from the table)."""
    ledger = relation + LEDGER_SUFFIX
    if session.catalog.tableExists(ledger):
        return {row[0] for row in session.table(ledger).select("file").collect()}, True
    rows = session.table(relation).select("_cdc_file").distinct().collect()
    return {row[0] for row in rows if row[0] is not None}, False


def hand_over_loaded_files(session: SparkSession, identifier: str, files: set[str]) -> None:
    """The session view the bronze post-hook writes the ledger from."""
    names = session.createDataFrame([(name,) for name in sorted(files)], "file string")
    names.createOrReplaceTempView(identifier + LEDGER_SUFFIX)


# Columns being filled from `_cdc_undeclared` (see fill_declared_columns), named in a table
# property from before they are added until their rows are filled, so a run that stops in
# between finishes the job next time.
PENDING_PROPERTY = "cdc.backfill-pending"


def fill_declared_columns(session: SparkSession, relation: str, spec: TableSpec) -> list[str]:
    """Columns declared since rows were loaded without them (schemas off: their fields were
    kept as text in `_cdc_undeclared`) are added to the bronze table and filled, for every row
    already loaded, with the value the declared type decodes (as if declared from the start:
    unchanged-TOAST placeholders are reported in `_cdc_unavailable_columns`). No landing file
    is read again. Silver and histories then resolve their change log again (see
    cdc_has_backfilled_columns). A value that does not decode as the declared type stops the run
    before anything is written. Returns the columns filled."""
    table = session.table(relation)
    present = set(table.columns)
    if "_cdc_undeclared" not in present:
        return []
    properties = {row[0]: row[1] for row in session.sql(f"show tblproperties {relation}").collect()}
    pending = [c for c in properties.get(PENDING_PROPERTY, "").split(",") if c in spec.columns]
    new = [c for c in spec.columns if c not in present]
    names = pending + [c for c in new if c not in pending]
    if not names:
        return []
    fills = backfills(spec, names)
    holds = " or ".join(f"{f.raw} is not null" for f in fills)
    failed = " or ".join(f.failed for f in fills)
    where = f"_cdc_undeclared is not null and ({holds})"
    # One scan: a row to fill, a row that cannot be filled first if there is one.
    first = session.sql(
        f"select _cdc_file, _cdc_line, _cdc_undeclared, "
        f"coalesce(_cdc_reject_reason is null and ({failed}), false) as bad "
        f"from {relation} where {where} order by bad desc limit 1"
    ).collect()
    if not first:
        return []  # nothing to fill: dbt adds the columns (on_schema_change)
    if first[0]["bad"]:
        declared = ", ".join(f"{f.name} {spec.columns[f.name]}" for f in fills)
        raise ValueError(
            f"{relation}: rows already loaded hold values that do not decode as declared "
            f"({declared}); one at {first[0][0]} line {first[0][1]}: {first[0][2]}. Fix the "
            "declared type in cdc_table.columns and run again (nothing was changed)."
        )
    listed = ",".join(names)
    session.sql(f"alter table {relation} set tblproperties ('{PENDING_PROPERTY}' = '{listed}')")
    added = [f for f in fills if f.name in new]
    if added:
        columns = ", ".join(f"{quote_identifier(f.name)} {f.out}" for f in added)
        session.sql(f"alter table {relation} add columns ({columns})")
    flagged = ", ".join(f"if({f.unavailable}, '{f.name}', NULL)" for f in fills)
    unavailable = (
        "nullif(array_join(array_distinct(filter(concat(split(coalesce("
        f"_cdc_unavailable_columns, ''), ','), array({flagged})), c -> c != '')), ','), '')"
    )
    sets = ", ".join(f"{quote_identifier(f.name)} = {f.value}" for f in fills)
    session.sql(
        f"update {relation} set {sets}, _cdc_unavailable_columns = {unavailable} where {where}"
    )
    session.sql(f"alter table {relation} unset tblproperties ('{PENDING_PROPERTY}')")
    return names


def flatten_model(
    dbt: Any,
    session: SparkSession,
    *,
    landing: Mapping[str, Any] | None,
    table: Mapping[str, Any] | None,
    root: str | None,
) -> DataFrame:
    """Decoded change rows for the model's topic: every landing file not loaded yet."""
    if not table:
        raise ValueError(f"{dbt.this}: set `cdc_table` (topic or name, key, columns) in its yml")
    if not root:
        raise ValueError(f"{dbt.this}: `cdc_landing_root` is not set (dbt_project.yml)")
    spec = TableSpec.from_config(landing, table)
    files = list_landing_files(session, root, spec.topic, spec.layout)
    # Complete extracts of a query-based table (extract-diff deletes, see extracts.py): one is
    # new while its manifest is not among the loaded files.
    extracts = list_extracts(session, root, spec) if spec.extracts else []
    identifier = dbt.this.identifier
    # A view a failed run left in this session must not be recorded by this run's post-hook.
    session.catalog.dropTempView(identifier + LEDGER_SUFFIX)
    done: set[str] = set()
    loaded: list = []
    if dbt.is_incremental:
        fill_declared_columns(session, str(dbt.this), spec)
        done, recorded = loaded_files(session, str(dbt.this))
        files = [f for f in files if f.relative not in done]
        loaded = [s for s in extracts if s.manifest in done]
        extracts = [s for s in extracts if s.manifest not in done]
        if not files and not extracts:
            if not recorded:
                hand_over_loaded_files(session, identifier, done)
            # Nothing new landed: an empty batch of the table's own shape, without planning
            # the decoder (a column added to `cdc_table` appears with the next landed file).
            return session.table(str(dbt.this)).where("false")
    # An extract's files are read whole (its key set must be complete), even those a run that
    # stopped half-way already loaded: a repeated row is a copy the resolution collapses.
    extract_files = [f for s in extracts for f in s.files if s.problem is None]
    new = {f.relative for f in files} | {f.relative for f in extract_files}
    hand_over_loaded_files(session, identifier, done | new | {s.manifest for s in extracts})
    loaded_at = datetime.now(UTC)
    decoded = decode_landing_files(session, files + extract_files, spec, loaded_at)
    if extracts or loaded:
        history = session.table(str(dbt.this)) if dbt.is_incremental else None
        decoded = with_extract_deletes(decoded, extracts, spec, history, loaded_at, loaded)
    return for_table_format(decoded, session_table_format(session))


def decode_landing_files(
    session: SparkSession,
    files: list[LandingFile],
    spec: TableSpec,
    loaded_at: datetime | None = None,
) -> DataFrame:
    """The decoded change rows of landing files (see decode_changes). The survey the decoder
    needs (the embedded schemas, the fields of schema-less lines) is found in the pass that
    numbers the lines (read_surveyed_lines), so the files are read twice, not three times (the
    10M-event initial load's survey was a pass of its own over 6.6 GB, docs/benchmarks.md)."""
    survey = survey_aggregates(F.col("value"), spec.shape)
    lines, found = read_surveyed_lines(session, files, survey)
    schema_texts, bare_fields = survey_values(found)
    return decode_changes(
        lines, spec, loaded_at=loaded_at, schema_texts=schema_texts, bare_fields=bare_fields
    )


def for_table_format(frame: DataFrame, table_format: str) -> DataFrame:
    """Hudi (1.0.2, the newest bundle for Spark 3.5) has no `timestamp_ntz`: its Avro schema
    conversion fails with "Unexpected type TimestampNTZType" (apache/hudi#17917 and the 1.1 line
    add it). On Hudi a local date-time (PostgreSQL `timestamp`) is stored as a `timestamp` of
    the same wall-clock time in UTC, the session time zone of every profile."""
    if table_format != "hudi":
        return frame
    columns = [
        F.col(f"`{field.name}`").cast(TimestampType()).alias(field.name)
        if isinstance(field.dataType, TimestampNTZType)
        else F.col(f"`{field.name}`")
        for field in frame.schema.fields
    ]
    return frame.select(*columns)
