"""The production layout the object-store system tests share: a real PostgreSQL holding the Hive
metastore's tables, the metastore service on it (`devstack.metastore`), and an
S3-compatible store (SeaweedFS, `devstack.objectstore`) holding the sample's landing zone
(`s3a://lake/landing`) and the warehouse (`s3a://lake/warehouse`).

test_cluster_targets.py and test_shared_metastore.py run on one stack, in one pytest process
(their `xdist_group`) and in that order (conftest: the longer file first): it is started once
and stopped at the end of the session, and the shared-metastore scenario continues the
lakehouse the cluster scenario built instead of building the same tables again (see its
docstring). `ObjectStoreStack.begin` records which scenario uses the lakehouse, so that one
that must find it empty can say so.

The store's keys are made up here, for this session, and reach the processes through their
environment only. The fixture puts the stack's settings in `os.environ` only while it starts
the services; a test applies them (`ObjectStoreStack.environ`) while its processes run, so the
later tests of the same pytest process (other files, under `--dist loadgroup`) never see them.
Test modules import the names below but not the fixture itself (conftest does): a module that
imported it would get a second stack of its own.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from lakehouse import copy_landing, failure_causes

from devstack import metastore, objectstore
from devstack.pg import TemporaryPostgres, free_port

BUCKET = "lake"
LANDING = f"s3a://{BUCKET}/landing"
WAREHOUSE = f"s3a://{BUCKET}/warehouse"


@dataclass
class ObjectStoreStack:
    """The running services, and the scenarios that have used the lakehouse, in order."""

    store: objectstore.ObjectStoreState
    service: metastore.MetastoreState
    credentials: dict[str, str]
    logs: dict[str, Path] = field(default_factory=dict)
    scenarios: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """What every process on the lakehouse needs (dbt, Spark's servers, Trino, pyiceberg):
        the store's keys and endpoint, the warehouse, the metastore service."""
        return {
            **self.credentials,
            "CDC_S3_ENDPOINT": self.store.endpoint,
            "CDC_WAREHOUSE_DIR": WAREHOUSE,
            "CDC_METASTORE_URI": self.service.uri,
        }

    @contextmanager
    def environ(self) -> Iterator[None]:
        """`env` in `os.environ` for the block: the processes started in it inherit it. A
        failure in the block gets the services' logged errors (`service_errors`) as a note:
        a client sees a failed metastore call as "commit state unknown", its cause is in
        the service's log, which ends with the session."""
        with pytest.MonkeyPatch.context() as patch:
            for name, value in self.env.items():
                patch.setenv(name, value)
            try:
                yield
            except BaseException as failure:
                failure.add_note(self.service_errors())
                raise

    def service_errors(self) -> str:
        """The errors the services logged, each entry's first line and causes."""
        return "\n".join(
            f"--- errors in the {name} log ({path}):\n" + "\n".join(logged_errors(path))
            for name, path in self.logs.items()
        )

    def begin(self, scenario: str) -> list[str]:
        """Record that `scenario` starts using the lakehouse; returns the scenarios before it."""
        before = list(self.scenarios)
        self.scenarios.append(scenario)
        return before


# A log entry's first line: a Java service's starts with its time (`12:34:56.789 [thread]
# LEVEL`), a Go service's (the store's glog lines) with its level and date (`E1205 ...`).
_ENTRY = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3} |[IWEF]\d{4} )")
_ERROR = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3} \[[^]]*\] (ERROR|FATAL) |[EF]\d{4} )")
# What Thrift (0.12) logs at ERROR each time a client closes its connection: not a failure.
_CLIENT_CLOSED = ("Thrift error occurred during processing of message", "TTransportException: null")


def logged_errors(log: Path, limit: int = 60) -> list[str]:
    """The error entries of a service's log, each as its first line and causes, the last
    `limit` lines; the metastore's entries for clients that closed their connection left out."""
    if not log.exists():
        return ["(no log)"]
    entries: list[list[str]] = []
    for line in log.read_text(errors="replace").splitlines():
        if _ENTRY.match(line) or not entries:
            entries.append([line])
        else:
            entries[-1].append(line)
    lines: list[str] = []
    for entry in entries:
        text = "\n".join(entry)
        if not _ERROR.match(entry[0]) or all(marker in text for marker in _CLIENT_CLOSED):
            continue
        first = entry[0][:400]
        causes = [f"  {cause}" for cause in failure_causes(text, 10) if cause != first.strip()]
        lines += [first, *causes]
    return lines[-limit:] or ["(none)"]


@pytest.fixture(scope="session")
def object_store_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStoreStack]:
    """Start PostgreSQL, the store (the sample's landing files uploaded) and the metastore
    service; stop all three at the end of the session, also when a start or a test failed."""
    root = tmp_path_factory.mktemp("object-store-stack")
    credentials = {
        "AWS_ACCESS_KEY_ID": f"cdc{secrets.token_hex(8)}",
        "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
    }
    with TemporaryPostgres() as pg:
        try:
            # The services keep the environment they were started with: the store takes the
            # keys as its one identity, the metastore service its s3a settings and keys.
            with pytest.MonkeyPatch.context() as environ:
                for name, value in credentials.items():
                    environ.setenv(name, value)
                store = objectstore.start(root / "objectstore", buckets=[BUCKET], s3_port=None)
                objectstore.upload(store, copy_landing(root / "landing"), LANDING)
                environ.setenv("CDC_S3_ENDPOINT", store.endpoint)
                with psycopg.connect(pg.conninfo("postgres"), autocommit=True) as conn:
                    conn.execute("create database metastore")
                service = metastore.start(
                    root / "metastore",
                    jdbc_url=f"jdbc:postgresql://{pg.host}:{pg.port}/metastore",
                    user=pg.user,
                    port=free_port(),
                    warehouse=WAREHOUSE,
                )
            logs = {
                "metastore service": root / "metastore" / "metastore.log",
                "object store": root / "objectstore" / "objectstore.log",
            }
            yield ObjectStoreStack(store, service, credentials, logs)
        finally:
            metastore.stop(root / "metastore")
            objectstore.stop(root / "objectstore")
