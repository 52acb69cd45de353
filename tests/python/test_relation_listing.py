"""The adapter lists a schema's relations from the session catalog in one metastore call
(adapter relations.py): the rows must be the ones dbt-spark's `show table extended` gives, which
dbt reads each relation's type and table format from, without the session's temporary views; and
the schemas, the ones `show databases` gives, which dbt creates the missing ones from."""

from __future__ import annotations

from dbt.adapters.sparksession.relations import (
    STATEMENT_COMMANDS,
    list_schema,
    list_schemas,
    start_session_early,
)
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


def test_the_early_session_start_knows_dbt_s_command_names() -> None:
    """A new process creates its session while dbt parses (the adapter's __init__) for the
    commands that run statements, named as dbt-core names them (`flags.WHICH`): a name dbt does
    not use would silently start nothing, and a command that runs none would start a JVM."""
    from dbt.cli.main import cli

    names: set[str] = set()

    def walk(group: object) -> None:
        for name, command in getattr(group, "commands", {}).items():
            names.add(name)
            walk(command)

    walk(cli)
    assert names >= STATEMENT_COMMANDS, STATEMENT_COMMANDS - names
    assert {"build", "run", "test", "compile", "generate"} <= STATEMENT_COMMANDS
    assert (
        not {"parse", "ls", "list", "deps", "debug", "clean", "init", "serve"} & STATEMENT_COMMANDS
    )


def test_a_live_session_is_not_started_again(spark: SparkSession) -> None:
    """In a long-lived driver the session is live: no thread, the command's first listing
    applies the profile's settings as before."""
    assert start_session_early({"spark.sql.shuffle.partitions": "3"}) is None
