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

from cdc_lakehouse.tables.generate import write
from cdc_lakehouse.tables.registry import REGISTRY_DIR

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
    bronze:
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

SOURCE = "scratch"


def bronze_model(name: str) -> str:
    """The bronze model generated for a table of the scratch project."""
    return f"bronze_{SOURCE}__{name}"


def staging_model(name: str) -> str:
    return f"stg_{SOURCE}__{name}_changes"


def registry_path(project: Path) -> Path:
    return project / REGISTRY_DIR / f"{SOURCE}.yml"


def make_project(
    root: Path,
    tables: Mapping[str, Mapping[str, Any]],
    delete_mode: str = "hard",
    *,
    history: bool = False,
) -> Path:
    """Create a project as a user does: one registry entry per entry of `tables` (name ->
    `cdc_table` settings, which must hold `key`) in tables/scratch.yml, and the generator writes
    the bronze, staging, silver (and `<name>_history` when `history` is set) models."""
    project_skeleton(root)
    entries = {}
    for name, config in tables.items():
        entry = {k: v for k, v in config.items() if k != "name"}
        entry.update(delete_mode=delete_mode, history=history)
        entries[name] = entry
    write_registry(root, entries)
    return root


def project_skeleton(root: Path) -> Path:
    """The project without tables: its registry and generated models are the caller's."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text(PROJECT_YML)
    for name in ("macros", "profiles", "jars"):
        (root / name).symlink_to(REPO / name)
    (root / "tests").symlink_to(REPO / "tests" / "dbt")
    # the pipeline columns' doc blocks, which the generated yml files name
    (root / "models").mkdir()
    (root / "models" / "cdc_columns.md").symlink_to(REPO / "models" / "cdc_columns.md")
    return root


def write_registry(project: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Write the scratch registry file and generate the models from it (`make tables`)."""
    path = registry_path(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"source": SOURCE, "tables": {name: dict(entry) for name, entry in entries.items()}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    write(project)


def update_entry(project: Path, name: str, **settings: Any) -> None:
    """Change settings of one registry entry and regenerate, as a user edits tables/*.yml."""
    doc = yaml.safe_load(registry_path(project).read_text())
    doc["tables"][name].update(settings)
    write_registry(project, doc["tables"])
