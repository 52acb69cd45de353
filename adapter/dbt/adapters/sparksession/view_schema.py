"""Spark's JSON schema for a view, from the column types `describe query` prints.

Behind Iceberg's SparkSessionCatalog with a Hive metastore, a view is an Iceberg view whose
metastore entry lists Hive column types, and Spark reads views through that entry: types Hive
does not have come back as their nearest Hive type (`timestamp_ntz` as `timestamp`), and Spark
casts the view's rows to them. Spark restores a view's schema from the `spark.sql.sources.schema`
table properties when they are present (HiveExternalCatalog.restoreTableMetadata, the same
properties Spark writes for its own views), so the view materialization sets them.
"""

from __future__ import annotations

import json
from typing import Any

# catalogString -> the type's JSON name
_ATOMIC = {
    "boolean": "boolean",
    "tinyint": "byte",
    "byte": "byte",
    "smallint": "short",
    "short": "short",
    "int": "integer",
    "integer": "integer",
    "bigint": "long",
    "long": "long",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "void": "void",
}
# Spark's own split of long schema properties (spark.sql.sources.schemaStringLengthThreshold).
PART_LENGTH = 4000


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"cannot read Spark type {self.text!r} at {self.pos}: {what}")

    def peek(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def expect(self, token: str) -> None:
        if not self.peek(token):
            raise self.fail(f"expected {token!r}")
        self.pos += len(token)

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] == "_"
        ):
            self.pos += 1
        if start == self.pos:
            raise self.fail("expected a name")
        return self.text[start : self.pos]

    def field_name(self) -> str:
        if not self.peek("`"):
            return self.word()
        name, self.pos = [], self.pos + 1
        while True:
            end = self.text.index("`", self.pos)
            name.append(self.text[self.pos : end])
            self.pos = end + 1
            if not self.peek("`"):  # `` is a quoted backquote
                return "`".join(name)
            self.pos += 1

    def data_type(self) -> Any:
        name = self.word().lower()
        if name == "array":
            self.expect("<")
            element = self.data_type()
            self.expect(">")
            return {"type": "array", "elementType": element, "containsNull": True}
        if name == "map":
            self.expect("<")
            key = self.data_type()
            self.expect(",")
            value = self.data_type()
            self.expect(">")
            return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
        if name == "struct":
            self.expect("<")
            fields = []
            while not self.peek(">"):
                if fields:
                    self.expect(",")
                field = self.field_name()
                self.expect(":")
                fields.append(_field(field, self.data_type()))
                if self.peek(" comment "):
                    raise self.fail("struct field comments are not supported")
            self.expect(">")
            return {"type": "struct", "fields": fields}
        if name in ("decimal", "numeric", "dec"):
            precision, scale = 10, 0
            if self.peek("("):
                self.expect("(")
                precision = int(self.word())
                self.expect(",")
                scale = int(self.word())
                self.expect(")")
            return f"decimal({precision},{scale})"
        if name in ("char", "varchar"):  # Spark reads both as string
            self.expect("(")
            self.word()
            self.expect(")")
            return "string"
        if name in _ATOMIC:
            return _ATOMIC[name]
        raise self.fail(f"unknown type {name!r}")


def _field(name: str, data_type: Any) -> dict[str, Any]:
    return {"name": name, "type": data_type, "nullable": True, "metadata": {}}


def parse_type(text: str) -> Any:
    """The JSON form (as in StructType.json()) of a type's catalogString."""
    parser = _Parser(text.strip())
    parsed = parser.data_type()
    if parser.pos != len(parser.text):
        raise parser.fail("unexpected text")
    return parsed


def schema_json(columns: list[tuple[str, str]]) -> str:
    """`StructType.json()` of (name, catalogString) pairs."""
    fields = [_field(name, parse_type(data_type)) for name, data_type in columns]
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def schema_properties(columns: list[tuple[str, str]]) -> dict[str, str]:
    """The table properties that carry a view's schema, split as Spark splits them."""
    text = schema_json(columns)
    parts = [text[i : i + PART_LENGTH] for i in range(0, len(text), PART_LENGTH)]
    properties = {"spark.sql.sources.schema.numParts": str(len(parts))}
    for i, part in enumerate(parts):
        properties[f"spark.sql.sources.schema.part.{i}"] = part
    return properties
