"""Decode the landed products change events into typed rows (rejects kept, with the reason)."""

from cdc_lakehouse.dbt_flatten import flatten_model


def model(dbt, session):
    return flatten_model(
        dbt,
        session,
        landing=dbt.config.get("cdc_landing"),
        table=dbt.config.get("cdc_table"),
        root=dbt.config.get("cdc_landing_root"),
    )
