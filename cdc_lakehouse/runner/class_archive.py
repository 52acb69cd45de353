"""Write a class archive new dbt processes' JVMs can start from (`make class-archive` does).

    python -m cdc_lakehouse.runner.class_archive jars/spark-classes.jsa

A new dbt process loads tens of thousands of classes (Spark, Hive, Derby, Iceberg, Parquet)
before its first model, and loads them again in every process. The JDK's class-data sharing
maps classes from an archive written by an earlier run instead: this builds one customers table
of the bundled sample (bronze, change log, silver, history, gold, their data tests) in a
throwaway lakehouse with `-XX:ArchiveClassesAtExit`, and the profile's driver options read the
archive when CDC_SPARK_CLASS_ARCHIVE names it (`-XX:SharedArchiveFile`; off by default: CI
stopped both test suites that ran with it on at its time limit, see docs/testing.md).
Measured on 2 cores, a new PySpark process creating an Iceberg session and running three
statements: 21.9-27.6 s without, 13.3-16.6 s with (3 and 4 runs).

The archive belongs to this machine's JDK build and to the jars it was written with: a JVM that
finds it missing or written by another JDK starts as it would without it (nothing fails), and
`rm jars/spark-classes.jsa && make class-archive` writes it again.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

SELECTION = ["+dim_customers", "customers_history"]


def write_archive(archive: Path) -> None:
    """Run the build in this process, then end its JVM and wait for it: the JVM writes the
    archive as it exits, seconds after the build is done."""
    from dbt.cli.main import dbtRunner
    from pyspark import SparkContext

    archive = archive.resolve()
    archive.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-class-archive-") as work:
        lakehouse = Path(work) / "lakehouse"
        lakehouse.mkdir()
        # the JDK warns of each class it cannot archive (the classes Spark generates): quiet
        dump = f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds*=error"
        os.environ["CDC_SPARK_JAVA_OPTIONS"] = (
            f"{os.environ.get('CDC_SPARK_JAVA_OPTIONS', '')} {dump}".strip()
        )
        os.environ["CDC_LAKEHOUSE_DIR"] = str(lakehouse)
        os.environ["CDC_SPARK_CLASS_ARCHIVE"] = ""  # this JVM writes the archive, reads none
        work_options = ["--target-path", f"{work}/target", "--log-path", f"{work}/logs"]
        result = dbtRunner().invoke(["build", "--quiet", "--select", *SELECTION, *work_options])
        if not result.success:
            raise SystemExit(f"the build that writes the class archive failed: {result.exception}")
        context, gateway = SparkContext._active_spark_context, SparkContext._gateway
        if context is not None:
            context.stop()
        if gateway is not None:
            gateway.shutdown()
            gateway.proc.stdin.close()  # the JVM exits when its input closes (PySpark's gateway)
            gateway.proc.wait(timeout=600)
    if not archive.exists():
        raise SystemExit(f"the JVM wrote no class archive at {archive}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    write_archive(Path(sys.argv[1]))
