"""`python -m benchmarks.peers`: run every engine on every delivery of the sample, compare each
with PostgreSQL's final state case by case, and this project's histories and AUTO CDC's SCD type
2 with the events' history (benchmarks.peers.history); write the report (artifacts/peers/:
results.json, peers.md, peers.png; with --publish also docs/peers.md's generated section and
docs/peers/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.peers import compare, history
from benchmarks.peers.ours import lakehouse_of
from benchmarks.peers.plan import DELIVERIES, REPO, write_plan

PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
# AUTO CDC's SCD type 2 needs pyspark 4.3 (benchmarks/peers/requirements-spark43.txt)
SCD2_PYTHON = REPO / ".venv-peers-spark43" / "bin" / "python"
DOC = REPO / "docs" / "peers.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"


def _json_line(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run an engine's process; its last stdout line is its JSON report."""
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{' '.join(command[:4])} failed (exit {done.returncode})")
    report = json.loads(lines[-1])
    report["wall_seconds"] = round(time.monotonic() - started, 2)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "artifacts" / "peers")
    parser.add_argument("--delivery", action="append", choices=DELIVERIES)
    parser.add_argument("--engines", default="ours,hudi,auto_cdc")
    parser.add_argument(
        "--ours-export",
        type=Path,
        help="compare this project's tables from this export (var cdc_export_dir of a build of "
        "the sample's one --delivery) instead of running it: no seconds for it",
    )
    parser.add_argument(
        "--publish", action="store_true", help="write docs/peers.md and docs/peers/"
    )
    parser.add_argument(
        "--from-results", action="store_true", help="report (and publish) <out>/results.json again"
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if args.from_results:
        document = json.loads((out / "results.json").read_text())
        scd2 = history.markdown(document.get("history", {}), document["runs"])
        text = compare.markdown(document["results"], document["runs"], scd2)
        compare.chart(document["results"], out / "peers.png")
        if args.publish:
            publish(out, document, text)
        print(text)
        return 0
    deliveries = args.delivery or list(DELIVERIES)
    engines = args.engines.split(",")
    started = time.monotonic()
    plan = json.loads(write_plan(out).read_text())
    runs: dict[str, Any] = {
        "batches": {d: len(plan["deliveries"][d]) for d in deliveries},
    }
    python = sys.executable
    ours: dict[str, Any] = {"seconds": {}, "runs": {}, "from_decoded": {}}
    if args.ours_export:
        if len(deliveries) != 1:
            raise SystemExit("--ours-export is the build of one --delivery")
        export = lakehouse_of(out, deliveries[0]) / "export"
        shutil.rmtree(export, ignore_errors=True)
        shutil.copytree(args.ours_export, export)
        ours["export"] = str(args.ours_export)
    for delivery in deliveries if not args.ours_export else ():
        report = _json_line([python, "-m", "benchmarks.peers.ours", "--out", str(out),
                             "--delivery", delivery])  # fmt: skip
        ours["seconds"][delivery] = report["seconds"]
        ours["runs"][delivery] = report["runs"]
        # what the peers are timed on: decoded events to silver and history, and the export
        ours["from_decoded"][delivery] = round(
            sum(report["after_bronze"]) + report["export_seconds"], 2
        )
        print(f"ours {delivery}: {report['seconds']} s", flush=True)
    runs["ours"] = ours
    events = _json_line([python, "-m", "benchmarks.peers.events", "--out", str(out)])
    runs["cases"] = events["cases"]
    selected = [a for d in deliveries for a in ("--delivery", d)]
    if "hudi" in engines:
        report = _json_line([python, "-m", "benchmarks.peers.hudi", "--out", str(out), *selected])
        runs["hudi"] = _engine_summary(report, deliveries)
        print(f"hudi: {runs['hudi']['seconds']}", flush=True)
    if "auto_cdc" in engines:
        if not PEERS_PYTHON.exists():
            raise SystemExit(f"{PEERS_PYTHON} missing: run `make peers-install`")
        report = _json_line([str(PEERS_PYTHON), "-m", "benchmarks.peers.auto_cdc", "--out",
                             str(out), *selected])  # fmt: skip
        runs["auto_cdc"] = _engine_summary(report, deliveries)
        print(f"auto_cdc: {runs['auto_cdc']}", flush=True)
        if not SCD2_PYTHON.exists():
            raise SystemExit(f"{SCD2_PYTHON} missing: run `make peers-install`")
        report = _json_line([str(SCD2_PYTHON), "-m", "benchmarks.peers.auto_cdc", "--out",
                             str(out), "--scd", "2", *selected])  # fmt: skip
        runs["auto_cdc_scd2"] = _engine_summary(report, deliveries)
        print(f"auto_cdc_scd2: {runs['auto_cdc_scd2']}", flush=True)
    results = compare.compare(out, [e for e in ("ours", *engines) if e in runs])
    histories = history.compare(out, ["ours", *(["auto_cdc"] if "auto_cdc_scd2" in runs else [])])
    document = {
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m benchmarks.peers " + " ".join(argv or sys.argv[1:]),
        "minutes": round((time.monotonic() - started) / 60, 1),
        "runs": runs,
        "results": results,
        "history": histories,
    }
    (out / "results.json").write_text(json.dumps(document, indent=1))
    text = compare.markdown(results, runs, history.markdown(histories, runs))
    (out / "peers.md").write_text(text)
    compare.chart(results, out / "peers.png")
    print(text)
    if args.publish:
        publish(out, document, text)
    os._exit(0)


def _engine_summary(report: dict[str, Any], deliveries: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {"seconds": {}, "errors": {}, "versions": report.get("versions")}
    summary["session_seconds"] = report.get("session_seconds")
    for delivery in deliveries:
        entry = report.get(delivery, {})
        summary["seconds"][delivery] = entry.get("seconds")
        summary["errors"][delivery] = sorted(
            {e for t in entry.get("tables", {}).values() for e in t.get("errors", [])}
            | set(entry.get("errors", []))
        )
    return summary


def publish(out: Path, document: dict[str, Any], text: str) -> None:
    folder = REPO / "docs" / "peers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(document, indent=1) + "\n")
    shutil.copyfile(out / "peers.png", folder / "peers.png")
    header = (
        f"Run {document['run_at']} with `{document['command'].strip()}` "
        f"({document['minutes']} min).\n\n"
    )
    page = DOC.read_text()
    generated = f"{START}\n{header}{text}{END}"
    DOC.write_text(re.sub(re.escape(START) + ".*" + re.escape(END), lambda _: generated, page,
                          flags=re.S))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
