"""Run a compiled Python model in this process, on the SparkSession dbt-spark already opened."""

from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.spark import SparkCredentials
from dbt_common.exceptions import DbtRuntimeError


class SessionPythonJobHelper(PythonJobHelper):
    def __init__(self, parsed_model: dict, credentials: SparkCredentials) -> None:
        self.parsed_model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> Any:
        from pyspark.sql import SparkSession

        # dbt-spark's session cursor created the session (with the profile's settings) when
        # the materialization ran its first SQL statement, so this returns that same session.
        spark = SparkSession.builder.getOrCreate()
        name = self.parsed_model.get("unique_id", "python model")
        namespace: dict[str, Any] = {"spark": spark, "__name__": "__dbt_python_model__"}
        try:
            exec(compile(compiled_code, name, "exec"), namespace)
        except Exception as exc:  # surface the model's own error, not a dbt internal one
            detail = getattr(exc, "desc", None) or str(exc) or repr(exc)
            java = getattr(exc, "java_exception", None)
            if java is not None:
                detail = f"{java.toString()}"
            raise DbtRuntimeError(f"Python model {name} failed: {detail}") from exc
        # Rows the code knows it produced (py_write_temp_view), or None: unknown.
        return namespace.get("dbt_rows_affected")
