"""A SparkSession configured exactly as the dbt profile's `embedded` target configures dbt's.

The references (naive rebuild, hand-written MERGE) must run on the same engine settings as the
pipeline, so the settings are read from `profiles/profiles.yml` and rendered as dbt renders them
(`devstack.cluster.target_settings`: Jinja, `env_var()` from the environment) rather than
copied. (A regex that only substituted plain `env_var()` calls left the profile's conditional
metastore-lock setting unrendered, which Hadoop read as "true": the Derby metastore then failed
on its missing lock tables.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from devstack.cluster import target_settings

REPO = Path(__file__).resolve().parents[1]


def profile_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`server_side_parameters` of the embedded target, rendered with `env`."""
    return target_settings(REPO, os.environ if env is None else env, "embedded")


def session(app: str):  # -> SparkSession (pyspark imported lazily: the CLI does not need it)
    """The session of this process, built from the profile (relative paths from the repo)."""
    from pyspark.sql import SparkSession

    os.chdir(REPO)
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in profile_settings().items():
        builder = builder.config(key, value)
    spark = builder.config("spark.app.name", app).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
