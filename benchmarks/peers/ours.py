"""This project on one delivery of the sample, run as production runs it: a fresh lakehouse, the
delivery's batches landed one after the other, and after each a run of the long-lived driver
that builds only the tables whose landing changed (`python -m cdc_lakehouse.runner.continuous
--changed-only -- run`: their bronze, staging, silver and history models; not the gold models
or the rejects table, which the peers do not build). After the last batch one more run, timed
apart, exports silver and the histories (cdc_export) for the comparison.
Prints one JSON line: the seconds of each run, of each run after its bronze models (from
decoded events to silver and history, what the peers are given), of the export and of the
whole process.

    python -m benchmarks.peers.ours --out artifacts/peers --delivery late_files
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from benchmarks.peers.plan import LANDING, REPO, read_plan

MODELS = ("+customers", "+products", "+orders", "+order_details")
# the histories (SCD type 2) of the same tables, compared by benchmarks.peers.history
HISTORY_MODELS = tuple(f"{m.lstrip('+')}_history" for m in MODELS)


def lakehouse_of(out: Path, delivery: str) -> Path:
    return out / "ours" / delivery


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.ours", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--delivery", required=True)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    batches = read_plan(out)["deliveries"][args.delivery]
    lakehouse = lakehouse_of(out, args.delivery)
    shutil.rmtree(lakehouse, ignore_errors=True)
    landing = lakehouse / "landing"
    landing.mkdir(parents=True)
    os.environ.update(
        DBT_PROFILES_DIR=str(REPO / "profiles"),
        CDC_LAKEHOUSE_DIR=str(lakehouse),
        CDC_TABLE_FORMAT="iceberg",
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
    )
    os.environ["CDC_LANDING_ROOT"] = str(landing)
    os.chdir(REPO)
    from cdc_lakehouse.runner import changed
    from cdc_lakehouse.runner.continuous import changed_only_chooser, invoke_repeatedly

    # An empty landing and an empty lakehouse: nothing to build until a batch lands (without a
    # saved listing the first run would build every table of the project).
    state = lakehouse / changed.LISTING_FILE
    changed.next_run(REPO, str(landing), state, ["run"])[1](None)
    variables = {"cdc_landing_root": str(landing)}
    paths = ["--target-path", str(lakehouse / "target"), "--log-path", str(lakehouse / "logs")]
    command = [
        "run", "--quiet", "--exclude", "gold", "cdc_rejects", *paths,
        "--vars", json.dumps(variables),
    ]  # fmt: skip
    pending = iter(batches)

    def land_next_batch() -> None:
        for f in next(pending):
            target = landing / f["as"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(LANDING / f["file"], target)

    seconds, after_bronze = [], []
    runs = invoke_repeatedly(
        command, runs=len(batches), before_each=land_next_batch, choose=changed_only_chooser()
    )
    for report in runs:
        if not report["success"]:
            print(json.dumps({"error": str(report.get("error")), "seconds": seconds}), flush=True)
            os._exit(1)
        seconds.append(report["seconds"])
        bronze = 0.0 if report.get("skipped") else bronze_seconds(lakehouse / "target")
        after_bronze.append(round(report["seconds"] - bronze, 2))
    export = {**variables, "cdc_export_dir": str(lakehouse / "export")}
    final = [
        "run", "--quiet", "--select", *MODELS, *HISTORY_MODELS, *paths,
        "--vars", json.dumps(export),
    ]  # fmt: skip
    exported = next(invoke_repeatedly(final, runs=1))
    if not exported["success"]:
        print(json.dumps({"error": str(exported.get("error"))}), flush=True)
        os._exit(1)
    total = round(time.monotonic() - started, 2)
    report = {
        "delivery": args.delivery,
        "runs": seconds,
        "after_bronze": after_bronze,
        "export_seconds": exported["seconds"],
        "seconds": total,
    }
    print(json.dumps(report), flush=True)
    os._exit(0)  # the JVM's non-daemon threads would keep a normal exit waiting


def bronze_seconds(target: Path) -> float:
    """Wall seconds of the last run's bronze models (landing files decoded into bronze), from
    dbt's run_results.json: the first node compiled to the last one done; 0 when none ran."""
    spans = []
    for result in json.loads((target / "run_results.json").read_text())["results"]:
        if not result["unique_id"].split(".")[-1].startswith("bronze_"):
            continue
        times = [t for t in result["timing"] if t.get("started_at") and t.get("completed_at")]
        spans += [(t["started_at"], t["completed_at"]) for t in times]
    if not spans:
        return 0.0
    start = min(datetime.fromisoformat(a.rstrip("Z")) for a, _ in spans)
    end = max(datetime.fromisoformat(b.rstrip("Z")) for _, b in spans)
    return (end - start).total_seconds()


if __name__ == "__main__":
    raise SystemExit(main())
