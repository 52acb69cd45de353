"""Many small incremental runs in one process: land a batch, `dbt run`, repeat.

The loop is cdc_lakehouse.runner.continuous's (a long-lived driver): dbt's programmatic runner keeps
the SparkSession (and its JVM) between invocations, so each run costs what the pipeline does
rather than a JVM start. The benchmark uses it to time warm runs, and to reach the state of a
table after many scheduled runs (many snapshots, small files, merge-on-read deletes) in
minutes. Prints one JSON line with the seconds of each run.

    python -m benchmarks.dbt_loop --project P --lakehouse H --landing L --runs 30 --batch 2000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.generate import append_batch
from benchmarks.measure import run_measured
from benchmarks.project import REPO, spark_env


def run_loop(
    project: Path,
    lakehouse: Path,
    landing: Path,
    runs: int,
    batch: int,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """This loop as a process of its own (the profile's environment for `lakehouse`, `env` on
    top): its summary line (`runs`, `batch`, `seconds`). Raises with its output if it fails."""
    loop = run_measured(
        [sys.executable, "-m", "benchmarks.dbt_loop", "--project", str(project),
         "--lakehouse", str(lakehouse), "--landing", str(landing),
         "--runs", str(runs), "--batch", str(batch)],
        env={**spark_env(lakehouse), **(env or {})},
    )  # fmt: skip
    if loop.returncode != 0:
        raise RuntimeError(f"dbt loop failed:\n{(loop.stdout + loop.stderr)[-3000:]}")
    return json.loads(loop.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dbt_loop", description=__doc__)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--lakehouse", type=Path, required=True)
    parser.add_argument("--landing", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=2_000, help="events landed before each run")
    args = parser.parse_args(argv)
    lakehouse, landing = args.lakehouse.resolve(), args.landing.resolve()
    os.environ.update(
        DBT_PROFILES_DIR=str(REPO / "profiles"),
        CDC_LAKEHOUSE_DIR=str(lakehouse),
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
    )
    os.chdir(args.project)
    from cdc_lakehouse.runner.continuous import invoke_repeatedly

    command = [
        "run", "--quiet",
        "--target-path", str(lakehouse / "target"),
        "--log-path", str(lakehouse / "logs"),
        "--vars", json.dumps({"cdc_landing_root": str(landing)}),
    ]  # fmt: skip
    seconds = []
    for report in invoke_repeatedly(
        command,
        runs=args.runs,
        before_each=lambda: append_batch(landing, events=args.batch, workers=1),
    ):
        if not report["success"]:
            print(json.dumps({"error": report.get("error"), "seconds": seconds}), flush=True)
            os._exit(1)
        seconds.append(report["seconds"])
    print(json.dumps({"runs": args.runs, "batch": args.batch, "seconds": seconds}), flush=True)
    os._exit(0)  # the JVM's non-daemon threads would keep a normal exit waiting


if __name__ == "__main__":
    raise SystemExit(main())
