"""List and read landing files written by a Kafka Connect storage sink (one record value per line).

Where a topic's files are and how they are named is the source's layout (layout.py: Confluent's
S3 sink by default, Aiven's, the Lenses stream-reactor's, or any pattern of the same form).
Reading keeps, for every line, the file it came from, its exact 1-based line number and the
Kafka partition and offset the file name gives, so that every decoded row can be traced back and
ordered. A file the layout cannot name, or in a format not read here, is reported as a reject of
line 0 with the reason: never skipped silently, never guessed at.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lakehouse.layout import LandingFile, Layout, TopicFiles

__all__ = ["LINES_SCHEMA", "LandingFile", "Layout", "list_landing_files", "read_landing_lines"]

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
    conf = spark._jsc.hadoopConfiguration()
    root_path = jvm.org.apache.hadoop.fs.Path(_qualify_root(root))
    fs = root_path.getFileSystem(conf)
    root_path = fs.makeQualified(root_path)
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


def _block_table(scanned: DataFrame, files: DataFrame) -> DataFrame:
    """Per (file, block): first row id, how many lines precede the block in its file and how
    many lines the file has.

    Rows of one file block are read by one task, in order, so their monotonically increasing
    ids are consecutive: the line number is an offset from the block's first id. The aggregate
    has one row per block, so the window and the broadcast below stay small.
    """
    blocks = scanned.groupBy("file_path", "block_start").agg(
        F.min("row_id").alias("block_first_id"), F.count(F.lit(1)).alias("block_lines")
    )
    earlier = Window.partitionBy("file_path").orderBy("block_start")
    before = F.sum("block_lines").over(earlier.rowsBetween(Window.unboundedPreceding, -1))
    return blocks.select(
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


def read_landing_lines(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """Raw lines of the given files with `_cdc_file`, `_cdc_line`, `_cdc_offset`,
    `_cdc_partition`, `value` and `_cdc_file_problem` (see LINES_SCHEMA). A file with a
    `problem` is not read: it gives one line 0 that carries the problem. Lazy: nothing is
    collected."""
    readable = [f for f in files if f.problem is None]
    reported = [f for f in files if f.problem is not None]
    if not readable:
        empty = spark.createDataFrame([], LINES_SCHEMA)
        return _reported_files(spark, reported) if reported else empty
    # The id must be taken right above the scan: it encodes (task, row within task).
    scanned = (
        spark.read.text([f.path for f in readable])
        .select(
            "value",
            F.col("_metadata.file_path").alias("file_path"),
            F.col("_metadata.file_block_start").alias("block_start"),
        )
        .withColumn("row_id", F.monotonically_increasing_id())
    )
    blocks = _block_table(scanned, _file_table(spark, readable))
    line = F.col("row_id") - F.col("block_first_id") + F.col("lines_before") + 1
    # The name gives the first record's offset, or the last's (one record per line).
    offset = F.when(
        F.col("offset_is_last"), F.col("name_offset") - F.col("file_lines") + line
    ).otherwise(F.col("name_offset") + line - 1)
    # Every scanned row has its block, so `left` changes no result; it lets Spark drop the join
    # (and the second scan) from queries that only need `value`, such as the schema probe.
    lines = scanned.join(F.broadcast(blocks), ["file_path", "block_start"], "left").select(
        # A file the key does not match keeps its URI rather than losing its lines.
        F.coalesce("_cdc_file", "file_path").alias("_cdc_file"),
        line.cast("int").alias("_cdc_line"),
        offset.alias("_cdc_offset"),
        "_cdc_partition",
        "value",
        F.lit(None).cast("string").alias("_cdc_file_problem"),
    )
    return lines.unionByName(_reported_files(spark, reported)) if reported else lines
