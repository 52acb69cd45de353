"""Every type of Debezium's PostgreSQL type map, in the table shapes users have, through the
pipeline and back to PostgreSQL (issue 37): the catalog-driven oracle (catalog_oracle.py) over
the database of type_map.py, its tables and columns named in every shape PostgreSQL allows.

The database's catalog alone drives the workload (seeded: inserts, updates of random columns,
primary-key updates that move rows between partitions, deletes, rows touched several times in
one transaction, a TRUNCATE per phase) and the onboarding (`from-postgres` + `generate`, two
sources: schemas on and off); after the snapshot and after each phase the lake is built
incrementally and every silver table compared with PostgreSQL cell by cell. A table without a
primary key is refused by the generator and by the capture's pre-check, each with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import type_map
from catalog_oracle import TOAST_NULLED, CatalogOracle, record, refused_by_capture
from lakehouse import stop_dbt_worker

from devstack.pg import TemporaryPostgres

pytestmark = pytest.mark.system

# One phase of 120 transactions after the snapshot: every statement kind of the workload (a
# TRUNCATE included) lands in one incremental build over the snapshot's tables. Two phases of
# 60 cost a third build of 14 tables x 4 models (5-6 minutes of the suite on 2 cores) for
# what the three-phase oracle (test_oracle.py) and the DDL oracle already build incrementally
# on incremental state; the slow mode's 25 seeds cover the type map 25 times.
PHASES = 1
TRANSACTIONS = 120


def test_every_type_comes_out_of_the_lake_as_postgresql_has_it(
    type_map_seed: int, tmp_path: Path
) -> None:
    with TemporaryPostgres() as pg:
        with pg.connect() as conn:
            conn.execute(type_map.DDL + type_map.named_ddl(type_map_seed))
            conn.commit()
        oracle = CatalogOracle(pg, tmp_path, type_map_seed)
        assert set(oracle.tables) - set(oracle.captured) == {"keyless", "twins"}
        _assert_refused_by_capture(pg, tmp_path, "public.keyless")
        twins = refused_by_capture(pg, tmp_path, ["public.twins"])
        assert "public.twins has columns that differ only by case (Note, note)" in twins, twins
        oracle.load(rows=15)
        oracle.capture()
        oracle.onboard()
        renamed = [n for n in oracle.captured if not re.fullmatch(r"[a-z_][a-z0-9_]*", n)]
        assert len(renamed) >= 1, oracle.captured  # a table of every shape but `key word`
        for name in renamed:
            assert f"the table {name!r}, whose name is not a model's" in oracle.onboarding
        for reported in (
            "skipped keyless: no primary key; give one with --key keyless=col1,col2",
            "skipped twins: columns that differ only by case (Note, note)",
            "note    computed.total: a stored generated column, which PostgreSQL before 18",
            "note    scalars.c_line: type line is not in Debezium's type map",
            "note    scalars.c_numeric_wide: type numeric(78,0) has more digits than Spark's",
        ):
            assert reported in oracle.onboarding, oracle.onboarding
        # hex, base64: an unchanged TOASTed bytea[] (and bytea in base64) arrives as NULL
        # (Debezium), said at onboarding for each column the compare tolerates (TOAST_NULLED)
        for modes in oracle.modes.values():
            binary = modes["binary_handling_mode"]
            lossy = [
                f"{table.name}.{column.name}"
                for table in oracle.tables.values()
                if table.name in oracle.captured
                for column in table.columns
                if (column.base, column.is_array) in TOAST_NULLED.get(binary, ())
            ]
            assert bool(lossy) == (binary in TOAST_NULLED), (binary, lossy)
            for column in lossy:
                loss = f"note    {column}: with binary.handling.mode={binary} Debezium sends an"
                assert loss in oracle.onboarding, oracle.onboarding
        problems = oracle.compare(oracle.build("snapshot", data_tests=False), "snapshot")
        for phase in range(1, PHASES + 1):
            oracle.phase(TRANSACTIONS)
            oracle.capture()
            last = phase == PHASES
            export = oracle.build(f"phase{phase}", data_tests=last)
            problems += oracle.compare(export, f"phase {phase}")
        record(oracle, "type map")
        stop_dbt_worker(oracle.lakehouse)
    assert not problems, (
        f"the lake differs from PostgreSQL ({len(problems)} differences, workload "
        f"{dict(oracle.workload.counts)}):\n" + "\n".join(problems[:60])
    )


def _assert_refused_by_capture(pg: TemporaryPostgres, root: Path, table: str) -> None:
    """`capture check` of `table` exits 2 naming the table and the way out."""
    output = refused_by_capture(pg, root, [table])
    assert f"{table} has no primary key and replica identity DEFAULT" in output, output
    assert "REPLICA IDENTITY FULL" in output, output
