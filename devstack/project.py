"""Throw-away dbt projects for the tests and the benchmarks, made as a user makes one.

One way for every scratch project: the `dbt_project.yml` of docs/package.md (or a caller's own,
the benchmarks' copies of the example's), `packages.yml` naming this repository's dbt package,
the package installed, the example's `generate_schema_name` (schemas named `bronze`, `silver`),
and links to its profiles and jars. Tables come from the caller: a registry and the generator,
or model files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dbt_package"
PACKAGE_DOC = REPO / "docs" / "package.md"
DBT = Path(sys.executable).with_name("dbt")


def documented_block(title: str) -> str:
    """The code block of docs/package.md titled `title` (```yaml title="..."), as a user copies
    it: projects made from it keep the page honest."""
    text = PACKAGE_DOC.read_text()
    match = re.search(rf'```\w+ title="{re.escape(title)}"\n(.*?)\n```', text, re.DOTALL)
    if not match:
        raise ValueError(f'{PACKAGE_DOC} has no block titled "{title}"')
    return match.group(1) + "\n"


def documented_config() -> dict[str, Any]:
    """The dbt_project.yml docs/package.md gives a project of one's own."""
    return yaml.safe_load(documented_block("dbt_project.yml"))


def make_project(
    root: Path,
    *,
    config: Mapping[str, Any] | None = None,
    hooks: Sequence[str] | None = None,
    deps: bool = False,
) -> Path:
    """Write a project into `root` (created): `config` as its dbt_project.yml (default: the
    documented one), `hooks`, when given, as its on-run-end hooks. The package is linked into
    dbt_packages/ as `dbt deps` links a local package, or, with `deps`, installed by a real
    `dbt deps`. No table until the caller adds one."""
    root.mkdir(parents=True, exist_ok=True)
    config = dict(config if config is not None else documented_config())
    if hooks is not None:
        config["on-run-end"] = list(hooks)
    (root / "dbt_project.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    packages = {"packages": [{"local": str(PACKAGE)}]}
    (root / "packages.yml").write_text(yaml.safe_dump(packages))
    if deps:
        result = subprocess.run(
            [str(DBT), "deps"], cwd=root, capture_output=True, text=True, timeout=300,
            env={**os.environ, "DBT_PROFILES_DIR": str(REPO / "profiles")},
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"dbt deps failed in {root}:\n{result.stdout}{result.stderr}")
    else:
        (root / "dbt_packages").mkdir(exist_ok=True)
        (root / "dbt_packages" / "cdc_lakehouse").symlink_to(PACKAGE)
    (root / "macros").mkdir(exist_ok=True)
    shutil.copyfile(
        REPO / "macros" / "generate_schema_name.sql", root / "macros" / "generate_schema_name.sql"
    )
    for name in ("profiles", "jars"):
        (root / name).symlink_to(REPO / name)
    return root
