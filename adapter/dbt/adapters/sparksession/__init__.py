"""dbt adapter `sparksession`: dbt-spark in session mode, plus Python models and Iceberg fixes.

Everything not defined here is dbt-spark's: the plugin declares `dependencies=["spark"]`, so
every `spark__` macro and materialization applies unchanged.
"""

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.sparksession.connections import (
    SparkSessionConnectionManager,
    SparkSessionCredentials,
)
from dbt.adapters.sparksession.impl import SparkSessionAdapter
from dbt.include import sparksession

Plugin = AdapterPlugin(
    adapter=SparkSessionAdapter,  # type: ignore[arg-type]
    credentials=SparkSessionCredentials,
    include_path=sparksession.PACKAGE_PATH,
    dependencies=["spark"],
)

__all__ = ["Plugin", "SparkSessionAdapter", "SparkSessionConnectionManager"]
