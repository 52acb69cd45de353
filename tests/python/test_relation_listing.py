"""The adapter lists a schema's relations from the session catalog in one metastore call
(adapter relations.py): the rows must be the ones dbt-spark's `show table extended` gives, which
dbt reads each relation's type and table format from, without the session's temporary views; and
the schemas, the ones `show databases` gives, which dbt creates the missing ones from."""

from __future__ import annotations

from dbt.adapters.sparksession.relations import list_schema, list_schemas
from pyspark.sql import SparkSession


def test_a_schema_lists_as_show_table_extended_lists_it(spark: SparkSession) -> None:
    spark.sql("create database if not exists listing")
    spark.sql("create table if not exists listing.items (id bigint, name string) using parquet")
    spark.sql("create or replace view listing.item_names as select name from listing.items")
    spark.sql("create or replace temporary view listing_batch as select 1 as id")
    shown = [tuple(row) for row in spark.sql("show table extended in listing like '*'").collect()]
    assert any(row[2] for row in shown), "the temporary view is listed by Spark"
    expected = sorted(row for row in shown if not row[2])
    assert [row[1] for row in expected] == ["item_names", "items"]
    assert any("Type: VIEW" in row[3] for row in expected)

    assert sorted(list_schema(spark, "listing") or []) == expected


def test_a_missing_schema_lists_as_none(spark: SparkSession) -> None:
    assert list_schema(spark, "no_such_schema") is None


def test_the_schemas_list_as_show_databases_lists_them(spark: SparkSession) -> None:
    spark.sql("create database if not exists listing_schemas")
    spark.sql("create or replace global temporary view listing_global as select 1 as id")
    shown = sorted(row[0] for row in spark.sql("show databases").collect())
    assert "listing_schemas" in shown and "global_temp" not in shown

    assert sorted(list_schemas(spark)) == shown


def test_the_profile_settings_reach_the_live_session_once_per_dbt_command(
    spark: SparkSession,
) -> None:
    """The listings set the profile's settings on the live session at the first listing of each
    dbt command (so that a long-lived driver's next command runs with its own, e.g. the
    small-input settings of one run), and not again at the command's other listings."""
    from dbt.adapters.sparksession.relations import session
    from dbt_common.invocation import reset_invocation_id

    setting = "spark.sql.shuffle.partitions"
    before = spark.conf.get(setting)
    try:
        reset_invocation_id()
        assert session({setting: "3"}) is spark
        assert spark.conf.get(setting) == "3"
        spark.conf.set(setting, "5")  # as a statement of the command might
        session({setting: "3"})
        assert spark.conf.get(setting) == "5", "set again by a listing of the same command"
        session({setting: "7"})
        assert spark.conf.get(setting) == "7", "other settings are applied"
        reset_invocation_id()  # the driver's next dbt command
        session({setting: "7"})
        session({setting: "7"})
        assert spark.conf.get(setting) == "7"
        spark.conf.set(setting, "5")
        reset_invocation_id()
        session({setting: "7"})
        assert spark.conf.get(setting) == "7", "not set for the next command"
    finally:
        spark.conf.set(setting, before)
