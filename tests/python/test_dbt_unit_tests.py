"""Every dbt unit test of the project (`unit_tests:` in models/**/_*__unit_tests.yml), run on
their own in one warm dbt process, one after another, not inside a build.

A unit test takes its input columns from the relations of its model's parents, so it needs them
to exist, not to hold data: the `empty_lakehouse` fixture (conftest.py) builds every model on an
empty landing zone. Inside a 4-thread build on 2 cores each unit test cost 10-43 s of fresh SQL
analysis competing with the build; one after another in a warm session, 1-2 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lakehouse import run_dbt

pytestmark = [pytest.mark.dbt, pytest.mark.xdist_group("empty-lakehouse")]


def test_every_dbt_unit_test_passes(empty_lakehouse: dict[str, Path]) -> None:
    lakehouse = empty_lakehouse["lakehouse"]
    result = run_dbt(
        ["test", "--select", "test_type:unit", "--threads", "1"],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(empty_lakehouse["landing"])},
        check=False,
    )
    target = lakehouse / "target"
    declared = set(json.loads((target / "manifest.json").read_text())["unit_tests"])
    statuses = {
        r["unique_id"]: r["status"]
        for r in json.loads((target / "run_results.json").read_text())["results"]
        if r["unique_id"].startswith("unit_test.")
    }
    tail = "\n".join(result.stdout.splitlines()[-60:])
    assert len(declared) >= 28, sorted(declared)  # the project's own, at least
    assert set(statuses) == declared, (sorted(declared ^ set(statuses)), tail)
    failed = {test: status for test, status in statuses.items() if status != "pass"}
    assert not failed and result.returncode == 0, (failed, tail)
