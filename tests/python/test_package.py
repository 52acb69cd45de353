"""The engine as a user takes it up (docs/package.md): the Python side installed from wheels
built from this repository, the dbt package added to a project of their own outside it.

A project made this way also runs the public databases through the PostgreSQL oracle
(test_public_databases.py: tables the sample does not have, built and compared cell by cell);
this test checks what that one cannot see from inside this checkout: that the wheels hold what
runs (a non-editable install once had none of the adapter's materializations), and that a
project using them and the package parses, generated models and all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dbt_scratch_project import user_project
from lakehouse import DBT, REPO

pytestmark = pytest.mark.dbt

REGISTRY = {
    "source": "shop",
    "landing": {"topic_prefix": "shop.public", "shape": "envelope"},
    "tables": {
        "stock_levels": {
            "key": ["warehouse_id", "sku"],
            "history": True,
            "columns": {"warehouse_id": "int", "sku": "text", "on_hand": "int"},
        }
    },
}


def test_a_project_outside_the_repository_parses_on_the_wheels_and_the_package(
    tmp_path: Path,
) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO), str(REPO / "adapter")])
    built = sorted(path.name.split("-")[0] for path in wheels.glob("*.whl"))
    assert built == ["cdc_lakehouse", "dbt_sparksession"], built
    _run([*pip, "install", "--no-deps", "--target", str(site), *map(str, wheels.glob("*.whl"))])
    # every adapter macro is in the wheel, the materializations with the rest
    include = REPO / "adapter" / "dbt" / "include" / "sparksession"
    for macro in include.rglob("*.sql"):
        assert (site / "dbt" / "include" / "sparksession" / macro.relative_to(include)).exists()

    # the installed code runs, from the wheels, not from this checkout
    env = {**os.environ, "PYTHONPATH": str(site), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    where = _run(
        [sys.executable, "-c", "import json, cdc_lakehouse, dbt.adapters.sparksession as a; "
         "print(json.dumps([cdc_lakehouse.__file__, a.__file__]))"],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert all(path.startswith(str(site)) for path in json.loads(where)), where

    project = user_project(tmp_path / "project")
    (project / "tables").mkdir()
    (project / "tables" / "shop.yml").write_text(yaml.safe_dump(REGISTRY, sort_keys=False))
    # the wheel's command for the registry (`cdc-tables`, as `python -m cdc_lakehouse.tables`)
    for command in ("cdc-tables", "cdc-changed", "cdc-continuous", "cdc-capture"):
        assert (site / "bin" / command).exists(), sorted(p.name for p in (site / "bin").iterdir())
    tables = [sys.executable, str(site / "bin" / "cdc-tables"), "--project", str(project)]
    _run([*tables, "generate"], env=env, cwd=tmp_path)
    _run([*tables, "check"], env=env, cwd=tmp_path)
    target = tmp_path / "target"
    env["DBT_PROFILES_DIR"] = str(project / "profiles")
    _run([str(DBT), "parse", "--target-path", str(target)], env=env, cwd=project)

    manifest = json.loads((target / "manifest.json").read_text())
    nodes = manifest["nodes"]
    assert {n["package_name"] for n in nodes.values()} == {"my_lakehouse"}  # none of the sample's
    silver = nodes["model.my_lakehouse.stock_levels"]["config"]
    assert (silver["materialized"], silver["incremental_strategy"]) == ("incremental", "cdc_merge")
    assert silver["unique_key"] == ["warehouse_id", "sku"]
    history = nodes["model.my_lakehouse.stock_levels_history"]["config"]
    assert history["incremental_strategy"] == "cdc_history"
    bronze = nodes["model.my_lakehouse.bronze_shop__stock_levels"]["config"]
    assert (bronze["materialized"], bronze["schema"]) == ("incremental", "bronze")
    # the adapter dbt loaded (the wheel's, imported above) brought its materializations
    assert "macro.dbt_sparksession.materialization_incremental_sparksession" in manifest["macros"]
    tests = {n["test_metadata"]["namespace"] for n in nodes.values() if n.get("test_metadata")}
    assert "cdc_lakehouse" in tests, tests


def _run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path = REPO) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False
    )
    assert result.returncode == 0, (
        f"{command[:4]} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    )
    return result.stdout
