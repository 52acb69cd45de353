"""A throw-away dbt project, for tests that need tables the example project does not have (every
Debezium sample variant, oracle tables...): made as a user makes one (devstack.project: the
dbt_project.yml of docs/package.md, the engine's dbt package linked), with the export hook the
comparisons read and tables from a registry, tables/scratch.yml, through the generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from cdc_lakehouse.tables.generate import write
from cdc_lakehouse.tables.registry import REGISTRY_DIR
from devstack.project import documented_config
from devstack.project import make_project as make_dbt_project

# What the comparisons read: each silver table exported after a build (cdc_export)
EXPORT_HOOK = "{{ cdc_lakehouse.cdc_export(results) }}"

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
    """The project without tables: its registry and generated models are the caller's. Its only
    on-run-end hook is the export (the documented run summary and audit cost statements every
    build, and the tests read neither)."""
    return make_dbt_project(root, hooks=[EXPORT_HOOK])


def user_project(root: Path) -> Path:
    """The project exactly as docs/package.md makes it, its hooks kept and the export added,
    the package installed by a real `dbt deps` (from a `local:` entry, the page's alternative
    to `git:`)."""
    hooks = [*documented_config().get("on-run-end", []), EXPORT_HOOK]
    project = make_dbt_project(root, hooks=hooks, deps=True)
    assert (project / "dbt_packages" / "cdc_lakehouse" / "dbt_project.yml").exists()
    return project


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
