"""Schema changes at the source and edits to models, as a new user meets them.

A table nobody declared in advance (schemas on: no `columns` at all) is captured by real
Debezium from a real PostgreSQL in two phases, with DDL between and within the phases; each
phase ends with a plain incremental `dbt build`, and silver and the latest version of every
history equal PostgreSQL. The same table also lands with schemas off, declared as a user would
after reading the docs: phase 1's columns first, the added column once it appears.

Edits to models between builds (a view's filter and columns, a table's columns) must take effect
on the next plain `dbt build`; under Iceberg 1.10 a replaced view kept its old SQL
(apache/iceberg#14557). Column types are read from the catalog in every layer.
"""

from __future__ import annotations

import json
import re
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from dbt_scratch_project import bronze_model, make_project, staging_model, update_entry
from lakehouse import column_types, copy_landing, read_export, run_dbt

from cdc_lakehouse.capture import run_capture_subprocess
from devstack.pg import TemporaryPostgres

pytestmark = pytest.mark.system

PHASE_1 = """
create table public.members (
    id int primary key,
    name text not null,
    joined timestamp,
    seen_at timestamptz,
    points numeric(10,2),
    visits int,
    level int
);
insert into members values
    (1, 'ann', '2024-01-01 10:00:00.123456', '2024-01-02 10:00:00+00', 1.50, 1, 1),
    (2, 'bob', '2024-01-03 11:00:00', '2024-01-04 11:00:00+00', 2.00, 2, 1),
    (3, 'cy', '2024-01-05 12:00:00', null, 3.25, 3, 2);
update members set points = 1.75 where id = 1;
"""

# Within phase 2 the table changes shape between events of the same capture (and file).
PHASE_2 = """
insert into members values (4, 'dee', '2024-02-01 09:00:00', '2024-02-02 09:00:00+00', 4.00, 0, 1);
update members set points = 2.25 where id = 1;
alter table members add column tier text;
update members set tier = 'gold' where id = 2;
insert into members (id, name, joined, points, visits, level, tier)
    values (5, 'eve', '2024-03-01 08:30:00', 5.50, 2, 3, 'silver');
alter table members alter column level type bigint;
update members set level = 5000000000 where id = 5;
alter table members alter column id type bigint;
insert into members (id, name, level) values (5000000001, 'gus', 1);
delete from members where id = 5000000001;
delete from members where id = 3;
alter table members drop column visits;
update members set name = 'ann2', tier = 'bronze' where id = 1;
insert into members (id, name, joined, points, level, tier) values (6, 'fay', null, null, 7, null);
"""

# A change no table can follow in place: a numeric's scale (Iceberg widens precision only).
PHASE_3 = """
alter table members alter column points type numeric(14,4);
update members set points = 9.1234 where id = 2;
"""

# Columns of phase 1 as a user declares them for schemas off (docs/tables.md, "Add a table").
DECLARED = {
    "id": "int",
    "name": "text",
    "joined": "timestamp",
    "seen_at": "timestamptz",
    "points": "numeric(10,2)",
    "visits": "int",
    "level": "int",
}

CAPTURES = {
    # table in the project -> (topic prefix, landing shape, JsonConverter schemas)
    "members_env": ("shopa", "envelope", True),
    "members_flat": ("shopb", "flattened", True),
    "members_nosch": ("shopc", "envelope", False),
}


def capture(
    pg: TemporaryPostgres, root: Path, landing: Path, tables: tuple[str, ...] = tuple(CAPTURES)
) -> None:
    for name in tables:
        prefix, shape, schemas = CAPTURES[name]
        config = {
            "name": prefix,
            "host": pg.host,
            "port": pg.port,
            "database": pg.database,
            "user": pg.user,
            "tables": ["public.members"],
            "out": str(landing),
            "state_dir": str(root / "capture-state" / name),
            "shape": shape,
            "schemas_enable": schemas,
            "topic_prefix": prefix,
        }
        result = run_capture_subprocess(config, timeout=180)
        assert result.returncode == 0, result.stderr


def run_sql(pg: TemporaryPostgres, script: str) -> None:
    """Each statement in its own transaction, as an application would commit them."""
    with pg.connect(autocommit=True) as conn:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)


def table_configs(declared: dict[str, str]) -> dict[str, dict[str, Any]]:
    configs: dict[str, dict[str, Any]] = {}
    for name, (prefix, shape, schemas) in CAPTURES.items():
        config: dict[str, Any] = {"topic": f"{prefix}.public.members", "shape": shape}
        config["key"] = ["id"]
        if not schemas:
            config["columns"] = dict(declared)
        configs[name] = config
    return configs


def declare(project: Path, declared: dict[str, str]) -> None:
    """What a user does when a column appears with schemas off: declare it in the table's
    registry entry and regenerate (`make tables`)."""
    update_entry(project, "members_nosch", columns=dict(declared))


def pg_rows(pg: TemporaryPostgres) -> dict[int, dict[str, Any]]:
    with pg.connect() as conn:
        cursor = conn.execute("select * from members")
        names = [d.name for d in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def comparable(column: str, value: Any) -> Any:
    """PostgreSQL's and the export's values in one form (the export writes canonical text)."""
    if value is None:
        return None
    if column == "points":
        return Decimal(str(value))
    if column == "joined":
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if not isinstance(value, str) else value
    if column == "seen_at":
        if isinstance(value, str):
            return value
        return value.astimezone().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def assert_equals_postgres(
    export_dir: Path, pg: TemporaryPostgres, label: str, tables: tuple[str, ...] = tuple(CAPTURES)
) -> dict[str, dict[int, dict[str, Any]]]:
    expected = pg_rows(pg)
    problems = []
    found = {}
    for name in tables:
        silver = {row["id"]: row for row in read_export(export_dir, f"silver.{name}")}
        history = {
            row["id"]: row
            for row in read_export(export_dir, f"silver.{name}_history")
            if row["is_current"] and not row["_cdc_is_deleted"]
        }
        found[name] = silver
        for key in sorted(set(expected) | set(silver) | set(history)):
            for where, rows in (("silver", silver), ("history", history)):
                if key not in rows or key not in expected:
                    problems.append(f"{name} {where} {label}: key {key} only on one side")
                    continue
                for column, value in expected[key].items():
                    want, got = comparable(column, value), comparable(column, rows[key].get(column))
                    if want != got:
                        problems.append(
                            f"{name} {where} {label}: id {key}.{column}: "
                            f"PostgreSQL {want!r}, lake {got!r}"
                        )
    assert not problems, "\n".join(problems)
    return found


def build(
    project: Path, lakehouse: Path, landing: Path, export: str, *extra: str, check: bool = True
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    export_dir = lakehouse / "exports" / export
    result = run_dbt(
        ["build", "--exclude-resource-type", "unit_test", *extra],
        lakehouse=lakehouse,
        project_dir=project,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
        check=check,
    )
    return export_dir, result


def test_undeclared_source_ddl_flows_through_every_layer(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    lakehouse = tmp_path / "lakehouse"
    project = make_project(tmp_path / "project", table_configs(DECLARED), history=True)
    with TemporaryPostgres("shop") as pg:
        run_sql(pg, PHASE_1)
        capture(pg, tmp_path, landing)
        first, _ = build(project, lakehouse, landing, "phase1")
        assert_equals_postgres(first, pg, "phase 1")

        run_sql(pg, PHASE_2)
        capture(pg, tmp_path, landing)
        # Schemas off: the user widens `level` and the key `id` (a bigint value would be
        # rejected as an int; a key deleted beyond the old type's range must reach the table of
        # deleted keys, which follows the key's type) but has not seen `tier` yet. Its values
        # are kept in bronze; a warning names it.
        declare(project, {**DECLARED, "id": "bigint", "level": "bigint"})
        undeclared, result = build(project, lakehouse, landing, "phase2-undeclared")
        assert_equals_postgres(undeclared, pg, "phase 2", ("members_env", "members_flat"))
        assert (
            f"{bronze_model('members_nosch')}: fields not declared in cdc_table.columns, kept in "
            "_cdc_undeclared: tier (4 events)"
        ) in result.stdout, result.stdout
        assert "tier" not in column_types(undeclared, "silver.members_nosch")
        # The test warns with the fields' rows (it runs its query once more when the query
        # that names them found some; the empty select when none: cdc_undeclared_fields).
        undeclared_test = f"cdc_lakehouse_cdc_no_undeclared_fields_{bronze_model('members_nosch')}_"
        assert f"WARN 1 {undeclared_test} " in result.stdout, result.stdout
        # A declared type the kept values do not fit stops the build, and nothing is written.
        declare(project, {**DECLARED, "id": "bigint", "level": "bigint", "tier": "int"})
        _, failed = build(project, lakehouse, landing, "phase2-mistyped", check=False)
        assert failed.returncode == 1
        assert (
            f"bronze.{bronze_model('members_nosch')}: rows already loaded hold values that do "
            "not decode as declared (tier int)"
        ) in failed.stdout, failed.stdout
        # Declared now (docs/concepts.md, "Schema changes at the source"); nothing new landed: the
        # next build fills the column for the events already loaded, and silver and history follow.
        declare(project, {**DECLARED, "id": "bigint", "level": "bigint", "tier": "text"})
        second, result = build(project, lakehouse, landing, "phase2")
        assert "fields not declared" not in result.stdout
        assert f"PASS {undeclared_test} " in result.stdout, result.stdout
        silver = assert_equals_postgres(second, pg, "phase 2")

        # Schemas on only: without the embedded schema a decimal's scale is not in the data
        # (docs/concepts.md: schemas off cannot follow a scale change).
        schemas_on = ("members_env", "members_flat")
        run_sql(pg, PHASE_3)
        capture(pg, tmp_path, landing, schemas_on)
        _, failed = build(project, lakehouse, landing, "phase3", check=False)
        assert failed.returncode == 1
        for name in schemas_on:
            assert (
                f"bronze.{bronze_model(name)}: the type of points (decimal(10,2) in the table, "
                "decimal(14,4) now) changed at the source"
            ) in failed.stdout, failed.stdout
        assert "Nothing was written" in failed.stdout
        # The documented recovery: rebuild the affected models from the landing zone.
        selected = [f"{bronze_model(name)}+" for name in schemas_on]
        recovered, _ = build(
            project, lakehouse, landing, "recovered", "--full-refresh", "-s", *selected
        )
        assert_equals_postgres(recovered, pg, "phase 3, after --full-refresh", schemas_on)
        for name in schemas_on:
            assert column_types(recovered, f"silver.{name}")["points"] == "decimal(38,4)"

    for name in CAPTURES:
        # The added column exists in every layer, never declared with schemas on.
        for relation in (
            f"bronze.{bronze_model(name)}",
            f"staging.{staging_model(name)}",
            f"silver.{name}",
            f"silver.{name}_history",
        ):
            types = column_types(second, relation)
            assert types.get("tier") == "string", (relation, types)
            assert types.get("joined") == "timestamp_ntz", (relation, types)
            assert types.get("seen_at") == "timestamp", (relation, types)
            assert types.get("level") == "bigint", (relation, types)
            assert types.get("id") == "bigint", (relation, types)
        # A dropped column stays in the lake; the rows changed after the drop read null there,
        # the others keep their last value (the DDL table of docs/concepts.md).
        assert silver[name][1]["visits"] is None and silver[name][2]["visits"] == 2


def test_model_edits_take_effect_on_the_next_build(tmp_path: Path) -> None:
    """Edit a staging view (filter, add and remove a column) and a table model between plain
    builds: each build uses the SQL as it is now. A view over `select *` of the table follows
    the table's new column though its own SQL is unchanged (Spark keeps a view's columns as
    they were when it was created), and a table or view whose SQL and inputs did not change
    is left as it is (no new metadata version). The tests' dbt process keeps the parsed project
    between commands (cdc_lakehouse.runner.parsed): each edit is parsed before the next build,
    an unchanged project is not, and a model over an ephemeral model compiles again with its
    CTE from the kept manifest."""
    landing = copy_landing(tmp_path / "landing")
    customers = {"topic": "northwind.public.customers", "shape": "envelope", "key": ["customer_id"]}
    project = make_project(tmp_path / "project", {"customers": customers})
    changes = staging_model("customers")
    staging = project / "models" / "staging" / "scratch" / f"{changes}.sql"
    gold = project / "models" / "gold"
    gold.mkdir()
    (gold / "customer_counts.sql").write_text(
        "{{ config(materialized='table', schema='gold') }}\n"
        "select count(*) as customers from {{ ref('customers') }}\n"
    )
    (gold / "customer_counts_all.sql").write_text(
        "{{ config(materialized='view', schema='gold') }}\n"
        "select * from {{ ref('customer_counts') }}\n"
    )
    (gold / "live_customers.sql").write_text(
        "{{ config(materialized='ephemeral') }}\n"
        "select * from {{ ref('customers') }} where not _cdc_is_deleted\n"
    )
    (gold / "live_customer_count.sql").write_text(
        "{{ config(materialized='table', schema='gold') }}\n"
        "select count(*) as n from {{ ref('live_customers') }}\n"
    )
    lakehouse = tmp_path / "lakehouse"

    def parses() -> int:
        """`dbt parse` invocations of the tests' dbt process on this lakehouse so far."""
        logs = (lakehouse / "logs").glob("dbt.log*")
        return sum(len(re.findall(r"command_name\W+parse\b", p.read_text())) for p in logs)

    def versions(schema: str, name: str) -> int:
        metadata = lakehouse / "warehouse" / f"{schema}.db" / name / "metadata"
        return len(list(metadata.glob("*.metadata.json")))

    original = staging.read_text()

    def build_and_read(export: str) -> tuple[dict[str, str], int, list[dict[str, Any]]]:
        export_dir, _ = build(project, lakehouse, landing, export)
        shown = run_dbt(
            ["show", "--inline", f"select count(*) as n from staging.{changes}",
             "--output", "json"],
            lakehouse=lakehouse,
            project_dir=project,
        )  # fmt: skip
        count = json.loads(shown.stdout[shown.stdout.index("{") :])["show"][0]["n"]
        types = column_types(export_dir, f"staging.{changes}")
        assert read_export(export_dir, "gold.customer_counts_all") == read_export(
            export_dir, "gold.customer_counts"
        )
        return types, count, read_export(export_dir, "gold.customer_counts")

    types, count, counts = build_and_read("first")
    assert "country_code" not in types and count > 0
    assert list(counts[0]) == ["customers"]
    # A view reads `timestamp_ntz` as `timestamp_ntz`, not as the Hive metastore's `timestamp`
    # (the adapter's view materialization).
    assert types["updated_at"] == "timestamp_ntz" and types["created_at"] == "timestamp", types

    staging.write_text(
        original.replace(
            "    from source\n", "        , upper(country) as country_code\n    from source\n"
        ).replace(
            "where _cdc_reject_reason is null",
            "where _cdc_reject_reason is null and _cdc_op <> 'r'",
        )
    )
    (gold / "customer_counts.sql").write_text(
        "{{ config(materialized='table', schema='gold') }}\n"
        "select count(*) as customers, 2 as version from {{ ref('customers') }}\n"
    )
    types, edited_count, counts = build_and_read("edited")
    assert types.get("country_code") == "string"
    assert 0 < edited_count < count, "the view's new filter was not applied"
    assert counts[0]["version"] == 2, "the table model's new SQL was not applied"

    staging.write_text(original)
    table, view = versions("gold", "customer_counts"), versions("gold", "customer_counts_all")
    types, restored_count, _ = build_and_read("restored")
    assert "country_code" not in types
    assert restored_count == count
    # Nothing landed and silver did not change: the table and the view over it are as the
    # edited build left them (their SQL, the view's schema and silver's metadata log are).
    assert (versions("gold", "customer_counts"), versions("gold", "customer_counts_all")) == (
        table,
        view,
    )
    # three projects (first, edited, restored), each parsed once for its build and show
    assert parses() == 3
    # Nothing edited: built and shown with the kept manifest, the ephemeral model's CTE
    # injected again into the model over it.
    again, _ = build(project, lakehouse, landing, "again")
    assert parses() == 3
    live = read_export(again, "gold.live_customer_count")
    assert live == read_export(lakehouse / "exports" / "restored", "gold.live_customer_count")
    assert live[0]["n"] > 0
