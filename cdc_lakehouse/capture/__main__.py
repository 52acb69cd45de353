"""`python -m cdc_lakehouse.capture run|check|drop`: the capture tool's command line.

    run    start the engine; continuous until Ctrl-C / SIGTERM, or with --until-marker until
           every change committed before the run started has landed
    check  only the checks done before every run (server, wal_level, tables, permissions)
    drop   drop the capture's replication slot and publication, forget its offsets

Exit codes: 0 done, 1 the capture failed or timed out, 2 bad settings or source not ready.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

from cdc_lakehouse.bronze.spec import CONNECTOR_MODES
from cdc_lakehouse.capture.config import (
    DEFAULT_PASSWORD_ENV,
    SHAPES,
    SNAPSHOT_MODES,
    CaptureConfig,
    ConfigError,
    load_config_file,
)
from cdc_lakehouse.capture.preflight import PreflightError
from cdc_lakehouse.capture.upload import UploadError

PROGRESS_EVERY = 2.0


class CaptureFailed(RuntimeError):
    """The engine failed, or a bounded run did not finish in time."""


def _parser() -> argparse.ArgumentParser:
    settings = argparse.ArgumentParser(add_help=False)
    group = settings.add_argument_group("settings (override the config file)")
    group.add_argument("--config", help="YAML or JSON file with the settings below")
    group.add_argument("--name", help="capture name: names the slot and publication")
    group.add_argument("--host")
    group.add_argument("--port", type=int)
    group.add_argument("--database")
    group.add_argument("--user")
    group.add_argument(
        "--password-env", help=f"environment variable holding the password ({DEFAULT_PASSWORD_ENV})"
    )
    group.add_argument(
        "--tables", action="append", help="schema.table[,schema.table...] (repeatable)"
    )
    group.add_argument("--out", help="landing root (files go to <out>/topics/...)")
    group.add_argument("--state-dir", help="offsets file of this capture")
    group.add_argument("--shape", choices=SHAPES)
    group.add_argument("--schemas-enable", action=argparse.BooleanOptionalAction, default=None)
    for mode, choices in CONNECTOR_MODES.items():
        group.add_argument("--" + mode.replace("_", "-"), choices=choices)
    group.add_argument("--snapshot-mode", choices=SNAPSHOT_MODES)
    group.add_argument("--flush-size", type=int, help="records per landing file at most (500)")
    group.add_argument(
        "--partitions", type=int, help="Kafka partitions per topic: keys spread as Kafka's (1)"
    )
    group.add_argument("--topic-prefix", help="topic name prefix (northwind)")

    parser = argparse.ArgumentParser(
        prog="python -m cdc_lakehouse.capture",
        description="Capture PostgreSQL changes with Debezium into a Kafka-Connect-style "
        "landing zone.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", parents=[settings], help="capture changes")
    run.add_argument(
        "--until-marker",
        action="store_true",
        help="stop once every change committed before the start has landed",
    )
    run.add_argument(
        "--create-marker",
        action="store_true",
        help="create the marker table if missing and capture it (implied by --until-marker)",
    )
    run.add_argument("--timeout", type=float, help="give up after this many seconds (exit 1)")
    run.add_argument("--verbose", action="store_true", help="Debezium's INFO log on stderr")
    commands.add_parser("check", parents=[settings], help="check the source, start nothing")
    drop = commands.add_parser("drop", parents=[settings], help="drop slot and publication")
    drop.add_argument("--timeout", type=float, default=30.0, help="wait for the slot (30 s)")
    return parser


def config_from_args(args: argparse.Namespace) -> CaptureConfig:
    settings: dict[str, Any] = load_config_file(args.config) if args.config else {}
    flags = {
        key: getattr(args, key)
        for key in (
            "name", "host", "port", "database", "user", "password_env", "out", "state_dir",
            "shape", "schemas_enable", *CONNECTOR_MODES, "snapshot_mode", "flush_size",
            "partitions", "topic_prefix",
        )
    }  # fmt: skip
    if args.tables:
        flags["tables"] = ",".join(args.tables)
    settings.update({k: v for k, v in flags.items() if v is not None})
    return CaptureConfig.from_mapping(settings)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- run --------------------------------------------------------------------------------------
def run_capture(config: CaptureConfig, args: argparse.Namespace) -> None:
    from cdc_lakehouse.capture import preflight
    from cdc_lakehouse.capture.engine import (
        CaptureEngine,
        LandingHandler,
        mark_snapshot_done,
        prepare_state,
    )
    from cdc_lakehouse.capture.sink import LandingSink

    started = time.monotonic()
    deadline = started + args.timeout if args.timeout else None
    marker = args.until_marker or args.create_marker
    source = preflight.check_source(config, marker=marker)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    snapshot_mode, notes = prepare_state(config, slot_exists=source.slot_exists)
    config.out.mkdir(parents=True, exist_ok=True)
    uploader = None
    if config.upload_to:
        from cdc_lakehouse.capture.upload import Uploader

        uploader = Uploader(config.out, config.upload_to, endpoint=config.s3_endpoint)
    sink = LandingSink(
        config.out,
        config.flush_size,
        config.partitions,
        config.layout,
        after_write=uploader.upload if uploader else None,
    )
    for topic in config.topics:
        sink.recover(topic)
    if sink.temp_files_removed:
        notes.append(f"removed {sink.temp_files_removed} unfinished temporary file(s)")
    if uploader is not None:
        # Files a killed run wrote but did not upload (the local folder is the staging).
        notes.append(f"uploaded {uploader.reconcile()} file(s) the store lacked")
    for note in notes:
        _say(f"capture {config.name}: {note}")

    snapshot_done = config.snapshot_done_file.exists()
    handler = LandingHandler(
        sink,
        config.marker_topic,
        on_streaming=None if snapshot_done else lambda: mark_snapshot_done(config),
    )
    engine = CaptureEngine(
        config,
        handler,
        marker=marker,
        snapshot_mode=snapshot_mode,
        via_partition_root=bool(source.partitioned),
    )
    stop = threading.Event()
    signals: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        signals.append(signal.Signals(signum).name)
        stop.set()

    engine.start(verbose=args.verbose, one_shot=args.until_marker)
    signal.signal(signal.SIGINT, on_signal)  # after the JVM start: JPype may set its own
    signal.signal(signal.SIGTERM, on_signal)
    mode = "until its marker arrives" if args.until_marker else "until Ctrl-C"
    _say(f"capture {config.name}: engine started, slot {config.slot_name}, running {mode}")

    marker_id: list[int] = []
    marker_error: list[str] = []
    if args.until_marker:
        threading.Thread(
            target=_place_marker, args=(config, stop, marker_id, marker_error), daemon=True
        ).start()

    outcome = None
    reported = (0, started)
    try:
        while outcome is None:
            stop.wait(0.2)
            now = time.monotonic()
            if now - reported[1] >= PROGRESS_EVERY:
                reported = _progress(config, sink, reported, now)
            if signals:
                outcome = "" if not args.until_marker else f"interrupted ({signals[0]})"
            elif marker_id and marker_id[0] in handler.markers_seen:
                outcome = ""
            elif engine.error or marker_error:
                outcome = engine.error or marker_error[0]
            elif engine.done.is_set():
                outcome = "the engine stopped unexpectedly (rerun with --verbose for its log)"
            elif deadline is not None and now >= deadline:
                outcome = f"timed out after {args.timeout:g}s" + (
                    " before the marker arrived" if args.until_marker else ""
                )
    finally:
        stop.set()
        engine.close()
    _say(_summary(config, sink, handler, time.monotonic() - started))
    if outcome:
        raise CaptureFailed(
            f"capture {config.name}: {outcome}; what landed is durable and a rerun resumes "
            "from the saved offsets"
        )


def _place_marker(
    config: CaptureConfig, stop: threading.Event, marker_id: list[int], errors: list[str]
) -> None:
    """Once the engine streams the marker table, insert this run's marker row: its insert event
    arrives after every change committed before it (WAL order), snapshot included."""
    from cdc_lakehouse.capture import preflight

    try:
        if preflight.wait_until_streaming(config, stop):
            marker_id.append(preflight.insert_marker(config))
    except Exception as exc:  # reported in one line
        errors.append(f"placing the marker failed: {' '.join(str(exc).split())}")


def _progress(
    config: CaptureConfig, sink: Any, last: tuple[int, float], now: float
) -> tuple[int, float]:
    total = sum(sink.events.values())
    if total != last[0]:
        rate = (total - last[0]) / (now - last[1])
        _say(
            f"capture {config.name}: {total:,} events, {rate:,.0f} events/s, "
            f"{sink.files_written} files"
        )
    return total, now


def _summary(config: CaptureConfig, sink: Any, handler: Any, seconds: float) -> str:
    total = sum(sink.events.values())
    topics = ", ".join(f"{t}={n}" for t, n in sorted(sink.events.items())) or "no topic"
    rate = ""
    if handler.first_event_at is not None and handler.last_event_at - handler.first_event_at > 1:
        span = handler.last_event_at - handler.first_event_at
        rate = f", {total / span:,.0f} events/s from first to last batch"
    return (
        f"capture {config.name}: done in {seconds:.1f}s: {total} events in "
        f"{sink.files_written} files ({topics}){rate}"
    )


# -- entry point ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = config_from_args(args)
        if args.command == "run":
            run_capture(config, args)
        elif args.command == "check":
            from cdc_lakehouse.capture.preflight import check_source

            check_source(config, marker=False, slot_wait=0)
            _say(f"capture {config.name}: source ready ({len(config.tables)} tables)")
        else:
            from cdc_lakehouse.capture.preflight import drop_capture

            dropped = drop_capture(config, timeout=args.timeout)
            _say(f"capture {config.name}: dropped " + (", ".join(dropped) or "nothing"))
    except (ConfigError, PreflightError) as exc:
        _say(f"error: {exc}")
        return 2
    except CaptureFailed as exc:
        _say(f"error: {exc}")
        return 1
    except UploadError as exc:
        _say(f"error: {exc}; the files are in the local landing folder and a rerun uploads them")
        return 1
    return 0


def _exit(code: int) -> None:
    """Exit now: a started JVM keeps non-daemon threads that would block a normal exit."""
    import jpype

    sys.stdout.flush()
    sys.stderr.flush()
    if jpype.isJVMStarted():
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    try:
        exit_code = main()
    except KeyboardInterrupt:
        exit_code = 130
    except Exception:  # a bug: show it, but still exit past the JVM
        traceback.print_exc()
        exit_code = 1
    _exit(exit_code)
