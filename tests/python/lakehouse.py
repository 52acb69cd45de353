"""Test helpers: run dbt against a private lakehouse folder and read back exported tables.

Every dbt invocation is a subprocess with its own JVM and its own Derby metastore folder
(`CDC_LAKEHOUSE_DIR`), so tests never touch the developer's `.lakehouse/`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cdc_lakehouse.sample import northwind

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample"
DBT = Path(sys.executable).with_name("dbt")


def run_dbt(
    args: list[str],
    *,
    lakehouse: Path,
    variables: Mapping[str, Any] | None = None,
    project_dir: Path = REPO,
    check: bool = True,
    timeout: int = 1200,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `dbt <args>` from `project_dir`; on failure raise with the end of dbt's output.
    `env` adds environment variables (a profile target's settings, for instance)."""
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "CDC_LAKEHOUSE_DIR": str(lakehouse),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        **(env or {}),
    }
    command = [str(DBT), *args, "--log-path", str(lakehouse / "logs")]
    command += ["--target-path", str(lakehouse / "target")]
    if variables:
        command += ["--vars", json.dumps(dict(variables))]
    result = subprocess.run(
        command, cwd=project_dir, env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-80:])
        raise AssertionError(f"dbt {' '.join(args)} failed ({result.returncode}):\n{tail}")
    return result


def copy_landing(destination: Path, files: Iterable[Path] | None = None) -> Path:
    """Copy the bundled sample landing zone (or some of its files) to `destination`."""
    source = SAMPLE / "landing"
    for path in files if files is not None else source.rglob("*.json"):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return destination


def read_export(export_dir: Path, relation: str) -> list[dict[str, Any]]:
    """Rows of one table written by the `cdc_export` on-run-end hook."""
    folder = export_dir / relation
    assert folder.is_dir(), f"{relation} was not exported to {export_dir}"
    rows = []
    for part in sorted(folder.glob("part-*")):
        rows.extend(json.loads(line) for line in part.read_text().splitlines() if line)
    return rows


def canonical_lake_row(table: northwind.Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """A silver row in the canonical form of `sample/expected/*.jsonl` (source columns only)."""
    out = {}
    for column in table.columns:
        value = row.get(column.name)
        if value is not None and column.pg_type.endswith("[]") and isinstance(value, str):
            value = json.loads(value)
        out[column.name] = northwind.canonical_value(column.pg_type, value)
    return out


def expected_state(table: northwind.Table, sample: Path = SAMPLE) -> dict[tuple, dict]:
    rows = [json.loads(line) for line in (sample / "expected" / f"{table.name}.jsonl").open()]
    return {tuple(row[k] for k in table.key): row for row in rows}


def lake_state(export_dir: Path, table: northwind.Table) -> dict[tuple, dict]:
    """Current (not deleted) rows of a silver table, canonical, by key."""
    state = {}
    for row in read_export(export_dir, f"silver.{table.name}"):
        if row.get("_cdc_is_deleted"):
            continue
        canonical = canonical_lake_row(table, row)
        state[tuple(canonical[k] for k in table.key)] = canonical
    return state


def diff_states(expected: Mapping[tuple, dict], actual: Mapping[tuple, dict]) -> list[str]:
    """Human-readable differences between two keyed states (empty when equal)."""
    problems = []
    for key in sorted(set(expected) - set(actual), key=str):
        problems.append(f"missing {key}")
    for key in sorted(set(actual) - set(expected), key=str):
        problems.append(f"unexpected {key}: {actual[key]}")
    for key in sorted(set(expected) & set(actual), key=str):
        for column, value in expected[key].items():
            if actual[key].get(column) != value:
                problems.append(
                    f"{key}.{column}: expected {value!r}, lake has {actual[key].get(column)!r}"
                )
    return problems
