"""The oracle under faults: each test injects one fault into a seeded history and then requires
the lake to equal PostgreSQL, exactly as without the fault.

- the capture process hard-killed (SIGKILL) mid-run after it wrote files but before its offsets
  moved, then restarted: a batch repeated in landing;
- a landing file delivered twice under a new name;
- files of a later phase landing (and being built) before the files of an earlier phase;
- `dbt build` killed with SIGKILL during a silver merge, then re-run;
- malformed lines in landing files: they go to rejects with file and line, every good row
  still arrives.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from lakehouse import DBT, REPO, read_export, stop_dbt_worker
from oracle import OracleRun

from cdc_lakehouse.pg import TemporaryPostgres

TRANSACTIONS = 100
ORDERS_TOPIC = "northwind.public.orders"


def test_capture_killed_mid_run_and_restarted(tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(pg, tmp_path, seed=2001)
        run.start()
        run.source.run_phase(1, TRANSACTIONS * 2)
        group = next(g for g in run.source.groups if "orders" in g.tables)
        before = len(run.captured_files())
        # The capture dies right after renaming its first file of the batch, before it marks
        # the batch processed: on restart Debezium delivers that batch again.
        os.environ["CDC_CAPTURE_CRASH_AFTER_FILES"] = "1"
        try:
            crashed = run.source.start_capture(group)
            crashed.communicate(timeout=300)
        finally:
            del os.environ["CDC_CAPTURE_CRASH_AFTER_FILES"]
        assert crashed.returncode == -signal.SIGKILL
        assert len(run.captured_files()) > before
        run.faults.append("capture SIGKILL after first file, restarted")
        run.source.capture()
        run.deliver()
        assert landed_more_than_once(run.landing / "topics" / f"northwind.public.{group.tables[0]}")
        run.assert_lake_equals_database(run.build("after-crash"), "capture killed and restarted")


def test_file_delivered_twice_under_a_new_name(tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(pg, tmp_path, seed=2002)
        run.start()
        run.phase(1, TRANSACTIONS)
        run.deliver()
        run.build("phase1")
        new_files = run.phase(2, TRANSACTIONS)
        run.deliver()
        orders = [f for f in new_files if ORDERS_TOPIC in f.name]
        twice = run.landing / orders[0].relative_to(run.captured)
        copy = twice.with_name(f"{ORDERS_TOPIC}+0+0009000000.json")
        shutil.copyfile(twice, copy)
        run.faults.append("one landing file delivered twice under a new name")
        run.assert_lake_equals_database(run.build("phase2"), "file delivered twice")


def test_later_phase_lands_before_earlier_phase(tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(pg, tmp_path, seed=2003)
        run.start()
        snapshot = run.captured_files()
        phase1 = run.phase(1, TRANSACTIONS)
        phase2 = run.phase(2, TRANSACTIONS)
        run.deliver(snapshot)
        run.build("snapshot")
        run.deliver(phase2)  # phase 2 arrives and is built before phase 1
        run.build("phase2-first")
        run.deliver(phase1)
        run.faults.append("phase 2 files built before phase 1 files")
        run.assert_lake_equals_database(run.build("phase1-late"), "out of order across runs")


def test_dbt_build_killed_during_silver_merge(tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(pg, tmp_path, seed=2004)
        run.start()
        run.phase(1, TRANSACTIONS)
        run.deliver()
        run.build("phase1")
        run.phase(2, TRANSACTIONS)
        run.deliver()
        killed_at = kill_dbt_during_silver_merge(run, "killed")
        run.faults.append(f"dbt build SIGKILL during silver merge of {killed_at}")
        run.assert_lake_equals_database(run.build("rerun"), "dbt killed during merge")


def test_malformed_lines_go_to_rejects_and_good_rows_arrive(tmp_path: Path) -> None:
    with TemporaryPostgres() as pg:
        run = OracleRun(pg, tmp_path, seed=2005)
        run.start()
        new_files = run.phase(1, TRANSACTIONS)
        run.deliver()
        target = next(f for f in new_files if ORDERS_TOPIC in f.name)
        landed = run.landing / target.relative_to(run.captured)
        good = landed.read_text().splitlines()
        bad = ['{"before": null, "after": {"order_id": 1', "not json at all", "[1, 2]"]
        # bad lines in the middle and at the end of a file the sink wrote
        landed.write_text("\n".join(good[:2] + bad[:2] + good[2:] + bad[2:]) + "\n")
        run.faults.append("3 malformed lines in a landing file")
        export = run.build("phase1")
        run.assert_lake_equals_database(export, "malformed lines")
        rejects = [
            r
            for r in read_export(export, "staging.cdc_rejects")
            if r["_cdc_file"].endswith(landed.name)
        ]
        assert sorted(r["_cdc_line"] for r in rejects) == [3, 4, len(good) + 3]
        assert all(r["_cdc_reject_reason"] for r in rejects)


def landed_more_than_once(topic_dir: Path) -> bool:
    """Some record value appears in two landing files of the topic (a repeated batch)."""
    seen: dict[str, Path] = {}
    for path in sorted(topic_dir.rglob("*.json")):
        for line in path.read_text().splitlines():
            value = json.loads(line)
            payload = value.get("payload", value)
            source = payload.get("source") or {}
            key = json.dumps([source.get("lsn"), payload.get("op"), payload.get("after")])
            if key in seen and seen[key] != path:
                return True
            seen[key] = path
    return False


def kill_dbt_during_silver_merge(run: OracleRun, export: str) -> str:
    """Start `dbt build`, SIGKILL its process group while a silver model runs; the model name."""
    stop_dbt_worker(run.lakehouse)  # this build is a CLI process of its own, to be killed
    args, variables = run.build_command(export)
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "CDC_LAKEHOUSE_DIR": str(run.lakehouse),
    }
    command = [str(DBT), "--debug", *args, "--vars", json.dumps(variables)]
    command += [
        "--log-path",
        str(run.lakehouse / "logs"),
        "--target-path",
        str(run.lakehouse / "target"),
    ]
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    model = ""
    assert proc.stdout is not None
    for line in proc.stdout:  # --debug: dbt echoes every statement it sends
        if "merge into silver." in line:
            model = line.split("merge into silver.")[1].split()[0]
            time.sleep(0.5)  # Spark is now executing the MERGE on the Iceberg table
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert model, "dbt finished before any silver merge started"
    return model
