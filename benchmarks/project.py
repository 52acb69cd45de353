"""The benchmark's dbt project: one table through the same layers as the real project.

A small project is written to a scratch folder: the bronze Python model is this repo's own
file (`python_models/bronze/northwind/bronze_northwind__customers.py`, the decoder behind it),
the staging and silver models are the generator's (what `make tables` writes for a table), and
the rest is a scratch project as every test's (devstack.project: the engine's dbt package, this
repo's profiles and jars).

Every dbt command runs in its own process against a private lakehouse folder
(`CDC_LAKEHOUSE_DIR`), with `--target-path` and `--log-path` under it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.generate import KEY, TOPIC
from benchmarks.measure import Measured, run_measured
from cdc_lakehouse.tables.generate import BRONZE_CONFIG, SILVER_SQL, STAGING_SQL
from devstack.project import make_project as make_dbt_project

REPO = Path(__file__).resolve().parents[1]
DBT = Path(sys.executable).with_name("dbt")
BRONZE_MODEL = REPO / "python_models" / "bronze" / "northwind" / "bronze_northwind__customers.py"


def project_config() -> dict[str, Any]:
    """The benchmark project's dbt_project.yml: the real project's layer settings (file format,
    materializations, strategies, table properties, hooks), so the benchmark measures what the
    real project runs, plus the bench source's landing settings."""
    real_config = yaml.safe_load((REPO / "dbt_project.yml").read_text())
    real = real_config["models"][real_config["name"]]

    def settings(layer: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in layer.items() if key.startswith("+")}

    bronze = settings(real["bronze"])
    bronze["bench"] = {
        "+cdc_landing": {
            "shape": "envelope",
            "decimal_handling_mode": "precise",
            "time_precision_mode": "adaptive",
        }
    }
    return {
        "name": "bench",
        "version": "0.1.0",
        "config-version": 2,
        "profile": "cdc_lakehouse",
        "model-paths": ["models", "python_models"],
        "models": {
            "bench": {
                **settings(real),
                "bronze": bronze,
                "staging": settings(real["staging"]),
                "silver": settings(real["silver"]),
            }
        },
    }


SILVER = "silver.items"
BRONZE = "bronze.bronze_bench__items"


def make_project(folder: Path, cdc_table: Mapping[str, Any]) -> Path:
    """Write the project to `folder` (kept if it exists) for a topic's `cdc_table` config."""
    folder = Path(folder)
    if (folder / "dbt_project.yml").exists():
        return folder
    make_dbt_project(folder, config=project_config())
    bronze = folder / "python_models" / "bronze" / "bench"
    staging = folder / "models" / "staging" / "bench"
    silver = folder / "models" / "silver"
    for path in (bronze, staging, silver):
        path.mkdir(parents=True)
    model = BRONZE_MODEL.read_text()
    real_source = 'dbt.source("landing_northwind", "customers")'
    if real_source not in model:
        raise RuntimeError(f"{BRONZE_MODEL} no longer names {real_source}: update the benchmark")
    model = model.replace(real_source, 'dbt.source("landing_bench", "items")')
    (bronze / "bronze_bench__items.py").write_text(model)
    sources_yml = {
        "version": 2,
        "sources": [
            {
                "name": "landing_bench",
                "schema": "text",
                "quoting": {"identifier": True},
                "tables": [
                    {
                        "name": "items",
                        "identifier": "{{ var('cdc_landing_root') }}/topics/" + TOPIC,
                    }
                ],
            }
        ],
    }
    (bronze / "_bench__sources.yml").write_text(yaml.safe_dump(sources_yml, sort_keys=False))
    bronze_yml = {
        "version": 2,
        "models": [
            {
                "name": "bronze_bench__items",
                "config": {**BRONZE_CONFIG, "cdc_table": dict(cdc_table)},
            }
        ],
    }
    (bronze / "_bench__bronze.yml").write_text(yaml.safe_dump(bronze_yml, sort_keys=False))
    # the generator's own templates, as `make tables` writes them for a registered table
    names = {"header": "", "bronze": "bronze_bench__items", "key": f"['{KEY}']"}
    (staging / "stg_bench__items_changes.sql").write_text(STAGING_SQL.format(**names))
    silver_sql = SILVER_SQL.format(
        **names,
        macro="cdc_lakehouse.cdc_current_state",
        staging="stg_bench__items_changes",
        extra="",
        delete_mode="hard",
    )
    (silver / "items.sql").write_text(silver_sql)
    silver_yml = {
        "version": 2,
        "models": [
            {
                "name": "items",
                "description": "One row per item, current state, hard deletes applied.",
                "columns": [{"name": KEY, "data_tests": ["unique", "not_null"]}],
            }
        ],
    }
    (silver / "_silver.yml").write_text(yaml.safe_dump(silver_yml, sort_keys=False))
    return folder


def spark_env(lakehouse: Path, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a dbt or reference process on the private lakehouse `lakehouse`."""
    return {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "CDC_LAKEHOUSE_DIR": str(lakehouse),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        **(overrides or {}),
    }


def dbt_command(args: Sequence[str], lakehouse: Path, landing: Path) -> list[str]:
    return [
        str(DBT), *args,
        "--target-path", str(lakehouse / "target"),
        "--log-path", str(lakehouse / "logs"),
        "--vars", json.dumps({"cdc_landing_root": str(landing)}),
    ]  # fmt: skip


def run_dbt(
    project: Path,
    args: Sequence[str],
    *,
    lakehouse: Path,
    landing: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 3600,
) -> Measured:
    """`dbt <args>` in the project, measured; raises with dbt's output when it fails."""
    result = run_measured(
        dbt_command(args, lakehouse, landing),
        cwd=project,
        env=spark_env(lakehouse, env),
        timeout=timeout,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-60:])
        raise RuntimeError(f"dbt {' '.join(args)} failed ({result.returncode}):\n{tail}")
    return result


def model_timings(lakehouse: Path) -> dict[str, float]:
    """Seconds per node of the last dbt invocation (`run_results.json`)."""
    results = json.loads((lakehouse / "target" / "run_results.json").read_text())
    return {
        r["unique_id"].split(".", 2)[-1]: round(r["execution_time"], 2) for r in results["results"]
    }
