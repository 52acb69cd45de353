"""A history model over a large change log: what its full build and its small incremental runs
cost, beside the silver model's.

    python -m benchmarks.run --scale 1m --only initial --references duckdb --keep
    python -m benchmarks.history_runs --work bench_data/1m --table initial-1M --runs 8 --batch 1000

The scale suite's project has a bronze, a staging view and a silver model: its targets are
about those. This adds the history model a registered table gets (`items_history`: the
generator's template, `cdc_history` over the same staging view, hard deletes) to the work
folder's project, builds it in a new `dbt run -s items_history` process (timed), then lands
`--batch` events before each of `--runs` runs of `dbt run` in one process (the long-lived
driver's loop, `benchmarks.dbt_loop`; the first run starts the JVM). `--compact` compacts the
tables (`run-operation cdc_compact`) before the runs. Then the history's data tests (its
intervals chain; its live versions are silver's rows; no unchanged-TOAST placeholder) run in
`dbt test`: the benchmark stops if they fail. Prints one JSON line: the full build's seconds,
each run's seconds, and silver's and history's model seconds in each run (from `dbt.log`).

The project keeps the model: later runs of `benchmarks.run --resume` on the same work folder
build it too. Run this on a work folder kept for it.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from benchmarks.dbt_loop import run_loop
from benchmarks.project import run_dbt
from cdc_lakehouse.tables.generate import SILVER_SQL, history_data_tests

HISTORY_SQL = SILVER_SQL.format(
    header="",
    macro="cdc_lakehouse.cdc_history",
    staging="stg_bench__items_changes",
    key="['id']",
    extra="",
    delete_mode="hard",
)

# The data tests a registered table's history gets.
HISTORY_YML = {
    "version": 2,
    "models": [{"name": "items_history", "data_tests": history_data_tests(["id"], "items")}],
}

_MODEL_DONE = re.compile(
    r"OK created sql incremental model silver\.(items|items_history) .* in ([0-9.]+)s"
)


def model_seconds(log: Path, start: int) -> list[dict[str, float]]:
    """Silver's and history's seconds in each `dbt run` logged after byte `start` of dbt.log."""
    runs: list[dict[str, float]] = []
    with log.open("rb") as handle:
        handle.seek(start)
        text = re.sub(r"\x1b\[[0-9;]*m", "", handle.read().decode(errors="replace"))
    for chunk in text.split("Running with dbt=")[1:]:
        found = {name: float(seconds) for name, seconds in _MODEL_DONE.findall(chunk)}
        if found:
            runs.append(found)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.history_runs", description=__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a kept benchmarks.run work")
    parser.add_argument("--table", default="initial-1M", help="an initial load of that run")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1_000, help="events landed before each run")
    parser.add_argument("--compact", action="store_true", help="cdc_compact before the runs")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    project, lakehouse = work / "project", work / "lakehouse" / args.table
    landing = work / "data" / args.table
    if not (lakehouse / "metastore_db").exists() or not (landing / "dataset.json").exists():
        parser.error(f"no kept initial load {args.table} in {work} (benchmarks.run --keep)")
    model = project / "models" / "silver" / "items_history.sql"
    report: dict[str, object] = {"table": args.table, "batch": args.batch}
    if not model.exists():
        model.write_text(HISTORY_SQL)
        model.with_name("_history.yml").write_text(yaml.safe_dump(HISTORY_YML, sort_keys=False))
        started = time.monotonic()
        run_dbt(project, ["run", "-s", "items_history"], lakehouse=lakehouse, landing=landing)
        report["history_full_build_seconds"] = round(time.monotonic() - started, 2)
    if args.compact:
        run_dbt(project, ["run-operation", "cdc_compact"], lakehouse=lakehouse, landing=landing)
    log = lakehouse / "logs" / "dbt.log"
    start = log.stat().st_size if log.exists() else 0
    # dbt.log must not roll over during the loop (read from `start` below)
    loop = run_loop(
        project, lakehouse, landing, args.runs, args.batch, env={"DBT_LOG_FILE_MAX_BYTES": "0"}
    )
    report["seconds"] = loop["seconds"]
    report["models"] = model_seconds(log, start)
    # raises with dbt's output when a test fails
    run_dbt(project, ["test", "-s", "items", "items_history"], lakehouse=lakehouse, landing=landing)
    report["history_tests"] = "pass"
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
