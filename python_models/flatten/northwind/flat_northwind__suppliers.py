"""Decode the landed suppliers change events into typed rows (rejects kept, with the reason)."""

from cdc_lakehouse.dbt_flatten import flatten_model


def model(dbt, session):
    # dbt-core makes a Python model a table unless the model itself (or its yml entry) names
    # the materialization; the folder config in dbt_project.yml is not enough.
    dbt.config(materialized="incremental")
    return flatten_model(
        dbt,
        session,
        landing=dbt.config.get("cdc_landing"),
        table=dbt.config.get("cdc_table"),
        root=dbt.config.get("cdc_landing_root"),
    )
