"""The table registry: one entry per captured source table, in `tables/<source>.yml`.

An entry says how a table lands and how the project treats it (about ten lines); every dbt file
of the table (bronze model, landing source, change-log staging model, silver, history, their
yml and column docs) is generated from it by `python -m cdc_lakehouse.tables generate`
(`make tables`) and checked by `... check` in `make lint`. See docs/tables.md, "Add a table".

    source: northwind
    description: The order system.           # optional
    landing:                                  # settings shared by every table of the source
      topic_prefix: northwind.public
      shape: envelope
    tables:
      customers:
        key: [customer_id]
        delete_mode: soft                     # hard (default) or soft
        history: {ignore_columns: [updated_at]}   # or `history: false`
        description: One row per customer.    # optional
        columns:                              # name: type, or name: {type:, description:}
          customer_id: text
          company_name: {type: text, description: Company name.}
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdc_lakehouse.bronze.spec import CONNECTOR_MODES, SHAPES, TableSpec

REGISTRY_DIR = "tables"
DELETE_MODES = ("hard", "soft")
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# What dbt (Jinja) takes as a doc block's name.
DOC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Settings a table may carry beside its own (they go to the bronze model's `cdc_table`).
LANDING_KEYS = (
    "topic",
    "topic_prefix",
    "shape",
    *CONNECTOR_MODES,
    "toast_placeholder",
    "order_by",
    "layout",
    "extracts",
)
TABLE_KEYS = {
    "key",
    "columns",
    "delete_mode",
    "history",
    "description",
    "landing_description",
    "model",
    *LANDING_KEYS,
}
SOURCE_KEYS = {"source", "description", "landing", "tables"}
HISTORY_KEYS = {"ignore_columns"}


class RegistryError(ValueError):
    """A registry file is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Table:
    """One registry entry, with the names of everything generated from it."""

    source: str
    name: str
    key: tuple[str, ...]
    columns: tuple[Column, ...] = ()
    landing: Mapping[str, Any] = field(default_factory=dict)  # source landing + table's own
    delete_mode: str = "hard"
    history: bool = True
    history_ignore: tuple[str, ...] = ()
    description: str | None = None
    landing_description: str | None = None
    model: str | None = None  # silver model name (default: the table name)

    @property
    def bronze_model(self) -> str:
        return f"bronze_{self.source}__{self.name}"

    @property
    def staging_model(self) -> str:
        return f"stg_{self.source}__{self.name}_changes"

    @property
    def silver_model(self) -> str:
        return self.model or self.name

    @property
    def history_model(self) -> str:
        return f"{self.silver_model}_history"

    @property
    def landing_source(self) -> str:
        return f"landing_{self.source}"

    @property
    def cdc_table(self) -> dict[str, Any]:
        """The bronze model's `cdc_table` config (what the decoder reads)."""
        config: dict[str, Any] = {"name": self.name}
        config.update(self.landing)
        config["key"] = list(self.key)
        declared = {c.name: c.type for c in self.columns if c.type}
        if declared:
            config["columns"] = declared
        return config

    @functools.cached_property
    def spec(self) -> TableSpec:
        """The decoder's spec of this entry, built once (an entry is frozen): a scheduled run
        asks every table's topic and layout."""
        return TableSpec.from_config(None, self.cdc_table)

    @property
    def topic(self) -> str:
        return self.spec.topic

    @property
    def shape(self) -> str:
        return self.spec.shape

    def doc_name(self, column: str) -> str:
        """Name of the doc block describing a source column (generated column docs). A doc
        block's name is a Jinja identifier: a column named otherwise (`unit price`, `größe`,
        which PostgreSQL allows quoted) gets its characters outside `[A-Za-z0-9_]` replaced
        and a digest of its name (`unit_price_1f0c…`), so two such names stay two blocks."""
        if not DOC_NAME.match(column):
            digest = hashlib.sha1(column.encode()).hexdigest()[:8]
            column = f"{re.sub(r'[^A-Za-z0-9_]', '_', column)}_{digest}"
        return f"{self.source}_{self.name}__{column}"


@dataclass(frozen=True)
class Source:
    name: str
    path: Path
    tables: tuple[Table, ...]
    description: str | None = None


def _fail(path: Path, where: str, message: str) -> RegistryError:
    return RegistryError(f"{path}: {where}: {message}")


def _names(value: Any, path: Path, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, where, "expected a column name or a list of column names")
    return tuple(value)


def _column(name: Any, value: Any, path: Path, where: str) -> Column:
    if not isinstance(name, str) or not name:
        raise _fail(path, where, f"column name {name!r} is not a string")
    if value is None or isinstance(value, str):
        return Column(name, value)
    if isinstance(value, Mapping):
        unknown = set(value) - {"type", "description"}
        if unknown:
            hint = ""
            if any(str(k).endswith(")") for k in unknown):
                hint = " (in `{type: ...}` quote a type with a comma: 'numeric(12,2)')"
            raise _fail(path, f"{where}.{name}", f"unknown setting(s) {sorted(unknown)}{hint}")
        return Column(name, value.get("type"), value.get("description"))
    raise _fail(path, f"{where}.{name}", "expected a type or {type:, description:}")


def parse_table(source: str, landing: Mapping[str, Any], name: str, entry: Any, path: Path):
    where = f"tables.{name}"
    if not isinstance(name, str) or not NAME.match(name):
        raise _fail(path, where, "a table name is lower-case letters, digits and `_`")
    if not isinstance(entry, Mapping):
        raise _fail(path, where, "expected a mapping (key, columns, ...)")
    unknown = set(entry) - TABLE_KEYS
    if "snapshots" in unknown:
        raise _fail(
            path, where, "`snapshots:` is now `extracts:` (complete extracts, extracts/<topic>)"
        )
    if unknown:
        known = sorted(TABLE_KEYS)
        raise _fail(path, where, f"unknown setting(s) {sorted(unknown)}; known: {known}")
    if "key" not in entry:
        raise _fail(path, where, "`key` (the primary-key columns) is required")
    key = _names(entry["key"], path, f"{where}.key")
    columns_entry = entry.get("columns") or {}
    if not isinstance(columns_entry, Mapping):
        raise _fail(path, f"{where}.columns", "expected a mapping of column name to type")
    columns = tuple(_column(c, v, path, f"{where}.columns") for c, v in columns_entry.items())
    names = [c.name for c in columns]
    missing = [k for k in key if names and k not in names]
    if missing:
        raise _fail(path, where, f"key column(s) {missing} are not among its columns")
    delete_mode = entry.get("delete_mode", "hard")
    if delete_mode not in DELETE_MODES:
        raise _fail(path, where, f"delete_mode must be one of {DELETE_MODES}")
    history = entry.get("history", True)
    ignore: tuple[str, ...] = ()
    if isinstance(history, Mapping):
        unknown = set(history) - HISTORY_KEYS
        if unknown:
            raise _fail(path, f"{where}.history", f"unknown setting(s) {sorted(unknown)}")
        ignore = _names(history.get("ignore_columns") or [], path, f"{where}.history")
        history = True
    elif not isinstance(history, bool):
        raise _fail(path, f"{where}.history", "expected true, false or {ignore_columns: [...]}")
    merged = {k: v for k, v in {**landing, **entry}.items() if k in LANDING_KEYS}
    if "topic" in entry:
        merged.pop("topic_prefix", None)
    if not merged.get("topic") and not merged.get("topic_prefix"):
        raise _fail(path, where, "no topic: set `topic:` on the entry or `landing.topic_prefix`")
    table = Table(
        source=source,
        name=name,
        key=key,
        columns=columns,
        landing=merged,
        delete_mode=delete_mode,
        history=history,
        history_ignore=ignore,
        description=entry.get("description"),
        landing_description=entry.get("landing_description"),
        model=entry.get("model"),
    )
    try:
        table.spec  # noqa: B018 - validates shape, modes, types, topic
    except ValueError as exc:
        raise _fail(path, where, str(exc)) from None
    if table.model is not None and not NAME.match(table.model):
        raise _fail(path, f"{where}.model", "a model name is lower-case letters, digits and `_`")
    return table


# libyaml's loader when PyYAML was built with it (its wheels are): the registry is read by every
# changed-tables run, and the pure-Python loader was half of a no-op run's time at 500 tables.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_source(path: Path) -> Source:
    try:
        doc = yaml.load(path.read_text(), Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise RegistryError(f"{path}: expected a mapping with `source` and `tables`")
    unknown = set(doc) - SOURCE_KEYS
    if unknown:
        raise RegistryError(f"{path}: unknown setting(s) {sorted(unknown)}")
    source = doc.get("source") or path.stem
    if not isinstance(source, str) or not NAME.match(source):
        raise RegistryError(f"{path}: source {source!r}: lower-case letters, digits and `_`")
    if source != path.stem:
        raise RegistryError(f"{path}: source {source!r} must match the file name ({path.stem})")
    landing = doc.get("landing") or {}
    if not isinstance(landing, Mapping) or set(landing) - set(LANDING_KEYS):
        raise RegistryError(f"{path}: landing: settings are among {list(LANDING_KEYS)}")
    if landing.get("shape", "envelope") not in SHAPES:
        raise RegistryError(f"{path}: landing.shape must be one of {SHAPES}")
    entries = doc.get("tables") or {}
    if not isinstance(entries, Mapping):
        raise RegistryError(f"{path}: tables: expected a mapping of table name to entry")
    tables = tuple(parse_table(source, landing, n, e, path) for n, e in entries.items())
    return Source(source, path, tables, doc.get("description"))


def qualified_model(source: str, name: str) -> str:
    """The silver model name of a table whose own name is already a model's: `<source>_<table>`
    (as its column doc blocks are named; its history is `<source>_<table>_history`)."""
    return f"{source}_{name}"


def entry_models(table: Table) -> tuple[tuple[str, str], ...]:
    """(model, what it is to its entry): the names an entry takes, history included even when
    off, so that turning it on later cannot clash."""
    return ((table.silver_model, "silver model"), (table.history_model, "history model"))


def _clash(
    model: str, one: tuple[Path, Table, str], other: tuple[Path, Table, str], taken: set[str]
) -> RegistryError:
    """The error naming both entries that generate `model`, with a `model:` that fixes it."""
    (path, table, what), (other_path, other_table, other_what) = one, other
    fixes = []
    for fix_path, fix_table in ((other_path, other_table), (path, table)):
        name = qualified_model(fix_table.source, fix_table.name)
        if not {name, f"{name}_history"} & taken:
            fixes.append(f"`model: {name}` in the entry of `{fix_table.name}` in {fix_path}")
    suggestion = f" (e.g. {' or '.join(fixes)})" if fixes else ""
    return RegistryError(
        f"{path}: tables.{table.name}: its {what} {model} is also the {other_what} of the entry "
        f"`{other_table.name}` in {other_path}: two entries cannot generate one model; set "
        f"`model:` on one of them to name its silver model{suggestion}"
    )


def load(project: Path) -> list[Source]:
    """Every registry file of a project (`<project>/tables/*.yml`), checked for clashes."""
    folder = Path(project) / REGISTRY_DIR
    sources = [load_source(p) for p in sorted(folder.glob("*.yml"))] if folder.is_dir() else []
    named = [
        (model, (s.path, t, what))
        for s in sources
        for t in s.tables
        for model, what in entry_models(t)
    ]
    taken = {model for model, _ in named}
    seen: dict[str, tuple[Path, Table, str]] = {}
    for model, entry in named:
        if model in seen and seen[model][1] is not entry[1]:
            raise _clash(model, entry, seen[model], taken)
        seen[model] = entry
    return sources


def tables(project: Path) -> list[Table]:
    """Every registered table of a project."""
    return [t for s in load(project) for t in s.tables]


def table(project: Path, name: str, source: str | None = None) -> Table:
    found = [t for t in tables(project) if t.name == name and source in (None, t.source)]
    if len(found) != 1:
        raise KeyError(f"{len(found)} registered tables named {name!r}")
    return found[0]
