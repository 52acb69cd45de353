"""Build only what new landing files change: the cost of a run follows the tables that changed.

    python -m cdc_lakehouse.runner.changed                   # = dbt build, changed tables only
    python -m cdc_lakehouse.runner.changed -- build --exclude tag:slow

A plain `dbt build` runs every model and test of every table, even when one topic received files:
with 50 tables, a build where nothing landed still costs minutes. This lists the landing zone's
topic folders (names, sizes, modification times of their files: no file is read; for a table
with extract-diff deletes, its extracts' manifests too), compares the
listing with the one saved by the last successful run, and builds only the registered tables
whose topic changed (saying, for each, the files and bytes pending and the age of the oldest:
how far the table lags its landing), and what depends on them:
`dbt build --select source:landing_<S>.<T>+ ...`
(bronze, change log, silver, history, their tests, `cdc_rejects`, and the gold models reading
them). Nothing changed: no dbt run at all. The listing is taken before the build and saved
after it, so files that land during a build are selected next time; after a failed build, only
for the tables it finished (a table whose model or data test failed, or was skipped, keeps its
previous listing and is selected again next time, the others are not). The first run (no saved
listing), a landing root that is not a local folder, or `--all` builds everything.

A run whose tables received at most `--small-run-bytes` of new files (64 MB by default) starts
Spark with its small-input settings (`cdc_lakehouse.runner.small_runs`).

The project's own files count too: when a model, macro, seed, snapshot, data test, the
registry (`tables/`) or `dbt_project.yml` changed since the last successful run (a digest of
their contents, saved with the listing), everything is built once. The listing lives beside the
lakehouse (`$CDC_LAKEHOUSE_DIR/cdc_landing_listing.json`) so each lakehouse has its own.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from cdc_lakehouse.bronze.extracts import MANIFEST
from cdc_lakehouse.bronze.layout import TopicFiles
from cdc_lakehouse.runner import small_runs
from cdc_lakehouse.tables.registry import REGISTRY_DIR, Table, tables

LISTING_FILE = "cdc_landing_listing.json"
Listing = dict[str, list[list]]  # topic -> [[relative name, size, mtime_ns], ...] sorted


# dbt's folders (dbt_project.yml's *-paths, these when it does not say) and the registry: what
# a build depends on besides the landing zone.
PROJECT_PATHS = {
    "model-paths": ["models"],
    "macro-paths": ["macros"],
    "seed-paths": ["seeds"],
    "snapshot-paths": ["snapshots"],
    "test-paths": ["tests"],
    "analysis-paths": ["analyses"],
    # the installed dbt packages: the engine's, linked there by `dbt deps`, is edited in place
    "packages-install-path": "dbt_packages",
}


def project_files(project: Path) -> list[Path]:
    """The files a build depends on besides the landing zone, sorted: dbt_project.yml,
    selectors.yml, packages.yml, the registry, dbt's folders and the installed packages."""
    import yaml

    config_file = project / "dbt_project.yml"
    config = yaml.safe_load(config_file.read_text()) if config_file.exists() else {}
    folders = [REGISTRY_DIR]
    for key, default in PROJECT_PATHS.items():
        value = (config or {}).get(key) or default
        folders += [value] if isinstance(value, str) else value
    files = [project / name for name in ("dbt_project.yml", "selectors.yml", "packages.yml")]
    for folder in folders:
        # os.walk follows the links `dbt deps` makes for local packages (rglob does not)
        for parent, _, names in os.walk(project / folder, followlinks=True):
            files += [Path(parent) / name for name in names]
    return sorted(path for path in set(files) if path.is_file() and "__pycache__" not in path.parts)


def project_digest(project: Path) -> str:
    """A digest of project_files: their names and contents."""
    digest = hashlib.sha256()
    for path in project_files(project):
        digest.update(path.relative_to(project).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def local_root(root: str) -> Path | None:
    """The landing root as a local folder, or None for an object-store URI."""
    parts = urlsplit(root)
    if parts.scheme in ("", "file"):
        return Path(parts.path if parts.scheme else root)
    return None


def list_topics(root: Path, registered: Sequence[Table], known: Listing | None = None) -> Listing:
    """The files of each table's topic, in its source's layout (see layout.py): names relative
    to the root, sizes and modification times. A topic with nothing landed lists as empty.
    `known`: a listing saved with the same project digest (so the same registry and layouts):
    a file it names for a topic is that topic's again (whether a file is a topic's depends only
    on its name, the layout and the topic); only the other files are classified (their
    patterns compiled), so a run with nothing new compiles none."""
    listing: Listing = {}
    for table in registered:
        topic_files = TopicFiles(table.spec.layout, table.topic)
        seen = {entry[0] for entry in (known or {}).get(table.topic, ())}
        files = {}
        for folder in topic_files.folders:
            top = root / folder if folder else root
            if not top.is_dir():
                continue
            for dirpath, _, names in os.walk(top):
                for name in names:
                    path = Path(dirpath) / name
                    relative = path.relative_to(root).as_posix()
                    if relative in files:
                        continue
                    if relative in seen or topic_files.classify(str(path), relative):
                        stat = path.stat()
                        files[relative] = [relative, stat.st_size, stat.st_mtime_ns]
        if table.spec.extracts:
            # A complete extract (extract-diff deletes) counts once its manifest has landed.
            top = root / table.spec.extracts
            for manifest in sorted(top.glob(f"*/{MANIFEST}")) if top.is_dir() else ():
                relative = manifest.relative_to(root).as_posix()
                stat = manifest.stat()
                files[relative] = [relative, stat.st_size, stat.st_mtime_ns]
        listing[table.topic] = sorted(files.values())
    return listing


def changed_tables(
    registered: Sequence[Table], previous: Mapping[str, list], current: Listing
) -> list[Table]:
    return [t for t in registered if current.get(t.topic) != previous.get(t.topic)]


def new_files(previous: Sequence[list], current: Sequence[list]) -> list[list]:
    """The entries of a topic's listing the last successful run had not seen: new or rewritten
    files."""
    seen = {tuple(entry) for entry in previous}
    return [entry for entry in current if tuple(entry) not in seen]


def pending(new: Sequence[list], now_ns: int) -> str:
    """What a changed topic holds that the last successful run had not seen (`new`, its
    new_files): new or rewritten files, their size, and the age of the oldest (how far the
    table lags its landing)."""
    if not new:
        return "files removed"
    size = sum(entry[1] for entry in new)
    lag = max(0.0, (now_ns - min(entry[2] for entry in new)) / 1e9)
    return f"{len(new)} new file(s), {size / 1e6:.2f} MB, oldest {lag:.0f} s ago"


def selectors(changed: Sequence[Table]) -> list[str]:
    return [f"source:{t.landing_source}.{t.name}+" for t in changed]


class Plan(NamedTuple):
    selection: list[str] | None  # dbt selectors; None: everything
    saving: dict | None  # what to save after success: the project's digest and the listing
    why: str
    new_bytes: int | None  # bytes of the changed tables' new files; None: not known (everything)


def plan(
    project: Path, root: str, state: Path, build_all: bool = False, saved: dict | None = None
) -> Plan:
    """Which tables this run builds, what it saves, why, and how many bytes landed for them.
    `saved`: the listing `state` holds, when the caller has read it already."""
    registered = tables(project)
    folder = local_root(root)
    if folder is None:
        why = f"landing root {root} is not a local folder: building everything"
        return Plan(None, None, why, None)
    if not folder.is_absolute():
        folder = project / folder  # dbt reads a relative root from the project folder
    digest = project_digest(project)
    if saved is None and not build_all and state.exists():
        saved = json.loads(state.read_text())
    same_project = not build_all and saved is not None and saved.get("project") == digest
    current = list_topics(folder, registered, saved["topics"] if same_project else None)
    saving = {"project": digest, "topics": current}
    if build_all:
        return Plan(None, saving, "--all: building everything", None)
    if not state.exists() or saved is None:
        return Plan(None, saving, "no listing saved by an earlier run: building everything", None)
    if not same_project:
        why = "the project's models, macros, registry or settings changed since the last run"
        return Plan(None, saving, f"{why}: building everything", None)
    previous = saved["topics"]
    changed = changed_tables(registered, previous, current)
    now = time.time_ns()
    fresh = [new_files(previous.get(t.topic, []), current[t.topic]) for t in changed]
    names = "; ".join(
        f"{t.source}.{t.name} ({pending(new, now)})" for t, new in zip(changed, fresh, strict=True)
    )
    new_bytes = sum(entry[1] for new in fresh for entry in new)
    return Plan(
        selectors(changed),
        saving,
        f"{len(changed)} of {len(registered)} tables changed: {names or 'none'}",
        new_bytes,
    )


# dbt's options that choose resource types: a command with one keeps its own choice
RESOURCE_TYPE_FLAGS = {"--resource-type", "--resource-types", "--exclude-resource-type"}


def with_selection(command: Sequence[str], selection: Sequence[str]) -> list[str]:
    """The dbt command with `--select` the changed tables (added to the user's own). Without
    dbt unit tests, as a plain build (selectors.yml): a `--select` replaces that default, and
    unit tests check SQL, which a landed file does not change. A command that names resource
    types itself keeps its own, and one that runs no unit test (`run`, `seed`, `snapshot`...)
    is not given the option, which dbt refuses there."""
    command = list(command)
    for flag in ("--select", "-s"):
        if flag in command:
            raise ValueError(f"{flag} is chosen by this tool; use --exclude to narrow it")
    runs_unit_tests = bool(command) and command[0] in UNIT_TEST_COMMANDS
    without_unit_tests = (
        ["--exclude-resource-type", "unit_test"]
        if runs_unit_tests and not RESOURCE_TYPE_FLAGS & set(command)
        else []
    )
    return [*command, "--select", *selection, *without_unit_tests]


# The dbt commands that run unit tests (and take --exclude-resource-type).
UNIT_TEST_COMMANDS = {"build", "test"}


FAILED = {"error", "fail", "runtime error", "skipped", "partial success"}


def failed_topics(results: Any, registered: Sequence[Table]) -> set[str] | None:
    """The topics of the tables a failed dbt run did not finish: every landing source upstream
    of a node that errored, failed or was skipped (dbt's results, each node's `depends_on`
    followed through the nodes of the run). None when a failure reaches no registered table
    (a hook, a model reading none): then nothing of the run may count as done."""
    nodes = {r.node.unique_id: r.node for r in results if getattr(r, "node", None) is not None}
    by_source = {(t.landing_source, t.name): t.topic for t in registered}
    topics: set[str] = set()
    for result in results:
        if str(getattr(result.status, "value", result.status)) not in FAILED:
            continue
        node = getattr(result, "node", None)
        if node is None:
            return None
        found, seen, todo = set(), set(), [node.unique_id]
        while todo:
            unique_id = todo.pop()
            if unique_id in seen:
                continue
            seen.add(unique_id)
            parts = unique_id.split(".")
            if parts[0] == "source" and (parts[-2], parts[-1]) in by_source:
                found.add(by_source[(parts[-2], parts[-1])])
            elif unique_id in nodes:
                todo += list(nodes[unique_id].depends_on.nodes)
        if not found:
            return None
        topics |= found
    return topics


class RunChoice(NamedTuple):
    command: list[str] | None  # None: nothing landed, do not run dbt
    after_run: Callable[[Any], None]  # called with dbt's result once it has run
    why: str
    new_bytes: int | None  # bytes landed for the tables it builds; None: not known
    # the data tests' scope (tests_since): epoch microseconds, or None: every row
    tests_since: int | None = None


# Below this many bytes in the largest selected topic's landing files, a run's data tests read
# every row: filtering a small table by the batch's keys costs more than reading it (on the
# 5-table benchmark's tables, a scoped test took about twice as long as an unscoped one; on a
# 10M-event table its six tests took 8-10 s instead of 50 s: docs/benchmarks.md).
SCOPED_TESTS_BYTES = 64 * 2**20

# The variable that scopes the data tests of a dbt command to the keys of the events loaded
# since (epoch microseconds; the package's cdc_tested_rows): set by these runners for each run,
# from what the earlier runs' data tests passed on (tests_since); unset, every row is tested.
TESTS_SINCE = "CDC_TESTS_SINCE"


def runs_data_tests(command: Sequence[str]) -> bool:
    """Whether a successful run of `command` has run every data test of what it built: a
    `build` that leaves no resource type out."""
    return bool(command) and command[0] == "build" and not RESOURCE_TYPE_FLAGS & set(command)


def tests_since(
    selected: Sequence[str] | None, tested: Mapping[str, int], runs_tests: bool
) -> int | None:
    """Where this run's data tests may start: the oldest of the moments since which the
    selected topics' events are untested (`tested`: per topic, the start of the last run whose
    data tests all passed on that table; every event loaded before it was tested then). None
    (every row) when a selected topic has none, when the run builds every table (the first run,
    a changed project: a new column fills rows of every key) or when it runs no data test."""
    if not runs_tests or selected is None or not selected:
        return None
    if any(topic not in tested for topic in selected):
        return None
    return min(tested[topic] for topic in selected)


@contextlib.contextmanager
def tests_scope(since: int | None) -> Iterator[None]:
    """While the block runs (a dbt command), TESTS_SINCE set to `since`, or unset for None;
    afterwards as it was."""
    before = os.environ.pop(TESTS_SINCE, None)
    if since is not None:
        os.environ[TESTS_SINCE] = str(since)
    try:
        yield
    finally:
        os.environ.pop(TESTS_SINCE, None)
        if before is not None:
            os.environ[TESTS_SINCE] = before


def next_run(
    project: Path,
    root: str,
    state: Path,
    command: Sequence[str],
    build_all: bool = False,
    scoped_tests_bytes: int = SCOPED_TESTS_BYTES,
) -> RunChoice:
    """This run's dbt command (None: nothing landed, do not run dbt), what to call with dbt's
    result once it has run, why, and the bytes that landed for it. Shared by `main` and
    `cdc_lakehouse.runner.continuous --changed-only`. After a success the listing taken before
    the run is saved. After a failure of a changed-tables run, the listing is saved for the
    tables the run finished, the previous one kept for those it did not (failed_topics): the
    next run builds only those again, where saving nothing would build every table of this run
    again. A failed run of everything (the first, or after a change to the project) saves
    nothing: it runs again in full. Its data tests read the keys with events since
    tests_since when a selected table's topic holds at least `scoped_tests_bytes` of files."""
    saved = json.loads(state.read_text()) if state.exists() else {}
    selection, listing, why, new_bytes = plan(project, root, state, build_all, saved)
    # Before dbt starts: every event this run loads is stamped later (`_cdc_loaded_at`, by
    # bronze, in this process and on this clock).
    started = time.time_ns() // 1000
    read: list[list[Table]] = []  # the registry, read when needed (not when nothing landed)

    def registered() -> list[Table]:
        if not read:
            read.append(tables(project))
        return read[0]

    selected: list[str] | None = None
    if selection:
        by_selector = dict(
            zip(selectors(registered()), (t.topic for t in registered()), strict=True)
        )
        selected = [by_selector[s] for s in selection]
    elif selection is not None:
        selected = []
    tested: dict[str, int] = saved.get("tested_since", {}) if listing is not None else {}
    runs_tests = runs_data_tests(command)

    def passed(topics: Sequence[str]) -> dict[str, int]:
        """The tested moments to save after a run whose data tests passed on `topics`."""
        if not runs_tests:
            return tested
        return {**tested, **dict.fromkeys(topics, started)}

    def after_run(result: Any) -> None:
        if listing is None:
            return
        if result is None or result.success:
            built = [t.topic for t in registered()] if selected is None else selected
            save(state, {**listing, "tested_since": passed(built if result else [])})
            return
        run_results = getattr(getattr(result, "result", None), "results", None)
        if selection is None or run_results is None:
            return
        unfinished = failed_topics(run_results, registered())
        if unfinished is None:
            return
        previous = saved.get("topics", {})
        topics = dict(listing["topics"])
        for topic in unfinished:
            if topic in previous:
                topics[topic] = previous[topic]
            else:
                topics.pop(topic, None)
        finished = [topic for topic in selected or [] if topic not in unfinished]
        save(state, {**listing, "topics": topics, "tested_since": passed(finished)})

    if selection == []:
        after_run(None)
        return RunChoice(None, after_run, why, 0)
    if selection is None:
        return RunChoice(list(command), after_run, why, None)
    landed = max(sum(entry[1] for entry in listing["topics"].get(t, [])) for t in selected or [""])
    since = tests_since(selected, tested, runs_tests) if landed >= scoped_tests_bytes else None
    return RunChoice(with_selection(command, selection), after_run, why, new_bytes, since)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_lakehouse.runner.changed",
        description="dbt build of the tables whose landing topics changed since the last run",
    )
    parser.add_argument("--project", default=".", help="dbt project folder (default: .)")
    parser.add_argument(
        "--landing-root",
        default=os.environ.get("CDC_LANDING_ROOT", "sample/landing"),
        help="landing root dbt reads (default: $CDC_LANDING_ROOT or sample/landing)",
    )
    parser.add_argument(
        "--state",
        type=Path,
        default=Path(os.environ.get("CDC_LAKEHOUSE_DIR", ".lakehouse")) / LISTING_FILE,
        help="listing saved by the last successful run",
    )
    parser.add_argument("--all", action="store_true", help="build everything (save the listing)")
    parser.add_argument(
        "--small-run-bytes",
        type=int,
        default=small_runs.DEFAULT_LIMIT,
        metavar="N",
        help="a run whose tables received at most N bytes of new files runs with Spark's "
        "small-input settings (0: never; cdc_lakehouse.runner.small_runs)",
    )
    parser.add_argument(
        "--scoped-tests-bytes",
        type=int,
        default=SCOPED_TESTS_BYTES,
        metavar="N",
        help="when a selected table's topic holds at least N bytes of files (default 64 MB), the "
        "data tests read the keys with events since their last passing run (0: always)",
    )
    parser.add_argument("dbt_args", nargs=argparse.REMAINDER, help="-- then the dbt command")
    args = parser.parse_args(argv)
    command = [a for a in args.dbt_args if a != "--"] or ["build"]
    project = Path(args.project).resolve()
    state = args.state.resolve()
    choice = next_run(project, args.landing_root, state, command, args.all, args.scoped_tests_bytes)
    command, after_run, why, new_bytes = (
        choice.command,
        choice.after_run,
        choice.why,
        choice.new_bytes,
    )
    print(f"cdc_lakehouse.runner.changed: {why}", flush=True)
    if command is None:
        return 0
    if small_runs.is_small(new_bytes, args.small_run_bytes):
        # the session does not exist yet: the profile gives it the settings (where the
        # environment does not say otherwise)
        small_runs.set_environment()
        print(
            f"cdc_lakehouse.runner.changed: {new_bytes / 1e6:.2f} MB new: Spark's small-input "
            "settings (cdc_lakehouse.runner.small_runs)",
            flush=True,
        )
    if "--vars" not in command:
        command += ["--vars", json.dumps({"cdc_landing_root": args.landing_root})]
    from dbt.cli.main import dbtRunner

    os.chdir(project)
    with tests_scope(choice.tests_since):
        result = dbtRunner().invoke(command)
    after_run(result)
    sys.stdout.flush()
    # The JVM's non-daemon threads would keep a normal interpreter exit waiting.
    os._exit(0 if result.success else 1)


def save(path: Path, saving: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(saving))
    temporary.replace(path)


if __name__ == "__main__":
    raise SystemExit(main())
