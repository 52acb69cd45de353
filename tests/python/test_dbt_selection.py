"""What the documented `dbt build -s ...` selections run: every data test a selection runs reads
only models the same command builds (a test reading a model left out fails on a fresh lakehouse,
or checks a stale table), and the tests reading two models run when both are built.

`dbt ls` only parses the project (no Spark, no lakehouse): a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lakehouse import run_dbt

pytestmark = pytest.mark.dbt

BUILT = ("model.", "seed.", "snapshot.")
# The selections the README, docs/ and the project's files advise, and what
# `cdc_lakehouse.runner.changed` runs.
SELECTIONS = [
    "+silver.customers",  # README Quickstart: "one table and what it needs"
    "+exposure:sales_dashboard",  # models/gold/_gold__exposures.yml
    "source:landing_northwind.customers+",
    "+customers +customers_history",
]
AGREEMENT = "cdc_history_matches_current_state_customers_history"


def selected(lakehouse: Path, selection: str) -> dict[str, dict]:
    """unique_id -> node (`resource_type`, `depends_on`) of what `dbt build -s <selection>`
    runs (with an empty selection: what a plain `dbt build` runs)."""
    keys = ["unique_id", "resource_type", "depends_on"]
    select = ["-s", *selection.split()] if selection else []
    args = ["ls", "--quiet", *select, "--output", "json", "--output-keys", *keys]
    result = run_dbt(args, lakehouse=lakehouse, env={})  # a CLI process: parsing only
    nodes = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {node["unique_id"]: node for node in nodes}


def test_a_selection_runs_the_data_tests_of_what_it_builds(tmp_path: Path) -> None:
    lakehouse = tmp_path / "lakehouse"
    agreement = {}
    for selection in SELECTIONS:
        nodes = selected(lakehouse, selection)
        built = {uid for uid in nodes if uid.startswith(BUILT)}
        tests = {uid: n for uid, n in nodes.items() if n["resource_type"] == "test"}
        assert built and tests, selection
        for uid, test in tests.items():
            reads = {p for p in test["depends_on"]["nodes"] if p.startswith(BUILT)}
            assert reads <= built, (selection, uid, sorted(reads - built))
        agreement[selection] = any(AGREEMENT in uid for uid in tests)
    # the history's agreement with silver: with both models, not with silver alone
    assert agreement == {
        "+silver.customers": False,
        "+exposure:sales_dashboard": False,  # the dashboard's models read no history
        "source:landing_northwind.customers+": True,
        "+customers +customers_history": True,
    }


def test_a_plain_build_runs_the_pipeline_and_its_data_tests_not_the_unit_tests(
    tmp_path: Path,
) -> None:
    """selectors.yml's default: a scheduled `dbt build` leaves the dbt unit tests out (about
    half of a no-op build's work); `dbt test -s test_type:unit` runs every one of them."""
    lakehouse = tmp_path / "lakehouse"
    plain = selected(lakehouse, "")
    kinds = {node["resource_type"] for node in plain.values()}
    assert {"model", "seed", "snapshot", "test", "source"} <= kinds, kinds
    assert "unit_test" not in kinds
    manifest = json.loads((lakehouse / "target" / "manifest.json").read_text())
    hooks = {uid for uid in manifest["nodes"] if uid.startswith("operation.")}  # not selectable
    everything = {*manifest["nodes"], *manifest["sources"]} - hooks
    unit_tests = set(manifest["unit_tests"])
    assert len(unit_tests) >= 28
    assert everything - set(plain) == set(), sorted(everything - set(plain))[:10]
    assert set(selected(lakehouse, "test_type:unit")) == unit_tests
