"""Capture throughput: PostgreSQL -> landing zone with the capture tool (Debezium embedded).

A private PostgreSQL (`devstack.pg.TemporaryPostgres`) gets the benchmark's `items` table
with `rows` rows; a bounded capture run (`run --until-marker`) takes the initial snapshot; then
`changes` changes (30% inserts, 60% updates, 10% deletes, 100 rows per transaction) are
committed and a second bounded run streams them. Each run is its own process, as in production,
measured from start to exit (JVM start and slot set-up included); the tool's own figure (events
per second from its first to its last batch) is reported beside it. The server is stopped and
its folder removed at the end, whatever happens.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.measure import run_measured

TABLE = """
create table public.items (
    id bigint primary key,
    name text,
    status text,
    quantity int,
    amount numeric(12,2),
    is_active boolean,
    created_date date,
    updated_at timestamp,
    created_at timestamptz,
    note text
)
"""
ROWS = """
insert into public.items
select
    g,
    'item ' || g,
    (array['new', 'paid', 'shipped', 'delivered'])[1 + g %% 4],
    g %% 1000,
    (g %% 100000) / 100.0,
    g %% 3 > 0,
    date '2024-01-01' + (g %% 365),
    timestamp '2024-06-01 00:00:00' + g * interval '1 second',
    timestamptz '2024-06-01 00:00:00+00' + g * interval '1 second',
    'note about item ' || g
from generate_series(%(first)s::int, %(last)s::int) as g
"""
CHUNK = 100
SUMMARY = re.compile(r"done in ([\d.]+)s: (\d+) events in (\d+) files")
# The tool's own rate, when the run lasted over a second ("..., 1,234 events/s from first to last
# batch"); a separate search, since an optional group before more text never captures.
ENGINE_RATE = re.compile(r", ([\d,]+) events/s from first to last batch")


def _changes(pg: Any, first_new: int, existing: int, changes: int) -> int:
    """Commit `changes` row changes in transactions of CHUNK rows; returns the count made."""
    made = 0
    next_id, next_update, next_delete = first_new, 1, existing
    with pg.connect(autocommit=True) as conn:
        for i in range(0, changes, CHUNK):
            kind = ("insert", "update", "update", "insert", "update", "update", "insert",
                    "update", "update", "delete")[(i // CHUNK) % 10]  # fmt: skip
            if kind == "insert":
                conn.execute(ROWS, {"first": next_id, "last": next_id + CHUNK - 1})
                next_id += CHUNK
            elif kind == "update":
                conn.execute(
                    "update public.items set quantity = quantity + 1, updated_at = now(), "
                    "status = 'changed' where id between %s and %s",
                    (next_update, next_update + CHUNK - 1),
                )
                next_update += CHUNK
            else:
                conn.execute(
                    "delete from public.items where id between %s and %s",
                    (next_delete - CHUNK + 1, next_delete),
                )
                next_delete -= CHUNK
            made += CHUNK
    return made


def _run(config: Path, timeout: float) -> dict[str, Any]:
    result = run_measured(
        [sys.executable, "-m", "cdc_lakehouse.capture", "run", "--config", str(config),
         "--until-marker", "--timeout", f"{timeout:g}"],
        env=None,
        timeout=timeout + 60,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"capture failed ({result.returncode}):\n{result.stderr[-3000:]}")
    summary = [line for line in result.stderr.splitlines() if "done in" in line][-1]
    match = SUMMARY.search(summary)
    events = int(match.group(2)) if match else 0
    rate = ENGINE_RATE.search(summary)
    engine_rate = int(rate.group(1).replace(",", "")) if rate else 0
    return {
        "events": events,
        "files": int(match.group(3)) if match else 0,
        "wall_seconds": round(result.seconds, 2),
        "events_per_second_wall": round(events / result.seconds),
        "events_per_second_engine": engine_rate,
        "summary": summary.strip(),
        **result.memory(),
    }


def run_capture_benchmark(work: Path, *, rows: int, changes: int) -> dict[str, Any]:
    from devstack.pg import TemporaryPostgres

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    phases: dict[str, Any] = {}
    with TemporaryPostgres(database="bench") as pg:
        with pg.connect(autocommit=True) as conn:
            conn.execute(TABLE)
            conn.execute(ROWS, {"first": 1, "last": rows})
        settings = {
            "name": "bench",
            "host": pg.host,
            "port": pg.port,
            "database": pg.database,
            "user": pg.user,
            "tables": ["public.items"],
            "out": str(work / "landing"),
            "state_dir": str(work / "state"),
            "shape": "envelope",
            "schemas_enable": False,
            "topic_prefix": "bench",
        }
        config = work / "capture.json"
        config.write_text(json.dumps(settings, indent=1))
        timeout = 120 + (rows + changes) / 1_000
        phases["snapshot"] = _run(config, timeout)
        made = _changes(pg, rows + 1, rows, changes)
        phases["streaming"] = _run(config, timeout)
        phases["streaming"]["changes_made"] = made
        run_measured(
            [sys.executable, "-m", "cdc_lakehouse.capture", "drop", "--config", str(config)],
            timeout=90,
        )
    return {"rows": rows, "changes": changes, "flush_size": 500, "phases": phases}
