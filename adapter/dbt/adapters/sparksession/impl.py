"""The adapter: dbt-spark's SparkAdapter with a `session` Python submission method, Iceberg
detection that works behind Iceberg's SparkSessionCatalog, and views that keep their types."""

import builtins
from typing import Any

from dbt.adapters.base import BaseRelation, PythonJobHelper, available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark import SparkAdapter
from dbt.adapters.spark.connections import SparkConnectionMethod
from dbt.adapters.sparksession import column_cache
from dbt.adapters.sparksession.connections import SparkSessionConnectionManager
from dbt.adapters.sparksession.python_submissions import (
    SessionPythonJobHelper,
    checkpoint_view,
    spark_error_detail,
)
from dbt.adapters.sparksession.relations import list_schema, list_schemas, session
from dbt.adapters.sparksession.type_changes import type_change
from dbt.adapters.sparksession.view_schema import schema_properties
from dbt_common.exceptions import DbtRuntimeError

logger = AdapterLogger("Spark")

# Behind SparkSessionCatalog, `show table extended` reports Iceberg tables as `Provider: hive`;
# their table properties still give them away.
ICEBERG_MARKERS = ("table_type=ICEBERG", "table_type=iceberg", "Provider: iceberg")


def is_iceberg_information(information: str) -> bool:
    return any(marker in information for marker in ICEBERG_MARKERS)


def clear_orphan_table_folder(schema: str, table: str) -> str:
    """See SparkSessionAdapter.clear_orphan_table_folder (also called by a Python model's
    write on Hudi, python_model.sql)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is None:
        return ""
    spark = SparkSession.builder.getOrCreate()
    jvm = spark._jvm
    catalog = spark._jsparkSession.sessionState().catalog()
    identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(table, jvm.scala.Some(schema))
    if catalog.tableExists(identifier):
        return ""
    folder = jvm.org.apache.hadoop.fs.Path(catalog.defaultTablePath(identifier))
    filesystem = folder.getFileSystem(spark._jsc.hadoopConfiguration())
    if not filesystem.exists(folder):
        return ""
    filesystem.delete(folder, True)
    return folder.toString()


class SparkSessionAdapter(SparkAdapter):
    ConnectionManager = SparkSessionConnectionManager  # type: ignore[assignment]

    @classmethod
    def type(cls) -> str:
        return "sparksession"

    def get_columns_in_relation(self, relation: BaseRelation) -> list[Any]:
        """dbt-spark's `describe extended`, once per dbt command and relation until a statement
        writes the relation (column_cache.py); every time on a Thrift target."""
        describe = super().get_columns_in_relation
        if self.config.credentials.method != SparkConnectionMethod.SESSION:
            return describe(relation)
        return column_cache.columns(relation, lambda: describe(relation))

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

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> list[BaseRelation]:
        """In this process's Spark session: the schema's relations in one metastore call
        (relations.py), the rows dbt-spark's `show table extended` would give. Over Thrift,
        dbt-spark's listing."""
        if self.config.credentials.method != SparkConnectionMethod.SESSION:
            return super().list_relations_without_caching(schema_relation)
        credentials = self.config.credentials
        try:
            spark = session(credentials.server_side_parameters)
            rows = list_schema(spark, schema_relation.schema) or []
        except Exception as exc:
            detail = spark_error_detail(exc)
            schema = schema_relation.schema
            raise DbtRuntimeError(f"listing schema {schema} failed: {detail}") from exc
        logger.debug(f"Listed {len(rows)} relations of {schema_relation.schema} (metastore)")
        return self._build_spark_relation_list(rows, self._get_relation_information)

    def list_schemas(self, database: str | None) -> list[str]:
        """In this process's Spark session: the session catalog's schemas in one metastore call
        (relations.py), without the `show databases` statement. Over Thrift, dbt-spark's."""
        if self.config.credentials.method != SparkConnectionMethod.SESSION:
            return super().list_schemas(database)
        try:
            schemas = list_schemas(session(self.config.credentials.server_side_parameters))
        except Exception as exc:
            raise DbtRuntimeError(f"listing schemas failed: {spark_error_detail(exc)}") from exc
        logger.debug(f"Listed {len(schemas)} schemas (metastore)")
        return schemas

    @property
    def default_python_submission_method(self) -> str:
        return "session"

    @property
    def python_submission_helpers(self) -> dict[str, builtins.type[PythonJobHelper]]:
        return {"session": SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        rows = submission_result if isinstance(submission_result, int) else None
        return AdapterResponse(_message="OK", rows_affected=rows)

    @available
    def view_schema_properties(self, described: Any) -> dict[str, str]:
        """Table properties that make Spark read a view with its query's own column types
        (view_schema.py), from the rows of `describe query` (name, type, comment)."""
        return schema_properties([(str(row[0]), str(row[1])) for row in described])

    @available
    def column_type_change(self, target_type: str, source_type: str) -> str:
        """`fits`, `promote` or `incompatible`: see type_changes.py."""
        return type_change(target_type, source_type)

    @available
    def clear_orphan_table_folder(self, relation: Any) -> str:
        """Delete the folder a managed table `relation` would be created in, when the catalog
        has no such table: what a process killed while Hudi created the table leaves (Hudi's
        catalog has no REPLACE TABLE AS SELECT, so its tables are dropped, then created; the
        files of a half-done create stay without a catalog entry, and Spark then refuses the
        next create with LOCATION_ALREADY_EXISTS). Returns the folder deleted, or '' (nothing
        there, the table exists, or no Spark session in this process: a Thrift target)."""
        return clear_orphan_table_folder(str(relation.schema), str(relation.identifier))

    @available
    def checkpoint_view(self, sql: str, relation: Any) -> str:
        """The rows of `sql`, checkpointed, as the temporary view `relation` (no schema), for a
        macro that runs while a model compiles (dbt allows Python statements only in
        materializations; see python_submissions.checkpoint_view). Needs the session (method:
        session)."""
        from pyspark.sql import SparkSession

        try:
            checkpoint_view(SparkSession.builder.getOrCreate(), sql, str(relation.identifier))
        except Exception as exc:
            detail = spark_error_detail(exc)
            raise DbtRuntimeError(f"checkpoint of {relation.identifier} failed: {detail}") from exc
        return ""

    @available
    def sql_string(self, text: str) -> str:
        """A Spark SQL string literal."""
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
