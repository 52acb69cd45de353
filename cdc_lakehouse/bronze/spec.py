"""What a bronze model needs to know about one source table.

A `TableSpec` is built from the dbt config of a bronze model (`cdc_landing` set per folder in
dbt_project.yml, `cdc_table` set per model in yml) and drives the decoding of landing files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc_lakehouse.bronze.layout import Layout

SHAPES = ("envelope", "flattened", "jdbc")
DECIMAL_MODES = ("precise", "string", "double")
TIME_MODES = ("adaptive", "adaptive_time_microseconds", "connect", "isostring")
# Debezium's binary.handling.mode: how a bytea travels (`bytes`, the default, is base64 in JSON)
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
# hstore.handling.mode: a JSON object in a string (`json`) or a Connect map; both decode to
# the object's JSON text
HSTORE_MODES = ("json", "map")
# interval.handling.mode: microseconds (`numeric`) or ISO 8601 text (`P1Y2M3DT4H5M6.78S`);
# from-postgres declares an interval `bigint` or `text` accordingly
INTERVAL_MODES = ("numeric", "string")
# The connector settings that decide how values arrive, and their choices (Debezium's default
# first): a TableSpec field each, the capture tool's config and options, from-postgres' options.
# A landing setting outside these is refused when the registry or a model's config is read.
CONNECTOR_MODES = {
    "decimal_handling_mode": DECIMAL_MODES,
    "time_precision_mode": TIME_MODES,
    "binary_handling_mode": BINARY_MODES,
    "hstore_handling_mode": HSTORE_MODES,
    "interval_handling_mode": INTERVAL_MODES,
}
DEFAULT_TOAST_PLACEHOLDER = "__debezium_unavailable_value"

# Column types a table may declare (PostgreSQL-flavoured names, mapped to Spark types).
DECLARED_TYPES = {
    "smallint": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "text": "string",
    "string": "string",
    "varchar": "string",
    "uuid": "string",
    "json": "string",
    "jsonb": "string",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
    "time": "string",
    # Debezium's io.debezium.time.ZonedTime text, in UTC (`11:14:15.123456Z`), kept as it is
    "timetz": "string",
    "bytea": "binary",
    "binary": "binary",
    # bit strings: Debezium's io.debezium.data.Bits, bytes whatever binary.handling.mode says
    # (a `bit(1)`, or `bit`, is a boolean: see spark_type)
    "bit": "binary",
    "varbit": "binary",
}


# PostgreSQL's own spellings (as `\d` and information_schema show them), spaces removed.
TYPE_ALIASES = {
    "charactervarying": "varchar",
    "character": "text",
    "char": "text",
    "bpchar": "text",
    "int4": "int",
    "int8": "bigint",
    "int2": "smallint",
    "float4": "real",
    "float8": "double",
    "doubleprecision": "double",
    "bitvarying": "varbit",
    "bool": "boolean",
    "timestampwithouttimezone": "timestamp",
    "timestampwithtimezone": "timestamptz",
    "timewithouttimezone": "time",
    "timewithtimezone": "timetz",
}


def spark_type(declared: str) -> str:
    """Spark SQL type for a declared column type (`decimal(p,s)`, `array<...>` kept as is).
    PostgreSQL's spellings are accepted too: `varchar(40)`, `character varying`, `int8`,
    `timestamp without time zone`..."""
    t = declared.strip().lower().replace(" ", "")
    # the element type first: `numeric(12,3)[]` is an array of decimals, not a decimal
    if t.startswith("array<") and t.endswith(">"):
        return f"array<{spark_type(t[6:-1])}>"
    if t.endswith("[]"):
        return f"array<{spark_type(t[:-2])}>"
    if t in ("bit", "bit(1)"):
        return "boolean"  # Debezium writes a single bit as a boolean
    if not t.startswith(("decimal", "numeric")):
        # a length or precision limit (varchar(40), timestamp(3)) is the source's check
        t = re.sub(r"\(\d+\)", "", t)
    t = TYPE_ALIASES.get(t, t)
    if t.startswith(("decimal", "numeric")):
        inner = t[t.index("(") :] if "(" in t else "(38,18)"
        # Spark's decimals stop at 38 digits: a wider numeric (numeric(78,0), a 256-bit
        # amount) is kept as its exact digits, as text (see wide_decimal_scale)
        return "string" if wide_decimal_scale(t) is not None else f"decimal{inner}"
    if t not in DECLARED_TYPES:
        raise ValueError(f"unknown column type {declared!r}")
    return DECLARED_TYPES[t]


MAX_DECIMAL_PRECISION = 38  # Spark's


def wide_decimal_scale(declared: str) -> int | None:
    """The scale of a declared `numeric(p,s)` / `decimal(p,s)` wider than Spark's decimals
    (p > 38), whose values the lake keeps as exact text; None for any other type."""
    found = re.fullmatch(
        r"(?:decimal|numeric)\((\d+)(?:,(\d+))?\)", declared.strip().lower().replace(" ", "")
    )
    if found is None or int(found.group(1)) <= MAX_DECIMAL_PRECISION:
        return None
    return int(found.group(2) or 0)


# The registry type of each Spark type a decoded column can have (spark_type's inverse).
_DECLARED_FOR_SPARK = {
    "string": "text",
    "tinyint": "smallint",
    "smallint": "smallint",
    "int": "int",
    "bigint": "bigint",
    "float": "real",
    "double": "double",
    "boolean": "boolean",
    "binary": "bytea",
    "date": "date",
    "timestamp_ntz": "timestamp",
    "timestamp": "timestamptz",
}


def declared_type(spark: str) -> str:
    """The registry type that declares a column of Spark type `spark` (`text` for any other)."""
    if spark.startswith("decimal"):
        return "numeric" + spark[len("decimal") :]
    if spark.startswith("array<") and spark.endswith(">"):
        return declared_type(spark[6:-1]) + "[]"
    return _DECLARED_FOR_SPARK.get(spark, "text")


@dataclass(frozen=True)
class TableSpec:
    """One source table as it lands.

    topic: Kafka topic.
    layout: where the sink puts the topic's files and how it names them (see Layout; default
        Confluent's S3 sink: `<root>/topics/<topic>/.../<topic>+<partition>+<offset>.json`).
    shape: `envelope` (full Debezium envelope), `flattened` (ExtractNewRecordState rows) or
        `jdbc` (query-based rows from a JDBC source connector).
    key: primary-key columns.
    columns: declared column name -> type (see DECLARED_TYPES, plus `decimal(p,s)`,
        `array<t>`); with schemas enabled each line's embedded schema decides how its values
        decode, and the declared type is the output type unless the source widened the column
        (see decode.declared_type_change).
    order_by: `jdbc` only: timestamp column, then optional incrementing column.
    extracts: `jdbc` only: the folder (below the landing root) where complete extracts of the
        table land, one folder per extract with its manifest (see extracts.py); keys missing
        from an extract are deleted. `true` in config means `extracts/<topic>`.
    """

    topic: str
    shape: str = "envelope"
    key: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    decimal_handling_mode: str = "precise"
    time_precision_mode: str = "adaptive"
    binary_handling_mode: str = "bytes"
    hstore_handling_mode: str = "json"
    interval_handling_mode: str = "numeric"
    toast_placeholder: str = DEFAULT_TOAST_PLACEHOLDER
    order_by: tuple[str, ...] = ()
    layout: Layout = field(default_factory=Layout)
    extracts: str | None = None

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"{self.topic}: shape must be one of {SHAPES}, got {self.shape!r}")
        for mode, choices in CONNECTOR_MODES.items():
            if getattr(self, mode) not in choices:
                raise ValueError(f"{self.topic}: {mode} must be one of {choices}")
        if not self.key:
            raise ValueError(f"{self.topic}: key columns are required")
        if self.shape == "jdbc" and not self.order_by:
            raise ValueError(f"{self.topic}: jdbc shape needs order_by (timestamp[, incrementing])")
        if self.extracts is not None and self.shape != "jdbc":
            raise ValueError(
                f"{self.topic}: extracts (extract-diff deletes) are for query-based sources "
                "(shape jdbc); a log-based capture sees its deletes"
            )
        for declared in self.columns.values():
            spark_type(declared)  # validates

    @classmethod
    def from_config(cls, landing: Mapping[str, Any] | None, table: Mapping[str, Any]) -> TableSpec:
        """Merge folder-level landing settings with the per-table entry (table wins)."""
        merged: dict[str, Any] = {**(landing or {}), **table}
        if "snapshots" in merged:
            raise ValueError(
                "`snapshots:` is now `extracts:` (complete extracts of a query-based table; "
                "the default folder is extracts/<topic>, a manifest _cdc_extract.json)"
            )
        topic = merged.get("topic")
        if not topic:
            prefix = merged.get("topic_prefix")
            name = merged.get("name")
            if not (prefix and name):
                raise ValueError("cdc_table needs `topic`, or `name` with a `topic_prefix`")
            topic = f"{prefix}.{name}"
        key = merged.get("key") or ()
        return cls(
            topic=topic,
            shape=merged.get("shape", "envelope"),
            key=tuple([key] if isinstance(key, str) else key),
            columns=dict(merged.get("columns") or {}),
            **{mode: merged.get(mode, choices[0]) for mode, choices in CONNECTOR_MODES.items()},
            toast_placeholder=merged.get("toast_placeholder", DEFAULT_TOAST_PLACEHOLDER),
            order_by=tuple(merged.get("order_by") or ()),
            layout=Layout.from_config(merged.get("layout")),
            extracts=_extract_folder(merged.get("extracts"), topic),
        )


def _extract_folder(setting: Any, topic: str) -> str | None:
    """`extracts:` as configured: false/absent (none), true (`extracts/<topic>`) or a folder."""
    if setting is None or setting is False:
        return None
    if setting is True:
        return f"extracts/{topic}"
    if isinstance(setting, str) and setting.strip("/"):
        return setting.strip("/")
    raise ValueError(f"{topic}: extracts must be true, false or a folder below the landing root")
