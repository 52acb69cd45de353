"""The peers, side by side: what users would run instead of this project, on the same landing
files, checked against PostgreSQL's final state case by case (docs/peers.md).

    python -m benchmarks.peers            # every delivery, every peer; results to artifacts/peers/
    python -m benchmarks.peers --publish  # and to docs/peers.md, docs/peers/

- `plan`: the sample tables, the deliveries (how the landing files arrive) and the cases.
- `ours`: this project's dbt pipeline, one delivery per process.
- `events`: the decoded change events of the sample (this project's decoder, as its bronze
  tables hold them), exported as Parquet in the form a Debezium Avro converter hands a consumer
  (the TOAST placeholder in place).
- `hudi`: Apache Hudi's Spark writer with `PostgresDebeziumAvroPayload`, configured as
  HoodieStreamer's `PostgresDebeziumSource` sets it up.
- `auto_cdc`: Spark Declarative Pipelines' AUTO CDC (pyspark 4.2, its own virtual environment).
- `compare`: each engine's final tables against `sample/expected/`, per case; the report.
"""
