"""Local infrastructure for development and the tests: not part of the engine, not shipped.

pg           a throw-away PostgreSQL (logical replication on) for the oracle and the capture tool
objectstore  an S3-compatible store (SeaweedFS) on 127.0.0.1 for s3a:// landing and warehouse
metastore    a Hive metastore service over PostgreSQL that several processes share
trino        a single-node Trino reading the lakehouse through that metastore
cluster      a Spark standalone cluster and a Thrift server (targets `cluster`, `thrift`)
services     what they share: ports, waiting for a service, stopping it
"""
