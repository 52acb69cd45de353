"""PNG charts of a results.json (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ENGINES = {
    "pipeline": ("pipeline (dbt)", "#1f77b4"),
    "duckdb": ("DuckDB", "#ff7f0e"),
    "spark-naive": ("naive Spark rebuild", "#7f7f7f"),
    "spark-merge": ("hand-written Spark MERGE", "#2ca02c"),
    "hudi": ("Hudi upsert (Debezium payload)", "#d62728"),
}


def label(n: int) -> str:
    """1000000 -> '1M', 10000 -> '10k', 7812345 -> '7.81M'."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def initial_load(results: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    rows = [r for r in results["scenarios"].get("initial", []) if not r["schemas"]]
    if not rows:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    sizes = [label(r["events"]) for r in rows]
    engines = [e for e in ENGINES if e == "pipeline" or any(e in r["references"] for r in rows)]
    width = 0.8 / len(engines)
    for i, engine in enumerate(engines):
        seconds, rates = [], []
        for r in rows:
            entry = r["pipeline"] if engine == "pipeline" else r["references"].get(engine)
            seconds.append(entry["wall_seconds"] if entry else 0)
            rates.append(r["events"] / entry["wall_seconds"] if entry else 0)
        name, color = ENGINES[engine]
        xs = [x + (i - (len(engines) - 1) / 2) * width for x in range(len(rows))]
        left.bar(xs, seconds, width, label=name, color=color)
        right.bar(xs, [r / 1000 for r in rates], width, label=name, color=color)
    left.set_xticks(range(len(rows)), sizes)
    left.set_xlabel("events landed")
    left.set_ylabel("wall seconds (whole process)")
    left.set_title("Initial load into silver")
    right.set_xticks(range(len(rows)), sizes)
    right.set_xlabel("events landed")
    right.set_ylabel("thousand events per second")
    right.axhline(100, color="red", linestyle="--", linewidth=1, label="target: 100k events/s")
    right.set_title("Throughput")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def incremental(results: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    tables = results["scenarios"].get("incremental", [])
    if not tables:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups, pipeline, merge, hudi = [], [], [], []
    for table in tables:
        for batch in table["batches"]:
            groups.append(f"{label(batch['events'])} into\n{label(table['rows'])} rows")
            pipeline.append(batch["pipeline"]["wall_seconds"])
            merge.append(batch.get("spark_merge", {}).get("wall_seconds", 0))
            hudi.append(batch.get("hudi", {}).get("wall_seconds", 0))
    xs = range(len(groups))
    left.bar([x - 0.27 for x in xs], pipeline, 0.27, label=ENGINES["pipeline"][0], color="#1f77b4")
    left.bar(list(xs), merge, 0.27, label=ENGINES["spark-merge"][0], color="#2ca02c")
    left.bar([x + 0.27 for x in xs], hudi, 0.27, label=ENGINES["hudi"][0], color="#d62728")
    left.set_xticks(list(xs), groups, fontsize=8)
    left.set_ylabel("wall seconds (whole process)")
    left.set_title("Incremental batch into silver")
    left.legend(fontsize=8)
    names, incremental_s, rebuild_s, naive_s = [], [], [], []
    for table in tables:
        first = min(table["batches"], key=lambda b: b["events"])
        names.append(f"{label(table['rows'])} rows")
        incremental_s.append(first["pipeline"]["wall_seconds"])
        rebuild_s.append(table["full_build"]["wall_seconds"])
        naive_s.append(table.get("naive_rebuild", {}).get("wall_seconds", 0))
    xs = range(len(names))
    right.bar([x - 0.27 for x in xs], incremental_s, 0.27, label="smallest batch", color="#1f77b4")
    right.bar([x for x in xs], rebuild_s, 0.27, label="full build (dbt)", color="#9467bd")
    right.bar([x + 0.27 for x in xs], naive_s, 0.27, label="naive rebuild", color="#7f7f7f")
    for x, (inc, full) in enumerate(zip(incremental_s, rebuild_s, strict=True)):
        right.text(x - 0.27, inc, f"{inc / full:.0%}", ha="center", va="bottom", fontsize=8)
    right.set_xticks(list(xs), names)
    right.set_ylabel("wall seconds")
    right.set_title("Batch vs rebuild (target: batch <= 10%)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def memory(results: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    bars: list[tuple[str, float, float]] = []
    for row in results["scenarios"].get("initial", []):
        p = row["pipeline"]
        name = f"load {label(row['events'])}" + (" (schemas)" if row["schemas"] else "")
        bars.append((name, p["peak_jvm_rss_mib"] / 1024, p["peak_python_rss_mib"] / 1024))
    for table in results["scenarios"].get("incremental", []):
        for batch in table["batches"]:
            p = batch["pipeline"]
            name = f"{label(batch['events'])} into {label(table['rows'])}"
            bars.append((name, p["peak_jvm_rss_mib"] / 1024, p["peak_python_rss_mib"] / 1024))
    noop = results["scenarios"].get("noop")
    if noop:
        bars.append(
            ("no-op build", noop["peak_jvm_rss_mib"] / 1024, noop["peak_python_rss_mib"] / 1024)
        )
    if not bars:
        return
    fig, ax = plt.subplots(figsize=(11, 4))
    xs = range(len(bars))
    ax.bar(xs, [b[1] for b in bars], label="JVM (Spark driver)", color="#1f77b4")
    ax.bar(
        xs, [b[2] for b in bars], bottom=[b[1] for b in bars], label="Python (dbt)", color="#ff7f0e"
    )
    ax.axhline(6, color="red", linestyle="--", linewidth=1, label="target: 6 GiB")
    ax.set_xticks(list(xs), [b[0] for b in bars], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("peak RSS, GiB")
    ax.set_title("Peak memory of the dbt process and its JVM")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def maintenance(results: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    mt = results["scenarios"].get("maintenance")
    if not mt:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    stages = ["before the runs", "after the runs", "after maintenance"]
    reads = [mt["read_fresh"], mt["read_before"], mt["read_after"]]
    left.bar(stages, [r["seconds"] for r in reads], color=["#9467bd", "#d62728", "#2ca02c"])
    left.set_ylabel("seconds (best of 3, warm session)")
    left.set_title(f"Full read of silver ({label(mt['rows'])} rows)")
    kinds = [("data_files", "data files"), ("position_delete_files", "delete files"),
             ("snapshots", "snapshots")]  # fmt: skip
    xs = range(len(kinds))
    for i, (read, stage) in enumerate(zip(reads, stages, strict=True)):
        right.bar([x + (i - 1) * 0.27 for x in xs], [read["files"][k] for k, _ in kinds], 0.27,
                  label=stage)  # fmt: skip
    right.set_xticks(list(xs), [name for _, name in kinds])
    right.set_title(f"Table layout ({mt['runs']['runs']} incremental runs)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_charts(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    drawn = []
    for name, draw in (
        ("initial_load", initial_load),
        ("incremental", incremental),
        ("memory", memory),
        ("maintenance", maintenance),
    ):
        path = out / f"{name}.png"
        draw(results, path)
        if path.exists():
            drawn.append(path)
    return drawn
