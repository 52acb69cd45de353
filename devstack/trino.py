"""Trino reading the lakehouse: a single-node Trino server on 127.0.0.1 whose Iceberg catalog
(`lakehouse`) is the shared Hive metastore (`devstack.metastore`), so it reads the very
tables dbt builds: `select * from lakehouse.silver.customers`.

    eval "$(python -m devstack.trino start --metastore-uri thrift://127.0.0.1:9083)"
    python -m devstack.trino query "select count(*) from lakehouse.silver.customers"
    python -m devstack.trino stop

For trying it and for the tests; a production Trino, Starburst or Athena is configured the same
way (README "Read the tables from Trino, Athena or Starburst"). Trino 483 needs Java 25
(CDC_TRINO_JAVA, default /usr/lib/jvm/temurin-25-jdk-amd64/bin/java); its jars come from
`make install-dev` (jars/trino/, pinned in jvm/trino/). Queries go over Trino's HTTP protocol
(`query`), with no client library.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from devstack import services
from devstack.services import ServiceError

REPO = Path(__file__).resolve().parents[1]
JARS = REPO / "jars" / "trino"
HOST = "127.0.0.1"
JAVA = os.environ.get("CDC_TRINO_JAVA", "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")
DEFAULT_STATE_DIR = Path(".lakehouse") / "trino"
VERSION = "483"
# Trino's own jvm.config needs, for Java 25; CDC_TRINO_JAVA_OPTIONS adds more (the tests: the
# JIT's first tier only, see tests/python/conftest.py).
JVM_OPTIONS = [
    "-Xmx1G", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError", "-Djdk.attach.allowAttachSelf=true",
    "-XX:+EnableDynamicAgentLoading", "--add-modules=jdk.incubator.vector",
    "--enable-native-access=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
]  # fmt: skip


class TrinoError(ServiceError):
    pass


@dataclass
class TrinoState:
    pid: int
    port: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def catalog_properties(metastore_uri: str, environ: Mapping[str, str] | None = None) -> str:
    """The Iceberg connector on the shared metastore. `fs.hadoop.enabled`: the local warehouse's
    `file:` locations. With object storage on (`CDC_S3_ENDPOINT` for an S3-compatible store, or
    `CDC_S3=true` for AWS, as in the profiles), Trino's native S3 file system for `s3://` and
    `s3a://` locations: path-style at a custom endpoint, keys from the server's environment
    (`${ENV:...}`, resolved by Trino: they are never written to the file)."""
    environ = os.environ if environ is None else environ
    lines = [
        "connector.name=iceberg",
        "iceberg.catalog.type=hive_metastore",
        f"hive.metastore.uri={metastore_uri}",
        "fs.hadoop.enabled=true",
    ]
    endpoint = environ.get("CDC_S3_ENDPOINT", "")
    if endpoint or environ.get("CDC_S3") == "true":
        lines += [
            "fs.native-s3.enabled=true",
            f"s3.region={environ.get('AWS_REGION', 'us-east-1')}",
        ]
        if endpoint:
            lines += [f"s3.endpoint={endpoint}", "s3.path-style-access=true"]
        if environ.get("AWS_ACCESS_KEY_ID"):
            lines += [
                "s3.aws-access-key=${ENV:AWS_ACCESS_KEY_ID}",
                "s3.aws-secret-key=${ENV:AWS_SECRET_ACCESS_KEY}",
            ]
    return "\n".join(lines) + "\n"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "trino.json"


def load_state(state_dir: Path) -> TrinoState | None:
    state = services.load_state(_state_file(state_dir))
    return None if state is None else TrinoState(**state)


def _started(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/info", timeout=2) as response:
            return not json.load(response).get("starting", True)
    except OSError:
        return False


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    metastore_uri: str,
    port: int | None = None,
    timeout: float = 240,
) -> TrinoState:
    """Start the server (unless running from `state_dir`) and wait until it takes queries."""
    state_dir = Path(state_dir).resolve()
    running = load_state(state_dir)
    if running is not None:
        return running
    if not (JARS / ".installed").exists():
        raise TrinoError(f"{JARS} is missing: run `make install-dev`")
    if not Path(JAVA).exists():
        raise TrinoError(f"Trino {VERSION} needs Java 25: set CDC_TRINO_JAVA (not found: {JAVA})")
    port = port or _free_port()
    etc = state_dir / "etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    (etc / "config.properties").write_text(
        "\n".join(
            [
                "coordinator=true",
                "node-scheduler.include-coordinator=true",
                f"http-server.http.port={port}",
                f"discovery.uri=http://{HOST}:{port}",
                "query.max-memory=512MB",
                "query.max-memory-per-node=512MB",
                f"catalog.config-dir={etc / 'catalog'}",
                f"plugin.dir={JARS / 'plugin'}",
            ]
        )
        + "\n"
    )
    (etc / "catalog" / "lakehouse.properties").write_text(catalog_properties(metastore_uri))
    (etc / "log.properties").write_text("io.trino=WARN\nio.airlift=WARN\n")
    command = [
        JAVA, *JVM_OPTIONS, *os.environ.get("CDC_TRINO_JAVA_OPTIONS", "").split(),
        f"-Dconfig={etc / 'config.properties'}", f"-Dlog.levels-file={etc / 'log.properties'}",
        "-Dnode.environment=cdc_lakehouse", "-Dnode.id=cdc-lakehouse-1",
        f"-Dnode.data-dir={state_dir / 'data'}", f"-Dnode.bind-ip={HOST}",
        f"-Dnode.internal-address={HOST}",
        "-cp", f"{JARS / 'lib'}/*", str(REPO / "jvm" / "trino" / "TrinoServer.java"), VERSION,
    ]  # fmt: skip
    url = f"http://{HOST}:{port}"
    proc = services.launch(
        command,
        state_dir=state_dir,
        log="server.log",
        ready=lambda: _started(url),
        error=TrinoError,
        what="Trino",
        timeout=timeout,
        poll=0.5,
    )
    state = TrinoState(pid=proc.pid, port=port)
    _state_file(state_dir).write_text(json.dumps(asdict(state)) + "\n")
    return state


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 30) -> bool:
    """Stop the server started from `state_dir`; False if none was running."""
    return services.stop(_state_file(Path(state_dir).resolve()), timeout)


def query(url: str, sql: str, *, user: str = "cdc_lakehouse") -> tuple[list[dict[str, Any]], list]:
    """Run one statement over Trino's HTTP protocol: (columns with their types, rows)."""
    request = urllib.request.Request(
        f"{url}/v1/statement", data=sql.encode(), headers={"X-Trino-User": user}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        doc = json.load(response)
    columns: list[dict[str, Any]] = []
    rows: list = []
    while True:
        columns = doc.get("columns") or columns
        rows += doc.get("data") or []
        if "error" in doc:
            raise TrinoError(f"{sql}: {doc['error'].get('message')}")
        if "nextUri" not in doc:
            return columns, rows
        with urllib.request.urlopen(doc["nextUri"], timeout=60) as response:
            doc = json.load(response)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.trino",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start_cmd = sub.add_parser("start", help="start the server (waits until it takes queries)")
    start_cmd.add_argument("--metastore-uri", default=os.environ.get("CDC_METASTORE_URI"))
    start_cmd.add_argument("--port", type=int)
    query_cmd = sub.add_parser("query", help="run one statement, print the rows as JSON lines")
    query_cmd.add_argument("sql")
    for cmd in (start_cmd, query_cmd, sub.add_parser("stop", help="stop the server")):
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            if not args.metastore_uri:
                raise TrinoError("set --metastore-uri or CDC_METASTORE_URI")
            state = start(args.state_dir, metastore_uri=args.metastore_uri, port=args.port)
            print(f"export CDC_TRINO_URL={state.url}")
        elif args.command == "query":
            state = load_state(Path(args.state_dir).resolve())
            if state is None:
                raise TrinoError("no Trino server running from this state folder")
            columns, rows = query(state.url, args.sql)
            for row in rows:
                print(json.dumps(dict(zip([c["name"] for c in columns], row, strict=True))))
        else:
            print("stopped" if stop(args.state_dir) else "not running")
    except TrinoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
