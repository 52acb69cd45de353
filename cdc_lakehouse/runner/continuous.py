"""Run a dbt command again and again in one process, so Spark stays warm between runs.

A `dbt build` process pays 12-15 s before its first model: Python and dbt start, the JVM and the
metastore open, and Spark's code generation and the JIT warm up again on every run. A CDC
pipeline runs every few minutes, so that fixed cost can be most of each run. Here dbt's
programmatic runner invokes the command in a loop; the embedded (or cluster) SparkSession and
its JVM live as long as the process, and so does dbt's parsed project (parsed again only when a
file of the project changes: `cdc_lakehouse.runner.parsed`):

    python -m cdc_lakehouse.runner.continuous --every 60 -- build
    python -m cdc_lakehouse.runner.continuous --runs 3 -- build --select tag:cdc_bronze+
    python -m cdc_lakehouse.runner.continuous --every 60 --changed-only -- build

With `--changed-only`, each run builds only the tables whose landing topics changed since the
last successful run, and what depends on them, and a run where nothing landed is skipped
(`cdc_lakehouse.runner.changed`): the cost of a run follows the tables that changed.

A changed-only run whose tables received at most `--small-run-bytes` of new files (64 MB by
default) runs with Spark's small-input settings, the profile's own for the next run
(`cdc_lakehouse.runner.small_runs`).

With `--compact-every N`, after every N runs that built tables the loop compacts the tables
those runs built (`dbt run-operation cdc_compact --args '{models: [...]}'`, with the command's
`--vars`, `--target` and paths): each incremental MERGE of a merge-on-read table leaves delete
files and small files that every later run reads, so a loop's runs grow slower run after run
until the tables are compacted (docs/schedule.md, "Compaction").

Each run prints one JSON line (start time, seconds, success; `compacted`: what compaction did
after it); the row-count summary dbt would print at the end of each run is off
(`cdc_run_summary`, see DRIVER_VARS). A failed run is reported and the
loop goes on with the next one; with `--runs`, the exit status is that of the last run. The
embedded Derby metastore admits one process: while the loop runs, other dbt commands on the
same lakehouse fail; with a shared metastore (`CDC_METASTORE_URI`, `devstack.metastore`)
they run beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdc_lakehouse.runner import small_runs

if TYPE_CHECKING:
    from cdc_lakehouse.runner.changed import RunChoice


def built_tables(result: Any) -> set[str]:
    """Names of the models a dbt invocation's result built as tables (materialized `table` or
    `incremental`, status success): the tables its writes went to."""
    names = set()
    for entry in getattr(getattr(result, "result", None), "results", None) or ():
        node = getattr(entry, "node", None)
        if (
            node is not None
            and node.resource_type == "model"
            and entry.status == "success"
            and node.config.materialized in ("table", "incremental")
        ):
            names.add(node.name)
    return names


# dbt vars the driver's runs get unless the command's `--vars` set them: no row-count summary
# at the end of each run (on-run-end cdc_run_summary counts every table the run built; the
# driver reports each run itself, and the run audit records what each run applied).
DRIVER_VARS: dict[str, Any] = {"cdc_run_summary": False}


def with_driver_vars(command: Sequence[str]) -> list[str]:
    """`command` with DRIVER_VARS added to its `--vars` (`--vars V` or `--vars=V`, YAML as dbt
    reads it; the command's own values win), or a `--vars` of them when it has none."""
    import yaml

    words = list(command)
    for index, word in enumerate(words):
        inline = word.startswith("--vars=")
        if word != "--vars" and not inline:
            continue
        at = index if inline else index + 1
        if at >= len(words):
            return words  # `--vars` without a value: dbt reports it
        given = yaml.safe_load(word.split("=", 1)[1] if inline else words[at]) or {}
        if not isinstance(given, dict):
            return words  # dbt reports the malformed value itself
        merged = json.dumps({**DRIVER_VARS, **given})
        words[at] = "--vars=" + merged if inline else merged
        return words
    return [*words, "--vars", json.dumps(DRIVER_VARS)]


def compaction_command(models: Sequence[str], run_command: Sequence[str]) -> list[str]:
    """`dbt run-operation cdc_compact` of `models`, with the options of `run_command` that
    `dbt parse` takes (its `--vars`, `--target`, profile and paths): the same lakehouse and
    target, and the parsed project the runs keep."""
    from cdc_lakehouse.runner.parsed import parse_options

    arguments = json.dumps({"models": sorted(models)})
    return [
        "run-operation",
        "cdc_compact",
        "--args",
        arguments,
        *(parse_options(run_command) or []),
    ]


def invoke_repeatedly(
    command: Sequence[str],
    *,
    runs: int = 0,
    every: float = 0.0,
    before_each: Callable[[], object] | None = None,
    choose: Callable[[list[str]], RunChoice] | None = None,
    compact_every: int = 0,
    project: Any = None,
    small_run_bytes: int = small_runs.DEFAULT_LIMIT,
) -> Iterator[dict[str, Any]]:
    """Invoke `dbt <command>` `runs` times (0: forever) in this process, a run starting `every`
    seconds after the previous one started; `before_each` runs first (untimed). `choose`, when
    given, turns the command into this run's (None: skip the run) and returns what to call
    with dbt's result after the run (success or not), why, the bytes that landed for it (a
    run of at most `small_run_bytes`, 0: never, runs with Spark's small-input settings:
    small_runs.in_environment) and where its data tests start (changed.tests_since). With
    `compact_every`, after every that many runs that built tables, the tables built since the
    last compaction are compacted (`compaction_command`; a failed compaction is reported and
    tried again after the next such runs). Yields one report
    per run: run number, start time, seconds, success (and the error, if any; `small`: true
    when it ran with the small-input settings; `compacted`: the models, seconds and success of
    a compaction after it). `project` invokes dbt (default: a ParsedProject). The command runs
    with DRIVER_VARS (with_driver_vars)."""
    from cdc_lakehouse.runner.changed import tests_scope
    from cdc_lakehouse.runner.parsed import ParsedProject

    # parsed once, then again only when the project or the parse options change (parsed.py)
    project = ParsedProject() if project is None else project
    command = with_driver_vars(command)
    to_compact: set[str] = set()
    runs_since_compaction = 0
    run = 0
    while runs == 0 or run < runs:
        run += 1
        if before_each is not None:
            before_each()
        started = time.monotonic()
        at = datetime.now(UTC).isoformat(timespec="seconds")
        this_run, after_run, why, new_bytes = list(command), None, None, None
        since = None
        error: BaseException | None = None
        result: Any = None
        small = False
        try:
            if choose is not None:
                choice = choose(list(command))
                this_run, after_run, why, new_bytes = choice[:4]
                since = choice.tests_since
            if this_run is None:
                success = True
            else:
                with (
                    small_runs.in_environment(
                        small_runs.is_small(new_bytes, small_run_bytes)
                    ) as small,
                    tests_scope(since),
                ):
                    result = project.invoke(this_run)
                success, error = result.success, result.exception
                if after_run is not None:
                    after_run(result)
        except Exception as exc:  # a run's failure must not end the loop
            success, error = False, exc
        report: dict[str, Any] = {
            "run": run,
            "started": at,
            "seconds": round(time.monotonic() - started, 2),
            "success": success,
        }
        if why is not None:
            report["changed"] = why
        if this_run is None:
            report["skipped"] = True
        if small:
            report["small"] = True
        if error is not None:
            report["error"] = str(error)
        built = built_tables(result) if this_run is not None and error is None else set()
        if compact_every > 0 and built:
            to_compact |= built
            runs_since_compaction += 1
            if runs_since_compaction >= compact_every:
                report["compacted"] = compact(project, sorted(to_compact), this_run or command)
                runs_since_compaction = 0
                if report["compacted"]["success"]:
                    to_compact.clear()
        yield report
        if runs and run >= runs:
            break
        time.sleep(max(0.0, every - (time.monotonic() - started)))


def compact(project: Any, models: list[str], run_command: Sequence[str]) -> dict[str, Any]:
    """Compact the tables of `models` through `project` (a ParsedProject); what it did."""
    started = time.monotonic()
    done: dict[str, Any] = {"models": len(models)}
    try:
        result = project.invoke(compaction_command(models, run_command))
        done["success"] = bool(result.success)
        if result.exception is not None:
            done["error"] = str(result.exception)
    except Exception as exc:  # a failed compaction must not end the loop
        done.update(success=False, error=str(exc))
    done["seconds"] = round(time.monotonic() - started, 2)
    return done


def changed_only_chooser() -> Callable[[list[str]], RunChoice]:
    """Each run's command for `--changed-only`: see cdc_lakehouse.runner.changed (same defaults: the
    project in the current folder, $CDC_LANDING_ROOT, the listing beside the lakehouse)."""
    from pathlib import Path

    from cdc_lakehouse.runner import changed

    project = Path.cwd()
    root = os.environ.get("CDC_LANDING_ROOT", "sample/landing")
    state = (
        Path(os.environ.get("CDC_LAKEHOUSE_DIR", ".lakehouse")) / changed.LISTING_FILE
    ).resolve()

    def choose(command: list[str]) -> RunChoice:
        return changed.next_run(project, root, state, command)

    return choose


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_lakehouse.runner.continuous",
        description="Run a dbt command repeatedly in one process (Spark stays warm).",
    )
    parser.add_argument(
        "--every", type=float, default=60.0, help="seconds from one run's start to the next's"
    )
    parser.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: never)")
    parser.add_argument(
        "--changed-only",
        action="store_true",
        help="build only the tables whose landing topics changed (cdc_lakehouse.runner.changed)",
    )
    parser.add_argument(
        "--compact-every",
        type=int,
        default=0,
        metavar="N",
        help="compact the tables built, after every N runs that built tables (0: never)",
    )
    parser.add_argument(
        "--small-run-bytes",
        type=int,
        default=small_runs.DEFAULT_LIMIT,
        metavar="N",
        help="with --changed-only: a run whose tables received at most N bytes of new files runs "
        "with Spark's small-input settings (0: never; cdc_lakehouse.runner.small_runs)",
    )
    parser.add_argument("dbt_args", nargs=argparse.REMAINDER, help="-- then the dbt command")
    args = parser.parse_args(argv)
    command = [a for a in args.dbt_args if a != "--"] or ["build"]
    success = True
    choose = changed_only_chooser() if args.changed_only else None
    try:
        for report in invoke_repeatedly(
            command,
            runs=args.runs,
            every=args.every,
            choose=choose,
            compact_every=args.compact_every,
            small_run_bytes=args.small_run_bytes,
        ):
            success = report["success"]
            print(json.dumps(report), flush=True)
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
    # The JVM's non-daemon threads would keep a normal interpreter exit waiting.
    os._exit(0 if success else 1)


if __name__ == "__main__":
    raise SystemExit(main())
