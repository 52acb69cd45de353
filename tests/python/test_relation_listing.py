"""The adapter lists a schema's relations from the session catalog in one metastore call
(adapter relations.py): the rows must be the ones dbt-spark's `show table extended` gives, which
dbt reads each relation's type and table format from, without the session's temporary views."""

from __future__ import annotations

from dbt.adapters.sparksession.relations import list_schema
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
