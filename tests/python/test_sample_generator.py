"""The sample generator: deterministic, Debezium-faithful, and consistent with its expected files.

The reference applier here is a test oracle for the generator only (pure Python, no Spark):
order change events by LSN, last event per key wins, deletes remove, the TOAST placeholder keeps
the previous value; suppliers (JDBC polls) by (last_update, supplier_id).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_lakehouse import spec
from cdc_lakehouse.sample import generate as gen
from cdc_lakehouse.sample.northwind import (
    CUSTOMERS,
    DDL,
    MID_STREAM_DDL,
    ORDER_DETAILS,
    ORDERS,
    PRODUCTS,
    SUPPLIERS,
    TABLES,
    TOAST_PLACEHOLDER,
    Column,
    Table,
    canonical_value,
)

SEED = 7
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "debezium-samples"
FILE_NAME = re.compile(r"^(?P<topic>.+)\+0\+(?P<offset>\d{10})\.json$")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample")
    gen.generate(out, SEED)
    return out


# --- reading the generated files ------------------------------------------------------------------


def topic_files(root: Path, table: Table) -> list[Path]:
    folder = root / "landing" / "topics" / table.topic / "partition=0"
    return sorted(folder.iterdir(), key=lambda p: int(FILE_NAME.match(p.name)["offset"]))


def topic_values(root: Path, table: Table) -> list[dict[str, Any]]:
    """Record values in Kafka offset order."""
    return [
        json.loads(line)
        for path in topic_files(root, table)
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def envelopes(root: Path, table: Table) -> list[dict[str, Any]]:
    values = topic_values(root, table)
    return [v["payload"] for v in values] if table.schemas_enable else values


def expected(root: Path, table: Table) -> list[dict[str, Any]]:
    lines = (root / "expected" / f"{table.name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# --- the reference applier (test oracle) ----------------------------------------------------------


def decode(pg_type: str, value: Any) -> Any:
    """Debezium precise/adaptive encodings back to Python values (ISO strings stay strings)."""
    if value is None or value == TOAST_PLACEHOLDER:
        return value
    if pg_type.endswith("[]"):
        return [decode(pg_type[:-2], v) for v in value]
    if pg_type.startswith("numeric"):
        scale = int(pg_type.split(",")[1].rstrip(")"))
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return Decimal(unscaled).scaleb(-scale)
    if pg_type == "date":
        return date(1970, 1, 1) + timedelta(days=value)
    if pg_type == "timestamp":
        return datetime(1970, 1, 1) + timedelta(microseconds=value)
    return value


def change_events(root: Path, table: Table) -> list[tuple[int, int, str, dict[str, Any]]]:
    """(lsn, offset, op, row image) for every record of a Debezium topic."""
    events = []
    for offset, value in enumerate(envelopes(root, table)):
        if table.shape == "flattened":
            row = {k: v for k, v in value.items() if not k.startswith("__")}
            events.append((value["__lsn"], offset, value["__op"], row))
        else:
            row = value["before"] if value["op"] == "d" else value["after"]
            events.append((value["source"]["lsn"], offset, value["op"], row))
    return events


def apply_changes(table: Table, events: list[tuple[int, int, str, dict[str, Any]]]) -> dict:
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    removed_at: dict[int, dict[str, Any]] = {}  # a key change: delete and create share the LSN
    for lsn, _, op, row in sorted(events, key=lambda e: (e[0], e[1])):
        key = table.key_of(row)
        if op == "d":
            old = state.pop(key, None)
            if old is not None:
                removed_at[lsn] = old
            continue
        previous = state.get(key) or removed_at.get(lsn, {})
        state[key] = {c: previous.get(c) if v == TOAST_PLACEHOLDER else v for c, v in row.items()}
    return state


def apply_polls(table: Table, rows: list[dict[str, Any]]) -> dict:
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: tuple(r[c] for c in table.order_by)):
        state[table.key_of(row)] = row
    return state


def canonical(table: Table, row: dict[str, Any], millis: bool = False) -> dict[str, Any]:
    out = {}
    for column in table.columns:
        value = row.get(column.name)
        if millis and column.pg_type == "timestamp" and value is not None:
            value = datetime(1970, 1, 1) + timedelta(milliseconds=value)
        else:
            value = decode(column.pg_type, value)
        out[column.name] = canonical_value(column.pg_type, value)
    return out


def replayed_state(root: Path, table: Table) -> list[dict[str, Any]]:
    if table.shape == "jdbc":
        state = apply_polls(table, topic_values(root, table))
    else:
        state = apply_changes(table, change_events(root, table))
    return [canonical(table, state[k], millis=table.shape == "jdbc") for k in sorted(state)]


# --- determinism and layout -----------------------------------------------------------------------


def test_same_seed_gives_identical_bytes(sample: Path, tmp_path: Path) -> None:
    gen.generate(tmp_path, SEED)
    assert tree(tmp_path) == tree(sample)


def test_committed_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    """Run as the CLI, in another process with another hash seed: no set-order dependence."""
    command = [sys.executable, "-m", "cdc_lakehouse.sample.generate", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    subprocess.run(
        [*command, "--seed", str(SEED)], cwd=REPO, env=env, check=True, capture_output=True
    )
    assert tree(tmp_path) == tree(REPO / "sample")


def test_another_seed_gives_other_data(sample: Path, tmp_path: Path) -> None:
    gen.generate(tmp_path, SEED + 1)
    assert expected(tmp_path, CUSTOMERS) != expected(sample, CUSTOMERS)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_files_are_named_by_their_first_offset(sample: Path, table: Table) -> None:
    files = topic_files(sample, table)
    assert len(files) >= 2
    next_offset = 0
    for path in files:
        match = FILE_NAME.match(path.name)
        assert match and match["topic"] == table.topic
        assert int(match["offset"]) == next_offset
        lines = path.read_text(encoding="utf-8").splitlines()
        assert 0 < len(lines) <= gen.FLUSH_SIZE
        assert all(line.startswith("{") for line in lines)  # no tombstones
        next_offset += len(lines)


def test_sample_size_stays_small(sample: Path) -> None:
    landing = sum(p.stat().st_size for p in (sample / "landing").rglob("*.json"))
    assert landing < 3 * 1024 * 1024
    events = sum(len(topic_values(sample, t)) for t in TABLES)
    assert 2000 <= events <= 3200


# --- the expected files ---------------------------------------------------------------------------


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_reference_applier_reproduces_expected(sample: Path, table: Table) -> None:
    assert replayed_state(sample, table) == expected(sample, table)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_expected_rows_are_sorted_and_complete(sample: Path, table: Table) -> None:
    rows = expected(sample, table)
    keys = [tuple(r[k] for k in table.key) for r in rows]
    assert keys == sorted(set(keys))
    assert all(list(r) == list(table.column_names) for r in rows)
    assert TOAST_PLACEHOLDER not in json.dumps(rows)


def test_expected_values_cover_the_edge_cases(sample: Path) -> None:
    customers = expected(sample, CUSTOMERS)
    limits = [c["credit_limit"] for c in customers]
    assert None in limits and "0.00" in limits and "1234567.89" in limits
    tags = [c["tags"] for c in customers]
    assert [] in tags and None in tags
    text = json.dumps(customers, ensure_ascii=False)
    assert "é" in text and "ü" in text and "日本" in text
    assert all(2500 <= len(c["notes"].encode()) <= 4096 for c in customers)
    tiers = [c["loyalty_tier"] for c in customers]
    assert None in tiers and any(tiers)
    assert any(o["shipped_at"] is None for o in expected(sample, ORDERS))
    prices = {p["unit_price"] for p in expected(sample, PRODUCTS)}
    assert {"0.00", "1.28", "327.68"} <= prices
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", customers[0]["created_at"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}", customers[0]["updated_at"])


def test_decimals_need_several_bytes(sample: Path) -> None:
    amounts = [
        v["after"]["credit_limit"]
        for v in envelopes(sample, CUSTOMERS)
        if v["after"] and v["after"]["credit_limit"]
    ]
    assert max(len(base64.b64decode(a)) for a in amounts) >= 4
    prices = {v["after"]["unit_price"] for v in envelopes(sample, PRODUCTS) if v["op"] == "r"}
    assert {"AA==", "AIA=", "AIAA"} <= prices  # 0.00, 1.28 (0x0080), 327.68 (0x008000)


# --- Debezium semantics ---------------------------------------------------------------------------


def debezium_envelopes(root: Path) -> list[dict[str, Any]]:
    return [v for t in (CUSTOMERS, PRODUCTS, ORDERS) for v in envelopes(root, t)]


def test_snapshot_shares_one_lsn_and_transaction(sample: Path) -> None:
    snapshot = [v for v in debezium_envelopes(sample) if v["op"] == "r"]
    assert len({(v["source"]["lsn"], v["source"]["txId"]) for v in snapshot}) == 1
    lsn = snapshot[0]["source"]["lsn"]
    assert {v["source"]["sequence"] for v in snapshot} == {f'[null,"{lsn}"]'}
    markers = Counter(v["source"]["snapshot"] for v in snapshot)
    assert markers["first"] == 1 and markers["first_in_data_collection"] == 2
    assert markers["last_in_data_collection"] == 3 and markers["last"] == 0  # last: order_details
    flat = [v for v in envelopes(sample, ORDER_DETAILS) if v["__op"] == "r"]
    assert {v["__lsn"] for v in flat} == {lsn}
    streamed = [v["source"]["lsn"] for v in debezium_envelopes(sample) if v["op"] != "r"]
    assert min(streamed) > lsn


def streamed_transactions(root: Path) -> list[list[dict[str, Any]]]:
    """Streamed envelope events grouped by txId, replayed duplicates dropped, by first LSN."""
    by_tx: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for v in debezium_envelopes(root):
        if v["op"] != "r":
            identity = json.dumps([v["op"], v["before"], v["after"], v["source"]])
            by_tx[v["source"]["txId"]][identity] = v
    transactions = [sorted(ev.values(), key=lambda v: v["source"]["lsn"]) for ev in by_tx.values()]
    return sorted(transactions, key=lambda tx: tx[0]["source"]["lsn"])


def test_transactions_share_commit_time_and_chain_by_lsn(sample: Path) -> None:
    transactions = streamed_transactions(sample)
    assert len(transactions) > 200
    previous_max = None
    for number, events in enumerate(transactions):
        sources = [v["source"] for v in events]
        assert len({s["ts_ms"] for s in sources}) == 1  # commit time
        sequences = [json.loads(s["sequence"]) for s in sources]
        assert all(seq[1] == str(s["lsn"]) for seq, s in zip(sequences, sources, strict=True))
        assert len({seq[0] for seq in sequences}) == 1
        last_commit = sequences[0][0]
        if number == 0:
            assert last_commit is None
        else:
            assert previous_max < int(last_commit) < sources[0]["lsn"]
        previous_max = sources[-1]["lsn"]
        shared = [lsn for lsn, n in Counter(s["lsn"] for s in sources).items() if n > 1]
        for lsn in shared:  # only a key change puts two events at one LSN
            pair = [v for v in events if v["source"]["lsn"] == lsn]
            assert [v["op"] for v in pair] == ["d", "c"]
            assert {v["source"]["table"] for v in pair} == {"customers"}
    assert sum(len(tx) > 1 and len({v["source"]["table"] for v in tx}) > 1 for tx in transactions)


def test_order_lines_each_have_their_own_lsn(sample: Path) -> None:
    lsns = Counter(v["__lsn"] for v in envelopes(sample, ORDER_DETAILS) if v["__op"] != "r")
    assert lsns and max(lsns.values()) == 1


def test_key_change_is_a_delete_and_create_at_one_lsn(sample: Path) -> None:
    events = envelopes(sample, CUSTOMERS)
    creates = {(v["source"]["lsn"], v["source"]["txId"]): v for v in events if v["op"] == "c"}
    pairs = [
        (d, creates[(d["source"]["lsn"], d["source"]["txId"])])
        for d in events
        if d["op"] == "d" and (d["source"]["lsn"], d["source"]["txId"]) in creates
    ]
    assert len(pairs) == 1
    delete, create = pairs[0]
    old_id, new_id = delete["before"]["customer_id"], create["after"]["customer_id"]
    assert old_id != new_id
    assert [k for k, v in delete["before"].items() if v is not None] == ["customer_id"]
    assert create["after"]["notes"] == TOAST_PLACEHOLDER
    known = [
        v["after"]["notes"]
        for v in events
        if v["after"] and v["after"]["customer_id"] in (old_id, new_id)
        if v["after"]["notes"] != TOAST_PLACEHOLDER
    ]
    final = {c["customer_id"]: c for c in expected(sample, CUSTOMERS)}
    assert old_id not in final and final[new_id]["notes"] == known[-1]
    cascaded = [
        v for v in envelopes(sample, ORDERS) if v["source"]["txId"] == delete["source"]["txId"]
    ]
    assert len(cascaded) >= 2
    assert all(v["after"]["customer_id"] == new_id for v in cascaded)
    assert all(v["source"]["lsn"] > delete["source"]["lsn"] for v in cascaded)


def test_updates_leaving_toasted_columns_alone_carry_the_placeholder(sample: Path) -> None:
    customers = [v for v in envelopes(sample, CUSTOMERS) if v["op"] == "u"]
    assert all(v["before"] is None for v in customers)  # REPLICA IDENTITY DEFAULT
    notes = Counter(v["after"]["notes"] == TOAST_PLACEHOLDER for v in customers)
    assert notes[True] >= 10 and notes[False] >= 1  # mostly left alone, sometimes rewritten
    products = [v for v in envelopes(sample, PRODUCTS) if v["op"] == "u"]
    assert sum(v["after"]["description"] == TOAST_PLACEHOLDER for v in products) >= 50
    short = [v for v in products if v["after"]["product_id"] == 1]
    assert short and all(v["after"]["description"] != TOAST_PLACEHOLDER for v in short)
    snapshot = [v for v in debezium_envelopes(sample) if v["op"] == "r"]
    assert TOAST_PLACEHOLDER not in json.dumps(snapshot)


def test_deletes_carry_only_the_key(sample: Path) -> None:
    for table in (CUSTOMERS, PRODUCTS, ORDERS):
        deletes = [v for v in envelopes(sample, table) if v["op"] == "d"]
        assert deletes, table.name
        for v in deletes:
            assert v["after"] is None
            assert [k for k, x in v["before"].items() if x is not None] == list(table.key)
    rows = [v for v in envelopes(sample, ORDER_DETAILS) if v["__op"] == "d"]
    assert rows and all(v["__deleted"] == "true" and v["quantity"] is None for v in rows)


def test_cancelled_orders_go_with_their_lines(sample: Path) -> None:
    deleted_orders = {
        v["before"]["order_id"]: v["source"]["txId"]
        for v in envelopes(sample, ORDERS)
        if v["op"] == "d"
    }
    lines = [v for v in envelopes(sample, ORDER_DETAILS) if v["__op"] == "d"]
    assert {v["order_id"] for v in lines} >= set(deleted_orders)


@pytest.mark.parametrize("table", [CUSTOMERS, ORDER_DETAILS], ids=lambda t: t.name)
def test_a_key_is_deleted_and_inserted_again(sample: Path, table: Table) -> None:
    history: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for _, _, op, row in change_events(sample, table):
        history[table.key_of(row)].append(op)
    assert any("dc" in "".join(ops) for ops in history.values())


def test_customers_schema_gains_the_added_column(sample: Path) -> None:
    versions = []
    for value in topic_values(sample, CUSTOMERS):
        after = value["schema"]["fields"][1]
        names = tuple(f["field"] for f in after["fields"])
        row = value["payload"]["after"] or value["payload"]["before"]
        assert tuple(row) == names
        if not versions or versions[-1] != names:
            versions.append(names)
    initial = tuple(c.name for c in CUSTOMERS.initial_columns)
    assert versions == [initial, CUSTOMERS.column_names]
    field = value["schema"]["fields"][1]["fields"][-1]
    assert field == {"type": "string", "optional": True, "field": "loyalty_tier"}


def test_replay_after_restart_repeats_the_last_orders_events(sample: Path) -> None:
    values = envelopes(sample, ORDERS)
    seen: dict[str, int] = {}
    repeats = []
    for offset, v in enumerate(values):
        identity = json.dumps([v["before"], v["after"], v["source"]])
        if identity in seen:
            repeats.append((seen[identity], offset))
        seen.setdefault(identity, offset)
    assert len(repeats) >= 25
    firsts, seconds = zip(*repeats, strict=True)
    assert list(seconds) == list(range(seconds[0], seconds[0] + len(repeats)))  # one run
    assert list(firsts) == list(range(firsts[0], firsts[0] + len(repeats)))
    assert seconds[0] == firsts[-1] + 1  # right after the originals: nothing else in between
    assert all(values[b]["ts_ms"] > values[a]["ts_ms"] for a, b in repeats)
    starts = [int(FILE_NAME.match(p.name)["offset"]) for p in topic_files(sample, ORDERS)]
    assert max(s for s in starts if s <= seconds[0]) > 0  # in a later file, not the first
    for table in (CUSTOMERS, PRODUCTS):
        identities = [
            json.dumps([v["before"], v["after"], v["source"]]) for v in envelopes(sample, table)
        ]
        assert len(identities) == len(set(identities)), table.name


def test_suppliers_are_polled_rows(sample: Path) -> None:
    polls = [
        [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
        for p in topic_files(sample, SUPPLIERS)
    ]
    assert len(polls) == 3
    assert sorted(r["supplier_id"] for r in polls[0]) == list(range(1, 41))
    for rows in polls:
        assert all(list(r) == list(SUPPLIERS.column_names) for r in rows)
        order = [(r["last_update"], r["supplier_id"]) for r in rows]
        assert order == sorted(order)
    later = [r for rows in polls[1:] for r in rows]
    stamps = Counter(r["last_update"] for r in later)
    assert any(n >= 2 for n in stamps.values())  # one statement, one millisecond, two rows
    seen = Counter(r["supplier_id"] for rows in polls for r in rows)
    assert max(seen.values()) >= 3


# --- fidelity to real Debezium output -------------------------------------------------------------

T_TYPES = Table(
    name="t_types",
    columns=(
        Column("id", "int", nullable=False),
        Column("amount", "numeric(12,2)"),
        Column("d", "date"),
        Column("ts", "timestamp"),
        Column("tstz", "timestamptz"),
        Column("flag", "boolean"),
        Column("note", "text"),
        Column("doc", "jsonb"),
        Column("uid", "uuid"),
        Column("bin", "bytea"),
        Column("tags", "text[]"),
        Column("big", "text", external=True),
    ),
    key=("id",),
    topic="dbz.public.t_types",
    shape="envelope",
    schemas_enable=True,
)


def t_types_row(row_id: int, note: str, uid: str, big: str) -> dict[str, Any]:
    """The rows of the README scenario of shared/debezium-samples."""
    if row_id == 1:
        return {
            "id": 1, "amount": Decimal("12345.67"), "d": date(2024, 2, 29),
            "ts": datetime(2024, 2, 29, 13, 14, 15, 123456),
            "tstz": datetime(2024, 2, 29, 11, 14, 15, 123456, tzinfo=UTC), "flag": True,
            "note": note, "doc": {"a": 1, "b": [1, 2]}, "uid": uid, "bin": b"\xde\xad\xbe\xef",
            "tags": ["x", "y"], "big": big,
        }  # fmt: skip
    return {
        "id": row_id, "amount": Decimal("-0.50"), "d": date(1970, 1, 1), "ts": datetime(2000, 1, 1),
        "tstz": datetime(2000, 1, 1, tzinfo=UTC), "flag": False, "note": note, "doc": [],
        "uid": uid, "bin": b"\x00", "tags": [], "big": big,
    }  # fmt: skip


def sample_change(op: str, before: Any, after: Any, lsn: int, source_us: int, **kw: Any) -> Any:
    return gen.Change(
        table=kw.pop("table", T_TYPES),
        op=op,
        before=before,
        after=after,
        columns=T_TYPES.column_names,
        lsn=lsn,
        source_us=source_us,
        **kw,
    )


def real_records(name: str) -> list[dict[str, Any]]:
    if not SAMPLES.is_dir():
        pytest.skip("shared/debezium-samples is not beside the repository")
    records = [json.loads(line) for line in (SAMPLES / name).read_text().splitlines()]
    return [r for r in records if r["value"] and '"cdc_marker"' not in r["value"]]


def big_text(records: list[dict[str, Any]]) -> str:
    for r in records:
        value = json.loads(r["value"])
        row = value.get("payload", value).get("after", value) or {}
        if len(row.get("big") or "") > 100:
            return row["big"]
    raise AssertionError("no big value")


def rebuilt_row(image: dict[str, Any] | None, big: str) -> dict[str, Any] | None:
    """The scenario row an image shows, keeping only its note and uid (random per run)."""
    if image is None:
        return None
    if image["amount"] is None:  # RI DEFAULT delete: key only
        return {c: image[c] if c == "id" else None for c in T_TYPES.column_names}
    return t_types_row(image["id"], image["note"], image["uid"], big)


def last_commit_lsn(source: dict[str, Any]) -> int | None:
    previous = json.loads(source["sequence"])[0]
    return None if previous is None else int(previous)


@pytest.mark.parametrize("name", ["default.jsonl", "nosch.jsonl"])
def test_envelopes_match_real_debezium_byte_for_byte(name: str) -> None:
    records = real_records(name)
    big = big_text(records)
    table = dataclasses.replace(T_TYPES, schemas_enable=name == "default.jsonl")
    for record in records:
        value = json.loads(record["value"])
        env = value.get("payload", value)
        source = env["source"]
        after = env["after"]
        change = sample_change(
            env["op"],
            rebuilt_row(env["before"], big),
            rebuilt_row(after, big),
            source["lsn"],
            source["ts_us"],
            table=table,
            txid=source["txId"],
            prev_commit_lsn=last_commit_lsn(source),
            snapshot=source["snapshot"],
            unchanged_toast=("big",) if after and after["big"] == TOAST_PLACEHOLDER else (),
        )
        connector = gen.Connector(name="dbz", db="postgres")
        assert gen.envelope_value(change, env["ts_ns"], connector) == record["value"]


def test_flattened_rows_match_real_debezium_byte_for_byte() -> None:
    records = real_records("unwrap_rw.jsonl")
    big = big_text(records)
    for record in records:
        value = json.loads(record["value"])
        image = {c: value[c] for c in T_TYPES.column_names}
        deleted = value["__op"] == "d"
        change = sample_change(
            value["__op"],
            rebuilt_row(image, big) if deleted else None,
            None if deleted else rebuilt_row(image, big),
            value["__lsn"],
            value["__source_ts_ms"] * 1000,
            txid=0,
            prev_commit_lsn=None,
            unchanged_toast=("big",) if value["big"] == TOAST_PLACEHOLDER else (),
        )
        assert gen.flattened_value(change) == record["value"]


# --- northwind definitions and canonical values ---------------------------------------------------


def test_column_types_are_valid_declared_types() -> None:
    for table in TABLES:
        for column in table.columns:
            spec.spark_type(column.pg_type)


def test_ddl_creates_every_initial_column() -> None:
    for table in TABLES:
        assert f"CREATE TABLE {table.name} (" in DDL
        for column in table.initial_columns:
            assert f"    {column.name} {column.pg_type}" in DDL
    assert "loyalty_tier" not in DDL
    assert MID_STREAM_DDL.strip() == "ALTER TABLE customers ADD COLUMN loyalty_tier text;"


@pytest.mark.parametrize(
    ("pg_type", "value", "canonical"),
    [
        ("numeric(10,2)", Decimal("12.5"), "12.50"),
        ("numeric(10,2)", "0", "0.00"),
        ("numeric(10,2)", 3, "3.00"),
        ("numeric(4,2)", 0.1, "0.10"),
        ("numeric(4,2)", "-0.004", "0.00"),
        ("numeric", "1.230", "1.230"),
        ("date", date(2024, 2, 29), "2024-02-29"),
        ("timestamp", datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05.000000"),
        ("timestamptz", "2024-01-02T03:04:05.5+02:00", "2024-01-02T01:04:05.500000Z"),
        ("timestamptz", datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02T03:04:05.000006Z"),
        (
            "jsonb",
            '{"b": [1, {"d": 1, "c": 2}], "a": null}',
            {"a": None, "b": [1, {"c": 2, "d": 1}]},
        ),
        ("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ("text[]", ("x", "日本"), ["x", "日本"]),
        ("boolean", "t", True),
        ("int", None, None),
    ],
)
def test_canonical_value(pg_type: str, value: Any, canonical: Any) -> None:
    assert canonical_value(pg_type, value) == canonical


def test_canonical_value_rejects_unknown_types() -> None:
    with pytest.raises(ValueError):
        canonical_value("point", "(1,2)")
