"""How fast this machine is right now, on work none of the project's code takes part in.

    python -m benchmarks.gauge

DuckDB reads the benchmark suite's initial load of 1M events (the landing the `1m` and `10m`
scales generate for 1M: same generator, same seed, 100 files, 658 MiB) and keeps each key's
latest event: the DuckDB reference of `benchmarks.run`, timed in this process, the best of two
runs. The shared 2-core machine's speed moves from day to day: the benchmark suite's references,
whose code had not changed, took about twice as long on 2026-12-03 as on 2026-11-29
(docs/benchmarks.md, "Issue 38's targets"). A suite's or a benchmark's seconds compare across
days only beside this figure; `make test` prints it at its start and end (tests/python/conftest.py).
Published points: 1.62 s on 2026-11-24 (docs/benchmarks/results.json, the 1M initial load's
DuckDB reference, query seconds), 2.13 s on 2026-12-03 at 15:36 (the same figure of that day's
`--scale 1m` run).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

GAUGE_EVENTS = 1_000_000


def machine_gauge(runs: int = 2) -> float:
    """Seconds of DuckDB's query over the 1M-event landing, best of `runs` (the landing is
    generated in a temporary folder, then removed)."""
    from benchmarks.generate import KEYS_PER_EVENT, create_dataset
    from benchmarks.references import run_duckdb

    work = Path(tempfile.mkdtemp(prefix="cdc-gauge-"))
    try:
        landing = work / "landing"
        create_dataset(landing, events=GAUGE_EVENTS, keys=round(KEYS_PER_EVENT * GAUGE_EVENTS))
        return min(
            float(run_duckdb(landing, work / f"gauge-{run}.duckdb")["seconds"])
            for run in range(runs)
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    print(f"{machine_gauge():.2f} s: DuckDB over the benchmark suite's 1M-event landing, best of 2")
