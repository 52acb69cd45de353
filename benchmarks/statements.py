"""What one dbt command costs, model by model: SQL statements and Iceberg commits.

    python -m benchmarks.statements -- build
    python -m benchmarks.statements --json out.json -- run --select bronze_northwind__customers+

Runs `dbt <command>` in this process (profiles and lakehouse as for any dbt command here) with
dbt's debug log written as JSON to a temporary folder, then prints, per node, the statements
dbt sent to Spark (its `SQLQuery` events) and their seconds, and per Iceberg table the commits
made during the command (the new `*.metadata.json` files under the warehouse: Iceberg writes
one per commit), with totals by kind of node (the model's folder: bronze, staging, silver,
gold...; tests, seeds, snapshots). Statements a Python model runs inside its own Spark job are
not dbt statements and are not counted; its commits are.

The counts are the before/after figures of "cost follows the change": a command that has
nothing new to do should send few statements and commit nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def warehouse() -> Path:
    """The warehouse folder, as profiles/profiles.yml resolves it."""
    lakehouse = os.environ.get("CDC_LAKEHOUSE_DIR", ".lakehouse")
    return Path(os.environ.get("CDC_WAREHOUSE_DIR", f"{lakehouse}/warehouse"))


def commits_since(root: Path, started: float) -> Counter[str]:
    """Iceberg commits under `root` since `started` (epoch seconds), by table folder."""
    commits: Counter[str] = Counter()
    for path in root.glob("**/metadata/*.metadata.json"):
        if path.stat().st_mtime >= started:
            commits[str(path.parent.parent.relative_to(root))] += 1
    return commits


def statements(log: Path) -> dict[str, dict[str, Any]]:
    """Per node (unique id, or `-` outside any node): statements, seconds, kind."""
    nodes: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"statements": 0, "seconds": 0.0, "kind": "-", "sql": []}
    )
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name = event.get("info", {}).get("name")
        if name not in ("SQLQuery", "SQLQueryStatus"):
            continue
        data = event.get("data", {})
        info = data.get("node_info") or {}
        node = nodes[info.get("unique_id") or "-"]
        node["kind"] = kind(info)
        if name == "SQLQuery":
            node["statements"] += 1
            node["sql"].append(first_words(str(data.get("sql") or "")))
        else:
            node["seconds"] += float(data.get("elapsed") or 0.0)
    return dict(nodes)


def first_words(sql: str, length: int = 160) -> str:
    """A statement's start, without dbt's query comment: what it does, for the JSON figures."""
    text = " ".join(sql.split())
    if text.startswith("/*") and "*/" in text:
        text = text[text.index("*/") + 2 :].lstrip()
    return text[:length]


def kind(info: dict[str, Any]) -> str:
    """`model:silver`, `test`, `seed`, `snapshot`... from a node's dbt log info."""
    resource = info.get("resource_type") or "-"
    if resource != "model":
        return resource
    folder = Path(info.get("node_path") or "-").parts[0]
    return f"model:{folder}"


def report(nodes: dict[str, dict[str, Any]], commits: Counter[str], seconds: float) -> str:
    lines = [f"{'node':<64} {'statements':>10} {'seconds':>8}"]
    for node, figures in sorted(nodes.items(), key=lambda item: -item[1]["statements"]):
        lines.append(f"{node[-64:]:<64} {figures['statements']:>10} {figures['seconds']:>8.1f}")
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for figures in nodes.values():
        total = totals[figures["kind"]]
        total[0] += 1
        total[1] += figures["statements"]
        total[2] += figures["seconds"]
    lines += ["", f"{'kind':<20} {'nodes':>6} {'statements':>10} {'seconds':>8}"]
    for name, (count, sent, spent) in sorted(totals.items()):
        lines.append(f"{name:<20} {count:>6} {sent:>10} {spent:>8.1f}")
    lines += ["", f"Iceberg commits: {sum(commits.values())}"]
    lines += [f"  {table}: {count}" for table, count in sorted(commits.items())]
    sent = sum(f["statements"] for f in nodes.values())
    lines += ["", f"{sent} statements, {sum(commits.values())} commits, {seconds:.1f} s wall"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.statements")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- <dbt command and args>")
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"] or ["build"]

    from dbt.cli.main import dbtRunner

    with tempfile.TemporaryDirectory(prefix="dbt-log-") as logs:
        flags = ["--log-path", logs, "--log-format-file", "json", "--log-level-file", "debug"]
        started = time.time()
        result = dbtRunner().invoke([*command, *flags])
        seconds = time.time() - started
        nodes = statements(Path(logs) / "dbt.log")
    commits = commits_since(warehouse(), started)
    print(report(nodes, commits, seconds))
    if args.json:
        figures = {"command": command, "seconds": round(seconds, 1), "nodes": nodes}
        args.json.write_text(json.dumps({**figures, "commits": commits}, indent=1) + "\n")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
