"""Landing files written the way a Kafka Connect S3 sink (JsonFormat) writes them.

    <out>/topics/<topic>/partition=0/<topic>+0+<start offset, 10 digits>.json

One record value per line. Offsets are per topic, Kafka-like: they continue across files and
across runs, recovered from the files already there (largest start offset + its line count), so
no state is kept beside the data. A file is written under a hidden temporary name
(`.<name>.tmp`, which readers skip), fsynced, then renamed: a final name always holds complete
content. One writer per topic: leftover temporary files of a topic are removed when its writer
starts.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

PARTITION = 0
SUFFIX = ".json"
_DATA_NAME = re.compile(r"^(?P<topic>[^+/]+)\+(?P<partition>\d+)\+(?P<offset>\d+)\.json$")


def file_name(topic: str, start_offset: int, partition: int = PARTITION) -> str:
    return f"{topic}+{partition}+{start_offset:010d}{SUFFIX}"


def temp_name(final_name: str) -> str:
    return f".{final_name}.tmp"


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


class LandingSink:
    """Writes batches of `(topic, value)` records into landing files, durably and in order.

    A value is one JSON document, as text or UTF-8 bytes, without a line break."""

    def __init__(self, out: Path, flush_size: int = 500, partition: int = PARTITION) -> None:
        if flush_size < 1:
            raise ValueError("flush_size must be at least 1")
        self.out = Path(out)
        self.flush_size = flush_size
        self.partition = partition
        self._next: dict[str, int] = {}
        self.events: Counter[str] = Counter()  # records written by this sink, per topic
        self.files_written = 0
        self.temp_files_removed = 0

    def topic_dir(self, topic: str) -> Path:
        return self.out / "topics" / topic / f"partition={self.partition}"

    # -- recovery ---------------------------------------------------------------------------
    def recover(self, topic: str) -> int:
        """Remove the topic's leftover temporary files; return (and remember) its next offset."""
        folder = self.topic_dir(topic)
        next_offset = 0
        if folder.is_dir():
            last: tuple[int, Path] | None = None
            for entry in folder.iterdir():
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    entry.unlink(missing_ok=True)
                    self.temp_files_removed += 1
                    continue
                match = _DATA_NAME.match(entry.name)
                if not match or match["topic"] != topic:
                    continue
                if int(match["partition"]) != self.partition:
                    continue
                offset = int(match["offset"])
                if last is None or offset > last[0]:
                    last = (offset, entry)
            if last is not None:
                next_offset = last[0] + count_lines(last[1])
        self._next[topic] = next_offset
        return next_offset

    def next_offset(self, topic: str) -> int:
        if topic not in self._next:
            return self.recover(topic)
        return self._next[topic]

    # -- writing ----------------------------------------------------------------------------
    def write_batch(self, records: Iterable[tuple[str, str | bytes]]) -> list[Path]:
        """Write one engine batch: files of at most `flush_size` lines per topic, the last one
        of each topic closed at the end of the batch. Returns the final paths, in write order.
        When this returns, every file is on disk under its final name."""
        by_topic: dict[str, list[str | bytes]] = {}
        for topic, value in records:
            by_topic.setdefault(topic, []).append(value)
        written: list[Path] = []
        folders: dict[Path, bool] = {}  # folder -> created by this batch
        for topic, values in by_topic.items():
            folder = self.topic_dir(topic)
            offset = self.next_offset(topic)
            folders[folder] = not folder.is_dir()
            folder.mkdir(parents=True, exist_ok=True)
            for start in range(0, len(values), self.flush_size):
                chunk = values[start : start + self.flush_size]
                written.append(self._write_file(folder, file_name(topic, offset), chunk))
                offset += len(chunk)
                self._next[topic] = offset
                self.events[topic] += len(chunk)
        for folder, created in folders.items():
            _fsync_dir(folder, with_parents=created)
        self.files_written += len(written)
        return written

    @staticmethod
    def _write_file(folder: Path, name: str, values: list[str | bytes]) -> Path:
        final = folder / name
        temp = folder / temp_name(name)
        data = b"\n".join(v if isinstance(v, bytes) else v.encode("utf-8") for v in values) + b"\n"
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
