"""Landing layouts: every common sink's folders and file names, configured per source, read with
exact partitions, offsets and line numbers; names a layout cannot explain are reported as
rejects (file, line 0, reason), never skipped and never guessed at.

The names are the sinks' own (see layout.py for where each comes from): Confluent's S3 sink
(`topics.dir`, Default/Field/TimeBased partitioners, `.json`, `.json.gz`, `.gz.parquet`),
Aiven's (`file.name.template`, gzip by default), Lenses stream-reactor's (PARTITIONBY folders,
`<topic>(<partition>_<last offset>).json`; without PARTITIONBY `<topic>/<partition>/<last
offset>[_<ts>_<ts>].json`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lakehouse.bronze.decode import decode_changes
from cdc_lakehouse.bronze.landing import list_landing_files, read_landing_lines
from cdc_lakehouse.bronze.layout import Layout, TopicFiles
from cdc_lakehouse.bronze.spec import TableSpec
from cdc_lakehouse.tables.registry import RegistryError, load_source

TOPIC = "shop.public.orders"

T = TOPIC
AIVEN_FOLDERS = {
    "sink": "aiven",
    "prefix": "cdc/",
    "file_name_template": "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}.json",
}
AIVEN_BY_YEAR = {
    "sink": "aiven",
    "file_name_template": "{{timestamp:unit=yyyy}}/{{topic}}-{{partition}}-{{start_offset}}",
}
RAW = {"sink": "confluent", "topics_dir": "cdc/raw"}
LENSES = {"sink": "lenses", "prefix": "outbox"}
ORDER = "outbox/customer_id=ALFKI/order_id=10248"
CUSTOM = {"sink": "custom", "patterns": ["exports/{topic}/p{partition}/{offset}.*"]}
NOT_CONFLUENT = "file name does not follow the confluent layout"

# (layout setting, path below the root, (partition, offset, offset is the last) | problem | None)
CASES: list[tuple[Any, str, tuple | str | None]] = [
    (None, f"topics/{T}/partition=0/{T}+0+0000000010.json", (0, 10, False)),
    (None, f"topics/{T}/country=PT/{T}+2+0000000007.json.gz", (2, 7, False)),
    (None, f"topics/{T}/year=2024/month=02/day=29/hour=13/{T}+1+0000000003.json", (1, 3, False)),
    (None, f"topics/{T}/country=PT/{T}+2+0000000007.gz.parquet", (2, 7, False)),
    (None, f"topics/{T}/partition=2/{T}+2+0000000007.avro", (2, 7, False)),
    (None, f"topics/{T}/partition=2/{T}+2+0000000007.csv", "format .csv is not read"),
    (None, f"topics/{T}/partition=0/notes.txt", NOT_CONFLUENT),
    (None, f"topics/{T}/partition=0/{T}+0+0000000010.json.tmp", None),  # being written
    (None, f"topics/{T}/_temporary/{T}+0+0000000010.json", None),
    (None, f"topics/{T}_archive/{T}_archive+0+0000000000.json", None),  # another topic
    (RAW, f"cdc/raw/{T}/partition=0/{T}+0+0000000042.json", (0, 42, False)),
    (RAW, f"topics/{T}/partition=0/{T}+0+0000000042.json", None),
    ("aiven", f"{T}-0-00000000000000000042.gz", (0, 42, False)),
    ("aiven", f"{T}-3-17", (3, 17, False)),
    ("aiven", "shop.public.customers-0-5.gz", None),  # another topic, same folder
    ("aiven", "README", "file name does not follow the aiven layout"),
    (AIVEN_FOLDERS, f"cdc/{T}/0000000001/00000000000000000099.json", (1, 99, False)),
    (AIVEN_BY_YEAR, f"2024/{T}-0-5.gz", (0, 5, False)),
    (LENSES, f"{ORDER}/{T}(0_000000000123).json", (0, 123, True)),
    (LENSES, f"{ORDER}/other(0_000000000123).json", None),
    (LENSES, f"outbox/{T}/2/000000000050_1700000000000_1700000001000.json", (2, 50, True)),
    (LENSES, f"outbox/{T}/2/000000000051.json", (2, 51, True)),
    (LENSES, f"{ORDER}/manifest.json", "file name does not follow the lenses layout"),
    (CUSTOM, f"exports/{T}/p4/000001.jsonl", (4, 1, False)),
    (CUSTOM, f"exports/{T}/p4/x.jsonl", "file name does not follow the custom layout"),
]


@pytest.mark.parametrize(("setting", "relative", "expected"), CASES)
def test_each_sink_names_partition_and_offset(setting: Any, relative: str, expected: Any) -> None:
    found = TopicFiles(Layout.from_config(setting), TOPIC).classify(
        f"file:/land/{relative}", relative
    )
    if expected is None:
        assert found is None
    elif isinstance(expected, str):
        assert found is not None and found.problem is not None, found
        assert found.problem.startswith(expected), found.problem
    else:
        assert found is not None and found.problem is None, found
        assert (found.partition, found.offset, found.offset_is_last) == expected


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("kinesis", "layout.sink must be one of"),
        ({"sink": "confluent", "prefix": "x"}, "unknown setting(s) ['prefix']"),
        ({"sink": "custom"}, "set `patterns`"),
        ({"sink": "custom", "pattern": "x/{partition}/{offset}"}, "must contain {topic}"),
        ({"sink": "custom", "pattern": "{topic}/{offset}_{last_offset}"}, "exactly one of"),
        ({"sink": "aiven", "file_name_template": "{{topic}}-{{offset}}"}, "unknown variable"),
    ],
)
def test_layout_settings_are_checked(setting: Any, message: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        Layout.from_config(setting)
    assert message in str(raised.value)


def test_a_bad_layout_in_the_registry_names_its_file(tmp_path: Path) -> None:
    registry = tmp_path / "shop.yml"
    entry = "source: shop\nlanding:\n  topic_prefix: s\n  layout: {}\ntables:\n  o: {{key: [id]}}\n"
    registry.write_text(entry.format("{sink: lenses, topics_dir: x}"))
    with pytest.raises(RegistryError, match=r"shop\.yml.*unknown setting\(s\) \['topics_dir'\]"):
        load_source(registry)
    registry.write_text(entry.format("{sink: lenses, prefix: outbox}"))
    [table] = load_source(registry).tables
    assert table.spec.layout == Layout.from_config({"sink": "lenses", "prefix": "outbox"})
    assert table.cdc_table["layout"] == {"sink": "lenses", "prefix": "outbox"}
    assert table.topic == "s.o"


def envelope(op: str, order_id: int, lsn: int, status: str) -> str:
    after = None if op == "d" else {"order_id": order_id, "status": status}
    before = {"order_id": order_id, "status": None} if op == "d" else None
    source = {"ts_ms": 1_700_000_000_000 + lsn, "txId": lsn, "lsn": lsn}
    return json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": 1})


def write(root: Path, relative: str, lines: list[str]) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(text) if relative.endswith(".gz") else text)


SPEC = {"key": ["order_id"], "columns": {"order_id": "int", "status": "text"}}


def test_lenses_partitioned_files_read_with_exact_offsets(
    spark: SparkSession, tmp_path: Path
) -> None:
    """PARTITIONBY customer_id,order_id: one folder per order, two Kafka partitions whose files
    interleave, each file named after its LAST offset. Every line gets its true offset."""
    events = {  # (partition, offsets) -> events, in offset order
        (0, range(10, 13)): [
            envelope("c", 1, 100, "new"),
            envelope("u", 1, 110, "paid"),
            envelope("u", 1, 130, "shipped"),
        ],
        (1, range(20, 22)): [envelope("c", 2, 105, "new"), envelope("u", 2, 120, "paid")],
        (0, range(13, 14)): [envelope("d", 1, 140, "")],
        (1, range(22, 24)): [envelope("u", 2, 150, "shipped"), envelope("u", 2, 160, "delivered")],
    }  # fmt: skip
    for (partition, offsets), lines in events.items():
        order = json.loads(lines[0])["after"] or json.loads(lines[0])["before"]
        folder = f"outbox/customer_id=C{order['order_id']}/order_id={order['order_id']}"
        write(tmp_path, f"{folder}/{TOPIC}({partition}_{offsets[-1]:012d}).json", lines)
    spec = TableSpec.from_config(
        {"layout": {"sink": "lenses", "prefix": "outbox"}}, {"topic": TOPIC, **SPEC}
    )

    files = list_landing_files(spark, str(tmp_path), TOPIC, spec.layout)
    assert len(files) == 4 and all(f.problem is None for f in files)
    rows = decode_changes(read_landing_lines(spark, files), spec).collect()
    got = sorted((r._cdc_offset, r._cdc_op, r.order_id) for r in rows)
    expected = sorted(
        (
            offset,
            json.loads(line)["op"],
            (json.loads(line)["after"] or json.loads(line)["before"])["order_id"],
        )
        for (_, offsets), lines in events.items()
        for offset, line in zip(offsets, lines, strict=True)
    )
    assert got == expected
    assert all(r._cdc_reject_reason is None for r in rows)
    lines = read_landing_lines(spark, files).collect()
    assert {(r._cdc_partition, r._cdc_offset) for r in lines} == {
        (p, o) for (p, offsets) in events for o in offsets
    }


def test_aiven_files_compressed_or_bare(spark: SparkSession, tmp_path: Path) -> None:
    write(
        tmp_path,
        f"{TOPIC}-0-00000000000000000000.gz",
        [envelope("c", 1, 100, "new"), envelope("u", 1, 110, "paid")],
    )
    write(tmp_path, f"{TOPIC}-0-00000000000000000002", [envelope("u", 1, 120, "shipped")])
    write(tmp_path, "shop.public.customers-0-00000000000000000000.gz", ["{}"])
    spec = TableSpec.from_config({"layout": "aiven"}, {"topic": TOPIC, **SPEC})
    files = list_landing_files(spark, str(tmp_path), TOPIC, spec.layout)
    assert [f.relative for f in files] == [
        f"{TOPIC}-0-00000000000000000000.gz",
        f"{TOPIC}-0-00000000000000000002",
    ]
    rows = decode_changes(read_landing_lines(spark, files), spec).orderBy("_cdc_seq").collect()
    assert [(r.status, r._cdc_offset, r._cdc_line) for r in rows] == [
        ("new", 0, 1),
        ("paid", 1, 2),
        ("shipped", 2, 1),
    ]


def test_unknown_names_and_unread_formats_are_rejects(spark: SparkSession, tmp_path: Path) -> None:
    """Good files decode; a file the layout cannot name, files named Parquet and Avro that are
    not, and a CSV file become one reject each (line 0, the file, the reason); nothing of them
    is read as text."""
    base = f"topics/{TOPIC}/partition=0"
    write(tmp_path, f"{base}/{TOPIC}+0+0000000000.json", [envelope("c", 1, 100, "new")])
    write(tmp_path, f"{base}/orders-export.json", [envelope("c", 9, 90, "lost?")])
    (tmp_path / base / f"{TOPIC}+0+0000000001.snappy.parquet").write_bytes(b"PAR1\x00\x00PAR1")
    (tmp_path / base / f"{TOPIC}+0+0000000002.avro").write_bytes(b"Obj\x01")
    write(tmp_path, f"{base}/{TOPIC}+0+0000000003.csv", ["order_id,status", "5,new"])
    spec = TableSpec.from_config(None, {"topic": TOPIC, **SPEC})
    files = list_landing_files(spark, str(tmp_path), TOPIC, spec.layout)
    rows = decode_changes(read_landing_lines(spark, files), spec).collect()
    good = [(r.order_id, r.status) for r in rows if r._cdc_reject_reason is None]
    assert good == [(1, "new")]
    rejects = sorted(
        (r._cdc_file, r._cdc_line, r._cdc_reject_reason) for r in rows if r._cdc_reject_reason
    )
    assert [(f, line) for f, line, _ in rejects] == [
        (f"{base}/orders-export.json", 0),
        (f"{base}/{TOPIC}+0+0000000001.snappy.parquet", 0),
        (f"{base}/{TOPIC}+0+0000000002.avro", 0),
        (f"{base}/{TOPIC}+0+0000000003.csv", 0),
    ]
    assert rejects[0][2].startswith("file name does not follow the confluent layout")
    assert rejects[1][2].startswith("not a readable Parquet file: "), rejects[1][2]
    assert rejects[2][2].startswith("not a readable Avro file: "), rejects[2][2]
    assert rejects[3][2] == "format .csv is not read (JSON lines, Parquet and Avro only)"
