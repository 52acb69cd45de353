"""Settings of one capture: which PostgreSQL tables, which landing shape, where files and state go.

A capture is read from a YAML or JSON file (`--config capture.yml`), then command-line flags
override single settings. The password is never in the file: it is read from the environment
variable named by `password_env` (default `CDC_PG_PASSWORD`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from cdc_lakehouse.bronze.spec import CONNECTOR_MODES
from cdc_lakehouse.capture.sink import sink_layout
from cdc_lakehouse.capture.upload import object_base

SHAPES = ("envelope", "flattened")
SNAPSHOT_MODES = ("initial", "no_data", "when_needed", "always")
DEFAULT_PASSWORD_ENV = "CDC_PG_PASSWORD"

# Bounded runs end on an insert into this table (see `__main__`); its events never land.
MARKER_SCHEMA = "public"
MARKER_TABLE = "cdc_capture_marker"


def kafka_topic(name: str) -> str:
    """The topic Debezium names `name` (`<prefix>.<schema>.<table>`): each character Kafka does
    not allow in a topic name (outside `[a-zA-Z0-9._-]`) replaced with `_`, at most 249
    characters (Debezium's `AbstractTopicNamingStrategy.sanitizedTopicName`, which logs a
    warning and goes on). The table `line$item` so lands as `<prefix>.public.line_item`."""
    return re.sub(r"[^a-zA-Z0-9._-]", "_", name)[:249]


class ConfigError(ValueError):
    """The capture settings are missing something or contradict themselves."""


@dataclass(frozen=True)
class CaptureConfig:
    """One Debezium capture: one engine, one replication slot, one publication."""

    database: str
    tables: tuple[str, ...]  # schema-qualified: `public.orders`
    out: Path  # landing root: files go to <out>/topics/<topic>/partition=<p>/
    state_dir: Path  # offsets file and JVM log config of this capture
    name: str = ""  # names the slot and the publication; defaults to topic_prefix
    host: str = "localhost"
    port: int = 5432
    user: str = "postgres"
    password_env: str = DEFAULT_PASSWORD_ENV
    shape: str = "envelope"
    schemas_enable: bool = True
    decimal_handling_mode: str = "precise"
    time_precision_mode: str = "adaptive"
    binary_handling_mode: str = "bytes"
    hstore_handling_mode: str = "json"
    interval_handling_mode: str = "numeric"
    snapshot_mode: str = "initial"
    flush_size: int = 500
    partitions: int = 1  # Kafka partitions per topic (a key always lands in the same one)
    # The sink whose layout the files follow: `confluent` (default) or
    # `{sink: lenses, prefix: ..., partition_by: [...]}` (see capture/sink.py).
    layout: str | Mapping[str, Any] | None = None
    topic_prefix: str = "northwind"
    # Copy every landing file to object storage (`s3://<bucket>/<prefix>`, see upload.py);
    # `out` stays the durable staging folder. Endpoint: `s3_endpoint` or CDC_S3_ENDPOINT.
    upload_to: str | None = None
    s3_endpoint: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.topic_prefix)
        self._check()

    # -- derived names ----------------------------------------------------------------------
    @property
    def slot_name(self) -> str:
        """PostgreSQL slot names allow only lower-case letters, digits and '_' (63 at most)."""
        return ("cdc_" + re.sub(r"[^a-z0-9_]", "_", self.name.lower()))[:63]

    @property
    def publication_name(self) -> str:
        return self.slot_name[:59] + "_pub"

    @property
    def marker_topic(self) -> str:
        return f"{self.topic_prefix}.{MARKER_SCHEMA}.{MARKER_TABLE}"

    def topic(self, table: str) -> str:
        """Debezium's topic for a schema-qualified table: `<topic_prefix>.<schema>.<table>`
        (kafka_topic: `line$item` lands as `line_item`)."""
        return kafka_topic(f"{self.topic_prefix}.{table}")

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self.topic(t) for t in self.tables)

    @property
    def offsets_file(self) -> Path:
        """Debezium's offsets (Kafka's FileOffsetBackingStore)."""
        return self.state_dir / "offsets.dat"

    @property
    def snapshot_done_file(self) -> Path:
        """Present once the initial snapshot has completely landed."""
        return self.state_dir / "snapshot.done"

    def password(self) -> str | None:
        """The password from the environment; unset or empty means none (trust, .pgpass...)."""
        return os.environ.get(self.password_env) or None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(tables=list(self.tables), out=str(self.out), state_dir=str(self.state_dir))
        return data

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CaptureConfig:
        """Build from a mapping of settings (file content merged with flags); None = unset."""
        settings = {k: v for k, v in data.items() if v is not None}
        if "password" in settings:
            raise ConfigError(
                "do not put the password in the config file: set the environment variable "
                f"{settings.get('password_env', DEFAULT_PASSWORD_ENV)} instead"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
        missing = [k for k in ("database", "tables", "out", "state_dir") if not settings.get(k)]
        if missing:
            raise ConfigError(f"missing setting(s): {', '.join(missing)}")
        settings["tables"] = normalize_tables(settings["tables"])
        settings["out"] = Path(settings["out"])
        settings["state_dir"] = Path(settings["state_dir"])
        for key in ("port", "flush_size", "partitions"):
            settings[key] = _as_int(key, settings.get(key, getattr(cls, key)))
        if not isinstance(settings.get("schemas_enable", True), bool):
            raise ConfigError("schemas_enable must be true or false")
        return cls(**settings)

    def _check(self) -> None:
        choices = {
            "shape": SHAPES,
            **CONNECTOR_MODES,
            "snapshot_mode": SNAPSHOT_MODES,
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ConfigError(
                    f"{key} must be one of {', '.join(allowed)} (got {getattr(self, key)!r})"
                )
        if self.flush_size < 1:
            raise ConfigError("flush_size must be at least 1")
        if self.partitions < 1:
            raise ConfigError("partitions must be at least 1")
        try:
            sink_layout(self.out, self.layout)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.topic_prefix):
            raise ConfigError("topic_prefix may hold only letters, digits, '_', '-' and '.'")
        if self.upload_to is not None:
            try:
                object_base(self.upload_to)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


def normalize_tables(tables: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`orders` -> `public.orders`; a comma-separated string is accepted too."""
    items = tables.split(",") if isinstance(tables, str) else list(tables)
    result = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"tables must be names, got {item!r}")
        name = item.strip()
        if not name:
            continue
        parts = name.split(".")
        if len(parts) == 1:
            parts = ["public", *parts]
        if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", p) for p in parts):
            raise ConfigError(
                f"table {name!r} is not a plain `schema.table` name: the capture takes names of "
                "letters, digits, `_` and `$` (of any case); rename such a table at the source "
                "to capture it"
            )
        if ".".join(parts) not in result:
            result.append(".".join(parts))
    if not result:
        raise ConfigError("tables must list at least one table")
    return tuple(result)


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be an integer (got {value!r})") from None


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Settings from a `.json` file, or YAML for any other suffix."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        data = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path} is not valid {kind}: {' '.join(str(exc).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings")
    return data
