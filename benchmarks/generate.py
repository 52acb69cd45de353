"""Synthetic landing data at scale, in the exact shapes Debezium and a Kafka Connect S3 sink write.

One source table, `public.items` (topic `bench.public.items`): a bigint key `id` and
`columns - 1` attributes of the usual PostgreSQL types, encoded as the PostgreSQL connector does
with `decimal.handling.mode=precise` and `time.precision.mode=adaptive` (numeric as base64 of the
unscaled value, date as epoch days, timestamp as epoch microseconds, timestamptz as an ISO
string), as the bare envelope (JsonConverter `schemas.enable=false`) or wrapped with its schema
(`schemas.enable=true`). Files are `topics/<topic>/partition=0/<topic>+0+<start offset>.json`,
one record value per line, like the capture tool and the S3 sink write them.

The event stream is what a real source produces: an initial snapshot (`op=r`, one shared LSN,
as Debezium's snapshot has), then transactions of 1-4 changes with increasing LSNs. A change
picks a key that exists so far; a key that is deleted comes back only through a new insert; a
delete carries only the key in `before` (REPLICA IDENTITY DEFAULT). Optionally some events land
late (after events with higher LSNs) and some blocks are delivered twice (at-least-once).

Rendering is string templating over pre-rendered pools of row values, one process per core,
whole files at a time: about 10M events a minute on 2 cores.

    python -m benchmarks.generate create --out bench_data/landing --events 1000000
    python -m benchmarks.generate append --out bench_data/landing --events 10000

`dataset.json` in the output folder records what was generated and what `append` needs to
continue the stream (next offset, LSN, transaction, key); `alive.npy` says which keys exist at
the source after the last batch.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cdc_lakehouse.capture.sink import file_name

TOPIC = "bench.public.items"
KEY = "id"
OP_CODES = ("r", "c", "u", "d")
R, C, U, D = range(4)
BODY_POOL = 65_536
# The benchmark suite's initial loads (benchmarks/run.py) and the machine gauge's landing
# (benchmarks/gauge.py): 80% of the events create a key (half of the keys in the initial
# snapshot, `op=r`), the rest update or delete one (10% deletes), so silver ends with about 0.8
# rows per event: the incremental batches land into the silver tables the loads built.
KEYS_PER_EVENT = 0.8
START = datetime(2024, 6, 1, tzinfo=UTC)
START_LSN = 30_000_000

# -- columns ------------------------------------------------------------------------------------
# (name, declared type) of the default ten columns; wider rows add EXTRA columns in turn.
BASE_COLUMNS = (
    ("id", "bigint"),
    ("name", "text"),
    ("status", "status"),
    ("quantity", "int"),
    ("amount", "numeric(12,2)"),
    ("is_active", "boolean"),
    ("created_date", "date"),
    ("updated_at", "timestamp"),
    ("created_at", "timestamptz"),
    ("note", "text"),
)
EXTRA_TYPES = ("int", "text", "numeric(12,2)", "double", "timestamp")

# Kafka Connect schema of each declared type, as Debezium's JsonConverter writes it.
_CONNECT = {
    "bigint": {"type": "int64"},
    "int": {"type": "int32"},
    "text": {"type": "string"},
    "status": {"type": "string"},
    "boolean": {"type": "boolean"},
    "double": {"type": "double"},
    "numeric(12,2)": {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "12"},
    },
    "date": {"type": "int32", "name": "io.debezium.time.Date", "version": 1},
    "timestamp": {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
    "timestamptz": {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1},
}


def table_columns(count: int = 10) -> list[tuple[str, str]]:
    """(name, declared type) of a table with `count` columns, the key first."""
    if count < 2:
        raise ValueError("a table needs the key and at least one column")
    columns = list(BASE_COLUMNS[:count])
    for i in range(count - len(columns)):
        kind = EXTRA_TYPES[i % len(EXTRA_TYPES)]
        columns.append((f"extra_{i + 1}_{kind.split('(')[0]}", kind))
    return columns


def declared_type(kind: str) -> str:
    """The type to declare in the bronze model's `cdc_table.columns`."""
    return "text" if kind == "status" else kind


def _decimal_base64(unscaled: int) -> str:
    """Debezium precise decimals: base64 of the minimal big-endian two's complement."""
    magnitude = unscaled if unscaled >= 0 else -unscaled - 1
    raw = unscaled.to_bytes((magnitude.bit_length() + 8) // 8, "big", signed=True)
    return base64.b64encode(raw).decode()


def _pool(kind: str, rng: np.random.Generator, size: int = 4096) -> list[str]:
    """JSON texts of `size` possible values of a column (a few nulls where realistic)."""
    if kind == "status":
        values = ["new", "paid", "packed", "shipped", "delivered", "cancelled", "returned"]
        return [json.dumps(v) for v in rng.choice(values, size)]
    if kind == "text":
        words = ["alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "sierra", "tango"]
        texts = [
            " ".join(rng.choice(words, int(rng.integers(1, 6)))) + f" {int(n)}"
            for n in rng.integers(0, 1_000_000, size)
        ]
        out = [json.dumps(t) for t in texts]
    elif kind == "int":
        out = [str(int(v)) for v in rng.integers(0, 10_000, size)]
    elif kind == "bigint":
        out = [str(int(v)) for v in rng.integers(0, 2**40, size)]
    elif kind == "double":
        out = [repr(round(float(v), 3)) for v in rng.normal(100, 50, size)]
    elif kind == "boolean":
        out = ["true" if v else "false" for v in rng.random(size) < 0.7]
    elif kind.startswith("numeric"):
        unscaled = rng.integers(-50_000, 10_000_000, size)
        out = [json.dumps(_decimal_base64(int(v))) for v in unscaled]
    elif kind == "date":
        out = [str(int(v)) for v in rng.integers(19_000, 20_000, size)]
    elif kind == "timestamp":
        base = int(START.timestamp() * 1_000_000)
        out = [str(base + int(v)) for v in rng.integers(0, 86_400_000_000 * 60, size)]
    elif kind == "timestamptz":
        micros = rng.integers(0, 86_400_000_000 * 60, size)
        out = [
            json.dumps((START + timedelta(microseconds=int(v))).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
            for v in micros
        ]
    else:
        raise ValueError(f"unknown column kind {kind}")
    nulls = rng.random(size) < 0.05
    return ["null" if n else v for v, n in zip(out, nulls, strict=True)]


def _bodies(columns: list[tuple[str, str]], rng: np.random.Generator, size: int) -> list[str]:
    """Pre-rendered `,"col":value,...` tails of an image (everything after the key)."""
    pools = [(name, _pool(kind, rng)) for name, kind in columns[1:]]
    picks = [rng.integers(0, len(pool), size) for _, pool in pools]
    return [
        "".join(f',"{name}":{pool[p[i]]}' for (name, pool), p in zip(pools, picks, strict=True))
        for i in range(size)
    ]


def _delete_body(columns: list[tuple[str, str]]) -> str:
    return "".join(f',"{name}":null' for name, _ in columns[1:])


# -- envelope -----------------------------------------------------------------------------------
_SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,"
            "false,incremental"
        },
        "default": "false",
        "field": "snapshot",
    },
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": True, "field": "sequence"},
    {"type": "int64", "optional": True, "field": "ts_us"},
    {"type": "int64", "optional": True, "field": "ts_ns"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": True, "field": "xmin"},
    {"type": "string", "optional": True, "field": "origin"},
    {"type": "int64", "optional": True, "field": "origin_lsn"},
]


def envelope_schema(columns: list[tuple[str, str]], topic: str = TOPIC) -> str:
    """The `schema` JsonConverter embeds in every value when `schemas.enable=true`."""

    def field_schema(name: str, kind: str) -> dict[str, Any]:
        connect = dict(_CONNECT[kind])
        head = {"type": connect.pop("type"), "optional": name != KEY}
        return {**head, **connect, "field": name}

    row = [field_schema(name, kind) for name, kind in columns]
    value = f"{topic}.Value"

    def image(name: str) -> dict[str, Any]:
        return {"type": "struct", "fields": row, "optional": True, "name": value, "field": name}

    schema = {
        "type": "struct",
        "fields": [
            image("before"),
            image("after"),
            {
                "type": "struct",
                "fields": _SOURCE_FIELDS,
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "version": 1,
                "field": "source",
            },
            {
                "type": "struct",
                "fields": [
                    {"type": "string", "optional": False, "field": "id"},
                    {"type": "int64", "optional": False, "field": "total_order"},
                    {"type": "int64", "optional": False, "field": "data_collection_order"},
                ],
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {"type": "int64", "optional": True, "field": "ts_us"},
            {"type": "int64", "optional": True, "field": "ts_ns"},
        ],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }
    return json.dumps(schema, separators=(",", ":"))


def _templates(topic: str, schema: str | None) -> tuple[str, str, str, str]:
    """%-templates of a value: upsert and delete images, snapshot and streaming sequences."""
    _, db_schema, table = topic.split(".")
    db = topic.split(".")[0]
    source = (
        '"source":{"version":"3.6.3.Final","connector":"postgresql","name":"' + db + '",'
        '"ts_ms":%d,"snapshot":"%s","db":"' + db + '","sequence":"%s","ts_us":%d,"ts_ns":%d,'
        '"schema":"' + db_schema + '","table":"' + table + '","txId":%d,"lsn":%d,"xmin":null,'
        '"origin":null,"origin_lsn":null},"transaction":null,"op":"%s","ts_ms":%d,"ts_us":%d,'
        '"ts_ns":%d}'
    )
    upsert = '{"before":null,"after":{"' + KEY + '":%d%s},' + source
    delete = '{"before":{"' + KEY + '":%d%s},"after":null,' + source
    if schema is not None:
        upsert = '{"schema":' + schema.replace("%", "%%") + ',"payload":' + upsert + "}"
        delete = '{"schema":' + schema.replace("%", "%%") + ',"payload":' + delete + "}"
    return upsert, delete, '[null,\\"%d\\"]', '[\\"%d\\",\\"%d\\"]'


# -- the event stream ---------------------------------------------------------------------------
@dataclass
class Events:
    """One batch of events in LSN order, and the order in which they land (`delivery`)."""

    keys: np.ndarray  # int64
    ops: np.ndarray  # int8, OP_CODES index
    lsn: np.ndarray  # int64
    commit_lsn: np.ndarray  # int64, the previous commit (source.sequence[0])
    tx: np.ndarray  # int64
    ts_ms: np.ndarray  # int64, commit time
    body: np.ndarray  # int32, index into the body pool
    delivery: np.ndarray  # int64, event index of each landed line, in landing order


def _stream_keys(rng: np.random.Generator, events: int, existing: int, new: int) -> np.ndarray:
    """Keys of a stream of changes: `new` keys appear (in id order) at random positions, every
    other event changes a key that exists by then (uniformly)."""
    if new > events:
        raise ValueError("more new keys than events")
    is_new = np.zeros(events, dtype=bool)
    is_new[rng.choice(events, size=new, replace=False)] = True
    if existing == 0 and events and not is_new[0]:
        if new == 0:
            raise ValueError("no key to change: add new keys")
        is_new[np.flatnonzero(is_new)[-1]] = False
        is_new[0] = True
    appeared = existing + np.cumsum(is_new, dtype=np.int64)
    before = appeared - is_new
    picked = 1 + (rng.random(events) * np.maximum(before, 1)).astype(np.int64)
    return np.where(is_new, appeared, picked)


def _stream_ops(
    rng: np.random.Generator, keys: np.ndarray, alive: np.ndarray, deletes: float
) -> np.ndarray:
    """Operation of each event given which keys exist before the stream (`alive`, updated in
    place): a key that does not exist is created (`c`); one that does is updated or, with
    probability `deletes`, deleted. Vectorised over runs of consecutive delete draws per key:
    within such a run, deletes and re-inserts alternate."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int8)
    order = np.lexsort((np.arange(n), keys))
    k = keys[order]
    group_start = np.r_[True, k[1:] != k[:-1]]
    created_first = group_start & ~alive[k]
    is_d = (rng.random(n) < deletes) & ~created_first
    prev_is_d = np.r_[False, is_d[:-1]] & ~group_start
    index = np.arange(n)
    run_start = np.maximum.accumulate(np.where(is_d & ~prev_is_d, index, 0))
    second = (index - run_start) % 2 == 1
    final_d = is_d & ~second
    created = created_first | (is_d & second)
    ops_sorted = np.where(final_d, D, np.where(created, C, U)).astype(np.int8)
    last = np.r_[k[1:] != k[:-1], True]
    alive[k[last]] = ops_sorted[last] != D
    ops = np.empty(n, dtype=np.int8)
    ops[order] = ops_sorted
    return ops


def _delivery(
    rng: np.random.Generator, n: int, late: float, duplicates: float, spread: int
) -> np.ndarray:
    """Landing order: late events move up to `spread` positions later; blocks of 100 events
    are delivered a second time 1-3 spreads after the original (at-least-once redelivery)."""
    position = np.arange(n, dtype=np.float64)
    if late > 0 and n > 1:
        moved = rng.random(n) < late
        position[moved] += rng.integers(1, max(2, spread), int(moved.sum()))
    extra = np.zeros(0, dtype=np.int64)
    extra_position = np.zeros(0)
    if duplicates > 0 and n > 100:
        blocks = max(1, round(duplicates * n / 100))
        starts = rng.integers(0, n - 100, blocks)
        extra = (starts[:, None] + np.arange(100)).ravel()
        delay = np.repeat(rng.integers(spread, 3 * spread, blocks), 100)
        extra_position = extra + delay + 0.5
    index = np.r_[np.arange(n), extra]
    return index[np.argsort(np.r_[position, extra_position], kind="stable")]


# -- files --------------------------------------------------------------------------------------
# Set in the parent before forking the writers, read by them (copy-on-write, nothing pickled).
_WRITE: dict[str, Any] = {}


def _write_file(task: tuple[int, int, int]) -> int:
    """Render lines [start, end) of the current batch into the file at `offset`."""
    start, end, offset = task
    w = _WRITE
    ev: Events = w["events"]
    upsert, delete, snap_seq, stream_seq = w["templates"]
    bodies, delete_body = w["bodies"], w["delete_body"]
    idx = ev.delivery[start:end]
    rows = zip(
        ev.keys[idx].tolist(),
        ev.ops[idx].tolist(),
        ev.lsn[idx].tolist(),
        ev.commit_lsn[idx].tolist(),
        ev.tx[idx].tolist(),
        ev.ts_ms[idx].tolist(),
        ev.body[idx].tolist(),
        (idx == 0).tolist(),
        (idx == w["last_snapshot"]).tolist(),
        strict=True,
    )
    lines = []
    for key, op, lsn, commit, tx, ms, body, first, last in rows:
        if op == R:
            sequence = snap_seq % lsn
            snapshot = "first" if first else ("last" if last else "true")
        else:
            sequence = stream_seq % (commit, lsn)
            snapshot = "false"
        arrived = ms + 300
        template, tail = (delete, delete_body) if op == D else (upsert, bodies[body])
        lines.append(
            template
            % (key, tail, ms, snapshot, sequence, ms * 1000, ms * 1_000_000, tx, lsn,
               OP_CODES[op], arrived, arrived * 1000 + 17, arrived * 1_000_000 + 17_123)
        )  # fmt: skip
    path = w["folder"] / file_name(w["topic"], offset)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text("\n".join(lines) + "\n")
    temp.rename(path)
    return path.stat().st_size


# -- datasets -----------------------------------------------------------------------------------
@dataclass
class Dataset:
    """What `dataset.json` holds: the generation settings and where the stream stands."""

    topic: str = TOPIC
    columns: list[tuple[str, str]] = field(default_factory=lambda: table_columns())
    schemas: bool = False
    events_per_file: int = 10_000
    seed: int = 1
    next_offset: int = 0
    next_lsn: int = START_LSN
    next_tx: int = 1_000
    next_ts_ms: int = int(START.timestamp() * 1000)
    keys: int = 0
    batches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(b["events"] for b in self.batches)

    @property
    def lines(self) -> int:
        return sum(b["lines"] for b in self.batches)

    @property
    def bytes(self) -> int:
        return sum(b["bytes"] for b in self.batches)

    def cdc_table(self) -> dict[str, Any]:
        """The bronze model's `cdc_table` config for this topic."""
        return {
            "topic": self.topic,
            "key": [KEY],
            "columns": {name: declared_type(kind) for name, kind in self.columns},
        }

    @staticmethod
    def load(folder: Path) -> Dataset:
        data = json.loads((Path(folder) / "dataset.json").read_text())
        data["columns"] = [tuple(c) for c in data["columns"]]
        return Dataset(**data)

    def save(self, folder: Path) -> None:
        (Path(folder) / "dataset.json").write_text(json.dumps(asdict(self), indent=1) + "\n")


def _batch_metadata(
    rng: np.random.Generator, data: Dataset, n: int, snapshot: int
) -> dict[str, np.ndarray]:
    """LSNs, transactions and commit times of `snapshot` snapshot reads then `n - snapshot`
    streamed changes in transactions of 1-4 events."""
    streamed = n - snapshot
    step = rng.integers(40, 200, streamed)
    lsn_stream = data.next_lsn + 1_000 + np.cumsum(step, dtype=np.int64)
    new_tx = np.r_[True, rng.random(max(streamed - 1, 0)) < 0.45] if streamed else np.zeros(0)
    tx_stream = data.next_tx + np.cumsum(new_tx, dtype=np.int64)
    first_of_tx = np.maximum.accumulate(np.where(new_tx, np.arange(streamed), 0))
    commit_stream = lsn_stream[first_of_tx] - 8 if streamed else np.zeros(0, dtype=np.int64)
    ts_stream = data.next_ts_ms + 1_000 + (tx_stream - data.next_tx) * 2
    snap = np.full(snapshot, data.next_lsn, dtype=np.int64)
    return {
        "lsn": np.r_[snap, lsn_stream].astype(np.int64),
        "commit_lsn": np.r_[snap, commit_stream].astype(np.int64),
        "tx": np.r_[np.full(snapshot, data.next_tx, dtype=np.int64), tx_stream],
        "ts_ms": np.r_[np.full(snapshot, data.next_ts_ms, dtype=np.int64), ts_stream],
    }


def _write_batch(
    folder: Path,
    data: Dataset,
    events: Events,
    snapshot: int,
    rng: np.random.Generator,
    workers: int,
) -> dict[str, Any]:
    topic_dir = folder / "topics" / data.topic / "partition=0"
    topic_dir.mkdir(parents=True, exist_ok=True)
    schema = envelope_schema(data.columns, data.topic) if data.schemas else None
    _WRITE.update(
        events=events,
        templates=_templates(data.topic, schema),
        bodies=_bodies(data.columns, rng, BODY_POOL),
        delete_body=_delete_body(data.columns),
        folder=topic_dir,
        topic=data.topic,
        last_snapshot=snapshot - 1,
    )
    lines = len(events.delivery)
    per_file = data.events_per_file
    tasks = [
        (start, min(start + per_file, lines), data.next_offset + start)
        for start in range(0, lines, per_file)
    ]
    try:
        if workers > 1 and len(tasks) > 1:
            context = multiprocessing.get_context("fork")
            with context.Pool(workers) as pool:
                sizes = pool.map(_write_file, tasks, chunksize=1)
        else:
            sizes = [_write_file(task) for task in tasks]
    finally:
        _WRITE.clear()
    ops = np.bincount(events.ops, minlength=4)
    return {
        "events": int(len(events.keys)),
        "lines": lines,
        "files": len(tasks),
        "bytes": int(sum(sizes)),
        "first_offset": data.next_offset,
        "ops": {op: int(count) for op, count in zip(OP_CODES, ops, strict=True) if count},
    }


def _finish_batch(folder: Path, data: Dataset, events: Events, batch: dict, alive: np.ndarray):
    data.next_offset += batch["lines"]
    data.next_lsn = int(events.lsn.max()) + 1_000
    data.next_tx = int(events.tx.max()) + 1
    data.next_ts_ms = int(events.ts_ms.max()) + 1_000
    data.batches.append(batch)
    data.save(folder)
    np.save(Path(folder) / "alive.npy", alive)
    return batch


def create_dataset(
    folder: Path,
    *,
    events: int,
    keys: int | None = None,
    snapshot: float = 0.5,
    deletes: float = 0.1,
    columns: int = 10,
    schemas: bool = False,
    late: float = 0.0,
    duplicates: float = 0.0,
    events_per_file: int = 10_000,
    seed: int = 1,
    workers: int | None = None,
) -> Dataset:
    """A new landing zone in `folder` (emptied first): `keys` distinct keys (default half the
    events), of which a `snapshot` share is read by the initial snapshot; the other events are
    inserts of the remaining keys and changes, a `deletes` share of them deletes."""
    folder = Path(folder)
    keys = keys if keys is not None else max(1, events // 2)
    if not 1 <= keys <= events:
        raise ValueError("keys must be between 1 and the number of events")
    started = time.monotonic()
    if (folder / "topics").exists():
        import shutil

        shutil.rmtree(folder / "topics")
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    data = Dataset(
        columns=table_columns(columns),
        schemas=schemas,
        events_per_file=events_per_file,
        seed=seed,
    )
    snap = min(keys, round(snapshot * keys))
    alive = np.zeros(keys + 1, dtype=bool)
    alive[1 : snap + 1] = True
    stream_keys = _stream_keys(rng, events - snap, snap, keys - snap)
    stream_ops = _stream_ops(rng, stream_keys, alive, deletes)
    meta = _batch_metadata(rng, data, events, snap)
    stream_order = _delivery(rng, events - snap, late, duplicates, 2 * events_per_file)
    batch_events = Events(
        keys=np.r_[np.arange(1, snap + 1, dtype=np.int64), stream_keys],
        ops=np.r_[np.full(snap, R, dtype=np.int8), stream_ops],
        body=rng.integers(0, BODY_POOL, events, dtype=np.int32),
        delivery=np.r_[np.arange(snap, dtype=np.int64), snap + stream_order],
        **meta,
    )
    batch = _write_batch(folder, data, batch_events, snap, rng, workers or os.cpu_count() or 1)
    data.keys = keys
    batch["seconds"] = round(time.monotonic() - started, 2)
    _finish_batch(folder, data, batch_events, batch, alive)
    return data


def append_batch(
    folder: Path,
    *,
    events: int,
    new_keys: float = 0.1,
    deletes: float = 0.1,
    late: float = 0.0,
    duplicates: float = 0.0,
    seed: int | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Land one more batch of streamed changes: a `new_keys` share inserts new keys, the rest
    change existing keys (a `deletes` share of those deletes)."""
    folder = Path(folder)
    started = time.monotonic()
    data = Dataset.load(folder)
    alive = np.load(folder / "alive.npy")
    rng = np.random.default_rng(seed if seed is not None else data.seed + len(data.batches))
    new = round(new_keys * events)
    stream_keys = _stream_keys(rng, events, data.keys, new)
    alive = np.r_[alive, np.zeros(new, dtype=bool)]
    stream_ops = _stream_ops(rng, stream_keys, alive, deletes)
    meta = _batch_metadata(rng, data, events, 0)
    batch_events = Events(
        keys=stream_keys,
        ops=stream_ops,
        body=rng.integers(0, BODY_POOL, events, dtype=np.int32),
        delivery=_delivery(rng, events, late, duplicates, max(1, min(events // 4, 20_000))),
        **meta,
    )
    batch = _write_batch(folder, data, batch_events, 0, rng, workers or os.cpu_count() or 1)
    data.keys += new
    batch["seconds"] = round(time.monotonic() - started, 2)
    return _finish_batch(folder, data, batch_events, batch, alive)


def live_rows(folder: Path) -> int:
    """Rows the source table holds after the last batch: what silver must hold."""
    return int(np.load(Path(folder) / "alive.npy").sum())


# -- command line -------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="a new landing zone (replaces the topic)")
    append = commands.add_parser("append", help="one more batch of changes")
    for sub in (create, append):
        sub.add_argument("--out", type=Path, required=True, help="dataset folder (landing root)")
        sub.add_argument("--events", type=int, required=True)
        sub.add_argument("--deletes", type=float, default=0.1, help="share of changes (0.1)")
        sub.add_argument("--late", type=float, default=0.0, help="share landing late (0)")
        sub.add_argument("--duplicates", type=float, default=0.0, help="share redelivered (0)")
        sub.add_argument("--seed", type=int, default=None)
        sub.add_argument("--workers", type=int, default=None, help="processes (all cores)")
    create.add_argument("--keys", type=int, default=None, help="distinct keys (events / 2)")
    create.add_argument("--snapshot", type=float, default=0.5, help="share of keys snapshotted")
    create.add_argument("--columns", type=int, default=10, help="columns, key included (10)")
    create.add_argument("--schemas", action="store_true", help="JsonConverter schemas.enable")
    create.add_argument("--events-per-file", type=int, default=10_000)
    append.add_argument("--new-keys", type=float, default=0.1, help="share of inserts (0.1)")
    args = parser.parse_args(argv)
    common = dict(
        events=args.events,
        deletes=args.deletes,
        late=args.late,
        duplicates=args.duplicates,
        workers=args.workers,
    )
    if args.command == "create":
        data = create_dataset(
            args.out,
            keys=args.keys,
            snapshot=args.snapshot,
            columns=args.columns,
            schemas=args.schemas,
            events_per_file=args.events_per_file,
            seed=args.seed if args.seed is not None else 1,
            **common,
        )
        batch = data.batches[-1]
    else:
        batch = append_batch(args.out, new_keys=args.new_keys, seed=args.seed, **common)
    rate = batch["lines"] / max(batch["seconds"], 1e-9)
    print(
        f"{args.out}: {batch['lines']:,} lines in {batch['files']} files, "
        f"{batch['bytes'] / 2**20:,.0f} MiB, ops {batch['ops']}, {batch['seconds']:.1f}s "
        f"({rate:,.0f} lines/s); {live_rows(args.out):,} live rows"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
