"""A database holding every type of Debezium's PostgreSQL type map, in the table shapes users have.

The types are those of the "Data type mappings" of Debezium's PostgreSQL connector documentation
(basic, temporal, `time.precision.mode`, decimal, `hstore`, network, geometric, domain, enum and
array types), each as a column; the shapes are the ones a real schema has: a table of every
scalar, one of every array, a key made of many types, a table whose columns are all fixed-width,
one whose columns are all its key, a partitioned table, generated and identity columns, and a
table without a primary key. Nothing here knows what the pipeline does with a type: the values
are written by `catalog_oracle`, from the catalog alone.

Left out: a domain over an enum, which Debezium 3.6 fails to stream.
"""

from __future__ import annotations

import random

from catalog_oracle import COLUMN_SHAPES, TABLE_SHAPES, unique_names

# Scalar types, one column each (`c_<name>`): the PostgreSQL type as written in DDL.
SCALARS = {
    "smallint": "smallint",
    "integer": "integer",
    "bigint": "bigint",
    "numeric_p": "numeric(12,3)",
    "numeric": "numeric",
    "numeric_wide": "numeric(78,0)",  # wider than Spark's decimals: a 256-bit amount
    "money": "money",
    "real": "real",
    "double": "double precision",
    "boolean": "boolean",
    "bit1": "bit(1)",
    "bit": "bit(12)",
    "varbit": "bit varying(24)",
    "char": "char(5)",
    "varchar": "varchar(40)",
    "text": "text",
    "bytea": "bytea",
    "date": "date",
    "time": "time",
    "time3": "time(3)",
    "timetz": "time with time zone",
    "timestamp": "timestamp",
    "timestamp3": "timestamp(3)",
    "timestamptz": "timestamp with time zone",
    "interval": "interval",
    "uuid": "uuid",
    "json": "json",
    "jsonb": "jsonb",
    "xml": "xml",
    "inet": "inet",
    "cidr": "cidr",
    "macaddr": "macaddr",
    "macaddr8": "macaddr8",
    "point": "point",
    "line": "line",
    "lseg": "lseg",
    "box": "box",
    "path": "path",
    "polygon": "polygon",
    "circle": "circle",
    "hstore": "hstore",
    "ltree": "ltree",
    "int4range": "int4range",
    "int8range": "int8range",
    "numrange": "numrange",
    "tsrange": "tsrange",
    "tstzrange": "tstzrange",
    "daterange": "daterange",
    "tsvector": "tsvector",
    "mood": "mood",
    "year": "year",
    "price": "price",
    "oid": "oid",
}

# Arrays of the types PostgreSQL allows arrays of and Debezium streams.
ARRAYS = {
    "smallint": "smallint[]",
    "integer": "integer[]",
    "bigint": "bigint[]",
    "numeric_p": "numeric(12,3)[]",
    "numeric_wide": "numeric(50,10)[]",
    "real": "real[]",
    "double": "double precision[]",
    "boolean": "boolean[]",
    "varchar": "varchar(40)[]",
    "text": "text[]",
    "bytea": "bytea[]",
    "date": "date[]",
    "timestamp": "timestamp[]",
    "timestamptz": "timestamp with time zone[]",
    "uuid": "uuid[]",
    "jsonb": "jsonb[]",
    "inet": "inet[]",
    "mood": "mood[]",
    "int4range": "int4range[]",
}

DDL = f"""
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS ltree;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'très content');
CREATE DOMAIN year AS integer CHECK (value BETWEEN 1901 AND 2155);
CREATE DOMAIN price AS numeric(10,2) CHECK (value >= 0);

CREATE TABLE scalars (
    id integer PRIMARY KEY,
    {", ".join(f"c_{name} {pg_type}" for name, pg_type in SCALARS.items())}
);
CREATE TABLE arrays (
    id integer PRIMARY KEY,
    {", ".join(f"a_{name} {pg_type}" for name, pg_type in ARRAYS.items())}
);
-- A key of many types, one column each.
CREATE TABLE keyed (
    k_text text,
    k_int bigint,
    k_date date,
    k_ts timestamp with time zone,
    k_num numeric(12,3),
    k_uuid uuid,
    k_mood mood,
    label varchar(40),
    PRIMARY KEY (k_text, k_int, k_date, k_ts, k_num, k_uuid, k_mood)
);
-- Every column fixed-width: no column can carry Debezium's TOAST placeholder.
CREATE TABLE links (
    scalar_id integer REFERENCES scalars ON UPDATE CASCADE ON DELETE CASCADE,
    array_id integer REFERENCES arrays ON UPDATE CASCADE ON DELETE CASCADE,
    weight smallint,
    linked_at timestamp with time zone,
    PRIMARY KEY (scalar_id, array_id)
);
-- Every column in the key (a link table): an update can only change the key.
CREATE TABLE tagged (
    scalar_id integer REFERENCES scalars ON UPDATE CASCADE ON DELETE CASCADE,
    tag text,
    PRIMARY KEY (scalar_id, tag)
);
-- Declarative partitioning; an update of `measured_on` moves a row to another partition.
CREATE TABLE measurements (
    id bigint,
    measured_on date,
    reading numeric(8,2),
    note text,
    PRIMARY KEY (id, measured_on)
) PARTITION BY RANGE (measured_on);
CREATE TABLE measurements_old PARTITION OF measurements
    FOR VALUES FROM (MINVALUE) TO ('2000-01-01');
CREATE TABLE measurements_new PARTITION OF measurements
    FOR VALUES FROM ('2000-01-01') TO (MAXVALUE);
-- Identity and generated columns.
CREATE TABLE computed (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    serial_no integer GENERATED BY DEFAULT AS IDENTITY,
    quantity integer,
    unit_price numeric(8,2),
    total numeric(12,2) GENERATED ALWAYS AS (quantity * unit_price) STORED
);
-- No primary key: refused by the generator and by the capture's pre-check, never guessed.
CREATE TABLE keyless (
    code text,
    amount integer
);
"""


def named_ddl(seed: int) -> str:
    """Two tables named and columned from every shape (seeded), and one whose columns differ
    only by case, which Debezium refuses ("columns that differ only by case")."""
    rng = random.Random(seed)
    taken = {"scalars", "arrays", "keyed", "links", "tagged", "measurements", "computed"}
    taken |= {"keyless", "cdc_capture_marker", "twins"}
    types = ("integer", "text", "numeric(10,2)", "timestamp with time zone", "boolean", "jsonb")
    statements = []
    for table in unique_names(rng, rng.sample(TABLE_SHAPES, 2), taken):
        columns = unique_names(rng, rng.sample(COLUMN_SHAPES, len(COLUMN_SHAPES)), set())
        key = columns[:2]  # a key of two, each of any shape
        kinds = {key[0]: "integer", key[1]: "text"}
        typed = [f'"{c}" {kinds.get(c) or rng.choice(types)}' for c in columns]
        primary = ", ".join(f'"{c}"' for c in key)
        statements.append(f'CREATE TABLE "{table}" ({", ".join(typed)}, PRIMARY KEY ({primary}));')
    statements.append('CREATE TABLE twins (id integer PRIMARY KEY, "Note" text, note text);')
    return "\n".join(statements) + "\n"
