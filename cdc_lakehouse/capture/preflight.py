"""Checks and small chores done with psycopg before the JVM starts (fast, one-line errors).

Debezium would report the same problems after a 5-second JVM start, buried in stack traces, and
some (an unreachable server) it retries forever. Also here: the marker table of bounded runs and
dropping a capture's slot and publication.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg

from cdc_lakehouse.capture.config import MARKER_SCHEMA, MARKER_TABLE, CaptureConfig

MARKER_QUALIFIED = f"{MARKER_SCHEMA}.{MARKER_TABLE}"


class PreflightError(RuntimeError):
    """The source is not ready for this capture; the message says what to fix, in one line."""


@dataclass(frozen=True)
class Source:
    """What the checks found that the run depends on."""

    slot_exists: bool  # the capture's replication slot exists already
    partitioned: tuple[str, ...] = ()  # captured tables that are partitioned (relkind 'p')


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines) or type(exc).__name__


def connect(config: CaptureConfig, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    where = f"{config.host}:{config.port}"
    try:
        return psycopg.connect(
            host=config.host,
            port=config.port,
            dbname=config.database,
            user=config.user,
            password=config.password(),
            connect_timeout=10,
            autocommit=autocommit,
            application_name=f"cdc-capture {config.name}",
        )
    except psycopg.OperationalError as exc:
        raise PreflightError(
            f"cannot connect to PostgreSQL at {where} (database {config.database}, "
            f"user {config.user}): {_one_line(exc)}"
        ) from None


def check_source(config: CaptureConfig, *, marker: bool, slot_wait: float = 30.0) -> Source:
    """Everything the engine needs from the server, checked before starting it."""
    try:
        with connect(config) as conn:
            return _check_source(conn, config, marker=marker, slot_wait=slot_wait)
    except psycopg.Error as exc:
        raise PreflightError(f"checking the source failed: {_one_line(exc)}") from None


def _check_source(
    conn: psycopg.Connection[Any], config: CaptureConfig, *, marker: bool, slot_wait: float
) -> Source:
    where = f"{config.host}:{config.port}"
    wal_level = conn.execute("show wal_level").fetchone()[0]
    if wal_level != "logical":
        raise PreflightError(
            f"PostgreSQL at {where} has wal_level={wal_level}; change data capture needs "
            "wal_level=logical (set it in postgresql.conf and restart the server)"
        )
    row = conn.execute(
        "select rolreplication, rolsuper from pg_roles where rolname = current_user"
    ).fetchone()
    if not (row and (row[0] or row[1])):
        raise PreflightError(
            f"user {config.user} may not use replication: grant it with "
            f"`alter role {config.user} replication` (or capture as a superuser)"
        )
    kinds = {t: _table_kind(conn, t) for t in config.tables}
    missing = [t for t, kind in kinds.items() if kind is None]
    if missing:
        raise PreflightError(
            f"table(s) not found in database {config.database}: {', '.join(missing)}"
        )
    _check_logged(conn, kinds)
    partitioned = _check_partitions(conn, config, kinds)
    _check_replica_identity(kinds)
    _check_names(conn, config)
    if marker:
        ensure_marker_table(conn)
    return Source(_check_slot(conn, config, slot_wait), partitioned)


Kind = tuple[bool, bool, str, bool, bool]


def _table_kind(conn: psycopg.Connection[Any], qualified: str) -> Kind | None:
    """(is partitioned, is a partition, replica identity, has a primary key, is unlogged) of a
    table; None when there is no such table."""
    schema, table = qualified.split(".")
    return conn.execute(
        """
        select c.relkind = 'p', c.relispartition, c.relreplident,
               exists (select 1 from pg_index i where i.indrelid = c.oid and i.indisprimary),
               c.relpersistence = 'u'
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = %s and c.relname = %s and c.relkind in ('r', 'p')
        """,
        (schema, table),
    ).fetchone()


def _check_partitions(
    conn: psycopg.Connection[Any],
    config: CaptureConfig,
    kinds: dict[str, Kind | None],
) -> tuple[str, ...]:
    """A partitioned table's changes reach the capture only through a publication with
    publish_via_partition_root: without it pgoutput names each change by the leaf partition
    holding the row, a table the include list (the parent) does not hold, and Debezium drops it
    without a word. The engine has Debezium create the publication with the option; one that
    exists without it is refused here, and so is a partition listed itself. Returns the
    captured partitioned tables."""
    partitioned = tuple(t for t, kind in kinds.items() if kind and kind[0] and not kind[1])
    partitions = [t for t, kind in kinds.items() if kind and kind[1]]
    if not partitioned and not partitions:
        return ()
    if conn.info.server_version < 130000:
        version = conn.execute("show server_version").fetchone()[0]
        raise PreflightError(
            f"{(partitioned or tuple(partitions))[0]} is a partitioned table or a partition: "
            "capturing it needs PostgreSQL 13 or later (publish_via_partition_root); the server "
            f"at {config.host}:{config.port} runs {version}"
        )
    for partition in partitions:
        root = _partition_root(conn, partition)
        if root in config.tables:
            raise PreflightError(
                f"{partition} is a partition of {root}, which is captured too: its changes "
                f"arrive under {root} (and its rows would land twice from the snapshot); "
                f"remove {partition} from tables"
            )
        raise PreflightError(
            f"{partition} is a partition of {root}: capture {root} instead; the changes of all "
            "its partitions, later ones too, arrive under its name, and a row moved between "
            "partitions stays one row"
        )
    row = conn.execute(
        "select pubviaroot from pg_publication where pubname = %s", (config.publication_name,)
    ).fetchone()
    if row is not None and not row[0]:
        publication = config.publication_name
        tables = ", ".join(partitioned)
        raise PreflightError(
            f"publication {publication} exists without publish_via_partition_root, so it would "
            f"publish the changes of the partitioned table(s) {tables} under their partitions' "
            f"names, which the capture drops; run `ALTER PUBLICATION {publication} SET "
            "(publish_via_partition_root = true)`; if this capture has streamed through it "
            "already, those changes never landed: take a new snapshot (docs/capture.md, "
            '"Partitioned tables")'
        )
    return partitioned


def _check_logged(conn: psycopg.Connection[Any], kinds: dict[str, Kind | None]) -> None:
    """An UNLOGGED table (a dump of one keeps it so: pgexercises' tables are) writes no WAL, so
    logical decoding never sees its changes and PostgreSQL refuses it in a publication
    (`Unlogged relations cannot be replicated`); Debezium's snapshot would still read it, and
    its rows would land once and never change. Refused, with the statements that make every
    such table logged, referenced tables first (PostgreSQL refuses a logged table that
    references an unlogged one)."""
    unlogged = [qualified for qualified, kind in kinds.items() if kind and kind[4]]
    if not unlogged:
        return
    # (referencing, referenced) between unlogged tables, named as tables are: schema.table
    edges = conn.execute(
        """
        select cn.nspname || '.' || c.relname, rn.nspname || '.' || r.relname
        from pg_constraint k
        join pg_class c on c.oid = k.conrelid join pg_namespace cn on cn.oid = c.relnamespace
        join pg_class r on r.oid = k.confrelid join pg_namespace rn on rn.oid = r.relnamespace
        where k.contype = 'f' and c.oid <> r.oid and c.relpersistence = 'u'
          and r.relpersistence = 'u'
        """
    ).fetchall()
    order: list[str] = []
    pending = set(unlogged)
    while pending:
        ready = {t for t in pending if not any(c == t and r in pending for c, r in edges)}
        for name in sorted(ready or pending):  # a cycle: PostgreSQL will say which
            order.append(name)
            pending.discard(name)
    statements = " ".join(f"ALTER TABLE {t} SET LOGGED;" for t in order)
    raise PreflightError(
        f"{', '.join(unlogged)} {'is' if len(unlogged) == 1 else 'are'} UNLOGGED: PostgreSQL "
        f"writes no WAL for such a table, so none of its changes can be captured; make it "
        f"logged (rewrites it) or leave it out of tables: {statements}"
    )


def _check_replica_identity(kinds: dict[str, Kind | None]) -> None:
    """A table without a primary key and with REPLICA IDENTITY DEFAULT (or NOTHING) is refused:
    once it is in the capture's publication PostgreSQL refuses every UPDATE and DELETE of it,
    the application's too ("cannot update table ... because it does not have a replica
    identity and publishes updates"), and its changes would carry no key to merge by."""
    for qualified, kind in kinds.items():
        _, _, identity, has_key, _ = kind or (False, False, "d", True, False)
        if identity == "n" or (identity == "d" and not has_key):
            raise PreflightError(
                f"{qualified} has no primary key and replica identity "
                f"{'NOTHING' if identity == 'n' else 'DEFAULT'}: in the capture's publication "
                "PostgreSQL would refuse every UPDATE and DELETE of it, your application's too, "
                "and its changes would carry no key. Add a primary key, or run `ALTER TABLE "
                f"{qualified} REPLICA IDENTITY FULL` and register its key columns (`key:` in "
                "tables/<source>.yml)"
            )


def _check_names(conn: psycopg.Connection[Any], config: CaptureConfig) -> None:
    """Names Debezium cannot keep apart are refused before it starts: two tables whose topics
    are one once Debezium has replaced the characters Kafka does not allow (`line$item` and
    `line_item` both land as `line_item`: their events would mix in one table), and columns
    of one table that differ only by case (`name` and `Name`: Debezium stops at its snapshot,
    "columns that differ only by case"; Spark's columns are not case-sensitive either)."""
    by_topic: dict[str, list[str]] = {}
    for qualified in config.tables:
        by_topic.setdefault(config.topic(qualified), []).append(qualified)
    for topic, tables in by_topic.items():
        if len(tables) > 1:
            raise PreflightError(
                f"tables {' and '.join(tables)} would land in one topic, {topic} (Debezium "
                "replaces the characters Kafka does not allow in a topic name with `_`): "
                "capture them in two captures with different topic_prefix values"
            )
    twins = conn.execute(
        """
        select n.nspname || '.' || c.relname, string_agg(a.attname, ', ' order by a.attnum)
        from pg_attribute a
        join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname || '.' || c.relname = any(%s) and a.attnum > 0 and not a.attisdropped
        group by 1, lower(a.attname) having count(*) > 1
        """,
        (list(config.tables),),
    ).fetchone()
    if twins is not None:
        raise PreflightError(
            f"{twins[0]} has columns that differ only by case ({twins[1]}): Debezium refuses "
            "such a table (its columns are matched without case), and so would Spark; rename "
            "one of them, or leave the table out of tables"
        )


def _partition_root(conn: psycopg.Connection[Any], qualified: str) -> str:
    schema, table = qualified.split(".")
    return conn.execute(
        """
        select rn.nspname || '.' || r.relname
        from pg_class c
        join pg_namespace n on n.oid = c.relnamespace
        join pg_class r on r.oid = pg_partition_root(c.oid)
        join pg_namespace rn on rn.oid = r.relnamespace
        where n.nspname = %s and c.relname = %s
        """,
        (schema, table),
    ).fetchone()[0]


def _check_slot(conn: psycopg.Connection[Any], config: CaptureConfig, wait: float) -> bool:
    """The slot must be free (a killed capture's server process may need a moment to notice),
    and offsets saved for a slot that no longer exists would silently skip changes."""
    slot = slot_state(conn, config.slot_name)
    deadline = time.monotonic() + wait
    while slot is not None and slot["active"] and time.monotonic() < deadline:
        time.sleep(0.5)
        slot = slot_state(conn, config.slot_name)
    if slot is not None and slot["active"]:
        raise PreflightError(
            f"replication slot {config.slot_name} is in use (server pid {slot['active_pid']}): "
            f"is another capture named {config.name!r} running?"
        )
    if slot is not None and slot["database"] != config.database:
        raise PreflightError(
            f"replication slot {config.slot_name} belongs to database {slot['database']}, "
            f"not {config.database}: give this capture another name"
        )
    if slot is None and config.offsets_file.exists() and config.offsets_file.stat().st_size:
        raise PreflightError(
            f"{config.offsets_file} holds offsets but replication slot {config.slot_name} does "
            "not exist (dropped?): changes since the last run cannot be read; run `drop` to "
            "reset this capture (the next run takes a new snapshot)"
        )
    if slot is None:
        used, limit = conn.execute(
            "select (select count(*) from pg_replication_slots), "
            "current_setting('max_replication_slots')::int"
        ).fetchone()
        if used >= limit:
            raise PreflightError(
                f"no free replication slot ({used} of max_replication_slots={limit} in use)"
            )
    return slot is not None


def slot_state(conn: psycopg.Connection[Any], slot_name: str) -> dict[str, Any] | None:
    row = conn.execute(
        "select active, active_pid, database from pg_replication_slots where slot_name = %s",
        (slot_name,),
    ).fetchone()
    if row is None:
        return None
    return {"active": row[0], "active_pid": row[1], "database": row[2]}


# -- marker table -----------------------------------------------------------------------------
def ensure_marker_table(conn: psycopg.Connection[Any]) -> None:
    """Create the marker table if missing (captures may start together: serialized by a lock)."""
    if conn.execute("select to_regclass(%s)", (MARKER_QUALIFIED,)).fetchone()[0] is not None:
        return
    try:
        with conn.transaction():
            conn.execute("select pg_advisory_xact_lock(hashtext(%s))", (MARKER_QUALIFIED,))
            conn.execute(
                f"""
                create table if not exists {MARKER_QUALIFIED} (
                    id bigserial primary key,
                    capture text,
                    created_at timestamptz default now()
                )
                """
            )
    except psycopg.Error as exc:
        raise PreflightError(
            f"cannot create the marker table {MARKER_QUALIFIED}: {_one_line(exc)}"
        ) from None


def insert_marker(config: CaptureConfig) -> int:
    """Insert this capture's marker row (after removing its older ones); returns its id."""
    with connect(config) as conn, conn.transaction():
        conn.execute(f"delete from {MARKER_QUALIFIED} where capture = %s", (config.name,))
        row = conn.execute(
            f"insert into {MARKER_QUALIFIED} (capture) values (%s) returning id", (config.name,)
        ).fetchone()
    return int(row[0])


def wait_until_streaming(config: CaptureConfig, stop: Any, poll: float = 0.2) -> bool:
    """Wait until the engine streams from its slot with the marker table in its publication (or
    `stop` is set); True when it does.

    A marker committed from then on is decoded after the snapshot (if any) and after every
    change committed before it (WAL order), and it is published (pgoutput judges a change by the
    publication as it was at that point of the WAL). Earlier is not safe: a snapshot taken on an
    existing slot makes the engine skip the WAL before the snapshot's position."""
    schema, table = MARKER_QUALIFIED.split(".")
    with connect(config) as conn:
        while not stop.is_set():
            ready = conn.execute(
                """
                select exists (select 1 from pg_replication_slots s
                               join pg_stat_replication r on r.pid = s.active_pid
                               where s.slot_name = %s and r.state in ('catchup', 'streaming'))
                   and exists (select 1 from pg_publication_tables
                               where pubname = %s and schemaname = %s and tablename = %s)
                """,
                (config.slot_name, config.publication_name, schema, table),
            ).fetchone()[0]
            if ready:
                return True
            stop.wait(poll)
    return False


# -- drop -------------------------------------------------------------------------------------
def drop_capture(config: CaptureConfig, *, timeout: float = 30.0) -> list[str]:
    """Drop the slot (once inactive) and the publication; forget the saved offsets (the next
    run starts with a new snapshot)."""
    try:
        done = _drop(config, timeout)
    except psycopg.Error as exc:
        raise PreflightError(f"dropping the capture failed: {_one_line(exc)}") from None
    if config.offsets_file.exists():
        config.offsets_file.unlink()
        done.append(f"offsets {config.offsets_file}")
    config.snapshot_done_file.unlink(missing_ok=True)
    return done


def _drop(config: CaptureConfig, timeout: float) -> list[str]:
    done = []
    with connect(config) as conn:
        deadline = time.monotonic() + timeout
        slot = slot_state(conn, config.slot_name)
        while slot is not None and slot["active"] and time.monotonic() < deadline:
            time.sleep(0.5)
            slot = slot_state(conn, config.slot_name)
        if slot is not None and slot["active"]:
            raise PreflightError(
                f"replication slot {config.slot_name} still active (server pid "
                f"{slot['active_pid']}) after {timeout:.0f}s: stop the capture first"
            )
        if slot is not None:
            conn.execute("select pg_drop_replication_slot(%s)", (config.slot_name,))
            done.append(f"replication slot {config.slot_name}")
        exists = conn.execute(
            "select 1 from pg_publication where pubname = %s", (config.publication_name,)
        ).fetchone()
        if exists:
            conn.execute(f'drop publication "{config.publication_name}"')
            done.append(f"publication {config.publication_name}")
    return done
