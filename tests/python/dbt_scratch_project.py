"""A throw-away dbt project that uses this repo's dbt package, for tests that need tables the
main project does not have (every Debezium sample variant, oracle tables...).

It links the package (as `dbt deps` links a local one), the repo's profiles and jars; the
package's macros set what the generated models need, so its dbt_project.yml holds only what a
user's does: schemas, the file format, the landing root and the export hook.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from lakehouse import DBT, REPO

from benchmarks.project import link_package
from cdc_lakehouse.tables.generate import write
from cdc_lakehouse.tables.registry import REGISTRY_DIR

PROJECT_YML = """
name: scratch
version: "0.1.0"
config-version: 2
profile: cdc_lakehouse
model-paths: ["models", "python_models"]
on-run-end:
  - "{{ cdc_lakehouse.cdc_export(results) }}"
models:
  scratch:
    +file_format: iceberg
    bronze:
      +schema: bronze
      +cdc_landing_root: "{{ var('cdc_landing_root', 'landing') }}"
    staging:
      +schema: staging
      +materialized: view
    silver:
      +schema: silver
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
    # generate_schema_name: the layers' schemas as named (bronze, silver), as in the example
    for name in ("macros", "profiles", "jars"):
        (root / name).symlink_to(REPO / name)
    link_package(root)
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


PACKAGE_DOC = REPO / "docs" / "package.md"


def documented_block(title: str) -> str:
    """The code block of docs/package.md titled `title` (```yaml title="..."), as a user copies
    it: the test's project is the page's, so the page cannot drift from what works."""
    text = PACKAGE_DOC.read_text()
    match = re.search(rf'```\w+ title="{re.escape(title)}"\n(.*?)\n```', text, re.DOTALL)
    assert match, f'{PACKAGE_DOC} has no block titled "{title}"'
    return match.group(1) + "\n"


def user_project(root: Path, *, hooks: list[str] = ()) -> Path:
    """A dbt project as a user makes one outside this repository (docs/package.md): the page's
    dbt_project.yml (with `hooks` added to its on-run-end), packages.yml naming the package
    (`local:`, the page's alternative to `git:`), a real `dbt deps`, the example's
    generate_schema_name, profiles and jars. No table until the registry gets one."""
    root.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(documented_block("dbt_project.yml"))
    config["on-run-end"] = [*config.get("on-run-end", []), *hooks]
    (root / "dbt_project.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    packages = {"packages": [{"local": str(REPO / "dbt_package")}]}
    (root / "packages.yml").write_text(yaml.safe_dump(packages))
    (root / "macros").mkdir()
    shutil.copyfile(
        REPO / "macros" / "generate_schema_name.sql", root / "macros" / "generate_schema_name.sql"
    )
    for name in ("profiles", "jars"):
        (root / name).symlink_to(REPO / name)
    result = subprocess.run(
        [str(DBT), "deps"], cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "DBT_PROFILES_DIR": str(root / "profiles")},
    )  # fmt: skip
    assert result.returncode == 0, f"dbt deps failed:\n{result.stdout}{result.stderr}"
    assert (root / "dbt_packages" / "cdc_lakehouse" / "dbt_project.yml").exists(), result.stdout
    return root
