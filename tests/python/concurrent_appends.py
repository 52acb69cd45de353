"""Two processes append to one Iceberg table at once through a shared metastore, with the
embedded target's own Spark settings (profiles/profiles.yml, rendered for CDC_METASTORE_URI);
prints `rows=<n> snapshots=<n>` and the table's `location=<uri>` (the metastore's `default`
database places it). Used by test_shared_metastore.py:

    python concurrent_appends.py thrift://127.0.0.1:9083 /path/to/warehouse
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = "default.cdc_concurrent_appends"
WRITERS, ROWS = 2, 20


def session(uri: str, warehouse: str):  # noqa: ANN201 - pyspark is imported late
    from pyspark.sql import SparkSession

    from devstack.cluster import target_settings

    settings = target_settings(REPO, {**os.environ, "CDC_METASTORE_URI": uri}, "embedded")
    builder = SparkSession.builder
    for key, value in settings.items():
        if not key.startswith("spark.driver."):
            builder = builder.config(key, value)
    # the profile's jars (Iceberg's runtime, s3a's when object storage is on), from the repo
    jars = ",".join(str(REPO / jar) for jar in settings["spark.jars"].split(",") if jar)
    builder = builder.master("local[1]").config("spark.jars", jars)
    spark = builder.config("spark.sql.warehouse.dir", warehouse).enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    uri, warehouse = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:  # one writer
        spark = session(uri, warehouse)
        for i in range(ROWS):
            spark.sql(f"insert into {TABLE} values ({sys.argv[3]}, {i})")
        return
    spark = session(uri, warehouse)
    spark.sql(f"create table {TABLE} (writer int, i int) using iceberg")
    writers = [
        subprocess.Popen([sys.executable, __file__, uri, warehouse, str(w)], cwd=REPO)
        for w in range(WRITERS)
    ]
    if any(w.wait() != 0 for w in writers):
        sys.exit("a writer failed")
    spark.sql(f"refresh table {TABLE}")
    rows = spark.sql(f"select count(*) from {TABLE}").first()[0]
    snapshots = spark.sql(f"select count(*) from {TABLE}.snapshots").first()[0]
    details = spark.sql(f"describe table extended {TABLE}").collect()
    location = next(r.data_type for r in details if r.col_name == "Location")
    print(f"rows={rows} snapshots={snapshots}")
    print(f"location={location}")


if __name__ == "__main__":
    main()
