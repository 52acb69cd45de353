"""Run a dbt command again and again in one process, so Spark stays warm between runs.

A `dbt build` process pays 12-15 s before its first model: Python and dbt start, the JVM and the
metastore open, and Spark's code generation and the JIT warm up again on every run. A CDC
pipeline runs every few minutes, so that fixed cost can be most of each run. Here dbt's
programmatic runner invokes the command in a loop; the embedded (or cluster) SparkSession and
its JVM live as long as the process:

    python -m cdc_lakehouse.continuous --every 60 -- build
    python -m cdc_lakehouse.continuous --runs 3 -- build --select tag:cdc_flatten+

Each run prints one JSON line (start time, seconds, success). A failed run is reported and the
loop goes on with the next one; with `--runs`, the exit status is that of the last run. The
embedded Derby metastore admits one process: while the loop runs, other dbt commands on the
same lakehouse wait for it (use the `cluster` or `thrift` targets, with a shared metastore, for
concurrent readers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_lakehouse.continuous",
        description="Run a dbt command repeatedly in one process (Spark stays warm).",
    )
    parser.add_argument(
        "--every", type=float, default=60.0, help="seconds from one run's start to the next's"
    )
    parser.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: never)")
    parser.add_argument("dbt_args", nargs=argparse.REMAINDER, help="-- then the dbt command")
    args = parser.parse_args(argv)
    command = [a for a in args.dbt_args if a != "--"] or ["build"]

    from dbt.cli.main import dbtRunner

    runner = dbtRunner()
    success = True
    run = 0
    try:
        while args.runs == 0 or run < args.runs:
            run += 1
            started = time.monotonic()
            at = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                result = runner.invoke(command)
                success, error = result.success, result.exception
            except Exception as exc:  # a run's failure must not end the loop
                success, error = False, exc
            seconds = round(time.monotonic() - started, 2)
            report = {"run": run, "started": at, "seconds": seconds, "success": success}
            if error is not None:
                report["error"] = str(error)
            print(json.dumps(report), flush=True)
            if args.runs and run >= args.runs:
                break
            time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
    # The JVM's non-daemon threads would keep a normal interpreter exit waiting.
    os._exit(0 if success else 1)


if __name__ == "__main__":
    raise SystemExit(main())
