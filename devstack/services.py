"""Local servers the project starts on one machine (the shared metastore service, Trino): a
process in a session of its own (a Ctrl-C of the caller does not stop it), its log and JSON
state (pid, port) in a state folder, stopped by pid."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ServiceError(RuntimeError):
    pass


def alive(pid: int) -> bool:
    """The process runs. A child of this process that exited stays a zombie, which still
    answers `kill(pid, 0)`, until it is waited for: it is reaped here, else `stop` waited its
    whole timeout for every service this process had started (30 s each)."""
    with contextlib.suppress(ChildProcessError):  # not our child: its parent reaps it
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_state(path: Path) -> dict[str, Any] | None:
    """The state a started service saved, if its process still runs."""
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state if alive(state["pid"]) else None


def write_private(path: Path, text: str) -> Path:
    """Write a file only this user reads, for one that holds a secret (a password, keys):
    created 0600, and an existing file's mode set back to 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)
    return path


def launch(
    command: list[str],
    *,
    state_dir: Path,
    log: str,
    ready: Callable[[], bool],
    error: type[ServiceError] = ServiceError,
    what: str = "the service",
    timeout: float = 120,
    poll: float = 0.2,
) -> subprocess.Popen[bytes]:
    """Start `command` in `state_dir` (output appended to `<state_dir>/<log>`) and wait until
    `ready()`; if it exits or `timeout` passes first, kill it and raise `error` with the log's
    end."""
    with open(state_dir / log, "ab") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=state_dir, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            tail = (state_dir / log).read_text(errors="replace")[-3000:]
            raise error(f"{what} did not start:\n{tail}")
        time.sleep(poll)
    return proc


def stop(state_file: Path, timeout: float = 30) -> bool:
    """Stop the process a state file names (SIGTERM, SIGKILL after `timeout`) and remove the
    file; False if none was running."""
    state = load_state(state_file)
    state_file.unlink(missing_ok=True)
    if state is None:
        return False
    pid = state["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
