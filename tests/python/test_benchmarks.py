"""The benchmark suite runs, and its pipeline agrees with its references.

`python -m benchmarks.run --scale tiny` (5k events) runs the initial load, one incremental batch
(then two more in one long-lived process) and a no-op build (also two in one process)
through the suite's own dbt project, with DuckDB and the hand-written Spark
MERGE as references: the suite's project must still build (it broke once when the bronze
models gained a dbt source), silver must hold exactly the keys alive at the generated source,
and two independent implementations (DuckDB, a PySpark MERGE without dbt) must give the same
rows and checksums. On the tables it kept, `python -m benchmarks.history_runs` adds a history
model, builds it and runs it twice more in one process: its data tests (intervals that chain,
live versions equal to silver's rows) must pass. No timing is asserted: figures come from the
suite (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]


def test_tiny_benchmark_suite_agrees_with_references(tmp_path: Path) -> None:
    out = tmp_path / "results"
    command = [
        sys.executable, "-m", "benchmarks.run", "--scale", "tiny",
        "--only", "initial,incremental,noop", "--references", "duckdb,spark-merge",
        "--work", str(tmp_path / "work"), "--out", str(out), "--keep",
    ]  # fmt: skip
    # Compiled query code, as production runs (conftest.py turns it off for the other tests).
    env = {**os.environ, "CDC_SPARK_CODEGEN": "true"}
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]

    results = json.loads((out / "results.json").read_text())
    initial = results["scenarios"]["initial"]
    assert [row["events"] for row in initial] == [5_000]
    assert initial[0]["pipeline"]["rows_match_source"], initial[0]["pipeline"]["checksum"]
    assert set(initial[0]["references"]) == {"duckdb", "spark-merge"}

    [table] = results["scenarios"]["incremental"]
    [batch] = table["batches"]
    assert batch["pipeline"]["checksum"]["row_count"] == batch["expected_rows"]
    assert batch["spark_merge"]["matches_pipeline"]

    # The same batch size again, landed before each of two runs in one process (the scale's
    # warm runs: 3 at every other scale).
    assert len(table["warm"]["seconds"]) == 2
    assert table["warm"]["rows_match_source"]

    noop = results["scenarios"]["noop"]
    assert noop["wall_seconds"] > 0
    assert len(noop["warm"]["seconds"]) == 2
    targets = {t["target"]: t for t in results["targets"]}
    rows = targets["silver holds exactly the rows alive at the source (after every load and batch)"]
    assert (rows["met"], rows["measured"]) == (True, "3 of 3"), rows
    agree = targets["references agree with the pipeline (row count and checksums)"]
    assert (agree["met"], agree["measured"]) == (True, "3 of 3"), agree
    assert (out / "results.md").exists()
    assert list(out.glob("*.png")), "no chart drawn"

    # A history model over the same change log, on the tables the suite kept.
    history = subprocess.run(
        [sys.executable, "-m", "benchmarks.history_runs", "--work", str(tmp_path / "work"),
         "--table", "initial-5k", "--runs", "2", "--batch", "500"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert history.returncode == 0, (history.stdout + history.stderr)[-4000:]
    report = json.loads(history.stdout.strip().splitlines()[-1])
    assert report["history_full_build_seconds"] > 0
    assert len(report["seconds"]) == 2
    assert [sorted(run) for run in report["models"]] == [["items", "items_history"]] * 2
    assert report["history_tests"] == "pass"
