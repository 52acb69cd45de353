"""The adapter: dbt-spark's SparkAdapter with a `session` Python submission method and Iceberg
detection that works behind Iceberg's SparkSessionCatalog."""

import builtins
from typing import Any

from dbt.adapters.base import BaseRelation, PythonJobHelper
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark import SparkAdapter
from dbt.adapters.sparksession.connections import SparkSessionConnectionManager
from dbt.adapters.sparksession.python_submissions import SessionPythonJobHelper

# Behind SparkSessionCatalog, `show table extended` reports Iceberg tables as `Provider: hive`;
# their table properties still give them away.
ICEBERG_MARKERS = ("table_type=ICEBERG", "table_type=iceberg", "Provider: iceberg")


def is_iceberg_information(information: str) -> bool:
    return any(marker in information for marker in ICEBERG_MARKERS)


class SparkSessionAdapter(SparkAdapter):
    ConnectionManager = SparkSessionConnectionManager  # type: ignore[assignment]

    @classmethod
    def type(cls) -> str:
        return "sparksession"

    def _build_spark_relation_list(
        self, row_list: Any, relation_info_func: Any
    ) -> list[BaseRelation]:
        relations = super()._build_spark_relation_list(row_list, relation_info_func)
        return [
            rel.incorporate(is_iceberg=True)
            if not rel.is_iceberg and is_iceberg_information(rel.information or "")
            else rel
            for rel in relations
        ]

    @property
    def default_python_submission_method(self) -> str:
        return "session"

    @property
    def python_submission_helpers(self) -> dict[str, builtins.type[PythonJobHelper]]:
        return {"session": SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        rows = submission_result if isinstance(submission_result, int) else None
        return AdapterResponse(_message="OK", rows_affected=rows)
