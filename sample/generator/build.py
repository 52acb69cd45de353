"""Regenerate the bundled sample from a real PostgreSQL through real Debezium (`make sample`).

    python -m sample.generator.build --out sample --seed 7

Starts a private PostgreSQL (`devstack.pg`), creates the Northwind-shaped tables, loads the
seeded initial rows, then for each phase runs the seeded workload and captures it with the
project's capture tool (one Debezium engine per landing shape, the JDBC-style poller for
suppliers). Writes `<out>/landing/topics/...`, `<out>/expected/<table>.jsonl` (PostgreSQL's
final state, canonical form) and `<out>/README.md` (what is in it); then the Pagila pipeline
(`sample.generator.pagila`: query-based capture, Parquet landing). Takes about a minute.
The source rows depend only on the seed; Debezium metadata (LSNs, txIds, ts_ms) differs per run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from cdc_lakehouse.bronze.layout import Layout, TopicFiles
from devstack.pg import TemporaryPostgres
from sample.generator import pagila
from sample.generator.harness import SourceHarness, capture_groups
from sample.generator.northwind import DDL, MID_STREAM_DDL, TABLES, Table

PHASES = 3
TRANSACTIONS = 250


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("sample"))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--phases", type=int, default=PHASES)
    parser.add_argument("--transactions", type=int, default=TRANSACTIONS, help="per phase")
    args = parser.parse_args(argv)

    started = time.monotonic()
    out: Path = args.out
    landing = out / "landing"
    expected = out / "expected"
    for folder in (landing, expected):
        shutil.rmtree(folder, ignore_errors=True)
    expected.mkdir(parents=True)
    workload_counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="cdc-sample-") as state, TemporaryPostgres() as pg:
        harness = SourceHarness(pg, landing=landing, state_dir=Path(state), seed=args.seed)
        harness.setup()
        # The initial snapshot one capture after the other, in table order: a snapshot read's
        # commit time is when it was read, so customers read before orders keep every order's
        # customer version live at its placement (gold.fct_orders_customer_as_of).
        harness.capture(parallel=False)
        for phase in range(1, args.phases + 1):
            counts = harness.run_phase(phase, args.transactions)
            workload_counts.update(counts)
            seconds = harness.capture()
            print(f"phase {phase}: {sum(counts.values())} transactions, captured in {seconds:.1f}s")
        state_rows = harness.expected_state()
        harness.drop()
    for table in TABLES:
        with (expected / f"{table.name}.jsonl").open("w") as f:
            for row in state_rows[table.name]:
                f.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
    (out / "README.md").write_text(readme(args, landing, state_rows, workload_counts))
    # The second reference pipeline: query-based capture of a Pagila-shaped join, Parquet.
    pagila_counts = pagila.build(out, args.seed)
    pagila.write_readme_section(out, pagila.readme_section(out, args.seed, pagila_counts))
    print(f"sample written to {out} in {time.monotonic() - started:.0f}s")
    return 0


def topic_stats(landing: Path, table: Table) -> tuple[Counter[str], int]:
    """Records by operation and the number of files of one topic."""
    topic_files = TopicFiles(Layout.from_config(table.layout_settings), table.topic)
    files = sorted(
        path
        for folder in topic_files.folders
        for path in (landing / folder).rglob("*")
        if path.is_file() and topic_files.classify(str(path), path.relative_to(landing).as_posix())
    )
    ops: Counter[str] = Counter()
    for path in files:
        data = path.read_bytes()
        for line in (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines():
            value = json.loads(line)
            value = value.get("payload", value)
            ops[value.get("op") or value.get("__op") or "poll"] += 1
    return ops, len(files)


def readme(args: argparse.Namespace, landing: Path, state, workload: Counter[str]) -> str:
    rows = []
    for table in TABLES:
        ops, files = topic_stats(landing, table)
        shape = {
            "envelope": "Debezium envelope"
            + (", JsonConverter schemas on" if table.schemas_enable else ", schemas off"),
            "flattened": "ExtractNewRecordState rows (`__op`, `__deleted`, `__lsn`, ...)",
            "jdbc": "JDBC-style query-based rows (`last_update` epoch ms)",
        }[table.shape]
        by_op = ", ".join(f"{k}: {v}" for k, v in sorted(ops.items()))
        rows.append(
            f"| {table.name} | `{table.topic}` | {shape} | {sum(ops.values())} ({by_op}) "
            f"| {files} | {len(state[table.name])} |"
        )
    activities = ", ".join(f"{k} {v}" for k, v in sorted(workload.items()))
    groups = "\n".join(
        f"- `{g.name}`: {', '.join(g.tables)} ({g.shape}"
        f"{', schemas on' if g.schemas_enable else ''}"
        f"{'' if g.layout == 'confluent' else f', {g.layout} layout, {g.partitions} partitions'})"
        for g in capture_groups()
    )
    return f"""# Sample landing zone: captured from a real PostgreSQL by real Debezium

Regenerate with `make sample` (`python -m sample.generator.build --out sample --seed \
{args.seed}`): a private PostgreSQL 15, the seeded workload of `sample/generator/workload.py`
({args.phases} phases of {args.transactions} transactions after the initial rows), and the
project's capture tool (`python -m cdc_lakehouse.capture`, Debezium 3.6.3 embedded engine,
pgoutput) after each phase. Source rows depend only on the seed; Debezium metadata (LSN, txId,
ts_ms) differs from run to run.

- `landing/topics/<topic>/partition=0/<topic>+0+<start offset>.json`: what a Kafka Connect S3
  sink writes: one record value per line, tombstones dropped, files rotated every 500 records and
  at the end of each capture batch.
- `landing/outbox/customer_id=<c>/order_id=<o>/northwind.public.cdc_events(<p>_<last offset>).json`:
  the outbox topic as the Lenses stream-reactor S3 sink writes it (KCQL `INSERT INTO
  bucket:outbox SELECT * FROM northwind.public.cdc_events PARTITIONBY customer_id,order_id
  STOREAS JSON PROPERTIES('flush.count'=50)`), over 3 Kafka partitions.
- `expected/<table>.jsonl`: PostgreSQL's final state, one row per line sorted by primary key, in
  the canonical form of `sample.generator.northwind.canonical_value` (numeric as a string
  with the column's scale, timestamps to the microsecond, timestamptz in UTC with `Z`, jsonb
  parsed, bytea base64, arrays as lists).

Captures (one engine, slot and publication each):
{groups}
- suppliers: polled on (`last_update`, `supplier_id`) like a JDBC source connector in
  `timestamp+incrementing` mode (query-based: deletes are not visible), and extracted whole after
  each poll into `landing/extracts/northwind_jdbc.suppliers/<as_of>/` (rows and a
  `_cdc_extract.json` manifest): the extracts' diff gives the deletes
  (docs/reference-pipelines.md, "Deletes for query-based sources"). A `supplier_reinsert` with no
  deleted supplier to bring back does nothing.

| table | topic | shape | records (by op) | files | final rows |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Workload transactions: {activities}.

## DDL

```sql
{DDL}
-- mid-stream (phase 2)
{MID_STREAM_DDL}```
"""


if __name__ == "__main__":
    sys.exit(main())
