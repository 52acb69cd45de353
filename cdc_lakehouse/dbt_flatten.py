"""Glue between a dbt Python flatten model and the landing reader / decoder.

A flatten model is three lines (see python_models/flatten/): it hands its dbt config to
`flatten_model`, which lists the topic's landing files, skips those already loaded (incremental
runs), and returns the decoded change rows, rejects included.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.decode import decode_changes
from cdc_lakehouse.landing import list_landing_files, read_landing_lines
from cdc_lakehouse.spec import TableSpec


def loaded_files(session: SparkSession, relation: str) -> set[str]:
    """Landing files (relative paths) already present in a flatten table."""
    rows = session.table(relation).select("_cdc_file").distinct().collect()
    return {row[0] for row in rows}


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
    files = list_landing_files(session, root, spec.topic)
    if dbt.is_incremental:
        done = loaded_files(session, str(dbt.this))
        files = [f for f in files if f.relative not in done]
        if not files:
            # Nothing new landed: an empty batch of the table's own shape, without planning
            # the decoder (a column added to `cdc_table` appears with the next landed file).
            return session.table(str(dbt.this)).where("false")
    loaded_at = datetime.now(UTC)
    return decode_changes(read_landing_lines(session, files), spec, loaded_at=loaded_at)
