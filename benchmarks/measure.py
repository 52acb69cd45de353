"""Run a command and measure it: wall time and peak memory of its process tree.

Peak memory comes from `/proc/<pid>/status`: `VmHWM` (the kernel's resident high-water mark) of
every process of the tree, sampled every 0.1 s until it exits, split into the JVM (`java`) and
Python processes (the command itself, e.g. dbt, and any PySpark workers), plus the largest sum
of `VmRSS` over the tree seen in one sample.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SAMPLE_EVERY = 0.1
MIB = 2**20


@dataclass
class Measured:
    seconds: float
    returncode: int
    peak_jvm_rss: int  # bytes
    peak_python_rss: int
    peak_total_rss: int
    stdout: str
    stderr: str

    def memory(self) -> dict[str, float]:
        """Peaks in MiB, as reported."""
        return {
            "peak_jvm_rss_mib": round(self.peak_jvm_rss / MIB),
            "peak_python_rss_mib": round(self.peak_python_rss / MIB),
            "peak_total_rss_mib": round(self.peak_total_rss / MIB),
        }


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # `pid (comm) state ppid ...`: comm may hold spaces, so split after its last ')'.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started and that still run (the Spark JVM of a dbt process)."""
    return _children().get(pid, [])


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy (every core, /proc/stat): the dbt process
    and the Spark JVM it starts, which dbt does not wait for (so no rusage sees it). Exact only
    while nothing else runs."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    children = _children()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _status(pid: int) -> tuple[str, int, int] | None:
    """(name, VmRSS, VmHWM) in bytes, None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if "VmHWM" not in fields:
        return None  # a zombie

    def kib(name: str) -> int:
        return int(fields[name].split()[0]) * 1024

    return fields["Name"].strip(), kib("VmRSS"), kib("VmHWM")


class MemorySampler:
    """Peak memory of a process tree, sampled in a thread (`with MemorySampler(pid): ...`).

    A process seen in a single sample is left out: a child between fork and exec (the JVM
    spawning a shell command, Python starting the JVM) shares its parent's memory, and counting
    it would count that memory twice."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[dict[int, int]] = []  # pid -> VmRSS, per sample
        self.hwm: dict[int, tuple[str, int]] = {}  # pid -> (name, highest VmHWM)
        self.seen: dict[int, int] = {}  # pid -> samples it appeared in
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        rss: dict[int, int] = {}
        for pid in _tree(self.pid):
            status = _status(pid)
            if status is None:
                continue
            name, resident, hwm = status
            rss[pid] = resident
            self.seen[pid] = self.seen.get(pid, 0) + 1
            if hwm >= self.hwm.get(pid, ("", 0))[1]:
                self.hwm[pid] = (name, hwm)
        self.samples.append(rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_EVERY)

    def _lasting(self, pid: int) -> bool:
        return pid == self.pid or self.seen.get(pid, 0) > 1

    @property
    def peak_jvm(self) -> int:
        return max(
            (hwm for pid, (name, hwm) in self.hwm.items() if name == "java" and self._lasting(pid)),
            default=0,
        )

    @property
    def peak_python(self) -> int:
        return max(
            (hwm for pid, (name, hwm) in self.hwm.items() if name != "java" and self._lasting(pid)),
            default=0,
        )

    @property
    def peak_total(self) -> int:
        return max(
            (sum(v for pid, v in sample.items() if self._lasting(pid)) for sample in self.samples),
            default=0,
        )


def run_measured(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 3600,
) -> Measured:
    """Run `command` to completion; never raises on a non-zero exit (check `returncode`)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with MemorySampler(proc.pid) as sampler:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
    seconds = time.monotonic() - started
    return Measured(
        seconds=seconds,
        returncode=proc.returncode,
        peak_jvm_rss=sampler.peak_jvm,
        peak_python_rss=sampler.peak_python,
        peak_total_rss=sampler.peak_total,
        stdout=stdout,
        stderr=stderr,
    )
