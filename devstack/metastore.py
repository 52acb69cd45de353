"""A Hive metastore service that several processes share, its database in PostgreSQL.

The embedded target keeps its metastore in Derby, which admits one process: while
`python -m cdc_lakehouse.runner.continuous` runs, `dbt show`, `dbt docs generate` or another build
on the same lakehouse cannot open it, and a Thrift server cannot share it with a session target.
This starts the metastore service of Spark's own Hive jars (2.3.9, from the pyspark wheel; the
metastore every Spark target already speaks) on 127.0.0.1, with its tables in a PostgreSQL
database; every target then connects to it when `CDC_METASTORE_URI` is set
(profiles/profiles.yml: `spark.hadoop.hive.metastore.uris`):

    export CDC_METASTORE_PASSWORD=...   # the database password, from the environment only
    python -m devstack.metastore start \\
        --jdbc-url jdbc:postgresql://db.internal:5432/metastore --user hive
    export CDC_METASTORE_URI=thrift://127.0.0.1:9083
    python -m devstack.metastore stop

The first start creates the metastore's tables in the (empty) database. Iceberg tables are
registered there (SparkSessionCatalog, `type: hive`) as they are in Derby; other engines that
read a Hive metastore (Trino's Iceberg connector, `iceberg.catalog.type=hive_metastore`) read
the same tables. The warehouse folder must be one every process reaches (CDC_LAKEHOUSE_DIR or
CDC_WAREHOUSE_DIR the same for all). See docs/deployment.md, "A metastore several processes share".
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from devstack import services
from devstack.services import ServiceError

REPO = Path(__file__).resolve().parents[1]
JARS = REPO / "jars"
HOST = "127.0.0.1"
DEFAULT_PORT = 9083
DEFAULT_STATE_DIR = Path(".lakehouse") / "metastore-service"
PASSWORD_ENV = "CDC_METASTORE_PASSWORD"
MAIN_CLASS = "io.cdclakehouse.metastore.LoopbackMetastore"
# What Spark's launcher gives its own JVMs on Java 17, for the same Hive and DataNucleus code.
JAVA_OPENS = [
    "-XX:+IgnoreUnrecognizedVMOptions",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.lang.invoke",
            "java.lang.reflect",
            "java.io",
            "java.net",
            "java.nio",
            "java.util",
            "java.util.concurrent",
            "sun.nio.ch",
        )  # fmt: skip
    ),
]


class MetastoreError(ServiceError):
    pass


@dataclass
class MetastoreState:
    pid: int
    port: int
    jdbc_url: str

    @property
    def uri(self) -> str:
        return f"thrift://{HOST}:{self.port}"


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def default_warehouse(environ: dict[str, str] | None = None) -> str:
    """The warehouse the profiles give Spark (CDC_WAREHOUSE_DIR, else CDC_LAKEHOUSE_DIR's
    `warehouse`, else `.lakehouse/warehouse`), as an absolute path."""
    environ = os.environ if environ is None else environ
    lakehouse = environ.get("CDC_LAKEHOUSE_DIR", ".lakehouse")
    return environ.get("CDC_WAREHOUSE_DIR") or str(Path(lakehouse).resolve() / "warehouse")


def _warehouse_uri(warehouse: str) -> str:
    """A URI for the warehouse: kept when it has a scheme (s3a://...), else a file: URI."""
    if "://" in warehouse or warehouse.startswith("file:"):
        return warehouse
    return Path(warehouse).resolve().as_uri()


def uses_s3(warehouse: str, environ: Mapping[str, str]) -> bool:
    """Object storage on: an `s3a://` warehouse, or the profiles' switches (CDC_S3_ENDPOINT,
    CDC_S3=true)."""
    return (
        warehouse.startswith("s3a://")
        or bool(environ.get("CDC_S3_ENDPOINT"))
        or environ.get("CDC_S3") == "true"
    )


def s3a_settings(warehouse: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The service's s3a settings, as the profiles give Spark's: Hive creates a database's
    folder itself (`create database` makes it in the warehouse). The keys are not written:
    s3a reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the service's environment (or an
    instance role)."""
    if not uses_s3(warehouse, environ):
        return {}
    endpoint = environ.get("CDC_S3_ENDPOINT", "")
    return {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.path.style.access": "true" if endpoint else "false",
        "fs.s3a.connection.ssl.enabled": "false" if endpoint.startswith("http://") else "true",
    }


def hive_site(
    jdbc_url: str,
    user: str,
    password: str | None,
    warehouse: str,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The metastore's database settings: the schema created on first start, not verified
    against a Hive release (Spark's client and this service are the same 2.3.9). `warehouse`
    is where the `default` database lives (created on first start): without it Hive puts it
    in /user/hive/warehouse, and a table created there without a location lands outside the
    lakehouse."""
    settings = {
        "hive.metastore.warehouse.dir": _warehouse_uri(warehouse),
        "javax.jdo.option.ConnectionURL": jdbc_url,
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": user,
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        # Hive's default log4j2 setup is asynchronous, which needs a jar Spark does not ship.
        "hive.async.log.enabled": "false",
    }
    if password:
        settings["javax.jdo.option.ConnectionPassword"] = password
    settings |= s3a_settings(warehouse, os.environ if environ is None else environ)
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in settings.items()
    )
    return f"<configuration>\n{body}</configuration>\n"


# The metastore's lock tables (Hive's transaction schema, the part its lock calls use), which
# DataNucleus does not create. Iceberg commits through the metastore take a lock on the table
# (`iceberg.engine.hive.lock-enabled`): without one, Hive 2.3.9 does not check the expected
# metadata location either (HIVE-26882 is in 2.3.10), and two processes committing to one table
# at once could each overwrite the other's commit. Names unquoted, as Hive 2.3's TxnHandler
# writes them in its SQL (PostgreSQL folds both to lower case).
LOCK_TABLES = (
    "create table if not exists txns (txn_id bigint primary key, txn_state char(1) not null,"
    " txn_started bigint not null, txn_last_heartbeat bigint not null,"
    " txn_user varchar(128) not null, txn_host varchar(128) not null,"
    " txn_agent_info varchar(128), txn_meta_info varchar(128), txn_heartbeat_count integer)",
    "create table if not exists txn_components (tc_txnid bigint references txns (txn_id),"
    " tc_database varchar(128) not null, tc_table varchar(128), tc_partition varchar(767),"
    " tc_operation_type char(1) not null)",
    "create table if not exists completed_txn_components (ctc_txnid bigint,"
    " ctc_database varchar(128) not null, ctc_table varchar(256), ctc_partition varchar(767))",
    "create table if not exists next_txn_id (ntxn_next bigint not null)",
    "insert into next_txn_id select 1 where not exists (select from next_txn_id)",
    "create table if not exists hive_locks (hl_lock_ext_id bigint not null,"
    " hl_lock_int_id bigint not null, hl_txnid bigint, hl_db varchar(128) not null,"
    " hl_table varchar(128), hl_partition varchar(767), hl_lock_state char(1) not null,"
    " hl_lock_type char(1) not null, hl_last_heartbeat bigint not null, hl_acquired_at bigint,"
    " hl_user varchar(128) not null, hl_host varchar(128) not null, hl_heartbeat_count integer,"
    " hl_agent_info varchar(128), hl_blockedby_ext_id bigint, hl_blockedby_int_id bigint,"
    " primary key (hl_lock_ext_id, hl_lock_int_id))",
    "create table if not exists next_lock_id (nl_next bigint not null)",
    "insert into next_lock_id select 1 where not exists (select from next_lock_id)",
    "create table if not exists aux_table (mt_key1 varchar(128) not null,"
    " mt_key2 bigint not null, mt_comment varchar(255), primary key (mt_key1, mt_key2))",
    "create table if not exists write_set (ws_database varchar(128) not null,"
    " ws_table varchar(128) not null, ws_partition varchar(767), ws_txnid bigint not null,"
    " ws_commit_id bigint not null, ws_operation_type char(1) not null)",
)


def create_lock_tables(conninfo: str) -> None:
    """Create the lock tables in the metastore's database if missing (idempotent)."""
    import psycopg

    with psycopg.connect(conninfo) as conn:
        conn.execute("select pg_advisory_xact_lock(hashtext('devstack.metastore'))")
        for statement in LOCK_TABLES:
            conn.execute(statement)


def _conninfo(jdbc_url: str, user: str, password: str | None) -> str:
    """A libpq connection string for the JDBC URL `jdbc:postgresql://host[:port]/db[?...]`."""
    from urllib.parse import urlsplit

    if not jdbc_url.startswith("jdbc:postgresql://"):
        raise MetastoreError(
            f"the metastore's database is PostgreSQL: jdbc:postgresql://..., got {jdbc_url!r}"
        )
    parts = urlsplit(jdbc_url[len("jdbc:") :])
    settings = {"host": parts.hostname or "localhost", "port": str(parts.port or 5432),
                "dbname": parts.path.lstrip("/"), "user": user}  # fmt: skip
    if password:
        settings["password"] = password
    return " ".join(f"{k}='{v}'" for k, v in settings.items())


def _state_file(state_dir: Path) -> Path:
    return state_dir / "metastore.json"


def load_state(state_dir: Path) -> MetastoreState | None:
    state = services.load_state(_state_file(state_dir))
    return None if state is None else MetastoreState(**state)


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((HOST, port)) == 0


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    jdbc_url: str,
    user: str,
    password: str | None = None,
    port: int = DEFAULT_PORT,
    warehouse: str | None = None,
    timeout: float = 120,
) -> MetastoreState:
    """Start the service (if not already running from `state_dir`) and wait until it answers.
    `password`: default the CDC_METASTORE_PASSWORD environment variable; `warehouse`: default
    the profiles' warehouse (`default_warehouse()`)."""
    state_dir = Path(state_dir).resolve()
    running = load_state(state_dir)
    if running is not None:
        return running
    launcher = JARS / "cdc-metastore.jar"
    drivers = sorted(JARS.glob("postgresql-*.jar"))
    if not launcher.exists() or not drivers:
        raise MetastoreError(f"{launcher} or the PostgreSQL driver is missing: run `make install`")
    if _answers(port):
        raise MetastoreError(f"port {port} on {HOST} is taken")
    password = password or os.environ.get(PASSWORD_ENV)
    create_lock_tables(_conninfo(jdbc_url, user, password))
    conf = state_dir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    site = conf / "hive-site.xml"
    # Holds the database password: readable by this user only, never in the repository.
    warehouse = warehouse or default_warehouse()
    settings = hive_site(jdbc_url, user, password, warehouse)
    services.write_private(site, settings)
    entries = [str(conf), str(launcher), f"{_pyspark_jars()}/*", str(drivers[-1])]
    if uses_s3(warehouse, os.environ):
        s3_jars = [JARS / "s3" / "hadoop-aws.jar", JARS / "s3" / "aws-java-sdk-bundle.jar"]
        if not all(jar.exists() for jar in s3_jars):
            raise MetastoreError(f"{JARS / 's3'} is missing: run `make s3-jars`")
        entries += [str(jar) for jar in s3_jars]
    classpath = os.pathsep.join(entries)
    proc = services.launch(
        # CDC_SPARK_JAVA_OPTIONS: the JVM options the profile gives Spark's drivers (the same
        # Hive and DataNucleus code runs here).
        [
            "java",
            "-Xmx512m",
            *JAVA_OPENS,
            *os.environ.get("CDC_SPARK_JAVA_OPTIONS", "").split(),
            "-cp",
            classpath,
            MAIN_CLASS,
            HOST,
            str(port),
        ],
        state_dir=state_dir,
        log="metastore.log",
        ready=lambda: _answers(port),
        error=MetastoreError,
        what="the metastore service",
        timeout=timeout,
    )
    state = MetastoreState(pid=proc.pid, port=port, jdbc_url=jdbc_url)
    _state_file(state_dir).write_text(json.dumps(asdict(state)) + "\n")
    return state


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 30) -> bool:
    """Stop the service started from `state_dir`; False if none was running."""
    return services.stop(_state_file(Path(state_dir).resolve()), timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.metastore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start_cmd = sub.add_parser("start", help="start the service (waits until it answers)")
    start_cmd.add_argument("--jdbc-url", required=True, help="jdbc:postgresql://HOST:PORT/DB")
    start_cmd.add_argument("--user", required=True, help="database user")
    start_cmd.add_argument("--port", type=int, default=DEFAULT_PORT)
    start_cmd.add_argument(
        "--warehouse",
        help="where the `default` database lives (default: the profiles' warehouse folder)",
    )
    for cmd in (start_cmd, sub.add_parser("stop", help="stop the service")):
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            state = start(
                args.state_dir,
                jdbc_url=args.jdbc_url,
                user=args.user,
                port=args.port,
                warehouse=args.warehouse,
            )
            print(f"export CDC_METASTORE_URI={state.uri}")
        else:
            print("stopped" if stop(args.state_dir) else "not running")
    except MetastoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
