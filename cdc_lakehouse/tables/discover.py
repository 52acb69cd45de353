"""Registry entries discovered from a live PostgreSQL or from a landing zone.

`from-postgres` reads the catalog of a running PostgreSQL (columns and their types, primary
keys, table and column comments as descriptions); `from-landing` reads the first schema-bearing
line of every topic folder of a landing zone written with JsonConverter schemas on (column types
from the embedded Kafka Connect schema). Both select tables with shell-style name patterns and
add the tables not registered yet to `tables/<source>.yml` (created if missing), appended as text
so a hand-edited file keeps its comments; entries already there are left alone and differences
are reported. A table without a primary key is reported and skipped, never guessed: give its key
with `--key table=col1,col2`.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdc_lakehouse.bronze.decode import _row_fields, connect_encoding
from cdc_lakehouse.bronze.spec import CONNECTOR_MODES, declared_type, spark_type, wide_decimal_scale
from cdc_lakehouse.capture.config import kafka_topic
from cdc_lakehouse.tables.registry import (
    NAME,
    REGISTRY_DIR,
    entry_models,
    load_source,
    qualified_model,
)

DEFAULT_PASSWORD_ENV = "CDC_PG_PASSWORD"


class DiscoveryError(ValueError):
    """Nothing could be discovered as asked (no such schema, unreadable landing...)."""


@dataclass
class Found:
    """A discovered table, before it becomes registry text."""

    name: str
    key: list[str]
    columns: list[tuple[str, str, str | None]]  # name, declared type, description
    description: str | None = None
    topic: str | None = None
    shape: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "table: why"
    notes: list[str] = field(default_factory=list)

    def print(self, path: Path) -> None:
        print(f"{path}: {len(self.added)} table(s) added: {', '.join(self.added) or '-'}")
        for line in self.skipped:
            print(f"skipped {line}")
        for line in self.notes:
            print(f"note    {line}")


# -- type mapping -------------------------------------------------------------------------------


# Types whose registry type is what Debezium's PostgreSQL connector writes for them (its "Data
# type mappings", default handling modes), as a real capture showed: `money` a Connect Decimal of
# scale `money.fraction.digits` (2) and no precision; `bit(1)` a boolean, other bit strings
# io.debezium.data.Bits bytes; `interval` io.debezium.time.MicroDuration, an int64 of
# microseconds; `oid` an int64.
_DEBEZIUM_DECLARED = {
    "money": "numeric(38,2)",
    "bit": "boolean",
    "bit(1)": "boolean",
    "oid": "bigint",
}
_BITS_NOTE = (
    "type {} is read as bytes: Debezium's bits, as an unsigned number, least significant byte first"
)
_INTERVAL_NOTES = {
    "numeric": "type {} is declared bigint: microseconds, as Debezium writes it with "
    "interval.handling.mode=numeric (the default)",
    "string": "type {} is declared text: ISO 8601 (P1Y2M3DT4H5M6.78S), as Debezium writes it "
    "with interval.handling.mode=string",
}


# Geometric types other than `point` are not in Debezium's type map: its events leave such a
# column out (`include.unknown.datatypes` is off by default).
_NOT_CAPTURED = {"line", "lseg", "box", "path", "polygon", "circle"}
_NOT_CAPTURED_NOTE = (
    "type {} is not in Debezium's type map: its events leave the column out, it stays empty"
)


# Where Debezium (3.6) sends an unchanged TOASTed value as NULL instead of its placeholder,
# by binary.handling.mode: a bytea in base64 and base64-url-safe (DBZ-7599 gave only `hex` the
# placeholder), a bytea[] in every mode but `bytes` (debezium/dbz#2418: an array's placeholder
# depends on its elements' schema). Measured with the capture tool; silver cannot tell such a
# NULL from a real one.
_TOAST_NULLED = {
    "base64": ("bytea", "bytea[]"),
    "base64-url-safe": ("bytea", "bytea[]"),
    "hex": ("bytea[]",),
}


def toast_losses(table: Found, binary_mode: str) -> list[str]:
    """Notes for the columns whose unchanged TOASTed values `binary_mode` turns into NULLs."""
    return [
        f"{name}: with binary.handling.mode={binary_mode} Debezium sends an unchanged TOASTed "
        f"{declared} as NULL, not its placeholder: an UPDATE that leaves a large value alone "
        "empties it in silver; capture with binary.handling.mode=bytes (the default)"
        for name, declared, _ in table.columns
        if declared in _TOAST_NULLED.get(binary_mode, ())
    ]


_WIDE_NUMERIC_NOTE = (
    "type {} has more digits than Spark's decimals (38): the lake keeps its exact digits as text"
)


def declared_from_postgres(pg_type: str, interval_mode: str = "numeric") -> tuple[str, str | None]:
    """A registry type for a PostgreSQL type as `format_type` spells it, and a note when it
    has no typed mapping (kept as text: enums, network and geometric types...) or one a reader
    should know about. `interval_mode`: the connector's interval.handling.mode."""
    t = pg_type.strip()
    if t.endswith("[]"):
        inner, note = declared_from_postgres(t[:-2], interval_mode)
        return f"{inner}[]", note
    lowered = t.lower()
    if lowered.startswith("time") and not lowered.startswith("timestamp"):
        # Debezium writes a timetz as io.debezium.time.ZonedTime text, in UTC: `11:14:15.5Z`;
        # a time's precision decides its unit (milliseconds up to 3 in the adaptive modes)
        if lowered.endswith("with time zone"):
            return "timetz", None
        precision = re.search(r"\(\d+\)", lowered)
        return "time" + (precision.group(0) if precision else ""), None
    if lowered in _DEBEZIUM_DECLARED:
        return _DEBEZIUM_DECLARED[lowered], None
    if lowered.startswith(("bit(", "bit varying")):
        # registered as itself: Debezium's Bits stay bytes whatever binary.handling.mode says
        return t, _BITS_NOTE.format(pg_type)
    if lowered.startswith("interval"):
        declared = "bigint" if interval_mode == "numeric" else "text"
        return declared, _INTERVAL_NOTES[interval_mode].format(pg_type)
    if lowered in _NOT_CAPTURED:
        return "text", _NOT_CAPTURED_NOTE.format(pg_type)
    try:
        spark_type(t)
        if wide_decimal_scale(t) is not None:
            return t, _WIDE_NUMERIC_NOTE.format(pg_type)
        return t, None
    except ValueError:
        return "text", f"type {pg_type} is read as text"


_LOGICAL_DECLARED = {
    "io.debezium.data.Json": "jsonb",
    "io.debezium.data.Uuid": "uuid",
    "io.debezium.time.ZonedTime": "timetz",
}


def declared_from_connect(field_schema: Mapping[str, Any]) -> str:
    """A registry type for one field of an embedded Kafka Connect schema."""
    if field_schema.get("name") in _LOGICAL_DECLARED:
        return _LOGICAL_DECLARED[field_schema["name"]]
    if field_schema.get("type") == "array":
        return declared_from_connect(field_schema.get("items") or {}) + "[]"
    return declared_type(connect_encoding(dict(field_schema))[1])


# -- PostgreSQL ---------------------------------------------------------------------------------

# A domain column is declared as the domain's base type (through domains over domains, with
# the type modifier of the domain that set it: `create domain price as numeric(10,2)`), since
# Debezium writes it as that base type; so is the element of an array of domains (Debezium
# 3.6 leaves such arrays out of its events, see `domain_array`). format_type would give the
# domain's own name, which no registry type matches.
COLUMNS_SQL = """
with recursive domain_base (oid, base, typmod) as (
    select oid, typbasetype, typtypmod from pg_type where typtype = 'd'
    union all
    select d.oid, t.typbasetype, case when t.typtypmod >= 0 then t.typtypmod else d.typmod end
    from domain_base d
    join pg_type t on t.oid = d.base and t.typtype = 'd'
),
domain_root as (
    select d.oid, d.base, d.typmod, b.typarray as base_array
    from domain_base d
    join pg_type b on b.oid = d.base and b.typtype <> 'd'
),
columns as (
    select n.nspname, c.relname, a.attnum, a.attname, c.oid as relid, a.attgenerated,
           c.relpersistence = 'u' as unlogged,
           coalesce(r.base, a.atttypid) as type_oid,
           case when r.oid is null then a.atttypmod else r.typmod end as typmod
    from pg_attribute a
    join pg_class c on c.oid = a.attrelid
    join pg_namespace n on n.oid = c.relnamespace
    left join domain_root r on r.oid = a.atttypid
    where c.relkind in ('r', 'p') and not c.relispartition
      and a.attnum > 0 and not a.attisdropped and n.nspname = any(%s)
)
select c.nspname, c.relname, c.attname,
       case
           when e.base_array <> 0 then format_type(e.base_array, e.typmod)
           else format_type(c.type_oid, c.typmod)
       end,
       col_description(c.relid, c.attnum), obj_description(c.relid, 'pg_class'),
       e.oid is not null as domain_array, c.attgenerated = 's' as generated, c.unlogged
from columns c
join pg_type t on t.oid = c.type_oid
left join domain_root e on e.oid = t.typelem and t.typcategory = 'A'
order by c.nspname, c.relname, c.attnum
"""

KEYS_SQL = """
select n.nspname, c.relname, a.attname
from pg_constraint k
join pg_class c on c.oid = k.conrelid
join pg_namespace n on n.oid = c.relnamespace
cross join lateral unnest(k.conkey) with ordinality as u(attnum, position)
join pg_attribute a on a.attrelid = k.conrelid and a.attnum = u.attnum
where k.contype = 'p' and n.nspname = any(%s)
order by n.nspname, c.relname, u.position
"""


def postgres_tables(
    conninfo: str, schemas: Sequence[str], interval_mode: str = "numeric"
) -> dict[tuple[str, str], Found]:
    import psycopg

    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(COLUMNS_SQL, (list(schemas),)).fetchall()
        keys = conn.execute(KEYS_SQL, (list(schemas),)).fetchall()
    found: dict[tuple[str, str], Found] = {}
    for row in rows:
        schema, table, column, pg_type, comment, table_comment = row[:6]
        domain_array, generated, unlogged = row[6:]
        if (schema, table) not in found and unlogged:
            found[(schema, table)] = Found(table, [], [], table_comment)
            found[(schema, table)].notes.append(
                f": UNLOGGED, so PostgreSQL writes no WAL for it and the capture refuses it: run "
                f"`ALTER TABLE {schema}.{table} SET LOGGED` before capturing"
            )
        entry = found.setdefault((schema, table), Found(table, [], [], table_comment))
        declared, note = declared_from_postgres(pg_type, interval_mode)
        if note:
            entry.notes.append(f"{column}: {note}")
        if domain_array:
            entry.notes.append(
                f"{column}: an array of a domain type, which Debezium leaves out of its events "
                "(the column stays empty)"
            )
        if generated:
            entry.notes.append(
                f"{column}: a stored generated column, which PostgreSQL before 18 does not "
                "publish: only the snapshot carries it, a row's first streamed change leaves it "
                "NULL (compute it in a model, or publish it: PostgreSQL 18's "
                "publish_generated_columns)"
            )
        entry.columns.append((column, declared, comment))
    for schema, table, column in keys:
        if (schema, table) in found:
            found[(schema, table)].key.append(column)
    return found


def conninfo_from(args: argparse.Namespace) -> str:
    """A libpq connection string; the password only from the environment."""
    if args.dsn:
        if "password" in args.dsn.lower():
            raise DiscoveryError(
                "--dsn must not hold the password: set the environment variable "
                f"{args.password_env}"
            )
        password = os.environ.get(args.password_env)
        return f"{args.dsn} password='{password}'" if password else args.dsn
    parts = {
        "host": args.host,
        "port": str(args.port),
        "dbname": args.database,
        "user": args.user,
    }
    password = os.environ.get(args.password_env)
    if password:
        parts["password"] = password
    return " ".join(f"{k}='{v}'" for k, v in parts.items() if v)


# -- landing zone -------------------------------------------------------------------------------


# Files whose records are not JSON lines: their schema is not embedded the JsonConverter's way.
BINARY_SUFFIXES = (".parquet", ".avro")


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".tmp")
    )


def _lines(folder: Path, limit: int) -> Iterable[str]:
    files = [p for p in _files(folder) if not p.name.endswith(BINARY_SUFFIXES)]
    seen = 0
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            for line in handle:
                if line.strip():
                    yield line
                    seen += 1
                    if seen >= limit:
                        return


def _shape_of(schema: Mapping[str, Any]) -> str | None:
    names = {f.get("field") for f in schema.get("fields") or []}
    if {"op", "after"} <= names or {"op", "before"} <= names:
        return "envelope"
    if "__op" in names or "__deleted" in names:
        return "flattened"
    return None


def landing_tables(root: Path, limit: int = 200) -> dict[str, Found]:
    """topic -> discovered table, from the embedded schema of each topic's first lines."""
    topics = root / "topics"
    if not topics.is_dir():
        raise DiscoveryError(f"{root}: no `topics/` folder (is it a landing zone root?)")
    found: dict[str, Found] = {}
    for folder in sorted(p for p in topics.iterdir() if p.is_dir()):
        topic = folder.name
        name = topic.rsplit(".", 1)[-1]
        entry = Found(name, [], [], topic=topic)
        schema = None
        for line in _lines(folder, limit):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("schema"), dict):
                shape = _shape_of(value["schema"])
                if shape:
                    schema, entry.shape = value["schema"], shape
                    break
        if schema is None and any(p.name.endswith(BINARY_SUFFIXES) for p in _files(folder)):
            entry.notes.append(
                "Parquet or Avro files (their schema is not read here): declare columns"
            )
        elif schema is None:
            entry.notes.append("no line with an embedded schema (schemas off?): declare columns")
        else:
            for f in _row_fields(schema, entry.shape or "envelope"):
                if "field" in f:
                    entry.columns.append((str(f["field"]), declared_from_connect(f), f.get("doc")))
        found[topic] = entry
    return found


# -- registry text ------------------------------------------------------------------------------


def _scalar(value: str) -> str:
    """A YAML scalar, quoted only when it must be."""
    dumped = yaml.safe_dump(value, default_style=None, width=10_000, allow_unicode=True).strip()
    dumped = dumped.removesuffix("...").strip()
    if any(c in dumped for c in ",{}[]") and not dumped.startswith(("'", '"')):
        return json.dumps(value)  # flow-safe
    return dumped


def entry_text(
    found: Found,
    *,
    delete_mode: str | None,
    topic: str | None,
    model: str | None = None,
    taken_by: str | None = None,
) -> str:
    # names as YAML keys and items: `true`, `null`, `1label` or `unit price` stay strings
    lines = [f"  {_scalar(found.name)}:"]
    if model:
        lines.append(f"    model: {model}  # {taken_by}")
    if topic:
        lines.append(f"    topic: {_scalar(topic)}")
    if found.shape and topic:
        lines.append(f"    shape: {found.shape}")
    lines.append(f"    key: [{', '.join(_scalar(k) for k in found.key)}]")
    if delete_mode and delete_mode != "hard":
        lines.append(f"    delete_mode: {delete_mode}")
    if found.description:
        lines.append(f"    description: {_scalar(' '.join(found.description.split()))}")
    lines.append("    columns:")
    for name, declared, description in found.columns:
        if description:
            text = _scalar(" ".join(description.split()))
            kind = json.dumps(declared) if "," in declared else _scalar(declared)
            lines.append(f"      {_scalar(name)}: {{type: {kind}, description: {text}}}")
        else:
            lines.append(f"      {_scalar(name)}: {_scalar(declared)}")
    return "\n".join(lines) + "\n"


def _select(names: Iterable[str], include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """Names matching an include pattern (all when none) and no exclude pattern; a pattern
    matches the whole name (`schema.table`, a topic) or its last part (`table`)."""

    def matches(name: str, patterns: Sequence[str]) -> bool:
        short = name.rsplit(".", 1)[-1]
        return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in (name, short))

    return [
        name
        for name in names
        if (not include or matches(name, include)) and not matches(name, exclude)
    ]


def _keys(pairs: Sequence[str]) -> dict[str, list[str]]:
    keys = {}
    for pair in pairs:
        table, _, columns = pair.partition("=")
        if not columns:
            raise DiscoveryError(f"--key {pair!r}: expected table=col1,col2")
        keys[table.strip()] = [c.strip() for c in columns.split(",") if c.strip()]
    return keys


# Folders of hand-written models (dbt's model-paths in dbt_project.yml).
MODEL_DIRS = ("models", "python_models")


def project_models(project: Path) -> dict[str, str]:
    """Every model name the project has, and whose it is: the silver and history models of every
    registry entry (history too when off: turning it on must not clash) and the model files."""
    taken: dict[str, str] = {}
    folder = project / REGISTRY_DIR
    for path in sorted(folder.glob("*.yml")) if folder.is_dir() else []:
        for table in load_source(path).tables:
            for model, _ in entry_models(table):
                taken.setdefault(model, f"{REGISTRY_DIR}/{path.name}, entry `{table.name}`")
    for name in MODEL_DIRS:
        for path in sorted((project / name).rglob("*")) if (project / name).is_dir() else []:
            if path.suffix in (".sql", ".py") and path.is_file():
                taken.setdefault(path.stem, path.relative_to(project).as_posix())
    return taken


def registry_name(name: str) -> str:
    """A registry (and model) name for a table whose own name is not one: lower-case words
    joined by `_` (`OrderLine`, `order line` -> `order_line`; `HTTPLog` -> `http_log`)."""
    words = re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", r"\1\3_\2\4", name)
    snake = re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")
    return snake if re.match(r"[a-z]", snake) else f"t_{snake}".rstrip("_")


def add_to_registry(
    path: Path,
    source: str,
    found: Sequence[tuple[Found, str | None]],  # (table, its own topic when not prefix-derived)
    *,
    landing: Mapping[str, Any],
    description: str | None,
    delete_mode: str | None,
    report: Report,
) -> None:
    """Append the tables not registered yet to the registry file (create it when missing). A
    table whose name (or its history's) is already a model of the project, another source's
    table of the same name say, gets `model: <source>_<table>` (docs/tables.md, "Onboard a
    database")."""
    taken = project_models(path.parent.parent)
    existing: dict[str, Any] = {}
    if path.exists():
        doc = yaml.safe_load(path.read_text()) or {}
        existing = doc.get("tables") or {}
        text = path.read_text()
        if not text.endswith("\n"):
            text += "\n"
        if not existing:
            text += "tables:\n" if "tables" not in doc else ""
    else:
        head = [
            f'# The {source} source: one entry per captured table (docs/tables.md, "Add a table").',
            "# Discovered by `python -m cdc_lakehouse.tables`; edit freely, then `make tables`.",
            f"source: {source}",
        ]
        if description:
            head.append(f"description: {_scalar(description)}")
        if landing:
            head.append("landing:")
            head += [f"  {k}: {_scalar(str(v))}" for k, v in landing.items()]
        text = "\n".join(head) + "\ntables:\n"
    for table, topic in found:
        own_name = table.name
        if not NAME.match(table.name):
            # A name PostgreSQL keeps quoted ("Album", "OrderLine": ORMs such as Prisma and
            # Entity Framework create them): registered under a model-safe name, its topic the
            # one the capture writes (Debezium keeps the table's own name in it). Renamed before
            # the look for an existing entry, so a second run leaves the first one's alone.
            if topic is None and "topic_prefix" not in landing:
                report.skipped.append(
                    f"{own_name}: not a lower-case identifier and no topic known for it: add "
                    f"its entry by hand as `{registry_name(own_name)}` with `topic:`"
                )
                continue
            topic = topic or kafka_topic(f"{landing['topic_prefix']}.{own_name}")
            table.name = registry_name(own_name)
        if table.name in existing:
            old = existing[table.name] or {}
            old_columns = set((old.get("columns") or {}).keys())
            new = [c for c, _, _ in table.columns if c not in old_columns]
            gone = sorted(old_columns - {c for c, _, _ in table.columns})
            if new or gone:
                report.notes.append(
                    f"{table.name}: already registered; columns new at the source: "
                    f"{new or '-'}, registered but not found: {gone or '-'} (edit its entry)"
                )
            continue
        folded = [name.lower() for name, _, _ in table.columns]
        twins = [name for name, _, _ in table.columns if folded.count(name.lower()) > 1]
        if twins:
            report.skipped.append(
                f"{own_name}: columns that differ only by case ({', '.join(twins)}): "
                "Debezium refuses such a table and Spark's columns are not case-sensitive; "
                "rename one of them"
            )
            continue
        if own_name != table.name:
            report.notes.append(
                f"{table.name}: the table {own_name!r}, whose name is not a model's, "
                f"registered as `{table.name}` (its topic {topic})"
            )
        if not table.key:
            report.skipped.append(
                f"{table.name}: no primary key; give one with --key {table.name}=col1,col2"
            )
            continue
        if table.name in report.added:
            where = f" ({topic})" if topic else ""
            report.skipped.append(
                f"{table.name}{where}: a table of that name is added already (from another "
                "schema); register this one in a source of its own (--source)"
            )
            continue
        model, taken_by = None, None
        names = (table.name, f"{table.name}_history")
        clash = [f"`{name}` is taken by {taken[name]}" for name in names if name in taken]
        if clash:
            model, taken_by = qualified_model(source, table.name), clash[0]
            if {model, f"{model}_history"} & set(taken):
                report.skipped.append(
                    f"{table.name}: {taken_by}, and so is {model}: add its entry by hand with "
                    "a `model:` of your choice"
                )
                continue
            report.notes.append(
                f"{table.name}: registered with `model: {model}` (models {model}, "
                f"{model}_history): {taken_by}"
            )
        silver = model or table.name
        for name in (silver, f"{silver}_history"):
            taken[name] = f"{REGISTRY_DIR}/{path.name}, entry `{table.name}`"
        text += entry_text(
            table, delete_mode=delete_mode, topic=topic, model=model, taken_by=taken_by
        )
        report.added.append(table.name)
        # a column's note is "column: ...", a note on the whole table ": ..."
        report.notes += [f"{table.name}{'' if n[0] == ':' else '.'}{n}" for n in table.notes]
    if not report.added and path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    load_source(path)  # the result must be a valid registry file


def run(args: argparse.Namespace, project: Path) -> int:
    path = project / REGISTRY_DIR / f"{args.source}.yml"
    report = Report()
    keys = _keys(args.key or [])
    include, exclude = args.include or [], args.exclude or []
    found: list[tuple[Found, str | None]] = []
    if args.command == "from-postgres":
        schemas = args.schema or ["public"]
        tables = postgres_tables(
            conninfo_from(args), schemas, args.interval_handling_mode or "numeric"
        )
        if not tables:
            raise DiscoveryError(f"no tables in schema(s) {', '.join(schemas)}")
        names = [f"{s}.{t}" for s, t in tables]
        chosen = _select(names, include, exclude)
        chosen = [n for n in chosen if n.split(".", 1)[1] not in args.skip_marker]
        prefix = args.topic_prefix or args.source
        landing: dict[str, Any] = {"shape": args.shape}
        # the connector's handling modes, when not Debezium's defaults: they decide how values
        # arrive, so bronze decodes them the same way
        for mode in CONNECTOR_MODES:
            if getattr(args, mode):
                landing[mode] = getattr(args, mode)
        one_schema = len({n.split(".")[0] for n in chosen}) <= 1
        if one_schema and chosen:
            landing = {
                "topic_prefix": kafka_topic(f"{prefix}.{chosen[0].split('.')[0]}"),
                **landing,
            }
        for qualified in chosen:
            schema, name = qualified.split(".", 1)
            table = tables[(schema, name)]
            table.key = keys.get(name, table.key)
            table.notes += toast_losses(table, args.binary_handling_mode or "bytes")
            topic = None if one_schema else kafka_topic(f"{prefix}.{schema}.{name}")
            found.append((table, topic))
    else:
        discovered = landing_tables(Path(args.root))
        chosen = _select(discovered, include, exclude)
        prefixes = {t.rsplit(".", 1)[0] for t in chosen if "." in t}
        shapes = {discovered[t].shape for t in chosen if discovered[t].shape}
        landing = {}
        if len(prefixes) == 1 and all("." in t for t in chosen):
            landing["topic_prefix"] = prefixes.pop()
        if len(shapes) == 1:
            landing["shape"] = shapes.pop()
        for topic in chosen:
            table = discovered[topic]
            table.key = keys.get(table.name, keys.get(topic, []))
            if not table.columns:
                report.skipped.append(f"{table.name}: {'; '.join(table.notes)}")
                continue
            if not table.key:
                report.skipped.append(
                    f"{table.name}: key unknown from the landing (values carry no key); "
                    f"give it with --key {table.name}=col1,col2"
                )
                continue
            own_topic = None if "topic_prefix" in landing else topic
            if own_topic is None and "shape" not in landing:
                own_topic = topic
            found.append((table, own_topic))
    add_to_registry(
        path,
        args.source,
        found,
        landing=landing,
        description=args.description,
        delete_mode=args.delete_mode,
        report=report,
    )
    report.print(path)
    if report.added:
        print("next: `make tables` writes their dbt files")
    return 0


def add_arguments(commands: Any) -> None:
    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--source", required=True, help="source name: tables/<source>.yml")
        parser.add_argument("--include", action="append", help="name pattern (repeatable)")
        parser.add_argument("--exclude", action="append", help="name pattern (repeatable)")
        parser.add_argument("--key", action="append", help="table=col1,col2 (repeatable)")
        parser.add_argument("--delete-mode", choices=("hard", "soft"), default=None)
        parser.add_argument("--description", help="description of the source")

    pg = commands.add_parser("from-postgres", help="register tables of a live PostgreSQL")
    common(pg)
    pg.add_argument("--dsn", help="libpq connection string (no password in it: use the env)")
    pg.add_argument("--host", default=os.environ.get("PGHOST", "localhost"))
    pg.add_argument("--port", type=int, default=int(os.environ.get("PGPORT", "5432")))
    pg.add_argument("--database", default=os.environ.get("PGDATABASE"))
    pg.add_argument("--user", default=os.environ.get("PGUSER", "postgres"))
    pg.add_argument("--password-env", default=DEFAULT_PASSWORD_ENV)
    pg.add_argument("--schema", action="append", help="schema to read (repeatable; public)")
    pg.add_argument("--topic-prefix", help="Debezium topic.prefix (default: the source name)")
    pg.add_argument("--shape", choices=("envelope", "flattened"), default="envelope")
    for mode, choices in CONNECTOR_MODES.items():
        pg.add_argument(
            "--" + mode.replace("_", "-"),
            choices=choices,
            help=f"the connector's {mode.replace('_', '.')} when not its default",
        )
    pg.add_argument(
        "--skip-marker",
        nargs="*",
        default=["cdc_capture_marker"],
        help="tables never registered (the capture tool's marker table)",
    )
    landing = commands.add_parser("from-landing", help="register topics of a landing zone")
    common(landing)
    landing.add_argument("--root", required=True, help="landing root (holds topics/)")
