"""`dbt source freshness` on the landing zone: each topic is a dbt source whose freshness is the
modification time of its newest landing file (`_metadata.file_modification_time`, read by Spark).

A copy of the sample landing zone is fresh (copying sets the modification times to now); setting
the times back past the thresholds makes the topics warn or fail. Also checks that the source of
each bronze model names the topic folder the model reads.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lakehouse import REPO, copy_landing, run_dbt

from cdc_lakehouse.bronze.layout import TopicFiles
from cdc_lakehouse.bronze.spec import TableSpec
from cdc_lakehouse.tables import registry

pytestmark = pytest.mark.dbt

# The defaults of vars cdc_landing_warn_after_hours / cdc_landing_error_after_hours.
WARN_AFTER_HOURS = 24
ERROR_AFTER_HOURS = 48
# Registered table -> topic (tables/*.yml: the sample's Northwind and Pagila sources).
TOPICS = {t.name: t.topic for t in registry.tables(REPO)}


def freshness(lakehouse: Path, landing: Path, **variables: object) -> tuple[int, dict[str, dict]]:
    """Run `dbt source freshness`; its exit code and its result per source table."""
    result = run_dbt(
        ["source", "freshness"],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(landing), **variables},
        check=False,
    )
    sources = json.loads((lakehouse / "target" / "sources.json").read_text())
    by_table = {r["unique_id"].rsplit(".", 1)[-1]: r for r in sources["results"]}
    return result.returncode, by_table


def set_age(landing: Path, topic: str, hours: float) -> float:
    """Set the modification time of every file of a topic `hours` back; the epoch seconds set."""
    mtime = time.time() - hours * 3600
    for path in (landing / "topics" / topic).rglob("*.json"):
        os.utime(path, (mtime, mtime))
    return mtime


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_landing(tmp_path_factory.mktemp("landing"))


@pytest.fixture(scope="module")
def lakehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lakehouse")


def test_fresh_landing_passes(lakehouse: Path, landing: Path) -> None:
    code, results = freshness(lakehouse, landing)
    assert code == 0, results
    assert set(results) == set(TOPICS)
    for table, result in results.items():
        assert result["status"] == "pass", (table, result)
        assert result["max_loaded_at_time_ago_in_s"] < 3600, (table, result)
        assert result["criteria"]["warn_after"] == {"count": WARN_AFTER_HOURS, "period": "hour"}
        assert result["criteria"]["error_after"] == {"count": ERROR_AFTER_HOURS, "period": "hour"}


def test_stale_landing_warns_then_errors(lakehouse: Path, landing: Path) -> None:
    """customers past the error threshold, orders between warn and error, the rest fresh."""
    stale = set_age(landing, TOPICS["customers"], ERROR_AFTER_HOURS + 2)
    set_age(landing, TOPICS["orders"], WARN_AFTER_HOURS + 2)
    code, results = freshness(lakehouse, landing)
    assert code != 0, "dbt source freshness must fail when a topic is past error_after"
    statuses = {table: result["status"] for table, result in results.items()}
    assert statuses == {
        "customers": "error",
        "orders": "warn",
        "products": "pass",
        "order_details": "pass",
        "suppliers": "pass",
        "cdc_events": "pass",
        "address": "pass",
    }
    # The loaded-at time is the newest file's modification time (to the millisecond).
    newest = datetime.fromisoformat(results["customers"]["max_loaded_at"])
    assert abs(newest.timestamp() - stale) < 1, (newest, datetime.fromtimestamp(stale, UTC))

    # The thresholds are vars: wide enough, the same files pass.
    code, results = freshness(
        lakehouse,
        landing,
        cdc_landing_warn_after_hours=ERROR_AFTER_HOURS + 24,
        cdc_landing_error_after_hours=ERROR_AFTER_HOURS + 48,
    )
    assert code == 0
    assert {result["status"] for result in results.values()} == {"pass"}


def test_each_bronze_model_reads_the_topic_of_its_source(lakehouse: Path) -> None:
    """The topic is named twice in the generated files (the source's folder, the model's
    cdc_table): they must agree."""
    path = lakehouse / "target" / "manifest.json"
    if not path.exists():  # this test run alone
        run_dbt(["parse"], lakehouse=lakehouse)
    manifest = json.loads(path.read_text())
    bronze = [n for n in manifest["nodes"].values() if n["name"].startswith("bronze_")]
    assert len(bronze) == len(TOPICS)
    for node in bronze:
        config = node["config"]
        spec = TableSpec.from_config(config.get("cdc_landing"), config["cdc_table"])
        folder = TopicFiles(spec.layout, spec.topic).folders[0]  # `topics/<topic>` by default
        sources = [manifest["sources"][uid] for uid in node["depends_on"]["nodes"]]
        assert [s["resource_type"] for s in sources] == ["source"], node["name"]
        assert sources[0]["identifier"].endswith(f"/{folder}"), (node["name"], folder)
