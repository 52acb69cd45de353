"""A relation's columns, described once per dbt command until a statement writes the relation.

dbt-spark answers every `adapter.get_columns_in_relation` with a `describe extended` statement
and parses its rows through agate. A run of one CDC table asked it 12 times for 4 relations
(bronze 3, the change log's view 2, silver 3, history 4: the models, the views over them and
their data tests), with no statement writing the relation in between for most of them: ~10 ms
of Spark and ~20-30 ms of dbt's Python each, under the GIL that the side-by-side models share.

Kept per dbt command (its invocation id), for relations of a schema only (a temporary view
is often replaced under the same name), and only the session method (every statement goes
through this adapter's cursor, which reports it here). A statement that is not a read (`select`,
`describe`, `show`, `explain`, a `with` without a write in it) drops every cached relation whose
name appears in its text, before it runs and again after (a write may change a table's schema:
`alter`, `create or replace`, a Hudi upsert that evolves it); a Python model's code drops them
all. A description that a write of the same relation overlapped is not kept. An empty answer
(no such relation) is never kept.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

READS = frozenset({"select", "describe", "desc", "show", "explain"})
_WRITE_WORDS = re.compile(
    r"\b(insert|merge|update|delete|create|alter|drop|replace|truncate|overwrite)\b"
)
_COMMENTS = re.compile(r"/\*.*?\*/|--[^\n]*", re.S)

_lock = threading.Lock()
_invocation: list[str | None] = [None]
_columns: dict[str, list[Any]] = {}
# descriptions running now: relation -> {token: written meanwhile}
_running: dict[str, dict[object, bool]] = {}


def _name(relation: Any) -> str | None:
    schema, identifier = getattr(relation, "schema", None), getattr(relation, "identifier", None)
    if not schema or not identifier:
        return None
    return f"{schema}.{identifier}".lower()


def is_read(sql: str) -> bool:
    """Whether a statement only reads (its comments aside)."""
    return _reads(_COMMENTS.sub(" ", sql).strip().lower())


def _reads(text: str) -> bool:
    first = text.split(None, 1)[0] if text else ""
    if first in READS:
        return True
    return first == "with" and not _WRITE_WORDS.search(text)


def _invalidate(matches: Callable[[str], bool]) -> None:
    with _lock:
        for name in [n for n in _columns if matches(n)]:
            del _columns[name]
        for name, tokens in _running.items():
            if matches(name):
                for token in tokens:
                    tokens[token] = True


def wrote(sql: str) -> None:
    """A statement is about to run, or has run: forget what it may have changed."""
    text = _COMMENTS.sub(" ", sql).strip().lower()
    if _reads(text):
        return
    _invalidate(lambda name: name.split(".", 1)[1] in text)


def wrote_anything() -> None:
    """Code that may write any relation ran (a Python model)."""
    _invalidate(lambda name: True)


def columns(relation: Any, describe: Callable[[], list[Any]]) -> list[Any]:
    """The relation's columns: the command's earlier description if nothing wrote it since,
    else `describe()` (kept unless a write of the relation overlapped it)."""
    from dbt_common.invocation import get_invocation_id

    name = _name(relation)
    if name is None:
        return describe()
    invocation = get_invocation_id()
    token = object()
    with _lock:
        if _invocation[0] != invocation:
            _invocation[0] = invocation
            _columns.clear()
        if name in _columns:
            return list(_columns[name])
        _running.setdefault(name, {})[token] = False
    try:
        described = describe()
    finally:
        with _lock:
            tokens = _running.get(name, {})
            written = tokens.pop(token, True)
            if not tokens:
                _running.pop(name, None)
    if described and not written:
        with _lock:
            if _invocation[0] == invocation:
                _columns[name] = list(described)
    return described
