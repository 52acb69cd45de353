"""The reference pipeline with the real pieces, for the tests: PostgreSQL -> Debezium's PostgreSQL
connector in a Kafka Connect worker -> Kafka (one KRaft broker) -> the landing sink connector
(ours, jvm/connect) -> a landing zone, next to the capture tool that imitates them.

    with KafkaPipeline(harness, work=Path("kafka"), landing=Path("landing")) as kafka:
        harness.setup()
        kafka.start()           # broker, worker, one Debezium connector per capture group
        harness.run_phase(1, 120)
        kafka.capture()         # until every change committed so far is in landing files

Every server binds 127.0.0.1 on a free port and is stopped by pid. The connectors get the
capture tool's own Debezium settings (`capture.engine.engine_properties`, same Debezium release)
and its converters, after its check of the source (`capture.preflight.check_source`: a
partitioned table is captured through its root), so the two pipelines can be compared event for
event (`landing_events`).
The jars come from `make install-dev` (jars/connect/, pinned in jvm/connect/pom.xml). Confluent's
JDBC source connector is not served from Maven Central: the query-based table is polled by the
capture tool's JDBC poller into the same landing zone.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cdc_lakehouse.bronze.layout import Layout, TopicFiles
from cdc_lakehouse.capture import preflight
from cdc_lakehouse.capture.config import CaptureConfig
from cdc_lakehouse.capture.engine import engine_properties
from sample.generator.harness import TOPIC_PREFIX, CaptureGroup, SourceHarness
from sample.generator.northwind import LAYOUTS, Table

REPO = Path(__file__).resolve().parents[2]
JARS = Path(os.environ.get("CDC_CONNECT_JARS", REPO / "jars" / "connect"))
# Marker rows of this pipeline, apart from the capture tool's (`cdc_capture_marker`): each
# Debezium connector streams every insert after the changes committed before it.
MARKER_TABLE = "public.cdc_kafka_marker"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
BYTES_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
# Settings of the embedded engine that a Connect worker holds instead of the connector, and the
# engine's converter settings, which a connector gives per converter.
ENGINE_ONLY = ("offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms")

LOG4J2 = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %-5level [%c{{1}}] %m%n
"""


def _cluster_id() -> str:
    """A random KRaft cluster id, drawn as Kafka's own `Uuid.randomUuid()` draws one: base64url of
    a random UUID, never starting with "-". kafka-storage's argument parser reads such an id as an
    option ("argument --cluster-id/-t: expected one argument"): a one-in-64 failure of the broker's
    format that CI hit once. The `=` form passes it as a value as well. (apache/kafka#21313 later
    made Kafka refuse a "-" anywhere in a random id; the start is what the parser reads.)"""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaFailed(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaPipeline:
    def __init__(
        self,
        harness: SourceHarness,
        *,
        work: Path,
        landing: Path,
        jars: Path = JARS,
        timeout: float = 300.0,
    ) -> None:
        self.harness = harness
        self.work = Path(work)
        self.landing = Path(landing)
        self.jars = Path(jars)
        self.timeout = timeout
        self.broker_port = _free_port()
        self.controller_port = _free_port()
        self.rest_port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.broker_port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.markers = 0
        self.connectors: dict[str, dict[str, str]] = {}

    # -- servers ----------------------------------------------------------------------------
    def _java(self, main: str, *args: str, heap: str = "512m", log: str) -> list[str]:
        if not (self.jars / ".installed").exists():
            raise KafkaFailed(f"{self.jars} is missing: run `make install-dev`")
        log4j = self.work / f"{log}.log4j2.properties"
        log4j.write_text(LOG4J2.format(log=self.work / f"{log}.log"))
        return [
            "java", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{self.jars}/*", main, *args,
        ]  # fmt: skip

    def _start(self, name: str, command: list[str]) -> None:
        out = open(self.work / f"{name}.out", "wb")  # noqa: SIM115 - the process owns it
        self.processes[name] = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def start(self) -> None:
        """Broker and worker up, the connectors created and streaming (their slots exist)."""
        self.work.mkdir(parents=True, exist_ok=True)
        self._start_broker()
        self._start_worker()
        self._create_marker_table()
        for group in self.harness.groups:
            self._create(f"kafka_{group.name}", self.source_connector(group))
        for name, config in self.sink_connectors().items():
            self._create(name, config)
        self._wait_running()
        self._wait_slots()

    def _start_broker(self) -> None:
        properties = self.work / "broker.properties"
        properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://{self.bootstrap},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://{self.bootstrap}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={self.work / 'kafka-data'}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    # Topics are created by Connect for the source connectors, with their
                    # partitions; a sink subscribing first must not create them with one.
                    "auto.create.topics.enable=false",
                ]
            )
            + "\n"
        )
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={_cluster_id()}",
                "-c",
                str(properties),
                log="storage",
            ),  # fmt: skip
            check=True,
            capture_output=True,
        )
        self._start("broker", self._java("kafka.Kafka", str(properties), log="broker"))
        self._wait_port(self.broker_port, "broker")

    def _start_worker(self) -> None:
        properties = self.work / "worker.properties"
        properties.write_text(
            "\n".join(
                [
                    f"bootstrap.servers={self.bootstrap}",
                    f"key.converter={JSON_CONVERTER}",
                    f"value.converter={JSON_CONVERTER}",
                    f"offset.storage.file.filename={self.work / 'connect.offsets'}",
                    # Sinks commit (and so close their files) every second; `capture` waits on
                    # the committed offsets.
                    "offset.flush.interval.ms=1000",
                    f"listeners=http://127.0.0.1:{self.rest_port}",
                    "plugin.discovery=only_scan",
                    # Lets the sinks refresh their topic metadata every second (below).
                    "connector.client.config.override.policy=All",
                ]
            )
            + "\n"
        )
        command = self._java(
            "org.apache.kafka.connect.cli.ConnectStandalone", str(properties),
            heap="1g", log="connect",
        )  # fmt: skip
        self._start("connect", command)
        self._wait_port(self.rest_port, "connect")
        # The REST server listens before its resources are registered: wait for them.
        deadline = time.monotonic() + 120
        while True:
            try:
                self._rest("GET", "/connectors")
                return
            except KafkaFailed:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def _wait_port(self, port: int, name: str) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self._check_alive()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.3)
        raise KafkaFailed(f"{name} did not listen on 127.0.0.1:{port}: {self._log_tail(name)}")

    def _check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise KafkaFailed(f"{name} exited {proc.returncode}: {self._log_tail(name)}")

    def _log_tail(self, name: str) -> str:
        text = ""
        for suffix in (".out", ".log"):
            path = self.work / f"{name}{suffix}"
            if path.exists():
                text += path.read_text(errors="replace")[-3000:]
        return text

    def stop(self) -> None:
        """Stop the worker, then the broker (SIGTERM, SIGKILL after 30 s), then drop the
        connectors' replication slots."""
        for name in ("connect", "broker"):
            proc = self.processes.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.connectors:
            with self.harness.pg.connect() as conn:
                conn.execute(
                    "select pg_drop_replication_slot(slot_name) from pg_replication_slots"
                    " where slot_name like 'cdc_kafka_%' and not active"
                )

    def __enter__(self) -> KafkaPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connectors -------------------------------------------------------------------------
    def capture_config(self, group: CaptureGroup) -> CaptureConfig:
        """The capture tool's settings for the group, under this pipeline's slot name."""
        settings = self.harness.config(group, self.landing)
        settings.update(name=f"kafka_{group.name}", state_dir=str(self.work / group.name))
        return CaptureConfig.from_mapping(settings)

    def source_connector(self, group: CaptureGroup) -> dict[str, str]:
        """Debezium's connector with the capture tool's settings (the same function builds
        both), its converters as connector settings, and the marker table streamed.

        The capture tool's check of the source runs first, with its one-line errors: among
        them, a partition listed itself and a publication without publish_via_partition_root.
        It returns the partitioned tables; with one in the group, the connector creates its
        publication with the option, or it would name a partition's changes by the leaf
        partition and Debezium would drop them (only the snapshot would land)."""
        config = self.capture_config(group)
        source = preflight.check_source(config, marker=False)
        props = engine_properties(config, marker=False, via_partition_root=bool(source.partitioned))
        for key in ENGINE_ONLY:
            props.pop(key)
        schemas = props.pop("converter.schemas.enable")
        replace_null = props.pop("converter.replace.null.with.default")
        for side in ("key", "value"):
            props[f"{side}.converter"] = JSON_CONVERTER
            props[f"{side}.converter.schemas.enable"] = schemas
            props[f"{side}.converter.replace.null.with.default"] = replace_null
        props["table.include.list"] += "," + re.escape(MARKER_TABLE)
        props["tasks.max"] = "1"
        # Several Debezium connectors with one topic prefix in one worker: without a tag of
        # their own, their JMX metric names clash and each start waits up to a minute for the
        # previous one's snapshot metrics to go.
        props["custom.metric.tags"] = f"connector={config.name}"
        # Connect creates the topics with the partitions the capture tool imitates.
        props["topic.creation.default.partitions"] = str(config.partitions)
        props["topic.creation.default.replication.factor"] = "1"
        return props

    def sink_connectors(self) -> dict[str, dict[str, str]]:
        """One landing sink per layout the groups use, each with its groups' topics."""
        sinks: dict[str, dict[str, str]] = {}
        for group in self.harness.groups:
            config = self.capture_config(group)
            name = f"landing_{group.layout}"
            if name in sinks:
                sinks[name]["topics"] += "," + ",".join(config.topics)
                continue
            sink = {
                "connector.class": "io.cdclakehouse.connect.LandingSinkConnector",
                "tasks.max": "1",
                "topics": ",".join(config.topics),
                "key.converter": BYTES_CONVERTER,
                "value.converter": BYTES_CONVERTER,
                "landing.dir": str(self.landing),
                "flush.size": str(config.flush_size),
                # Topics created after the sink subscribed are found within a second.
                "consumer.override.metadata.max.age.ms": "1000",
            }
            layout = LAYOUTS[group.layout]
            if isinstance(layout, dict):
                sink.update(
                    {
                        "layout": layout["sink"],
                        "prefix": layout.get("prefix", ""),
                        "partition.by": ",".join(layout.get("partition_by", [])),
                        "compression": layout.get("compression") or "none",
                    }
                )
            sinks[name] = sink
        return sinks

    def _rest(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = " ".join(exc.read().decode(errors="replace").split())[:2000]
            raise KafkaFailed(f"{method} {path}: {exc.code} {detail}") from exc

    def _create(self, name: str, config: dict[str, str]) -> None:
        self._rest("POST", "/connectors", {"name": name, "config": config})
        self.connectors[name] = config

    def _failures(self) -> list[str]:
        failures = []
        for name in self.connectors:
            status = self._rest("GET", f"/connectors/{name}/status")
            for part in [status["connector"], *status["tasks"]]:
                if part["state"] == "FAILED":
                    failures.append(f"{name}: {part.get('trace', '')[:2000]}")
        return failures

    def _wait_running(self) -> None:
        deadline = time.monotonic() + 120
        while True:
            self._check_alive()
            if failures := self._failures():
                raise KafkaFailed("connector failed:\n" + "\n".join(failures))
            states = [
                task["state"]
                for name in self.connectors
                for task in self._rest("GET", f"/connectors/{name}/status")["tasks"]
            ]
            if states and all(s == "RUNNING" for s in states):
                return
            if time.monotonic() > deadline:
                raise KafkaFailed(f"connector tasks not running: {states}")
            time.sleep(0.5)

    def _wait_slots(self) -> None:
        """A marker inserted once a connector's slot exists is streamed by it."""
        slots = [self.capture_config(g).slot_name for g in self.harness.groups]
        deadline = time.monotonic() + 120
        with self.harness.pg.connect() as conn:
            while True:
                found = conn.execute(
                    "select count(*) from pg_replication_slots where slot_name = any(%s)",
                    (slots,),
                ).fetchone()[0]
                if found == len(slots):
                    return
                if time.monotonic() > deadline:
                    raise KafkaFailed(f"replication slots missing: {slots}")
                time.sleep(0.3)

    def _create_marker_table(self) -> None:
        with self.harness.pg.connect() as conn:
            conn.execute(
                f"create table if not exists {MARKER_TABLE}"
                " (id bigserial primary key, at timestamptz not null default now())"
            )

    # -- capture ----------------------------------------------------------------------------
    def capture(self) -> float:
        """Insert a marker, wait until every connector has streamed it and the sinks have
        committed (so written) everything in their topics; then poll the query-based tables.
        Returns the seconds taken."""
        started = time.monotonic()
        with self.harness.pg.connect() as conn:
            conn.execute(f"insert into {MARKER_TABLE} default values")
        self.markers += 1
        marker_topic = f"{TOPIC_PREFIX}.{MARKER_TABLE}"
        command = self._java(
            "io.cdclakehouse.connect.CaughtUp",
            "--bootstrap", self.bootstrap,
            "--marker-topic", marker_topic,
            "--markers", str(self.markers * len(self.harness.groups)),
            "--timeout-ms", "15000",
            *(arg for name, config in self.sink_connectors().items()
              for arg in ("--group", f"connect-{name}={config['topics']}")),
            heap="256m", log="caught-up",
        )  # fmt: skip
        while True:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode == 0:
                break
            self._check_alive()
            if failures := self._failures():
                raise KafkaFailed("connector failed:\n" + "\n".join(failures))
            if result.returncode != 2 or time.monotonic() - started > self.timeout:
                raise KafkaFailed(f"pipeline not caught up: {result.stdout}{result.stderr}")
        self.harness.poll_jdbc(self.landing, state_dir=self.work / "jdbc")
        return time.monotonic() - started


# -- comparing two landing zones ------------------------------------------------------------------
VOLATILE_TOP = ("ts_ms", "ts_us", "ts_ns")  # when the connector processed the change
# What differs between two replication slots for the same snapshot read: the slot's own position.
VOLATILE_SNAPSHOT_SOURCE = ("lsn", "ts_ms", "ts_us", "ts_ns", "txId", "sequence", "xmin")
VOLATILE_SNAPSHOT_FLAT = ("__lsn", "__source_ts_ms")


def normalized_event(line: str) -> str:
    """A landed Debezium event without what depends on when or through which slot it was read;
    the rest (schema, row images, op, commit LSN and time of streamed changes) must be equal."""
    doc = json.loads(line)
    body = doc["payload"] if isinstance(doc, dict) and "schema" in doc else doc
    if isinstance(body, dict):
        for key in VOLATILE_TOP:
            body.pop(key, None)
        source = body.get("source")
        if isinstance(source, dict):
            source.pop("version", None)
            # [last commit LSN this slot decoded, this change's LSN]: the first depends on which
            # other transactions the slot's publication holds (each pipeline's marker table).
            if source.get("sequence"):
                source["sequence"] = json.loads(source["sequence"])[-1]
            if body.get("op") == "r":
                for key in (*VOLATILE_SNAPSHOT_SOURCE, "snapshot"):
                    source.pop(key, None)
        if body.get("__op") == "r":
            for key in VOLATILE_SNAPSHOT_FLAT:
                body.pop(key, None)
    return json.dumps(doc, sort_keys=True)


def landing_events(root: Path, topic: str, layout: Any) -> Iterator[tuple[int, str]]:
    """(Kafka partition, normalized event) of a topic's landed records, each partition's in file
    offset order (a file's own lines in order)."""
    files = TopicFiles(Layout.from_config(layout), topic)
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        landed = files.classify(str(path), path.relative_to(root).as_posix())
        if landed is not None and landed.problem is None:
            found.append((landed.partition or 0, landed.offset, path))
    for partition, _, path in sorted(found):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        for line in data.decode().splitlines():
            yield partition, normalized_event(line)


def _is_truncate(event: str) -> bool:
    body = json.loads(event)
    body = body.get("payload", body)
    return body.get("op") == "t" or body.get("__op") == "t"


def landing_differences(expected: Path, actual: Path, tables: tuple[Table, ...]) -> list[str]:
    """What differs between two landing zones of the same source (say the capture tool's and
    Kafka Connect's), Debezium topics only: each Kafka partition must hold the same events, in
    the same order where the layout keeps one partition's files apart (Confluent's); in the
    Lenses layout with PARTITIONBY a partition's files are spread over folders, so the same
    events. A truncate has no key (Kafka's producer puts it in any partition): compared per
    topic."""
    problems = []
    for table in tables:
        if table.shape == "jdbc":
            continue
        layout = LAYOUTS[table.layout]
        sides = []
        for root in (expected, actual):
            events = list(landing_events(root, table.topic, layout))
            truncates = Counter(e for _, e in events if _is_truncate(e))
            keyed: dict[int, list[str]] = {}
            for partition, event in events:
                if not _is_truncate(event):
                    keyed.setdefault(partition, []).append(event)
            if layout != "confluent":
                keyed = {p: sorted(e) for p, e in keyed.items()}
            sides.append((keyed, truncates))
        (keyed_a, truncates_a), (keyed_b, truncates_b) = sides
        if truncates_a != truncates_b:
            problems.append(f"{table.topic}: truncates differ")
        for partition in sorted(set(keyed_a) | set(keyed_b)):
            a, b = keyed_a.get(partition, []), keyed_b.get(partition, [])
            if a != b:
                at = next(
                    (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)),
                )
                problems.append(
                    f"{table.topic} partition {partition}: {len(a)} vs {len(b)} events, first"
                    f" difference at #{at}: {a[at][:300] if at < len(a) else None}"
                    f" | {b[at][:300] if at < len(b) else None}"
                )
    return problems
