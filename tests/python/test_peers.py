"""The peer comparison (docs/peers.md) runs, and what docs/ says of it is what it finds.

`python -m benchmarks.peers --delivery late_files` (each topic's first and last landing file,
then the files between) runs Hudi's Spark writer with PostgresDebeziumAvroPayload and Spark's
AUTO CDC (pyspark 4.2, .venv-peers) on the sample's events, and compares every key with
PostgreSQL's final state; the same run compares this project's history models and AUTO CDC's
SCD type 2 (pyspark 4.3, .venv-peers-spark43) with each key's history read off the events
(benchmarks/peers/history.py). This project's tables are those of the same delivery that
test_pipeline_e2e.py checks (sample_stepwise.py's second step, `--ours-export`: `make peers`
runs it through the long-lived driver instead, for its seconds; the files and the tables are
the same). This project must be right on every key of every case, current
state and history (no key left unjudged); each peer must produce all four tables; and the
case-by-case counts must equal the ones published in docs/peers/results.json, so the page cannot
drift from what the engines do (a new Hudi or Spark that fixes a case makes this test fail until
`make peers PUBLISH=1` is run again).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lakehouse import REPO

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("sample-stepwise")]

DELIVERY = "late_files"
PUBLISHED = REPO / "docs" / "peers" / "results.json"


@pytest.fixture(scope="module")
def comparison(
    tmp_path_factory: pytest.TempPathFactory, stepwise: dict[str, Path]
) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("peers")
    command = [sys.executable, "-m", "benchmarks.peers", "--out", str(out), "--delivery", DELIVERY]
    done = subprocess.run(
        [*command, "--ours-export", str(stepwise["step2"])],
        cwd=REPO,
        # the peers' drivers take the tests' JVM options and interpreted queries (conftest.py):
        # the same results, fewer CPU seconds; `make peers` compiles, for its published seconds
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads((out / "results.json").read_text())


def test_every_engine_built_every_table(comparison: dict[str, Any]) -> None:
    assert set(comparison["results"][DELIVERY]) == {"ours", "hudi", "auto_cdc"}
    assert comparison["runs"]["auto_cdc"]["errors"][DELIVERY] == []
    assert set(comparison["history"][DELIVERY]) == {"ours", "auto_cdc"}
    assert comparison["runs"]["auto_cdc_scd2"]["errors"][DELIVERY] == []
    assert comparison["runs"]["auto_cdc_scd2"]["versions"]["scd"] == 2


def test_this_project_is_right_on_every_case(comparison: dict[str, Any]) -> None:
    cases = comparison["results"][DELIVERY]["ours"]["cases"]
    wrong = {case: c for case, c in cases.items() if c["right"] != c["keys"]}
    assert not wrong, wrong
    # the cases exist in the sample: TOAST placeholders, a truncate, key changes, re-inserts
    for case in ("toast", "truncate", "pk_change", "delete_reinsert", "deleted"):
        assert cases[case]["keys"] > 0, case


def test_this_project_history_is_right_on_every_key(comparison: dict[str, Any]) -> None:
    cases = comparison["history"][DELIVERY]["ours"]["cases"]
    wrong = {case: c for case, c in cases.items() if c["right"] != c["keys"] or c["not_judged"]}
    assert not wrong, (wrong, comparison["history"][DELIVERY]["ours"]["wrong_examples"])
    # every key of the current-state comparison has its history judged too
    current = comparison["results"][DELIVERY]["ours"]["cases"]
    assert {case: c["keys"] for case, c in cases.items()} == {
        case: c["keys"] for case, c in current.items()
    }


def test_the_published_comparison_is_what_the_engines_do(comparison: dict[str, Any]) -> None:
    published = json.loads(PUBLISHED.read_text())["results"][DELIVERY]
    for engine in ("ours", "hudi", "auto_cdc"):
        assert comparison["results"][DELIVERY][engine]["cases"] == published[engine]["cases"], (
            f"{engine} differs from docs/peers/results.json: run `make peers PUBLISH=1`"
        )
    # the peers' known failures: the TOAST placeholder written over real values, rows a
    # TRUNCATE removed still there
    for engine in ("hudi", "auto_cdc"):
        cases = comparison["results"][DELIVERY][engine]["cases"]
        assert cases["toast"]["right"] < cases["toast"]["keys"]
        assert cases["truncate"]["right"] < cases["truncate"]["keys"]
    published_history = json.loads(PUBLISHED.read_text())["history"][DELIVERY]
    for engine in ("ours", "auto_cdc"):
        assert (
            comparison["history"][DELIVERY][engine]["cases"] == published_history[engine]["cases"]
        ), f"{engine}'s history differs from docs/peers/results.json: run `make peers PUBLISH=1`"
    # AUTO CDC's SCD type 2 writes the TOAST placeholder into versions, and keeps versions open
    # that a TRUNCATE ended
    cases = comparison["history"][DELIVERY]["auto_cdc"]["cases"]
    assert cases["toast"]["right"] < cases["toast"]["keys"]
    assert cases["truncate"]["right"] < cases["truncate"]["keys"]
