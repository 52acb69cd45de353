"""A long-lived dbt process for one lakehouse: the tests' dbt commands with a warm JVM.

A test that builds the same lakehouse several times (the oracle's phases, incremental steps)
would otherwise pay a cold JVM and a cold JIT on every `dbt` command: about half of a small
incremental build. This process runs the commands with `dbtRunner`, the function the `dbt` CLI
calls, so dbt-spark's in-process SparkSession survives from one command to the next; results
are what the CLI would give (exit code 0 success, 1 failure, 2 error, and the same output).

Protocol: one JSON command per line on stdin (`{"args": [...]}`); one JSON reply per command
(`{"returncode": int, "output": str}`) on the file descriptor given as argv[1] (stdout is left
to the JVM's own printing). Started and stopped by `lakehouse.run_dbt` / `stop_dbt_worker`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    from dbt.cli.main import dbtRunner

    replies = os.fdopen(int(sys.argv[1]), "w")
    for line in sys.stdin:
        args = json.loads(line)["args"]
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                result = dbtRunner().invoke(args)
            returncode = 0 if result.success else (2 if result.exception else 1)
            if result.exception is not None:
                output.write(f"\n{type(result.exception).__name__}: {result.exception}\n")
        except BaseException:  # noqa: BLE001 - report anything to the test, keep serving
            output.write(traceback.format_exc())
            returncode = 2
        replies.write(json.dumps({"returncode": returncode, "output": output.getvalue()}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
