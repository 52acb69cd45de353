"""The long-lived driver's warm runs with the project parsed once, against parsed before each run.

    python -m benchmarks.kept_parse --work W --runs 6

W is the work folder of a finished `python -m benchmarks.many_tables` run (its project, landing
zone and lakehouse). Before each run, the two landing files of that benchmark's last round
(1,000 events into its first table: inserts, updates and deletes) land again as new files,
their log positions, commit times and transaction ids moved past every event before them and
the changed rows' names altered, so each run applies 1,000 new events to one table of 50. Runs
alternate in one process (one JVM): `kept`, the driver's way (cdc_lakehouse.runner.parsed: the
project parsed once), then `parsed`, a plain `dbtRunner().invoke` that loads the project first,
as every invocation did before; each builds what `cdc_lakehouse.runner.changed` selects (the
changed table and what depends on it, its data tests included). The first run of each is left
out (the JVM starts; the first parse). Prints each run's seconds and the medians as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.project import REPO

TABLE = "app.app.t000_a"
SHIFT = 1_000_000_000  # log positions between two replays


def replay(folder: Path, sources: Sequence[Path], round_number: int) -> None:
    """Land `sources` again as new files of `folder`, every event moved after the previous."""
    shift = round_number * SHIFT
    for index, source in enumerate(sources):
        lines = []
        for line in source.read_text().splitlines():
            event = json.loads(line)
            payload = event["payload"]
            position = payload["source"]
            position["lsn"] += shift
            position["sequence"] = json.dumps(
                [str(int(p) + shift) for p in json.loads(position["sequence"])]
            )
            position["txId"] += round_number * 100_000
            for holder in (position, payload):
                holder["ts_ms"] += round_number * 60_000
                holder["ts_us"] += round_number * 60_000_000
                holder["ts_ns"] += round_number * 60_000_000_000
            if payload.get("after"):
                payload["after"]["name"] = f"replay {round_number}"
            lines.append(json.dumps(event))
        offset = 10_000_000 + round_number * 10_000 + index * 1_000
        target = folder / f"{TABLE}+0+{offset:010d}.json"
        target.with_suffix(".tmp").write_text("\n".join(lines) + "\n")
        target.with_suffix(".tmp").rename(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kept_parse", description=__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a many_tables work folder")
    parser.add_argument("--runs", type=int, default=6, help="runs of each kind, the first left out")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    landing, lakehouse, project = work / "landing", work / "lakehouse", work / "project"
    folder = landing / "topics" / TABLE / "partition=0"
    sources = sorted(folder.glob("*.json"))[-2:]
    os.environ.update(
        DBT_PROFILES_DIR=str(REPO / "profiles"),
        CDC_LAKEHOUSE_DIR=str(lakehouse),
        CDC_LANDING_ROOT=str(landing),
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
    )
    os.chdir(project)
    from dbt.cli.main import dbtRunner

    from cdc_lakehouse.runner import changed
    from cdc_lakehouse.runner.parsed import ParsedProject

    kept = ParsedProject()
    state = lakehouse / changed.LISTING_FILE
    command = ["build", "--vars", json.dumps({"cdc_landing_root": str(landing)})]
    seconds: dict[str, list[float]] = {"kept": [], "parsed": []}
    for round_number in range(1, 2 * args.runs + 1):
        kind = "kept" if round_number % 2 else "parsed"
        replay(folder, sources, round_number)
        chosen, after_run, why = changed.next_run(project, str(landing), state, command)
        if chosen is None or not why.startswith("1 of "):
            raise RuntimeError(f"expected one changed table, got: {why}")
        started = time.monotonic()
        result = kept.invoke(chosen) if kind == "kept" else dbtRunner().invoke(chosen)
        seconds[kind].append(round(time.monotonic() - started, 2))
        if not result.success:
            raise RuntimeError(f"{kind} run {round_number} failed: {result.exception}")
        after_run(result)
        print(
            json.dumps({"run": round_number, "kind": kind, "seconds": seconds[kind][-1]}),
            flush=True,
        )
    summary = {
        kind: {"seconds": runs, "median_warm": statistics.median(runs[1:])}
        for kind, runs in seconds.items()
    }
    summary["kept_parses"] = kept.parses
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # the JVM's non-daemon threads would keep a normal exit waiting
