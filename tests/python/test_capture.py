"""The capture tool against a real PostgreSQL and the real Debezium engine, plus its sink alone.

JVM tests run the tool as a subprocess (one JVM per process, as in production): few and small,
each engine start costs about 5 s. Landing values are compared with the captured samples in
`tests/fixtures/debezium-samples` (metadata that differs between runs left out).
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import sys
import time
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cdc_lakehouse.bronze.layout import Layout, TopicFiles
from cdc_lakehouse.capture import (
    CaptureConfig,
    ConfigError,
    run_capture_subprocess,
    start_capture_subprocess,
)
from cdc_lakehouse.capture.config import load_config_file
from cdc_lakehouse.capture.engine import (
    engine_properties,
    is_snapshot_read,
    marker_event,
    offsets_look_complete,
    prepare_state,
)
from cdc_lakehouse.capture.preflight import PreflightError, wait_until_streaming
from cdc_lakehouse.capture.sink import LandingSink, count_lines, file_name, murmur2, partition_for
from cdc_lakehouse.capture.upload import Uploader
from devstack import objectstore
from devstack.pg import TemporaryPostgres, free_port
from sample.generator.harness import CaptureGroup, SourceHarness
from sample.generator.kafka import KafkaPipeline

pytestmark = pytest.mark.system

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium-samples"
REPO = Path(__file__).resolve().parents[2]


# -- helpers ----------------------------------------------------------------------------------
def config_for(pg: TemporaryPostgres, root: Path, **settings: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "host": pg.host,
        "port": pg.port,
        "database": pg.database,
        "user": pg.user,
        "tables": ["public.t_types"],
        "out": str(root / "landing"),
        "state_dir": str(root / "state"),
        **settings,
    }


def topic_files(out: Path, topic: str) -> list[Path]:
    return sorted((out / "topics" / topic / "partition=0").iterdir())


def assert_landing_layout(out: Path, topic: str, flush_size: int) -> list[str]:
    """Only final data files, named after the topic, offsets continuous from 0; their lines."""
    files = topic_files(out, topic)
    assert files, f"nothing landed for {topic}"
    expected_offset = 0
    lines: list[str] = []
    for path in files:
        match = re.fullmatch(rf"{re.escape(topic)}\+0\+(\d{{10}})\.json", path.name)
        assert match, f"unexpected file {path.name}"
        assert int(match.group(1)) == expected_offset, f"offset gap before {path.name}"
        content = path.read_text().splitlines()
        assert 1 <= len(content) <= flush_size
        expected_offset += len(content)
        lines += content
    return lines


def sample_values(variant: str) -> list[str]:
    """Landing lines the sample run would have produced: values, no tombstones, no marker."""
    if not (SAMPLES / f"{variant}.jsonl").is_file():
        pytest.fail(f"Debezium samples not found at {SAMPLES}")
    records = [json.loads(line) for line in (SAMPLES / f"{variant}.jsonl").read_text().splitlines()]
    return [r["value"] for r in records if r["value"] is not None and "marker" not in r["topic"]]


VOLATILE = {"ts_ms", "ts_us", "ts_ns", "txId", "lsn", "sequence", "__lsn", "__source_ts_ms"}


def comparable(value: str) -> Any:
    """A landing value without what differs between runs (times, WAL positions, random uuid)."""
    doc = json.loads(value)
    payload = doc["payload"] if "schema" in doc else doc
    for part in (payload, payload.get("source") or {}):
        for key in VOLATILE & set(part):
            del part[key]
    source = payload.get("source") or {}
    if "snapshot" in source and source["snapshot"] is None:
        # The samples were taken with the converter's replace.null.with.default on: a streamed
        # event's null `snapshot` was written as its schema default (engine.py, KAFKA-8713).
        source["snapshot"] = "false"
    for row in (payload, payload.get("before"), payload.get("after")):
        if isinstance(row, dict) and row.get("uid") and row.get("id") != 1:
            row["uid"] = "<random>"
    return doc


# The samples' scenario (README of debezium-samples): row 1 before capture, then the changes.
T_TYPES = """
create table t_types (id int primary key, amount numeric(12,2), d date, ts timestamp,
  tstz timestamptz, flag boolean, note text, doc jsonb, uid uuid, bin bytea, tags text[], big text);
insert into t_types values (1, 12345.67, '2024-02-29', '2024-02-29 13:14:15.123456',
  '2024-02-29 11:14:15.123456+00', true, 'snap', '{"a": 1, "b": [1, 2]}',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\xdeadbeef', '{x,y}',
  (select string_agg(md5(g::text), '' order by g) from generate_series(1, 100) g))
"""
T_TYPES_CHANGES = [
    """insert into t_types values (2, -0.50, '1970-01-01', '2000-01-01 00:00:00',
       '2000-01-01 00:00:00+00', false, 'ins', '[]', gen_random_uuid(), '\\x00', '{}',
       (select string_agg(md5(g::text), '' order by g) from generate_series(1, 100) g))""",
    "update t_types set note = 'upd-default' where id = 2",
    "alter table t_types replica identity full",
    "update t_types set note = 'upd-full' where id = 2",
    "alter table t_types replica identity default",
    "update t_types set id = 3 where id = 2",
    "delete from t_types where id = 3",
    "truncate t_types",
]


def run_ok(config: dict[str, Any], **kwargs: Any) -> str:
    result = run_capture_subprocess(config, timeout=120, **kwargs)
    assert result.returncode == 0, result.stderr
    return result.stderr


# -- real engine ------------------------------------------------------------------------------
def test_envelope_snapshot_then_streaming_lands_like_kafka_connect(tmp_path: Path) -> None:
    """(a) snapshot run, then every kind of change in a second run: the values equal the
    samples' (JsonConverter with schemas), files and offsets follow the S3 sink layout."""
    with TemporaryPostgres("northwind") as pg:
        pg.execute("postgres", T_TYPES)
        # The samples were captured from database `postgres` with topic prefix `dbz`.
        config = config_for(pg, tmp_path, database="postgres", topic_prefix="dbz", flush_size=3)
        first = run_ok(config)
        assert "1 events in 1 files (dbz.public.t_types=1)" in first
        with pg.connect("postgres", autocommit=True) as conn:
            for statement in T_TYPES_CHANGES:
                conn.execute(statement)
        second = run_ok(config)
        assert "7 events" in second

        out = tmp_path / "landing"
        lines = assert_landing_layout(out, "dbz.public.t_types", flush_size=3)
        assert [comparable(v) for v in lines] == [comparable(v) for v in sample_values("default")]
        ops = [json.loads(v)["payload"]["op"] for v in lines]
        assert ops == ["r", "c", "u", "u", "d", "c", "d", "t"]
        assert not [p for p in out.rglob("*") if p.name.startswith(".")]
        assert not (out / "topics" / "dbz.public.cdc_capture_marker").exists()

        # A third run with nothing new adds nothing; `drop` then removes slot and publication.
        run_ok(config)
        assert len(assert_landing_layout(out, "dbz.public.t_types", flush_size=3)) == 8
        dropped = run_ok(config, command="drop")
        assert "replication slot cdc_t" in dropped and "publication cdc_t_pub" in dropped
        with pg.connect("postgres") as conn:
            assert conn.execute("select count(*) from pg_replication_slots").fetchone()[0] == 0
            assert conn.execute("select count(*) from pg_publication").fetchone()[0] == 0
        assert not (tmp_path / "state" / "offsets.dat").exists()


def test_kill_9_mid_run_then_restart_loses_nothing(tmp_path: Path) -> None:
    """(b, c) flattened rows; a continuous capture killed with SIGKILL while it lands a 20k-row
    transaction, then a bounded rerun on the same state: every change is there (a repeated
    batch is allowed), offsets stay continuous, the crash's temporary file is cleaned up."""
    rows = 20_000
    with TemporaryPostgres("northwind") as pg:
        pg.execute(None, "create table items (id int primary key, label text)")
        config = config_for(
            pg, tmp_path, tables=["items"], shape="flattened", schemas_enable=False, flush_size=500
        )
        topic = "northwind.public.items"
        folder = tmp_path / "landing" / "topics" / topic / "partition=0"
        proc = start_capture_subprocess(config, config_dir=tmp_path, extra_args=["--create-marker"])
        try:
            settings = CaptureConfig.from_mapping(config)
            assert wait_until_streaming(settings, _Deadline(60)), "capture never streamed"
            pg.execute(
                None,
                f"insert into items select g, 'item ' || g from generate_series(1, {rows}) g",
            )
            deadline = time.monotonic() + 60
            while not (folder.is_dir() and any(folder.glob("*.json"))):
                assert time.monotonic() < deadline and proc.poll() is None, "nothing landed"
                time.sleep(0.02)
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -9
        landed = [json.loads(line) for f in sorted(folder.glob("*.json")) for line in f.open()]
        (folder / f".{file_name(topic, 99_999)}.tmp").write_text('{"half": ')  # torn write
        # The kill may also have caught the capture between opening and renaming its own file.
        unfinished = len(list(folder.glob(".*.tmp")))

        # Rows that landed before the kill and are deleted now must still show their delete: a
        # new snapshot could not (Debezium takes one when no offsets were saved yet).
        gone = sorted(r["id"] for r in landed)[:5]
        with pg.connect() as conn:
            conn.execute("update items set label = 'changed' where id <= 10")
            conn.execute("delete from items where id = any(%s)", (gone,))
        stderr = run_ok(config)
        assert f"removed {unfinished} unfinished temporary file(s)" in stderr

        lines = [json.loads(v) for v in assert_landing_layout(tmp_path / "landing", topic, 500)]
        assert not list(folder.glob(".*"))
        assert len(lines) >= rows + 10 + len(gone), f"{len(landed)} lines had landed at the kill"
        assert {r["__op"] for r in lines} == {"c", "u", "d"}, "no snapshot reads after the kill"
        assert {r["id"] for r in lines if r["__op"] == "c"} == set(range(1, rows + 1))
        assert {r["id"] for r in lines if r["__op"] == "u"} == set(range(1, 11))
        deleted = [r for r in lines if r["__op"] == "d"]
        assert sorted(r["id"] for r in deleted) == gone
        assert all(r["__deleted"] == "true" and r["label"] is None for r in deleted)
        sample_fields = set(json.loads(sample_values("unwrap_rw")[1]))
        assert {k for k in sample_fields if k.startswith("__")} == {
            k for k in lines[0] if k.startswith("__")
        }
        assert all(r["__table"] == "items" for r in lines)


# A declaratively partitioned table, as `from-postgres` registers it: the parent only.
PAYMENT = """
create table payment (payment_id int, payment_date date, amount numeric(8,2), note text,
  primary key (payment_id, payment_date)) partition by range (payment_date);
create table payment_2024_01 partition of payment for values from ('2024-01-01') to ('2024-02-01');
create table payment_2024_02 partition of payment for values from ('2024-02-01') to ('2024-03-01');
insert into payment values (1, '2024-01-05', 10, 'snap'), (2, '2024-02-05', 20, 'snap'),
  (3, '2024-01-20', 30, 'snap')
"""


@pytest.fixture(scope="module")
def partitioned_pg() -> Iterator[TemporaryPostgres]:
    """One server for the partitioned-table tests; each uses a capture name of its own."""
    with TemporaryPostgres("northwind") as pg:
        pg.execute(None, PAYMENT)
        yield pg


def test_partitioned_table_streams_under_its_root(
    partitioned_pg: TemporaryPostgres, tmp_path: Path
) -> None:
    """pgoutput names a partition's change by its leaf partition unless the publication has
    publish_via_partition_root: the include list (the parent) then dropped every streamed change
    and only the snapshot landed. Every change lands under the parent's topic, from a partition
    created after the capture started too; a row moved across partitions arrives as a delete of
    its old key then an insert of the new one, and replaying the events by key gives the
    table's rows."""
    pg = partitioned_pg
    config = config_for(pg, tmp_path, name="pay", tables=["payment"],
                        decimal_handling_mode="string")  # fmt: skip
    topic = "northwind.public.payment"
    assert f"3 events in 1 files ({topic}=3)" in run_ok(config)  # the snapshot
    with pg.connect(autocommit=True) as conn:
        for statement in [
            "create table payment_2024_03 partition of payment"
            " for values from ('2024-03-01') to ('2024-04-01')",
            "insert into payment values (4, '2024-03-05', 40, 'ins')",
            "update payment set note = 'upd' where payment_id = 1",
            "update payment set payment_date = '2024-03-10', note = 'moved' where payment_id = 2",
            "delete from payment where payment_id = 3",
        ]:
            conn.execute(statement)
        published = conn.execute(
            "select pubviaroot from pg_publication where pubname = 'cdc_pay_pub'"
        ).fetchone()
        rows = conn.execute(
            "select payment_id, payment_date - date '1970-01-01', amount::text, note from payment"
        ).fetchall()
    run_ok(config)

    out = tmp_path / "landing"
    assert [p.name for p in (out / "topics").iterdir()] == [topic]
    events = [json.loads(v)["payload"] for v in assert_landing_layout(out, topic, 500)]
    assert {e["source"]["table"] for e in events} == {"payment"}
    streamed = [(e["op"], (e["before"] or e["after"])["payment_id"]) for e in events[3:]]
    assert [e["op"] for e in events[:3]] == ["r"] * 3
    assert streamed == [("c", 4), ("u", 1), ("d", 2), ("c", 2), ("d", 3)]
    assert published == (True,)
    moved_from, moved_to = events[5], events[6]
    assert moved_from["before"]["payment_date"] != moved_to["after"]["payment_date"]
    assert int(moved_from["source"]["lsn"]) < int(moved_to["source"]["lsn"])

    # What the silver merge computes: per key, the last event wins and a delete removes the row.
    state: dict[tuple[int, int], dict[str, Any]] = {}
    for event in events:
        image = event["before"] if event["op"] == "d" else event["after"]
        key = (image["payment_id"], image["payment_date"])
        if event["op"] == "d":
            del state[key]
        else:
            state[key] = image
    assert sorted(tuple(r.values()) for r in state.values()) == sorted(rows)


class _Deadline:
    """A stop flag that trips after `seconds` (for waits outside the tool)."""

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def is_set(self) -> bool:
        return time.monotonic() >= self.until

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)


# -- preflight: one-line errors, exit 2, before any JVM ---------------------------------------
def _fails_fast(config: dict[str, Any], message: str) -> str:
    started = time.monotonic()
    result = run_capture_subprocess(config, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 15  # no engine was started
    return result.stderr


def test_preflight_unreachable_server(tmp_path: Path) -> None:
    port = free_port()
    config = {"host": "127.0.0.1", "port": port, "database": "northwind", "tables": ["t"],
              "out": str(tmp_path / "landing"), "state_dir": str(tmp_path / "state")}  # fmt: skip
    _fails_fast(config, f"cannot connect to PostgreSQL at 127.0.0.1:{port}")


def test_preflight_wal_level_not_logical(tmp_path: Path) -> None:
    with TemporaryPostgres("northwind", settings={"wal_level": "replica"}) as pg:
        pg.execute(None, "create table t_types (id int primary key)")
        _fails_fast(config_for(pg, tmp_path), "has wal_level=replica")


def test_preflight_missing_table_and_missing_replication_right(tmp_path: Path) -> None:
    with TemporaryPostgres("northwind") as pg:
        pg.execute(None, "create table t_types (id int primary key); create role app login")
        missing = config_for(pg, tmp_path, tables=["t_types", "public.nope", "other.t"])
        _fails_fast(missing, "table(s) not found in database northwind: public.nope, other.t")
        _fails_fast(config_for(pg, tmp_path, user="app"), "user app may not use replication")


def test_preflight_refuses_partitions_not_captured_through_the_root(
    partitioned_pg: TemporaryPostgres, tmp_path: Path
) -> None:
    """A publication made without publish_via_partition_root would publish the parent's changes
    under its partitions' names, which the capture drops: refused, naming the table and the
    fix, and accepted once fixed. A partition is captured through its parent, never alone or
    beside it."""
    pg = partitioned_pg
    pg.execute(None, "create publication cdc_pay_own_pub for table payment", autocommit=True)
    own = config_for(pg, tmp_path, name="pay_own", tables=["payment"])
    said = _fails_fast(
        own,
        "publication cdc_pay_own_pub exists without publish_via_partition_root, so it would "
        "publish the changes of the partitioned table(s) public.payment under their partitions'",
    )
    fix = "ALTER PUBLICATION cdc_pay_own_pub SET (publish_via_partition_root = true)"
    assert fix in said
    pg.execute(None, fix)
    result = run_capture_subprocess(own, command="check")
    assert result.returncode == 0, result.stderr

    _fails_fast(
        config_for(pg, tmp_path, name="pay_leaf", tables=["payment_2024_01"]),
        "public.payment_2024_01 is a partition of public.payment: capture public.payment instead",
    )
    _fails_fast(
        config_for(pg, tmp_path, name="pay_both", tables=["payment", "payment_2024_01"]),
        "public.payment_2024_01 is a partition of public.payment, which is captured too",
    )


def test_kafka_connect_captures_a_partitioned_table_through_its_root(
    partitioned_pg: TemporaryPostgres, tmp_path: Path
) -> None:
    """The Kafka Connect path (`sample/kafka.py`) gives Debezium's connector the capture tool's
    settings after the capture tool's pre-check: with a partitioned table listed, the publication
    the connector creates publishes through the root (else every streamed change of the table
    would be named by its leaf partition and dropped), and the same refusals apply. The
    connector config is checked here; no Kafka is started."""
    pg = partitioned_pg
    pg.execute(None, "create table if not exists plain (id int primary key)", autocommit=True)
    harness = SourceHarness(pg, landing=tmp_path / "landing", state_dir=tmp_path, seed=1)
    kafka = KafkaPipeline(harness, work=tmp_path / "kafka", landing=tmp_path / "landing")

    def connector(name: str, *tables: str) -> dict[str, str]:
        return kafka.source_connector(CaptureGroup(name, "envelope", True, tables))

    both = connector("kpay", "payment", "plain")
    assert both["publish.via.partition.root"] == "true"
    assert both["table.include.list"] == r"public\.payment,public\.plain,public\.cdc_kafka_marker"
    assert "publish.via.partition.root" not in connector("kplain", "plain")  # PostgreSQL 12

    pg.execute(None, "create publication cdc_kafka_kown_pub for table payment", autocommit=True)
    try:
        with pytest.raises(PreflightError, match="cdc_kafka_kown_pub exists without publish_via"):
            connector("kown", "payment")
    finally:
        pg.execute(None, "drop publication cdc_kafka_kown_pub", autocommit=True)
    with pytest.raises(PreflightError, match="capture public.payment instead"):
        connector("kleaf", "payment_2024_01")


def test_config_errors_exit_2(tmp_path: Path) -> None:
    with_password = {"password": "secret", "database": "d", "tables": ["t"], "out": "o",
                     "state_dir": "s"}  # fmt: skip
    _fails_fast(with_password, "do not put the password in the config file")
    _fails_fast({"database": "d", "tables": ["t"]}, "missing setting(s): out, state_dir")


# -- sink, config and engine settings without a JVM -------------------------------------------
def test_sink_rotates_per_flush_size_and_per_batch(tmp_path: Path) -> None:
    sink = LandingSink(tmp_path, flush_size=3)
    sink.write_batch([("a", f'{{"n":{i}}}') for i in range(7)] + [("b", b'{"n":0}')])
    sink.write_batch([("a", '{"n":7}')])
    folder = tmp_path / "topics" / "a" / "partition=0"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [file_name("a", o) for o in (0, 3, 6, 7)]
    assert names[0] == "a+0+0000000000.json"
    assert [count_lines(folder / n) for n in names] == [3, 3, 1, 1]
    assert (folder / names[1]).read_text() == '{"n":3}\n{"n":4}\n{"n":5}\n'
    assert sink.events == {"a": 8, "b": 1} and sink.files_written == 5


def test_sink_recovers_offsets_and_removes_temp_files(tmp_path: Path) -> None:
    LandingSink(tmp_path, flush_size=2).write_batch([("a", "{}")] * 5)
    folder = tmp_path / "topics" / "a" / "partition=0"
    leftover = folder / f".{file_name('a', 5)}.tmp"
    leftover.write_text('{"torn": ')
    (folder / "unrelated.txt").write_text("x")

    sink = LandingSink(tmp_path, flush_size=2)
    assert sink.recover("a") == 5 and sink.recover("never-seen") == 0
    assert not leftover.exists() and sink.temp_files_removed == 1
    sink.write_batch([("a", "{}")])
    assert sorted(p.name for p in folder.glob("*.json"))[-1] == file_name("a", 5)
    # A last file without a final newline still counts all its lines.
    (folder / file_name("a", 6)).write_text("{}\n{}")
    assert LandingSink(tmp_path).recover("a") == 8


def test_landing_reader_ignores_temporary_files() -> None:
    files = TopicFiles(Layout(), "t")
    final = f"topics/t/partition=0/{file_name('t', 0)}"
    assert files.classify(final, final) is not None
    temporary = f"topics/t/partition=0/.{file_name('t', 0)}.tmp"
    assert files.classify(temporary, temporary) is None


def test_sink_spreads_keys_over_partitions_as_kafka_does(tmp_path: Path) -> None:
    """Kafka's own murmur2 test vectors (UtilsTest.testMurmur2); a key always lands in the same
    partition, each partition has its own offsets, records without a key go to partition 0."""
    vectors = {"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536}
    assert {k: murmur2(k.encode()) for k in vectors} == vectors
    sink = LandingSink(tmp_path, flush_size=2, partitions=3)
    keys = [f'{{"id":{i % 5}}}'.encode() for i in range(20)]
    records = [("a", f'{{"n":{i}}}', key) for i, key in enumerate(keys)]
    sink.write_batch([*records, ("a", "{}", None)])
    seen: dict[int, list[int]] = {}
    for p in range(3):
        folder = tmp_path / "topics" / "a" / f"partition={p}"
        names = sorted(f.name for f in folder.glob("*.json")) if folder.exists() else []
        offset = 0
        for name in names:
            assert name == file_name("a", offset, p)
            lines = (folder / name).read_text().splitlines()
            seen.setdefault(p, []).extend(json.loads(line).get("n", -1) for line in lines)
            offset += len(lines)
    for i, key in enumerate(keys):
        assert i in seen[partition_for(key, 3)]
    assert seen[0][-1] == -1 and len(seen) >= 2
    assert LandingSink(tmp_path, partitions=3).recover("a", 1) == len(seen.get(1, []))


def imported_packages(folder: Path) -> set[str]:
    """Top-level packages outside the standard library that the code in `folder` imports,
    inside functions too, and through the project's own modules it imports."""
    files, found, done = sorted(folder.glob("*.py")), set(), set()
    while files:
        path = files.pop()
        if path in done:
            continue
        done.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from package import module` names a module too
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for module in modules:
                if module.split(".")[0] != "cdc_lakehouse":
                    found.add(module.split(".")[0])
                    continue
                base = REPO.joinpath(*module.split("."))
                files += [f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()]
    return found - set(sys.stdlib_module_names) - {"__future__"}


def installed_by(requirements: Path | list[str]) -> set[str]:
    """The distributions a `pip install -r` of the file (or of these requirement strings)
    brings: its requirements and theirs (with the extras asked for), as installed here."""
    if isinstance(requirements, Path):
        requirements = requirements.read_text().splitlines()
    lines = [line.strip() for line in requirements]
    todo = [Requirement(line) for line in lines if line and not line.startswith(("#", "-"))]
    found: set[str] = set()
    asked: set[tuple[str, str]] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        extras = {"", *requirement.extras}
        if {(name, e) for e in extras} <= asked:
            continue
        asked |= {(name, e) for e in extras}
        found.add(name)
        for text in metadata.requires(requirement.name) or []:
            dependency = Requirement(text)
            marker = dependency.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in extras):
                todo.append(dependency)
    return found


@pytest.mark.parametrize("install", ["make install", "pip install cdc-lakehouse[capture]"])
def test_the_documented_install_brings_what_the_capture_tool_imports(install: str) -> None:
    """The docs run the capture tool after `make install`, which installs requirements.txt
    only, or after `pip install` of the package with its `capture` extra (docs/package.md):
    every package the tool's code imports, lazily imported ones too, must come with either, not
    with the test requirements."""
    if install == "make install":
        installed = installed_by(REPO / "requirements.txt")
    else:
        project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
        installed = installed_by(
            [*project["dependencies"], *project["optional-dependencies"]["capture"]]
        )
    providers = metadata.packages_distributions()
    missing = {
        package: providers.get(package)
        for package in imported_packages(REPO / "cdc_lakehouse" / "capture")
        if not {canonicalize_name(d) for d in providers.get(package, [])} & installed
    }
    assert missing == {}


def test_config_file_flags_and_names(tmp_path: Path) -> None:
    path = tmp_path / "capture.yml"
    path.write_text(
        "database: northwind\ntables: [orders, sales.order_lines]\nout: landing\n"
        "state_dir: state/orders\nname: Orders-EU\nschemas_enable: false\n"
    )
    config = CaptureConfig.from_mapping({**load_config_file(path), "flush_size": "50"})
    assert config.tables == ("public.orders", "sales.order_lines")
    assert config.slot_name == "cdc_orders_eu" and config.publication_name == "cdc_orders_eu_pub"
    assert config.flush_size == 50 and config.schemas_enable is False
    assert config.topics == ("northwind.public.orders", "northwind.sales.order_lines")
    with pytest.raises(ConfigError, match="shape must be one of"):
        CaptureConfig.from_mapping({**load_config_file(path), "shape": "avro"})
    with pytest.raises(ConfigError, match="unknown setting"):
        CaptureConfig.from_mapping({**load_config_file(path), "passwrd": "x"})


def test_topics_are_named_as_debezium_names_them() -> None:
    """Debezium keeps a table's case in its topic and replaces each character Kafka does not
    allow in a topic name (`$`) with `_`; the capture takes no table name it could not list."""
    settings = {"database": "db", "out": "o", "state_dir": "s"}
    config = CaptureConfig.from_mapping({**settings, "tables": ["OrderLine", "line$item"]})
    assert config.topics == ("northwind.public.OrderLine", "northwind.public.line_item")
    with pytest.raises(ConfigError, match="is not a plain `schema.table` name"):
        CaptureConfig.from_mapping({**settings, "tables": ["Order Details"]})


def test_engine_properties(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PG_PW", "s3cret")
    config = CaptureConfig.from_mapping(
        {"database": "db", "tables": ["orders"], "out": "o", "state_dir": str(tmp_path),
         "shape": "flattened", "password_env": "MY_PG_PW", "decimal_handling_mode": "string",
         "binary_handling_mode": "hex", "interval_handling_mode": "string"}
    )  # fmt: skip
    props = engine_properties(config, marker=True)
    assert props["table.include.list"] == r"public\.orders,public\.cdc_capture_marker"
    assert props["snapshot.include.collection.list"] == r"public\.orders"
    assert props["database.password"] == "s3cret"
    assert props["transforms.unwrap.delete.tombstone.handling.mode"] == "rewrite"
    assert props["transforms.unwrap.add.fields"] == "op,table,lsn,source.ts_ms"
    assert props["skipped.operations"] == "none" and props["plugin.name"] == "pgoutput"
    assert props["decimal.handling.mode"] == "string"
    assert props["binary.handling.mode"] == "hex"
    assert props["interval.handling.mode"] == "string"
    assert props["hstore.handling.mode"] == "json"  # Debezium's default, said explicitly
    assert props["time.precision.mode"] == "adaptive"
    assert props["offset.storage.file.filename"] == str(tmp_path.resolve() / "offsets.dat")
    envelope = engine_properties(CaptureConfig.from_mapping({**config.to_dict(), "shape":
                                 "envelope"}), marker=False)  # fmt: skip
    assert "transforms" not in envelope and "cdc_capture_marker" not in str(envelope)
    assert "publish.via.partition.root" not in props  # PostgreSQL 12 rejects the option
    partitioned = engine_properties(config, marker=False, via_partition_root=True)
    assert partitioned["publish.via.partition.root"] == "true"


@pytest.mark.parametrize("variant", ["default", "nosch", "unwrap_rw"])
def test_marker_event_in_every_shape(variant: str) -> None:
    lines = (SAMPLES / f"{variant}.jsonl").read_text().splitlines()
    marker = [json.loads(line) for line in lines if "cdc_marker" in line][0]
    assert marker_event(marker["value"]) == ("c", "done")
    assert marker_event(os.fsencode(marker["value"])) == ("c", "done")


@pytest.mark.parametrize("variant", ["default", "nosch", "unwrap_rw"])
def test_snapshot_reads_are_told_apart_in_every_shape(variant: str) -> None:
    values = sample_values(variant)  # one snapshot read, then streamed changes
    assert [is_snapshot_read(v.encode()) for v in values] == [True] + [False] * (len(values) - 1)


def test_state_left_by_a_kill_is_repaired(tmp_path: Path) -> None:
    config = CaptureConfig.from_mapping(
        {"database": "d", "tables": ["t"], "out": "o", "state_dir": str(tmp_path)}
    )
    offsets = config.offsets_file
    offsets.write_bytes(b"\xac\xed\x00\x05")  # Kafka killed after the stream header
    assert not offsets_look_complete(offsets)
    mode, notes = prepare_state(config, slot_exists=True)
    assert not offsets.exists() and mode == "initial" and "incomplete" in notes[0]

    config.snapshot_done_file.write_text("done")
    assert prepare_state(config, slot_exists=True)[0] == "no_data"  # resume from the slot
    offsets.write_bytes(b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap...x")
    assert offsets_look_complete(offsets)
    assert prepare_state(config, slot_exists=True) == ("initial", [])  # offsets rule
    offsets.unlink()
    assert prepare_state(config, slot_exists=False)[0] == "initial"  # a new slot: start over
    assert not config.snapshot_done_file.exists()


def test_sink_writes_the_lenses_layout_the_reader_reads(tmp_path: Path) -> None:
    """KCQL `INSERT INTO bucket:outbox SELECT * FROM t PARTITIONBY customer_id,order_id`: a folder
    per order, files named after their last offset; one partition's offsets spread over folders,
    and what the sink writes is what the reader's `lenses` layout names."""
    layout = {"sink": "lenses", "prefix": "outbox", "partition_by": ["customer_id", "order_id"]}
    sink = LandingSink(tmp_path, flush_size=2, partitions=2, layout=layout)
    rows = [("C1", 1), ("C2", 2), ("C1", 1), ("C1", 1), ("C2", 3), ("C1", 1)]
    records = []
    for i, (customer, order) in enumerate(rows):
        after = {"customer_id": customer, "order_id": order, "n": i}
        value = json.dumps({"schema": {}, "payload": {"op": "c", "after": after}})
        records.append(("t", value, f'{{"order_id":{order}}}'.encode()))
    written = sink.write_batch(records)
    files = TopicFiles(Layout.from_config(layout), "t")
    names = {}
    for path in written:
        relative = path.relative_to(tmp_path).as_posix()
        found = files.classify(str(path), relative)
        assert found is not None and found.problem is None and found.offset_is_last, relative
        names[relative] = (found.partition, found.offset)
    order_1 = sorted(n for n in names if "/order_id=1/" in n)
    assert all(n.startswith("outbox/customer_id=C1/order_id=1/t(") for n in order_1)
    assert len(order_1) == 2  # four records of order 1, flush size 2
    partition = partition_for(b'{"order_id":1}', 2)
    assert {names[n][0] for n in order_1} == {partition}
    last_offsets = sorted(names[n][1] for n in order_1)
    assert (
        LandingSink(tmp_path, partitions=2, layout=layout).recover("t", partition)
        == max(o for p, o in names.values() if p == partition) + 1
    )
    assert last_offsets[-1] >= 3


def test_capture_uploads_its_landing_files_to_object_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`upload_to`: the landing files reach an S3-compatible store (SeaweedFS on 127.0.0.1) under
    the same paths, byte for byte. A first run without the store stands for a run killed between
    writing its files and uploading them: the next run uploads them before its own."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", f"capture-{secrets.token_hex(4)}")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secrets.token_hex(16))
    store_dir = tmp_path / "store"
    store = objectstore.start(store_dir, buckets=["lake"], s3_port=None)
    try:
        with TemporaryPostgres("northwind") as pg:
            pg.execute("postgres", T_TYPES)
            local_only = config_for(pg, tmp_path, database="postgres", topic_prefix="dbz")
            run_ok(local_only)
            with pg.connect("postgres", autocommit=True) as conn:
                for statement in T_TYPES_CHANGES:
                    conn.execute(statement)
            uploading = {**local_only, "upload_to": "s3://lake/landing/"}
            monkeypatch.setenv("CDC_S3_ENDPOINT", store.endpoint)
            said = run_ok(uploading)
        assert "uploaded 1 file(s) the store lacked" in said, said
        out = tmp_path / "landing"
        local = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        # the snapshot's file, then the changes' file(s): the engine may hand the streamed changes
        # over in more than one batch, and the sink rotates its file at the end of each batch
        # (3 files once in a clean-clone CI run under load)
        assert len(local) >= 2, local
        assert local[0].endswith("+0000000000.json"), local
        remote = Uploader(out, "s3://lake/landing", endpoint=store.endpoint)
        assert sorted(remote.remote_files()) == [f"lake/landing/{p}" for p in local]
        for path in local:
            with remote.fs.open_input_stream(f"lake/landing/{path}") as f:
                assert f.read() == (out / path).read_bytes(), path
    finally:
        objectstore.stop(store_dir)


def test_upload_to_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"upload_to must be s3://<bucket>/<prefix>"):
        CaptureConfig.from_mapping(
            {
                "database": "d",
                "tables": ["public.t"],
                "out": str(tmp_path / "landing"),
                "state_dir": str(tmp_path / "state"),
                "upload_to": "/mnt/bucket",
            }
        )
