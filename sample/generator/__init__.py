"""The generator of the bundled sample (sample/landing, sample/expected), beside what it writes:
Northwind through real PostgreSQL and Debezium (`make sample`), Pagila's query-mode polling, and
the same capture through real Kafka Connect (kafka.py). Not part of the engine, not shipped."""
