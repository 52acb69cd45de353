"""A private, throw-away PostgreSQL server for tests, the sample builder and demos.

`TemporaryPostgres` runs Debian's `postgresql-15` binaries (`initdb`, `pg_ctl`) on a free
loopback port with its data folder under a temporary directory, configured for logical
decoding (`wal_level=logical`). Nothing is left running: `stop()` (or leaving the `with` block)
shuts the server down immediately and deletes the folder. When the current user is root, the
server runs as the `postgres` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_BIN_CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")


class PostgresError(RuntimeError):
    """PostgreSQL could not be set up or started."""


def find_pg_bin() -> Path:
    """The folder holding `initdb` and `pg_ctl` (env `CDC_PG_BIN` first, then Debian's)."""
    candidates = [os.environ.get("CDC_PG_BIN", ""), *PG_BIN_CANDIDATES]
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise PostgresError(
        "PostgreSQL server binaries not found: install Debian's postgresql-15 "
        "(`make system-deps`) or point CDC_PG_BIN at the folder holding initdb"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TemporaryPostgres:
    """A PostgreSQL server on 127.0.0.1:<free port>, superuser `postgres`, trust auth.

    `dsn` / `conninfo(dbname)` give connection strings; `database` is created on start.
    """

    def __init__(
        self,
        database: str = "northwind",
        *,
        port: int | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.database = database
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.user = "postgres"
        self._base_dir = base_dir
        self._settings = {
            "wal_level": "logical",
            "max_replication_slots": "20",
            "max_wal_senders": "20",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "",
            "timezone": "UTC",
            **(settings or {}),
        }
        self.root: Path | None = None
        self._started = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> TemporaryPostgres:
        bin_dir = find_pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="cdc-pg-", dir=self._base_dir))
        data = self.root / "data"
        run_as = self._run_as()
        if run_as is not None:
            os.chmod(self.root, 0o755)
            os.chown(self.root, run_as.pw_uid, run_as.pw_gid)
        self._run(
            [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", self.user,
             "-E", "UTF8", "--locale=C.UTF-8"],
            "initdb",
        )  # fmt: skip
        options = " ".join(f"-c {k}={v}" if v else f"-c {k}=''" for k, v in self._settings.items())
        self._run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(self.root / "server.log"),
             "-o", f"-p {self.port} {options}", "-w", "-t", "60", "start"],
            "pg_ctl start",
        )  # fmt: skip
        self._started = True
        self.execute("postgres", f'CREATE DATABASE "{self.database}"', autocommit=True)
        return self

    def stop(self) -> None:
        if self.root is None:
            return
        if self._started:
            bin_dir = find_pg_bin()
            subprocess.run(
                self._prefix()
                + [str(bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                   "-w", "stop"],
                capture_output=True,
                check=False,
            )  # fmt: skip
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connections ------------------------------------------------------------------------
    def conninfo(self, dbname: str | None = None) -> str:
        return (
            f"host={self.host} port={self.port} user={self.user} dbname={dbname or self.database}"
        )

    @property
    def dsn(self) -> str:
        return self.conninfo()

    def connect(self, dbname: str | None = None, *, autocommit: bool = False):
        import psycopg

        return psycopg.connect(self.conninfo(dbname), autocommit=autocommit)

    def execute(self, dbname: str | None, sql: str, *, autocommit: bool = False) -> None:
        with self.connect(dbname, autocommit=autocommit) as conn:
            conn.execute(sql)

    def log_tail(self, lines: int = 40) -> str:
        if self.root is None or not (self.root / "server.log").exists():
            return ""
        return "\n".join((self.root / "server.log").read_text().splitlines()[-lines:])

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _run_as() -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresError("running as root but there is no `postgres` user") from exc

    def _prefix(self) -> list[str]:
        run_as = self._run_as()
        if run_as is None:
            return []
        return ["setpriv", f"--reuid={run_as.pw_uid}", f"--regid={run_as.pw_gid}",
                "--clear-groups", "--"]  # fmt: skip

    def _run(self, cmd: list[str], what: str) -> None:
        started = time.monotonic()
        result = subprocess.run(
            self._prefix() + cmd, capture_output=True, text=True, check=False, cwd=self.root
        )
        if result.returncode != 0:
            tail = self.log_tail()
            raise PostgresError(
                f"{what} failed after {time.monotonic() - started:.1f}s "
                f"(exit {result.returncode}):\n{result.stdout}{result.stderr}\n{tail}"
            )
