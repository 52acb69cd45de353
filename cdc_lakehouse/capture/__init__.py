"""The capture tool: Debezium (embedded, PostgreSQL over pgoutput) -> a Kafka-Connect-style
landing zone (`<out>/topics/<topic>/partition=0/<topic>+0+<offset>.json`, one value per line).

Command line: `python -m cdc_lakehouse.capture run|check|drop` (see `__main__` and
docs/capture.md). Each capture runs in its own process, since a process holds one JVM that cannot
be restarted; the helpers below start that process from Python (tests, the sample builder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cdc_lakehouse.capture.config import CaptureConfig, ConfigError

__all__ = [
    "CaptureConfig",
    "ConfigError",
    "capture_command",
    "run_capture_subprocess",
    "start_capture_subprocess",
]

ConfigLike = CaptureConfig | Mapping[str, Any] | str | os.PathLike[str]


def capture_command(
    config_path: str | os.PathLike[str], *args: str, command: str = "run"
) -> list[str]:
    """`python -m cdc_lakehouse.capture <command> --config <path> <args...>`."""
    return [sys.executable, "-m", "cdc_lakehouse.capture", command, "--config", str(config_path),
            *args]  # fmt: skip


def _config_file(config: ConfigLike, folder: str) -> Path:
    """A path as given, or a settings mapping / CaptureConfig written to a JSON file."""
    if isinstance(config, str | os.PathLike):
        return Path(config)
    data = config.to_dict() if isinstance(config, CaptureConfig) else dict(config)
    path = Path(folder) / "capture.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def run_capture_subprocess(
    config: ConfigLike,
    *,
    timeout: float = 120.0,
    until_marker: bool = True,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    command: str = "run",
) -> subprocess.CompletedProcess[str]:
    """Run one capture in its own process and wait for it: by default a bounded run
    (`run --until-marker --timeout <timeout>`). Never raises on a non-zero exit: check
    `returncode` and `stderr` (progress and the summary line are on stderr)."""
    args = list(extra_args)
    if command == "run":
        args += ["--timeout", f"{timeout:g}"] + (["--until-marker"] if until_marker else [])
    with tempfile.TemporaryDirectory(prefix="cdc-capture-") as folder:
        cmd = capture_command(_config_file(config, folder), *args, command=command)
        try:
            return subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout + 60,
                env={**os.environ, **(env or {})},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # the tool's own timeout did not fire
            return subprocess.CompletedProcess(cmd, -9, _text(exc.stdout), _text(exc.stderr))


def start_capture_subprocess(
    config: ConfigLike,
    *,
    config_dir: str | os.PathLike[str],
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    **popen: Any,
) -> subprocess.Popen[str]:
    """Start a capture process (continuous `run` unless `extra_args` say otherwise) and return
    at once; a settings mapping is written to `<config_dir>/capture.json`."""
    cmd = capture_command(_config_file(config, os.fspath(config_dir)), *extra_args)
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(cmd, text=True, env={**os.environ, **(env or {})}, **popen)


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""
