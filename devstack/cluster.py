"""Start and stop a local Spark standalone cluster and a Spark Thrift Server (pyspark wheel).

For trying the `cluster` and `thrift` dbt targets on one machine, and for the tests that build
the sample on them. Everything listens on 127.0.0.1 only, on free ports chosen at start.

    python -m devstack.cluster start            # master + 2 workers (1 core, 1g each)
    python -m devstack.cluster thrift-start     # Thrift server on that cluster
    python -m devstack.cluster env              # export lines for the dbt targets
    python -m devstack.cluster status
    python -m devstack.cluster stop             # Thrift server, workers, master

State (ports, pids), logs and the workers' scratch folders live in `.lakehouse/cluster/`
(or `--state-dir`, env CDC_CLUSTER_DIR). The Thrift server takes its catalog settings from the
`cluster` target of `profiles/profiles.yml`, rendered with the current environment, so it opens
the same metastore and warehouse (`CDC_LAKEHOUSE_DIR`) as dbt would. Derby is single-process:
while the Thrift server runs, no dbt session target may use that lakehouse folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pyspark
import yaml

from devstack import services

SPARK_HOME = Path(pyspark.__file__).parent
HOST = "127.0.0.1"
DEFAULT_STATE_DIR = Path(os.environ.get("CDC_CLUSTER_DIR", ".lakehouse/cluster"))
THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
# Profile settings that describe the dbt process itself, not the catalog the server must open.
NOT_FOR_THE_SERVER = {"spark.master", "spark.app.name", "spark.jars", "spark.driver.host"}


class ClusterError(RuntimeError):
    pass


@dataclass
class Process:
    name: str
    pid: int
    log: str


@dataclass
class ClusterState:
    master_port: int
    master_ui_port: int
    workers: int
    processes: list[Process] = field(default_factory=list)
    thrift_port: int | None = None
    thrift_lakehouse: str | None = None

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    def env(self) -> dict[str, str]:
        """Environment for the `cluster` and `thrift` dbt targets."""
        env = {"CDC_SPARK_MASTER": self.master_url, "CDC_SPARK_DRIVER_HOST": HOST}
        if self.thrift_port is not None:
            env |= {"CDC_THRIFT_HOST": HOST, "CDC_THRIFT_PORT": str(self.thrift_port)}
        return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _state_file(state_dir: Path) -> Path:
    return state_dir / "cluster.json"


def load_state(state_dir: Path = DEFAULT_STATE_DIR) -> ClusterState | None:
    path = _state_file(state_dir)
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    raw["processes"] = [Process(**p) for p in raw["processes"]]
    return ClusterState(**raw)


def _save_state(state_dir: Path, state: ClusterState) -> None:
    _state_file(state_dir).write_text(json.dumps(asdict(state), indent=2) + "\n")


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (our own zombies are reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def _is_ours(pid: int) -> bool:
    """Alive and still one of our Spark processes (guards against a recycled pid before a
    kill): a Spark command line, or our own child that has not exec'd it yet."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return _alive(pid) and (b"org.apache.spark" in cmdline or parent == os.getpid())


def _spark_env(state_dir: Path, daemon: bool) -> dict[str, str]:
    env = dict(os.environ)
    # Master and workers only schedule: a small heap. (The launcher also applies
    # SPARK_DAEMON_MEMORY to the Thrift server, whose heap is its driver's: not there.)
    env.pop("SPARK_DAEMON_MEMORY", None)
    if daemon:
        env["SPARK_DAEMON_MEMORY"] = "256m"
        # The JVM options the profile gives the driver and executors (CDC_SPARK_JAVA_OPTIONS).
        options = [env.get("SPARK_DAEMON_JAVA_OPTS", ""), env.get("CDC_SPARK_JAVA_OPTIONS", "")]
        env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(o for o in options if o).strip()
    env |= {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_WORKER_DIR": str(state_dir / "work"),
        # Executors start `python3` from PATH for the little Python work PySpark ships
        # (createDataFrame of a local list): this interpreter, which has the same pyspark.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    return env


def _spawn(name: str, command: list[str], state_dir: Path, cwd: Path | None = None) -> Process:
    log = state_dir / "logs" / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=_spark_env(state_dir, daemon=name != "thrift"),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends the JVM and its shell
        )
    return Process(name=name, pid=proc.pid, log=str(log))


def _log_tail(process: Process, lines: int = 30) -> str:
    try:
        return "\n".join(Path(process.log).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait(what: str, ready: Any, processes: list[Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if not _alive(process.pid):
                raise ClusterError(
                    f"{process.name} exited while waiting for {what}:\n{_log_tail(process)}"
                )
        if ready():
            return
        time.sleep(0.5)
    raise ClusterError(
        f"timed out after {timeout:.0f} s waiting for {what}:\n"
        + "\n".join(_log_tail(p, 10) for p in processes)
    )


def master_info(state: ClusterState) -> dict[str, Any] | None:
    """The master's JSON status page, or None while it does not answer."""
    try:
        url = f"http://{HOST}:{state.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except OSError:
        return None


def _alive_workers(state: ClusterState) -> int:
    info = master_info(state)
    return 0 if info is None else int(info.get("aliveworkers", 0))


def thrift_answers(port: int) -> bool:
    """The Thrift server accepts a session and runs a query."""
    from pyhive import hive  # dbt-spark[PyHive]

    try:
        with socket.create_connection((HOST, port), timeout=1):
            pass
        connection = hive.connect(host=HOST, port=port, auth="NOSASL", username="probe")
        try:
            cursor = connection.cursor()
            cursor.execute("select 1")
            return cursor.fetchall() == [(1,)]
        finally:
            connection.close()
    except Exception:
        return False


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    workers: int = 2,
    worker_cores: int = 1,
    worker_memory: str = "1g",
    timeout: float = 120,
) -> ClusterState:
    """Start a master and `workers` workers; return once every worker has registered."""
    existing = load_state(state_dir)
    if existing and any(_is_ours(p.pid) for p in existing.processes):
        raise ClusterError(f"a cluster from {state_dir} is running: stop it first")
    shutil.rmtree(state_dir / "work", ignore_errors=True)
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    (state_dir / "work").mkdir(parents=True)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    state = ClusterState(master_port=free_port(), master_ui_port=free_port(), workers=workers)
    try:
        master = _spawn(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(state.master_port),
                "--webui-port",
                str(state.master_ui_port),
            ],
            state_dir,
        )
        state.processes.append(master)
        _save_state(state_dir, state)
        _wait("the master", lambda: master_info(state) is not None, [master], timeout)
        for number in range(1, workers + 1):
            worker = _spawn(
                f"worker-{number}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    HOST,
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(worker_cores),
                    "--memory",
                    worker_memory,
                    "--work-dir",
                    str(state_dir / "work"),
                    state.master_url,
                ],
                state_dir,
            )
            state.processes.append(worker)
            _save_state(state_dir, state)
        _wait(
            f"{workers} workers to register",
            lambda: _alive_workers(state) >= workers,
            state.processes,
            timeout,
        )
    except BaseException:
        stop(state_dir)
        raise
    return state


def _render(value: Any, environ: Mapping[str, str]) -> str:
    """A profile value rendered as dbt would, for the env_var() calls it holds."""

    def env_var(name: str, default: str | None = None) -> str:
        if name in environ:
            return environ[name]
        if default is None:
            raise ClusterError(f"profiles.yml needs environment variable {name}")
        return default

    return jinja2.Template(str(value)).render(env_var=env_var)


def target_settings(
    project_dir: Path, environ: Mapping[str, str], target: str = "embedded"
) -> dict[str, str]:
    """Every Spark setting of a profile target, rendered as dbt renders it (Jinja, with the
    env_var() calls answered from `environ`): the one renderer for code that builds a session
    or a server outside dbt (benchmarks, the Thrift server, tests)."""
    profiles = yaml.safe_load((project_dir / "profiles" / "profiles.yml").read_text())
    (profile,) = profiles.values()
    settings = profile["outputs"][target]["server_side_parameters"]
    return {k: _render(v, environ) for k, v in settings.items()}


def _properties_file(state_dir: Path, settings: Mapping[str, str], jars: str) -> Path:
    """The Thrift server's Spark settings in a file only this user reads (`--properties-file`):
    on its command line, `ps` would show every user the object store's keys."""
    settings = {
        **settings,
        "spark.executor.extraClassPath": jars,
        "spark.driver.host": HOST,
        # One SparkSession for every connection, as the embedded and cluster targets have: dbt
        # opens a connection per node, and a session per connection (the server's default) cost
        # ~0.3 s each (the sample's Thrift build: 193 -> 150 s). dbt's sessions share one
        # schema and settings anyway; temporary views are named after their model.
        "spark.sql.hive.thriftServer.singleSession": "true",
    }
    # Java properties: backslashes escaped, each value on one line
    text = "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in settings.items())
    return services.write_private(Path(state_dir).resolve() / "thrift.properties", text)


def thrift_start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    project_dir: Path = Path("."),
    port: int | None = None,
    lakehouse: Path | None = None,
    timeout: float = 180,
) -> ClusterState:
    """Start a Spark Thrift Server on the running cluster, with the `cluster` target's catalog
    settings: the metastore and warehouse of `lakehouse` (default: CDC_LAKEHOUSE_DIR)."""
    state = load_state(state_dir)
    if state is None or not any(_is_ours(p.pid) for p in state.processes):
        raise ClusterError(f"no cluster running from {state_dir}: start it first")
    if any(p.name == "thrift" and _is_ours(p.pid) for p in state.processes):
        raise ClusterError("the Thrift server is already running")
    project_dir = project_dir.resolve()
    environ = dict(os.environ)
    if lakehouse is not None:
        environ["CDC_LAKEHOUSE_DIR"] = str(lakehouse)
    profile = target_settings(project_dir, environ, "cluster")
    # The profile's jars (Iceberg; s3a when object storage is on) on the driver's system class
    # path: with --jars, queries fail to load org/apache/iceberg/spark/PathIdentifier, and the
    # metastore client needs the s3a file system. Executors get them the same way. Not Spark's
    # Avro source: only the Python bronze models read Avro, and they cannot run over Thrift.
    jars = os.pathsep.join(
        str((project_dir / jar).resolve())
        for jar in profile["spark.jars"].split(",")
        if jar and "spark-avro" not in jar
    )
    # What only concerns dbt's own driver stays out: the server needs the catalog, warehouse,
    # metastore and session settings.
    settings = {k: v for k, v in profile.items() if k not in NOT_FOR_THE_SERVER}
    state.thrift_port = port or free_port()
    state.thrift_lakehouse = environ.get("CDC_LAKEHOUSE_DIR", ".lakehouse")
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        state.master_url,
        "--name",
        "cdc-lakehouse-thrift",
        "--class",
        THRIFT_SERVER_CLASS,
        "--driver-class-path",
        jars,
        "--properties-file",
        str(_properties_file(state_dir, settings, jars)),
    ]
    command += [
        "spark-internal",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={HOST}",
        "--hiveconf",
        f"hive.server2.thrift.port={state.thrift_port}",
        "--hiveconf",
        "hive.server2.authentication=NOSASL",
    ]
    thrift = _spawn("thrift", command, state_dir, cwd=project_dir)
    state.processes = [p for p in state.processes if p.name != "thrift"] + [thrift]
    _save_state(state_dir, state)
    try:
        _wait("the Thrift server", lambda: thrift_answers(state.thrift_port), [thrift], timeout)
    except BaseException:
        thrift_stop(state_dir)
        raise
    return state


def _terminate(processes: list[Process], timeout: float = 30) -> None:
    """SIGTERM each process group, then SIGKILL what is left after `timeout`."""
    for process in processes:
        if _is_ours(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_is_ours(p.pid) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.3)
    for process in processes:
        if _is_ours(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def thrift_stop(state_dir: Path = DEFAULT_STATE_DIR) -> None:
    """Stop the Thrift server (and release its Derby metastore); the cluster keeps running."""
    state = load_state(state_dir)
    if state is None:
        return
    _terminate([p for p in state.processes if p.name == "thrift"])
    state.processes = [p for p in state.processes if p.name != "thrift"]
    state.thrift_port = state.thrift_lakehouse = None
    _save_state(state_dir, state)


def stop(state_dir: Path = DEFAULT_STATE_DIR) -> None:
    """Stop everything started from `state_dir`: Thrift server, workers, then the master."""
    state = load_state(state_dir)
    if state is None:
        return
    # Applications first, so the master does not try to relaunch their executors.
    _terminate([p for p in state.processes if p.name == "thrift"])
    _terminate([p for p in state.processes if p.name.startswith("worker-")])
    _terminate([p for p in state.processes if p.name == "master"])
    _state_file(state_dir).unlink(missing_ok=True)


def status(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    state = load_state(state_dir)
    if state is None:
        return {"running": False}
    info = master_info(state) or {}
    return {
        "running": any(_is_ours(p.pid) for p in state.processes),
        "master": state.master_url,
        "master_ui": f"http://{HOST}:{state.master_ui_port}",
        "alive_workers": info.get("aliveworkers", 0),
        "thrift": f"{HOST}:{state.thrift_port}" if state.thrift_port else None,
        "thrift_lakehouse": state.thrift_lakehouse,
        "processes": {p.name: {"pid": p.pid, "alive": _is_ours(p.pid)} for p in state.processes},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command", choices=["start", "stop", "status", "env", "thrift-start", "thrift-stop"]
    )
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=1)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--thrift-port", type=int, default=None)
    parser.add_argument("--project-dir", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            state = start(
                args.state_dir,
                workers=args.workers,
                worker_cores=args.worker_cores,
                worker_memory=args.worker_memory,
            )
            print(
                f"master {state.master_url} (UI http://{HOST}:{state.master_ui_port}), "
                f"{state.workers} workers",
                file=sys.stderr,
            )
        elif args.command == "thrift-start":
            state = thrift_start(
                args.state_dir, project_dir=args.project_dir, port=args.thrift_port
            )
            print(
                f"Thrift server {HOST}:{state.thrift_port} on {state.master_url}, lakehouse "
                f"{state.thrift_lakehouse}",
                file=sys.stderr,
            )
        elif args.command == "thrift-stop":
            thrift_stop(args.state_dir)
        elif args.command == "stop":
            stop(args.state_dir)
        elif args.command == "status":
            print(json.dumps(status(args.state_dir), indent=2))
            return 0
        state = load_state(args.state_dir)
        if state is not None and args.command in ("start", "thrift-start", "env"):
            for key, value in state.env().items():
                print(f"export {key}={value}")
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
