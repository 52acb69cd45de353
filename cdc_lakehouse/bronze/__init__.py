"""The bronze runtime: what a generated bronze model runs inside dbt's Spark session.

flatten    the Python model's body: list the new landing files, decode them, append (flatten_model)
decode     Debezium envelopes, flattened rows and JDBC rows into typed columns, rejects with reasons
landing    reading landing files (JSON lines, gzip, Avro, Parquet) with their line numbers
layout     the sink layouts' file names (Confluent, Aiven, Lenses): topic, partition, offsets
spec       a table's settings (`cdc_table`, `cdc_landing`) as the decoder needs them
extracts   extract-diff deletes: keys missing from a full extract of a table
"""
