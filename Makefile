# cdc-lakehouse: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

export DBT_PROFILES_DIR := $(CURDIR)/profiles
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test install install-fast install-dev s3-jars system-deps lint format test-fast docs docs-site sample oracle cluster cluster-stop clean help tables peers peers-install

help:
	@echo "make run     build the lakehouse from the bundled sample landing data (embedded Spark + Iceberg)"
	@echo "make test    install what is missing and run every check (lint, pytest, dbt tests)"
	@echo "make docs    generate and serve the dbt docs site on http://127.0.0.1:8080"
	@echo "make docs-site  build the project's docs site (MkDocs, strict) into site/"
	@echo "make lint    sqlfluff + ruff + generated files in sync with tables/*.yml"
	@echo "make tables  write the dbt files of every table registered in tables/*.yml"
	@echo "make sample  regenerate sample/ from a real PostgreSQL through real Debezium"
	@echo "make oracle  the PostgreSQL oracle tests alone (SEEDS=50 for the slow mode)"
	@echo "make cluster local Spark standalone cluster for the cluster target (make cluster-stop)"
	@echo "make s3-jars Hadoop's s3a jars (jars/s3/) for an s3a:// landing zone or warehouse"
	@echo "make peers   the peer comparison (Hudi, Spark AUTO CDC) on the sample (PUBLISH=1: to docs/)"
	@echo "make class-archive  a JVM class archive for new dbt processes (opt-in: CDC_SPARK_CLASS_ARCHIVE=jars/spark-classes.jsa)"
	@echo "make clean   remove the local lakehouse (.lakehouse/) and dbt target/"

## Environment -------------------------------------------------------------------------------
$(VENV)/.installed-run: requirements.txt constraints.txt pyproject.toml adapter/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt -c constraints.txt
	$(BIN)/pip install --quiet --no-deps --config-settings editable_mode=compat -e ./adapter -e .
	touch $@

# The jars of jvm/pom.xml (pinned), fetched with the Maven client into jars/.
jars/.installed: jvm/pom.xml
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	rm -f jars/*.jar jars/.installed
	mvn -q -B -f jvm/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars
	cd jars && ln -sf "$$(ls iceberg-spark-runtime-*.jar)" iceberg-spark-runtime.jar
	cd jars && ln -sf "$$(ls spark-avro_*.jar)" spark-avro.jar
	cd jars && ln -sf "$$(ls delta-spark_*.jar)" delta-spark.jar
	cd jars && ln -sf "$$(ls delta-storage-*.jar)" delta-storage.jar
	cd jars && ln -sf "$$(ls hudi-spark3.5-bundle_*.jar)" hudi-spark-bundle.jar
	touch $@

# The metastore service's launcher (devstack.metastore): compiled against the Hive jars of
# the pyspark wheel it runs with (needs a JDK's javac).
jars/cdc-metastore.jar: jvm/metastore/io/cdclakehouse/metastore/LoopbackMetastore.java jars/.installed $(VENV)/.installed-run
	@command -v javac >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless; }
	rm -rf jvm/metastore/build
	javac -nowarn -cp "$$($(BIN)/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*" -d jvm/metastore/build $<
	jar cf $@ -C jvm/metastore/build .
	rm -rf jvm/metastore/build

# Trino 483, single node, reading the lakehouse's tables through the shared metastore
# (devstack.trino; needs Java 25: /usr/lib/jvm/temurin-25-jdk-amd64). Its server, Iceberg
# connector and Hadoop file system support from pinned lists; the service entry Trino's plugin
# packaging adds (the published connector jar lacks it) goes in a jar of its own.
TRINO_POMS := jvm/trino/server/pom.xml jvm/trino/iceberg/pom.xml jvm/trino/hdfs/pom.xml
jars/trino/.installed: $(TRINO_POMS)
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	@command -v jar >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless; }
	rm -rf jars/trino
	mvn -q -B -f jvm/trino/server/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/trino/lib
	mvn -q -B -f jvm/trino/iceberg/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/trino/plugin/iceberg
	mvn -q -B -f jvm/trino/hdfs/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/trino/plugin/iceberg/hdfs
	mkdir -p jars/trino/services/META-INF/services
	echo io.trino.plugin.iceberg.IcebergPlugin > jars/trino/services/META-INF/services/io.trino.spi.Plugin
	cd jars/trino/services && jar cf ../plugin/iceberg/cdc-lakehouse-plugin-services.jar META-INF
	rm -rf jars/trino/services
	touch $@

# The real Kafka pieces for the tests (broker, Kafka Connect, Debezium's connector) and this
# project's landing sink connector, built from jvm/connect/src (needs a JDK's javac).
jars/connect/.installed: jvm/connect/pom.xml $(wildcard jvm/connect/src/main/java/io/cdclakehouse/connect/*.java)
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	@command -v javac >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless; }
	rm -rf jars/connect
	mvn -q -B -f jvm/connect/pom.xml package dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/connect
	cp jvm/connect/target/cdc-lakehouse-connect-*.jar jars/connect/
	rm -rf jvm/connect/target
	touch $@

# Hadoop's s3a file system (landing and warehouse on S3 or an S3-compatible store), pinned.
jars/s3/.installed: jvm/s3/pom.xml
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	rm -rf jars/s3
	mvn -q -B -f jvm/s3/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/s3
	cd jars/s3 && ln -sf "$$(ls hadoop-aws-*.jar)" hadoop-aws.jar
	cd jars/s3 && ln -sf "$$(ls aws-java-sdk-bundle-*.jar)" aws-java-sdk-bundle.jar
	touch $@

s3-jars: jars/s3/.installed

# The peer comparison's engines (benchmarks/peers, docs/peers.md), pinned and apart from the
# project's: Hudi's Spark bundle; AUTO CDC target jars for pyspark 4.2 in .venv-peers (SCD type
# 1) and pyspark 4.3 in .venv-peers-spark43 (SCD type 2, same target jar).
jars/peers/.installed: jvm/peers/hudi/pom.xml jvm/peers/spark4/pom.xml
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	rm -rf jars/peers
	mvn -q -B -f jvm/peers/hudi/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/peers/hudi
	mvn -q -B -f jvm/peers/spark4/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/jars/peers/spark4
	touch $@

.venv-peers/.installed: benchmarks/peers/requirements-spark4.txt
	test -x .venv-peers/bin/python || $(PYTHON) -m venv .venv-peers
	.venv-peers/bin/pip install --quiet --upgrade pip
	.venv-peers/bin/pip install --quiet -r $<
	touch $@

.venv-peers-spark43/.installed: benchmarks/peers/requirements-spark43.txt
	test -x .venv-peers-spark43/bin/python || $(PYTHON) -m venv .venv-peers-spark43
	.venv-peers-spark43/bin/pip install --quiet --upgrade pip
	.venv-peers-spark43/bin/pip install --quiet -r $<
	touch $@

peers-install: jars/peers/.installed .venv-peers/.installed .venv-peers-spark43/.installed

$(VENV)/.installed-dev: $(VENV)/.installed-run requirements-dev.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt -c constraints.txt
	touch $@

# The engine's dbt package (dbt_package/), which the example project names in packages.yml:
# `dbt deps` links it into dbt_packages/ (no network for a local package).
dbt_packages/.installed: packages.yml $(VENV)/.installed-run
	$(BIN)/dbt deps --quiet
	touch $@

# A class-data sharing archive new dbt processes' JVMs can map their classes from (opt-in:
# CDC_SPARK_CLASS_ARCHIVE=jars/spark-classes.jsa; cdc_lakehouse/runner/class_archive.py):
# written by a short build of one sample table (2.5-3 minutes on 2 cores), for this machine's
# JDK. Not part of install: CI stopped the two suites that ran with it on at its 90-minute
# limit, and landed the one before without it (docs/testing.md, "The budget").
.PHONY: class-archive
class-archive: jars/spark-classes.jsa
jars/spark-classes.jsa: jars/.installed $(VENV)/.installed-run dbt_packages/.installed | system-java
	$(BIN)/python -m cdc_lakehouse.runner.class_archive $@

install: $(VENV)/.installed-run dbt_packages/.installed jars/.installed system-java
# What lint and the unit and dbt test tiers need (make test-fast): the project's packages, its
# jars and the test and lint tools; none of the services, Trino, Kafka, the peers or Chromium.
install-fast: $(VENV)/.installed-dev dbt_packages/.installed jars/.installed system-java
install-dev: $(VENV)/.installed-dev dbt_packages/.installed jars/.installed jars/cdc-metastore.jar jars/connect/.installed jars/trino/.installed jars/s3/.installed peers-install system-deps

# Debian packages: a JDK for Spark; PostgreSQL for the real-source tests; Chromium and its
# WebDriver for the docs-site test (tests/python/test_docs_site.py).
.PHONY: system-java
system-java:
	@command -v java >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

system-deps: system-java
	@test -x /usr/lib/postgresql/15/bin/initdb || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15; }
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

## Main job ----------------------------------------------------------------------------------
run: install
	dbt build
	@echo
	@echo "dbt commands work from this folder after:  source .venv/bin/activate && export DBT_PROFILES_DIR=profiles"
	@echo "Query the lakehouse:  dbt show --inline \"select * from silver.customers\" --limit 5"
	@echo "Docs with lineage:    make docs   (then open http://127.0.0.1:8080)"

## Table registry ---------------------------------------------------------------------------
# Every registered table's dbt files are generated from its entry in tables/<source>.yml
# (docs/tables.md, "Add a table"); `make lint` fails when one is stale or edited by hand.
tables: $(VENV)/.installed-run
	$(BIN)/python -m cdc_lakehouse.tables generate

## Checks ------------------------------------------------------------------------------------
# The pre-commit hooks (.pre-commit-config.yaml): ruff check, ruff format --check, sqlfluff lint.
lint: $(VENV)/.installed-dev dbt_packages/.installed
	pre-commit run --all-files --show-diff-on-failure

format: install-dev
	ruff format .
	sqlfluff fix models dbt_package/tests

# The tests run on TEST_PROCESSES pytest-xdist processes, a whole group per process (a test file,
# or files that share a scenario: tests/python/conftest.py), so module and shared fixtures,
# lakehouses and PostgreSQL instances, are built once; the longest groups start first
# (conftest's LONG_GROUPS). TEST_PROCESSES=0 runs them in this process. Every test's seconds
# go to artifacts/junit.xml (where LONG_GROUPS' figures come from); `make test` also prints the
# machine's speed at its start and end (CDC_MACHINE_GAUGE, benchmarks/gauge.py).
TEST_PROCESSES ?= 2
PYTEST := pytest -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder --junitxml=artifacts/junit.xml
test: install-dev lint
	CDC_MACHINE_GAUGE=1 $(PYTEST)

# A developer's loop: lint, then the `unit` and `dbt` tiers (no JVM; Spark sessions and small
# dbt lakehouses: the decoder, layouts, registry, snapshot-diff deletes, Parquet and Avro
# landing, every dbt unit test, the Debezium samples, freshness), with only what those need
# installed. CI runs `make test`, which holds all of these and the `system` tier.
test-fast: install-fast lint
	$(PYTEST) -m "unit or dbt"

## Other -------------------------------------------------------------------------------------
# The peers on the sample, case by case against PostgreSQL's final state (docs/peers.md; about
# 15 minutes); PUBLISH=1 rewrites docs/peers.md's results and docs/peers/.
peers: install-dev peers-install
	python -m benchmarks.peers $(if $(PUBLISH),--publish)

docs: install
	dbt docs generate
	dbt docs serve --host 127.0.0.1 --port 8080 --no-browser

# The project's docs site (mkdocs.yml: pages from docs/, strict, so a broken link or anchor fails);
# open site/index.html, or `mkdocs serve` to edit with live reload.
docs-site: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir site

# Regenerate sample/ from a private PostgreSQL through real Debezium (about a minute).
sample: install-dev
	python -m sample.generator.build --out sample --seed 7

# The PostgreSQL oracle alone (part of `make test`); `make oracle SEEDS=50` is the slow mode.
oracle: install-dev
	CDC_ORACLE_SEEDS=$(or $(SEEDS),1) $(PYTEST) tests/python/test_oracle.py tests/python/test_oracle_ddl.py \
		tests/python/test_oracle_faults.py tests/python/test_type_map_oracle.py \
		tests/python/test_public_databases.py

# A local Spark standalone cluster (master + 2 workers, 127.0.0.1 only) for `--target cluster`;
# docs/deployment.md. The exports it prints go into your shell with
# eval "$$(python -m devstack.cluster env)".
cluster: install
	python -m devstack.cluster start
	@echo 'Then: eval "$$(python -m devstack.cluster env)" && dbt build --target cluster'

cluster-stop:
	test ! -x $(BIN)/python || $(BIN)/python -m devstack.cluster stop

clean: cluster-stop
	rm -rf .lakehouse target logs
