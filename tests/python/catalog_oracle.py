"""The catalog-driven oracle: any PostgreSQL database, written to at random from its catalog alone,
captured, onboarded with the generator and built; every silver table must equal PostgreSQL.

Nothing here is shaped around a schema: `read_catalog` reads the tables, keys, column types
(through domains, arrays and enums), foreign keys, identity and generated columns of a database;
`Workload` writes to it with type-aware random values (edge values, NULLs, TOAST-sized values)
in seeded transactions: inserts, updates of random columns, primary-key updates (a partitioned
table's rows move between partitions), deletes, one row touched several times in a transaction,
`TRUNCATE` where no foreign key points at the table. A statement the database refuses (a
unique, foreign-key or check violation, a key too long for its index) is rolled back to its
savepoint and counted. The capture
tool captures every table with a primary key, schemas on and off (two captures, two sources of
one dbt project); `python -m cdc_lakehouse.tables from-postgres` registers them and `generate`
writes the models, as a user onboards a database; `dbt build` runs after every phase and
`compare` reads every silver table against PostgreSQL, cell by cell, through `form` and `lake`:
what each PostgreSQL type becomes in the lake (docs/types.md), under the connector settings
of each capture (`connector_modes`). With `ddl`, each phase also makes one schema change drawn
from the catalog (a column added, widened or dropped) amid its transactions. `load_database`
loads a database as its authors published it (tests/fixtures/databases).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import psycopg
from dbt_scratch_project import project_skeleton, user_project
from lakehouse import REPO, read_export, run_dbt
from oracle import REPORT

from cdc_lakehouse.bronze.spec import DECIMAL_MODES, HSTORE_MODES, INTERVAL_MODES, TIME_MODES
from cdc_lakehouse.capture.config import kafka_topic
from cdc_lakehouse.tables.generate import write
from cdc_lakehouse.tables.registry import REGISTRY_DIR, load_source
from devstack.pg import TemporaryPostgres

# -- the catalog -----------------------------------------------------------------------------------

CATALOG_SQL = """
with recursive domain_base (oid, base) as (
    select oid, typbasetype from pg_type where typtype = 'd'
    union all
    select d.oid, t.typbasetype from domain_base d join pg_type t on t.oid = d.base
    where t.typtype = 'd'
)
select c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       a.attidentity, a.attgenerated, c.relkind = 'p',
       coalesce(b.typname, e.typname, t.typname) as base,
       coalesce(b.typtype, e.typtype, t.typtype) as kind,
       t.typcategory = 'A' as is_array,
       coalesce(db.base, de.base) is not null as is_domain,
       coalesce(b.oid, e.oid, t.oid) as base_oid,
       (select string_agg(pg_get_constraintdef(k.oid), ' ') from pg_constraint k
        where k.contypid in (t.oid, e.oid)) as domain_checks
from pg_attribute a
join pg_class c on c.oid = a.attrelid
join pg_namespace n on n.oid = c.relnamespace
join pg_type t on t.oid = a.atttypid
left join pg_type e on e.oid = t.typelem and t.typcategory = 'A'
left join domain_base db on db.oid = t.oid
left join domain_base de on de.oid = e.oid
left join lateral (
    select x.oid, x.typname, x.typtype from pg_type x where x.oid = coalesce(db.base, de.base)
    and not exists (select 1 from domain_base y where y.oid = x.oid)
) b on true
where n.nspname = %s and c.relkind in ('r', 'p') and not c.relispartition
  and a.attnum > 0 and not a.attisdropped
order by c.relname, a.attnum
"""

KEYS_SQL = """
select c.relname, k.contype, array_agg(a.attname order by u.pos),
       r.relname, array_agg(ra.attname order by u.pos)
from pg_constraint k
join pg_class c on c.oid = k.conrelid
join pg_namespace n on n.oid = c.relnamespace
cross join lateral unnest(k.conkey) with ordinality as u(attnum, pos)
join pg_attribute a on a.attrelid = k.conrelid and a.attnum = u.attnum
left join pg_class r on r.oid = k.confrelid
left join pg_attribute ra on ra.attrelid = k.confrelid and ra.attnum = k.confkey[u.pos]
where n.nspname = %s and k.contype in ('p', 'f') and not c.relispartition
group by c.relname, k.conname, k.contype, r.relname
order by c.relname, k.conname
"""


@dataclass(frozen=True)
class Column:
    name: str
    pg_type: str  # as format_type writes it: `numeric(12,3)`, `character(5)[]`, `mood`
    base: str  # the base type's name (pg_type.typname) below domains and arrays: `int4`
    kind: str  # pg_type.typtype of the base: b(ase), e(num), r(ange)...
    is_array: bool
    is_domain: bool
    not_null: bool
    identity: str  # '' / 'a' (always) / 'd' (by default)
    generated: bool
    labels: tuple[str, ...] = ()  # an enum's labels
    hints: tuple[str, ...] = ()  # the numbers in a domain's CHECK: its edges

    @property
    def written(self) -> bool:
        """A column a statement may set."""
        return not self.generated and self.identity != "a"


@dataclass
class TableInfo:
    name: str
    columns: list[Column]
    key: list[str] = field(default_factory=list)
    # (columns, referenced table, referenced columns)
    references: list[tuple[list[str], str, list[str]]] = field(default_factory=list)
    partitioned: bool = False

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


def read_catalog(conn: psycopg.Connection, schema: str = "public") -> dict[str, TableInfo]:
    labels: dict[int, tuple[str, ...]] = {}
    for oid, names in conn.execute(
        "select enumtypid, array_agg(enumlabel order by enumsortorder) from pg_enum group by 1"
    ):
        labels[oid] = tuple(names)
    tables: dict[str, TableInfo] = {}
    for row in conn.execute(CATALOG_SQL, (schema,)):
        name, column, pg_type, not_null, identity, generated, partitioned = row[:7]
        base, kind, is_array, is_domain, base_oid, checks = row[7:]
        hints = tuple(re.findall(r"-?\d+(?:\.\d+)?", checks or ""))
        table = tables.setdefault(name, TableInfo(name, [], partitioned=partitioned))
        table.columns.append(
            Column(
                column,
                pg_type,
                base,
                kind,
                is_array,
                is_domain,
                not_null,
                identity,
                generated == "s",
                labels.get(base_oid, ()),
                hints,
            )  # fmt: skip
        )
    for name, kind, columns, referenced, referenced_columns in conn.execute(KEYS_SQL, (schema,)):
        if kind == "p":
            tables[name].key = list(columns)
        else:
            tables[name].references.append((list(columns), referenced, list(referenced_columns)))
    return tables


def load_database(pg: TemporaryPostgres, folder: Path) -> str:
    """A database as its authors wrote it (tests/fixtures/databases): `schema.sql`, the rows of
    `data/<table>.tsv` (COPY text format), `constraints.sql`; each identity column restarts
    after the largest value loaded, as a restored dump's sequences do. Returns the schema that
    holds its tables."""
    with pg.connect() as conn:
        conn.execute((folder / "schema.sql").read_text())
        for path in sorted((folder / "data").glob("*.tsv")):
            with conn.cursor().copy(f'copy "{path.stem}" from stdin') as copy:
                copy.write(path.read_bytes())
        conn.execute((folder / "constraints.sql").read_text())
        identities = conn.execute(
            """
            select n.nspname, c.relname, a.attname from pg_attribute a
            join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
            where a.attidentity <> '' and n.nspname not in ('pg_catalog', 'information_schema')
            """
        ).fetchall()
        for schema, table, column in identities:
            name = f'"{schema}"."{table}"'
            (largest,) = conn.execute(f'select max("{column}") from {name}').fetchone()
            if largest is not None:
                conn.execute(f'alter table {name} alter "{column}" restart with {largest + 1}')
        (schemas,) = conn.execute(
            """
            select array_agg(distinct table_schema::text) from information_schema.tables
            where table_schema not in ('pg_catalog', 'information_schema')
            """
        ).fetchone()
        conn.commit()
    assert len(schemas) == 1, f"{folder.name}: tables in more than one schema: {schemas}"
    return schemas[0]


# -- names ---------------------------------------------------------------------------------------
# PostgreSQL's identifiers ("Identifiers and Key Words" in its SQL syntax chapter): an unquoted
# name is folded to lower case, a quoted one keeps its case and may hold any character but NUL,
# key words among them, up to 63 bytes (NAMEDATALEN - 1). Applications create such names (an
# ORM's `"OrderLine"` and `"createdAt"`, a column called `"order"` or `"unit price"`), so names
# are drawn from every shape below, seeded: the tables of type_map.named_ddl, and the column a
# schema change adds (Workload).
# The capture takes table names of letters, digits, `_` and `$` (capture/config.py refuses the
# others with its reason); Debezium names each topic after its table, a `$` replaced with `_`.
WORDS = ("line", "item", "unit", "price", "owner", "status", "total", "note", "shipped", "label")
# Reserved key words of PostgreSQL (its key-word appendix), several also of Spark SQL.
KEY_WORDS = ("order", "user", "group", "select", "from", "table", "end", "default", "check",
             "limit", "null", "true", "current_date", "desc", "union")  # fmt: skip
TABLE_SHAPES = ("pascal", "camel", "upper", "key word", "dollar", "longest")
COLUMN_SHAPES = (*TABLE_SHAPES, "space", "non-ascii", "punctuation", "digit first")


def identifier(rng: random.Random, shape: str) -> str:
    """A name of `shape`, PostgreSQL's text of it (to be double-quoted in DDL)."""
    words = rng.sample(WORDS, 2)
    if shape == "pascal":
        return "".join(w.capitalize() for w in words)
    if shape == "camel":
        return words[0] + words[1].capitalize()
    if shape == "upper":
        return "_".join(words).upper()
    if shape == "key word":
        return rng.choice(KEY_WORDS)
    if shape == "dollar":
        return f"{words[0]}${words[1]}"
    if shape == "longest":
        text = "".join(w.capitalize() for w in rng.sample(WORDS, len(WORDS)))
        return (text * 2)[:63]
    if shape == "space":
        return f"{words[0]} {words[1]}"
    if shape == "non-ascii":
        return rng.choice(("größe", "prix unité", "Ñandú", "数量", "café_au_lait"))
    if shape == "punctuation":
        return f"{words[0]}{rng.choice('-.#/')}{words[1]}"
    if shape == "digit first":
        return f"{rng.randint(1, 9)}{words[0]}"
    raise ValueError(shape)


def unique_names(rng: random.Random, shapes: Sequence[str], taken: set[str]) -> list[str]:
    """One name per shape, none equal to another (or a taken one) once folded to lower case
    and with Debezium's replacement of the characters a topic may not hold."""
    names = []
    for shape in shapes:
        for _ in range(50):
            name = identifier(rng, shape)
            folded = re.sub(r"[^a-z0-9._-]", "_", name.lower())
            if folded not in taken:
                break
        else:  # two names one after folding would be columns Debezium refuses
            raise ValueError(f"no {shape} name left beside {sorted(taken)}")
        taken.add(folded)
        names.append(name)
    return names


# -- random values, from a column's type alone -----------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,;:'\"\\/{}[]()"
UNICODE = "äöüßéèçñøåæœЖжΩπ中文日本語한국어🙂"
# Longer than PostgreSQL's TOAST threshold (about 2 KB) even after compression.
TOAST_SIZE = 6000


def _typmod(pg_type: str) -> list[int]:
    found = re.search(r"\(([\d,]+)\)", pg_type)
    return [int(x) for x in found.group(1).split(",")] if found else []


class Values:
    """Random values of PostgreSQL types, as their text input form (cast by PostgreSQL)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def of(self, column: Column, *, nullable: bool = True) -> str | None:
        if nullable and not column.not_null and self.rng.random() < 0.1:
            return None
        if column.hints and not column.is_array and self.rng.random() < 0.7:
            low, high = min(map(Decimal, column.hints)), max(map(Decimal, column.hints))
            edges = [low, high, low - 1, high + 1, Decimal(self.rng.randint(int(low), int(high)))]
            return str(self.rng.choice(edges))
        if column.is_array:
            if self.rng.random() < 0.1:
                return "{}"
            elements = [
                None if self.rng.random() < 0.1 else self.scalar(column)
                for _ in range(self.rng.randint(1, 4))
            ]
            return "{" + ",".join("NULL" if e is None else _quoted(e) for e in elements) + "}"
        return self.scalar(column)

    def scalar(self, column: Column) -> str:
        if column.kind == "e":
            return self.rng.choice(column.labels)
        make = getattr(self, f"_{column.base}", None)
        if make is None:
            raise NotImplementedError(f"no random values of type {column.pg_type}")
        return str(make(_typmod(column.pg_type.removesuffix("[]"))))

    # numbers
    def _integer(self, bits: int) -> int:
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return self.rng.choice([low, high, 0, -1, 1, self.rng.randint(0, 3000)] + [
            self.rng.randint(low, high)
        ] * 4)  # fmt: skip

    def _int2(self, _: list[int]) -> int:
        return self._integer(16)

    def _int4(self, _: list[int]) -> int:
        return self._integer(32)

    def _int8(self, _: list[int]) -> int:
        return self._integer(64)

    def _oid(self, _: list[int]) -> int:
        return self.rng.choice([0, 2**32 - 1, self.rng.randint(0, 2**32 - 1)])

    def _numeric(self, typmod: list[int]) -> str:
        rng = self.rng
        if typmod and rng.random() < 0.03:
            return "NaN"
        if typmod:
            precision, scale = (typmod + [0])[:2]
            digits = precision - scale
            if rng.random() < 0.2:
                whole, fraction = "9" * digits, "9" * scale
            else:
                whole = str(rng.randint(0, 10 ** rng.randint(0, digits) - 1)) if digits else "0"
                fraction = "".join(rng.choices("0123456789", k=scale))
        else:
            # within decimal(38,18), what a numeric without precision becomes (docs/types.md)
            whole = str(rng.randint(0, 10 ** rng.choice([1, 5, 20]) - 1))
            fraction = "".join(rng.choices("0123456789", k=rng.choice([0, 2, 10, 18])))
        sign = rng.choice(["", "-"])
        return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"

    def _money(self, _: list[int]) -> str:
        cents = self.rng.choice([-(2**63), 2**63 - 1, 0, self.rng.randint(-(10**12), 10**12)])
        return str(Decimal(cents).scaleb(-2))

    def _float(self, single: bool) -> str:
        rng = self.rng
        edges = ["Infinity", "-Infinity", "NaN", "0", "-0"]
        edges += (
            ["3.4028235e38", "1.1754944e-38"] if single else ["1.7976931348623157e308", "5e-324"]
        )
        if rng.random() < 0.2:
            return rng.choice(edges)
        value = rng.uniform(-1, 1) * 10 ** rng.randint(-20, 20)
        return repr(struct.unpack("f", struct.pack("f", value))[0] if single else value)

    def _float4(self, _: list[int]) -> str:
        return self._float(True)

    def _float8(self, _: list[int]) -> str:
        return self._float(False)

    def _bool(self, _: list[int]) -> str:
        return self.rng.choice(["true", "false"])

    def _bit(self, typmod: list[int]) -> str:
        return "".join(self.rng.choices("01", k=typmod[0] if typmod else 1))

    def _varbit(self, typmod: list[int]) -> str:
        return "".join(self.rng.choices("01", k=self.rng.randint(0, typmod[0] if typmod else 64)))

    # text
    def _string(self, most: int | None) -> str:
        rng = self.rng
        if most is None and rng.random() < 0.1:
            return "".join(rng.choices(LETTERS + UNICODE, k=TOAST_SIZE))
        size = rng.randint(0, min(most or 30, 30))
        return "".join(rng.choices(LETTERS + UNICODE, k=size))

    def _text(self, _: list[int]) -> str:
        return self._string(None)

    def _varchar(self, typmod: list[int]) -> str:
        return self._string(typmod[0] if typmod else None)

    def _bpchar(self, typmod: list[int]) -> str:
        return self._string(typmod[0] if typmod else 1)

    def _bytea(self, _: list[int]) -> str:
        size = TOAST_SIZE if self.rng.random() < 0.1 else self.rng.randint(0, 40)
        return "\\x" + self.rng.randbytes(size).hex()

    def _xml(self, _: list[int]) -> str:
        return f'<r n="{self.rng.randint(0, 99)}"><t>{self._word()} &amp; {self._word()}</t></r>'

    def _tsvector(self, _: list[int]) -> str:
        words = {self._word(): self.rng.randint(1, 9) for _ in range(self.rng.randint(0, 5))}
        return " ".join(f"{w}:{p}" for w, p in words.items())

    def _ltree(self, _: list[int]) -> str:
        return ".".join(self._word() for _ in range(self.rng.randint(1, 4)))

    def _hstore(self, _: list[int]) -> str:
        pairs = []
        for _ in range(self.rng.randint(0, 4)):
            value = "NULL" if self.rng.random() < 0.2 else _quoted(self._string(12))
            pairs.append(f"{_quoted(self._word() + self.rng.choice(['', ' ü']))}=>{value}")
        return ", ".join(pairs)

    def _word(self) -> str:
        return "".join(self.rng.choices("abcdefghijklmnopqrstuvwxyz_", k=self.rng.randint(1, 8)))

    def _json_value(self, depth: int = 0) -> Any:
        rng = self.rng
        kinds = ["s", "n", "f", "b", "z"] + (["o", "a"] if depth < 2 else [])
        kind = rng.choice(kinds)
        if kind == "o":
            return {self._string(6): self._json_value(depth + 1) for _ in range(rng.randint(0, 3))}
        if kind == "a":
            return [self._json_value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {
            "s": self._string(12), "n": rng.randint(-(10**15), 10**15),
            "f": rng.uniform(-1e6, 1e6), "b": rng.random() < 0.5, "z": None,
        }[kind]  # fmt: skip

    def _json(self, _: list[int]) -> str:
        value = self._json_value()
        # json keeps its text as written: spacing and, in an object, duplicate keys
        text = json.dumps(value, ensure_ascii=False, indent=self.rng.choice([None, 1]))
        if isinstance(value, dict) and value and self.rng.random() < 0.3:
            text = text.rstrip("}").rstrip() + f", {json.dumps(next(iter(value)))}: 1}}"
        return text

    def _jsonb(self, _: list[int]) -> str:
        return json.dumps(self._json_value(), ensure_ascii=False)

    def _uuid(self, _: list[int]) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128)))

    # time
    def _date(self, _: list[int]) -> str:
        edges = ["0001-01-01", "9999-12-31", "1970-01-01", "1582-10-04", "1582-10-15", "2000-02-29"]
        if self.rng.random() < 0.2:
            return self.rng.choice(edges)
        return (date(1, 1, 1) + timedelta(days=self.rng.randint(0, 3_652_058))).isoformat()

    def _clock(self) -> str:
        edges = ["00:00:00", "23:59:59.999999", "24:00:00", "12:00:00.5"]
        if self.rng.random() < 0.15:
            return self.rng.choice(edges)
        micros = self.rng.randint(0, 86_400 * 10**6 - 1)
        seconds, micro = divmod(micros, 10**6)
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}"

    def _time(self, _: list[int]) -> str:
        return self._clock()

    def _offset(self) -> str:
        minutes = self.rng.choice([0, 330, -660, 840, -720, 45, self.rng.randint(-720, 840)])
        sign = "-" if minutes < 0 else "+"
        return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"

    def _timetz(self, _: list[int]) -> str:
        return self._clock().replace("24:00:00", "23:59:59") + self._offset()

    def _timestamp(self, _: list[int]) -> str:
        edges = ["0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "1970-01-01 00:00:00"]
        if self.rng.random() < 0.15:
            return self.rng.choice(edges)
        day = date(1, 1, 1) + timedelta(days=self.rng.randint(0, 3_652_058))
        return f"{day.isoformat()} {self._clock().replace('24:00:00', '00:00:00')}"

    def _timestamptz(self, _: list[int]) -> str:
        stamp = self._timestamp([])
        # a zone that keeps the instant within year 1..9999
        return stamp + ("+00:00" if stamp[:4] in ("0001", "9999") else self._offset())

    def _interval(self, _: list[int]) -> str:
        rng = self.rng
        parts = [
            f"{rng.randint(-200, 200)} years", f"{rng.randint(-11, 11)} mons",
            f"{rng.randint(-40, 40)} days", f"{rng.randint(-30, 30)} hours",
            f"{rng.randint(-59, 59)} minutes",
            f"{rng.randint(-59, 59)}.{rng.randint(0, 999999):06d} seconds",
        ]  # fmt: skip
        return " ".join(rng.sample(parts, rng.randint(1, len(parts))))

    # network, geometry
    def _inet(self, _: list[int]) -> str:
        if self.rng.random() < 0.5:
            address = ipaddress.IPv4Address(self.rng.getrandbits(32))
            return f"{address}/{self.rng.randint(8, 32)}"
        return f"{ipaddress.IPv6Address(self.rng.getrandbits(128))}/{self.rng.randint(16, 128)}"

    def _cidr(self, _: list[int]) -> str:
        address = ipaddress.IPv4Address(self.rng.getrandbits(32))
        return str(ipaddress.ip_network(f"{address}/{self.rng.randint(8, 32)}", strict=False))

    def _macaddr(self, _: list[int]) -> str:
        return ":".join(f"{b:02x}" for b in self.rng.randbytes(6))

    def _macaddr8(self, _: list[int]) -> str:
        return ":".join(f"{b:02x}" for b in self.rng.randbytes(8))

    def _coordinate(self) -> str:
        return repr(round(self.rng.uniform(-1000, 1000), self.rng.randint(0, 6)))

    def _xy(self) -> str:
        return f"({self._coordinate()},{self._coordinate()})"

    def _point(self, _: list[int]) -> str:
        return self._xy()

    def _line(self, _: list[int]) -> str:
        return f"{{{self.rng.randint(1, 9)},{self._coordinate()},{self._coordinate()}}}"

    def _lseg(self, _: list[int]) -> str:
        return f"[{self._xy()},{self._xy()}]"

    def _box(self, _: list[int]) -> str:
        return f"{self._xy()},{self._xy()}"

    def _path(self, _: list[int]) -> str:
        points = ",".join(self._xy() for _ in range(self.rng.randint(2, 4)))
        return f"[{points}]" if self.rng.random() < 0.5 else f"({points})"

    def _polygon(self, _: list[int]) -> str:
        return "(" + ",".join(self._xy() for _ in range(self.rng.randint(3, 5))) + ")"

    def _circle(self, _: list[int]) -> str:
        return f"<{self._xy()},{abs(float(self._coordinate()))}>"

    # ranges
    def _range(self, bound: Callable[[], str], discrete: bool = False) -> str:
        rng = self.rng
        if rng.random() < 0.1:
            return "empty"
        low, high = sorted([bound(), bound()], key=_sort_key)
        if low == high and discrete:
            return "empty"
        low = "" if rng.random() < 0.1 else _quoted(low)
        high = "" if rng.random() < 0.1 else _quoted(high)
        return f"{rng.choice('[(')}{low},{high}{rng.choice(')]')}"

    def _int4range(self, _: list[int]) -> str:
        return self._range(lambda: str(self.rng.randint(-(2**31) + 1, 2**31 - 2)), True)

    def _int8range(self, _: list[int]) -> str:
        return self._range(lambda: str(self.rng.randint(-(2**63) + 1, 2**63 - 2)), True)

    def _numrange(self, _: list[int]) -> str:
        return self._range(lambda: self._numeric([12, 4]).replace("NaN", "0"))

    def _tsrange(self, _: list[int]) -> str:
        return self._range(lambda: self._timestamp([]))

    def _tstzrange(self, _: list[int]) -> str:
        return self._range(lambda: self._timestamp([]) + "+00:00")

    def _daterange(self, _: list[int]) -> str:
        return self._range(lambda: self._date([]), True)


def _quoted(text: str) -> str:
    """An array element or range bound, double-quoted for PostgreSQL's input syntax."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sort_key(bound: str) -> Any:
    try:
        return (0, Decimal(bound), "")
    except InvalidOperation:
        return (1, Decimal(0), bound)


# What a statement of the workload may be refused for: a key taken, a foreign key, a check or a
# domain's range (integrity, data), a key value too long for its index (program limit).
REFUSED = (psycopg.IntegrityError, psycopg.DataError, psycopg.errors.ProgramLimitExceeded)

# -- the workload ----------------------------------------------------------------------------------


class Workload:
    """Seeded random statements over every table of `tables`, from their catalog alone."""

    def __init__(self, tables: dict[str, TableInfo], seed: int, *, ddl: bool = False) -> None:
        self.tables = tables
        self.ddl = ddl  # one schema change a phase, amid its transactions
        self.rng = random.Random(seed)
        self.values = Values(self.rng)
        self.counts: Counter[str] = Counter()
        self.schema_changes: list[str] = []
        referenced = {ref for t in tables.values() for _, ref, _ in t.references}
        self.truncatable = sorted(t for t in tables if t not in referenced)

    def load(self, conn: psycopg.Connection, rows: int) -> None:
        """`rows` inserts per table, parents first (the snapshot's rows)."""
        for table in self._parents_first():
            for _ in range(rows):
                self._statement(conn, "insert", lambda t=table: self._insert(conn, t))
        conn.commit()

    def phase(self, conn: psycopg.Connection, transactions: int) -> None:
        """`transactions` transactions of one to four statements; one TRUNCATE mid-phase; with
        `ddl`, one schema change at a random point."""
        names = sorted(self.tables)
        ddl_at = self.rng.randrange(transactions) if self.ddl else -1
        for i in range(transactions):
            if i == ddl_at:
                self._schema_change(conn)
            if i == transactions // 2 and self.truncatable:
                table = self.rng.choice(self.truncatable)
                conn.execute(f'truncate "{table}"')
                conn.commit()
                self.counts["truncate"] += 1
            for _ in range(self.rng.randint(1, 4)):
                table = self.tables[self.rng.choice(names)]
                kind = self.rng.choices(
                    ["insert", "update", "rekey", "delete", "touch"], [4, 5, 1, 2, 1]
                )[0]
                action = {
                    "insert": lambda t=table: self._insert(conn, t),
                    "update": lambda t=table: self._update(conn, t, rekey=False),
                    "rekey": lambda t=table: self._update(conn, t, rekey=True),
                    "delete": lambda t=table: self._delete(conn, t),
                    "touch": lambda t=table: self._touch(conn, t),
                }[kind]
                self._statement(conn, kind, action)
            conn.commit()

    def _schema_change(self, conn: psycopg.Connection) -> None:
        """A change users make, from the catalog alone: add a nullable column of a type the
        database uses already, widen a column as the DDL table of docs/concepts.md lists, or drop a
        column no key holds. One PostgreSQL refuses (a generated column reads the column) is
        counted."""
        table = self.tables[self.rng.choice(sorted(self.tables))]
        held = set(table.key) | {
            c for t in self.tables.values() for c in _foreign_key_columns(t, table.name)
        }
        widened = [(c, _wider(c, self.rng)) for c in table.columns if not c.generated]
        widened = [(c, wider) for c, wider in widened if wider]
        dropped = [c for c in table.columns if c.name not in held and not c.identity]
        kinds = ["add"] + ["widen"] * bool(widened) + ["drop"] * bool(dropped)
        kind = self.rng.choice(kinds)
        if kind == "add":
            types = sorted(
                {c.pg_type for t in self.tables.values() for c in t.columns if c.written}
            )
            # a name of any shape a column may have (`createdAt`, `unit price`, `null`...)
            taken = {re.sub(r"[^a-z0-9._-]", "_", c.name.lower()) for c in table.columns}
            [name] = unique_names(self.rng, [self.rng.choice(COLUMN_SHAPES)], taken)
            added = f'"{name}" {self.rng.choice(types)}'
            sql = f'alter table "{table.name}" add column {added}'
        elif kind == "widen":
            column, wider = self.rng.choice(widened)
            sql = f'alter table "{table.name}" alter column "{column.name}" type {wider}'
        else:
            sql = f'alter table "{table.name}" drop column "{self.rng.choice(dropped).name}"'
        try:
            with conn.transaction():
                conn.execute(sql)
            self.counts[f"ddl {kind}"] += 1
            self.schema_changes.append(sql)
        except psycopg.errors.FeatureNotSupported:
            self.counts[f"ddl {kind} refused"] += 1
        conn.commit()
        schema = conn.execute("select current_schema()").fetchone()[0]
        catalog = read_catalog(conn, schema)
        self.tables = {name: catalog[name] for name in self.tables}

    def _parents_first(self) -> list[TableInfo]:
        done: list[str] = []
        while len(done) < len(self.tables):
            for name in sorted(self.tables):
                refs = {ref for _, ref, _ in self.tables[name].references if ref != name}
                if name not in done and refs <= set(done):
                    done.append(name)
        return [self.tables[name] for name in done]

    def _statement(self, conn: psycopg.Connection, kind: str, action: Callable[[], bool]) -> None:
        try:
            with conn.transaction():  # a savepoint inside the open transaction
                done = action()
            self.counts[kind if done else f"{kind} (no row)"] += 1
        except REFUSED:
            self.counts[f"{kind} refused"] += 1

    def _assignments(self, table: TableInfo, columns: list[Column], conn: psycopg.Connection):
        """(column, SQL placeholder, value) for each column: a referencing column takes a key
        of the table it references."""
        values: dict[str, Any] = {}
        for columns_, referenced, referenced_columns in table.references:
            if any(c.name in columns_ for c in columns) and self.rng.random() < 0.9:
                row = self._pick(conn, self.tables[referenced], referenced_columns)
                if row:
                    values.update(zip(columns_, row, strict=True))
        out = []
        for column in columns:
            if column.name in values:
                out.append((column, "%s", values[column.name]))
            else:
                out.append((column, f"%s::{column.pg_type}", self._value(conn, column)))
        return out

    def _value(self, conn: psycopg.Connection, column: Column) -> str | None:
        """A random value of `column`; of a domain, one its checks accept (20 tries). Not a
        numeric NaN in a NOT NULL column: Debezium's precise decimals write NaN as null, and
        stop the capture on it there (`Got a special value (NaN/Infinity) for Decimal type`
        in a key, `Invalid value: null used for required field` elsewhere; docs/types.md)."""
        for _ in range(20 if column.is_domain else 1):
            value = self.values.of(column)
            while column.not_null and column.base == "numeric" and "NaN" in (value or ""):
                value = self.values.of(column)
            if not column.is_domain:
                return value
            try:
                with conn.transaction():
                    conn.execute(f"select %s::{column.pg_type}", (value,))
                return value
            except REFUSED:
                continue
        return None

    def _insert(self, conn: psycopg.Connection, table: TableInfo) -> bool:
        columns = [c for c in table.columns if c.written]
        if not columns:  # only identity or generated columns (a DROP COLUMN can leave that)
            conn.execute(f'insert into "{table.name}" default values')
            return True
        assigned = self._assignments(table, columns, conn)
        names = ", ".join(f'"{c.name}"' for c, _, _ in assigned)
        marks = ", ".join(mark for _, mark, _ in assigned)
        conn.execute(
            f'insert into "{table.name}" ({names}) values ({marks})', [v for *_, v in assigned]
        )
        return True

    def _pick(self, conn: psycopg.Connection, table: TableInfo, columns: list[str]) -> tuple | None:
        names = ", ".join(f'"{c}"' for c in columns)
        count = conn.execute(f'select count(*) from "{table.name}"').fetchone()[0]
        if not count:
            return None
        return conn.execute(
            f'select {names} from "{table.name}" order by {names} offset %s limit 1',
            (self.rng.randrange(count),),
        ).fetchone()

    def _where(self, table: TableInfo, key: tuple) -> tuple[str, list[Any]]:
        return " and ".join(f'"{k}" = %s' for k in table.key), list(key)

    def _update(self, conn: psycopg.Connection, table: TableInfo, *, rekey: bool) -> bool:
        key = self._pick(conn, table, table.key)
        if key is None:
            return False
        candidates = [c for c in table.columns if c.written and (rekey or c.name not in table.key)]
        if rekey:
            chosen = [table.column(k) for k in table.key if table.column(k).written]
        elif candidates:  # a table whose columns are all its key has none: rekeys only
            chosen = self.rng.sample(candidates, self.rng.randint(1, min(4, len(candidates))))
        else:
            chosen = []
        if not chosen:
            return False
        assigned = self._assignments(table, chosen, conn)
        sets = ", ".join(f'"{c.name}" = {mark}' for c, mark, _ in assigned)
        where, params = self._where(table, key)
        conn.execute(
            f'update "{table.name}" set {sets} where {where}', [v for *_, v in assigned] + params
        )
        return True

    def _delete(self, conn: psycopg.Connection, table: TableInfo) -> bool:
        key = self._pick(conn, table, table.key)
        if key is None:
            return False
        where, params = self._where(table, key)
        conn.execute(f'delete from "{table.name}" where {where}', params)
        return True

    def _touch(self, conn: psycopg.Connection, table: TableInfo) -> bool:
        """One row changed several times in one transaction, deleted at the end now and then."""
        key = self._pick(conn, table, table.key)
        if key is None:
            return False
        candidates = [c for c in table.columns if c.written and c.name not in table.key]
        where, params = self._where(table, key)
        for _ in range(self.rng.randint(2, 3)) if candidates else ():
            column = self.rng.choice(candidates)
            ((_, mark, value),) = self._assignments(table, [column], conn)
            conn.execute(
                f'update "{table.name}" set "{column.name}" = {mark} where {where}',
                [value, *params],
            )
        if self.rng.random() < 0.3:
            conn.execute(f'delete from "{table.name}" where {where}', params)
        return True


def _foreign_key_columns(table: TableInfo, referenced: str) -> set[str]:
    """The columns of `referenced` held by `table`'s foreign keys, and `table`'s own foreign-key
    columns when it is `referenced` itself."""
    held: set[str] = set()
    for columns, target, target_columns in table.references:
        if target == referenced:
            held |= set(target_columns)
        if table.name == referenced:
            held |= set(columns)
    return held


def _wider(column: Column, rng: random.Random) -> str | None:
    """A type `column` widens to in place (docs/concepts.md, "Schema changes at the source"), or
    None."""
    if column.is_array or column.is_domain:
        return None
    typmod = _typmod(column.pg_type)
    if column.base == "int2":
        return rng.choice(["integer", "bigint"])
    if column.base == "int4":
        return "bigint"
    if column.base == "float4":
        return "double precision"
    if column.base == "numeric" and len(typmod) == 2 and typmod[0] + 4 <= 38:
        return f"numeric({typmod[0] + 4},{typmod[1]})"
    if column.base == "varchar":
        return rng.choice(["text", f"varchar({typmod[0] * 2})"] if typmod else ["text"])
    return None


# -- capture, onboarding, builds -------------------------------------------------------------------

# One capture per source of the dbt project: the same tables, schemas on and off.
SOURCES = {"typemap": True, "typemap_nosch": False}


def connector_modes(seed: int, sources: dict[str, bool] = SOURCES) -> dict[str, dict[str, str]]:
    """Each source's Debezium settings that decide how values travel, settings users change,
    turning with the seed so that CI's seed (1001) and the slow mode's meet every choice:
    - `binary.handling.mode`: `bytes` (the default), `hex` (read as base64, hex digits decode
      to other bytes without an error) or `base64`. In `hex` and `base64` Debezium sends some
      unchanged TOASTed values as NULL (from-postgres says so, see discover.toast_losses),
      which no pipeline can undo: `compare` allows exactly those (TOAST_NULLED).
    - `time.precision.mode`: each of the four, one a seed.
    - `decimal.handling.mode`: `precise`, `string` (exact both) or `double` (lossy by design:
      the double, rounded to the column's scale).
    - `hstore.handling.mode`: `json` or `map`; `interval.handling.mode`: `numeric` or `string`.
    Seed 1001: the first source bytes, adaptive, precise, json, numeric; the second hex,
    adaptive_time_microseconds, string, map, string."""
    turn = seed - 1001
    return {
        source: {
            "binary_handling_mode": ("bytes", "hex", "base64")[(turn + i) % 3],
            "time_precision_mode": TIME_MODES[(turn + i) % len(TIME_MODES)],
            "decimal_handling_mode": DECIMAL_MODES[(turn // 2 + i) % len(DECIMAL_MODES)],
            "hstore_handling_mode": HSTORE_MODES[(turn + i) % len(HSTORE_MODES)],
            "interval_handling_mode": INTERVAL_MODES[(turn + i) % len(INTERVAL_MODES)],
        }
        for i, source in enumerate(sources)
    }


# Where Debezium (3.6) sends an unchanged TOASTed value as NULL instead of its placeholder, by
# binary.handling.mode (DBZ-7599 gave only `hex` a bytea's placeholder; debezium/dbz#2418: an
# array's placeholder depends on its elements' schema): (PostgreSQL type, is an array).
TOAST_NULLED = {
    "base64": {("bytea", False), ("bytea", True)},
    "hex": {("bytea", True)},
}


class CatalogOracle:
    """The tables of one schema of a database (`pg`, its schema and data already there),
    captured once per source of `sources` (name -> schemas on), onboarded into a scratch dbt
    project under `root`, built after every phase and compared."""

    def __init__(
        self,
        pg: TemporaryPostgres,
        root: Path,
        seed: int,
        *,
        schema: str = "public",
        sources: dict[str, bool] = SOURCES,
        ddl: bool = False,
        user_project: bool = False,
    ) -> None:
        self.pg = pg
        # True: the project is made as docs/package.md says, outside this repository, the engine
        # added with packages.yml and `dbt deps` (dbt_scratch_project.user_project)
        self.user_project = user_project
        self.root = root
        self.seed = seed
        self.schema = schema
        self.sources = sources
        self.landing = root / "landing"
        self.lakehouse = root / "lakehouse"
        self.project = root / "project"
        with self.connect() as conn:
            self.tables = read_catalog(conn, schema)
        # Debezium refuses a table whose columns differ only by case (and so does the capture)
        self.captured = {
            name: t
            for name, t in self.tables.items()
            if t.key and len({c.name.lower() for c in t.columns}) == len(t.columns)
        }
        self.workload = Workload(self.captured, seed, ddl=ddl)
        self.modes = connector_modes(seed, sources)
        self.builds = 0
        self.onboarding = ""  # what from-postgres printed
        self.compared = {"rows": 0, "cells": 0, "mismatches": 0}

    def connect(self) -> psycopg.Connection:
        """A connection whose unqualified names are the schema's tables."""
        conn = self.pg.connect()
        conn.execute(f'set search_path to "{self.schema}"')
        conn.commit()
        return conn

    def load(self, rows: int) -> None:
        with self.connect() as conn:
            self.workload.load(conn, rows)

    def phase(self, transactions: int) -> None:
        with self.connect() as conn:
            self.workload.phase(conn, transactions)
            # DDL changes the tables: the compare reads the catalog as it is now
            self.tables = read_catalog(conn, self.schema)

    def capture(self) -> None:
        """Every capture until it has landed all that was committed (in parallel)."""
        running = []
        for source, schemas in self.sources.items():
            config = {
                "name": source, "host": self.pg.host, "port": self.pg.port,
                "database": self.pg.database, "user": self.pg.user,
                "tables": [f"{self.schema}.{t}" for t in sorted(self.captured)],
                "out": str(self.landing), "state_dir": str(self.root / "state" / source),
                "shape": "envelope", "schemas_enable": schemas, "topic_prefix": source,
                **self.modes[source],
            }  # fmt: skip
            path = self.root / "state" / f"{source}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(config))
            command = [
                sys.executable, "-m", "cdc_lakehouse.capture", "run", "--config", str(path),
                "--until-marker", "--timeout", "300",
            ]  # fmt: skip
            running.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env={**os.environ, "CDC_PG_PASSWORD": ""},
                )  # fmt: skip
            )
        for process in running:
            out, _ = process.communicate(timeout=400)
            assert process.returncode == 0, f"capture failed:\n{out[-4000:]}"

    def onboard(self) -> None:
        """`from-postgres` for each source, then `generate`, as docs/tables.md ("Onboard a
        database")."""
        if self.user_project:
            user_project(self.project)
        else:
            project_skeleton(self.project)
        for source in self.sources:
            self.onboarding += self._tables(
                "from-postgres", "--source", source, "--topic-prefix", source,
                "--dsn", self.pg.conninfo(), "--schema", self.schema,
                *(f"--{k.replace('_', '-')}={v}" for k, v in self.modes[source].items()),
            )  # fmt: skip
        write(self.project)

    def _tables(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "cdc_lakehouse.tables", "--project", str(self.project), *args],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def build(self, export: str, *, data_tests: bool = True) -> Path:
        """`dbt build` (incremental); the data tests (a third of a build here) when asked."""
        export_dir = self.lakehouse / "exports" / export
        variables = {"cdc_landing_root": str(self.landing), "cdc_export_dir": str(export_dir)}
        skipped = ["unit_test"] + ([] if data_tests else ["test"])
        run_dbt(
            ["build", "--exclude-resource-type", *skipped],
            lakehouse=self.lakehouse,
            project_dir=self.project,
            variables=variables,
        )
        self.builds += 1
        return export_dir

    def silver_models(self) -> dict[tuple[str, str], str]:
        """(source, PostgreSQL table) -> the silver model the generator named (the table is
        the last part of its entry's topic: an entry's own name may differ, `Album` -> `album`)."""
        landed = {kafka_topic(name): name for name in self.tables}  # `line$item` -> line_item
        models = {}
        for source in self.sources:
            for table in load_source(self.project / REGISTRY_DIR / f"{source}.yml").tables:
                models[(source, landed[table.spec.topic.rsplit(".", 1)[-1]])] = table.silver_model
        return models

    def expected(self, table: TableInfo) -> dict[tuple, dict[str, str | None]]:
        """PostgreSQL's rows of `table`: every value as PostgreSQL prints it, by key."""
        columns = ", ".join(
            f'case when "{c.name}" is null then null else concat("{c.name}") end'
            for c in table.columns
        )
        with self.connect() as conn:
            rows = conn.execute(f'select {columns} from "{table.name}"').fetchall()
        names = [c.name for c in table.columns]
        state = {}
        for row in rows:
            values = dict(zip(names, row, strict=True))
            state[tuple(values[k] for k in table.key)] = values
        return state

    def compare(self, export_dir: Path, label: str) -> list[str]:
        """Differences between every silver table and PostgreSQL (empty when equal)."""
        problems: list[str] = []
        for (source, name), model in sorted(self.silver_models().items()):
            table = self.tables[name]
            modes = self.modes[source]
            expected = {
                tuple(
                    form(table.column(k), v, modes) for k, v in zip(table.key, key, strict=True)
                ): row
                for key, row in self.expected(table).items()
            }
            actual = {}
            for row in read_export(export_dir, f"silver.{model}"):
                if not row.get("_cdc_is_deleted"):
                    actual[tuple(lake(table.column(k), row[k]) for k in table.key)] = row
            for key in sorted(set(expected) ^ set(actual), key=str):
                where = "missing" if key in expected else "unexpected"
                problems.append(f"{label} {source}.{name}: {where} row {key}")
            for key in sorted(set(expected) & set(actual), key=str):
                for column in table.columns:
                    want = form(column, expected[key][column.name], modes)
                    got = lake(column, actual[key].get(column.name))
                    self.compared["cells"] += 1
                    # a stored generated column: PostgreSQL before 18 does not publish it, so
                    # only the snapshot carries it; an unchanged TOASTed bytea in the modes of
                    # TOAST_NULLED: Debezium sends NULL (docs/types.md, both said at onboarding)
                    lost = column.generated or (
                        (column.base, column.is_array)
                        in TOAST_NULLED.get(modes["binary_handling_mode"], ())
                        # PostgreSQL's text of at least 1 KB of bytes: may be stored out of line
                        and len(expected[key][column.name] or "") > 2000
                    )
                    if want != got and not (lost and got is None):
                        problems.append(
                            f"{label} {source}.{name}.{column.name} ({column.pg_type}) {key}: "
                            f"PostgreSQL {expected[key][column.name]!r}, lake "
                            f"{actual[key].get(column.name)!r}"
                        )
            self.compared["rows"] += len(expected)
        self.compared["mismatches"] += len(problems)
        return problems


def refused_by_capture(pg: TemporaryPostgres, root: Path, tables: list[str]) -> str:
    """`capture check` of `tables`, which must exit 2 (a refusal); returns what it printed."""
    config = root / "refused.json"
    config.write_text(
        json.dumps(
            {
                "name": "refused",
                "host": pg.host,
                "port": pg.port,
                "database": pg.database,
                "user": pg.user,
                "tables": tables,
                "out": str(root / "refused-landing"),
                "state_dir": str(root / "refused-state"),
                "topic_prefix": "refused",
            }  # fmt: skip
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "cdc_lakehouse.capture", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "CDC_PG_PASSWORD": ""},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    return output


def record(oracle: CatalogOracle, database: str) -> None:
    """The oracle's figures, in the session's oracle report (printed at its end)."""
    columns = [c for t in oracle.captured.values() for c in t.columns]
    entry = {
        "catalog": database,
        "tables": len(oracle.captured),
        "types": len({c.pg_type.removesuffix("[]") for c in columns}),
        "columns": len(columns),
        "sources": len(oracle.sources),
        "captures": ", ".join(
            f"schemas {'on' if schemas else 'off'} "
            + " ".join(f"{k.split('_')[0]} {v}" for k, v in oracle.modes[source].items())
            for source, schemas in oracle.sources.items()
        ),
        "builds": oracle.builds,
        "events_landed": sum(
            sum(1 for line in path.read_text().splitlines() if line.strip())
            for path in (oracle.landing / "topics").rglob("*.json")
        ),
        "statements": dict(oracle.workload.counts),
        "schema_changes": oracle.workload.schema_changes,
        **oracle.compared,
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps(entry) + "\n")


# -- what each type becomes in the lake ------------------------------------------------------------
# docs/types.md: `form` turns PostgreSQL's printed value into what the
# lake holds, `lake` reads the exported value (cdc_export) into the same form.

# Not in Debezium's type map: left out of its events (include.unknown.datatypes is off), the
# column stays empty.
NOT_CAPTURED = {"line", "lseg", "box", "path", "polygon", "circle"}


DEFAULT_MODES = {
    "decimal_handling_mode": "precise",
    "time_precision_mode": "adaptive",
    "interval_handling_mode": "numeric",
}


def form(column: Column, text: str | None, modes: dict[str, str] = DEFAULT_MODES) -> Any:
    """PostgreSQL's printed value of `column`, as the lake must hold it when captured with
    the connector's `modes` (connector_modes)."""
    if column.base in NOT_CAPTURED:
        return None
    if text is None:
        return None
    if column.is_array:
        elements = _array_elements(text)
        # Debezium (3.6) sends such an array as null: an element it cannot write (a numeric
        # NaN, in precise and string modes alike), or a NULL element of an enum array (its
        # item schema is not optional)
        if any(e == "NaN" for e in elements if column.base == "numeric") or (
            column.kind == "e" and None in elements
        ):
            return None
        return [
            None
            if e is None
            else _julian(column, _precision(column, _moded(column, e, modes), modes))
            for e in elements
        ]
    if column.base == "time" and text == "24:00:00" and modes["time_precision_mode"] == "isostring":
        return _clock("00:00:00")  # isostring: Debezium's LocalTime has no 24:00 (docs/types.md)
    return _precision(column, _moded(column, text, modes), modes)


def _moded(column: Column, text: str, modes: dict[str, str]) -> Any:
    """`_form`, where a connector mode makes Debezium write something else than the value."""
    if column.base == "interval" and modes["interval_handling_mode"] == "string":
        return _interval_iso(text)
    value = _form(column, text)
    if column.base in ("numeric", "money") and modes["decimal_handling_mode"] == "double":
        typmod = _typmod(column.pg_type.removesuffix("[]"))
        if value is None or (typmod and typmod[0] <= 15):
            return value  # NaN; or a value a double holds exactly
        scale = 2 if column.base == "money" else (typmod + [0])[1] if typmod else 18
        return Double(value, None if typmod and typmod[0] > 38 else scale)
    return value


def _precision(column: Column, value: Any, modes: dict[str, str]) -> Any:
    """time.precision.mode=connect: Kafka Connect's Time and Timestamp hold milliseconds, so a
    `time` or `timestamp` loses its last three digits (truncated, before 1970 too)."""
    if modes["time_precision_mode"] != "connect":
        return value
    if column.base == "time":
        micros, offset = value
        return micros - micros % 1000, offset
    if column.base == "timestamp":
        return value[:-3] + "000"
    return value


# The first day of the Gregorian calendar: java.sql.Timestamp reads a day before it in the
# Julian calendar.
GREGORIAN = "1582-10-15"


def _julian(column: Column, value: Any) -> Any:
    """An element of a `timestamp[]` before 1582-10-15 as Debezium (3.6) sends it: its fields
    read as a Julian calendar date (the element goes through java.sql.Timestamp; PostgreSQL's
    calendar is the proleptic Gregorian). Upstream: debezium/dbz#2664. `date[]` and
    `timestamptz[]` elements arrive right."""
    if column.base != "timestamp" or value[:10] >= GREGORIAN:
        return value
    year, month, day = (int(x) for x in value[:10].split("-"))
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    jdn = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083
    # the Gregorian date of that Julian day number (Richards), year 0 included
    f = jdn + 1401 + (((4 * jdn + 274277) // 146097) * 3) // 4 - 38
    e = 4 * f + 3
    h = 5 * ((e % 1461) // 4) + 2
    month = (h // 153 + 2) % 12 + 1
    year = e // 1461 - 4716 + (14 - month) // 12
    return f"{year:04d}-{month:02d}-{(h % 153) // 5 + 1:02d}" + value[10:]


def _form(column: Column, text: str) -> Any:
    base = column.base
    if base in ("int2", "int4", "int8", "oid"):
        return int(text)
    if base == "numeric":
        return _decimal(text)
    if base == "money":
        return _decimal(text.replace("$", "").replace(",", ""))
    if base in ("float4", "float8"):
        return _float(text, base == "float4")
    if base == "bool":
        return text == "t"
    if base == "bit" and _typmod(column.pg_type) == [1]:
        return text == "1"
    if base in ("bit", "varbit"):
        # io.debezium.data.Bits: the number, least significant byte first, no high zero bytes
        number = int(text or "0", 2)
        return number.to_bytes((number.bit_length() + 7) // 8, "little")
    if base == "bytea":
        return bytes.fromhex(text[2:])
    if base in ("time", "timetz"):
        return _clock(text)
    if base == "timestamp":
        return _stamp(text)
    if base == "timestamptz":
        return datetime.fromisoformat(text).astimezone(UTC)
    if base == "interval":
        return _interval_micros(text)
    if base in ("jsonb", "hstore"):
        return json.loads(text) if base == "jsonb" else _hstore(text)
    if base == "point":
        x, y = text.strip("()").split(",")
        return (float(x), float(y))
    return text  # text types, enums, json (as written), xml, network, ranges, ltree, tsvector


def lake(column: Column, value: Any) -> Any:
    """A lake value as exported (cdc_export), in the form of `form`."""
    if value is None:
        return None
    if column.is_array:
        items = json.loads(value) if isinstance(value, str) else value
        return [None if e is None else _lake(column, e) for e in items]
    return _lake(column, value)


def _lake(column: Column, value: Any) -> Any:
    base = column.base
    if base in ("numeric", "money"):
        return _decimal(str(value))
    if base in ("float4", "float8"):
        return _float(str(value), base == "float4")
    if base in ("bit", "varbit", "bytea") and not (
        base == "bit" and _typmod(column.pg_type) == [1]
    ):
        return base64.b64decode(value)
    if base in ("time", "timetz"):
        return _clock(value)
    if base == "timestamp":
        return _stamp(value)
    if base == "timestamptz":
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if base == "interval":
        return value if str(value).startswith("P") else int(value)  # interval.handling.mode
    if base in ("jsonb", "hstore"):
        return json.loads(value)
    if base == "point":
        point = json.loads(value)
        return (point["x"], point["y"])
    return value


# numerics of any precision compare exactly (the default context rounds to 28 digits)
_EXACT = Context(prec=1000)


class Double:
    """A numeric as decimal.handling.mode=double makes it: the nearest double (Debezium), then
    rounded half up to the column's scale (Spark's cast to the registered decimal(p,s); a
    numeric without scale: decimal(38,18); wider than 38 digits: the double's text). Equal to
    a lake value that far from the exact one. A numeric of at most 15 digits survives a double
    exactly, so `_moded` gives its exact value (hashable: keys)."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, exact: Decimal, scale: int | None) -> None:
        self.exact, self.scale = exact, scale

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decimal):
            return NotImplemented
        nearest = Decimal(repr(float(self.exact)))
        slack = abs(nearest) * Decimal(2) ** -52
        if self.scale is not None:
            slack += Decimal(10) ** -self.scale / 2
        return abs(_EXACT.subtract(other, nearest)) <= slack

    def __repr__(self) -> str:
        return f"Double({self.exact}, scale={self.scale})"


def _decimal(text: str) -> Any:
    number = Decimal(text)
    # a numeric NaN: Debezium's decimal.handling.mode=precise has no NaN and sends null
    return None if number.is_nan() else _EXACT.plus(number.normalize(_EXACT))


def _float(text: str, single: bool) -> Any:
    number = float(text)
    if math.isnan(number):
        return "NaN"
    return struct.unpack("f", struct.pack("f", number))[0] if single else number


def _stamp(text: str) -> str:
    """A timestamp as `YYYY-MM-DD HH:MM:SS.ffffff` (year 0 too: a Julian shift can reach it;
    year 10000 too: a timestamp(3) rounds 9999-12-31 23:59:59.9999 up, Spark prints `+10000`)."""
    day, clock = text.replace("T", " ").removeprefix("+").split(" ")
    micros, _ = _clock(clock)
    seconds, fraction = divmod(micros, 10**6)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}"
    return f"{day} {clock}"


def _clock(text: str) -> tuple[int, int]:
    """(microseconds of the day, UTC offset in seconds) of a time, a timetz in UTC."""
    found = re.fullmatch(r"(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d(?::?\d\d)?)?", text)
    assert found, f"not a time: {text!r}"
    hours, minutes, seconds, fraction, zone = found.groups()
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 10**6
    micros += int((fraction or "0").ljust(6, "0")[:6])
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        micros -= sign * (int(digits[:2]) * 3600 + int(digits[2:] or 0) * 60) * 10**6
        micros %= 86_400 * 10**6
    return micros, 0


def _interval_fields(text: str) -> tuple[int, int, int, int, int, Decimal]:
    """(years, months, days, hours, minutes, seconds) of an interval as PostgreSQL prints it
    (`1 year -2 mons 3 days -04:05:06.5`), each with its own sign, as the JDBC driver's
    PGInterval reads them."""
    units = {"year": 0, "mon": 0, "day": 0}
    for amount, unit in re.findall(r"(-?\d+) (year|mon|day)s?", text):
        units[unit] = int(amount)
    hours = minutes = 0
    seconds = Decimal(0)
    clock = re.search(r"([-+]?)(\d+):(\d\d):(\d\d(?:\.\d+)?)", text)
    if clock:
        sign = -1 if clock.group(1) == "-" else 1
        hours, minutes = sign * int(clock.group(2)), sign * int(clock.group(3))
        seconds = sign * Decimal(clock.group(4))
    return units["year"], units["mon"], units["day"], hours, minutes, seconds


def _interval_iso(text: str) -> str:
    """An interval as Debezium's interval.handling.mode=string writes it (io.debezium.time.
    Interval: `P<y>Y<m>M<d>DT<h>H<m>M<s>S`, each field with its sign, the seconds without
    trailing zeros)."""
    years, months, days, hours, minutes, seconds = _interval_fields(text)
    second = f"{seconds.normalize():f}" if seconds else "0"
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{second}S"


def _interval_micros(text: str) -> int:
    """An interval as PostgreSQL prints it (`1 year -2 mons 3 days -04:05:06.5`), in
    microseconds as Debezium's MicroDuration.durationMicros computes them: in doubles, a month
    365.25 / 12 days, truncated (31.799481 seconds may give 31799480 microseconds)."""
    years, months, days_, hours, minutes, exact = _interval_fields(text)
    seconds = float(exact)
    days = float(years * 12 + months) * (365.25 / 12.0) + float(days_)
    total = ((days * 24.0 + hours) * 60.0 + minutes) * 60.0 + seconds
    return int(total * 1000000.0)  # Java's (long) cast truncates toward zero


def _hstore(text: str) -> dict[str, str | None]:
    pairs = re.findall(r'"((?:[^"\\]|\\.)*)"=>(NULL|"((?:[^"\\]|\\.)*)")', text)
    unescape = lambda s: re.sub(r"\\(.)", r"\1", s)  # noqa: E731
    return {unescape(k): None if v == "NULL" else unescape(inner) for k, v, inner in pairs}


def _array_elements(text: str) -> list[str | None]:
    """The elements of a one-dimensional PostgreSQL array literal (`{1,NULL,"a b"}`)."""
    elements: list[str | None] = []
    i, body = 0, text[1:-1]
    while i < len(body):
        if body[i] == '"':
            j, chars = i + 1, []
            while body[j] != '"':
                if body[j] == "\\":
                    j += 1
                chars.append(body[j])
                j += 1
            elements.append("".join(chars))
            i = j + 2
        else:
            j = body.find(",", i)
            j = len(body) if j < 0 else j
            item = body[i:j]
            elements.append(None if item == "NULL" else item)
            i = j + 1
    return elements
