"""Decode raw Debezium change lines into typed change rows, in Spark SQL only.

The hot path parses each line once with `from_json`, reading every payload column as a string
(Spark then keeps the raw JSON text of numbers, objects and arrays), and turns those strings into
typed values with built-in SQL functions: no Python per row, so Spark's code generation runs it.

How a value is written (its *encoding*) comes from the Kafka Connect schema embedded in the line
when the JsonConverter has `schemas.enable=true`, otherwise from the declared column type and the
connector's `decimal.handling.mode` / `time.precision.mode`. What it becomes (its output type)
comes from the declared type, else from the embedded schema; an embedded schema that widened a
declared type at the source widens the column, one that contradicts it stops the decoder (see
declared_type_change).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lakehouse.bronze.spec import (
    MAX_DECIMAL_PRECISION,
    TYPE_ALIASES,
    TableSpec,
    declared_type,
    spark_type,
    wide_decimal_scale,
)

OPS = ("c", "u", "r", "d", "t")
METADATA_COLUMNS = (
    "_cdc_op",
    "_cdc_seq",
    "_cdc_source_ts",
    "_cdc_tx_id",
    "_cdc_unavailable_columns",
    "_cdc_file",
    "_cdc_line",
    "_cdc_offset",
    "_cdc_loaded_at",
    "_cdc_reject_reason",
    "_cdc_raw",
    "_cdc_undeclared",
)
# Fields ExtractNewRecordState adds with `add.fields` (`source.x` becomes `__source_x`).
FLATTENED_FIELDS = (
    "__op",
    "__deleted",
    "__lsn",
    "__source_lsn",
    "__source_ts_ms",
    "__txId",
    "__source_txId",
)
_WRAPPED_PREFIX = '{"schema":'
_CORRUPT = "__cdc_corrupt"
_TWO_POW_64 = "18446744073709551616BD"
_NTZ_EPOCH = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"

# ---------------------------------------------------------------------------------------------
# Encodings: how a value is written in the JSON, independent of the type it decodes to.


@dataclass(frozen=True)
class Encoding:
    """kind is one of: text (use the string), plain (cast the JSON text), base64 (bytes),
    base64url and hex (bytes as binary.handling.mode=base64-url-safe and hex write them),
    decimal_base64 (unscaled two's complement, `scale`), variable_decimal ({scale, value}),
    epoch_days, epoch_millis, epoch_micros, epoch_nanos, zoned (ISO instant), iso_local
    (ISO wall clock with a literal Z), iso_date, millis_time, micros_time, nanos_time, iso_time,
    array (`item` is the element encoding)."""

    kind: str
    scale: int | None = None
    item: Encoding | None = None


TEXT = Encoding("text")
PLAIN = Encoding("plain")
# PostgreSQL numerics no decimal holds, as Debezium's string and double modes write them (in
# any case: string mode writes `NAN`)
NUMERIC_SPECIALS = ("NAN", "INFINITY", "-INFINITY")
# binary.handling.mode -> how a bytea's value is written (`bytes`: JsonConverter's base64)
_BINARY_KINDS = {
    "bytes": "base64",
    "base64": "base64",
    "base64-url-safe": "base64url",
    "hex": "hex",
}

# Kafka Connect logical types (schemas on) -> (encoding, output type when none is declared).
_VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_LOGICAL_TYPES: dict[str, tuple[Encoding, str]] = {
    _VARIABLE_DECIMAL: (Encoding("variable_decimal"), "decimal(38,18)"),
    "io.debezium.time.Date": (Encoding("epoch_days"), "date"),
    "org.apache.kafka.connect.data.Date": (Encoding("epoch_days"), "date"),
    "io.debezium.time.Time": (Encoding("millis_time"), "string"),
    "org.apache.kafka.connect.data.Time": (Encoding("millis_time"), "string"),
    "io.debezium.time.MicroTime": (Encoding("micros_time"), "string"),
    "io.debezium.time.NanoTime": (Encoding("nanos_time"), "string"),
    "io.debezium.time.Timestamp": (Encoding("epoch_millis"), "timestamp_ntz"),
    "org.apache.kafka.connect.data.Timestamp": (Encoding("epoch_millis"), "timestamp_ntz"),
    "io.debezium.time.MicroTimestamp": (Encoding("epoch_micros"), "timestamp_ntz"),
    "io.debezium.time.NanoTimestamp": (Encoding("epoch_nanos"), "timestamp_ntz"),
    "io.debezium.time.ZonedTimestamp": (Encoding("zoned"), "timestamp"),
    "io.debezium.time.IsoDate": (Encoding("iso_date"), "date"),
    "io.debezium.time.IsoTimestamp": (Encoding("iso_local"), "timestamp_ntz"),
    "io.debezium.time.IsoTime": (Encoding("iso_time"), "string"),
    "io.debezium.data.Json": (TEXT, "string"),
    "io.debezium.data.Uuid": (TEXT, "string"),
}
# Type names as JsonConverter writes them (its JsonSchema: `float` and `double`, not Connect's
# Schema.Type names FLOAT32 / FLOAT64).
_CONNECT_TYPES: dict[str, tuple[Encoding, str]] = {
    "int8": (PLAIN, "tinyint"),
    "int16": (PLAIN, "smallint"),
    "int32": (PLAIN, "int"),
    "int64": (PLAIN, "bigint"),
    "float": (PLAIN, "float"),
    "double": (PLAIN, "double"),
    "boolean": (PLAIN, "boolean"),
    "string": (TEXT, "string"),
    "bytes": (Encoding("base64"), "binary"),
}
_TIMESTAMP_BY_MODE = {
    "adaptive": "epoch_micros",
    "adaptive_time_microseconds": "epoch_micros",
    "connect": "epoch_millis",
    "isostring": "iso_local",
}
# PostgreSQL's default time precision is 6, so adaptive mode sends MicroTime (a declared
# `time(p)` / `timestamp(p)` with p <= 3: milliseconds, see _millis_precision).
_TIME_BY_MODE = {
    "adaptive": "micros_time",
    "adaptive_time_microseconds": "micros_time",
    "connect": "millis_time",
    "isostring": "iso_time",
}


def connect_encoding(field: dict) -> tuple[Encoding, str]:
    """Encoding and natural output type of one field of an embedded Kafka Connect schema."""
    name, kind = field.get("name"), field.get("type")
    if name == _DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        declared_precision = int(params.get("connect.decimal.precision", 38))
        if declared_precision > MAX_DECIMAL_PRECISION:  # numeric(50,10): its exact digits
            return Encoding("decimal_base64", scale=scale), "string"
        precision = min(38, max(declared_precision, scale, 1))
        return Encoding("decimal_base64", scale=scale), f"decimal({precision},{min(scale, 38)})"
    if name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name]
    if kind == "array":
        item, item_type = connect_encoding(field.get("items") or {})
        return Encoding("array", item=item), f"array<{item_type}>"
    # structs, maps and unknown logical types keep their JSON text
    return _CONNECT_TYPES.get(kind, (TEXT, "string"))


def declared_encoding(declared: str, spec: TableSpec) -> Encoding:
    """Encoding of a declared column when lines carry no schema (connector modes decide)."""
    name = declared.strip().lower().replace(" ", "")
    out = spark_type(declared)
    bare = re.sub(r"\(\d+\)", "", name)  # time(3) is a time, bit(12) a bit string
    if out.startswith("array<"):
        item = name[:-2] if name.endswith("[]") else name[6:-1]
        return Encoding("array", item=declared_encoding(item, spec))
    wide = wide_decimal_scale(name)
    if out.startswith("decimal") or wide is not None:
        if spec.decimal_handling_mode != "precise":
            return PLAIN  # string mode: "12.34"; double mode: the number's own text
        if wide is not None:
            return Encoding("decimal_base64", scale=wide)  # decoded to its exact text
        if "(" not in name:
            return Encoding("variable_decimal")  # numeric without scale
        return Encoding("decimal_base64", scale=_decimal_scale(out))
    if out == "binary":
        if TYPE_ALIASES.get(bare, bare) in ("bit", "varbit"):
            return Encoding("base64")  # io.debezium.data.Bits: bytes in every binary mode
        return Encoding(_BINARY_KINDS[spec.binary_handling_mode])
    if out == "date":
        return Encoding("iso_date" if spec.time_precision_mode == "isostring" else "epoch_days")
    if out == "timestamp_ntz":
        if _millis_precision(name) and spec.time_precision_mode.startswith("adaptive"):
            return Encoding("epoch_millis")  # io.debezium.time.Timestamp
        return Encoding(_TIMESTAMP_BY_MODE[spec.time_precision_mode])
    if out == "timestamp":
        if spec.shape == "jdbc":
            return Encoding("epoch_millis")  # the JDBC source maps timestamptz to Connect Timestamp
        return Encoding("zoned")  # Debezium: timestamptz is a UTC ISO string in every mode
    if TYPE_ALIASES.get(bare, bare) == "time":
        if _millis_precision(name) and spec.time_precision_mode == "adaptive":
            return Encoding("millis_time")  # io.debezium.time.Time
        return Encoding(_TIME_BY_MODE[spec.time_precision_mode])
    return TEXT if out == "string" else PLAIN


def _millis_precision(declared: str) -> bool:
    """A `time(p)` or `timestamp(p)` with p <= 3: Debezium's adaptive modes send it in
    milliseconds (io.debezium.time.Time, io.debezium.time.Timestamp), not microseconds."""
    found = re.search(r"\((\d+)\)", declared)
    return found is not None and int(found.group(1)) <= 3


def _decimal_scale(spark_decimal: str) -> int:
    match = re.fullmatch(r"decimal\((\d+),(\d+)\)", spark_decimal)
    return int(match.group(2)) if match else 18


def _decimal_precision(spark_type_name: str) -> int:
    """Precision of a Spark decimal type, 99 for anything else."""
    match = re.fullmatch(r"decimal\((\d+),(\d+)\)", spark_type_name)
    return int(match.group(1)) if match else 99


_INTS = ("tinyint", "smallint", "int", "bigint")
_INT_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}


def widen(a: str, b: str) -> str:
    """A type that holds both (columns whose type changed between embedded schemas)."""
    if a == b:
        return a
    if a in _INTS and b in _INTS:
        return max(a, b, key=_INTS.index)
    if a.startswith("decimal") and b.startswith("decimal"):
        return f"decimal(38,{max(_decimal_scale(a), _decimal_scale(b))})"
    if {a, b} <= {*_INTS, "float", "double"}:
        return "double"
    return "string"


def type_change(declared: str, event: str) -> str:
    """How a column declared as Spark type `declared` takes the values of an embedded schema
    that gives them Spark type `event`: `fits` when the declared type holds every such value,
    or when `event` is only how a connector setting writes it (a decimal as a string or a
    double: decimal.handling.mode; a timestamptz as the JDBC source's Connect Timestamp);
    `widens` when the source widened the column in place as the DDL table of docs/concepts.md lists
    (integers to wider ones, real to double precision, a numeric's precision at the same
    scale); `conflicts` for anything else."""
    if declared == event or declared == "string":
        return "fits"
    if declared.startswith("array<") and event.startswith("array<"):
        # a list's element type is not promoted in place: the declared one stays if it can
        items = type_change(declared[6:-1], event[6:-1])
        return "conflicts" if items == "conflicts" else "fits"
    if declared.startswith("decimal"):
        precision, scale = _decimal_precision(declared), _decimal_scale(declared)
        if event in ("string", "float", "double"):
            return "fits"
        if event in _INTS:
            return "fits" if precision - scale >= _INT_DIGITS[event] else "conflicts"
        if not event.startswith("decimal"):
            return "conflicts"
        event_precision, event_scale = _decimal_precision(event), _decimal_scale(event)
        if event_scale <= scale and event_precision - event_scale <= precision - scale:
            return "fits"
        return "widens" if event_scale == scale else "conflicts"
    if declared in _INTS and event in _INTS:
        return "fits" if _INTS.index(event) <= _INTS.index(declared) else "widens"
    exact = {
        ("float", "double"): "widens",
        ("double", "float"): "fits",
        ("timestamp", "timestamp_ntz"): "fits",
        **{("double", i): "fits" for i in ("tinyint", "smallint", "int")},
        **{("float", i): "fits" for i in ("tinyint", "smallint")},
    }
    return exact.get((declared, event), "conflicts")


def declared_type_change(declared: str, field: Mapping) -> str:
    """type_change of a declared column (Spark type `declared`) and its field in an embedded
    Kafka Connect schema. A variable-scale decimal's schema gives no precision or scale: the
    declared ones decide."""
    if declared.startswith("array<") and field.get("type") == "array":
        items = declared_type_change(declared[6:-1], field.get("items") or {})
        return "conflicts" if items == "conflicts" else "fits"
    if declared.startswith("decimal") and field.get("name") == _VARIABLE_DECIMAL:
        return "fits"
    event = connect_encoding(dict(field))[1]
    if declared.startswith("decimal") and event == "string" and field.get("name") == _DECIMAL:
        return "conflicts"  # a Decimal wider than Spark's decimals: none holds its values
    return type_change(declared, event)


class DeclaredTypeConflict(ValueError):
    """Lines carry a column with a type its declared type cannot follow (see type_change)."""


# ---------------------------------------------------------------------------------------------
# Embedded schemas


@dataclass(frozen=True)
class EmbeddedSchema:
    """One distinct `schema` of JsonConverter-wrapped lines; `id` is what the lines hash to."""

    id: int
    columns: dict[str, dict]  # column name -> Kafka Connect field schema, in schema order


def _schema_text(value: Column) -> Column:
    # JsonConverter writes `{"schema":...,"payload":...}` compactly and in that order, so the
    # schema is the text before the first `,"payload":` (a field name would read `"payload"`).
    return F.substring_index(value, ',"payload":', 1)


def _has_schema(value: Column) -> Column:
    return value.startswith(_WRAPPED_PREFIX + "{")


def survey_aggregates(value: Column, shape: str) -> list[Column]:
    """The survey's aggregates over the lines' text `value` (see survey_lines): sets, so that
    sets found in parts of the lines (the file blocks of landing.read_surveyed_lines) merge by
    union. Envelope lines' fields are not surveyed (see survey_lines)."""
    sets = [F.collect_set(F.when(_has_schema(value), _schema_text(value)))]
    if not _images_are_maps(shape):
        # The flattened and row shapes hold the row at the top level of a bare line. Inside the
        # CASE, so that wrapped lines (schemas on) are not parsed at all here.
        keys = F.when(~value.startswith(_WRAPPED_PREFIX), F.json_object_keys(value))
        sets.append(F.collect_set(keys))
    return sets


def survey_values(found: Sequence[Any] | None) -> tuple[list[str], list[str]]:
    """The embedded schema texts and the bare lines' field names from the values of
    survey_aggregates."""
    if not found:
        return [], []
    fields = sorted({k for ks in (found[1] if len(found) > 1 else None) or [] for k in ks or []})
    return sorted(found[0] or []), fields


def survey_lines(lines: DataFrame, shape: str) -> tuple[list[str], list[str]]:
    """In one pass over the text: the distinct embedded schemas, as `{"schema":{...}` texts, and
    the field names of the rows in lines without one (schemas off: what the lines hold beyond
    the declared columns is only known from the lines themselves). A bronze model surveys in the
    pass that numbers the lines instead (landing.read_surveyed_lines).

    Envelope lines' fields are not surveyed (an empty list): the decoder reads their row images
    as maps and keeps the fields that are not columns line by line (see _images_are_maps), so
    the pass only cuts each line's text, without parsing its JSON. Parsing every line here
    as well took a quarter of a bronze run's decode: 2.0 of 8.6 s for 1M envelope lines, warm,
    on 2 cores (docs/benchmarks.md).

    A set of key lists stays small (rows of a table share their fields), and no sort is needed."""
    return survey_values(lines.agg(*survey_aggregates(F.col("value"), shape)).first())


def _images_are_maps(shape: str) -> bool:
    """Envelope lines (Debezium's default) hold the row in `before`/`after` objects, parsed as
    maps of raw JSON text: a column is a lookup, and the fields that are not columns are the
    rest of the map, so no earlier pass has to name them. The flattened and row shapes keep the
    row at the top level beside Debezium's own fields (`__lsn`...), read as numbers (see
    _payload_type), and keep the survey."""
    return shape == "envelope"


def _row_fields(schema: dict, shape: str) -> list[dict]:
    """The table's fields in a value schema: the envelope's after/before struct, or the row."""
    fields = schema.get("fields") or []
    if shape == "envelope":
        for image in ("after", "before"):
            for field in fields:
                if field.get("field") == image and field.get("type") == "struct":
                    return field.get("fields") or []
        return []
    return [f for f in fields if not str(f.get("field", "")).startswith("__")]


def parse_schemas(spark: SparkSession, texts: Iterable[str], shape: str) -> list[EmbeddedSchema]:
    """Parse schema texts and compute the id each one's lines hash to (one tiny local query)."""
    texts = sorted(set(texts))
    if not texts:
        return []
    ids = spark.range(1).select([F.xxhash64(F.lit(t)) for t in texts]).first()
    schemas = []
    for schema_id, text in zip(ids, texts, strict=True):
        try:
            schema = json.loads(text + "}")["schema"]
        except (ValueError, KeyError, TypeError):
            continue  # not a schema after all: its lines are rejected as unknown
        columns = {str(f["field"]): f for f in _row_fields(schema, shape) if "field" in f}
        schemas.append(EmbeddedSchema(id=int(schema_id), columns=columns))
    # Widest first, so an added column lands after the columns it was added to.
    return sorted(schemas, key=lambda s: -len(s.columns))


# ---------------------------------------------------------------------------------------------
# SQL building blocks. Expressions are SQL text so they can nest and be named (see _Plan).

Let = Callable[[str, str], str]


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _inline(sql: str, hint: str = "") -> str:
    """A Let that does not name anything (inside lambdas, where columns cannot be added)."""
    return f"({sql})"


def _try_cast(sql: str, out: str) -> str:
    if out.startswith(("array<", "map<", "struct<")):
        return f"from_json({sql}, {_lit(out)})"  # JSON text of a nested value
    return f"try_cast({sql} AS {out})"


def _from_micros(micros: str, out: str, let: Let) -> str:
    """Epoch microseconds read as UTC, without depending on the session time zone."""
    if out == "timestamp":
        return f"timestamp_micros({micros})"
    if out == "timestamp_ntz":
        # cast(timestamp AS timestamp_ntz) would use the session zone; an interval does not.
        seconds = f"try_cast({micros} AS decimal(18,0)) * 0.000001BD"
        return f"{_NTZ_EPOCH} + make_dt_interval(0, 0, 0, {seconds})"
    if out == "date":
        days = _floor_div(micros, 86400000000, let)
        return f"date_from_unix_date(try_cast({days} AS int))"
    if out in ("bigint", "decimal(38,0)"):
        return _try_cast(micros, out)
    return _try_cast(_from_micros(micros, "timestamp_ntz", let), out)


def _floor_div(sql: str, by: int, let: Let) -> str:
    v = let(sql, "n")
    return f"(({v} - pmod({v}, {by}L)) div {by}L)"


def _time_text(micros: str, let: Let) -> str:
    """Micros of the day as HH:mm:ss.SSSSSS (Spark has no time type)."""
    m = let(micros, "tm")
    parts = [
        f"lpad(cast({m} div 3600000000L AS string), 2, '0')",
        f"lpad(cast(pmod({m} div 60000000L, 60) AS string), 2, '0')",
        f"lpad(cast(pmod({m} div 1000000L, 60) AS string), 2, '0')",
    ]
    fraction = f"lpad(cast(pmod({m}, 1000000L) AS string), 6, '0')"
    text = f"concat({parts[0]}, ':', {parts[1]}, ':', {parts[2]}, '.', {fraction})"
    return f"if({m} IS NULL, NULL, {text})"


def _iso_time_text(raw: str, let: Let) -> str:
    """`13:14:15.123Z` (isostring mode) as HH:mm:ss.SSSSSS."""
    pattern = _lit(r"^([0-9]{2}:[0-9]{2}:[0-9]{2})(\.([0-9]+))?Z?$")
    hms = let(f"regexp_extract({raw}, {pattern}, 1)", "hms")
    fraction = f"rpad(substr(regexp_extract({raw}, {pattern}, 3), 1, 6), 6, '0')"
    return f"if({hms} = '', NULL, concat({hms}, '.', {fraction}))"


def _magnitude_hex(b64: str, let: Let) -> tuple[str, str]:
    """(is negative, hex digits) of base64 of an unscaled big-endian two's-complement integer:
    a leading hex digit >= 8 means negative, and complementing each digit then gives
    |value| - 1; otherwise the digits are |value|."""
    h = let(f"hex(try_to_binary({b64}, 'base64'))", "hex")
    neg = f"({h} >= '8')"
    digits = let(f"if({neg}, translate({h}, '0123456789ABCDEF', 'FEDCBA9876543210'), {h})", "mag")
    return neg, digits


def _decimal_text(b64: str, scale: str, let: Let) -> str:
    """Base64 of an unscaled big-endian two's-complement integer -> exact decimal text.

    Spark has no bytes-to-bigint, so: hex digits; a leading digit >= 8 means negative, and
    complementing each hex digit gives |value| - 1; that magnitude (up to 16 bytes, as much as
    decimal(38) holds) is two 64-bit `conv` halves. The point is placed with string functions
    because decimal division would round away digits."""
    neg, digits = _magnitude_hex(b64, let)
    padded = let(f"if(length({digits}) <= 32, lpad({digits}, 32, '0'), NULL)", "pad")
    high = f"try_cast(conv(substr({padded}, 1, 16), 16, 10) AS decimal(38,0))"
    low = f"try_cast(conv(substr({padded}, 17, 16), 16, 10) AS decimal(38,0))"
    magnitude = let(f"try_add(try_multiply({high}, {_TWO_POW_64}), {low})", "abs")
    absolute = f"if({neg}, try_add({magnitude}, 1BD), {magnitude})"
    text = let(f"concat(repeat('0', {scale}), cast({absolute} AS string))", "dec")
    integral = f"substr({text}, 1, length({text}) - {scale})"
    fraction = f"substr({text}, length({text}) - {scale} + 1)"
    return f"concat(if({neg}, '-', ''), {integral}, '.', {fraction})"


def _decimal_exact_text(b64: str, scale: int, let: Let) -> str:
    """Base64 of an unscaled two's-complement integer of any size -> its exact decimal text,
    `scale` digits after the point, as PostgreSQL prints a numeric(p,s): for numerics wider
    than Spark's decimals. The hex digits are read by the JVM's arbitrary-precision integer
    (scala.math.BigInt through `reflect`, never given NULL: it would throw). A negative value's
    complemented digits are |value| - 1, so one is added to their decimal text: its trailing
    nines become zeros and the digit before them grows by one."""
    neg, digits = _magnitude_hex(b64, let)
    big = let(
        f"if(coalesce({digits}, '') = '', NULL, "
        f"reflect('scala.math.BigInt', 'apply', {digits}, 16))",
        "big",
    )
    nines = let(f"length(regexp_extract({big}, {_lit('9*$')}, 0))", "nines")
    grown = f"cast(cast(substr({big}, length({big}) - {nines}, 1) AS int) + 1 AS string)"
    plus_one = (
        f"if({nines} = length({big}), concat('1', repeat('0', {nines})), "
        f"concat(substr({big}, 1, length({big}) - {nines} - 1), {grown}, repeat('0', {nines})))"
    )
    absolute = let(f"if({neg}, {plus_one}, {big})", "absolute")
    if scale == 0:
        return f"concat(if({neg}, '-', ''), {absolute})"
    padded = let(f"lpad({absolute}, greatest(length({absolute}), {scale + 1}), '0')", "padded")
    integral = f"substr({padded}, 1, length({padded}) - {scale})"
    fraction = f"substr({padded}, length({padded}) - {scale} + 1)"
    return f"concat(if({neg}, '-', ''), {integral}, '.', {fraction})"


def _decimal_from_long(b64: str, scale: int, let: Let) -> str:
    """Fast path when the unscaled value fits 64 bits (precision <= 18): `conv` to base -10
    reads 16 hex digits as a signed long once they are sign-extended; multiplying by an exact
    10^-scale literal keeps every digit."""
    h = let(f"hex(try_to_binary({b64}, 'base64'))", "hex")
    extended = f"if(length({h}) <= 16, lpad({h}, 16, if({h} >= '8', 'F', '0')), NULL)"
    unscaled = f"try_cast(conv({extended}, 16, -10) AS decimal(18,0))"
    if scale == 0:
        return unscaled
    return f"{unscaled} * 0.{'0' * (scale - 1)}1BD"


def decode_sql(enc: Encoding, raw: str, out: str, let: Let, depth: int = 0) -> str:
    """SQL turning the raw JSON text `raw` written with `enc` into a value of type `out`;
    NULL (never an error, even with ANSI mode on) when it cannot be decoded."""
    kind = enc.kind
    if kind == "text":
        return raw if out == "string" else _try_cast(raw, out)
    if kind == "plain":
        return _try_cast(raw, out)
    if kind in ("base64", "base64url", "hex"):
        if kind == "base64url":  # the URL-safe alphabet, padded to whole groups
            standard = f"translate({raw}, '-_', '+/')"
            raw = f"rpad({standard}, cast(ceil(length({raw}) / 4) * 4 AS int), '=')"
        binary = f"try_to_binary({raw}, {_lit('hex' if kind == 'hex' else 'base64')})"
        return binary if out == "binary" else _try_cast(binary, out)
    if kind == "decimal_base64":
        if out == "string":  # wider than Spark's decimals (numeric(50,10))
            return _decimal_exact_text(raw, enc.scale or 0, let)
        if _decimal_precision(out) <= 18 and enc.scale is not None and enc.scale <= 18:
            return _try_cast(_decimal_from_long(raw, enc.scale, let), out)
        return _try_cast(_decimal_text(raw, str(enc.scale), let), out)
    if kind == "variable_decimal":
        parts = let(f"from_json({raw}, 'scale int, value string')", "vsd")
        text = _decimal_text(f"{parts}.value", f"{parts}.scale", let)
        return _try_cast(f"if({parts}.scale < 0, NULL, {text})", out)  # PG 15 negative scale
    if kind == "epoch_days":
        return _cast_from(f"date_from_unix_date(try_cast({raw} AS int))", "date", out, let)
    if kind in ("epoch_millis", "epoch_micros", "epoch_nanos"):
        number = f"try_cast({raw} AS bigint)"
        micros = {
            "epoch_millis": f"try_multiply({number}, 1000L)",
            "epoch_micros": number,
            "epoch_nanos": _floor_div(number, 1000, let),
        }[kind]
        return _from_micros(micros, out, let)
    if kind == "zoned":
        # any other offset takes the general cast (an ISO string with an offset is unambiguous)
        general = f"try_cast({raw} AS timestamp)"
        if out == "timestamp_ntz":
            other = _cast_from(general, "timestamp", out, let)
            return f"if(endswith({raw}, 'Z'), {_utc_wall_clock(raw)}, {other})"
        utc = f"timestampdiff(MICROSECOND, {_NTZ_EPOCH}, {_utc_wall_clock(raw)})"
        instant = f"if(endswith({raw}, 'Z'), timestamp_micros({utc}), {general})"
        return _cast_from(instant, "timestamp", out, let)
    if kind == "iso_local":  # a wall clock with a literal Z
        if out == "timestamp_ntz":
            other = f"try_cast({raw} AS timestamp_ntz)"
            return f"if(endswith({raw}, 'Z'), {_utc_wall_clock(raw)}, {other})"
        return _cast_from(f"try_cast({raw} AS timestamp)", "timestamp", out, let)
    if kind == "iso_date":
        date = f"try_cast(trim(TRAILING 'Z' FROM {raw}) AS date)"
        return _cast_from(date, "date", out, let)
    if kind in ("millis_time", "micros_time", "nanos_time"):
        number = f"try_cast({raw} AS bigint)"
        micros = {
            "millis_time": f"try_multiply({number}, 1000L)",
            "micros_time": number,
            "nanos_time": _floor_div(number, 1000, let),
        }[kind]
        return _cast_from(_time_text(micros, let), "string", out, let)
    if kind == "iso_time":
        return _cast_from(_iso_time_text(raw, let), "string", out, let)
    if kind == "array" and enc.item is not None and out.startswith("array<"):
        item_out = out[6:-1]
        if enc.item.kind in ("text", "plain"):
            return f"from_json({raw}, {_lit(out)})"
        x = f"x{depth}"
        item = decode_sql(enc.item, x, item_out, _inline, depth + 1)
        return f"transform(from_json({raw}, 'array<string>'), {x} -> {item})"
    return raw if out == "string" else _try_cast(raw, out)


def _utc_wall_clock(raw: str) -> str:
    """`...Z` read as a timestamp_ntz: Spark parses a zone with a regex per row, and Debezium's
    UTC strings do not need it (this halves the cost of a timestamptz column)."""
    return f"try_cast(substr({raw}, 1, length({raw}) - 1) AS timestamp_ntz)"


def _cast_from(sql: str, src: str, out: str, let: Let) -> str:
    if src == out:
        return sql
    if src == "timestamp":
        return _from_micros(f"unix_micros({sql})", out, let)
    return _try_cast(sql, out)


def _epoch_micros_sql(sql: str, src: str) -> str:
    """Epoch microseconds of a decoded timestamp/date column (UTC wall clock for ntz)."""
    if src == "timestamp":
        return f"unix_micros({sql})"
    if src == "timestamp_ntz":
        return f"timestampdiff(MICROSECOND, {_NTZ_EPOCH}, {sql})"
    if src == "date":
        return f"try_multiply(cast(unix_date({sql}) AS bigint), 86400000000L)"
    return _try_cast(sql, "bigint")


def unavailable_sql(raw: str, placeholder: str, is_array: bool) -> str:
    """True when the raw JSON text is Debezium's unchanged-TOAST placeholder, in any form:
    the string (a bytea's too with binary.handling.mode=hex, DBZ-7599; the base64 modes send
    NULL, see discover.toast_losses), base64 of its bytes (a bytea in the default `bytes` mode,
    precise decimals), an array holding either (a text
    array holds the string, a `bytea[]` the base64: Debezium 3.6 sends an unchanged TOASTed
    bytea[] as `["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]`), or the int/bigint array of its
    bytes (older Debezium)."""
    data = placeholder.encode()
    forms = [placeholder, base64.b64encode(data).decode()]
    if is_array:
        as_ints = "[" + ",".join(map(str, data)) + "]"
        held = " OR ".join(f"contains({raw}, {_lit(json.dumps(form))})" for form in forms)
        return f"({raw} = {_lit(as_ints)} OR ({raw} LIKE '[%' AND ({held})))"
    return f"{raw} IN ({', '.join(_lit(form) for form in forms)})"


class _Plan:
    """Named intermediate expressions, applied as successive projections.

    CollapseProject never inlines a non-trivial expression into a projection that uses it more
    than once, so naming a shared sub-expression here is how it gets computed once per row
    (Spark's own subexpression elimination skips CASE/IF branches, where most of ours live).

    Whole-stage codegen fuses all these projections into one Java method, and HotSpot does not
    JIT-compile a method over 8000 bytes of bytecode: past that, decoding ran twice as slow.
    So per-column work is generated only where it can matter (placeholder checks on TOASTable
    columns, decode-failure checks on decoders that can fail). Very wide tables still go past
    it; there `spark.sql.codegen.hugeMethodLimit=8000` lets Spark fall back to per-operator
    code, which it does split into small methods.
    """

    _REF = re.compile(r"`(__cdc_\w+)`")

    def __init__(self) -> None:
        self.levels: dict[str, int] = {}
        self.exprs: dict[str, str] = {}

    def let(self, sql: str, hint: str = "t") -> str:
        deps = [self.levels[n] for n in self._REF.findall(sql) if n in self.levels]
        name = f"__cdc_{hint}_{len(self.exprs)}"
        self.levels[name] = 1 + max(deps, default=0)
        self.exprs[name] = sql
        return quote_identifier(name)

    def apply(self, df: DataFrame) -> DataFrame:
        for level in sorted(set(self.levels.values())):
            named = [n for n, lvl in self.levels.items() if lvl == level]
            df = df.select("*", *[F.expr(self.exprs[n]).alias(n) for n in named])
        return df


# ---------------------------------------------------------------------------------------------
# Columns: which ones, their output types and per-line-schema decoders


# Only variable-length PostgreSQL values are TOASTed: checking just the columns that can carry
# the placeholder keeps the generated code small (see _Plan).
_TOASTABLE_KINDS = {
    *("text", "plain", "base64", "base64url", "hex", "decimal_base64", "variable_decimal"),
    "array",
}  # (a hex bytea's placeholder is the string, DBZ-7599)


@dataclass(frozen=True)
class _Column:
    name: str
    out: str  # Spark SQL output type
    declared: Encoding | None  # for lines without an embedded schema
    by_schema: dict[int, Encoding]  # embedded schema id -> encoding, where the column exists

    @property
    def encodings(self) -> set[Encoding]:
        return {*self.by_schema.values(), *([self.declared] if self.declared else [])}

    @property
    def toastable(self) -> bool:
        variable_length = self.out in ("string", "binary") or self.out.startswith(
            ("decimal", "array<")
        )
        return variable_length and all(e.kind in _TOASTABLE_KINDS for e in self.encodings)

    @property
    def can_fail(self) -> bool:
        """False when decoding is the identity (a string kept as is)."""
        return self.out != "string" or any(e.kind != "text" for e in self.encodings)


def _columns(spec: TableSpec, schemas: Sequence[EmbeddedSchema]) -> list[_Column]:
    names = list(spec.columns)
    names += [k for k in (*spec.key, *spec.order_by) if k not in names]
    derived: dict[str, str] = {}
    for schema in schemas:
        for name, field in schema.columns.items():
            if name not in names:
                names.append(name)  # added at the source: it must flow through
            natural = connect_encoding(field)[1]
            derived[name] = widen(derived[name], natural) if name in derived else natural
    columns = []
    for name in names:
        declared = spec.columns.get(name)
        fields = [s.columns[name] for s in schemas if name in s.columns]
        encoding = declared_encoding(declared, spec) if declared else None
        by_schema = {
            s.id: _text_as_declared(connect_encoding(s.columns[name])[0], encoding)
            for s in schemas
            if name in s.columns
        }
        columns.append(
            _Column(
                name=name,
                out=_declared_out(spec, name, fields) if declared else derived.get(name, "string"),
                declared=encoding,
                by_schema=by_schema,
            )
        )
    return columns


def _text_as_declared(found: Encoding, declared: Encoding | None) -> Encoding:
    """The encoding of a schema's string field where a bytea is declared: with
    binary.handling.mode base64, base64-url-safe or hex, Debezium writes bytes as text and its
    schema says `string`; the declared mode says how to read it (arrays element by element)."""
    if declared is None:
        return found
    if found == TEXT and declared.kind in ("base64url", "hex", "base64"):
        return declared
    if found.kind == declared.kind == "array" and found.item and declared.item:
        return Encoding("array", item=_text_as_declared(found.item, declared.item))
    return found


def _declared_out(spec: TableSpec, name: str, fields: Sequence[Mapping]) -> str:
    """Output type of declared column `name`, whose field in each embedded schema of the batch
    is one of `fields`. The declared type, unless the source widened the column in place: then
    the events' type, widened as a column nobody declared is (the bronze table follows in place,
    see the adapter's widen_column_types). A type that contradicts the declaration stops here,
    before any line is read (schemas off, the declared type decides alone)."""
    declared = spec.columns[name]
    out = spark_type(declared)
    wider = []
    for field in fields:
        change, event = declared_type_change(out, field), connect_encoding(dict(field))[1]
        if _bytes_as_text(out, field, spec.binary_handling_mode):
            change = "fits"
        if change == "widens":
            wider.append(event)
        elif change == "conflicts":
            instead = "a type that holds both"
            params = field.get("parameters") or {}
            if field.get("name") == _DECIMAL and event == "string":  # wider than 38 digits
                precision = params.get("connect.decimal.precision")
                instead = f"`numeric({precision},{params.get('scale', 0)})` (kept as exact text)"
            elif type_change(event, out) == "fits" and out != "binary":
                instead = f"`{declared_type(event)}`, which holds both,"
            spelled = declared if out == declared else f"{declared} ({out})"
            raise DeclaredTypeConflict(
                f"{spec.topic}: column {name} is declared {spelled}, but its events carry "
                f"{event} (Kafka Connect {_connect_type_name(field)}): a type change at the "
                "source (or a wrong declaration) that the declared type cannot follow in place. "
                f"Nothing was written. Declare {instead} in the table's `columns` "
                "(tables/<source>.yml), run `make tables` and build again."
            )
    return reduce(widen, wider) if wider else out


def _bytes_as_text(out: str, field: Mapping, binary_mode: str) -> bool:
    """A bytea (or bytea[]) whose schema says `string`: how binary.handling.mode base64,
    base64-url-safe and hex write bytes. With `bytes` (the default) it is a type change."""
    if binary_mode == "bytes":
        return False
    if out == "array<binary>" and field.get("type") == "array":
        field = field.get("items") or {}
        out = "binary"
    return out == "binary" and field.get("type") == "string"


def _connect_type_name(field: Mapping) -> str:
    name, kind = field.get("name"), field.get("type")
    if name == _DECIMAL:
        params = field.get("parameters") or {}
        precision = params.get("connect.decimal.precision", "?")
        return f"Decimal, precision {precision}, scale {params.get('scale', 0)}"
    return f"{kind} {name}" if name else str(kind)


def _column_sql(col: _Column, raw: str, schema_id: str, let: Let) -> str:
    """Decoder for one column; a CASE on the line's schema id only where encodings differ."""
    unwrapped = col.declared
    if unwrapped is None:
        found = set(col.by_schema.values())
        unwrapped = found.pop() if len(found) == 1 else TEXT
    branches: dict[Encoding, list[int]] = {}
    for sid, enc in col.by_schema.items():
        branches.setdefault(enc, []).append(sid)
    if not branches or set(branches) == {unwrapped}:
        return decode_sql(unwrapped, raw, col.out, let)
    cases = [f"WHEN {schema_id} IS NULL THEN {decode_sql(unwrapped, raw, col.out, let)}"]
    for enc, ids in branches.items():
        cases.append(
            f"WHEN {schema_id} IN ({', '.join(map(str, ids))}) "
            f"THEN {decode_sql(enc, raw, col.out, let)}"
        )
    return f"CASE {' '.join(cases)} END"


def _payload_type(spec: TableSpec, names: list[str]) -> T.StructType:
    """from_json schema: every payload column a string, so Spark keeps the raw JSON text.

    Debezium's own int64 metadata is read as bigint: Spark turns a number into a string by
    running a JSON generator per value, which is most of the parse cost of a short field."""
    row = [T.StructField(n, T.StringType()) for n in names]
    if spec.shape == "envelope":
        source = T.StructType([T.StructField(n, T.LongType()) for n in ("ts_ms", "txId", "lsn")])
        image = T.MapType(T.StringType(), T.StringType())  # see _images_are_maps
        fields = [
            T.StructField("before", image),
            T.StructField("after", image),
            T.StructField("op", T.StringType()),
            T.StructField("source", source),
        ]
    elif spec.shape == "flattened":
        extra = [
            T.StructField(n, T.StringType() if n in ("__op", "__deleted") else T.LongType())
            for n in FLATTENED_FIELDS
            if n not in names
        ]
        fields = row + extra
    else:
        fields = row
    return T.StructType(fields + [T.StructField(_CORRUPT, T.StringType())])


def _parse(lines: DataFrame, payload: T.StructType) -> DataFrame:
    """Parse each line once: wrapped lines with the wrapper schema, bare ones without.

    Tombstones (`null`), blank lines and wrappers with a null payload are dropped here."""
    value = F.col("value")
    options = {"columnNameOfCorruptRecord": _CORRUPT}
    wrapper = T.StructType(
        [T.StructField("payload", payload), T.StructField(_CORRUPT, T.StringType())]
    )
    wrapped = value.startswith(_WRAPPED_PREFIX)
    w = F.when(wrapped, F.from_json(value, wrapper, options))
    b = F.when(~wrapped, F.from_json(value, payload, options))
    schema_id = F.when(_has_schema(value), F.xxhash64(_schema_text(value)))
    # Filter on the text only: a filter on parsed fields would be pushed below the projection
    # and parse every line a second time.
    trimmed = F.trim(value)
    null_payload = wrapped & trimmed.endswith(',"payload":null}')
    # The line 0 of a file that was not read has no text: it is kept, to be rejected.
    kept = ((trimmed != "") & (trimmed != "null") & ~null_payload) | F.col(
        "_cdc_file_problem"
    ).isNotNull()
    parsed = lines.where(kept).select(
        "*", w.alias("__cdc_w"), b.alias("__cdc_b"), schema_id.alias("__cdc_sid")
    )
    return parsed.select(
        "*",
        F.coalesce(F.col("__cdc_w.payload"), F.col("__cdc_b")).alias("__cdc_p"),
        F.coalesce(F.col(f"__cdc_w.{_CORRUPT}"), F.col(f"__cdc_b.{_CORRUPT}"))
        .isNotNull()
        .alias("__cdc_bad"),
    ).drop("__cdc_w", "__cdc_b")


def _op_and_image(spec: TableSpec) -> tuple[str, str]:
    """SQL for the operation and for the struct that holds the row's values."""
    p = "`__cdc_p`"
    if spec.shape == "envelope":
        # deletes carry the row in `before` (only the key with REPLICA IDENTITY DEFAULT)
        return f"{p}.op", f"if({p}.op = 'd', {p}.before, {p}.after)"
    if spec.shape == "flattened":
        # rewrite mode marks deletes with __deleted; without __op a row is an upsert
        op = f"if({p}.__deleted = 'true', 'd', coalesce({p}.__op, 'u'))"
    else:
        op = "'u'"  # query-based rows are the latest state: upserts
    return f"if(`__cdc_bad`, NULL, {op})", p


def _change_metadata(
    spec: TableSpec, decoded: dict[str, str], columns: dict[str, _Column]
) -> tuple[str, str, str]:
    """SQL for `_cdc_seq`, `_cdc_source_ts` and `_cdc_tx_id`."""
    p = "`__cdc_p`"
    if spec.shape == "envelope":
        seq, ts_ms, tx = f"{p}.source.lsn", f"{p}.source.ts_ms", f"{p}.source.txId"
    elif spec.shape == "flattened":
        seq, ts_ms = f"coalesce({p}.__lsn, {p}.__source_lsn)", f"{p}.__source_ts_ms"
        tx = f"coalesce({p}.__txId, {p}.__source_txId)"
    else:
        ts_col = spec.order_by[0]
        micros = _epoch_micros_sql(decoded[ts_col], columns[ts_col].out)
        tie = "0BD"
        if len(spec.order_by) > 1:
            tie = f"coalesce(try_cast({decoded[spec.order_by[1]]} AS decimal(38,0)), 0BD)"
        # timestamp first, the incrementing column (< 10^19) breaks ties
        scaled = f"try_multiply(try_cast({micros} AS decimal(38,0)), 10000000000000000000BD)"
        seq = f"try_add({scaled}, {tie})"
        return (
            f"try_cast({seq} AS decimal(38,0))",
            f"timestamp_micros({micros})",
            "CAST(NULL AS bigint)",
        )
    source_ts = f"timestamp_micros(try_multiply(try_cast({ts_ms} AS bigint), 1000L))"
    return f"try_cast({seq} AS decimal(38,0))", source_ts, f"try_cast({tx} AS bigint)"


def _reason_sql(
    spec: TableSpec,
    columns: list[_Column],
    op: str,
    raw: dict[str, str],
    decoded: dict[str, str],
    unavailable: dict[str, str],
    schemas: Sequence[EmbeddedSchema],
) -> str:
    """Why a line is rejected (NULL when it is fine); the first failing check wins. A file that
    was not read (see landing.LandingFile.problem) gives one line 0 with its problem."""
    cases = [
        "WHEN `_cdc_file_problem` IS NOT NULL THEN `_cdc_file_problem`",
        "WHEN `__cdc_bad` THEN 'invalid JSON'",
    ]
    unknown = "`__cdc_sid` IS NOT NULL"
    if schemas:
        unknown += f" AND `__cdc_sid` NOT IN ({', '.join(str(s.id) for s in schemas)})"
    cases.append(f"WHEN {unknown} THEN 'unknown embedded schema'")
    quote = _lit("'")
    cases.append(
        f"WHEN {op} IS NULL OR {op} NOT IN ({', '.join(map(_lit, OPS))}) "
        f"THEN concat('unknown op ', {quote}, coalesce({op}, ''), {quote})"
    )
    for key in spec.key:
        missing = f"{raw[key]} IS NULL"
        if key in unavailable:
            missing += f" OR {unavailable[key]}"
        cases.append(f"WHEN {op} <> 't' AND ({missing}) THEN {_lit(f'missing key column {key}')}")
    for c in columns:
        if not c.can_fail:
            continue
        present = f"{raw[c.name]} IS NOT NULL"
        if c.name in unavailable:
            present += f" AND NOT {unavailable[c.name]}"
        if c.out.startswith("decimal"):
            # a numeric NaN or infinity, as decimal.handling.mode string (`NAN`) and double
            # write it: no Spark decimal holds one, so it is NULL, as precise mode sends it
            # (docs/types.md)
            specials = ", ".join(map(_lit, NUMERIC_SPECIALS))
            present += f" AND upper({raw[c.name]}) NOT IN ({specials})"
        failed = f"{present} AND {decoded[c.name]} IS NULL"
        cases.append(f"WHEN {failed} THEN {_lit(f'cannot decode {c.name} as {c.out}')}")
    return f"CASE {' '.join(cases)} END"


def loaded_at_sql(loaded_at: datetime | None) -> str:
    """One value for the whole batch; a naive datetime is taken as UTC."""
    moment = loaded_at or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // _ONE_MICROSECOND
    return f"timestamp_micros({micros}L)"


_ONE_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)


def _with_line_columns(lines: DataFrame) -> DataFrame:
    """Lines may come from elsewhere than read_landing_lines (tests, replays): fill the gaps."""
    defaults = {
        "_cdc_file": "string",
        "_cdc_line": "int",
        "_cdc_offset": "bigint",
        "_cdc_file_problem": "string",
    }
    for name, sql_type in defaults.items():
        if name not in lines.columns:
            lines = lines.withColumn(name, F.lit(None).cast(sql_type))
    return lines


def undeclared_fields(
    spec: TableSpec, names: Iterable[str], bare_fields: Iterable[str]
) -> list[str]:
    """Fields of bare lines that are not columns: Debezium's own (`__op`...) excepted."""
    known = set(names)
    return sorted(
        f
        for f in bare_fields
        if f not in known and not (spec.shape == "flattened" and f.startswith("__"))
    )


def undeclared_sql(raw: dict[str, str], fields: Sequence[str]) -> str:
    """`_cdc_undeclared`: the raw JSON text of each undeclared field a line holds, as a JSON
    object of strings (NULL when none), so that a later declaration decodes them exactly."""
    if not fields:
        return "CAST(NULL AS string)"
    pairs = ", ".join(f"{_lit(f)}, {raw[f]}" for f in fields)
    return f"nullif(to_json(named_struct({pairs})), '{{}}')"


def undeclared_map_sql(image: str, names: Sequence[str]) -> str:
    """`_cdc_undeclared` of a row image read as a map (see _images_are_maps): its entries that
    are not columns, as undeclared_sql writes them (JSON nulls left out, NULL when none), in
    the line's order."""
    known = ", ".join(_lit(n) for n in names)
    kept = f"map_filter({image}, (k, v) -> v IS NOT NULL AND k NOT IN ({known}))"
    # Most lines hold columns only: counting the columns a line holds keeps the filter, a
    # lambda Spark evaluates interpreted, off their path.
    held = " + ".join(f"int(map_contains_key({image}, {_lit(n)}))" for n in names)
    return f"if(size({image}) > {held}, nullif(to_json({kept}), '{{}}'), NULL)"


@dataclass(frozen=True)
class Backfill:
    """SQL over a bronze table's row that decodes one newly declared column from the text kept
    in `_cdc_undeclared`, with the decoder the column would have had from the start."""

    name: str
    out: str  # Spark SQL type
    raw: str  # the field's raw JSON text (NULL when the line did not hold it)
    value: str  # the decoded value (NULL for an unchanged-TOAST placeholder)
    unavailable: str  # true when the value is Debezium's unchanged-TOAST placeholder
    failed: str  # true when the text does not decode as `out` (the line would be rejected)


def backfills(spec: TableSpec, names: Iterable[str]) -> list[Backfill]:
    """How to fill declared columns `names` of rows loaded while they were undeclared."""
    found = []
    for name in names:
        declared = spec.columns[name]
        col = _Column(
            name=name,
            out=spark_type(declared),
            declared=declared_encoding(declared, spec),
            by_schema={},
        )
        field = quote_identifier(name)
        raw = f"from_json(_cdc_undeclared, {_lit(f'{field} string')}).{field}"
        decoded = decode_sql(col.declared, raw, col.out, _inline)
        unavailable = "false"
        if col.toastable:
            placeholder = unavailable_sql(raw, spec.toast_placeholder, col.out.startswith("array<"))
            unavailable = f"coalesce({placeholder}, false)"
        failed = "false"
        if col.can_fail:
            failed = f"({raw} IS NOT NULL AND NOT {unavailable} AND ({decoded}) IS NULL)"
        value = f"if({unavailable}, NULL, {decoded})"
        found.append(Backfill(name, col.out, raw, value, unavailable, failed))
    return found


def decode_changes(
    lines: DataFrame,
    spec: TableSpec,
    loaded_at: datetime | None = None,
    schema_texts: Iterable[str] | None = None,
    bare_fields: Iterable[str] | None = None,
) -> DataFrame:
    """Typed change rows from raw landing lines (see read_landing_lines).

    Columns, in order: the table's columns (declared ones first, then key and
    embedded-schema-only columns), `_cdc_op`, `_cdc_seq` decimal(38,0), `_cdc_source_ts`,
    `_cdc_tx_id`, `_cdc_unavailable_columns`, `_cdc_file`, `_cdc_line`, `_cdc_offset`,
    `_cdc_loaded_at`, `_cdc_reject_reason`, `_cdc_raw`, `_cdc_undeclared`.

    schema_texts: the embedded schemas and bare_fields: the row fields
    of lines without one (see survey_lines). Both are collected from `lines` with one extra
    pass when not given. Lines whose schema is not among them are rejected; fields of
    bare lines that are not columns are kept, as text, in `_cdc_undeclared` (envelope lines:
    whatever bare_fields says, from each line's own row image, see _images_are_maps).
    """
    spark = lines.sparkSession
    if schema_texts is None or bare_fields is None:
        surveyed_texts, surveyed_fields = survey_lines(lines, spec.shape)
        schema_texts = surveyed_texts if schema_texts is None else schema_texts
        bare_fields = surveyed_fields if bare_fields is None else bare_fields
    schemas = parse_schemas(spark, schema_texts, spec.shape)
    columns = _columns(spec, schemas)
    by_name = {c.name: c for c in columns}
    names = [c.name for c in columns]
    maps = _images_are_maps(spec.shape)
    undeclared = [] if maps else undeclared_fields(spec, names, bare_fields)

    plan = _Plan()
    op_sql, image_sql = _op_and_image(spec)
    op = plan.let(op_sql, "op")
    image = plan.let(image_sql, "img")
    if maps:
        # One lookup per column and line: written out at each use instead, the lookups made the
        # generated code too large to be compiled early (1M lines in a fresh JVM: 18-20 s
        # against 12.7-13 s).
        raw = {n: plan.let(f"{image}[{_lit(n)}]", "raw") for n in names}
        undeclared_value = undeclared_map_sql(image, names)
    else:
        raw = {n: f"{image}.{quote_identifier(n)}" for n in names + undeclared}
        undeclared_value = undeclared_sql(raw, undeclared)
    decoded = {
        c.name: plan.let(_column_sql(c, raw[c.name], "`__cdc_sid`", plan.let), "v") for c in columns
    }
    unavailable = {
        c.name: plan.let(
            unavailable_sql(raw[c.name], spec.toast_placeholder, c.out.startswith("array<")),
            "ua",
        )
        for c in columns
        if c.toastable
    }
    seq, source_ts, tx_id = _change_metadata(spec, decoded, by_name)
    reason = plan.let(_reason_sql(spec, columns, op, raw, decoded, unavailable, schemas), "why")
    flagged = [f"if({ua}, {_lit(n)}, NULL)" for n, ua in unavailable.items()]
    # A table without a TOASTable column (all fixed-width) still gets a string column: a bare
    # NULL is Spark's void type, which no table format stores (Iceberg v2 rejects `unknown`).
    unavailable_list = "CAST(NULL AS string)"
    if flagged:
        unavailable_list = f"nullif(concat_ws(',', {', '.join(flagged)}), '')"

    staged = plan.apply(_parse(_with_line_columns(lines), _payload_type(spec, names + undeclared)))
    output = [
        F.expr(
            f"if({unavailable[n]}, NULL, {decoded[n]})" if n in unavailable else decoded[n]
        ).alias(n)
        for n in names
    ]
    output += [
        F.expr(op).alias("_cdc_op"),
        F.expr(seq).alias("_cdc_seq"),
        F.expr(source_ts).alias("_cdc_source_ts"),
        F.expr(tx_id).alias("_cdc_tx_id"),
        F.expr(unavailable_list).alias("_cdc_unavailable_columns"),
        F.col("_cdc_file"),
        F.col("_cdc_line").cast("int"),
        F.col("_cdc_offset").cast("bigint"),
        F.expr(loaded_at_sql(loaded_at)).alias("_cdc_loaded_at"),
        F.expr(reason).alias("_cdc_reject_reason"),
        F.expr(f"if({reason} IS NULL, NULL, value)").alias("_cdc_raw"),
        F.expr(undeclared_value).alias("_cdc_undeclared"),
    ]
    return staged.select(*output)
