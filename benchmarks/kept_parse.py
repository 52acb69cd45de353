"""The long-lived driver's warm runs with the project parsed once, against parsed before each run.

    python -m benchmarks.kept_parse --work W --runs 6

W is the work folder of a finished `python -m benchmarks.many_tables` run (its project, landing
zone and lakehouse). Before each run, the landing files of that benchmark's last round
(1,000 events into its first table: inserts, updates and deletes) land again as new files,
their log positions, commit times and transaction ids moved past every event before them and
the changed rows' names altered, so each run applies 1,000 new events to one table of 50. Runs
alternate in one process (one JVM): `kept`, the driver's way (cdc_lakehouse.runner.parsed: the
project parsed once), then `parsed`, a plain `dbtRunner().invoke` that loads the project first,
as every invocation did before; each builds what `cdc_lakehouse.runner.changed` selects (the
changed table and what depends on it, its data tests included). The first run of each is left
out (the JVM starts; the first parse). Prints each run's seconds and the medians as JSON.

Rounds continue after the replays a previous run of this benchmark left in the work folder
and move the events past every log position landed before (a file landed again under a loaded
name, or events older than silver's, are rightly nothing new), and every run must have read the
1,000 events and changed rows: the run audit's row says so, or the benchmark stops. (A first
version numbered its rounds from 1 on every run: a second run on the same folder timed twelve
runs that applied nothing as if they had.)
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
# file offsets of the replays: FIRST_OFFSET + round * 10,000 + file * 1,000
FIRST_OFFSET = 10_000_000
EVENTS = 1_000  # events of the last round of benchmarks.many_tables


def replay(folder: Path, sources: Sequence[Path], round_number: int, base: int) -> None:
    """Land `sources` again as new files of `folder`, every event moved after the previous:
    by `base + round_number` steps of SHIFT, `base` past every position landed before."""
    steps = base + round_number
    shift = steps * SHIFT
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
            position["txId"] += steps * 100_000
            for holder in (position, payload):
                holder["ts_ms"] += steps * 60_000
                holder["ts_us"] += steps * 60_000_000
                holder["ts_ns"] += steps * 60_000_000_000
            if payload.get("after"):
                payload["after"]["name"] = f"replay {round_number}"
            lines.append(json.dumps(event))
        offset = FIRST_OFFSET + round_number * 10_000 + index * 1_000
        target = folder / f"{TABLE}+0+{offset:010d}.json"
        target.with_suffix(".tmp").write_text("\n".join(lines) + "\n")
        target.with_suffix(".tmp").rename(target)


def round_files(folder: Path) -> list[Path]:
    """The landing files of benchmarks.many_tables' last round in `folder`: the newest of its
    own files (not replays) whose lines add up to its 1,000 events (the capture may have
    landed them in two files or in three)."""
    own = sorted(
        path for path in folder.glob("*.json") if int(path.stem.rsplit("+", 1)[1]) < FIRST_OFFSET
    )
    files: list[Path] = []
    lines = 0
    while own and lines < EVENTS:
        files.insert(0, own.pop())
        lines += len(files[0].read_text().splitlines())
    if lines != EVENTS:
        raise RuntimeError(f"the newest files of {folder} hold {lines} events, not {EVENTS}")
    return files


def last_round(folder: Path) -> int:
    """The highest round `replay` landed in `folder` before (0: none)."""
    offsets = [int(path.stem.rsplit("+", 1)[1]) for path in folder.glob(f"{TABLE}+0+*.json")]
    return max(
        [(offset - FIRST_OFFSET) // 10_000 for offset in offsets if offset >= FIRST_OFFSET] + [0]
    )


def landed_steps(folder: Path) -> int:
    """SHIFT steps past the highest log position landed in `folder`."""
    highest = max(
        json.loads(line)["payload"]["source"]["lsn"]
        for path in folder.glob("*.json")
        for line in path.read_text().splitlines()
        if line.strip()
    )
    return highest // SHIFT + 1


def events_applied(invocation: str | None = None) -> tuple[str | None, int | None, int | None]:
    """The run kind, events read and rows changed of the replayed table in the run audit's row
    of dbt invocation `invocation` (default: the last one; none: it wrote no row for it)."""
    from dbt_common.invocation import get_invocation_id
    from pyspark.sql import SparkSession

    row = (
        SparkSession.builder.getOrCreate()
        .sql(
            "select run_kind, events_read, rows_inserted + rows_updated + rows_deleted"
            " from audit.cdc_run_audit"
            " where relation_name = 'silver.t000_a'"
            f" and invocation_id = '{invocation or get_invocation_id()}'"
        )
        .first()
    )
    return (row[0], row[1], row[2]) if row else (None, None, None)


class Replays:
    """The replays of a many_tables work folder's last round, for runs in this process: opening
    it reads the round's files and where earlier replays stopped, sets the environment dbt needs
    for the folder's lakehouse and enters its project; `land()` lands the next round."""

    def __init__(self, work: Path) -> None:
        work = work.resolve()
        self.landing, self.lakehouse = work / "landing", work / "lakehouse"
        self.project = work / "project"
        self.folder = self.landing / "topics" / TABLE / "partition=0"
        self.round, self.base = last_round(self.folder), landed_steps(self.folder)
        self.sources = round_files(self.folder)
        os.environ.update(
            DBT_PROFILES_DIR=str(REPO / "profiles"),
            CDC_LAKEHOUSE_DIR=str(self.lakehouse),
            CDC_LANDING_ROOT=str(self.landing),
            DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        )
        os.chdir(self.project)

    def land(self) -> int:
        """Land the next round; its number."""
        self.round += 1
        replay(self.folder, self.sources, self.round, self.base)
        return self.round


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kept_parse", description=__doc__)
    parser.add_argument("--work", type=Path, required=True, help="a many_tables work folder")
    parser.add_argument("--runs", type=int, default=6, help="runs of each kind, the first left out")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs: at least 2 (the first run of each kind is left out)")
    replays = Replays(args.work)
    landing, lakehouse, project = replays.landing, replays.lakehouse, replays.project
    from dbt.cli.main import dbtRunner

    from cdc_lakehouse.runner import changed
    from cdc_lakehouse.runner.parsed import ParsedProject

    kept = ParsedProject()
    state = lakehouse / changed.LISTING_FILE
    command = ["build", "--vars", json.dumps({"cdc_landing_root": str(landing)})]
    seconds: dict[str, list[float]] = {"kept": [], "parsed": []}
    for run in range(2 * args.runs):
        kind = "parsed" if run % 2 else "kept"
        round_number = replays.land()
        chosen, after_run, why, _ = changed.next_run(project, str(landing), state, command)
        if chosen is None or not why.startswith("1 of "):
            raise RuntimeError(f"expected one changed table, got: {why}")
        started = time.monotonic()
        result = kept.invoke(chosen) if kind == "kept" else dbtRunner().invoke(chosen)
        seconds[kind].append(round(time.monotonic() - started, 2))
        if not result.success:
            raise RuntimeError(f"{kind} run {round_number} failed: {result.exception}")
        after_run(result)
        run_kind, events, rows = events_applied()
        if run_kind != "incremental" or events != EVENTS or not rows:
            raise RuntimeError(
                f"{kind} run {run + 1} (round {round_number}) read {events} events and changed"
                f" {rows} rows ({run_kind}): not a run that applies {EVENTS} new events"
            )
        print(
            json.dumps(
                {
                    "run": run + 1,
                    "kind": kind,
                    "events": events,
                    "rows_changed": rows,
                    "seconds": seconds[kind][-1],
                }
            ),
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
