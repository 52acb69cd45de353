"""List and read landing files written by a Kafka Connect storage sink (one record value per line).

Where a topic's files are and how they are named is the source's layout (layout.py: Confluent's
S3 sink by default, Aiven's, the Lenses stream-reactor's, or any pattern of the same form).
Reading keeps, for every line, the file it came from, its exact 1-based line number and the
Kafka partition and offset the file name gives, so that every decoded row can be traced back and
ordered. A file the layout cannot name, or in a format not read here, is reported as a reject of
line 0 with the reason: never skipped silently, never guessed at.

Parquet files (Confluent's S3 sink with `format.class=ParquetFormat`: `<topic>+<p>+<offset>
.gz.parquet`, written through parquet-avro from the Connect record) are read as rows and each
row is written back as the line the JsonConverter with schemas on would have landed for the same
record (the Parquet types as Connect types: Decimal as base64 unscaled bytes, Timestamp as epoch
milliseconds, Date as epoch days), so one decoder serves both; its line number is the row's
position in the file (`_metadata.row_index` + 1).

Avro files (`format.class=AvroFormat`: `<topic>+<p>+<offset>.avro`, Avro container files of the
Connect record through AvroData) are read the same way with Spark's Avro data source (the
spark-avro jar of jvm/pom.xml): each file's header is read first, a file that is not Avro is a
reject, and files are read in groups of one writer schema each (Spark reads every file of one
read with one schema, so a field a later file adds would otherwise be lost); a row's line is its
position in the file, counted like the lines of a JSON file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lakehouse.bronze.layout import LandingFile, Layout, TopicFiles

__all__ = [
    "LINES_SCHEMA",
    "LandingFile",
    "Layout",
    "list_landing_files",
    "read_landing_lines",
    "read_surveyed_lines",
]

LINES_SCHEMA = T.StructType(
    [
        T.StructField("_cdc_file", T.StringType(), False),
        T.StructField("_cdc_line", T.IntegerType(), False),
        T.StructField("_cdc_offset", T.LongType(), True),
        T.StructField("_cdc_partition", T.IntegerType(), True),
        T.StructField("value", T.StringType(), True),
        # Why a file is not read (its one line 0 is then a reject): see LandingFile.problem.
        T.StructField("_cdc_file_problem", T.StringType(), True),
    ]
)


def _qualify_root(root: str) -> str:
    """Relative local roots are resolved against Python's cwd (the JVM's may differ)."""
    if urlsplit(root).scheme or os.path.isabs(root):
        return root
    return os.path.abspath(root)


def _list_file_uris(spark: SparkSession, folder: str) -> list[str]:
    """URIs of the files under `folder`, recursively, from Spark's own file listing (which skips
    `_`- and `.`-prefixed names). The names cross from the JVM as one string: a py4j call per
    file took 5 s for 1,000 files."""
    listed = spark.read.option("recursiveFileLookup", "true").text(folder)._jdf.inputFiles()
    text = spark._jvm.org.apache.hadoop.util.StringUtils.join("\u0000", listed)
    return text.split("\u0000") if text else []


def landing_root(spark: SparkSession, root: str):
    """The Hadoop FileSystem of a landing root and the root's qualified Path (`file:/...`,
    `s3a://...`): local folders and object stores are listed the same way."""
    root_path = spark._jvm.org.apache.hadoop.fs.Path(_qualify_root(root))
    fs = root_path.getFileSystem(spark._jsc.hadoopConfiguration())
    return fs, fs.makeQualified(root_path)


def list_landing_files(
    spark: SparkSession, root: str, topic: str, layout: Layout | None = None
) -> list[LandingFile]:
    """The files of `topic` under `root` in `layout` (default: Confluent's), sorted by relative
    path, each with the partition and offset its name gives. Files in the topic's folders that
    the layout cannot name are returned too, with their `problem`: the reader reports them.

    Goes through the Hadoop FileSystem API (and Spark's listing on top of it) so that local
    paths and object stores (s3a://...) behave the same. A missing folder means nothing landed
    yet: an empty list.
    """
    topic_files = TopicFiles(layout or Layout(), topic)
    jvm = spark._jvm
    fs, root_path = landing_root(spark, root)
    # Decoded URI paths on both sides, so names with spaces or '%' compare as they are.
    root_prefix = root_path.toUri().getPath().rstrip("/") + "/"
    files: dict[str, LandingFile] = {}
    for folder in topic_files.folders:
        folder_path = jvm.org.apache.hadoop.fs.Path(root_path, folder) if folder else root_path
        if not fs.exists(folder_path):
            continue
        for uri in _list_file_uris(spark, folder_path.toString()):
            parts = urlsplit(uri)
            uri_path = unquote(parts.path)
            if not uri_path.startswith(root_prefix) or uri_path[len(root_prefix) :] in files:
                continue
            relative = uri_path[len(root_prefix) :]
            # Hadoop's text for the path (`file:/a b`, `s3a://b/a b`): Spark reads it as is.
            authority = f"//{parts.netloc}" if parts.netloc else ""
            found = topic_files.classify(f"{parts.scheme}:{authority}{uri_path}", relative)
            if found is not None:
                files[relative] = found
    return sorted(files.values(), key=lambda f: f.relative)


_SCHEME_SLASHES = r"^([A-Za-z][A-Za-z0-9+.-]*):/+"


def _listed_key(path: str) -> str:
    """Comparable form of a path as Hadoop lists it (decoded, `file:/x`)."""
    return re.sub(_SCHEME_SLASHES, r"\1://", path)


def _scanned_key(file_path: Column) -> Column:
    """Same form for `_metadata.file_path`, which Spark reports URL-encoded (`file:/a%20b`)."""
    decoded = F.url_decode(F.replace(file_path, F.lit("+"), F.lit("%2B")))  # '+' is no space
    return F.regexp_replace(decoded, _SCHEME_SLASHES, "$1://")


def _file_table(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """One row per file: its comparable path and what we report for it."""
    rows = [
        (_listed_key(f.path), f.relative, f.partition, f.offset, f.offset_is_last) for f in files
    ]
    schema = (
        "path_key string, _cdc_file string, _cdc_partition int, name_offset bigint, "
        "offset_is_last boolean"
    )
    return spark.createDataFrame(rows, schema)


def _block_counts(scanned: DataFrame, survey: Sequence[Column] = ()) -> DataFrame:
    """Per (file, block): its first row id and how many lines it has, and the `survey`
    aggregates over its lines' `value` (`_cdc_survey_<i>`, see read_surveyed_lines). One row
    per block: small however many lines the files hold."""
    aggregates = [F.min("row_id").alias("block_first_id"), F.count(F.lit(1)).alias("block_lines")]
    return scanned.groupBy("file_path", "block_start").agg(*aggregates, *_named(survey))


def _named(survey: Sequence[Column]) -> list[Column]:
    """The survey's aggregates as the columns `_cdc_survey_<i>`."""
    return [aggregate.alias(f"_cdc_survey_{i}") for i, aggregate in enumerate(survey)]


def _block_table(counts: DataFrame, files: DataFrame) -> DataFrame:
    """Per (file, block) of _block_counts: first row id, how many lines precede the block in
    its file and how many lines the file has.

    Rows of one file block are read by one task, in order, so their monotonically increasing
    ids are consecutive: the line number is an offset from the block's first id. The counts
    have one row per block, so the window and the broadcast below stay small.
    """
    earlier = Window.partitionBy("file_path").orderBy("block_start")
    before = F.sum("block_lines").over(earlier.rowsBetween(Window.unboundedPreceding, -1))
    return counts.select(
        "file_path",
        "block_start",
        "block_first_id",
        F.coalesce(before, F.lit(0)).alias("lines_before"),
        F.sum("block_lines").over(Window.partitionBy("file_path")).alias("file_lines"),
        _scanned_key(F.col("file_path")).alias("path_key"),
    ).join(F.broadcast(files), "path_key", "left")


def _reported_files(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """One line 0 per file that is not read, with the reason (decoded as a reject)."""
    rows = [(f.relative, 0, None, f.partition, None, f.problem) for f in files]
    return spark.createDataFrame(rows, LINES_SCHEMA)


def _record_offset(line: Column, file_lines: Column) -> Column:
    """A record's offset from its line: the file name gives the first record's offset, or the
    last's (`offset_is_last`; one record per line)."""
    return F.when(F.col("offset_is_last"), F.col("name_offset") - file_lines + line).otherwise(
        F.col("name_offset") + line - 1
    )


def _is_parquet(file: LandingFile) -> bool:
    return file.relative.lower().endswith(".parquet")


# Parquet (Spark) type -> Kafka Connect schema of the field, for the types Connect's AvroData
# writes (parquet-avro). Decimals, timestamps, dates and arrays are built in _connect_field.
_CONNECT_PRIMITIVES = {
    T.ByteType: "int8",
    T.ShortType: "int16",
    T.IntegerType: "int32",
    T.LongType: "int64",
    T.FloatType: "float",
    T.DoubleType: "double",
    T.BooleanType: "boolean",
    T.StringType: "string",
    T.BinaryType: "bytes",
}
_TWO_POW_64 = "18446744073709551616BD"


def _decimal_bytes(column: str, data_type: T.DecimalType) -> Column:
    """Base64 of the unscaled value as big-endian two's complement, as JsonConverter writes a
    Connect Decimal: 8 bytes up to precision 18 (what the decoder's fast path reads), else 16.
    The unscaled value comes from the decimal's text (exact: it has `scale` fraction digits);
    `div` and the correction below keep the 16-byte split exact (decimal division rounds)."""
    unscaled = f"CAST(replace(CAST({column} AS string), '.', '') AS decimal(38,0))"
    if data_type.precision <= 18:
        return F.expr(f"base64(unhex(lpad(hex(CAST({unscaled} AS bigint)), 16, '0')))")
    quotient = f"({unscaled} div {_TWO_POW_64})"
    low = f"({unscaled} - CAST({quotient} AS decimal(38,0)) * {_TWO_POW_64})"
    high = f"if({low} < 0, {quotient} - 1, {quotient})"
    low_positive = f"if({low} < 0, {low} + {_TWO_POW_64}, {low})"
    hexed = (
        f"concat(lpad(hex({high}), 16, '0'), "
        f"lpad(conv(CAST({low_positive} AS string), 10, 16), 16, '0'))"
    )
    return F.expr(f"base64(unhex({hexed}))")


def _connect_field(name: str, data_type: T.DataType) -> tuple[dict, Column]:
    """The Connect field schema and the JSON-ready value of one Parquet column."""
    sql = "`" + name.replace("`", "``") + "`"
    column = F.col(sql)
    field: dict = {"field": name, "optional": True}
    if isinstance(data_type, T.DecimalType):
        field |= {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {
                "scale": str(data_type.scale),
                "connect.decimal.precision": str(data_type.precision),
            },
        }
        return field, _decimal_bytes(sql, data_type)
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        field |= {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}
        instant = column.cast("timestamp") if isinstance(data_type, T.TimestampNTZType) else column
        return field, F.unix_millis(instant)
    if isinstance(data_type, T.DateType):
        field |= {"type": "int32", "name": "org.apache.kafka.connect.data.Date"}
        return field, F.unix_date(column)
    if isinstance(data_type, T.BinaryType):
        return field | {"type": "bytes"}, F.base64(column)
    if isinstance(data_type, T.ArrayType) and type(data_type.elementType) in _CONNECT_PRIMITIVES:
        item, _ = _connect_field("item", data_type.elementType)
        item.pop("field")
        return field | {"type": "array", "items": item}, column
    kind = _CONNECT_PRIMITIVES.get(type(data_type))
    if kind is None:  # structs, maps, nested arrays: kept as their JSON text
        return field | {"type": "string"}, F.to_json(column)
    return field | {"type": kind}, column


def _jvm_error(exc: Exception) -> str:
    """The JVM exception's own message from a py4j error (its first `...Exception: ` line)."""
    message = str(exc).strip().splitlines()
    detail = next((m for m in message if "Exception:" in m), message[0] if message else "")
    return detail.split("Exception: ", 1)[-1]


def _parquet_problems(spark: SparkSession, files: list[LandingFile]) -> list[LandingFile]:
    """The files with the reason their Parquet footer cannot be read (a file cut short, not
    Parquet at all) or Spark cannot read their columns: reported as rejects rather than failing
    the whole batch. One footer read per file (a few milliseconds each)."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    checked = []
    for file in files:
        problem = None
        try:
            input_file = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
                jvm.org.apache.hadoop.fs.Path(file.path), conf
            )
            reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(input_file)
            try:
                schema = reader.getFooter().getFileMetaData().getSchema()
            finally:
                reader.close()
            problem = _unreadable_columns(schema)
        except Exception as exc:  # noqa: BLE001 - py4j raises the JVM's exception
            problem = f"not a readable Parquet file: {_jvm_error(exc)}"
        checked.append(replace(file, problem=problem) if problem else file)
    return checked


def _unreadable_columns(schema) -> str | None:
    """Why Spark cannot read a file of this Parquet schema, if it cannot: a `TIME` column
    (Connect Time, from a `time` source column) fails Spark 3.5's schema conversion ("Illegal
    Parquet type: INT32 (TIME(MILLIS,true))") and with it the whole read."""
    for column in schema.getColumns():
        annotation = column.getPrimitiveType().getLogicalTypeAnnotation()
        if annotation is not None and str(annotation.toString()).startswith("TIME("):
            name = ".".join(column.getPath())
            return (
                f"Parquet column {name} is {annotation.toString()}, which Spark cannot read (a "
                "Connect Time: land it as JSON, or cast the column in the source query)"
            )
    return None


def _connect_line(frame: DataFrame) -> Column:
    """Each row of `frame` as the JsonConverter line (schemas on) of the same Connect record."""
    fields, values = [], []
    for struct_field in frame.schema.fields:
        schema, value = _connect_field(struct_field.name, struct_field.dataType)
        fields.append(schema)
        values.append(value.alias(struct_field.name))
    schema_text = json.dumps(
        {"type": "struct", "fields": fields, "optional": False}, separators=(",", ":")
    )
    payload = F.to_json(F.struct(*values), {"ignoreNullFields": "false"})
    return F.concat(F.lit('{"schema":' + schema_text + ',"payload":'), payload, F.lit("}"))


def _parquet_lines(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """Rows of Parquet landing files as JsonConverter lines (schemas on), with file, line (row
    position + 1), partition and offset like the JSON lines."""
    # Connect Decimals are BINARY-backed DECIMAL in parquet-avro's files, and Spark's vectorized
    # reader reads a BINARY decimal only into a decimal wider than 18 digits (its
    # ParquetVectorUpdaterFactory: SchemaColumnConvertNotSupportedException "physicalType:
    # BINARY, logicalType: decimal(5,2)", seen on these machines; the Spark behaviour is
    # confirmed in apache/datafusion-comet#567). The row-based reader reads them, so landing
    # Parquet is read row by row; Iceberg's own Parquet reader ignores this setting.
    spark.conf.set("spark.sql.parquet.enableVectorizedReader", "false")
    frame = spark.read.option("mergeSchema", "true").parquet(*[f.path for f in files])
    value = _connect_line(frame)
    scanned = frame.select(
        value.alias("value"),
        _scanned_key(F.col("_metadata.file_path")).alias("path_key"),
        F.col("_metadata.row_index").alias("row_index"),
    )
    line = F.col("row_index") + 1
    offset = _record_offset(line, F.count(F.lit(1)).over(Window.partitionBy("path_key")))
    return scanned.join(F.broadcast(_file_table(spark, files)), "path_key", "left").select(
        F.col("_cdc_file"),
        line.cast("int").alias("_cdc_line"),
        offset.alias("_cdc_offset"),
        "_cdc_partition",
        "value",
        F.lit(None).cast("string").alias("_cdc_file_problem"),
    )


def _is_avro(file: LandingFile) -> bool:
    return file.relative.lower().endswith(".avro")


def _avro_schemas(
    spark: SparkSession, files: list[LandingFile]
) -> tuple[list[LandingFile], dict[str, list[LandingFile]]]:
    """The files whose header is not a readable Avro container (with the reason), and the
    others grouped by their writer schema (JSON text). One header read per file."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    problems: list[LandingFile] = []
    groups: dict[str, list[LandingFile]] = {}
    for file in files:
        try:
            seekable = jvm.org.apache.avro.mapred.FsInput(
                jvm.org.apache.hadoop.fs.Path(file.path), conf
            )
            try:
                reader = jvm.org.apache.avro.file.DataFileReader.openReader(
                    seekable, jvm.org.apache.avro.generic.GenericDatumReader()
                )
                try:
                    schema = str(reader.getSchema().toString())
                finally:
                    reader.close()
            finally:
                seekable.close()
        except Exception as exc:  # noqa: BLE001 - py4j raises the JVM's exception
            reason = f"not a readable Avro file: {_jvm_error(exc)}"
            problems.append(replace(file, problem=reason))
            continue
        groups.setdefault(schema, []).append(file)
    return problems, groups


def _avro_lines(
    spark: SparkSession, schema: str, files: list[LandingFile], survey: Sequence[Column] = ()
) -> tuple[DataFrame, DataFrame | None]:
    """Rows of Avro landing files of one writer schema as JsonConverter lines (schemas on),
    with file, line, partition and offset like the JSON lines (and the blocks' `survey`, see
    _numbered_lines)."""
    frame = spark.read.format("avro").option("avroSchema", schema).load([f.path for f in files])
    return _numbered_lines(spark, frame, _connect_line(frame), files, survey)


def _numbered_lines(
    spark: SparkSession,
    scan: DataFrame,
    value: Column,
    files: list[LandingFile],
    survey: Sequence[Column] = (),
) -> tuple[DataFrame, DataFrame | None]:
    """`value` of each row of a file scan with its file, line (position in the file), partition
    and offset: rows of one file block are read by one task in order, so a row's line follows
    from its monotonically increasing id (see _block_table). With `survey` (aggregates over
    `value`), also the blocks' survey columns: the per-block counts are then computed now, in
    the one pass over the files that both need, and kept (checkpointed) for the lines' query;
    without, they are part of that query (lazy)."""
    # The id must be taken right above the scan: it encodes (task, row within task).
    scanned = scan.select(
        value.alias("value"),
        F.col("_metadata.file_path").alias("file_path"),
        F.col("_metadata.file_block_start").alias("block_start"),
    ).withColumn("row_id", F.monotonically_increasing_id())
    counts = _block_counts(scanned, survey)
    if survey:
        # Local checkpoint (as the adapter's checkpoint_view): computed once here, freed with
        # the frame; the lines' query reads the kept rows instead of scanning the files again.
        counts = counts.localCheckpoint(eager=True)
    blocks = _block_table(counts, _file_table(spark, files))
    line = F.col("row_id") - F.col("block_first_id") + F.col("lines_before") + 1
    # Every scanned row has its block, so `left` changes no result; it lets Spark drop the join
    # (and the second scan) from queries that only need `value`.
    lines = scanned.join(F.broadcast(blocks), ["file_path", "block_start"], "left").select(
        # A file the key does not match keeps its URI rather than losing its lines.
        F.coalesce("_cdc_file", "file_path").alias("_cdc_file"),
        line.cast("int").alias("_cdc_line"),
        _record_offset(line, F.col("file_lines")).alias("_cdc_offset"),
        "_cdc_partition",
        "value",
        F.lit(None).cast("string").alias("_cdc_file_problem"),
    )
    surveyed = counts.select(*[f"_cdc_survey_{i}" for i in range(len(survey))]) if survey else None
    return lines, surveyed


def read_landing_lines(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """Raw lines of the given files with `_cdc_file`, `_cdc_line`, `_cdc_offset`,
    `_cdc_partition`, `value` and `_cdc_file_problem` (see LINES_SCHEMA). A file with a
    `problem` is not read: it gives one line 0 that carries the problem. Lazy: nothing is
    collected."""
    return _read_lines(spark, files, ())[0]


def read_surveyed_lines(
    spark: SparkSession, files: list[LandingFile], survey: Sequence[Column]
) -> tuple[DataFrame, list[list[Any]]]:
    """The lines of read_landing_lines, and the values of the `survey` aggregates over them
    (over the lines' column `value`), collected now. The aggregates must be sets
    (`collect_set`): each is computed per file block, in the pass that counts the blocks' lines
    for the line numbers, and the blocks' sets are merged by union. The files' text is then
    read twice in all (this pass and the lines' own query) instead of three times (a survey
    of its own first)."""
    lines, parts = _read_lines(spark, files, survey)
    width = len(survey)
    if not parts:
        return lines, [[] for _ in range(width)]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.unionByName(part)
    union = [
        F.array_distinct(F.flatten(F.collect_list(f"_cdc_survey_{i}"))).alias(f"_cdc_survey_{i}")
        for i in range(width)
    ]
    row = merged.agg(*union).first()
    return lines, [list(row[i] or []) if row else [] for i in range(width)]


def _read_lines(
    spark: SparkSession, files: list[LandingFile], survey: Sequence[Column]
) -> tuple[DataFrame, list[DataFrame]]:
    """The lines (see read_landing_lines) and, with `survey`, frames of its per-block sets
    (`_cdc_survey_<i>`) to merge."""
    readable = [f for f in files if f.problem is None and not _is_parquet(f) and not _is_avro(f)]
    parquet = _parquet_problems(spark, [f for f in files if f.problem is None and _is_parquet(f)])
    avro_problems, avro = _avro_schemas(
        spark, [f for f in files if f.problem is None and _is_avro(f)]
    )
    reported = [f for f in files if f.problem is not None] + [f for f in parquet if f.problem]
    reported += avro_problems
    parquet = [f for f in parquet if f.problem is None]
    surveys: list[DataFrame] = []
    # A reported file's line 0 has no text: nothing to survey.
    extra = [_reported_files(spark, reported)] if reported else []
    if parquet:
        rows = _parquet_lines(spark, parquet)
        extra.append(rows)
        if survey:  # numbered by row position, not by block: surveyed on their own
            surveys.append(rows.agg(*_named(survey)))
    for schema, group in avro.items():
        rows, surveyed = _avro_lines(spark, schema, group, survey)
        extra.append(rows)
        surveys += [surveyed] if surveyed is not None else []
    if not readable:
        out = spark.createDataFrame([], LINES_SCHEMA)
        for part in extra:
            out = out.unionByName(part)
        return out, surveys
    text = spark.read.text([f.path for f in readable])
    lines, surveyed = _numbered_lines(spark, text, F.col("value"), readable, survey)
    surveys += [surveyed] if surveyed is not None else []
    for part in extra:
        lines = lines.unionByName(part)
    return lines, surveys
