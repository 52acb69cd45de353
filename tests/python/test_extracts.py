"""Extract-diff deletes for query-based sources (cdc_lakehouse/bronze/extracts.py): a complete
extract deletes the keys it does not hold whose latest version is at or before its `as_of`, and
nothing else; an incomplete one deletes nothing and is reported. The whole path through dbt (bronze,
silver, history) is checked against PostgreSQL by the oracle (test_oracle.py: the workload deletes
and re-inserts suppliers, which only the extracts reveal)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.bronze.decode import decode_changes
from cdc_lakehouse.bronze.extracts import (
    MANIFEST,
    delete_sequence,
    list_extracts,
    with_extract_deletes,
    write_extract,
)
from cdc_lakehouse.bronze.landing import LandingFile, read_landing_lines
from cdc_lakehouse.bronze.spec import TableSpec

TOPIC = "shop_jdbc.suppliers"
SPEC = TableSpec.from_config(
    None,
    {
        "topic": TOPIC,
        "shape": "jdbc",
        "key": ["id"],
        "order_by": ["last_update", "id"],
        "time_precision_mode": "connect",  # the JDBC connector's Connect Timestamp (epoch ms)
        "columns": {"id": "int", "name": "text", "last_update": "timestamp"},
        "extracts": True,
    },
)
LOADED_AT = datetime(2026, 11, 26, tzinfo=UTC)


def ms(day: int) -> int:
    """Epoch milliseconds of 2026-01-<day> 00:00 (how the connector writes `timestamp`)."""
    return int(datetime(2026, 1, day, tzinfo=UTC).timestamp() * 1000)


def row(key: int, name: str, day: int) -> str:
    return json.dumps({"id": key, "name": name, "last_update": ms(day)})


def as_of(day: int) -> str:
    return f"2026-01-{day:02d}T00:00:00"


def polled(spark: SparkSession, root: Path, name: str, lines: list[str]) -> LandingFile:
    path = root / "topics" / TOPIC / "partition=0" / f"{TOPIC}+0+{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return LandingFile(
        path=f"file:{path}", relative=str(path.relative_to(root)), partition=0, offset=0
    )


def load(
    spark: SparkSession, root: Path, files: list[LandingFile], history: DataFrame | None = None
) -> DataFrame:
    """One bronze batch the way flatten_model builds it: the new polled files and every new
    extract (those whose manifest is not in `history`)."""
    done = set() if history is None else {r[0] for r in history.select("_cdc_file").collect()}
    listed = list_extracts(spark, str(root), SPEC)
    extracts = [s for s in listed if s.manifest not in done]
    loaded = [s for s in listed if s.manifest in done]
    extract_files = [f for s in extracts for f in s.files if s.problem is None]
    decoded = decode_changes(read_landing_lines(spark, files + extract_files), SPEC, LOADED_AT)
    out = with_extract_deletes(decoded, extracts, SPEC, history, LOADED_AT, loaded)
    rows = out.collect()  # a plain DataFrame, as bronze appends it
    return (
        spark.createDataFrame(rows, out.schema)
        if history is None
        else history.unionByName(spark.createDataFrame(rows, out.schema))
    )


def deletes(bronze: DataFrame) -> dict[int, Decimal]:
    return {
        r["id"]: r["_cdc_seq"]
        for r in bronze.where("_cdc_op = 'd' AND _cdc_reject_reason IS NULL").collect()
    }


def extract(root: Path, day: int, lines: list[str], **manifest_edits) -> Path:
    folder = root / "extracts" / TOPIC / f"as_of={day}"
    manifest = write_extract(folder, lines, topic=TOPIC, as_of=as_of(day))
    if manifest_edits:
        body = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**body, **manifest_edits}))
    return manifest


def test_a_key_missing_from_an_extract_is_deleted_after_its_last_change(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = polled(spark, tmp_path, "0", [row(1, "a", 1), row(2, "b", 2), row(3, "c", 3)])
    extract(tmp_path, 4, [row(1, "a", 1), row(3, "c", 3)])
    bronze = load(spark, tmp_path, [first])
    assert deletes(bronze) == {2: delete_sequence(as_of(4))}
    gone = bronze.where("_cdc_op = 'd'").first()
    # the delete carries the last values (soft deletes keep them) and says where it came from
    assert (gone["name"], gone["_cdc_line"]) == ("b", 0)
    assert gone["_cdc_file"] == f"extracts/{TOPIC}/as_of=4/{MANIFEST}"
    # the extract's rows are the state at as_of: they order at its sequence
    held = bronze.where("_cdc_file LIKE 'extracts/%' AND _cdc_op = 'u'").collect()
    assert {r["_cdc_seq"] for r in held} == {delete_sequence(as_of(4))}
    # a delete orders after every change of its day and before the next day's
    changes_of_2 = [r["_cdc_seq"] for r in bronze.collect() if r["id"] == 2 and r["_cdc_op"] == "u"]
    assert delete_sequence(as_of(4)) > max(changes_of_2)
    later = decode_changes(
        read_landing_lines(spark, [polled(spark, tmp_path, "9", [row(2, "b again", 5)])]), SPEC
    ).first()
    assert later["_cdc_seq"] > delete_sequence(as_of(4))


def test_a_late_extract_keeps_keys_created_after_it_and_deletes_only_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    # key 4 was created on day 6, after the extract of day 5 that lands late (with it)
    first = polled(spark, tmp_path, "0", [row(1, "a", 1), row(2, "b", 2), row(4, "d", 6)])
    extract(tmp_path, 5, [row(1, "a", 1)])
    bronze = load(spark, tmp_path, [first])
    assert deletes(bronze) == {2: delete_sequence(as_of(5))}
    # the next extract (day 7) does not hold 2 either: already deleted, no second delete;
    # key 1 is gone now, key 4 is held
    extract(tmp_path, 7, [row(4, "d", 6)])
    bronze = load(spark, tmp_path, [], history=bronze)
    assert deletes(bronze) == {2: delete_sequence(as_of(5)), 1: delete_sequence(as_of(7))}
    # loading again finds nothing new: idempotent
    assert load(spark, tmp_path, [], history=bronze).count() == bronze.count()


def test_changes_older_than_a_loaded_extract_reopen_it(spark: SparkSession, tmp_path: Path) -> None:
    """Key 2 is created on day 3 and deleted before the extract of day 9; the extract lands
    first, the change (and the day 4 extract that holds 2) later: the day 9 extract, loaded
    already, deletes 2 once its change has landed."""
    extract(tmp_path, 9, [row(1, "a", 1)])
    bronze = load(spark, tmp_path, [polled(spark, tmp_path, "0", [row(1, "a", 1)])])
    assert deletes(bronze) == {}
    extract(tmp_path, 4, [row(1, "a", 1), row(2, "b", 3)])
    bronze = load(spark, tmp_path, [polled(spark, tmp_path, "1", [row(2, "b", 3)])], bronze)
    assert deletes(bronze) == {2: delete_sequence(as_of(9))}
    # and a change newer than every extract reopens none
    bronze = load(spark, tmp_path, [polled(spark, tmp_path, "2", [row(3, "c", 10)])], bronze)
    assert deletes(bronze) == {2: delete_sequence(as_of(9))}


def test_two_extracts_in_one_batch_apply_in_as_of_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = polled(spark, tmp_path, "0", [row(1, "a", 1), row(2, "b", 2)])
    extract(tmp_path, 9, [row(1, "a", 1), row(3, "c", 8)])  # 2 gone by day 9
    extract(tmp_path, 4, [row(1, "a", 1), row(2, "b", 2)])  # both there on day 4
    bronze = load(spark, tmp_path, [first])
    assert deletes(bronze) == {2: delete_sequence(as_of(9))}


def test_an_incomplete_extract_deletes_nothing_and_is_reported(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = polled(spark, tmp_path, "0", [row(1, "a", 1), row(2, "b", 2), row(3, "c", 3)])
    short = extract(tmp_path, 4, [row(1, "a", 1)], rows=2)  # a file cut short
    bad = extract(tmp_path, 5, [row(1, "a", 1), "{not json"])
    broken = extract(tmp_path, 8, [row(1, "a", 1)], rows="many")
    # still arriving: a listed file not there yet, or no manifest yet (being written): they wait
    extract(tmp_path, 6, [row(1, "a", 1)], files=["part-00000.json", "part-00001.json"])
    (tmp_path / "extracts" / TOPIC / "as_of=7").mkdir()
    (tmp_path / "extracts" / TOPIC / "as_of=7" / "part-00000.json").write_text(row(1, "a", 1))
    bronze = load(spark, tmp_path, [first])
    assert deletes(bronze) == {}
    reasons = {
        r["_cdc_file"]: r["_cdc_reject_reason"]
        for r in bronze.where("_cdc_line = 0 AND _cdc_reject_reason IS NOT NULL").collect()
    }
    root = f"extracts/{TOPIC}"
    assert reasons == {
        str(short.relative_to(tmp_path)): "incomplete extract: the manifest says 2 rows, 1 were "
        "read; it deletes nothing",
        str(bad.relative_to(tmp_path)): "incomplete extract: 1 of its 2 rows rejected; it "
        "deletes nothing",
        str(broken.relative_to(tmp_path)): "unreadable extract manifest: invalid literal for "
        "int() with base 10: 'many'",
    }
    assert all(name.startswith(root) for name in reasons)
    # the rows of a short extract are still true as of its time: loaded (and the bad line
    # rejected with its own reason)
    assert bronze.where(f"_cdc_file = '{root}/as_of=4/part-00000.json'").count() == 1
    assert bronze.where("_cdc_reject_reason = 'invalid JSON'").count() == 1
    assert bronze.where("_cdc_file LIKE '%as_of=6%' OR _cdc_file LIKE '%as_of=7%'").count() == 0
    # a change older than them that lands later does not reopen them: they stay deleting nothing
    late = polled(spark, tmp_path, "1", [row(4, "d", 2)])
    assert deletes(load(spark, tmp_path, [late], history=bronze)) == {}


def test_extracts_are_for_query_based_sources() -> None:
    with pytest.raises(ValueError, match="query-based sources"):
        TableSpec.from_config(None, {"topic": "t", "key": ["id"], "extracts": True})
    folder = TableSpec.from_config(
        None, {"topic": "t", "shape": "jdbc", "key": ["id"], "order_by": ["u"], "extracts": "x/y/"}
    )
    assert folder.extracts == "x/y"
    # the setting's former name is refused with the new one, not ignored
    with pytest.raises(ValueError, match="is now `extracts:`"):
        TableSpec.from_config(
            None,
            {"topic": "t", "shape": "jdbc", "key": ["id"], "order_by": ["u"], "snapshots": True},
        )
