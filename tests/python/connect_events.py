"""Kafka Connect JSON lines as Debezium writes them (JsonConverter, `schemas.enable=true`), built
by the decoder's tests: schema fields, Decimal values, envelopes and wrapped lines."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any


def connect_field(name: str, kind: str, logical: str | None = None, **params: str) -> dict:
    """A field of a Kafka Connect schema (JsonConverter, `schemas.enable=true`), as Debezium
    writes it: `kind` its Connect type, `logical` its logical type's name, `params` its
    parameters; every field but `id` optional."""
    field: dict[str, Any] = {"type": kind, "optional": name != "id", "field": name}
    if logical:
        field["name"] = logical
    if params:
        field["parameters"] = params
    return field


def unscaled_base64(unscaled: int) -> str:
    """Kafka Connect Decimal encoding: minimal big-endian two's complement, base64."""
    size = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def decimal_base64(value: Decimal, scale: int) -> str:
    """`value` as the unscaled integer for `scale`, exactly (no Decimal context rounding)."""
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits))) * 10 ** (int(exponent) + scale)
    return unscaled_base64(-unscaled if sign else unscaled)


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def envelope(op: str, after: dict | None, lsn: int, before: dict | None = None) -> dict:
    source = {"ts_ms": 1709212455000 + lsn, "txId": 700 + lsn, "lsn": lsn}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1}


def wrapped(value: dict, fields: list[dict]) -> str:
    """A JsonConverter `schemas.enable=true` envelope line for a table with `fields`."""
    image = {"type": "struct", "fields": fields, "optional": True, "name": "t.Value"}
    schema = {
        "type": "struct",
        "fields": [
            {**image, "field": "before"},
            {**image, "field": "after"},
            {"type": "string", "optional": False, "field": "op"},
        ],
        "optional": False,
        "name": "t.Envelope",
    }
    return compact({"schema": schema, "payload": value})
