"""A throw-away dbt project that reuses this repo's macros, for tests that need tables the
main project does not have (every Debezium sample variant, oracle tables...).

It is named `cdc_lakehouse` like the real project so `adapter.dispatch(..., 'cdc_lakehouse')`
resolves, and links the repo's macros, generic tests, profiles and jars.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from lakehouse import REPO

from cdc_lakehouse.spec import TableSpec

PROJECT_YML = """
name: cdc_lakehouse
version: "0.1.0"
config-version: 2
profile: cdc_lakehouse
model-paths: ["models", "python_models"]
macro-paths: ["macros"]
test-paths: ["tests"]
on-run-end:
  - "{{ cdc_export(results) }}"
models:
  cdc_lakehouse:
    +file_format: iceberg
    flatten:
      +schema: bronze
      +materialized: incremental
      +incremental_strategy: append
      +on_schema_change: append_new_columns
      +cdc_landing_root: "{{ var('cdc_landing_root', 'landing') }}"
    staging:
      +schema: staging
      +materialized: view
    silver:
      +schema: silver
      +materialized: incremental
      +incremental_strategy: cdc_merge
      +post-hook: "{{ cdc_finalize_merge() }}"
      history:
        +incremental_strategy: cdc_history
"""

# Every flatten model is the same few lines: reuse the project's own, naming its own landing
# source instead of the northwind one.
FLATTEN_MODEL = (REPO / "python_models/flatten/northwind/flat_northwind__customers.py").read_text()
NORTHWIND_SOURCE = 'dbt.source("landing_northwind", "customers")'
assert NORTHWIND_SOURCE in FLATTEN_MODEL, "the flatten model no longer names its landing source"


def landing_source(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The `landing` source table of one flatten model: its topic folder, as in the project's
    _northwind__sources.yml."""
    topic = TableSpec.from_config(None, config).topic
    root = "{{ var('cdc_landing_root', 'landing') }}"
    return {"name": name, "identifier": f"{root}/topics/{topic}"}


def make_project(
    root: Path,
    tables: Mapping[str, Mapping[str, Any]],
    delete_mode: str = "hard",
    *,
    history: bool = False,
) -> Path:
    """Create a project with one flatten, staging and silver model per entry of `tables`
    (name -> `cdc_table` config, which must hold `key`), and `<name>_history` models when
    `history` is set."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text(PROJECT_YML)
    for name in ("macros", "profiles", "jars"):
        (root / name).symlink_to(REPO / name)
    (root / "tests").symlink_to(REPO / "tests" / "dbt")
    flatten = root / "python_models" / "flatten"
    staging = root / "models" / "staging"
    silver = root / "models" / "silver"
    for folder in (flatten, staging, silver):
        folder.mkdir(parents=True)
    if history:
        (silver / "history").mkdir()
    flatten_yml = []
    sources = []
    for name, config in tables.items():
        keys = list(config["key"])
        model = FLATTEN_MODEL.replace(NORTHWIND_SOURCE, f'dbt.source("landing", "{name}")')
        (flatten / f"flat_{name}.py").write_text(model)
        flatten_yml.append(
            {
                "name": f"flat_{name}",
                "config": {"cdc_table": dict(config)},
                "tests": ["cdc_no_rejects", "cdc_no_undeclared_fields"],
            }
        )
        sources.append(landing_source(name, config))
        (staging / f"stg_{name}_changes.sql").write_text(
            f"select {{{{ cdc_staging_columns(ref('flat_{name}'), {keys!r}) }}}}\n"
            f"from {{{{ ref('flat_{name}') }}}}\nwhere _cdc_reject_reason is null\n"
        )
        (silver / f"{name}.sql").write_text(
            f"{{{{ cdc_current_state(ref('stg_{name}_changes'), unique_key={keys!r}, "
            f"delete_mode={delete_mode!r}) }}}}\n"
        )
        if history:
            (silver / "history" / f"{name}_history.sql").write_text(
                f"{{{{ cdc_history(ref('stg_{name}_changes'), unique_key={keys!r}, "
                f"ignore_columns=[], delete_mode={delete_mode!r}) }}}}\n"
            )
    (flatten / "_flatten.yml").write_text(yaml.safe_dump({"version": 2, "models": flatten_yml}))
    landing = {"name": "landing", "schema": "text", "quoting": {"identifier": True}}
    (flatten / "_sources.yml").write_text(
        yaml.safe_dump({"version": 2, "sources": [{**landing, "tables": sources}]})
    )
    return root
