"""The bundled sample's second reference pipeline: query-based CDC of a Pagila-shaped source, as
the Pagila-on-RDS deployment runs it, landed as Parquet.

    python -m sample.generator.pagila --out sample --seed 7     # this part of `make sample`

A JDBC source connector polls a join (`address` + `city` + `country`) in query mode,
`timestamp+incrementing` on (`last_update`, `address_id`), with Kafka Connect's own SMTs
(`ReplaceField$Value renames=district:state_province`, `InsertField$Value static.field=
source_system`); Confluent's S3 sink writes it as Parquet (gzip) with a FieldPartitioner on
`country`: `topics/pagila_jdbc.address/country=<country>/pagila_jdbc.address+0+<offset>.gz.parquet`.
A complete extract of the same query after every poll (the connector in `bulk` mode) lands in
`extracts/pagila_jdbc.address/<as_of>/`: the only way this source's deletes become visible
(extract-diff, docs/reference-pipelines.md, "Deletes for query-based sources").

The capture is the project's imitation of the connector (`cdc_lakehouse.capture.jdbc_source`,
parquet_sink.py): Confluent's JDBC connector and S3 sink are not on Maven Central. The seeded
workload renames cities and countries (every address of theirs lands again: the join's
`last_update` is the greatest of the three rows'), moves addresses between cities and countries
(so a key changes partition folder), edits, adds, deletes and re-adds addresses. `last_update`
is stamped by Pagila's own trigger from PostgreSQL's clock, so its values differ per run; the
rest depends only on the seed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cdc_lakehouse.capture.jdbc_source import JdbcSource
from cdc_lakehouse.capture.transforms import apply_transforms, connect_transforms
from devstack.pg import TemporaryPostgres
from sample.generator.northwind import Column, Table, canonical_row

TOPIC = "pagila_jdbc.address"
PARTITION_FIELD = "country"
PHASES = 3
TRANSACTIONS = 40

DDL = """\
CREATE TABLE country (
    country_id serial PRIMARY KEY,
    country text NOT NULL,
    last_update timestamp NOT NULL DEFAULT localtimestamp
);
CREATE TABLE city (
    city_id serial PRIMARY KEY,
    city text NOT NULL,
    country_id int NOT NULL REFERENCES country,
    last_update timestamp NOT NULL DEFAULT localtimestamp
);
CREATE TABLE address (
    address_id serial PRIMARY KEY,
    address text NOT NULL,
    district text NOT NULL,
    city_id int NOT NULL REFERENCES city,
    postal_code text,
    last_update timestamp NOT NULL DEFAULT localtimestamp
);
-- Pagila's own trigger: every update stamps the row.
CREATE FUNCTION last_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.last_update := clock_timestamp()::timestamp;
    RETURN NEW;
END $$;
CREATE TRIGGER last_updated BEFORE UPDATE ON country FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON city FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON address FOR EACH ROW EXECUTE FUNCTION last_updated();
"""

# The connector's `query`: a change to any of the joined rows moves the joined row's timestamp.
QUERY = """\
select a.address_id, a.address, a.district, a.postal_code, c.city, co.country,
       greatest(a.last_update, c.last_update, co.last_update) as last_update
from address as a
join city as c on c.city_id = a.city_id
join country as co on co.country_id = c.country_id"""

# The connector's properties, as a user writes them (Kafka Connect's own transforms).
CONNECTOR = {
    "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
    "mode": "timestamp+incrementing",
    "query": QUERY,
    "timestamp.column.name": "last_update",
    "incrementing.column.name": "address_id",
    "topic.prefix": TOPIC,
    "transforms": "rename,origin",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "district:state_province",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.origin.static.field": "source_system",
    "transforms.origin.static.value": "pagila",
}
# Confluent's S3 sink for the topic.
SINK = {
    "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat",
    "parquet.codec": "gzip",
    "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
    "partition.field.name": PARTITION_FIELD,
}

# The topic's rows (after the transforms) in the form of northwind.Table, for the canonical
# form and the tests' comparisons.
ADDRESS = Table(
    name="address",
    columns=(
        Column("address_id", "int", nullable=False),
        Column("address", "text", nullable=False),
        Column("state_province", "text", nullable=False),
        Column("postal_code", "text"),
        Column("city", "text", nullable=False),
        Column("country", "text", nullable=False),
        Column("last_update", "timestamp", nullable=False),
        Column("source_system", "text", nullable=False),
    ),
    key=("address_id",),
    topic=TOPIC,
    shape="jdbc",
    order_by=("last_update", "address_id"),
    extracts=True,
)
TABLES = (ADDRESS,)

COUNTRIES = {
    "Portugal": ["Porto", "Braga", "Lisboa"],
    "Japan": ["Osaka", "Kyoto", "Sapporo"],
    "Brazil": ["Recife", "Curitiba", "Manaus"],
    "Canada": ["Halifax", "Regina", "Victoria"],
    "Kenya": ["Nairobi", "Mombasa", "Kisumu"],
}
# Renamed during the workload: spelling changes a source system really makes.
COUNTRY_RENAMES = {"Brazil": "Brasil", "Japan": "Nippon"}
STREETS = ["Rua", "Avenida", "Chome", "Street", "Road", "Lane", "Way"]
DISTRICTS = ["Norte", "Centro", "Sul", "Kansai", "Hokkaido", "Nordeste", "Coast", "Prairies"]
INITIAL_ADDRESSES = 60

ACTIVITIES = (
    ("address_edit", 40),
    ("address_move", 15),
    ("address_new", 15),
    ("address_delete", 10),
    ("address_readd", 5),
    ("city_rename", 10),
    ("country_rename", 5),
)


@dataclass
class PagilaWorkload:
    """The seeded workload: what each transaction does depends only on the seed."""

    seed: int

    def __post_init__(self) -> None:
        self.random = random.Random(f"pagila-{self.seed}")
        self.deleted: list[tuple[int, str, str, int, str | None]] = []
        self.renamed: set[str] = set()

    def create_schema(self, conn) -> None:
        conn.execute(DDL)

    def load_initial(self, conn) -> None:
        for country, cities in COUNTRIES.items():
            (country_id,) = conn.execute(
                "insert into country (country) values (%s) returning country_id", (country,)
            ).fetchone()
            for city in cities:
                conn.execute(
                    "insert into city (city, country_id) values (%s, %s)", (city, country_id)
                )
        for _ in range(INITIAL_ADDRESSES):
            self._new_address(conn)

    def run_phase(self, conn, transactions: int) -> Counter[str]:
        names = [name for name, _ in ACTIVITIES]
        weights = [weight for _, weight in ACTIVITIES]
        done: Counter[str] = Counter()
        for _ in range(transactions):
            activity = self.random.choices(names, weights)[0]
            with conn.transaction():
                if getattr(self, f"_{activity}")(conn):
                    done[activity] += 1
        return done

    # -- activities (each returns whether it changed anything) ---------------------------------
    def _address_ids(self, conn) -> list[int]:
        return [r[0] for r in conn.execute("select address_id from address order by address_id")]

    def _city_ids(self, conn) -> list[int]:
        return [r[0] for r in conn.execute("select city_id from city order by city_id")]

    def _new_address(self, conn) -> bool:
        number = self.random.randint(1, 999)
        street = f"{number} {self.random.choice(STREETS)} {self.random.choice(DISTRICTS)}"
        postal = None if self.random.random() < 0.2 else f"{self.random.randint(1000, 99999)}"
        conn.execute(
            "insert into address (address, district, city_id, postal_code) values (%s, %s, %s, %s)",
            (
                street,
                self.random.choice(DISTRICTS),
                self.random.choice(self._city_ids(conn)),
                postal,
            ),
        )
        return True

    def _address_new(self, conn) -> bool:
        return self._new_address(conn)

    def _address_edit(self, conn) -> bool:
        address_id = self.random.choice(self._address_ids(conn))
        if self.random.random() < 0.5:
            conn.execute(
                "update address set district = %s where address_id = %s",
                (self.random.choice(DISTRICTS), address_id),
            )
        else:
            postal = None if self.random.random() < 0.2 else f"{self.random.randint(1000, 99999)}"
            conn.execute(
                "update address set postal_code = %s where address_id = %s", (postal, address_id)
            )
        return True

    def _address_move(self, conn) -> bool:
        address_id = self.random.choice(self._address_ids(conn))
        conn.execute(
            "update address set city_id = %s where address_id = %s",
            (self.random.choice(self._city_ids(conn)), address_id),
        )
        return True

    def _address_delete(self, conn) -> bool:
        address_id = self.random.choice(self._address_ids(conn))
        row = conn.execute(
            "delete from address where address_id = %s"
            " returning address_id, address, district, city_id, postal_code",
            (address_id,),
        ).fetchone()
        self.deleted.append(row)
        return True

    def _address_readd(self, conn) -> bool:
        """A deleted address comes back under its old key (a restore from an archive)."""
        if not self.deleted:
            return False
        row = self.deleted.pop(self.random.randrange(len(self.deleted)))
        conn.execute(
            "insert into address (address_id, address, district, city_id, postal_code)"
            " values (%s, %s, %s, %s, %s)",
            row,
        )
        return True

    def _city_rename(self, conn) -> bool:
        city_id = self.random.choice(self._city_ids(conn))
        conn.execute(
            "update city set city = case when city like '%% Novo' then left(city, -5)"
            " else city || ' Novo' end where city_id = %s",
            (city_id,),
        )
        return True

    def _country_rename(self, conn) -> bool:
        left = [old for old in COUNTRY_RENAMES if old not in self.renamed]
        if not left:
            return False
        old = self.random.choice(left)
        self.renamed.add(old)
        conn.execute(
            "update country set country = %s where country = %s", (COUNTRY_RENAMES[old], old)
        )
        return True


def source(
    conninfo: str,
    landing: Path,
    state_file: Path,
    partition_field: str | None = PARTITION_FIELD,
) -> JdbcSource:
    """The connector and its sink, as the capture harness runs them (`partition_field` None:
    JSON lines in Confluent's default layout instead of Parquet)."""
    return JdbcSource(
        conninfo=conninfo,
        table="address",
        columns=None,
        order_by=(CONNECTOR["timestamp.column.name"], CONNECTOR["incrementing.column.name"]),
        topic=TOPIC,
        out=landing,
        state_file=state_file,
        query=QUERY,
        transforms=connect_transforms(CONNECTOR),
        parquet_partition_field=partition_field,
    )


def expected_state(conn) -> list[dict[str, Any]]:
    """The query's rows now through the same transforms, canonical, by key: what silver holds."""
    transforms = connect_transforms(CONNECTOR)
    cursor = conn.execute(f"{QUERY}\norder by a.address_id")
    names = [d.name for d in cursor.description or ()]
    state = []
    for values in cursor:
        row = dict(zip(names, values, strict=True))
        stamp: datetime = row["last_update"]  # a Connect Timestamp holds milliseconds
        row["last_update"] = stamp.replace(microsecond=stamp.microsecond // 1000 * 1000)
        state.append(canonical_row(ADDRESS, apply_transforms(transforms, row, TOPIC)))
    return state


def build(
    out: Path, seed: int, phases: int = PHASES, transactions: int = TRANSACTIONS
) -> Counter[str]:
    """Write this pipeline's landing and expected state below `out`; returns the workload's
    transactions by activity."""
    landing = out / "landing"
    for stale in (landing / "topics" / TOPIC, landing / "extracts" / TOPIC):
        shutil.rmtree(stale, ignore_errors=True)
    workload = PagilaWorkload(seed)
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="cdc-pagila-") as state, TemporaryPostgres() as pg:
        with pg.connect() as conn:
            workload.create_schema(conn)
            workload.load_initial(conn)
        poller = source(pg.conninfo(), landing, Path(state) / "pagila_address.json")
        for phase in range(phases + 1):
            if phase:
                with pg.connect() as conn:
                    counts.update(workload.run_phase(conn, transactions))
            poller.poll()
            poller.extract(landing / "extracts" / TOPIC)
        with pg.connect() as conn:
            rows = expected_state(conn)
    (out / "expected").mkdir(parents=True, exist_ok=True)
    with (out / "expected" / f"{ADDRESS.name}.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return counts


def readme_section(out: Path, seed: int, counts: Counter[str]) -> str:
    landing = out / "landing"
    files = sorted((landing / "topics" / TOPIC).rglob(f"*{'.gz.parquet'}"))
    folders = sorted({f.parent.name for f in files})
    extracts = sorted((landing / "extracts" / TOPIC).iterdir())
    rows = sum(1 for _ in (out / "expected" / f"{ADDRESS.name}.jsonl").open())
    activities = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    connector = json.dumps(CONNECTOR, indent=2)
    sink = json.dumps(SINK, indent=2)
    return f"""## Pagila: query-based capture, SMTs, Parquet landing

Written by `python -m sample.generator.pagila --out sample --seed {seed}` (part of
`make sample`): a private PostgreSQL with a Pagila-shaped `country` / `city` / `address`
schema (Pagila's `last_update` trigger), the seeded workload of `sample/generator/pagila.py`
({PHASES} phases of {TRANSACTIONS} transactions after {INITIAL_ADDRESSES} addresses), and the
project's imitation of the JDBC source connector in query mode polling after each phase.

- `landing/topics/{TOPIC}/country=<country>/{TOPIC}+0+<start offset>.gz.parquet`: Confluent's
  S3 sink with ParquetFormat (gzip) and a FieldPartitioner on `country`: {len(files)} files in
  {len(folders)} folders ({", ".join(f"`{f}`" for f in folders)}).
- `landing/extracts/{TOPIC}/<as_of>/`: a complete extract after each poll ({len(extracts)}),
  JSON lines and a `_cdc_extract.json` manifest: the deletes come from their diff.
- `expected/address.jsonl`: the query's final result through the same transforms ({rows} rows;
  `last_update` to the millisecond, as a Connect Timestamp holds it).

Workload transactions: {activities}.

The connector:

```json
{connector}
```

The sink:

```json
{sink}
```

```sql
{DDL}```
"""


def write_readme_section(out: Path, section: str) -> None:
    """Put `section` at the end of `<out>/README.md`, replacing an earlier one."""
    readme = out / "README.md"
    text = readme.read_text() if readme.exists() else ""
    head = text.split("\n## Pagila", 1)[0].rstrip("\n")
    readme.write_text(f"{head}\n\n{section}" if head else section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("sample"))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    counts = build(args.out, args.seed)
    write_readme_section(args.out, readme_section(args.out, args.seed, counts))
    print(f"pagila sample written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
