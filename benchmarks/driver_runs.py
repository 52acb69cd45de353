"""The long-lived driver's runs of 1,000 events into one table, run after run: how their time
grows, and what compacting the tables every N runs does to it.

    python -m benchmarks.driver_runs --work W --runs 24
    python -m benchmarks.driver_runs --work W --runs 24 --compact-every 4
    python -m benchmarks.driver_runs --work W --runs 16 --compact-every 4 --without-data-tests

W is the work folder of a finished `python -m benchmarks.many_tables` run. Before each run
(untimed) the last round of that benchmark (1,000 events into its first table: inserts, updates
and deletes) lands again as new events (benchmarks.kept_parse's replay), then the driver
(`cdc_lakehouse.runner.continuous --changed-only -- build`, in this process) builds the changed
table and what depends on it, its data tests included. With `--compact-every N` the driver
compacts the tables its runs built after every N of them (`run-operation cdc_compact`), outside
the run's seconds: the compaction's own seconds are printed beside them. Every run must read
the 1,000 events and change rows (the run audit), or the benchmark stops.

Prints one JSON line per run, then the summary: the medians of the runs' seconds by quarter
(the first run, which starts the JVM, left out of the first), and the compactions' seconds.
Each run has two figures: `seconds`, the whole dbt command (its data tests and the run audit
included), and `committed_seconds`, from the same start until the last silver model of the run
(the current-state table or the history) finished its materialization, its rows and watermark
committed: landing -> silver + history committed, what a reader of silver waits for.
Run it on two work folders built alike, one with compaction and one without: each run changes
the folder for the next. `--without-data-tests` leaves the data tests out of every run (dbt's
`--exclude-resource-type test`): what the tests cost a run, against a replay with them on a
copy of the same folder; not a way to run the pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from benchmarks.kept_parse import EVENTS, Replays, events_applied


def quarters(seconds: list[float]) -> list[float]:
    """Medians of the runs' seconds in four consecutive groups, the first run left out."""
    warm = seconds[1:]
    size = max(1, len(warm) // 4)
    groups = [warm[i * size : (i + 1) * size] for i in range(3)] + [warm[3 * size :]]
    return [round(statistics.median(group), 2) for group in groups if group]


def seconds_to_commit(result: Any, started: float) -> float:
    """Seconds from the run's start (`started`, epoch seconds, taken before the landing is
    listed) until the last silver model of the run finished: the end of its materialization,
    after the commit of its rows and watermark (an upper bound of the commit's moment)."""
    ends = [
        timing.completed_at
        for node_result in result.result.results
        if node_result.node.resource_type == "model" and node_result.node.schema == "silver"
        for timing in node_result.timing
        if timing.name == "execute" and timing.completed_at is not None
    ]
    if not ends:
        raise RuntimeError("no silver model ran")
    last = max(ends)
    if last.tzinfo is None:  # dbt's timings are UTC
        last = last.replace(tzinfo=UTC)
    return round(last.timestamp() - started, 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.driver_runs", description=__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a many_tables work folder")
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--compact-every", type=int, default=0, metavar="N")
    parser.add_argument(
        "--small-run-bytes",
        type=int,
        default=None,
        metavar="N",
        help="the driver's limit for Spark's small-input settings (0: never; default: its own)",
    )
    parser.add_argument(
        "--without-data-tests",
        action="store_true",
        help="leave the data tests out of every run, to measure what they cost",
    )
    args = parser.parse_args(argv)
    replays = Replays(args.work)

    from dbt_common.invocation import get_invocation_id

    from cdc_lakehouse.runner.changed import RunChoice
    from cdc_lakehouse.runner.continuous import changed_only_chooser, invoke_repeatedly

    chooser = changed_only_chooser()
    builds: list[str] = []  # each run's dbt invocation id (a compaction after it has its own)
    committed: list[float] = []  # each run's seconds until its silver models were committed

    def choose(run_command: list[str]) -> RunChoice:
        started = time.time()
        choice = chooser(run_command)

        def after(result: Any) -> None:
            builds.append(get_invocation_id())
            choice.after_run(result)
            committed.append(seconds_to_commit(result, started))

        return choice._replace(after_run=after)

    command = ["build", "--vars", json.dumps({"cdc_landing_root": str(replays.landing)})]
    if args.without_data_tests:
        command += ["--exclude-resource-type", "test"]
    seconds: list[float] = []
    compactions: list[dict[str, object]] = []
    for report in invoke_repeatedly(
        command,
        runs=args.runs,
        before_each=replays.land,
        choose=choose,
        compact_every=args.compact_every,
        **({} if args.small_run_bytes is None else {"small_run_bytes": args.small_run_bytes}),
    ):
        if not report["success"]:
            raise RuntimeError(f"run {report['run']} failed: {report}")
        if report.get("skipped"):  # no dbt command: builds[-1] would be the run before's
            raise RuntimeError(f"run {report['run']} found nothing landed: {report}")
        run_kind, events, rows = events_applied(builds[-1])
        if run_kind != "incremental" or events != EVENTS or not rows:
            raise RuntimeError(
                f"run {report['run']} read {events} events and changed {rows} rows ({run_kind})"
            )
        seconds.append(report["seconds"])
        line = {"run": report["run"], "seconds": report["seconds"], "rows_changed": rows}
        line["committed_seconds"] = committed[-1]
        line["small"] = report.get("small", False)
        if "compacted" in report:
            compactions.append({"after_run": report["run"], **report["compacted"]})
            line["compacted"] = report["compacted"]
            if not report["compacted"]["success"]:
                raise RuntimeError(f"compaction after run {report['run']} failed: {report}")
        print(json.dumps(line), flush=True)
    summary = {
        "runs": args.runs,
        "compact_every": args.compact_every,
        "seconds": seconds,
        "median_by_quarter": quarters(seconds),
        "committed_seconds": committed,
        "committed_median_by_quarter": quarters(committed),
        "compactions": compactions,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # the JVM's non-daemon threads would keep a normal exit waiting
