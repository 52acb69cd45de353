"""The oracle meets schema changes: a seeded workload on a real PostgreSQL runs the DDL of the DDL
table of docs/concepts.md (`ADD COLUMN` with and without a default, `DROP COLUMN`, `int` ->
`bigint`, `varchar(n)` -> `text`, `numeric(p,s)` -> `numeric(p2,s)`, `RENAME COLUMN`) within and
between phases, in a random order per seed, while rows are inserted, updated, deleted and
re-created.

Nothing added at the source is declared in advance. Every landing shape is built: the Debezium
envelope with and without JsonConverter schemas, ExtractNewRecordState rows (one table, three
captures) and query-based JDBC rows (a second table, no deletes). With schemas off the user
does what docs/concepts.md says: declare a type change the DBA announces before building, and the
columns the `cdc_no_undeclared_fields` warning names after it, then build again (the rows
already loaded are filled). In phase 3 a staging model is edited before the build.

After every build, silver and the current versions of every history equal PostgreSQL cell for
cell, over PostgreSQL's columns as they are then. The one documented difference is modelled
exactly: Debezium sends no event for the rows an `ADD COLUMN ... DEFAULT` or a `RENAME COLUMN`
fills, so a row not written since that statement reads null there; the JDBC
source lands each row as it is at the poll, so there a row reads null if it was not written since
the last poll before the statement.

Seeds: one in CI; `--oracle-seeds N` runs ceil(N/3) of them (conftest.py).
"""

from __future__ import annotations

import json
import random
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from dbt_scratch_project import SOURCE, bronze_model, make_project, staging_model, update_entry
from lakehouse import column_types, landing_files, read_export, record_lines, run_dbt
from oracle import REPORT

from cdc_lakehouse.capture import run_capture_subprocess
from cdc_lakehouse.capture.jdbc_source import JdbcSource
from devstack.pg import TemporaryPostgres
from sample.generator.northwind import canonical_value

pytestmark = pytest.mark.system

PHASES = 3
TRANSACTIONS = 60
INITIAL_ROWS = 20

# lake table -> (PostgreSQL table, topic prefix, landing shape, JsonConverter schemas)
SHAPES = {
    "accounts_env": ("accounts", "ddla", "envelope", True),
    "accounts_flat": ("accounts", "ddlb", "flattened", True),
    "accounts_nosch": ("accounts", "ddlc", "envelope", False),
    "ledger_jdbc": ("ledger", "ddld", "jdbc", False),
}
SCHEMAS_OFF = tuple(name for name, (_, _, _, schemas) in SHAPES.items() if not schemas)
FIXED = ("id", "last_update")  # the key and the JDBC connector's timestamp column

INITIAL_COLUMNS = {
    "id": "int",
    "name": "varchar(40)",
    "balance": "numeric(10,2)",
    "visits": "int",
    "opened": "timestamp",
    "note": "text",
    "last_update": "timestamp",
}
WIDENINGS = {"widen_int": "visits", "widen_varchar": "name", "widen_numeric": "balance"}
WIDENED = {"visits": "bigint", "name": "text", "balance": "numeric(14,2)"}
DDL_KINDS = ("add", "add_default", "drop", "rename", *WIDENINGS)
ADDED_TYPES = ("text", "int", "timestamptz", "numeric(8,3)")
NOW_MS = "date_trunc('milliseconds', clock_timestamp())"


@dataclass
class DdlWorkload:
    """Seeded DML and DDL on `accounts` (all operations) and `ledger` (no deletes: the JDBC
    source cannot see them). Both tables always have the same columns."""

    seed: int
    rng: random.Random = field(init=False)
    columns: dict[str, str] = field(default_factory=lambda: dict(INITIAL_COLUMNS))
    ever: dict[str, str] = field(default_factory=lambda: dict(INITIAL_COLUMNS))
    # table -> column an `ADD COLUMN ... DEFAULT` or a rename filled -> the keys the lake holds
    # it for: rows written since the statement (Debezium shapes, accounts), or since the last
    # poll before it (the JDBC source reads each row as it is at the poll, ledger). Tracked by the
    # workload: `xmin` would not do, a type change that rewrites the table renews every row's.
    filled: dict[str, dict[str, set[int]]] = field(
        default_factory=lambda: {"accounts": {}, "ledger": {}}
    )
    unpolled: dict[str, set[int]] = field(
        default_factory=lambda: {"accounts": set(), "ledger": set()}
    )
    live: dict[str, set[int]] = field(default_factory=lambda: {"accounts": set(), "ledger": set()})
    deleted: set[int] = field(default_factory=set)
    next_id: int = 1
    applied: list[str] = field(default_factory=list)
    schedule: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.schedule = list(DDL_KINDS)
        self.rng.shuffle(self.schedule)

    # -- DDL ---------------------------------------------------------------------------------
    def create(self, conn: Any) -> None:
        columns = ", ".join(
            f"{name} {pg_type}{' primary key' if name == 'id' else ''}"
            for name, pg_type in INITIAL_COLUMNS.items()
        )
        for table in self.live:
            conn.execute(f"create table {table} ({columns})")
        for _ in range(INITIAL_ROWS):
            for table in self.live:
                self.insert(conn, table)

    def ddl(self, conn: Any) -> str:
        """Apply the next scheduled statement to both tables, in one transaction."""
        kind = self.schedule.pop()
        free = [c for c in self.columns if c not in (*FIXED, *WIDENINGS.values())]
        number = len(self.applied) + 1
        if kind == "add":
            column, pg_type = f"added_{number}", self.rng.choice(ADDED_TYPES)
            change, self.columns[column] = f"add column {column} {pg_type}", pg_type
        elif kind == "add_default":
            column = f"defaulted_{number}"
            change, self.columns[column] = f"add column {column} int default 7", "int"
        elif kind == "drop":
            column = self.rng.choice(free)
            change = f"drop column {column}"
            del self.columns[column]
        elif kind == "rename":
            old, column = self.rng.choice(free), f"renamed_{number}"
            change = f"rename column {old} to {column}"
            self.columns[column] = self.columns.pop(old)
        else:
            column = WIDENINGS[kind]
            change = f"alter column {column} type {WIDENED[column]}"
            self.columns[column] = WIDENED[column]
        self.ever.update(self.columns)
        with conn.transaction():
            for table in self.live:
                conn.execute(f"alter table {table} {change}")
        for table in self.live:
            if kind == "rename":
                self.filled[table].pop(old, None)
            if kind in ("add_default", "rename"):
                self.filled[table][column] = (
                    set(self.unpolled[table]) if table == "ledger" else set()
                )
        self.applied.append(f"alter table ... {change}")
        return change

    # -- DML ---------------------------------------------------------------------------------
    def value(self, pg_type: str) -> Any:
        rng = self.rng
        if rng.random() < 0.1:
            return None
        if pg_type == "int":
            return rng.randint(-1000, 100_000)
        if pg_type == "bigint":
            return rng.choice((rng.randint(-1000, 100_000), rng.randint(2**31, 2**40)))
        if pg_type == "varchar(40)":
            return "".join(rng.choices("abcdefghij xyz", k=rng.randint(1, 40)))
        if pg_type == "text":
            return "".join(rng.choices("abcdefghij xyzé", k=rng.randint(1, 120)))
        if pg_type.startswith("numeric"):
            precision, scale = (int(p) for p in pg_type[8:-1].split(","))
            digits = min(precision, 12)  # the JDBC shape lands numerics as JSON doubles
            return Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-scale)
        moment = datetime(2020, 1, 1) + timedelta(milliseconds=rng.randint(0, 10**11))
        return moment.replace(tzinfo=UTC) if pg_type == "timestamptz" else moment

    def written(self, table: str, key: int) -> None:
        self.unpolled[table].add(key)
        for keys in self.filled[table].values():
            keys.add(key)

    def polled(self) -> None:
        for keys in self.unpolled.values():
            keys.clear()

    def insert(self, conn: Any, table: str) -> None:
        if self.deleted and table == "accounts" and self.rng.random() < 0.3:
            key = self.rng.choice(sorted(self.deleted))  # a deleted key created again
            self.deleted.discard(key)
        else:
            key, self.next_id = self.next_id, self.next_id + 1
        names = [c for c in self.columns if c not in FIXED]
        values = [self.value(self.columns[c]) for c in names]
        columns = ", ".join(["id", *names, "last_update"])
        marks = ", ".join(["%s"] * (len(names) + 1))
        conn.execute(f"insert into {table} ({columns}) values ({marks}, {NOW_MS})", [key, *values])
        self.live[table].add(key)
        self.written(table, key)

    def transaction(self, conn: Any) -> None:
        table = "accounts" if self.rng.random() < 0.6 else "ledger"
        draw = self.rng.random()
        with conn.transaction():
            for _ in range(self.rng.randint(1, 3)):
                keys = sorted(self.live[table])
                if draw < 0.3 or not keys:
                    self.insert(conn, table)
                elif draw < 0.85 or table == "ledger":
                    names = [c for c in self.columns if c not in FIXED]
                    chosen = self.rng.sample(names, min(len(names), self.rng.randint(1, 2)))
                    sets = ", ".join(f"{c} = %s" for c in chosen)
                    key = self.rng.choice(keys)
                    conn.execute(
                        f"update {table} set {sets}, last_update = {NOW_MS} where id = %s",
                        [*(self.value(self.columns[c]) for c in chosen), key],
                    )
                    self.written(table, key)
                else:
                    key = self.rng.choice(keys)
                    conn.execute(f"delete from {table} where id = %s", [key])
                    self.live[table].discard(key)
                    self.deleted.add(key)

    def run_phase(self, conn: Any, phase: int) -> None:
        """`TRANSACTIONS` transactions; DDL between phases (at the start of phases 2 and 3) and
        within them (after a random transaction)."""
        if phase > 1:
            self.ddl(conn)
        within = 1 if phase == 1 else 2
        points = sorted(self.rng.sample(range(1, TRANSACTIONS), within))
        for number in range(TRANSACTIONS):
            if points and number == points[0]:
                points.pop(0)
                self.ddl(conn)
            self.transaction(conn)

    # -- the truth ---------------------------------------------------------------------------
    def expected(self, conn: Any, table: str) -> dict[int, dict[str, Any]]:
        """PostgreSQL's rows, canonical, as the lake must hold them (see the module docstring
        for the columns an `ADD COLUMN ... DEFAULT` or a rename fills without events)."""
        cursor = conn.execute(f"select * from {table}")
        names = [d.name for d in cursor.description]
        rows = {}
        filled = self.filled[table]
        for values in cursor.fetchall():
            row = dict(zip(names, values, strict=True))
            rows[row["id"]] = {
                column: None
                if column in filled and row["id"] not in filled[column]
                else canonical(pg_type, row[column])
                for column, pg_type in self.columns.items()
            }
        return rows


def canonical(pg_type: str, value: Any) -> Any:
    base = "text" if pg_type.startswith("varchar") else pg_type
    return canonical_value(base, value)


def table_configs(declared: dict[str, str]) -> dict[str, dict[str, Any]]:
    configs: dict[str, dict[str, Any]] = {}
    for name, (table, prefix, shape, schemas) in SHAPES.items():
        config: dict[str, Any] = {"topic": f"{prefix}.public.{table}", "shape": shape}
        config["key"] = ["id"]
        if shape == "jdbc":
            config["topic"] = f"{prefix}.{table}"
            config["order_by"] = ["last_update", "id"]
            config["time_precision_mode"] = "connect"
            config["decimal_handling_mode"] = "double"  # JdbcSource lands numerics as doubles
        if not schemas:
            config["columns"] = dict(declared)
        configs[name] = config
    return configs


def declare(project: Path, name: str, columns: dict[str, str]) -> None:
    """Set the columns of one schemas-off table, as a user edits its registry entry and runs
    `make tables`."""
    update_entry(project, name, columns=dict(columns))


def undeclared_fields(output: str) -> dict[str, list[str]]:
    """The fields the `cdc_no_undeclared_fields` warning names, by table."""
    found: dict[str, list[str]] = {}
    prefix = bronze_model("")
    pattern = rf"bronze\.{prefix}(\w+): fields not declared in cdc_table\.columns, [^:]*: (.*?)\. "
    for table, fields in re.findall(pattern, output):
        found[table] = [re.sub(r" \(\d+ events\)$", "", f) for f in fields.split(", ")]
    return found


class DdlOracle:
    def __init__(self, pg: TemporaryPostgres, root: Path, seed: int):
        self.pg = pg
        self.root = root
        self.seed = seed
        self.workload = DdlWorkload(seed)
        self.landing = root / "landing"
        self.lakehouse = root / "lakehouse"
        self.project = make_project(root / "project", table_configs(INITIAL_COLUMNS), history=True)
        self.declared = {name: dict(INITIAL_COLUMNS) for name in SCHEMAS_OFF}
        self.builds = 0
        self.compared = {"rows": 0, "cells": 0, "mismatches": 0}

    def capture(self) -> None:
        def debezium(name: str) -> None:
            table, prefix, shape, schemas = SHAPES[name]
            config = {
                "name": prefix,
                "host": self.pg.host,
                "port": self.pg.port,
                "database": self.pg.database,
                "user": self.pg.user,
                "tables": [f"public.{table}"],
                "out": str(self.landing),
                "state_dir": str(self.root / "capture-state" / name),
                "shape": shape,
                "schemas_enable": schemas,
                "topic_prefix": prefix,
            }
            result = run_capture_subprocess(config, timeout=240)
            assert result.returncode == 0, result.stderr[-3000:]

        self.workload.polled()
        captured = [name for name, spec in SHAPES.items() if spec[2] != "jdbc"]
        with ThreadPoolExecutor(len(captured)) as pool:
            list(pool.map(debezium, captured))
        JdbcSource(
            conninfo=self.pg.conninfo(),
            table="ledger",
            columns=None,
            order_by=("last_update", "id"),
            topic=table_configs({})["ledger_jdbc"]["topic"],
            out=self.landing,
            state_file=self.root / "capture-state" / "jdbc_ledger.json",
        ).poll()

    def build(self, label: str) -> tuple[Path, str]:
        self.builds += 1
        export_dir = self.lakehouse / "exports" / f"{self.builds:02d}-{label}"
        result = run_dbt(
            ["build", "--exclude-resource-type", "unit_test"],
            lakehouse=self.lakehouse,
            project_dir=self.project,
            variables={"cdc_landing_root": str(self.landing), "cdc_export_dir": str(export_dir)},
        )
        return export_dir, result.stdout

    def declare_type_changes(self) -> None:
        """The DBA announced the type changes: declared columns take PostgreSQL's types."""
        for name, columns in self.declared.items():
            for column in columns:
                if column in self.workload.columns:
                    columns[column] = self.workload.columns[column]
            declare(self.project, name, columns)

    def assert_equals_postgres(self, export_dir: Path, label: str, tables: tuple[str, ...]) -> None:
        problems: list[str] = []
        with self.pg.connect() as conn:
            truth = {t: self.workload.expected(conn, t) for t in ("accounts", "ledger")}
        for name in tables:
            expected = truth[SHAPES[name][0]]
            columns = self.workload.columns
            silver = {
                row["id"]: row
                for row in read_export(export_dir, f"silver.{name}")
                if not row.get("_cdc_is_deleted")
            }
            history = {
                row["id"]: row
                for row in read_export(export_dir, f"silver.{name}_history")
                if row["is_current"] and not row["_cdc_is_deleted"]
            }
            for where, rows in (("silver", silver), ("history", history)):
                for key in sorted(set(expected) ^ set(rows)):
                    problems.append(f"{name} {where}: id {key} only in the lake or only in PG")
                for key in sorted(set(expected) & set(rows)):
                    for column, pg_type in columns.items():
                        want = expected[key][column]
                        got = canonical(pg_type, rows[key].get(column))
                        if want != got:
                            problems.append(
                                f"{name} {where}: id {key}.{column} ({pg_type}): "
                                f"PostgreSQL {want!r}, lake {got!r}"
                            )
                self.compared["rows"] += len(expected)
                self.compared["cells"] += len(expected) * len(columns)
            self.compared["mismatches"] += len(problems)
        self.report(label)
        assert not problems, (
            f"seed {self.seed}, {label}, after {self.workload.applied}: the lake differs from "
            f"PostgreSQL ({len(problems)} differences, 40 shown):\n" + "\n".join(problems[:40])
        )

    def report(self, label: str) -> None:
        entry = {
            "seed": f"ddl{self.seed}",
            "label": label,
            "events_landed": sum(len(record_lines(p)) for p in landing_files(self.landing)),
            "builds": self.builds,
            "faults": [],
            "ddl": len(self.workload.applied),
            **self.compared,
        }
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        with REPORT.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def edit_staging_model(project: Path) -> None:
    """A user's edit between builds: the change log gains a derived column."""
    path = project / "models" / "staging" / SOURCE / f"{staging_model('accounts_env')}.sql"
    edited = path.read_text().replace(
        "    from source\n", "        , id * 10 as id_x10\n    from source\n"
    )
    assert "id_x10" in edited, "the generated staging model changed shape"
    path.write_text(edited)


def test_lake_equals_database_through_ddl(ddl_oracle_seed: int, tmp_path: Path) -> None:
    with TemporaryPostgres("ddl") as pg:
        oracle = DdlOracle(pg, tmp_path, ddl_oracle_seed)
        workload = oracle.workload
        with pg.connect(autocommit=True) as conn:
            workload.create(conn)
        for phase in range(1, PHASES + 1):
            with pg.connect(autocommit=True) as conn:
                workload.run_phase(conn, phase)
            oracle.capture()
            oracle.declare_type_changes()
            if phase == PHASES:
                edit_staging_model(oracle.project)
            export_dir, output = oracle.build(f"phase{phase}")
            found = undeclared_fields(output)
            added = {c for c in workload.ever if c not in INITIAL_COLUMNS}
            for name in SCHEMAS_OFF:
                # The warning names exactly the columns added since the last declaration that
                # rows of this table hold.
                assert set(found.get(name, [])) <= added - set(oracle.declared[name]), output
            ready = [n for n in SHAPES if n not in found]
            oracle.assert_equals_postgres(export_dir, f"phase {phase}", tuple(ready))
            if found:
                for name, fields in found.items():
                    oracle.declared[name].update({f: workload.ever[f] for f in fields})
                    declare(oracle.project, name, oracle.declared[name])
                export_dir, output = oracle.build(f"phase{phase}-declared")
                assert "fields not declared" not in output, output
                oracle.assert_equals_postgres(export_dir, f"phase {phase}, declared", tuple(found))
        # Every statement of the docs' DDL table ran; the staging edit took effect.
        assert len(workload.applied) == len(DDL_KINDS) and not workload.schedule
        edited = read_export(export_dir, "silver.accounts_env")
        assert column_types(export_dir, "silver.accounts_env").get("id_x10") == "int"
        derived = [row for row in edited if row.get("id_x10") is not None]
        assert derived and all(row["id_x10"] == row["id"] * 10 for row in derived)
