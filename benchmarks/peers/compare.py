"""Each engine's final tables against PostgreSQL's final state (`sample/expected/`), key by key,
per case (benchmarks.peers.events) and delivery; the report (Markdown, JSON, PNG).

A key is right when the engine holds exactly the source's row for it (every column, in the
canonical form of sample/README.md), or holds no row where the source has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.peers.events import CASES
from benchmarks.peers.ours import lakehouse_of
from benchmarks.peers.plan import DELIVERIES, REPO
from cdc_lakehouse.export import read_export
from sample.generator import northwind

ENGINES = {
    "ours": "cdc-lakehouse (dbt)",
    "hudi": "Hudi PostgresDebeziumAvroPayload",
    "auto_cdc": "Spark AUTO CDC",
}
CASE_TITLES = {
    "toast": "unchanged TOAST value (placeholder in the event)",
    "truncate": "rows before a TRUNCATE",
    "pk_change": "primary-key change (delete + create in one transaction)",
    "delete_reinsert": "deleted, then inserted again with the same key",
    "deleted": "other deleted rows",
    "other": "every other row",
}
DELIVERY_TITLES = {
    "one_batch": "every file in one batch (initial load)",
    "file_by_file": "file by file (one run per file of each topic)",
    "late_files": "late files (first and last file of each topic, then the rest)",
    "replayed_file": "a file replayed (everything, then each topic's first file again)",
}


def canonical_state(table: Any, rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    state = {}
    for row in rows:
        if not row.get("_cdc_is_deleted"):
            out = northwind.canonical_lake_row(table, row)
            state[tuple(out[k] for k in table.key)] = out
    return state


def _json_lines(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line]


def engine_rows(out: Path, engine: str, delivery: str, table: str) -> list[dict[str, Any]] | None:
    if engine == "ours":
        return read_export(lakehouse_of(out, delivery) / "export", f"silver.{table}")
    path = out / engine / delivery / f"{table}.jsonl"
    return _json_lines([path]) if path.exists() else None


def expected(table: Any) -> dict[tuple, dict[str, Any]]:
    path = REPO / "sample" / "expected" / f"{table.name}.jsonl"
    return canonical_state(table, _json_lines([path]))


def compare(out: Path, engines: list[str]) -> dict[str, Any]:
    from benchmarks.peers.plan import sample_tables

    cases = json.loads((out / "cases.json").read_text())
    results: dict[str, Any] = {}
    for delivery in DELIVERIES:
        per_engine: dict[str, Any] = {}
        for engine in engines:
            counts = {case: {"keys": 0, "right": 0} for case in CASES}
            examples: dict[str, list[str]] = {case: [] for case in CASES}
            complete = True
            for table in sample_tables():
                rows = engine_rows(out, engine, delivery, table.name)
                if rows is None:
                    complete = False
                    continue
                state, source = canonical_state(table, rows), expected(table)
                for case in CASES:
                    for key_json in cases[table.name][case]:
                        key = tuple(json.loads(key_json))
                        right = state.get(key) == source.get(key)
                        counts[case]["keys"] += 1
                        counts[case]["right"] += right
                        if not right and len(examples[case]) < 2:
                            examples[case].append(_difference(table.name, key, source, state))
            if complete:
                per_engine[engine] = {"cases": counts, "wrong_examples": examples}
        results[delivery] = per_engine
    return results


def _difference(table: str, key: tuple, source: dict, state: dict) -> str:
    want, have = source.get(key), state.get(key)
    if want is None:
        return f"{table} {list(key)}: the source has no row, the engine has one"
    if have is None:
        return f"{table} {list(key)}: missing (the source has it)"
    columns = [c for c in want if want[c] != have.get(c)]
    shown = ", ".join(
        f"{c} = {str(have.get(c))[:40]!r} (source {str(want[c])[:40]!r})" for c in columns[:2]
    )
    return f"{table} {list(key)}: {shown}"


def _cell(entry: dict[str, int]) -> str:
    if not entry["keys"]:
        return "-"
    mark = "" if entry["right"] == entry["keys"] else " **✗**"
    return f"{entry['right']}/{entry['keys']}{mark}"


# the runs timed: the engines, and AUTO CDC's SCD type 2 run (benchmarks.peers.history)
TIMED = {**ENGINES, "auto_cdc_scd2": "Spark AUTO CDC, SCD type 2"}


def markdown(results: dict[str, Any], runs: dict[str, Any], history: str = "") -> str:
    """The generated section of docs/peers.md: one table of cases per delivery, the errors the
    engines raised, examples of wrong rows, the history section (`history`, Markdown), and the
    time each took."""
    lines = []
    for delivery in DELIVERIES:
        engines = [e for e in ENGINES if e in results.get(delivery, {})]
        if delivery not in runs.get("batches", {}):
            continue
        lines += [f"### {DELIVERY_TITLES[delivery]}", ""]
        lines.append("| case | " + " | ".join(ENGINES[e] for e in engines) + " |")
        lines.append("|---|" + "---|" * len(engines))
        for case in CASES:
            cells = [_cell(results[delivery][e]["cases"][case]) for e in engines]
            lines.append(f"| {CASE_TITLES[case]} | " + " | ".join(cells) + " |")
        lines.append("")
        for engine in ENGINES:
            if engine in engines:
                for case, found in results[delivery][engine]["wrong_examples"].items():
                    lines += [f"- {ENGINES[engine]}, {case}: {example}" for example in found]
            elif engine in runs:
                lines.append(f"- {ENGINES[engine]} produced no table.")
            for error in runs.get(engine, {}).get("errors", {}).get(delivery, []):
                lines.append(f"- {ENGINES[engine]} raised: `{error}`")
        lines.append("")
    lines += history.splitlines() if history else []
    lines += [
        "### Time on the sample (2 cores)",
        "",
        "The engines do different work; each column says what its seconds hold.",
        "cdc-lakehouse runs as production runs it: one long-lived driver (`python -m",
        "cdc_lakehouse.runner.continuous --changed-only`), a run after each batch building the",
        "tables whose files landed. *Whole*: the process (JVM start, reading and decoding the JSON",
        "files into bronze, staging, silver and history, Iceberg commits, and one export of",
        "silver and the histories at the end). *From decoded events*: the same without the",
        "bronze models' seconds, the input the peers are given. Hudi: its writes only (the",
        "events already decoded; the session started once before, "
        f"{runs.get('hudi', {}).get('session_seconds') or 0:.1f} s). AUTO CDC: the",
        "`spark-pipelines run` process (its JVM and Spark Connect server included; the events",
        "already decoded; one run for all batches, in memory, its final tables copied to",
        "Parquet), once for SCD type 1 (pyspark 4.2) and once for SCD type 2 (pyspark 4.3);",
        "cdc-lakehouse builds both in one run. The benchmark suite times the engines at scale",
        "(docs/benchmarks.md).",
        "",
    ]
    columns = [("batches", "runs")]
    if "ours" in runs:
        columns += [
            ("ours", "cdc-lakehouse, whole"),
            ("ours_decoded", "cdc-lakehouse, from decoded events"),
        ]
    columns += [(e, TIMED[e]) for e in TIMED if e != "ours" and e in runs]
    if "auto_cdc" in runs and "auto_cdc_scd2" in runs:
        columns.append(("auto_cdc_both", "AUTO CDC, SCD type 1 + 2"))
    lines.append("| delivery | " + " | ".join(title for _, title in columns) + " |")
    lines.append("|---|" + "---|" * len(columns))

    def seconds(engine: str, delivery: str) -> float | None:
        if engine == "ours_decoded":
            return runs["ours"].get("from_decoded", {}).get(delivery)
        if engine == "auto_cdc_both":
            both = [seconds(e, delivery) for e in ("auto_cdc", "auto_cdc_scd2")]
            return None if None in both else sum(both)  # type: ignore[arg-type]
        return runs[engine].get("seconds", {}).get(delivery)

    for delivery in DELIVERIES:
        cells = [str(runs.get("batches", {}).get(delivery, ""))]
        for engine, _ in columns[1:]:
            value = seconds(engine, delivery)
            cells.append("-" if value is None else f"{value:.1f} s")
        lines.append(f"| {delivery} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def chart(results: dict[str, Any], path: Path) -> None:
    """Share of keys right per case, one panel per delivery, one bar per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ours": "#1f77b4", "hudi": "#d62728", "auto_cdc": "#2ca02c"}
    deliveries = [d for d in DELIVERIES if results.get(d)]
    fig, axes = plt.subplots(1, len(deliveries), figsize=(4.2 * len(deliveries), 4.4), sharey=True)
    for ax, delivery in zip(axes if len(deliveries) > 1 else [axes], deliveries, strict=True):
        engines = [e for e in ENGINES if e in results[delivery]]
        width = 0.8 / len(engines)
        for i, engine in enumerate(engines):
            counts = results[delivery][engine]["cases"]
            shown = [c for c in CASES if counts[c]["keys"]]
            share = [100 * counts[c]["right"] / counts[c]["keys"] for c in shown]
            xs = [x + (i - (len(engines) - 1) / 2) * width for x in range(len(shown))]
            ax.bar(xs, share, width, color=colors[engine], label=ENGINES[engine])
        ax.set_xticks(range(len(shown)), shown, rotation=35, ha="right")
        ax.set_title(delivery.replace("_", " "))
        ax.set_ylim(0, 105)
    (axes[0] if len(deliveries) > 1 else axes).set_ylabel("keys equal to PostgreSQL (%)")
    fig.legend(*((axes[0] if len(deliveries) > 1 else axes).get_legend_handles_labels()),
               loc="lower center", ncol=3, frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
