"""This project on one delivery of the sample: a fresh lakehouse, the delivery's batches landed
one after the other, `dbt run` of the four tables' bronze, staging, silver and history models
after each (one long-lived driver: cdc_lakehouse.continuous), silver and the histories exported
(cdc_export) after the last.
Prints one JSON line: the seconds of each run and of the whole process.

    python -m benchmarks.peers.ours --out artifacts/peers --delivery late_files
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Sequence
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
    os.chdir(REPO)
    from cdc_lakehouse.continuous import invoke_repeatedly

    variables = {"cdc_landing_root": str(landing), "cdc_export_dir": str(lakehouse / "export")}
    command = [
        "run", "--quiet", "--select", *MODELS, *HISTORY_MODELS,
        "--target-path", str(lakehouse / "target"),
        "--log-path", str(lakehouse / "logs"),
        "--vars", json.dumps(variables),
    ]  # fmt: skip
    pending = iter(batches)

    def land_next_batch() -> None:
        for f in next(pending):
            target = landing / f["as"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(LANDING / f["file"], target)

    seconds = []
    for report in invoke_repeatedly(command, runs=len(batches), before_each=land_next_batch):
        if not report["success"]:
            print(json.dumps({"error": str(report.get("error")), "seconds": seconds}), flush=True)
            os._exit(1)
        seconds.append(report["seconds"])
    total = round(time.monotonic() - started, 2)
    print(json.dumps({"delivery": args.delivery, "runs": seconds, "seconds": total}), flush=True)
    os._exit(0)  # the JVM's non-daemon threads would keep a normal exit waiting


if __name__ == "__main__":
    raise SystemExit(main())
