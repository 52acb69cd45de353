"""Histories (SCD type 2) against a truth read off the change events, key by key, per case
(benchmarks.peers.events) and delivery: this project's history models (`silver.<table>_history`
of the `ours` run) and AUTO CDC's `stored_as_scd_type=2` (benchmarks.peers.auto_cdc, `--scd 2`).

The truth is neither engine's: it is computed here from the decoded events every peer gets
(`<out>/events/<table>`: the row image after each change, `_op`, `_lsn`, `_tx`). A key's history
is the sequence of states the key went through, in LSN order: a state is either the row image
(its tracked columns: every column but the key and the ones the table's history model ignores,
plan.json's `history_ignore`; AUTO CDC is given the same list as
`track_history_except_column_list`) or *absent*. So

- an insert, update or snapshot read makes the row image the key's state; when that image equals
  the current one (a change of ignored columns only, or no change) the state does not change:
  consecutive identical states are one;
- a delete makes the key absent, and a TRUNCATE makes every key present at its LSN absent (the
  rows are gone in PostgreSQL then; AUTO CDC has no way to apply one, its open-source API has no
  `apply_as_truncates`, and is judged on it as the SCD1 comparison judges it);
- a column holding the unchanged-TOAST placeholder `__debezium_unavailable_value` keeps the value
  the row held before the event; after a delete there is none, except for the new key of a
  primary-key change (a transaction that deletes exactly one key and creates exactly one other,
  events.py's rule), which takes the old key's value;
- a key starts absent (leading absent states are dropped) and is open at the end when its last
  state is an image.

A history is right when its sequence of states equals the truth's: the same images in the same
order, the same gaps (deleted, then inserted again), and the same final open or closed state.
Times are not compared (`valid_from`, `__START_AT`): only the order they give. An engine's
versions are read in their order (`_cdc_valid_from_seq`, `__START_AT`); a version ended by a
sequence other than the next version's start (`_cdc_valid_to_seq`, `__END_AT`), or a deletion
marker (`_cdc_is_deleted`, the soft-delete mode of `customers_history`), is followed by *absent*.

A key whose placeholder the truth cannot fill (no earlier value in its generation and no primary
key change to take one from) cannot be judged: it is counted as `not_judged`, apart from `keys`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks.peers.auto_cdc import results_folder
from benchmarks.peers.events import CASES
from benchmarks.peers.ours import lakehouse_of
from benchmarks.peers.plan import DELIVERIES, TOAST_PLACEHOLDER, json_value, read_plan
from cdc_lakehouse.export import read_export
from sample.generator import northwind

ENGINES = {"ours": "cdc-lakehouse history", "auto_cdc": "Spark AUTO CDC, SCD type 2"}
SHORT = {"ours": "ours", "auto_cdc": "AUTO CDC"}
ABSENT = None  # the state of a key with no row
History = tuple[Any, ...]  # states: a row image (JSON text of its tracked values) or ABSENT
_UNAVAILABLE = object()


def _placeholder(value: Any) -> bool:
    return value in (TOAST_PLACEHOLDER, TOAST_PLACEHOLDER.encode(), [TOAST_PLACEHOLDER])


def _key(table: Any, row: dict[str, Any]) -> tuple:
    return tuple(northwind.canonical_value(table.column(k).pg_type, row[k]) for k in table.key)


def _tracked(table: Any, meta: dict[str, Any]) -> list[str]:
    return [c.name for c in table.columns if c.name not in (*table.key, *meta["history_ignore"])]


def _image(canonical: dict[str, Any], tracked: list[str]) -> str:
    return json.dumps([canonical[c] for c in tracked])


def _append(states: list[Any], state: Any) -> None:
    """Consecutive identical states are one; a key starts absent."""
    if (states[-1] if states else ABSENT) != state:
        states.append(state)


def truth(out: Path, table: Any, meta: dict[str, Any]) -> tuple[dict[tuple, History], set]:
    """Each key's history from the events, and the keys that cannot be judged (see above)."""
    import pyarrow.parquet as pq

    events = pq.read_table(out / "events" / table.name).to_pylist()
    tracked = _tracked(table, meta)
    attributes = [c.name for c in table.columns if c.name not in table.key]
    # a primary-key change: the transaction's only delete and only create, of two keys
    by_tx: dict[Any, dict[str, set]] = defaultdict(lambda: {"d": set(), "c": set()})
    for e in events:
        if e["_op"] in ("c", "d") and e["_tx"] is not None:
            by_tx[e["_tx"]][e["_op"]].add(_key(table, e))
    old_key_of = {
        (tx, next(iter(ops["c"]))): next(iter(ops["d"]))
        for tx, ops in by_tx.items()
        if len(ops["d"]) == 1 and len(ops["c"]) == 1 and ops["d"] != ops["c"]
    }
    # LSN order; a delete before a create at the same LSN (a key change's old key first);
    # copies of an event (same key and LSN) count once
    events.sort(key=lambda e: (e["_lsn"], e["_op"] not in ("t", "d"), e["_file"], e["_line"]))
    rows: dict[tuple, dict[str, Any]] = {}  # the live row of each present key
    deleted: dict[tuple, dict[str, Any]] = {}  # each key's row when it was last deleted
    states: dict[tuple, list[Any]] = defaultdict(list)
    seen: set[tuple] = set()
    unjudged: set[tuple] = set()
    for e in events:
        if e["_op"] == "t":
            for key in list(rows):
                _append(states[key], ABSENT)
                del rows[key]
            continue
        key = _key(table, e)
        if (key, e["_lsn"]) in seen:
            continue
        seen.add((key, e["_lsn"]))
        if e["_op"] == "d":
            if key in rows:
                deleted[key] = rows.pop(key)
            _append(states[key], ABSENT)
            continue
        earlier = rows.get(key) or deleted.get(old_key_of.get((e["_tx"], key)), {})
        raw = {c: _UNAVAILABLE if _placeholder(e[c]) else json_value(e[c]) for c in attributes}
        row = {
            c: northwind.canonical_value(table.column(c).pg_type, v)
            for c, v in raw.items()
            if v is not _UNAVAILABLE
        }
        for c in (c for c, v in raw.items() if v is _UNAVAILABLE):
            if c in earlier:
                row[c] = earlier[c]
            else:
                unjudged.add(key)
                row[c] = TOAST_PLACEHOLDER
        rows[key] = row
        _append(states[key], _image(row, tracked))
    return {k: tuple(v) for k, v in states.items()}, unjudged


def _histories(
    table: Any,
    tracked: list[str],
    rows: Iterable[dict[str, Any]],
    start: Callable[[dict], Any],
    end: Callable[[dict], Any],
    deleted: Callable[[dict], bool],
) -> dict[tuple, History]:
    """An engine's versions as states: each version's image in order, then absent where the
    version ended without the next one starting (or at a deletion marker)."""
    by_key: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        canonical = northwind.canonical_lake_row(table, row)
        by_key[_key(table, canonical)].append({**row, "_image": _image(canonical, tracked)})
    out = {}
    for key, versions in by_key.items():
        versions.sort(key=start)
        states: list[Any] = []
        for version, following in zip(versions, [*versions[1:], None], strict=True):
            if deleted(version):
                _append(states, ABSENT)
                continue
            states.append(version["_image"])  # not _append: a repeated version is an error
            if end(version) is not None and (following is None or start(following) != end(version)):
                _append(states, ABSENT)
        out[key] = tuple(states)
    return out


def _json_lines(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line]


def engine_histories(
    out: Path, engine: str, delivery: str, table: Any, meta: dict[str, Any]
) -> dict[tuple, History] | None:
    tracked = _tracked(table, meta)

    def number(value: Any) -> int | None:
        return None if value is None else int(value)

    if engine == "ours":
        rows = read_export(lakehouse_of(out, delivery) / "export", f"silver.{table.name}_history")
        if not rows:
            return None
        return _histories(
            table, tracked, rows,
            start=lambda r: number(r["_cdc_valid_from_seq"]),
            end=lambda r: number(r["_cdc_valid_to_seq"]),
            deleted=lambda r: bool(r["_cdc_is_deleted"]),
        )  # fmt: skip
    path = results_folder(out, 2) / delivery / f"{table.name}.jsonl"
    if not path.exists():
        return None
    return _histories(
        table, tracked, _json_lines([path]),
        start=lambda r: number(r["__START_AT"]),
        end=lambda r: number(r["__END_AT"]),
        deleted=lambda r: False,
    )  # fmt: skip


def _show(state: Any, tracked: list[str], other: Any) -> str:
    if state is ABSENT:
        return "absent"
    if other is ABSENT or other is None:
        return "a row"
    values, others = json.loads(state), json.loads(other)
    changed = [(c, v) for c, v, o in zip(tracked, values, others, strict=True) if v != o]
    return ", ".join(f"{c} = {str(v)[:40]!r}" for c, v in changed[:2])


def _difference(table: Any, tracked: list[str], key: tuple, want: History, have: History) -> str:
    for i, (w, h) in enumerate(zip(want, have, strict=False)):
        if w != h:
            return (
                f"{table.name} {list(key)}: state {i + 1} is {_show(h, tracked, w)} "
                f"(truth {_show(w, tracked, h)})"
            )
    if len(have) < len(want):
        missing = "absent (deleted or truncated)" if want[len(have)] is ABSENT else "a version"
        return f"{table.name} {list(key)}: state {len(have) + 1} missing (truth: {missing})"
    return f"{table.name} {list(key)}: {len(have) - len(want)} state(s) more than the truth"


def compare(out: Path, engines: list[str]) -> dict[str, Any]:
    """delivery -> engine -> per case: keys (judged), right, not_judged; wrong examples."""
    from benchmarks.peers.plan import sample_tables

    plan = read_plan(out)
    cases = json.loads((out / "cases.json").read_text())
    truths = {t.name: truth(out, t, plan["tables"][t.name]) for t in sample_tables()}
    results: dict[str, Any] = {}
    for delivery in DELIVERIES:
        per_engine: dict[str, Any] = {}
        for engine in engines:
            counts = {case: {"keys": 0, "right": 0, "not_judged": 0} for case in CASES}
            examples: dict[str, list[str]] = {case: [] for case in CASES}
            complete = True
            for table in sample_tables():
                meta = plan["tables"][table.name]
                histories = engine_histories(out, engine, delivery, table, meta)
                if histories is None:
                    complete = False
                    continue
                expected, unjudged = truths[table.name]
                for case in CASES:
                    for key_json in cases[table.name][case]:
                        key = tuple(json.loads(key_json))
                        if key in unjudged:
                            counts[case]["not_judged"] += 1
                            continue
                        want, have = expected.get(key, ()), histories.get(key, ())
                        counts[case]["keys"] += 1
                        counts[case]["right"] += want == have
                        if want != have and len(examples[case]) < 2:
                            tracked = _tracked(table, meta)
                            examples[case].append(_difference(table, tracked, key, want, have))
            if complete:
                per_engine[engine] = {"cases": counts, "wrong_examples": examples}
        results[delivery] = per_engine
    return results


def markdown(results: dict[str, Any], runs: dict[str, Any]) -> str:
    """The history section of docs/peers.md: one table, a column per delivery and engine; the
    wrong examples, each once with the deliveries it was seen in."""
    from benchmarks.peers.compare import CASE_TITLES, _cell

    deliveries = [d for d in DELIVERIES if results.get(d)]
    if not deliveries:
        return ""
    columns = [(d, e) for d in deliveries for e in ENGINES if e in results[d]]
    lines = [
        "### History (SCD type 2): every key's versions against the events",
        "",
        f"{ENGINES['ours']} (`silver.<table>_history`) and {ENGINES['auto_cdc']} (pyspark 4.3),",
        "per delivery; right/keys.",
        "",
        "| case | " + " | ".join(f"{d} {SHORT[e]}" for d, e in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for case in CASES:
        cells = [_cell(results[d][e]["cases"][case]) for d, e in columns]
        lines.append(f"| {CASE_TITLES[case]} | " + " | ".join(cells) + " |")
    lines.append("")
    not_judged = {
        case: n
        for case in CASES
        if (n := max(results[d][e]["cases"][case]["not_judged"] for d, e in columns))
    }
    if not_judged:
        lines.append(f"- Not judged (the truth cannot fill a TOAST placeholder): {not_judged}")
    seen: dict[str, list[str]] = {}
    for delivery, engine in columns:
        for case, found in results[delivery][engine]["wrong_examples"].items():
            for example in found:
                seen.setdefault(f"{ENGINES[engine]}, {case}: {example}", []).append(delivery)
    lines += [f"- {text} ({', '.join(where)})" for text, where in seen.items()]
    for delivery in deliveries:
        for error in runs.get("auto_cdc_scd2", {}).get("errors", {}).get(delivery, []):
            lines.append(f"- {delivery}, {ENGINES['auto_cdc']} raised: `{error}`")
    return "\n".join(lines) + "\n\n"
