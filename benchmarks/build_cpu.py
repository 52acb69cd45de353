"""Where the CPU of small incremental builds goes: dbt's Python against the Spark JVM, per build.

    python -m benchmarks.build_cpu --lakehouse bench_data/cpu
    python -m benchmarks.build_cpu --lakehouse bench_data/cpu --jfr bench_data/cpu.jfr

The bundled sample's landing files arrive in thirds (each topic's, each outbox folder's and each
table's extracts, in name order): the first third is built from empty, the second incrementally
(no data tests), the third incrementally with the data tests, then a build with nothing new. All
in this process, as the tests' long-lived dbt process and `cdc_lakehouse.continuous` run them,
with the tests' settings unless the environment says otherwise (the JIT's first tier,
interpreted queries: tests/python/conftest.py). Prints, per build, wall seconds, the machine's
busy CPU seconds (/proc/stat: run it on an idle machine) and those of this process (Python) and of
its JVM. With `--jfr`, Java Flight Recorder samples the JVM from its start and the recording is
written when the builds are done; `jfr print --events jdk.ExecutionSample` reads it, and each
build's start and end are in `<lakehouse>/logs/dbt.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.measure import child_pids, machine_cpu

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample" / "landing"
THIRDS = 3


def units(root: Path) -> dict[tuple[str, ...], list[Path]]:
    """What lands together, by group: a topic's or outbox folder's files one by one, a table's
    extracts a whole folder each (relative paths, in name order)."""
    groups: dict[tuple[str, ...], list[Path]] = defaultdict(list)
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(root)
        unit = relative.parent if relative.parts[0] == "extracts" else relative
        if unit not in groups[relative.parts[:2]]:
            groups[relative.parts[:2]].append(unit)
    return groups


def deliver(groups: dict[tuple[str, ...], list[Path]], landing: Path, third: int) -> None:
    for members in groups.values():
        low, high = len(members) * third // THIRDS, len(members) * (third + 1) // THIRDS
        for unit in members[low:high]:
            source, target = SAMPLE / unit, landing / unit
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)


def process_cpu(pid: int | str) -> float:
    """CPU seconds (user and system) a process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse", type=Path, required=True, help="where to build (emptied)")
    parser.add_argument("--jfr", type=Path, help="also record the JVM with Java Flight Recorder")
    args = parser.parse_args()

    lakehouse = args.lakehouse.resolve()
    recording = args.jfr.resolve() if args.jfr else None  # before the chdir below
    shutil.rmtree(lakehouse, ignore_errors=True)
    lakehouse.mkdir(parents=True)
    os.environ["CDC_LAKEHOUSE_DIR"] = str(lakehouse)
    os.environ.setdefault("DBT_PROFILES_DIR", str(REPO / "profiles"))
    first_tier = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"
    os.environ.setdefault("CDC_SPARK_JAVA_OPTIONS", first_tier)
    os.environ.setdefault("CDC_SPARK_CODEGEN", "false")
    if recording:
        os.environ["CDC_SPARK_JAVA_OPTIONS"] += " -XX:StartFlightRecording=settings=profile"
    os.chdir(REPO)

    from dbt.cli.main import dbtRunner

    landing = lakehouse / "landing"
    groups = units(SAMPLE)
    common = [
        "--target-path", str(lakehouse / "target"), "--log-path", str(lakehouse / "logs"),
        "--vars", json.dumps({"cdc_landing_root": str(landing)}),
    ]  # fmt: skip
    no_tests = ["--exclude-resource-type", "unit_test", "--exclude-resource-type", "test"]
    steps = [
        ("first third, from empty", 0, no_tests),
        ("second third, incremental", 1, no_tests),
        ("last third, incremental, data tests", 2, ["--exclude-resource-type", "unit_test"]),
        ("nothing new", None, no_tests),
    ]
    print(f"{'build':38s} {'wall s':>7s} {'CPU s':>7s} {'Python':>7s} {'JVM':>7s}")
    for name, third, exclude in steps:
        if third is not None:
            deliver(groups, landing, third)
        jvms = child_pids(os.getpid())
        started, cpu = time.monotonic(), machine_cpu()
        python, jvm = process_cpu("self"), sum(map(process_cpu, jvms))
        result = dbtRunner().invoke(["build", *exclude, *common])
        jvms = jvms or child_pids(os.getpid())  # the JVM starts with the first build
        print(
            f"{name:38s} {time.monotonic() - started:7.1f} {machine_cpu() - cpu:7.1f} "
            f"{process_cpu('self') - python:7.1f} {sum(map(process_cpu, jvms)) - jvm:7.1f}"
            + ("" if result.success else "  FAILED"),
            flush=True,
        )
    if recording:
        for pid in child_pids(os.getpid()):
            subprocess.run(["jcmd", str(pid), "JFR.dump", f"filename={recording}"], check=False)


if __name__ == "__main__":
    main()
