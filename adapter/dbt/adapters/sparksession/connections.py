"""Credentials and connection manager: dbt-spark's, renamed, with `method: session` as default."""

from dataclasses import dataclass

from dbt.adapters.spark.connections import (
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
)


@dataclass
class SparkSessionCredentials(SparkCredentials):
    method: SparkConnectionMethod = SparkConnectionMethod.SESSION
    host: str = "localhost"

    @property
    def type(self) -> str:
        return "sparksession"


class SparkSessionConnectionManager(SparkConnectionManager):
    TYPE = "sparksession"
