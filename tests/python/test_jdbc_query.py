"""Query-based capture in query mode with single message transforms, end to end against a real
PostgreSQL, as the reference Pagila-on-RDS deployment runs it: the JDBC source connector polls a
join (`address` + `city` + `country`) in `timestamp+incrementing` mode (`last_update`,
`address_id`), `ReplaceField$Value` renames `district` to `state_province`, `InsertField$Value`
adds a static `source_system`; a complete extract of the same query after each poll gives the
deletes (extract diff). A project registers the topic as a user would (tables/*.yml) and one
`dbt build` must leave silver equal to what the query returns from PostgreSQL after the same
transforms: the oracle of a query-mode table. The same build loads a query-mode topic landed as
Parquet and the same records landed as Avro (the fixtures of test_parquet_landing.py): their
silver tables must hold the latest version of each key, and equal each other.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from dbt_scratch_project import make_project
from lakehouse import landing_files, read_export, record_lines, run_dbt

from cdc_lakehouse.capture.transforms import (
    InsertField,
    ReplaceField,
    apply_transforms,
    connect_transforms,
)
from devstack.pg import TemporaryPostgres
from sample.generator import pagila

pytestmark = pytest.mark.system

TOPIC = pagila.TOPIC
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAYMENT = "pagila.payment"
PAYMENT_COLUMNS = {
    "payment_id": "int",
    "customer_id": "int",
    "clerk_id": "int",
    "amount": "numeric(5,2)",
    "balance": "numeric(25,4)",
    "payment_date": "timestamptz",
    "due_date": "date",
    "refunded": "boolean",
    "rate": "double precision",
    "receipt": "bytea",
    "country": "text",
    "last_update": "timestamp",
    "source": "text",
    "note": "text",
}

# The bundled sample's Pagila schema (its trigger included), the connector's query and its
# properties (sample/generator/pagila.py), with a few rows of this test's own.
PAGILA = (
    pagila.DDL
    + """
insert into country (country) values ('Portugal'), ('Japan');
insert into city (city, country_id) values ('Porto', 1), ('Braga', 1), ('Osaka', 2);
insert into address (address, district, city_id, postal_code) values
    ('1 Rua Nova', 'Norte', 1, '4000'),
    ('2 Rua Velha', 'Norte', 1, null),
    ('3 Avenida', 'Minho', 2, '4700'),
    ('4 Chome', 'Kansai', 3, '530'),
    ('5 Chome', 'Kansai', 3, '531');
"""
)
QUERY = pagila.QUERY
CONNECTOR = pagila.CONNECTOR

COLUMNS = {
    "address_id": "int",
    "address": "text",
    "state_province": "text",
    "postal_code": "text",
    "city": "text",
    "country": "text",
    "last_update": "timestamp",
    "source_system": "text",
}


def expected(pg: TemporaryPostgres) -> dict[int, dict[str, Any]]:
    """The query's rows now, through the same transforms: what silver must hold."""
    transforms = connect_transforms(CONNECTOR)
    with pg.connect() as conn:
        cursor = conn.execute(QUERY)
        names = [d.name for d in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    out = {}
    for row in rows:
        # The connector's Connect Timestamp holds milliseconds.
        stamp: datetime = row["last_update"]
        row["last_update"] = stamp.replace(microsecond=stamp.microsecond // 1000 * 1000)
        out[row["address_id"]] = apply_transforms(transforms, row, TOPIC)
    return out


def lake_value(column: str, value: Any) -> Any:
    if column == "last_update" and value is not None:
        return datetime.fromisoformat(value.removesuffix("Z"))
    return value


def test_query_mode_parquet_and_avro_landings_build_to_their_sources(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    with TemporaryPostgres() as pg:
        with pg.connect() as conn:
            conn.execute(PAGILA)
        source = pagila.source(
            pg.conninfo(), landing, tmp_path / "state" / "address.json", partition_field=None
        )
        assert source.poll() == 5
        source.extract(landing / "extracts" / TOPIC)
        with pg.connect() as conn:
            conn.execute("update city set city = 'Oporto' where city = 'Porto'")  # 2 addresses
            conn.execute("update address set district = 'Douro' where address_id = 3")
            conn.execute("delete from address where address_id = 4")
            conn.execute(
                "insert into address (address, district, city_id) values ('6 Dori', 'Kansai', 3)"
            )
        assert source.poll() == 4  # the renamed city's 2 addresses, address 3, address 6
        source.extract(landing / "extracts" / TOPIC)
        truth = expected(pg)

    polled = [f for f in landing_files(landing) if f"/topics/{TOPIC}/" in str(f)]
    first = json.loads(record_lines(polled[0])[0])
    assert list(first) == [
        "address_id", "address", "state_province", "postal_code", "city", "country",
        "last_update", "source_system",
    ]  # fmt: skip
    assert first["source_system"] == "pagila"

    # The Parquet fixture's topic, and the Avro fixture's records under a topic of their own.
    shutil.copytree(
        FIXTURES / "parquet" / "landing" / "topics" / PAYMENT, landing / "topics" / PAYMENT
    )
    avro_topic = f"{PAYMENT}_avro"
    for path in (FIXTURES / "avro" / "landing" / "topics" / PAYMENT).rglob("*.avro"):
        target = (
            landing
            / "topics"
            / avro_topic
            / path.parent.name
            / path.name.replace(PAYMENT, avro_topic)
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    payment = {
        "shape": "jdbc",
        "key": ["payment_id"],
        "order_by": ["last_update", "payment_id"],
        "time_precision_mode": "connect",
        "columns": PAYMENT_COLUMNS,
    }
    project = make_project(
        tmp_path / "project",
        {
            "payment": {"topic": PAYMENT, **payment},
            "payment_avro": {"topic": avro_topic, **payment},
            "address": {
                "topic": TOPIC,
                "shape": "jdbc",
                "key": ["address_id"],
                "order_by": ["last_update", "address_id"],
                "time_precision_mode": "connect",
                "extracts": True,
                "columns": COLUMNS,
            },
        },
    )
    export = tmp_path / "export"
    run_dbt(
        ["build", "--exclude-resource-type", "unit_test"],
        lakehouse=tmp_path / "lakehouse",
        project_dir=project,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export)},
    )
    silver = {
        row["address_id"]: {c: lake_value(c, row[c]) for c in COLUMNS}
        for row in read_export(export, "silver.address")
    }
    assert sorted(silver) == [1, 2, 3, 5, 6]  # 4 deleted: only the extract shows it
    assert silver == truth
    assert silver[1]["city"] == "Oporto" and silver[3]["state_province"] == "Douro"

    parquet = {r["payment_id"]: r for r in read_export(export, "silver.payment")}
    avro = {r["payment_id"]: r for r in read_export(export, "silver.payment_avro")}
    assert sorted(parquet) == [16050, 16051, 16052, 16053]
    latest = parquet[16050]  # the later poll of 16050 (second file) wins
    assert (float(latest["amount"]), latest["note"], latest["refunded"]) == (0.0, "refunded", True)
    assert float(parquet[16053]["amount"]) == -999.99
    columns = list(PAYMENT_COLUMNS)
    assert {k: [r[c] for c in columns] for k, r in avro.items()} == {
        k: [r[c] for c in columns] for k, r in parquet.items()
    }


def test_connect_transforms_follow_kafka_connect() -> None:
    value = {"a": 1, "district": "x", "secret": "s"}
    [replace, insert] = connect_transforms(
        {
            "transforms": "r, i",
            "transforms.r.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
            "transforms.r.exclude": "secret",
            "transforms.r.renames": "district:state_province,a:b",
            "transforms.i.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.i.static.field": "origin!",
            "transforms.i.static.value": "pagila",
            "transforms.i.topic.field": "topic?",
        }
    )
    assert replace == ReplaceField((), ("secret",), {"district": "state_province", "a": "b"})
    assert insert == InsertField("origin", "pagila", "topic")
    assert apply_transforms([replace, insert], value, "t") == {
        "b": 1, "state_province": "x", "topic": "t", "origin": "pagila",
    }  # fmt: skip
    keep = ReplaceField.from_settings("k", {"whitelist": "a,district"})
    assert keep.apply(value, "t") == {"a": 1, "district": "x"}
    with pytest.raises(ValueError, match=r"transform m: type .*TimestampRouter.* not supported"):
        connect_transforms(
            {
                "transforms": "m",
                "transforms.m.type": "org.apache.kafka.connect.transforms.TimestampRouter",
            }
        )
    with pytest.raises(ValueError, match=r"unsupported setting\(s\) offset.field"):
        InsertField.from_settings("o", {"offset.field": "offset"})
    with pytest.raises(ValueError, match="old:new pairs"):
        ReplaceField.from_settings("r", {"renames": "district"})


def test_parquet_landing_is_laid_out_by_field_with_kafka_offsets(tmp_path: Path) -> None:
    """The poller writes Parquet as Confluent's S3 sink does with a FieldPartitioner: a folder
    per `country` value, files named after their first record's offset, offsets continuing
    across polls (kept with the poll offset), Connect's types (INT32, UTC milliseconds)."""
    import pyarrow.parquet as pq

    landing = tmp_path / "landing"
    with TemporaryPostgres() as pg:
        with pg.connect() as conn:
            conn.execute(PAGILA)
        source = pagila.source(pg.conninfo(), landing, tmp_path / "state.json", "country")
        assert source.poll() == 5
        with pg.connect() as conn:
            conn.execute("update address set district = 'Douro' where address_id = 3")
        assert source.poll() == 1
    files = sorted(p.relative_to(landing).as_posix() for p in landing.rglob("*.parquet"))
    assert files == [
        f"topics/{TOPIC}/country=Japan/{TOPIC}+0+0000000003.gz.parquet",
        f"topics/{TOPIC}/country=Portugal/{TOPIC}+0+0000000000.gz.parquet",
        f"topics/{TOPIC}/country=Portugal/{TOPIC}+0+0000000005.gz.parquet",
    ]
    first = pq.read_table(landing / files[1])
    assert first.schema.names == list(COLUMNS)
    assert str(first.schema.field("address_id").type) == "int32"
    assert str(first.schema.field("last_update").type) == "timestamp[ms, tz=UTC]"
    assert pq.ParquetFile(landing / files[1]).metadata.row_group(0).column(0).compression == "GZIP"
    assert first.column("address_id").to_pylist() == [1, 2, 3]
    assert first.column("source_system").to_pylist() == ["pagila"] * 3
    again = pq.read_table(landing / files[2]).to_pylist()
    assert [(r["address_id"], r["state_province"]) for r in again] == [(3, "Douro")]
    assert json.loads((tmp_path / "state.json").read_text())["next_offset"] == 6
