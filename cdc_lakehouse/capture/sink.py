"""Landing files written the way a Kafka Connect S3 sink (JsonFormat, DefaultPartitioner) does.

    <out>/topics/<topic>/partition=<p>/<topic>+<p>+<start offset, 10 digits>.json

One record value per line. A topic has `partitions` Kafka partitions; a record goes to the one
Kafka's default partitioner picks for its key (murmur2 of the key bytes, so a key always lands in
the same partition; records without a key go to partition 0). Offsets are per topic partition,
Kafka-like: they continue across files and across runs, recovered from the files already there
(largest start offset + its line count), so no state is kept beside the data. A file is written
under a hidden temporary name (`.<name>.tmp`, which readers skip), fsynced, then renamed: a final
name always holds complete content. One writer per topic: leftover temporary files of a topic
are removed when its writer starts.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

PARTITION = 0
SUFFIX = ".json"
Record = tuple[str, str | bytes] | tuple[str, str | bytes, bytes | None]  # topic, value[, key]
_DATA_NAME = re.compile(r"^(?P<topic>[^+/]+)\+(?P<partition>\d+)\+(?P<offset>\d+)\.json$")


def file_name(topic: str, start_offset: int, partition: int = PARTITION) -> str:
    return f"{topic}+{partition}+{start_offset:010d}{SUFFIX}"


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: bytes | None, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: `toPositive(murmur2(key)) % partitions`."""
    if key is None or partitions == 1:
        return PARTITION
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def temp_name(final_name: str) -> str:
    return f".{final_name}.tmp"


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


class _Confluent:
    """Confluent's S3 sink, DefaultPartitioner: `topics/<topic>/partition=<p>/`, files named
    after their first offset."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def folder(self, topic: str, partition: int, value: bytes) -> Path:
        return self.out / "topics" / topic / f"partition={partition}"

    def name(self, topic: str, partition: int, first: int, last: int) -> str:
        return file_name(topic, first, partition)

    def files(self, topic: str, partition: int) -> Iterator[tuple[Path, int]]:
        """(file, offset after its last record) of the topic partition's data files."""
        folder = self.folder(topic, partition, b"")
        if not folder.is_dir():
            return
        for entry in folder.iterdir():
            match = _DATA_NAME.match(entry.name)
            if match and match["topic"] == topic and int(match["partition"]) == partition:
                yield entry, int(match["offset"]) + count_lines(entry)

    def temp_folders(self, topic: str) -> list[Path]:
        return [self.out / "topics" / topic]


class _Lenses:
    """The Lenses stream-reactor S3 sink: `INSERT INTO bucket:<prefix> SELECT * FROM <topic>
    PARTITIONBY <fields> STOREAS JSON`. With fields: a `<field>=<value>` folder per field (values
    from the record's row image) and `<topic>(<partition>_<last offset, 12 digits>).json`;
    without: `<prefix>/<topic>/<partition>/<last offset, 12 digits>.json`."""

    def __init__(
        self, out: Path, prefix: str, partition_by: Sequence[str], gzip: bool = False
    ) -> None:
        self.root = out / prefix if prefix else out
        self.partition_by = tuple(partition_by)
        # JSON with the GZIP codec: the sink names the file `.gz` instead of `.json`.
        self.extension = "gz" if gzip else "json"
        self.gzip = gzip

    def folder(self, topic: str, partition: int, value: bytes) -> Path:
        if not self.partition_by:
            return self.root / topic / str(partition)
        row = _row_image(value)
        return self.root.joinpath(*(f"{f}={_folder_value(row.get(f))}" for f in self.partition_by))

    def name(self, topic: str, partition: int, first: int, last: int) -> str:
        if not self.partition_by:
            return f"{last:012d}.{self.extension}"
        return f"{topic}({partition}_{last:012d}).{self.extension}"

    def files(self, topic: str, partition: int) -> Iterator[tuple[Path, int]]:
        if not self.partition_by:
            folder = self.root / topic / str(partition)
            paths = folder.glob(f"*.{self.extension}") if folder.is_dir() else []
            pattern = re.compile(rf"^(?P<offset>\d+)\.{self.extension}$")
        else:
            paths = self.root.rglob(f"{glob_escape(topic)}({partition}_*).{self.extension}")
            pattern = re.compile(
                rf"^{re.escape(topic)}\({partition}_(?P<offset>\d+)\)\.{self.extension}$"
            )
        for path in paths:
            match = pattern.match(path.name)
            if match:
                yield path, int(match["offset"]) + 1

    def temp_folders(self, topic: str) -> list[Path]:
        return [self.root]


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _row_image(value: bytes) -> dict:
    """The row a record describes: Debezium's `after` (or `before` for a delete), inside the
    JsonConverter's `payload` when schemas are on; a flattened row as it is."""
    try:
        doc = json.loads(value)
    except ValueError:
        return {}
    if isinstance(doc, dict) and "payload" in doc and "schema" in doc:
        doc = doc["payload"]
    if not isinstance(doc, dict):
        return {}
    if "op" in doc and ("after" in doc or "before" in doc):
        return doc.get("after") or doc.get("before") or {}
    return doc


def _folder_value(value: object) -> str:
    text = "null" if value is None else str(value)
    return re.sub(r"[/\\]", "_", text)


def sink_layout(out: Path, layout: Mapping[str, object] | str | None) -> _Confluent | _Lenses:
    """The writer of a capture's `layout` setting: `confluent` (default) or `{sink: lenses,
    prefix: ..., partition_by: [...]}` (the reader's layout setting, plus the KCQL PARTITIONBY
    fields, which only the writer needs)."""
    settings = {"sink": layout} if isinstance(layout, str) else dict(layout or {})
    sink = settings.pop("sink", "confluent")
    if sink == "confluent" and not settings:
        return _Confluent(out)
    if sink == "lenses" and set(settings) <= {"prefix", "partition_by", "compression"}:
        fields = settings.get("partition_by") or []
        if isinstance(fields, str):
            fields = [f.strip() for f in fields.split(",") if f.strip()]
        compression = settings.get("compression")
        if compression not in (None, "none", "gzip"):
            raise ValueError(f"capture layout: compression is gzip or none, got {compression!r}")
        prefix = str(settings.get("prefix", "")).strip("/")
        return _Lenses(out, prefix, [str(f) for f in fields], gzip=compression == "gzip")
    raise ValueError(
        f"capture layout: `confluent` or `{{sink: lenses, prefix:, partition_by:}}`, got {layout!r}"
    )


class LandingSink:
    """Writes batches of records into landing files, durably and in order, in the layout of a
    Kafka Connect storage sink (`layout`: Confluent's S3 sink by default, or Lenses').

    A record is `(topic, value)` or `(topic, value, key)`; a value is one JSON document, as text
    or UTF-8 bytes, without a line break; the key (bytes) picks the Kafka partition."""

    def __init__(
        self,
        out: Path,
        flush_size: int = 500,
        partitions: int = 1,
        layout: Mapping[str, object] | str | None = None,
        after_write: Callable[[list[Path]], object] | None = None,
    ) -> None:
        if flush_size < 1:
            raise ValueError("flush_size must be at least 1")
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        self.out = Path(out)
        self.flush_size = flush_size
        self.partitions = partitions
        self.layout = sink_layout(self.out, layout)
        # Called with each batch's files once they are durable (the capture's upload).
        self.after_write = after_write
        self._next: dict[tuple[str, int], int] = {}
        self._cleaned: set[str] = set()
        self.events: Counter[str] = Counter()  # records written by this sink, per topic
        self.files_written = 0
        self.temp_files_removed = 0

    # -- recovery ---------------------------------------------------------------------------
    def _remove_temp_files(self, topic: str) -> None:
        if topic in self._cleaned:
            return
        self._cleaned.add(topic)
        for folder in self.layout.temp_folders(topic):
            if not folder.is_dir():
                continue
            for entry in folder.rglob(".*.tmp"):
                entry.unlink(missing_ok=True)
                self.temp_files_removed += 1

    def recover(self, topic: str, partition: int = PARTITION) -> int:
        """Remove the topic's leftover temporary files; return (and remember) the partition's
        next offset: the offset after the last record of its files."""
        self._remove_temp_files(topic)
        next_offset = max((end for _, end in self.layout.files(topic, partition)), default=0)
        self._next[(topic, partition)] = next_offset
        return next_offset

    def next_offset(self, topic: str, partition: int = PARTITION) -> int:
        if (topic, partition) not in self._next:
            return self.recover(topic, partition)
        return self._next[(topic, partition)]

    # -- writing ----------------------------------------------------------------------------
    def write_batch(self, records: Iterable[Record]) -> list[Path]:
        """Write one engine batch: each record gets its topic partition's next offset; the
        records of one folder are written in files of at most `flush_size` lines, the last one
        of each folder closed at the end of the batch. Returns the final paths, in write order.
        When this returns, every file is on disk under its final name."""
        groups: dict[tuple[str, int, Path], list[tuple[int, bytes]]] = {}
        for record in records:
            topic, value = record[0], record[1]
            data = value if isinstance(value, bytes) else value.encode("utf-8")
            partition = partition_for(record[2] if len(record) > 2 else None, self.partitions)
            offset = self.next_offset(topic, partition)
            self._next[(topic, partition)] = offset + 1
            folder = self.layout.folder(topic, partition, data)
            groups.setdefault((topic, partition, folder), []).append((offset, data))
            self.events[topic] += 1
        written: list[Path] = []
        folders: dict[Path, bool] = {}  # folder -> created by this batch
        for (topic, partition, folder), values in groups.items():
            folders[folder] = not folder.is_dir()
            folder.mkdir(parents=True, exist_ok=True)
            compress = getattr(self.layout, "gzip", False)
            for start in range(0, len(values), self.flush_size):
                chunk = values[start : start + self.flush_size]
                name = self.layout.name(topic, partition, chunk[0][0], chunk[-1][0])
                lines = [v for _, v in chunk]
                written.append(self._write_file(folder, name, lines, compress))
        for folder, created in folders.items():
            _fsync_dir(folder, with_parents=created)
        self.files_written += len(written)
        if self.after_write is not None and written:
            self.after_write(written)
        return written

    @staticmethod
    def _write_file(folder: Path, name: str, values: list[bytes], compress: bool = False) -> Path:
        final = folder / name
        temp = folder / temp_name(name)
        data = b"\n".join(values) + b"\n"
        if compress:
            data = gzip.compress(data, mtime=0)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, final)
        return final


def _fsync_dir(folder: Path, *, with_parents: bool) -> None:
    """Make renames in `folder` durable (and the folder's own entry, when just created)."""
    paths = (folder, *list(folder.parents)[:3]) if with_parents else (folder,)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
