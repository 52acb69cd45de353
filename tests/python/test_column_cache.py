"""The adapter's columns cache (adapter/dbt/adapters/sparksession/column_cache.py): a relation's
`describe extended` reused within a dbt command until a statement writes the relation.

The statements are the kinds this project's macros and dbt's materializations send; a kept
description after a write would hand a model the columns of a table before its `alter`, so
every kind of write must drop it, and so must a write that ran while it was described.
How many describes a real run saves is measured, not asserted (docs/benchmarks.md): with dbt's
threads, another model's write that names a relation drops it too, by design.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from dbt.adapters.sparksession import column_cache
from dbt_common.invocation import reset_invocation_id

pytestmark = pytest.mark.unit


@dataclass
class Relation:
    schema: str | None
    identifier: str


COMMENT = '/* {"app": "dbt", "node_id": "model.p.customers_history"} */\n'
READS = [
    "describe extended silver.customers",
    f"{COMMENT}select count(*) from silver.customers",
    "show tblproperties silver.customers",
    "  with changes as (select * from silver.customers) select * from changes",
    "explain select 1",
]
WRITES = [
    "merge into silver.customers as target using batch on ...",
    "insert into silver.customers select * from batch",
    "alter table silver.customers add columns (fax string)",
    "create or replace table silver.customers using iceberg as select 1",
    "drop table if exists silver.customers",
    "with batch as (select 1) insert into silver.customers select * from batch",
    "call spark_catalog.system.rewrite_data_files(table => 'silver.customers')",
    "insert overwrite table `silver`.`customers` select * from batch",
    "truncate table silver.customers",
]


class Describer:
    def __init__(self, answer: list[str] | None = None) -> None:
        self.calls = 0
        self.answer = ["customer_id", "company_name"] if answer is None else answer

    def __call__(self) -> list[str]:
        self.calls += 1
        return list(self.answer)


@pytest.fixture(autouse=True)
def new_command() -> None:
    reset_invocation_id()


def test_a_relation_is_described_once_per_command_while_only_reads_run() -> None:
    describe, customers = Describer(), Relation("silver", "customers")
    assert column_cache.columns(customers, describe) == describe.answer
    for sql in READS:
        assert column_cache.is_read(sql), sql
        column_cache.wrote(sql)
        assert column_cache.columns(customers, describe) == describe.answer
    assert describe.calls == 1
    reset_invocation_id()  # the next dbt command describes it again
    column_cache.columns(customers, describe)
    assert describe.calls == 2


@pytest.mark.parametrize("sql", WRITES)
def test_every_kind_of_write_naming_the_relation_forgets_it(sql: str) -> None:
    describe, customers = Describer(), Relation("silver", "customers")
    column_cache.columns(customers, describe)
    assert not column_cache.is_read(sql)
    column_cache.wrote(sql)
    column_cache.columns(customers, describe)
    assert describe.calls == 2


def test_a_write_of_another_relation_keeps_it_and_a_python_model_forgets_all() -> None:
    describe, customers = Describer(), Relation("silver", "customers")
    column_cache.columns(customers, describe)
    column_cache.wrote("merge into silver.orders as target using batch on ...")
    column_cache.columns(customers, describe)
    assert describe.calls == 1
    column_cache.wrote_anything()
    column_cache.columns(customers, describe)
    assert describe.calls == 2


def test_a_write_while_it_is_described_is_not_hidden() -> None:
    customers = Relation("silver", "customers")
    stale = Describer(["customer_id"])

    def described_while_altered() -> list[str]:
        column_cache.wrote("alter table silver.customers add columns (fax string)")
        return stale()

    assert column_cache.columns(customers, described_while_altered) == ["customer_id"]
    fresh = Describer(["customer_id", "fax"])
    assert column_cache.columns(customers, fresh) == ["customer_id", "fax"]
    assert fresh.calls == 1


def test_temporary_views_and_missing_relations_are_always_described() -> None:
    view, missing = Relation(None, "customers__cdc_batch"), Relation("silver", "not_there")
    described, nothing = Describer(), Describer([])
    for _ in range(2):
        column_cache.columns(view, described)
        assert column_cache.columns(missing, nothing) == []
    assert (described.calls, nothing.calls) == (2, 2)


def test_callers_cannot_change_the_kept_columns() -> None:
    customers = Relation("silver", "customers")
    column_cache.columns(customers, Describer()).append("changed by a caller")
    assert column_cache.columns(customers, Describer()) == ["customer_id", "company_name"]
