"""Read back what the dbt package's `cdc_export` hook wrote (var `cdc_export_dir`): one folder,
`<dir>/cdc.export/`, of JSON lines `{"relation": "<schema>.<table>", "row": {...}}` (see
dbt_package/macros/cdc/cdc_export.sql). The tests and the benchmarks compare the lake with the
source through it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

FOLDER = "cdc.export"


def _parts(export_dir: Path) -> tuple[tuple[str, int, int], ...]:
    folder = Path(export_dir) / FOLDER
    return tuple(
        (str(part), part.stat().st_mtime_ns, part.stat().st_size)
        for part in sorted(folder.glob("part-*"))
    )


@lru_cache(maxsize=8)
def _read(parts: tuple[tuple[str, int, int], ...]) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = {}
    for path, _, _ in parts:
        for line in Path(path).read_text().splitlines():
            if line:
                entry = json.loads(line)
                rows = tables.setdefault(entry["relation"], [])
                if "row" in entry:
                    rows.append(entry["row"])
    return tables


def exported(export_dir: Path) -> list[str]:
    """The names (`schema.table`) of the relations exported to `export_dir`, sorted."""
    return sorted(_read(_parts(export_dir)))


def read_export(export_dir: Path, relation: str) -> list[dict[str, Any]] | None:
    """The rows of one exported table (`schema.table`), or None when it was not exported."""
    rows = _read(_parts(export_dir)).get(relation)
    return None if rows is None else [dict(row) for row in rows]
