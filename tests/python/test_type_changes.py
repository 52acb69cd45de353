"""What an incremental build does when a batch's column type differs from the table's
(adapter/dbt/adapters/sparksession/type_changes.py)."""

from __future__ import annotations

import pytest
from dbt.adapters.sparksession.type_changes import type_change


@pytest.mark.parametrize(
    ("table", "batch", "change"),
    [
        ("int", "smallint", "fits"),  # Iceberg has no smallint: a smallint column is stored int
        ("array<int>", "array<smallint>", "fits"),  # ...and so is a smallint[] element
        ("array<decimal(14,3)>", "array<decimal(12,3)>", "fits"),
        ("array<string>", "array<int>", "fits"),
        ("int", "bigint", "promote"),
        ("decimal(12,3)", "decimal(14,3)", "promote"),
        ("array<smallint>", "array<string>", "incompatible"),
        ("array<int>", "int", "incompatible"),
        ("decimal(12,3)", "decimal(12,4)", "incompatible"),
    ],
)
def test_a_type_that_holds_every_value_of_the_batch_fits(table: str, batch: str, change: str):
    """The second build of a `smallint[]` column stopped as a type change (the table said
    array<int>, the batch array<smallint>): an array holds another when its element does."""
    assert type_change(table, batch) == change
