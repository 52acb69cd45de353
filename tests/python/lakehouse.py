"""Test helpers: run dbt against a private lakehouse folder and read back exported tables.

Every lakehouse is a private folder (`CDC_LAKEHOUSE_DIR`: Derby metastore, Iceberg warehouse),
so tests never touch the developer's `.lakehouse/`. dbt commands on the embedded target run in
one long-lived dbt process per test process (dbt_worker.py: a warm JVM from one command and one
lakehouse to the next, see `_hold`); commands with their own environment (cluster targets) run
as `dbt` CLI subprocesses, or several in a `DbtProcess` of their own. Derby is single-process:
`stop_dbt_worker` before anything else opens the same lakehouse.
"""

from __future__ import annotations

import atexit
import gzip
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cdc_lakehouse import export
from cdc_lakehouse.bronze.extracts import MANIFEST
from sample.generator import northwind, pagila

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample"
# The bundled sample's sources (tables/<source>.yml) and their tables: the Northwind order system
# (Debezium, outbox, JDBC-style suppliers) and the Pagila query-mode join landed as Parquet.
SAMPLE_SOURCES = {"northwind": northwind.TABLES, "pagila": pagila.TABLES}
SAMPLE_TABLES = tuple(t for tables in SAMPLE_SOURCES.values() for t in tables)


def source_of(table: northwind.Table) -> str:
    """The registry source of one of the sample's tables."""
    return next(name for name, tables in SAMPLE_SOURCES.items() if table in tables)


DBT = Path(sys.executable).with_name("dbt")


class _Worker:
    """The dbt_worker.py process: its JVM's metastore and warehouse live in `engine`."""

    def __init__(self, engine: Path, env: dict[str, str]):
        read, write = os.pipe()
        (engine / "logs").mkdir(parents=True, exist_ok=True)
        with (engine / "logs" / "dbt-worker.out").open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("dbt_worker.py")), str(write)],
                cwd=REPO,
                env={**env, "CDC_LAKEHOUSE_DIR": str(engine)},
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                pass_fds=(write,),
                start_new_session=True,  # its own process group, with its JVM: see kill_dbt_when
            )
        os.close(write)
        self.replies = os.fdopen(read)

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def answered(self, timeout: float = 0) -> bool:
        ready, _, _ = select.select([self.replies], [], [], timeout)
        return bool(ready)

    def request(self, request: dict[str, Any], timeout: int) -> tuple[int, str]:
        self.send(request)
        ready = self.answered(timeout)
        line = self.replies.readline() if ready else ""
        if not line:
            self.stop()
            raise AssertionError(f"dbt worker: no answer to {request}")
        reply = json.loads(line)
        return reply["returncode"], reply["output"]

    def kill(self) -> None:
        """SIGKILL the process and its JVM (a process group of their own), as a crash would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self.replies.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.replies.close()


# One engine folder per test process holds the worker JVM's Derby metastore and Iceberg
# warehouse; the lakehouse it currently holds links `metastore_db` and `warehouse` to it, so a
# `dbt` CLI run on that lakehouse (a build to be killed, say) sees the same tables. Moving to
# another lakehouse drops the tables of the previous one (which may not be used again: it is
# an error) and keeps the JVM warm.
_worker: _Worker | None = None
_engine: Path | None = None
_holder: Path | None = None
_released: set[Path] = set()
LINKED = ("metastore_db", "warehouse")


def _shared_engine() -> Path:
    global _engine
    if _engine is None:
        _engine = Path(tempfile.mkdtemp(prefix="cdc-test-engine-"))
        atexit.register(_remove_engine)
    return _engine


def _remove_engine() -> None:
    """At exit: the worker first (its JVM holds the metastore), then the engine folder."""
    stop_dbt_worker()
    if _engine is not None:
        shutil.rmtree(_engine, ignore_errors=True)


def _hold(lakehouse: Path) -> None:
    """Make the shared engine hold `lakehouse` (empty at first use)."""
    global _holder
    if _holder == lakehouse:
        return
    if lakehouse in _released:
        raise AssertionError(
            f"{lakehouse} was emptied when the tests' dbt process moved to another lakehouse; "
            "a test that returns to a lakehouse must finish with it before building another"
        )
    engine = _shared_engine()
    if _holder is not None:
        if _worker is not None:
            returncode, output = _worker.request({"reset": True}, timeout=300)
            assert returncode == 0, f"dbt worker reset failed:\n{output}"
        else:  # no JVM holds the metastore: start the next lakehouse from nothing
            shutil.rmtree(engine / "metastore_db", ignore_errors=True)
        for name in LINKED:
            (_holder / name).unlink(missing_ok=True)
        _released.add(_holder)
        shutil.rmtree(engine / "warehouse", ignore_errors=True)  # the dropped tables' files
    (engine / "warehouse").mkdir(exist_ok=True)
    lakehouse.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (lakehouse / name).symlink_to(engine / name)
    _holder = lakehouse


def stop_dbt_worker(lakehouse: Path | None = None) -> None:
    """End the warm dbt process (only if it holds `lakehouse`, when given): before a `dbt` CLI
    process opens that lakehouse (Derby admits one process)."""
    global _worker
    if _worker is not None and (lakehouse is None or _holder == lakehouse):
        _worker.stop()
        _worker = None


def _dbt_options(lakehouse: Path, variables: Mapping[str, Any] | None) -> list[str]:
    options = ["--log-path", str(lakehouse / "logs"), "--target-path", str(lakehouse / "target")]
    if variables:
        options += ["--vars", json.dumps(dict(variables))]
    return options


# dbt parses the whole project again (3 to 5 CPU seconds) when a command's --vars differ from
# the previous command's on the same target path, and every build names another export folder
# (`cdc_export_dir`). So the warm process's builds export to one folder per lakehouse, whose
# table folders are then moved to the one asked for (replacing the same table's folder, as the
# hook's `insert overwrite directory` does): the commands of one lakehouse pass the same --vars,
# and the warm process reuses its parsed project until a file of the project changes (a scratch
# project's edits between builds; cdc_lakehouse/runner/parsed.py). Commands that run no
# on-run-end hook (`show`, `run-operation`, `compile`, `ls`, `docs`) export nothing, and a
# command without --vars between two builds cost two full parses (the Hudi scenario's builds,
# shows and maintenance operations: 5 of its 12 commands): they pass the --vars of the
# lakehouse's last command, which a hook-less command cannot act on.
EXPORTING = ".exporting"
HOOKLESS = ("show", "run-operation", "compile", "ls", "list", "docs", "parse")
_last_variables: dict[Path, dict[str, Any]] = {}


def _stable_export(
    lakehouse: Path,
    variables: Mapping[str, Any] | None,
    command: list[str] | None = None,
) -> tuple[Mapping[str, Any] | None, Path | None]:
    """`variables` with this lakehouse's one export folder (emptied), and the folder asked for
    (None when the command exports nothing); for a hook-less `command`, the lakehouse's last
    --vars under the ones given."""
    if command and command[0] in HOOKLESS:
        return {**_last_variables.get(lakehouse, {}), **(variables or {})} or None, None
    _last_variables[lakehouse] = dict(variables or {})
    if not variables or "cdc_export_dir" not in variables:
        return variables, None
    exporting = lakehouse / "exports" / EXPORTING
    shutil.rmtree(exporting, ignore_errors=True)
    stable = {**variables, "cdc_export_dir": str(exporting)}
    _last_variables[lakehouse] = stable
    return stable, Path(variables["cdc_export_dir"])


def _move_export(lakehouse: Path, wanted: Path | None) -> None:
    exporting = lakehouse / "exports" / EXPORTING
    if wanted is None or not exporting.is_dir():
        return
    wanted.mkdir(parents=True, exist_ok=True)
    for folder in exporting.iterdir():
        shutil.rmtree(wanted / folder.name, ignore_errors=True)
        shutil.move(folder, wanted / folder.name)
    exporting.rmdir()


# The table format every dbt process of these tests writes (CDC_TABLE_FORMAT: the profile's
# catalog and dbt_project.yml's file_format); `use_table_format` switches it.
_table_format = os.environ.get("CDC_TABLE_FORMAT", "iceberg")


def use_table_format(table_format: str) -> str:
    """Make the tests' dbt processes write `table_format` from now on; returns the previous one.
    The warm dbt process's Spark session has one catalog, so a switch ends it (the next
    lakehouse starts a new one) and the lakehouse it held may not be used again."""
    global _table_format
    previous = _table_format
    if table_format != previous:
        stop_dbt_worker()
        _table_format = table_format
    return previous


def _worker_env(lakehouse: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DBT_PROFILES_DIR": str(REPO / "profiles"),
        "CDC_LAKEHOUSE_DIR": str(lakehouse),
        "CDC_TABLE_FORMAT": _table_format,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }


def _warm_worker(lakehouse: Path) -> _Worker:
    global _worker
    _hold(lakehouse)
    if _worker is None:
        _worker = _Worker(_shared_engine(), _worker_env(lakehouse))
    return _worker


def kill_dbt_when(
    args: list[str],
    *,
    lakehouse: Path,
    marker: str,
    variables: Mapping[str, Any] | None = None,
    timeout: float = 900,
) -> str:
    """Start `dbt <args>` on `lakehouse` in the tests' dbt process and SIGKILL that process with
    its JVM half a second after dbt's debug log (`<lakehouse>/logs/dbt.log`, which shows every
    statement before it is sent) first shows `marker`, as a crash would; returns that log line.
    The next `run_dbt` starts a new process on the same lakehouse, as a user re-running would.
    Fails if dbt finished (or `timeout` passed) before the marker appeared."""
    global _worker
    worker = _warm_worker(lakehouse)
    log = lakehouse / "logs" / "dbt.log"
    offset = log.stat().st_size if log.exists() else 0
    variables, export = _stable_export(lakehouse, variables, args)
    worker.send({"args": [*args, *_dbt_options(lakehouse, variables)], "cwd": str(REPO)})
    deadline, found, pending = time.monotonic() + timeout, "", ""
    while not found and time.monotonic() < deadline and not worker.answered(0.05):
        if not log.exists():
            continue
        with log.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
        offset += len(chunk)
        *lines, pending = (pending + chunk.decode("utf-8", "replace")).split("\n")
        found = next((line for line in lines if marker in line), "")
    if found:
        time.sleep(0.5)  # Spark is now running the statement
    worker.kill()
    _worker = None
    _move_export(lakehouse, export)
    assert found, f"dbt {' '.join(args)} finished (or timed out) before {marker!r} appeared"
    return found


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
    `env` adds environment variables (a profile target's settings, for instance): such commands
    run as a `dbt` subprocess; the rest in the tests' warm dbt process (see `_hold`)."""
    if env is None:
        variables, export = _stable_export(lakehouse, variables, args)
        request = {"args": [*args, *_dbt_options(lakehouse, variables)], "cwd": str(project_dir)}
        try:
            returncode, output = _warm_worker(lakehouse).request(request, timeout)
        finally:
            _move_export(lakehouse, export)
        result = subprocess.CompletedProcess(["dbt", *args], returncode, output, "")
    else:
        stop_dbt_worker(lakehouse)  # Derby: one process per metastore
        result = subprocess.run(
            [str(DBT), *args, *_dbt_options(lakehouse, variables)],
            cwd=project_dir,
            env={**_worker_env(lakehouse), **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return _checked(result, args, check)


def show(lakehouse: Path, sql: str) -> list[dict[str, Any]]:
    """The rows of a query (dbt show's JSON output)."""
    out = run_dbt(
        ["show", "--inline", sql, "--limit", "-1", "--output", "json", "--log-format", "json"],
        lakehouse=lakehouse,
    ).stdout
    for line in out.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        preview = event.get("data", {}).get("preview")
        if preview is not None:
            return json.loads(preview)
    raise AssertionError(f"no rows in dbt show's output:\n{out[-2000:]}")


# The lines of dbt's output that name a failure and its causes: dbt's own ("Runtime Error in
# model ..."), the errors the Spark driver logged (profiles/log4j2.properties: `12:34:56 ERROR
# Class: message`), and every exception and `Caused by:` of a Java stack trace, whose frames
# fill the output's end. CI shows a part of a failed run's output: a failure's causes must come
# first, not 80 lines of frames after them.
_CAUSE_MARKERS = (" Error in ", " ERROR ", "Caused by: ", "Exception: ", "Error: ")


def failure_causes(output: str, limit: int = 40) -> list[str]:
    """The lines of `output` that name a failure's causes, each once, in order, at most
    `limit` (stack frames `at ...` and `... N more` are never causes)."""
    causes: list[str] = []
    for line in output.splitlines():
        text = line.strip()
        if text.startswith(("at ", "... ")) or not any(m in text for m in _CAUSE_MARKERS):
            continue
        if text not in causes:
            causes.append(text[:400])
    return causes[:limit]


def _checked(
    result: subprocess.CompletedProcess[str], args: list[str], check: bool
) -> subprocess.CompletedProcess[str]:
    """`result` of `dbt <args>`; when `check`, an error with the failure's causes
    (`failure_causes`), then the end of dbt's output, if the command failed."""
    if check and result.returncode != 0:
        output = result.stdout + result.stderr
        causes = "\n".join(failure_causes(output))
        tail = "\n".join(output.splitlines()[-80:])
        raise AssertionError(
            f"dbt {' '.join(args)} failed ({result.returncode}); causes:\n{causes}\n"
            f"--- the end of its output:\n{tail}"
        )
    return result


class DbtProcess:
    """One dbt process of its own (dbt_worker.py), its JVM warm from one command to the next,
    with `env` added to the tests' environment (a target's settings: a metastore service,
    object storage): for several commands that would each pay a new JVM as `run_dbt(env=...)`
    subprocesses. Its files (logs, Derby's log) go to `lakehouse`; it does not hold a lakehouse
    the way the tests' shared process does, so its catalog must not be Derby in another
    process's folder. Use as a context manager: the process stops on exit."""

    def __init__(self, lakehouse: Path, env: Mapping[str, str]):
        lakehouse.mkdir(parents=True, exist_ok=True)
        self.lakehouse = lakehouse
        self.worker = _Worker(lakehouse, {**_worker_env(lakehouse), **env})

    def __enter__(self) -> DbtProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.worker.stop()

    def run(
        self,
        args: list[str],
        *,
        variables: Mapping[str, Any] | None = None,
        check: bool = True,
        timeout: int = 1200,
    ) -> subprocess.CompletedProcess[str]:
        """`dbt <args>` in this process; as `run_dbt`, fails with the end of dbt's output."""
        request = {"args": [*args, *_dbt_options(self.lakehouse, variables)], "cwd": str(REPO)}
        returncode, output = self.worker.request(request, timeout)
        result = subprocess.CompletedProcess(["dbt", *args], returncode, output, "")
        return _checked(result, args, check)


def landing_files(root: Path) -> list[Path]:
    """Every file below a landing root, whatever its layout (`.json` or `.gz`), and snapshot
    manifests, without the hidden and temporary files of a writer."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and (
            path.name == MANIFEST
            or not any(part.startswith((".", "_")) for part in path.relative_to(root).parts)
        )
        and not path.name.endswith(".tmp")
    )


def record_lines(path: Path) -> list[str]:
    """The records (lines) of a landing file, gzip-compressed or not (a snapshot manifest holds
    none)."""
    if path.name == MANIFEST:
        return []
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8").splitlines()


def first_and_last_files() -> list[Path]:
    """Each sample topic's first and last landing file (by name: `<topic>+<partition>+<offset>`,
    whatever the folders; Parquet's are by field): a first step whose later files then arrive
    older than what silver holds (out of order across runs)."""
    chosen = []
    for topic in sorted((SAMPLE / "landing" / "topics").iterdir()):
        files = sorted((f for f in topic.rglob("*") if f.is_file()), key=lambda f: f.name)
        chosen += [files[0], files[-1]]
    return chosen


def copy_landing(destination: Path, files: Iterable[Path] | None = None) -> Path:
    """Copy the bundled sample landing zone (or some of its files) to `destination`."""
    source = SAMPLE / "landing"
    for path in files if files is not None else landing_files(source):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return destination


def read_export(export_dir: Path, relation: str) -> list[dict[str, Any]]:
    """Rows of one table written by the `cdc_export` on-run-end hook."""
    rows = export.read_export(export_dir, relation)
    assert rows is not None, f"{relation} was not exported to {export_dir}"
    return rows


def exported(export_dir: Path) -> list[str]:
    """The relations (`schema.table`) the `cdc_export` hook wrote to `export_dir`."""
    return export.exported(export_dir)


def column_types(export_dir: Path, relation: str) -> dict[str, str]:
    """Column name -> Spark type of one model (`schema.table`), in column order, as the catalog
    gave them to the `cdc_export` hook (`cdc.types`)."""
    rows = [row for row in read_export(export_dir, "cdc.types") if row["relation"] == relation]
    assert rows, f"no column types of {relation} in {export_dir}"
    return {
        row["column_name"]: row["data_type"] for row in sorted(rows, key=lambda r: r["position"])
    }


# A silver row in the canonical form of `sample/expected/*.jsonl` (source columns only).
canonical_lake_row = northwind.canonical_lake_row


def expected_state(table: northwind.Table, sample: Path = SAMPLE) -> dict[tuple, dict]:
    rows = [json.loads(line) for line in (sample / "expected" / f"{table.name}.jsonl").open()]
    return {tuple(row[k] for k in table.key): row for row in rows}


# Gold tables that must equal a source table: the outbox's order lines are the source's
# order_details, read from the outbox documents alone.
SOURCE_EQUIVALENT_GOLD = {"gold.fct_outbox_order_lines": "order_details"}


def lake_state(
    export_dir: Path, table: northwind.Table, relation: str | None = None
) -> dict[tuple, dict]:
    """Current (not deleted) rows of a silver table (or of `relation`, with the table's
    columns), canonical, by key."""
    state = {}
    for row in read_export(export_dir, relation or f"silver.{table.name}"):
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


def source_state_problems(
    export_dir: Path,
    tables: Iterable[northwind.Table] = SAMPLE_TABLES,
    equivalent_gold: Mapping[str, str] = SOURCE_EQUIVALENT_GOLD,
) -> list[str]:
    """How the exported silver tables (of `tables`, default every sample table) and the gold
    tables that must equal a source table differ from the sample's source state, column by
    column (at most 20 lines per table)."""
    problems = []
    for table in tables:
        diff = diff_states(expected_state(table), lake_state(export_dir, table))
        problems += [f"{table.name}: {line}" for line in diff[:20]]
    for relation, name in equivalent_gold.items():
        table = northwind.TABLES_BY_NAME[name]
        diff = diff_states(expected_state(table), lake_state(export_dir, table, relation))
        problems += [f"{relation}: {line}" for line in diff[:20]]
    return problems


def history_state_problems(
    export_dir: Path, tables: Iterable[northwind.Table] = SAMPLE_TABLES
) -> list[str]:
    """How the current versions of the exported history tables differ from the sample's source
    state, column by column but for the history's `ignore_columns` (a change to those alone
    makes no version: the current version keeps their older values), and the histories holding
    no more rows than the source (versions lost). Fails when no sample table has a history."""
    from cdc_lakehouse.tables import registry

    ignored = {t.name: set(t.history_ignore) for t in registry.tables(REPO) if t.history}
    with_history = [t for t in tables if t.name in ignored]
    assert with_history, "no sample table has a history"
    problems = []
    for table in with_history:

        def compared(row: Mapping[str, Any], skip: set[str] = ignored[table.name]) -> dict:
            return {k: v for k, v in row.items() if k not in skip}

        rows = read_export(export_dir, f"silver.{table.name}_history")
        current = {}
        for row in rows:
            if row["is_current"] and not row["_cdc_is_deleted"]:
                canonical = canonical_lake_row(table, row)
                current[tuple(canonical[k] for k in table.key)] = compared(canonical)
        expected = {key: compared(row) for key, row in expected_state(table).items()}
        diff = diff_states(expected, current)
        problems += [f"{table.name}_history: {line}" for line in diff[:20]]
        if len(rows) <= len(expected):
            problems.append(f"{table.name}_history lost versions: {len(rows)} rows")
    return problems
