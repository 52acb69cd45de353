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

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
import pytest
from lakehouse import copy_landing

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
        """`env` in `os.environ` for the block: the processes started in it inherit it."""
        with pytest.MonkeyPatch.context() as patch:
            for name, value in self.env.items():
                patch.setenv(name, value)
            yield

    def begin(self, scenario: str) -> list[str]:
        """Record that `scenario` starts using the lakehouse; returns the scenarios before it."""
        before = list(self.scenarios)
        self.scenarios.append(scenario)
        return before


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
            yield ObjectStoreStack(store=store, service=service, credentials=credentials)
        finally:
            metastore.stop(root / "metastore")
            objectstore.stop(root / "objectstore")
