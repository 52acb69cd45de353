"""The Northwind-shaped order system behind the bundled sample: tables, keys, landing shapes.

Column types are PostgreSQL type names (also valid declared types for `cdc_lakehouse.bronze.spec`).
`DDL` creates the tables on a real PostgreSQL source; `canonical_value` is the one textual form
used by `sample/expected/*.jsonl`, so Spark output can be compared with those files.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

TOAST_PLACEHOLDER = "__debezium_unavailable_value"


@dataclass(frozen=True)
class Column:
    """One column. `external`: `SET STORAGE EXTERNAL`, long values live out of line (TOAST)."""

    name: str
    pg_type: str
    nullable: bool = True
    external: bool = False


@dataclass(frozen=True)
class Table:
    """One source table and how it lands.

    shape: `envelope` (Debezium envelope), `flattened` (ExtractNewRecordState rows) or `jdbc`
        (query-based JDBC source connector rows), as in `cdc_lakehouse.bronze.spec.SHAPES`.
    added_later: columns added mid-stream by `ALTER TABLE ... ADD COLUMN` (not in `DDL`).
    order_by: `jdbc` only: the connector's timestamp column, then its incrementing column.
    layout: how the sink lays out the topic's files (a key of LAYOUTS; default Confluent's S3
        sink), for both the capture (writer) and the table registry (reader).
    partitions: Kafka partitions of the topic.
    derived: written by the database itself (triggers), never by the workload.
    extracts: `jdbc` only: a complete extract lands after every poll (extract-diff deletes).
    """

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    topic: str
    shape: str
    schemas_enable: bool = False
    added_later: tuple[str, ...] = ()
    foreign_keys: tuple[str, ...] = ()
    order_by: tuple[str, ...] = ()
    layout: str = "confluent"
    partitions: int = 1
    derived: bool = False
    extracts: bool = False

    @property
    def layout_settings(self) -> dict[str, Any] | str:
        return LAYOUTS[self.layout]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def initial_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.name not in self.added_later)

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(f"{self.name} has no column {name!r}")

    def key_of(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.key)


CUSTOMERS = Table(
    name="customers",
    columns=(
        Column("customer_id", "text", nullable=False),
        Column("company_name", "text"),
        Column("contact_name", "text"),
        Column("country", "text"),
        Column("credit_limit", "numeric(12,2)"),
        Column("external_id", "uuid"),
        Column("tags", "text[]"),
        Column("profile", "jsonb"),
        Column("notes", "text", external=True),
        Column("created_at", "timestamptz"),
        Column("updated_at", "timestamp"),
        Column("loyalty_tier", "text"),
    ),
    key=("customer_id",),
    topic="northwind.public.customers",
    shape="envelope",
    schemas_enable=True,
    added_later=("loyalty_tier",),
)

PRODUCTS = Table(
    name="products",
    columns=(
        Column("product_id", "int", nullable=False),
        Column("product_name", "text"),
        Column("category", "text"),
        Column("unit_price", "numeric(10,2)"),
        Column("units_in_stock", "int"),
        Column("discontinued", "boolean"),
        Column("description", "text", external=True),
        Column("attributes", "jsonb"),
        Column("thumbnail", "bytea"),
        Column("updated_at", "timestamptz"),
    ),
    key=("product_id",),
    topic="northwind.public.products",
    shape="flattened",
)

ORDERS = Table(
    name="orders",
    columns=(
        Column("order_id", "int", nullable=False),
        Column("customer_id", "text"),
        Column("order_date", "date"),
        Column("required_date", "date"),
        Column("shipped_at", "timestamptz"),
        Column("ship_country", "text"),
        Column("freight", "numeric(10,2)"),
        Column("status", "text"),
        Column("updated_at", "timestamp"),
    ),
    key=("order_id",),
    topic="northwind.public.orders",
    shape="envelope",
    foreign_keys=(
        "FOREIGN KEY (customer_id) REFERENCES customers (customer_id) ON UPDATE CASCADE",
    ),
)

ORDER_DETAILS = Table(
    name="order_details",
    columns=(
        Column("order_id", "int", nullable=False),
        Column("product_id", "int", nullable=False),
        Column("unit_price", "numeric(10,2)"),
        Column("quantity", "int"),
        Column("discount", "numeric(4,2)"),
    ),
    key=("order_id", "product_id"),
    topic="northwind.public.order_details",
    shape="envelope",
    foreign_keys=(
        "FOREIGN KEY (order_id) REFERENCES orders (order_id)",
        "FOREIGN KEY (product_id) REFERENCES products (product_id)",
    ),
)

SUPPLIERS = Table(
    name="suppliers",
    columns=(
        Column("supplier_id", "int", nullable=False),
        Column("company_name", "text"),
        Column("country", "text"),
        Column("phone", "text"),
        Column("last_update", "timestamp", nullable=False),
    ),
    key=("supplier_id",),
    topic="northwind_jdbc.suppliers",
    shape="jdbc",
    order_by=("last_update", "supplier_id"),
    extracts=True,
)

# The transactional outbox of the order system: one document per order, kept by triggers on
# `orders` and `order_details` (OUTBOX_TRIGGERS), captured alone (Debezium, JsonConverter schemas)
# and landed by the Lenses stream-reactor S3 sink with KCQL
# `INSERT INTO bucket:outbox SELECT * FROM northwind.public.cdc_events
#  PARTITIONBY customer_id,order_id STOREAS JSON PROPERTIES('flush.count'=50)`.
CDC_EVENTS = Table(
    name="cdc_events",
    # The order's columns (but its row time) and the two arrays.
    columns=tuple(c for c in ORDERS.columns if c.name != "updated_at")
    + (Column("order_items", "jsonb"), Column("products", "jsonb")),
    key=("order_id",),
    topic="northwind.public.cdc_events",
    shape="envelope",
    schemas_enable=True,
    layout="lenses_outbox",
    partitions=3,
    derived=True,
)

LAYOUTS: dict[str, dict[str, Any] | str] = {
    "confluent": "confluent",
    "lenses_outbox": {
        "sink": "lenses",
        "prefix": "outbox",
        "partition_by": ["customer_id", "order_id"],
        # JSON with the GZIP codec: the schema each record carries compresses ~20 times.
        "compression": "gzip",
    },
}

TABLES: tuple[Table, ...] = (CUSTOMERS, PRODUCTS, ORDERS, ORDER_DETAILS, SUPPLIERS, CDC_EVENTS)
TABLES_BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}


def create_table_sql(table: Table) -> str:
    """CREATE TABLE (initial columns, key, foreign keys) plus the out-of-line storage settings."""
    lines = [
        f"    {c.name} {c.pg_type}{'' if c.nullable else ' NOT NULL'}"
        for c in table.initial_columns
    ]
    lines.append(f"    PRIMARY KEY ({', '.join(table.key)})")
    lines.extend(f"    {fk}" for fk in table.foreign_keys)
    body = ",\n".join(lines)
    statements = [f"CREATE TABLE {table.name} (\n{body}\n);"]
    statements.extend(
        f"ALTER TABLE {table.name} ALTER COLUMN {c.name} SET STORAGE EXTERNAL;"
        for c in table.initial_columns
        if c.external
    )
    return "\n".join(statements)


def add_column_sql(table: Table) -> str:
    """The mid-stream `ALTER TABLE ... ADD COLUMN` statements of a table (empty if none)."""
    return "\n".join(
        f"ALTER TABLE {table.name} ADD COLUMN {name} {table.column(name).pg_type};"
        for name in table.added_later
    )


# Tables as they exist when capture starts (REPLICA IDENTITY DEFAULT everywhere). Long text
# columns use STORAGE EXTERNAL so that values over ~2 KB are stored out of line uncompressed:
# an UPDATE that leaves them alone then sends Debezium the unavailable-value placeholder.
# The outbox documents: `order_items` and `products` are JSON arrays that grow as the lines of an
# order are inserted (one upsert of the document per row change, so one transaction can update a
# document several times); an order deleted deletes its document; `TRUNCATE order_details`
# (a statement trigger: row triggers do not fire on a truncate) empties every document's arrays.
OUTBOX_TRIGGERS = """
CREATE FUNCTION cdc_events_refresh(p_order_id int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orders WHERE order_id = p_order_id) THEN
        DELETE FROM cdc_events WHERE order_id = p_order_id;
        RETURN;
    END IF;
    INSERT INTO cdc_events AS e (
        order_id, customer_id, order_date, required_date, shipped_at, ship_country, freight,
        status, order_items, products
    )
    SELECT
        o.order_id, o.customer_id, o.order_date, o.required_date, o.shipped_at, o.ship_country,
        o.freight, o.status,
        coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'product_id', d.product_id, 'unit_price', d.unit_price,
                'quantity', d.quantity, 'discount', d.discount
            ) ORDER BY d.product_id)
            FROM order_details d WHERE d.order_id = o.order_id
        ), '[]'::jsonb),
        coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'product_id', p.product_id, 'product_name', p.product_name,
                'category', p.category
            ) ORDER BY p.product_id)
            FROM order_details d JOIN products p ON p.product_id = d.product_id
            WHERE d.order_id = o.order_id
        ), '[]'::jsonb)
    FROM orders o
    WHERE o.order_id = p_order_id
    ON CONFLICT (order_id) DO UPDATE SET
        customer_id = excluded.customer_id, order_date = excluded.order_date,
        required_date = excluded.required_date, shipped_at = excluded.shipped_at,
        ship_country = excluded.ship_country, freight = excluded.freight,
        status = excluded.status, order_items = excluded.order_items,
        products = excluded.products;
END
$$;

CREATE FUNCTION cdc_events_on_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM cdc_events_refresh(OLD.order_id);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND (TG_OP = 'INSERT' OR NEW.order_id <> OLD.order_id) THEN
        PERFORM cdc_events_refresh(NEW.order_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION cdc_events_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cdc_events SET order_items = '[]'::jsonb, products = '[]'::jsonb
    WHERE order_items <> '[]'::jsonb OR products <> '[]'::jsonb;
    RETURN NULL;
END
$$;

CREATE TRIGGER cdc_events_orders AFTER INSERT OR UPDATE OR DELETE ON orders
    FOR EACH ROW EXECUTE FUNCTION cdc_events_on_change();
CREATE TRIGGER cdc_events_order_details AFTER INSERT OR UPDATE OR DELETE ON order_details
    FOR EACH ROW EXECUTE FUNCTION cdc_events_on_change();
CREATE TRIGGER cdc_events_order_details_truncate AFTER TRUNCATE ON order_details
    FOR EACH STATEMENT EXECUTE FUNCTION cdc_events_on_truncate();
"""

DDL = "\n\n".join(create_table_sql(t) for t in TABLES) + "\n" + OUTBOX_TRIGGERS
# Run mid-stream, while the connector is capturing.
MID_STREAM_DDL = "\n".join(s for s in (add_column_sql(t) for t in TABLES) if s) + "\n"


def canonical_value(pg_type: str, value: Any) -> Any:
    """The canonical JSON-ready form of one PostgreSQL value (see sample/README.md).

    numeric: string with exactly the column's scale; date: `YYYY-MM-DD`; timestamp:
    `YYYY-MM-DDTHH:MM:SS.ffffff`; timestamptz: same in UTC with a `Z` (a naive datetime is taken
    as UTC); json/jsonb: the parsed value, object keys sorted; uuid: lower-case string; bytea:
    base64; arrays: lists; null: None. Accepts Python values (Decimal, date, datetime, dict, ...)
    or strings.
    """
    if value is None:
        return None
    t = pg_type.strip().lower().replace(" ", "")
    if t.endswith("[]"):
        return [canonical_value(t[:-2], v) for v in value]
    if t.startswith(("numeric", "decimal")):
        return _canonical_numeric(t, value)
    converter = _CONVERTERS.get(t)
    if converter is None:
        raise ValueError(f"no canonical form for PostgreSQL type {pg_type!r}")
    return converter(value)


def canonical_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """All columns of `table` in canonical form; a column missing from `row` is null."""
    return {c.name: canonical_value(c.pg_type, row.get(c.name)) for c in table.columns}


def canonical_lake_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row read back from the lake (a silver export, a peer's table) in canonical form, source
    columns only: as canonical_row, with arrays also accepted as JSON text (the exports' form)."""
    out = {}
    for column in table.columns:
        value = row.get(column.name)
        if value is not None and column.pg_type.endswith("[]") and isinstance(value, str):
            value = json.loads(value)
        out[column.name] = canonical_value(column.pg_type, value)
    return out


def _canonical_numeric(pg_type: str, value: Any) -> str:
    number = Decimal(repr(value) if isinstance(value, float) else str(value))
    if "," in pg_type:  # numeric(p,s): exactly s decimals, rounded as PostgreSQL rounds
        scale = int(pg_type.split(",")[1].rstrip(")"))
        number = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    if number.is_zero():
        number = abs(number)
    return f"{number:f}"


def _canonical_date(value: Any) -> str:
    if isinstance(value, datetime):
        raise TypeError(f"a date column got a datetime: {value!r}")
    if isinstance(value, date):
        return value.isoformat()
    return date.fromisoformat(str(value)).isoformat()


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace(" ", "T"))


def _canonical_timestamp(value: Any) -> str:
    dt = _as_datetime(value)
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")


def _canonical_timestamptz(value: Any) -> str:
    dt = _as_datetime(value)
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def _canonical_json(value: Any) -> Any:
    if isinstance(value, (str, bytes, bytearray)):
        value = json.loads(value)
    return _sorted_json(value)


def _canonical_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("t", "true"):
        return True
    if text in ("f", "false"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _canonical_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise TypeError(f"not an integer: {value!r}")
    return int(value)


def _canonical_bytea(value: Any) -> str:
    if isinstance(value, str):  # already base64 text
        return base64.b64encode(base64.b64decode(value, validate=True)).decode()
    return base64.b64encode(bytes(value)).decode()


_CONVERTERS = {
    "text": str,
    "varchar": str,
    "int": _canonical_int,
    "integer": _canonical_int,
    "smallint": _canonical_int,
    "bigint": _canonical_int,
    "boolean": _canonical_boolean,
    "date": _canonical_date,
    "timestamp": _canonical_timestamp,
    "timestamptz": _canonical_timestamptz,
    "json": _canonical_json,
    "jsonb": _canonical_json,
    "uuid": lambda v: str(uuid.UUID(str(v))),
    "bytea": _canonical_bytea,
}
