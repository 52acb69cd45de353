"""Public sample databases that nobody here wrote (tests/fixtures/databases: pgexercises,
Chinook), through the catalog-driven oracle (catalog_oracle.py), as a user would onboard them:
into a dbt project of their own outside this repository, made as docs/package.md says (the
engine added with packages.yml and `dbt deps`), tables the sample does not have.

Each database is loaded as its authors published it. Whatever the capture refuses in it is
asserted refused with its way out, then taken (pgexercises' tables are UNLOGGED: no WAL, no
change could ever be captured). Then the oracle runs from the catalog alone: a snapshot, and
phases of seeded random transactions with one schema change each (a column added, named in
any shape PostgreSQL allows, widened or dropped, amid the phase's transactions), each phase
built incrementally and every silver table compared with PostgreSQL cell by cell. One source,
schemas on: what `from-postgres` onboards.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from catalog_oracle import CatalogOracle, load_database, record, refused_by_capture
from lakehouse import REPO, stop_dbt_worker

from devstack.pg import TemporaryPostgres

pytestmark = pytest.mark.system

DATABASES = REPO / "tests" / "fixtures" / "databases"
PHASES = 2
TRANSACTIONS = 60


def test_a_public_database_comes_out_of_the_lake_as_postgresql_has_it(
    public_database: tuple[str, int], tmp_path: Path
) -> None:
    name, seed = public_database
    with TemporaryPostgres(name) as pg:
        schema = load_database(pg, DATABASES / name)
        oracle = CatalogOracle(
            pg, tmp_path, seed, schema=schema, sources={name: True}, ddl=True, user_project=True
        )
        assert oracle.captured.keys() == oracle.tables.keys()  # every table has a key
        oracle.onboard()
        for table in _take_what_the_capture_refuses(pg, schema, tmp_path):
            note = f"note    {table.split('.')[1]}: UNLOGGED, so PostgreSQL writes no WAL"
            assert note in oracle.onboarding, oracle.onboarding
        oracle.capture()
        problems = oracle.compare(oracle.build("snapshot", data_tests=False), "snapshot")
        for phase in range(1, PHASES + 1):
            oracle.phase(TRANSACTIONS)
            oracle.capture()
            export = oracle.build(f"phase{phase}", data_tests=phase == PHASES)
            problems += oracle.compare(export, f"phase {phase}")
        record(oracle, name)
        stop_dbt_worker(oracle.lakehouse)
    assert not problems, (
        f"the lake differs from PostgreSQL ({len(problems)} differences, schema changes "
        f"{oracle.workload.schema_changes}, workload {dict(oracle.workload.counts)}):\n"
        + "\n".join(problems[:60])
    )


def _take_what_the_capture_refuses(pg: TemporaryPostgres, schema: str, root: Path) -> list[str]:
    """An UNLOGGED table is refused by `capture check` (exit 2, naming the way out), then made
    logged, as its message says. Returns the tables made logged."""
    with pg.connect() as conn:
        unlogged = [
            f"{schema}.{table}"
            for (table,) in conn.execute(
                "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
                " where n.nspname = %s and c.relkind = 'r' and c.relpersistence = 'u'"
                " order by 1",
                (schema,),
            )
        ]
    if not unlogged:
        return []
    output = refused_by_capture(pg, root, unlogged)
    assert f"{', '.join(unlogged)} {'are' if len(unlogged) > 1 else 'is'} UNLOGGED" in output
    # the way out the message gives, as given: one statement per table, in an order that works
    statements = re.findall(r"ALTER TABLE [\w.]+ SET LOGGED;", output)
    assert sorted(statements) == sorted(f"ALTER TABLE {t} SET LOGGED;" for t in unlogged), output
    with pg.connect() as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    return unlogged
