"""Kafka Connect single message transforms (SMTs) on the record values of a query-based capture,
as a connector configured with them would land the rows.

Two of Apache Kafka's own transforms (`org.apache.kafka.connect.transforms`), the ones reference
JDBC deployments put between the source connector and the sink:

- `ReplaceField$Value`: keep only `include` (alias `whitelist`) fields, drop `exclude` (alias
  `blacklist`) fields, then rename (`renames`: `old:new,...`);
- `InsertField$Value`: add a field holding a static string (`static.field`, `static.value`) or
  the record's topic (`topic.field`). A trailing `!` (required) or `?` (optional) on the field
  name is Connect's and is not part of the name.

`connect_transforms` reads them from a connector's own properties (`transforms=a,b`,
`transforms.a.type=...`, `transforms.a.<setting>=...`), so a user can copy the connector's
configuration. Anything else (another transform, `offset.field`, `timestamp.field`...) is an
error naming it, not a silent no-op. A value is a dict of field -> JSON value, in field order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PACKAGE = "org.apache.kafka.connect.transforms."
REPLACE_FIELD = PACKAGE + "ReplaceField$Value"
INSERT_FIELD = PACKAGE + "InsertField$Value"


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


@dataclass(frozen=True)
class ReplaceField:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, str]) -> ReplaceField:
        known = {"include", "whitelist", "exclude", "blacklist", "renames"}
        _refuse_unknown(name, REPLACE_FIELD, settings, known)
        renames = {}
        for pair in _names(settings.get("renames")):
            old, sep, new = pair.partition(":")
            if not sep or not old or not new:
                raise ValueError(f"transform {name}: renames takes old:new pairs, got {pair!r}")
            renames[old] = new
        return cls(
            include=_names(settings.get("include", settings.get("whitelist"))),
            exclude=_names(settings.get("exclude", settings.get("blacklist"))),
            renames=renames,
        )

    def apply(self, value: dict[str, Any], topic: str) -> dict[str, Any]:
        return {
            self.renames.get(name, name): item
            for name, item in value.items()
            if (not self.include or name in self.include) and name not in self.exclude
        }


@dataclass(frozen=True)
class InsertField:
    static_field: str | None = None
    static_value: str | None = None
    topic_field: str | None = None

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, str]) -> InsertField:
        _refuse_unknown(
            name, INSERT_FIELD, settings, {"static.field", "static.value", "topic.field"}
        )
        static = _field_name(settings.get("static.field"))
        topic = _field_name(settings.get("topic.field"))
        if static is None and topic is None:
            raise ValueError(
                f"transform {name}: InsertField$Value needs static.field or topic.field"
            )
        return cls(static, settings.get("static.value"), topic)

    def apply(self, value: dict[str, Any], topic: str) -> dict[str, Any]:
        out = dict(value)
        if self.topic_field:
            out[self.topic_field] = topic
        if self.static_field:
            out[self.static_field] = self.static_value
        return out


Transform = ReplaceField | InsertField


def _field_name(text: str | None) -> str | None:
    """Connect's `name!` (required) / `name?` (optional) field names, without the marker."""
    if not text:
        return None
    return text[:-1] if text.endswith(("!", "?")) else text


def _refuse_unknown(name: str, kind: str, settings: Mapping[str, str], known: set[str]) -> None:
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(
            f"transform {name} ({kind}): unsupported setting(s) {', '.join(unknown)} "
            f"(supported: {', '.join(sorted(known))})"
        )


def connect_transforms(properties: Mapping[str, str]) -> list[Transform]:
    """The transforms of a connector configuration (`transforms=...` and `transforms.<name>.*`
    properties), in their chain order."""
    chain = _names(properties.get("transforms"))
    transforms: list[Transform] = []
    for name in chain:
        prefix = f"transforms.{name}."
        settings = {k[len(prefix) :]: str(v) for k, v in properties.items() if k.startswith(prefix)}
        kind = settings.pop("type", None)
        if kind == REPLACE_FIELD:
            transforms.append(ReplaceField.from_settings(name, settings))
        elif kind == INSERT_FIELD:
            transforms.append(InsertField.from_settings(name, settings))
        else:
            raise ValueError(
                f"transform {name}: type {kind!r} is not supported here "
                f"(supported: {REPLACE_FIELD}, {INSERT_FIELD})"
            )
    return transforms


def apply_transforms(
    transforms: Sequence[Transform], value: dict[str, Any], topic: str
) -> dict[str, Any]:
    for transform in transforms:
        value = transform.apply(value, topic)
    return value
