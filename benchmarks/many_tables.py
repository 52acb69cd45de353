"""Onboard a whole PostgreSQL schema with the generator, capture it, build it, test it.

    python -m benchmarks.many_tables --tables 50 --work "$(mktemp -d)" --out docs/benchmarks

What a team with dozens of tables does on day one: a private PostgreSQL gets `--tables` tables
of six shapes (single and composite keys; int, bigint, text, uuid keys; numeric, timestamps,
dates, arrays, jsonb, bytea...), `--rows` rows each; `python -m cdc_lakehouse.tables from-
postgres` registers them and `generate` writes their models into a fresh project (this repo's
dbt_project.yml, macros and profiles, the engine as a dbt package; no sample tables); the capture
tool snapshots them; then, timed: a full `dbt parse`; the initial build (models and every data
test); a no-op `dbt build` and a no-op `python -m cdc_lakehouse.runner.changed`; after
changes (updates, deletes, inserts) to `--changed` tables, a build of the changed tables only
(`cdc_lakehouse.runner.changed`); after changes to `--changed` other tables, a plain `dbt build`
of every table; then the long-lived driver (`continuous --changed-only`) over rounds of changes
(LONG_LIVED_ROUNDS: its first run, nothing landed, three warm runs of `--changed` other tables,
1,000 events into one table, nothing again). After every build each silver table is compared
with PostgreSQL, cell by cell.
Results: `<out>/many_tables.json` and a printed summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from benchmarks.measure import machine_cpu, run_measured
from cdc_lakehouse.capture import run_capture_subprocess
from cdc_lakehouse.export import read_export
from devstack.pg import TemporaryPostgres
from devstack.project import make_project as make_dbt_project
from sample.generator.northwind import canonical_value

REPO = Path(__file__).resolve().parents[1]
DBT = Path(sys.executable).with_name("dbt")
SCHEMA = "app"

# Six table shapes: (columns with the PostgreSQL types the comparison canonicalises, key, the
# insert of rows `lo..hi`, the change applied to a changed table).
SHAPES: list[dict[str, Any]] = [
    {
        "columns": {
            "id": "int",
            "name": "text",
            "amount": "numeric(12,2)",
            "created_at": "timestamptz",
            "updated_at": "timestamp",
            "active": "boolean",
        },
        "key": ["id"],
        "insert": "select g, 'name ' || g, g * 1.25, timestamptz '2026-01-01 00:00:00+00' + g * "
        "interval '1 hour', timestamp '2026-01-01' + g * interval '1 minute', g % 2 = 0 "
        "from generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set amount = amount + 1, name = name || ' (changed)' where id % 5 = 0",
            "delete from {t} where id % 7 = 0",
        ],
    },
    {
        "columns": {
            "id": "bigint",
            "code": "varchar",
            "tags": "text[]",
            "doc": "jsonb",
            "ext": "uuid",
        },
        "key": ["id"],
        "insert": "select g, 'C' || g, array['a' || g, 'b'], jsonb_build_object('n', g, 'k', "
        "'v'), md5(g::text)::uuid from generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set doc = doc || '{{\"changed\": true}}', tags = tags || 'c'::text "
            "where id % 4 = 0",
            "delete from {t} where id % 9 = 0",
        ],
    },
    {
        "columns": {"a": "int", "b": "int", "qty": "int", "price": "numeric(10,2)", "day": "date"},
        "key": ["a", "b"],
        "insert": "select g / 3, g % 3, g, g * 0.5, date '2026-01-01' + g from "
        "generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set qty = qty + 100 where a % 3 = 0",
            "delete from {t} where b = 2 and a % 2 = 0",
        ],
    },
    {
        "columns": {
            "id": "text",
            "note": "text",
            "small": "smallint",
            "blob": "bytea",
            "seen": "timestamptz",
        },
        "key": ["id"],
        "insert": "select 'k' || g, repeat('note ', g % 7), (g % 100)::smallint, "
        "decode(md5(g::text), 'hex'), timestamptz '2026-02-01 00:00:00+00' + g * "
        "interval '1 second' from generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set note = 'changed', seen = seen + interval '1 day' where small % 6 = 0",
            "delete from {t} where small % 11 = 0",
        ],
    },
    {
        "columns": {
            "id": "int",
            "big": "bigint",
            "scores": "int[]",
            "label": "text",
            "day": "date",
        },
        "key": ["id"],
        "insert": "select g, g * 1000000000::bigint, array[g, g + 1], null, date '2025-06-01' + g "
        "from generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set label = 'set', scores = scores || 0 where id % 3 = 0",
            "delete from {t} where id % 8 = 0",
        ],
    },
    {
        "columns": {"id": "uuid", "payload": "jsonb", "amount": "numeric(8,3)", "at": "timestamp"},
        "key": ["id"],
        "insert": "select md5('r' || g)::uuid, jsonb_build_array(g, 'x'), g / 8.0, "
        "timestamp '2026-03-01' + g * interval '1 second' from generate_series({lo}, {hi}) g",
        "change": [
            "update {t} set amount = amount * 2 where at < timestamp '2026-03-01 00:00:10'",
            "delete from {t} where at > timestamp '2026-03-01 00:00:15'",
        ],
    },
]


def table_names(count: int) -> list[tuple[str, dict[str, Any]]]:
    return [(f"t{i:03d}_{'abcdef'[i % 6]}", SHAPES[i % 6]) for i in range(count)]


def create_source(pg: TemporaryPostgres, count: int, rows: int) -> None:
    with pg.connect(autocommit=True) as conn:
        conn.execute(f"create schema {SCHEMA}")
        for name, shape in table_names(count):
            columns = ", ".join(f"{c} {t}" for c, t in shape["columns"].items())
            key = ", ".join(shape["key"])
            qualified = f"{SCHEMA}.{name}"
            conn.execute(f"create table {qualified} ({columns}, primary key ({key}))")
            conn.execute(f"comment on table {qualified} is 'Benchmark table of shape {name[-1]}.'")
            conn.execute(f"insert into {qualified} {shape['insert'].format(lo=1, hi=rows)}")


# Which tables a phase changes (another set, and new keys, in each).
PHASES = {
    "changed-only": 0,
    "full": 1,
    "loop-first": 2,
    "loop-warm": 3,
    "loop-warm-2": 4,
    "loop-warm-3": 5,
}

# The change of one table in the long-lived driver: 1,000 events (600 inserts, then 300 updates
# and 100 deletes of those rows), each its own statement's row event.
THOUSAND_EVENTS = [
    "insert into {t} " + SHAPES[0]["insert"].format(lo=100001, hi=100600),
    "update {t} set name = name || ' (1k)' where id between 100001 and 100300",
    "delete from {t} where id between 100501 and 100600",
]


def chosen_tables(count: int, changed: int, phase: str) -> list[tuple[str, dict[str, Any]]]:
    """The `changed` tables (at most `count`) a phase changes: spread over the shapes, every
    `count // changed`-th from the phase's offset, wrapping around. With 50 tables and 5 changed
    the phases' sets are disjoint; with fewer tables they overlap, but no phase changes fewer
    than `changed` (a phase whose offset passed the last table once changed none)."""
    names = table_names(count)
    step = max(1, count // changed)  # (changed - 1) * step < count: no table picked twice
    return [names[(PHASES[phase] + i * step) % count] for i in range(min(changed, count))]


def change_source(
    pg: TemporaryPostgres, count: int, changed: int, rows: int, phase: str
) -> list[str]:
    """Updates, deletes and inserts on `changed` tables spread over the shapes (another set of
    tables, and new keys, in each phase)."""
    offset = PHASES[phase]
    chosen = chosen_tables(count, changed, phase)
    with pg.connect(autocommit=True) as conn:
        for name, shape in chosen:
            qualified = f"{SCHEMA}.{name}"
            for statement in shape["change"]:
                conn.execute(statement.format(t=qualified))
            lo = rows + 1 + offset * 1000
            hi = lo + max(3, rows // 10)
            conn.execute(f"insert into {qualified} {shape['insert'].format(lo=lo, hi=hi)}")
    return [name for name, _ in chosen]


def make_project(folder: Path) -> Path:
    """A fresh project as a user starts one: this repo's settings and profiles, the engine as a
    dbt package, and no table until the generator registers them."""
    config = yaml.safe_load((REPO / "dbt_project.yml").read_text())
    return make_dbt_project(folder, config=config)


def run(
    cmd: list[str], cwd: Path, env: dict[str, str], what: str, digits: int = 1
) -> dict[str, Any]:
    cpu = machine_cpu()
    result = run_measured(cmd, cwd=cwd, env=env, timeout=7200)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-60:])
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{tail}")
    figures = {
        "wall_seconds": round(result.seconds, digits),
        "machine_cpu_seconds": round(machine_cpu() - cpu, 1),
        "peak_total_rss_mib": result.memory()["peak_total_rss_mib"],
    }
    print(f"{what}: {figures}", flush=True)
    return figures


def compare(pg: TemporaryPostgres, export_dirs: list[Path], count: int) -> list[str]:
    """Cell-by-cell differences between PostgreSQL and every silver table (empty when equal).
    A run exports the tables it built: a table not built by the latest run is read from the
    latest earlier export that holds it."""
    problems = []
    with pg.connect() as conn:
        for name, shape in table_names(count):
            types = shape["columns"]
            cursor = conn.execute(f"select * from {SCHEMA}.{name}")
            names = [d.name for d in cursor.description]
            expected = {}
            for row in cursor.fetchall():
                canon = {c: canonical_value(types[c], v) for c, v in zip(names, row, strict=True)}
                expected[tuple(canon[k] for k in shape["key"])] = canon
            actual = {}
            exports = [read_export(d, f"silver.{name}") for d in export_dirs]
            rows = next((found for found in exports if found is not None), None)
            if rows is None:
                problems.append(f"{name}: never exported")
                continue
            for row in rows:
                canon = {}
                for column, pg_type in types.items():
                    value = row.get(column)
                    if value is not None and pg_type.endswith("[]") and isinstance(value, str):
                        value = json.loads(value)
                    canon[column] = canonical_value(pg_type, value)
                actual[tuple(canon[k] for k in shape["key"])] = canon
            for key in sorted(set(expected) ^ set(actual), key=str):
                side = "PostgreSQL" if key in expected else "the lake"
                problems.append(f"{name} {key}: only in {side}")
            for key in sorted(set(expected) & set(actual), key=str):
                if expected[key] != actual[key]:
                    problems.append(f"{name} {key}: {expected[key]} != {actual[key]}")
    return problems


# Rounds of the long-lived driver: what lands before the run (None: nothing). A warm run of 5
# changed tables three times, each time another 5: one run's seconds move by more than a change
# to the code does, their median is the figure (`long_lived_5_tables_median`).
LONG_LIVED_ROUNDS = [
    ("first run of the driver, 5 tables changed", "loop-first"),
    ("nothing landed", None),
    ("5 tables changed", "loop-warm"),
    ("5 other tables changed", "loop-warm-2"),
    ("5 more tables changed", "loop-warm-3"),
    ("1,000 events into one table", "1k-events"),
    ("nothing landed, again", None),
]
# The warm rounds of `--changed` tables whose median is the 5-of-50 figure.
WARM_PHASES = ("loop-warm", "loop-warm-2", "loop-warm-3")


def long_lived_driver(
    project: Path, env: dict[str, str], variables: str, land: Callable[[str | None], list[str]]
) -> list[dict[str, Any]]:
    """`python -m cdc_lakehouse.runner.continuous --changed-only -- build` in this process: before
    each run (untimed), `land` changes the source and captures it; each run builds only the tables
    whose landing changed. Then one more invocation, untimed, exports every silver table (the
    embedded metastore admits only this process). Returns one report per round."""
    from cdc_lakehouse.runner.continuous import changed_only_chooser, invoke_repeatedly

    os.environ.update(env)
    os.chdir(project)
    rounds = iter(LONG_LIVED_ROUNDS)
    landed: list[list[str]] = []

    def before_each() -> None:
        landed.append(land(next(rounds)[1]))

    reports = []
    runs = invoke_repeatedly(
        ["build", "--vars", variables],
        runs=len(LONG_LIVED_ROUNDS),
        before_each=before_each,
        choose=changed_only_chooser(),
    )
    for (what, _), report, tables in zip(LONG_LIVED_ROUNDS, runs, landed, strict=True):
        figures = {"round": what, "tables_changed": tables, **report}
        print(f"long-lived driver: {figures}", flush=True)
        reports.append(figures)
        if not report["success"]:
            raise RuntimeError(f"long-lived driver run failed: {report}")
    export = json.loads(variables) | {
        "cdc_export_dir": str(Path(env["CDC_LAKEHOUSE_DIR"]) / "exports" / "long-lived")
    }
    final = list(
        invoke_repeatedly(["run", "--select", "silver", "--vars", json.dumps(export)], runs=1)
    )
    if not final[0]["success"]:
        raise RuntimeError(f"export after the long-lived driver failed: {final[0]}")
    return reports


def capture(config: dict[str, Any], timeout: float) -> None:
    """One bounded run of the capture tool (what changed in the source lands); fails loudly."""
    done = run_capture_subprocess(config, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"capture failed:\n{done.stderr[-3000:]}")


def no_op_only(
    args: argparse.Namespace,
    project: Path,
    config: dict[str, Any],
    changed_only: list[str],
    changed_env: dict[str, str],
    results: dict[str, Any],
    dbt: Callable[..., list[str]],
) -> int:
    """What a scheduled run costs as a new process when nothing landed, against the number of
    tables: the landing captured, the project parsed, the listing saved by a changed-tables run
    of `dbt parse` (a no-op reads the registry, the project's files and the landing's listing,
    never the lakehouse, so no table is built), then `changed` timed three times."""
    capture(config, timeout=1800)
    results["parse"] = run(dbt("parse", "--no-partial-parse"), project, changed_env, "parse")
    command = [*changed_only, "--all", "--", "parse", "--vars", dbt("parse")[-1]]
    run(command, project, changed_env, "listing saved (changed --all -- parse)")
    noop = [run(changed_only, project, changed_env, "no-op", digits=3) for _ in range(3)]
    results["noop_changed_only"] = sorted(noop, key=lambda r: r["wall_seconds"])[1]
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"many_tables_noop_{args.tables}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(yaml.safe_dump(results, sort_keys=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--changed", type=int, default=5)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--no-op-only",
        action="store_true",
        help="only the no-op of a new process: onboard, capture, parse, save the listing "
        "(`changed --all -- parse`, no build), then time `changed` with nothing landed "
        "(<out>/many_tables_noop_<tables>.json)",
    )
    args = parser.parse_args(argv)
    if args.work.exists():
        shutil.rmtree(args.work)
    project = make_project(args.work / "project")
    landing, lakehouse = args.work / "landing", args.work / "lakehouse"
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "CDC_LAKEHOUSE_DIR": str(lakehouse),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    results: dict[str, Any] = {"tables": args.tables, "rows_per_table": args.rows}
    tool = [sys.executable, "-m", "cdc_lakehouse.tables", "--project", str(project)]

    def dbt(*dbt_args: str, export: str | None = None) -> list[str]:
        variables = {"cdc_landing_root": str(landing)}
        if export:
            variables["cdc_export_dir"] = str(lakehouse / "exports" / export)
        return [str(DBT), *dbt_args, "--vars", json.dumps(variables)]

    with TemporaryPostgres("many") as pg:
        create_source(pg, args.tables, args.rows)
        started = time.monotonic()
        onboard = [*tool, "from-postgres", "--source", SCHEMA, "--dsn", pg.conninfo()]
        results["from_postgres"] = run([*onboard, "--schema", SCHEMA], project, env, "onboard")
        results["generate"] = run([*tool, "generate"], project, env, "generate")
        registry_lines = len((project / "tables" / f"{SCHEMA}.yml").read_text().splitlines())
        generated = [
            path
            for folder in ("models", "python_models")
            for path in (project / folder).rglob("*")
            if path.is_file()
        ]
        results["registry_lines_per_table"] = round(registry_lines / args.tables, 1)
        results["generated_files"] = len(generated)
        results["onboard_seconds"] = round(time.monotonic() - started, 1)

        config = {
            "name": SCHEMA,
            "host": pg.host,
            "port": pg.port,
            "database": pg.database,
            "user": pg.user,
            "tables": [f"{SCHEMA}.{name}" for name, _ in table_names(args.tables)],
            "out": str(landing),
            "state_dir": str(args.work / "capture-state"),
            "topic_prefix": SCHEMA,
        }
        changed_only = [
            sys.executable, "-m", "cdc_lakehouse.runner.changed", "--project", str(project)
        ]  # fmt: skip
        changed_env = {**env, "CDC_LANDING_ROOT": str(landing)}
        if args.no_op_only:
            return no_op_only(args, project, config, changed_only, changed_env, results, dbt)
        exports: list[Path] = []
        for step in ("snapshot", "changed-only", "full"):
            if step != "snapshot":
                chosen = change_source(pg, args.tables, args.changed, args.rows, phase=step)
                results[f"changed_tables_{step}"] = chosen
            capture(config, timeout=600)
            if step == "snapshot":
                results["parse"] = run(dbt("parse", "--no-partial-parse"), project, env, "parse")
                # the first run of `changed` builds everything and saves the landing listing
                command = [
                    *changed_only,
                    "--",
                    "build",
                    "--vars",
                    dbt("build", export="initial")[-1],
                ]
                results["initial_build"] = run(command, project, changed_env, "initial build")
                export = "initial"
                results["noop_build"] = run(dbt("build"), project, env, "no-op build")
                results["noop_changed_only"] = run(
                    changed_only, project, changed_env, "no-op, changed tables only"
                )
            elif step == "changed-only":
                # `python -m cdc_lakehouse.runner.changed`: the changed tables and their dependents
                export = "changed-only"
                command = [*changed_only, "--", "build", "--vars", dbt("build", export=export)[-1]]
                results["incremental_changed_only"] = run(
                    command, project, changed_env, "incremental build, changed tables only"
                )
            else:
                export = "full"
                # every table, and the listing saved for the long-lived driver below
                command = [
                    *changed_only,
                    "--all",
                    "--",
                    "build",
                    "--vars",
                    dbt("build", export=export)[-1],
                ]
                results["incremental_build"] = run(
                    command, project, changed_env, "incremental build, every table"
                )
            exports.insert(0, lakehouse / "exports" / export)
            problems = compare(pg, exports, args.tables)
            results[f"mismatches_{export}"] = len(problems)
            for line in problems[:20]:
                print(f"MISMATCH {line}", flush=True)
        run_results = json.loads((project / "target" / "run_results.json").read_text())
        kinds: dict[str, int] = {}
        for result in run_results["results"]:
            kind = result["unique_id"].split(".", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        results["nodes_per_build"] = kinds

        def land(phase: str | None) -> list[str]:
            """Change the source for a round of the long-lived driver, and capture it."""
            if phase is None:
                return []
            if phase == "1k-events":
                chosen = [table_names(args.tables)[0][0]]
                with pg.connect(autocommit=True) as conn:
                    for statement in THOUSAND_EVENTS:
                        conn.execute(statement.format(t=f"{SCHEMA}.{chosen[0]}"))
            else:
                chosen = change_source(pg, args.tables, args.changed, args.rows, phase=phase)
            capture(config, timeout=600)
            return chosen

        results["long_lived"] = long_lived_driver(project, changed_env, dbt("build")[-1], land)
        warm = [
            report["seconds"]
            for (_, phase), report in zip(LONG_LIVED_ROUNDS, results["long_lived"], strict=True)
            if phase in WARM_PHASES
        ]
        results["long_lived_5_tables_median"] = statistics.median(warm)
        # The driver's process holds the embedded metastore: its last invocation exported silver.
        exports.insert(0, lakehouse / "exports" / "long-lived")
        problems = compare(pg, exports, args.tables)
        results["mismatches_long_lived"] = len(problems)
        for line in problems[:20]:
            print(f"MISMATCH {line}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "many_tables.json").write_text(json.dumps(results, indent=2) + "\n")
    print(yaml.safe_dump(results, sort_keys=False))
    ok = all(v == 0 for k, v in results.items() if k.startswith("mismatches_"))
    return 0 if ok else 1


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    # The long-lived driver's JVM has non-daemon threads that would hold a normal exit.
    os._exit(status)
