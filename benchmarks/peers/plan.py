"""What the peer comparison runs: the sample's Debezium tables, the deliveries of their landing
files, and where the plan goes (`plan.json`, read by every engine's process, including the
Spark 4 one, which has neither dbt nor this project installed: stdlib only here).

Deliveries (each starts from an empty lakehouse; files by their Kafka offset):
- `one_batch`: every file at once (an initial load).
- `file_by_file`: the i-th file of every topic, then the next, one run each (a scheduled pipeline).
- `late_files`: each topic's first and last file, then the files between (late arrivals across
  runs: what silver holds is newer than the next run's events).
- `replayed_file`: everything, then each topic's first file again under a new name (a sink's
  redelivery after a restart: old events, among them rows deleted since).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LANDING = REPO / "sample" / "landing"
DELIVERIES = ("one_batch", "file_by_file", "late_files", "replayed_file")
# Offset of a redelivered file's new name: above every offset of the sample.
REPLAY_OFFSET = 90_000
TOAST_PLACEHOLDER = "__debezium_unavailable_value"
# The peers' driver JVMs run with the collector the project's profile gives its own, and the
# JVM options CDC_SPARK_JAVA_OPTIONS adds to it (profiles/profiles.yml,
# spark.driver.extraJavaOptions): the comparison is of the engines, not of their JVM settings.
DRIVER_JAVA_OPTIONS = " ".join(
    ["-XX:+UseParallelGC", *os.environ.get("CDC_SPARK_JAVA_OPTIONS", "").split()]
)
# ... and evaluate queries as this project's sessions do: compiled by default, interpreted with
# CDC_SPARK_CODEGEN=false (profiles/profiles.yml: whole-stage code generation off and the
# expression factories' NO_CODEGEN mode, the same results). The tests set it, as for their own
# sessions (tests/python/conftest.py); `make peers` leaves it unset.
CODEGEN_SETTINGS = (
    {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    if os.environ.get("CDC_SPARK_CODEGEN", "true").lower() == "false"
    else {}
)


def sample_tables() -> list[Any]:
    """The sample's log-based tables (Debezium envelope and flattened rows), in the main
    environment (cdc_lakehouse installed)."""
    from sample.generator import northwind

    return [northwind.CUSTOMERS, northwind.PRODUCTS, northwind.ORDERS, northwind.ORDER_DETAILS]


def topic_files(topic: str) -> list[str]:
    """A topic's landing files, relative to the landing root, by offset."""
    folder = LANDING / "topics" / topic
    files = sorted((f for f in folder.rglob("*.json")), key=lambda f: f.name)
    return [str(f.relative_to(LANDING)) for f in files]


def _replayed(path: str) -> dict[str, str]:
    topic = path.split("/")[1]
    new_name = f"{topic}+0+{REPLAY_OFFSET:010d}.json"
    return {"file": path, "as": str(Path(path).with_name(new_name))}


def deliveries(topics: list[str]) -> dict[str, list[list[dict[str, str]]]]:
    """Delivery -> batches -> files (`file`: the sample's, `as`: the name it lands under)."""
    files = {t: topic_files(t) for t in topics}

    def batch(paths: list[str]) -> list[dict[str, str]]:
        return [{"file": p, "as": p} for p in paths]

    longest = max(len(f) for f in files.values())
    every = [p for t in topics for p in files[t]]
    ends = [p for t in topics for p in (files[t][0], files[t][-1])]
    return {
        "one_batch": [batch(every)],
        "file_by_file": [
            batch([files[t][i] for t in topics if i < len(files[t])]) for i in range(longest)
        ],
        "late_files": [batch(ends), batch([p for p in every if p not in ends])],
        "replayed_file": [batch(every), [_replayed(files[t][0]) for t in topics]],
    }


def history_ignore(name: str) -> list[str]:
    """The columns the table's history model ignores (its registry entry's
    `history.ignore_columns`: a change of only these opens no version)."""
    from cdc_lakehouse.tables import registry

    return list(registry.table(REPO, name, source="northwind").history_ignore)


def build_plan() -> dict[str, Any]:
    tables = sample_tables()
    string_types = ("text", "varchar", "jsonb", "json", "uuid")
    return {
        "tables": {
            t.name: {
                "topic": t.topic,
                "key": list(t.key),
                "columns": [c.name for c in t.columns],
                "toast_text_columns": [
                    c.name for c in t.columns if c.external and c.pg_type in string_types
                ],
                "history_ignore": history_ignore(t.name),
            }
            for t in tables
        },
        "deliveries": deliveries([t.topic for t in tables]),
    }


def write_plan(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "plan.json"
    path.write_text(json.dumps(build_plan(), indent=1))
    return path


def read_plan(out: Path) -> dict[str, Any]:
    return json.loads((out / "plan.json").read_text())


def batch_names(batch: list[dict[str, str]]) -> list[str]:
    """The sample file names (the events' `_file`) a batch delivers."""
    return [Path(f["file"]).name for f in batch]


def json_value(value: Any) -> Any:
    """A value collected from Spark, JSON-ready for northwind.canonical_value (the process runs
    with TZ=UTC, so a collected timestamp is UTC wall-clock time)."""
    import base64
    from datetime import date, datetime
    from decimal import Decimal

    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value


def write_state(path: Path, rows: list[dict[str, Any]]) -> None:
    """A table's final rows, one JSON object a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps({k: json_value(v) for k, v in row.items()}) for row in rows)
    path.write_text("".join(line + "\n" for line in lines))
