"""A SparkSession configured exactly as the dbt profile's `embedded` target configures dbt's.

The references (naive rebuild, hand-written MERGE) must run on the same engine settings as the
pipeline, so the settings are read from `profiles/profiles.yml` (its `env_var()` calls resolved
from the environment) rather than copied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
_ENV_VAR = re.compile(r"\{\{\s*env_var\('([^']+)'(?:,\s*'([^']*)')?\)\s*\}\}")


def profile_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`server_side_parameters` of the embedded target, rendered with `env`."""
    env = os.environ if env is None else env
    profile = yaml.safe_load((REPO / "profiles" / "profiles.yml").read_text())
    params = profile["cdc_lakehouse"]["outputs"]["embedded"]["server_side_parameters"]

    def render(value: object) -> str:
        return _ENV_VAR.sub(lambda m: env.get(m.group(1), m.group(2) or ""), str(value))

    return {key: render(value) for key, value in params.items()}


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
