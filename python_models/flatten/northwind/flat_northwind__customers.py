"""Decode the landed customers change events into typed rows (rejects kept, with the reason)."""

from cdc_lakehouse.dbt_flatten import flatten_model


def landing(dbt):
    """Never called. dbt reads a Python model's inputs from its code: this call names the topic's
    landing folder (a dbt source, _northwind__sources.yml) as this model's input, for lineage and
    `dbt source freshness`. Loading it would fail while nothing has landed in the topic yet, and
    flatten_model lists and reads the files itself (it keeps line numbers and offsets)."""
    return dbt.source("landing_northwind", "customers")


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
