"""Extract-diff deletes for query-based sources: complete extracts compared with the change log.

A JDBC source connector polling on a timestamp column never sees a delete. A periodic complete
extract of the table (the JDBC connector in `bulk` mode, an export job, the capture tool's
JdbcSource.extract) tells which keys are gone: a key whose latest known version is older than the
extract and that the extract does not hold was deleted before it was taken (AUTO CDC's
`from_snapshot` in Databricks works the same way).

An extract lands as one folder under the table's extract folder (`extracts/<topic>/` by
default), with its rows as JSON lines in the table's own shape and, written last, a manifest
`_cdc_extract.json` that makes it complete (an extract waits while its manifest, or a file the
manifest lists, has not arrived):

    {"topic": "northwind_jdbc.suppliers", "as_of": "2026-01-05T10:00:00.123",
     "rows": 23, "files": ["part-00000.json"]}

`as_of` is the time the extract saw the table, in the clock of the table's timestamp column (the
column `order_by` names first; ISO-8601, with an offset for `timestamptz`): every change committed
before the extract has a timestamp at or before it. A folder without a manifest is an extract
still being written: it waits. An extract whose files do not hold exactly `rows` decodable lines
is incomplete: its rows are loaded, it deletes nothing, and the manifest is reported as a reject
(so a truncated extract can never delete live rows).

The bronze model does the diff when it loads a new extract (see flatten_model): its rows are
upserts like the polled rows (ordered by the same timestamp and incrementing columns), and for
every key whose latest version at or before `as_of` (in the bronze change log: polled rows,
earlier extracts and their deletes) is live and that the extract does not hold, it appends a
delete event ordered right after `as_of` (after every change with that timestamp, before every
later one). The change log then resolves like any other: the same ordering, duplicate collapse
and idempotence rules for silver and history, hard or soft deletes per the table's delete_mode.
A key re-created after `as_of` orders after the delete and stays; an extract that lands late
(after newer changes) deletes only what was already gone at `as_of`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.decode import loaded_at_sql
from cdc_lakehouse.bronze.landing import landing_root
from cdc_lakehouse.bronze.layout import LandingFile
from cdc_lakehouse.bronze.spec import TableSpec

MANIFEST = "_cdc_extract.json"
# A jdbc-shape sequence is <epoch micros of the timestamp> * 10^19 + <incrementing column>.
_SCALE = 10**19
_EPOCH = datetime(1970, 1, 1)


def as_of_micros(as_of: str) -> int:
    """Epoch microseconds of `as_of` as the decoder counts a timestamp: an instant for a value
    with an offset, the UTC wall clock for one without (like `timestamp_ntz`)."""
    moment = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def delete_sequence(as_of: str) -> Decimal:
    """The sequence of an extract's deletes: after every change with a timestamp at or before
    `as_of`, before every later one."""
    return Decimal(as_of_micros(as_of) * _SCALE + _SCALE - 1)


@dataclass(frozen=True)
class Extract:
    """One landed extract: its folder (relative to the landing root), its manifest and files.

    problem: why it deletes nothing (an unreadable manifest, rows missing or rejected); reported
    as a reject of the manifest's line 0."""

    folder: str
    manifest: str  # relative path of the manifest: what the loaded-files ledger records
    as_of: str = ""
    rows: int = 0
    files: tuple[LandingFile, ...] = ()
    problem: str | None = field(default=None, compare=False)


def extract_folder(spec: TableSpec) -> str:
    return spec.extracts or f"extracts/{spec.topic}"


def list_extracts(spark: SparkSession, root: str, spec: TableSpec) -> list[Extract]:
    """The complete extracts (a manifest written) of the table under `root`, oldest `as_of`
    first; through the Hadoop FileSystem API, so object stores work as local folders do."""
    hpath = spark._jvm.org.apache.hadoop.fs.Path
    fs, root_path = landing_root(spark, root)
    root_text = root_path.toString().rstrip("/") + "/"
    folder = extract_folder(spec).strip("/")
    found = fs.globStatus(hpath(root_path, f"{folder}/*/{MANIFEST}")) or []
    extracts = []
    for status in found:
        manifest_path = status.getPath()
        text = manifest_path.toString()
        relative = text[len(root_text) :] if text.startswith(root_text) else text
        found_extract = _read_manifest(spark, fs, manifest_path, relative)
        if found_extract is not None:
            extracts.append(found_extract)
    return sorted(extracts, key=lambda s: (s.problem is None, _sort_key(s), s.folder))


def _sort_key(extract: Extract) -> int:
    return as_of_micros(extract.as_of) if extract.problem is None else 0


def _read_manifest(spark: SparkSession, fs, manifest_path, relative: str) -> Extract | None:
    """The extract a manifest describes; None while a file it lists is not there yet."""
    jvm = spark._jvm
    folder = relative.rsplit("/", 1)[0]
    stream = fs.open(manifest_path)
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    try:
        manifest = json.loads(text)
        as_of = str(manifest["as_of"])
        as_of_micros(as_of)
        rows = int(manifest["rows"])
        names = [str(n) for n in manifest["files"]]
    except (ValueError, KeyError, TypeError) as exc:
        return Extract(folder, relative, problem=f"unreadable extract manifest: {exc}")
    parent = manifest_path.getParent()
    files = []
    for name in names:
        path = fs.makeQualified(jvm.org.apache.hadoop.fs.Path(parent, name))
        if not fs.exists(path):
            return None  # still arriving (a copy tool need not keep the writer's order): waits
        files.append(LandingFile(path=path.toString(), relative=f"{folder}/{name}"))
    return Extract(folder, relative, as_of, rows, tuple(files))


def with_extract_deletes(
    decoded: DataFrame,
    extracts: Sequence[Extract],
    spec: TableSpec,
    history: DataFrame | None,
    loaded_at: datetime,
    loaded: Sequence[Extract] = (),
) -> DataFrame:
    """`decoded` (the batch: polled rows and the new `extracts`' rows) with the deletes the
    extracts reveal appended, and a reject for each new extract that deletes nothing.
    `history` is the change log already loaded (the bronze table; None on a first build) and
    `loaded` the extracts it already holds.

    Each complete extract, oldest `as_of` first, deletes the keys it does not hold whose latest
    event at or before `as_of` (history, batch and the deletes found so far) is live: a new
    extract over every key, a loaded one over the keys of the batch's late events (a change
    older than the extract that lands after it: a key created and deleted around it).

    An extract's rows take its sequence (they are the state at `as_of`): a row that an extract
    holds is live at `as_of` even when its timestamp is older than a delete an earlier extract
    made (a transaction that committed after that extract read the table)."""
    spark = decoded.sparkSession
    at = {
        f.relative: delete_sequence(s.as_of) for s in extracts if s.problem is None for f in s.files
    }
    if at:
        files = spark.createDataFrame(
            [(name, seq) for name, seq in at.items()], "_cdc_file string, __cdc_at decimal(38,0)"
        )
        seq = F.when(F.col("_cdc_reject_reason").isNull(), F.col("__cdc_at"))
        decoded = decoded.join(F.broadcast(files), "_cdc_file", "left").select(
            *[
                F.coalesce(seq, F.col(c)).alias(c) if c == "_cdc_seq" else F.col(c)
                for c in decoded.columns
            ]
        )
    batch = decoded.localCheckpoint()  # decoded once, read by every extract's diff
    complete, problems = _checked(batch, extracts)
    keys = list(spec.key)
    # Late events: accepted changes of the batch (not extract rows) and the oldest of them.
    changes = batch.where(
        F.col("_cdc_reject_reason").isNull()
        & (F.col("_cdc_op") != "t")
        & ~F.col("_cdc_file").isin(list(at) or [""])
    )
    reopened: list[Extract] = []
    if history is not None and loaded:
        oldest = changes.agg(F.min("_cdc_seq")).first()[0]
        if oldest is not None:
            reopened = [
                s for s in loaded if s.problem is None and delete_sequence(s.as_of) >= oldest
            ]
        if reopened:  # only then: which of them were incomplete (their manifest's reject)
            manifests = [s.manifest for s in reopened]
            rejected = {
                r[0]
                for r in history.where(
                    F.col("_cdc_file").isin(manifests) & F.col("_cdc_reject_reason").isNotNull()
                )
                .select("_cdc_file")
                .collect()
            }
            reopened = [s for s in reopened if s.manifest not in rejected]
    late = changes.select(*keys).distinct() if reopened else None
    parts = [batch]
    for extract in sorted([*complete, *reopened], key=lambda s: as_of_micros(s.as_of)):
        log = _change_log(batch, history, parts[1:])
        names = [f.relative for f in extract.files]
        if extract in reopened:
            held = history.where(
                F.col("_cdc_file").isin(names) & F.col("_cdc_reject_reason").isNull()
            )
            scope = late
        else:
            held = batch.where(
                F.col("_cdc_file").isin(names) & F.col("_cdc_reject_reason").isNull()
            )
            scope = None
        deletes = _deletes(log, batch.columns, held.select(*keys), scope, extract, spec, loaded_at)
        parts.append(deletes.localCheckpoint())
    if problems:
        parts.append(_rejects(spark, batch, problems, loaded_at))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _checked(batch: DataFrame, extracts: Sequence[Extract]) -> tuple[list[Extract], list[Extract]]:
    """The extracts whose files hold exactly their manifest's rows, none rejected (oldest
    first), and the others with their problem (one aggregate over the batch)."""
    readable = [s for s in extracts if s.problem is None]
    problems = [s for s in extracts if s.problem is not None]
    counts: dict[str, tuple[int, int]] = {}
    if readable:
        owner = [(f.relative, s.manifest) for s in readable for f in s.files]
        files = batch.sparkSession.createDataFrame(owner, "_cdc_file string, __cdc_m string")
        counts = {
            row[0]: (row[1], row[2])
            for row in batch.join(F.broadcast(files), "_cdc_file")
            .groupBy("__cdc_m")
            .agg(F.count(F.lit(1)), F.count_if(F.col("_cdc_reject_reason").isNotNull()))
            .collect()
        }
    complete = []
    for extract in readable:
        n, bad = counts.get(extract.manifest, (0, 0))
        if n == extract.rows and bad == 0:
            complete.append(extract)
            continue
        why = f"the manifest says {extract.rows} rows, {n} were read"
        if bad:
            why = f"{bad} of its {n} rows rejected"
        problems.append(replace(extract, problem=f"incomplete extract: {why}; it deletes nothing"))
    complete.sort(key=lambda s: as_of_micros(s.as_of))
    return complete, problems


def _change_log(batch: DataFrame, history: DataFrame | None, deletes: Iterable[DataFrame]):
    """Every accepted event known so far, in the batch's columns."""
    log = batch
    for part in deletes:
        log = log.unionByName(part)
    if history is not None:
        present = set(history.columns)
        known = history.select(*[c for c in batch.columns if c in present])
        log = log.unionByName(known, allowMissingColumns=True)
    return log.where("_cdc_reject_reason IS NULL AND _cdc_op <> 't'")


def _deletes(
    log: DataFrame,
    columns: Sequence[str],
    held: DataFrame,
    scope: DataFrame | None,
    extract: Extract,
    spec: TableSpec,
    loaded_at: datetime,
) -> DataFrame:
    """The delete events of one extract: keys (of `scope`, or all) whose latest event at or
    before its `as_of` is live and that it does not hold (`held`), in `columns`."""
    keys = list(spec.key)
    cutoff = F.lit(delete_sequence(extract.as_of)).cast("decimal(38,0)")
    latest = Window.partitionBy(*keys).orderBy(
        F.col("_cdc_seq").desc(), (F.col("_cdc_op") == "d").desc()
    )
    candidates = log.where(F.col("_cdc_seq") <= cutoff)
    if scope is not None:
        candidates = candidates.join(scope, keys, "left_semi")
    known = (
        candidates.withColumn("__cdc_rank", F.row_number().over(latest))
        .where("__cdc_rank = 1 AND _cdc_op <> 'd'")
        .drop("__cdc_rank")
    )
    gone = known.join(held, keys, "left_anti")
    replaced = {
        "_cdc_op": F.lit("d"),
        "_cdc_seq": cutoff,
        "_cdc_source_ts": F.expr(f"timestamp_micros({as_of_micros(extract.as_of)}L)"),
        "_cdc_tx_id": F.lit(None),
        "_cdc_unavailable_columns": F.lit(None),
        "_cdc_file": F.lit(extract.manifest),
        "_cdc_line": F.lit(0),
        "_cdc_offset": F.lit(None),
        "_cdc_loaded_at": F.expr(loaded_at_sql(loaded_at)),
        "_cdc_reject_reason": F.lit(None),
        "_cdc_raw": F.lit(None),
        "_cdc_undeclared": F.lit(None),
    }
    types = dict(log.dtypes)
    return gone.select(
        *[(replaced[c].cast(types[c]) if c in replaced else F.col(c)).alias(c) for c in columns]
    )


def _rejects(
    spark: SparkSession, decoded: DataFrame, problems: Sequence[Extract], loaded_at: datetime
) -> DataFrame:
    """One reject per extract that deletes nothing: the manifest's line 0, with the reason."""
    types = dict(decoded.dtypes)
    rows = spark.createDataFrame(
        [(s.manifest, s.problem) for s in problems], "_cdc_file string, _cdc_reject_reason string"
    )
    fixed = {
        "_cdc_file": F.col("_cdc_file"),
        "_cdc_line": F.lit(0),
        "_cdc_loaded_at": F.expr(loaded_at_sql(loaded_at)),
        "_cdc_reject_reason": F.col("_cdc_reject_reason"),
    }
    return rows.select(
        *[(fixed.get(c, F.lit(None))).cast(types[c]).alias(c) for c in decoded.columns]
    )


# -- writing (the capture tool and tests) ------------------------------------------------------


def write_extract(
    folder: Path, lines: Sequence[str], *, topic: str, as_of: str, rows_per_file: int = 10_000
) -> Path:
    """Land one complete extract in `folder` (a new folder below the table's extract folder):
    the rows as JSON lines in `part-NNNNN.json` files, then the manifest (written last, by a
    rename, so a reader sees all of it or nothing). Returns the manifest's path."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for start in range(0, len(lines), rows_per_file):
        name = f"part-{start // rows_per_file:05d}.json"
        (folder / name).write_text(
            "".join(f"{line}\n" for line in lines[start : start + rows_per_file])
        )
        names.append(name)
    manifest = {"topic": topic, "as_of": as_of, "rows": len(lines), "files": names}
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, folder / MANIFEST)
    return folder / MANIFEST
