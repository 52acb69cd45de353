"""Which statements the adapter runs with Iceberg commit properties (the package's strategies
commit a silver or history batch with its watermark in one snapshot; test_pipeline_e2e counts
the commits of real runs)."""

from __future__ import annotations

import pytest
from dbt.adapters.sparksession.commit_properties import requested


def test_a_statement_names_its_commit_properties_after_dbts_query_comment() -> None:
    sql = (
        '/* {"app": "dbt", "node_id": "model.x.customers"} */\n'
        '/* iceberg commit properties: {"cdc.watermark": "2026-01-01 00:00:00.5", '
        '"cdc.run.inserted": 3} */\n'
        "merge into silver.customers as target using batch on target.id = batch.id"
    )
    assert requested(sql) == {"cdc.watermark": "2026-01-01 00:00:00.5", "cdc.run.inserted": "3"}


def test_other_statements_run_as_they_are() -> None:
    assert requested("select 1") is None
    assert requested("/* iceberg commit properties */ select 1") is None


def test_properties_that_are_not_an_object_are_an_error() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        requested('/* iceberg commit properties: {"a": [1} */ select 1')
